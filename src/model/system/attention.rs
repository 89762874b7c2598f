//! Attention kernels as they run: a device's published rates for a fused attention kernel
//! (FlashAttention and its kin) by sequence length, head dimension, causality and pass, checked
//! once here and read by the training lowering, which runs the attention core at the kernel's
//! rate rather than at the dense-GEMM efficiency (`engine::lower::training::layer`).
//!
//! The rates are what the benchmarks print: FLOPs as they count them (the forward
//! 4·seq²·head_dim per head and sequence, half that when causal; the backward 2.5 × the
//! forward's, for the score products it recomputes) over the measured time. Between measured
//! sequence lengths a rate is interpolated linearly in log₂(seq), between head dimensions
//! linearly in the head dimension; beyond the measured range it is held at the nearest end
//! (the published series flatten at their long end).

use crate::model::precision::Precision;
use crate::model::Ctx;
use crate::spec::arch::AttentionKernelSpec;
use crate::units::Dimension;
use crate::vocab::AttentionPass;
use serde::Serialize;

/// One kernel's rates on one device (SI).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AttentionKernel {
    pub name: String,
    /// The device's matrix peak at the precision the rates were measured at (FLOP/s).
    pub peak: f64,
    pub curves: Vec<Curve>,
}

/// One measured series: (sequence length, FLOP/s) points, sequence lengths increasing.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Curve {
    pub head_dim: f64,
    pub causal: bool,
    pub pass: AttentionPass,
    pub points: Vec<(f64, f64)>,
}

impl Curve {
    /// The rate at sequence length `seq`: linear in log₂(seq) between points, held beyond them.
    pub fn at(&self, seq: f64) -> f64 {
        let p = &self.points;
        let (first, last) = (p[0], p[p.len() - 1]);
        if seq <= first.0 {
            return first.1;
        }
        if seq >= last.0 {
            return last.1;
        }
        let k = p.partition_point(|&(s, _)| s <= seq);
        let ((s0, r0), (s1, r1)) = (p[k - 1], p[k]);
        let w = (seq.log2() - s0.log2()) / (s1.log2() - s0.log2());
        r0 + w * (r1 - r0)
    }
}

impl AttentionKernel {
    /// The kernel's rate (FLOP/s, as its benchmark counts them) for `pass` at `seq`,
    /// `head_dim` and causality: the series of that causality and pass, else of `Both` passes
    /// together; between head dimensions linear, beyond them the nearest. `None` where the
    /// kernel has no series of that causality.
    pub fn rate(&self, seq: f64, head_dim: f64, causal: bool, pass: AttentionPass) -> Option<f64> {
        let of = |p: AttentionPass| -> Vec<&Curve> {
            let mut v: Vec<&Curve> = self
                .curves
                .iter()
                .filter(|c| c.causal == causal && c.pass == p)
                .collect();
            v.sort_by(|a, b| a.head_dim.total_cmp(&b.head_dim));
            v
        };
        let mut cs = of(pass);
        if cs.is_empty() {
            cs = of(AttentionPass::Both);
        }
        let (first, last) = (cs.first()?, cs.last()?);
        if head_dim <= first.head_dim {
            return Some(first.at(seq));
        }
        if head_dim >= last.head_dim {
            return Some(last.at(seq));
        }
        let k = cs.partition_point(|c| c.head_dim <= head_dim);
        let (a, b) = (cs[k - 1], cs[k]);
        let w = (head_dim - a.head_dim) / (b.head_dim - a.head_dim);
        Some(a.at(seq) + w * (b.at(seq) - a.at(seq)))
    }

    /// That rate as a fraction of the device's matrix peak at the measured precision.
    pub fn fraction(
        &self,
        seq: f64,
        head_dim: f64,
        causal: bool,
        pass: AttentionPass,
    ) -> Option<f64> {
        self.rate(seq, head_dim, causal, pass)
            .map(|r| r / self.peak)
    }

