//! The `--format json` contracts of `docs/json.md`, pinned: for each command the sorted set of key
//! paths of its JSON with the types their values take (never the numbers), snapshotted under
//! `tests/it/snapshots/it__contracts__*.snap`. A physics change leaves these alone; a key renamed,
//! removed or changed in type fails here. A new key is allowed by the contract and shows up as a
//! snapshot diff to accept.
//!
//! Notation: `.a.b: number`; the elements of an array share one description (`.cases[].id`); the
//! entries of a map keyed by data (precision, memory level, reason) share one (`.infeasible{}`);
//! a value that may be absent in some of the outputs shown reads `string|null`. Each snapshot
//! joins a few runs chosen so that both forms of an optional value appear (a feasible and an
//! infeasible row, a system with a mesh and one with a scale-up domain).
//!
//! `sweep --list-paths --format json` lists every path with its unit, machine-table slot,
//! whether an evaluator reads it, and its kind (machine or program axis).
//!
//! Regenerate with `INSTA_UPDATE=always cargo test --release --test it contracts::`, then read the diff:
//! a line that disappeared is a broken contract and needs a note in `docs/json.md`, the JSON
//! contract reference.

use crate::common;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// `tessera ARGS...` from the crate root; its stdout as JSON (exit 0 required).
fn tessera(args: &[&str]) -> Value {
    common::stdout_json(args, &common::tessera_ok(args))
}

/// A JSON type; the order is the order types are listed in (`string|null`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Bool,
    Number,
    String,
    Array,
    Object,
    Null,
}

impl Kind {
    fn of(v: &Value) -> Kind {
        match v {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Bool,
            Value::Number(_) => Kind::Number,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Kind::Bool => "bool",
            Kind::Number => "number",
            Kind::String => "string",
            Kind::Array => "array",
            Kind::Object => "object",
            Kind::Null => "null",
        }
    }
}

/// Key paths and the types seen at each, over every output added.
struct Shape {
    /// Paths of objects whose keys are data (a precision, a memory level), not field names.
    maps: &'static [&'static str],
    paths: BTreeMap<String, BTreeSet<Kind>>,
}

impl Shape {
    fn new(maps: &'static [&'static str]) -> Shape {
        Shape {
            maps,
            paths: BTreeMap::new(),
        }
    }

    fn add(&mut self, v: &Value) -> &mut Shape {
        self.walk(".".to_string(), v);
        self
    }

    fn walk(&mut self, path: String, v: &Value) {
        self.paths
            .entry(path.clone())
            .or_default()
            .insert(Kind::of(v));
        // The root's children are `.key` and `.[]`, not `..key`.
        let base = if path == "." { "" } else { path.as_str() };
        match v {
            Value::Object(o) if self.maps.contains(&path.as_str()) => {
                for x in o.values() {
                    self.walk(format!("{path}{{}}"), x);
                }
            }
            Value::Object(o) => {
                for (k, x) in o {
                    self.walk(format!("{base}.{k}"), x);
                }
            }
            Value::Array(a) => {
                let elem = if path == "." {
                    ".[]".to_string()
                } else {
                    format!("{path}[]")
                };
                for x in a {
                    self.walk(elem.clone(), x);
                }
            }
            _ => {}
        }
    }

    fn render(&self) -> String {
        let mut s = String::new();
        for (path, kinds) in &self.paths {
            let kinds: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
            s.push_str(&format!("{path}: {}\n", kinds.join("|")));
        }
        s
    }
}

/// `v[key]` as a bool, for the preconditions that make a snapshot show what it claims to.
fn flag(v: &Value, key: &str) -> bool {
    v[key]
        .as_bool()
        .unwrap_or_else(|| panic!("`{key}` is not a bool in {v}"))
}

#[test]
fn show() {
    const MAPS: &[&str] = &[
        ".peak_flops_per_s",
        ".memory_capacity_bytes",
        ".memory_bandwidth_bytes_per_s",
    ];
    let mut shape = Shape::new(MAPS);
    // A rack with a scale-up domain, and a wafer with an on-die mesh and none.
    for arch in [
        "architectures/gb200-nvl72.ron",
        "architectures/cerebras-cs3.ron",
    ] {
        shape.add(&tessera(&["show", arch, "--format", "json"]));
    }
    insta::assert_snapshot!("show", shape.render());
}

