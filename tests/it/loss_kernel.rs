//! The loss over the vocabulary as its own memory-bound passes (`ops::loss_bytes_per_logit`):
//! hand-checked bytes for both ways a stack computes it and for masked language modelling's
//! predicted positions, and the laws that a fused kernel never makes a step slower and more
//! predicted positions never make it shorter.

use approx::assert_relative_eq;
use proptest::prelude::*;
use tessera::engine::cpu::eval;
use tessera::engine::lower::{loss_bytes_per_logit, lower, machine};
use tessera::engine::program::*;
use tessera::model::mapping::Mapping;
use tessera::model::system::{Software, System};
use tessera::model::workload::Workload;
use tessera::vocab::LossKernel;

use crate::common;

/// A 1.3B-class model with a 32,000-token vocabulary, sequence 2048, 8 sequences a step.
const WORKLOAD: &str = r#"Workload(
    version: 1, name: "loss 1B", source: "t", sources: { "t": "test fixture" },
    model: Transformer(layers: 24, hidden: 2048, heads: 16, vocab: 32000),
    task: Training(seq_len: 2048, global_batch: 8, target: Samples(800)),
)"#;

fn fixtures(predicted: Option<f64>) -> (System, Workload) {
    let w = match predicted {
        Some(p) => WORKLOAD.replace(
            "target: Samples(800)",
            &format!("target: Samples(800), predicted: \"{p}\""),
        ),
        None => WORKLOAD.to_string(),
    };
    common::load_texts(common::NODE_8, &w)
}

fn on_stack(mut sys: System, loss_kernel: LossKernel) -> System {
    sys.with_software(Software {
        name: "test stack".into(),
        step_overhead: 0.0,
        mesh_relay_time: 0.0,
        pipeline_stage_time: 0.0,
        memory_reserve: 0.0,
        attention_kernel: None,
        loss_kernel,
        fitted: Vec::new(),
    });
    sys
}

fn tp(tp: u64) -> Mapping {
    Mapping {
        dp: 8 / tp,
        tp,
        sp: tp > 1,
        ..Mapping::single()
    }
}

fn op<'a>(p: &'a Program, name: &str) -> &'a Op {
    p.ops.iter().find(|o| o.name == name).unwrap_or_else(|| {
        panic!(
            "no `{name}` in {:?}",
            p.ops.iter().map(|o| &o.name).collect::<Vec<_>>()
        )
    })
}

const FWD: &str = "loss (softmax cross-entropy)";
const BWD: &str = "loss (softmax cross-entropy, backward)";

#[test]
fn the_upcast_loss_moves_52_bytes_per_logit_on_its_own_passes() {
    // micro-batch 1: 2048 positions × 32,000 / tp 2 = 32,768,000 logits per rank
    let (sys, w) = fixtures(None);
    let p = lower(&sys, &w, &tp(2), 8).unwrap();
    let logits = 2048.0 * 32000.0 / 2.0;
    let (f, b) = (op(&p, FWD), op(&p, BWD));
    assert_relative_eq!(f.act_bytes, 38.0 * logits);
    assert_relative_eq!(b.act_bytes, 14.0 * logits);
    assert_relative_eq!(f.flops, 5.0 * logits);
    assert_relative_eq!(b.flops, logits);
    for o in [f, b] {
        assert!(
            !o.matrix && o.weight_bytes == 0.0 && o.count == 1.0,
            "{o:?}"
        );
        assert_eq!(o.section, Section::MicroBatch);
    }
    assert_eq!((f.phase, b.phase), (Phase::Forward, Phase::Backward));
    // the table is what the lowering charges
    assert_eq!(loss_bytes_per_logit(LossKernel::Upcast), [38.0, 14.0]);
}

#[test]
fn a_fused_kernel_reads_the_logits_once_each_way() {
    let (sys, w) = fixtures(None);
    let p = lower(&on_stack(sys, LossKernel::Fused), &w, &tp(2), 8).unwrap();
    let logits = 2048.0 * 32000.0 / 2.0;
    // bf16 logits: read forward (2 bytes); read and the gradient written backward (2 + 2)
    assert_relative_eq!(op(&p, FWD).act_bytes, 2.0 * logits);
    assert_relative_eq!(op(&p, BWD).act_bytes, 4.0 * logits);
}

#[test]
fn masked_language_modelling_runs_the_head_and_loss_on_its_predicted_positions() {
    let (sys, all) = fixtures(None);
    let (_, masked) = fixtures(Some(0.15));
    let p1 = lower(&sys, &all, &tp(1), 8).unwrap();
    let p = lower(&sys, &masked, &tp(1), 8).unwrap();
    for name in ["lm head", "lm head (backward)", FWD, BWD] {
        assert_relative_eq!(
            op(&p, name).flops,
            0.15 * op(&p1, name).flops,
            max_relative = 1e-12
        );
    }
    assert_relative_eq!(op(&p, FWD).act_bytes, 0.15 * 38.0 * 2048.0 * 32000.0);
    // the layers are untouched: every position runs through them
    assert_relative_eq!(op(&p, "ffn").flops, op(&p1, "ffn").flops);
}

fn step(sys: &System, w: &Workload, m: &Mapping) -> f64 {
    eval(&lower(sys, w, m, 8).unwrap(), &machine(sys, 8)).step_time
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// A fused loss moves fewer bytes than the upcast passes, so it never makes a step slower.
    #[test]
    fn a_fused_loss_never_slows_a_step(k in 0usize..4) {
        let (sys, w) = fixtures(None);
        let m = tp(1 << k);
        let upcast = step(&sys, &w, &m);
        let fused = step(&on_stack(sys, LossKernel::Fused), &w, &m);
        prop_assert!(fused <= upcast * (1.0 + 1e-12), "{fused} > {upcast}");
    }

    /// More predicted positions are more work for the head and loss: never a shorter step.
    #[test]
    fn more_predicted_positions_never_shorten_a_step(a in 0.01f64..1.0, b in 0.01f64..1.0) {
        let (lo, hi) = (a.min(b), a.max(b));
        let (sys, w_lo) = fixtures(Some(lo));
        let (_, w_hi) = fixtures(Some(hi));
        let m = tp(2);
        let (s_lo, s_hi) = (step(&sys, &w_lo, &m), step(&sys, &w_hi, &m));
        prop_assert!(s_lo <= s_hi * (1.0 + 1e-12), "{lo}: {s_lo} > {hi}: {s_hi}");
    }
}
