//! Transformer inference as a per-layer pipeline: one decode round per step (a token for every
//! request in flight), the prefill of the batch amortised over the generated tokens. Each stage
//! is a block of consecutive layers on its own devices (tensor-parallel inside it); stages may
//! differ in layers and devices; the embedding table sits on the first stage and the output
//! head on the last (or, with tied embeddings, the one table serves both on the last); weights,
//! KV cache and activations each at their own precision; every stage sends its activations to
//! the next over the link between their devices (scale-up inside a domain, scale-out across),
//! and the last sends the next tokens back to the first. Memory is counted per stage. The stage
//! classes of the program carry the rest: a round is micro-batches × the slowest stage, or the
//! chain of all stages when fewer micro-batches are in flight (`cpu::eval_traced`).
//!
//! On a wafer a stage is a region of the mesh's cores rather than a set of devices
//! ([`stages`], [`regions`], [`mesh`]).
//!
//! Serving reads two programs of the same lowering: the round above (`Mode::Round`: its time is
//! the time per output token, its tokens the system's) and one request's prompt alone
//! (`Mode::Prefill`, for the time to first token); `engine::serve` combines them. The KV cache
//! is paged ([`kv_tokens`]).
//!
//! One file per concern: the mapping's checks, the figures derived once ([`shape`]), the stage
//! classes, the layer's kernels as data ([`layer`]), the decode round, the mesh's traffic,
//! prefill and pools, the footprint; this file runs the stage loop.

mod checks;
mod decode;
mod footprint;
mod layer;
mod mesh;
mod prefill;
mod regions;
mod shape;
mod stages;

use super::{place_group, Builder, Group};
use crate::engine::program::*;
use crate::engine::reason::Reason;
use crate::model::mapping::Mapping;
use crate::model::system::System;
use crate::model::workload::{Inference, Transformer};
use shape::{Round, Shape};
use stages::Piece;

/// Which program of a serving run to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The steady-state round of continuous batching: a decode token for every request in
    /// flight, and the prompts of the requests that join (batch / output of them per round)
    /// interleaved into it (the step section).
    Round,
    /// One request's prompt alone through the instance (one micro-batch through every stage,
    /// the first token from the output head): what time to first token is made of.
    Prefill,
}

/// KV-cache page in tokens: vLLM's block size (`--block-size {8,16,32}`, 16 its default on
/// CUDA; https://docs.vllm.ai/en/latest/models/engine_args.html). A serving stack's figure, not
/// a chip's: another stack pages differently.
pub const KV_PAGE_TOKENS: f64 = 16.0;

/// Tokens of KV cache `batch` requests in flight hold in steady state, paged: the requests are
/// evenly staggered through their output (request k of B has generated (k+1)/B of it), so
/// together they hold B × prompt + output × (B + 1)/2 tokens (one request: prompt + output), and
/// each wastes half a page on average.
pub fn kv_tokens(batch: f64, prompt: f64, output: f64) -> f64 {
    batch * (prompt + KV_PAGE_TOKENS / 2.0) + output * (batch + 1.0) / 2.0
}

pub(super) fn transformer_inference(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
) -> Result<Program, Reason> {
    build(sys, t, inf, m, Mode::Round)
}

pub(super) fn transformer_prefill(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
) -> Result<Program, Reason> {
    if m.pool.any() {
        return prefill::pool_prefill(sys, t, inf, m);
    }
    build(sys, t, inf, m, Mode::Prefill)
}

/// What a device of one stage class works with: the share of a device it holds (below 1 on a
/// wafer's region), what divides its KV cache, its layers, its tensor- and expert-parallel
/// groups, and whether it runs the decode round and the output head in this program.
struct At {
    d: f64,
    kv_div: f64,
    l: f64,
    g_tp: Group,
    g_ep: Group,
    dec: bool,
    head: bool,
}

