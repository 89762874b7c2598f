//! Behaviour unchanged: the JSON of `validate`, of `estimate` for every shipped workload on a set
//! of systems, and of two shipped sweeps, recorded in `tests/golden/` and compared after every
//! change at 1e-9 relative.
//!
//! A refactor must leave every recorded number where it was. A change that moves numbers on
//! purpose (new physics) re-records with `TESSERA_RECORD=1 cargo test --release --test it behaviour::`
//! and says so, with the reason, in its note. Keys may be added (the JSON contract allows it);
//! a recorded key that disappears, a changed string or a number off by more than 1e-9 relative
//! fails, naming the command and the JSON path.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common::{self, root};
use serde_json::Value;

const REL: f64 = 1e-9;

/// Systems every shipped workload is estimated on: GPU nodes and racks, a wafer, near-memory
/// cards, a large cluster and a TPU pod.
const SYSTEMS: [&str; 6] = [
    "dgx-h100",
    "gb200-nvl72",
    "cerebras-cs3",
    "northpole-16",
    "eos-h100",
    "tpu-v5p-pod",
];

/// (system, workload) pairs also estimated with `--mapping auto`.
const AUTO: [(&str, &str); 4] = [
    ("dgx-h100", "llama3.1-8b-pretrain"),
    ("gb200-nvl72", "llama3-70b-serving"),
    ("cerebras-cs3", "llama3.1-8b-serving"),
    ("northpole-16", "granite-3b-northpole"),
];

/// Keys that identify rather than measure: compared for presence only.
const IDENTITY_KEYS: [&str; 1] = ["fingerprint"];

/// `tessera ARGS...` from the crate root; its stdout as JSON (whatever it exits with).
fn tessera(args: &[&str]) -> Value {
    common::stdout_json(args, &common::tessera(args))
}

fn workloads() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join("workloads"))
        .expect("workloads/")
        .filter_map(|e| {
            let p = e.ok()?.path();
            let stem = p.file_stem()?.to_string_lossy().into_owned();
            (p.extension()? == "ron").then_some(stem)
        })
        .collect();
    v.sort();
    v
}

fn same_number(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= REL * a.abs().max(b.abs())
}

/// Every difference between the recorded `want` and the current `got`, as JSON paths.
fn diff(path: &str, want: &Value, got: &Value, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                match g.get(k) {
                    None => out.push(format!("{p}: key missing (was {wv})")),
                    Some(_) if IDENTITY_KEYS.contains(&k.as_str()) => {}
                    Some(gv) => diff(&p, wv, gv, out),
                }
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            if w.len() != g.len() {
                out.push(format!("{path}: {} items, was {}", g.len(), w.len()));
            }
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                diff(&format!("{path}[{i}]"), wv, gv, out);
            }
        }
        (Value::Number(w), Value::Number(g)) => {
            let (w, g) = (
                w.as_f64().unwrap_or(f64::NAN),
                g.as_f64().unwrap_or(f64::NAN),
            );
            if !same_number(w, g) {
                out.push(format!(
                    "{path}: {g} was {w} ({:+.3e} relative)",
                    (g - w) / w
                ));
            }
        }
        _ if want == got => {}
        _ => out.push(format!("{path}: {got} was {want}")),
    }
}

/// Compare (or with `TESSERA_RECORD=1`, record) one golden file of named outputs.
fn check(file: &str, runs: Vec<(String, Vec<String>)>) {
    let path = root().join("tests/golden").join(file);
    let mut now = serde_json::Map::new();
    for (name, args) in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        now.insert(name.clone(), tessera(&args));
    }
    let now = Value::Object(now);
    if std::env::var_os("TESSERA_RECORD").is_some() {
        std::fs::create_dir_all(path.parent().expect("golden dir")).expect("mkdir golden");
        let text = serde_json::to_string_pretty(&now).expect("serialise") + "\n";
        std::fs::write(&path, text).expect("write golden");
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; record it with TESSERA_RECORD=1 cargo test --release --test it behaviour::",
            path.display()
        )
    });
    let want: Value = serde_json::from_str(&text).expect("golden is JSON");
    let mut out = Vec::new();
    diff("", &want, &now, &mut out);
    assert!(
        out.is_empty(),
        "{file}: {} difference(s) from the recorded behaviour (re-record only for a deliberate \
         change, and say why):\n{}",
        out.len(),
        out.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn estimate_of_every_shipped_workload_is_unchanged() {
    let mut runs = Vec::new();
    for w in workloads() {
        for s in SYSTEMS {
            let (a, wl) = (
                format!("architectures/{s}.ron"),
                format!("workloads/{w}.ron"),
            );
            runs.push((
                format!("{s} | {w}"),
                args(&[
                    "estimate",
                    "--arch",
                    &a,
                    "--workload",
                    &wl,
                    "--format",
                    "json",
                ]),
            ));
        }
    }
    for (s, w) in AUTO {
        let (a, wl) = (
            format!("architectures/{s}.ron"),
            format!("workloads/{w}.ron"),
        );
        runs.push((
            format!("{s} | {w} | auto"),
            args(&[
                "estimate",
                "--arch",
                &a,
                "--workload",
                &wl,
                "--mapping",
                "auto",
                "--format",
                "json",
            ]),
        ));
    }
    check("estimate.json", runs);
}

#[test]
fn validate_is_unchanged() {
    check(
        "validate.json",
        vec![("validate".into(), args(&["validate", "--format", "json"]))],
    );
}

#[test]
fn shipped_sweeps_are_unchanged() {
    let sweep = |file: &str| {
        args(&[
            "sweep",
            file,
            "--backend",
            "cpu",
            "--quiet",
            "--format",
            "json",
        ])
    };
    check(
        "sweeps.json",
        vec![
            (
                "gb200-cluster-llama405b".into(),
                sweep("architectures/sweeps/gb200-cluster-llama405b.ron"),
            ),
            (
                "gb200-cluster-random".into(),
                sweep("architectures/sweeps/gb200-cluster-random.ron"),
            ),
        ],
    );
}
