//! The reference evaluator: a program on a machine → step time, breakdown, power, energy.
//! f64, single design point; `sweep` runs it over many machines with rayon. The WGSL kernel in
//! `gpu/eval.wgsl` is a line-for-line port of this file and must stay so (the parity test checks).

use super::program::*;
use super::reason::point::{MEMORY as REASON_MEMORY, NO_COMPUTE as REASON_NO_COMPUTE};
use super::table::{self as t, Machine};

/// Alpha-beta time of one collective and the bytes each device sends over the scale-up and
/// scale-out links. Ring algorithms inside a tier, hierarchical (scale-up, then scale-out, then
/// scale-up) across tiers, in-network reduction where the switches offer it.
pub fn collective(c: &Comm, m: &Machine) -> (f64, f64, f64) {
    if c.weight_stream {
        let bw = m[t::EXT_BANDWIDTH] * m[t::EFF_NETWORK];
        if bw <= 0.0 {
            return (f64::INFINITY, 0.0, 0.0);
        }
        return (c.bytes / bw + m[t::EXT_LATENCY], 0.0, 0.0);
    }
    let u = c.inner.max(1.0);
    let o = c.outer.max(1.0);
    if u <= 1.0 && o <= 1.0 {
        return (0.0, 0.0, 0.0);
    }
    let bu = m[t::UP_BANDWIDTH] * m[t::EFF_NETWORK] * c.inner_share;
    let bo = m[t::OUT_BANDWIDTH] * m[t::EFF_NETWORK];
    let s = c.bytes;
    // latency terms: ring inside a domain, tree (log2) across domains
    let lu = m[t::UP_LATENCY];
    let lo = m[t::OUT_LATENCY];
    let log2o = o.log2().max(1.0);
    let (t, up_bytes, out_bytes) = match c.kind {
        CollKind::AllReduce => {
            // reduce-scatter + all-reduce across domains + all-gather
            let (t_in, b_in) = if u > 1.0 {
                if m.flag(t::UP_INR) {
                    (s / bu + 2.0 * lu, s)
                } else {
                    (
                        2.0 * (u - 1.0) / u * s / bu + 2.0 * (u - 1.0) * lu,
                        2.0 * (u - 1.0) / u * s,
                    )
                }
            } else {
                (0.0, 0.0)
            };
            let shard = s / u;
            let (t_out, b_out) = if o > 1.0 {
                if m.flag(t::OUT_INR) {
                    (shard / bo + 2.0 * lo * log2o, shard)
                } else {
                    (
                        2.0 * (o - 1.0) / o * shard / bo + 2.0 * lo * log2o,
                        2.0 * (o - 1.0) / o * shard,
                    )
                }
            } else {
                (0.0, 0.0)
            };
            (t_in + t_out, b_in, b_out)
        }
        CollKind::AllGather | CollKind::ReduceScatter => {
            let (t_out, b_out) = if o > 1.0 {
                let part = s / u;
                ((o - 1.0) / o * part / bo + lo * log2o, (o - 1.0) / o * part)
            } else {
                (0.0, 0.0)
            };
            let (t_in, b_in) = if u > 1.0 {
                ((u - 1.0) / u * s / bu + (u - 1.0) * lu, (u - 1.0) / u * s)
            } else {
                (0.0, 0.0)
            };
            (t_in + t_out, b_in, b_out)
        }
        CollKind::AllToAll => {
            let n = u * o;
            let b_in = (u - 1.0) / n * s;
            let b_out = (n - u) / n * s;
            let t_in = if u > 1.0 { b_in / bu + lu } else { 0.0 };
            let t_out = if o > 1.0 { b_out / bo + lo } else { 0.0 };
            (t_in.max(t_out), b_in, b_out)
        }
        CollKind::Broadcast => {
            if o > 1.0 {
                (s / bo + lo * log2o, 0.0, s)
            } else {
                (s / bu + lu * u.log2().max(1.0), s, 0.0)
            }
        }
        CollKind::SendRecv => {
            if o > 1.0 {
                (s / bo + lo, 0.0, s)
            } else {
                (s / bu + lu, s, 0.0)
            }
        }
    };
    (t, up_bytes, out_bytes)
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
/// matrix (× low-precision factor for fp8 and narrower) or vector rate at its precision, and the
/// bytes over each tier's bandwidth, added when both live in one tier (they share it) and
/// overlapped when they live in two.
pub fn op_time(op: &Op, m: &Machine, wt: Tier, at: Tier) -> Option<OpTime> {
    let rate = if op.matrix {
        m[t::MATRIX_PEAK + op.precision] * t::matrix_efficiency(&m.0, op.precision)
    } else {
        m[t::VECTOR_PEAK + op.precision] * m[t::EFF_VECTOR]
    };
    if op.flops > 0.0 && rate <= 0.0 {
        return None;
    }
    let compute = if op.flops > 0.0 { op.flops / rate } else { 0.0 };
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

fn tier_bandwidth(t: Tier, m: &Machine) -> f64 {
    match t {
        Tier::Sram => m[t::SRAM_BANDWIDTH] * m[t::EFF_MEMORY],
        Tier::Hbm => m[t::HBM_BANDWIDTH] * m[t::EFF_MEMORY],
        Tier::External => m[t::EXT_BANDWIDTH] * m[t::EFF_NETWORK],
    }
}

fn tier_energy(t: Tier, m: &Machine) -> f64 {
    match t {
        Tier::Sram => m[t::SRAM_ENERGY],
        Tier::Hbm => m[t::HBM_ENERGY],
        Tier::External => m[t::OUT_ENERGY],
    }
}

/// Place model state and working data in the fastest tier they fit; `None` if nothing holds them.
pub fn place(f: &Footprint, m: &Machine) -> Option<(Tier, Tier)> {
    let (s, w) = (f.state(), f.working());
    let (sram, hbm) = (m[t::SRAM_CAPACITY] > 0.0, m[t::HBM_CAPACITY] > 0.0);
    if sram && s + w <= m[t::SRAM_CAPACITY] {
        Some((Tier::Sram, Tier::Sram))
    } else if sram
        && m[t::EXT_CAPACITY] > 0.0
        && s <= m[t::EXT_CAPACITY]
        && w <= m[t::SRAM_CAPACITY]
    {
        Some((Tier::External, Tier::Sram))
    } else if hbm && s + w <= m[t::HBM_CAPACITY] {
        Some((Tier::Hbm, Tier::Hbm))
    } else if hbm && m[t::EXT_CAPACITY] > 0.0 && s <= m[t::EXT_CAPACITY] && w <= m[t::HBM_CAPACITY]
    {
        Some((Tier::External, Tier::Hbm))
    } else {
        None
    }
}

/// Evaluate `p` on `m`.
pub fn eval(p: &Program, m: &Machine) -> Eval {
    eval_traced(p, m, None)
}

/// [`eval`], also recording the seconds per step each op and each collective takes (ops first,
/// then comms, in program order; exposed time for collectives) when `trace` is given.
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
        available_bytes: m[t::SRAM_CAPACITY].max(m[t::HBM_CAPACITY]),
    };
    let Some((wt, at)) = place(&p.footprint, m) else {
        out.reason_code = REASON_MEMORY;
        return out;
    };
    out.weights_tier = wt;
    out.working_tier = at;
    let (e_w, e_a) = (tier_energy(wt, m), tier_energy(at, m));

    // sections: [micro-batch, step]
    let mut br = [Breakdown::default(); 2];
    let mut busy = [0.0f64; 2];
    let mut bwd_mb = 0.0;
    let mut dyn_energy = 0.0;
    let mb_mult = p.micro_batches;
    for op in &p.ops {
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
        let mult = if s == 0 { mb_mult } else { 1.0 };
        if let Some(tr) = trace.as_deref_mut() {
            tr.push(t * mult);
        }
        dyn_energy += mult
            * op.count
            * (op.flops * m[t::ENERGY_PER_FLOP + op.precision]
                + op.weight_bytes * e_w
                + op.act_bytes * e_a);
    }
    for c in &p.comms {
        let (t, bu, bo) = collective(c, m);
        let s = c.section as usize;
        let t = t * c.count;
        let exposed = match c.overlap {
            Overlap::None => t,
            Overlap::Backward => (t - bwd_mb).max(0.0),
            Overlap::Compute => (t - busy[s]).max(0.0),
        };
        br[s].communication += exposed;
        let mult = if s == 0 { mb_mult } else { 1.0 };
        if let Some(tr) = trace.as_deref_mut() {
            tr.push(exposed * mult);
        }
        dyn_energy += mult * c.count * (bu * m[t::UP_ENERGY] + bo * m[t::OUT_ENERGY]);
    }
    let t_mb = br[0].total();
    let mut total = br[0].scale(p.micro_batches);
    total.bubble += p.bubble * t_mb;
    total.add(&br[1]);
    let t_step = total.total();
    out.step_time = t_step;
    out.breakdown = total;
    if !(t_step > 0.0 && t_step.is_finite()) {
        out.reason_code = REASON_NO_COMPUTE;
        return out;
    }
    // Power: each device idles plus its dynamic energy over the step, capped at TDP.
    let dev_power = (m[t::IDLE_POWER] + dyn_energy / t_step).min(m[t::TDP]);
    let power = p.devices * (dev_power + m[t::OVERHEAD_POWER]) * m[t::PUE];
    out.average_power = power;
    out.energy_per_step = power * t_step;
    out.throughput = p.units_per_step / t_step;
    let peak = m[t::MATRIX_PEAK + p.mfu_precision] * p.devices;
    out.mfu = if peak > 0.0 {
        p.model_flops_per_step / (t_step * peak)
    } else {
        0.0
    };
    out.feasible = true;
    out
}
