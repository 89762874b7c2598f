//! The checks of a mapping as a file or a workload writes it (degrees, splits, regions, pools,
//! stages) that need no system. A leaf, so that loading a mapping file (`workload/mod.rs`) and
//! lowering a workload's published mapping (`lower.rs`) share them without importing each other.

use crate::model::bounds::{mapping_count, offload_fraction};
use crate::model::Ctx;
use crate::spec::mapping::MappingSpec;

pub(super) fn check_mapping(cx: &mut Ctx, m: &MappingSpec) {
    for (f, v) in [
        ("dp", m.dp),
        ("tp", m.tp),
        ("pp", m.pp),
        ("ep", m.ep),
        ("cp", m.cp),
        ("micro_batch", m.micro_batch),
        ("interleave", m.interleave),
        ("shard", m.shard),
        ("recompute_layers", m.recompute_layers),
    ] {
        if let Some(v) = v {
            cx.check(f, mapping_count(f, v));
        }
    }
    if let Some(v) = m.etp {
        cx.check("etp", mapping_count("etp", v));
    }
    if let Some(o) = &m.order {
        use crate::spec::mapping::Dim;
        let all = [Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp];
        if o.len() != 4 || !all.iter().all(|d| o.contains(d)) {
            cx.error(
                "order",
                format!("`order` must name each of Tp, Cp, Dp, Pp once, found {o:?}"),
                Some(
                    "innermost first, e.g. `order: [Tp, Cp, Dp, Pp]` (Megatron-LM's layout)".into(),
                ),
            );
        }
    }
    if let Some(stages) = &m.stages {
        check_stages(cx, m, stages);
    }
    if let Some(r) = &m.regions {
        check_regions(cx, m, r);
    }
    if let Some(p) = &m.prefill_pool {
        check_pool(cx, m, p);
    }
    check_split(cx, m);
    if let Some(crate::spec::mapping::RecomputeSpec::Ops(parts)) = &m.recompute {
        if parts.is_empty() {
            cx.error(
                "recompute",
                "`recompute: Ops([])` names no part of the layer to re-run",
                Some("list what the backward re-runs, from Qkv, Attention, OutProj, FfnUp, FfnDown, Elementwise; or write `recompute: None`".into()),
            );
        }
    }
    if m.recompute_layers.is_some()
        && matches!(
            m.recompute,
            None | Some(crate::spec::mapping::RecomputeSpec::None)
        )
    {
        cx.error(
            "recompute_layers",
            "`recompute_layers` names the layers that run `recompute`, and the mapping recomputes nothing",
            Some("add the policy those layers run, e.g. `recompute: Full` (Megatron-Core's `recompute_granularity: full` with `recompute_method: block`)".into()),
        );
    }
    if let Some(f) = m.offload_optimizer {
        cx.check(
            "offload_optimizer",
            offload_fraction("offload_optimizer", f),
        );
    }
    if let Some(z) = m.zero {
        cx.check("zero", mapping_count("zero", u64::from(z)));
    }
}

/// Counting the embedding or the loss in the pipeline split balances a uniform split of the
/// layers over `pp` stages: it has nothing to count beside `stages` (which place the embedding on
/// the first stage and the head on the last themselves) or `regions` (one wafer, no pipeline of
/// devices).
fn check_split(cx: &mut Ctx, m: &MappingSpec) {
    for (f, on) in [
        ("embedding_in_pipeline_split", m.embedding_in_pipeline_split),
        ("loss_in_pipeline_split", m.loss_in_pipeline_split),
    ] {
        if on != Some(true) {
            continue;
        }
        let beside = if m.stages.is_some() {
            Some((
                "stages",
                "a pipeline written stage by stage places the embedding on its first stage and the head on its last itself (a last stage of `layers: 0` holds only the head)",
            ))
        } else if m.regions.is_some() {
            Some((
                "regions",
                "`regions` places the whole model on one wafer's cores: there is no pipeline split",
            ))
        } else {
            None
        };
        if let Some((other, why)) = beside {
            cx.error(
                f,
                format!("`{f}` cannot be given beside `{other}`"),
                Some(format!(
                    "{why}; leave `{f}` out, or give `pp` instead of `{other}`"
                )),
            );
        }
    }
}

