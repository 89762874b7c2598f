//! The collectives of transformer training: tensor-, context-, expert- and pipeline-parallel
//! traffic per micro-batch, the data-parallel gradient reduction and parameter gathers per step,
//! and the policy that marks which of them a framework overlaps (by [`Role`], never by label).

use super::dp::{replica_reduction, step_reduction, DP_NAMES, EDP_NAMES};
use super::memory::State;
use super::shape::Shape;
use crate::engine::lower::builder::{Builder, Collective};
use crate::engine::lower::place::{domain_size, place_group, Group};
use crate::engine::program::*;
use crate::model::mapping::{ExtraOverlap, Mapping, Recompute};
use crate::model::system::System;
use crate::vocab::Dim;

/// The share of a layer's forward collectives of each kind its recomputation runs again: 1 under
/// full recomputation, 0 without; a policy of its own ([`Recompute::Ops`]) re-runs
/// - of the tensor-parallel ones, those around the parts it re-runs: with sequence parallelism
///   the gathers before the QKV and FFN-up GEMMs and the reduce-scatters after the output
///   and FFN-down projections, a quarter each (taken as one share for gathers and scatters
///   alike); without, the all-reduces after the output and FFN-down projections, half each;
/// - the context-parallel key/value gather where it re-runs the attention core;
/// - the expert all-to-alls, the dispatch where it re-runs the FFN's input projections and the
///   combine where it re-runs its output projection, half each.
struct RedoShare {
    tp: f64,
    cp: f64,
    ep: f64,
}

impl RedoShare {
    /// `layers`: the share of the stage's layers that run the policy.
    fn of(r: Recompute, sp: bool, layers: f64) -> RedoShare {
        use crate::vocab::LayerPart::*;
        let p = r.parts();
        let on = |x| if p.has(x) { layers } else { 0.0 };
        RedoShare {
            tp: if sp {
                (on(Qkv) + on(OutProj) + on(FfnUp) + on(FfnDown)) / 4.0
            } else {
                (on(OutProj) + on(FfnDown)) / 2.0
            },
            cp: on(Attention),
            ep: (on(FfnUp) + on(FfnDown)) / 2.0,
        }
    }
}

/// The groups a stage's collectives run over, placed on the topology by the mapping's order
/// (default Megatron: tp, cp, dp, pp outermost), in the scale-up domain the program sees.
struct Groups {
    dom: u64,
    tp: Group,
    cp: Group,
    /// ZeRO's shard group (`shard` ranks of dp × cp) and its replicas (`replicas` of them).
    dp: Group,
    rep: Group,
    shard: u64,
    replicas: u64,
    ep: Group,
    edp: Group,
    pp: Group,
}

impl Groups {
    fn of(sys: &System, m: &Mapping) -> Groups {
        let (tp, pp, cp, dp) = (m.tp, m.pp, m.cp, m.dp);
        let dom = domain_size(sys, m.devices());
        // The gradient reduction spans dp × cp ranks (context-parallel ranks hold the same
        // weights), laid from the inner of the two; experts are sharded inside that group.
        let dp_cp_stride = m
            .stride(Dim::Dp)
            .min(if cp > 1 { m.stride(Dim::Cp) } else { u64::MAX });
        let g_tp = place_group(sys, tp, m.stride(Dim::Tp), dom);
        let g_cp = place_group(sys, cp, m.stride(Dim::Cp), dom);
        // Hybrid sharding: ZeRO's shard group is the innermost `shard` of the dp × cp ranks, its
        // replicas the ranks `shard` apart (all of dp × cp, one replica, without it).
        let shard = m.shard_group();
        let g_dp = place_group(sys, shard, dp_cp_stride, dom);
        let replicas = dp * cp / shard.max(1);
        let g_rep = place_group(sys, replicas, dp_cp_stride * shard, dom);
        // The expert layers fold their groups over the stage's tp × cp × dp ranks from the
        // innermost (Megatron-Core's expert rank order: etp, ep, edp): the ep group's ranks are
        // etp apart, the edp group's etp × ep apart. With etp = tp that is the old placement:
        // ep inside dp × cp.
        let etp = m.etp();
        let (ep_stride, edp_stride) = if etp == tp {
            (dp_cp_stride, dp_cp_stride * m.ep)
        } else {
            let s0 = inner_stride(m);
            (s0 * etp, s0 * etp * m.ep)
        };
        let g_ep = place_group(sys, m.ep, ep_stride, dom);
        let g_edp = place_group(sys, m.edp(), edp_stride, dom);
        let g_pp = place_group(sys, pp, m.stride(Dim::Pp), dom);
        Groups {
            dom,
            tp: g_tp,
            cp: g_cp,
            dp: g_dp,
            rep: g_rep,
            shard,
            replicas,
            ep: g_ep,
            edp: g_edp,
            pp: g_pp,
        }
    }
}

