//! The clock and power of a step: the round of stage classes at a clock, the power each class
//! demands, the operating point a power limit sets (DVFS, the throttled fixed point), and the
//! power the boundary counts. Mirrors the kernel's clock section (`voltage` to `system_power`).

use super::roofline::RIDGE_BINS;
use crate::engine::program::*;
use crate::engine::table::{self as t, Machine};

/// One section of a stage class (its micro-batch or its step section) as it stretches with the
/// clock: its compute-bound operators' time (and what overlapped collectives take of it), which
/// stretches by 1 / clock; its memory-bound operators', per [`ridge_bin`](super::ridge_bin), their compute and
/// their memory time, each bin taking the longer of its compute at that clock and its memory
/// time (so an operator memory-bound at full clock turns compute-bound once the clock falls
/// below its compute / memory ratio; within a bin the sums cross together, a bound below the
/// per-operator sum by at most a quarter of the bin's memory time); and the rest (the
/// memory-bound operators' memory time, exposed collectives, launch overheads, off-device
/// work), which does not stretch. Overlapped collectives keep the exposure they had at full
/// clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SectionParts {
    pub clocked: f64,
    pub rest: f64,
    pub hidden: [f64; RIDGE_BINS],
    pub memory: [f64; RIDGE_BINS],
}

impl SectionParts {
    /// The section's time at relative clock `s`: at full clock exactly its time as evaluated
    /// (a bin's compute never exceeds its memory time there).
    pub fn at(&self, s: f64) -> f64 {
        self.clocked / s + self.rest + self.excess(s)
    }

    /// What the memory-bound operators' compute adds beyond their memory time at clock `s`.
    pub fn excess(&self, s: f64) -> f64 {
        if s >= 1.0 {
            // a bin's compute never exceeds its memory time at full clock
            return 0.0;
        }
        let mut t = 0.0;
        for (h, m) in self.hidden.iter().zip(&self.memory) {
            t += (h / s - m).max(0.0);
        }
        t
    }
}

/// A round's parts stage class by stage class, as they stretch with the clock: per class its
/// micro-batch's and its step section's [`SectionParts`], and its stages in a row.
#[derive(Clone, Copy, Debug, Default)]
pub struct Round {
    pub micro_batches: f64,
    /// The pipeline bubble, in stage times of the slowest stage.
    pub bubble: f64,
    pub n: usize,
    /// Per class: [micro-batch, step section].
    pub sections: [[SectionParts; 2]; MAX_STAGES],
    /// Per class: its stages in a row.
    pub repeat: [f64; MAX_STAGES],
    /// The class is a concurrent pool (outside the chain).
    pub pool: [bool; MAX_STAGES],
    /// Time per step outside the devices' work, at no clock (the software stack's).
    pub fixed: f64,
}

/// Which classes set a round at some clock, and its time.
#[derive(Clone, Copy, Debug, Default)]
pub struct Binds {
    pub time: f64,
    /// The slowest class's micro-batch, the slowest class's step section.
    pub micro_batch: usize,
    pub step: usize,
    /// The micro-batches stream through the pipeline (else the chain of all stages is longer).
    pub in_pipeline: bool,
    /// A concurrent pool whose round is longer: the round waits for it.
    pub pool: Option<usize>,
}

impl Round {
    /// The round with class k at relative clock `clocks[k]`: micro-batches × the slowest
    /// class's micro-batch plus the bubble, or the chain of all stages when it is longer; plus
    /// the slowest step section; or a pool's round where it is longer; plus the fixed time. Each
    /// part is a sum of c / s + r and max(h / s, m), so the round never shortens as a class's
    /// clock falls.
    pub fn at(&self, clocks: &[f64; MAX_STAGES]) -> Binds {
        let (mut k_mb, mut t_max, mut chain) = (0, f64::NEG_INFINITY, 0.0);
        let (mut k_st, mut t_st) = (0, f64::NEG_INFINITY);
        let (mut k_pool, mut t_pool) = (None, f64::NEG_INFINITY);
        for (k, ([mb, st], &s)) in self.sections.iter().zip(clocks).enumerate().take(self.n) {
            let (t_mb, ts, repeat) = (mb.at(s), st.at(s), self.repeat[k]);
            if self.pool[k] {
                let t = self.micro_batches * t_mb + ts;
                if t > t_pool {
                    (k_pool, t_pool) = (Some(k), t);
                }
                continue;
            }
            if t_mb > t_max {
                (k_mb, t_max) = (k, t_mb);
            }
            chain += repeat * t_mb;
            if ts > t_st {
                (k_st, t_st) = (k, ts);
            }
        }
        let pipelined = self.micro_batches * t_max + self.bubble * t_max;
        let in_pipeline = pipelined >= chain;
        let mut time = if in_pipeline { pipelined } else { chain } + t_st;
        let mut pool = None;
        if t_pool > time {
            (time, pool) = (t_pool, k_pool);
        }
        Binds {
            time: time + self.fixed,
            micro_batch: k_mb,
            step: k_st,
            in_pipeline,
            pool,
        }
    }
}

