//! The figures every part of an inference lowering reads, derived once from the system, the
//! workload and the mapping: precisions and element sizes, the model's widths, the load in
//! flight, the mesh a wafer offers; then, once the stages are known, the round's micro-batches
//! and what a device of each stage class works with ([`At`]). Which program is built ([`Mode`])
//! is part of it.

use super::params::held;
use super::piece::Piece;
use crate::engine::lower::place::{domain_size, place_group, Group};
use crate::engine::lower::precision::{run_precision, vector_precision};
use crate::engine::tiling::Tiling;
use crate::model::mapping::{Mapping, Placement};
use crate::model::precision::Precision;
use crate::model::system::System;
use crate::model::workload::{Inference, Speculative, Transformer};
use crate::vocab::Kernels;

/// Which program of a serving run to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// The steady-state round of continuous batching: a decode token for every request in
    /// flight, and the prompts of the requests that join (batch / output of them per round)
    /// interleaved into it (the step section).
    Round,
    /// One request's prompt alone through the instance (one micro-batch through every stage,
    /// the first token from the output head): what time to first token is made of.
    Prefill,
}

/// Requests in flight per instance in `mode`: the serving load's (the mapping's), else the
/// workload's; in the prompt-alone program the one request whose prompt it runs.
pub(super) fn requests(inf: &Inference, m: &Mapping, mode: Mode) -> f64 {
    if mode == Mode::Prefill {
        1.0
    } else if m.batch > 0 {
        m.batch as f64
    } else {
        inf.batch as f64
    }
}

/// What one lowering of a transformer's serving run works with.
pub(super) struct Shape<'a> {
    pub sys: &'a System,
    pub t: &'a Transformer,
    pub inf: &'a Inference,
    pub m: &'a Mapping,
    pub placement: Placement,
    /// The program is one request's prompt alone ([`Mode::Prefill`]).
    pub prefill_only: bool,
    /// A prefill pool serves the prompts; the instances only decode.
    pub pooled: bool,
    /// The scale-up domain the decode instances see.
    pub dom: u64,
    pub prec: Precision,
    /// Index of the matrix precision, and the vector work's.
    pub p: usize,
    pub vecp: usize,
    /// Bytes per weight, KV-cache and activation element.
    pub wb: f64,
    pub kvb: f64,
    pub ab: f64,
    pub h: f64,
    /// The attention's query and context widths: `hidden` unless the model sets `head_dim`
    /// apart or uses latent attention; the keys' and values' mean width.
    pub qd: f64,
    pub vd: f64,
    pub kvd: f64,
    pub vocab: f64,
    pub tiling: Option<Tiling<'a>>,
    /// The KV cache per token and layer; decode's attention per cached position and head
    /// (`Transformer::decode_core_dims`).
    pub kv_cache_dim: f64,
    pub score_dim: f64,
    pub context_dim: f64,
    pub attn_heads: f64,
    /// Requests in flight per instance: the serving load's (the mapping's), else the
    /// workload's; the prefill program: the one request whose prompt it runs.
    pub batch: f64,
    pub stages: u64,
    /// The mean context a decode token attends to.
    pub ctx: f64,
    /// What one device holds of a layer (all of it, or E / ep of its routed experts).
    pub layer_params: f64,
    pub ep: u64,
    pub layer_active: f64,
    pub dp: f64,
    /// Prefill of the whole batch, amortised over the generated tokens (count = 1 / output).
    pub ptok: f64,
    pub amort: f64,
    /// FlashAttention's causal half of the scores.
    pub causal: f64,
    /// How the serving stack launches a decode layer: the mapping's choice, else the device's.
    pub kernels: Kernels,
    /// Copies of each token expert parallelism sends (top-k).
    pub routed: f64,
    /// Bytes the last stage sends back to the first per token: the embedding with the tied
    /// table on the last stage, token ids otherwise.
    pub back_bytes: f64,
    /// The device's mesh of cores (columns, rows) where it has one of more than a core.
    pub mesh: Option<(f64, f64)>,
    /// The device's SRAM (bytes).
    pub sram: f64,
    /// Speculative decoding (the round only): its verify width and its tokens gained per round.
    pub spec: Option<Speculative>,
    pub verify: f64,
    pub gain: f64,
    /// The FFN's matrices (3 gated, 2 not) and its active width per token.
    pub ffn_mats: f64,
    pub ffn_width: f64,
}

