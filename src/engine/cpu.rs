//! The reference evaluator: a program on a machine → step time, breakdown, power, energy.
//! f64, single design point; `sweep` runs it over many machines with rayon. It interprets the
//! cost program: each operator's rate is the machine slots its efficiency class names, each
//! collective its alpha-beta coefficients. The WGSL kernel (`sweep/gpu/eval.wgsl`) interprets the
//! same records the same way (the parity test checks).

use super::program::Link;
use super::program::*;
use super::reason::point::{
    MEMORY as REASON_MEMORY, NON_FINITE as REASON_NON_FINITE, NO_COMPUTE as REASON_NO_COMPUTE,
    POWER_CAP as REASON_POWER_CAP,
};
use super::table::{self as t, Machine};

/// The link classes a collective's time is spent on, in [`collective_links`] order: scale-up,
/// scale-out, the weight store's link, the on-chip mesh, the host link.
pub const LINKS: usize = 5;

/// Alpha-beta time of one call of a collective on each link class (`coeffs.rs`): latencies ×
/// latency + bytes / bandwidth, in [`LINKS`] order.
pub fn collective_links(c: &Comm, m: &Machine) -> [f64; LINKS] {
    let k = &c.coeffs;
    let net = m[t::EFF_NETWORK];
    let up = &k.up[usize::from(m.flag(t::UP_INR))];
    let out = &k.out[usize::from(m.flag(t::OUT_INR))];
    [
        link(
            up,
            m[t::UP_BANDWIDTH] * net * c.inner_share,
            m[t::UP_LATENCY],
        ),
        link(out, m[t::OUT_BANDWIDTH] * net, m[t::OUT_LATENCY]),
        link(&k.ext, m[t::EXT_BANDWIDTH] * net, m[t::EXT_LATENCY]),
        mesh_link(&k.mesh, m),
        link(&k.host, m[t::HOST_BANDWIDTH] * net, m[t::HOST_LATENCY]),
    ]
}

/// A collective's time from its time per link class: the classes add (hierarchical phases one
/// after the other), or the slower of scale-up and scale-out bounds an all-to-all that drives
/// both at once (`overlapped`, which leaves the weight store's link out).
pub fn combine(l: &[f64; LINKS], overlapped: bool) -> f64 {
    if overlapped {
        l[0].max(l[1]) + l[3] + l[4]
    } else {
        l[0] + l[1] + l[2] + l[3] + l[4]
    }
}

/// Alpha-beta time of one collective and the bytes each device sends over the scale-up and
/// scale-out links, from its coefficients (`coeffs.rs`): per link class, latencies × latency +
/// bytes / bandwidth; the classes add, or the slowest bounds an all-to-all.
pub fn collective(c: &Comm, m: &Machine) -> (f64, f64, f64) {
    let k = &c.coeffs;
    let up = &k.up[usize::from(m.flag(t::UP_INR))];
    let out = &k.out[usize::from(m.flag(t::OUT_INR))];
    let t = combine(&collective_links(c, m), k.overlapped);
    (t, up.bytes, out.bytes)
}

/// Run one collective's phases (`time` per link class, all its calls) on the link timelines
/// `free` (when each link class is next free), starting no earlier than `release`; returns when
/// it finishes. Its phases run one after the other in link-class order, each once its link is
/// free (hierarchical phases, as [`combine`] adds them); an all-to-all that drives scale-up and
/// scale-out at once holds both for the slower of the two (and leaves the weight store's link
/// out, as `combine` does). A link it sends nothing over does not hold it back. Finish times are
/// maxima of sums of durations, so a faster link or an earlier release never finishes it later.
pub fn schedule(
    time: &[f64; LINKS],
    overlapped: bool,
    release: f64,
    free: &mut [f64; LINKS],
) -> f64 {
    let mut at = release;
    let mut phase = |links: &[usize], d: f64, at: &mut f64| {
        if d > 0.0 {
            let start = links
                .iter()
                .filter(|&&k| time[k] > 0.0)
                .fold(*at, |a, &k| a.max(free[k]));
            *at = start + d;
            for &k in links.iter().filter(|&&k| time[k] > 0.0) {
                free[k] = *at;
            }
        }
    };
    if overlapped {
        phase(&[0, 1], time[0].max(time[1]), &mut at);
        phase(&[3], time[3], &mut at);
        phase(&[4], time[4], &mut at);
    } else {
        for (k, &d) in time.iter().enumerate() {
            phase(&[k], d, &mut at);
        }
    }
    at
}

