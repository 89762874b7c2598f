//! Block recomputation (`recompute_layers`, Megatron-Core's `recompute_method: block` with
//! `recompute_num_layers`): only the first n layers of each model chunk run the `recompute`
//! policy, the others keep every activation. Hand counts on an 8-layer model: the FLOPs re-run
//! and the activations kept are the policy's for those layers and none's for the rest; more
//! recomputed layers never shorten a step nor keep more; a policy-less count is an error.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a test: may use the disk

use approx::assert_relative_eq;
use tessera::engine::lower::lower;
use tessera::engine::program::Program;
use tessera::model::mapping::{Mapping, Recompute};

use crate::common;
use crate::common::NODE_8 as SYSTEM;

/// 8 layers, a gated FFN, GQA, flash attention, no dropout; global batch 16 at micro-batch 2.
const WORKLOAD: &str = r#"Workload(
    version: 1, name: "test", source: "t", sources: { "t": "test fixture" },
    model: Transformer(layers: 8, hidden: 4096, heads: 32, kv_heads: 8, ffn: 14336, gated_ffn: true, vocab: 32000),
    task: Training(seq_len: 2048, global_batch: 16, target: Steps(10), flash_attention: true, dropout: false),
)"#;

fn program(recompute: Recompute, layers: Option<u64>, pp: u64, interleave: u64) -> Program {
    let (sys, w) = common::load_texts(SYSTEM, WORKLOAD);
    let m = Mapping {
        dp: 8 / pp,
        pp,
        interleave,
        micro_batch: 2,
        recompute,
        recompute_layers: layers,
        ..Mapping::single()
    };
    lower(&sys, &w, &m, 8).unwrap_or_else(|r| panic!("{recompute} {layers:?}: {r}"))
}

/// One stage of 8 layers: n recomputed layers re-run n/8 of full recomputation's FLOPs, and keep
/// n/8 of its activations plus (8 − n)/8 of what no recomputation keeps. Counts above the
/// stage's layers recompute them all; an absent count is every layer.
#[test]
fn the_first_layers_run_the_policy_and_the_rest_keep_everything() {
    let full = program(Recompute::Full, None, 1, 1);
    let none = program(Recompute::None, None, 1, 1);
    let (f_flops, f_act, n_act) = (
        common::recomputed_flops(&full),
        full.footprint.activations,
        none.footprint.activations,
    );
    assert!(f_flops > 0.0 && f_act < n_act);
    for n in [1u64, 3, 8] {
        let p = program(Recompute::Full, Some(n), 1, 1);
        let share = n as f64 / 8.0;
        assert_relative_eq!(
            common::recomputed_flops(&p),
            share * f_flops,
            max_relative = 1e-12
        );
        assert_relative_eq!(
            p.footprint.activations,
            share * f_act + (1.0 - share) * n_act,
            max_relative = 1e-12
        );
    }
    let all = program(Recompute::Full, Some(21), 1, 1);
    assert_eq!(common::recomputed_flops(&all), f_flops);
    assert_eq!(all.footprint.activations, f_act);
    assert_eq!(
        common::step_time_on(SYSTEM, &all, 8),
        common::step_time_on(SYSTEM, &full, 8)
    );
}

/// Under an interleaved schedule the count is per model chunk: 2 stages × 2 chunks of 2 layers,
/// one recomputed layer a chunk is half of each stage's layers.
#[test]
fn the_count_is_per_model_chunk() {
    let full = program(Recompute::Full, None, 2, 2);
    let half = program(Recompute::Full, Some(1), 2, 2);
    assert_relative_eq!(
        common::recomputed_flops(&half),
        0.5 * common::recomputed_flops(&full),
        max_relative = 1e-12
    );
}

/// The laws: each layer more recomputed re-runs more, keeps less and never shortens the step.
#[test]
fn more_recomputed_layers_never_shorten_a_step_nor_keep_more() {
    let mut last: Option<(f64, f64, f64)> = None;
    for n in 1..=8u64 {
        let p = program(Recompute::Full, Some(n), 1, 1);
        let now = (
            common::recomputed_flops(&p),
            p.footprint.activations,
            common::step_time_on(SYSTEM, &p, 8),
        );
        if let Some((flops, act, t)) = last {
            assert!(now.0 > flops, "{n}: re-runs {} after {flops}", now.0);
            assert!(now.1 < act, "{n}: keeps {} after {act}", now.1);
            assert!(now.2 >= t * (1.0 - 1e-12), "{n}: {} s after {t} s", now.2);
        }
        last = Some(now);
    }
}

/// A count with nothing to recompute, or of no layers, is an error at its place in a mapping
/// file; set with `--set`, the mapping cannot run and says why.
#[test]
fn a_count_without_a_policy_is_an_error() {
    let dir = common::scratch_dir("recompute-layers");
    for (body, want) in [
        (
            "recompute_layers: 4",
            "`recompute_layers` names the layers that run `recompute`, and the mapping recomputes nothing",
        ),
        ("recompute: Full, recompute_layers: 0", "`recompute_layers` must be at least 1"),
    ] {
        let file = dir.join("m.ron");
        std::fs::write(&file, format!("Mapping(version: 1, tp: 1, {body})")).unwrap();
        common::refused(&["check", file.to_str().unwrap()], &["m.ron:1:", want]);
    }
    // through `--set`, a mapping that cannot run: an infeasible result with its reason
    let args = [
        "estimate",
        "--arch",
        "architectures/dgx-h100.ron",
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
        "--set",
        "mapping.recompute_layers=4",
        "--set",
        "mapping.recompute=None",
        "--format",
        "json",
    ];
    let v = common::stdout_json(&args, &common::tessera_ok(&args));
    assert_eq!(v["feasible"], false, "{v}");
    assert_eq!(v["reason_code"], "mapping", "{v}");
    assert!(
        v["reason"].as_str().unwrap().contains("recomputes nothing"),
        "{v}"
    );
}
