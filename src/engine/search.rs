//! `--mapping auto`: enumerate every legal mapping of a workload on N devices, evaluate each, and
//! keep the best by time or energy, with the runners-up and the most common reason others failed.

pub use super::candidates::{candidates, candidates_with_bases};
use super::common::Objective;
use super::program::{Eval, Footprint, Program};
use super::reason::Reason;
use super::{cpu, lower, serve};
use crate::model::mapping::Mapping;
use crate::model::serving::Concurrency;
use crate::model::system::System;
use crate::model::workload::{Task, Workload};
use rayon::prelude::*;
use std::collections::BTreeMap;

pub struct SearchResult {
    /// Feasible mappings, best first.
    pub ranked: Vec<(Mapping, Eval)>,
    pub tried: usize,
    /// Reasons mappings were infeasible (without their figures), with counts.
    pub reasons: BTreeMap<String, usize>,
    /// With a latency target: whether the ranked mappings meet it (`false`: none does, and
    /// `ranked` holds the feasible ones closest to it first).
    pub slo_met: Option<bool>,
}

impl SearchResult {
    pub fn best(&self) -> Option<&(Mapping, Eval)> {
        self.ranked.first()
    }
    /// Why no mapping was feasible: the most common reason.
    pub fn why_none(&self) -> Reason {
        Reason::NoFeasibleMapping {
            tried: self.tried,
            most_often: self
                .reasons
                .iter()
                .max_by_key(|(_, c)| **c)
                .map(|(r, c)| (r.clone(), *c)),
        }
    }
}

/// Seconds per unit of work (time) or joules per unit of work (energy): lower is better.
pub fn cost(e: &Eval, obj: Objective) -> f64 {
    match obj {
        Objective::Time => 1.0 / e.throughput,
        Objective::Energy => e.energy_per_step / (e.throughput * e.step_time),
    }
}

/// Lower and evaluate one mapping: its evaluation or why it cannot run, and its program where
/// it lowers.
fn evaluate(
    sys: &System,
    w: &Workload,
    m: &Mapping,
    n: u64,
    mach: &super::program::Machine,
) -> (Result<Eval, Reason>, Option<Program>) {
    match lower::lower(sys, w, m, n) {
        Ok(p) => {
            let e = cpu::eval(&p, mach);
            if e.feasible {
                (Ok(e), Some(p))
            } else {
                let r = e.reason().unwrap_or_else(|| Reason::mapping("infeasible"));
                (Err(r), Some(p))
            }
        }
        Err(r) => (Err(r), None),
    }
}

/// One evaluated serving point: the mapping (with its requests per instance), its round (or why
/// it cannot run) and, with a latency target, how far it is from it (≤ 1: met).
pub type Point = (Mapping, Result<Eval, Reason>, f64);

