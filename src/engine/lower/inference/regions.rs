//! The core regions a mapping states for each phase on a wafer (`Mapping::regions`): as many
//! blocks of the stated cores as tile the mesh, each the next run of layers, each holding its
//! layers' weights and KV cache in its cores' SRAM, or the mapping is refused with the shortfall.

use super::piece::Piece;
use crate::engine::reason::{Reason, RegionShortfall};

/// What a wafer offers the core regions a mapping states for a phase, and what the model puts
/// in them.
pub(super) struct WaferFit {
    /// Cores along the mesh's two sides.
    pub x: f64,
    pub y: f64,
    /// The wafer's SRAM (bytes; its cores' together).
    pub sram: f64,
    pub layers: u64,
    /// Weights and KV cache of one layer (bytes).
    pub layer_bytes: f64,
    /// The embedding table or the output head (bytes).
    pub table_bytes: f64,
    /// The embedding table sits on the first region (untied embeddings); the head is always on
    /// the last.
    pub embed_first: bool,
}

impl WaferFit {
    /// A phase's stages on blocks of `cores` (columns, rows; turned where only that fits): as
    /// many blocks as tile the mesh, each the next run of layers, which it runs one after
    /// another on all its cores; the rest of the wafer idle. Each block must hold its layers'
    /// weights and KV cache in its cores' SRAM.
    pub fn pieces(
        &self,
        phase: &str,
        cores: (u64, u64),
        decode: bool,
    ) -> Result<Vec<Piece>, Reason> {
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
