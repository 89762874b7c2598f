//! Activations offloaded to host memory (`Mapping::offload_activation_layers`): what stays on the
//! device and what moves, hand-checked on a small system, the link each copy crosses, and the
//! laws (offloading never grows the device's memory; a faster host link never slows a step).

use approx::assert_relative_eq;
use proptest::prelude::*;
use tessera::engine::cpu::{eval, eval_traced};
use tessera::engine::lower::{lower, machine};
use tessera::engine::program::*;
use tessera::engine::table as t;
use tessera::model::mapping::Mapping;
use tessera::model::system::System;
use tessera::model::workload::Workload;

use crate::common;

use crate::common::HOST_NODES as SYSTEM;

const WORKLOAD: &str = common::GPT_13B_TRAINING;

fn fixtures(system: &str) -> (System, Workload) {
    common::load_texts(system, WORKLOAD)
}

/// ZeRO-3 over 32 GPUs, micro-batch 2: one pipeline stage of all 40 layers.
fn mapping(off: u64) -> Mapping {
    Mapping {
        dp: 32,
        zero: 3,
        micro_batch: 2,
        offload_activation_layers: off,
        ..Mapping::single()
    }
}

#[test]
fn the_host_link_is_the_devices_share_bounded_by_host_memory() {
    let (sys, _) = fixtures(SYSTEM);
    let m = machine(&sys, 32);
    assert_relative_eq!(m[t::HOST_BANDWIDTH], 50e9, max_relative = 1e-12);
    assert_relative_eq!(m[t::HOST_CAPACITY], 125e9, max_relative = 1e-12);
    assert_relative_eq!(m[t::HOST_LATENCY], 1e-6, max_relative = 1e-12);
}

#[test]
fn offloaded_layers_leave_the_device_but_two_in_flight() {
    let (sys, w) = fixtures(SYSTEM);
    let base = lower(&sys, &w, &mapping(0), 32).unwrap();
    let p = lower(&sys, &w, &mapping(10), 32).unwrap();
    // With one micro-batch in flight (pp 1) each layer keeps the same bytes; the head's logits
    // sit on top: per layer = (base activations − logits) / 40.
    let logits = 2.0 * 2048.0 * 51200.0 * 4.0;
    let per_layer = (base.footprint.activations - logits) / 40.0;
    assert!(per_layer > 0.0);
    // 10 layers go to host memory; two of them are on the device at a time (double buffer).
    assert_relative_eq!(
        p.footprint.offloaded,
        10.0 * per_layer,
        max_relative = 1e-12
    );
    assert_relative_eq!(
        p.footprint.activations,
        (40.0 - 10.0 + 2.0) * per_layer + logits,
        max_relative = 1e-12
    );
    assert_eq!(base.footprint.offloaded, 0.0);
    // the state is untouched
    assert_relative_eq!(
        p.footprint.state(),
        base.footprint.state(),
        max_relative = 1e-12
    );
    // Two copies per micro-batch, each of one layer's activations, ten times: out behind the
    // forward compute, back behind the backward's; both on the host link alone.
    let copies: Vec<&Comm> = p
        .comms
        .iter()
        .filter(|c| c.role == Role::ActivationOffload)
        .collect();
    assert_eq!(copies.len(), 2);
    for (c, overlap) in copies.iter().zip([Overlap::Forward, Overlap::Backward]) {
        assert_eq!(c.overlap, overlap);
        assert_eq!(c.section, Section::MicroBatch);
        assert_eq!(c.count, 10.0);
        assert_relative_eq!(c.coeffs.host.bytes, per_layer, max_relative = 1e-12);
        assert_eq!(c.coeffs.host.latencies, 1.0);
        assert_eq!(c.coeffs.up[0].bytes + c.coeffs.out[0].bytes, 0.0);
    }
}

#[test]
fn a_copy_is_exposed_only_where_the_compute_does_not_cover_it() {
    let (sys, w) = fixtures(SYSTEM);
    let mut m = machine(&sys, 32);
    let p = lower(&sys, &w, &mapping(10), 32).unwrap();
    let copy = p
        .comms
        .iter()
        .position(|c| c.role == Role::ActivationOffload)
        .unwrap();
    let per_layer = p.comms[copy].coeffs.host.bytes;
    // Forward compute per micro-batch, from the program: the forward operators' time.
    let fwd: f64 = {
        let mut tr = Vec::new();
        eval_traced(&p, &m, Some(&mut tr));
        p.ops
            .iter()
            .zip(&tr)
            .filter(|(o, _)| o.phase == Phase::Forward && o.section == Section::MicroBatch)
            .map(|(_, t)| t / p.micro_batches)
            .sum()
    };
    // a slow enough link: the out-copy takes 10 × (bytes / bw + 1 µs) and shows past the forward
    let t_copy = |bw: f64| 10.0 * (per_layer / bw + 1e-6);
    let bw = 10.0 * per_layer / (4.0 * fwd);
    m[t::HOST_BANDWIDTH] = bw;
    let mut tr = Vec::new();
    eval_traced(&p, &m, Some(&mut tr));
    let exposed = tr[p.ops.len() + copy] / p.micro_batches;
    assert_relative_eq!(exposed, t_copy(bw) - fwd, max_relative = 1e-9);
    // and a fast one hides it entirely
    m[t::HOST_BANDWIDTH] = 1e15;
    eval_traced(&p, &m, Some(&mut tr));
    assert_eq!(tr[p.ops.len() + copy], 0.0);
}

