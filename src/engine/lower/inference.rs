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
//! The same placement is what a wafer's regions of cores will use (issue 10): a stage is a set
//! of devices here, a region of the mesh there.
//!
//! Serving (issue 13) reads two programs of the same lowering: the round above (`Mode::Round`:
//! its time is the time per output token, its tokens the system's) and one request's prompt
//! alone (`Mode::Prefill`, for the time to first token); `engine::serve` combines them. The KV
//! cache is paged ([`kv_tokens`]).

use super::{domain_size, place_group, run_precision, vector_precision, Builder, Collective};
use crate::engine::program::*;
use crate::engine::reason::{Reason, RegionShortfall};
use crate::engine::tiling::{self, Gemm};
use crate::model::mapping::{Mapping, Placement, Pool, Regions};
use crate::model::system::System;
use crate::model::workload::{Inference, Transformer};
use crate::vocab::Kernels;

/// One class of identical stages as lowering builds it.
#[derive(Clone, Copy, Debug)]
struct Class {
    repeat: u64,
    layers: u64,
    devices: u64,
    /// Holds the embedding table (untied embeddings: the first stage).
    embed: bool,
    /// Holds the output head (the last stage).
    head: bool,
    /// Position of its first device in the pipeline.
    offset: u64,
}

/// One class of stages as the program gets it: a [`Class`], or on a mesh device one stage per
/// layer on a region (a share of a device).
#[derive(Clone, Copy, Debug)]
struct Piece {
    repeat: u64,
    layers: u64,
    /// Devices of its tensor-parallel group.
    devices: u64,
    /// Devices it occupies (below `devices` for a region of a wafer).
    share: f64,
    embed: bool,
    head: bool,
    /// Cores along a row of its region (0: not on a mesh).
    side: f64,
    /// Its sends per micro-batch: to the neighbouring region, back across the wafer to the
    /// first region, to a device in its domain, to a device in another domain.
    sends: [f64; 4],
    /// The phases it runs: decode (the round's micro-batches) and prefill (the prompts). A
    /// wafer's mapping may give each phase its own core regions (`Mapping::regions`): then a
    /// phase's stages are apart from the other's.
    decode: bool,
    prefill: bool,
    /// Its region's cores (columns, rows) where a mapping states them; (0, 0) otherwise.
    region: (f64, f64),
}

/// What a wafer offers the core regions a mapping states for a phase, and what the model puts
/// in them.
struct WaferFit {
    /// Cores along the mesh's two sides.
    x: f64,
    y: f64,
    /// The wafer's SRAM (bytes; its cores' together).
    sram: f64,
    layers: u64,
    /// Weights and KV cache of one layer (bytes).
    layer_bytes: f64,
    /// The embedding table or the output head (bytes).
    table_bytes: f64,
    /// The embedding table sits on the first region (untied embeddings); the head is always on
    /// the last.
    embed_first: bool,
}

impl WaferFit {
    /// A phase's stages on blocks of `cores` (columns, rows; turned where only that fits): as
    /// many blocks as tile the mesh, each the next run of layers, which it runs one after
    /// another on all its cores; the rest of the wafer idle. Each block must hold its layers'
    /// weights and KV cache in its cores' SRAM.
    fn pieces(&self, phase: &str, cores: (u64, u64), decode: bool) -> Result<Vec<Piece>, Reason> {
        let (a, b) = (cores.0.max(1) as f64, cores.1.max(1) as f64);
        let (x, y) = (self.x, self.y);
        let tiles = |p: f64, q: f64| {
            if p <= x && q <= y {
                (x / p).floor() * (y / q).floor()
            } else {
                0.0
            }
        };
        let k = tiles(a, b).max(tiles(b, a));
        if k < 1.0 {
            let (needed, available) = if a.max(b) > x.max(y) {
                (a.max(b), x.max(y))
            } else {
                (a.min(b), x.min(y))
            };
            return Err(Reason::Region {
                phase: phase.into(),
                what: RegionShortfall::Cores,
                needed,
                available,
            });
        }
        let l = self.layers.max(1);
        let per = l.div_ceil((k as u64).min(l));
        let used = l.div_ceil(per);
        let share = a * b / (x * y);
        let piece = |repeat: u64, layers: u64, embed: bool, head: bool| Piece {
            repeat,
            layers,
            devices: 1,
            share,
            embed,
            head,
            side: (a * b).sqrt(),
            // to the next block (its side in hops), or from the last back to the first
            sends: if head && used > 1 {
                [0.0, 1.0, 0.0, 0.0]
            } else {
                [1.0, 0.0, 0.0, 0.0]
            },
            decode,
            prefill: !decode,
            region: (a, b),
        };
        let mut out = Vec::new();
        if used == 1 {
            out.push(piece(1, l, self.embed_first, true));
        } else {
            out.push(piece(1, per, self.embed_first, false));
            if used > 2 {
                out.push(piece(used - 2, per, false, false));
            }
            out.push(piece(1, l - (used - 1) * per, false, true));
        }
        let available = self.sram * share;
        for p in &out {
            let tables = f64::from(u8::from(p.embed)) + f64::from(u8::from(p.head));
            let needed = p.layers as f64 * self.layer_bytes + tables * self.table_bytes;
            if needed > available {
                return Err(Reason::Region {
                    phase: phase.into(),
                    what: RegionShortfall::Memory,
                    needed,
                    available,
                });
            }
        }
        Ok(out)
    }
}