/// Move a section's end to `at` if that is later; returns by how much (the time a collective
/// exposes: what its finish adds to the section's critical path).
#[inline]
fn extend(end: &mut f64, at: f64) -> f64 {
    if at > *end {
        let d = at - *end;
        *end = at;
        d
    } else {
        0.0
    }
}

/// Which pass of [`eval_traced`]'s link timelines an overlapped collective runs in (`None` for
/// one that hides behind nothing): 0, released at its section's start (forward-overlapped and
/// compute-overlapped); 1, a micro-batch's collectives released when its backward begins; then
/// the step's collectives that ride a micro-batch: 2, those behind the next step's first
/// forward, booked on the first micro-batch's own timeline after its forward's collectives and
/// before its backward's (which [`PASSES`] books there again, after them: issued in that order,
/// they queue on the links in that order); 3, those behind the last backward (after 2: with one
/// micro-batch per step the first is the last, and what the first forward waited for delays its
/// backward too).
fn comm_pass(c: &Comm) -> Option<usize> {
    match (c.overlap, c.section) {
        (Overlap::None, _) => None,
        (Overlap::Compute, _) | (Overlap::Forward, Section::MicroBatch) => Some(0),
        (Overlap::Backward, Section::MicroBatch) => Some(1),
        (Overlap::Forward, Section::Step) => Some(2),
        (Overlap::Backward, Section::Step) => Some(3),
    }
}

/// The passes [`eval_traced`] makes over a stage's collectives, each naming the [`comm_pass`]
/// it books: the micro-batch's own (0, 1), the step's behind the first forward (2), then the
/// first micro-batch's backward collectives again (1) on that micro-batch's timeline, after the
/// step's (so a link is never booked twice at once), then the step's behind the last backward
/// (3).
pub const PASSES: [usize; 5] = [0, 1, 2, 1, 3];

/// The compute time overlapped collectives take from the operators they run beside, per stage
/// and step (s): [`collective_tax`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tax {
    /// Per micro-batch: in all, and the parts of it that lengthen its forward and its backward.
    pub micro_batch: f64,
    pub forward: f64,
    pub backward: f64,
    /// Once per step, in the step section.
    pub step: f64,
}

/// What overlapped collectives take from the compute they hide behind. NCCL runs its channels as
/// thread blocks on the device's cores, so while a collective whose record says it takes cores
/// (`Coeffs::cores`, settled from its role and group at lowering) runs on the scale-up or
/// scale-out links, the operators beside it have `collective_compute_share` (s) × that part
/// fewer of them. Each group of collectives costs s × the smaller of its core-weighted time on
/// those links (an all-to-all that drives both at once: the slower) and
/// the compute it hides behind: a micro-batch's forward-overlapped its forward, its
/// backward-overlapped its backward, its compute-overlapped the whole micro-batch (a third of
/// that cost lengthens the forward, two thirds the backward); the step's compute-overlapped the
/// step section; and the step's collectives that ride a micro-batch that micro-batch's forward
/// or backward, once per step, so they lengthen the step section. Groups that run at once each
/// take their own cores (a pipeline exchange beside a data-parallel reduction: two
/// communicators' kernels), so a pass can lose up to twice the share. The weight store's, the
/// mesh's and the host link's transfers are DMA and router traffic and take no cores.
/// `windows`: the micro-batch's forward, its backward, the whole micro-batch, the step section
/// (s, at full clock). A faster link or faster compute never raises it.
pub fn collective_tax(p: &Program, st: &Stage, m: &Machine, windows: [f64; 4]) -> Tax {
    let [fwd, bwd, mb, step] = windows;
    let share = m[t::COMM_SHARE];
    let mut tax = Tax::default();
    if share <= 0.0 {
        return tax;
    }
    // core-driven link time per group: micro-batch forward, backward, compute; step compute,
    // forward-riding, backward-riding
    let mut d = [0.0f64; 6];
    for c in &p.comms[st.comms.clone()] {
        if c.coeffs.cores <= 0.0 {
            continue;
        }
        let g = match (c.overlap, c.section) {
            (Overlap::None, _) => continue,
            (Overlap::Forward, Section::MicroBatch) => 0,
            (Overlap::Backward, Section::MicroBatch) => 1,
            (Overlap::Compute, Section::MicroBatch) => 2,
            (Overlap::Compute, Section::Step) => 3,
            (Overlap::Forward, Section::Step) => 4,
            (Overlap::Backward, Section::Step) => 5,
        };
        let l = collective_links(c, m);
        let t = if c.coeffs.overlapped {
            l[0].max(l[1])
        } else {
            l[0] + l[1]
        };
        d[g] += t * c.count * c.coeffs.cores;
    }
    let cap = |d: f64, w: f64| share * d.min(w);
    let (f, b) = (cap(d[0], fwd), cap(d[1], bwd));
    let c = cap(d[2], mb);
    // the compute-overlapped ones (tensor-parallel) run in both passes: a third of their cost in
    // the forward, two in the backward, which has twice its matrix work (a fixed split, so a
    // shorter pass never moves cost into the other)
    tax.micro_batch = f + b + c;
    tax.forward = f + c / 3.0;
    tax.backward = b + 2.0 * c / 3.0;
    tax.step = cap(d[3], step) + cap(d[4], fwd) + cap(d[5], bwd);
    tax
}

