//! The operators of transformer training, in program order: a layer's forward operators (built
//! once, as data, by `layer`), their backward and their recomputation (derived from that list by
//! one rule each, `layer_op`), then the LoRA adapters, the LM head and the optimizer update.

use super::layer::layer;
use super::layer_op::Part;
use super::linear::{Linear, Side};
use super::memory::State;
use super::outer::{lora, optimizer};
use super::shape::Shape;
use crate::engine::lower::builder::Builder;
use crate::engine::program::{Form, Op, Phase, Section};
use crate::model::mapping::Recompute;
use crate::vocab::{LayerPart, LossKernel};

/// Every operator of one stage class, in program order: the layers forward, backward, the LoRA
/// adapters, the recomputation, the head (on the stage that holds it), the optimizer update.
pub(super) fn build(b: &mut Builder, d: &Shape, state: &State) {
    let layer = layer(d);
    for o in &layer {
        b.op(o.forward(d));
    }
    for o in &layer {
        b.op(o.backward(d));
    }
    lora(b, d);
    match d.m.recompute {
        Recompute::Selective if !d.tr.flash_attention => {
            for o in &layer {
                if let Some(label) = o.redo.selective {
                    b.op(o.recompute(d, label));
                }
            }
        }
        r => {
            let parts = r.parts();
            for o in &layer {
                match o.redo.part {
                    Part::One(p) if parts.has(p) => b.op(o.recompute(d, o.redo.full)),
                    Part::One(_) => {}
                    Part::Ffn { up } => {
                        match (parts.has(LayerPart::FfnUp), parts.has(LayerPart::FfnDown)) {
                            (true, true) => b.op(o.recompute(d, o.redo.full)),
                            (true, false) => b.op(o.share(d, "recompute: ffn up", up)),
                            (false, true) => b.op(o.share(d, "recompute: ffn down", 1.0 - up)),
                            (false, false) => {}
                        }
                    }
                }
            }
        }
    }
    if d.head {
        head(b, d);
    }
    optimizer(b, d, state);
}

/// The language-model head and loss on the last stage (the slowest stage bounds the pipeline).
fn head(b: &mut Builder, d: &Shape) {
    let Shape {
        t,
        head_tok: tok,
        h,
        tpf,
        wb,
        logits,
        ..
    } = *d;
    // the head reads the hidden states of the positions it predicts
    let x = d.x * tok / d.tok.max(f64::MIN_POSITIVE);
    let head_f = 2.0 * tok * h * t.vocab as f64 / tpf;
    let head_w = h * t.vocab as f64 / tpf * wb;
    let occ = Linear::occupancy(
        d,
        &[Linear {
            m: tok,
            k: h,
            n: t.vocab as f64 / tpf,
            groups: 1.0,
            flops: head_f,
            side: Side::Neither,
        }],
        d.bwd > 1.0,
    );
    b.op(Op {
        name: "lm head".into(),
        matrix: true,
        precision: d.pa,
        flops: head_f,
        occupancy: occ[0],
        weight_bytes: head_w,
        act_bytes: logits + x,
        count: 1.0,
        section: Section::MicroBatch,
        phase: Phase::Forward,
        form: Form::Both,
    });
    loss(b, d, Phase::Forward);
    loss(b, d, Phase::Backward);
    b.op(Op {
        name: "lm head (backward)".into(),
        matrix: true,
        precision: d.pa,
        flops: head_f * d.bwd,
        occupancy: occ[1],
        weight_bytes: head_w * 2.0,
        act_bytes: logits * 2.0 + x,
        count: 1.0,
        section: Section::MicroBatch,
        phase: Phase::Backward,
        form: Form::Both,
    });
}

/// Bytes per logit element the softmax cross-entropy moves beside the head's GEMMs, forward and
/// backward, by how the stack computes it (`vocab::LossKernel`).
///
/// `Upcast`: Megatron-Core's `_VocabParallelCrossEntropy` (megatron/core/tensor_parallel/
/// cross_entropy.py, core_v0.8.0) upcasts the bf16 logits to fp32 (read 2, write 4), takes the
/// row maximum (read 4), subtracts it in place (read 4, write 4), exponentiates in place (read
/// 4, write 4), sums (read 4) and divides in place into the softmax it keeps for the backward
/// (read 4, write 4): 38 bytes. The backward scales that softmax by the loss gradient in place
/// (read 4, write 4) and casts it back to bf16 for the head's GEMMs (read 4, write 2): 14 bytes.
/// PyTorch's `cross_entropy` under autocast (an fp32 upcast, `log_softmax`, its backward and
/// the cast back) moves about as much.
///
/// `Fused`: flash-attention's `xentropy` kernel reads the bf16 logits once forward (the row
/// maximum and sum of exponentials in one pass, keeping only them) and once more backward,
/// writing the gradient: 2 and 4 bytes.
///
/// Each pass is its own memory-bound kernel; none hides under the head's GEMMs.
pub fn loss_bytes_per_logit(kernel: LossKernel) -> [f64; 2] {
    match kernel {
        LossKernel::Upcast => [38.0, 14.0],
        LossKernel::Fused => [2.0, 4.0],
    }
}
/// FLOPs per logit element of the same passes (maximum, subtraction, exponential, sum and
/// division forward; the scaling backward), whichever kernel runs them.
const LOSS_FLOPS_PER_LOGIT: [f64; 2] = [5.0, 1.0];

/// The loss over the stage's logits (the predicted positions × vocab / tp elements per
/// micro-batch), one pass.
fn loss(b: &mut Builder, d: &Shape, phase: Phase) {
    let elements = d.head_tok * d.t.vocab as f64 / d.tpf;
    let k = usize::from(phase == Phase::Backward);
    b.op(Op {
        name: if k == 0 {
            "loss (softmax cross-entropy)".into()
        } else {
            "loss (softmax cross-entropy, backward)".into()
        },
        matrix: false,
        precision: d.vecp,
        flops: elements * LOSS_FLOPS_PER_LOGIT[k],
        occupancy: 1.0,
        weight_bytes: 0.0,
        act_bytes: elements * loss_bytes_per_logit(d.loss)[k],
        count: 1.0,
        section: Section::MicroBatch,
        phase,
        form: Form::Both,
    });
}
