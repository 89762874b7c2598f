//! A transformer layer's forward operators at training time, as data: the list ([`layer`]) and
//! one function per concern that fills it: the attention (the QKV projection, the core with
//! its softmax, the output projection), the MLP or mixture of experts (the FFN, a dropped-token dispatch), and
//! the elementwise work (the low-precision operands' quantization, the norms, residuals and
//! activation). What each operator's backward and recomputation cost is `layer_op`'s.

use super::layer_op::{Backward, LayerOp, Part, Redo, FUSED_ATTENTION_BACKWARD};
use super::linear::{Linear, Side};
use super::shape::Shape;
use crate::engine::tiling::{self, Gemm};
use crate::vocab::LayerPart;

/// The forward operators of one layer, in program order.
pub(super) fn layer(d: &Shape) -> [LayerOp; 8] {
    let [core, softmax] = core(d);
    [
        qkv(d),
        core,
        softmax,
        out_projection(d),
        ffn(d),
        moe_dispatch(d),
        quantize(d),
        elementwise(d),
    ]
}

/// Whether the layer's weights are trained (their gradients computed): not under LoRA.
fn trained(d: &Shape) -> bool {
    d.bwd > 1.0
}

/// The QKV projection. Q is qd wide (heads × their query/key width), K and V kvd each on
/// average. The projections that make Q, K and V are split by heads over tp, but for latent
/// attention's down projections, which every rank runs whole (`Transformer::qkv_params`); the
/// latents they write are read by the up projections. Its GEMM is taken as one product of the
/// projections' total width over h (for latent attention the down and up projections apart
/// would be narrower).
fn qkv(d: &Shape) -> LayerOp {
    let Shape {
        t,
        p,
        ab,
        wb,
        tok,
        h,
        qd,
        kvd,
        tpf,
        ..
    } = *d;
    let (act_shard, x) = (d.act_shard, d.x);
    let (qkv_split, qkv_shared) = t.qkv_params();
    let qkv_params = qkv_split / tpf + qkv_shared;
    let qkv_f = 2.0 * tok * qkv_params;
    let qkv_w = qkv_params * wb;
    let latent_bytes = 2.0 * tok * t.latent_dim() * ab;
    let qkv_occ = Linear::occupancy(
        d,
        &[Linear::new(tok, h, qkv_params / h, 1.0, Side::Column)],
        trained(d),
    );
    LayerOp {
        name: "qkv projection",
        matrix: true,
        precision: p,
        flops: qkv_f,
        weight_bytes: qkv_w,
        act_bytes: x / act_shard + tok * (qd + 2.0 * kvd) / tpf * ab + latent_bytes,
        occ: qkv_occ,
        backward: Backward::Gemm,
        // Inconsistent with the forward (see `Redo`): no QKV write, no sp split.
        redo: Redo {
            full: "recompute: qkv",
            selective: None,
            act_bytes: Some(x),
            part: Part::One(LayerPart::Qkv),
        },
    }
}

