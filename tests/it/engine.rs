//! Hand-checked engine cases (the arithmetic is written beside each assertion) and properties
//! every estimate must satisfy.

use approx::assert_relative_eq;
use proptest::prelude::*;
use tessera::engine::cpu::{collective, eval};
use tessera::engine::lower::{lower, machine};
use tessera::engine::program::*;
use tessera::engine::table as t;
use tessera::model::mapping::{Mapping, Recompute};
use tessera::model::precision::{Precision, NPREC};
use tessera::model::system::{load_system, MemFs, System};
use tessera::model::workload::Workload;

use crate::common;
use crate::common::{comm, h100};

fn gemm_program(m: f64, n: f64, k: f64) -> Program {
    Program {
        ops: vec![Op {
            name: "gemm".into(),
            matrix: true,
            precision: Precision::Bf16.index(),
            flops: 2.0 * m * n * k,
            occupancy: 1.0,
            weight_bytes: k * n * 2.0,
            act_bytes: (m * k + m * n) * 2.0,
            count: 1.0,
            section: Section::MicroBatch,
            phase: Phase::Forward,
            form: Form::Both,
        }],
        comms: vec![],
        stages: Vec::new(),
        micro_batches: 1.0,
        bubble: 0.0,
        footprint: Footprint::default(),
        devices: 1.0,
        units_per_step: 1.0,
        unit: "samples",
        model_flops_per_step: 2.0 * m * n * k,
        mfu_precision: Precision::Bf16.index(),
        steps: None,
        host_steps: 0.0,
    }
}

#[test]
fn gemm_above_the_ridge_is_compute_bound() {
    // Ridge point: 989.4e12 / 3.35e12 = 295 FLOP/B. An 8192³ GEMM does 2·8192³ = 1.0995e12 FLOP
    // on 3·8192²·2 B = 402.7 MB: 2731 FLOP/B, far above the ridge, so t = 1.0995e12 / 989.4e12.
    let e = eval(&gemm_program(8192.0, 8192.0, 8192.0), &h100());
    assert_relative_eq!(
        e.step_time,
        2.0 * 8192f64.powi(3) / 989.4e12,
        max_relative = 1e-12
    );
    assert_relative_eq!(e.breakdown.compute, e.step_time, max_relative = 1e-12);
    assert_eq!(e.breakdown.memory, 0.0);
    assert_relative_eq!(e.mfu, 1.0, max_relative = 1e-12);
}

#[test]
fn gemm_below_the_ridge_is_memory_bound() {
    // A 16×8192×8192 GEMM (decode-like): 2·16·8192² = 2.147e9 FLOP on
    // (16·8192 + 8192² + 16·8192)·2 B = 134.7 MB: 15.9 FLOP/B, below the ridge, so
    // t = 134.7e6 / 3.35e12 = 40.2 µs (compute alone would take 2.17 µs).
    let e = eval(&gemm_program(16.0, 8192.0, 8192.0), &h100());
    let bytes = (16.0 * 8192.0 + 8192.0 * 8192.0 + 16.0 * 8192.0) * 2.0;
    assert_relative_eq!(e.step_time, bytes / 3.35e12, max_relative = 1e-12);
    assert_relative_eq!(e.breakdown.memory, e.step_time, max_relative = 1e-12);
    assert!(e.step_time > 40e-6 && e.step_time < 40.3e-6);
}

#[test]
fn ring_all_reduce_time() {
    // 1 GB over 8 GPUs at 450 GB/s per direction: 2·(8−1)/8 · 1e9 / 450e9 = 3.889 ms.
    let mut m = h100();
    let (t, up, _) = collective(&comm(CollKind::AllReduce, 1e9, 8.0, 1.0), &m);
    assert_relative_eq!(t, 2.0 * 7.0 / 8.0 * 1e9 / 450e9, max_relative = 1e-12);
    assert_relative_eq!(up, 1.75e9, max_relative = 1e-12);
    // with 1 µs per step: + 2·(8−1)·1 µs = 14 µs
    m[t::UP_LATENCY] = 1e-6;
    let (t2, _, _) = collective(&comm(CollKind::AllReduce, 1e9, 8.0, 1.0), &m);
    assert_relative_eq!(t2 - t, 14e-6, max_relative = 1e-9);
    // In-network reduction (NVLS/SHARP): each GPU sends and receives the buffer once: 1e9 / 450e9.
    m[t::UP_LATENCY] = 0.0;
    m[t::UP_INR] = 1.0;
    let (t3, _, _) = collective(&comm(CollKind::AllReduce, 1e9, 8.0, 1.0), &m);
    assert_relative_eq!(t3, 1e9 / 450e9, max_relative = 1e-12);
}

#[test]
fn hierarchical_all_reduce_time() {
    // 1 GB over 8 GPUs × 4 nodes: ring in the node (2·7/8 · 1e9 / 450e9), then the 1/8 shard
    // across 4 nodes over each GPU's own 50 GB/s NIC (2·3/4 · 125e6 / 50e9).
    let (t, _, out) = collective(&comm(CollKind::AllReduce, 1e9, 8.0, 4.0), &h100());
    let expect = 2.0 * 7.0 / 8.0 * 1e9 / 450e9 + 2.0 * 3.0 / 4.0 * 125e6 / 50e9;
    assert_relative_eq!(t, expect, max_relative = 1e-12);
    assert_relative_eq!(out, 2.0 * 3.0 / 4.0 * 125e6, max_relative = 1e-12);
}

#[test]
fn torus_group_uses_the_dimensions_it_spans() {
    // A 4×4×4 torus. Groups sit on compact sub-boxes: 2 ranks span one dimension (1/3 of the
    // links), 4 ranks a 2×2 square (2/3), 8 or more all three (1).
    let torus = SYSTEM
        .replace(
            r#"(name: "nvlink", topology: Switched, size: 8,"#,
            r#"(name: "ici", topology: Torus, size: 64, dims: [4, 4, 4],"#,
        )
        .replace("nodes: 64,", "nodes: 8,");
    let mut fs = MemFs::default();
    fs.0.insert("t.ron".into(), torus.as_bytes().to_vec());
    let l = load_system("t.ron", &fs);
    assert!(l.diagnostics.is_empty(), "{:?}", l.diagnostics);
    let sys = l.value.unwrap();
    use tessera::engine::lower::place_group;
    assert_relative_eq!(place_group(&sys, 2, 1, 64).2, 1.0 / 3.0);
    assert_relative_eq!(place_group(&sys, 4, 16, 64).2, 2.0 / 3.0);
    assert_relative_eq!(place_group(&sys, 8, 1, 64).2, 1.0);
    assert_relative_eq!(place_group(&sys, 64, 1, 64).2, 1.0);
    // and the all-reduce of a pair runs at a third of the bandwidth:
    let mut c = comm(CollKind::AllReduce, 1e9, 2.0, 1.0);
    c.inner_share = place_group(&sys, 2, 1, 64).2;
    let m = machine(&sys, 64);
    let (t, _, _) = collective(&c, &m);
    let bw = m[t::UP_BANDWIDTH] * m[t::EFF_NETWORK] / 3.0;
    assert_relative_eq!(
        t,
        2.0 * 1.0 / 2.0 * 1e9 / bw + 2.0 * m[t::UP_LATENCY],
        max_relative = 1e-12
    );
}

#[test]
fn full_mesh_group_uses_its_members_links() {
    // 8 GPUs joined all-to-all by 7 links each (xGMI): a pair of them shares one link, 1/7.
    let mesh = SYSTEM.replace(
        r#"topology: Switched, size: 8,"#,
        r#"topology: FullMesh, size: 8,"#,
    );
    let mut fs = MemFs::default();
    fs.0.insert("m.ron".into(), mesh.as_bytes().to_vec());
    let sys = load_system("m.ron", &fs).value.unwrap();
    use tessera::engine::lower::place_group;
    assert_relative_eq!(place_group(&sys, 2, 1, 8).2, 1.0 / 7.0);
    assert_relative_eq!(place_group(&sys, 8, 1, 8).2, 1.0);
}

#[test]
fn the_mapping_order_decides_which_links_a_dimension_uses() {
    // 64 nodes of 8: tp 8 innermost puts tensor parallelism on NVLink (8 ranks, 1 domain) and data
    // parallelism across nodes; swapping them puts the tp all-reduces on InfiniBand instead.
    use tessera::spec::mapping::Dim;
    let (sys, w) = fixtures();
    let m = Mapping {
        dp: 8,
        tp: 8,
        sp: true,
        ..Mapping::single()
    };
    let p = lower(&sys, &w, &m, 64).unwrap();
    let tp = p.comms.iter().find(|c| c.name.starts_with("tp ")).unwrap();
    assert_eq!((tp.inner, tp.outer), (8.0, 1.0));
    let swapped = Mapping {
        order: [Dim::Dp, Dim::Tp, Dim::Cp, Dim::Pp],
        ..m
    };
    let p2 = lower(&sys, &w, &swapped, 64).unwrap();
    let tp2 = p2.comms.iter().find(|c| c.name.starts_with("tp ")).unwrap();
    assert_eq!((tp2.inner, tp2.outer), (1.0, 8.0));
    let mach = machine(&sys, 64);
    assert!(eval(&p2, &mach).step_time > eval(&p, &mach).step_time);
}

#[test]
fn pipeline_bubble() {
    // 64 micro-batches through 8 stages (1F1B): the step is (64 + 8 − 1) micro-batch times and the
    // bubble (8 − 1)/(64 + 7) = 9.9% of it. Interleaving 2 virtual stages halves the bubble.
    let mut p = gemm_program(4096.0, 4096.0, 4096.0);
    p.micro_batches = 64.0;
    p.bubble = 7.0;
    let e = eval(&p, &h100());
    let t_mb = 2.0 * 4096f64.powi(3) / 989.4e12;
    assert_relative_eq!(e.step_time, 71.0 * t_mb, max_relative = 1e-12);
    assert_relative_eq!(
        e.breakdown.bubble / e.step_time,
        7.0 / 71.0,
        max_relative = 1e-12
    );

    let (sys, w) = fixtures();
    let m = Mapping {
        dp: 1,
        tp: 1,
        pp: 8,
        micro_batch: 1,
        ..Mapping::single()
    };
    let p = lower(&sys, &w, &m, 8).unwrap();
    assert_eq!(p.bubble, 7.0);
    assert_eq!(p.micro_batches, 64.0);
    // 40 layers on 8 stages are 5 a stage: interleaving 5 chunks of one layer divides the bubble
    // by 5; 2 chunks are 3 and 2 layers, and the schedule waits on the 3-layer one: 7 / (5 / 3).
    let p5 = lower(&sys, &w, &Mapping { interleave: 5, ..m }, 8).unwrap();
    assert_relative_eq!(p5.bubble, 7.0 / 5.0, max_relative = 1e-12);
    let p2 = lower(&sys, &w, &Mapping { interleave: 2, ..m }, 8).unwrap();
    assert_relative_eq!(p2.bubble, 4.2, max_relative = 1e-12);
}