/// Every collective of the program, in program order: per micro-batch the tensor-parallel
/// ones, then context, expert and pipeline parallelism's; once per step the gradient
/// reductions and parameter gathers.
pub(super) fn build(b: &mut Builder, sys: &System, d: &Shape, state: &State) {
    let g = Groups::of(sys, d.m);
    let redo = RedoShare::of(d.m.recompute, d.sp, d.redone_share());
    tensor(b, sys, d, &g, redo.tp);
    micro_batch(b, d, &g, redo);
    step(b, d, state, &g);
}

/// The tensor-parallel collectives of a micro-batch (and LoRA's under sequence parallelism),
/// over tp and, for the routed experts' MLP with etp ≠ tp, over etp; `rec_extra`: the share of
/// them recomputation repeats.
fn tensor(b: &mut Builder, sys: &System, d: &Shape, g: &Groups, rec_extra: f64) {
    let Shape {
        m,
        tr,
        tok,
        h,
        ab,
        tpf,
        l,
        sp,
        ..
    } = *d;
    let tp = m.tp;
    let lora = tr.lora;
    let etp = m.etp();
    // MoE parallel folding: with etp ≠ tp the routed experts' MLP leaves the tp group. The
    // tp collectives of a layer come in two equal halves, attention and MLP (every count
    // below is even per layer); the MLP half of the layers with experts moves to the etp
    // group (none with etp = 1: with sequence parallelism the tokens are already split over
    // the tp ranks before dispatch, and an expert is whole on its device), and stays on tp
    // where shared experts (a dense, tp-split MLP beside the routed ones) need it. The etp
    // group gathers the tokens of etp / tp of the tp ranks' share: tok·h·etp/tp bytes. With
    // etp = tp, one group as always.
    let experts = d.t.experts.as_ref();
    let (tp_layers, etp_layers) = match experts {
        Some(e) if etp != tp => {
            let f = d.t.moe_fraction();
            let shared = if e.shared > 0 { 1.0 } else { 0.0 };
            (l * (0.5 + 0.5 * (1.0 - f) + 0.5 * f * shared), l * 0.5 * f)
        }
        _ => (l, 0.0),
    };
    if tp > 1 {
        tensor_parallel(
            b,
            TP_NAMES,
            tok * h * ab,
            g.tp,
            tp_layers,
            sp,
            lora.is_some(),
            rec_extra,
        );
    }
    // (`sp`: sequence parallelism in effect, so tp > 1)
    if let (true, Some(lr)) = (sp, lora) {
        lora_adapters(b, tok, h, lr, g.tp, l, rec_extra);
    }
    if etp > 1 && etp_layers > 0.0 {
        let g_etp = place_group(sys, etp, inner_stride(m), g.dom);
        // the etp group holds different tokens on each rank: gathered and scattered, as with
        // sequence parallelism
        tensor_parallel(
            b,
            ETP_NAMES,
            tok * h * ab * etp as f64 / tpf,
            g_etp,
            etp_layers,
            true,
            lora.is_some(),
            rec_extra,
        );
    }
}

