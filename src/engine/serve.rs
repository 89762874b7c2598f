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
    /// One prompt's prefill alone on its instance (s); disaggregated, on a prefill pool's
    /// instance with its KV cache's transfer to the decode instance.
    pub prefill_s: f64,
    /// The prompts' prefill runs on a separate pool of devices ([`Mapping::pool`]) rather than
    /// interleaved into the decode rounds.
    pub disaggregated: bool,
    /// The same run with requests arriving at random (Poisson) at the same mean rate: see
    /// [`tail`]. At the 99th percentile, or the target's own percentile where it states one.
    pub tail: Tail,
}

/// A serving point's latencies at a percentile of requests when they arrive at random (a
/// Poisson stream at the rate the steady state serves) instead of evenly spaced: see [`tail`].
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Tail {
    /// The quantile (0.99: the 99th percentile).
    pub quantile: f64,
    /// Time to first token at that quantile (s): the steady state's [`ttft`] plus the wait in
    /// the prefill queue at that quantile (infinite where the prefill queue is saturated).
    pub ttft_s: f64,
    /// A request's time per output token at that quantile (s).
    pub tpot_s: f64,
    /// Requests arriving per second on each model instance.
    pub arrival_rate_per_s: f64,
    /// The share of its time each instance's prefill works (arrival rate × service time; ≥ 1:
    /// saturated); disaggregated, each prefill pool instance's.
    pub utilization: f64,
}

/// The standard normal quantile Φ⁻¹(q), 0 < q < 1: Abramowitz & Stegun (1964), Handbook of
/// Mathematical Functions, 26.2.23 (rational approximation, |error| < 4.5e-4).
pub fn normal_quantile(q: f64) -> f64 {
    let q = q.clamp(1e-12, 1.0 - 1e-12);
    let (p, sign) = if q > 0.5 { (1.0 - q, 1.0) } else { (q, -1.0) };
    let t = (-2.0 * p.ln()).sqrt();
    let x = t
        - (2.515517 + 0.802853 * t + 0.010328 * t * t)
            / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t);
    sign * x
}

/// The wait in an M/D/1 queue at quantile `q`: Poisson arrivals at `lambda` per second, each
/// served for `s` seconds, first come first served. Its mean is the Pollaczek–Khinchine formula
/// for a constant service time, W = ρ s / (2 (1 − ρ)) with ρ = λ s (Kleinrock 1975, Queueing
/// Systems vol. I, §5.5–5.7, the P-K mean-value formula with E[S²] = s²); its distribution is
/// taken exponential beyond the probability ρ of waiting at all, P(W > t) = ρ e^{−ρ t / W}, which
/// is exact for M/M/1 (Kleinrock vol. I, §5.8: P(W > t) = ρ e^{−(μ − λ) t}, whose W/ρ = 1/(μ − λ))
/// and is Kingman's (1962, "On queues in heavy traffic", J. R. Stat. Soc. B 24) exponential
/// heavy-traffic limit of the G/G/1 wait. Hence t_q = (W/ρ) ln(ρ / (1 − q)) where ρ > 1 − q,
/// else 0 (fewer than 1 − q of the requests wait at all). Infinite when ρ ≥ 1.
pub fn md1_wait(lambda: f64, s: f64, q: f64) -> f64 {
    let rho = lambda * s;
    if rho >= 1.0 || !rho.is_finite() {
        return f64::INFINITY;
    }
    if rho <= 1.0 - q || rho <= 0.0 {
        return 0.0;
    }
    let mean = rho * s / (2.0 * (1.0 - rho));
    mean / rho * (rho / (1.0 - q)).ln()
}