impl<'a> Shape<'a> {
    pub fn new(
        sys: &'a System,
        t: &'a Transformer,
        inf: &'a Inference,
        m: &'a Mapping,
        mode: Mode,
        placement: Placement,
    ) -> Self {
        let prefill_only = mode == Mode::Prefill;
        // the decode instances' devices (a prefill pool's stage is built apart: `pool::attach`)
        let n = m.decode_devices();
        let prec = run_precision(sys, inf.compute);
        let p = prec.index();
        let h = t.hidden as f64;
        let batch = requests(inf, m, mode);
        let (score_dim, context_dim) = t.decode_core_dims();
        let ffn_mats = if t.gated_ffn { 3.0 } else { 2.0 };
        // Speculative decoding (the round only): a request's round verifies its drafted tokens
        // and the model's own next one in one pass (`verify` tokens through every layer, the
        // weights and the KV cache read once) and gains `Speculative::tokens_per_round` (`gain`)
        // tokens. The round program stays per output token: its micro-batch work is divided by
        // the gain, so its step is the time per output token as without speculation, and the
        // prefill's share of a round (per output token already) is unchanged.
        let spec = inf.speculative.filter(|_| !prefill_only);
        Shape {
            sys,
            t,
            inf,
            m,
            placement,
            prefill_only,
            pooled: m.pool.any() && !prefill_only,
            dom: domain_size(sys, n),
            prec,
            p,
            vecp: vector_precision(sys, p),
            wb: inf.weights.bytes(),
            kvb: inf.kv_cache.bytes(),
            ab: inf.activations.bytes(),
            h,
            qd: t.q_dim() as f64,
            vd: t.v_dim() as f64,
            kvd: t.kv_dim(),
            vocab: t.vocab as f64,
            tiling: Tiling::of(&sys.device),
            kv_cache_dim: t.kv_cache_dim(),
            score_dim,
            context_dim,
            attn_heads: t.heads as f64,
            batch,
            stages: placement.stages(),
            ctx: inf.prompt as f64 + inf.output as f64 / 2.0,
            layer_params: held(t, m.ep),
            ep: m.ep.max(1),
            layer_active: t.attn_params() + t.layer_ffn_active(),
            dp: m.dp as f64,
            ptok: batch * inf.prompt as f64,
            amort: if prefill_only {
                1.0
            } else {
                1.0 / inf.output as f64
            },
            causal: if inf.flash_attention && t.causal {
                0.5
            } else {
                1.0
            },
            kernels: m.kernels.unwrap_or(sys.device.efficiency.kernels),
            // Expert parallelism sends each token to the devices of its top-k experts and back
            // (a dispatch and a combine all-to-all per layer with experts), each copy its hidden
            // state; the tensor-parallel ranks of an instance split their tokens' traffic.
            routed: t.experts.as_ref().map_or(0.0, |e| e.top_k as f64),
            back_bytes: if t.tied_embeddings {
                h * inf.activations.bytes()
            } else {
                4.0
            },
            // A device with a mesh of cores (a wafer) pins each layer to a region of its cores
            // (`stages::pieces`).
            mesh: sys
                .device
                .mesh
                .as_ref()
                .map(|ms| {
                    let (x, y) = ms.sides();
                    (x as f64, y as f64)
                })
                .filter(|(x, y)| x * y > 1.0),
            sram: crate::engine::machine::machine(sys, n)[crate::engine::table::SRAM_CAPACITY],
            spec,
            verify: spec.map_or(1.0, |sp| sp.tokens as f64 + 1.0),
            gain: spec.map_or(1.0, |sp| sp.tokens_per_round()),
            ffn_mats,
            ffn_width: t.layer_ffn_active() / (ffn_mats * h),
        }
    }
}

/// The round's micro-batches, once the stages are known.
pub(super) struct Round {
    /// Requests per micro-batch: as the mapping says, or the batch split evenly over the stages
    /// so that every stage has one in flight.
    pub mbatch: f64,
    pub micro_batches: f64,
    /// The tokens a micro-batch's round passes through the model.
    pub vt: f64,
}

impl Round {
    pub fn of(s: &Shape, pieces: &[Piece]) -> Self {
        let in_flight: f64 = pieces
            .iter()
            .filter(|p| p.decode)
            .map(|p| p.repeat as f64)
            .sum::<f64>()
            .max(1.0);
        let batch = s.batch;
        let mbatch = if s.m.micro_batch > 0 {
            (s.m.micro_batch as f64).min(batch)
        } else {
            (batch / in_flight).max(1.0).ceil()
        };
        Round {
            mbatch,
            micro_batches: if s.prefill_only {
                1.0
            } else {
                (batch / mbatch).ceil()
            },
            vt: mbatch * s.verify,
        }
    }
}

/// What a device of one stage class works with: the share of a device it holds (below 1 on a
/// wafer's region), what divides its KV cache, its layers, its tensor- and expert-parallel
/// groups, and whether it runs the decode round and the output head in this program.
pub(super) struct At {
    pub d: f64,
    pub kv_div: f64,
    pub l: f64,
    pub g_tp: Group,
    pub g_ep: Group,
    pub dec: bool,
    pub head: bool,
}

impl At {
    pub fn of(s: &Shape, c: &Piece) -> Self {
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
