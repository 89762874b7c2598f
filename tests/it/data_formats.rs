//! What a user reads into other tools (issue 45): `tessera list` names every shipped file,
//! `--format csv` is data (one row per system or point, the JSON keys as columns, numbers in SI
//! units, never the table's display strings), and `estimate` and `compare` put a serving
//! workload at one load.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common::{self, root};
use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

/// `tessera ARGS...` from the crate root: its stdout (exit 0 required).
fn tessera(args: &[&str]) -> String {
    String::from_utf8(common::tessera_ok(args).stdout).expect("utf-8")
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&tessera(args)).expect("JSON")
}

fn ron_files(dir: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).expect("read dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            ron_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "ron") {
            let rel = p.strip_prefix(root()).expect("under the root");
            out.insert(rel.to_string_lossy().into_owned());
        }
    }
}

#[test]
fn list_names_every_shipped_file_with_its_figures() {
    let v = json(&["list", "--format", "json"]);
    let entries = v.as_array().expect("an array");
    let listed: BTreeSet<String> = entries
        .iter()
        .map(|e| e["file"].as_str().expect("file").to_string())
        .collect();
    let mut want = BTreeSet::new();
    ron_files(&root().join("architectures"), &mut want);
    ron_files(&root().join("workloads"), &mut want);
    assert_eq!(listed, want);
    for e in entries {
        assert!(e["error"].is_null(), "{e}");
        assert!(!e["name"].as_str().unwrap_or("").is_empty(), "{e}");
        match e["kind"].as_str().unwrap_or("") {
            "system" => {
                for k in ["devices", "peak_flops_per_s", "memory_bytes", "power_w"] {
                    assert!(e[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {e}");
                }
            }
            "workload" => {
                assert!(e["model"].is_string() && e["task"].is_string(), "{e}")
            }
            _ => {}
        }
    }
    // DGX H100 by hand: 8 × 989.4 TFLOP/s bf16, 8 × 80 GiB of HBM3
    let dgx = entries
        .iter()
        .find(|e| e["file"] == "architectures/dgx-h100.ron")
        .expect("dgx-h100 listed");
    assert_eq!(dgx["devices"], 8);
    assert_eq!(dgx["peak_precision"], "bf16");
    let peak = dgx["peak_flops_per_s"].as_f64().unwrap();
    assert!((peak - 8.0 * 989.4e12).abs() < 1e6, "{peak}");
    let mem = dgx["memory_bytes"].as_f64().unwrap();
    assert!((mem - 8.0 * 80.0 * 1024f64.powi(3)).abs() < 1.0, "{mem}");
}

#[test]
fn list_table_snapshot() {
    let out = tessera(&[
        "list",
        "architectures/dgx-h100.ron",
        "architectures/parts/h100-sxm.ron",
        "architectures/parts/dgx-h100-node.ron",
        "architectures/software/nemo-24.04.ron",
        "architectures/sweeps/gb200-cluster-llama405b.ron",
        "workloads/llama3.1-8b-serving.ron",
        "workloads/resnet50-mlperf.ron",
    ]);
    insta::assert_snapshot!("list_table", out);
}

/// A CSV's header and rows (the writer's quoting: `"` around cells with `,`, `"` or a newline).
fn parse_csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut rows = Vec::new();
    let (mut row, mut cell, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => row.push(std::mem::take(&mut cell)),
            ('\n', false) => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (c, _) => cell.push(c),
        }
    }
    let header = rows.remove(0);
    (header, rows)
}

/// Unit suffixes of the JSON keys whose values are numbers in SI units.
const NUMERIC: [&str; 9] = [
    "_s", "_w", "_j", "_bytes", "_per_s", "_usd", "_kg_co2e", "_flops", "_kwh",
];

/// Every CSV is data: one header, unique column names, as many cells as columns in every row,
/// every unit-suffixed column a number (or empty), and no display strings (an SI prefix
/// followed by a unit) anywhere.
fn check_data(what: &str, text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let (h, rows) = parse_csv(text);
    let unique: BTreeSet<&String> = h.iter().collect();
    assert_eq!(unique.len(), h.len(), "{what}: duplicate columns in {h:?}");
    assert!(!rows.is_empty(), "{what}: no rows");
    for r in &rows {
        assert_eq!(r.len(), h.len(), "{what}: row {r:?}");
        for (col, cell) in h.iter().zip(r) {
            let leaf = col.rsplit('.').next().unwrap_or(col);
            if NUMERIC.iter().any(|s| leaf.ends_with(s)) && !cell.is_empty() {
                assert!(
                    cell.parse::<f64>().is_ok(),
                    "{what}: column {col} holds {cell:?}, not a number"
                );
            }
            for unit in [" tokens/s", " FLOP/s", " W", " J", " B", " s"] {
                let display = cell
                    .split(unit)
                    .next()
                    .is_some_and(|x| x != cell && x.trim().parse::<f64>().is_ok());
                assert!(
                    !display,
                    "{what}: column {col} is a display string {cell:?}"
                );
            }
        }
    }
    (h, rows)
}