    /// The rate (as a fraction of the kernel's peak) at which a context-parallel rank runs its
    /// share of the attention core over a sequence of `seq` split over `cp` ranks: the
    /// time-weighted (harmonic) mean of the kernel calls ring attention makes.
    ///
    /// Without the causal mask, or with one rank, every call is the same: s/cp queries against
    /// s/cp keys at the run's causality. With it, the load-balanced ring (Transformer Engine's
    /// `AttnFuncWithCPAndKVP2P`: the sequence cut into 2·cp chunks, rank r holding chunks r and
    /// 2·cp−1−r) makes cp calls per pass. The first is the rank's own block under the causal
    /// mask, a causal square of s/cp: 1/cp of the rank's work. Each of the other cp−1 is one
    /// unmasked half-block, as much work as the first: all s/cp queries against the first half
    /// of the arriving keys (s/2cp) on the ranks the keys come from below, the second half of
    /// the queries (s/2cp) against all s/cp keys on the others, each priced at the non-causal
    /// series at the length of the keys it loops over (s/2cp, s/cp). Every one of those steps
    /// has ranks of both kinds (at step i, ranks below i run the second, the others the first)
    /// and the last rank runs only the first kind, the first only the second: the ring, which
    /// waits on its slowest rank, runs them all at the slower of the two. `None` where a series
    /// it needs is missing (with the mask and cp > 1, the non-causal one too).
    pub fn ring_fraction(
        &self,
        seq: f64,
        cp: u64,
        head_dim: f64,
        causal: bool,
        pass: AttentionPass,
    ) -> Option<f64> {
        let local = seq / cp as f64;
        let own = self.fraction(local, head_dim, causal, pass)?;
        if !causal || cp <= 1 {
            return Some(own);
        }
        let full = self.fraction(local, head_dim, false, pass)?;
        let half = self.fraction(local / 2.0, head_dim, false, pass)?;
        let n = cp as f64;
        let others = (n - 1.0) / n;
        Some(1.0 / (1.0 / (n * own) + others / full.min(half)))
    }
}

/// Check a device's `efficiency.attention` tables against its matrix peaks: every error of the
/// list, each at its field. `matrix_peak` is the device's, per precision index.
pub(super) fn lower_attention(
    cx: &mut Ctx,
    specs: &[AttentionKernelSpec],
    matrix_peak: &[f64],
) -> Vec<AttentionKernel> {
    let mut out = Vec::new();
    if specs.is_empty() {
        return out;
    }
    cx.enter_field("attention", None);
    for (i, k) in specs.iter().enumerate() {
        cx.enter(crate::diag::Seg::Index(i), k.source.as_ref());
        if let Some(kernel) = lower_kernel(cx, k, matrix_peak) {
            if out.iter().any(|o: &AttentionKernel| o.name == kernel.name) {
                cx.error(
                    "kernel",
                    format!("attention kernel `{}` is listed twice", kernel.name),
                    Some("give each kernel one entry, with all its series under `curves`".into()),
                );
            } else {
                out.push(kernel);
            }
        }
        cx.leave();
    }
    cx.leave();
    out
}