/// The attention core, scores over qd and the context over vd (4·tok·s·qd where the two are
/// equal), and its softmax and dropout. Fused (FlashAttention): one kernel reading q, k, v and
/// writing the context, blocking its queries (one block row per head and sequence), and no
/// softmax operator. Unfused (Megatron-LM 2022): the QK^T and AV batched GEMMs write the score
/// matrix and read the probabilities, and a separate fused scale-mask-softmax + dropout kernel
/// reads the scores and writes the probabilities and a 1-byte dropout mask. The kernels run one
/// after the other, so the softmax is its own (memory-bound) operator rather than hidden under
/// the GEMMs' FLOPs.
fn core(d: &Shape) -> [LayerOp; 2] {
    let Shape {
        t,
        tr,
        m,
        pa,
        vecp,
        ab,
        mb,
        seq: s,
        tok,
        qd,
        kvd,
        tpf,
        ..
    } = *d;
    let (cp, vd) = (m.cp, d.vd);
    let causal = if tr.flash_attention && t.causal {
        0.5
    } else {
        1.0
    };
    let attn_f = 2.0 * tok * s * (qd + vd) / tpf * causal;
    let heads_local = (t.heads / m.tp) as f64;
    let qkvo_bytes = (tok * (qd + vd) / tpf + 2.0 * tok * kvd / tpf) * ab;
    let score_elems = mb * heads_local * (s / cp as f64) * s;
    let (attn_bytes, softmax_bytes, softmax_flops) = if tr.flash_attention {
        (qkvo_bytes, 0.0, 0.0)
    } else {
        (
            qkvo_bytes + 2.0 * score_elems * ab,
            score_elems * (4.0 * ab + 1.0),
            6.0 * score_elems,
        )
    };
    let attn_o = tiling::occupancy(
        d.tiling,
        &[(attn_f, Gemm::rows(s / cp as f64, mb * heads_local))],
    );
    [
        LayerOp {
            name: "attention scores + context",
            matrix: true,
            precision: pa,
            flops: attn_f,
            weight_bytes: 0.0,
            act_bytes: attn_bytes,
            // attention has no weights: its backward is 2× forward even for LoRA; at its
            // kernel's rate where the stack names one, and then with the kernel's FLOPs (2.5×)
            occ: d.attention.unwrap_or([attn_o, attn_o]),
            backward: Backward::Weightless {
                flops: if d.attention.is_some() {
                    FUSED_ATTENTION_BACKWARD
                } else {
                    2.0
                },
            },
            // Selective recomputation redoes the whole attention core: QK^T, softmax, dropout and
            // the product with V (Korthikanti et al. 2022, §5).
            redo: Redo {
                full: "recompute: attention",
                selective: Some("recompute: attention scores"),
                act_bytes: None,
                part: Part::One(LayerPart::Attention),
            },
        },
        LayerOp {
            name: "attention softmax + dropout",
            matrix: false,
            precision: vecp,
            flops: softmax_flops,
            weight_bytes: 0.0,
            act_bytes: softmax_bytes,
            occ: [1.0, 1.0],
            backward: Backward::Weightless { flops: 2.0 },
            redo: Redo {
                full: "recompute: attention softmax + dropout",
                selective: Some("recompute: attention softmax + dropout"),
                act_bytes: None,
                part: Part::One(LayerPart::Attention),
            },
        },
    ]
}

/// The attention's output projection: the context (vd: heads × value width) back to h.
fn out_projection(d: &Shape) -> LayerOp {
    let Shape {
        p,
        ab,
        wb,
        tok,
        h,
        tpf,
        ..
    } = *d;
    let (x, vd) = (d.x, d.vd);
    let proj_f = 2.0 * tok * vd * h / tpf;
    let proj_w = vd * h / tpf * wb;
    let proj_occ = Linear::occupancy(
        d,
        &[Linear::new(tok, vd / tpf, h, 1.0, Side::Row)],
        trained(d),
    );
    LayerOp {
        name: "attention output projection",
        matrix: true,
        precision: p,
        flops: proj_f,
        weight_bytes: proj_w,
        // reads the context (tok × vd), writes tok × h
        act_bytes: (tok * vd * ab + x) / tpf,
        occ: proj_occ,
        backward: Backward::Gemm,
        redo: Redo {
            full: "recompute: output projection",
            selective: None,
            act_bytes: None,
            part: Part::One(LayerPart::OutProj),
        },
    }
}

/// The FFN: a dense MLP, or the routed and shared experts of a mixture (a dense/MoE layer mix
/// taking the mean over the layers).
fn ffn(d: &Shape) -> LayerOp {
    let Shape {
        t,
        m,
        p,
        ab,
        wb,
        tok,
        h,
        tpf,
        ..
    } = *d;
    let (act_shard, ffn_inner, act_in, x) = (d.act_shard, d.ffn_inner, d.act_in, d.x);
    // A dense/MoE layer mix takes the mean over the layers (`Transformer::layer_mix`): exact for
    // the step's work and for a single stage; with pipeline stages of unequal mixes the slowest
    // stage is understated.
    let (ffn_f, ffn_w) = match t.experts.as_ref() {
        Some(e) => {
            let mats = if t.gated_ffn { 3.0 } else { 2.0 };
            // MoE parallel folding: a device holds count / ep routed experts, each split by etp
            // (whole with etp = 1), and the shared experts split by tp. Balanced, its routed
            // FLOPs are the same at any etp: an etp group receives the tokens of etp / tp of the
            // tp ranks' share (the all-to-all brings them) and each rank computes 1 / etp of
            // their width, tok × top_k / tp token-expert pairs of full width per device.
            let local_width = (e.count / m.ep) as f64 / d.etpf + e.shared as f64 / tpf;
            (
                // The busiest expert-parallel rank computes `expert_load` × the mean routed
                // pairs; each MoE layer waits for it.
                t.layer_mix(
                    2.0 * tok
                        * h
                        * e.ffn as f64
                        * mats
                        * (e.top_k as f64 * d.expert_load + e.shared as f64)
                        / tpf,
                    2.0 * tok * t.ffn_params(t.ffn) / tpf,
                ),
                t.layer_mix(
                    local_width * mats * h * e.ffn as f64 * wb,
                    t.ffn_params(t.ffn) / tpf * wb,
                ),
            )
        }
        None => (
            2.0 * tok * t.ffn_params(t.ffn) / tpf,
            t.ffn_params(t.ffn) / tpf * wb,
        ),
    };
    LayerOp {
        name: "ffn",
        matrix: true,
        precision: p,
        flops: ffn_f,
        weight_bytes: ffn_w,
        act_bytes: x / act_shard + 2.0 * tok * ffn_inner / tpf * ab,
        occ: ffn_occupancy(d),
        backward: Backward::Gemm,
        // Inconsistent with the forward (see `Redo`): no sp split of the input.
        redo: Redo {
            full: "recompute: ffn",
            selective: None,
            act_bytes: Some(x + 2.0 * tok * ffn_inner / tpf * ab),
            part: Part::Ffn {
                up: act_in / (act_in + 1.0),
            },
        },
    }
}

