//! Serving's throughput-latency curve (`tessera serve-curve`): an estimate at each concurrency,
//! each at its best mapping for that load. A driver on top of the full estimate, apart from
//! `serve.rs`, whose serving figures preparing and estimating use, so that `serve` needs neither.

use super::common::MappingChoice;
use super::estimate::Estimate;
use super::prepare::estimate;
use super::serve::load_of;
use crate::model::serving::Concurrency;
use crate::model::system::System;
use crate::model::workload::{Task, Workload};
use serde::Serialize;

/// One system's throughput-latency curve: an estimate at each concurrency (requests in flight
/// over the system, doubling from 1), each at its best mapping for that load (and target),
/// until the KV cache holds no more.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    pub system: String,
    pub workload: String,
    /// The latency target every point was searched under (`None`: none).
    pub slo: Option<String>,
    /// The fewest tokens/s per user the target allows (1 / its time per output token, or its
    /// per-user rate; the larger): where the picture draws it. `None`: the target bounds
    /// neither.
    pub min_user_rate: Option<f64>,
    pub points: Vec<Estimate>,
}

/// The curve of `w` on `sys`: concurrency 1, 2, 4, … up to `limit` (and the largest that
/// fits, where the doubling overshoots it), each point [`estimate`]d with that load.
/// Stops at the first concurrency that does not fit (that point is kept, infeasible, with its
/// reason).
pub fn curve(
    sys: &System,
    w: &Workload,
    choice: &MappingChoice,
    devices: Option<u64>,
    limit: u64,
) -> Curve {
    let slo = load_of(w).slo;
    let at = |c: u64| {
        let mut w = w.clone();
        if let Task::Inference(inf) = &mut w.task {
            inf.load.concurrency = Concurrency::Total(c);
        }
        estimate(sys, &w, choice, devices)
    };
    let mut points: Vec<Estimate> = Vec::new();
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
        min_user_rate: [slo.tpot_s.map(|t| 1.0 / t), slo.min_user_rate]
            .into_iter()
            .flatten()
            .reduce(f64::max),
        points,
    }
}
