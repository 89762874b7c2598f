//! Issue 45's diagnostics, end to end (in `tests/it/diagnostics.rs` style; the files live under
//! `tests/bad/several/`, which that test's corpus walk leaves alone): every unknown field of a
//! file at once, the right hint when an architecture is given as a workload or the other way
//! round, did-you-mean for a misspelt variant, and the honest-defaults warnings of `check` (a
//! figure left to a default that shipped parts give; a fabric whose topology contradicts its
//! switches and in-network reduction).
//!
//! Regenerate with `INSTA_UPDATE=always cargo test --release --test it diagnostics_ux::`.

use std::process::Output;

use crate::common::tessera;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The file kinds list grows as tessera learns more: snapshot it as a name.
fn stable(s: &str) -> String {
    s.replace(&tessera::check::KINDS.join(", "), "{KINDS}")
}

#[test]
fn every_unknown_field_of_a_file_at_once() {
    let f = "tests/bad/several/unknown-fields.ron";
    let out = tessera(&["check", f]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    for (line, field) in [(27, "colour"), (30, "nodse"), (35, "bandwith")] {
        assert!(
            err.contains(&format!("{f}:{line}:"))
                && err.contains(&format!("unknown field `{field}`")),
            "{field} at line {line}:\n{err}"
        );
    }
    // the misspellings get their suggestions; the field then missing is not reported again
    assert!(err.contains("did you mean `nodes`?"), "{err}");
    assert!(err.contains("did you mean `bandwidth`?"), "{err}");
    assert!(!err.contains("missing field"), "{err}");
    insta::assert_snapshot!("several_unknown_fields", stable(&err));
}

#[test]
fn an_architecture_given_as_a_workload_says_so() {
    let out = tessera(&[
        "estimate",
        "--arch",
        "architectures/dgx-h100.ron",
        "--workload",
        "architectures/dgx-h100.ron",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("expected a `Workload` file, found a `System`"),
        "{err}"
    );
    assert!(err.contains("give it as `--arch FILE`"), "{err}");
    assert!(!err.contains("without a name"), "{err}");
    insta::assert_snapshot!("architecture_as_workload", stable(&err));

    let out = tessera(&[
        "estimate",
        "--arch",
        "workloads/llama3.1-8b-serving.ron",
        "--workload",
        "workloads/llama3.1-8b-serving.ron",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("expected a `System` file, found a `Workload`"),
        "{err}"
    );
    assert!(err.contains("give it as `--workload FILE`"), "{err}");
}

#[test]
fn a_misspelt_variant_gets_a_suggestion() {
    let out = tessera(&["check", "tests/bad/several/misspelt-variant.ron"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("unknown variant `Swiched`"), "{err}");
    assert!(err.contains("did you mean `Switched`?"), "{err}");
}

#[test]
fn check_warns_where_a_part_leaves_a_figure_shipped_parts_give() {
    let f = "tests/bad/several/device-without-fp8-efficiency.ron";
    let out = tessera(&["check", f]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning: `efficiency.low_precision_matmul` is left out")
            && err.contains("architectures/parts/"),
        "{err}"
    );
    assert!(
        err.contains("hint: add `efficiency.low_precision_matmul`"),
        "{err}"
    );
    let denied = tessera(&["check", "--deny-warnings", f]);
    assert_eq!(denied.status.code(), Some(1));
    // the part it was written from gives it: no such warning
    let out = tessera(&["check", "architectures/parts/h100-sxm.ron"]);
    assert!(!stderr(&out).contains("is left out"), "{}", stderr(&out));
}

#[test]
fn check_warns_where_a_fabric_contradicts_its_topology() {
    let out = tessera(&["check", "tests/bad/several/full-mesh-with-switches.ron"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("18 switches on a `FullMesh` fabric of direct links"),
        "{err}"
    );
    assert!(
        err.contains("`in_network_reduction` on a `FullMesh` fabric"),
        "{err}"
    );
    insta::assert_snapshot!("full_mesh_with_switches", stable(&err));
}

#[test]
fn the_estimate_counts_its_figures_by_source() {
    let out = tessera(&[
        "estimate",
        "--arch",
        "architectures/dgx-h100.ron",
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // By hand, over dgx-h100.ron, parts/h100-sxm.ron and parts/dgx-h100-node.ron (figures outside
    // comments): `@assumed` 4 + 5 + 8 = 17, and the cost block's node price and utilisation 2;
    // `@fitted-h100-bf16` and `@fitted-h100-fp8` 2 (the bf16 and fp8 efficiencies); every other `@key` 1 + 12 + 4 = 17 (the H100's
    // `collective_compute_share` among them), and the cost block's GPU price, facility capital
    // (`@cw-dc-cost-2025`), life and rental 4; left to a default: the H100's `efficiency.vector`
    // and `dvfs` = 2. The H100's attention-kernel rates (3 kernels × 4 series × 6 lengths = 72,
    // under their kernel's `source`, "fa2-bench" or "fa3-bench") are sourced too: 21 + 72.
    assert_eq!(
        v["figures"],
        serde_json::json!({"sourced": 93, "assumed": 19, "fitted": 2, "defaulted": 2})
    );
}
