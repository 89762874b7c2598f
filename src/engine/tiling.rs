//! Why small and oddly shaped matrix products are slow: tile and wave quantization, from the
//! device's units and its GEMM library's output tiles, as an occupancy the lowering gives each
//! matrix operator (`Op::occupancy`) and both evaluators divide its rate by.
//!
//! A GPU GEMM library splits the M × N output of a product into tiles, one thread block each,
//! and runs them on the device's streaming multiprocessors in waves (NVIDIA, "Matrix
//! Multiplication Background User's Guide", Deep Learning Performance documentation: §"Tile
//! quantization", §"Wave quantization"). A product whose sides are not multiples of the tile
//! computes the padded tile anyway; one whose tiles do not fill the last wave leaves units idle
//! for that wave. The time of a product is then its waves × a tile's time, against the ideal
//! of its useful work spread evenly over every unit:
//!
//! ```text
//! tiles(Tm, Tn) = groups × ⌈M / Tm⌉ × ⌈N / Tn⌉        waves(s) = ⌈tiles × s / units⌉
//! slice(s)       = ⌈K / (s × KSTEP)⌉ × KSTEP            (K split s ways, in whole k-steps;
//!                                                        s > 1 only where tiles < units)
//! occupancy      = max over the library's tiles and s of
//!                  groups × M × N × K / (waves(s) × units × Tm × Tn × slice(s))
//! ```
//!
//! The library is taken to pick the tile that finishes first, every tile at the same efficiency
//! per unit (the device's `matmul` efficiency, which is what a large product reaches): smaller
//! tiles, which the guide calls less efficient, are charged nothing extra, so the occupancy is
//! an upper bound on what quantization leaves. A block runs its K in whole steps of [`KSTEP`]
//! (the depth of one main-loop stage, an assumption), so a K that is not a multiple pays for
//! the rest of its last step. A product with too few tiles to fill one wave may also be split
//! along K (split-K: `s` slices each summing part of K, `tiles × s` blocks, the partial outputs
//! reduced after), into up to [`SPLITS`]' 16 slices, each padded to whole steps: the limits are
//! assumptions (cuBLAS's heuristics are unpublished), and the reduction's traffic is not charged.
//! So a decode step's thin products over a long K fill the device, as cuBLAS's split-K and
//! CUTLASS's stream-K kernels make them do, and what remains is the padding of a short M to a
//! tile's rows. Every option's time grows with M, N and K and shrinks with the units, and the
//! library takes the fastest, so a larger product is never faster and more units never slower.
//!
//! A product with no column tiling (`Gemm::rows`) is a fused kernel that blocks only its rows,
//! each block running over the whole of the other side (FlashAttention: one block per slice of
//! queries of one head and sequence).

pub use crate::model::workload::Gemm;

/// A device's units and the output tiles its GEMM library chooses among.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tiling<'a> {
    pub units: f64,
    /// (rows, columns) of each output tile.
    pub tiles: &'a [(u32, u32)],
}