const SYSTEM: &str = r#"System(
    version: 1, name: "test cluster", source: "t", sources: { "t": "test fixture" },
    device: Device(
        name: "gpu", source: "t",
        die: Die(name: "die", source: "t", compute: [(name: "tc", kind: Matrix, peak: { "bf16": "989.4 TFLOP/s", "fp8": "1978.9 TFLOP/s" })]),
        memory: [(name: "HBM", kind: Hbm, attach: Package, capacity: "80 GB", bandwidth: "3.35 TB/s")],
        tdp: "700 W", idle_power: "100 W",
        efficiency: (matmul: "0.7", memory: "0.9", network: "0.8", kernel_overhead: "2 us"),
    ),
    node: Node(name: "node", source: "t", devices: 8, host: (cpus: 2, cpu_tdp: "350 W"), other_power: "1 kW"),
    nodes: 64,
    scale_up: (name: "nvlink", topology: Switched, size: 8, bandwidth: "900 GB/s", counted: BothDirections, latency: "2 us"),
    scale_out: (name: "ib", topology: FatTree, bandwidth: "400 Gb/s", latency: "5 us"),
    facility: (pue: "1.2"),
)"#;

#[test]
fn a_software_stacks_step_overhead_adds_its_time_at_static_power() {
    // The 8192³ GEMM (2·8192³ / 989.4e12 = 1.111 ms) with a stack that spends 5 ms per optimizer
    // step: a program that is no optimizer step (`host_steps` 0) pays nothing; a training step
    // (1) lasts 1.111 + 5 ms, the 5 ms in `other`. The machine has no energy per FLOP, so the
    // device draws its 100 W static power throughout: energy 100 W × (1.111 + 5) ms, and the
    // stack's time adds exactly 100 W × 5 ms.
    let mut p = gemm_program(8192.0, 8192.0, 8192.0);
    let mut m = h100();
    let base = eval(&p, &m);
    m[t::STEP_OVERHEAD] = 5e-3;
    let serving = eval(&p, &m);
    assert_eq!(serving.step_time, base.step_time);
    p.host_steps = 1.0;
    let e = eval(&p, &m);
    let gemm = 2.0 * 8192f64.powi(3) / 989.4e12;
    assert_relative_eq!(e.step_time, gemm + 5e-3, max_relative = 1e-12);
    assert_relative_eq!(e.breakdown.other, 5e-3, max_relative = 1e-12);
    assert_relative_eq!(e.breakdown.compute, gemm, max_relative = 1e-12);
    assert_relative_eq!(
        e.energy_per_step,
        100.0 * (gemm + 5e-3),
        max_relative = 1e-12
    );
    assert_relative_eq!(
        e.energy_per_step - base.energy_per_step,
        100.0 * 5e-3,
        max_relative = 1e-9
    );
    assert_relative_eq!(e.throughput, 1.0 / (gemm + 5e-3), max_relative = 1e-12);
    assert!(e.mfu < base.mfu);
}

#[test]
fn a_software_stacks_memory_reserve_comes_off_the_main_memory() {
    // 70 GB of weights and 5 GB of activations on the 80 GB device: they fit with 5 GB to spare,
    // not beside a stack that keeps 6 GB for itself (the point is then infeasible for memory,
    // 74 GB available against 75 GB needed), and again beside one that keeps exactly 5 GB.
    let mut p = gemm_program(8192.0, 8192.0, 8192.0);
    p.footprint = Footprint {
        weights: 70e9,
        activations: 5e9,
        ..Footprint::default()
    };
    let mut m = h100();
    assert_eq!(
        tessera::engine::cpu::place(&p.footprint, &m),
        Some((Tier::Hbm, Tier::Hbm))
    );
    let base = eval(&p, &m);
    assert_eq!(base.reason_code, 0);
    m[t::MEMORY_RESERVE] = 6e9;
    assert_eq!(tessera::engine::cpu::place(&p.footprint, &m), None);
    let e = eval(&p, &m);
    assert_eq!(e.reason_code, tessera::engine::reason::point::MEMORY);
    assert_relative_eq!(e.needed_bytes, 75e9, max_relative = 1e-12);
    assert_relative_eq!(e.available_bytes, 74e9, max_relative = 1e-12);
    m[t::MEMORY_RESERVE] = 5e9;
    let e = eval(&p, &m);
    assert_eq!(e.reason_code, 0);
    assert_eq!(
        e.step_time, base.step_time,
        "a reserve costs memory, not time"
    );
    // a reserve larger than the memory leaves none (never a negative capacity)
    m[t::MEMORY_RESERVE] = 100e9;
    assert_eq!(tessera::engine::cpu::usable_capacity(Tier::Hbm, &m), 0.0);
    // on a device with SRAM only, the reserve comes off the SRAM
    let mut sram = h100();
    sram[t::HBM_CAPACITY] = 0.0;
    sram[t::SRAM_CAPACITY] = 44e9;
    sram[t::MEMORY_RESERVE] = 4e9;
    assert_eq!(tessera::engine::cpu::main_tier(&sram), Tier::Sram);
    assert_relative_eq!(
        tessera::engine::cpu::usable_capacity(Tier::Sram, &sram),
        40e9
    );
}

const WORKLOAD: &str = common::GPT_13B_TRAINING;

fn fixtures_with(workload: &str) -> (System, Workload) {
    common::load_texts(SYSTEM, workload)
}

fn fixtures() -> (System, Workload) {
    fixtures_with(WORKLOAD)
}

#[test]
fn mixed_precision_adam_is_16_bytes_per_parameter() {
    // bf16 weights (2) + bf16 gradients (2) + fp32 master weights, momentum and variance (12).
    let (sys, w) = fixtures();
    let tessera::model::workload::Model::Transformer(t) = &w.model else {
        panic!()
    };
    let m = Mapping {
        zero: 0,
        micro_batch: 1,
        ..Mapping::single()
    };
    let mut big = sys.clone();
    big.devices = 512;
    let p = lower(&big, &w, &Mapping { dp: 1, ..m }, 1).unwrap();
    let state = p.footprint.state();
    assert_relative_eq!(state, 16.0 * t.params(), max_relative = 1e-12);
}

#[test]
fn zero3_shards_all_state_over_data_parallel_ranks() {
    // ZeRO-3 over dp = 8: weights, gradients and optimizer state are each 1/8 per device:
    // 16 B × params / 8, plus the gather buffers: two layers' parameters unsharded (the layer
    // being computed and the next one prefetched), 2 B each, less the 1/8 the device holds.
    let (sys, w) = fixtures();
    let tessera::model::workload::Model::Transformer(t) = &w.model else {
        panic!()
    };
    let p = lower(
        &sys,
        &w,
        &Mapping {
            dp: 8,
            zero: 3,
            ..Mapping::single()
        },
        8,
    )
    .unwrap();
    let layer = t.attn_params() + t.layer_ffn_params();
    assert_relative_eq!(
        p.footprint.state(),
        16.0 * t.params() / 8.0 + 2.0 * layer * 2.0 * (1.0 - 1.0 / 8.0),
        max_relative = 1e-12
    );
    let p1 = lower(
        &sys,
        &w,
        &Mapping {
            dp: 8,
            zero: 1,
            ..Mapping::single()
        },
        8,
    )
    .unwrap();
    // ZeRO-1 shards only the 12 optimizer bytes: (2 + 2 + 12/8) B per parameter
    assert_relative_eq!(
        p1.footprint.state(),
        (4.0 + 1.5) * t.params(),
        max_relative = 1e-12
    );
}

#[test]
fn infeasible_is_a_result_with_a_reason() {
    // 13B with 16 B/param is 208 GB of state: one 80 GB device cannot hold it.
    let (sys, w) = fixtures();
    let e = tessera::engine::estimate(
        &sys,
        &w,
        &tessera::engine::MappingChoice::Given(tessera::model::mapping::MappingPlan {
            zero: Some(0),
            ..Default::default()
        }),
        Some(1),
    );
    assert!(!e.feasible);
    assert!(e.reason.unwrap().contains("does not fit in memory"));
}

#[test]
fn auto_mapping_finds_a_feasible_fast_mapping() {
    let (sys, w) = fixtures();
    let r = tessera::engine::search::search(&sys, &w, 64, tessera::engine::Objective::Time);
    let (best, e) = r.best().expect("a feasible mapping");
    assert!(e.feasible && best.devices() == 64);
    // every ranked mapping is at least as slow as the best
    assert!(r.ranked.iter().all(|(_, x)| x.step_time >= e.step_time));
}

/// The dynamic energy per device of one step of `p` at full clock, from the program's own
/// figures: (FLOPs × energy per FLOP, bytes × the energy per byte of their tiers and links).
fn dynamic_energy(p: &Program, m: &Machine, wt: Tier, at: Tier) -> (f64, f64) {
    let e_tier = |k: Tier| m[k.slots().energy];
    let (mut flop, mut other) = (0.0, 0.0);
    for op in &p.ops {
        let mult = if op.section == Section::MicroBatch {
            p.micro_batches
        } else {
            1.0
        };
        flop += mult * op.count * op.flops * m[t::ENERGY_PER_FLOP + op.precision];
        other += mult * op.count * (op.weight_bytes * e_tier(wt) + op.act_bytes * e_tier(at));
    }
    for c in &p.comms {
        let (_, bu, bo) = collective(c, m);
        let mult = if c.section == Section::MicroBatch {
            p.micro_batches
        } else {
            1.0
        };
        other += mult * c.count * (bu * m[t::UP_ENERGY] + bo * m[t::OUT_ENERGY]);
    }
    (flop, other)
}

