//! Validation against published results, as a gate.
//!
//! A case file (`validation/*.ron`, kind `Case`) names a shipped architecture and workload, the
//! mapping as published, the run's conditions, a metric, the published value with its source and
//! a tolerance set from the measurement's own uncertainty. [`load_case`] reads and checks it with
//! located diagnostics; [`run_case`] evaluates it through the engine; [`summarize`] gives the
//! statistics the gate reports: signed error, mean absolute percentage error and largest error,
//! by hardware family and by metric, fitted and unfitted cases apart.
//!
//! Calibration lives only in architecture files. A case counts as *fitted* when its id appears in
//! the citation of a figure of its architecture whose source key starts with `fitted`; there are no
//! per-case correction factors. Every case states its [`Role`]: `Calibration` (figures fitted on it,
//! or meant for `tessera calibrate`) or `Check` (never fitted on); a fitted case that says `Check`
//! is an error. The gate is the check set; calibration cases are reported beside it. Cases under a
//! `known-gaps/` directory are run and reported but not gated.

pub mod audit;
pub mod calibrate;
mod case;
mod run;

pub use case::cases_named;
pub use case::{is_known_gap, load_case, mentions, parse_throughput};
pub(crate) use case::{merge, split_tag};
pub use run::{predict, run_case};

use crate::engine::MappingChoice;
use crate::model::system::System;
use crate::model::workload::Workload;
use crate::spec::validation::*;
use serde::Serialize;

/// What a case compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    TimeToTrain,
    StepTime,
    Throughput,
    Mfu,
    ScalingEfficiency,
    AveragePower,
    Energy,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::TimeToTrain => "time-to-train",
            Metric::StepTime => "step time",
            Metric::Throughput => "throughput",
            Metric::Mfu => "MFU",
            Metric::ScalingEfficiency => "scaling efficiency",
            Metric::AveragePower => "average power",
            Metric::Energy => "energy",
        }
    }
    /// SI unit of the metric's values, for display.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::TimeToTrain | Metric::StepTime => "s",
            Metric::Throughput => "/s",
            Metric::Mfu | Metric::ScalingEfficiency => "",
            Metric::AveragePower => "W",
            Metric::Energy => "J",
        }
    }
}

/// What a case is for (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Calibration,
    Check,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Calibration => "calibration",
            Role::Check => "check",
        }
    }
}

/// A loaded, checked case.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    pub family: String,
    pub role: Role,
    pub description: String,
    /// The case file.
    pub file: String,
    /// Citation of the published value.
    pub citation: String,
    pub system: System,
    /// The workload with the run's conditions applied.
    pub workload: Workload,
    pub devices: Option<u64>,
    pub mapping: MappingChoice,
    pub metric: Metric,
    /// Baseline devices of a scaling-efficiency case.
    pub baseline: Option<u64>,
    pub published: f64,
    pub tolerance: f64,
    pub tolerance_basis: String,
    /// The run's evaluations: (first after, every, samples), in training samples.
    pub evaluation: Option<(f64, f64, f64)>,
    pub startup_s: f64,
    pub boundary: PowerBoundary,
    /// Reported but not gated (the file lives under `known-gaps/`).
    pub known_gap: bool,
    /// The case id appears in a fitted citation of its architecture.
    pub fitted: bool,
}

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
    pub workload: String,
    pub devices: u64,
    /// The mapping evaluated, in words; or why the case could not be evaluated.
    pub detail: String,
}

/// Error statistics of a group of cases.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Stats {
    pub cases: usize,
    pub within: usize,
    /// Mean absolute percentage error, as a fraction (cases without a prediction excluded).
    pub mape: f64,
    /// Largest |error|, as a fraction.
    pub max_abs_error: f64,
    /// Id of the case with the largest error.
    pub worst: Option<String>,
    /// Cases that could not be evaluated (infeasible).
    pub failed: usize,
}

impl Stats {
    pub fn of<'a>(rs: impl IntoIterator<Item = &'a CaseResult>) -> Stats {
        let mut s = Stats::default();
        let mut sum = 0.0;
        let mut n = 0usize;
        for r in rs {
            s.cases += 1;
            if r.within {
                s.within += 1;
            }
            match r.error {
                Some(e) => {
                    sum += e.abs();
                    n += 1;
                    if e.abs() >= s.max_abs_error {
                        s.max_abs_error = e.abs();
                        s.worst = Some(r.id.clone());
                    }
                }
                None => s.failed += 1,
            }
        }
        s.mape = if n > 0 { sum / n as f64 } else { 0.0 };
        s
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub name: String,
    #[serde(flatten)]
    pub stats: Stats,
}

/// The validation summary: every set apart; the gate (`pass`) is taken on the check set.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub cases: usize,
    pub within: usize,
    pub mape: f64,
    pub max_abs_error: f64,
    pub unfitted: Stats,
    pub fitted: Stats,
    pub by_family: Vec<Group>,
    pub by_metric: Vec<Group>,
    pub known_gaps: Stats,
    /// All cases outside `known-gaps/`, with the largest error's case.
    pub all: Stats,
    /// The check set (role `Check`, outside `known-gaps/`): the gate.
    pub check: Stats,
    /// The check set by hardware family.
    pub check_by_family: Vec<Group>,
    /// The check set by metric.
    pub check_by_metric: Vec<Group>,
    /// The calibration set (role `Calibration`, outside `known-gaps/`): reported, not gated.
    pub calibration: Stats,
    /// The set the gate is taken on: `"check"`.
    pub gate: &'static str,
    /// Every case of the check set is within its tolerance.
    pub pass: bool,
}

fn groups<F: Fn(&CaseResult) -> String>(rs: &[&CaseResult], key: F) -> Vec<Group> {
    let mut names: Vec<String> = rs.iter().map(|r| key(r)).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|n| Group {
            stats: Stats::of(rs.iter().copied().filter(|r| key(r) == n)),
            name: n,
        })
        .collect()
}

pub fn summarize(results: &[CaseResult]) -> Summary {
    let gated: Vec<&CaseResult> = results.iter().filter(|r| !r.known_gap).collect();
    let all = Stats::of(gated.iter().copied());
    let checks: Vec<&CaseResult> = gated
        .iter()
        .copied()
        .filter(|r| r.role == Role::Check)
        .collect();
    let check = Stats::of(checks.iter().copied());
    Summary {
        cases: all.cases,
        within: all.within,
        mape: all.mape,
        max_abs_error: all.max_abs_error,
        unfitted: Stats::of(gated.iter().copied().filter(|r| !r.fitted)),
        fitted: Stats::of(gated.iter().copied().filter(|r| r.fitted)),
        by_family: groups(&gated, |r| r.family.clone()),
        by_metric: groups(&gated, |r| r.metric.name().to_string()),
        known_gaps: Stats::of(results.iter().filter(|r| r.known_gap)),
        all,
        check_by_family: groups(&checks, |r| r.family.clone()),
        check_by_metric: groups(&checks, |r| r.metric.name().to_string()),
        calibration: Stats::of(
            gated
                .iter()
                .copied()
                .filter(|r| r.role == Role::Calibration),
        ),
        gate: "check",
        pass: check.within == check.cases,
        check,
    }
}
