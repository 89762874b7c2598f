//! Hybrid sharding (`shard: N`): ZeRO shares the model state out over groups of N data-parallel
//! ranks and replicates it over the others (PyTorch HSDP, torchtitan's dp_shard × dp_replicate,
//! MaxText's ici_fsdp × ici_data). Hand counts on a dense 4-layer model over 8 GPUs: the state
//! per device, the gathers and reduce-scatters inside a group, the replicas' all-reduce of each
//! shard; the whole group is the old mapping to the bit; and the law that a smaller shard group
//! never holds less.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use approx::assert_relative_eq;
use tessera::engine::cpu::eval;
use tessera::engine::lower::{lower, machine};
use tessera::engine::program::{CollKind, Program, Role};
use tessera::model::mapping::Mapping;

use crate::common;

use crate::common::NODE_8 as SYSTEM;

/// 4 layers, bf16 weights and gradients, 12 bytes of optimizer state per parameter (the
/// default); global batch 8 over dp 8 at micro-batch 1: one micro-batch per step.
const WORKLOAD: &str = r#"Workload(
    version: 1, name: "test", source: "t", sources: { "t": "test fixture" },
    model: Transformer(layers: 4, hidden: 4096, heads: 32, kv_heads: 8, ffn: 14336, gated_ffn: true, vocab: 32000),
    task: Training(seq_len: 2048, global_batch: 8, target: Steps(10), flash_attention: true, dropout: false),
)"#;

/// Parameters of the model (untied embedding and head, no biases).
fn params() -> f64 {
    let (h, f, kv, l, v) = (4096.0, 14336.0, 8.0 * 128.0, 4.0, 32000.0);
    l * (h * (h + 2.0 * kv) + h * h + 3.0 * h * f) + 2.0 * v * h
}

fn mapping(zero: u8, shard: u64) -> Mapping {
    Mapping {
        dp: 8,
        zero,
        shard,
        micro_batch: 1,
        overlap_grad_reduce: true,
        ..Mapping::single()
    }
}

fn program(zero: u8, shard: u64) -> Program {
    let (sys, w) = common::load_texts(SYSTEM, WORKLOAD);
    lower(&sys, &w, &mapping(zero, shard), 8).unwrap_or_else(|r| panic!("shard {shard}: {r}"))
}

fn step_time(p: &Program) -> f64 {
    let (sys, _) = common::load_texts(SYSTEM, WORKLOAD);
    eval(p, &machine(&sys, 8)).step_time
}

/// Ranks of a collective's group.
fn ranks(c: &tessera::engine::program::Comm) -> f64 {
    c.inner * c.outer
}

#[test]
fn the_whole_data_parallel_group_is_the_old_mapping() {
    for zero in 0..=3 {
        let (a, b) = (program(zero, 0), program(zero, 8));
        assert_eq!(a.footprint.total(), b.footprint.total(), "zero {zero}");
        assert_eq!(step_time(&a), step_time(&b), "zero {zero}");
        assert_eq!(a.comms.len(), b.comms.len(), "zero {zero}");
    }
}

