//! The machine-vector part of a design space: axes, what each writes into the machine fields, and
//! how design point `i` is generated from its index alone (grid, random or Latin-hypercube
//! sampling with a seed), so a sweep of any size streams in bounded memory and any slice (a shard,
//! a GPU batch) can be generated independently.
//!
//! The sampler uses only 32-bit integer arithmetic (a bijective 32-bit mixer; for Latin
//! hypercubes a permutation built from invertible steps modulo a power of two, with cycle walking)
//! so the WGSL kernel generates exactly the same choices; only continuous values differ, by f32
//! rounding.

pub use crate::engine::paths::{Op, Target};
pub use crate::engine::table::Derive;
use crate::engine::table::Machine;
use crate::engine::table::{self as fields, Fields, NX};
use crate::units::Dimension;

/// The values one axis takes.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Discrete values (a list, or a range with a step or a point count), in order.
    List(Vec<f64>),
    /// Continuous between `lo` and `hi` (random and Latin-hypercube sampling only).
    Linear { lo: f64, hi: f64 },
    /// Continuous, uniform in the logarithm (`lo` > 0).
    Log { lo: f64, hi: f64 },
}

impl Values {
    pub fn len(&self) -> Option<usize> {
        match self {
            Values::List(v) => Some(v.len()),
            _ => None,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }
}

/// One machine-vector axis.
#[derive(Clone, Debug)]
pub struct Axis {
    /// The path as written (`device.memory.HBM3e.bandwidth`).
    pub path: String,
    pub dimension: Dimension,
    pub values: Values,
    pub targets: Vec<Target>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sampling {
    /// Every combination; the last axis varies fastest.
    Grid,
    Random {
        points: u64,
        seed: u64,
    },
    LatinHypercube {
        points: u64,
        seed: u64,
    },
}

/// Largest number of machine points per program (indices are 32-bit on the GPU).
pub const MAX_POINTS: u64 = 1 << 31;

/// The machine-vector axes of a sweep and how points are drawn from them.
#[derive(Clone, Debug)]
pub struct Space {
    pub axes: Vec<Axis>,
    pub sampling: Sampling,
    /// Machine points per program.
    pub points: u64,
    /// How energy per FLOP follows the axes (none when no axis moves what it derives from).
    pub derive: Derive,
    /// All targets of all axes, sets first: (axis, target).
    pub flat: Vec<(usize, Target)>,
}

/// A bijective 32-bit mixer (Chris Wellons' "lowbias32").
#[inline]
pub fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// The key of axis `axis` under `seed`, for its random draws (`salt` 0) or its permutation (1).
#[inline]
pub fn axis_key(seed: u32, axis: u32, salt: u32) -> u32 {
    mix(mix(seed ^ 0x9e37_79b9) ^ axis.wrapping_mul(0x85eb_ca6b) ^ salt.wrapping_mul(0xc2b2_ae35))
}

/// Multipliers of the permutation's rounds (odd, so invertible modulo any power of two).
pub const PERMUTE_MUL: [u32; 3] = [0x2c1b_3c6d, 0x297a_2d39, 0x7feb_352d];

/// A pseudo-random permutation of `0..n` evaluated at `i` (`i < n ≤ 2^31`): three rounds of
/// invertible steps on the smallest power of two `2^b ≥ n` (xor a key, multiply by an odd
/// constant, xor-shift right by half the bits, all modulo `2^b`), cycle-walking past `n` (fewer
/// than two steps on average, as `2^b < 2n`).
#[inline]
pub fn permute(i: u32, n: u32, key: u32) -> u32 {
    if n <= 1 {
        return 0;
    }
    let bits = 32 - (n - 1).leading_zeros();
    let mask = if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    };
    let half = bits.div_ceil(2);
    let mut x = i;
    loop {
        for (r, m) in PERMUTE_MUL.iter().enumerate() {
            x ^= (key ^ (r as u32).wrapping_mul(0x9e37_79b9)) & mask;
            x = x.wrapping_mul(*m) & mask;
            x ^= x >> half;
        }
        if x < n {
            return x;
        }
    }
}

/// The seed as the 32-bit sampler uses it.
pub fn seed32(seed: u64) -> u32 {
    (seed ^ (seed >> 32)) as u32
}

/// 24 random bits as a fraction in [0, 1), exact in f32.
#[inline]
pub fn unit(h: u32) -> f64 {
    (h >> 8) as f64 * (1.0 / 16_777_216.0)
}

impl Space {
    /// Build a space; `Err` says why the axes cannot be sampled that way.
    pub fn new(axes: Vec<Axis>, sampling: Sampling, derive: Derive) -> Result<Space, String> {
        let points = match sampling {
            Sampling::Grid => {
                let mut n: u64 = 1;
                for a in &axes {
                    match a.values.len() {
                        Some(l) => {
                            n = n.saturating_mul(l as u64);
                        }
                        None => {
                            return Err(format!(
                                "`{}` is a continuous range, which a grid cannot enumerate",
                                a.path
                            ))
                        }
                    }
                }
                n
            }
            Sampling::Random { points, .. } | Sampling::LatinHypercube { points, .. } => points,
        };
        if points == 0 {
            return Err("the sweep has no points".into());
        }
        if points > MAX_POINTS {
            return Err(format!(
                "{points} machine points per program; at most {MAX_POINTS} (2^31) are supported"
            ));
        }
        let mut flat: Vec<(usize, Target)> = Vec::new();
        for pass in 0..2 {
            for (i, a) in axes.iter().enumerate() {
                for t in &a.targets {
                    let is_set = matches!(t.op, Op::Set { .. });
                    if is_set == (pass == 0) {
                        flat.push((i, *t));
                    }
                }
            }
        }
        Ok(Space {
            axes,
            sampling,
            points,
            derive,
            flat,
        })
    }

