//! Where gradients and weights are sharded, the collectives follow: ZeRO 2 and 3 (FSDP)
//! reduce-scatter each micro-batch's gradients (a rank keeps only its shard), ZeRO 1 once per
//! step; ZeRO 3 gathers a LoRA run's frozen base weights as it gathers any weights; under a
//! pipeline schedule the weights and gradients stay whole through the step (ZeRO 3 gathers
//! them once, behind the step's first forward). Hand counts of the bytes on a dense 4-layer
//! model trained in 4 micro-batches per step on 8 GPUs, and a law: a step's gradient traffic
//! never falls as the ZeRO stage rises.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use approx::assert_relative_eq;
use tessera::engine::lower::lower;
use tessera::engine::program::{Overlap, Program, Role, Section};
use tessera::model::mapping::Mapping;

use crate::common;

use crate::common::NODE_8 as SYSTEM;

/// 4 layers, bf16 weights and gradients; global batch 32 over dp 8 at micro-batch 1: 4
/// micro-batches per step. `{lora}` is replaced by a LoRA clause or nothing.
const WORKLOAD: &str = r#"Workload(
    version: 1, name: "test", source: "t", sources: { "t": "test fixture" },
    model: Transformer(layers: 4, hidden: 4096, heads: 32, kv_heads: 8, ffn: 14336, gated_ffn: true, vocab: 32000),
    task: Training(seq_len: 2048, global_batch: 32, target: Steps(10), flash_attention: true, dropout: false{lora}),
)"#;

fn program(zero: u8, lora: bool) -> Program {
    program_at(zero, lora, 32)
}

fn program_at(zero: u8, lora: bool, global_batch: u64) -> Program {
    let w = WORKLOAD
        .replace("global_batch: 32", &format!("global_batch: {global_batch}"))
        .replace(
            "{lora}",
            if lora {
                ", lora: (rank: 16, adapted_per_layer: 4)"
            } else {
                ""
            },
        );
    let (sys, w) = common::load_texts(SYSTEM, &w);
    let m = Mapping {
        dp: 8,
        zero,
        micro_batch: 1,
        overlap_grad_reduce: true,
        ..Mapping::single()
    };
    lower(&sys, &w, &m, 8).unwrap_or_else(|r| panic!("zero {zero}: {r}"))
}

/// The gradient reduction's bytes per step, over all its pieces.
fn gradient_bytes_per_step(p: &Program) -> f64 {
    common::bytes_per_step(
        p,
        p.comms.iter().filter(|c| c.role == Role::GradientReduction),
    )
}

/// Parameters of the model (untied embedding and head, no biases): what each rank holds whole
/// at dp without tp.
fn params() -> f64 {
    let (h, f, kv, l, v) = (4096.0, 14336.0, 8.0 * 128.0, 4.0, 32000.0);
    l * (h * (h + 2.0 * kv) + h * h + 3.0 * h * f) + 2.0 * v * h
}

#[test]
fn zero_one_reduces_once_per_step_and_two_and_three_every_micro_batch() {
    let grads = params() * 2.0;
    for zero in [1u8, 2, 3] {
        let p = program(zero, false);
        assert_eq!(p.micro_batches, 4.0);
        let red: Vec<_> = p
            .comms
            .iter()
            .filter(|c| c.role == Role::GradientReduction)
            .collect();
        let per_step = gradient_bytes_per_step(&p);
        // the step's last bucket waits for the end of the last backward: exposed, once
        let last: Vec<_> = red
            .iter()
            .filter(|c| c.section == Section::Step && c.overlap == Overlap::None)
            .collect();
        assert_eq!(last.len(), 1, "zero {zero}: {red:?}");
        assert_eq!(last[0].bytes, 25e6);
        if zero == 1 {
            // the bulk behind the last micro-batch's backward, once per step
            assert_eq!(red.len(), 2, "zero {zero}: {red:?}");
            assert!(red.iter().all(|c| c.section == Section::Step));
            assert_relative_eq!(per_step, grads, max_relative = 1e-9);
        } else {
            // the bulk behind each micro-batch's backward; the other micro-batches' last buckets
            // behind the next forward (3 of every 4)
            assert_eq!(red.len(), 3, "zero {zero}: {red:?}");
            assert!(red.iter().any(|c| c.section == Section::MicroBatch
                && c.overlap == Overlap::Backward
                && c.bytes > 1e9));
            assert!(red.iter().any(|c| c.section == Section::MicroBatch
                && c.overlap == Overlap::Forward
                && c.bytes == 25e6
                && c.count == 0.75));
            assert_relative_eq!(per_step, 4.0 * grads, max_relative = 1e-9);
        }
    }
}

#[test]
fn with_one_micro_batch_per_step_zero_two_reduces_as_zero_one_does() {
    // at global batch 8 (one micro-batch per replica) sharding the gradients moves no byte and
    // hides none more: the same step
    let one = program_at(1, false, 8);
    let two = program_at(2, false, 8);
    assert_eq!(one.micro_batches, 1.0);
    assert_relative_eq!(
        gradient_bytes_per_step(&one),
        gradient_bytes_per_step(&two),
        max_relative = 1e-12
    );
    let (sys, _) = common::load_texts(SYSTEM, &WORKLOAD.replace("{lora}", ""));
    let m = tessera::engine::machine::machine(&sys, 8);
    let (a, b) = (
        tessera::engine::cpu::eval(&one, &m),
        tessera::engine::cpu::eval(&two, &m),
    );
    assert_relative_eq!(a.step_time, b.step_time, max_relative = 1e-12);
}

