//! The roofline of one operator call, where a stage's data lives (placement in the memory
//! tiers) and the ridge bins a lowered clock reads. Mirrors the kernel's roofline section
//! (`usable_capacity`, `tier_bandwidth` and the operator loop of `evaluate`).

use crate::engine::program::*;
use crate::engine::running::Running;
use crate::engine::table::{self as t, Machine};

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

pub(super) fn tier_energy(k: Tier, m: &Machine) -> f64 {
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

/// Whether a stage whose state [`place`] puts in tier `wt` runs its weight-streamed form
/// ([`Form::Streamed`]): its state is in the weight store and the store can run the optimizer
/// update (it has compute and memory bandwidth). Else its on-device form, whose update runs on
/// the devices (or the host) with the weights where they are placed. The program carries both
/// where the system has a store (`lower::training::stream`); this is the one place the choice
/// is made, on the machine as evaluated, so a sweep point that moves the state in or out of the
/// store is priced as a fresh estimate of that system would be.
#[inline]
pub fn streams(wt: Tier, m: &Machine) -> bool {
    wt == Tier::External && m[t::STORE_COMPUTE] > 0.0 && m[t::STORE_MEMORY_BANDWIDTH] > 0.0
}

/// The records of `p` that run on `m` ([`Running`]): in each stage class, those of the form its
/// placement there selects ([`streams`]; a stage that fits nowhere, its on-device form). Every
/// reader of a program's operators and collectives outside the evaluators (reports, traces,
/// bottleneck names) reads them through this, so none sees both forms.
pub fn running(p: &Program, m: &Machine) -> Running {
    Running::of(p, |st| {
        place(&st.footprint, m).is_some_and(|(wt, _)| streams(wt, m))
    })
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

/// A stage's memory-bound operators per section and [`ridge_bin`]: their compute and their
/// memory time ([`SectionParts`]). Read only where a power limit lowers the clock, so the
/// operators' times are taken again here rather than on every evaluation's path.
pub(super) fn ridge_bins(
    p: &Program,
    st: &Stage,
    m: &Machine,
    wt: Tier,
    at: Tier,
) -> [([f64; RIDGE_BINS], [f64; RIDGE_BINS]); 2] {
    let mut out = [([0.0; RIDGE_BINS], [0.0; RIDGE_BINS]); 2];
    let s = streams(wt, m);
    for op in &p.ops[st.ops.clone()] {
        if !op.form.runs(s) || matches!(op.phase, Phase::Store | Phase::Host) {
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