fn base_eval(tp: u64, pp: u64, rec: Recompute) -> (Program, Machine) {
    let (sys, w) = fixtures();
    let m = Mapping {
        dp: 64 / (tp * pp),
        tp,
        pp,
        recompute: rec,
        sp: tp > 1,
        ..Mapping::single()
    };
    (lower(&sys, &w, &m, 64).unwrap(), machine(&sys, 64))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// More bandwidth or FLOP/s never makes a step slower.
    #[test]
    fn more_hardware_is_never_slower(
        tp in prop::sample::select(vec![1u64, 2, 4, 8]),
        pp in prop::sample::select(vec![1u64, 2, 4]),
        flops in 1.0f64..4.0, hbm in 1.0f64..4.0, up in 1.0f64..4.0, out in 1.0f64..4.0,
    ) {
        let (p, m) = base_eval(tp, pp, Recompute::Full);
        let e0 = eval(&p, &m);
        prop_assume!(e0.feasible);
        let mut m2 = m.clone();
        for x in &mut m2.0[t::MATRIX_PEAK..t::MATRIX_PEAK + NPREC] { *x *= flops; }
        for x in &mut m2.0[t::VECTOR_PEAK..t::VECTOR_PEAK + NPREC] { *x *= flops; }
        m2[t::HBM_BANDWIDTH] *= hbm;
        m2[t::UP_BANDWIDTH] *= up;
        m2[t::OUT_BANDWIDTH] *= out;
        let e1 = eval(&p, &m2);
        prop_assert!(e1.feasible);
        prop_assert!(e1.step_time <= e0.step_time * (1.0 + 1e-12), "{} > {}", e1.step_time, e0.step_time);
    }

    /// Energy is conserved: at the device boundary, a step's energy is at least static power
    /// over the step plus the dynamic energy of what ran (its FLOPs at the lowest DVFS voltage,
    /// its bytes), and exactly that at full clock; a device never draws above its limit.
    #[test]
    fn energy_at_least_dynamic_plus_static(
        tp in prop::sample::select(vec![1u64, 2, 4, 8]),
        pp in prop::sample::select(vec![1u64, 2, 4]),
        cap in 0.2f64..1.2,
    ) {
        let (p, mut m) = base_eval(tp, pp, Recompute::Selective);
        m[t::BOUNDARY] = 0.0;
        m[t::TDP] *= cap;
        let e = eval(&p, &m);
        prop_assume!(e.feasible);
        let (flop_j, other_j) = dynamic_energy(&p, &m, e.weights_tier, e.working_tier);
        let v0 = m[t::DVFS_MIN_VOLTAGE];
        let floor = p.devices * (m[t::IDLE_POWER] * e.step_time + flop_j * v0 * v0 + other_j);
        prop_assert!(e.energy_per_step >= floor * (1.0 - 1e-9), "{} < {}", e.energy_per_step, floor);
        prop_assert!(e.device_power <= m[t::TDP] * (1.0 + 1e-9));
        if e.throttle == 1.0 {
            let exact = p.devices * (m[t::IDLE_POWER] * e.step_time + flop_j + other_j);
            prop_assert!((e.energy_per_step - exact).abs() <= 1e-9 * exact);
        }
    }

    /// A tighter power limit never makes a step faster, and one below the demand slows it.
    #[test]
    fn a_tighter_cap_never_speeds_up(
        tp in prop::sample::select(vec![1u64, 2, 4, 8]),
        pp in prop::sample::select(vec![1u64, 2, 4]),
        hi in 0.3f64..1.5, lo_frac in 0.3f64..1.0,
    ) {
        let (p, mut m) = base_eval(tp, pp, Recompute::Selective);
        m[t::TDP] *= hi;
        let e_hi = eval(&p, &m);
        prop_assume!(e_hi.feasible);
        m[t::TDP] *= lo_frac;
        let e_lo = eval(&p, &m);
        prop_assume!(e_lo.feasible);
        prop_assert!(e_lo.step_time >= e_hi.step_time * (1.0 - 1e-12));
        prop_assert!(e_lo.throughput <= e_hi.throughput * (1.0 + 1e-12));
        if e_hi.demand_power > m[t::TDP] * (1.0 + 1e-9) {
            prop_assert!(e_lo.step_time > e_hi.step_time);
            prop_assert!(e_lo.throttle < 1.0);
        }
    }

    /// A deeper or wider model takes longer per step under the same mapping.
    #[test]
    fn time_grows_with_model_size(layers in 8u64..64, extra in 1u64..16, hidden_mult in 1u64..3) {
        let wl = |l: u64, h: u64| WORKLOAD.replace("layers: 40, hidden: 5120", &format!("layers: {l}, hidden: {h}"));
        let (sys, w1) = fixtures_with(&wl(layers, 2560 * hidden_mult));
        let (_, w2) = fixtures_with(&wl(layers + extra, 2560 * hidden_mult));
        let (_, w3) = fixtures_with(&wl(layers, 2560 * (hidden_mult + 1)));
        let m = Mapping { dp: 8, tp: 8, sp: true, recompute: Recompute::Full, ..Mapping::single() };
        let mach = machine(&sys, 64);
        let run = |w: &Workload| eval(&lower(&sys, w, &m, 64).unwrap(), &mach);
        let (e1, e2, e3) = (run(&w1), run(&w2), run(&w3));
        prop_assume!(e1.feasible && e2.feasible && e3.feasible);
        prop_assert!(e2.step_time > e1.step_time);
        prop_assert!(e3.step_time > e1.step_time);
    }
}

#[test]
fn scaling_efficiency_above_one_names_its_cause() {
    let (sys, w) = fixtures();
    let ests: Vec<_> = [8u64, 16, 32, 64]
        .iter()
        .map(|&n| {
            tessera::engine::estimate(
                &sys,
                &w,
                &tessera::engine::MappingChoice::Auto(tessera::engine::Objective::Time),
                Some(n),
            )
        })
        .collect();
    let s = tessera::report::compare::scaling("s", "w", ests);
    for p in &s.points {
        if let Some(x) = p.estimate.scaling_efficiency {
            if x > 1.0 + 1e-9 {
                assert!(
                    p.superlinear_cause.is_some(),
                    "efficiency {x} at {} devices without a cause",
                    p.devices
                );
            }
        }
    }
}

/// Two stage classes of a per-layer pipeline: 3 stages that each read 3.35 GB of weights (1 ms
/// on the H100's 3.35 TB/s) and 1 stage that reads 6.7 GB (2 ms), on 1 and 2 devices.
fn two_stage_program(micro_batches: f64) -> Program {
    let op = |name: &'static str, bytes: f64| Op {
        name: name.into(),
        matrix: true,
        precision: Precision::Bf16.index(),
        flops: 0.0,
        occupancy: 1.0,
        weight_bytes: bytes,
        act_bytes: 0.0,
        count: 1.0,
        section: Section::MicroBatch,
        phase: Phase::Forward,
        form: Form::Both,
    };
    let fp = |w: f64| Footprint {
        weights: w,
        ..Footprint::default()
    };
    Program {
        ops: vec![op("layers", 3.35e9), op("head", 6.7e9)],
        comms: vec![],
        stages: vec![
            Stage {
                name: "layers".into(),
                ops: 0..1,
                comms: 0..0,
                repeat: 3.0,
                devices: 1.0,
                footprint: fp(3.35e9),
                pool: false,
                hands_on: 0.0,
            },
            Stage {
                name: "head".into(),
                ops: 1..2,
                comms: 0..0,
                repeat: 1.0,
                devices: 2.0,
                footprint: fp(90e9),
                pool: false,
                hands_on: 0.0,
            },
        ],
        micro_batches,
        bubble: 0.0,
        footprint: fp(90e9),
        devices: 5.0,
        units_per_step: micro_batches,
        unit: "tokens",
        model_flops_per_step: 0.0,
        mfu_precision: Precision::Bf16.index(),
        steps: None,
        host_steps: 0.0,
    }
}

#[test]
fn a_pipeline_round_is_the_slowest_stage_or_the_chain() {
    let mut m = h100();
    m[t::HBM_CAPACITY] = 100e9;
    // 8 micro-batches in flight: 8 × the 2 ms head stage = 16 ms > the chain 3 × 1 + 2 = 5 ms.
    let e = eval(&two_stage_program(8.0), &m);
    assert!(e.feasible);
    assert_relative_eq!(e.step_time, 16e-3, max_relative = 1e-12);
    // One micro-batch: the chain, 3 × 1 ms + 2 ms = 5 ms (> 1 × 2 ms).
    let e = eval(&two_stage_program(1.0), &m);
    assert_relative_eq!(e.step_time, 5e-3, max_relative = 1e-12);
    assert_relative_eq!(e.breakdown.memory, 5e-3, max_relative = 1e-12);
    // Power per stage class: 5 devices idle at 100 W; dynamic energy 0 (no energy figures).
    assert_relative_eq!(e.average_power, 500.0, max_relative = 1e-12);
    // Memory per stage: the head stage's 90 GB does not fit 80 GB, the layer stages' would.
    m[t::HBM_CAPACITY] = 80e9;
    let e = eval(&two_stage_program(1.0), &m);
    assert!(!e.feasible);
    assert_eq!(e.needed_bytes, 90e9);
}

/// The two stage classes of [`two_stage_program`] (8 micro-batches) with compute-bound layer
/// stages (1.9 ms of FLOPs, no bytes) at 1 pJ per FLOP, a DVFS line from (0.3, 0.7), and a
/// limit far above the demand; with the H100's bf16 rate.
fn throttled_two_stages() -> (Program, Machine, f64) {
    let mut m = h100();
    m[t::HBM_CAPACITY] = 100e9;
    let rate = m[t::MATRIX_PEAK + Precision::Bf16.index()];
    let mut p = two_stage_program(8.0);
    p.ops[0].weight_bytes = 0.0;
    p.ops[0].flops = 1.9e-3 * rate;
    m[t::ENERGY_PER_FLOP + Precision::Bf16.index()] = 1e-12;
    m[t::DVFS_MIN_CLOCK] = 0.3;
    m[t::DVFS_MIN_VOLTAGE] = 0.7;
    m[t::TDP] = 5000.0;
    (p, m, rate)
}