/// Latencies at quantile `q` of requests arriving at random, from the model's own times: the
/// prefill of one prompt alone (`prefill_s`, through `stages` pipeline stages), the steady-state
/// round (`tpot_s`) with `batch` requests in flight on the instance, and the round's growth per
/// request in flight (`slope`, s: the round program's at B and a neighbouring B); `output`
/// tokens per request. No fitted constant.
///
/// - Arrivals: the rate the steady state serves, λ = B / (output × TPOT) per instance (Little's
///   law on the decode phase), a Poisson stream (MLPerf loadgen's server scenario).
/// - TTFT: the prompts queue for the instance's prefill first come first served, each holding
///   it for the prefill's bottleneck stage, s = prefill / stages (pipelined prompts follow each
///   other a stage apart): an M/D/1 queue at the workload's mean prompt ([`md1_wait`]); the
///   TTFT at `q` is the steady state's [`ttft`] plus that wait. The prefill gets the whole
///   instance while it runs (no chunk budget is modelled), so the wait is a lower bound.
/// - TPOT: a request's time per output token is the mean of the rounds over its life (L =
///   output × TPOT). Each round costs d₀ + d₁ N + (prefill share), N the requests in flight (a
///   Poisson count for Poisson arrivals, M/G/∞) and each prompt joining adds s to one round.
///   Over the request's life the round sum is a Poisson shot noise whose variance (Campbell's
///   theorem) is λ ∫ g(a)² da with g(a) = d₁ × (the share of the request's life the request
///   arriving at a overlaps) + s / output × (it joins during the life), i.e.
///   B (2 d₁²/3 + d₁ c + c²) with c = s / output and d₁ = slope − c; the TPOT at `q` is the
///   mean plus Φ⁻¹(q) standard deviations (central limit: many requests share a life). Output
///   lengths are the mean for every request (the spread real outputs add is not modelled).
pub fn tail(
    prefill_s: f64,
    stages: u64,
    tpot_s: f64,
    slope: f64,
    batch: f64,
    output: u64,
    q: f64,
) -> Tail {
    tail_on(prefill_s, stages, tpot_s, slope, batch, output, q, None)
}

/// [`tail`], the prefill interleaved (`pool: None`) or on a prefill pool of `pool` instances
/// per decode instance (disaggregated, [`Mapping::pool`]). Disaggregated, the prompts queue for
/// the pool's instances: each pool instance an M/D/1 server of the prompts a share 1 / `pool`
/// of a decode instance's arrivals brings it (the pool's instances share the arrivals evenly),
/// each held for the prefill alone on it (`prefill_s`, one stage); and the rounds carry no
/// prefill share (c = 0 above), their spread only the requests in flight's.
#[allow(clippy::too_many_arguments)]
pub fn tail_on(
    prefill_s: f64,
    stages: u64,
    tpot_s: f64,
    slope: f64,
    batch: f64,
    output: u64,
    q: f64,
    pool: Option<f64>,
) -> Tail {
    let b = batch.max(1.0);
    let out = output.max(1) as f64;
    let lambda = b / (out * tpot_s);
    let (server_rate, s) = match pool {
        Some(r) => (lambda / r.max(f64::MIN_POSITIVE), prefill_s),
        None => (lambda, prefill_s / stages.max(1) as f64),
    };
    let rho = server_rate * s;
    let ttft_q = ttft_on(prefill_s, tpot_s, b, pool.is_some()) + md1_wait(server_rate, s, q);
    let c = if pool.is_some() { 0.0 } else { s / out };
    let d1 = (slope - c).max(0.0);
    let var = b * (2.0 * d1 * d1 / 3.0 + d1 * c + c * c);
    let tpot_q = tpot_s + normal_quantile(q).max(0.0) * var.sqrt();
    Tail {
        quantile: q,
        ttft_s: ttft_q,
        tpot_s: tpot_q,
        arrival_rate_per_s: lambda,
        utilization: rho,
    }
}

/// The quantile a serving estimate reports its tail at when its target states none.
pub const REPORTED_QUANTILE: f64 = 0.99;

/// The round's growth per request in flight (s) around `m`'s requests per instance, by the same
/// lowering and interpreter: the round at B against the round at B/2 (at 2 for one request; 0
/// where that does not fit).
pub fn round_slope(
    sys: &System,
    w: &Workload,
    m: &Mapping,
    n: u64,
    tpot_s: f64,
    mach: &Machine,
) -> f64 {
    let b = batch_of(w, m).max(1);
    let other = if b >= 2 { b / 2 } else { 2 };
    match lower::lower(sys, w, &Mapping { batch: other, ..*m }, n) {
        Ok(p) => {
            let e = cpu::eval(&p, mach);
            if e.feasible && other != b {
                ((tpot_s - e.step_time) / (b as f64 - other as f64)).max(0.0)
            } else {
                0.0
            }
        }
        Err(_) => 0.0,
    }
}

