//! What one device of a transformer-training mapping works with ([`Shape`]), derived once from
//! the workload, the mapping, the system and the stage class it runs, and read by the operators,
//! the collectives and the footprint. A leaf of the training lowering: its files read it, it
//! reads none of them.

use crate::engine::lower::precision::{attention_precision, run_precision, vector_precision};
use crate::model::mapping::Mapping;
use crate::model::precision::Precision;
use crate::model::system::attention::AttentionKernel;
use crate::model::system::System;
use crate::model::workload::{Training, Transformer};
use crate::vocab::AttentionPass;

/// What one device of a transformer-training mapping works with, derived once from the workload,
/// the mapping and the system, and read by the operators, the collectives and the footprint.
pub(super) struct Shape<'a> {
    pub(super) t: &'a Transformer,
    pub(super) tr: &'a Training,
    pub(super) m: &'a Mapping,
    /// The precision the block's GEMMs run at, and its index.
    pub(super) prec: Precision,
    pub(super) p: usize,
    /// Precision of elementwise work and of the attention core and LM head.
    pub(super) vecp: usize,
    pub(super) pa: usize,
    /// Bytes per activation, weight and gradient element.
    pub(super) ab: f64,
    pub(super) wb: f64,
    pub(super) gb: f64,
    /// Micro-batch (sequences) and sequence length.
    pub(super) mb: f64,
    pub(super) seq: f64,
    /// Tokens of a micro-batch on one device (the sequence split over cp).
    pub(super) tok: f64,
    pub(super) h: f64,
    /// Width of the queries: heads × their query/key width (= `h` unless the model sets
    /// `head_dim` apart or uses latent attention).
    pub(super) qd: f64,
    /// Width of the attention context (the values over all heads; = `qd` but for latent
    /// attention).
    pub(super) vd: f64,
    /// The mean width of the keys and values: kv heads × head dimension (`Transformer::kv_dim`).
    pub(super) kvd: f64,
    pub(super) tpf: f64,
    /// Layers on the pipeline stage this shape describes.
    pub(super) l: f64,
    /// Of those, the layers that run the mapping's `recompute` policy: all of them, or the
    /// first `recompute_layers` of each model chunk (Megatron-Core's block method).
    pub(super) redo_l: f64,
    /// That stage holds the input embedding (the first stage, or the only one) and the output
    /// head with its loss (the last stage, or the only one).
    pub(super) embedding: bool,
    pub(super) head: bool,
    pub(super) micro_batches: f64,
    /// Sequence parallelism in effect (sp with tp > 1), and what it splits the replicated
    /// activations by.
    pub(super) sp: bool,
    pub(super) act_shard: f64,
    /// Backward cost of the weight-bearing GEMMs relative to forward: 2× for trained weights;
    /// LoRA computes only input gradients through the frozen base (1×).
    pub(super) bwd: f64,
    /// Width of the FFN's inner activation per token (top-k plus shared experts with MoE, the
    /// routed ones at the busiest expert-parallel rank's load).
    pub(super) ffn_inner: f64,
    /// Inputs of the FFN activation: 2 for a gated FFN.
    pub(super) act_in: f64,
    /// Activation traffic of a matmul reading or writing a tok × h tensor.
    pub(super) x: f64,
    /// The logits of a micro-batch (fp32).
    pub(super) logits: f64,
    /// The token positions of a micro-batch the head and loss run on (`Training::predicted`).
    pub(super) head_tok: f64,
    /// How the run's software stack computes the loss.
    pub(super) loss: crate::vocab::LossKernel,
    /// Ranks of the gradient reduction: dp × cp.
    pub(super) dpn: f64,
    /// Ranks that share out the model state under ZeRO (`Mapping::shard_group`: dp × cp unless
    /// hybrid sharding makes it fewer), for the dense parameters and for the routed experts
    /// (their expert-data-parallel ranks, `Mapping::edp`: those of a stage holding the same
    /// expert shard, over which expert gradients are reduced and expert state sharded; dp × cp
    /// without experts).
    pub(super) shardn: f64,
    pub(super) eshardn: f64,
    /// The routed experts' tensor-parallel width (`Mapping::etp`).
    pub(super) etpf: f64,
    /// The routed pairs the busiest device computes over an even share: the capacity factor of
    /// dropped-token dispatch, else `Experts::load_imbalance` with ep > 1; 1 without experts or
    /// with all of them on every device.
    pub(super) expert_load: f64,
    /// The device's units and GEMM tiles (`None`: every product at full occupancy).
    pub(super) tiling: Option<crate::engine::tiling::Tiling<'a>>,
    /// The attention core's forward and backward rates as fractions of the dense-GEMM rate
    /// at its precision (at most 1), from the kernel the software stack runs
    /// (`attention_kernel`); `None`: it runs at the dense-GEMM efficiency.
    pub(super) attention: Option<[f64; 2]>,
}

