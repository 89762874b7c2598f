//! Reduce-scatters and all-gathers across scale-up domains as NCCL runs them: a ring, whose
//! latency grows with the domains it crosses (NVIDIA/nccl `src/graph/tuning.cc`: `nNodes − 1`
//! inter-node steps), not a tree's log2 — the data-parallel collectives at thousands of ranks
//! (issue 43). Hand-checked times and the law that more ranks never make one of them shorter.

use crate::common::{comm, h100};
use proptest::prelude::*;
use tessera::engine::cpu::collective;
use tessera::engine::program::CollKind;
use tessera::engine::table as t;

/// A 1 GB reduce-scatter over 8 GPUs in each of 32 nodes: the NVLink phase takes its ring's 7
/// steps of 2 µs and 7/8 of the buffer at 450 GB/s; the network phase its ring's 31 steps of
/// 5 µs and 31/32 of the node's eighth at 50 GB/s (the tree form took 5 steps of 5 µs).
#[test]
fn reduce_scatter_across_nodes_takes_a_rings_latency_steps() {
    let mut m = h100();
    m[t::UP_LATENCY] = 2e-6;
    m[t::OUT_LATENCY] = 5e-6;
    let c = comm(CollKind::ReduceScatter, 1e9, 8.0, 32.0);
    assert_eq!(c.coeffs.out[0].latencies, 31.0);
    assert_eq!(c.coeffs.up[0].latencies, 7.0);
    let (time, up, out) = collective(&c, &m);
    let want_up = 7.0 * 2e-6 + 7.0 / 8.0 * 1e9 / 450e9;
    let want_out = 31.0 * 5e-6 + 31.0 / 32.0 * (1e9 / 8.0) / 50e9;
    assert!((time - (want_up + want_out)).abs() < 1e-12, "{time}");
    assert!((up - 7.0 / 8.0 * 1e9).abs() < 1.0);
    assert!((out - 31.0 / 32.0 * 1e9 / 8.0).abs() < 1.0);
    // an all-gather crosses the network in the same ring steps
    let ag = comm(CollKind::AllGather, 1e9, 8.0, 32.0);
    assert_eq!(ag.coeffs.out[0].latencies, 31.0);
}

/// With in-network reduction on the scale-out tier (SHARP) the aggregation tree keeps
/// log2(domains) steps, and an all-reduce keeps NCCL's Tree: 2 log2(domains).
#[test]
fn in_network_reduction_and_all_reduce_keep_their_trees() {
    let rs = comm(CollKind::ReduceScatter, 1e9, 8.0, 32.0);
    assert_eq!(rs.coeffs.out[1].latencies, 5.0);
    let ar = comm(CollKind::AllReduce, 1e9, 8.0, 32.0);
    assert_eq!(ar.coeffs.out[0].latencies, 10.0);
    let mut m = h100();
    m[t::OUT_LATENCY] = 5e-6;
    m[t::OUT_INR] = 1.0;
    let (with_sharp, _, _) = collective(&rs, &m);
    m[t::OUT_INR] = 0.0;
    let (ring, _, _) = collective(&rs, &m);
    assert!((ring - with_sharp - 26.0 * 5e-6).abs() < 1e-12);
}

proptest! {
    /// Doubling the domains a reduce-scatter or an all-gather spans (the same buffer per rank)
    /// never makes it shorter, whatever the latencies and bandwidths.
    #[test]
    fn more_domains_never_make_a_ring_collective_shorter(
        gather in any::<bool>(), bytes in 1e3f64..1e10, inner_log in 0u32..4, outer_log in 0u32..12,
        up_lat in 0.0f64..2e-5, out_lat in 0.0f64..5e-5, out_bw in 1e9f64..1e11,
    ) {
        let kind = if gather { CollKind::AllGather } else { CollKind::ReduceScatter };
        let mut m = h100();
        m[t::UP_LATENCY] = up_lat;
        m[t::OUT_LATENCY] = out_lat;
        m[t::OUT_BANDWIDTH] = out_bw;
        let inner = f64::from(1u32 << inner_log);
        let time = |outer: f64| collective(&comm(kind, bytes, inner, outer), &m).0;
        let o = f64::from(1u32 << outer_log);
        prop_assert!(time(2.0 * o) >= time(o) * (1.0 - 1e-12), "{} < {}", time(2.0 * o), time(o));
        // and never less than the latency of its ring across the domains
        prop_assert!(time(2.0 * o) >= (2.0 * o - 1.0) * out_lat * (1.0 - 1e-12));
    }
}