/// Time on one link class: latencies × latency + bytes / bandwidth (infinite without bandwidth).
#[inline]
/// A collective on the mesh: its hops, and its bytes through the busiest port streamed at the
/// slower of the link and the software's relay of each element (`Link::relayed`).
fn mesh_link(l: &Link, m: &Machine) -> f64 {
    let streamed = Link {
        latencies: 0.0,
        ..*l
    };
    let relay = l.relayed * m[t::MESH_RELAY_TIME];
    link(&streamed, m[t::MESH_LINK_BANDWIDTH], 0.0).max(relay)
        + l.latencies * m[t::MESH_HOP_LATENCY]
}

fn link(l: &Link, bw: f64, lat: f64) -> f64 {
    let b = if l.bytes > 0.0 {
        if bw > 0.0 {
            l.bytes / bw
        } else {
            f64::INFINITY
        }
    } else {
        0.0
    };
    b + l.latencies * lat
}

/// One call of an operator: its compute time and its memory time (and the tier that carries the
/// larger share of its bytes). `None` when it has FLOPs but the machine no rate for them.
#[derive(Clone, Copy, Debug)]
pub struct OpTime {
    pub compute: f64,
    pub memory: f64,
    pub memory_tier: Tier,
}

/// The roofline of one operator call with weights in tier `wt` and working data in `at`: the
/// matrix (× low-precision factor for fp8 and narrower) or vector rate at its precision, × the
/// operator's occupancy (tile and wave quantization, `engine::tiling`), and the
/// bytes over each tier's bandwidth, added when both live in one tier (they share it) and
/// overlapped when they live in two.
pub fn op_time(op: &Op, m: &Machine, wt: Tier, at: Tier) -> Option<OpTime> {
    if matches!(op.phase, Phase::Store | Phase::Host) {
        return off_device_time(op, m);
    }
    let r = op.class().slots();
    let factor = |slot: usize| if slot < t::NX { m[slot] } else { 1.0 };
    let eff = m[r.eff] * factor(r.eff2) * factor(r.eff3);
    let rate = m[r.peak + op.precision] * eff;
    if op.flops > 0.0 && rate <= 0.0 {
        return None;
    }
    let compute = if op.flops > 0.0 {
        op.flops / (rate * op.occupancy)
    } else {
        0.0
    };
    let t_w = if op.weight_bytes > 0.0 {
        op.weight_bytes / tier_bandwidth(wt, m)
    } else {
        0.0
    };
    let t_a = if op.act_bytes > 0.0 {
        op.act_bytes / tier_bandwidth(at, m)
    } else {
        0.0
    };
    let (memory, memory_tier) = if wt == at {
        (t_w + t_a, wt)
    } else if t_w >= t_a {
        (t_w, wt)
    } else {
        (t_a, at)
    };
    Some(OpTime {
        compute,
        memory,
        memory_tier,
    })
}

/// An operator run off the devices: inside the weight store (the optimizer update in MemoryX),
/// its FLOPs at the store's compute and its state bytes at the store's memory bandwidth,
/// overlapped; or on the host (the offloaded optimizer update), its bytes at the device's share
/// of the host memory's bandwidth (`Phase::Host` ops carry no FLOPs, and the host has no FLOP
/// rate here). `None` when it has FLOPs or bytes and the place that runs it lacks the rate.
fn off_device_time(op: &Op, m: &Machine) -> Option<OpTime> {
    let (rate, bw) = if op.phase == Phase::Host {
        (0.0, m[t::HOST_MEMORY_BANDWIDTH])
    } else {
        (m[t::STORE_COMPUTE], m[t::STORE_MEMORY_BANDWIDTH])
    };
    if (op.flops > 0.0 && rate <= 0.0) || (op.weight_bytes > 0.0 && bw <= 0.0) {
        return None;
    }
    let compute = if op.flops > 0.0 { op.flops / rate } else { 0.0 };
    let memory = if op.weight_bytes > 0.0 {
        op.weight_bytes / bw
    } else {
        0.0
    };
    Some(OpTime {
        compute,
        memory,
        memory_tier: Tier::External,
    })
}

