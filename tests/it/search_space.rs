//! What `--mapping auto` searches beyond the parallel sizes (issue 14, "a search as wide as the
//! best peer's"): which links each dimension takes (data parallelism inside the pipeline stages,
//! Megatron's order, or the pipeline inside data parallelism), hybrid sharding over one scale-up
//! domain, and plain data parallelism (ZeRO 0) where the framework leaves the parameter gather
//! exposed; and every ZeRO stage beside tensor parallelism. Checked on four 8-GPU
//! nodes: the variants are offered where they can differ and nowhere else, the order decides
//! which traffic crosses the nodes, the wider search never does worse than the narrower one, and
//! the search on every core ranks as one thread would.

use tessera::engine::cpu::eval;
use tessera::engine::lower::{lower, machine};
use tessera::engine::search::{candidates, search};
use tessera::engine::Objective;
use tessera::model::mapping::{Mapping, DEFAULT_ORDER};
use tessera::model::system::System;
use tessera::model::workload::Workload;
use tessera::vocab::Dim;

use crate::common;

/// Four of the lowering tests' nodes (`common::NODE_8`), InfiniBand between them.
fn system() -> String {
    let s = common::NODE_8.replace(
        "nodes: 1,",
        r#"nodes: 4,
    scale_out: (name: "ib", topology: FatTree, bandwidth: "100 Gb/s", latency: "5 us"),"#,
    );
    assert_ne!(s, common::NODE_8, "the fixture's node count moved");
    s
}

/// The pipeline inside data parallelism.
const PP_INSIDE: [Dim; 4] = [Dim::Tp, Dim::Cp, Dim::Pp, Dim::Dp];

fn fixtures(workload: &str) -> (System, Workload) {
    common::load_texts(&system(), workload)
}

#[test]
fn the_order_is_searched_where_it_can_move_traffic_onto_the_nearer_links() {
    let (sys, w) = fixtures(common::GPT_13B_TRAINING);
    let c = candidates(&sys, &w, 32);
    for m in &c {
        let both = m.pp > 1 && m.dp > 1 && m.tp * m.cp < 8;
        assert!(
            m.order == DEFAULT_ORDER || (both && m.order == PP_INSIDE),
            "{m:?}"
        );
        if both {
            let twin = Mapping {
                order: if m.order == DEFAULT_ORDER {
                    PP_INSIDE
                } else {
                    DEFAULT_ORDER
                },
                ..*m
            };
            assert!(c.contains(&twin), "{m:?} without its twin");
        }
    }
    assert!(c.iter().any(|m| m.order == PP_INSIDE));
    // tp 2 × pp 4 fills a node in the pipeline-inside order: the pipeline's sends stay on NVLink
    // and the gradient reduction crosses the nodes; in Megatron's order tp 2 × dp 4 fills it and
    // the sends cross. The two place the same work and differ in time.
    let m = Mapping {
        dp: 4,
        tp: 2,
        pp: 4,
        sp: true,
        zero: 1,
        micro_batch: 1,
        overlap_grad_reduce: true,
        ..Mapping::single()
    };
    assert_eq!((m.stride(Dim::Pp), m.stride(Dim::Dp)), (8, 2));
    let inside = Mapping {
        order: PP_INSIDE,
        ..m
    };
    assert_eq!((inside.stride(Dim::Pp), inside.stride(Dim::Dp)), (2, 8));
    let mach = machine(&sys, 32);
    let t = |m: &Mapping| eval(&lower(&sys, &w, m, 32).unwrap(), &mach).step_time;
    assert!((t(&m) - t(&inside)).abs() > 1e-6 * t(&m));
}

#[test]
fn the_wider_search_never_does_worse_than_megatrons_order_alone() {
    let (sys, w) = fixtures(common::GPT_13B_TRAINING);
    let mach = machine(&sys, 32);
    let best_default = candidates(&sys, &w, 32)
        .iter()
        .filter(|m| m.order == DEFAULT_ORDER)
        .filter_map(|m| lower(&sys, &w, m, 32).ok())
        .map(|p| eval(&p, &mach))
        .filter(|e| e.feasible)
        .map(|e| e.step_time)
        .fold(f64::INFINITY, f64::min);
    let r = search(&sys, &w, 32, Objective::Time);
    let (_, best) = r.best().expect("a feasible mapping");
    assert!(best.step_time <= best_default * (1.0 + 1e-12));
    assert_eq!(r.tried, candidates(&sys, &w, 32).len());
}