/// The context-parallel, expert-parallel and pipeline collectives of a micro-batch.
fn micro_batch(b: &mut Builder, d: &Shape, g: &Groups, redo: RedoShare) {
    let Shape {
        m,
        tok,
        h,
        ab,
        tpf,
        mb,
        seq: s,
        kvd,
        l,
        act_shard,
        ..
    } = *d;
    let mbs = Section::MicroBatch;
    if m.cp > 1 {
        let kv_bytes = 2.0 * mb * s * kvd / tpf * ab;
        b.comm(Collective {
            name: "cp kv all-gather".into(),
            role: Role::ContextParallel,
            kind: CollKind::AllGather,
            bytes: kv_bytes,
            group: g.cp,
            count: l * (1.0 + redo.cp),
            section: mbs,
            overlap: Overlap::Compute,
        });
        b.comm(Collective {
            name: "cp kv-grad reduce-scatter".into(),
            role: Role::ContextParallel,
            kind: CollKind::ReduceScatter,
            bytes: kv_bytes,
            group: g.cp,
            count: l,
            section: mbs,
            overlap: Overlap::Compute,
        });
    }
    if let Some(e) = d.t.experts.as_ref() {
        if m.ep > 1 {
            b.expert_all_to_all(
                Collective {
                    name: "ep all-to-all".into(),
                    role: Role::ExpertAllToAll,
                    kind: CollKind::AllToAll,
                    // the busiest rank receives (and sends back) `expert_load` × the mean
                    bytes: tok * h * e.top_k as f64 * ab / act_shard * d.expert_load,
                    group: g.ep,
                    // only the layers with experts route (a dense/MoE mix: their share of l)
                    count: l * d.t.moe_fraction() * (4.0 + 2.0 * redo.ep),
                    section: mbs,
                    overlap: Overlap::None,
                },
                e.top_k as f64,
                m.expert_dispatch,
            );
        }
    }
    if m.pp > 1 {
        // Scatter/gather (Narayanan et al. 2021, §4.1): each tensor-parallel rank sends its 1/tp
        // slice of the boundary activation over its own link and the next stage all-gathers it
        // over the scale-up domain; with sequence parallelism the activation is already split.
        b.comm(Collective {
            name: "pp send/recv".into(),
            role: Role::PipelineSendRecv,
            kind: CollKind::SendRecv,
            bytes: tok * h * ab / tpf,
            group: (
                g.pp.0.min(2.0),
                if g.pp.1 > 1.0 { 2.0 } else { 1.0 },
                g.pp.2,
            ),
            count: 2.0 * m.interleave as f64,
            section: mbs,
            overlap: Overlap::None,
        });
    }
}

/// The step's gradient reductions and parameter gathers.
fn step(b: &mut Builder, d: &Shape, state: &State, g: &Groups) {
    let m = d.m;
    let (tp, cp, dp) = (m.tp, m.cp, m.dp);
    let etp = m.etp();
    let (shard, replicas) = (g.shard, g.replicas);
    // The dense parameters are reduced over dp × cp; the routed experts over their expert-data-
    // parallel ranks (edp = tp·cp·dp / (ep·etp)), a group of its own wherever it differs from
    // dp × cp (ep > 1 or etp ≠ tp): there each expert shard has only edp replicas.
    let apart = state.expert_local > 0.0 && (m.ep > 1 || etp != tp);
    let (expert_trained, expert_params) = if apart {
        (state.trainable_expert, state.expert_local)
    } else {
        (0.0, 0.0)
    };
    if shard > 1 {
        step_reduction(
            b,
            d,
            &DP_NAMES,
            (state.trainable_local - expert_trained) * d.gb,
            (state.params_local - expert_params) * d.wb,
            g.dp,
            true,
        );
    }
    if replicas > 1 {
        replica_reduction(b, d, state.trainable_local * d.gb / shard as f64, g.rep);
    }
    if apart && m.edp() > 1 {
        // Its own buckets, overlapped like the dense ones; the step's one exposed last bucket
        // stays with the dense reduction where there is one.
        step_reduction(
            b,
            d,
            &EDP_NAMES,
            expert_trained * d.gb,
            expert_params * d.wb,
            g.edp,
            dp * cp == 1,
        );
    }
}

/// Labels of one group's tensor-parallel collectives.
struct TpNames {
    all_gather: &'static str,
    reduce_scatter: &'static str,
    frozen_reduce_scatter: &'static str,
    backward_overlapped_sp: &'static str,
    all_reduce: &'static str,
    frozen_all_reduce: &'static str,
    backward_overlapped: &'static str,
}

const TP_NAMES: TpNames = TpNames {
    all_gather: "tp all-gather",
    reduce_scatter: "tp reduce-scatter",
    frozen_reduce_scatter: "backward tp reduce-scatter (frozen weights, exposed)",
    backward_overlapped_sp: "tp backward reduce-scatter + re-gather (overlapped)",
    all_reduce: "tp all-reduce",
    frozen_all_reduce: "backward tp all-reduce (frozen weights, exposed)",
    backward_overlapped: "tp backward all-reduce (overlapped)",
};