impl<'a> Shape<'a> {
    /// The share of the stage's layers that run the recomputation policy (all of them unless
    /// the mapping names `recompute_layers`).
    pub(super) fn redone_share(&self) -> f64 {
        if self.l > 0.0 {
            self.redo_l / self.l
        } else {
            1.0
        }
    }

    pub(super) fn new(
        sys: &'a System,
        t: &'a Transformer,
        tr: &'a Training,
        m: &'a Mapping,
        stage: StageClass,
        kernel: Option<&AttentionKernel>,
    ) -> Self {
        let (tp, cp, dp) = (m.tp, m.cp, m.dp);
        let prec = run_precision(sys, tr.compute);
        let p = prec.index();
        let pa = attention_precision(sys, prec);
        let ab = tr.activations.bytes();
        let mb = m.micro_batch as f64;
        let seq = tr.seq as f64;
        let tok = mb * seq / cp as f64;
        let h = t.hidden as f64;
        let tpf = tp as f64;
        let sp = m.sp && tp > 1;
        // Routed pairs on the busiest device over an even share: the capacity factor where
        // tokens are dropped at a fixed capacity (every device computes its slots, filled or
        // padded), else the router's imbalance where the experts are spread over ep ranks.
        let expert_load = match t.experts.as_ref() {
            Some(e) => match e.capacity_factor {
                Some(cf) => cf,
                None if m.ep > 1 => e.load_imbalance,
                None => 1.0,
            },
            None => 1.0,
        };
        // the busiest expert-parallel rank's: its routed pairs at `expert_load` × the mean
        let ffn_inner = match t.experts.as_ref() {
            Some(e) => t.layer_mix(
                e.ffn as f64 * (e.top_k as f64 * expert_load + e.shared as f64),
                t.ffn as f64,
            ),
            None => t.ffn as f64,
        };
        Shape {
            t,
            tr,
            m,
            prec,
            p,
            vecp: vector_precision(sys, p),
            pa,
            ab,
            wb: tr.weights.bytes().max(prec.bytes()),
            gb: tr.gradients.bytes(),
            mb,
            seq,
            tok,
            h,
            qd: t.q_dim() as f64,
            vd: t.v_dim() as f64,
            kvd: t.kv_dim(),
            tpf,
            l: stage.layers as f64,
            // the first n layers of each of the stage's `interleave` chunks
            redo_l: m.recompute_layers.map_or(stage.layers as f64, |n| {
                (n as f64 * m.interleave.max(1) as f64).min(stage.layers as f64)
            }),
            embedding: stage.embedding,
            head: stage.head,
            micro_batches: (tr.global_batch / (dp * m.micro_batch)) as f64,
            sp,
            act_shard: if sp { tpf } else { 1.0 },
            bwd: if tr.lora.is_some() { 1.0 } else { 2.0 },
            ffn_inner,
            tiling: crate::engine::tiling::Tiling::of(&sys.device),
            act_in: if t.gated_ffn { 2.0 } else { 1.0 },
            x: tok * h * ab,
            logits: tok * tr.predicted * t.vocab as f64 / tpf * 4.0,
            head_tok: tok * tr.predicted,
            loss: sys
                .software
                .as_ref()
                .map(|s| s.loss_kernel)
                .unwrap_or_default(),
            dpn: (dp * cp) as f64,
            shardn: m.shard_group() as f64,
            etpf: m.etp() as f64,
            expert_load,
            attention: kernel.map(|k| {
                let e = &sys.device.efficiency;
                let gemm = crate::engine::table::matrix_efficiency_of(
                    e.matmul,
                    e.low_precision_matmul,
                    pa,
                );
                // the kernel calls of each rank's share: the whole sequence without context
                // parallelism, ring attention's blocks with it (`ring_fraction`)
                let head_dim = t.q_dim() as f64 / t.heads as f64;
                [AttentionPass::Forward, AttentionPass::Backward].map(|pass| {
                    k.ring_fraction(tr.seq as f64, cp, head_dim, t.causal, pass)
                        .map_or(1.0, |f| (f / gemm).min(1.0))
                })
            }),
            // hybrid sharding is refused where the experts have groups of their own (`check`),
            // so where it applies the experts shard over the same group as the dense parameters
            eshardn: if let Some(g) = m.hybrid_shard() {
                g as f64
            } else if t.experts.is_some() {
                m.edp() as f64
            } else {
                (dp * cp) as f64
            },
        }
    }
}

/// What one class of identical pipeline stages holds: its transformer layers, and whether it
/// holds the input embedding and the output head with its loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct StageClass {
    pub(super) layers: u64,
    pub(super) embedding: bool,
    pub(super) head: bool,
}
