//! The stages a serving program runs, as classes of identical stages: the placement's runs of
//! stages (the embedding's first stage and the head's last apart), and on a device with a mesh
//! of cores (a wafer) one stage per layer on a region of its cores, or the regions a mapping
//! states for each phase (`regions::WaferFit`).

use super::kv::kv_tokens;
use super::piece::Piece;
use super::regions::WaferFit;
use super::shape::Shape;
use crate::engine::reason::Reason;
use crate::model::mapping::Placement;

/// One class of identical stages as the placement gives it.
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

/// The program's stage classes: the regions a mapping states for each phase on a wafer, then the
/// placement's classes (each split into a region per layer where its weights stay in a wafer's
/// SRAM). Classes that run neither phase are left out.
pub(super) fn pieces(s: &Shape) -> Result<Vec<Piece>, Reason> {
    let (t, m) = (s.t, s.m);
    let mut pieces: Vec<Piece> = Vec::new();
    if m.regions.any() {
        let Some((x, y)) = s.mesh else {
            return Err(Reason::unsupported(
                "core regions (`regions`) need a device with a mesh of cores (a wafer)",
            ));
        };
        if s.placement.devices() != 1 {
            return Err(Reason::mapping(format!(
                "core regions place the model on one device's cores, but the mapping spreads it over {}",
                s.placement.devices()
            )));
        }
        let kv_per_layer =
            kv_tokens(s.batch, s.inf.prompt as f64, s.inf.output as f64) * s.kv_cache_dim * s.kvb;
        let cap = WaferFit {
            x,
            y,
            sram: s.sram,
            layers: t.layers,
            layer_bytes: s.layer_params * s.wb + kv_per_layer,
            table_bytes: s.h * s.vocab * s.wb,
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
    for c in classes(&s.placement, !t.tied_embeddings) {
        class_pieces(s, &c, &mut pieces);
    }
    pieces.retain(|p| p.repeat > 0);
    Ok(pieces)
}

/// The fractions of a class's stages whose send to the next stage (the last stage's to the
/// first) stays in its scale-up domain and crosses to another (devices laid out stage after
/// stage; the first instance stands for all).
fn crossings(s: &Shape, c: &Class) -> (f64, f64) {
    if s.stages <= 1 {
        return (0.0, 0.0);
    }
    let mut crossing = 0u64;
    for k in 0..c.repeat {
        let last_dev = c.offset + (k + 1) * c.devices - 1;
        let next = if c.head && k + 1 == c.repeat {
            0
        } else {
            last_dev + 1
        };
        if last_dev / s.dom != next / s.dom {
            crossing += 1;
        }
    }
    let r = c.repeat as f64;
    ((c.repeat - crossing) as f64 / r, crossing as f64 / r)
}

/// A placement class as the program's pieces: itself, or on a wafer one region per layer.
fn class_pieces(s: &Shape, c: &Class, pieces: &mut Vec<Piece>) {
    let (in_dom, across) = crossings(s, c);
    let base = Piece {
        repeat: c.repeat,
        layers: c.layers,
        devices: c.devices,
        share: c.devices as f64,
        embed: c.embed,
        head: c.head,
        side: 0.0,
        sends: [0.0, 0.0, in_dom, across],
        decode: s.m.regions.decode.is_none(),
        // with a prefill pool the instances only decode
        prefill: s.m.regions.prefill.is_none() && !s.pooled,
        region: (0.0, 0.0),
    };
    if !base.decode && !base.prefill {
        return;
    }
    let Some((x, y)) = s.mesh else {
        pieces.push(base);
        return;
    };
    let l = c.layers.max(1) as f64;
    let (h, vocab) = (s.h, s.vocab);
    // a square region of its share of each device's cores (no wider than the mesh)
    let side_of = |share: f64| {
        (x * y * share / c.devices as f64)
            .sqrt()
            .min(x.min(y))
            .max(1.0)
    };
    // Regions only where the class's weights stay in the wafer's SRAM: a model streamed
    // from a weight store runs layer after layer on the whole wafer (weight streaming).
    let weights_per_device = (c.repeat as f64 * l * s.layer_params
        + (f64::from(u8::from(c.embed)) + f64::from(u8::from(c.head))) * h * vocab)
        / (c.repeat * c.devices) as f64
        * s.wb;
    if c.layers <= 1 || weights_per_device > s.sram {
        pieces.push(Piece {
            side: side_of(c.devices as f64),
            ..base
        });
        return;
    }
    // per stage of the class: l − 1 sends between neighbouring regions, and the class's
    // own send (to the next device, or back across the wafer to the first region)
    let own = if s.stages > 1 {
        [0.0, 0.0, in_dom, across]
    } else {
        [0.0, 1.0, 0.0, 0.0]
    };
    let sends = [(l - 1.0) / l, own[1] / l, own[2] / l, own[3] / l];
    // the class's devices shared out in proportion to the weights each region holds (a
    // layer; the first also the embedding table, the last the output head)
    let (layer_w, table_w) = (s.layer_params, h * vocab);
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
