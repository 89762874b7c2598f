//! Side-by-side comparison of systems on one workload, each also as a ratio to the first
//! (baseline) system, and scaling series over device counts.

use crate::engine::Estimate;
use serde::Serialize;

/// Ratios of a system's figures to the baseline's (None where either side is infeasible).
#[derive(Debug, Clone, Serialize, Default)]
pub struct Ratios {
    pub throughput: Option<f64>,
    pub time_to_train: Option<f64>,
    pub mfu: Option<f64>,
    pub average_power: Option<f64>,
    pub energy: Option<f64>,
    pub energy_per_unit: Option<f64>,
    pub perf_per_watt: Option<f64>,
    /// Cost per unit of work (`cost_per_unit_usd`) over the baseline's.
    pub cost_per_unit: Option<f64>,
    /// Carbon per unit of work (`carbon_kg_co2e`) over the baseline's.
    pub carbon: Option<f64>,
    /// Water per unit of work (`water_l`) over the baseline's.
    pub water: Option<f64>,
    /// Training with goodput on both sides: the expected time to train with failures,
    /// checkpoints and stragglers (`goodput.expected_time_to_train_s`) over the baseline's.
    pub expected_time_to_train: Option<f64>,
    /// Whether the two throughputs' error bands overlap (`error_band`): `true`, the ratio is
    /// within what the model's validation can tell apart; null where either is unvalidated or
    /// infeasible.
    pub throughput_bands_overlap: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CompareRow {
    #[serde(flatten)]
    pub estimate: Estimate,
    pub ratio_to_baseline: Ratios,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub workload: String,
    pub baseline: String,
    /// The one power boundary every system's power and energy count (`device` … `facility`).
    pub power_boundary: &'static str,
    /// With `--power-budget`: the budget (W) each system was fitted to, at that boundary.
    pub power_budget_w: Option<f64>,
    /// With `--power-budget`: what it was held against, `rated` (the rated power of what each
    /// system deploys, at the boundary) or `average` (the run's modelled average power).
    pub power_budget_basis: Option<&'static str>,
    /// With `--budget`: the capital budget (USD) each system was sized to, as many whole nodes
    /// as its deployed capital allows.
    pub budget_usd: Option<f64>,
    /// Serving: the requests in flight every system serves (`"64"`, or `"max"`: as many as fit).
    pub concurrency: Option<String>,
    /// Serving: the latency target every system is held to (`ttft<=2 s,tpot<=40 ms`).
    pub slo: Option<String>,
    /// With `--software`: the stack every system runs on (its name), else `null`.
    pub software: Option<String>,
    /// Training whose batch scales with the deployment, sized to a budget: the one global batch
    /// every system trained at, and the workload's stated batch it was scaled from (both null
    /// where the batch ran as stated).
    pub global_batch: Option<u64>,
    pub global_batch_scaled_from: Option<u64>,
    pub systems: Vec<CompareRow>,
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
        _ => None,
    }
}

/// Whether `e`'s and `b`'s throughputs, each with its error band, overlap.
fn overlap(e: &Estimate, b: &Estimate) -> Option<bool> {
    match (
        e.throughput_per_s,
        &e.error_band,
        b.throughput_per_s,
        &b.error_band,
    ) {
        (Some(x), Some(bx), Some(y), Some(by)) => {
            Some(crate::model::band::Band::overlap(x, bx, y, by))
        }
        _ => None,
    }
}

pub fn compare(estimates: Vec<Estimate>) -> Comparison {
    let base = estimates.first().cloned();
    let workload = base
        .as_ref()
        .map(|b| b.workload.clone())
        .unwrap_or_default();
    let baseline = base.as_ref().map(|b| b.system.clone()).unwrap_or_default();
    let power_boundary = base
        .as_ref()
        .map(|b| b.power_boundary)
        .unwrap_or("facility");
    debug_assert!(estimates.iter().all(|e| e.power_boundary == power_boundary));
    let scaled = estimates
        .iter()
        .find(|e| e.global_batch_scaled_from.is_some());
    let (global_batch, global_batch_scaled_from) = scaled
        .map(|e| (e.global_batch, e.global_batch_scaled_from))
        .unwrap_or_default();
    let systems = estimates
        .into_iter()
        .map(|e| {
            let r = match &base {
                Some(b) => Ratios {
                    throughput: ratio(e.throughput_per_s, b.throughput_per_s),
                    time_to_train: ratio(e.time_to_train_s, b.time_to_train_s),
                    mfu: ratio(e.mfu, b.mfu),
                    average_power: ratio(e.average_power_w, b.average_power_w),
                    energy: ratio(e.energy_j, b.energy_j),
                    energy_per_unit: ratio(e.energy_per_unit_j, b.energy_per_unit_j),
                    perf_per_watt: ratio(e.perf_per_watt, b.perf_per_watt),
                    cost_per_unit: ratio(e.cost_per_unit_usd, b.cost_per_unit_usd),
                    carbon: ratio(e.carbon_kg_co2e, b.carbon_kg_co2e),
                    water: ratio(e.water_l, b.water_l),
                    expected_time_to_train: ratio(
                        e.goodput.as_ref().and_then(|g| g.expected_time_to_train_s),
                        b.goodput.as_ref().and_then(|g| g.expected_time_to_train_s),
                    ),
                    throughput_bands_overlap: overlap(&e, b),
                },
                None => Ratios::default(),
            };
            CompareRow {
                estimate: e,
                ratio_to_baseline: r,
            }
        })
        .collect();
    Comparison {
        workload,
        baseline,
        power_boundary,
        power_budget_w: None,
        power_budget_basis: None,
        budget_usd: None,
        concurrency: None,
        slo: None,
        software: None,
        global_batch,
        global_batch_scaled_from,
        systems,
    }
}