/// The placement's runs split so that the first stage (embedding) and the last (head) stand
/// alone where they differ from their neighbours.
fn classes(p: &Placement, embed_first: bool) -> Vec<Class> {
    let mut out: Vec<Class> = Vec::new();
    let mut offset = 0;
    let groups = p.groups();
    let last = groups.len() - 1;
    for (i, g) in groups.iter().enumerate() {
        let mut push = |repeat: u64, embed: bool, head: bool, offset: &mut u64| {
            if repeat > 0 {
                out.push(Class {
                    repeat,
                    layers: g.layers,
                    devices: g.devices,
                    embed,
                    head,
                    offset: *offset,
                });
                *offset += repeat * g.devices;
            }
        };
        let first_alone = i == 0 && embed_first;
        let last_alone = i == last;
        let mut r = g.stages;
        if first_alone {
            let both = last_alone && r == 1;
            push(1, true, both, &mut offset);
            r -= 1;
        }
        if last_alone && r > 0 {
            push(r - 1, false, false, &mut offset);
            push(1, false, true, &mut offset);
        } else {
            push(r, false, false, &mut offset);
        }
    }
    out
}

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

/// Parameters of one layer a forward pass over `tokens` tokens reads on one device, where `ep`
/// model instances share their experts (expert parallelism: each holds E / ep of a layer's routed
/// experts and computes the tokens all `ep` instances route to them): all of a dense layer; of a
/// mixture of experts, attention, the router, the shared experts and those of the device's routed
/// experts at least one of the group's ep × `tokens` tokens goes to. With top-k of E experts and
/// routing spread evenly (what the load-balancing loss trains for @assumed), each expert is
/// missed by all n tokens with probability (1 − k/E)^n, so the device reads
/// (E / ep)(1 − (1 − k/E)^(ep × tokens)) of its experts on average: k for one token without
/// expert parallelism, all of its share for a long prompt. With a dense/MoE mix: the mean over
/// the layers (as [`Transformer::layer_ffn_params`]).
fn layer_read(t: &Transformer, tokens: f64, ep: u64) -> f64 {
    match &t.experts {
        Some(e) if e.count > 0 => {
            let (n, k, ep) = (
                e.count as f64,
                e.top_k.min(e.count) as f64,
                ep.max(1) as f64,
            );
            let distinct = n / ep * (1.0 - (1.0 - k / n).powf((ep * tokens).max(1.0)));
            t.attn_params()
                + t.layer_mix(
                    (t.hidden * e.count) as f64
                        + t.ffn_params(e.ffn) * (e.shared as f64 + distinct),
                    t.ffn_params(t.ffn),
                )
        }
        _ => t.attn_params() + t.layer_ffn_params(),
    }
}

/// Parameters of one layer one device holds (before tensor parallelism splits them) where `ep`
/// instances share their experts: attention, the router and the shared experts whole, E / ep of
/// the routed experts (the mean over a dense/MoE mix). Without expert parallelism, the layer.
fn layer_held(t: &Transformer, ep: u64) -> f64 {
    match &t.experts {
        Some(e) if e.count > 0 => {
            let share = e.count as f64 / ep.max(1) as f64;
            t.attn_params()
                + t.layer_mix(
                    t.ffn_params(e.ffn) * (share + e.shared as f64) + (t.hidden * e.count) as f64,
                    t.ffn_params(t.ffn),
                )
        }
        _ => t.attn_params() + t.layer_ffn_params(),
    }
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
        return pool_prefill(sys, t, inf, m);
    }
    build(sys, t, inf, m, Mode::Prefill)
}

