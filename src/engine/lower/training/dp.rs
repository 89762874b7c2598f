//! The data-parallel collectives of a training step: the gradient reduction over the replicas and
//! the shard group (ZeRO 0-3, hybrid sharding, the expert-data-parallel ranks), and ZeRO 3's
//! parameter gathers, each by its role.

use super::shape::Shape;
use crate::engine::lower::builder::{Builder, Collective};
use crate::engine::lower::place::Group;
use crate::engine::program::*;

/// Hybrid sharding's second reduction: each shard group reduce-scatters the gradients inside
/// itself (`step_reduction`), then the ranks holding the same shard in the other groups
/// all-reduce it, `grad_bytes` each (the gradients over the shard group), over `group`. It
/// follows the first: once per step where gradients are reduced once per step (ZeRO 1; ZeRO 0,
/// where the replicas are all there is; ZeRO 2 and 3 under a pipeline schedule), every
/// micro-batch where each micro-batch's are (ZeRO 2, 3 without one), behind the backward like
/// it. A bucket's all-reduce can only start once its reduce-scatter is done, so the step's last
/// bucket is exposed here too, after the shard group's.
pub(super) fn replica_reduction(b: &mut Builder, d: &Shape, grad_bytes: f64, group: Group) {
    let m = d.m;
    let mut c = Collective {
        name: "dp replica gradient all-reduce".into(),
        role: Role::GradientReduction,
        kind: CollKind::AllReduce,
        bytes: grad_bytes,
        group,
        count: 1.0,
        section: Section::Step,
        overlap: if m.overlap_grad_reduce {
            Overlap::Backward
        } else {
            Overlap::None
        },
    };
    if !m.gradients_sharded_through_step() {
        c = spread_early_chunks(b, d, c, Overlap::TailBackward);
    }
    b.grad_comm(
        c,
        m.gradients_sharded_through_step()
            .then_some(d.micro_batches),
    );
}

/// The windows an interleaved pipeline schedule gives a step's collectives of the `v` model
/// chunks but one, in micro-batch passes: (backwards before the step's last, first forwards);
/// `None` without interleaving.
///
/// Megatron-Core's interleaved 1F1B runs the micro-batches in groups of `g` = min(micro-batches,
/// pp), each group through one model chunk after the other, so the step's last round of
/// backwards is the `v` chunks' groups in turn, `v·g` chunk-passes, a micro-batch's backward
/// being `v` of them. It launches a chunk's gradient reduction as soon as that chunk's last
/// backward is done (`schedules.py` @core_v0.8.0 l.797-805, `is_last_microbatch_for_model_chunk`),
/// so the reductions of all chunks but the last run behind the `(v − 1)·g` chunk-passes of the
/// groups after the first; the last micro-batch's backward (`v` of those) already hides the
/// last chunk's, which leaves `(v − 1)·g/v − 1` micro-batch backwards to the others. The
/// parameter gathers mirror it (`overlap_param_gather`): each chunk's updated parameters are
/// gathered once the chunk before it starts its first group of forwards (l.723-732), behind
/// `(v − 1)·g` forward chunk-passes, `(v − 1)·g/v` micro-batch forwards; the first chunk's is
/// launched with the optimizer step (`distrib_optimizer.py` l.1336-1337) and stays where an
/// uninterleaved step's is. The two together take no more windows than the step has
/// micro-batches besides the one the step's own bookings ride. The compute is counted without the schedule's idle waits, which
/// only lengthen these windows.
pub(super) fn chunk_windows(d: &Shape) -> Option<(f64, f64)> {
    let (pp, v) = (d.m.pp as f64, d.m.interleave as f64);
    if pp <= 1.0 || v <= 1.0 {
        return None;
    }
    let g = d.micro_batches.min(pp);
    let forwards = (v - 1.0) * g / v;
    // the windows are micro-batches of their own, other than the one the step's own bookings
    // ride (the last backward, the first forward): where the two spreads would take more than
    // the others, both shrink in proportion (each window's timeline holds one spread's calls)
    let (backwards, others) = ((forwards - 1.0).max(0.0), d.micro_batches - 1.0);
    let fit = (others / (backwards + forwards)).min(1.0);
    Some((backwards * fit, forwards * fit))
}