/// Core regions of a wafer's phases: each block at least one core along both sides, and the
/// model on one wafer (no `tp`, `pp` or `stages` beside them). Whether a block fits the mesh and
/// holds its layers is a property of the system: the lowering reports it as the design's
/// infeasibility (`Reason::Region`).
fn check_regions(cx: &mut Ctx, m: &MappingSpec, r: &crate::spec::mapping::RegionsSpec) {
    for (f, bad) in [
        ("tp", m.tp.is_some_and(|v| v > 1)),
        ("pp", m.pp.is_some_and(|v| v > 1)),
        ("stages", m.stages.is_some()),
    ] {
        if bad {
            cx.error(
                f,
                format!("`{f}` cannot be given beside `regions`"),
                Some("`regions` places the whole model on one wafer's cores; give `dp` for more wafers".into()),
            );
        }
    }
    cx.enter_field("regions", None);
    if r.prefill.is_none() && r.decode.is_none() {
        cx.error(
            "",
            "`regions` names neither phase",
            Some("write `regions: (prefill: (cores: (660, 660)), decode: (cores: (360, 360)))`, or leave `regions` out for the automatic placement".into()),
        );
    }
    for (phase, reg) in [("prefill", r.prefill), ("decode", r.decode)] {
        let Some(reg) = reg else { continue };
        cx.enter_field(phase, None);
        let (a, b) = reg.cores;
        if a == 0 || b == 0 {
            cx.error(
                "cores",
                format!("the {phase} region has {a} × {b} cores"),
                Some("`cores: (columns, rows)`, each at least 1".into()),
            );
        }
        cx.leave();
    }
    cx.leave();
}

/// A prefill pool (disaggregated serving): at least one instance of at least one device, apart
/// from a wafer's core regions (which split one wafer between the phases instead). That the
/// workload is transformer inference and the system has the pool's devices beside the decode
/// instances' is a property of the request: the lowering and the mapping's resolution report it
/// as the design's infeasibility.
fn check_pool(cx: &mut Ctx, m: &MappingSpec, p: &crate::spec::mapping::PoolSpec) {
    if m.regions.is_some() {
        cx.error(
            "prefill_pool",
            "`prefill_pool` cannot be given beside `regions`",
            Some("`regions` splits one wafer's cores between prefill and decode; a prefill pool puts the prefill on devices of its own: give one of them".into()),
        );
    }
    cx.enter_field("prefill_pool", None);
    if p.instances == 0 {
        cx.error(
            "instances",
            "the prefill pool has no instances",
            Some("`prefill_pool: (instances: N, tp: T)` with N ≥ 1, or leave `prefill_pool` out to interleave the prefill into the decode rounds".into()),
        );
    } else {
        cx.count("instances", p.instances);
    }
    cx.count("tp", p.tp);
    cx.leave();
}

/// A pipeline written stage by stage: at least one stage, devices at least 1, a head-only stage
/// (`layers: 0`) only last, no `tp`/`pp` beside it, and at most
/// [`crate::model::mapping::MAX_STAGE_GROUPS`] runs of differently shaped stages.
fn check_stages(cx: &mut Ctx, m: &MappingSpec, stages: &[crate::spec::mapping::StageSpec]) {
    use crate::model::mapping::{Placement, MAX_STAGE_GROUPS};
    if stages.is_empty() {
        cx.error(
            "stages",
            "`stages` lists no stage",
            Some(
                "write one `(layers: N, devices: D)` per pipeline stage, or leave `stages` out"
                    .into(),
            ),
        );
        return;
    }
    for (f, v) in [("tp", m.tp), ("pp", m.pp)] {
        if v.is_some() {
            cx.error(
                f,
                format!("`{f}` cannot be given beside `stages`"),
                Some("`stages` sets the pipeline depth and each stage's devices".into()),
            );
        }
    }
    cx.enter_field("stages", None);
    let n = stages.len();
    for (i, st) in stages.iter().enumerate() {
        cx.enter(crate::diag::Seg::Index(i), None);
        cx.count("devices", st.devices);
        if st.layers == 0 && i + 1 != n {
            cx.error(
                "layers",
                format!("stage {i} holds no layers but is not the last stage"),
                Some("only the last stage may hold the output head alone (`layers: 0`)".into()),
            );
        }
        cx.leave();
    }
    let runs = Placement::runs(stages.iter().map(|s| (s.layers, s.devices)));
    if runs > MAX_STAGE_GROUPS {
        cx.error(
            "",
            format!("the stages form {runs} runs of differently shaped stages, more than {MAX_STAGE_GROUPS}"),
            Some("give neighbouring stages the same layers and devices, so they form runs".into()),
        );
    }
    cx.leave();
}
