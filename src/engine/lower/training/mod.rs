//! Transformer training: the mapping's checks, the stage classes, and the program assembled
//! from the operators (`ops`, from the layer's operators as data in `layer`), the collectives
//! (`comms`) and the memory footprint (`memory`) of what one device works with (`shape`).

mod comms;
mod dp;
mod host;
mod layer;
mod layer_op;
mod linear;
mod memory;
mod mesh;
mod ops;
mod outer;
mod shape;
mod stream;

pub use ops::loss_bytes_per_logit;

use super::builder::Builder;
use crate::engine::program::*;
use crate::engine::reason::Reason;
use crate::model::mapping::Mapping;
use crate::model::system::attention::AttentionKernel;
use crate::model::system::System;
use crate::model::workload::{Target, Training, Transformer};
use crate::vocab::AttentionPass;
use shape::{Shape, StageClass};

/// The name of the attention kernel a run's core runs at: the one its software stack names,
/// where the attention is fused (FlashAttention); `None` otherwise (the dense-GEMM rate).
pub fn named_attention_kernel<'s>(sys: &'s System, tr: &Training) -> Option<&'s str> {
    sys.software
        .as_ref()
        .and_then(|s| s.attention_kernel.as_deref())
        .filter(|_| tr.flash_attention)
}

/// The attention kernel the run's software stack names, from the device's tables, where the
/// attention is fused (FlashAttention); `None` where no stack names one (the attention core
/// then runs at the dense-GEMM efficiency). Unsupported where the device gives no rates for
/// it, or none of the run's causality (under the causal mask with context parallelism, none
/// without the mask too: the ring's other blocks run unmasked, `AttentionKernel::ring_fraction`).
fn attention_kernel<'s>(
    sys: &'s System,
    t: &Transformer,
    tr: &Training,
    m: &Mapping,
) -> Result<Option<&'s AttentionKernel>, Reason> {
    let Some(name) = named_attention_kernel(sys, tr) else {
        return Ok(None);
    };
    let Some(k) = sys
        .device
        .efficiency
        .attention
        .iter()
        .find(|k| k.name == name)
    else {
        return Err(Reason::unsupported(format!(
            "the software stack runs attention kernel `{name}`, for which device `{}` gives no rates (`efficiency.attention`)",
            sys.device.name
        )));
    };
    let head_dim = t.q_dim() as f64 / t.heads as f64;
    let rate = |pass| k.rate(tr.seq as f64, head_dim, t.causal, pass);
    if rate(AttentionPass::Forward).is_none() || rate(AttentionPass::Backward).is_none() {
        return Err(Reason::unsupported(format!(
            "attention kernel `{name}` on device `{}` has no {} series for both passes",
            sys.device.name,
            if t.causal { "causal" } else { "non-causal" }
        )));
    }
    let ring = |pass| k.ring_fraction(tr.seq as f64, m.cp, head_dim, t.causal, pass);
    if ring(AttentionPass::Forward).is_none() || ring(AttentionPass::Backward).is_none() {
        return Err(Reason::unsupported(format!(
            "attention kernel `{name}` on device `{}` has no non-causal series for both passes, \
             which context parallelism's ring needs under the causal mask (cp {}: all but the \
             rank's own block run unmasked); add them, or run cp 1",
            sys.device.name, m.cp
        )));
    }
    Ok(Some(k))
}

/// The units the pipeline split shares out over the stages: the layers, and the embedding and
/// the loss where the mapping counts them (only with more than one stage: a single stage holds
/// everything whatever is counted).
fn split_units(t: &Transformer, m: &Mapping) -> u64 {
    let counted = if m.pp > 1 {
        m.embedding_in_pipeline_split as u64 + m.loss_in_pipeline_split as u64
    } else {
        0
    };
    t.layers + counted
}