#[test]
fn the_copies_cost_their_bytes_at_the_host_links_energy_per_bit() {
    // 5 pJ/bit = 40 pJ per byte. At the device boundary, the step's energy over all 32 devices
    // grows by the copies' bytes (two per offloaded layer per micro-batch, ten layers, one
    // micro-batch per step on each of the 32 ranks: global batch 64 / dp 32 / micro-batch 2) ×
    // 40 pJ each, the step's time unchanged.
    let (sys, w) = fixtures(SYSTEM);
    let mut m = machine(&sys, 32);
    assert_relative_eq!(m[t::HOST_ENERGY], 40e-12, max_relative = 1e-12);
    m[t::BOUNDARY] = 0.0;
    let p = lower(&sys, &w, &mapping(10), 32).unwrap();
    let with = eval(&p, &m);
    let mut m0 = m.clone();
    m0[t::HOST_ENERGY] = 0.0;
    let without = eval(&p, &m0);
    assert!(with.throttle == 1.0 && without.throttle == 1.0);
    assert_relative_eq!(with.step_time, without.step_time, max_relative = 1e-15);
    let bytes: f64 = p
        .comms
        .iter()
        .filter(|c| c.role == Role::ActivationOffload)
        .map(|c| c.coeffs.host.bytes * c.count)
        .sum::<f64>()
        * p.micro_batches;
    assert_eq!(p.micro_batches, 1.0);
    assert_relative_eq!(
        with.energy_per_step - without.energy_per_step,
        32.0 * bytes * 40e-12,
        max_relative = 1e-9
    );
}

#[test]
fn more_than_host_memory_holds_is_infeasible_with_memory_reason() {
    let (sys, w) = fixtures(SYSTEM);
    let mut m = machine(&sys, 32);
    let p = lower(&sys, &w, &mapping(20), 32).unwrap();
    assert!(eval(&p, &m).feasible);
    m[t::HOST_CAPACITY] = 0.5 * p.footprint.offloaded;
    let e = eval(&p, &m);
    assert!(!e.feasible);
    assert_eq!(
        e.reason_code,
        tessera::engine::reason::point::MEMORY,
        "over host memory"
    );
    assert_eq!(e.needed_bytes, p.footprint.offloaded);
    assert_eq!(e.available_bytes, m[t::HOST_CAPACITY]);
    let why = e.reason().unwrap().to_string();
    assert!(why.starts_with("does not fit in host memory"), "{why}");
}

#[test]
fn offload_needs_a_host_link_and_no_more_layers_than_a_stage_holds() {
    let (sys, w) = fixtures(SYSTEM);
    let r = lower(&sys, &w, &mapping(41), 32).unwrap_err();
    assert_eq!(r.code(), "mapping");
    assert!(r.to_string().contains("a pipeline stage holds 40"), "{r}");
    let no_link = SYSTEM.replace(common::HOST_LINK, "");
    let (sys, w) = fixtures(&no_link);
    let r = lower(&sys, &w, &mapping(10), 32).unwrap_err();
    assert_eq!(r.code(), "unsupported");
    assert!(r.to_string().contains("host_link"), "{r}");
    // without offload the node's missing link changes nothing
    assert!(lower(&sys, &w, &mapping(0), 32).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Offloading one more layer never grows what the device holds.
    #[test]
    fn offloading_more_never_grows_device_memory(n in 0u64..40) {
        let (sys, w) = fixtures(SYSTEM);
        let a = lower(&sys, &w, &mapping(n), 32).unwrap();
        let b = lower(&sys, &w, &mapping(n + 1), 32).unwrap();
        prop_assert!(b.footprint.total() <= a.footprint.total() * (1.0 + 1e-12));
        prop_assert!(b.footprint.offloaded >= a.footprint.offloaded);
    }

    /// A faster host link never slows a step.
    #[test]
    fn more_host_bandwidth_never_slows_a_step(n in 1u64..=40, bw in 1e9f64..1e12, k in 1.0f64..10.0) {
        let (sys, w) = fixtures(SYSTEM);
        let p = lower(&sys, &w, &mapping(n), 32).unwrap();
        let mut m = machine(&sys, 32);
        m[t::HOST_CAPACITY] = 1e15;
        m[t::HOST_BANDWIDTH] = bw;
        let slow = eval(&p, &m);
        m[t::HOST_BANDWIDTH] = bw * k;
        let fast = eval(&p, &m);
        prop_assert!(slow.feasible && fast.feasible);
        prop_assert!(fast.step_time <= slow.step_time * (1.0 + 1e-12));
    }
}

#[test]
fn the_search_offers_offload_only_where_the_node_has_a_host_link() {
    let (sys, w) = fixtures(SYSTEM);
    let c = tessera::engine::search::candidates(&sys, &w, 32);
    let off: Vec<&Mapping> = c
        .iter()
        .filter(|m| m.offload_activation_layers > 0)
        .collect();
    assert!(!off.is_empty());
    // half or all of a stage's layers, never with recomputation
    for m in &off {
        let l = 40u64.div_ceil(m.pp);
        assert!(m.offload_activation_layers == l || m.offload_activation_layers == l / 2);
        assert_eq!(m.recompute, tessera::model::mapping::Recompute::None);
    }
    let no_link = SYSTEM.replace(common::HOST_LINK, "");
    let (sys, w) = fixtures(&no_link);
    let c = tessera::engine::search::candidates(&sys, &w, 32);
    assert!(c.iter().all(|m| m.offload_activation_layers == 0));
}
