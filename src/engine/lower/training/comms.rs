//! The collectives of transformer training: tensor-, context-, expert- and pipeline-parallel
//! traffic per micro-batch, the data-parallel gradient reduction and parameter gathers per step,
//! and the policy that marks which of them a framework overlaps (by [`Role`], never by label).

use super::memory::{Activations, State};
use super::Shape;
use crate::engine::lower::{domain_size, place_group, Builder, Collective};
use crate::engine::program::*;
use crate::model::mapping::{ExtraOverlap, Recompute};
use crate::model::system::System;
use crate::vocab::Dim;

/// Every collective of the program, in program order.
pub(super) fn build(b: &mut Builder, sys: &System, d: &Shape, state: &State) {
    let Shape {
        m,
        tr,
        tok,
        h,
        ab,
        tpf,
        mb,
        seq: s,
        kvd,
        l,
        sp,
        act_shard,
        ..
    } = *d;
    let (tp, pp, cp, dp, v) = (m.tp, m.pp, m.cp, m.dp, m.interleave);
    let lora = tr.lora;
    let dom = domain_size(sys, m.devices());
    // Group placement by the mapping's order (default Megatron: tp, cp, dp, pp outermost). The
    // gradient reduction spans dp × cp ranks (context-parallel ranks hold the same weights), laid
    // from the inner of the two; experts are sharded inside that group.
    let dp_cp_stride = m
        .stride(Dim::Dp)
        .min(if cp > 1 { m.stride(Dim::Cp) } else { u64::MAX });
    let g_tp = place_group(sys, tp, m.stride(Dim::Tp), dom);
    let g_cp = place_group(sys, cp, m.stride(Dim::Cp), dom);
    let g_dp = place_group(sys, dp * cp, dp_cp_stride, dom);
    let g_ep = place_group(sys, m.ep, dp_cp_stride, dom);
    let g_pp = place_group(sys, pp, m.stride(Dim::Pp), dom);
    let (mbs, stp) = (Section::MicroBatch, Section::Step);

    // --- per micro-batch ---
    let rec_extra = if m.recompute == Recompute::Full {
        1.0
    } else {
        0.0
    };
    if tp > 1 {
        let tp_bytes = tok * h * ab;
        // Megatron tensor parallelism, per layer: two all-reduces forward (after the attention
        // projection and after the FFN), two more when the forward is recomputed, and two backward
        // at the inputs of the column-parallel GEMMs (QKV, FFN up). Megatron-LM issues the backward
        // ones asynchronously and overlaps them with the weight-gradient GEMMs
        // (`LinearWithGradAccumulationAndAsyncCommunication`), so they hide behind the backward
        // compute. Sequence parallelism (Korthikanti et al. 2022, §4.2.2) turns each all-reduce
        // into a reduce-scatter and an all-gather of the same bytes: forward 2 AG + 2 RS (blocking);
        // backward 2 AG (the conjugates of the forward RS, blocking), plus 2 RS of the input
        // gradients and 2 AG re-gathering the layer input for the weight gradients (both
        // overlapped with GEMMs). Reduce-scatter and all-gather cost the same, so the overlapped
        // pair is one entry.

        // What every tensor-parallel collective shares; each entry names the rest.
        let tp_comm = Collective {
            name: Name::Borrowed(""),
            role: Role::TensorParallel,
            kind: CollKind::AllReduce,
            bytes: tp_bytes,
            group: g_tp,
            count: 0.0,
            section: mbs,
            overlap: Overlap::None,
        };
        if sp {
            b.comm(Collective {
                name: "tp all-gather".into(),
                role: Role::TensorParallel,
                kind: CollKind::AllGather,
                count: l * (4.0 + 2.0 * rec_extra),
                overlap: Overlap::None,
                ..tp_comm.clone()
            });
            b.comm(Collective {
                name: "tp reduce-scatter".into(),
                role: Role::TensorParallel,
                kind: CollKind::ReduceScatter,
                count: l * (2.0 + 2.0 * rec_extra),
                overlap: Overlap::None,
                ..tp_comm.clone()
            });
            if lora.is_some() {
                // Frozen weights have no weight-gradient GEMMs: the re-gather is not needed and
                // the reduce-scatter of the input gradients has nothing to hide behind.
                b.comm(Collective {
                    name: "backward tp reduce-scatter (frozen weights, exposed)".into(),
                    role: Role::FrozenTensorParallel,
                    kind: CollKind::ReduceScatter,
                    count: l * 2.0,
                    overlap: Overlap::None,
                    ..tp_comm.clone()
                });
            } else {
                b.comm(Collective {
                    name: "tp backward reduce-scatter + re-gather (overlapped)".into(),
                    role: Role::TensorParallel,
                    kind: CollKind::AllGather,
                    count: l * 4.0,
                    overlap: Overlap::Backward,
                    ..tp_comm.clone()
                });
            }
        } else {
            b.comm(Collective {
                name: "tp all-reduce".into(),
                role: Role::TensorParallel,
                kind: CollKind::AllReduce,
                count: l * (2.0 + 2.0 * rec_extra),
                overlap: Overlap::None,
                ..tp_comm.clone()
            });
            if lora.is_some() {
                b.comm(Collective {
                    name: "backward tp all-reduce (frozen weights, exposed)".into(),
                    role: Role::FrozenTensorParallel,
                    kind: CollKind::AllReduce,
                    count: l * 2.0,
                    overlap: Overlap::None,
                    ..tp_comm.clone()
                });
            } else {
                b.comm(Collective {
                    name: "tp backward all-reduce (overlapped)".into(),
                    role: Role::TensorParallel,
                    kind: CollKind::AllReduce,
                    count: l * 2.0,
                    overlap: Overlap::Backward,
                    ..tp_comm.clone()
                });
            }
        }
    }
    if cp > 1 {
        let kv_bytes = 2.0 * mb * s * kvd / tpf * ab;
        b.comm(Collective {
            name: "cp kv all-gather".into(),
            role: Role::ContextParallel,
            kind: CollKind::AllGather,
            bytes: kv_bytes,
            group: g_cp,
            count: l * (1.0 + rec_extra),
            section: mbs,
            overlap: Overlap::Compute,
        });
        b.comm(Collective {
            name: "cp kv-grad reduce-scatter".into(),
            role: Role::ContextParallel,
            kind: CollKind::ReduceScatter,
            bytes: kv_bytes,
            group: g_cp,
            count: l,
            section: mbs,
            overlap: Overlap::Compute,
        });
    }
    if let Some(e) = d.t.experts.as_ref() {
        if m.ep > 1 {
            b.comm(Collective {
                name: "ep all-to-all".into(),
                role: Role::ExpertAllToAll,
                kind: CollKind::AllToAll,
                bytes: tok * h * e.top_k as f64 * ab / act_shard,
                group: g_ep,
                // only the layers with experts route (a dense/MoE mix: their share of l)
                count: l * d.t.moe_fraction() * (4.0 + 2.0 * rec_extra),
                section: mbs,
                overlap: Overlap::None,
            });
        }
    }
    if pp > 1 {
        // Scatter/gather (Narayanan et al. 2021, §4.1): each tensor-parallel rank sends its 1/tp
        // slice of the boundary activation over its own link and the next stage all-gathers it
        // over the scale-up domain; with sequence parallelism the activation is already split.
        b.comm(Collective {
            name: "pp send/recv".into(),
            role: Role::PipelineSendRecv,
            kind: CollKind::SendRecv,
            bytes: tok * h * ab / tpf,
            group: (
                g_pp.0.min(2.0),
                if g_pp.1 > 1.0 { 2.0 } else { 1.0 },
                g_pp.2,
            ),
            count: 2.0 * v as f64,
            section: mbs,
            overlap: Overlap::None,
        });
    }

    // --- once per step: gradient reduction, parameter gather ---
    if dp * cp > 1 {
        let z = m.zero;
        let ov = if m.overlap_grad_reduce {
            Overlap::Backward
        } else {
            Overlap::None
        };
        let (name, kind) = if z == 0 {
            ("dp gradient all-reduce", CollKind::AllReduce)
        } else {
            ("dp gradient reduce-scatter", CollKind::ReduceScatter)
        };
        b.grad_comm(Collective {
            name: name.into(),
            role: Role::GradientReduction,
            kind,
            bytes: state.trainable_local * d.gb,
            group: g_dp,
            count: 1.0,
            section: stp,
            overlap: ov,
        });
        if z >= 1 && lora.is_none() {
            let weights = state.params_local * d.wb;
            if z >= 3 {
                b.comm(Collective {
                    name: "zero-3 weight all-gather".into(),
                    role: Role::WeightGather,
                    kind: CollKind::AllGather,
                    bytes: weights,
                    group: g_dp,
                    count: 2.0,
                    section: mbs,
                    overlap: Overlap::Compute,
                });
            } else {
                b.comm(Collective {
                    name: "dp parameter all-gather".into(),
                    role: Role::ParameterGather,
                    kind: CollKind::AllGather,
                    bytes: weights,
                    group: g_dp,
                    count: 1.0,
                    section: stp,
                    overlap: ov,
                });
            }
        }
    }
}

/// The copies of offloaded activations between the device and its node's host memory, per
/// micro-batch: each offloaded layer's saved tensors out over the host link as the forward pass
/// leaves the layer, hidden behind the forward compute (the copy runs on its own stream while the
/// next layers compute), and back before the layer's backward, hidden behind the backward
/// compute. What the compute does not cover is exposed.
pub(super) fn offload(b: &mut Builder, d: &Shape, act: &Activations) {
    if act.offloaded <= 0.0 {
        return;
    }
    let layers = (d.m.offload_activation_layers as f64).min(d.l);
    for (name, overlap) in [
        ("offload activations to host", Overlap::Forward),
        ("reload activations from host", Overlap::Backward),
    ] {
        b.comms.push(
            Comm {
                name: name.into(),
                role: Role::ActivationOffload,
                kind: CollKind::SendRecv,
                bytes: act.offload_per_layer,
                inner: 1.0,
                outer: 1.0,
                count: layers,
                section: Section::MicroBatch,
                overlap,
                weight_stream: false,
                host: true,
                inner_share: 1.0,
                mesh: 0.0,
                coeffs: Default::default(),
            }
            .with_coeffs(),
        );
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
            Role::ParameterGather if o.parameter_gather => c.overlap = Overlap::Backward,
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
