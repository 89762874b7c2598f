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
pub mod bands;
pub mod calibrate;
mod case;
pub mod crossval;
mod run;

pub use case::cases_named;
pub use case::{is_known_gap, load_case, mentions, parse_throughput};
pub(crate) use case::{merge, split_tag};
pub use case::{Case, Metric, Role};
pub use run::{predict, run_case, CaseResult};

use serde::Serialize;

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

impl Summary {
    /// The gate's one-line verdict (`PASS: 195 of 195 check cases within tolerance; …`), as
    /// `validate`'s table and its HTML report both end with it: `word` the verdict (the table
    /// fails a run whose files did not all load), `pct` what separates a figure from its `%`
    /// (the table writes none, the report a space).
    pub fn verdict(&self, word: &str, pct: &str) -> String {
        format!(
            "{word}: {} of {} check cases within tolerance; check MAPE {:.1}{pct}%, largest {:.1}{pct}% \
             (calibration set, not gated: {} of {} within, MAPE {:.1}{pct}%)",
            self.check.within,
            self.check.cases,
            self.check.mape * 100.0,
            self.check.max_abs_error * 100.0,
            self.calibration.within,
            self.calibration.cases,
            self.calibration.mape * 100.0,
        )
    }

    /// The sets every report of a run shows first, with their names: the check set (the gate),
    /// the calibration set, the unfitted and fitted cases, all outside the known gaps, and the
    /// known gaps where there are any. The table printer and the HTML report both read this.
    pub fn headline(&self) -> Vec<(&'static str, &Stats)> {
        let mut v = vec![
            ("check set (the gate)", &self.check),
            ("calibration set (not gated)", &self.calibration),
            ("unfitted", &self.unfitted),
            ("fitted", &self.fitted),
            ("all outside known gaps", &self.all),
        ];
        if self.known_gaps.cases > 0 {
            v.push(("known gaps (not gated)", &self.known_gaps));
        }
        v
    }
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
