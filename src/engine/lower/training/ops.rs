//! The operators of transformer training. A layer's forward operators are built once, as data;
//! their backward and their recomputation are derived from that list by one rule each. Then the
//! LoRA adapters, the LM head and the optimizer update.

use super::memory::State;
use super::outer::{lora, optimizer};
use super::shape::Shape;
use crate::engine::lower::builder::Builder;
use crate::engine::program::{Op, Phase, Section};
use crate::engine::tiling::{self, Gemm};
use crate::model::mapping::Recompute;
use crate::vocab::{LayerPart, TpOverlapMethod};

/// How an operator's backward pass relates to its forward.
///
/// Today's rule, kept to the bit; two parts of it look like inconsistencies, to be revisited
/// deliberately: a GEMM's backward moves the forward's activation bytes (it reads the output
/// gradient and the input and writes the input gradient, about twice that), and under LoRA the
/// frozen weights are still counted × 2 though they have no gradient to write.
#[derive(Clone, Copy)]
enum Backward {
    /// A GEMM with weights: FLOPs × [`Shape::bwd`] (input and weight gradients; input gradients
    /// only through LoRA's frozen base), weight bytes × 2 (read the weights, write their
    /// gradient), activation bytes as forward.
    Gemm,
    /// No weights (the attention core, its softmax): FLOPs × `flops` (2; 2.5 for a fused
    /// attention core, [`FUSED_ATTENTION_BACKWARD`]) and activation bytes × 2, LoRA or not.
    Weightless { flops: f64 },
    /// Elementwise work: FLOPs × 2, these activation bytes.
    Elementwise { act_bytes: f64 },
}

/// The backward FLOPs of a fused attention core (FlashAttention) over its forward's: the
/// forward runs two matrix products (QKᵀ, PV), the backward five, for it recomputes the scores
/// QKᵀ from the saved softmax statistics rather than reading a stored probability matrix, then
/// forms dV = PᵀdO, dP = dO·Vᵀ, dQ = dS·K and dK = dSᵀ·Q: 2.5 × the forward (Dao 2023,
/// FlashAttention-2, arXiv 2307.08691 §4.1, "5 matmuls in the backward pass, due to
/// recomputation"; Dao-AILab/flash-attention benchmarks/benchmark_flash_attention.py `flops`:
/// `2.5 * f` for the backward; MosaicML's benchmark README, "the attention multiplier would be 5
/// instead of 4"). The unfused core keeps its probabilities and computes four products, 2×.
///
/// Counted where the core runs at a kernel's published rate (`Shape::attention`: the rates are
/// FLOPs so counted over the measured time, so the time is the kernel's). At the dense-GEMM
/// efficiency the fused core keeps 2×, as the shipped fits were made with it: counting 2.5×
/// there moves them (NeMo 24.04's per-step cost 0.2183 → 0.2095 s, …) and is a refit of its own.
pub const FUSED_ATTENTION_BACKWARD: f64 = 2.5;

/// How recomputation redoes an operator: it repeats the forward FLOPs and weight bytes.
///
/// The labels and activation bytes below are today's figures, kept to the bit. Some differ from
/// the forward operator's without a modelling reason and look like inconsistencies, to be fixed
/// deliberately (with re-recorded numbers), not here:
///  - every label differs from the forward's ("qkv" vs "qkv projection", …), and the attention
///    core is "attention" under full recomputation but "attention scores" under selective;
///  - `qkv` reads `x` (tok·h·ab): the forward reads `x / act_shard` and also writes Q, K and V
///    (`tok·(h + 2·kvd)/tp·ab`), which the recomputation must write again;
///  - `ffn` reads `x`, the forward `x / act_shard` (they differ with sequence parallelism).
#[derive(Clone, Copy)]
struct Redo {
    /// Label under full recomputation (`recompute: …`).
    full: &'static str,
    /// Label under selective recomputation (the attention core, without flash attention only);
    /// `None`: selective recomputation keeps it.
    selective: Option<&'static str>,
    /// Activation bytes when redone, where they differ from the forward's.
    act_bytes: Option<f64>,
    /// The part of the layer it belongs to, for a recompute policy of its own
    /// ([`Recompute::Ops`]).
    part: Part,
}