/// Every point the search evaluates for one candidate mapping `m` under `w`'s load: the requests
/// per instance [`serve::batches`] gives; and, with a latency target and a free concurrency
/// (`max`), the largest number of requests that still meets it, found by bisection between the
/// largest tried that meets it and the smallest above it that does not (to 1 % or one request),
/// so the server scenario's load is not rounded down to a power of two. A looser target never
/// ends lower: every probe the tighter one passed, the looser one passes too.
pub fn points(
    sys: &System,
    w: &Workload,
    m: Mapping,
    n: u64,
    mach: &super::program::Machine,
) -> Vec<Point> {
    let load = serve::load_of(w);
    let slo = load.slo;
    let list = match &w.task {
        Task::Inference(_) if load != Default::default() => serve::batches(sys, w, m, n, &load),
        _ => vec![m],
    };
    let eval = |m: &Mapping| -> Point {
        match evaluate(sys, w, m, n, mach).0 {
            Ok(e) => {
                let v = if slo.is_empty() {
                    0.0
                } else {
                    serve::violation(sys, w, m, n, &e, mach, &slo)
                };
                (*m, Ok(e), v)
            }
            Err(r) => (*m, Err(r), f64::INFINITY),
        }
    };
    let mut out: Vec<Point> = list.iter().map(eval).collect();
    if load.concurrency == Concurrency::Max && !slo.is_empty() {
        let meets = |p: &Point| p.1.is_ok() && p.2 <= 1.0;
        let lo = out.iter().filter(|p| meets(p)).map(|p| p.0.batch).max();
        if let Some(mut lo) = lo {
            let hi = out
                .iter()
                .filter(|p| p.0.batch > lo && !meets(p))
                .map(|p| p.0.batch)
                .min();
            if let Some(mut hi) = hi {
                while hi - lo > (lo / 100).max(1) {
                    let mid = lo + (hi - lo) / 2;
                    let p = eval(&Mapping { batch: mid, ..m });
                    if meets(&p) {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                    out.push(p);
                }
            }
        }
    }
    out
}

/// Evaluate every candidate and rank the feasible ones. A serving workload's load
/// (`serve::Load`) sets each candidate's requests per instance (with a latency target and a free
/// concurrency, several: [`points`]); with a target, the ranking keeps the mappings that meet it,
/// or, when none does, ranks the feasible ones by how close they come (`slo_met: Some(false)`).
pub fn search(sys: &System, w: &Workload, n: u64, obj: Objective) -> SearchResult {
    let mach = lower::machine(sys, n);
    let slo = serve::load_of(w).slo;
    let (cands, bases) = candidates_with_bases(sys, w, n);
    let mut has_variants = vec![false; cands.len()];
    for b in bases.iter().flatten() {
        has_variants[*b] = true;
    }
    // Every layout on all CPU cores (rayon), in two passes: the layouts themselves, then the
    // offloading variants of those short of device memory. Each pass collects in candidate order,
    // so the ranking (a stable sort) and its ties are those of one thread.
    let first: Vec<(Vec<Point>, Option<Short>)> = cands
        .par_iter()
        .enumerate()
        .map(|(i, c)| {
            if bases[i].is_some() {
                (Vec::new(), None)
            } else if has_variants[i] {
                // a training layout with offloading variants (one point, no load): its program
                // kept for what its stages hold, and by how much it is short of device memory
                let (e, p) = evaluate(sys, w, c, n, &mach);
                let short = match (&e, &p) {
                    (
                        Err(Reason::Memory {
                            needed,
                            available,
                            host: false,
                        }),
                        Some(p),
                    ) => Some((needed - available, largest_freeable(p))),
                    _ => None,
                };
                let v = if e.is_ok() { 0.0 } else { f64::INFINITY };
                (vec![(*c, e, v)], short)
            } else {
                (points(sys, w, *c, n, &mach), None)
            }
        })
        .collect();
    // Offloading to host memory moves more bytes and updates in a slower memory: it never makes
    // a layout that runs without it faster or cheaper, and frees device memory only. So it is
    // tried only where the layout falls short of device memory without it, by no more than the
    // offload could free (the largest stage's optimizer state, weights or resident activations).
    let second: Vec<Vec<Point>> = cands
        .par_iter()
        .enumerate()
        .map(|(i, c)| {
            let Some(b) = bases[i] else {
                return Vec::new();
            };
            let Some((gap, f)) = &first[b].1 else {
                return Vec::new();
            };
            let frees = if c.offload_optimizer > 0.0 {
                f.optimizer
            } else if c.offload_weights {
                f.weights
            } else {
                f.activations
            };
            if frees < *gap {
                return Vec::new();
            }
            points(sys, w, *c, n, &mach)
        })
        .collect();
    let mut ranked = Vec::new();
    let mut missed = Vec::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut tried = 0;
    let all = first.into_iter().map(|(p, _)| p).zip(second);
    for (m, e, v) in all.flat_map(|(a, b)| a.into_iter().chain(b)) {
        tried += 1;
        match e {
            Ok(e) if v <= 1.0 => ranked.push((m, e)),
            Ok(e) => missed.push((v, m, e)),
            // group memory reasons regardless of the exact byte counts
            Err(r) => *reasons.entry(r.summary()).or_default() += 1,
        }
    }
    ranked.sort_by(|a, b| cost(&a.1, obj).total_cmp(&cost(&b.1, obj)));
    let mut slo_met = (!slo.is_empty()).then_some(true);
    if ranked.is_empty() && !missed.is_empty() {
        // none meets the target: the closest first
        missed.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(cost(&a.2, obj).total_cmp(&cost(&b.2, obj)))
        });
        ranked = missed.into_iter().map(|(_, m, e)| (m, e)).collect();
        slo_met = Some(false);
    }
    SearchResult {
        ranked,
        tried,
        reasons,
        slo_met,
    }
}

/// How far a layout falls short of device memory, and what each kind of offload could free at
/// most ([`largest_freeable`]).
type Short = (f64, Footprint);

