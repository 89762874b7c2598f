//! Design-space sweeps on the CPU backend: the streamed reductions equal brute force, shards merge
//! into the single run's answer, every point can be streamed out, sampling is reproducible, and
//! input errors point at their place.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common;

use std::collections::BTreeSet;
use tessera::sweep::merge::{self, MergeOptions};
use tessera::sweep::plan::{self, Plan};
use tessera::sweep::report::{self, RowFormat};
use tessera::sweep::run::{self, Backend, Options, Quiet};
use tessera::sweep::{Metric, Outcome};

const GRID: &str = "architectures/sweeps/gb200-cluster-llama405b.ron";

fn load(path: &str) -> Result<Plan, Vec<tessera::diag::Diagnostic>> {
    let l = plan::read_file(path, &common::CrateFs);
    let Some(inputs) = l.value else {
        return Err(l.diagnostics);
    };
    let b = plan::build(&inputs, &common::CrateFs, l.files, l.diagnostics);
    b.value.ok_or(b.diagnostics)
}

fn load_text(text: &str, name: &str) -> Result<Plan, Vec<tessera::diag::Diagnostic>> {
    let dir = common::scratch_dir("tessera-sweep-test");
    let p = dir.join(name);
    let root = std::env::current_dir().unwrap();
    let text = text.replace("ROOT", &root.to_string_lossy());
    std::fs::write(&p, text).unwrap();
    load(&p.to_string_lossy())
}

fn cpu(plan: &Plan) -> Options {
    Options {
        backend: Backend::Cpu,
        ..Options::new(plan)
    }
}

fn all(plan: &Plan) -> Vec<Outcome> {
    let mut v = vec![0.0; plan.space.axes.len()];
    (0..plan.total())
        .map(|i| plan.evaluate(i, &mut v))
        .collect()
}

fn brute_top(outs: &[Outcome], m: Metric, k: usize) -> Vec<u64> {
    let mut f: Vec<&Outcome> = outs.iter().filter(|o| o.feasible()).collect();
    f.sort_by(|a, b| {
        m.score(b)
            .total_cmp(&m.score(a))
            .then(a.index.cmp(&b.index))
    });
    f.iter().take(k).map(|o| o.index).collect()
}

fn brute_front(outs: &[Outcome], a: Metric, b: Metric) -> BTreeSet<u64> {
    let f: Vec<&Outcome> = outs.iter().filter(|o| o.feasible()).collect();
    f.iter()
        .filter(|p| {
            !f.iter().any(|q| {
                let (qa, qb, pa, pb) = (a.score(q), b.score(q), a.score(p), b.score(p));
                (qa >= pa && qb >= pb && (qa > pa || qb > pb))
                    || (qa == pa && qb == pb && q.index < p.index)
            })
        })
        .map(|o| o.index)
        .collect()
}

#[test]
fn grid_sweep_equals_brute_force() {
    let plan = load(GRID).expect("the shipped sweep loads");
    assert_eq!(plan.programs.len(), 2);
    assert_eq!(plan.total(), 2 * 9 * 3 * 3 * 5 * 5);
    let outs = all(&plan);
    let s = run::run(&plan, &cpu(&plan), None, &Quiet).unwrap();
    assert_eq!(s.evaluated, plan.total());
    assert_eq!(
        s.feasible,
        outs.iter().filter(|o| o.feasible()).count() as u64
    );
    let top: Vec<u64> = s.top.iter().map(|p| p.index).collect();
    assert_eq!(top, brute_top(&outs, plan.objective, plan.top));
    let front: BTreeSet<u64> = s.front.iter().map(|p| p.index).collect();
    assert_eq!(front, brute_front(&outs, plan.pareto.0, plan.pareto.1));
    // the front is ordered best-first in its first metric
    for w in s.front.windows(2) {
        assert!(w[0].throughput_per_s >= w[1].throughput_per_s);
    }
}

