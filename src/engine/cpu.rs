//! The reference evaluator: a program on a machine → step time, breakdown, power, energy.
//! f64, single design point; `sweep` runs it over many machines with rayon. It interprets the
//! cost program: each operator's rate is the machine slots its efficiency class names, each
//! collective its alpha-beta coefficients. The WGSL kernel (`sweep/gpu/eval.wgsl`) interprets the
//! same records the same way (the parity test checks).

use super::program::Link;
use super::program::*;
use super::reason::point::{MEMORY as REASON_MEMORY, NO_COMPUTE as REASON_NO_COMPUTE};
use super::table::{self as t, Machine};

/// Alpha-beta time of one collective and the bytes each device sends over the scale-up and
/// scale-out links, from its coefficients (`coeffs.rs`): per link class, latencies × latency +
/// bytes / bandwidth; the classes add, or the slowest bounds an all-to-all.
pub fn collective(c: &Comm, m: &Machine) -> (f64, f64, f64) {
    let k = &c.coeffs;
    let net = m[t::EFF_NETWORK];
    let up = &k.up[usize::from(m.flag(t::UP_INR))];
    let out = &k.out[usize::from(m.flag(t::OUT_INR))];
    let t_up = link(
        up,
        m[t::UP_BANDWIDTH] * net * c.inner_share,
        m[t::UP_LATENCY],
    );
    let t_out = link(out, m[t::OUT_BANDWIDTH] * net, m[t::OUT_LATENCY]);
    let t_ext = link(&k.ext, m[t::EXT_BANDWIDTH] * net, m[t::EXT_LATENCY]);
    let t = if k.overlapped {
        t_up.max(t_out)
    } else {
        t_up + t_out + t_ext
    };
    (t, up.bytes, out.bytes)
}

/// Time on one link class: latencies × latency + bytes / bandwidth (infinite without bandwidth).
#[inline]
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
/// matrix (× low-precision factor for fp8 and narrower) or vector rate at its precision, and the
/// bytes over each tier's bandwidth, added when both live in one tier (they share it) and
/// overlapped when they live in two.
pub fn op_time(op: &Op, m: &Machine, wt: Tier, at: Tier) -> Option<OpTime> {
    let r = op.class().slots();
    let eff = if r.eff2 < t::NX {
        m[r.eff] * m[r.eff2]
    } else {
        m[r.eff]
    };
    let rate = m[r.peak + op.precision] * eff;
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

fn tier_bandwidth(k: Tier, m: &Machine) -> f64 {
    let s = k.slots();
    m[s.bandwidth] * m[s.efficiency]
}

fn tier_energy(k: Tier, m: &Machine) -> f64 {
    m[k.slots().energy]
}

/// Place model state and working data in the fastest tier they fit (SRAM, then main memory),
/// else state in the weight store and working data in that tier; `None` if nothing holds them.
pub fn place(f: &Footprint, m: &Machine) -> Option<(Tier, Tier)> {
    let (s, w) = (f.state(), f.working());
    let ext = m[t::EXT_CAPACITY];
    for k in [Tier::Sram, Tier::Hbm] {
        let cap = m[k.slots().capacity];
        if cap > 0.0 && s + w <= cap {
            return Some((k, k));
        }
        if cap > 0.0 && ext > 0.0 && s <= ext && w <= cap {
            return Some((Tier::External, k));
        }
    }
    None
}

/// Evaluate `p` on `m`.
pub fn eval(p: &Program, m: &Machine) -> Eval {
    eval_traced(p, m, None)
}

/// What one stage class yields on a machine: its time per section, busy time, dynamic energy per
/// device per step.
#[derive(Clone, Copy, Default)]
struct StageEval {
    br: [Breakdown; 2],
    dyn_energy: f64,
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
        available_bytes: m[t::SRAM_CAPACITY].max(m[t::HBM_CAPACITY]),
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
        }];
        &implicit
    } else {
        &p.stages[..p.stages.len().min(MAX_STAGES)]
    };
    let mb_mult = p.micro_batches;
    let mut evs = [StageEval::default(); MAX_STAGES];
    for (k, st) in stages.iter().enumerate() {
        // Each stage places its own data: the first that does not fit makes the point infeasible.
        let Some((wt, at)) = place(&st.footprint, m) else {
            out.reason_code = REASON_MEMORY;
            out.needed_bytes = st.footprint.total();
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
        let mut bwd_mb = 0.0;
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
                tr[i] = t * mult;
            }
            dyn_energy += mult
                * op.count
                * (op.flops * m[t::ENERGY_PER_FLOP + op.precision]
                    + op.weight_bytes * e_w
                    + op.act_bytes * e_a);
        }
        for i in st.comms.clone() {
            let c = &p.comms[i];
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
                tr[p.ops.len() + i] = exposed * mult;
            }
            dyn_energy += mult * c.count * (bu * m[t::UP_ENERGY] + bo * m[t::OUT_ENERGY]);
        }
        evs[k] = StageEval { br, dyn_energy };
    }
    // The round: micro-batches × the slowest stage (plus the bubble), or the chain of all stages
    // when it is longer (fewer micro-batches in flight than stages); the step section is bounded
    // by its slowest stage.
    let (mut k_mb, mut t_max, mut chain) = (0, f64::NEG_INFINITY, 0.0);
    let (mut k_st, mut t_st) = (0, f64::NEG_INFINITY);
    for (k, (e, st)) in evs.iter().zip(stages.iter()).enumerate() {
        let t_mb = e.br[0].total();
        if t_mb > t_max {
            (k_mb, t_max) = (k, t_mb);
        }
        chain += st.repeat * t_mb;
        let ts = e.br[1].total();
        if ts > t_st {
            (k_st, t_st) = (k, ts);
        }
    }
    let pipelined = p.micro_batches * t_max + p.bubble * t_max;
    let mut total = if pipelined >= chain {
        let mut b = evs[k_mb].br[0].scale(p.micro_batches);
        b.bubble += p.bubble * t_max;
        b
    } else {
        let mut b = Breakdown::default();
        for (e, st) in evs.iter().zip(stages.iter()) {
            b.add(&e.br[0].scale(st.repeat));
        }
        b
    };
    total.add(&evs[k_st].br[1]);
    let t_step = total.total();
    out.step_time = t_step;
    out.breakdown = total;
    if !(t_step > 0.0 && t_step.is_finite()) {
        out.reason_code = REASON_NO_COMPUTE;
        return out;
    }
    // Power: each device idles plus its dynamic energy over the step, capped at TDP.
    let mut power = 0.0;
    for (e, st) in evs.iter().zip(stages.iter()) {
        let dev_power = (m[t::IDLE_POWER] + e.dyn_energy / t_step).min(m[t::TDP]);
        power += st.repeat * (st.devices * (dev_power + m[t::OVERHEAD_POWER]) * m[t::PUE]);
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
    out.feasible = true;
    out
}
