//! A recompute policy of its own (`recompute: Ops([...])`, after JAX remat policies): the
//! backward re-runs the named parts of each layer and keeps what the others produce. Hand counts
//! of the FLOPs it re-runs and the activations it keeps on a dense 4-layer model on 8 GPUs, and
//! its laws: re-running every part is full recomputation, to the bit; each part added re-runs
//! more and keeps less.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use approx::assert_relative_eq;
use tessera::engine::lower::lower;
use tessera::engine::program::{Phase, Program};
use tessera::model::mapping::{Mapping, Recompute};
use tessera::vocab::{LayerPart, Parts};

use crate::common;

use crate::common::NODE_8 as SYSTEM;

/// 4 layers, a gated FFN, GQA, flash attention, no dropout; global batch 16 at micro-batch 2.
const WORKLOAD: &str = r#"Workload(
    version: 1, name: "test", source: "t", sources: { "t": "test fixture" },
    model: Transformer(layers: 4, hidden: 4096, heads: 32, kv_heads: 8, ffn: 14336, gated_ffn: true, vocab: 32000),
    task: Training(seq_len: 2048, global_batch: 16, target: Steps(10), flash_attention: true, dropout: false),
)"#;

const TOK: f64 = 2.0 * 2048.0;
const H: f64 = 4096.0;
const FFN: f64 = 14336.0;
const KVD: f64 = 8.0 * 128.0;
const LAYERS: f64 = 4.0;

fn program(recompute: Recompute, tp: u64, sp: bool) -> Program {
    let (sys, w) = common::load_texts(SYSTEM, WORKLOAD);
    let m = Mapping {
        dp: 8 / tp,
        tp,
        sp,
        micro_batch: 2,
        recompute,
        ..Mapping::single()
    };
    lower(&sys, &w, &m, 8).unwrap_or_else(|r| panic!("{recompute}: {r}"))
}

fn ops(parts: &[LayerPart]) -> Recompute {
    Recompute::Ops(Parts::of(parts))
}

/// FLOPs the recomputation re-runs per micro-batch on one device.
fn recomputed_flops(p: &Program) -> f64 {
    common::recomputed_flops(p)
}

fn step_time(p: &Program) -> f64 {
    common::step_time_on(SYSTEM, p, 8)
}

#[test]
fn every_part_re_run_is_full_recomputation() {
    let all = ops(&LayerPart::ALL);
    for (tp, sp) in [(1, false), (2, false), (2, true)] {
        let (a, f) = (program(all, tp, sp), program(Recompute::Full, tp, sp));
        assert_eq!(recomputed_flops(&a), recomputed_flops(&f));
        assert_eq!(a.footprint.activations, f.footprint.activations);
        assert_eq!(step_time(&a), step_time(&f), "tp {tp} sp {sp}");
        let names = |p: &Program| p.ops.iter().map(|o| o.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&a), names(&f));
    }
}

#[test]
fn ffn_up_alone_re_runs_the_gate_and_up_gemms() {
    // at tp 1: 2·tok·h·ffn FLOPs for each of the gate and the up projection, per layer
    let p = program(ops(&[LayerPart::FfnUp]), 1, false);
    assert_relative_eq!(
        recomputed_flops(&p),
        LAYERS * 2.0 * (2.0 * TOK * H * FFN),
        max_relative = 1e-12
    );
    let r: Vec<_> = p
        .ops
        .iter()
        .filter(|o| o.phase == Phase::Recompute)
        .collect();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].name, "recompute: ffn up");
    // the down projection alone: the other third
    let d = program(ops(&[LayerPart::FfnDown]), 1, false);
    assert_relative_eq!(
        recomputed_flops(&d),
        LAYERS * 2.0 * TOK * H * FFN,
        max_relative = 1e-12
    );
}

#[test]
fn a_policy_keeps_the_layer_input_and_what_it_does_not_re_run() {
    // bf16 activations, tp 1: per token the layer input (h), plus what each part left out
    // produces. MaxText's `qkv_proj_offloaded` keeps Q, K and V and re-runs the rest.
    let e = 2.0;
    // the one stage also holds a micro-batch's logits in fp32
    let logits = TOK * 32000.0 * 4.0;
    let keep_qkv = program(
        ops(&[
            LayerPart::Attention,
            LayerPart::OutProj,
            LayerPart::FfnUp,
            LayerPart::FfnDown,
            LayerPart::Elementwise,
        ]),
        1,
        false,
    );
    let per_layer = TOK * (H + (H + 2.0 * KVD)) * e;
    assert_relative_eq!(
        keep_qkv.footprint.activations,
        LAYERS * per_layer + logits,
        max_relative = 1e-12
    );
    let full = program(Recompute::Full, 1, false);
    assert_relative_eq!(
        full.footprint.activations,
        LAYERS * TOK * H * e + logits,
        max_relative = 1e-12
    );
    // re-running the FFN's input projections only keeps all but their outputs (gate and up,
    // 2·ffn per token)
    let none = program(Recompute::None, 1, false);
    let up = program(ops(&[LayerPart::FfnUp]), 1, false);
    assert_relative_eq!(
        none.footprint.activations - up.footprint.activations,
        LAYERS * TOK * 2.0 * FFN * e,
        max_relative = 1e-9
    );
}

/// Each part added to a policy re-runs at least as much and keeps at most as much, at every
/// tensor-parallel layout: over all 64 subsets and each part not yet in them.
#[test]
fn adding_a_part_never_re_runs_less_nor_keeps_more() {
    for (tp, sp) in [(1, false), (2, true)] {
        for bits in 0u8..64 {
            let set: Vec<LayerPart> = LayerPart::ALL
                .into_iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .map(|(_, p)| p)
                .collect();
            let base = if set.is_empty() {
                program(Recompute::None, tp, sp)
            } else {
                program(ops(&set), tp, sp)
            };
            for extra in LayerPart::ALL.into_iter().filter(|p| !set.contains(p)) {
                let mut more = set.clone();
                more.push(extra);
                let p = program(ops(&more), tp, sp);
                let ctx = format!("tp {tp} sp {sp}: {set:?} + {extra:?}");
                assert!(recomputed_flops(&p) >= recomputed_flops(&base), "{ctx}");
                assert!(
                    p.footprint.activations <= base.footprint.activations * (1.0 + 1e-12),
                    "{ctx}"
                );
                assert!(step_time(&p) >= step_time(&base) * (1.0 - 1e-12), "{ctx}");
            }
        }
    }
}

#[test]
fn an_empty_policy_is_an_error_with_its_place() {
    let mapping = "Mapping(version: 1, source: \"t\", sources: { \"t\": \"test\" }, tp: 1,\n    recompute: Ops([]))\n";
    let dir = common::scratch_dir("tessera-recompute-policy");
    let path = dir.join("empty.ron");
    std::fs::write(&path, mapping).unwrap();
    let out = common::tessera(&["check", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("empty.ron:2:"), "{err}");
    assert!(err.contains("names no part of the layer"), "{err}");
    assert!(err.contains("or write `recompute: None`"), "{err}");
}