fn tier_bandwidth(k: Tier, m: &Machine) -> f64 {
    let s = k.slots();
    m[s.bandwidth] * m[s.efficiency]
}

fn tier_energy(k: Tier, m: &Machine) -> f64 {
    m[k.slots().energy]
}

/// The device's main memory: HBM where it has any, else its SRAM (the tier the software stack's
/// reserve and the serving KV cache come from).
pub fn main_tier(m: &Machine) -> Tier {
    if m[Tier::Hbm.slots().capacity] > 0.0 {
        Tier::Hbm
    } else {
        Tier::Sram
    }
}

/// What tier `k` holds of the run's data: its capacity, less the software stack's reserve on
/// the main tier (never below 0; a tier the device lacks stays 0).
pub fn usable_capacity(k: Tier, m: &Machine) -> f64 {
    let cap = m[k.slots().capacity];
    if k == main_tier(m) && cap > 0.0 {
        (cap - m[t::MEMORY_RESERVE]).max(0.0)
    } else {
        cap
    }
}

/// The most any one device tier holds of the run's data (what a memory-infeasible point reports
/// as available).
pub fn largest_usable_capacity(m: &Machine) -> f64 {
    usable_capacity(Tier::Sram, m).max(usable_capacity(Tier::Hbm, m))
}

/// Place model state and working data in the fastest tier they fit (SRAM, then main memory),
/// else state in the weight store and working data in that tier; `None` if nothing holds them,
/// or if what is offloaded to host memory (activations, optimizer state, weights) exceeds it.
pub fn place(f: &Footprint, m: &Machine) -> Option<(Tier, Tier)> {
    if f.offloaded > m[t::HOST_CAPACITY] {
        return None;
    }
    let (s, w) = (f.state(), f.working());
    let ext = m[t::EXT_CAPACITY];
    for k in [Tier::Sram, Tier::Hbm] {
        let cap = usable_capacity(k, m);
        // a streamed state stays in the store wherever the store holds it
        let resident = !(f.streamed && ext > 0.0 && s <= ext);
        if resident && cap > 0.0 && s + w <= cap {
            return Some((k, k));
        }
        if cap > 0.0 && ext > 0.0 && s <= ext && w <= cap {
            return Some((Tier::External, k));
        }
    }
    None
}

/// Memory-bound operators are binned by how close their compute comes to their memory time
/// (compute / memory in quarters), so that a throttled clock turns the ones near the ridge
/// compute-bound first.
pub const RIDGE_BINS: usize = 4;

/// The bin of a memory-bound operator whose compute time is below its memory time: compute /
/// memory in quarters (compared, not divided: the sweep's hot path).
pub fn ridge_bin(compute: f64, memory: f64) -> usize {
    let c = compute * RIDGE_BINS as f64;
    (1..RIDGE_BINS).filter(|&k| c >= k as f64 * memory).count()
}

