//! Property-based fuzzing of the two ways a figure enters without a file's parser around it
//! (issue 44, item 7): `--set PATH=VALUE` with arbitrary paths and values, and `sweep merge` of
//! mutated shard summaries. CI runs a few cases; `PROPTEST_CASES=N` runs N of each (the counts of
//! the long runs are in the commit that added this file).

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common;

use proptest::prelude::*;
use serde_json::Value;
use std::sync::OnceLock;
use tessera::engine::{self, MappingChoice};
use tessera::model::system::{load_system, System};
use tessera::model::workload::{load_workload, Workload};
use tessera::sweep::merge::{merge, verify, MergeOptions};
use tessera::sweep::plan::{self, Plan};
use tessera::sweep::report::{PointRange, Summary};
use tessera::sweep::run::{self, Backend, Options, Quiet};
use tessera::sweep::set::Overrides;

/// `PROPTEST_CASES` when set, else `ci` (proptest's own reading of the variable is overridden by
/// an explicit count).
fn cases(ci: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ci)
}

// ---------------------------------------------------------------- --set

fn base() -> &'static (System, Workload, Vec<String>) {
    static B: OnceLock<(System, Workload, Vec<String>)> = OnceLock::new();
    B.get_or_init(|| {
        let s = load_system("architectures/selene-a100.ron", &common::CrateFs)
            .value
            .expect("selene loads");
        let w = load_workload("workloads/megatron-22b.ron", &common::CrateFs)
            .value
            .expect("megatron-22b loads");
        let mut paths: Vec<String> = tessera::sweep::paths::listed(&s)
            .into_iter()
            .map(|l| l.path)
            .collect();
        for p in [
            "mapping.dp",
            "mapping.tp",
            "mapping.pp",
            "mapping.micro_batch",
            "mapping.interleave",
            "mapping.zero",
            "workload.global_batch",
            "workload.seq_len",
            "devices",
            "nodes",
            "device.no_such_thing",
        ] {
            paths.push(p.into());
        }
        (s, w, paths)
    })
}

/// Values as a user might type them: numbers of every size and sign with and without units,
/// special words, and arbitrary text.
fn value() -> impl Strategy<Value = String> {
    let unit = prop::sample::select(vec![
        "", " W", " kW", " TB/s", " GB/s", " B/s", " PFLOP/s", " TFLOP/s", " GB", " GiB", " ns",
        " us", " pJ/bit", " pJ", " %", " MW", " s", " bogus",
    ]);
    let number = prop_oneof![
        any::<f64>().prop_map(|x| format!("{x:e}")),
        (-3i64..70).prop_map(|x| x.to_string()),
        prop::sample::select(vec![
            "0",
            "-0",
            "-1",
            "1e-308",
            "1e308",
            "1e-320",
            "NaN",
            "inf",
            "-inf",
            "0.5",
            "1.5",
            "1",
            "18446744073709551616",
            "4294967296",
        ])
        .prop_map(str::to_string),
    ];
    prop_oneof![
        4 => (number, unit).prop_map(|(n, u)| format!("{n}{u}")),
        1 => "\\PC{0,16}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(64)))]

    /// Whatever `--set` gives, the run either refuses it (every diagnostic names its `--set`) or
    /// gives a result that is finite where feasible, or infeasible with a reason code.
    #[test]
    fn set_values_are_checked_or_give_finite_results(
        picks in prop::collection::vec((any::<prop::sample::Index>(), value()), 1..4)
    ) {
        let (s0, w0, paths) = base();
        let args: Vec<String> = picks
            .iter()
            .map(|(i, v)| format!("{}={v}", paths[i.index(paths.len())]))
            .collect();
        let (mut s, mut w) = (s0.clone(), w0.clone());
        let mut choice = MappingChoice::Given(w.mapping.clone().expect("published mapping"));
        let mut devices = Some(8);
        let diags = Overrides::parse(&args).apply(&mut s, &mut w, &mut choice, &mut devices);
        if !diags.is_empty() {
            for d in &diags {
                prop_assert!(
                    args.iter().any(|a| d.file == format!("--set {a}")),
                    "{:?} names no argument of {args:?}", d
                );
            }
            return Ok(());
        }
        let e = engine::estimate(&s, &w, &choice, devices);
        if e.feasible {
            let figs = [e.step_time_s, e.throughput_per_s, e.energy_per_step_j, e.average_power_w, e.mfu];
            prop_assert!(e.step_time_s.is_some() && e.throughput_per_s.is_some(), "{args:?}: {e:?}");
            prop_assert!(figs.iter().flatten().all(|x| x.is_finite()), "{args:?}: {e:?}");
            prop_assert!(e.energy_per_step_j.is_some(), "{args:?}: feasible without energy");
        } else {
            prop_assert!(e.reason_code.is_some(), "{args:?}: infeasible without a code: {e:?}");
        }
    }
}

// ---------------------------------------------------------------- sweep merge

const GRID: &str = "architectures/sweeps/gb200-cluster-llama405b.ron";
const SHARDS: u64 = 4;

/// The sweep, its single-run summary and its shards' summaries (through JSON, as files are).
fn sweep() -> &'static (Plan, Summary, Vec<Summary>) {
    static S: OnceLock<(Plan, Summary, Vec<Summary>)> = OnceLock::new();
    S.get_or_init(|| {
        let fs = common::CrateFs;
        let l = plan::read_file(GRID, &fs);
        let inputs = l.value.expect("the sweep file reads");
        let plan = plan::build(&inputs, &fs, l.files, l.diagnostics)
            .value
            .expect("the sweep builds");
        let opts = |shard| Options {
            backend: Backend::Cpu,
            shard,
            ..Options::new(&plan)
        };
        let whole = run::run(&plan, &opts(None), None, &Quiet).unwrap();
        let parts = (0..SHARDS)
            .map(|i| {
                let s = run::run(&plan, &opts(Some((i, SHARDS))), None, &Quiet).unwrap();
                serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap()
            })
            .collect();
        (plan, whole, parts)
    })
}

