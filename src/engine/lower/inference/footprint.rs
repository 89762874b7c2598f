//! What a device of a serving stage holds: its layers' weights (and a speculative draft's beside
//! the head), the embedding table or output head, the paged KV cache of the requests in flight,
//! and the activations of a prompt's pass.

use super::kv::kv_tokens;
use super::piece::Piece;
use super::shape::{At, Round, Shape};
use crate::engine::program::Footprint;

/// The footprint of one device of stage class `c`.
pub(super) fn of(s: &Shape, r: &Round, c: &Piece, at: &At) -> Footprint {
    let (inf, h, d, l) = (s.inf, s.h, at.d, at.l);
    // the draft's layers (and their KV cache) live beside the output head
    let draft = match s.spec {
        Some(sp) if c.head => sp.draft_layers as f64,
        _ => 0.0,
    };
    let table = h * s.vocab / d * s.wb;
    let weights = (l + draft) * s.layer_params / d * s.wb
        + if c.head { table } else { 0.0 }
        + if c.embed { table } else { 0.0 };
    let kv_cache = kv_tokens(s.batch, inf.prompt as f64, inf.output as f64) * s.kv_cache_dim
        / at.kv_div
        * s.kvb
        * (l + draft);
    let activations = if c.layers > 0 {
        r.mbatch.max(s.batch.min(4.0)) * inf.prompt as f64 * h * s.ab * 4.0 / d
    } else {
        r.mbatch * s.vocab / d * 4.0
    };
    Footprint {
        weights,
        gradients: 0.0,
        optimizer: 0.0,
        activations,
        kv_cache,
        offloaded: 0.0,
        // serving keeps its weights where they fit (a system's execution mode streams training)
        streamed: false,
    }
}