#[test]
fn hybrid_sharding_over_a_domain_is_searched_beside_full_sharding() {
    let (sys, w) = fixtures(common::GPT_13B_TRAINING);
    let c = candidates(&sys, &w, 32);
    // pure data parallelism over the 32 GPUs: the state sharded over all of them, or over each
    // node's eight and replicated across the four nodes
    let pure: Vec<&Mapping> = c
        .iter()
        .filter(|m| m.dp == 32 && m.zero == 3 && m.micro_batch == 1)
        .collect();
    assert!(pure.iter().any(|m| m.shard == 0 && m.shard_group() == 32));
    assert!(pure.iter().any(|m| m.shard == 8 && m.shard_group() == 8));
    // never a shard group beside tensor or pipeline parallelism, nor one of the whole domain
    assert!(c
        .iter()
        .filter(|m| m.shard > 0)
        .all(|m| m.zero == 3 && m.tp == 1 && m.pp == 1 && m.dp > 8));
}

#[test]
fn plain_data_parallelism_is_tried_only_where_the_parameter_gather_is_exposed() {
    // no published mapping: the framework overlaps nothing beyond the gradient reduction, so
    // ZeRO 1's parameter gather is exposed and DDP's single all-reduce may be quicker
    let (sys, w) = fixtures(common::GPT_13B_TRAINING);
    let c = candidates(&sys, &w, 32);
    assert!(c.iter().any(|m| m.zero == 0));
    assert!(c.iter().filter(|m| m.zero == 0).all(|m| m.dp * m.cp > 1));
    // a framework that overlaps the gather: ZeRO 1 moves the same bytes hidden, in less memory
    let overlapped = common::GPT_13B_TRAINING.replace(
        "target: Tokens(1e9)),",
        "target: Tokens(1e9)),\n    mapping: (overlap: [ParameterGather], overlap_grad_reduce: true, source: \"t\"),",
    );
    let (sys, w) = fixtures(&overlapped);
    assert!(w
        .mapping
        .as_ref()
        .is_some_and(|m| m.overlap.parameter_gather));
    assert!(candidates(&sys, &w, 32).iter().all(|m| m.zero != 0));
}

#[test]
fn every_zero_stage_is_searched_beside_tensor_parallelism_and_zero_one_under_a_pipeline() {
    // ZeRO 1-3 without a pipeline, beside tensor parallelism too (3: torchtitan's FSDP × TP);
    // under a pipeline ZeRO 2 and 3 keep ZeRO 1's state and move its bytes
    // (`Mapping::weights_sharded_through_step`), so only ZeRO 1 is tried there
    let (sys, w) = fixtures(common::GPT_13B_TRAINING);
    let c = candidates(&sys, &w, 32);
    for zero in 1..=3 {
        assert!(
            c.iter().any(|m| m.zero == zero && m.tp > 1 && m.pp == 1),
            "ZeRO {zero} beside tp"
        );
    }
    for m in c.iter().filter(|m| m.zero == 1 && m.pp == 1) {
        assert!(
            c.contains(&Mapping { zero: 3, ..*m }),
            "{m:?} without ZeRO 3"
        );
    }
    assert!(c.iter().any(|m| m.pp > 1));
    assert!(
        c.iter().filter(|m| m.pp > 1).all(|m| m.zero <= 1),
        "ZeRO 2-3 under a pipeline"
    );
}

#[test]
fn the_search_on_every_core_ranks_as_one_thread_would() {
    // every candidate lowered and evaluated in order, the feasible ones ranked by a stable sort:
    // the same mappings in the same order, ties included
    let (sys, w) = fixtures(common::GPT_13B_TRAINING);
    let mach = machine(&sys, 32);
    let mut one: Vec<(Mapping, f64)> = candidates(&sys, &w, 32)
        .into_iter()
        .filter_map(|m| lower(&sys, &w, &m, 32).ok().map(|p| (m, eval(&p, &mach))))
        .filter(|(_, e)| e.feasible)
        .map(|(m, e)| (m, 1.0 / e.throughput))
        .collect();
    one.sort_by(|a, b| a.1.total_cmp(&b.1));
    let r = search(&sys, &w, 32, Objective::Time);
    assert!(one.len() > 100, "{} feasible", one.len());
    let many: Vec<Mapping> = r.ranked.iter().map(|(m, _)| *m).collect();
    let one: Vec<Mapping> = one.into_iter().map(|(m, _)| m).collect();
    assert_eq!(many, one);
}