fn named(parts: &[Summary]) -> Vec<(String, Summary)> {
    parts
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("s{i}.json"), s.clone()))
        .collect()
}

/// Every leaf of a JSON value, as a pointer.
fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, x)| leaves(x, format!("{at}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, x)| leaves(x, format!("{at}/{i}"), out)),
        _ => out.push(at),
    }
}

/// A change to one leaf of a summary's JSON.
#[derive(Clone, Debug)]
enum Edit {
    Times(f64),
    Plus(f64),
    Set(f64),
    Text(String),
    Remove,
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        prop::sample::select(vec![100.0, 0.5, -1.0, 1.000001, 0.0]).prop_map(Edit::Times),
        prop::sample::select(vec![1.0, -1.0, 4096.0, 1e-9]).prop_map(Edit::Plus),
        prop::sample::select(vec![0.0, 1.0, 1e308, -5.0, 2.5]).prop_map(Edit::Set),
        "\\PC{0,8}".prop_map(Edit::Text),
        Just(Edit::Remove),
    ]
}

fn apply(v: &mut Value, ptr: &str, e: &Edit) {
    if let Edit::Remove = e {
        let (parent, key) = ptr.rsplit_once('/').unwrap();
        match v.pointer_mut(parent) {
            Some(Value::Object(m)) => {
                m.remove(key);
            }
            Some(Value::Array(a)) => {
                a.remove(key.parse::<usize>().unwrap());
            }
            _ => {}
        }
        return;
    }
    let Some(x) = v.pointer_mut(ptr) else { return };
    let num = x.as_f64();
    *x = match (e, num) {
        (Edit::Times(k), Some(n)) => serde_json::json!(n * k),
        (Edit::Plus(k), Some(n)) => serde_json::json!(n + k),
        (Edit::Set(k), _) => serde_json::json!(k),
        (Edit::Text(t), _) => Value::String(t.clone()),
        (_, None) => Value::String(format!("{x}!")),
        _ => return,
    };
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(48)))]

    /// A summary changed anywhere after it was written: merge takes it only when the change
    /// leaves the same summary (a key whose default it held removed); else the file does not
    /// read, or merge refuses it. Never a panic.
    #[test]
    fn edited_shard_summaries_are_refused(
        which in 0..SHARDS as usize,
        leaf in any::<prop::sample::Index>(),
        ed in edit(),
    ) {
        let (_, whole, parts) = sweep();
        let mut v = serde_json::to_value(&parts[which]).unwrap();
        let mut ptrs = Vec::new();
        leaves(&v, String::new(), &mut ptrs);
        let ptr = ptrs[leaf.index(ptrs.len())].clone();
        apply(&mut v, &ptr, &ed);
        let Ok(edited) = serde_json::from_value::<Summary>(v) else {
            return Ok(()); // `sweep merge` reports it as not a sweep summary
        };
        let mut set = parts.clone();
        set[which] = edited.clone();
        let r = merge(named(&set), MergeOptions::default());
        if edited == parts[which] {
            let (m, _) = r.map_err(|e| TestCaseError::fail(format!("{ptr} {ed:?}: {e}")))?;
            prop_assert_eq!(&m.top, &whole.top);
        } else {
            prop_assert!(r.is_err(), "{} {:?} was accepted", ptr, ed);
        }
    }

    /// Any choice of shards, in any order, some given twice: the merge is the single run when
    /// they are each shard once; with a gap it is refused, or under `allow_partial` marked
    /// incomplete with exactly the missing ranges; a shard given twice is an overlap.
    #[test]
    fn shard_sets_merge_only_when_whole(
        pick in prop::collection::vec(0..SHARDS as usize, 1..7),
        partial in any::<bool>(),
    ) {
        let (_, whole, parts) = sweep();
        let set: Vec<Summary> = pick.iter().map(|&i| parts[i].clone()).collect();
        let mut distinct = pick.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let r = merge(named(&set), MergeOptions { top: None, allow_partial: partial });
        if distinct.len() < pick.len() {
            prop_assert!(r.as_ref().is_err_and(|e| e.contains("overlap")), "{pick:?}: {r:?}");
            return Ok(());
        }
        let missing: Vec<PointRange> = (0..SHARDS as usize)
            .filter(|i| !distinct.contains(i))
            .map(|i| PointRange { start: parts[i].shards[0].start, end: parts[i].shards[0].end })
            .filter(|r| r.start < r.end)
            .fold(Vec::new(), |mut acc: Vec<PointRange>, r| {
                match acc.last_mut() {
                    Some(l) if l.end == r.start => l.end = r.end,
                    _ => acc.push(r),
                }
                acc
            });
        match r {
            Ok((m, _)) => {
                prop_assert!(missing.is_empty() || partial, "{pick:?}: a gap was joined");
                prop_assert_eq!(m.complete, missing.is_empty());
                prop_assert_eq!(&m.missing, &missing);
                prop_assert!(verify(&m).is_ok(), "the merged summary does not verify");
                if missing.is_empty() {
                    prop_assert_eq!(&m.top, &whole.top);
                    prop_assert_eq!(&m.front, &whole.front);
                    prop_assert_eq!(m.evaluated, whole.evaluated);
                }
            }
            Err(e) => prop_assert!(!missing.is_empty() && !partial, "{pick:?}: {e}"),
        }
    }

    /// An editor who also rewrites the checksum: counts and ranges that disagree with each other
    /// are still refused.
    #[test]
    fn resealed_counts_and_ranges_that_disagree_are_refused(
        which in 0..SHARDS as usize,
        field in 0..5usize,
        by in 1u64..1000,
    ) {
        let (_, _, parts) = sweep();
        let mut s = parts[which].clone();
        match field {
            0 => s.evaluated += by,
            1 => s.feasible += by,
            2 => s.shards[0].end += by,
            3 => s.shards[0].start = s.shards[0].start.saturating_sub(by),
            _ => s.total_points += by,
        }
        if s == parts[which] {
            return Ok(());
        }
        s.seal();
        let mut set = parts.clone();
        set[which] = s;
        prop_assert!(merge(named(&set), MergeOptions::default()).is_err());
    }
}