#[test]
fn shards_merge_into_the_single_run() {
    let plan = load(GRID).unwrap();
    let whole = run::run(&plan, &cpu(&plan), None, &Quiet).unwrap();
    let mut parts = Vec::new();
    for i in 0..3 {
        let o = Options {
            shard: Some((i, 3)),
            ..cpu(&plan)
        };
        let s = run::run(&plan, &o, None, &Quiet).unwrap();
        // through JSON, as `sweep merge` reads them
        let text = serde_json::to_string(&s).unwrap();
        parts.push(serde_json::from_str::<report::Summary>(&text).unwrap());
    }
    // any order
    parts.swap(0, 2);
    let named = |v: &[report::Summary]| -> Vec<(String, report::Summary)> {
        v.iter()
            .enumerate()
            .map(|(i, s)| (format!("part {i}"), s.clone()))
            .collect()
    };
    let (merged, warnings) = merge::merge(named(&parts), MergeOptions::default()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(merged.complete && merged.missing.is_empty());
    assert_eq!(merged.top, whole.top);
    assert_eq!(merged.front, whole.front);
    assert_eq!(merged.evaluated, whole.evaluated);
    assert_eq!(merged.feasible, whole.feasible);
    assert_eq!(merged.infeasible, whole.infeasible);
    // a missing shard is refused, or joined and marked under allow_partial
    let e = merge::merge(named(&parts[..2]), MergeOptions::default()).unwrap_err();
    assert!(e.contains("cover") && e.contains("allow-partial"), "{e}");
    let partial = MergeOptions {
        allow_partial: true,
        ..Default::default()
    };
    let (m, w) = merge::merge(named(&parts[..2]), partial).unwrap();
    assert!(w.iter().any(|w| w.contains("cover")), "{w:?}");
    assert!(!m.complete);
    // parts[2] is shard 0 (swapped): the missing points are its range
    let s0 = parts[2].shards[0];
    assert_eq!(
        m.missing,
        vec![report::PointRange {
            start: s0.start,
            end: s0.end
        }]
    );
    // the same shard twice is an error
    let e = merge::merge(
        named(&[parts[0].clone(), parts[0].clone()]),
        MergeOptions::default(),
    )
    .unwrap_err();
    assert!(e.contains("overlap"), "{e}");
}

#[test]
fn every_point_streams_to_csv_and_json_lines() {
    let plan = load(GRID).unwrap();
    let mut csv = Vec::new();
    let s = run::run(&plan, &cpu(&plan), Some((&mut csv, RowFormat::Csv)), &Quiet).unwrap();
    let text = String::from_utf8(csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() as u64, plan.total() + 1);
    assert!(
        lines[0].starts_with("index,devices,mapping,devices")
            || lines[0].starts_with("index,devices,mapping,")
    );
    let feasible = lines[1..].iter().filter(|l| l.contains(",true,")).count() as u64;
    assert_eq!(feasible, s.feasible);
    // rows come in index order
    for (i, l) in lines[1..].iter().enumerate() {
        assert!(l.starts_with(&format!("{i},")));
    }
    let mut jl = Vec::new();
    run::run(
        &plan,
        &cpu(&plan),
        Some((&mut jl, RowFormat::Jsonl)),
        &Quiet,
    )
    .unwrap();
    let text = String::from_utf8(jl).unwrap();
    let mut n = 0;
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).expect("each line is JSON");
        assert_eq!(v["index"].as_u64(), Some(n));
        assert!(v["values"]["device.tdp"].is_number());
        n += 1;
    }
    assert_eq!(n, plan.total());
}

const RANDOM: &str = r#"Sweep(
    version: 1,
    arch: "ROOT/architectures/gb200-cluster.ron",
    workload: "ROOT/workloads/llama3.1-405b-pretrain.ron",
    vary: {
        "devices": [1024],
        "device.memory.HBM3e.bandwidth": "4 TB/s .. 16 TB/s",
        "scale_up.bandwidth": "0.9 TB/s .. 7.2 TB/s log",
        "device.tdp": "800 W .. 1600 W",
        "scale_out.bandwidth": ["200 Gb/s", "400 Gb/s", "800 Gb/s"],
    },
    sampling: SAMPLING,
    constraints: (CONSTRAINTS),
)"#;