#[test]
fn zero_three_in_groups_of_four_shards_over_four_and_all_reduces_each_shard_over_two() {
    let p = program(3, 4);
    let n = params();
    // weights (bf16), gradients (bf16) and optimizer state (12 B) shared out over 4, plus two
    // layers' weights gathered whole beside the shard (gather buffers over the group of 4)
    let layer = 4096.0 * (4096.0 + 2.0 * 1024.0) + 4096.0 * 4096.0 + 3.0 * 4096.0 * 14336.0;
    let state = n * (2.0 + 2.0 + 12.0) / 4.0 + 2.0 * layer * (1.0 - 1.0 / 4.0) * 2.0;
    let f = &p.footprint;
    assert_relative_eq!(f.state(), state, max_relative = 1e-12);

    let by = |role: Role| p.comms.iter().filter(move |c| c.role == role);
    // the weights gathered before the forward and the backward, inside the group of 4 (each
    // pass's first layer apart, exposed: `comms::weight_gathers`): twice the bf16 weights
    for c in by(Role::WeightGather) {
        assert_eq!(ranks(c), 4.0, "{}", c.name);
    }
    let gathered: f64 = by(Role::WeightGather).map(|c| c.bytes * c.count).sum();
    assert_relative_eq!(gathered, 2.0 * n * 2.0, max_relative = 1e-12);
    assert!(by(Role::WeightGather).count() > 0);
    // the gradients reduce-scattered inside the group, their shard all-reduced over the 2 groups
    let rs: Vec<_> = by(Role::GradientReduction)
        .filter(|c| c.kind == CollKind::ReduceScatter)
        .collect();
    let ar: Vec<_> = by(Role::GradientReduction)
        .filter(|c| c.kind == CollKind::AllReduce)
        .collect();
    assert!(!rs.is_empty() && !ar.is_empty());
    for c in &rs {
        assert_eq!(ranks(c), 4.0);
    }
    for c in &ar {
        assert_eq!(ranks(c), 2.0);
        assert!(
            c.name.starts_with("dp replica gradient all-reduce"),
            "{}",
            c.name
        );
    }
    let per_step =
        |cs: &[&tessera::engine::program::Comm]| common::bytes_per_step(&p, cs.iter().copied());
    assert_relative_eq!(per_step(&rs), n * 2.0, max_relative = 1e-12);
    assert_relative_eq!(per_step(&ar), n * 2.0 / 4.0, max_relative = 1e-12);
    // a bucket is all-reduced once reduce-scattered: the step's last one is exposed in both
    let exposed = |cs: &[&tessera::engine::program::Comm]| {
        cs.iter()
            .filter(|c| c.overlap == tessera::engine::program::Overlap::None)
            .count()
    };
    assert_eq!(exposed(&rs), 1);
    assert_eq!(exposed(&ar), 1);
}

/// At ZeRO 1 a shard group of one shards nothing: the optimizer state is whole on every rank,
/// no parameter is gathered, and the gradients are all-reduced over all 8 as at ZeRO 0.
#[test]
fn a_shard_group_of_one_is_plain_data_parallelism() {
    let (p, z0) = (program(1, 1), program(0, 0));
    assert_eq!(p.footprint.state(), z0.footprint.state());
    assert!(!p.comms.iter().any(|c| c.role == Role::ParameterGather));
    let ar: Vec<_> = p
        .comms
        .iter()
        .filter(|c| c.role == Role::GradientReduction)
        .collect();
    assert!(ar
        .iter()
        .all(|c| c.kind == CollKind::AllReduce && ranks(c) == 8.0));
    assert_relative_eq!(step_time(&p), step_time(&z0), max_relative = 1e-9);
}

/// A smaller shard group never holds less state per device, at every ZeRO stage.
#[test]
fn a_smaller_shard_group_never_holds_less() {
    for zero in 1..=3 {
        let mut last = 0.0;
        for shard in [8, 4, 2, 1] {
            let s = program(zero, shard).footprint.state();
            assert!(s >= last, "zero {zero} shard {shard}: {s} < {last}");
            last = s;
        }
    }
}

#[test]
fn a_group_that_does_not_divide_or_shards_nothing_is_infeasible_with_its_reason() {
    let plan = tessera::model::mapping::MappingPlan {
        dp: Some(8),
        shard: Some(3),
        zero: Some(3),
        ..Default::default()
    };
    let err = Mapping::resolve(&plan, 8, 1).unwrap_err();
    assert!(
        err.contains("shard group of 3 ranks does not divide"),
        "{err}"
    );
    let plan = tessera::model::mapping::MappingPlan {
        shard: Some(4),
        zero: Some(0),
        ..plan
    };
    let err = Mapping::resolve(&plan, 8, 1).unwrap_err();
    assert!(err.contains("shards nothing at ZeRO 0"), "{err}");
}