/// The routed experts' MLP under expert tensor parallelism apart from tp (the etp group).
const ETP_NAMES: TpNames = TpNames {
    all_gather: "etp all-gather",
    reduce_scatter: "etp reduce-scatter",
    frozen_reduce_scatter: "backward etp reduce-scatter (frozen weights, exposed)",
    backward_overlapped_sp: "etp backward reduce-scatter + re-gather (overlapped)",
    all_reduce: "etp all-reduce",
    frozen_all_reduce: "backward etp all-reduce (frozen weights, exposed)",
    backward_overlapped: "etp backward all-reduce (overlapped)",
};

/// Stride of the innermost of the tp, cp and dp dimensions: where a stage's tp × cp × dp ranks
/// begin, over which the expert layers fold their etp, ep and edp groups (innermost first, as
/// Megatron-Core's expert rank generator lays them; the three taken as contiguous).
fn inner_stride(m: &Mapping) -> u64 {
    [Dim::Tp, Dim::Cp, Dim::Dp]
        .into_iter()
        .map(|x| m.stride(x))
        .min()
        .unwrap_or(1)
}

/// Bytes per element of a LoRA adapter's tensors: NeMo's adapters are Megatron linear layers
/// (not Transformer Engine's), run in the step's bf16 autocast whatever the base GEMMs' format.
const ADAPTER_BYTES: f64 = 2.0;

/// The tensor-parallel collectives LoRA adapters add on sequence-parallel layers, per layer and
/// micro-batch, as NeMo builds them (`ParallelLinearAdapter`, NeMo
/// nemo/collections/nlp/modules/common/megatron/adapters/parallel_adapters.py, the version the
/// MLPerf Training v4.0/v4.1 LoRA submissions pin: v2.0.0rc0 with Transformer Engine ≥ 1.5).
/// Half the adapted projections sit on column-parallel bases (QKV, FFN up), half on
/// row-parallel ones (attention output, FFN down): NeMo's target sets (`attention`, `mlp`,
/// `all`) pair them. The adapters' own linears run without sequence parallelism, so:
/// - an adapter on a **row-parallel** base computes its output for the whole sequence and
///   gathers it over the tensor-parallel ranks (its B linear's `gather_output`), then splits it
///   back to the sequence shard, whose backward is another all-gather of the whole tok × h
///   output: two all-gathers of tok × h, plus the all-reduces of its rank-r intermediate (the
///   A linear's row-parallel output forward, B's input gradient backward);
/// - an adapter on a **column-parallel** base reads the layer-norm output Transformer Engine
///   has already gathered for the base GEMM (`return_layernorm_output_gathered`), so it adds
///   only the gather of its rank-r intermediate forward and its gradient's all-reduce backward.
///
/// They are plain collectives on the critical path, outside the userbuffer overlap that hides
/// the base layers' own: exposed (`Role::LoraAdapter`). A recomputed forward repeats the forward
/// ones.
fn lora_adapters(
    b: &mut Builder,
    tok: f64,
    h: f64,
    lr: crate::model::workload::Lora,
    group: Group,
    layers: f64,
    rec_extra: f64,
) {
    let n = lr.adapted_per_layer as f64;
    let (row, col) = ((n / 2.0).floor(), (n / 2.0).ceil());
    let full = tok * h * ADAPTER_BYTES;
    let thin = tok * lr.rank as f64 * ADAPTER_BYTES;
    let fwd = layers * (1.0 + rec_extra);
    let c = |name: &'static str, kind, bytes, count| Collective {
        name: name.into(),
        role: Role::LoraAdapter,
        kind,
        bytes,
        group,
        count,
        section: Section::MicroBatch,
        overlap: Overlap::None,
    };
    use CollKind::{AllGather, AllReduce};
    b.comm(c("lora output all-gather", AllGather, full, row * fwd));
    b.comm(c(
        "lora output all-gather (backward)",
        AllGather,
        full,
        row * layers,
    ));
    b.comm(c("lora rank all-reduce", AllReduce, thin, row * fwd));
    b.comm(c(
        "lora rank all-reduce (backward)",
        AllReduce,
        thin,
        (row + col) * layers,
    ));
    b.comm(c("lora rank all-gather", AllGather, thin, col * fwd));
}