/// Under an interleaved schedule (`chunk_windows`), spread the share of `c` that belongs to the
/// model chunks but the last (first) over the earlier backwards (first forwards), `overlap`
/// [`Overlap::TailBackward`] or [`Overlap::HeadForward`]: one call per window, of the share over
/// the windows. Returns what stays as `c` was booked: the last chunk's share, or all of `c`
/// where there is no window.
fn spread_early_chunks(b: &mut Builder, d: &Shape, c: Collective, overlap: Overlap) -> Collective {
    let Some((backwards, forwards)) = chunk_windows(d) else {
        return c;
    };
    let windows = if overlap == Overlap::TailBackward {
        backwards
    } else {
        forwards
    };
    if c.section != Section::Step || windows <= 0.0 {
        return c;
    }
    let v = d.m.interleave as f64;
    let early = c.bytes * c.count * (v - 1.0) / v;
    b.comm(Collective {
        name: format!("{} (chunks but the last, spread)", c.name).into(),
        bytes: early / windows,
        count: windows,
        overlap,
        ..c.clone()
    });
    Collective {
        bytes: c.bytes / v,
        ..c
    }
}

/// Labels of one group's gradient reduction and parameter gathers.
pub(super) struct StepNames {
    all_reduce: &'static str,
    reduce_scatter: &'static str,
    zero3_gather: &'static str,
    param_gather: &'static str,
}

pub(super) const DP_NAMES: StepNames = StepNames {
    all_reduce: "dp gradient all-reduce",
    reduce_scatter: "dp gradient reduce-scatter",
    zero3_gather: "zero-3 weight all-gather",
    param_gather: "dp parameter all-gather",
};

pub(super) const EDP_NAMES: StepNames = StepNames {
    all_reduce: "edp expert gradient all-reduce",
    reduce_scatter: "edp expert gradient reduce-scatter",
    zero3_gather: "zero-3 expert weight all-gather",
    param_gather: "edp expert parameter all-gather",
};

/// The gradient reduction of `grad_bytes` over `group` once per step, and the ZeRO parameter
/// gathers of `weight_bytes`; `last_bucket`: its last bucket is exposed (`Builder::grad_comm`).
pub(super) fn step_reduction(
    b: &mut Builder,
    d: &Shape,
    n: &StepNames,
    grad_bytes: f64,
    weight_bytes: f64,
    group: Group,
    last_bucket: bool,
) {
    let m = d.m;
    let (mbs, stp) = (Section::MicroBatch, Section::Step);
    let z = m.zero;
    let ov = if m.overlap_grad_reduce {
        Overlap::Backward
    } else {
        Overlap::None
    };
    let (name, kind) = if z == 0 {
        (n.all_reduce, CollKind::AllReduce)
    } else {
        (n.reduce_scatter, CollKind::ReduceScatter)
    };
    let mut c = Collective {
        name: name.into(),
        role: Role::GradientReduction,
        kind,
        bytes: grad_bytes,
        group,
        count: 1.0,
        section: stp,
        overlap: ov,
    };
    // Sharded gradients (ZeRO 2, ZeRO 3 / FSDP): a rank keeps only its shard of the gradients,
    // so each micro-batch's gradients are reduce-scattered as its backward produces them, not
    // once per step (DeepSpeed reduces every micro-step at stages 2 and 3; PyTorch FSDP does
    // unless `no_sync` keeps the unsharded gradients, which NeMo AutoModel's
    // `defer_fsdp_grad_sync: False` turns off).
    // Under a pipeline schedule they stay whole and are reduced once per step
    // (`Mapping::gradients_sharded_through_step`).
    let every = m
        .gradients_sharded_through_step()
        .then_some(d.micro_batches);
    if every.is_none() && ov == Overlap::Backward {
        c = spread_early_chunks(b, d, c, Overlap::TailBackward);
    }
    if last_bucket {
        b.grad_comm(c, every);
    } else if every.is_some() {
        b.comm(Collective { section: mbs, ..c });
    } else {
        b.comm(c);
    }
    // ZeRO-3 shards every parameter, frozen ones too (a LoRA run's base weights: FSDP wraps
    // them with the adapters, and `memory::state` counts them sharded), so each layer's weights
    // are gathered before its forward and backward whatever is trained. ZeRO 1 and 2 keep the
    // weights whole and gather only the updated ones after the step: none of a LoRA base.
    // Under a pipeline schedule FSDP gathers a stage's weights once, layer by layer behind the
    // step's first forward, and keeps them whole to its last backward
    // (`Mapping::weights_sharded_through_step`).
    if z >= 3 || (z >= 1 && d.tr.lora.is_none()) {
        if z >= 3 {
            weight_gathers(b, d, n, weight_bytes, group);
        } else {
            let mut gather = Collective {
                name: n.param_gather.into(),
                role: Role::ParameterGather,
                kind: CollKind::AllGather,
                bytes: weight_bytes,
                group,
                count: 1.0,
                section: stp,
                overlap: ov,
            };
            // overlapped with the next step's forwards (Megatron-Core `overlap_param_gather`):
            // under an interleaved schedule all chunks' but the first's behind the forwards of
            // the chunks before them; the rest where `overlap_communication` books it
            if m.overlap.parameter_gather {
                gather = spread_early_chunks(b, d, gather, Overlap::HeadForward);
            }
            b.comm(gather);
        }
    }
}

