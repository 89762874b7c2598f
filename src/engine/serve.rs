//! Serving: the figures a user and an operator see (time to first token, time per output token,
//! tokens/s per user and per system at a concurrency), the KV cache's limit on concurrency, the
//! serving load resolved into the mapping's requests per instance, and the latency target.
//!
//! The cost program stays the one source of the physics: a serving estimate reads two programs
//! of the same lowering (`lower::lower`, the steady-state round of continuous batching, and
//! `lower::lower_prefill`, one prompt alone) evaluated by the same interpreter; this module only
//! combines their times, in [`ttft`], once. A sweep (CPU or GPU) evaluates the round program:
//! its step time is the time per output token, its throughput the system's; it reports no time
//! to first token.

use super::cpu;
use super::lower;
use super::program::{Eval, Machine, Tier};
use super::reason::Reason;
use crate::model::mapping::Mapping;
use crate::model::serving::{Concurrency, Load, Slo};
use crate::model::system::System;
use crate::model::workload::{Inference, Model, Task, Workload};
use serde::Serialize;

/// What a serving run looks like to its users and its operator. SI units.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Serving {
    /// Requests in flight over the system (per instance × instances).
    pub concurrency: u64,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// Time to first token (s): see [`ttft`].
    pub ttft_s: f64,
    /// Time per output token (s): one steady-state round (decode of every request in flight,
    /// the joining prompts interleaved).
    pub tpot_s: f64,
    /// Output tokens per second each user sees (1 / TPOT).
    pub user_tokens_per_s: f64,
    /// Output tokens per second over the system.
    pub system_tokens_per_s: f64,
    /// One prompt's prefill alone on its instance (s).
    pub prefill_s: f64,
}

/// Time to first token in steady-state continuous batching with the prefill interleaved into
/// the decode rounds: the prompt's prefill (alone on its instance, `prefill_s`), plus the
/// decode of the other requests in flight it shares its round with, (B − 1)/B of a round
/// (`tpot_s`; B requests per instance). One request alone: its prefill. No queueing delay (the
/// steady state is below saturation). The one place the two programs' times combine.
pub fn ttft(prefill_s: f64, tpot_s: f64, batch: f64) -> f64 {
    let b = batch.max(1.0);
    prefill_s + tpot_s * (b - 1.0) / b
}

fn inference(w: &Workload) -> Option<&Inference> {
    match (&w.model, &w.task) {
        (Model::Transformer(_), Task::Inference(i)) => Some(i),
        _ => None,
    }
}

/// The serving load of a workload (the default for any other task).
pub fn load_of(w: &Workload) -> Load {
    inference(w).map(|i| i.load).unwrap_or_default()
}

/// A load with a latency target and no concurrency of its own serves the workload's `batch`
/// over the whole system: a target is about those users (one user at batch 1), not about as
/// many copies of them as the mapping has instances. Without a target the load is unchanged
/// (the workload's batch on each instance).
pub fn with_target(load: Load, batch: u64) -> Load {
    if !load.slo.is_empty() && load.concurrency == Concurrency::Workload {
        Load {
            concurrency: Concurrency::Total(batch.max(1)),
            ..load
        }
    } else {
        load
    }
}

/// Set the serving options a front end was given (`--slo`, `--min-user-rate`, `--concurrency`;
/// a case's `slo:` and `concurrency:`; the Python keywords) on `w`'s load, by the rule of
/// [`with_target`]; nothing given, nothing changes. `Err` (message, then `\nhint: …`) when `w`
/// is not transformer inference.
pub fn set_load(
    w: &mut Workload,
    slo: Option<Slo>,
    min_user_rate: Option<f64>,
    concurrency: Option<Concurrency>,
) -> Result<(), String> {
    if slo.is_none() && min_user_rate.is_none() && concurrency.is_none() {
        return Ok(());
    }
    let name = w.name.clone();
    let Task::Inference(inf) = &mut w.task else {
        return Err(format!(
            "a latency target and a concurrency apply to transformer inference workloads\nhint: `{name}` is not one"
        ));
    };
    if let Some(c) = concurrency {
        inf.load.concurrency = c;
    }
    if let Some(s) = slo {
        inf.load.slo = s;
    }
    if let Some(r) = min_user_rate {
        inf.load.slo.min_user_rate = Some(r);
    }
    inf.load = with_target(inf.load, inf.batch);
    Ok(())
}

