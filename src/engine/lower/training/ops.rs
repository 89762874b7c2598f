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
use crate::vocab::LayerPart;

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
        tok,
        h,
        tpf,
        wb,
        x,
        logits,
        ..
    } = *d;
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
