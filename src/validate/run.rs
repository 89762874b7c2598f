//! Evaluating a case through the engine: resolving its mapping, predicting its metric (with the
//! run's evaluations, start-up and power boundary) and comparing it with the published value.

use super::case::{Case, Metric, Role};
use crate::engine::program::{Phase, Section};
use crate::engine::{self, cpu, MappingChoice};
use crate::model::system::System;
use crate::model::workload::{Target, Task, Workload};
use serde::Serialize;

/// The outcome of one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub id: String,
    pub family: String,
    /// `calibration` or `check`.
    pub role: Role,
    pub metric: Metric,
    pub published: f64,
    /// `None` when the estimate is infeasible.
    pub predicted: Option<f64>,
    /// (predicted − published) / published.
    pub error: Option<f64>,
    pub tolerance: f64,
    pub within: bool,
    pub fitted: bool,
    pub known_gap: bool,
    pub source: String,
    pub file: String,
    pub system: String,
    /// The system's device (part), by name: what `bands` maps a system without a case to.
    pub device: String,
    /// The software stack it ran on (`run: (software: …)`), by name.
    pub software: Option<String>,
    pub workload: String,
    /// `training` or `serving`.
    pub task: crate::model::band::TaskKind,
    pub devices: u64,
    /// The mapping evaluated, in words; or why the case could not be evaluated.
    pub detail: String,
}

/// What [`evaluate`] gives besides the estimate.
struct Extra {
    /// Per step, the share of operator time spent in forward passes (for evaluation passes).
    fwd_share: f64,
    /// Model state (weights, gradients, optimizer state) per device of the stage class that
    /// holds the most memory, in bytes.
    state_bytes: f64,
}

/// Resolve the mapping and evaluate `w` on `n` devices: the estimate and what else a metric
/// reads from the program ([`Extra`]).
fn evaluate(
    sys: &System,
    w: &Workload,
    choice: &MappingChoice,
    n: u64,
) -> Result<(engine::Estimate, Extra), String> {
    let prep = engine::prepare(sys, w, choice, Some(n)).map_err(|i| i.reason.to_string())?;
    let (m, p, mach) = (prep.mapping, prep.program, prep.machine);
    let e = engine::finish(sys, w, &m, &p, &mach);
    if !e.feasible {
        return Err(e.reason.clone().unwrap_or_else(|| "infeasible".into()));
    }
    let mut trace = Vec::new();
    cpu::eval_traced(&p, &mach, Some(&mut trace));
    let (mut fwd, mut all) = (0.0, 0.0);
    for (i, op) in cpu::running(&p, &mach).ops(&p) {
        let t = trace.get(i).unwrap_or(&0.0);
        if op.section == Section::MicroBatch {
            all += t;
            if op.phase == Phase::Forward {
                fwd += t;
            }
        }
    }
    let share = if all > 0.0 { fwd / all } else { 1.0 };
    Ok((
        e,
        Extra {
            fwd_share: share,
            state_bytes: p.footprint.state(),
        },
    ))
}

fn mapping_words(e: &engine::Estimate) -> String {
    match &e.mapping {
        Some(m) => {
            let shard = m
                .hybrid_shard()
                .map_or(String::new(), |g| format!(" shard {g}"));
            let layers = m
                .recompute_layers
                .map_or(String::new(), |n| format!(" on {n} layers"));
            format!(
                "dp {} tp {} pp {} cp {} v {} mb {} zero {}{shard} {}{layers}",
                m.dp, m.tp, m.pp, m.cp, m.interleave, m.micro_batch, m.zero, m.recompute
            )
            .to_lowercase()
        }
        None => String::new(),
    }
}

fn global_batch(w: &Workload) -> Option<u64> {
    match &w.task {
        Task::Training(t) => Some(t.global_batch),
        _ => None,
    }
}