/// Which [`LayerPart`] an operator is: one, or the FFN, whose input projections (`FfnUp`) carry
/// `up` of its FLOPs and weights and its output projection (`FfnDown`) the rest.
#[derive(Clone, Copy)]
enum Part {
    One(LayerPart),
    Ffn { up: f64 },
}

/// One forward operator of a transformer layer, with what its backward and recomputation cost.
struct LayerOp {
    name: &'static str,
    matrix: bool,
    precision: usize,
    flops: f64,
    weight_bytes: f64,
    act_bytes: f64,
    /// Occupancy of its forward and of its backward products (`engine::tiling`; 1 for vector
    /// work). Its recomputation takes the forward's.
    occ: [f64; 2],
    backward: Backward,
    redo: Redo,
}

/// A linear layer's products on one device, `groups` of them alike (the local experts): rows
/// `m` (tokens), input width `k`, output width `n`, and its forward FLOPs. Its backward is the
/// input gradient (m × k, over n) and, for trained weights, the weight gradient (k × n, over m),
/// each as many FLOPs as the forward.
#[derive(Clone, Copy)]
struct Linear {
    m: f64,
    k: f64,
    n: f64,
    groups: f64,
    flops: f64,
    /// Which side of a tensor-parallel pair it is, for what overlapping its collectives does to
    /// its GEMMs ([`Userbuffers`]).
    side: Side,
}

/// Megatron's tensor-parallel linear layers: column-parallel (QKV, FFN up: the input
/// all-gathered under sequence parallelism) and row-parallel (the output projection, FFN down:
/// the output reduce-scattered); `Neither` for the layers no userbuffer overlaps (routed experts,
/// the LM head).
#[derive(Clone, Copy)]
enum Side {
    Neither,
    Column,
    Row,
}

/// How a GEMM runs beside the collective it is overlapped with: in `chunks` along its rows, one
/// after another, on all but `taken` of the device's units.
#[derive(Clone, Copy)]
struct Chunks {
    chunks: f64,
    taken: f64,
}

const WHOLE: Chunks = Chunks {
    chunks: 1.0,
    taken: 0.0,
};

/// Transformer Engine's pipelined overlap: 4 chunks, its reduce-scatter kernels on 16 SMs kept
/// from the GEMM (`set_sm_margin`): TE's defaults (`transformer_engine/pytorch/module/base.py`,
/// `initialize_ub`: `num_splits` 4, `num_sm` 16 for every method but the ring exchange).
const PIPELINE: Chunks = Chunks {
    chunks: 4.0,
    taken: 16.0,
};

/// What Transformer Engine's userbuffers (NeMo / Megatron-Core `tp_comm_overlap`, which needs
/// sequence parallelism) do to the GEMMs of a layer whose tensor-parallel collectives they hide
/// (TE `initialize_ub`; the method of each GEMM: `vocab::TpOverlapMethod`):
/// - a column-parallel forward and a row-parallel input gradient (`qkv_fprop`, `fc1_fprop`,
///   `proj_dgrad`, `fc2_dgrad`) all-gather their input by a ring exchange on the copy engines:
///   the GEMM runs in tp chunks, each on the shard that has arrived;
/// - a row-parallel forward (`proj_fprop`, `fc2_fprop`) reduce-scatters its output as a
///   pipeline (4 chunks, 16 SMs kept from the GEMM) or a ring exchange (tp chunks);
/// - the column-parallel input and weight gradients (`qkv_dgrad`, `qkv_wgrad`, `fc1_*`) keep
///   their shape: TE's bulk overlap runs their collectives beside them on a few SMs it shares,
///   not charged (the tensor-parallel role takes no cores, `Role::takes_cores`: an assumption).
///
/// Each chunk is a smaller product, whose tile and wave quantization (`engine::tiling`) is what
/// the split costs; on a device without a tiling it costs nothing. The collectives themselves
/// are marked overlapped by `comms::overlap_communication`.
#[derive(Clone, Copy)]
struct Userbuffers {
    tp: f64,
    method: TpOverlapMethod,
}

