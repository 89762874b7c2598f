//! Issue 42: the comparison posed fairly. `compare --power-budget` holds each system to the rated
//! power of what it deploys (or, asked, its modelled average power), and `compare`'s table reads
//! in the terminal's width: reasons and notes as numbered footnotes, units in the row headers.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a test: may use the disk

use crate::common;

use serde_json::Value;

/// The main job's iso-power comparison, as the README runs it.
const MAIN_JOB: [&str; 7] = [
    "compare",
    "architectures/gb200-nvl72.ron",
    "architectures/cerebras-cs3-cluster.ron",
    "architectures/northpole-16.ron",
    "--workload",
    "workloads/llama3.1-8b-pretrain.ron",
    "--power-budget",
];

/// `tessera ARGS` with `COLUMNS` set to `columns` (or unset); its stdout (exit 0 required).
fn run(args: &[&str], columns: Option<&str>) -> String {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"));
    cmd.args(args).current_dir(common::root());
    match columns {
        Some(c) => cmd.env("COLUMNS", c),
        None => cmd.env_remove("COLUMNS"),
    };
    let out = cmd.output().expect("run tessera");
    assert!(
        out.status.success(),
        "tessera {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn main_job(extra: &[&str], columns: Option<&str>) -> String {
    let mut args: Vec<&str> = MAIN_JOB.to_vec();
    args.push("1 MW");
    args.extend(extra);
    run(&args, columns)
}

fn longest(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// `COLUMNS=100 tessera compare … --power-budget "1 MW"` prints no line longer than 100
/// characters; the infeasible system's cell points at its footnote under the table.
#[test]
fn main_job_reads_in_100_columns() {
    let text = main_job(&[], Some("100"));
    assert!(longest(&text) <= 100, "a line over 100 columns:\n{text}");
    let mark = text
        .split("infeasible [")
        .nth(1)
        .and_then(|t| t.split(']').next())
        .unwrap_or_else(|| panic!("an infeasible mark:\n{text}"))
        .to_string();
    assert!(
        text.lines()
            .any(|l| l.starts_with(&format!("[{mark}] IBM NorthPole"))),
        "the reason is a footnote:\n{text}"
    );
    assert!(text.contains("throughput (tokens/s)"), "{text}");
}

/// Without `COLUMNS` the table is fitted to 100; a narrower terminal gets a narrower table.
#[test]
fn table_follows_the_terminal_width() {
    let text = main_job(&[], None);
    assert!(longest(&text) <= 100, "{text}");
    let narrow = main_job(&[], Some("80"));
    assert!(longest(&narrow) <= 80, "a line over 80 columns:\n{narrow}");
}

/// The layout, its digits masked (the numbers are the golden tests' business).
#[test]
fn compare_table_layout() {
    let text = main_job(&[], Some("100"));
    let masked: String = text
        .chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect();
    insta::assert_snapshot!("compare_table_budget", masked);
}

fn json(extra: &[&str]) -> Value {
    let mut a = vec!["--format", "json"];
    a.extend(extra);
    serde_json::from_str(&main_job(&a, None)).expect("json")
}

/// The budget holds against the rated power of what each system deploys (by default), average
/// power reported beside it; `--budget-basis average` holds it against the modelled average,
/// which fits at least as many devices.
#[test]
fn power_budget_holds_against_rated_power() {
    let rated = json(&[]);
    assert_eq!(rated["power_budget_basis"], "rated", "{rated}");
    let average = json(&["--budget-basis", "average"]);
    assert_eq!(average["power_budget_basis"], "average", "{average}");
    let rows = |v: &Value| v["systems"].as_array().expect("systems").clone();
    for (r, a) in rows(&rated).iter().zip(rows(&average).iter()) {
        if !r["feasible"].as_bool().unwrap_or(false) {
            continue;
        }
        let p = |v: &Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k}: {v}"));
        assert!(p(r, "rated_power_w") <= 1e6 * (1.0 + 1e-9), "{r}");
        assert!(p(r, "average_power_w") <= p(r, "rated_power_w"), "{r}");
        assert!(p(a, "average_power_w") <= 1e6 * (1.0 + 1e-9), "{a}");
        assert!(p(a, "devices") >= p(r, "devices"), "{a} against {r}");
    }
    // no budget, no basis
    let plain = serde_json::from_str::<Value>(&run(
        &[
            "compare",
            "architectures/dgx-h100.ron",
            "--workload",
            "workloads/llama3.1-8b-pretrain.ron",
            "--format",
            "json",
        ],
        None,
    ))
    .expect("json");
    assert!(plain["power_budget_basis"].is_null(), "{plain}");
}

/// Rated power follows the boundary: each boundary counts at least what the one inside it does,
/// and `it` at one DGX H100 is `show`'s rated power.
#[test]
fn rated_power_follows_the_boundary() {
    let rated = |b: &str| -> f64 {
        let v: Value = serde_json::from_str(&run(
            &[
                "estimate",
                "--arch",
                "architectures/dgx-h100.ron",
                "--workload",
                "workloads/llama3.1-8b-pretrain.ron",
                "--power-boundary",
                b,
                "--format",
                "json",
            ],
            None,
        ))
        .expect("json");
        v["rated_power_w"].as_f64().expect("rated_power_w")
    };
    let all: Vec<f64> = ["device", "node", "rack", "it", "facility"]
        .iter()
        .map(|b| rated(b))
        .collect();
    assert!(all.windows(2).all(|w| w[0] <= w[1]), "{all:?}");
    let show: Value = serde_json::from_str(&run(
        &["show", "architectures/dgx-h100.ron", "--format", "json"],
        None,
    ))
    .expect("json");
    let power = show["power_w"].as_f64().expect("power_w");
    assert!((all[3] - power).abs() <= 1e-9 * power, "{all:?} vs {power}");
}