fn lower_kernel(
    cx: &mut Ctx,
    k: &AttentionKernelSpec,
    matrix_peak: &[f64],
) -> Option<AttentionKernel> {
    let mut ok = true;
    if k.kernel.trim().is_empty() {
        cx.error(
            "kernel",
            "the attention kernel has no name",
            Some(
                "name it as a software stack's `attention_kernel` will, e.g. \"flash-attention-2\""
                    .into(),
            ),
        );
        ok = false;
    }
    let peak = match Precision::parse(&k.precision) {
        Some(p) if matrix_peak[p.index()] > 0.0 => matrix_peak[p.index()],
        Some(p) => {
            cx.error(
                "precision",
                format!("the device has no matrix peak at {}", p.name()),
                Some(
                    "give the precision the benchmark ran at, one the die's matrix engines list"
                        .into(),
                ),
            );
            ok = false;
            0.0
        }
        None => {
            cx.error(
                "precision",
                format!("unknown precision `{}`", k.precision),
                Some(format!(
                    "one of: {}",
                    Precision::names().collect::<Vec<_>>().join(", ")
                )),
            );
            ok = false;
            0.0
        }
    };
    if k.curves.is_empty() {
        cx.error(
            "curves",
            "the attention kernel lists no measured series",
            Some("add `curves: [(head_dim: 128, causal: true, pass: Both, rates: [(2048, \"265 TFLOP/s\")])]`".into()),
        );
        ok = false;
    }
    let mut curves = Vec::new();
    cx.enter_field("curves", None);
    for (i, c) in k.curves.iter().enumerate() {
        cx.enter(crate::diag::Seg::Index(i), c.source.as_ref());
        if c.head_dim == 0 {
            cx.error(
                "head_dim",
                "a head dimension of 0",
                Some("the width of one head's queries and keys, e.g. 128".into()),
            );
            ok = false;
        }
        if c.rates.is_empty() {
            cx.error(
                "rates",
                "the series lists no rate",
                Some("add (sequence length, rate) pairs, e.g. `[(2048, \"265 TFLOP/s\")]`".into()),
            );
            ok = false;
        }
        if curves.iter().any(|o: &Curve| {
            o.head_dim == c.head_dim as f64 && o.causal == c.causal && o.pass == c.pass
        }) {
            cx.error(
                "",
                "a second series of the same head dimension, causality and pass",
                Some("merge their points into one `rates` list".into()),
            );
            ok = false;
        }
        let mut points = Vec::new();
        cx.enter_field("rates", None);
        for (j, (seq, q)) in c.rates.iter().enumerate() {
            cx.enter(crate::diag::Seg::Index(j), None);
            if *seq == 0 || points.last().is_some_and(|&(s, _)| *seq as f64 <= s) {
                let at = cx.path().index(0);
                cx.error_at(
                    &at,
                    format!("sequence length {seq} does not follow the one before it"),
                    Some("list the points by increasing sequence length, each above 0".into()),
                );
                ok = false;
            }
            match cx.positive_index("rate", 1, q, Dimension::FlopRate) {
                Some(r) if peak > 0.0 && r > peak => {
                    let at = cx.path().index(1);
                    cx.error_at(
                        &at,
                        format!(
                            "{} is above the device's matrix peak at {} ({})",
                            q.0.trim(),
                            k.precision,
                            crate::units::fmt_si(peak, "FLOP/s")
                        ),
                        Some("a measured rate cannot exceed the peak: check the figure and the precision".into()),
                    );
                    ok = false;
                }
                Some(r) => points.push((*seq as f64, r)),
                None => ok = false,
            }
            cx.leave();
        }
        cx.leave();
        cx.leave();
        curves.push(Curve {
            head_dim: c.head_dim as f64,
            causal: c.causal,
            pass: c.pass,
            points,
        });
    }
    cx.leave();
    ok.then(|| AttentionKernel {
        name: k.kernel.trim().to_string(),
        peak,
        curves,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel() -> AttentionKernel {
        let curve = |head_dim: f64, pass, points: &[(f64, f64)]| Curve {
            head_dim,
            causal: true,
            pass,
            points: points.to_vec(),
        };
        AttentionKernel {
            name: "k".into(),
            peak: 1000e12,
            curves: vec![
                curve(
                    64.0,
                    AttentionPass::Both,
                    &[(512.0, 100e12), (2048.0, 200e12)],
                ),
                curve(
                    128.0,
                    AttentionPass::Both,
                    &[(512.0, 200e12), (2048.0, 400e12)],
                ),
                curve(128.0, AttentionPass::Forward, &[(1024.0, 500e12)]),
            ],
        }
    }

    #[test]
    fn rates_interpolate_in_log_sequence_and_head_dimension_and_hold_beyond() {
        let k = kernel();
        let both = AttentionPass::Both;
        // 1024 is halfway between 512 and 2048 in log2: 150 and 300 TFLOP/s
        assert_eq!(k.rate(1024.0, 64.0, true, both), Some(150e12));
        assert_eq!(k.rate(1024.0, 128.0, true, both), Some(300e12));
        // head dimension 96, halfway: 225
        assert_eq!(k.rate(1024.0, 96.0, true, both), Some(225e12));
        // held beyond both ends, in sequence and in head dimension
        assert_eq!(k.rate(65536.0, 128.0, true, both), Some(400e12));
        assert_eq!(k.rate(128.0, 32.0, true, both), Some(100e12));
        assert_eq!(k.rate(4096.0, 256.0, true, both), Some(400e12));
        // a pass with a series of its own reads it; one without reads `Both`
        assert_eq!(
            k.rate(8192.0, 128.0, true, AttentionPass::Forward),
            Some(500e12)
        );
        assert_eq!(
            k.rate(2048.0, 128.0, true, AttentionPass::Backward),
            Some(400e12)
        );
        // no series of that causality
        assert_eq!(k.rate(2048.0, 128.0, false, both), None);
        assert_eq!(k.fraction(2048.0, 128.0, true, both), Some(0.4));
    }

    #[test]
    fn ring_attention_runs_its_own_block_causal_and_the_others_unmasked() {
        let series = |causal, points: &[(f64, f64)]| Curve {
            head_dim: 128.0,
            causal,
            pass: AttentionPass::Both,
            points: points.to_vec(),
        };
        let k = AttentionKernel {
            name: "k".into(),
            peak: 1000e12,
            curves: vec![
                series(true, &[(1024.0, 300e12), (4096.0, 500e12)]),
                series(false, &[(1024.0, 400e12), (4096.0, 600e12)]),
            ],
        };
        let both = AttentionPass::Both;
        // one rank: the causal series at the whole sequence
        assert_eq!(k.ring_fraction(4096.0, 1, 128.0, true, both), Some(0.5));
        // unmasked: every call s/cp against s/cp, at the non-causal series (2048: 500)
        assert_eq!(k.ring_fraction(4096.0, 2, 128.0, false, both), Some(0.5));
        // causal over 2 ranks of 4096 each (s = 8192): half the work is the own block, causal
        // at 4096 (500); the other half one unmasked call, looping over 2048 keys on one rank
        // (500) and 4096 on the other (600): the ring waits on the slower, 500:
        // 1 / (0.5/0.5 + 0.5/0.5) = 0.5
        let r = k.ring_fraction(8192.0, 2, 128.0, true, both).unwrap();
        approx::assert_relative_eq!(r, 0.5, max_relative = 1e-12);
        // a kernel whose unmasked series runs faster at 2048 (650, halfway in log between 700 and
        // 600) than at 4096 (600) runs the unmasked steps at its 4096 figure: over 4 ranks of
        // 4096 (s = 16384), a quarter causal at 4096 (500), three quarters at 600
        let flipped = AttentionKernel {
            curves: vec![
                k.curves[0].clone(),
                series(false, &[(1024.0, 700e12), (4096.0, 600e12)]),
            ],
            ..k.clone()
        };
        let r = flipped
            .ring_fraction(16384.0, 4, 128.0, true, both)
            .unwrap();
        approx::assert_relative_eq!(r, 1.0 / (0.25 / 0.5 + 0.75 / 0.6), max_relative = 1e-12);
        // no non-causal series: context parallelism under the mask cannot be priced
        let causal_only = AttentionKernel {
            curves: vec![k.curves[0].clone()],
            ..k.clone()
        };
        assert_eq!(
            causal_only.ring_fraction(8192.0, 1, 128.0, true, both),
            Some(0.5)
        );
        assert_eq!(
            causal_only.ring_fraction(8192.0, 2, 128.0, true, both),
            None
        );
    }
}