#[test]
fn sampling_is_reproducible_and_latin_hypercube_stratifies() {
    let n = 2000u64;
    let lhs = RANDOM
        .replace("SAMPLING", &format!("LatinHypercube(points: {n}, seed: 7)"))
        .replace("CONSTRAINTS", "");
    let a = load_text(&lhs, "lhs.ron").unwrap();
    let b = load_text(&lhs, "lhs2.ron").unwrap();
    assert_eq!(a.fingerprint, b.fingerprint);
    for i in [0, 1, 999, n - 1] {
        assert_eq!(a.values(i), b.values(i));
    }
    // every stratum of every continuous axis holds exactly one point
    for (k, ax) in a.space.axes.iter().enumerate() {
        let (lo, hi, log) = match ax.values {
            tessera::sweep::space::Values::Linear { lo, hi } => (lo, hi, false),
            tessera::sweep::space::Values::Log { lo, hi } => (lo, hi, true),
            _ => continue,
        };
        let mut seen = vec![0; n as usize];
        for i in 0..n {
            let v = a.values(i)[k];
            let u = if log {
                (v / lo).ln() / (hi / lo).ln()
            } else {
                (v - lo) / (hi - lo)
            };
            let s = ((u * n as f64) as usize).min(n as usize - 1);
            seen[s] += 1;
        }
        assert!(
            seen.iter().all(|&c| c == 1),
            "axis {} not stratified",
            ax.path
        );
    }
    // a different seed, different points
    let c = load_text(
        &RANDOM
            .replace("SAMPLING", &format!("LatinHypercube(points: {n}, seed: 8)"))
            .replace("CONSTRAINTS", ""),
        "lhs3.ron",
    )
    .unwrap();
    assert_ne!(a.values(0), c.values(0));
    assert_ne!(a.fingerprint, c.fingerprint);
    let r = load_text(
        &RANDOM
            .replace("SAMPLING", "Random(points: 500, seed: 1)")
            .replace("CONSTRAINTS", ""),
        "random.ron",
    )
    .unwrap();
    assert_eq!(r.total(), 500);
    for i in 0..500 {
        let v = r.values(i);
        assert!((4e12..=16e12).contains(&v[0]));
        assert!([25e9, 50e9, 100e9].contains(&v[3]));
    }
}

#[test]
fn power_budget_is_a_constraint() {
    let text = RANDOM.replace("SAMPLING", "Random(points: 3000, seed: 3)");
    let free = load_text(&text.replace("CONSTRAINTS", ""), "free.ron").unwrap();
    // a budget at the median power of the unconstrained points
    let mut powers: Vec<f64> = all(&free)
        .iter()
        .filter(|o| o.feasible())
        .map(|o| o.power)
        .collect();
    powers.sort_by(f64::total_cmp);
    let budget = powers[powers.len() / 2];
    let p = load_text(
        &text.replace("CONSTRAINTS", &format!("power_budget: \"{budget} W\"")),
        "budget.ron",
    )
    .unwrap();
    let s = run::run(&p, &cpu(&p), None, &Quiet).unwrap();
    let over = s
        .infeasible
        .get("over the power budget")
        .copied()
        .unwrap_or(0);
    assert!(
        over > 1000 && s.feasible > 1000,
        "{:?} {}",
        s.infeasible,
        s.feasible
    );
    for pt in s.top.iter().chain(&s.front) {
        assert!(pt.average_power_w <= budget);
    }
    // the best point under the budget is the best of the points that meet it
    let best = all(&free)
        .into_iter()
        .filter(|o| o.feasible() && o.power <= budget)
        .max_by(|a, b| {
            a.throughput
                .total_cmp(&b.throughput)
                .then(b.index.cmp(&a.index))
        })
        .unwrap();
    assert_eq!(s.top[0].index, best.index);
}