fn build(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
    mode: Mode,
) -> Result<Program, Reason> {
    let prefill_only = mode == Mode::Prefill;
    if m.cp > 1 {
        return Err(Reason::unsupported(
            "context parallelism is modelled for training only",
        ));
    }
    // Expert parallelism: `ep` of the `dp` model instances share their experts.
    if m.ep > 1 {
        let Some(e) = t.experts.as_ref() else {
            return Err(Reason::mapping(
                "expert parallelism needs a mixture-of-experts model",
            ));
        };
        if m.ep > e.count || !e.count.is_multiple_of(m.ep) {
            return Err(Reason::mapping(format!(
                "ep {} does not divide {} experts",
                m.ep, e.count
            )));
        }
        if !m.dp.is_multiple_of(m.ep) {
            return Err(Reason::mapping(format!(
                "ep {} does not divide the {} model instances (dp)",
                m.ep, m.dp
            )));
        }
    }
    let placement = if m.placement.n > 0 {
        m.placement
    } else {
        Placement::uniform(t.layers, m.tp, m.pp)
    };
    if placement.layers() != t.layers {
        return Err(Reason::mapping(format!(
            "the stages hold {} layers, the model has {}",
            placement.layers(),
            t.layers
        )));
    }
    for g in placement.groups() {
        if g.layers > 0 && !t.heads.is_multiple_of(g.devices) {
            return Err(Reason::mapping(format!(
                "a stage's {} devices do not divide {} attention heads",
                g.devices, t.heads
            )));
        }
    }
    // the decode instances' devices (a prefill pool's stage is built apart: `pool_stage`)
    let n = m.decode_devices();
    let pooled = m.pool.any() && !prefill_only;
    let dom = domain_size(sys, n);
    let prec = run_precision(sys, inf.compute);
    let p = prec.index();
    let vecp = vector_precision(sys, p);
    let wb = inf.weights.bytes();
    let kvb = inf.kv_cache.bytes();
    let ab = inf.activations.bytes();
    let h = t.hidden as f64;
    // the attention's query and context widths: `hidden` unless the model sets `head_dim` apart
    // or uses latent attention; the keys' and values' mean width
    let qd = t.q_dim() as f64;
    let vd = t.v_dim() as f64;
    let vocab = t.vocab as f64;
    let kvd = t.kv_dim();
    let tiling = tiling::Tiling::of(&sys.device);
    // the KV cache per token and layer, and whether tensor parallelism splits it (a latent cache
    // is shared by every head, so each rank keeps it whole); decode's attention per cached
    // position and head (`Transformer::decode_core_dims`)
    let kv_cache_dim = t.kv_cache_dim();
    let (score_dim, context_dim) = t.decode_core_dims();
    let attn_heads = t.heads as f64;
    // requests in flight per instance: the serving load's (the mapping's), else the workload's;
    // the prefill program: the one request whose prompt it runs
    let batch = if prefill_only {
        1.0
    } else if m.batch > 0 {
        m.batch as f64
    } else {
        inf.batch as f64
    };
    let stages = placement.stages();
    let ctx = inf.prompt as f64 + inf.output as f64 / 2.0;
    // what one device holds of a layer (all of it, or E / ep of its routed experts)
    let layer_params = layer_held(t, m.ep);
    let ep = m.ep.max(1);
    let layer_active = t.attn_params() + t.layer_ffn_active();
    let dp = m.dp as f64;
    // prefill of the whole batch, amortised over the generated tokens (count = 1 / output)
    let ptok = batch * inf.prompt as f64;
    let amort = if prefill_only {
        1.0
    } else {
        1.0 / inf.output as f64
    };
    let causal = if inf.flash_attention && t.causal {
        0.5
    } else {
        1.0
    };
    let (mbs, stp) = (Section::MicroBatch, Section::Step);
    let phase = Phase::Forward;
    // how the serving stack launches a decode layer: the mapping's choice, else the device's
    let kernels = m.kernels.unwrap_or(sys.device.efficiency.kernels);
    // Expert parallelism sends each token to the devices of its top-k experts and back (a
    // dispatch and a combine all-to-all per layer with experts), each copy its hidden state; the
    // tensor-parallel ranks of an instance split their tokens' traffic between them.
    let routed = t.experts.as_ref().map_or(0.0, |e| e.top_k as f64);
    // The loop closes: the last stage's tokens go back to the first stage (their embedding, with
    // the tied table on the last stage; token ids otherwise).
    let back_bytes = if t.tied_embeddings { h * ab } else { 4.0 };
    // A device with a mesh of cores (a wafer) pins each layer to a region of its cores: a class
    // of stages of several layers each becomes one stage per layer on a share of its devices
    // (work and footprint ÷ the share), the layers chained region after region over the mesh.
    let mesh = sys
        .device
        .mesh
        .as_ref()
        .map(|ms| {
            let (x, y) = ms.sides();
            (x as f64, y as f64)
        })
        .filter(|(x, y)| x * y > 1.0);
    let sram = crate::engine::machine::machine(sys, n)[crate::engine::table::SRAM_CAPACITY];
    let mut pieces: Vec<Piece> = Vec::new();
    if m.regions.any() {
        let Some((x, y)) = mesh else {
            return Err(Reason::unsupported(
                "core regions (`regions`) need a device with a mesh of cores (a wafer)",
            ));
        };
        if placement.devices() != 1 {
            return Err(Reason::mapping(format!(
                "core regions place the model on one device's cores, but the mapping spreads it over {}",
                placement.devices()
            )));
        }
        let kv_per_layer =
            kv_tokens(batch, inf.prompt as f64, inf.output as f64) * kv_cache_dim * kvb;
        let cap = WaferFit {
            x,
            y,
            sram,
            layers: t.layers,
            layer_bytes: layer_params * wb + kv_per_layer,
            table_bytes: h * vocab * wb,
            embed_first: !t.tied_embeddings,
        };
        for (phase, cores, decode) in [
            ("prefill", m.regions.prefill, false),
            ("decode", m.regions.decode, true),
        ] {
            if let Some(cores) = cores {
                pieces.extend(cap.pieces(phase, cores, decode)?);
            }
        }
    }
    for c in classes(&placement, !t.tied_embeddings) {
        // sends to the next stage (the last stage's to the first): how many of the class's
        // stages cross a scale-up domain boundary (devices laid out stage after stage; the first
        // instance stands for all)
        let (mut in_dom, mut across) = (0.0, 0.0);
        if stages > 1 {
            let mut crossing = 0u64;
            for k in 0..c.repeat {
                let last_dev = c.offset + (k + 1) * c.devices - 1;
                let next = if c.head && k + 1 == c.repeat {
                    0
                } else {
                    last_dev + 1
                };
                if last_dev / dom != next / dom {
                    crossing += 1;
                }
            }
            let r = c.repeat as f64;
            in_dom = (c.repeat - crossing) as f64 / r;
            across = crossing as f64 / r;
        }
        let base = Piece {
            repeat: c.repeat,
            layers: c.layers,
            devices: c.devices,
            share: c.devices as f64,
            embed: c.embed,
            head: c.head,
            side: 0.0,
            sends: [0.0, 0.0, in_dom, across],
            decode: m.regions.decode.is_none(),
            // with a prefill pool the instances only decode
            prefill: m.regions.prefill.is_none() && !pooled,
            region: (0.0, 0.0),
        };
        if !base.decode && !base.prefill {
            continue;
        }
        let Some((x, y)) = mesh else {
            pieces.push(base);
            continue;
        };
        let l = c.layers.max(1) as f64;
        // a square region of its share of each device's cores (no wider than the mesh)
        let side_of = |share: f64| {
            (x * y * share / c.devices as f64)
                .sqrt()
                .min(x.min(y))
                .max(1.0)
        };
        // Regions only where the class's weights stay in the wafer's SRAM: a model streamed
        // from a weight store runs layer after layer on the whole wafer (weight streaming).
        let weights_per_device = (c.repeat as f64 * l * layer_params
            + (f64::from(u8::from(c.embed)) + f64::from(u8::from(c.head))) * h * vocab)
            / (c.repeat * c.devices) as f64
            * wb;
        if c.layers <= 1 || weights_per_device > sram {
            pieces.push(Piece {
                side: side_of(c.devices as f64),
                ..base
            });
            continue;
        }
        // per stage of the class: l − 1 sends between neighbouring regions, and the class's
        // own send (to the next device, or back across the wafer to the first region)
        let own = if stages > 1 {
            [0.0, 0.0, in_dom, across]
        } else {
            [0.0, 1.0, 0.0, 0.0]
        };
        let sends = [(l - 1.0) / l, own[1] / l, own[2] / l, own[3] / l];
        // the class's devices shared out in proportion to the weights each region holds (a
        // layer; the first also the embedding table, the last the output head)
        let (layer_w, table_w) = (layer_params, h * vocab);
        let total = c.repeat as f64 * l * layer_w
            + (f64::from(u8::from(c.embed)) + f64::from(u8::from(c.head))) * table_w;
        let share_of = |w: f64| c.repeat as f64 * c.devices as f64 * w / total;
        let region = |repeat: u64, embed: bool, head: bool| {
            let w = layer_w + if embed { table_w } else { 0.0 } + if head { table_w } else { 0.0 };
            let share = share_of(w);
            Piece {
                repeat,
                layers: 1,
                share,
                embed,
                head,
                side: side_of(share),
                sends,
                ..base
            }
        };
        let n = c.repeat * c.layers;
        let first = u64::from(c.embed);
        let last = u64::from(c.head);
        if c.embed {
            pieces.push(region(1, true, false));
        }
        pieces.push(region(n - first - last, false, false));
        if c.head {
            pieces.push(region(1, false, true));
        }
    }
    pieces.retain(|p| p.repeat > 0);
    let in_flight: f64 = pieces
        .iter()
        .filter(|p| p.decode)
        .map(|p| p.repeat as f64)
        .sum::<f64>()
        .max(1.0);
    // requests per micro-batch: as the mapping says, or the batch split evenly over the stages
    // so that every stage has one in flight
    let mbatch = if m.micro_batch > 0 {
        (m.micro_batch as f64).min(batch)
    } else {
        (batch / in_flight).max(1.0).ceil()
    };
    let micro_batches = if prefill_only {
        1.0
    } else {
        (batch / mbatch).ceil()
    };
    // Speculative decoding (the round only): a request's round verifies its drafted tokens and
    // the model's own next one in one pass (`verify` tokens through every layer, the weights and
    // the KV cache read once) and gains `Speculative::tokens_per_round` (`gain`) tokens. The
    // round program stays per output token: its micro-batch work is divided by the gain, so its
    // step is the time per output token as without speculation, and the prefill's share of a
    // round (per output token already) is unchanged.
    let spec = inf.speculative.filter(|_| !prefill_only);
    let verify = spec.map_or(1.0, |sp| sp.tokens as f64 + 1.0);
    let gain = spec.map_or(1.0, |sp| sp.tokens_per_round());
    // the tokens a micro-batch's round passes through the model
    let vt = mbatch * verify;
    // the outputs of a layer's matrix-vector products, per token, each reduced across a row of
    // its region: Q/K/V, the output projection, the FFN's up (and gate) and down projections,
    // and the attention's weighted sum
    let ffn_mats = if t.gated_ffn { 3.0 } else { 2.0 };
    let ffn_width = t.layer_ffn_active() / (ffn_mats * h);
    let reductions = 5.0;
    let reduced = (qd + 2.0 * kvd) + h + (ffn_mats - 1.0) * ffn_width + h + vd;
    let mut b = Builder::default();
    let mut out_stages: Vec<Stage> = Vec::new();
    let mut biggest = Footprint::default();
    for c in pieces {
        let (o0, c0) = (b.ops.len(), b.comms.len());
        let d = c.share;
        // what the KV cache is divided by: the share, but for a latent cache on several devices
        let kv_div = if t.kv_cache_split() { d } else { d.min(1.0) };
        let l = c.layers as f64;
        let g_tp = place_group(sys, c.devices, 1, dom);
        // the device's expert-parallel peers: the same place in the other instances of its
        // group (instances laid out one after the other)
        let g_ep = place_group(sys, ep, placement.devices(), dom);
        // the phases this stage costs: a stage of decode's own region has nothing in the
        // prompt-alone program; the output head gives the first token from prefill's region
        let dec = c.decode && (!prefill_only || c.prefill);
        let head = c.head && (dec || (prefill_only && c.prefill));
        // The matrix products and vector work of `layers` passes of `tokens` tokens through a
        // layer (`count` occurrences per section), as the serving stack launches them
        // (`vocab::Kernels`): each op below is one kind of kernel launched `k` times per layer,
        // each launch doing 1/k of its work and paying the device's kernel overhead once.
        // `Compiled`: one step of all the layer's matrix products, one of its vector work.
        // Names: [matrix products, qkv, output projection, mlp up, mlp down, elementwise].
        let work = |b: &mut Builder,
                    names: [&'static str; 6],
                    tokens: f64,
                    count: f64,
                    section: Section| {
            // `(n, inner)`: the columns of a launch's output (tokens × n) and the width it sums
            // over, whose shape sets its occupancy (`engine::tiling`; routed experts taken as one
            // product of their active width)
            let gemm = |b: &mut Builder,
                        name: &'static str,
                        k: f64,
                        active: f64,
                        read: f64,
                        (n, inner): (f64, f64)| {
                b.op(Op {
                    name: name.into(),
                    matrix: true,
                    precision: p,
                    flops: 2.0 * active / d * tokens / k,
                    occupancy: tiling::occupancy(tiling, &[(1.0, Gemm::new(tokens, n, inner))]),
                    weight_bytes: read / d * wb / k,
                    act_bytes: tokens * h * ab / k,
                    count: count * k,
                    section,
                    phase,
                });
            };
            let read = layer_read(t, tokens, ep);
            let sep = kernels == Kernels::Separate;
            if kernels == Kernels::Compiled {
                b.op(Op {
                    name: names[0].into(),
                    matrix: true,
                    precision: p,
                    flops: 2.0 * layer_active / d * tokens,
                    occupancy: 1.0,
                    weight_bytes: read / d * wb,
                    act_bytes: 4.0 * tokens * h * ab,
                    count,
                    section,
                    phase,
                });
            } else {
                // Q, K, V (three GEMMs, or one), the output projection, the MLP's up and gate
                // (two GEMMs, or one with the activation in its epilogue), its down projection
                let ffn_read = read - t.attn_params();
                let (qkv_split, qkv_shared) = t.qkv_params();
                let (qkv, o) = (qkv_split + qkv_shared, vd * h);
                let up_share = (ffn_mats - 1.0) / ffn_mats;
                let active = t.layer_ffn_active();
                // Q, K, V and the MLP's up projection split their output columns over the
                // devices; the output and down projections their inner width (output h wide)
                let qkv_k = if sep { 3.0 } else { 1.0 };
                gemm(b, names[1], qkv_k, qkv, qkv, (qkv / (h * d * qkv_k), h));
                gemm(b, names[2], 1.0, o, o, (h, vd / d));
                let up_k = if sep { ffn_mats - 1.0 } else { 1.0 };
                let up = active * up_share;
                gemm(
                    b,
                    names[3],
                    up_k,
                    up,
                    ffn_read * up_share,
                    (up / (h * d * up_k), h),
                );
                let down = active / ffn_mats;
                gemm(
                    b,
                    names[4],
                    1.0,
                    down,
                    ffn_read / ffn_mats,
                    (h, down / (h * d)),
                );
            }
            // vector kernels: two residual-add + RMSNorm (fused), else the norms, the adds,
            // rotary, the cache append and the activation apart; a layer with experts adds
            // its routing kernels (the router GEMM's FLOPs are the MLP's); compiled, one step
            let (vector, routing) = match kernels {
                Kernels::Separate => (7.0, 4.0),
                Kernels::Fused => (2.0, 3.0),
                Kernels::Compiled => (1.0, 0.0),
            };
            let k = vector + routing * t.moe_fraction();
            b.op(Op {
                name: names[5].into(),
                matrix: false,
                precision: vecp,
                flops: 10.0 * tokens * h / k,
                occupancy: 1.0,
                weight_bytes: 0.0,
                act_bytes: 12.0 * tokens * h * ab / k,
                count: count * k,
                section,
                phase,
            });
        };
        // One decode pass: `tokens` tokens per micro-batch through `layers` layer passes (the
        // KV cache of its `mbatch` requests read once for all their tokens) and `heads` passes
        // of the output head. The model's own pass carries its drafted tokens and its next one
        // (`vt`); a draft (an EAGLE head, a multi-token-prediction module: layers of the model's
        // shape; Medusa's heads alone) runs γ passes of one token per request beside the head.
        let pass = |b: &mut Builder, draft: bool, tokens: f64, layers: f64, heads: f64| {
            let pick =
                |model: &'static str, of_draft: &'static str| if draft { of_draft } else { model };
            if layers > 0.0 {
                let names = if draft {
                    [
                        "decode: draft layer matmuls",
                        "decode: draft qkv projection",
                        "decode: draft output projection",
                        "decode: draft mlp up",
                        "decode: draft mlp down",
                        "decode: draft elementwise",
                    ]
                } else {
                    [
                        "decode: layer matmuls",
                        "decode: qkv projection",
                        "decode: output projection",
                        "decode: mlp up",
                        "decode: mlp down",
                        "decode: elementwise",
                    ]
                };
                work(b, names, tokens, layers, mbs);
                b.op(Op {
                    name: pick(
                        "decode: attention over KV cache",
                        "decode: draft attention over KV cache",
                    )
                    .into(),
                    matrix: true,
                    precision: p,
                    flops: 2.0 * tokens * ctx * attn_heads * (score_dim + context_dim) / d,
                    occupancy: 1.0,
                    weight_bytes: 0.0,
                    act_bytes: mbatch * ctx * kv_cache_dim / kv_div * kvb,
                    count: layers,
                    section: mbs,
                    phase,
                });
                b.comm(Collective {
                    name: pick("tp all-reduce", "draft tp all-reduce").into(),
                    role: Role::TensorParallel,
                    kind: CollKind::AllReduce,
                    bytes: tokens * h * ab,
                    group: g_tp,
                    count: 2.0 * layers,
                    section: mbs,
                    overlap: Overlap::None,
                });
                if ep > 1 {
                    b.expert_all_to_all(
                        Collective {
                            name: pick("ep all-to-all", "draft ep all-to-all").into(),
                            role: Role::ExpertAllToAll,
                            kind: CollKind::AllToAll,
                            bytes: routed * tokens * h * ab / d,
                            group: g_ep,
                            count: 2.0 * layers * t.moe_fraction(),
                            section: mbs,
                            overlap: Overlap::None,
                        },
                        routed,
                        m.expert_dispatch,
                    );
                }
            }
            if heads > 0.0 {
                b.op(Op {
                    name: pick("decode: lm head", "decode: draft lm head").into(),
                    matrix: true,
                    precision: p,
                    flops: 2.0 * tokens * h * vocab / d,
                    occupancy: tiling::occupancy(tiling, &[(1.0, Gemm::new(tokens, vocab / d, h))]),
                    weight_bytes: h * vocab / d * wb,
                    act_bytes: tokens * vocab / d * 4.0,
                    count: heads,
                    section: mbs,
                    phase,
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
                    group: g_tp,
                    count: heads,
                    section: mbs,
                    overlap: Overlap::None,
                });
            }
        };
        let layer_passes = if c.layers > 0 && dec { l } else { 0.0 };
        pass(&mut b, false, vt, layer_passes, f64::from(u8::from(head)));
        if let (Some(sp), true) = (spec, head && dec) {
            let g = sp.tokens as f64;
            pass(&mut b, true, mbatch, g * sp.draft_layers as f64, g);
        }
        let bytes = vt * if c.head { back_bytes } else { h * ab };
        for (name, count, group) in [
            (
                "pp send/recv (in domain)",
                c.sends[2],
                place_group(sys, 2, 1, dom),
            ),
            ("pp send/recv (across domains)", c.sends[3], (1.0, 2.0, 1.0)),
        ] {
            if dec {
                b.comm(Collective {
                    name: name.into(),
                    role: Role::PipelineSendRecv,
                    kind: CollKind::SendRecv,
                    bytes,
                    group,
                    count,
                    section: mbs,
                    overlap: Overlap::None,
                });
            }
            if !c.head && c.prefill {
                b.comm(Collective {
                    name: "prefill: pp send/recv".into(),
                    role: Role::PipelineSendRecv,
                    kind: CollKind::SendRecv,
                    bytes: ptok * h * ab,
                    group,
                    count: count * amort,
                    section: stp,
                    overlap: Overlap::None,
                });
            }
        }
        if let Some((x, y)) = mesh {
            // region to region over the mesh: to the neighbouring region (its side in hops),
            // or back across the wafer to the first (PLMR's worst case, x + y hops); the
            // activations spread over the links of the region's edge
            for (name, count, hops) in [
                ("mesh: activations to the next region", c.sends[0], c.side),
                ("mesh: tokens back to the first region", c.sends[1], x + y),
            ] {
                for (sec, n, cnt, on) in
                    [(mbs, vt, count, dec), (stp, ptok, count * amort, c.prefill)]
                {
                    if !on {
                        continue;
                    }
                    b.mesh_comm(
                        Collective {
                            name: name.into(),
                            role: Role::PipelineSendRecv,
                            kind: CollKind::SendRecv,
                            bytes: n * h * ab / c.side,
                            group: (1.0, 1.0, 1.0),
                            count: cnt,
                            section: sec,
                            overlap: Overlap::None,
                        },
                        hops,
                    );
                }
            }
            // the attention heads whose dimensions a core holds part of: heads / side where a
            // row of cores holds several heads, else one
            let held_heads = (attn_heads / c.side).max(1.0);
            if c.layers > 0 && dec {
                // every matrix-vector product reduces its partial outputs across a row of the
                // region (MeshGEMV); each core holds 1/side of the output vector
                b.mesh_comm(
                    Collective {
                        name: "mesh: decode all-reduce (MeshGEMV)".into(),
                        role: Role::TensorParallel,
                        kind: CollKind::AllReduce,
                        bytes: vt * reduced / reductions / c.side * ab,
                        group: (1.0, 1.0, 1.0),
                        count: reductions * l,
                        section: mbs,
                        overlap: Overlap::None,
                    },
                    c.side,
                );
                // A vector spread over a row of cores needs a reduction for every quantity
                // summed over it, not only the matrix-vector outputs. WaferLLM's decode layer
                // (MeshInfra/WaferLLM `Decode/WSE-2/src/decode.csl`, `decode_struct`) runs ten
                // two-tree all-reduces: the five outputs above, the attention scores (each
                // core's partial dot products for its share of the cached positions, reduced
                // across the row that holds the query's dimensions), the two RMSNorm sums of
                // squares and the softmax's maximum and sum (one value per token and per head
                // a core holds: `held_heads`)
                b.mesh_comm(
                    Collective {
                        name: "mesh: decode attention-score all-reduce".into(),
                        role: Role::TensorParallel,
                        kind: CollKind::AllReduce,
                        bytes: vt * ctx / c.side * held_heads * ab,
                        group: (1.0, 1.0, 1.0),
                        count: l,
                        section: mbs,
                        overlap: Overlap::None,
                    },
                    c.side,
                );
                b.mesh_comm(
                    Collective {
                        name: "mesh: decode RMSNorm and softmax all-reduces".into(),
                        role: Role::TensorParallel,
                        kind: CollKind::AllReduce,
                        // two norms (one value per token), softmax max and sum (per held head)
                        bytes: vt * (1.0 + held_heads) / 2.0 * ab,
                        group: (1.0, 1.0, 1.0),
                        count: 4.0 * l,
                        section: mbs,
                        overlap: Overlap::None,
                    },
                    c.side,
                );
            }
            if c.layers > 0 && c.prefill {
                // prefill's matrix products as cyclic shifts along rows and columns
                // (MeshGEMM, `mesh_gemm_bytes`), behind the multiplications (WaferLLM's prefill
                // kernel, Prefill/WSE-2/src/comm_lib/comm_pe.csl `mm_two_hop_comm`, starts each
                // step's shifts asynchronously into the second buffer): QKV, the output
                // projection, the FFN's up (and gate) and down projections, as (the prompt's
                // input activations, the weights)
                let (qkv_split, qkv_shared) = t.qkv_params();
                let ffn_active = t.layer_ffn_active();
                let products = [
                    (ptok * h * ab, (qkv_split + qkv_shared) * wb),
                    (ptok * vd * ab, vd * h * wb),
                    (ptok * h * ab, ffn_active * (ffn_mats - 1.0) / ffn_mats * wb),
                    (ptok * ffn_width * ab, ffn_active / ffn_mats * wb),
                ];
                b.mesh_comm(
                    Collective {
                        name: "mesh: prefill shifts (MeshGEMM)".into(),
                        role: Role::TensorParallel,
                        kind: CollKind::AllGather,
                        bytes: super::mesh_gemm_bytes(&products, c.side),
                        group: (1.0, 1.0, 1.0),
                        count: l * amort,
                        section: stp,
                        overlap: Overlap::Compute,
                    },
                    c.side,
                );
                // The scores Q·Kᵀ contract over the hidden dimensions, which a row of cores
                // splits: WaferLLM's prefill kernel (`Prefill/WSE-2/src/prefill.csl`,
                // `matmul_T_compute`) reduces each step's partial score tile (a request's
                // (prompt / side)² scores per held head) to a root of the row (a reduction: on
                // a mesh line it costs what a reduce-scatter does, `Coeffs::mesh`), one for
                // each of the side's steps; the two RMSNorms and the softmax's max and sum
                // all-reduce across the row, one value per token (and held head) a core holds.
                let tile = inf.prompt as f64 / c.side;
                for (name, kind, bytes, count) in [
                    (
                        "mesh: prefill score reductions (transposed MeshGEMM)",
                        CollKind::ReduceScatter,
                        batch * tile * tile * held_heads * ab,
                        l * c.side,
                    ),
                    (
                        "mesh: prefill RMSNorm and softmax all-reduces",
                        CollKind::AllReduce,
                        ptok / c.side * (1.0 + held_heads) / 2.0 * ab,
                        4.0 * l,
                    ),
                ] {
                    b.mesh_comm(
                        Collective {
                            name: name.into(),
                            role: Role::TensorParallel,
                            kind,
                            bytes,
                            group: (1.0, 1.0, 1.0),
                            count: count * amort,
                            section: stp,
                            overlap: Overlap::None,
                        },
                        c.side,
                    );
                }
            }
            if head {
                b.mesh_comm(
                    Collective {
                        name: "mesh: lm head reduction".into(),
                        role: Role::TensorParallel,
                        kind: CollKind::AllReduce,
                        bytes: vt * vocab / c.side * 4.0,
                        group: (1.0, 1.0, 1.0),
                        count: 1.0,
                        section: mbs,
                        overlap: Overlap::None,
                    },
                    c.side,
                );
            }
        }
        if c.layers > 0 && c.prefill {
            // the prompt's tokens through the layer's kernels, as the round's
            work(
                &mut b,
                [
                    "prefill: layer matmuls",
                    "prefill: qkv projection",
                    "prefill: output projection",
                    "prefill: mlp up",
                    "prefill: mlp down",
                    "prefill: elementwise",
                ],
                ptok,
                l * amort,
                stp,
            );
            b.op(Op {
                name: "prefill: attention".into(),
                matrix: true,
                precision: p,
                flops: 2.0 * ptok * inf.prompt as f64 * (qd + vd) / d * causal,
                // FlashAttention's blocks of queries: one block row per prompt and local head
                occupancy: tiling::occupancy(
                    tiling,
                    &[(
                        1.0,
                        Gemm::rows(
                            inf.prompt as f64,
                            ptok / inf.prompt as f64 * t.heads as f64 / d,
                        ),
                    )],
                ),
                weight_bytes: 0.0,
                act_bytes: ptok * (qd + vd + 2.0 * kvd) / d * ab,
                count: l * amort,
                section: stp,
                phase,
            });
            b.comm(Collective {
                name: "prefill: tp all-reduce".into(),
                role: Role::TensorParallel,
                kind: CollKind::AllReduce,
                bytes: ptok * h * ab,
                group: g_tp,
                count: 2.0 * l * amort,
                section: stp,
                overlap: Overlap::None,
            });
            if ep > 1 {
                b.expert_all_to_all(
                    Collective {
                        name: "prefill: ep all-to-all".into(),
                        role: Role::ExpertAllToAll,
                        kind: CollKind::AllToAll,
                        bytes: routed * ptok * h * ab / d,
                        group: g_ep,
                        count: 2.0 * l * t.moe_fraction() * amort,
                        section: stp,
                        overlap: Overlap::None,
                    },
                    routed,
                    m.expert_dispatch,
                );
            }
        }
        if prefill_only {
            // the prompt alone: its (step-section) work once, as the one micro-batch, and the
            // output head's first token; none of the decode round
            let keep = |name: &str, sec: Section| sec == Section::Step || name.contains("lm head");
            let ops: Vec<Op> = b.ops.drain(o0..).collect();
            b.ops.extend(
                ops.into_iter()
                    .filter(|o| keep(&o.name, o.section))
                    .map(|o| Op { section: mbs, ..o }),
            );
            let comms: Vec<Comm> = b.comms.drain(c0..).collect();
            b.comms.extend(
                comms
                    .into_iter()
                    .filter(|c| keep(&c.name, c.section))
                    .map(|c| Comm { section: mbs, ..c }),
            );
        }
        if gain != 1.0 {
            // per output token: the round's micro-batch work over the tokens it gains
            for o in &mut b.ops[o0..] {
                if o.section == mbs {
                    o.count /= gain;
                }
            }
            for cm in &mut b.comms[c0..] {
                if cm.section == mbs {
                    cm.count /= gain;
                }
            }
        }
        // the draft's layers (and their KV cache) live beside the output head
        let draft = match spec {
            Some(sp) if c.head => sp.draft_layers as f64,
            _ => 0.0,
        };
        let table = h * vocab / d * wb;
        let weights = (l + draft) * layer_params / d * wb
            + if c.head { table } else { 0.0 }
            + if c.embed { table } else { 0.0 };
        let kv_cache = kv_tokens(batch, inf.prompt as f64, inf.output as f64) * kv_cache_dim
            / kv_div
            * kvb
            * (l + draft);
        let activations = if c.layers > 0 {
            mbatch.max(batch.min(4.0)) * inf.prompt as f64 * h * ab * 4.0 / d
        } else {
            mbatch * vocab / d * 4.0
        };
        let footprint = Footprint {
            weights,
            gradients: 0.0,
            optimizer: 0.0,
            activations,
            kv_cache,
            offloaded: 0.0,
        };
        if footprint.total() > biggest.total() {
            biggest = footprint;
        }
        out_stages.push(Stage {
            name: if c.head && c.layers == 0 {
                "head".into()
            } else if c.decode != c.prefill {
                format!(
                    "{}: {} layer(s) on {:.0} × {:.0} cores",
                    if c.decode { "decode" } else { "prefill" },
                    c.layers,
                    c.region.0,
                    c.region.1
                )
                .into()
            } else {
                if c.share < c.devices as f64 {
                    format!("{} layer(s) on {:.4} device(s)", c.layers, c.share).into()
                } else {
                    format!("{} layer(s) on {} device(s)", c.layers, c.devices).into()
                }
            },
            ops: o0..b.ops.len(),
            comms: c0..b.comms.len(),
            repeat: c.repeat as f64,
            devices: d * dp,
            footprint,
            pool: false,
        });
    }
    if pooled {
        let st = pool_stage(sys, t, inf, m, batch, &mut b)?;
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
    let (tokens_per_round, ctx) = if prefill_only {
        // the prompt's tokens, at their mean context
        (inf.prompt as f64 * dp, inf.prompt as f64 / 2.0)
    } else {
        (batch * dp, ctx)
    };
    let model_flops = tokens_per_round * t.forward_flops_per_token((ctx as u64).max(1), false);
    Ok(Program {
        ops: b.ops,
        comms: b.comms,
        stages: out_stages,
        micro_batches,
        bubble: 0.0,
        footprint: biggest,
        devices: m.devices() as f64,
        units_per_step: tokens_per_round,
        unit: "tokens",
        model_flops_per_step: model_flops,
        mfu_precision: prec.index(),
        steps: None,
        host_steps: 0.0,
    })
}

/// The mapping of a prefill pool's instances: `instances` model instances, each one stage of the
/// pool's `tp` devices, running only prompts.
fn pool_mapping(m: &Mapping) -> Mapping {
    Mapping {
        dp: m.pool.instances.max(1),
        tp: m.pool.tp.max(1),
        pp: 1,
        ep: 1,
        cp: 1,
        micro_batch: 0,
        placement: Placement::default(),
        batch: 0,
        regions: Regions::default(),
        pool: Pool::default(),
        ..*m
    }
}

/// One prompt alone on a prefill pool's instance (disaggregated serving, [`Mapping::pool`]):
/// its prefill by the same builder as an instance's own ([`Mode::Prefill`] under
/// [`pool_mapping`]), and its KV cache sent to the decode instance that serves the request, layer
/// by layer while the next layers compute (DistServe §4, Splitwise §4.2: the transfer overlaps
/// the prefill; `Overlap::Compute`). Each pool device sends its share of the prompt's KV cache
/// (all layers, its KV heads), each decode device receives its own: the fewer devices of the two
/// sides bound it. Over the scale-up network where the decode instances and the pool fit one
/// scale-up domain, else over the scale-out network.
fn pool_prefill(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
) -> Result<Program, Reason> {
    if sys.device.has_mesh() {
        return Err(Reason::unsupported(
            "a prefill pool on a device with a mesh of cores: give the phases core `regions` instead",
        ));
    }
    if m.regions.any() {
        return Err(Reason::unsupported("a prefill pool beside core `regions`"));
    }
    let pm = pool_mapping(m);
    let mut p = build(sys, t, inf, &pm, Mode::Prefill)?;
    let per_instance = (m.decode_devices() / m.dp.max(1)).max(1);
    let sides = pm.tp.min(per_instance).max(1) as f64;
    let bytes =
        inf.prompt as f64 * t.kv_cache_dim() * inf.kv_cache.bytes() * t.layers as f64 / sides;
    let dom = sys.scale_up_size().max(1);
    let group = if m.devices() <= dom {
        place_group(sys, 2, 1, dom)
    } else {
        (1.0, 2.0, 1.0)
    };
    let mut b = Builder::default();
    b.comm(Collective {
        name: "prefill pool: kv cache to decode instance".into(),
        role: Role::KvTransfer,
        kind: CollKind::SendRecv,
        bytes,
        group,
        count: 1.0,
        section: Section::MicroBatch,
        overlap: Overlap::Compute,
    });
    p.comms.extend(b.comms);
    if let Some(last) = p.stages.last_mut() {
        last.comms.end = p.comms.len();
    }
    Ok(p)
}

/// The prefill pool's stage class of a disaggregated round ([`Stage::pool`]): per round, the
/// prompts of the requests that join (as many as finish: `batch` × dp / output over the system,
/// speculative or not, the round being per output token), spread evenly over the pool's
/// instances, each [`pool_prefill`]'s work (its KV transfer hidden behind the pool's compute);
/// its devices the pool's, its footprint one prompt's prefill beside the weights.
fn pool_stage(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
    batch: f64,
    b: &mut Builder,
) -> Result<Stage, Reason> {
    let one = pool_prefill(sys, t, inf, m)?;
    let per_round =
        batch * m.dp as f64 / (inf.output.max(1) as f64 * m.pool.instances.max(1) as f64);
    let (o0, c0) = (b.ops.len(), b.comms.len());
    let stp = Section::Step;
    b.ops.extend(one.ops.into_iter().map(|o| Op {
        count: o.count * per_round,
        section: stp,
        ..o
    }));
    b.comms.extend(one.comms.into_iter().map(|c| Comm {
        count: c.count * per_round,
        section: stp,
        ..c
    }));
    Ok(Stage {
        name: format!(
            "prefill pool: {} instance(s) of {} device(s)",
            m.pool.instances, m.pool.tp
        )
        .into(),
        ops: o0..b.ops.len(),
        comms: c0..b.comms.len(),
        repeat: 1.0,
        devices: m.pool.devices() as f64,
        footprint: one.footprint,
        pool: true,
    })
}