#[test]
fn csv_is_data_for_every_command() {
    let three = [
        "architectures/gb200-nvl72.ron",
        "architectures/cerebras-cs3.ron",
        "architectures/northpole-16.ron",
    ];
    let wl = "workloads/granite-3b-northpole.ron";
    // compare: one row per system, the JSON rows' keys as columns, the same numbers
    let mut args = vec!["compare"];
    args.extend(three);
    args.extend(["--workload", wl, "--format"]);
    let (h, rows) = check_data("compare", &tessera(&[&args[..], &["csv"]].concat()));
    let v = json(&[&args[..], &["json"]].concat());
    let sys = v["systems"].as_array().unwrap();
    assert_eq!(rows.len(), sys.len());
    let col = |name: &str| h.iter().position(|c| c == name).expect(name);
    for (r, j) in rows.iter().zip(sys) {
        assert_eq!(r[col("system")], j["system"].as_str().unwrap());
        if let Some(t) = j["throughput_per_s"].as_f64() {
            assert_eq!(r[col("throughput_per_s")].parse::<f64>().unwrap(), t);
        }
        let ratio = j["ratio_to_baseline"]["throughput"].as_f64();
        let cell = &r[col("ratio_to_baseline.throughput")];
        assert_eq!(cell.parse::<f64>().ok(), ratio);
    }
    insta::assert_snapshot!("compare_csv_header", h.join("\n"));

    let (_, rows) = check_data(
        "estimate",
        &tessera(&[
            "estimate",
            "--arch",
            "architectures/dgx-h100.ron",
            "--workload",
            "workloads/llama3.1-8b-pretrain.ron",
            "--format",
            "csv",
        ]),
    );
    assert_eq!(rows.len(), 1);
    let (h, rows) = check_data(
        "scale",
        &tessera(&[
            "scale",
            "--arch",
            "architectures/dgx-h100.ron",
            "--arch",
            "architectures/dgx-a100.ron",
            "--workload",
            "workloads/llama3.1-8b-pretrain.ron",
            "--devices",
            "1,8",
            "--format",
            "csv",
        ]),
    );
    assert_eq!(rows.len(), 4);
    assert!(h.contains(&"system".to_string()));
    let (_, rows) = check_data(
        "serve-curve",
        &tessera(&[
            "serve-curve",
            "architectures/dgx-h100.ron",
            "--workload",
            "workloads/llama3.1-8b-serving.ron",
            "--max-concurrency",
            "4",
            "--format",
            "csv",
        ]),
    );
    assert!(rows.len() >= 3);
    check_data(
        "show",
        &tessera(&["show", "architectures/dgx-h100.ron", "--format", "csv"]),
    );
    let (_, rows) = check_data(
        "roofline",
        &tessera(&[
            "roofline",
            "--arch",
            "architectures/dgx-h100.ron",
            "--workload",
            "workloads/llama3.1-8b-pretrain.ron",
            "--format",
            "csv",
        ]),
    );
    assert!(rows.len() > 3);
    check_data(
        "list",
        &tessera(&["list", "architectures/parts", "--format", "csv"]),
    );
}

#[test]
fn estimate_and_compare_serve_one_load() {
    // issue 45 item 3: DGX H100 on the single-user Llama 3.1 8B workload: `compare` holds its
    // systems at the requests `estimate` runs on the first, so the two agree on the load
    let args = [
        "--workload",
        "workloads/llama3.1-8b-serving.ron",
        "--format",
        "json",
    ];
    let e = json(
        &[
            &["estimate", "--arch", "architectures/dgx-h100.ron"],
            &args[..],
        ]
        .concat(),
    );
    let c = json(&[&["compare", "architectures/dgx-h100.ron"], &args[..]].concat());
    let requests = e["concurrency"]
        .as_u64()
        .expect("estimate's requests in flight");
    assert!(requests > 0);
    assert_eq!(c["systems"][0]["concurrency"].as_u64(), Some(requests));
    assert_eq!(
        c["concurrency"].as_str(),
        Some(requests.to_string().as_str())
    );
    // and every other system of the comparison serves the same requests
    let c2 = json(
        &[
            &[
                "compare",
                "architectures/dgx-h100.ron",
                "architectures/cerebras-cs3.ron",
            ],
            &args[..],
        ]
        .concat(),
    );
    for r in c2["systems"].as_array().unwrap() {
        if r["feasible"] == true {
            assert_eq!(r["concurrency"].as_u64(), Some(requests), "{}", r["system"]);
        }
    }
}