/// One section of a stage class (its micro-batch or its step section) as it stretches with the
/// clock: its compute-bound operators' time (and what overlapped collectives take of it), which
/// stretches by 1 / clock; its memory-bound operators', per [`ridge_bin`], their compute and
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
fn demand_at_full(m: &Machine, energy: f64, full: f64) -> f64 {
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
    /// `T − g(T)` rises), found by regula falsi (`least_fixed_point`) between the round at full
    /// clock and at the lowest (the WGSL kernel bisects, in f32),
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
            let b = self.round.at(&[lo; MAX_STAGES]).time;
            least_fixed_point(|t| t - g(t), a, b)
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

/// Most steps the throttled step time's root-finding takes (`least_fixed_point`): bisection
/// alone would shrink the bracket [round at full clock, round at the lowest clock] (at most
/// 1 / lowest clock wide in ratio) below 1e-14 of the step for a lowest clock down to 1 %.
pub const THROTTLE_STEPS: usize = 56;

/// The least `t` in [`a`, `b`] with `h(t) ≥ 0`, for `h` rising (`t − g(t)`, `g` falling) with
/// `h(a) ≤ 0 ≤ h(b)`: regula falsi with the Illinois rule (the end that stays has its value
/// halved, so both ends close in), superlinear where `h` is smooth; a step that would leave the
/// bracket bisects it instead. Stops once the bracket is within 4 ulps of `b` or after
/// [`THROTTLE_STEPS`]; returns the end where `h ≥ 0`.
fn least_fixed_point(h: impl Fn(f64) -> f64, mut a: f64, mut b: f64) -> f64 {
    let (mut ha, mut hb) = (h(a), h(b));
    if ha >= 0.0 {
        return a;
    }
    let mut last = 0i8;
    for _ in 0..THROTTLE_STEPS {
        if hb <= 0.0 || b - a <= 4.0 * f64::EPSILON * b {
            break;
        }
        let mut x = b - hb * (b - a) / (hb - ha);
        if !(x > a && x < b) {
            x = 0.5 * (a + b);
        }
        let hx = h(x);
        if hx >= 0.0 {
            (b, hb) = (x, hx);
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

/// Evaluate `p` on `m`.
pub fn eval(p: &Program, m: &Machine) -> Eval {
    eval_traced(p, m, None)
}

/// A stage's memory-bound operators per section and [`ridge_bin`]: their compute and their
/// memory time ([`SectionParts`]). Read only where a power limit lowers the clock, so the
/// operators' times are taken again here rather than on every evaluation's path.
fn ridge_bins(
    p: &Program,
    st: &Stage,
    m: &Machine,
    wt: Tier,
    at: Tier,
) -> [([f64; RIDGE_BINS], [f64; RIDGE_BINS]); 2] {
    let mut out = [([0.0; RIDGE_BINS], [0.0; RIDGE_BINS]); 2];
    for op in &p.ops[st.ops.clone()] {
        if matches!(op.phase, Phase::Store | Phase::Host) {
            continue;
        }
        if let Some(OpTime {
            compute: t_c,
            memory: t_m,
            ..
        }) = op_time(op, m, wt, at)
        {
            if t_c < t_m {
                let (hidden, memory) = &mut out[op.section as usize];
                let k = ridge_bin(t_c, t_m);
                hidden[k] += t_c * op.count;
                memory[k] += t_m * op.count;
            }
        }
    }
    out
}

/// What one stage class yields on a machine: its time per section, busy time, dynamic energy per
/// device per step.
#[derive(Clone, Copy, Default)]
struct StageEval {
    br: [Breakdown; 2],
    /// Per device, at full clock: the FLOPs' dynamic energy, and that of bytes and links.
    flop_energy: f64,
    dyn_energy: f64,
    /// Where the stage keeps its state (the weight store's power counts only when it is used),
    /// and its working data.
    weights: Tier,
    working: Tier,
}

/// [`eval`], also recording the seconds per step each op and each collective takes (ops first,
/// then comms, in program order; exposed time for collectives; for a stage, its own time) when
/// `trace` is given.
pub fn eval_traced(p: &Program, m: &Machine, mut trace: Option<&mut Vec<f64>>) -> Eval {
    let mut out = Eval {
        feasible: false,
        reason_code: 0,
        step_time: 0.0,
        breakdown: Breakdown::default(),
        energy_per_step: 0.0,
        average_power: 0.0,
        throughput: 0.0,
        mfu: 0.0,
        weights_tier: Tier::Hbm,
        working_tier: Tier::Hbm,
        needed_bytes: p.footprint.total(),
        available_bytes: largest_usable_capacity(m),
        throttle: 1.0,
        device_power: 0.0,
        demand_power: 0.0,
        host_memory: false,
    };
    if let Some(tr) = trace.as_deref_mut() {
        tr.clear();
        tr.resize(p.ops.len() + p.comms.len(), 0.0);
    }
    // no allocation on the sweep's hot path: the implicit stage lives on the stack
    let implicit;
    let stages: &[Stage] = if p.stages.is_empty() {
        implicit = [Stage {
            name: Name::Borrowed("all"),
            ops: 0..p.ops.len(),
            comms: 0..p.comms.len(),
            repeat: 1.0,
            devices: p.devices,
            footprint: p.footprint,
            pool: false,
            hands_on: 0.0,
        }];
        &implicit
    } else {
        &p.stages[..p.stages.len().min(MAX_STAGES)]
    };
    let mb_mult = p.micro_batches;
    let mut evs = [StageEval::default(); MAX_STAGES];
    // the round's parts per stage class, filled as each class is evaluated (see below)
    let mut round = Round {
        micro_batches: p.micro_batches,
        bubble: p.bubble,
        n: stages.len(),
        // The software stack's time per optimizer step: outside the devices' work, at no clock.
        fixed: p.host_steps * m[t::STEP_OVERHEAD],
        ..Round::default()
    };
    for (k, st) in stages.iter().enumerate() {
        (round.repeat[k], round.pool[k]) = (st.repeat, st.pool);
        // Each stage places its own data: the first that does not fit makes the point infeasible.
        let Some((wt, at)) = place(&st.footprint, m) else {
            out.reason_code = REASON_MEMORY;
            out.needed_bytes = st.footprint.total();
            if st.footprint.offloaded > m[t::HOST_CAPACITY] {
                (out.needed_bytes, out.available_bytes) =
                    (st.footprint.offloaded, m[t::HOST_CAPACITY]);
                out.host_memory = true;
            }
            return out;
        };
        if k == 0 {
            out.weights_tier = wt;
            out.working_tier = at;
        }
        let (e_w, e_a) = (tier_energy(wt, m), tier_energy(at, m));
        // sections: [micro-batch, step]
        let mut br = [Breakdown::default(); 2];
        let mut busy = [0.0f64; 2];
        let (mut fwd_mb, mut bwd_mb) = (0.0, 0.0);
        // dynamic energy per device per step at full clock: of the FLOPs (scales with voltage²
        // when the clock throttles), and of memory and link traffic (does not)
        let mut flop_energy = 0.0;
        let mut dyn_energy = 0.0;
        for i in st.ops.clone() {
            let op = &p.ops[i];
            let Some(OpTime {
                compute: t_c,
                memory: t_m,
                ..
            }) = op_time(op, m, wt, at)
            else {
                out.reason_code = REASON_NO_COMPUTE;
                return out;
            };
            let s = op.section as usize;
            if matches!(op.phase, Phase::Store | Phase::Host) {
                // off the device: no clock, no device energy, nothing to hide collectives behind
                let t = t_c.max(t_m) * op.count;
                br[s].other += t;
                if let Some(tr) = trace.as_deref_mut() {
                    tr[i] = t * if s == 0 { mb_mult } else { 1.0 };
                }
                continue;
            }
            let b = &mut br[s];
            if t_c >= t_m {
                b.compute += t_c * op.count;
            } else {
                b.memory += t_m * op.count;
            }
            b.other += m[t::KERNEL_OVERHEAD] * op.count;
            let t = (t_c.max(t_m) + m[t::KERNEL_OVERHEAD]) * op.count;
            busy[s] += t;
            if s == 0 && op.phase == Phase::Backward {
                bwd_mb += t;
            }
            if s == 0 && op.phase == Phase::Forward {
                fwd_mb += t;
            }
            let mult = if s == 0 { mb_mult } else { 1.0 };
            if let Some(tr) = trace.as_deref_mut() {
                tr[i] = t * mult;
            }
            flop_energy += mult * op.count * op.flops * m[t::ENERGY_PER_FLOP + op.precision];
            dyn_energy += mult * op.count * (op.weight_bytes * e_w + op.act_bytes * e_a);
        }
        // The software stack's hand-off of each micro-batch a pipeline stage passes on: part of
        // the stage's micro-batch, at no clock.
        let hand_off = st.hands_on * m[t::PIPELINE_STAGE_TIME];
        br[0].other += hand_off;
        busy[0] += hand_off;
        // What the overlapped collectives take from the compute they hide behind
        // (`collective_tax`): it lengthens that compute before the link timelines measure what
        // they expose.
        let tax = collective_tax(p, st, m, [fwd_mb, bwd_mb, busy[0], busy[1]]);
        for (s, x) in [(0, tax.micro_batch), (1, tax.step)] {
            br[s].compute += x;
            busy[s] += x;
        }
        fwd_mb += tax.forward;
        bwd_mb += tax.backward;
        // Link timelines (`schedule`), one per link class: a micro-batch's (its forward- and
        // compute-overlapped collectives from its start, then those behind its backward, which
        // begins `busy − bwd` into it, later by what the forward collectives delayed the
        // forward), the step section's own, and the first micro-batch's (`first`: its forward's
        // collectives, then the step's behind that forward (pass 2), then its backward's again,
        // released once its forward, which waited for both, is done), on which the step's
        // collectives behind the last backward run when the first micro-batch is the last (pass
        // 3; else they run on the micro-batch's timeline after its backward's).
        // Each section's end is the latest of its compute and what its collectives finish
        // behind; a collective exposes what it moves that end (`extend`); what the first
        // micro-batch's backward collectives add there counts to the step section. Every end is
        // a maximum of sums of durations, so faster compute or a faster link never lengthens a
        // step, and no link time is booked twice (`tests/regressions.rs`).
        let mut free = [0.0f64; LINKS];
        let mut free_step = [0.0f64; LINKS];
        let mut first = [0.0f64; LINKS];
        let (mut end_mb, mut end_step) = (busy[0], busy[1]);
        let (mut end_last, mut end_first) = (0.0, 0.0);
        let (mut late_fwd, mut late_first) = (0.0f64, 0.0f64);
        let (mut release_bwd, mut release_first) = (0.0, 0.0);
        let mut last_step_fwd = None;
        for (pass, &books) in PASSES.iter().enumerate() {
            if pass == 1 {
                first = free;
                release_bwd = busy[0] - bwd_mb + late_fwd;
            }
            if pass == 2 {
                (end_last, end_first) = (end_mb, end_mb);
                late_first = late_fwd;
            }
            if pass == 3 {
                if last_step_fwd.is_none() {
                    // nothing rode the first forward: the first micro-batch is like any other
                    continue;
                }
                release_first = busy[0] - bwd_mb + late_first;
            }
            if pass == 4 && p.micro_batches <= 1.0 && last_step_fwd.is_some() {
                (free, release_bwd, end_last) = (first, release_first, end_first);
            }
            for i in st.comms.clone() {
                let c = &p.comms[i];
                let cp = comm_pass(c);
                if cp.unwrap_or(0) != books {
                    continue;
                }
                let s = c.section as usize;
                let mut lt = collective_links(c, m);
                for x in &mut lt {
                    *x *= c.count;
                }
                let o = c.coeffs.overlapped;
                let mb = c.section == Section::MicroBatch;
                if pass == 3 {
                    // the first micro-batch's backward collectives again, on its timeline: what
                    // they add to its end is the step's collectives' doing (traced on the last
                    // of them); their energy counts once, in pass 1
                    let x = extend(&mut end_first, schedule(&lt, o, release_first, &mut first));
                    br[1].communication += x;
                    if let (Some(tr), Some(j)) = (trace.as_deref_mut(), last_step_fwd) {
                        tr[p.ops.len() + j] += x;
                    }
                    continue;
                }
                let exposed = match (cp, c.overlap) {
                    (None, _) => combine(&lt, o),
                    (Some(0), Overlap::Forward) => {
                        let f = schedule(&lt, o, 0.0, &mut free);
                        late_fwd = late_fwd.max(f - fwd_mb);
                        extend(&mut end_mb, f - fwd_mb + busy[0])
                    }
                    (Some(0), _) if mb => extend(&mut end_mb, schedule(&lt, o, 0.0, &mut free)),
                    (Some(0), _) => extend(&mut end_step, schedule(&lt, o, 0.0, &mut free_step)),
                    (Some(1), _) => extend(&mut end_mb, schedule(&lt, o, release_bwd, &mut free)),
                    (Some(3), _) => extend(&mut end_last, schedule(&lt, o, release_bwd, &mut free)),
                    _ => {
                        let f = schedule(&lt, o, 0.0, &mut first);
                        late_first = late_first.max(f - fwd_mb);
                        last_step_fwd = Some(i);
                        extend(&mut end_first, f + busy[0] - fwd_mb)
                    }
                };
                br[s].communication += exposed;
                let mult = if s == 0 { mb_mult } else { 1.0 };
                if let Some(tr) = trace.as_deref_mut() {
                    tr[p.ops.len() + i] = exposed * mult;
                }
                let k = &c.coeffs;
                let bu = k.up[usize::from(m.flag(t::UP_INR))].bytes;
                let bo = k.out[usize::from(m.flag(t::OUT_INR))].bytes;
                let bh = k.host.bytes;
                // the mesh's traffic at its energy per bit-hop (bytes × hops, `Link::hop_bytes`)
                let bm = k.mesh.hop_bytes;
                dyn_energy += mult
                    * c.count
                    * (bu * m[t::UP_ENERGY]
                        + bo * m[t::OUT_ENERGY]
                        + bh * m[t::HOST_ENERGY]
                        + bm * m[t::MESH_ENERGY]);
            }
        }
        for (s, b) in br.iter().enumerate() {
            round.sections[k][s].clocked = b.compute;
            round.sections[k][s].rest = b.total() - b.compute;
        }
        evs[k] = StageEval {
            br,
            flop_energy,
            dyn_energy,
            weights: wt,
            working: at,
        };
    }
    // Stage classes: each measures the step's collectives that ride its micro-batch against its
    // own micro-batch's end, and the round takes the slowest stage's micro-batch and the slowest
    // stage's step section apart; so where the two are different stages, faster compute in the
    // one whose micro-batch does not bind can lengthen its step section by up to what it saves
    // (a limit of stage classes, not of the timelines: one class is monotone, `tests/engine.rs`).
    // The round (`Round`): micro-batches × the slowest stage (plus the bubble), or the chain of
    // all stages when it is longer (fewer micro-batches in flight than stages); the step section
    // is bounded by its slowest stage. A concurrent pool stays out of it: its time per round
    // (micro-batch section × micro-batches and its step section) bounds the round beside it.
    // Which stage is slowest is decided at the clock the devices run at: a throttled clock
    // stretches the compute-bound stages more.
    let full = round.at(&FULL_CLOCK);
    let t_full = full.time;
    // Where a class demands more than its power limit, its memory-bound operators' ridge bins
    // (`ridge_bins`: only a lower clock reads them, so only a throttled point takes them).
    let cap = power_limit(m);
    for (k, (e, st)) in evs.iter().zip(stages).enumerate() {
        if demand_at_full(m, e.flop_energy + e.dyn_energy, t_full) > cap {
            for (sec, (hidden, memory)) in ridge_bins(p, st, m, e.weights, e.working)
                .into_iter()
                .enumerate()
            {
                (round.sections[k][sec].hidden, round.sections[k][sec].memory) = (hidden, memory);
            }
        }
    }
    // a section's breakdown at its class's clock: the compute-bound time stretched, and what
    // the memory-bound operators' compute now takes beyond their memory time
    let compose = |sel: &Binds, clocks: &[f64; MAX_STAGES]| -> Breakdown {
        let at = |k: usize, sec: usize| {
            let b = &evs[k].br[sec];
            Breakdown {
                compute: b.compute / clocks[k] + round.sections[k][sec].excess(clocks[k]),
                ..*b
            }
        };
        let mut b = if let Some(k) = sel.pool {
            let mut b = at(k, 0).scale(p.micro_batches);
            b.add(&at(k, 1));
            b
        } else {
            let mut b = if sel.in_pipeline {
                let slowest = at(sel.micro_batch, 0);
                let mut b = slowest.scale(p.micro_batches);
                b.bubble += p.bubble * slowest.total();
                b
            } else {
                let mut b = Breakdown::default();
                for (k, st) in stages.iter().enumerate() {
                    if !st.pool {
                        b.add(&at(k, 0).scale(st.repeat));
                    }
                }
                b
            };
            b.add(&at(sel.step, 1));
            b
        };
        b.other += round.fixed;
        b
    };
    if !(t_full > 0.0 && t_full.is_finite()) {
        out.step_time = t_full;
        out.breakdown = compose(&full, &FULL_CLOCK);
        out.reason_code = REASON_NO_COMPUTE;
        return out;
    }
    // Power: the devices' operating point under their limit (DVFS), each stage class at the
    // clock its own devices' limit allows (`Demand::operate`); then the parts the boundary
    // counts, class by class.
    let n = stages.len();
    let mut demand = Demand {
        round: &round,
        full: t_full,
        flop_energy: [0.0; MAX_STAGES],
        other_energy: [0.0; MAX_STAGES],
    };
    for (k, e) in evs.iter().enumerate().take(n) {
        demand.flop_energy[k] = e.flop_energy;
        demand.other_energy[k] = e.dyn_energy;
    }
    out.demand_power = (0..n).map(|k| demand.demand(m, k)).fold(0.0, f64::max);
    let Some(op) = demand.operate(m) else {
        out.step_time = t_full;
        out.breakdown = compose(&full, &FULL_CLOCK);
        out.needed_bytes = m[t::IDLE_POWER];
        out.available_bytes = power_limit(m);
        out.reason_code = REASON_POWER_CAP;
        return out;
    };
    // the clock-bound time stretches by 1 / the class's clock, the bubble with the stage time
    // it idles for; where a class duty-cycles, every part of the step stretches
    let mut total = if op.time == t_full {
        compose(&full, &FULL_CLOCK)
    } else {
        compose(&round.at(&op.clocks), &op.clocks)
    };
    if op.time > op.round {
        total = total.scale(op.stretch());
    }
    let t_step = op.time;
    out.step_time = t_step;
    out.breakdown = total;
    out.throttle = op.throttle(n);
    let mut power = 0.0;
    for (k, (e, st)) in evs.iter().zip(stages.iter()).enumerate() {
        let dev = demand.power(m, k, &op);
        out.device_power = out.device_power.max(dev);
        power += st.repeat * st.devices * system_power(m, dev, e.weights);
    }
    out.average_power = power;
    out.energy_per_step = power * t_step;
    out.throughput = p.units_per_step / t_step;
    let peak = m[t::MATRIX_PEAK + p.mfu_precision] * p.devices;
    out.mfu = if peak > 0.0 {
        p.model_flops_per_step / (t_step * peak)
    } else {
        0.0
    };
    // A finite step can still overflow its energy (a bandwidth of 1e-308 GB/s gives a step of
    // 1e307 s): a result is finite or infeasible, never a feasible row with holes in it.
    let figures = [
        t_step,
        out.energy_per_step,
        out.average_power,
        out.throughput,
    ];
    if !figures.iter().all(|x| x.is_finite()) {
        out.reason_code = REASON_NON_FINITE;
        return out;
    }
    out.feasible = true;
    out
}