#[test]
fn a_steps_gradient_traffic_never_falls_as_the_zero_stage_rises() {
    let bytes: Vec<f64> = (0u8..=3)
        .map(|z| gradient_bytes_per_step(&program(z, false)))
        .collect();
    for w in bytes.windows(2) {
        assert!(w[1] >= w[0] * (1.0 - 1e-12), "{bytes:?}");
    }
}

#[test]
fn zero_three_gathers_a_lora_runs_frozen_weights() {
    let gather = |p: &Program| {
        p.comms
            .iter()
            .filter(|c| c.role == Role::WeightGather)
            .map(|c| c.bytes * c.count)
            .sum::<f64>()
    };
    // ZeRO 3: every layer's weights, before its forward and again before its backward, whether
    // the weights are trained or frozen
    let full = program(3, false);
    let lora = program(3, true);
    assert_relative_eq!(gather(&full), 2.0 * params() * 2.0, max_relative = 1e-9);
    assert_relative_eq!(gather(&lora), gather(&full), max_relative = 1e-9);
    // ZeRO 1 keeps the weights whole: no gathers before use, and none of a frozen base after
    // the step
    let lora1 = program(1, true);
    assert_eq!(gather(&lora1), 0.0);
    assert!(lora1.comms.iter().all(|c| c.role != Role::ParameterGather));
}

/// The fixture on dp 4 × pp 2 (two layers a stage), 4 micro-batches per step: under a pipeline
/// schedule.
fn pipelined(zero: u8) -> Program {
    let (sys, w) = common::load_texts(SYSTEM, &WORKLOAD.replace("{lora}", ""));
    let m = Mapping {
        dp: 4,
        pp: 2,
        zero,
        micro_batch: 2,
        overlap_grad_reduce: true,
        ..Mapping::single()
    };
    lower(&sys, &w, &m, 8).unwrap_or_else(|r| panic!("zero {zero}: {r}"))
}

#[test]
fn under_a_pipeline_weights_and_gradients_stay_whole_through_the_step() {
    // PyTorch's pipeline stages keep FSDP's gradients unsynchronised and its gathered weights
    // whole until the step's last backward; torchtitan gathers them once, in the first forward
    let one = pipelined(1);
    assert_eq!(one.micro_batches, 4.0);
    for zero in [2u8, 3] {
        let p = pipelined(zero);
        // the gradients reduced once per step, as ZeRO 1 reduces them
        assert!(p
            .comms
            .iter()
            .filter(|c| c.role == Role::GradientReduction)
            .all(|c| c.section == Section::Step));
        assert_relative_eq!(
            gradient_bytes_per_step(&p),
            gradient_bytes_per_step(&one),
            max_relative = 1e-12
        );
        // whole weights and gradients on every stage; the optimizer state sharded as ZeRO 1's
        for (s, s1) in p.stages.iter().zip(&one.stages) {
            assert_eq!(s.footprint.weights, s1.footprint.weights, "zero {zero}");
            assert_eq!(s.footprint.gradients, s1.footprint.gradients, "zero {zero}");
            assert_eq!(s.footprint.optimizer, s1.footprint.optimizer, "zero {zero}");
        }
    }
    // ZeRO 3 gathers a stage's weights once per step, behind the step's first forward, and has
    // no gather after the update; ZeRO 1 and 2 gather the updated weights after it
    let gathers = |p: &Program, role: Role| -> Vec<(Section, Overlap, f64)> {
        p.comms
            .iter()
            .filter(|c| c.role == role)
            .map(|c| (c.section, c.overlap, c.count))
            .collect()
    };
    let three = pipelined(3);
    assert!(!gathers(&three, Role::WeightGather).is_empty());
    assert!(gathers(&three, Role::WeightGather)
        .iter()
        .all(|g| *g == (Section::Step, Overlap::Forward, 1.0)));
    assert!(gathers(&three, Role::ParameterGather).is_empty());
    assert_relative_eq!(
        common::bytes_per_step(
            &three,
            three.comms.iter().filter(|c| c.role == Role::WeightGather)
        ),
        common::bytes_per_step(
            &one,
            one.comms.iter().filter(|c| c.role == Role::ParameterGather)
        ),
        max_relative = 1e-12
    );
    assert!(gathers(&one, Role::WeightGather).is_empty());
    // without the pipeline, ZeRO 3 keeps sharding them: two gathers a micro-batch, one behind
    // its forward and one behind its backward, each pass's first layer (of 4) exposed, a
    // smaller footprint than ZeRO 1's
    let flat = program(3, false);
    let mbs = Section::MicroBatch;
    assert_eq!(
        gathers(&flat, Role::WeightGather),
        vec![
            (mbs, Overlap::Forward, 1.0),
            (mbs, Overlap::Backward, 1.0),
            (mbs, Overlap::None, 2.0)
        ]
    );
    let pieces: Vec<f64> = flat
        .comms
        .iter()
        .filter(|c| c.role == Role::WeightGather)
        .map(|c| c.bytes)
        .collect();
    assert_relative_eq!(pieces[0], 3.0 * pieces[2], max_relative = 1e-12);
    assert!(flat.footprint.weights < program(1, false).footprint.weights);
}