/// The stage classes of the pipeline, in order, with how many stages each stands for.
///
/// Without the embedding or the loss counted in the split, one class: the stage with the LM head,
/// `ceil(layers / pp)` layers (the stage that bounds the pipeline; with one stage it holds the
/// embedding too). That is the model since the beginning: the other stages, holding no more
/// layers and no head, are taken as no slower and no larger.
///
/// With either counted (Megatron-Core `account_for_embedding_in_pipeline_split` /
/// `account_for_loss_in_pipeline_split`, `get_num_layers_to_build`), the units U = layers +
/// counted are split evenly, `n = U / pp` per stage (`check` asks, as Megatron-Core does, that
/// pp × interleave divide U; interleaving splits each stage's n into `interleave` chunks and
/// leaves the per-stage counts as they are), and the embedding (the loss) takes the place of a
/// layer on the first (last) virtual stage: the first stage holds the embedding and n − 1 layers
/// when the embedding is counted (n otherwise), the last stage n − 1 layers and the head when the
/// loss is counted (n otherwise), the pp − 2 stages between them n layers each. Three classes,
/// so that the slowest stage bounds the pipeline and each stage's footprint is placed on its own
/// (a middle stage of n layers may be slower than the last of n − 1 layers and the head).
///
/// No class holds more than ceil(layers / pp) layers: with k units counted and pp | layers + k,
/// n = (layers + k) / pp ≤ ceil(layers / pp) when k < pp; when k = pp = 2, n − 1 = layers / 2
/// and both stages (first and last) hold n − 1.
fn stage_classes(t: &Transformer, m: &Mapping) -> Vec<(&'static str, StageClass, u64)> {
    let pp = m.pp;
    let (e, l) = (m.embedding_in_pipeline_split, m.loss_in_pipeline_split);
    if pp <= 1 || !(e || l) {
        return vec![(
            "all",
            StageClass {
                layers: t.layers.div_ceil(pp.max(1)),
                embedding: pp <= 1,
                head: true,
            },
            1,
        )];
    }
    let n = split_units(t, m) / pp;
    let mut out = vec![(
        "first stage",
        StageClass {
            layers: n - e as u64,
            embedding: true,
            head: false,
        },
        1,
    )];
    if pp > 2 {
        out.push((
            "middle stages",
            StageClass {
                layers: n,
                embedding: false,
                head: false,
            },
            pp - 2,
        ));
    }
    out.push((
        "last stage",
        StageClass {
            layers: n - l as u64,
            embedding: false,
            head: true,
        },
        1,
    ));
    out
}

/// The units a stage splits into its interleaved chunks: `ceil(layers / pp)` layers on the
/// bounding stage, or the `(layers + counted) / pp` units of a split that counts the embedding or
/// the loss (which `check` has made divisible by the interleave).
fn stage_layers(t: &Transformer, m: &Mapping) -> u64 {
    let units = split_units(t, m);
    if units == t.layers {
        t.layers.div_ceil(m.pp.max(1))
    } else {
        units / m.pp.max(1)
    }
}