// ---------------------------------------------------------------- monotone search

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(12)))]

    /// Issue 44, item 6: with `--mapping auto`, doubling a training request's devices never
    /// lowers its throughput; the search may leave some idle and says how many.
    #[test]
    fn doubling_the_devices_never_trains_slower(
        sys in prop::sample::select(vec![
            "architectures/eos-h100.ron",
            "architectures/selene-a100.ron",
            "architectures/gb200-cluster.ron",
        ]),
        wl in prop::sample::select(vec![
            "workloads/automodel-llama3.1-8b-lora.ron",
            "workloads/llama2-70b-lora.ron",
            "workloads/megatron-22b.ron",
            "workloads/llama3.1-8b-pretrain.ron",
        ]),
        n in prop::sample::select(vec![8u64, 16, 32, 64, 128, 256]),
    ) {
        let s = load_system(sys, &common::CrateFs).value.expect("system loads");
        let w = load_workload(wl, &common::CrateFs).value.expect("workload loads");
        prop_assume!(2 * n <= s.devices);
        let auto = MappingChoice::Auto(engine::Objective::Time);
        let few = engine::estimate(&s, &w, &auto, Some(n));
        let more = engine::estimate(&s, &w, &auto, Some(2 * n));
        prop_assume!(few.feasible);
        prop_assert!(more.feasible, "{:?}", more.reason);
        let (a, b) = (few.throughput_per_s.unwrap(), more.throughput_per_s.unwrap());
        prop_assert!(b >= a * (1.0 - 1e-12), "{n} → {}: {a} → {b}", 2 * n);
        prop_assert_eq!(more.devices + more.idle_devices, 2 * n);
    }
}