/// Megatron tensor parallelism, per layer: two all-reduces forward (after the attention
/// projection and after the FFN), two more when the forward is recomputed, and two backward
/// at the inputs of the column-parallel GEMMs (QKV, FFN up). Megatron-LM issues the backward
/// ones asynchronously and overlaps them with the weight-gradient GEMMs
/// (`LinearWithGradAccumulationAndAsyncCommunication`), so they hide behind the backward
/// compute. Sequence parallelism (Korthikanti et al. 2022, §4.2.2) turns each all-reduce
/// into a reduce-scatter and an all-gather of the same bytes: forward 2 AG + 2 RS (blocking);
/// backward 2 AG (the conjugates of the forward RS, blocking), plus 2 RS of the input
/// gradients and 2 AG re-gathering the layer input for the weight gradients (both
/// overlapped with GEMMs). Reduce-scatter and all-gather cost the same, so the overlapped
/// pair is one entry.
///
/// `layers`: the layers' worth of collectives this group carries (all of a stage's, or the
/// share of them expert parallel folding leaves it).
#[allow(clippy::too_many_arguments)]
fn tensor_parallel(
    b: &mut Builder,
    n: TpNames,
    bytes: f64,
    group: Group,
    layers: f64,
    sp: bool,
    lora: bool,
    rec_extra: f64,
) {
    let l = layers;
    let mbs = Section::MicroBatch;
    // What every tensor-parallel collective shares; each entry names the rest.
    let tp_comm = Collective {
        name: Name::Borrowed(""),
        role: Role::TensorParallel,
        kind: CollKind::AllReduce,
        bytes,
        group,
        count: 0.0,
        section: mbs,
        overlap: Overlap::None,
    };
    if sp {
        b.comm(Collective {
            name: n.all_gather.into(),
            role: Role::TensorParallel,
            kind: CollKind::AllGather,
            count: l * (4.0 + 2.0 * rec_extra),
            overlap: Overlap::None,
            ..tp_comm.clone()
        });
        b.comm(Collective {
            name: n.reduce_scatter.into(),
            role: Role::TensorParallel,
            kind: CollKind::ReduceScatter,
            count: l * (2.0 + 2.0 * rec_extra),
            overlap: Overlap::None,
            ..tp_comm.clone()
        });
        if lora {
            // Frozen weights have no weight-gradient GEMMs: the re-gather is not needed and
            // the reduce-scatter of the input gradients has nothing to hide behind.
            b.comm(Collective {
                name: n.frozen_reduce_scatter.into(),
                role: Role::FrozenTensorParallel,
                kind: CollKind::ReduceScatter,
                count: l * 2.0,
                overlap: Overlap::None,
                ..tp_comm.clone()
            });
        } else {
            b.comm(Collective {
                name: n.backward_overlapped_sp.into(),
                role: Role::TensorParallel,
                kind: CollKind::AllGather,
                count: l * 4.0,
                overlap: Overlap::Backward,
                ..tp_comm.clone()
            });
        }
    } else {
        b.comm(Collective {
            name: n.all_reduce.into(),
            role: Role::TensorParallel,
            kind: CollKind::AllReduce,
            count: l * (2.0 + 2.0 * rec_extra),
            overlap: Overlap::None,
            ..tp_comm.clone()
        });
        if lora {
            b.comm(Collective {
                name: n.frozen_all_reduce.into(),
                role: Role::FrozenTensorParallel,
                kind: CollKind::AllReduce,
                count: l * 2.0,
                overlap: Overlap::None,
                ..tp_comm.clone()
            });
        } else {
            b.comm(Collective {
                name: n.backward_overlapped.into(),
                role: Role::TensorParallel,
                kind: CollKind::AllReduce,
                count: l * 2.0,
                overlap: Overlap::Backward,
                ..tp_comm.clone()
            });
        }
    }
}