    /// The axis values of machine point `mi` (`mi < points`), in axis order.
    pub fn sample(&self, mi: u64, out: &mut [f64]) {
        let mi32 = mi as u32;
        match self.sampling {
            Sampling::Grid => {
                let mut rest = mi;
                for (a, o) in self.axes.iter().zip(out.iter_mut()).rev() {
                    if let Values::List(v) = &a.values {
                        let n = v.len() as u64;
                        *o = v[(rest % n) as usize];
                        rest /= n;
                    }
                }
            }
            Sampling::Random { seed, .. } => {
                let s = seed32(seed);
                for (k, (a, o)) in self.axes.iter().zip(out.iter_mut()).enumerate() {
                    let h = mix(axis_key(s, k as u32, 0) ^ mi32);
                    *o = match &a.values {
                        Values::List(v) => v[(h % v.len() as u32) as usize],
                        Values::Linear { lo, hi } => lo + unit(h) * (hi - lo),
                        Values::Log { lo, hi } => lo * (unit(h) * (hi / lo).ln()).exp(),
                    };
                }
            }
            Sampling::LatinHypercube { seed, .. } => {
                let s = seed32(seed);
                let n = self.points as u32;
                for (k, (a, o)) in self.axes.iter().zip(out.iter_mut()).enumerate() {
                    let stratum = permute(mi32, n, axis_key(s, k as u32, 1));
                    let h = mix(axis_key(s, k as u32, 0) ^ mi32);
                    let u = (stratum as f64 + unit(h)) / n as f64;
                    *o = match &a.values {
                        Values::List(v) => v[(stratum % v.len() as u32) as usize],
                        Values::Linear { lo, hi } => lo + u * (hi - lo),
                        Values::Log { lo, hi } => lo * (u * (hi / lo).ln()).exp(),
                    };
                }
            }
        }
    }

    /// Write the axis values into a copy of the program's base fields.
    pub fn apply(&self, vals: &[f64], x: &mut Fields) {
        for (a, t) in &self.flat {
            let v = vals[*a];
            let f = &mut x[t.field];
            match t.op {
                Op::Set {
                    scale,
                    offset,
                    floor,
                } => *f = (v * scale + offset).max(floor),
                Op::DivBy { scale } => *f = *f * scale / v,
            }
        }
        if self.derive.active() {
            fields::derive(self.derive, x);
        }
    }

    /// The machine of point `vals` on `base`.
    pub fn machine(&self, base: &Fields, vals: &[f64]) -> Machine {
        let mut x = *base;
        self.apply(vals, &mut x);
        Machine(x)
    }
}

/// Fields of `base` as the sweep starts from them (for tests and diagnostics).
pub fn describe(x: &Fields) -> Vec<(String, f64)> {
    (0..NX).map(|i| (fields::name(i), x[i])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u32, 2, 3, 7, 64, 100, 1000, 4097] {
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let p = permute(i, n, 12345);
                assert!(p < n);
                assert!(!seen[p as usize], "n={n} i={i}");
                seen[p as usize] = true;
            }
        }
    }

    #[test]
    fn latin_hypercube_fills_every_stratum_once() {
        let axes = vec![Axis {
            path: "x".into(),
            dimension: Dimension::Ratio,
            values: Values::Linear { lo: 0.0, hi: 1.0 },
            targets: vec![],
        }];
        let n = 500;
        let s = Space::new(
            axes,
            Sampling::LatinHypercube { points: n, seed: 9 },
            Derive::default(),
        )
        .unwrap();
        let mut hit = vec![0; n as usize];
        let mut v = [0.0];
        for i in 0..n {
            s.sample(i, &mut v);
            hit[(v[0] * n as f64) as usize] += 1;
        }
        assert!(hit.iter().all(|&h| h == 1));
    }
}