impl At {
    fn of(s: &Shape, c: &Piece) -> Self {
        let d = c.share;
        // the device's expert-parallel peers: the same place in the other instances of its
        // group (instances laid out one after the other)
        let g_ep = place_group(s.sys, s.ep, s.placement.devices(), s.dom);
        // the phases this stage costs: a stage of decode's own region has nothing in the
        // prompt-alone program; the output head gives the first token from prefill's region
        let dec = c.decode && (!s.prefill_only || c.prefill);
        At {
            d,
            // what the KV cache is divided by: the share, but for a latent cache on several
            // devices
            kv_div: if s.t.kv_cache_split() { d } else { d.min(1.0) },
            l: c.layers as f64,
            g_tp: place_group(s.sys, c.devices, 1, s.dom),
            g_ep,
            dec,
            head: c.head && (dec || (s.prefill_only && c.prefill)),
        }
    }
}

fn build(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
    mode: Mode,
) -> Result<Program, Reason> {
    let placement = checks::placement(t, m)?;
    let s = Shape::new(sys, t, inf, m, mode, placement);
    let pieces = stages::pieces(&s)?;
    let r = Round::of(&s, &pieces);
    let mut b = Builder::default();
    let mut out_stages: Vec<Stage> = Vec::new();
    let mut biggest = Footprint::default();
    for c in pieces {
        let st = stage(&mut b, &s, &r, &c);
        if st.footprint.total() > biggest.total() {
            biggest = st.footprint;
        }
        out_stages.push(st);
    }
    // a stage hands its micro-batch on only where the pipeline has more than one
    if out_stages.iter().map(|st| st.repeat).sum::<f64>() <= 1.0 {
        for st in &mut out_stages {
            st.hands_on = 0.0;
        }
    }
    if s.pooled {
        let st = prefill::pool_stage(sys, t, inf, m, s.batch, &mut b)?;
        if out_stages.len() >= MAX_STAGES {
            return Err(Reason::unsupported(format!(
                "a prefill pool beside {} stage classes: a program holds at most {MAX_STAGES}",
                out_stages.len()
            )));
        }
        if st.footprint.total() > biggest.total() {
            biggest = st.footprint;
        }
        out_stages.push(st);
    }
    debug_assert!(out_stages.len() <= MAX_STAGES);
    let (tokens_per_round, ctx) = if s.prefill_only {
        // the prompt's tokens, at their mean context
        (inf.prompt as f64 * s.dp, inf.prompt as f64 / 2.0)
    } else {
        (s.batch * s.dp, s.ctx)
    };
    let model_flops = tokens_per_round * t.forward_flops_per_token((ctx as u64).max(1), false);
    Ok(Program {
        ops: b.ops,
        comms: b.comms,
        stages: out_stages,
        micro_batches: r.micro_batches,
        bubble: 0.0,
        footprint: biggest,
        devices: m.devices() as f64,
        units_per_step: tokens_per_round,
        unit: "tokens",
        model_flops_per_step: model_flops,
        mfu_precision: s.prec.index(),
        steps: None,
        host_steps: 0.0,
    })
}

/// One stage class's operators, collectives and footprint, in program order: its decode passes,
/// its sends, its traffic over a wafer's mesh, its prefill; in the prompt-alone program only the
/// prefill's, and per output token under speculative decoding.
fn stage(b: &mut Builder, s: &Shape, r: &Round, c: &Piece) -> Stage {
    let (o0, c0) = (b.ops.len(), b.comms.len());
    let at = At::of(s, c);
    decode::passes(b, s, r, c, &at);
    decode::sends(b, s, r, c, &at);
    if let Some(xy) = s.mesh {
        mesh::comms(b, s, r, c, &at, xy);
    }
    if c.layers > 0 && c.prefill {
        prefill::work(b, s, &at);
    }
    if s.prefill_only {
        prefill::alone(b, o0, c0);
    }
    if s.gain != 1.0 {
        // per output token: the round's micro-batch work over the tokens it gains
        let mbs = Section::MicroBatch;
        for o in &mut b.ops[o0..] {
            if o.section == mbs {
                o.count /= s.gain;
            }
        }
        for cm in &mut b.comms[c0..] {
            if cm.section == mbs {
                cm.count /= s.gain;
            }
        }
    }
    Stage {
        name: c.label().into(),
        ops: o0..b.ops.len(),
        comms: c0..b.comms.len(),
        repeat: c.repeat as f64,
        devices: at.d * s.dp,
        footprint: footprint::of(s, r, c, &at),
        pool: false,
        // the pipeline's hand-offs are set once all its stages are known (`lower`)
        hands_on: 1.0 / s.gain,
    }
}