/// ZeRO-3 / FSDP's gathers of the sharded weights, `weight_bytes` per pass over the stage's
/// layers. Without a pipeline schedule FSDP (`FULL_SHARD`, `reshard_after_forward`) frees each
/// layer's gathered weights after its forward and gathers them again before its backward, every
/// micro-batch: two gathers per micro-batch, one behind the forward, one behind the backward
/// (DeepSpeed ZeRO-3 likewise fetches each sub-module's parameters in the forward and again in
/// the backward, Rajbhandari et al., SC'20 §5.3). Each pass prefetches one layer ahead: layer
/// i + 1's gather runs while layer i computes, so the pass's first gather has nothing before it
/// to hide behind ("The 1st all-gather will not be able to overlap with anything", PyTorch,
/// *FSDP Notes: FSDP Prefetch Nuances*; FSDP2 keeps two all-gather outputs alive in the forward
/// and prefetches one module ahead in the backward). So one layer's share of each pass's gather
/// is exposed, and the rest runs on the link timelines behind the pass's compute, where with
/// layers of equal work "each layer's gather hidden behind the previous layer's compute"
/// exposes what the pass's gathers (with the gradient reduce-scatters on the same links in the
/// backward) take beyond its compute, as the timelines measure (`cpu::schedule`). Under a
/// pipeline schedule FSDP gathers a stage's weights once, layer by layer behind the step's
/// first forward, and keeps them whole to its last backward
/// (`Mapping::weights_sharded_through_step`).
fn weight_gathers(b: &mut Builder, d: &Shape, n: &StepNames, weight_bytes: f64, group: Group) {
    let gather = |name: Name, bytes, count, section, overlap| Collective {
        name,
        role: Role::WeightGather,
        kind: CollKind::AllGather,
        bytes,
        group,
        count,
        section,
        overlap,
    };
    let mbs = Section::MicroBatch;
    if !d.m.weights_sharded_through_step() {
        let stp = Section::Step;
        b.comm(gather(
            n.zero3_gather.into(),
            weight_bytes,
            1.0,
            stp,
            Overlap::Forward,
        ));
        return;
    }
    let first = weight_bytes / d.l.max(1.0);
    let rest = weight_bytes - first;
    b.comm(gather(
        format!("{} (forward)", n.zero3_gather).into(),
        rest,
        1.0,
        mbs,
        Overlap::Forward,
    ));
    b.comm(gather(
        format!("{} (backward)", n.zero3_gather).into(),
        rest,
        1.0,
        mbs,
        Overlap::Backward,
    ));
    b.comm(gather(
        format!("{} (first layer of each pass, exposed)", n.zero3_gather).into(),
        first,
        2.0,
        mbs,
        Overlap::None,
    ));
}
