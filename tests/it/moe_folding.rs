//! MoE parallel folding (Megatron-Core `expert_tensor_parallel_size`; Liu et al., arXiv
//! 2504.14960): the routed experts take their own tensor-parallel width `etp` apart from the
//! attention's `tp`, and the expert-parallel group folds over the stage's tp × cp × dp ranks.
//! Hand counts of the memory, the operators and the collectives it changes, the rule that
//! ep × etp divides tp × cp × dp, and a law: a wider etp never grows the footprint.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use approx::assert_relative_eq;
use proptest::prelude::*;
use tessera::engine::lower::lower;
use tessera::engine::program::Program;
use tessera::model::mapping::Mapping;
use tessera::model::system::{load_system, System};
use tessera::model::workload::{load_workload, Model, Task, Transformer, Workload};

use crate::common;

use crate::common::NODE_8 as SYSTEM;

/// 8 layers, all with 8 routed experts of 768 (top-2, gated), no shared expert.
const WORKLOAD: &str = r#"Workload(
    version: 1, name: "test", source: "t", sources: { "t": "test fixture" },
    model: Transformer(layers: 8, hidden: 2048, heads: 32, kv_heads: 4, ffn: 6144, gated_ffn: true, vocab: 32000,
        experts: (count: 8, top_k: 2, ffn: 768)),
    task: Training(seq_len: 4096, global_batch: 16, target: Steps(10), flash_attention: true, dropout: false),
)"#;

fn load() -> (System, Workload) {
    common::load_texts(SYSTEM, WORKLOAD)
}

fn transformer(w: &Workload) -> &Transformer {
    let Model::Transformer(t) = &w.model else {
        panic!("a transformer")
    };
    t
}

/// tp × dp = 8 on the one node, with ep and etp as given (`None`: etp unwritten).
fn mapping(tp: u64, ep: u64, etp: Option<u64>, zero: u8) -> Mapping {
    Mapping {
        dp: 8 / tp,
        tp,
        ep,
        etp,
        sp: tp > 1,
        zero,
        micro_batch: 1,
        ..Mapping::single()
    }
}

fn program(m: &Mapping) -> Program {
    let (sys, w) = load();
    lower(&sys, &w, m, 8).unwrap_or_else(|r| panic!("{m:?}: {r}"))
}

fn count(p: &Program, name: &str) -> f64 {
    p.comms
        .iter()
        .filter(|c| c.name == name)
        .map(|c| c.count)
        .sum()
}

#[test]
fn expert_weights_per_device_are_expert_params_over_ep_times_etp() {
    let (_, w) = load();
    let t = transformer(&w);
    let Task::Training(tr) = &w.task else {
        panic!("training")
    };
    let wb = tr.weights.bytes().max(2.0);
    let l = 8.0;
    // per layer: 8 experts of 3 × 2048 × 768 (gated), beside the attention and the router
    let experts = 8.0 * 3.0 * 2048.0 * 768.0;
    assert_relative_eq!(t.ffn_params(768) * 8.0, experts);
    let dense = t.attn_params() + 2048.0 * 8.0;
    let embed = t.embedding_params();
    for (tp, ep, etp) in [
        (2, 4, 1),
        (2, 4, 2),
        (2, 2, 1),
        (1, 8, 1),
        (4, 2, 1),
        (4, 2, 4),
    ] {
        let p = program(&mapping(tp, ep, Some(etp), 0));
        let tp = tp as f64;
        let by_hand = wb * (l * dense / tp + l * experts / (ep * etp) as f64 + embed / tp);
        assert_relative_eq!(p.footprint.weights, by_hand, max_relative = 1e-12);
    }
    // etp = 1 with tp = 2 holds twice the expert weights of etp = tp, and the same dense ones
    let whole = program(&mapping(2, 4, Some(1), 0)).footprint.weights;
    let split = program(&mapping(2, 4, None, 0)).footprint.weights;
    assert_relative_eq!(
        whole - split,
        wb * l * experts * (1.0 / 4.0 - 1.0 / 8.0),
        max_relative = 1e-12
    );
}

