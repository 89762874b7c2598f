//! The reference evaluator: a program on a machine → step time, breakdown, power, energy.
//! f64, single design point; `sweep` runs it over many machines with rayon. It interprets the
//! cost program: each operator's rate is the machine slots its efficiency class names, each
//! collective its alpha-beta coefficients. The WGSL kernel (`sweep/gpu/eval.wgsl`, its link
//! section in `links.wgsl`) interprets the same records the same way (the parity test checks),
//! and its sections match these files one to one: `links` (collectives on the link timelines),
//! `roofline` (an operator's time, placement), `clock` (the round, DVFS and power), `stage` (one
//! stage class's pass over its records) and this file (`evaluate`: the stages into a step).
//! `tests/it/kernel_counterparts.rs` checks that every function here has its counterpart in the
//! kernel and the other way round.

mod clock;
mod links;
mod roofline;
mod stage;

pub use clock::{
    lowest_clock, power_limit, system_power, throttle_steps, voltage, Binds, Demand, Operating,
    Round, SectionParts, FULL_CLOCK, THROTTLE_STEPS,
};
pub use links::{
    collective, collective_links, collective_tax, combine, schedule, Tax, LINKS, PASSES,
};
pub use roofline::{
    largest_usable_capacity, main_tier, op_time, place, ridge_bin, running, streams,
    usable_capacity, OpTime, RIDGE_BINS,
};

use clock::demand_at_full;
use roofline::ridge_bins;
use stage::{eval_stage, StageEval};

use super::program::*;
use super::reason::point::{
    MEMORY as REASON_MEMORY, NON_FINITE as REASON_NON_FINITE, NO_COMPUTE as REASON_NO_COMPUTE,
    POWER_CAP as REASON_POWER_CAP,
};
use super::table::{self as t, Machine};

/// Evaluate `p` on `m`.
pub fn eval(p: &Program, m: &Machine) -> Eval {
    eval_traced(p, m, None)
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
        let Some(e) = eval_stage(p, st, m, (wt, at), trace.as_deref_mut()) else {
            out.reason_code = REASON_NO_COMPUTE;
            return out;
        };
        for (s, b) in e.br.iter().enumerate() {
            round.sections[k][s].clocked = b.compute;
            round.sections[k][s].rest = b.total() - b.compute;
        }
        evs[k] = e;
    }
    // Stage classes: each measures the step's collectives that ride its micro-batch against its
    // own micro-batch's end, and the round takes the slowest stage's micro-batch and the slowest
    // stage's step section apart; so where the two are different stages, faster compute in the
    // one whose micro-batch does not bind can lengthen its step section by up to what it saves
    // (a limit of stage classes, not of the timelines: one class is monotone, `tests/it/engine.rs`).
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
    if !(t_full > 0.0 && t_full.is_finite()) {
        out.step_time = t_full;
        out.breakdown = compose(p, stages, &evs, &round, &full, &FULL_CLOCK);
        out.reason_code = REASON_NO_COMPUTE;
        return out;
    }
    under_limit(p, m, stages, &evs, &round, full, out)
}

/// A step's breakdown with each stage class at its clock: the compute-bound time stretched, and
/// what the memory-bound operators' compute now takes beyond their memory time; the round of
/// the classes `sel` names (a pool's own round, the pipeline's slowest micro-batch × the
/// micro-batches plus the bubble, or the chain of all stages), its slowest step section, and the
/// software stack's fixed time.
fn compose(
    p: &Program,
    stages: &[Stage],
    evs: &[StageEval; MAX_STAGES],
    round: &Round,
    sel: &Binds,
    clocks: &[f64; MAX_STAGES],
) -> Breakdown {
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
}

/// The step under the devices' power limit (DVFS): each stage class at the clock its own
/// devices' limit allows (`Demand::operate`), the breakdown at those clocks, then the power the
/// boundary counts, class by class, and the figures per step; infeasible where the limit is
/// below the idle power or a figure is not finite.
fn under_limit(
    p: &Program,
    m: &Machine,
    stages: &[Stage],
    evs: &[StageEval; MAX_STAGES],
    round: &Round,
    full: Binds,
    mut out: Eval,
) -> Eval {
    let t_full = full.time;
    // Power: the devices' operating point under their limit (DVFS), each stage class at the
    // clock its own devices' limit allows (`Demand::operate`); then the parts the boundary
    // counts, class by class.
    let n = stages.len();
    let mut demand = Demand {
        round,
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
        out.breakdown = compose(p, stages, evs, round, &full, &FULL_CLOCK);
        out.needed_bytes = m[t::IDLE_POWER];
        out.available_bytes = power_limit(m);
        out.reason_code = REASON_POWER_CAP;
        return out;
    };
    // the clock-bound time stretches by 1 / the class's clock, the bubble with the stage time
    // it idles for; where a class duty-cycles, every part of the step stretches
    let mut total = if op.time == t_full {
        compose(p, stages, evs, round, &full, &FULL_CLOCK)
    } else {
        compose(p, stages, evs, round, &round.at(&op.clocks), &op.clocks)
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