/// What a step asks of the devices of each stage class, split by what a lower clock changes:
/// the round's parts (`Round`: each class's clock-bound time and the rest) and, per device of
/// each class, the FLOPs' dynamic energy (× voltage² at a lower clock) and that of memory and
/// link traffic (unchanged).
#[derive(Clone, Copy, Debug)]
pub struct Demand<'a> {
    pub round: &'a Round,
    /// The round at full clock (`round.at(&FULL_CLOCK).time`), kept: most points run there.
    pub full: f64,
    /// Per class, per device and step at full clock (J).
    pub flop_energy: [f64; MAX_STAGES],
    pub other_energy: [f64; MAX_STAGES],
}

/// Power of one device at full clock (W): static power plus its dynamic energy per step
/// (`energy`, J) over the round at full clock (`full`, s).
pub(super) fn demand_at_full(m: &Machine, energy: f64, full: f64) -> f64 {
    m[t::IDLE_POWER] + energy / full
}

/// Every stage class at full clock.
pub const FULL_CLOCK: [f64; MAX_STAGES] = [1.0; MAX_STAGES];

impl Demand<'_> {
    /// Power of one device of class `k` at full clock (W): static power plus its dynamic energy
    /// over the round.
    pub fn demand(&self, m: &Machine, k: usize) -> f64 {
        demand_at_full(m, self.flop_energy[k] + self.other_energy[k], self.full)
    }

    /// The highest clock at which a device of class `k` stays within its power limit over a step
    /// of `time` s: full clock where its demand fits; else the clock whose voltage² leaves the
    /// FLOPs the energy the limit allows ((limit − static) × time − the traffic's energy), the
    /// voltage linear in the clock (`voltage`, inverted); not below the lowest clock (a step
    /// that short is too short for the class: `operate` never settles on one).
    pub fn clock_at(&self, m: &Machine, k: usize, time: f64) -> f64 {
        let f = self.flop_energy[k];
        let budget = (power_limit(m) - m[t::IDLE_POWER]) * time - self.other_energy[k];
        if f <= budget {
            return 1.0;
        }
        let lo = lowest_clock(m);
        if lo >= 1.0 || budget <= 0.0 {
            return lo;
        }
        let (c0, v0) = (m[t::DVFS_MIN_CLOCK], m[t::DVFS_MIN_VOLTAGE]);
        let v = (budget / f).sqrt();
        (c0 + (1.0 - c0) * (v - v0) / (1.0 - v0)).clamp(lo, 1.0)
    }

    /// Each class's clock for a step of `time` s ([`Demand::clock_at`]; classes past the
    /// round's at full clock).
    pub fn clocks_at(&self, m: &Machine, time: f64) -> [f64; MAX_STAGES] {
        let mut s = FULL_CLOCK;
        for (k, x) in s.iter_mut().enumerate().take(self.round.n) {
            *x = self.clock_at(m, k, time);
        }
        s
    }

    /// Energy per step of one device of class `k` at its lowest clock (J): the least it can
    /// spend on the step's work.
    fn least_energy(&self, m: &Machine, k: usize) -> f64 {
        let v = voltage(m, lowest_clock(m));
        self.flop_energy[k] * v * v + self.other_energy[k]
    }

    /// The devices' operating point under their power limit. Each device has its own limit and
    /// runs at the highest clock it allows (a governor that knows nothing of the pipeline), so
    /// each stage class has its clock: full where its demand fits, lower where it does not. A
    /// step of `T` s lets class k run at `clock_at(k, T)`, which rises with `T`; the round at
    /// those clocks, `g(T)`, falls with `T`; the step is the least `T` with `T ≥ g(T)` (unique:
    /// `T − g(T)` rises), found by regula falsi (`least_fixed_point`) from the round at full
    /// clock up (the WGSL kernel bisects up to the round at the lowest clock, in f32),
    /// and never shorter than what the class that needs the most energy at its lowest clock
    /// needs to spend it within its limit (there it duty-cycles: the round is shorter than the
    /// step and the devices idle the rest). `None` when the limit does not cover static power.
    pub fn operate(&self, m: &Machine) -> Option<Operating> {
        let n = self.round.n;
        let at_full = Operating {
            clocks: FULL_CLOCK,
            time: self.full,
            round: self.full,
            pinned: [false; MAX_STAGES],
        };
        let cap = power_limit(m);
        if (0..n).all(|k| self.demand(m, k) <= cap) {
            return Some(at_full);
        }
        let idle = m[t::IDLE_POWER];
        if cap <= idle {
            return None;
        }
        let least = (0..n).map(|k| self.least_energy(m, k)).fold(0.0, f64::max);
        let t_e = least / (cap - idle);
        let g = |time: f64| self.round.at(&self.clocks_at(m, time)).time;
        let time = if t_e >= g(t_e) {
            t_e
        } else {
            let lo = lowest_clock(m);
            let a = t_e.max(self.full);
            least_fixed_point(g, a, || self.round.at(&[lo; MAX_STAGES]).time)
        };
        let clocks = self.clocks_at(m, time);
        let mut pinned = [false; MAX_STAGES];
        for (k, p) in pinned.iter_mut().enumerate().take(n) {
            *p = clocks[k] < 1.0 || (time == t_e && self.least_energy(m, k) == least);
        }
        Some(Operating {
            clocks,
            time,
            round: self.round.at(&clocks).time,
            pinned,
        })
    }

    /// Power of one device of class `k` at an operating point (W): static power plus its
    /// dynamic energy at its clock's voltage over the step; the limit itself where the limit
    /// set its clock or the step (the solution of power = limit, stated exactly so that points
    /// a limit pins tie exactly).
    pub fn power(&self, m: &Machine, k: usize, o: &Operating) -> f64 {
        if o.pinned[k] {
            return power_limit(m);
        }
        let v = voltage(m, o.clocks[k]);
        m[t::IDLE_POWER] + (self.flop_energy[k] * v * v + self.other_energy[k]) / o.time
    }
}