impl Userbuffers {
    fn of(d: &Shape) -> Option<Userbuffers> {
        d.m.tp_overlap_method_for(d.prec.bytes())
            .map(|method| Userbuffers {
                tp: d.m.tp as f64,
                method,
            })
    }

    fn ring(self) -> Chunks {
        Chunks {
            chunks: self.tp,
            taken: 0.0,
        }
    }

    /// The forward GEMM of a layer on `side`.
    fn forward(this: Option<Self>, side: Side) -> Chunks {
        match (this, side) {
            (Some(u), Side::Column) => u.ring(),
            (Some(u), Side::Row) => match u.method {
                TpOverlapMethod::Pipeline => PIPELINE,
                TpOverlapMethod::RingExchange => u.ring(),
            },
            _ => WHOLE,
        }
    }

    /// The input-gradient GEMM of a layer on `side`.
    fn input_gradient(this: Option<Self>, side: Side) -> Chunks {
        match (this, side) {
            (Some(u), Side::Row) => u.ring(),
            _ => WHOLE,
        }
    }
}

impl Linear {
    /// The forward's and the backward's occupancy of a set of linear layers run one after the
    /// other (`trained`: with weight gradients).
    fn occupancy(d: &Shape, set: &[Linear], trained: bool) -> [f64; 2] {
        let ub = Userbuffers::of(d);
        let part = |l: &Linear, c: Chunks, m: f64, n: f64, k: f64| {
            (
                l.flops,
                Gemm::grouped(m / c.chunks, n, k, l.groups),
                c.taken,
            )
        };
        let fwd: Vec<(f64, Gemm, f64)> = set
            .iter()
            .map(|l| part(l, Userbuffers::forward(ub, l.side), l.m, l.n, l.k))
            .collect();
        let mut bwd: Vec<(f64, Gemm, f64)> = set
            .iter()
            .map(|l| part(l, Userbuffers::input_gradient(ub, l.side), l.m, l.k, l.n))
            .collect();
        if trained {
            bwd.extend(set.iter().map(|l| part(l, WHOLE, l.k, l.n, l.m)));
        }
        [
            tiling::occupancy_without(d.tiling, &fwd),
            tiling::occupancy_without(d.tiling, &bwd),
        ]
    }
}

