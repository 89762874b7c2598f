//! Transformer training: the mapping's checks, the shapes one device works with, and the program
//! assembled from the operator list (`ops`), the collectives (`comms`) and the memory footprint
//! (`memory`).

mod comms;
mod memory;
mod mesh;
mod ops;
mod stream;

use super::{attention_precision, run_precision, vector_precision, Builder, Reason};
use crate::engine::program::*;
use crate::model::mapping::Mapping;
use crate::model::precision::Precision;
use crate::model::system::System;
use crate::model::workload::{Target, Training, Transformer};

/// What one device of a transformer-training mapping works with, derived once from the workload,
/// the mapping and the system, and read by the operators, the collectives and the footprint.
struct Shape<'a> {
    t: &'a Transformer,
    tr: &'a Training,
    m: &'a Mapping,
    /// The precision the block's GEMMs run at, and its index.
    prec: Precision,
    p: usize,
    /// Precision of elementwise work and of the attention core and LM head.
    vecp: usize,
    pa: usize,
    /// Bytes per activation, weight and gradient element.
    ab: f64,
    wb: f64,
    gb: f64,
    /// Micro-batch (sequences) and sequence length.
    mb: f64,
    seq: f64,
    /// Tokens of a micro-batch on one device (the sequence split over cp).
    tok: f64,
    h: f64,
    /// Width of the queries and of the attention context: heads × head dimension (= `h` unless
    /// the model sets `head_dim` apart).
    qd: f64,
    /// Width of the keys (and of the values): kv heads × head dimension.
    kvd: f64,
    tpf: f64,
    /// Layers on one pipeline stage.
    l: f64,
    micro_batches: f64,
    /// Sequence parallelism in effect (sp with tp > 1), and what it splits the replicated
    /// activations by.
    sp: bool,
    act_shard: f64,
    /// Backward cost of the weight-bearing GEMMs relative to forward: 2× for trained weights;
    /// LoRA computes only input gradients through the frozen base (1×).
    bwd: f64,
    /// Width of the FFN's inner activation per token (top-k plus shared experts with MoE).
    ffn_inner: f64,
    /// Inputs of the FFN activation: 2 for a gated FFN.
    act_in: f64,
    /// Activation traffic of a matmul reading or writing a tok × h tensor.
    x: f64,
    /// The logits of a micro-batch (fp32).
    logits: f64,
    /// Ranks of the gradient reduction: dp × cp.
    dpn: f64,
}

impl<'a> Shape<'a> {
    fn new(sys: &System, t: &'a Transformer, tr: &'a Training, m: &'a Mapping) -> Self {
        let (tp, pp, cp, dp) = (m.tp, m.pp, m.cp, m.dp);
        let prec = run_precision(sys, tr.compute);
        let p = prec.index();
        let ab = tr.activations.bytes();
        let mb = m.micro_batch as f64;
        let seq = tr.seq as f64;
        let tok = mb * seq / cp as f64;
        let h = t.hidden as f64;
        let tpf = tp as f64;
        let sp = m.sp && tp > 1;
        let ffn_inner = match t.experts.as_ref() {
            Some(e) => t.layer_mix(e.ffn as f64 * (e.top_k + e.shared) as f64, t.ffn as f64),
            None => t.ffn as f64,
        };
        Shape {
            t,
            tr,
            m,
            prec,
            p,
            vecp: vector_precision(sys, p),
            pa: attention_precision(sys, prec),
            ab,
            wb: tr.weights.bytes().max(prec.bytes()),
            gb: tr.gradients.bytes(),
            mb,
            seq,
            tok,
            h,
            qd: t.q_dim() as f64,
            kvd: (t.kv_heads * t.head_dim()) as f64,
            tpf,
            l: t.layers.div_ceil(pp) as f64,
            micro_batches: (tr.global_batch / (dp * m.micro_batch)) as f64,
            sp,
            act_shard: if sp { tpf } else { 1.0 },
            bwd: if tr.lora.is_some() { 1.0 } else { 2.0 },
            ffn_inner,
            act_in: if t.gated_ffn { 2.0 } else { 1.0 },
            x: tok * h * ab,
            logits: tok * t.vocab as f64 / tpf * 4.0,
            dpn: (dp * cp) as f64,
        }
    }
}