/// Requests per instance `m` runs (its own, else the workload's batch).
pub fn batch_of(w: &Workload, m: &Mapping) -> u64 {
    match inference(w) {
        Some(_) if m.batch > 0 => m.batch,
        Some(i) => i.batch,
        None => 0,
    }
}

/// Seconds one prompt's prefill takes alone on its instance, by the same interpreter.
pub fn prefill_time(sys: &System, w: &Workload, m: &Mapping, n: u64, mach: &Machine) -> f64 {
    match lower::lower_prefill(sys, w, m, n) {
        Ok(p) => cpu::eval(&p, mach).step_time,
        Err(_) => f64::INFINITY,
    }
}

/// The serving figures of `round` (the lowered round of `w` under `m`, evaluated as `e`);
/// `None` for anything but a feasible transformer inference.
pub fn figures(
    sys: &System,
    w: &Workload,
    m: &Mapping,
    n: u64,
    e: &Eval,
    mach: &Machine,
) -> Option<Serving> {
    let inf = inference(w)?;
    if !e.feasible {
        return None;
    }
    let b = batch_of(w, m);
    let prefill_s = prefill_time(sys, w, m, n, mach);
    let tpot = e.step_time;
    Some(Serving {
        concurrency: b * m.dp,
        prompt_tokens: inf.prompt,
        output_tokens: inf.output,
        ttft_s: ttft(prefill_s, tpot, b as f64),
        tpot_s: tpot,
        user_tokens_per_s: 1.0 / tpot,
        system_tokens_per_s: e.throughput,
        prefill_s,
    })
}

/// The most requests in flight over the system whose paged KV cache (and the activations that
/// grow with them) fit beside the weights, on the tightest stage: each stage's footprint is
/// linear in the requests per instance past a few, so two lowerings (64 and 128 requests) give
/// its slope and intercept, solved against the device's largest memory tier (main memory where
/// it has one). `None` for anything but transformer inference.
pub fn max_concurrency(sys: &System, w: &Workload, m: &Mapping, n: u64) -> Option<u64> {
    inference(w)?;
    let (b0, b1) = (64u64, 128u64);
    let p0 = lower::lower(sys, w, &Mapping { batch: b0, ..*m }, n).ok()?;
    let p1 = lower::lower(sys, w, &Mapping { batch: b1, ..*m }, n).ok()?;
    let mach = lower::machine(sys, n);
    let tier = if mach[Tier::Hbm.slots().capacity] > 0.0 {
        Tier::Hbm
    } else {
        Tier::Sram
    };
    let cap = mach[tier.slots().capacity];
    let mut best = f64::INFINITY;
    for (s0, s1) in p0.stage_list().iter().zip(p1.stage_list().iter()) {
        let (f0, f1) = (&s0.footprint, &s1.footprint);
        // model state in a weight store does not take the device's memory
        let state = |f: &super::program::Footprint| match cpu::place(f, &mach) {
            Some((Tier::External, _)) => 0.0,
            _ => f.state(),
        };
        let (n0, n1) = (state(f0) + f0.working(), state(f1) + f1.working());
        let slope = (n1 - n0) / (b1 - b0) as f64;
        if slope <= 0.0 {
            continue;
        }
        let intercept = n0 - slope * b0 as f64;
        best = best.min(((cap - intercept) / slope).floor().max(0.0));
    }
    best.is_finite().then(|| best as u64 * m.dp)
}

/// `m` with the requests per instance the workload's load asks for: its batch (unchanged), a
/// total split over the instances, or as many as the KV cache holds. `Err`: why it cannot.
pub fn resolve(sys: &System, w: &Workload, m: Mapping, n: u64) -> Result<Mapping, Reason> {
    let Some(inf) = inference(w) else {
        return Ok(m);
    };
    match inf.load.concurrency {
        Concurrency::Workload => Ok(m),
        Concurrency::Total(c) => {
            if !c.is_multiple_of(m.dp) {
                return Err(Reason::mapping(format!(
                    "{c} requests in flight do not split evenly over {} model instances",
                    m.dp
                )));
            }
            Ok(Mapping {
                batch: c / m.dp,
                ..m
            })
        }
        Concurrency::Max => {
            let per = max_concurrency(sys, w, &m, n).unwrap_or(0) / m.dp;
            Ok(Mapping {
                batch: per.max(1),
                ..m
            })
        }
    }
}