/// The power of `w` on `n` devices of `sys` serving `rate` units per second (`run: (at_rate:
/// …)`): the program's work per step at the model's operating point spread over the step the
/// rate gives. At full clock a step's power is affine in its inverse length, P(T) = P₀ + D / T
/// (static and fixed parts P₀, the work's dynamic energy D); the program is evaluated at its own
/// step and again with the devices idle for as long again after it (a host step of that length:
/// static power only), which gives P₀ and D, and P(units / rate) follows. A rate the devices
/// could not sustain within their power limit is refused, as is a model that is power-limited
/// at its own rate (its clock, so its energy per unit, would differ).
fn power_at_rate(
    sys: &System,
    w: &Workload,
    choice: &MappingChoice,
    n: u64,
    rate: f64,
) -> Result<(f64, String), String> {
    use crate::engine::table as t;
    let prep = engine::prepare(sys, w, choice, Some(n)).map_err(|i| i.reason.to_string())?;
    let (p, m) = (prep.program, prep.machine);
    let e = engine::finish(sys, w, &prep.mapping, &p, &m);
    if !e.feasible {
        return Err(e.reason.clone().unwrap_or_else(|| "infeasible".into()));
    }
    let words = mapping_words(&e);
    let a = cpu::eval(&p, &m);
    let mut p2 = p.clone();
    let mut m2 = m.clone();
    let h = p.host_steps;
    p2.host_steps = h + 1.0;
    m2[t::STEP_OVERHEAD] = (h * m[t::STEP_OVERHEAD] + a.step_time) / (h + 1.0);
    let b = cpu::eval(&p2, &m2);
    if a.throttle < 1.0 || b.throttle < 1.0 {
        return Err(format!(
            "the devices are power-limited at the model's own rate ({:.3e}/s): a power at a fixed rate needs them at full clock",
            a.throughput
        ));
    }
    let (ta, tb) = (a.step_time, b.step_time);
    let affine = |pa: f64, pb: f64| {
        let d = (pa - pb) / (1.0 / ta - 1.0 / tb);
        (pa - d / ta, d)
    };
    let step = p.units_per_step / rate;
    let (p0, d) = affine(a.average_power, b.average_power);
    let (q0, dd) = affine(a.device_power, b.device_power);
    let device = q0 + dd / step;
    let limit = cpu::power_limit(&m);
    if device > limit * (1.0 + 1e-9) {
        return Err(format!(
            "at {rate:.6e}/s a device would draw {device:.4e} W, above its limit of {limit:.4e} W: the model cannot run at the published rate"
        ));
    }
    Ok((p0 + d / step, format!("{words}, at {rate:.6e}/s")))
}