const ESTIMATE_MAPS: &[&str] = &[];

#[test]
fn estimate_feasible() {
    let mut shape = Shape::new(ESTIMATE_MAPS);
    // Training with a target (time to train) on a software stack, inference (latency per
    // token) on none, and inference on a wafer in a mapping's core regions (`mapping.regions`).
    for (arch, workload, mapping) in [
        ("dgx-h100", "llama3.1-8b-pretrain", "auto"),
        ("gb200-nvl72", "llama3-70b-serving", "published"),
        ("cerebras-cs2", "llama3-8b-waferllm-2048-2048", "regions"),
    ] {
        let (arch, workload) = (
            format!("architectures/{arch}.ron"),
            format!("workloads/{workload}.ron"),
        );
        let mut args = vec!["estimate", "--arch", &arch, "--workload", &workload];
        if mapping == "auto" {
            args.extend(["--mapping", "auto"]);
            args.extend(["--software", "architectures/software/nemo-24.04.ron"]);
        }
        if mapping == "regions" {
            args.extend([
                "--mapping",
                "workloads/mappings/waferllm-wse2-llama3-8b-regions.ron",
            ]);
        }
        args.extend(["--format", "json"]);
        let v = tessera(&args);
        assert!(flag(&v, "feasible"), "expected feasible: {v}");
        shape.add(&v);
    }
    insta::assert_snapshot!("estimate_feasible", shape.render());
}

