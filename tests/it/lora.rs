//! LoRA's own tensor-parallel collectives (`Role::LoraAdapter`): hand-checked on a small
//! sequence-parallel layout (their bytes and counts as NeMo's `ParallelLinearAdapter` issues
//! them), absent where there is nothing to gather, exposed whatever the framework overlaps, and
//! the law that a faster scale-up link never slows a LoRA step.

use approx::assert_relative_eq;
use proptest::prelude::*;
use tessera::engine::cpu::eval;
use tessera::engine::lower::{lower, machine};
use tessera::engine::program::*;
use tessera::engine::table as t;
use tessera::model::mapping::Mapping;
use tessera::model::workload::Workload;

use crate::common;

/// One 8-GPU node, NVLink-switched.
const SYSTEM: &str = r#"System(
    version: 1, name: "lora fixture", source: "t", sources: { "t": "test fixture" },
    device: Device(
        name: "gpu", source: "t",
        die: Die(name: "die", source: "t", compute: [(name: "tc", kind: Matrix, peak: { "bf16": "989.4 TFLOP/s" })]),
        memory: [(name: "HBM", kind: Hbm, attach: Package, capacity: "80 GB", bandwidth: "3.35 TB/s")],
        tdp: "700 W", idle_power: "100 W",
        efficiency: (matmul: "0.7", memory: "0.9", network: "1.0", kernel_overhead: "2 us"),
    ),
    node: Node(name: "node", source: "t", devices: 8, host: (cpus: 2, cpu_tdp: "350 W"), other_power: "1 kW"),
    nodes: 1,
    scale_up: (name: "nvlink", topology: Switched, size: 8, bandwidth: "900 GB/s", counted: BothDirections, latency: "2 us"),
    scale_out: (name: "ib", topology: FatTree, bandwidth: "400 Gb/s", latency: "5 us"),
    facility: (pue: "1.2"),
)"#;

/// A 13B model fine-tuned with rank-16 adapters on the attention block (QKV and output
/// projection: two per layer), sequence 2048.
const WORKLOAD: &str = r#"Workload(
    version: 1, name: "lora 13B", source: "t", sources: { "t": "test fixture" },
    model: Transformer(layers: 40, hidden: 5120, heads: 40, vocab: 51200),
    task: Training(seq_len: 2048, global_batch: 8, target: Samples(800), lora: (rank: 16, adapted_per_layer: 2)),
)"#;

fn fixtures() -> (tessera::model::system::System, Workload) {
    common::load_texts(SYSTEM, WORKLOAD)
}

fn mapping(tp: u64, sp: bool) -> Mapping {
    Mapping {
        dp: 8 / tp,
        tp,
        sp,
        ..Mapping::single()
    }
}

fn adapters(p: &Program) -> Vec<&Comm> {
    p.comms
        .iter()
        .filter(|c| c.role == Role::LoraAdapter)
        .collect()
}

#[test]
fn adapters_on_sequence_parallel_layers_gather_as_nemo_does() {
    let (sys, w) = fixtures();
    let p = lower(&sys, &w, &mapping(4, true), 8).unwrap();
    let a = adapters(&p);
    // bf16 adapter tensors of one micro-batch (one sequence of 2048 tokens): the whole
    // output (tok × h) and the rank-16 intermediate (tok × r)
    let (full, thin) = (2048.0 * 5120.0 * 2.0, 2048.0 * 16.0 * 2.0);
    let got: Vec<(&str, CollKind, f64, f64)> = a
        .iter()
        .map(|c| (c.name.as_ref(), c.kind, c.bytes, c.count))
        .collect();
    assert_eq!(
        got,
        vec![
            // the output-projection adapter: its output gathered forward, and again backward
            ("lora output all-gather", CollKind::AllGather, full, 40.0),
            (
                "lora output all-gather (backward)",
                CollKind::AllGather,
                full,
                40.0
            ),
            // its A linear's row-parallel output, forward
            ("lora rank all-reduce", CollKind::AllReduce, thin, 40.0),
            // both adapters' B-linear input gradients, backward
            (
                "lora rank all-reduce (backward)",
                CollKind::AllReduce,
                thin,
                80.0
            ),
            // the QKV adapter's A output gathered (its input is the gathered layer norm)
            ("lora rank all-gather", CollKind::AllGather, thin, 40.0),
        ]
    );
    for c in &a {
        assert_eq!(c.overlap, Overlap::None, "{}", c.name);
        assert_eq!(c.section, Section::MicroBatch);
        assert_eq!((c.inner, c.outer), (4.0, 1.0), "within the tp group");
    }
}

#[test]
fn nothing_to_gather_without_tensor_or_sequence_parallelism() {
    let (sys, w) = fixtures();
    for (tp, sp) in [(1, false), (4, false)] {
        let p = lower(&sys, &w, &mapping(tp, sp), 8).unwrap();
        assert!(adapters(&p).is_empty(), "tp {tp} sp {sp}");
    }
}

#[test]
fn the_framework_overlap_leaves_them_exposed() {
    let (sys, w) = fixtures();
    let mut m = mapping(4, true);
    m.overlap.tensor_parallel = true;
    let p = lower(&sys, &w, &m, 8).unwrap();
    assert!(!adapters(&p).is_empty());
    for c in adapters(&p) {
        assert_eq!(c.overlap, Overlap::None, "{}", c.name);
    }
}

#[test]
fn they_cost_what_their_links_carry() {
    // Their exposed time is the difference the step sees: dropping them from the program
    // shortens the step by exactly their alpha-beta time (they overlap nothing).
    let (sys, w) = fixtures();
    let p = lower(&sys, &w, &mapping(4, true), 8).unwrap();
    let mach = machine(&sys, 8);
    let with = eval(&p, &mach);
    let mut q = p.clone();
    let own: f64 = adapters(&p)
        .iter()
        .map(|c| tessera::engine::cpu::collective(c, &mach).0 * c.count)
        .sum::<f64>()
        * p.micro_batches;
    q.comms.retain(|c| c.role != Role::LoraAdapter);
    let without = eval(&q, &mach);
    assert!(own > 0.0);
    assert!(with.throttle == 1.0 && without.throttle == 1.0);
    assert_relative_eq!(with.step_time - without.step_time, own, max_relative = 1e-9);
}

proptest! {
    /// A faster scale-up link never slows a LoRA step.
    #[test]
    fn more_scale_up_bandwidth_never_slows_it(k in 1.0f64..8.0) {
        let (sys, w) = fixtures();
        let p = lower(&sys, &w, &mapping(4, true), 8).unwrap();
        let m0 = machine(&sys, 8);
        let mut m1 = m0.clone();
        m1[t::UP_BANDWIDTH] *= k;
        prop_assert!(eval(&p, &m1).step_time <= eval(&p, &m0).step_time * (1.0 + 1e-12));
    }
}
