//! Convolutional network training: data parallelism only, per layer a convolution and a fused
//! batch-norm + ReLU forward and backward, the gradient all-reduce and the optimizer update.

use super::builder::{Builder, Collective};
use super::place::{domain_size, place_group};
use super::precision::{run_precision, vector_precision};
use crate::engine::program::*;
use crate::engine::reason::Reason;
use crate::model::mapping::Mapping;
use crate::model::system::System;
use crate::model::workload::{Cnn, ConvLayer, Target, Training};

/// The program of a CNN's training step under `m` (data parallelism only).
pub(super) fn cnn_training(
    sys: &System,
    c: &Cnn,
    tr: &Training,
    m: &Mapping,
) -> Result<Program, Reason> {
    let mbsz = micro_batch(tr, m)?;
    let dp = m.dp;
    let local = tr.global_batch / dp;
    let micro_batches = (local / mbsz) as f64;
    let prec = run_precision(sys, tr.compute);
    let p = prec.index();
    let vecp = vector_precision(sys, p);
    let ab = tr.activations.bytes();
    let wb = tr.weights.bytes().max(prec.bytes());
    let bsz = mbsz as f64;
    let dom = domain_size(sys, dp);
    let g_dp = place_group(sys, dp, 1, dom);
    let mut b = Builder::default();
    let mut params = 0.0;
    let mut act = 0.0;
    let mut fwd = 0.0;
    for layer in &c.layers {
        conv_ops(&mut b, layer, bsz, (p, vecp), (ab, wb));
        params += layer.params();
        act += (layer.out_elems() * 3.0) * bsz * ab;
        fwd += layer.flops();
    }
    if dp > 1 {
        let ov = if m.overlap_grad_reduce {
            Overlap::Backward
        } else {
            Overlap::None
        };
        b.grad_comm(
            Collective {
                name: "dp gradient all-reduce".into(),
                role: Role::GradientReduction,
                kind: CollKind::AllReduce,
                bytes: params * tr.gradients.bytes(),
                group: g_dp,
                count: 1.0,
                section: Section::Step,
                overlap: ov,
            },
            None,
        );
    }
    b.op(Op {
        name: "optimizer update".into(),
        matrix: false,
        precision: vecp,
        flops: 6.0 * params,
        occupancy: 1.0,
        weight_bytes: params * (2.0 * tr.optimizer_bytes + tr.gradients.bytes() + wb),
        act_bytes: 0.0,
        count: 1.0,
        section: Section::Step,
        phase: Phase::Update,
        form: Form::Both,
    });
    let samples = tr.global_batch as f64;
    let steps = tr.target.map(|tg| match tg {
        Target::Tokens(x) | Target::Samples(x) => x / samples,
        Target::Steps(x) => x,
    });
    Ok(Program {
        ops: b.ops,
        comms: b.comms,
        stages: Vec::new(),
        micro_batches,
        bubble: 0.0,
        footprint: Footprint {
            weights: params * wb,
            gradients: params * tr.gradients.bytes(),
            optimizer: params * tr.optimizer_bytes,
            activations: act,
            kv_cache: 0.0,
            offloaded: 0.0,
            // the weight-streamed form is the transformer lowering's (`training::stream`)
            streamed: false,
        },
        devices: dp as f64,
        units_per_step: samples,
        unit: "samples",
        model_flops_per_step: 3.0 * fwd * samples,
        mfu_precision: prec.index(),
        steps,
        host_steps: 1.0,
    })
}

/// The micro-batch of a CNN's data-parallel mapping, or why the mapping cannot run it.
fn micro_batch(tr: &Training, m: &Mapping) -> Result<u64, Reason> {
    if m.tp > 1 || m.pp > 1 || m.cp > 1 || m.ep > 1 {
        return Err(Reason::unsupported(
            "CNNs are mapped with data parallelism only (tp = pp = cp = ep = 1)",
        ));
    }
    let dp = m.dp;
    if !tr.global_batch.is_multiple_of(dp) {
        return Err(Reason::mapping(format!(
            "global batch {} is not a multiple of dp {dp}",
            tr.global_batch
        )));
    }
    let local = tr.global_batch / dp;
    let mbsz = m.micro_batch.min(local).max(1);
    if !local.is_multiple_of(mbsz) {
        return Err(Reason::mapping(format!(
            "per-device batch {local} is not a multiple of micro-batch {mbsz}"
        )));
    }
    Ok(mbsz)
}

/// One convolution layer's operators for a micro-batch of `bsz` images at the matrix and vector
/// precisions `(p, vecp)`, activation and weight bytes `(ab, wb)`: the convolution and the
/// fused batch-norm + ReLU, forward and backward.
fn conv_ops(
    b: &mut Builder,
    layer: &ConvLayer,
    bsz: f64,
    (p, vecp): (usize, usize),
    (ab, wb): (f64, f64),
) {
    let mbs = Section::MicroBatch;
    let f = layer.flops() * bsz;
    let wbytes = layer.params() * wb;
    let io = (layer.in_elems() + layer.out_elems()) * bsz * ab;
    b.op(Op {
        name: "conv".into(),
        matrix: true,
        precision: p,
        flops: f,
        occupancy: 1.0,
        weight_bytes: wbytes,
        act_bytes: io,
        count: 1.0,
        section: mbs,
        phase: Phase::Forward,
        form: Form::Both,
    });
    b.op(Op {
        name: "conv (backward)".into(),
        matrix: true,
        precision: p,
        flops: 2.0 * f,
        occupancy: 1.0,
        weight_bytes: 2.0 * wbytes,
        act_bytes: 2.0 * io,
        count: 1.0,
        section: mbs,
        phase: Phase::Backward,
        form: Form::Both,
    });
    let el = layer.out_elems() * bsz;
    b.op(Op {
        name: "batch-norm + relu".into(),
        matrix: false,
        precision: vecp,
        flops: 8.0 * el,
        occupancy: 1.0,
        weight_bytes: 0.0,
        act_bytes: 4.0 * el * ab,
        count: 1.0,
        section: mbs,
        phase: Phase::Forward,
        form: Form::Both,
    });
    b.op(Op {
        name: "batch-norm + relu (backward)".into(),
        matrix: false,
        precision: vecp,
        flops: 12.0 * el,
        occupancy: 1.0,
        weight_bytes: 0.0,
        act_bytes: 6.0 * el * ab,
        count: 1.0,
        section: mbs,
        phase: Phase::Backward,
        form: Form::Both,
    });
}