/// Why `m` cannot run `t` under `tr`, if it cannot.
fn check(t: &Transformer, tr: &Training, m: &Mapping, host_link: bool) -> Result<(), Reason> {
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
    let units = split_units(t, m);
    if units == t.layers {
        if pp * v > t.layers {
            return Err(Reason::mapping(format!(
                "pp {pp} × interleave {v} exceeds {} layers",
                t.layers
            )));
        }
    } else if !units.is_multiple_of(pp * v) {
        // Megatron-Core's rule for a split that counts the embedding or the loss
        // (TransformerConfig.__post_init__): the units divide evenly over the virtual stages.
        return Err(Reason::mapping(format!(
            "pp {pp} × interleave {v} does not divide {} layers + {} counted in the pipeline split = {units}",
            t.layers,
            match (m.embedding_in_pipeline_split, m.loss_in_pipeline_split) {
                (true, true) => "embedding and loss",
                (true, false) => "embedding",
                _ => "loss",
            }
        )));
    }
    let off = m.offload_activation_layers;
    if off > 0 {
        let per_stage = t.layers.div_ceil(pp.max(1));
        if off > per_stage {
            return Err(Reason::mapping(format!(
                "offloads the activations of {off} layers, but a pipeline stage holds {per_stage}"
            )));
        }
        if !host_link {
            return Err(Reason::unsupported(
                "offloading activations needs a link to host memory: the node declares no `host_link`",
            ));
        }
    }
    if m.offload_optimizer > 0.0 {
        if !host_link {
            return Err(Reason::unsupported(
                "offloading the optimizer state needs a link to host memory: the node declares no `host_link`",
            ));
        }
        if m.zero == 0 {
            return Err(Reason::mapping(
                "offloading the optimizer state needs the distributed optimizer (Megatron-Core's `HybridDeviceOptimizer`): set `zero` to 1-3",
            ));
        }
    }
    if m.offload_weights {
        if !host_link {
            return Err(Reason::unsupported(
                "offloading the weights needs a link to host memory: the node declares no `host_link`",
            ));
        }
        if m.zero >= 3 {
            return Err(Reason::unsupported(
                "offloading the weights beside ZeRO 3's sharded weights (ZeRO-Infinity) is not modelled: set `zero` to 0-2",
            ));
        }
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
    if m.hybrid_shard().is_some() && t.experts.is_some() && (m.ep > 1 || m.etp() != tp) {
        return Err(Reason::unsupported(
            "hybrid sharding (`shard`) with the routed experts in groups of their own (ep > 1 or etp ≠ tp) is not modelled",
        ));
    }
    if let Some(e) = t.experts.as_ref() {
        if m.ep > e.count || e.count % m.ep != 0 {
            return Err(Reason::mapping(format!(
                "ep {} does not divide {} experts",
                m.ep, e.count
            )));
        }
        // MoE parallel folding (Megatron-Core; Liu et al., arXiv 2504.14960): the expert layers
        // lay ep × etp ranks over the stage's tp × cp × dp, the rest expert data parallelism.
        // With etp = tp (the default) this is the old rule, ep dividing dp × cp.
        let etp = m.etp();
        if !(tp * cp * dp).is_multiple_of(m.ep * etp) {
            return Err(Reason::mapping(format!(
                "ep {} × etp {etp} = {} does not divide tp × cp × dp = {}",
                m.ep,
                m.ep * etp,
                tp * cp * dp
            )));
        }
        // Megatron-Core asks for sequence parallelism with MoE and tp > 1: with etp < tp the
        // tp ranks' tokens must differ before dispatch, or the folded ep group routes copies.
        if etp < tp && !m.sp {
            return Err(Reason::mapping(format!(
                "etp {etp} below tp {tp} needs sequence parallelism (sp)"
            )));
        }
        // The expert MLP's inner width is split by a written etp, as the attention heads are
        // by tp (an unwritten etp = tp keeps today's checks: tp is not checked against it).
        if m.etp.is_some() && !e.ffn.is_multiple_of(etp) {
            return Err(Reason::mapping(format!(
                "etp {etp} does not divide the expert FFN width of {}",
                e.ffn
            )));
        }
    } else if m.ep > 1 {
        return Err(Reason::mapping(
            "expert parallelism needs a mixture-of-experts model",
        ));
    } else if m.etp.is_some_and(|e| e != tp) {
        return Err(Reason::mapping(
            "expert tensor parallelism (etp) needs a mixture-of-experts model",
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
///
/// `v` is the stage's chunk count as the bubble sees it ([`bubble_chunks`]): the interleave, or
/// less where the chunks cannot be equal.
pub fn pipeline_bubble(pp: u64, m: f64, v: f64) -> f64 {
    let (p, v) = (pp as f64, v.max(1.0));
    (p - 1.0) / v + (p - m).max(0.0) * (1.0 - 1.0 / v)
}

/// The chunk count the bubble is priced at: a chunk holds whole layers, so a stage of `layers`
/// split into `v` chunks waits on its largest, ceil(layers / v) layers, and the bubble is that
/// of layers / ceil(layers / v) equal chunks (`v` itself when it divides the layers; 14 layers in
/// 8 chunks: chunks of 2, priced as 7). Megatron-LM asks equal chunks of the split it makes
/// (`arguments.py` @core_v0.8.0 l.264-268); Megatron-Core's explicit layouts and torch's
/// pipelining run uneven ones, which this prices.
pub fn bubble_chunks(layers: u64, v: u64) -> f64 {
    let v = v.max(1);
    if layers == 0 {
        return v as f64;
    }
    layers as f64 / layers.div_ceil(v) as f64
}

pub(super) fn transformer_training(
    sys: &System,
    t: &Transformer,
    tr: &Training,
    m: &Mapping,
) -> Result<Program, Reason> {
    check(t, tr, m, sys.node.host_link.is_some())?;
    let kernel = attention_kernel(sys, t, tr, m)?;
    let classes = stage_classes(t, m);
    // One class: the program as it always was (no stage list: all devices run that stage).
    // More: each class's operators and collectives in turn, on its dp × tp × cp devices per stage.
    let per_stage = (m.devices() / m.pp.max(1)) as f64;
    let mut b = Builder::default();
    let mut stages = Vec::new();
    let mut footprint = Footprint::default();
    for &(name, class, repeat) in &classes {
        let (o0, c0) = (b.ops.len(), b.comms.len());
        let d = Shape::new(sys, t, tr, m, class, kernel);
        let fp = stage(&mut b, sys, &d);
        if fp.total() > footprint.total() || stages.is_empty() {
            footprint = fp;
        }
        stages.push(Stage {
            name: name.into(),
            ops: o0..b.ops.len(),
            comms: c0..b.comms.len(),
            repeat: repeat as f64,
            devices: per_stage,
            footprint: fp,
            pool: false,
            hands_on: 0.0,
        });
    }
    if classes.len() == 1 {
        stages.clear();
    }
    // The figures of the step (micro-batches, precision, backward factor) are every stage's.
    let d = Shape::new(
        sys,
        t,
        tr,
        m,
        StageClass {
            layers: 0,
            embedding: false,
            head: false,
        },
        kernel,
    );

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
        stages,
        micro_batches: d.micro_batches,
        bubble: pipeline_bubble(
            m.pp,
            d.micro_batches,
            bubble_chunks(stage_layers(t, m), m.interleave),
        ),
        footprint,
        devices: m.devices() as f64,
        units_per_step: tokens,
        unit: "tokens",
        model_flops_per_step: model_flops,
        mfu_precision: d.prec.index(),
        steps,
        host_steps: 1.0,
    };
    comms::overlap_communication(&mut program, m.overlap);
    Ok(program)
}

/// One stage class's operators and collectives, appended to `b`, and its footprint per device.
/// Where the system has a weight store, in both forms: the weights on the devices, and streamed
/// from the store (`stream`), which the evaluators run where the state is placed in the store.
fn stage(b: &mut Builder, sys: &System, d: &Shape) -> Footprint {
    let state = memory::state(d);
    let act = memory::activations(d);
    let footprint = Footprint {
        weights: state.weights,
        gradients: state.gradients,
        optimizer: state.optimizer,
        activations: act.resident,
        kv_cache: 0.0,
        offloaded: act.offloaded + state.host_optimizer + state.host_weights,
        streamed: sys.execution.streams(d.t.params()),
    };
    let mut own = Builder::default();
    ops::build(&mut own, d, &state);
    comms::build(&mut own, sys, d, &state);
    host::offload(&mut own, &act);
    host::offload_optimizer(&mut own, &state);
    host::offload_weights(&mut own, d, &state);
    mesh::build(&mut own, sys, d);
    if stream::has_streamed_form(sys) {
        stream::add_streamed_form(&mut own, d, &state);
    }
    b.ops.append(&mut own.ops);
    b.comms.append(&mut own.comms);
    footprint
}