/// Where the devices run a step under their power limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Operating {
    /// Each stage class's clock as a fraction of full clock (1 = not power-limited).
    pub clocks: [f64; MAX_STAGES],
    /// Step time (s).
    pub time: f64,
    /// The round at those clocks (s): the step, or less where a class at its lowest clock
    /// needs a longer step to spend its energy within its limit (it duty-cycles).
    pub round: f64,
    /// The class's devices draw their limit.
    pub pinned: [bool; MAX_STAGES],
}

impl Operating {
    /// The step over the round at the classes' clocks: above 1 where the devices duty-cycle.
    pub fn stretch(&self) -> f64 {
        self.time / self.round
    }

    /// The effective clock of the most throttled of the first `n` classes: its clock × the
    /// share of the step its round fills (1 = no class power-limited).
    pub fn throttle(&self, n: usize) -> f64 {
        let s = self.clocks[..n].iter().copied().fold(1.0, f64::min);
        if self.time > self.round {
            s * self.round / self.time
        } else {
            s
        }
    }
}

/// Most steps the throttled step time's root-finding takes in a float type with
/// `mantissa_bits` bits of precision: the bracket [round at full clock, round at the lowest
/// clock] is at most 1 / lowest clock wide in ratio, under 2^7 for a lowest clock down to 1 %,
/// so bisection alone closes it to within one unit in the last place of the step after the
/// mantissa's bits and 7 more. The CPU evaluator takes [`THROTTLE_STEPS`] (f64); the kernel's
/// bisection takes the f32 count, generated into it (`sweep::gpu::layout::wgsl`).
pub const fn throttle_steps(mantissa_bits: u32) -> usize {
    (mantissa_bits + 7) as usize
}

/// [`throttle_steps`] in f64, the CPU evaluator's.
pub const THROTTLE_STEPS: usize = throttle_steps(f64::MANTISSA_DIGITS);

/// The least `t` ≥ `a` with `t ≥ g(t)`, for `g` falling (the round at the clocks a step of `t`
/// allows), below `ceiling()` (the round at the lowest clock, where `t ≥ g(t)` holds). Every
/// value of `g` bounds the root `t*` from the other side: below it `g(t) > t*`, above it
/// `g(t) ≤ t*`; so `g(a)` is the first upper end, usually far tighter than the ceiling, which
/// is evaluated only where rounding leaves `h(g(a)) < 0`. Then regula falsi on `h(t) = t − g(t)`
/// with the Illinois rule (the end that stays has its value halved, so both ends close in),
/// superlinear where `h` is smooth; a step that would leave the bracket bisects it instead.
/// `h` rises at least as fast as `t` (`g` falls), so an upper end `b` lies within `h(b)` of the
/// root: it stops once `h(b)` or the bracket is within 4 ulps of `b`, or after
/// [`THROTTLE_STEPS`]; returns the upper end (where `h ≥ 0`).
fn least_fixed_point(g: impl Fn(f64) -> f64, mut a: f64, ceiling: impl FnOnce() -> f64) -> f64 {
    let ga = g(a);
    if a >= ga {
        return a;
    }
    let h = |t: f64| t - g(t);
    let mut ha = a - ga;
    let (mut b, mut hb) = (ga, h(ga));
    if hb < 0.0 {
        (a, ha) = (b, hb);
        b = ceiling();
        hb = h(b);
    }
    // h(b) itself: `hb` is halved by the Illinois rule
    let mut above = hb;
    let mut last = 0i8;
    for _ in 0..THROTTLE_STEPS {
        let tol = 4.0 * f64::EPSILON * b;
        if above <= tol || b - a <= tol {
            break;
        }
        let mut x = b - hb * (b - a) / (hb - ha);
        if !(x > a && x < b) {
            x = 0.5 * (a + b);
        }
        let hx = h(x);
        if hx >= 0.0 {
            (b, hb, above) = (x, hx, hx);
            if last == 1 {
                ha *= 0.5;
            }
            last = 1;
        } else {
            (a, ha) = (x, hx);
            if last == -1 {
                hb *= 0.5;
            }
            last = -1;
        }
    }
    b
}