/// The most a stage of `p` holds of optimizer state, weights and resident activations (each
/// stage's own; the largest of each).
fn largest_freeable(p: &Program) -> Footprint {
    let mut f = p.footprint;
    for s in &p.stages {
        f.optimizer = f.optimizer.max(s.footprint.optimizer);
        f.weights = f.weights.max(s.footprint.weights);
        f.activations = f.activations.max(s.footprint.activations);
    }
    f
}

/// A given mapping's requests per instance under a latency target with a free concurrency
/// (`max`): of its [`points`], the highest throughput that meets the target, else the closest
/// to it; the load's own resolution otherwise (`None`: no point runs).
pub fn given_batch(sys: &System, w: &Workload, m: Mapping, n: u64) -> Option<Mapping> {
    let load = serve::load_of(w);
    if load.concurrency != Concurrency::Max || load.slo.is_empty() {
        return None;
    }
    let mach = lower::machine(sys, n);
    let pts: Vec<(Mapping, Eval, f64)> = points(sys, w, m, n, &mach)
        .into_iter()
        .filter_map(|(m, e, v)| e.ok().map(|e| (m, e, v)))
        .collect();
    let best_met = pts
        .iter()
        .filter(|p| p.2 <= 1.0)
        .max_by(|a, b| a.1.throughput.total_cmp(&b.1.throughput));
    let closest = || pts.iter().min_by(|a, b| a.2.total_cmp(&b.2));
    best_met.or_else(closest).map(|p| p.0)
}

/// Smaller device counts worth searching when `n` factorises badly for a training workload:
/// the largest power of two below `n` and the largest scale-up-domain multiple of the form
/// domain × 2^k below it (144 of 216 NVL72 GPUs), each a whole number of nodes. Empty for a
/// power of two and for inference (every instance is independent there).
fn fewer_devices(sys: &System, w: &Workload, n: u64) -> Vec<u64> {
    if !matches!(w.task, Task::Training(_)) || n.is_power_of_two() {
        return Vec::new();
    }
    let p2 = 1u64 << (63 - n.leading_zeros());
    let mut out = vec![p2];
    let dom = sys.scale_up_size().max(1);
    if dom > 1 && !dom.is_power_of_two() {
        let mut k = dom;
        while k * 2 <= n {
            k *= 2;
        }
        if k < n {
            out.push(k);
        }
    }
    whole_nodes(sys, n, out)
}

/// Keep the counts below `n` that are whole nodes (or part of one, for a request smaller than
/// a node), ascending and without repeats.
fn whole_nodes(sys: &System, n: u64, mut out: Vec<u64>) -> Vec<u64> {
    let node = (sys.node.devices as u64).max(1);
    out.retain(|&k| k >= 1 && k < n && (k % node == 0 || k < node));
    out.sort_unstable();
    out.dedup();
    out
}

/// Every smaller device count a training request for `n` devices searches besides `n` itself,
/// largest first: half of `n` and the counts [`fewer_devices`] gives, and, closed under the same
/// rule, theirs. The set for `n` holds the set for `n / 2` and for each of those counts, so with
/// the search deterministic a request never does worse than any smaller request it contains
/// (doubling the devices never lowers the best objective). Empty for inference.
pub fn subsets(sys: &System, w: &Workload, n: u64) -> Vec<u64> {
    if !matches!(w.task, Task::Training(_)) {
        return Vec::new();
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![n];
    while let Some(k) = todo.pop() {
        let mut next = fewer_devices(sys, w, k);
        if k % 2 == 0 {
            next.extend(whole_nodes(sys, k, vec![k / 2]));
        }
        for m in next {
            if seen.insert(m) {
                todo.push(m);
            }
        }
    }
    seen.into_iter().rev().collect()
}

/// Whether no mapping on `k` devices can beat the best of `res` under `obj`: for time, a step
/// can be no shorter than the model's work at full peak on `k` devices, which the best point's
/// own MFU gives (cost × MFU × devices is the work per unit at peak, the same for every point
/// of one workload). Energy has no such bound; it and a point without an MFU never stop early.
pub fn cannot_win(res: &SearchResult, obj: Objective, k: u64) -> bool {
    let Some((m, e)) = res.best() else {
        return false;
    };
    if obj != Objective::Time || !(e.mfu > 0.0 && e.mfu <= 1.0) {
        return false;
    }
    let best = cost(e, obj);
    let at_peak = best * e.mfu * m.devices() as f64;
    at_peak / k as f64 >= best
}