#[test]
fn zero_shards_expert_state_over_the_expert_data_parallel_ranks() {
    let (_, w) = load();
    let t = transformer(&w);
    let Task::Training(tr) = &w.task else {
        panic!("training")
    };
    let experts = 8.0 * t.ffn_params(768);
    let dense = t.attn_params() + 2048.0 * 8.0;
    let embed = t.embedding_params();
    // tp 2 × dp 4, ep 4, etp 1: edp = 8 / 4 = 2; dense state over dp = 4
    let p = program(&mapping(2, 4, Some(1), 1));
    let dense_local = 8.0 * dense / 2.0 + embed / 2.0;
    let expert_local = 8.0 * experts / 4.0;
    assert_relative_eq!(
        p.footprint.optimizer,
        tr.optimizer_bytes * (dense_local / 4.0 + expert_local / 2.0),
        max_relative = 1e-12
    );
    // the expert gradients are reduced over their 2 expert-data-parallel ranks, the dense over 4
    let g = |name: &str| {
        p.comms
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.inner * c.outer)
    };
    assert_eq!(g("edp expert gradient reduce-scatter"), Some(2.0));
    assert_eq!(g("dp gradient reduce-scatter"), Some(4.0));
    // edp = 1 (ep × etp fills the stage): no expert gradient reduction at all
    let p = program(&mapping(2, 8, Some(1), 1));
    assert!(p.comms.iter().all(|c| !c.name.starts_with("edp")));
}

#[test]
fn etp_one_keeps_the_flops_and_drops_the_expert_mlp_tensor_parallel_collectives() {
    let folded = program(&mapping(2, 4, Some(1), 1));
    let plain = program(&mapping(2, 4, None, 1));
    let ffn = |p: &Program| p.ops.iter().find(|o| o.name == "ffn").unwrap().clone();
    // the same expert FLOPs per device (balanced), on whole experts: twice the weight bytes
    assert_relative_eq!(ffn(&folded).flops, ffn(&plain).flops, max_relative = 1e-12);
    let wb = 2.0;
    assert_relative_eq!(
        ffn(&folded).weight_bytes,
        (8.0 / 4.0) * 3.0 * 2048.0 * 768.0 * wb,
        max_relative = 1e-12
    );
    assert_relative_eq!(
        ffn(&plain).weight_bytes,
        (8.0 / 4.0) / 2.0 * 3.0 * 2048.0 * 768.0 * wb,
        max_relative = 1e-12
    );
    // every layer has experts and none is shared: the MLP half of the tp collectives is gone,
    // the attention half stays; nothing runs over an etp group of one
    for name in [
        "tp all-gather",
        "tp reduce-scatter",
        "tp backward reduce-scatter + re-gather (overlapped)",
    ] {
        assert!(count(&plain, name) > 0.0, "{name}");
        assert_relative_eq!(count(&folded, name), 0.5 * count(&plain, name));
    }
    assert!(folded.comms.iter().all(|c| !c.name.starts_with("etp")));
    // writing etp = tp is not writing it
    let same = program(&mapping(2, 4, Some(2), 1));
    assert_eq!(format!("{:?}", same.comms), format!("{:?}", plain.comms));
    assert_eq!(format!("{:?}", same.ops), format!("{:?}", plain.ops));
}

#[test]
fn ep_times_etp_must_divide_tp_cp_dp() {
    let (sys, w) = load();
    // tp 2 × dp 4 = 8 ranks: ep 8 × etp 2 = 16 does not fit
    let r = lower(&sys, &w, &mapping(2, 8, Some(2), 1), 8).unwrap_err();
    assert_eq!(r.code(), "mapping");
    assert_eq!(
        r.to_string(),
        "ep 8 × etp 2 = 16 does not divide tp × cp × dp = 8"
    );
    // ep 8 folds over the tp ranks with etp 1 (the old rule, ep | dp, refused it)
    assert!(lower(&sys, &w, &mapping(2, 8, Some(1), 1), 8).is_ok());
    assert!(lower(&sys, &w, &mapping(2, 8, None, 1), 8).is_err());
    // etp below tp needs the tokens split over the tp ranks before dispatch
    let no_sp = Mapping {
        sp: false,
        ..mapping(2, 4, Some(1), 1)
    };
    assert_eq!(lower(&sys, &w, &no_sp, 8).unwrap_err().code(), "mapping");
    // an etp that does not fit the stage, beside an ep of one
    let r = lower(&sys, &w, &mapping(1, 1, Some(16), 1), 8).unwrap_err();
    assert_eq!(r.code(), "mapping");
}

