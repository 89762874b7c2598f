//! One forward operator of a transformer layer as data ([`LayerOp`]), with the rule its backward
//! follows ([`Backward`]) and how recomputation redoes it ([`Redo`]); the operators of a step
//! are derived from it here, one rule each. A leaf of the training lowering: the layer's list
//! (`layer`) fills it, the operator assembly (`ops`) reads it.

use super::shape::Shape;
use crate::engine::program::{Form, Op, Phase, Section};
use crate::vocab::LayerPart;

/// How an operator's backward pass relates to its forward.
///
/// Today's rule, kept to the bit; two parts of it look like inconsistencies, to be revisited
/// deliberately: a GEMM's backward moves the forward's activation bytes (it reads the output
/// gradient and the input and writes the input gradient, about twice that), and under LoRA the
/// frozen weights are still counted × 2 though they have no gradient to write.
#[derive(Clone, Copy)]
pub(super) enum Backward {
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
pub(super) struct Redo {
    /// Label under full recomputation (`recompute: …`).
    pub(super) full: &'static str,
    /// Label under selective recomputation (the attention core, without flash attention only);
    /// `None`: selective recomputation keeps it.
    pub(super) selective: Option<&'static str>,
    /// Activation bytes when redone, where they differ from the forward's.
    pub(super) act_bytes: Option<f64>,
    /// The part of the layer it belongs to, for a recompute policy of its own
    /// (`Recompute::Ops`).
    pub(super) part: Part,
}

/// Which [`LayerPart`] an operator is: one, or the FFN, whose input projections (`FfnUp`) carry
/// `up` of its FLOPs and weights and its output projection (`FfnDown`) the rest.
#[derive(Clone, Copy)]
pub(super) enum Part {
    One(LayerPart),
    Ffn { up: f64 },
}

/// One forward operator of a transformer layer, with what its backward and recomputation cost.
pub(super) struct LayerOp {
    pub(super) name: &'static str,
    pub(super) matrix: bool,
    pub(super) precision: usize,
    pub(super) flops: f64,
    pub(super) weight_bytes: f64,
    pub(super) act_bytes: f64,
    /// Occupancy of its forward and of its backward products (`engine::tiling`; 1 for vector
    /// work). Its recomputation takes the forward's.
    pub(super) occ: [f64; 2],
    pub(super) backward: Backward,
    pub(super) redo: Redo,
}

impl LayerOp {
    /// The forward operator, once per layer of the stage.
    pub(super) fn forward(&self, d: &Shape) -> Op {
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
            form: Form::Both,
        }
    }

    /// Its backward, by [`Backward`].
    pub(super) fn backward(&self, d: &Shape) -> Op {
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

    /// Its recomputation, labelled `label`, by [`Redo`], once per layer that runs the policy.
    pub(super) fn recompute(&self, d: &Shape, label: &'static str) -> Op {
        Op {
            name: std::borrow::Cow::Borrowed(label),
            act_bytes: self.redo.act_bytes.unwrap_or(self.act_bytes),
            phase: Phase::Recompute,
            count: d.redo_l,
            ..self.forward(d)
        }
    }

    /// The recomputation of a `share` of it (one of the FFN's projections): that share of its
    /// FLOPs, weight and activation bytes.
    pub(super) fn share(&self, d: &Shape, label: &'static str, share: f64) -> Op {
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