/// Under a power cap the slowest stage is the slowest at the clock the devices run at. A
/// memory-bound head stage (2 ms, no clock-bound time) is the slowest at full clock over the
/// compute-bound layer stages (1.9 ms of FLOPs); throttled below 0.95 of full clock the layers
/// take 1.9 ms / s and set the round. (Taking the full clock's slowest stage would leave the step
/// at 16 ms while the devices ran slower.)
#[test]
fn a_throttled_round_is_set_by_the_slowest_stage_at_that_clock() {
    let (p, mut m, rate) = throttled_two_stages();
    let full = eval(&p, &m);
    assert!(full.feasible && full.throttle == 1.0, "{full:?}");
    assert_relative_eq!(full.step_time, 8.0 * 2e-3, max_relative = 1e-12);
    // the layer stage's devices draw 100 W + 8 × 1.9 ms × rate × 1 pJ over the 16 ms step: cap
    // them below that
    let demand = 100.0 + 8.0 * 1.9e-3 * rate * 1e-12 / 16e-3;
    assert_relative_eq!(full.demand_power, demand, max_relative = 1e-9);
    m[t::TDP] = 100.0 + 0.5 * (demand - 100.0);
    let e = eval(&p, &m);
    assert!(e.feasible);
    let s = e.throttle;
    assert!(s < 0.95, "clock {s}");
    assert_relative_eq!(e.step_time, 8.0 * 1.9e-3 / s, max_relative = 1e-9);
    assert_relative_eq!(e.breakdown.compute, 8.0 * 1.9e-3 / s, max_relative = 1e-9);
    assert_relative_eq!(e.device_power, m[t::TDP], max_relative = 1e-9);
}

/// Each device has its own limit and its own clock: a stage whose devices demand more than
/// their limit slows its own clock, not its neighbours'. The head stage is memory-bound (6.7 GB,
/// 2 ms) with 0.5 ms of FLOPs hidden under its reads and 1.5 J of HBM traffic per micro-batch;
/// the layer stages are compute-bound (1.9 ms of FLOPs, no traffic). 8 micro-batches: the round
/// is 8 × 2 ms = 16 ms. At 1 pJ per FLOP the head's devices demand 100 W + 8 × (0.4947 J +
/// 1.5 J) / 16 ms = 1,097 W, the layers' 100 W + 8 × 1.880 J / 16 ms = 1,040 W. Under a 1,070 W
/// limit the head's clock falls until its FLOPs' energy fits what the limit leaves over the
/// 16 ms step: v² = (970 W × 16 ms − 12 J) / 3.958 J; its time is memory-bound and does not move,
/// and the layers keep full clock: the step stays 16 ms. (Running every stage at one clock, the
/// one that holds the head's devices to their limit, stretches the layers past 2 ms: 16.2 ms.)
#[test]
fn each_stage_runs_at_the_clock_its_own_limit_allows() {
    let (mut p, mut m, rate) = throttled_two_stages();
    p.ops[1].flops = 0.5e-3 * rate;
    m[t::HBM_ENERGY] = 1.5 / 6.7e9;
    let (e_head, e_layer) = (
        8.0 * (0.5e-3 * rate * 1e-12 + 1.5),
        8.0 * 1.9e-3 * rate * 1e-12,
    );
    let full = eval(&p, &m);
    assert_relative_eq!(full.step_time, 16e-3, max_relative = 1e-12);
    assert_relative_eq!(
        full.demand_power,
        100.0 + e_head / 16e-3,
        max_relative = 1e-9
    );
    assert!(full.demand_power > 1070.0 && 100.0 + e_layer / 16e-3 < 1070.0);
    m[t::TDP] = 1070.0;
    let e = eval(&p, &m);
    assert!(e.feasible);
    assert_relative_eq!(e.step_time, 16e-3, max_relative = 1e-12);
    // the head's clock: v² = (970 W × 16 ms − 12 J) / (8 × 0.4947 J), v = 0.7 + 0.3 (s − 0.3) / 0.7
    let v = ((970.0 * 16e-3 - 12.0) / (8.0 * 0.5e-3 * rate * 1e-12)).sqrt();
    let s = 0.3 + 0.7 * (v - 0.7) / 0.3;
    assert!(s > 0.85 && s < 0.9, "clock {s}");
    assert_relative_eq!(e.throttle, s, max_relative = 1e-9);
    assert_relative_eq!(e.device_power, 1070.0, max_relative = 1e-12);
    // power: 2 head devices at their limit, 3 layer devices at full clock over the 16 ms step
    let power = 2.0 * 1070.0 + 3.0 * (100.0 + e_layer / 16e-3);
    assert_relative_eq!(e.average_power, power, max_relative = 1e-9);
    assert_relative_eq!(e.energy_per_step, power * 16e-3, max_relative = 1e-9);
}

proptest! {
    /// Stage classes under a power limit, each at the clock its own devices' limit allows: a
    /// tighter limit never shortens the step; no device draws above its limit; and energy per
    /// step is at least every device's static power over the step plus its class's dynamic
    /// energy at the lowest clock's voltage (exactly that at full voltage where nothing throttles).
    #[test]
    fn stage_classes_under_a_limit_keep_the_power_laws(
        layer in (0.0f64..3.0, 0.0f64..3.0),
        head in (0.0f64..3.0, 0.01f64..3.0),
        micro_batches in prop::sample::select(vec![1.0, 2.0, 8.0]),
        hi in 0.05f64..1.2, lo_frac in 0.3f64..1.0,
    ) {
        let (mut p, mut m, rate) = throttled_two_stages();
        p.micro_batches = micro_batches;
        // (ms of FLOPs, ms of HBM reads) per micro-batch of each class
        for (op, (c, r)) in p.ops.iter_mut().zip([layer, head]) {
            op.flops = c * 1e-3 * rate;
            op.weight_bytes = r * 1e-3 * 3.35e12;
        }
        m[t::HBM_ENERGY] = 1e-10;
        let energy = |k: usize| {
            let op = &p.ops[k];
            (micro_batches * op.flops * 1e-12, micro_batches * op.weight_bytes * 1e-10)
        };
        let free = eval(&p, &m);
        prop_assume!(free.feasible && free.throttle == 1.0);
        let cap = |f: f64| 100.0 + f * (free.demand_power - 100.0);
        m[t::TDP] = cap(hi);
        let e_hi = eval(&p, &m);
        m[t::TDP] = cap(hi * lo_frac);
        let e_lo = eval(&p, &m);
        prop_assert!(e_hi.feasible && e_lo.feasible);
        prop_assert!(e_hi.step_time >= free.step_time * (1.0 - 1e-12));
        prop_assert!(e_lo.step_time >= e_hi.step_time * (1.0 - 1e-12));
        if hi < 1.0 {
            prop_assert!(e_hi.throttle < 1.0 && e_hi.step_time >= free.step_time);
        }
        for (e, limit) in [(&e_hi, cap(hi)), (&e_lo, cap(hi * lo_frac))] {
            prop_assert!(e.device_power <= limit * (1.0 + 1e-9));
            // 3 layer devices, 2 head devices
            let floor: f64 = [(0usize, 3.0), (1, 2.0)]
                .iter()
                .map(|&(k, d)| {
                    let (f, o) = energy(k);
                    d * (100.0 * e.step_time + f * 0.7 * 0.7 + o)
                })
                .sum();
            prop_assert!(e.energy_per_step >= floor * (1.0 - 1e-9), "{} < {floor}", e.energy_per_step);
        }
        let exact: f64 = [(0usize, 3.0), (1, 2.0)]
            .iter()
            .map(|&(k, d)| {
                let (f, o) = energy(k);
                d * (100.0 * free.step_time + f + o)
            })
            .sum();
        prop_assert!((free.energy_per_step - exact).abs() <= 1e-9 * exact);
    }
}

/// A memory-bound operator near the ridge turns compute-bound once a power limit drops the
/// clock below its compute / memory ratio. A GEMM reading 3.35 GB (1 ms) whose FLOPs take
/// 0.8 ms at full clock draws 100 W + 0.7915 J / 1 ms = 891.5 W at 1 pJ per FLOP. Under a 400 W
/// limit the clock whose voltage² fits the FLOPs' energy over a 1 ms step (v² = 300 W × 1 ms /
/// 0.7915 J, clock 0.46 on a (0.3, 0.5) DVFS line) would stretch the FLOPs to 1.7 ms: the step
/// is compute-bound at the clock it runs at, 0.8 ms / s, with s the clock that holds the device
/// to 400 W over that longer step (taking the operator as memory-bound would have kept 1 ms).
#[test]
fn a_throttled_clock_turns_operators_near_the_ridge_compute_bound() {
    let mut m = h100();
    let rate = m[t::MATRIX_PEAK + Precision::Bf16.index()];
    let mut p = gemm_program(1.0, 1.0, 1.0);
    p.ops[0].flops = 0.8e-3 * rate;
    p.ops[0].weight_bytes = 3.35e9;
    p.ops[0].act_bytes = 0.0;
    m[t::ENERGY_PER_FLOP + Precision::Bf16.index()] = 1e-12;
    m[t::DVFS_MIN_CLOCK] = 0.3;
    m[t::DVFS_MIN_VOLTAGE] = 0.5;
    m[t::TDP] = 5000.0;
    let full = eval(&p, &m);
    assert_relative_eq!(full.step_time, 1e-3, max_relative = 1e-12);
    assert_relative_eq!(full.breakdown.memory, 1e-3, max_relative = 1e-12);
    m[t::TDP] = 400.0;
    let e = eval(&p, &m);
    let s = e.throttle;
    assert!(s < 0.8, "clock {s}");
    assert_relative_eq!(e.step_time, 0.8e-3 / s, max_relative = 1e-9);
    // the breakdown: the memory time, and the FLOPs' time beyond it as compute
    assert_relative_eq!(e.breakdown.memory, 1e-3, max_relative = 1e-12);
    assert_relative_eq!(e.breakdown.compute, 0.8e-3 / s - 1e-3, max_relative = 1e-9);
    // the device at its limit: static power plus the FLOPs' energy at that clock's voltage
    let v = 0.5 + 0.5 * (s - 0.3) / 0.7;
    let power = 100.0 + 0.8e-3 * rate * 1e-12 * v * v / e.step_time;
    assert_relative_eq!(power, 400.0, max_relative = 1e-9);
    assert_relative_eq!(e.device_power, 400.0, max_relative = 1e-12);
}