/// The FFN's products as GEMMs (`engine::tiling`): a dense MLP's up and down projections, or the
/// local experts' grouped products beside the shared experts' and a dense/MoE mix's dense layers,
/// each set at its share of the FLOPs.
fn ffn_occupancy(d: &Shape) -> [f64; 2] {
    let Shape {
        t, m, tok, h, tpf, ..
    } = *d;
    let act_in = d.act_in;
    let dense = |width: f64, share: f64| {
        let w = width / tpf;
        [
            Linear::new(tok, h, act_in * w, 1.0, Side::Column),
            Linear::new(tok, w, h, 1.0, Side::Row),
        ]
        .map(|l| Linear {
            flops: l.flops * share,
            ..l
        })
    };
    let mut set: Vec<Linear> = Vec::with_capacity(6);
    match t.experts.as_ref() {
        Some(e) => {
            let f = t.moe_fraction();
            // the local experts' grouped products: each expert's rows are the pairs the
            // device computes (at its load) over its experts, at its etp share of the width
            let local = ((e.count / m.ep).max(1)) as f64;
            let rows = tok * e.top_k as f64 * d.expert_load * d.etpf / tpf / local;
            let fe = e.ffn as f64 / d.etpf;
            for l in [
                Linear::new(rows, h, act_in * fe, local, Side::Neither),
                Linear::new(rows, fe, h, local, Side::Neither),
            ] {
                set.push(Linear {
                    flops: l.flops * f,
                    ..l
                });
            }
            if e.shared > 0 {
                set.extend(dense((e.shared * e.ffn) as f64, f));
            }
            if f < 1.0 {
                set.extend(dense(t.ffn as f64, 1.0 - f));
            }
        }
        None => set.extend(dense(t.ffn as f64, 1.0)),
    }
    Linear::occupancy(d, &set, trained(d))
}

/// Dropped-token dispatch by dense einsums (GShard; MaxText's `dense_matmul`): per sequence of
/// S tokens each of the E experts has C = cf·S·top_k / E slots; the dispatch (BSM,BSEC→EBCM)
/// and the combine (EBCM,BSEC→BSM) are 2·S·E·C·M FLOPs each per sequence, and each reads its
/// one-hot S × E × C mask besides the tokens and their slots. Only the layers with experts;
/// nothing without a capacity factor.
fn moe_dispatch(d: &Shape) -> LayerOp {
    let Shape {
        t,
        m,
        p,
        ab,
        seq: s,
        tok,
        h,
        tpf,
        ..
    } = *d;
    let cp = m.cp;
    let experts = t.experts.as_ref();
    let (dispatch_f, dispatch_bytes) =
        match experts.and_then(|e| e.capacity_factor.map(|cf| (e, cf))) {
            Some((e, cf)) => {
                let slots = cf * (s / cp as f64) * e.top_k as f64; // E × C per sequence
                (
                    t.layer_mix(2.0 * 2.0 * tok * slots * h / tpf, 0.0),
                    t.layer_mix(
                        2.0 * (tok * h * (1.0 + cf * e.top_k as f64) / tpf + tok * slots) * ab,
                        0.0,
                    ),
                )
            }
            None => (0.0, 0.0),
        };
    LayerOp {
        name: "moe dispatch + combine (dense einsums)",
        matrix: true,
        precision: p,
        flops: dispatch_f,
        weight_bytes: 0.0,
        act_bytes: dispatch_bytes,
        // no weights: the input's and the routing weights' gradients, 2× forward
        occ: [1.0, 1.0],
        backward: Backward::Weightless { flops: 2.0 },
        // re-run with the FFN's input projections, whose inputs it makes
        redo: Redo {
            full: "recompute: moe dispatch + combine",
            selective: None,
            act_bytes: None,
            part: Part::One(LayerPart::FfnUp),
        },
    }
}