/// Predict the case's metric.
pub fn predict(c: &Case) -> Result<(f64, String), String> {
    let n = c.devices.unwrap_or(c.system.devices);
    // The published figure's boundary is the system's for this case.
    let mut sys = c.system.clone();
    sys.power_boundary = c.boundary;
    if let (Some(rate), Metric::AveragePower) = (c.at_rate, c.metric) {
        return power_at_rate(&sys, &c.workload, &c.mapping, n, rate);
    }
    let (e, extra) = evaluate(&sys, &c.workload, &c.mapping, n)?;
    let fwd_share = extra.fwd_share;
    let words = mapping_words(&e);
    let step = e.step_time_s.unwrap_or(f64::NAN);
    let power = e.average_power_w.unwrap_or(f64::NAN);
    // Wall-clock time of the whole run: training steps, the run's evaluations (forward passes
    // over the evaluation set, in whole micro-batches per data-parallel rank, at the training
    // step's forward cost) and start-up.
    let run_time = || -> Result<f64, String> {
        let train = e
            .time_to_train_s
            .ok_or("the workload sets no training target")?;
        let eval = match (c.evaluation, global_batch(&c.workload), &c.workload.task) {
            (Some((start, every, samples)), Some(gb), Task::Training(t)) => {
                let trained = match t.target {
                    Some(Target::Samples(s)) => s,
                    Some(Target::Tokens(x)) => x / t.seq as f64,
                    Some(Target::Steps(x)) => x * gb as f64,
                    None => 0.0,
                };
                let evals = if trained >= start {
                    ((trained - start) / every).floor() + 1.0
                } else {
                    0.0
                };
                // each data-parallel rank runs whole micro-batches of the evaluation set (the
                // last one padded): ceil(samples / (dp × micro-batch)) forward passes, at the
                // training step's forward time per micro-batch
                let (dp, mb) = e
                    .mapping
                    .as_ref()
                    .map(|m| (m.dp as f64, m.micro_batch as f64))
                    .unwrap_or((1.0, 1.0));
                let per_rank = (samples / (dp * mb)).ceil() * mb * dp;
                // (the stack's per-step time is no part of a forward pass)
                let host = sys.software.as_ref().map_or(0.0, |s| s.step_overhead);
                evals * per_rank * (step - host).max(0.0) * fwd_share / gb as f64
            }
            _ => 0.0,
        };
        Ok(train + eval + c.startup_s)
    };
    let v = match c.metric {
        Metric::StepTime => step,
        Metric::Throughput => e.throughput_per_s.unwrap_or(f64::NAN),
        Metric::Mfu => e.mfu.unwrap_or(f64::NAN),
        Metric::TimeToTrain => run_time()?,
        Metric::AveragePower => power,
        Metric::Energy => power * run_time()?,
        Metric::RatedCarbon => {
            let rated = e.rated_power_w.ok_or("the estimate gives no rated power")?;
            rated * run_time()? * sys.economics.grid_intensity
        }
        Metric::RentedCost => {
            let price = sys.economics.rental_usd_per_s.ok_or(
                "the system gives no rental price (`cost.rental`; set it in the case's `set`)",
            )?;
            n as f64 * run_time()? * price
        }
        Metric::PeakMemory => e.memory_per_device_bytes.unwrap_or(f64::NAN),
        Metric::StateMemory => extra.state_bytes,
        Metric::Goodput | Metric::Mtbf => {
            let g = e.goodput.as_ref().ok_or(
                "the system states no reliability and storage (or the task is not training): no goodput",
            )?;
            match c.metric {
                Metric::Goodput => g.fraction,
                _ => g.mtbf_s.unwrap_or(f64::NAN),
            }
        }
        Metric::ScalingEfficiency => {
            let b = c.baseline.unwrap_or(1);
            let mut wb = c.workload.clone();
            if let Task::Training(t) = &mut wb.task {
                // weak scaling: the baseline keeps the per-device batch
                let per = t.global_batch as f64 / n as f64;
                t.global_batch = ((per * b as f64).round() as u64).max(1);
            }
            let choice = match &c.mapping {
                MappingChoice::Given(spec) => {
                    let mut s = spec.clone();
                    s.dp = None;
                    MappingChoice::Given(s)
                }
                a => a.clone(),
            };
            let (eb, _) = evaluate(&c.system, &wb, &choice, b)
                .map_err(|r| format!("baseline on {b} devices: {r}"))?;
            let per_n = e.throughput_per_s.unwrap_or(0.0) / n as f64;
            let per_b = eb.throughput_per_s.unwrap_or(0.0) / b as f64;
            per_n / per_b
        }
    };
    if !v.is_finite() {
        return Err(format!("the estimate gives no {}", c.metric.name()));
    }
    Ok((v, words))
}

/// Evaluate a case against its published value.
pub fn run_case(c: &Case) -> CaseResult {
    let n = c.devices.unwrap_or(c.system.devices);
    let (predicted, detail) = match predict(c) {
        Ok((v, d)) => (Some(v), d),
        Err(r) => (None, r),
    };
    let error = predicted.map(|p| (p - c.published) / c.published);
    CaseResult {
        id: c.id.clone(),
        family: c.family.clone(),
        role: c.role,
        metric: c.metric,
        published: c.published,
        predicted,
        error,
        tolerance: c.tolerance,
        within: error.is_some_and(|e| e.abs() <= c.tolerance),
        fitted: c.fitted,
        known_gap: c.known_gap,
        source: c.citation.clone(),
        file: c.file.clone(),
        system: c.system.name.clone(),
        device: c.system.device.name.clone(),
        software: c.system.software.as_ref().map(|s| s.name.clone()),
        workload: c.workload.name.clone(),
        task: crate::model::band::TaskKind::of(&c.workload),
        devices: n,
        detail,
    }
}