/// The issue's example: 8 stages, 1 micro-batch, 4 chunks per stage. Interleaving gives nothing:
/// the one micro-batch still crosses all 8 stages, so the step is 8 stage times, not 1 + 7/4.
#[test]
fn interleaving_gives_nothing_with_fewer_micro_batches_than_stages() {
    use tessera::engine::lower::pipeline_bubble;
    assert_relative_eq!(1.0 + pipeline_bubble(8, 1.0, 4.0), 8.0);
    assert_relative_eq!(pipeline_bubble(8, 8.0, 4.0), 7.0 / 4.0);
    assert_relative_eq!(pipeline_bubble(8, 16.0, 4.0), 7.0 / 4.0);
    assert_relative_eq!(pipeline_bubble(8, 3.0, 1.0), 7.0);
    // through the engine: 8 stages, global batch 1 → one micro-batch
    let (sys, w) = fixtures_with(&WORKLOAD.replace("global_batch: 64", "global_batch: 1"));
    let mk = |v: u64| Mapping {
        dp: 1,
        tp: 8,
        pp: 8,
        interleave: v,
        sp: true,
        recompute: Recompute::Full,
        ..Mapping::single()
    };
    let p = lower(&sys, &w, &mk(4), 64).unwrap();
    assert_relative_eq!(p.micro_batches + p.bubble, 8.0);
    // and the search never gains by interleaving such a pipeline
    let r = tessera::engine::search::search(&sys, &w, 64, tessera::engine::Objective::Time);
    for (m, e) in &r.ranked {
        if m.pp > 1 && m.interleave > 1 && e.feasible {
            let mut plain = *m;
            plain.interleave = 1;
            let e1 = eval(&lower(&sys, &w, &plain, 64).unwrap(), &machine(&sys, 64));
            let pipe_mb = lower(&sys, &w, m, 64).unwrap().micro_batches;
            if pipe_mb < m.pp as f64 {
                assert!(e.step_time >= e1.step_time * (1.0 - 1e-9), "{m:?}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A step never beats one micro-batch's path through every stage (pp stage times) nor the
    /// micro-batches' own work (m stage times); interleaving never lengthens the bubble, and at or
    /// above pp micro-batches it is (pp − 1) / v.
    #[test]
    fn the_bubble_never_beats_the_pipeline(pp in 1u64..64, m in 1u64..256, v in 1u64..8) {
        use tessera::engine::lower::pipeline_bubble;
        let b = pipeline_bubble(pp, m as f64, v as f64);
        let step = m as f64 + b;
        prop_assert!(b >= 0.0);
        prop_assert!(step >= pp as f64 * (1.0 - 1e-12), "pp {pp} m {m} v {v}: {step}");
        prop_assert!(b <= pipeline_bubble(pp, m as f64, 1.0) * (1.0 + 1e-12));
        if m >= pp {
            prop_assert!((b - (pp as f64 - 1.0) / v as f64).abs() < 1e-12);
        }
        // one more micro-batch never shortens the step
        prop_assert!(
            m as f64 + 1.0 + pipeline_bubble(pp, m as f64 + 1.0, v as f64) >= step * (1.0 - 1e-12)
        );
    }

    /// Chunks of whole layers: the bubble is priced at between one and `v` equal chunks, at `v`
    /// exactly when `v` divides the layers, and more chunks never price it at fewer.
    #[test]
    fn uneven_chunks_price_the_bubble_at_the_largest(layers in 1u64..200, v in 1u64..16) {
        use tessera::engine::lower::bubble_chunks;
        let c = bubble_chunks(layers, v);
        prop_assert!(c >= 1.0 - 1e-12 && c <= v as f64 + 1e-12, "{layers} layers, v {v}: {c}");
        if layers % v == 0 {
            prop_assert!((c - v as f64).abs() < 1e-12);
        }
        prop_assert!(bubble_chunks(layers, v + 1) >= c - 1e-12);
    }
}

/// Megatron-Core's 462B has 112 layers: on 8 stages, 14 a stage. Eight chunks of whole layers
/// are six of 2 and two of 1 (or 2 × 7), and the schedule waits on a 2-layer chunk: the bubble is
/// that of 7 chunks, not 8. Narayanan et al.'s 76.1B (60 layers, pp 4 × v 2): chunks of 8 and 7,
/// priced as 15 / 8 chunks.
#[test]
fn uneven_chunks_by_hand() {
    use tessera::engine::lower::{bubble_chunks, pipeline_bubble};
    assert_relative_eq!(bubble_chunks(14, 8), 7.0);
    assert_relative_eq!(bubble_chunks(16, 8), 8.0);
    assert_relative_eq!(bubble_chunks(15, 2), 15.0 / 8.0);
    assert_relative_eq!(
        pipeline_bubble(8, 64.0, bubble_chunks(14, 8)),
        7.0 / 7.0,
        max_relative = 1e-12
    );
}

/// Layers on each stage class of a lowered training program: (name, repeat, layers, holds the
/// head), read off the program (the per-layer `qkv projection` runs `layers` times per stage).
fn stage_layers(p: &Program) -> Vec<(String, f64, f64, bool)> {
    p.stage_list()
        .iter()
        .map(|st| {
            let ops = &p.ops[st.ops.clone()];
            let layers = ops
                .iter()
                .find(|o| o.name == "qkv projection")
                .map(|o| o.count)
                .unwrap_or(0.0);
            let head = ops.iter().any(|o| o.name == "lm head");
            (st.name.to_string(), st.repeat, layers, head)
        })
        .collect()
}

const LLAMA_126: &str = r#"Workload(
    version: 1, name: "126-layer test model", source: "t", sources: { "t": "test fixture" },
    model: Transformer(layers: 126, hidden: 2048, heads: 16, kv_heads: 8, ffn: 8192, vocab: 128256, gated_ffn: true),
    task: Training(seq_len: 8192, global_batch: 64, target: Tokens(1e9)),
)"#;

#[test]
fn counting_embedding_and_loss_in_the_split_shares_out_layers_as_megatron_does() {
    // Megatron-Bridge's Llama 3.1 405B layout: 126 layers, TP 4 × PP 16 × VP 8 = 128 virtual
    // stages. Uncounted, 16 × 8 = 128 virtual stages exceed the 126 layers. Counting the
    // embedding and the loss, U = 126 + 2 = 128 units, 128 / 16 = 8 per stage (1 per virtual
    // stage): the first stage holds the embedding and 8 − 1 = 7 layers, the 14 middle stages 8
    // each, the last 7 layers and the head; 7 + 14 × 8 + 7 = 126.
    let (sys, w) = fixtures_with(LLAMA_126);
    let m = Mapping {
        dp: 1,
        tp: 4,
        pp: 16,
        interleave: 8,
        sp: true,
        ..Mapping::single()
    };
    let err = lower(&sys, &w, &m, 64).unwrap_err();
    assert!(err.to_string().contains("exceeds 126 layers"), "{err}");
    let both = Mapping {
        embedding_in_pipeline_split: true,
        loss_in_pipeline_split: true,
        ..m
    };
    let p = lower(&sys, &w, &both, 64).unwrap();
    let got = stage_layers(&p);
    let want = [
        ("first stage", 1.0, 7.0, false),
        ("middle stages", 14.0, 8.0, false),
        ("last stage", 1.0, 7.0, true),
    ];
    assert_eq!(got.len(), 3);
    for (g, w) in got.iter().zip(want) {
        assert_eq!((g.0.as_str(), g.1, g.2, g.3), w);
    }
    // Each stage class runs on dp × tp × cp = 4 devices per stage: 16 × 4 = 64 in all.
    assert!(p.stages.iter().all(|s| s.devices == 4.0));
    // State: bf16 weights, per device (÷ tp 4). The first stage holds 7 layers and the
    // embedding table (vocab × hidden), the last 7 layers and the head (the same size), a
    // middle stage 8 layers and no table. A layer: attention 2048 × (2048 + 2 × 1024) + 2048²
    // = 12.58 M, gated FFN 3 × 2048 × 8192 = 50.33 M (plus norms).
    let tessera::model::workload::Model::Transformer(t) = &w.model else {
        panic!()
    };
    let layer = t.attn_params() + t.layer_ffn_params();
    let table = 128256.0 * 2048.0;
    let wb = 2.0;
    let weights: Vec<f64> = p.stages.iter().map(|s| s.footprint.weights).collect();
    assert_relative_eq!(
        weights[0],
        (7.0 * layer + table) / 4.0 * wb,
        max_relative = 1e-12
    );
    assert_relative_eq!(weights[1], 8.0 * layer / 4.0 * wb, max_relative = 1e-12);
    assert_relative_eq!(
        weights[2],
        (7.0 * layer + table) / 4.0 * wb,
        max_relative = 1e-12
    );
    // The program's footprint is the largest stage's.
    let largest = p
        .stages
        .iter()
        .map(|s| s.footprint.total())
        .fold(0.0, f64::max);
    assert_eq!(p.footprint.total(), largest);

    // The loss alone: U = 127, not a multiple of 16 × 8; at VP 1, still not a multiple of 16.
    // 125 layers + the loss = 126 = 2 × 63 is split over PP 2: the first stage holds the
    // embedding and 63 layers (the embedding is not counted), the last 62 and the head.
    let loss = Mapping {
        loss_in_pipeline_split: true,
        ..m
    };
    let err = lower(&sys, &w, &loss, 64).unwrap_err();
    assert!(err.to_string().contains("does not divide"), "{err}");
    let w125 = fixtures_with(&LLAMA_126.replace("layers: 126", "layers: 125")).1;
    let pp2 = Mapping {
        dp: 8,
        tp: 4,
        pp: 2,
        interleave: 1,
        loss_in_pipeline_split: true,
        ..Mapping::single()
    };
    let got = stage_layers(&lower(&sys, &w125, &pp2, 64).unwrap());
    assert_eq!(
        got,
        vec![
            ("first stage".to_string(), 1.0, 63.0, false),
            ("last stage".to_string(), 1.0, 62.0, true),
        ]
    );
    // One stage: nothing to count; the program is the uncounted one.
    let one = Mapping {
        dp: 16,
        tp: 4,
        ..both
    };
    let plain = Mapping { dp: 16, tp: 4, ..m };
    let (p1, p0) = (
        lower(
            &sys,
            &w,
            &Mapping {
                pp: 1,
                interleave: 1,
                ..one
            },
            64,
        )
        .unwrap(),
        lower(
            &sys,
            &w,
            &Mapping {
                pp: 1,
                interleave: 1,
                ..plain
            },
            64,
        )
        .unwrap(),
    );
    assert!(p1.stages.is_empty());
    let mach = machine(&sys, 64);
    assert_eq!(eval(&p1, &mach).step_time, eval(&p0, &mach).step_time);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Counting the embedding and/or the loss in the pipeline split never puts more than
    /// ceil(layers / pp) layers on a stage, and the stages hold every layer once.
    #[test]
    fn a_counted_split_never_loads_a_stage_beyond_ceil_layers_over_pp(
        chunk in 1u64..6,
        pp in prop::sample::select(vec![2u64, 4, 8, 16, 32, 64]),
        v in 1u64..5,
        (embedding, loss) in prop::sample::select(vec![(true, false), (false, true), (true, true)]),
    ) {
        // a legal counted split: layers + counted = chunk × pp × v units
        let counted = embedding as u64 + loss as u64;
        prop_assume!(chunk * pp * v > counted + 1);
        let layers = chunk * pp * v - counted;
        let (sys, w) = fixtures_with(&WORKLOAD.replace("layers: 40", &format!("layers: {layers}")));
        let m = Mapping {
            dp: 64 / pp,
            pp,
            interleave: v,
            embedding_in_pipeline_split: embedding,
            loss_in_pipeline_split: loss,
            ..Mapping::single()
        };
        let p = lower(&sys, &w, &m, 64).unwrap();
        let st = stage_layers(&p);
        let ceil = layers.div_ceil(pp) as f64;
        prop_assert!(st.iter().all(|s| s.2 <= ceil), "{st:?} over ceil {ceil}");
        prop_assert_eq!(st.iter().map(|s| s.1 * s.2).sum::<f64>(), layers as f64);
        prop_assert_eq!(st.iter().map(|s| s.1).sum::<f64>(), pp as f64);
        prop_assert_eq!(st.iter().filter(|s| s.3).count(), 1);
    }

    /// Where both splits are legal, counting the embedding and/or the loss never makes the step
    /// slower than the uncounted split at the same pp and interleave, when no two collectives
    /// hide behind the same compute (cp 1, ZeRO ≤ 2, no extra overlap, the gradient reduction
    /// not overlapped). Each stage class then holds no more layers than the uncounted stage
    /// (ceil(layers / pp)), the head only where that stage has it, a table no larger than the
    /// head: its operators and collectives are the uncounted stage's or fewer, and each section
    /// time is monotone in them (an added operator hides at most its own time of the one
    /// overlapped collective, the tensor-parallel backward); the step is (micro-batches +
    /// bubble) × the slowest stage's micro-batch time + the slowest step section. With several
    /// collectives hiding behind one compute window (the overlap model issue 14 names), taking
    /// compute away can expose more than it saves, and the law is not claimed there.
    #[test]
    fn a_counted_split_is_never_slower_where_both_are_legal(
        chunk in 2u64..6,
        pp in prop::sample::select(vec![2u64, 4, 8]),
        v in 1u64..4,
        tp in prop::sample::select(vec![1u64, 2, 8]),
        zero in 0u8..3,
        (embedding, loss) in prop::sample::select(vec![(true, false), (false, true), (true, true)]),
        hidden in prop::sample::select(vec![1280u64, 2560, 5120]),
        cap in 0.3f64..1.2,
    ) {
        // legal both ways: layers + counted = chunk × pp × v units, and pp × v ≤ layers
        let layers = chunk * pp * v - (embedding as u64 + loss as u64);
        let (sys, w) = fixtures_with(&WORKLOAD.replace(
            "layers: 40, hidden: 5120",
            &format!("layers: {layers}, hidden: {hidden}"),
        ));
        let m = Mapping {
            dp: 64 / (pp * tp),
            tp,
            pp,
            interleave: v,
            sp: tp > 1,
            zero,
            overlap_grad_reduce: false,
            recompute: Recompute::Selective,
            ..Mapping::single()
        };
        let counted = Mapping { embedding_in_pipeline_split: embedding, loss_in_pipeline_split: loss, ..m };
        let mut mach = machine(&sys, 64);
        mach[t::TDP] *= cap;
        let e0 = eval(&lower(&sys, &w, &m, 64).unwrap(), &mach);
        prop_assume!(e0.feasible);
        let e1 = eval(&lower(&sys, &w, &counted, 64).unwrap(), &mach);
        prop_assert!(e1.feasible);
        prop_assert!(e1.step_time <= e0.step_time * (1.0 + 1e-12), "{} > {}", e1.step_time, e0.step_time);
    }
}

/// [`two_stage_program`] with a concurrent prefill pool (disaggregated serving) beside its
/// pipeline: one stage class of 2 devices outside the chain whose round's work reads
/// `pool_bytes` of weights (on the 3.35 TB/s HBM) and sends `kv_bytes` to the decode side over
/// NVLink (450 GB/s per direction), hidden behind the pool's own compute.
fn pooled_program(micro_batches: f64, pool_bytes: f64, kv_bytes: f64) -> Program {
    let mut p = two_stage_program(micro_batches);
    p.ops.push(Op {
        name: "pool prefill".into(),
        matrix: true,
        precision: Precision::Bf16.index(),
        flops: 0.0,
        occupancy: 1.0,
        weight_bytes: pool_bytes,
        act_bytes: 0.0,
        count: 1.0,
        section: Section::Step,
        phase: Phase::Forward,
        form: Form::Both,
    });
    p.comms.push(Comm {
        section: Section::Step,
        overlap: Overlap::Compute,
        role: Role::KvTransfer,
        ..comm(CollKind::SendRecv, kv_bytes, 2.0, 1.0)
    });
    p.stages.push(Stage {
        name: "pool".into(),
        ops: 2..3,
        comms: 0..1,
        repeat: 1.0,
        devices: 2.0,
        footprint: Footprint {
            weights: 10e9,
            ..Footprint::default()
        },
        pool: true,
        hands_on: 0.0,
    });
    p.devices = 7.0;
    p
}

#[test]
fn a_concurrent_pool_bounds_the_round_beside_the_pipeline() {
    let mut m = h100();
    m[t::HBM_CAPACITY] = 100e9;
    // a send between two devices of a domain: its bytes once over 450 GB/s
    let (t_kv, _, _) = collective(&comm(CollKind::SendRecv, 4.5e9, 2.0, 1.0), &m);
    assert_relative_eq!(t_kv, 10e-3, max_relative = 1e-12);
    // 8 micro-batches: the pipeline's round is 8 × 2 ms = 16 ms. The pool reads 33.5 GB (10 ms)
    // and sends 4.5 GB (10 ms, hidden behind its 10 ms): 10 ms < 16 ms, the round stays 16 ms;
    // the pool is not in the chain (1 micro-batch: 3 × 1 + 2 = 5 ms, not 5 + 10).
    let e = eval(&pooled_program(8.0, 33.5e9, 4.5e9), &m);
    assert!(e.feasible);
    assert_relative_eq!(e.step_time, 16e-3, max_relative = 1e-12);
    // power: the pipeline's 5 devices and the pool's 2, idle at 100 W (no energy figures)
    assert_relative_eq!(e.average_power, 700.0, max_relative = 1e-12);
    let e = eval(&pooled_program(1.0, 3.35e9, 0.0), &m);
    assert_relative_eq!(e.step_time, 5e-3, max_relative = 1e-12);
    // The pool reads 67 GB (20 ms): the round waits for it, 20 ms, all of it memory time.
    let e = eval(&pooled_program(8.0, 67e9, 0.0), &m);
    assert_relative_eq!(e.step_time, 20e-3, max_relative = 1e-12);
    assert_relative_eq!(e.breakdown.memory, 20e-3, max_relative = 1e-12);
    assert_relative_eq!(e.breakdown.total(), e.step_time, max_relative = 1e-12);
    // 10 ms of reads and a 22.5 GB send (50 ms): 40 ms of it exposed, the round 50 ms.
    let e = eval(&pooled_program(8.0, 33.5e9, 22.5e9), &m);
    assert_relative_eq!(e.step_time, 50e-3, max_relative = 1e-12);
    assert_relative_eq!(e.breakdown.communication, 40e-3, max_relative = 1e-12);
    // the pool holds its own memory: 110 GB does not fit 100 GB
    let mut p = pooled_program(8.0, 33.5e9, 0.0);
    p.stages[2].footprint.weights = 110e9;
    let e = eval(&p, &m);
    assert!(!e.feasible);
    assert_eq!(e.needed_bytes, 110e9);
}

const FP8_WORKLOAD: &str = r#"Workload(
    version: 1, name: "gpt-like 13B in fp8", source: "t", sources: { "t": "test fixture" },
    model: Transformer(layers: 40, hidden: 5120, heads: 40, vocab: 51200),
    task: Training(seq_len: 2048, global_batch: 64, target: Tokens(1e9), precision: (compute: "fp8")),
)"#;

fn with_scaling(w: &Workload, s: tessera::vocab::Scaling) -> Workload {
    let mut w = w.clone();
    if let tessera::model::workload::Task::Training(tr) = &mut w.task {
        tr.scaling = s;
    }
    w
}

#[test]
fn block_scaling_quantizes_every_gemm_operand_once_each_way() {
    // MXFP8 (one E8M0 scale per 32 elements), hand-checked on one device at micro-batch 1: each
    // element of a GEMM input is read once in BF16 and written twice in FP8 (along rows and
    // along columns) with a scale byte per 32: 2 + 2 × (1 + 1/32) = 4.0625 bytes.
    use tessera::vocab::Scaling;
    let (sys, w) = fixtures_with(FP8_WORKLOAD);
    let tessera::model::workload::Model::Transformer(t) = &w.model else {
        panic!()
    };
    let (h, ffn, tok) = (5120.0, t.ffn as f64, 2048.0);
    let m = Mapping {
        zero: 1,
        micro_batch: 1,
        ..Mapping::single()
    };
    let p = lower(&sys, &with_scaling(&w, Scaling::Mxfp8), &m, 1).expect("lowers");
    let op = |name: &str, phase: Phase| {
        p.ops
            .iter()
            .find(|o| o.name == name && o.phase == phase)
            .unwrap_or_else(|| panic!("{name}"))
            .clone()
    };
    let per = 2.0 + 2.0 * (1.0 + 1.0 / 32.0);
    // forward: the normed hidden state into QKV and into the MLP, the context into the output
    // projection, the activation into the down projection; once per layer of the stage
    let fwd = op("quantize gemm operands", Phase::Forward);
    let inputs = tok * (2.0 * h + h + ffn);
    assert_relative_eq!(fwd.act_bytes, inputs * per, max_relative = 1e-12);
    assert_eq!(fwd.count, 40.0);
    // backward: the gradients of the outputs of QKV (h + 2 × h: multi-head), the output
    // projection and the down projection (h each), the up projection (ffn; no gate)
    let bwd = op("quantize gemm operands", Phase::Backward);
    let grads = tok * (2.0 * h + 3.0 * h + ffn);
    assert_relative_eq!(bwd.act_bytes, grads * per, max_relative = 1e-12);
    // the weights once per step, each of the device's parameters once each way
    let wq = op("quantize weights", Phase::Update);
    assert_eq!(wq.section, Section::Step);
    assert_relative_eq!(wq.weight_bytes, wq.flops * per, max_relative = 1e-12);
    // NVFP4: half a byte per element and a scale per 16; current per-tensor scaling: an amax
    // read, then a cast-transpose (read, two FP8 writes); delayed: no pass at all
    assert_eq!(
        Scaling::Nvfp4.bytes_per_element(2.0),
        2.0 + 2.0 * (0.5 + 1.0 / 16.0)
    );
    assert_eq!(Scaling::Current.bytes_per_element(2.0), 6.0);
    let none = |p: &Program| p.ops.iter().all(|o| !o.name.starts_with("quantize"));
    assert!(none(
        &lower(&sys, &with_scaling(&w, Scaling::Delayed), &m, 1).expect("lowers")
    ));
    // nor for a BF16 run, whatever its recipe says
    let (_, bf16) = fixtures();
    assert!(none(
        &lower(&sys, &with_scaling(&bf16, Scaling::Mxfp8), &m, 1).expect("lowers")
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    /// Quantization work never makes a step faster: every scaling recipe's step is at least the
    /// delayed-scaling step's, on any layout.
    #[test]
    fn quantization_work_never_speeds_a_step(tp_log in 0u32..3, mb_log in 0u32..3, pick in 0usize..3) {
        use tessera::vocab::Scaling;
        let (sys, w) = fixtures_with(FP8_WORKLOAD);
        let tp = 1u64 << tp_log;
        let mut big = sys.clone();
        big.devices = 8;
        let m = Mapping { tp, sp: tp > 1, micro_batch: 1 << mb_log, zero: 1, dp: 8 / tp, ..Mapping::single() };
        let mach = machine(&big, 8);
        let step = |s: Scaling| eval(&lower(&big, &with_scaling(&w, s), &m, 8).expect("lowers"), &mach).step_time;
        let s = [Scaling::Current, Scaling::Mxfp8, Scaling::Nvfp4][pick];
        prop_assert!(step(s) >= step(Scaling::Delayed));
    }
}

/// A GEMM of 10 ms (989.4 TFLOP/s, compute-bound) with two overlapped collectives after it.
fn overlapped_program(a: Comm, b: Comm) -> (Program, f64) {
    // 2 · 8192³ · k FLOPs at 989.4e12: k sized so that the GEMM takes 10 ms
    let mut p = gemm_program(8192.0, 8192.0, 8192.0);
    let t_gemm = p.ops[0].flops / 989.4e12;
    p.ops[0].count = 0.010 / t_gemm;
    p.comms = vec![a, b];
    (p, 0.010)
}

fn overlapped(mut c: Comm) -> Comm {
    c.overlap = Overlap::Compute;
    c
}

#[test]
fn collectives_on_one_link_share_its_overlap_budget() {
    let m = h100();
    // Two 3.6 GB all-gathers over 8 GPUs in one node: 7/8 · 3.6e9 / 450e9 = 7 ms each on
    // NVLink. Behind 10 ms of compute the first hides whole; the second hides the 3 ms the
    // first left and exposes 4 ms (each alone would hide whole).
    let ag = overlapped(comm(CollKind::AllGather, 3.6e9, 8.0, 1.0));
    let (p, busy) = overlapped_program(ag.clone(), ag);
    let e = eval(&p, &m);
    assert_relative_eq!(e.breakdown.communication, 0.004, max_relative = 1e-9);
    assert_relative_eq!(e.step_time, busy + 0.004, max_relative = 1e-9);
}

#[test]
fn collectives_on_different_links_each_hide_behind_the_window() {
    let m = h100();
    // 7 ms on NVLink (as above), and a send/recv of 350 MB to the next node over the 50 GB/s
    // NIC: 7 ms on the scale-out link. Different links: both hide whole behind 10 ms.
    let ag = overlapped(comm(CollKind::AllGather, 3.6e9, 8.0, 1.0));
    let sr = overlapped(comm(CollKind::SendRecv, 350e6, 1.0, 2.0));
    assert_relative_eq!(collective(&sr, &m).0, 0.007, max_relative = 1e-9);
    let (p, busy) = overlapped_program(ag, sr);
    let e = eval(&p, &m);
    assert_relative_eq!(e.breakdown.communication, 0.0, epsilon = 1e-15);
    assert_relative_eq!(e.step_time, busy, max_relative = 1e-12);
}

#[test]
fn a_hierarchical_collective_hides_no_more_than_the_window() {
    let m = h100();
    // 2 GB all-reduce over 8 GPUs × 4 nodes (hierarchical_all_reduce_time, doubled): 2·7/8 ·
    // 2e9 / 450e9 = 7.778 ms on NVLink, then 2·3/4 · 250e6 / 50e9 = 7.5 ms on the NICs, 15.278 ms
    // in all, its phases one after the other. Behind 10 ms each phase alone would hide whole;
    // the collective still exposes 5.278 ms, as it did before the budgets.
    let ar = overlapped(comm(CollKind::AllReduce, 2e9, 8.0, 4.0));
    let t = collective(&ar, &m).0;
    assert_relative_eq!(
        t,
        2.0 * 7.0 / 8.0 * 2e9 / 450e9 + 0.0075,
        max_relative = 1e-12
    );
    let mut p = overlapped_program(ar.clone(), ar).0;
    p.comms.truncate(1);
    let e = eval(&p, &m);
    assert_relative_eq!(e.breakdown.communication, t - 0.010, max_relative = 1e-9);
}

#[test]
fn collectives_on_two_links_over_the_window_expose_the_longer_excess() {
    let m = h100();
    // A 6 GB all-gather over 8 GPUs on NVLink, 7/8 · 6e9 / 450e9 = 11.667 ms, and a 700 MB
    // send/recv over the 50 GB/s NIC, 14 ms: both overrun the 10 ms of compute, but they run
    // side by side on their own links, so the section waits for the later, 4 ms past the
    // compute (adding both excesses would say 5.667 ms).
    let ag = overlapped(comm(CollKind::AllGather, 6e9, 8.0, 1.0));
    let sr = overlapped(comm(CollKind::SendRecv, 700e6, 1.0, 2.0));
    assert_relative_eq!(collective(&sr, &m).0, 0.014, max_relative = 1e-12);
    let (mut p, busy) = overlapped_program(ag, sr);
    let e = eval(&p, &m);
    assert_relative_eq!(e.breakdown.communication, 0.004, max_relative = 1e-9);
    assert_relative_eq!(e.step_time, busy + 0.004, max_relative = 1e-9);
    // A tenth faster compute leaves the step at the NIC's 14 ms: the step is the longer path,
    // and shortening the compute only shortens one of them (summed excesses would make it
    // slower, 9 + 2.667 + 5 = 16.667 ms).
    p.ops[0].count *= 0.9;
    assert_relative_eq!(eval(&p, &m).step_time, 0.014, max_relative = 1e-9);
}

#[test]
fn a_reduction_behind_the_backward_waits_for_its_link() {
    let m = h100();
    // A micro-batch of 4 ms forward and 6 ms backward; a compute-overlapped 7 ms all-gather on
    // NVLink from its start, and the step's gradient all-gather (7 ms on NVLink too) behind the
    // backward, released when the backward begins at 4 ms: the link is busy until 7 ms, so the
    // reduction runs 7-14 ms, 4 ms past the micro-batch's end.
    let mut p = overlapped_program(
        overlapped(comm(CollKind::AllGather, 3.6e9, 8.0, 1.0)),
        Comm {
            section: Section::Step,
            overlap: Overlap::Backward,
            ..comm(CollKind::AllGather, 3.6e9, 8.0, 1.0)
        },
    )
    .0;
    let mut bwd = p.ops[0].clone();
    p.ops[0].count *= 0.4;
    bwd.count *= 0.6;
    bwd.phase = Phase::Backward;
    p.ops.push(bwd);
    let e = eval(&p, &m);
    assert_relative_eq!(e.breakdown.communication, 0.004, max_relative = 1e-9);
    assert_relative_eq!(e.step_time, 0.014, max_relative = 1e-9);
    // On a link of its own (the NIC, 7 ms for 350 MB) it runs 4-11 ms: 1 ms past the end.
    p.comms[1] = Comm {
        section: Section::Step,
        overlap: Overlap::Backward,
        ..comm(CollKind::SendRecv, 350e6, 1.0, 2.0)
    };
    assert_relative_eq!(eval(&p, &m).step_time, 0.011, max_relative = 1e-9);
}

/// An overlapped collective takes `collective_compute_share` of the compute it runs beside (its
/// library's kernels on the cores), for as long as it runs or the compute lasts; an exposed one
/// takes nothing (the compute waits for it anyway).
#[test]
fn an_overlapped_collective_takes_its_share_of_the_compute_beside_it() {
    let mut m = h100();
    m[t::COMM_SHARE] = 0.15;
    // 7 ms on NVLink behind 10 ms of compute (as above): the compute loses 0.15 × 7 ms and the
    // collective still hides whole.
    let ag = overlapped(comm(CollKind::AllGather, 3.6e9, 8.0, 1.0));
    let mut p = overlapped_program(ag.clone(), ag.clone()).0;
    p.comms.truncate(1);
    let e = eval(&p, &m);
    assert_relative_eq!(
        e.breakdown.compute,
        0.010 + 0.15 * 0.007,
        max_relative = 1e-9
    );
    assert_relative_eq!(e.breakdown.communication, 0.0, epsilon = 1e-15);
    assert_relative_eq!(e.step_time, 0.01105, max_relative = 1e-9);
    // The hierarchical all-reduce of 15.278 ms outlasts the compute: it takes 0.15 × 10 ms, and
    // the step is still the link's (the longer compute hides more of it).
    let ar = overlapped(comm(CollKind::AllReduce, 2e9, 8.0, 4.0));
    let t_ar = collective(&ar, &m).0;
    p.comms = vec![ar.clone()];
    let e = eval(&p, &m);
    assert_relative_eq!(e.breakdown.compute, 0.0115, max_relative = 1e-9);
    assert_relative_eq!(
        e.breakdown.communication,
        t_ar - 0.0115,
        max_relative = 1e-9
    );
    assert_relative_eq!(e.step_time, t_ar, max_relative = 1e-9);
    // Exposed, it takes nothing: compute, then the collective.
    p.comms = vec![Comm {
        overlap: Overlap::None,
        ..ag
    }];
    let e = eval(&p, &m);
    assert_relative_eq!(e.breakdown.compute, 0.010, max_relative = 1e-12);
    assert_relative_eq!(e.step_time, 0.017, max_relative = 1e-9);
}

/// A micro-batch (forward and backward GEMMs, `fwd` and `bwd` seconds) and a step section with
/// an update (`upd` seconds), with the given collectives, over `mbs` micro-batches.
fn sectioned_program(fwd: f64, bwd: f64, upd: f64, mbs: f64, comms: Vec<Comm>) -> Program {
    let mut p = gemm_program(8192.0, 8192.0, 8192.0);
    let t_gemm = p.ops[0].flops / 989.4e12;
    let one = p.ops[0].clone();
    p.ops = vec![
        Op {
            count: fwd / t_gemm,
            ..one.clone()
        },
        Op {
            count: bwd / t_gemm,
            phase: Phase::Backward,
            ..one.clone()
        },
        Op {
            count: upd / t_gemm,
            phase: Phase::Update,
            section: Section::Step,
            ..one
        },
    ];
    p.micro_batches = mbs;
    p.comms = comms;
    p
}

/// A collective drawn from the kinds, links, sections and overlaps the lowering emits.
fn any_comm() -> impl Strategy<Value = Comm> {
    (0usize..4, 1e6f64..8e9, 0u32..3, 0usize..4, any::<bool>()).prop_map(
        |(kind, bytes, outer_log, overlap, step)| {
            let kinds = [
                CollKind::AllGather,
                CollKind::AllReduce,
                CollKind::AllToAll,
                CollKind::SendRecv,
            ];
            let overlaps = [
                Overlap::None,
                Overlap::Backward,
                Overlap::Compute,
                Overlap::Forward,
            ];
            let inner = if kinds[kind] == CollKind::SendRecv {
                1.0
            } else {
                8.0
            };
            Comm {
                section: if step {
                    Section::Step
                } else {
                    Section::MicroBatch
                },
                overlap: overlaps[overlap],
                ..comm(kinds[kind], bytes, inner, f64::from(1u32 << outer_log))
            }
        },
    )
}

proptest! {
    /// The link timelines only ever expose at least what the longest collective alone exposes
    /// against the window, and never more than all of their time.
    #[test]
    fn a_shared_link_exposes_between_the_longest_alone_and_all(
        b1 in 1e6f64..1e10, b2 in 1e6f64..1e10, outer in 1u32..4, kind in 0usize..3,
    ) {
        let m = h100();
        let kinds = [CollKind::AllGather, CollKind::AllReduce, CollKind::AllToAll];
        let a = overlapped(comm(kinds[kind], b1, 8.0, outer as f64));
        let b = overlapped(comm(CollKind::AllGather, b2, 8.0, 1.0));
        let (p, busy) = overlapped_program(a.clone(), b.clone());
        let (ta, tb) = (collective(&a, &m).0, collective(&b, &m).0);
        let alone = (ta - busy).max(tb - busy).max(0.0);
        let c = eval(&p, &m).breakdown.communication;
        prop_assert!(c >= alone * (1.0 - 1e-12) - 1e-15, "{c} < {alone}");
        prop_assert!(c <= (ta + tb) * (1.0 + 1e-12), "{c} > {}", ta + tb);
    }

    /// More resources never make a step slower, whatever collectives overlap what: shorter
    /// forward, backward or update compute, more scale-up or scale-out bandwidth, or collectives
    /// that take a smaller share of the compute beside them, never
    /// lengthen the step, with or without a pipeline bubble (the timelines' ends are maxima of
    /// sums of durations). One stage class: see the note on stage classes in `cpu/mod.rs`.
    #[test]
    fn faster_compute_or_links_never_slow_a_step(
        fwd in 1e-3f64..2e-2, bwd in 1e-3f64..4e-2, upd in 0.0f64..5e-3, mbs in 1u32..5,
        bubble in 0.0f64..3.0, comms in proptest::collection::vec(any_comm(), 1..6),
        which in 0usize..6, faster in 0.05f64..1.0, share in 0.0f64..0.3,
    ) {
        let mut m = h100();
        m[t::COMM_SHARE] = share;
        let mut p = sectioned_program(fwd, bwd, upd, f64::from(mbs), comms.clone());
        p.bubble = bubble;
        let base = eval(&p, &m).step_time;
        let (mut q, mut n) = (p.clone(), m.clone());
        match which {
            0..=2 => q.ops[which].count *= faster,
            3 => n[t::UP_BANDWIDTH] /= faster,
            4 => n[t::OUT_BANDWIDTH] /= faster,
            // collectives that take fewer of the cores
            _ => n[t::COMM_SHARE] *= faster,
        }
        let quicker = eval(&q, &n).step_time;
        prop_assert!(quicker <= base * (1.0 + 1e-12), "{quicker} > {base} ({which}, ×{faster})");
    }
}

/// With one micro-batch per step the first micro-batch is the last: a parameter gather that
/// makes the next step's forward wait also delays that micro-batch's backward and the gradient
/// reduction released behind it, so the two step collectives' exposures must not both be
/// measured against the undelayed compute (proptest's counterexample: a 20× faster forward
/// lengthened the step by the forward time it saved).
#[test]
fn one_micro_batch_counts_the_forwards_wait_once() {
    let m = h100();
    let mut a = comm(CollKind::AllGather, 1.767_507e9, 8.0, 1.0);
    a.overlap = Overlap::Compute;
    let mut gather = comm(CollKind::AllGather, 1e6, 8.0, 1.0);
    (gather.overlap, gather.section) = (Overlap::Forward, Section::Step);
    let mut reduce = comm(CollKind::AllReduce, 7.159e9, 8.0, 2.0);
    (reduce.overlap, reduce.section) = (Overlap::Backward, Section::Step);
    let (fwd, bwd) = (1e-3, 0.0365);
    let p = sectioned_program(fwd, bwd, 0.0, 1.0, vec![a, gather, reduce.clone()]);
    let base = eval(&p, &m);
    let mut q = p.clone();
    q.ops[0].count *= 0.05;
    let quicker = eval(&q, &m);
    assert!(
        quicker.step_time <= base.step_time * (1.0 + 1e-12),
        "{quicker:?} vs {base:?}"
    );
    // the link bounds both: the compute-overlapped gather, the parameter gather the forward
    // waits for, then the reduction released as the backward begins (scale-up, then scale-out:
    // not overlapped), back to back from the start of the micro-batch; so the step is that
    // chain whatever the forward
    let up = |c: &Comm| c.coeffs.up[0].bytes / m[t::UP_BANDWIDTH];
    let out = reduce.coeffs.out[0].bytes / m[t::OUT_BANDWIDTH];
    let chain = up(&p.comms[0]) + up(&p.comms[1]) + up(&reduce) + out;
    assert!(
        (base.step_time - chain).abs() < 1e-9 * chain,
        "{} ≠ {chain}",
        base.step_time
    );
    assert!((quicker.step_time - base.step_time).abs() < 1e-12 * base.step_time);
}

/// `fp4_backward_matmul` is the cost of an FP4 training recipe's backward work: it slows fp4
/// GEMMs of the backward pass only; forward fp4 GEMMs (training and serving) and fp8 GEMMs in
/// either pass run at `matmul` × `low_precision_matmul`.
#[test]
fn the_fp4_backward_factor_slows_only_backward_fp4_gemms() {
    let mut m = h100();
    let mut peak = [0.0; NPREC];
    peak[Precision::Bf16.index()] = 989.4e12;
    peak[Precision::Fp8.index()] = 1978.9e12;
    peak[Precision::Fp4.index()] = 3957.8e12;
    m.set_row(t::MATRIX_PEAK, &peak);
    m[t::EFF_LOW_PRECISION] = 0.8;
    m[t::EFF_FP4_BACKWARD] = 0.5;
    let compute = |precision: Precision, phase: Phase| {
        let mut p = gemm_program(8192.0, 8192.0, 8192.0);
        p.ops[0].precision = precision.index();
        p.ops[0].phase = phase;
        eval(&p, &m).breakdown.compute
    };
    let flops = 2.0 * 8192f64.powi(3);
    let fwd4 = compute(Precision::Fp4, Phase::Forward);
    assert!(
        (fwd4 - flops / (3957.8e12 * 0.8)).abs() < 1e-12 * fwd4,
        "{fwd4}"
    );
    let bwd4 = compute(Precision::Fp4, Phase::Backward);
    assert!((bwd4 - 2.0 * fwd4).abs() < 1e-12 * bwd4, "{bwd4} vs {fwd4}");
    let (fwd8, bwd8) = (
        compute(Precision::Fp8, Phase::Forward),
        compute(Precision::Fp8, Phase::Backward),
    );
    assert!((fwd8 - flops / (1978.9e12 * 0.8)).abs() < 1e-12 * fwd8);
    assert_eq!(fwd8, bwd8);
}