/// One point of a scaling series.
#[derive(Debug, Clone, Serialize)]
pub struct ScalePoint {
    /// Devices offered at this size (the estimate's `devices` plus its `idle_devices`); not
    /// serialised, as the flattened estimate already writes `devices` and `idle_devices`.
    #[serde(skip)]
    pub devices: u64,
    #[serde(flatten)]
    pub estimate: Estimate,
    /// Throughput per device.
    pub throughput_per_device: Option<f64>,
    /// Why scaling efficiency exceeds 100%, when it does.
    pub superlinear_cause: Option<String>,
    /// With `--power-budget`: the share of the budget this row is the fastest deployment within
    /// (W); two rows with the same deployment say more power would not run it faster.
    pub within_power_w: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Scaling {
    pub system: String,
    pub workload: String,
    /// Device count the efficiency is measured against (smallest feasible).
    pub baseline_devices: Option<u64>,
    /// With `--power-budget`: the budget (W) the points fill fractions of.
    pub power_budget_w: Option<f64>,
    /// With `--power-budget`: what it was held against (`rated` or `average`).
    pub power_budget_basis: Option<&'static str>,
    pub points: Vec<ScalePoint>,
}

/// Scaling efficiency = throughput(N) / (N × per-device throughput at the smallest feasible N),
/// the way IBM reported 95% on 256 GPUs.
/// Devices count as offered: a size whose job runs on fewer (`idle_devices`) scales by what
/// it was given.
pub fn scaling(system: &str, workload: &str, mut estimates: Vec<Estimate>) -> Scaling {
    let offered = |e: &Estimate| e.devices + e.idle_devices;
    let base_est = estimates
        .iter()
        .filter(|e| e.feasible)
        .min_by_key(|e| offered(e))
        .cloned();
    let base = base_est.as_ref().map(|e| {
        (
            offered(e),
            e.throughput_per_s.unwrap_or(0.0) / offered(e) as f64,
        )
    });
    for e in estimates.iter_mut() {
        if let (Some((_, per)), Some(t)) = (base, e.throughput_per_s) {
            e.scaling_efficiency = Some(t / (offered(e) as f64 * per));
        }
    }
    Scaling {
        system: system.to_string(),
        workload: workload.to_string(),
        baseline_devices: base.map(|b| b.0),
        power_budget_w: None,
        power_budget_basis: None,
        points: estimates
            .into_iter()
            .map(|e| ScalePoint {
                devices: offered(&e),
                throughput_per_device: e.throughput_per_s.map(|t| t / offered(&e) as f64),
                superlinear_cause: match (&base_est, e.scaling_efficiency) {
                    (Some(b), Some(x)) if x > 1.0 + 1e-9 => Some(superlinear_cause(b, &e)),
                    _ => None,
                },
                estimate: e,
                within_power_w: None,
            })
            .collect(),
    }
}

/// Name what lets N devices do more than N times the work of the baseline: data that newly fits
/// a faster memory, less recomputation, or a mapping the baseline could not use.
fn superlinear_cause(base: &Estimate, e: &Estimate) -> String {
    if base.placement != e.placement {
        return format!(
            "placement changes from ({}) to ({}): the model now fits a faster memory",
            base.placement.clone().unwrap_or_default(),
            e.placement.clone().unwrap_or_default()
        );
    }
    match (&base.mapping, &e.mapping) {
        (Some(a), Some(b)) if a.recompute != b.recompute => format!(
            "more memory per device allows recompute {} instead of {}",
            b.recompute, a.recompute
        ),
        (Some(a), Some(b)) => format!(
            "a mapping the baseline could not use: dp {}×tp {}×pp {}×cp {} (micro-batch {}) against dp {}×tp {}×pp {}×cp {} (micro-batch {})",
            b.dp, b.tp, b.pp, b.cp, b.micro_batch, a.dp, a.tp, a.pp, a.cp, a.micro_batch
        ),
        _ => "unexplained".into(),
    }
}