/// The forward operators of one layer, in program order.
fn layer(d: &Shape) -> [LayerOp; 8] {
    let Shape {
        t,
        tr,
        m,
        p,
        pa,
        vecp,
        ab,
        wb,
        mb,
        seq: s,
        tok,
        h,
        qd,
        kvd,
        tpf,
        ..
    } = *d;
    let (act_shard, ffn_inner, act_in, x) = (d.act_shard, d.ffn_inner, d.act_in, d.x);
    let cp = m.cp;
    let experts = t.experts.as_ref();
    let causal = if tr.flash_attention && t.causal {
        0.5
    } else {
        1.0
    };
    // Q is qd wide (heads × their query/key width), K and V kvd each on average; the output
    // projection maps the context (vd: heads × value width) back to h. The projections that make
    // Q, K and V are split by heads over tp, but for latent attention's down projections, which
    // every rank runs whole (`Transformer::qkv_params`); the latents they write are read by the
    // up projections.
    let (qkv_split, qkv_shared) = t.qkv_params();
    let qkv_params = qkv_split / tpf + qkv_shared;
    let vd = d.vd;
    let qkv_f = 2.0 * tok * qkv_params;
    let qkv_w = qkv_params * wb;
    let latent_bytes = 2.0 * tok * t.latent_dim() * ab;
    // scores over qd, the context over vd (4·tok·s·qd where the two are equal)
    let attn_f = 2.0 * tok * s * (qd + vd) / tpf * causal;
    let proj_f = 2.0 * tok * vd * h / tpf;
    let proj_w = vd * h / tpf * wb;
    // A dense/MoE layer mix takes the mean over the layers (`Transformer::layer_mix`): exact for
    // the step's work and for a single stage; with pipeline stages of unequal mixes the slowest
    // stage is understated.
    let (ffn_f, ffn_w) = match experts {
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
    let heads_local = (t.heads / m.tp) as f64;
    // Attention core. Fused (FlashAttention): one kernel reading q, k, v and writing the context.
    // Unfused (Megatron-LM 2022): the QK^T and AV batched GEMMs write the score matrix and read
    // the probabilities, and a separate fused scale-mask-softmax + dropout kernel reads the scores
    // and writes the probabilities and a 1-byte dropout mask. The kernels run one after the other,
    // so the softmax is its own (memory-bound) operator rather than hidden under the GEMMs' FLOPs.
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
    // Elementwise traffic per layer with the fused kernels of Megatron-LM / NeMo (fused layer norm,
    // fused bias-dropout-add, fused bias-activation), in tensors of tok × h: two layer norms (read
    // and write, 2 each) and two bias-dropout-adds (read the branch and the residual, write the
    // sum and a 1-byte mask: 3.5 each) = 11 forward, about the same backward (layer-norm backward
    // reads x and dy and writes dx; dropout-add backward reads the gradient and mask, writes two).
    // The FFN activation reads its inputs (2 for a gated FFN) and writes one; its backward reads
    // the gradient and the inputs and writes a gradient per input.
    let elem_fwd_bytes = (11.0 * tok * h / act_shard + (act_in + 1.0) * tok * ffn_inner / tpf) * ab;
    let elem_bwd_bytes =
        (11.0 * tok * h / act_shard + (1.0 + 2.0 * act_in) * tok * ffn_inner / tpf) * ab;
    let elem_flops = 10.0 * tok * h / act_shard + 4.0 * tok * ffn_inner / tpf;
    // Quantization of the low-precision GEMMs' operands (`vocab::Scaling`: nothing for delayed
    // per-tensor scaling, whose cast is fused): in the forward the inputs each linear layer reads
    // (the normed hidden state into QKV and into the MLP, once per routed copy with experts; the
    // context into the output projection; the activation into the MLP's down projection), in
    // the backward the gradients of their outputs; each element costs the pass's bytes
    // (`Scaling::bytes_per_element` of its `ab`-byte source) and an amax compare.
    let quant = if tr.compute.bytes() <= 1.0 {
        tr.scaling.bytes_per_element(ab)
    } else {
        0.0
    };
    // Dropped-token dispatch by dense einsums (GShard; MaxText's `dense_matmul`): per sequence of
    // S tokens each of the E experts has C = cf·S·top_k / E slots; the dispatch (BSM,BSEC→EBCM)
    // and the combine (EBCM,BSEC→BSM) are 2·S·E·C·M FLOPs each per sequence, and each reads its
    // one-hot S × E × C mask besides the tokens and their slots. Only the layers with experts.
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
    let copies = experts.map_or(1.0, |e| {
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
    // Tile and wave quantization of the products (`engine::tiling`), by their per-device shapes.
    // Q, K and V are taken as one product of the projections' total width over h (for latent
    // attention the down and up projections apart would be narrower); the attention core as
    // FlashAttention blocks its queries, one block row per head and sequence.
    let trained = d.bwd > 1.0;
    let lin = |m: f64, k: f64, n: f64, groups: f64, side: Side| Linear {
        m,
        k,
        n,
        groups,
        flops: 2.0 * m * k * n * groups,
        side,
    };
    let qkv_occ = Linear::occupancy(
        d,
        &[lin(tok, h, qkv_params / h, 1.0, Side::Column)],
        trained,
    );
    let attn_o = tiling::occupancy(
        d.tiling,
        &[(attn_f, Gemm::rows(s / cp as f64, mb * heads_local))],
    );
    let proj_occ = Linear::occupancy(d, &[lin(tok, vd / tpf, h, 1.0, Side::Row)], trained);
    let ffn_occ = {
        let dense = |width: f64, share: f64| {
            let w = width / tpf;
            [
                lin(tok, h, act_in * w, 1.0, Side::Column),
                lin(tok, w, h, 1.0, Side::Row),
            ]
            .map(|l| Linear {
                flops: l.flops * share,
                ..l
            })
        };
        let mut set: Vec<Linear> = Vec::with_capacity(6);
        match experts {
            Some(e) => {
                let f = t.moe_fraction();
                // the local experts' grouped products: each expert's rows are the pairs the
                // device computes (at its load) over its experts, at its etp share of the width
                let local = ((e.count / m.ep).max(1)) as f64;
                let rows = tok * e.top_k as f64 * d.expert_load * d.etpf / tpf / local;
                let fe = e.ffn as f64 / d.etpf;
                for l in [
                    lin(rows, h, act_in * fe, local, Side::Neither),
                    lin(rows, fe, h, local, Side::Neither),
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
        Linear::occupancy(d, &set, trained)
    };
    [
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
        },
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
        },
        LayerOp {
            name: "ffn",
            matrix: true,
            precision: p,
            flops: ffn_f,
            weight_bytes: ffn_w,
            act_bytes: x / act_shard + 2.0 * tok * ffn_inner / tpf * ab,
            occ: ffn_occ,
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
        },
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
        },
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
        },
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
        },
    ]
}

impl LayerOp {
    /// The forward operator, once per layer of the stage.
    fn forward(&self, d: &Shape) -> Op {
        Op {
            name: std::borrow::Cow::Borrowed(self.name),
            matrix: self.matrix,
            precision: self.precision,
            flops: self.flops,
            occupancy: self.occ[0],
            weight_bytes: self.weight_bytes,
            act_bytes: self.act_bytes,
            count: d.l,
            section: Section::MicroBatch,
            phase: Phase::Forward,
        }
    }

    /// Its backward, by [`Backward`].
    fn backward(&self, d: &Shape) -> Op {
        let (k, act_bytes) = match self.backward {
            Backward::Gemm => (d.bwd, self.act_bytes),
            Backward::Weightless { flops } => (flops, self.act_bytes * 2.0),
            Backward::Elementwise { act_bytes } => (2.0, act_bytes),
        };
        Op {
            flops: self.flops * k,
            occupancy: self.occ[1],
            weight_bytes: self.weight_bytes * 2.0,
            act_bytes,
            phase: Phase::Backward,
            ..self.forward(d)
        }
    }

    /// Its recomputation, labelled `label`, by [`Redo`].
    fn recompute(&self, d: &Shape, label: &'static str) -> Op {
        Op {
            name: std::borrow::Cow::Borrowed(label),
            act_bytes: self.redo.act_bytes.unwrap_or(self.act_bytes),
            phase: Phase::Recompute,
            ..self.forward(d)
        }
    }

    /// The recomputation of a `share` of it (one of the FFN's projections): that share of its
    /// FLOPs, weight and activation bytes.
    fn share(&self, d: &Shape, label: &'static str, share: f64) -> Op {
        let whole = self.recompute(d, label);
        Op {
            flops: whole.flops * share,
            occupancy: 1.0,
            weight_bytes: whole.weight_bytes * share,
            act_bytes: whole.act_bytes * share,
            ..whole
        }
    }
}

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
    });
}