/// Quantization of the low-precision GEMMs' operands (`vocab::Scaling`: nothing for delayed
/// per-tensor scaling, whose cast is fused): in the forward the inputs each linear layer reads
/// (the normed hidden state into QKV and into the MLP, once per routed copy with experts; the
/// context into the output projection; the activation into the MLP's down projection), in
/// the backward the gradients of their outputs; each element costs the pass's bytes
/// (`Scaling::bytes_per_element` of its `ab`-byte source) and an amax compare.
fn quantize(d: &Shape) -> LayerOp {
    let Shape {
        t,
        tr,
        vecp,
        ab,
        tok,
        h,
        qd,
        kvd,
        tpf,
        ..
    } = *d;
    let (act_shard, ffn_inner, act_in, vd) = (d.act_shard, d.ffn_inner, d.act_in, d.vd);
    let quant = if tr.compute.bytes() <= 1.0 {
        tr.scaling.bytes_per_element(ab)
    } else {
        0.0
    };
    let copies = t.experts.as_ref().map_or(1.0, |e| {
        t.layer_mix(e.top_k as f64 * d.expert_load + e.shared as f64, 1.0)
    });
    let q_in = if quant > 0.0 {
        tok * ((1.0 + copies) * h / act_shard + (vd + ffn_inner) / tpf)
    } else {
        0.0
    };
    let q_grad = if quant > 0.0 {
        tok * ((1.0 + copies) * h / act_shard + (qd + 2.0 * kvd + act_in * ffn_inner) / tpf)
    } else {
        0.0
    };
    LayerOp {
        name: "quantize gemm operands",
        matrix: false,
        precision: vecp,
        flops: q_in,
        weight_bytes: 0.0,
        act_bytes: q_in * quant,
        occ: [1.0, 1.0],
        backward: Backward::Elementwise {
            act_bytes: q_grad * quant,
        },
        redo: Redo {
            full: "recompute: quantize gemm operands",
            selective: None,
            act_bytes: None,
            part: Part::One(LayerPart::Elementwise),
        },
    }
}

/// Elementwise traffic per layer with the fused kernels of Megatron-LM / NeMo (fused layer norm,
/// fused bias-dropout-add, fused bias-activation), in tensors of tok × h: two layer norms (read
/// and write, 2 each) and two bias-dropout-adds (read the branch and the residual, write the
/// sum and a 1-byte mask: 3.5 each) = 11 forward, about the same backward (layer-norm backward
/// reads x and dy and writes dx; dropout-add backward reads the gradient and mask, writes two).
/// The FFN activation reads its inputs (2 for a gated FFN) and writes one; its backward reads
/// the gradient and the inputs and writes a gradient per input.
fn elementwise(d: &Shape) -> LayerOp {
    let Shape {
        vecp,
        ab,
        tok,
        h,
        tpf,
        ..
    } = *d;
    let (act_shard, ffn_inner, act_in) = (d.act_shard, d.ffn_inner, d.act_in);
    let elem_fwd_bytes = (11.0 * tok * h / act_shard + (act_in + 1.0) * tok * ffn_inner / tpf) * ab;
    let elem_bwd_bytes =
        (11.0 * tok * h / act_shard + (1.0 + 2.0 * act_in) * tok * ffn_inner / tpf) * ab;
    let elem_flops = 10.0 * tok * h / act_shard + 4.0 * tok * ffn_inner / tpf;
    LayerOp {
        name: "norms, residuals, activation",
        matrix: false,
        precision: vecp,
        flops: elem_flops,
        weight_bytes: 0.0,
        act_bytes: elem_fwd_bytes,
        occ: [1.0, 1.0],
        backward: Backward::Elementwise {
            act_bytes: elem_bwd_bytes,
        },
        redo: Redo {
            full: "recompute: elementwise",
            selective: None,
            act_bytes: None,
            part: Part::One(LayerPart::Elementwise),
        },
    }
}