/// Training on a system that states its reliability and checkpoint storage: the `goodput`
/// object (`engine::goodput`), at the optimal interval and at a stated one with stragglers.
#[test]
fn estimate_goodput() {
    let mut shape = Shape::new(ESTIMATE_MAPS);
    for extra in [
        &[][..],
        &["--checkpoint-interval", "1h", "--straggler", "5%"][..],
    ] {
        let mut args = vec![
            "estimate",
            "--arch",
            "architectures/llama3-h100-16k.ron",
            "--workload",
            "workloads/llama3.1-405b-pretrain.ron",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let v = tessera(&args);
        assert!(v["goodput"].is_object(), "expected a goodput: {v}");
        shape.add(&v["goodput"]);
    }
    insta::assert_snapshot!("estimate_goodput", shape.render());
}

#[test]
fn estimate_infeasible() {
    let mut shape = Shape::new(ESTIMATE_MAPS);
    // No mapping (GPT-3's needs more than 8 devices), and a mapping that does not fit in memory
    // (Llama 3.1 8B's published mapping fits the H100's 80 GiB; twice its micro-batch does not).
    for (workload, extra, code) in [
        ("gpt3-175b-mlperf", &[][..], "mapping"),
        (
            "llama3.1-8b-pretrain",
            &["--set", "mapping.micro_batch=2"][..],
            "memory",
        ),
    ] {
        let workload = format!("workloads/{workload}.ron");
        let mut args = vec![
            "estimate",
            "--arch",
            "architectures/dgx-h100.ron",
            "--workload",
            &workload,
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let v = tessera(&args);
        assert!(!flag(&v, "feasible"), "expected infeasible: {v}");
        assert!(
            v["reason"].is_string(),
            "an infeasible estimate says why: {v}"
        );
        assert_eq!(v["reason_code"], code, "{v}");
        shape.add(&v);
    }
    insta::assert_snapshot!("estimate_infeasible", shape.render());
}

#[test]
fn compare() {
    let v = tessera(&[
        "compare",
        "architectures/dgx-h100.ron",
        "architectures/dgx-b200.ron",
        "architectures/northpole-16.ron",
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
        "--format",
        "json",
    ]);
    let feasible: Vec<bool> = v["systems"]
        .as_array()
        .expect("systems")
        .iter()
        .map(|s| flag(s, "feasible"))
        .collect();
    assert_eq!(feasible, [true, true, false], "{v}");
    // Issue 12: one power boundary for the whole comparison, named once and the same in every row.
    assert_eq!(v["power_boundary"], "facility", "{v}");
    for s in v["systems"].as_array().expect("systems") {
        assert_eq!(s["power_boundary"], v["power_boundary"], "{s}");
    }
    insta::assert_snapshot!("compare", Shape::new(&[]).add(&v).render());
}

/// Issue 46: `compare` takes `--checkpoint-interval` and `--straggler` as `estimate` does: every
/// system that states its reliability carries the same `goodput` object at the stated interval
/// and slowdown, and `ratio_to_baseline.expected_time_to_train` compares the times with failures.
#[test]
fn compare_goodput() {
    let v = tessera(&[
        "compare",
        "architectures/llama3-h100-16k.ron",
        "architectures/eos-h100.ron",
        "--workload",
        "workloads/llama3.1-405b-pretrain.ron",
        "--checkpoint-interval",
        "1h",
        "--straggler",
        "5%",
        "--format",
        "json",
    ]);
    let rows = v["systems"].as_array().expect("systems");
    for s in rows {
        let g = &s["goodput"];
        assert!(g.is_object(), "expected a goodput: {s}");
        assert_eq!(g["checkpoint_interval_s"], 3600.0, "{g}");
        assert_eq!(g["checkpoint_interval_auto"], false, "{g}");
        assert!((g["straggler_slowdown"].as_f64().unwrap() - 0.05).abs() < 1e-12);
    }
    // the baseline against itself is 1; the other is its time with failures over the baseline's
    let ttt = |s: &Value| s["goodput"]["expected_time_to_train_s"].as_f64().unwrap();
    let r = rows[1]["ratio_to_baseline"]["expected_time_to_train"]
        .as_f64()
        .expect("ratio");
    assert!((r - ttt(&rows[1]) / ttt(&rows[0])).abs() < 1e-9, "{r}");
    assert_eq!(rows[0]["ratio_to_baseline"]["expected_time_to_train"], 1.0);
    insta::assert_snapshot!("compare_goodput", Shape::new(&[]).add(&v).render());
}

/// `compare --straggler` and `--checkpoint-interval` refuse what `estimate` refuses, with the
/// same message and exit code.
#[test]
fn compare_goodput_flags_fail_as_estimate_does() {
    for bad in [["--straggler", "fast"], ["--checkpoint-interval", "soon"]] {
        let run = |cmd: &[&str]| {
            let out = common::tessera(&[cmd, &bad[..]].concat());
            let err = String::from_utf8_lossy(&out.stderr).to_string();
            let line = err.lines().next().unwrap_or_default().to_string();
            (out.status.code(), line)
        };
        let (code_c, msg_c) = run(&[
            "compare",
            "architectures/dgx-h100.ron",
            "--workload",
            "workloads/llama3.1-8b-pretrain.ron",
        ]);
        let (code_e, msg_e) = run(&[
            "estimate",
            "--arch",
            "architectures/dgx-h100.ron",
            "--workload",
            "workloads/llama3.1-8b-pretrain.ron",
        ]);
        assert_eq!(code_c, Some(2), "{msg_c}");
        assert_eq!((code_c, &msg_c), (code_e, &msg_e));
        assert!(msg_c.contains(bad[0]), "{msg_c}");
    }
}

/// Issue 14: `compare --software` names the one stack every system runs on once, at the top, and
/// each row carries it as its estimate does; without the flag the key is `null`.
#[test]
fn compare_names_its_software_stack_once() {
    let args = |sw: bool| {
        let mut a = vec![
            "compare",
            "architectures/dgx-h100.ron",
            "architectures/dgx-b200.ron",
            "--workload",
            "workloads/llama3.1-8b-pretrain.ron",
            "--format",
            "json",
        ];
        if sw {
            a.extend(["--software", "architectures/software/nemo-24.04.ron"]);
        }
        tessera(&a)
    };
    let v = args(true);
    let name = v["software"].as_str().expect("software named").to_string();
    assert!(name.contains("NeMo"), "{v}");
    for s in v["systems"].as_array().expect("systems") {
        assert_eq!(s["software"], v["software"], "{s}");
    }
    let bare = args(false);
    assert!(bare["software"].is_null(), "{bare}");
    // the stack's per-step time makes every system's step longer
    for (a, b) in v["systems"]
        .as_array()
        .unwrap()
        .iter()
        .zip(bare["systems"].as_array().unwrap())
    {
        let t = |x: &Value| x["step_time_s"].as_f64().expect("step");
        assert!(t(a) > t(b), "{a} vs {b}");
    }
}

/// `compare --power-budget`: a system that cannot run the workload at any size says why (its own
/// reason, here no mapping fits NorthPole's cards), not that it is over the budget; the others
/// stay within it.
#[test]
fn compare_power_budget_keeps_the_workloads_own_reason() {
    let v = tessera(&[
        "compare",
        "architectures/gb200-nvl72.ron",
        "architectures/northpole-16.ron",
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
        "--power-budget",
        "1 MW",
        "--format",
        "json",
    ]);
    let rows = v["systems"].as_array().expect("systems");
    assert!(flag(&rows[0], "feasible"), "{v}");
    // Issue 42: held against the rated power of what is deployed, average power beside it
    assert_eq!(v["power_budget_basis"], "rated", "{v}");
    assert!(rows[0]["rated_power_w"].as_f64().expect("rated") <= 1e6 * (1.0 + 1e-9));
    assert!(rows[0]["average_power_w"].as_f64().expect("power") <= 1e6 * (1.0 + 1e-9));
    assert!(!flag(&rows[1], "feasible"), "{v}");
    assert_ne!(rows[1]["reason_code"], "power_budget", "{v}");
}

/// Issue 12: `scale --power-budget` on the shipped GB200 and H100 clusters: each system's rows stay
/// within the budget, name it, and more of the budget never buys less throughput.
#[test]
fn scale_power_budget_on_shipped_clusters() {
    let v = tessera(&[
        "scale",
        "--arch",
        "architectures/gb200-cluster.ron",
        "--arch",
        "architectures/eos-h100.ron",
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
        "--mapping",
        "auto",
        "--power-budget",
        "2 MW",
        "--format",
        "json",
    ]);
    let systems = v.as_array().expect("one object per system");
    assert_eq!(systems.len(), 2, "{v}");
    for s in systems {
        assert_eq!(s["power_budget_w"].as_f64(), Some(2e6), "{s}");
        let points = s["points"].as_array().expect("points");
        assert!(!points.is_empty(), "{s}");
        let mut feasible = 0;
        for p in points.iter().filter(|p| flag(p, "feasible")) {
            let w = p["average_power_w"].as_f64().expect("power");
            // each row names the share of the budget it is the fastest deployment within
            let within = p["within_power_w"].as_f64().expect("within_power_w");
            assert!(
                [0.125, 0.25, 0.5, 1.0].contains(&(within / 2e6)),
                "{within} W is not a share of the budget: {p}"
            );
            assert!(w <= within * (1.0 + 1e-9), "{w} W over {within} W: {p}");
            assert!(
                p["throughput_per_s"].as_f64().expect("throughput") > 0.0,
                "{p}"
            );
            feasible += 1;
        }
        assert!(feasible > 0, "no feasible point: {s}");
        // the points are 1/8, 1/4, 1/2 and all of the budget: a larger budget never buys less
        // (budget::fit keeps the fastest count within it, fewer nodes included)
        let rates: Vec<f64> = points
            .iter()
            .filter(|p| flag(p, "feasible"))
            .map(|p| p["throughput_per_s"].as_f64().expect("throughput"))
            .collect();
        assert!(
            rates.windows(2).all(|r| r[1] >= r[0]),
            "throughput falls as the budget grows: {rates:?}"
        );
    }
}

#[test]
fn scale() {
    // 512 is more devices than the cluster has: an infeasible point among the feasible ones.
    let v = tessera(&[
        "scale",
        "--arch",
        "architectures/ibm-minsky-64.ron",
        "--workload",
        "workloads/resnet50-imagenet1k.ron",
        "--devices",
        "4,16,512",
        "--format",
        "json",
    ]);
    insta::assert_snapshot!("scale", Shape::new(&[]).add(&v).render());
}

#[test]
fn scale_several_systems() {
    // With several `--arch`: an array of the single-system objects.
    let v = tessera(&[
        "scale",
        "--arch",
        "architectures/ibm-minsky-64.ron",
        "--arch",
        "architectures/dgx-h100.ron",
        "--workload",
        "workloads/resnet50-imagenet1k.ron",
        "--devices",
        "4,8",
        "--format",
        "json",
    ]);
    assert_eq!(v.as_array().map(Vec::len), Some(2), "{v}");
    insta::assert_snapshot!("scale_several_systems", Shape::new(&[]).add(&v).render());
}

#[test]
fn roofline() {
    let v = tessera(&[
        "roofline",
        "--arch",
        "architectures/dgx-h100.ron",
        "--workload",
        "workloads/megatron-22b.ron",
        "--format",
        "json",
    ]);
    insta::assert_snapshot!("roofline", Shape::new(&[]).add(&v).render());
}

#[test]
fn validate() {
    // One gated case and one known gap, so both `cases[]` and `known_gaps[]` have an element.
    let v = tessera(&[
        "validate",
        "validation/ibm/ibm-ddl-resnet50-256.ron",
        "validation/known-gaps/goyal-resnet50-256-1h.ron",
        "--format",
        "json",
    ]);
    for key in ["cases", "known_gaps"] {
        assert_eq!(v[key].as_array().map(Vec::len), Some(1), "{key}: {v}");
    }
    insta::assert_snapshot!("validate", Shape::new(&[]).add(&v).render());
}

#[test]
fn validate_memory_metrics() {
    // A case of each memory metric: the metric names are contracts, the values bytes (SI), and
    // the keys those of every other case.
    let v = tessera(&[
        "validate",
        "validation/megatron-bridge/mem-mbridge-llama3-70b-sft-h100-32-tp8-pp4.ron",
        "validation/zero/zero-7p5b-states-dp64-z1.ron",
        "--format",
        "json",
    ]);
    let cases = v["cases"].as_array().expect("cases");
    let metric = |id: &str| {
        let c = cases.iter().find(|c| c["id"] == id).expect(id);
        (
            c["metric"].clone(),
            c["published"].as_f64().expect("published"),
        )
    };
    assert_eq!(
        metric("mem-mbridge-llama3-70b-sft-h100-32-tp8-pp4"),
        (Value::from("peak_memory"), 50.2e9)
    );
    assert_eq!(
        metric("zero-7p5b-states-dp64-z1"),
        (Value::from("state_memory"), 31.4e9)
    );
    insta::assert_snapshot!("validate_memory", Shape::new(&[]).add(&v).render());
}

#[test]
fn validate_cross_validate() {
    // A family whose fitted figure falls back when it is held out, and a family that informs no
    // figure, so `refitted[]` has an element and may be empty.
    let v = tessera(&[
        "validate",
        "validation/ibm/ibm-ddl-resnet50-256.ron",
        "validation/near-memory/groq-llama2-70b-576.ron",
        "--cross-validate",
        "family",
        "--format",
        "json",
    ]);
    let fams = v["cross_validation"]["by_family"]
        .as_array()
        .expect("by_family");
    assert_eq!(fams.len(), 2, "{v}");
    assert!(
        fams.iter()
            .any(|f| f["refitted"].as_array().is_some_and(|r| !r.is_empty())),
        "{v}"
    );
    insta::assert_snapshot!(
        "validate_cross_validate",
        Shape::new(&[]).add(&v["cross_validation"]).render()
    );
}

#[test]
fn sweep_summary() {
    // A few points of a shipped sweep; a device count the mapping does not divide (a skipped
    // program) and a power budget some points exceed (infeasible counts).
    let v = tessera(&[
        "sweep",
        "architectures/sweeps/gb200-cluster-random.ron",
        "--backend",
        "cpu",
        "--quiet",
        "--points",
        "20",
        "--vary",
        "devices=1000,2048",
        "--power-budget",
        "3 MW",
        "--format",
        "json",
    ]);
    assert_eq!(
        v["skipped_programs"].as_array().map(Vec::len),
        Some(1),
        "{v}"
    );
    for key in ["infeasible", "infeasible_by_code"] {
        assert!(
            v[key].as_object().is_some_and(|o| !o.is_empty()),
            "{key} should count the points over the power budget: {v}"
        );
    }
    let shape = Shape::new(&[".infeasible", ".infeasible_by_code"])
        .add(&v)
        .render();
    insta::assert_snapshot!("sweep_summary", shape);
}

#[test]
fn sweep_list_paths() {
    // A wafer (mesh paths, a weight store) and a GPU rack (scale-up paths).
    let wafer = tessera(&[
        "sweep",
        "--list-paths",
        "--arch",
        "architectures/cerebras-cs3.ron",
        "--format",
        "json",
    ]);
    let rack = tessera(&[
        "sweep",
        "--list-paths",
        "--arch",
        "architectures/gb200-nvl72.ron",
        "--format",
        "json",
    ]);
    let has = |v: &Value, p: &str| {
        v.as_array()
            .is_some_and(|a| a.iter().any(|e| e["path"] == p))
    };
    for p in ["device.mesh.x", "device.mesh.link_bandwidth", "nodes"] {
        assert!(has(&wafer, p), "{p} missing from the wafer's paths");
    }
    assert!(has(&rack, "scale_up.bandwidth"));
    insta::assert_snapshot!(
        "sweep_list_paths",
        Shape::new(&[]).add(&wafer).add(&rack).render()
    );
}

#[test]
fn calibrate() {
    let v = tessera(&[
        "calibrate",
        "validation/mlperf/mlperf-v41-gpt3-h100-512.ron",
        "validation/mlperf/mlperf-v50-llama405b-h100-8192.ron",
        "--fit",
        "device.efficiency.low_precision_matmul",
        "--format",
        "json",
    ]);
    insta::assert_snapshot!("calibrate", Shape::new(&[]).add(&v).render());
}

#[test]
fn compare_serving() {
    // one load and one target for every system, stated at the top of the JSON
    let v = tessera(&[
        "compare",
        "architectures/dgx-h100.ron",
        "architectures/dgx-b200.ron",
        "--workload",
        "workloads/llama3.1-8b-serving.ron",
        "--concurrency",
        "16",
        "--slo",
        "ttft<=2s,tpot<=40ms",
        "--format",
        "json",
    ]);
    assert_eq!(v["concurrency"], "16", "{v}");
    assert_eq!(v["slo"], "ttft<=2.00 s,tpot<=40.0 ms", "{v}");
    for s in v["systems"].as_array().expect("systems") {
        assert_eq!(s["concurrency"], 16, "{s}");
        assert!(s["ttft_s"].is_number() && s["tpot_s"].is_number(), "{s}");
    }
    insta::assert_snapshot!("compare_serving", Shape::new(&[]).add(&v).render());
}

#[test]
fn serve_curve() {
    let v = tessera(&[
        "serve-curve",
        "architectures/dgx-h100.ron",
        "--workload",
        "workloads/llama3.1-8b-serving.ron",
        "--max-concurrency",
        "64",
        "--format",
        "json",
    ]);
    let pts = v[0]["points"].as_array().expect("points");
    assert_eq!(pts.len(), 7, "1, 2, 4, … 64 requests in flight: {v}");
    insta::assert_snapshot!("serve_curve", Shape::new(&[]).add(&v).render());
}

/// `attention_kernel`: the kernel a training run's attention core runs at, present only where
/// its stack names one (never for serving, which runs none), and the table's `software` row says
/// what a run without a stack leaves out.
#[test]
fn estimate_names_the_attention_kernel_and_a_missing_stack() {
    let base = [
        "estimate",
        "--arch",
        "architectures/eos-h100.ron",
        "--workload",
        "workloads/llama3.1-405b-pretrain.ron",
    ];
    let stack = ["--software", "architectures/software/nemo-25.01.ron"];
    let v = tessera(&[&base[..], &stack, &["--format", "json"]].concat());
    assert_eq!(v["attention_kernel"], "cudnn-fused-attention", "{v}");
    assert!(
        v["software"]
            .as_str()
            .unwrap()
            .starts_with("NVIDIA NeMo 25.01"),
        "{v}"
    );

    let v = tessera(&[&base[..], &["--format", "json"]].concat());
    assert!(v.get("attention_kernel").is_none(), "{v}");
    assert!(v["software"].is_null(), "{v}");
    let out = common::tessera_ok(&base);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("none named: the hardware alone") && table.contains("no attention kernel"),
        "{table}"
    );

    // serving on a stack that names a kernel: the key stays absent
    let v = tessera(&[
        "estimate",
        "--arch",
        "architectures/eos-h100.ron",
        "--workload",
        "workloads/llama3-70b-serving.ron",
        "--software",
        "architectures/software/nemo-25.01.ron",
        "--format",
        "json",
    ]);
    assert!(v.get("attention_kernel").is_none(), "{v}");
}
