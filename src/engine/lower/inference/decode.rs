//! The decode round of one stage class: its micro-batch's tokens through its layers (the KV cache
//! read once for all of them), the tensor-parallel and expert all-reduces and all-to-alls, the
//! output head with its token pick, a speculative draft beside the head, and the pipeline sends
//! to the next stage.

use super::layer::{self, DECODE, DRAFT};
use super::piece::Piece;
use super::shape::{At, Round, Shape};
use crate::engine::lower::builder::{Builder, Collective};
use crate::engine::lower::place::place_group;
use crate::engine::program::{CollKind, Form, Op, Overlap, Phase, Role, Section};
use crate::engine::tiling::{self, Gemm};

/// A decode pass: the model's own or its draft's, `tokens` per micro-batch through `layers` layer
/// passes and `heads` passes of the output head.
#[derive(Clone, Copy)]
struct Pass {
    draft: bool,
    tokens: f64,
    layers: f64,
    heads: f64,
}

/// One decode pass: `tokens` tokens per micro-batch through `layers` layer passes (the KV cache
/// of the round's `mbatch` requests read once for all their tokens) and `heads` passes of the
/// output head. The model's own pass carries its drafted tokens and its next one (`Round::vt`); a
/// draft (an EAGLE head, a multi-token-prediction module: layers of the model's shape; Medusa's
/// heads alone) runs γ passes of one token per request beside the head.
fn pass(b: &mut Builder, s: &Shape, r: &Round, at: &At, p: Pass) {
    let Pass {
        draft,
        tokens,
        layers,
        heads,
    } = p;
    let pick = |model: &'static str, of_draft: &'static str| if draft { of_draft } else { model };
    let (d, mbs, phase) = (at.d, Section::MicroBatch, Phase::Forward);
    if layers > 0.0 {
        let names = if draft { DRAFT } else { DECODE };
        layer::work(b, s, d, names, tokens, layers, mbs);
        b.op(Op {
            name: pick(
                "decode: attention over KV cache",
                "decode: draft attention over KV cache",
            )
            .into(),
            matrix: true,
            precision: s.p,
            flops: 2.0 * tokens * s.ctx * s.attn_heads * (s.score_dim + s.context_dim) / d,
            occupancy: 1.0,
            weight_bytes: 0.0,
            act_bytes: r.mbatch * s.ctx * s.kv_cache_dim / at.kv_div * s.kvb,
            count: layers,
            section: mbs,
            phase,
            form: Form::Both,
        });
        b.comm(Collective {
            name: pick("tp all-reduce", "draft tp all-reduce").into(),
            role: Role::TensorParallel,
            kind: CollKind::AllReduce,
            bytes: tokens * s.h * s.ab,
            group: at.g_tp,
            count: 2.0 * layers,
            section: mbs,
            overlap: Overlap::None,
        });
        if s.ep > 1 {
            b.expert_all_to_all(
                Collective {
                    name: pick("ep all-to-all", "draft ep all-to-all").into(),
                    role: Role::ExpertAllToAll,
                    kind: CollKind::AllToAll,
                    bytes: s.routed * tokens * s.h * s.ab / d,
                    group: at.g_ep,
                    count: 2.0 * layers * s.t.moe_fraction(),
                    section: mbs,
                    overlap: Overlap::None,
                },
                s.routed,
                s.m.expert_dispatch,
            );
        }
    }
    if heads > 0.0 {
        let (h, vocab) = (s.h, s.vocab);
        b.op(Op {
            name: pick("decode: lm head", "decode: draft lm head").into(),
            matrix: true,
            precision: s.p,
            flops: 2.0 * tokens * h * vocab / d,
            occupancy: tiling::occupancy(s.tiling, &[(1.0, Gemm::new(tokens, vocab / d, h))]),
            weight_bytes: h * vocab / d * s.wb,
            act_bytes: tokens * vocab / d * 4.0,
            count: heads,
            section: mbs,
            phase,
            form: Form::Both,
        });
        // the vocabulary-split head picks each request's token across its devices
        b.comm(Collective {
            name: pick(
                "lm head: token all-reduce",
                "draft lm head: token all-reduce",
            )
            .into(),
            role: Role::TensorParallel,
            kind: CollKind::AllReduce,
            bytes: tokens * 8.0,
            group: at.g_tp,
            count: heads,
            section: mbs,
            overlap: Overlap::None,
        });
    }
}

/// The round's passes of stage class `c`: the model's own (its layers, and the head on the last
/// stage), and the speculative draft's beside the head.
pub(super) fn passes(b: &mut Builder, s: &Shape, r: &Round, c: &Piece, at: &At) {
    let layer_passes = if c.layers > 0 && at.dec { at.l } else { 0.0 };
    let own = Pass {
        draft: false,
        tokens: r.vt,
        layers: layer_passes,
        heads: f64::from(u8::from(at.head)),
    };
    pass(b, s, r, at, own);
    if let (Some(sp), true) = (s.spec, at.head && at.dec) {
        let g = sp.tokens as f64;
        let draft = Pass {
            draft: true,
            tokens: r.mbatch,
            layers: g * sp.draft_layers as f64,
            heads: g,
        };
        pass(b, s, r, at, draft);
    }
}

/// The stage's sends to the next stage over the devices' links, in its scale-up domain or across
/// domains: the round's activations (the last stage's tokens back to the first), and the
/// prompts' activations where it runs prefill.
pub(super) fn sends(b: &mut Builder, s: &Shape, r: &Round, c: &Piece, at: &At) {
    let bytes = r.vt * if c.head { s.back_bytes } else { s.h * s.ab };
    for (name, count, group) in [
        (
            "pp send/recv (in domain)",
            c.sends[2],
            place_group(s.sys, 2, 1, s.dom),
        ),
        ("pp send/recv (across domains)", c.sends[3], (1.0, 2.0, 1.0)),
    ] {
        if at.dec {
            b.comm(Collective {
                name: name.into(),
                role: Role::PipelineSendRecv,
                kind: CollKind::SendRecv,
                bytes,
                group,
                count,
                section: Section::MicroBatch,
                overlap: Overlap::None,
            });
        }
        if !c.head && c.prefill {
            b.comm(Collective {
                name: "prefill: pp send/recv".into(),
                role: Role::PipelineSendRecv,
                kind: CollKind::SendRecv,
                bytes: s.ptok * s.h * s.ab,
                group,
                count: count * s.amort,
                section: Section::Step,
                overlap: Overlap::None,
            });
        }
    }
}
