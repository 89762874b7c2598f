//! Expert parallelism's dispatchers (`vocab::Dispatch`): the plain all-to-all sends each of a
//! token's top-k copies to its expert's device; the hierarchical dispatch of DeepEP and HybridEP
//! sends a token once to each other scale-up domain holding any of its experts and forwards it
//! there over the scale-up links. Hand counts of the bytes each puts on each link class, the law
//! that deduplication never sends more over the scale-out network, and the shipped DeepSeek-V3
//! workload on four DGX B200 nodes.

use approx::assert_relative_eq;
use proptest::prelude::*;
use tessera::engine::cpu::eval;
use tessera::engine::lower::{lower, machine};
use tessera::engine::program::{CollKind, Role};
use tessera::model::mapping::Mapping;
use tessera::model::system::load_system;
use tessera::model::workload::load_workload;
use tessera::vocab::Dispatch;

use crate::common;

#[test]
fn hierarchical_dispatch_sends_a_token_once_per_remote_domain() {
    // 8 ranks in each of 4 domains, top-8, 1 MB of copies per rank: a plain all-to-all sends
    // 3/4 of them out (768 kB) and 7/32 over the scale-up links; the hierarchical dispatch sends
    // each token to 3·(1 − (3/4)^8) = 2.6997 remote domains (1 MB / 8 × 2.6997 = 337 kB out) and
    // receives all but its own 1/8 over the scale-up links (7/8 MB).
    let s = 1.0e6;
    let plain = common::comm(CollKind::AllToAll, s, 8.0, 4.0);
    assert_relative_eq!(plain.coeffs.out[0].bytes, 0.75 * s);
    assert_relative_eq!(plain.coeffs.up[0].bytes, 7.0 / 32.0 * s);
    let h = plain.clone().hierarchical_dispatch(8.0);
    let remote = 3.0 * (1.0 - 0.75f64.powi(8));
    assert_relative_eq!(
        h.coeffs.out[0].bytes,
        s / 8.0 * remote,
        max_relative = 1e-12
    );
    assert_relative_eq!(
        h.coeffs.out[1].bytes,
        s / 8.0 * remote,
        max_relative = 1e-12
    );
    assert_relative_eq!(h.coeffs.up[0].bytes, 7.0 / 8.0 * s, max_relative = 1e-12);
    assert!(h.coeffs.overlapped);
    assert_eq!(
        (h.coeffs.out[0].latencies, h.coeffs.up[0].latencies),
        (1.0, 1.0)
    );
}

#[test]
fn within_one_domain_or_for_one_copy_nothing_changes_out() {
    // One domain: no scale-out network to deduplicate over, the plain all-to-all.
    let inside = common::comm(CollKind::AllToAll, 1.0e6, 8.0, 1.0);
    assert_eq!(
        inside.clone().hierarchical_dispatch(8.0).coeffs,
        inside.coeffs
    );
    // Top-1: a token has one copy, so it leaves its domain as often either way.
    let one = common::comm(CollKind::AllToAll, 1.0e6, 8.0, 4.0);
    assert_relative_eq!(
        one.clone().hierarchical_dispatch(1.0).coeffs.out[0].bytes,
        one.coeffs.out[0].bytes,
        max_relative = 1e-12
    );
    // Other collectives are not dispatches.
    let ar = common::comm(CollKind::AllReduce, 1.0e6, 8.0, 4.0);
    assert_eq!(ar.clone().hierarchical_dispatch(8.0).coeffs, ar.coeffs);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Deduplication never sends more over the scale-out network than one copy per expert does,
    /// and never less than one copy per token's expected remote domains can.
    #[test]
    fn deduplication_never_sends_more_out(
        u in prop::sample::select(vec![1.0f64, 2.0, 4.0, 8.0, 72.0]),
        o in prop::sample::select(vec![2.0f64, 3.0, 4.0, 8.0, 16.0, 64.0]),
        k in 1u32..=16,
        s in 1.0e3f64..1.0e9,
    ) {
        let plain = common::comm(CollKind::AllToAll, s, u, o);
        let h = plain.clone().hierarchical_dispatch(k as f64);
        prop_assert!(h.coeffs.out[0].bytes <= plain.coeffs.out[0].bytes * (1.0 + 1e-12));
        // at least one remote domain's worth per token whenever a copy may leave
        prop_assert!(h.coeffs.out[0].bytes >= s / k as f64 * (1.0 - 1.0 / o) * (1.0 - 1e-12));
    }
}

#[test]
fn deepseek_v3_on_four_dgx_b200_nodes_sends_fewer_bytes_out() {
    // The shipped DeepSeek-V3 workload at Megatron-Bridge's B200 layout: EP 32 over four nodes of
    // 8, top-8. The dispatcher changes the expert all-to-all's scale-out bytes by
    // 2.6997 / 6 and nothing else in the program.
    let fs = common::CrateFs;
    let sys = load_system("architectures/dgx-b200-cluster.ron", &fs)
        .value
        .expect("the shipped B200 cluster loads");
    let w = load_workload("workloads/mbridge-deepseek-v3.ron", &fs)
        .value
        .expect("the shipped DeepSeek-V3 workload loads");
    let mapping = |expert_dispatch| Mapping {
        dp: 32,
        pp: 8,
        interleave: 2,
        ep: 32,
        etp: Some(1),
        micro_batch: 1,
        embedding_in_pipeline_split: true,
        loss_in_pipeline_split: true,
        expert_dispatch,
        ..Mapping::single()
    };
    let plain = lower(&sys, &w, &mapping(Dispatch::AllToAll), 256).unwrap();
    let hier = lower(&sys, &w, &mapping(Dispatch::Hierarchical), 256).unwrap();
    assert_eq!(plain.comms.len(), hier.comms.len());
    let mut seen = 0;
    for (a, b) in plain.comms.iter().zip(&hier.comms) {
        if a.role == Role::ExpertAllToAll {
            seen += 1;
            assert_eq!((a.inner, a.outer), (8.0, 4.0));
            let ratio = 3.0 * (1.0 - 0.75f64.powi(8)) / 6.0;
            assert_relative_eq!(
                b.coeffs.out[0].bytes / a.coeffs.out[0].bytes,
                ratio,
                max_relative = 1e-12
            );
        } else {
            assert_eq!(a.coeffs, b.coeffs, "{}", a.name);
        }
    }
    assert!(seen > 0, "no expert all-to-all");
    let m = machine(&sys, 256);
    let (ta, tb) = (eval(&plain, &m).step_time, eval(&hier, &m).step_time);
    assert!(tb < ta, "hierarchical {tb} s, plain {ta} s");
}