fn message(d: &[tessera::diag::Diagnostic]) -> String {
    d.iter()
        .map(|d| d.render(None))
        .collect::<Vec<_>>()
        .join("")
}

#[test]
fn unknown_paths_and_bad_values_are_located() {
    let text = r#"Sweep(
    version: 1,
    arch: "ROOT/architectures/gb200-nvl72.ron",
    workload: "ROOT/workloads/llama3.1-405b-pretrain.ron",
    vary: {
        "device.memory.HBM3e.bandwidth": "2 TB/s .. 8 TB/s step 0.5 TB/s",
        "device.memory.HBM3.capacity": ["141 GB"],
        "scale_up.bandwith": ["1 TB/s"],
        "device.tdp": "1000 W .. 900 W step 10 W",
        "device.efficiency.matmul": ["2 TB/s"],
    },
)"#;
    let d = load_text(text, "bad.ron").unwrap_err();
    let m = message(&d);
    assert!(
        m.contains("bad.ron:7:9: error: the device has no memory level `HBM3`"),
        "{m}"
    );
    assert!(m.contains("did you mean `HBM3e`"), "{m}");
    assert!(
        m.contains("bad.ron:8:9: error: unknown parameter path `scale_up.bandwith`"),
        "{m}"
    );
    assert!(m.contains("did you mean `scale_up.bandwidth`"), "{m}");
    assert!(
        m.contains("bad.ron:9:9:") && m.contains("runs backwards"),
        "{m}"
    );
    assert!(m.contains("bad.ron:10:9:"), "{m}");
    // a continuous range cannot be a grid
    let text = r#"Sweep(
    version: 1,
    arch: "ROOT/architectures/gb200-nvl72.ron",
    workload: "ROOT/workloads/llama3.1-405b-pretrain.ron",
    vary: { "device.tdp": "1000 W .. 1400 W" },
    sampling: Grid,
)"#;
    let m = message(&load_text(text, "grid.ron").unwrap_err());
    assert!(
        m.contains("grid.ron:6:15: error:") && m.contains("continuous"),
        "{m}"
    );
    // a misspelt field of the file itself
    let text = r#"Sweep(
    version: 1,
    arch: "x.ron",
    workload: "y.ron",
    vary: {},
    samplin: Grid,
)"#;
    let m = message(&load_text(text, "field.ron").unwrap_err());
    assert!(
        m.contains("field.ron:6:5: error: unknown field `samplin`"),
        "{m}"
    );
    assert!(m.contains("did you mean `sampling`"), "{m}");
}

