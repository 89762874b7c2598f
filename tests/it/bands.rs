//! Issue 42: every estimate carries the validation evidence behind it. The shipped error bands
//! (`src/validate/bands.rs`'s `bands.ron`, compiled in) must be what `tessera validate` computes
//! now, so they cannot go stale: a change that moves a case's error re-writes them with
//! `cargo run --release -- validate --write-bands src/validate/bands.ron`.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a test: may use the disk

use crate::common;

use serde_json::Value;
use tessera::validate::bands::Bands;

#[test]
fn shipped_bands_are_what_validate_computes_now() {
    let path = common::scratch_dir("bands").join("bands.ron");
    let out = common::tessera(&["validate", "--write-bands", path.to_str().expect("utf-8")]);
    assert!(
        out.status.code().is_some(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&path).expect("validate wrote the bands");
    std::fs::remove_file(&path).ok();
    let now = Bands::parse(&text).expect("the written bands parse");
    let shipped = Bands::shipped();
    let stale = "the shipped error bands differ from what `tessera validate` computes now; \
                 re-write them: cargo run --release -- validate --write-bands \
                 src/validate/bands.ron";
    assert_eq!(shipped.families, now.families, "{stale}");
    assert_eq!(shipped.bands.len(), now.bands.len(), "{stale}");
    for (a, b) in shipped.bands.iter().zip(&now.bands) {
        let key =
            |e: &tessera::validate::bands::Entry| (e.family.clone(), e.task, e.figure, e.cases);
        assert_eq!(key(a), key(b), "{stale}");
        // rounded to 1e-4 when written: a last-digit flip is not a change
        assert!(
            (a.relative - b.relative).abs() <= 1.5e-4,
            "{a:?} vs {b:?}: {stale}"
        );
    }
}

fn json(args: &[&str]) -> Value {
    let out = common::tessera(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// An estimate on a validated family carries `{relative, cases, family}`; a comparison row whose
/// family checks no case of the task carries null, and a ratio says whether the bands overlap.
#[test]
fn estimates_and_rows_carry_their_band() {
    let e = json(&[
        "estimate",
        "--arch",
        "architectures/dgx-h100.ron",
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
        "--format",
        "json",
    ]);
    let b = &e["error_band"];
    assert_eq!(b["family"], "NVIDIA Hopper (H100/H200)", "{e}");
    assert_eq!(b["task"], "training", "{e}");
    assert!(
        b["relative"].as_f64().is_some_and(|r| r > 0.0 && r < 1.0),
        "{b}"
    );
    assert!(b["cases"].as_u64().is_some_and(|n| n > 0), "{b}");
    let c = json(&[
        "compare",
        "architectures/gb200-nvl72.ron",
        "architectures/dgx-h100.ron",
        "architectures/cerebras-cs3-cluster.ron",
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
        "--format",
        "json",
    ]);
    let rows = c["systems"].as_array().expect("systems");
    assert!(rows[0]["error_band"].is_object(), "{c}");
    assert!(rows[1]["error_band"].is_object(), "{c}");
    assert!(
        rows[1]["ratio_to_baseline"]["throughput_bands_overlap"].is_boolean(),
        "{c}"
    );
    // no Cerebras training case is in the check set: unvalidated
    assert!(rows[2]["feasible"].as_bool().unwrap_or(false), "{c}");
    assert!(rows[2]["error_band"].is_null(), "{c}");
    assert!(
        rows[2]["ratio_to_baseline"]["throughput_bands_overlap"].is_null(),
        "{c}"
    );
}