/// The lowest clock a power cap can throttle the device to: its DVFS line's lowest clock, or
/// full clock where the line gives none (no range, or no voltage to save): such a device
/// duty-cycles at full clock.
pub fn lowest_clock(m: &Machine) -> f64 {
    let (c0, v0) = (m[t::DVFS_MIN_CLOCK], m[t::DVFS_MIN_VOLTAGE]);
    if c0 > 0.0 && c0 < 1.0 && v0 < 1.0 {
        c0
    } else {
        1.0
    }
}

/// Relative supply voltage at relative clock `s`: linear from the lowest clock's voltage at the
/// lowest clock to 1 at full clock.
pub fn voltage(m: &Machine, s: f64) -> f64 {
    let (c0, v0) = (m[t::DVFS_MIN_CLOCK], m[t::DVFS_MIN_VOLTAGE]);
    if c0 >= 1.0 || s >= 1.0 {
        return 1.0;
    }
    v0 + (1.0 - v0) * (s - c0).max(0.0) / (1.0 - c0)
}

/// The device's power limit (W): its TDP, or its share of a node or facility limit if lower.
pub fn power_limit(m: &Machine) -> f64 {
    let cap = m[t::POWER_CAP];
    if cap > 0.0 {
        m[t::TDP].min(cap)
    } else {
        m[t::TDP]
    }
}

/// Power per device within the machine's boundary (W): the device's own, then from `node` out
/// its share of the node's other parts, from `rack` out of the scale-up switches, from `it` out
/// of the scale-out network and (when the state lives there) the weight store, and at
/// `facility` × PUE.
pub fn system_power(m: &Machine, device: f64, weights: Tier) -> f64 {
    let b = m[t::BOUNDARY];
    let mut p = device;
    if b >= 1.0 {
        p += m[t::NODE_POWER];
    }
    if b >= 2.0 {
        p += m[t::SWITCH_POWER];
    }
    if b >= 3.0 {
        p += m[t::NETWORK_POWER];
        if weights == Tier::External {
            p += m[t::STORE_POWER];
        }
    }
    if b >= 4.0 {
        p *= m[t::PUE];
    }
    p
}

#[cfg(test)]
mod tests {
    use super::least_fixed_point;

    /// The least `t ≥ a` with `t ≥ g(t)` by plain bisection to the last bit: the reference.
    fn bisect(g: impl Fn(f64) -> f64, mut a: f64, mut b: f64) -> f64 {
        while b - a > 0.0 {
            let x = 0.5 * (a + b);
            if x <= a || x >= b {
                break;
            }
            if x >= g(x) {
                b = x;
            } else {
                a = x;
            }
        }
        b
    }

    /// Falling rounds of the shapes a throttled step takes (a clock that rises as √ of the
    /// step, a class whose clock saturates, a memory floor): the first upper end `g(a)` and
    /// the stop on `h(b)` land within 4 ulps of the root, on the side where `t ≥ g(t)`.
    #[test]
    fn the_throttled_step_is_the_least_fixed_point_to_four_ulps() {
        type Round = fn(f64) -> f64;
        let rounds: [(&str, Round); 3] = [
            ("clock as √ of the step", |t| {
                1.0 / (0.3 + 0.7 * (t / 4.0).sqrt().min(1.0)) + 0.2
            }),
            ("a saturating class", |t| {
                (2.0 / (t / 3.0).min(1.0)).max(1.5 + 0.1 / t)
            }),
            ("a memory floor", |t| (0.9 / (t * 0.5).sqrt()).max(1.3)),
        ];
        for (name, g) in rounds {
            let a = 1.0;
            let root = bisect(g, a, 100.0);
            let got = least_fixed_point(g, a, || 100.0);
            assert!(got >= g(got), "{name}: {got} is below its round {}", g(got));
            assert!(
                (got - root).abs() <= 4.0 * f64::EPSILON * root,
                "{name}: {got} against {root}"
            );
        }
        // at or past the fixed point already: the start itself
        assert_eq!(least_fixed_point(|_| 0.5, 1.0, || 2.0), 1.0);
    }
}