/// [`tail`] of the round `e` of `w` under `m` at quantile `q` (the prefill and the round's
/// slope by the same lowering and interpreter).
pub fn tail_of(
    sys: &System,
    w: &Workload,
    m: &Mapping,
    n: u64,
    e: &Eval,
    mach: &Machine,
    q: f64,
) -> Tail {
    let prefill_s = prefill_time(sys, w, m, n, mach);
    let out = inference(w).map(|i| i.output).unwrap_or(1);
    let slope = round_slope(sys, w, m, n, e.step_time, mach);
    tail_on(
        prefill_s,
        m.pp,
        e.step_time,
        slope,
        batch_of(w, m) as f64,
        out,
        q,
        pool_share(m),
    )
}

/// A disaggregated mapping's prefill pool instances per decode instance (`None`: interleaved).
pub fn pool_share(m: &Mapping) -> Option<f64> {
    m.pool
        .any()
        .then(|| m.pool.instances as f64 / m.dp.max(1) as f64)
}

/// Time to first token in steady-state continuous batching with the prefill interleaved into
/// the decode rounds: the prompt's prefill (alone on its instance, `prefill_s`), plus the
/// decode of the other requests in flight it shares its round with, (B − 1)/B of a round
/// (`tpot_s`; B requests per instance). One request alone: its prefill. No queueing delay (the
/// joins evenly spaced; [`tail`] adds the wait of requests arriving at random). The one place
/// the two programs' times combine (with [`ttft_on`]).
pub fn ttft(prefill_s: f64, tpot_s: f64, batch: f64) -> f64 {
    ttft_on(prefill_s, tpot_s, batch, false)
}

/// [`ttft`], the prefill interleaved (`pooled` false) or disaggregated (`pooled`: on a prefill
/// pool's instance, `prefill_s` then being that prefill and its KV cache's transfer to the
/// decode instance): the first token comes from the pool's prefill (its output head), and the
/// decode instance's rounds do not hold it up, so it is `prefill_s` alone (the phases apart, as
/// DistServe, arXiv 2401.09670, and Splitwise, arXiv 2311.18677, run them).
pub fn ttft_on(prefill_s: f64, tpot_s: f64, batch: f64, pooled: bool) -> f64 {
    if pooled {
        return prefill_s;
    }
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
    let q = inf.load.slo.quantile().unwrap_or(REPORTED_QUANTILE);
    Some(Serving {
        concurrency: b * m.dp,
        prompt_tokens: inf.prompt,
        output_tokens: inf.output,
        ttft_s: ttft_on(prefill_s, tpot, b as f64, m.pool.any()),
        tpot_s: tpot,
        user_tokens_per_s: 1.0 / tpot,
        system_tokens_per_s: e.throughput,
        prefill_s,
        disaggregated: m.pool.any(),
        tail: tail_of(sys, w, m, n, e, mach, q),
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
    // the main tier, less what the software stack keeps for itself
    let cap = cpu::usable_capacity(cpu::main_tier(&mach), &mach);
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
/// bound: on the steady state's mean figures, or, where the target states a percentile, on the
/// [`tail`] at it.
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
    if let Some(q) = slo.quantile() {
        let t = tail_of(sys, w, m, n, e, mach, q);
        return slo.violation(t.ttft_s, t.tpot_s);
    }
    let ttft_v = if slo.ttft_s.is_some() {
        ttft_on(
            prefill_time(sys, w, m, n, mach),
            tpot,
            batch_of(w, m) as f64,
            m.pool.any(),
        )
    } else {
        0.0
    };
    slo.violation(ttft_v, tpot)
}

/// Whether a serving estimate's figures meet `slo` (the mean ones, or the tail at its
/// percentile).
pub fn met(sv: &Serving, slo: &Slo) -> bool {
    if slo.quantile().is_some() {
        slo.met(sv.tail.ttft_s, sv.tail.tpot_s)
    } else {
        slo.met(sv.ttft_s, sv.tpot_s)
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