/// The requests-per-instance choices the search tries for `m` under `load`: the one the load
/// resolves to, and with a latency target and a free concurrency, every power of two below it
/// (fewer requests: faster rounds).
pub fn batches(sys: &System, w: &Workload, m: Mapping, n: u64, load: &Load) -> Vec<Mapping> {
    let Ok(top) = resolve(sys, w, m, n) else {
        return Vec::new();
    };
    let mut out = vec![top];
    if load.concurrency == Concurrency::Max && !load.slo.is_empty() {
        let mut b = 1;
        while b < top.batch {
            out.push(Mapping { batch: b, ..m });
            b *= 2;
        }
    }
    out
}

/// How far a point is from `slo` (≤ 1: met), computing the prefill only when it has a TTFT
/// bound.
pub fn violation(
    sys: &System,
    w: &Workload,
    m: &Mapping,
    n: u64,
    e: &Eval,
    mach: &Machine,
    slo: &Slo,
) -> f64 {
    let tpot = e.step_time;
    let ttft_v = if slo.ttft_s.is_some() {
        ttft(
            prefill_time(sys, w, m, n, mach),
            tpot,
            batch_of(w, m) as f64,
        )
    } else {
        0.0
    };
    slo.violation(ttft_v, tpot)
}

/// One system's throughput-latency curve: an estimate at each concurrency (requests in flight
/// over the system, doubling from 1), each at its best mapping for that load (and target),
/// until the KV cache holds no more.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    pub system: String,
    pub workload: String,
    /// The latency target every point was searched under (`None`: none).
    pub slo: Option<String>,
    pub points: Vec<super::Estimate>,
}

/// The curve of `w` on `sys`: concurrency 1, 2, 4, … up to `limit` (and the largest that
/// fits, where the doubling overshoots it), each point [`super::estimate`]d with that load.
/// Stops at the first concurrency that does not fit (that point is kept, infeasible, with its
/// reason).
pub fn curve(
    sys: &System,
    w: &Workload,
    choice: &super::MappingChoice,
    devices: Option<u64>,
    limit: u64,
) -> Curve {
    let slo = load_of(w).slo;
    let at = |c: u64| {
        let mut w = w.clone();
        if let Task::Inference(inf) = &mut w.task {
            inf.load.concurrency = Concurrency::Total(c);
        }
        super::estimate(sys, &w, choice, devices)
    };
    let mut points: Vec<super::Estimate> = Vec::new();
    let mut c = 1;
    while c <= limit.max(1) {
        let e = at(c);
        let stop = !e.feasible;
        let cap = e.max_concurrency;
        points.push(e);
        if stop {
            break;
        }
        // the largest that fits, where the next doubling would overshoot it
        if let Some(cap) = cap {
            if cap > c && cap < 2 * c && cap <= limit {
                points.push(at(cap));
            }
        }
        c *= 2;
    }
    Curve {
        system: sys.name.clone(),
        workload: w.name.clone(),
        slo: (!slo.is_empty()).then(|| slo.describe()),
        points,
    }
}

/// The load a comparison puts on every system: a serving workload's `batch`, unless a load is
/// already set, becomes requests in flight over the whole system (not per model copy), so every
/// system serves the same users. Other workloads are left as they are. `compare` in the CLI and
/// in the Python package both call this.
pub fn one_load(w: &mut Workload) {
    if let Task::Inference(inf) = &mut w.task {
        if inf.load.concurrency == Concurrency::Workload {
            inf.load.concurrency = Concurrency::Total(inf.batch);
        }
    }
}

/// The load and latency target a comparison states in its header and JSON (`concurrency`,
/// `slo`): requests in flight (`"max"` for as many as fit) and the target, for a serving workload;
/// `(None, None)` otherwise.
pub fn stated_load(w: &Workload) -> (Option<String>, Option<String>) {
    match &w.task {
        Task::Inference(inf) => (
            Some(match inf.load.concurrency {
                Concurrency::Total(n) => n.to_string(),
                Concurrency::Max => "max".into(),
                Concurrency::Workload => inf.batch.to_string(),
            }),
            (!inf.load.slo.is_empty()).then(|| inf.load.slo.describe()),
        ),
        _ => (None, None),
    }
}