/// Mark the collectives of a training program that `o` says the framework overlaps. Reads each
/// collective's [`Role`] only: labels are for reports.
///
/// Today's rule, kept: the backward collectives of frozen weights (LoRA) stay exposed under
/// `tensor_parallel`, and the ZeRO-3 weight gathers keep their overlap under `parameter_gather`.
pub(super) fn overlap_communication(p: &mut Program, o: ExtraOverlap) {
    for c in &mut p.comms {
        match c.role {
            Role::TensorParallel if o.tensor_parallel => c.overlap = Overlap::Compute,
            Role::PipelineSendRecv if o.pipeline => c.overlap = Overlap::Compute,
            // (its share spread over the first forwards is already where the schedule puts it)
            Role::ParameterGather if o.parameter_gather && c.overlap != Overlap::HeadForward => {
                c.overlap = Overlap::Backward
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLES: [Role; 9] = [
        Role::TensorParallel,
        Role::FrozenTensorParallel,
        Role::ContextParallel,
        Role::PipelineSendRecv,
        Role::GradientReduction,
        Role::ParameterGather,
        Role::WeightGather,
        Role::ExpertAllToAll,
        Role::Other,
    ];

    /// The labels lowering gives each role, and some it never gives (another role's label).
    const LABELS: [&str; 8] = [
        "tp all-reduce",
        "backward tp all-reduce (frozen weights, exposed)",
        "cp kv all-gather",
        "pp send/recv",
        "dp gradient all-reduce",
        "dp parameter all-gather",
        "zero-3 weight all-gather",
        "x",
    ];

    fn program(label: impl Fn(usize, usize) -> String) -> Program {
        let mut comms = Vec::new();
        for (i, &role) in ROLES.iter().enumerate() {
            for (j, overlap) in [Overlap::None, Overlap::Backward, Overlap::Compute]
                .into_iter()
                .enumerate()
            {
                comms.push(
                    Comm {
                        name: label(i, j).into(),
                        role,
                        kind: CollKind::AllReduce,
                        bytes: 1e6,
                        inner: 8.0,
                        outer: 1.0,
                        count: 1.0,
                        section: Section::MicroBatch,
                        overlap,
                        weight_stream: false,
                        host: false,
                        inner_share: 1.0,
                        mesh: 0.0,
                        coeffs: Default::default(),
                        form: Form::Both,
                    }
                    .with_coeffs(),
                );
            }
        }
        Program {
            ops: Vec::new(),
            comms,
            stages: Vec::new(),
            micro_batches: 1.0,
            bubble: 0.0,
            footprint: Footprint::default(),
            devices: 8.0,
            units_per_step: 1.0,
            unit: "tokens",
            model_flops_per_step: 0.0,
            mfu_precision: 0,
            steps: None,
            host_steps: 0.0,
        }
    }

    fn overlaps(mut p: Program, o: ExtraOverlap) -> Vec<Overlap> {
        overlap_communication(&mut p, o);
        p.comms.iter().map(|c| c.overlap).collect()
    }

    #[test]
    fn overlap_reads_the_role_not_the_label() {
        for bits in 0..8u8 {
            let o = ExtraOverlap {
                tensor_parallel: bits & 1 != 0,
                pipeline: bits & 2 != 0,
                parameter_gather: bits & 4 != 0,
            };
            // Each role under its own label, under every other role's label, and under none.
            let own = overlaps(program(|i, _| LABELS[i.min(LABELS.len() - 1)].into()), o);
            for label in LABELS {
                let renamed = overlaps(program(|_, _| label.into()), o);
                assert_eq!(own, renamed, "label {label:?}, overlap {o:?}");
            }
            let blank = overlaps(program(|i, j| format!("renamed {i}.{j}")), o);
            assert_eq!(own, blank, "overlap {o:?}");
        }
    }

    #[test]
    fn overlap_follows_each_role() {
        let all = ExtraOverlap {
            tensor_parallel: true,
            pipeline: true,
            parameter_gather: true,
        };
        let got = overlaps(program(|_, _| "c".into()), all);
        for (i, role) in ROLES.iter().enumerate() {
            let expected = match role {
                Role::TensorParallel | Role::PipelineSendRecv => [Overlap::Compute; 3],
                Role::ParameterGather => [Overlap::Backward; 3],
                _ => [Overlap::None, Overlap::Backward, Overlap::Compute],
            };
            assert_eq!(got[3 * i..3 * i + 3], expected, "{role:?}");
        }
    }
}