#[test]
fn the_search_tries_folded_expert_layouts_where_they_are_legal() {
    let (sys, w) = load();
    let c = tessera::engine::search::candidates(&sys, &w, 8);
    // etp 1 beside every tp > 1, with ep over tp × cp × dp: on 8 GPUs ep 8 folds all of them
    // (tp 8 × dp 1 has no dp × cp to hold ep 8 with etp = tp)
    assert!(c
        .iter()
        .any(|m| m.tp == 8 && m.dp == 1 && m.ep == 8 && m.etp == Some(1)));
    assert!(!c
        .iter()
        .any(|m| m.tp == 8 && m.dp == 1 && m.ep == 8 && m.etp.is_none()));
    for m in &c {
        assert!(
            (m.tp * m.cp * m.dp).is_multiple_of(m.ep * m.etp()),
            "{m:?}: ep × etp must divide tp × cp × dp"
        );
        if let Some(e) = m.etp {
            assert!(e == 1 && m.tp > 1 && m.ep > 1, "{m:?}");
        }
    }
    // and never for a dense model
    let dense = WORKLOAD.replace("\n        experts: (count: 8, top_k: 2, ffn: 768)", "");
    assert_ne!(dense, WORKLOAD);
    let (sys, w) = common::load_texts(SYSTEM, &dense);
    let c = tessera::engine::search::candidates(&sys, &w, 8);
    assert!(c.iter().all(|m| m.etp.is_none() && m.ep == 1));
}

#[test]
fn an_expert_parallel_group_folds_the_tensor_parallel_ranks() {
    // Qwen3-235B-A22B on 256 H100 (8 per node) as Megatron-Bridge runs it: TP 2, PP 8, EP 32,
    // etp 1. The EP group takes 32 consecutive ranks (the tp pairs folded in): 8 per node over
    // 4 nodes. With etp = tp it would need ep | dp (16) and is refused.
    let sys = load_system("architectures/eos-h100.ron", &common::CrateFs)
        .value
        .unwrap();
    let w = load_workload("workloads/mbridge-qwen3-235b-a22b.ron", &common::CrateFs)
        .value
        .unwrap();
    let m = Mapping {
        dp: 16,
        tp: 2,
        pp: 8,
        ep: 32,
        etp: Some(1),
        sp: true,
        zero: 1,
        micro_batch: 1,
        interleave: 4,
        ..Mapping::single()
    };
    let p = lower(&sys, &w, &m, 256).unwrap();
    let a2a = p.comms.iter().find(|c| c.name == "ep all-to-all").unwrap();
    assert_eq!((a2a.inner, a2a.outer), (8.0, 4.0));
    let r = lower(&sys, &w, &Mapping { etp: None, ..m }, 256).unwrap_err();
    assert_eq!(r.code(), "mapping");
}

proptest! {
    /// ZeRO shards each parameter's optimizer state over the ranks that hold it: summed over the
    /// stage's devices it is the model's state once, never less (the old sharding of expert
    /// state over dp × cp, ep times more ranks than hold an expert, summed to less).
    #[test]
    fn sharded_state_over_the_devices_is_the_models_once(
        tp_log in 0u32..4, ep_log in 0u32..4, etp_log in 0u32..4, zero in 1u8..4,
    ) {
        let (tp, ep, etp) = (1u64 << tp_log, 1u64 << ep_log, 1u64 << etp_log);
        prop_assume!(ep * etp <= 8);
        let (_, w) = load();
        let t = transformer(&w);
        let Task::Training(tr) = &w.task else { panic!("training") };
        let total = 8.0 * (t.attn_params() + 2048.0 * 8.0 + 8.0 * t.ffn_params(768))
            + t.embedding_params();
        let p = program(&mapping(tp, ep, Some(etp), zero));
        let summed = p.footprint.optimizer * 8.0;
        prop_assert!(
            (summed / (total * tr.optimizer_bytes) - 1.0).abs() < 1e-12,
            "tp {} ep {} etp {}: {} of {}", tp, ep, etp, summed, total * tr.optimizer_bytes
        );
    }

    /// With the same ep, a wider etp never grows a device's footprint: the expert weights and
    /// gradients shrink by etp, and ZeRO's expert state per device, sharded over the fewer
    /// expert-data-parallel ranks, stays expert params / (tp · cp · dp).
    #[test]
    fn a_wider_etp_never_grows_the_footprint(
        tp_log in 0u32..4, ep_log in 0u32..4, a in 0u32..4, b in 0u32..4, zero in 0u8..4,
    ) {
        let tp = 1u64 << tp_log;
        let ep = 1u64 << ep_log;
        let (lo, hi) = (1u64 << a.min(b), 1u64 << a.max(b));
        prop_assume!(ep * hi <= 8);
        let small = program(&mapping(tp, ep, Some(lo), zero)).footprint;
        let large = program(&mapping(tp, ep, Some(hi), zero)).footprint;
        prop_assert!(
            large.total() <= small.total() * (1.0 + 1e-12),
            "tp {} ep {} etp {} → {}: {} > {}", tp, ep, lo, hi, large.total(), small.total()
        );
    }
}