fn tessera(args: &[&str]) -> (bool, String, String) {
    let out = common::tessera(args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_shards_merge_and_vary() {
    let dir = crate::common::scratch_dir("sweep-cli");
    let d = |n: &str| dir.join(n).to_string_lossy().into_owned();
    let (ok, whole, err) = tessera(&["sweep", GRID, "--backend", "cpu", "--format", "json"]);
    assert!(ok, "{err}");
    let whole: report::Summary = serde_json::from_str(&whole).unwrap();
    for i in 0..2 {
        let shard = format!("{i}/2");
        let summary = d(&format!("s{i}.json"));
        let (ok, _, err) = tessera(&[
            "sweep",
            GRID,
            "--backend",
            "cpu",
            "--shard",
            &shard,
            "--summary",
            &summary,
            "--out",
            &d(&format!("p{i}.csv")),
        ]);
        assert!(ok, "{err}");
    }
    let (ok, merged, err) = tessera(&[
        "sweep",
        "merge",
        &d("s0.json"),
        &d("s1.json"),
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    let merged: report::Summary = serde_json::from_str(&merged).unwrap();
    assert_eq!(merged.top, whole.top);
    assert_eq!(merged.front, whole.front);
    let rows: usize = (0..2)
        .map(|i| {
            std::fs::read_to_string(d(&format!("p{i}.csv")))
                .unwrap()
                .lines()
                .count()
                - 1
        })
        .sum();
    assert_eq!(rows as u64, whole.total_points);

    let (ok, out, err) = tessera(&[
        "sweep",
        "--arch",
        "architectures/gb200-cluster.ron",
        "--workload",
        "workloads/llama3.1-405b-pretrain.ron",
        "--vary",
        "devices=1024",
        "--vary",
        "hbm.bandwidth=\"2 TB/s\"..\"8 TB/s\" step \"0.5 TB/s\"",
        "--vary",
        "device.tdp=[1000 W, 1200 W]",
        "--top",
        "3",
        "--pareto",
        "throughput,energy",
        "--backend",
        "cpu",
        "--plot",
        &d("cloud.svg"),
    ]);
    assert!(ok, "{err}");
    let svg = std::fs::read_to_string(d("cloud.svg")).unwrap();
    assert!(
        svg.contains("<svg") && svg.contains("front-point"),
        "a sweep picture"
    );
    assert!(out.contains("26 points"), "{out}");
    assert!(out.contains("best 3 by throughput"), "{out}");
    assert!(out.contains("Pareto front, throughput vs energy"), "{out}");

    let (ok, _, err) = tessera(&[
        "sweep",
        "--arch",
        "architectures/gb200-cluster.ron",
        "--workload",
        "workloads/llama3.1-405b-pretrain.ron",
        "--vary",
        "device.peek.fp8=1 PFLOP/s",
    ]);
    assert!(!ok);
    assert!(
        err.contains("unknown parameter path `device.peek.fp8`"),
        "{err}"
    );
    assert!(err.contains("did you mean `device.peak.fp8`"), "{err}");
}

/// A `power_cap` throttles instead of filtering: every point that was feasible stays feasible,
/// none draws more than the cap, a point over it before runs slower now, and none runs faster.
#[test]
fn power_cap_throttles_rather_than_filters() {
    let text = RANDOM.replace("SAMPLING", "Random(points: 2000, seed: 5)");
    let free = load_text(&text.replace("CONSTRAINTS", ""), "free.ron").unwrap();
    let outs = all(&free);
    let mut powers: Vec<f64> = outs
        .iter()
        .filter(|o| o.feasible())
        .map(|o| o.power)
        .collect();
    powers.sort_by(f64::total_cmp);
    let cap = powers[powers.len() / 2];
    let capped = load_text(
        &text.replace("CONSTRAINTS", &format!("power_cap: \"{cap} W\"")),
        "cap.ron",
    )
    .unwrap();
    let (mut slowed, mut over) = (0, 0);
    for (a, b) in outs.iter().zip(all(&capped)) {
        if !a.feasible() {
            continue;
        }
        assert!(
            b.feasible(),
            "point {} became infeasible under the cap",
            a.index
        );
        assert!(
            b.power <= cap * (1.0 + 1e-9),
            "{} W over a {cap} W cap",
            b.power
        );
        assert!(b.step_time >= a.step_time * (1.0 - 1e-12));
        if a.power > cap * (1.0 + 1e-9) {
            over += 1;
            assert!(
                b.step_time > a.step_time,
                "point {} over the cap kept its speed",
                a.index
            );
            slowed += 1;
        }
    }
    assert!(
        over > 100 && slowed == over,
        "{over} over the cap, {slowed} slowed"
    );
}

/// A cap below the devices' static power leaves no clock to run at: every point is infeasible
/// for the cap (`power_cap`, as the GPU kernel reports it), not for a missing rate.
#[test]
fn a_cap_below_static_power_is_infeasible_for_the_cap() {
    let text = RANDOM
        .replace("SAMPLING", "Random(points: 20, seed: 5)")
        .replace("CONSTRAINTS", "power_cap: \"10 kW\"");
    let capped = load_text(&text, "starved.ron").unwrap();
    for o in all(&capped) {
        assert_eq!(
            tessera::engine::reason::point::code(o.reason),
            "power_cap",
            "point {}",
            o.index
        );
    }
}