/// Why `m` cannot run `t` under `tr`, if it cannot.
fn check(t: &Transformer, tr: &Training, m: &Mapping) -> Result<(), Reason> {
    let (tp, pp, cp, dp, v) = (m.tp, m.pp, m.cp, m.dp, m.interleave);
    if !t.heads.is_multiple_of(tp) {
        return Err(Reason::mapping(format!(
            "tp {tp} does not divide {} attention heads",
            t.heads
        )));
    }
    if !t.kv_heads.is_multiple_of(tp) && tp % t.kv_heads != 0 {
        return Err(Reason::mapping(format!(
            "tp {tp} does not fit {} key/value heads",
            t.kv_heads
        )));
    }
    if pp * v > t.layers {
        return Err(Reason::mapping(format!(
            "pp {pp} × interleave {v} exceeds {} layers",
            t.layers
        )));
    }
    if !tr.seq.is_multiple_of(cp) {
        return Err(Reason::mapping(format!(
            "cp {cp} does not divide the sequence of {}",
            tr.seq
        )));
    }
    if dp * m.micro_batch > tr.global_batch || !tr.global_batch.is_multiple_of(dp * m.micro_batch) {
        return Err(Reason::mapping(format!(
            "global batch {} is not a multiple of dp {dp} × micro-batch {}",
            tr.global_batch, m.micro_batch
        )));
    }
    if let Some(e) = t.experts.as_ref() {
        if m.ep > e.count || e.count % m.ep != 0 {
            return Err(Reason::mapping(format!(
                "ep {} does not divide {} experts",
                m.ep, e.count
            )));
        }
        if (dp * cp) % m.ep != 0 {
            return Err(Reason::mapping(format!(
                "ep {} does not divide dp × cp = {}",
                m.ep,
                dp * cp
            )));
        }
    } else if m.ep > 1 {
        return Err(Reason::mapping(
            "expert parallelism needs a mixture-of-experts model",
        ));
    }
    Ok(())
}

/// Pipeline bubble of one step, in units of one micro-batch's time through one stage (all its
/// chunks), for `pp` stages, `m` micro-batches per pipeline and `v` interleaved chunks per stage.
///
/// The interleaved 1F1B schedule (Narayanan et al., SC'21, §2.2: bubble (p − 1) / v) needs at
/// least as many micro-batches as stages in flight: a round of chunk j passes all p stages before
/// chunk j + 1 can start on the first, so with m < p each of the v rounds lasts p chunk times, not
/// m, and the step is p + (m − 1) / v stage times — never less than one micro-batch's path through
/// every stage (p stage times). Both cases in one expression (equal at m = p):
/// (p − 1) / v + max(0, p − m) (1 − 1 / v). Without interleaving (v = 1) it is p − 1.
pub fn pipeline_bubble(pp: u64, m: f64, v: u64) -> f64 {
    let (p, v) = (pp as f64, v.max(1) as f64);
    (p - 1.0) / v + (p - m).max(0.0) * (1.0 - 1.0 / v)
}

pub(super) fn transformer_training(
    sys: &System,
    t: &Transformer,
    tr: &Training,
    m: &Mapping,
) -> Result<Program, Reason> {
    check(t, tr, m)?;
    let d = Shape::new(sys, t, tr, m);
    let state = memory::state(&d);
    let footprint = Footprint {
        weights: state.weights,
        gradients: state.gradients,
        optimizer: state.optimizer,
        activations: memory::activations(&d),
        kv_cache: 0.0,
    };
    let mut b = Builder::default();
    ops::build(&mut b, &d, &state);
    comms::build(&mut b, sys, &d, &state);
    mesh::build(&mut b, sys, &d);
    if stream::streams(sys, &footprint, m.devices()) {
        stream::apply(&mut b, &d, &state);
    }

    let tokens = (tr.global_batch * tr.seq) as f64;
    let fwd_tok = t.forward_flops_per_token(tr.seq, tr.flash_attention && t.causal);
    let model_flops = tokens * fwd_tok * (1.0 + d.bwd);
    let steps = tr.target.map(|tg| match tg {
        Target::Tokens(x) => x / tokens,
        Target::Samples(x) => x / tr.global_batch as f64,
        Target::Steps(x) => x,
    });
    let mut program = Program {
        ops: b.ops,
        comms: b.comms,
        stages: Vec::new(),
        micro_batches: d.micro_batches,
        bubble: pipeline_bubble(m.pp, d.micro_batches, m.interleave),
        footprint,
        devices: m.devices() as f64,
        units_per_step: tokens,
        unit: "tokens",
        model_flops_per_step: model_flops,
        mfu_precision: d.prec.index(),
        steps,
    };
    comms::overlap_communication(&mut program, m.overlap);
    Ok(program)
}