impl<'a> Tiling<'a> {
    /// The device's tiling, `None` where its file gives none (every product at full occupancy).
    pub fn of(d: &'a crate::model::system::Device) -> Option<Tiling<'a>> {
        if d.efficiency.tiles.is_empty() || d.cores == 0 {
            return None;
        }
        Some(Tiling {
            units: d.cores as f64,
            tiles: &d.efficiency.tiles,
        })
    }

    /// The share of the units' time one product keeps busy with useful work, in (0, 1]; 1 for
    /// an empty product.
    pub fn occupancy(&self, g: Gemm) -> f64 {
        // an empty (or NaN) side: nothing to run
        let runs = |x: f64| x > 0.0;
        if !runs(g.m) || g.n.is_some_and(|n| !runs(n)) {
            return 1.0;
        }
        // Shapes are per device and may be fractional (an average over layers or ranks): a
        // side below one row still fills one.
        let m = g.m.max(1.0);
        let groups = g.groups.max(1.0);
        let mut best: f64 = 0.0;
        for &(tm, tn) in self.tiles {
            let (tm, tn) = (tm as f64, tn as f64);
            let (tiles, slot, useful) = match g.n {
                Some(n) => {
                    let n = n.max(1.0);
                    (
                        groups * (m / tm).ceil() * (n / tn).ceil(),
                        tm * tn,
                        groups * m * n,
                    )
                }
                None => (groups * (m / tm).ceil(), tm, groups * m),
            };
            // a row-blocked kernel (no K given) is neither split nor padded along K
            if !runs(g.k) {
                let waves = (tiles / self.units).ceil();
                best = best.max(useful / (waves * self.units * slot));
                continue;
            }
            for split in SPLITS {
                // split-K is for a grid that does not fill one wave (the s = 1 option is always
                // there, and a larger grid only loses options: time never falls as it grows)
                if split > 1.0 && tiles >= self.units {
                    break;
                }
                let slice = (g.k / (split * KSTEP)).ceil() * KSTEP;
                let waves = (tiles * split / self.units).ceil();
                best = best.max(useful * g.k / (waves * self.units * slot * slice));
            }
        }
        best.clamp(f64::MIN_POSITIVE, 1.0)
    }

    /// [`Tiling::occupancy`] of a product launched on all but `taken` of the units (a
    /// communication kernel beside it keeps them: Transformer Engine's `set_sm_margin`), as a
    /// share of all the units' time. Taking none is [`Tiling::occupancy`].
    pub fn occupancy_without(&self, g: Gemm, taken: f64) -> f64 {
        let left = (self.units - taken.max(0.0)).max(1.0);
        Tiling {
            units: left,
            ..*self
        }
        .occupancy(g)
            * left
            / self.units
    }

    /// The occupancy of several products run one after the other, `(flops, shape)` each: their
    /// FLOPs over the time they take at their own occupancies (a harmonic mean); 1 without FLOPs.
    pub fn mix(&self, parts: &[(f64, Gemm)]) -> f64 {
        harmonic(parts.iter().map(|&(f, g)| (f, self.occupancy(g))))
    }

    /// [`Tiling::mix`] of products each launched without some units, `(flops, shape, taken)`.
    pub fn mix_without(&self, parts: &[(f64, Gemm, f64)]) -> f64 {
        harmonic(
            parts
                .iter()
                .map(|&(f, g, taken)| (f, self.occupancy_without(g, taken))),
        )
    }
}

/// FLOPs over the time `(flops, occupancy)` parts take at their occupancies, at most 1; 1
/// without FLOPs.
fn harmonic(parts: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (flops, time) = parts.fold((0.0, 0.0), |(f, t), (pf, occ)| (f + pf, t + pf / occ));
    if flops > 0.0 && time > 0.0 {
        (flops / time).min(1.0)
    } else {
        1.0
    }
}

/// Split-K factors a library may use to fill a wave (each slice's partial outputs reduced
/// afterwards): an assumption, cuBLAS's heuristics being unpublished.
const SPLITS: [f64; 5] = [1.0, 2.0, 4.0, 8.0, 16.0];

/// The depth of K one main-loop step of a tile covers: a block's K (or its slice of K) runs in
/// whole steps (an assumption: 64, the K of cuBLAS's BF16 tile configurations).
pub const KSTEP: f64 = 64.0;

/// [`Tiling::mix`] where the device may have no tiling (then 1).
pub fn occupancy(t: Option<Tiling>, parts: &[(f64, Gemm)]) -> f64 {
    t.map_or(1.0, |t| t.mix(parts))
}

/// [`Tiling::mix_without`] where the device may have no tiling (then 1).
pub fn occupancy_without(t: Option<Tiling>, parts: &[(f64, Gemm, f64)]) -> f64 {
    t.map_or(1.0, |t| t.mix_without(parts))
}
