//! Iso-power questions: how many whole nodes of a system a power budget holds, and what they
//! deliver. The budget is held, at the system's power boundary, against the rated power of what
//! is deployed ([`Basis::Rated`], what a facility must provision: devices at TDP, node parts,
//! switches, × PUE) or against the modelled average power of the run ([`Basis::Average`], from
//! the same evaluation as every estimate: a system whose devices idle fits more of them). A
//! system may grow past its file by whole nodes (scale-out switches in proportion). A capital
//! budget ([`fit_capital`]) sizes systems to an equal cost by the same search.

use super::common::{unit_of, MappingChoice};
use super::estimate::Estimate;
pub use super::rated::{rated_power, rated_power_of, resized};
use crate::engine::reason::Reason;
use crate::model::system::System;
use crate::model::workload::{Task, Workload};
use serde::Serialize;

/// Which power a budget is held against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// The rated power of what is deployed at the boundary ([`rated_power`]): what a facility
    /// must provision, whatever the run draws.
    Rated,
    /// The run's modelled average power at the boundary: devices that idle draw less.
    Average,
}

impl crate::choice::Choice for Basis {
    const ALL: &'static [(&'static str, Self, &'static str)] = &[
        (
            "rated",
            Self::Rated,
            "The rated power of what is deployed: devices at TDP, node parts, switches (× PUE)",
        ),
        (
            "average",
            Self::Average,
            "The run's modelled average power (devices that idle draw less)",
        ),
    ];
}

impl Basis {
    /// The power of `e` this basis holds to a budget (W, at the estimate's boundary).
    pub fn power(self, e: &Estimate) -> Option<f64> {
        match self {
            Basis::Rated => e.rated_power_w,
            Basis::Average => e.average_power_w,
        }
    }
}

/// One system fitted to a power budget.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetFit {
    /// The budget (W), at the estimate's power boundary.
    pub power_budget_w: f64,
    /// What the budget was held against.
    pub power_budget_basis: Basis,
    /// Nodes deployed.
    pub nodes: u64,
    /// Whether the file's system had to grow (by whole nodes) to reach the budget.
    pub grown: bool,
    /// How many node counts were estimated to find it.
    pub tried: usize,
    #[serde(flatten)]
    pub estimate: Estimate,
}

/// The fastest whole-node deployment of `sys` whose power (at its boundary, on `basis`) is
/// within `budget` W and whose estimate is feasible. First the largest such count: where the per-node power
/// measured on the file's system meets the budget, then down (or up, by the same measure) to
/// the nearest feasible count within budget. Then that count halved, again and again, every
/// power of two below it, and the file's own size: a budget need not be spent, so when a workload cannot use every node (a
/// small global batch over a deep pipeline) fewer nodes that run faster win, and a larger budget
/// never gives a slower answer than a smaller one on the same candidates. `Err` carries the
/// infeasible estimate that says why not even one node serves: the workload's own reason where
/// one node cannot run it at all (a device that cannot train), else [`Reason::PowerBudget`].
pub fn fit(
    sys: &System,
    w: &Workload,
    choice: &MappingChoice,
    budget: f64,
    basis: Basis,
) -> Result<BudgetFit, Box<Estimate>> {
    let measure = |e: &Estimate| basis.power(e);
    match fit_nodes(sys, w, choice, budget, &measure) {
        Some((nodes, tried, estimate)) => Ok(BudgetFit {
            power_budget_w: budget,
            power_budget_basis: basis,
            nodes,
            grown: nodes > sys.nodes,
            tried,
            estimate,
        }),
        None => {
            let one = whole(&resized(sys, 1), w, choice);
            Err(Box::new(if one.feasible {
                Estimate::infeasible(
                    sys,
                    w,
                    sys.node.devices as u64,
                    None,
                    &Reason::PowerBudget,
                    unit_of(w),
                )
            } else {
                one
            }))
        }
    }
}

/// The estimate of `sys` on all its devices: the fit compares whole-node deployments, so the
/// search may not leave devices idle here (the smaller counts are candidates of their own).
/// A training batch that scales with the deployment takes its size on these devices
/// (`Workload::scaled_to`).
fn whole(sys: &System, w: &Workload, choice: &MappingChoice) -> Estimate {
    let scaled = w.scaled_to(sys.devices);
    let w = scaled.as_ref().unwrap_or(w);
    super::prepare::outcome(
        sys,
        w,
        &super::prepare::prepare_with(sys, w, choice, None, false),
    )
}

/// The capital-budget twin of [`fit`] (`compare --budget "$10M"`): the fastest whole-node
/// deployment of `sys` whose deployed capital ([`super::cost::deployed_capital`]) is within
/// `budget` USD, by the same search. `Err` carries the infeasible estimate that says why not:
/// the system gives no capital cost, not even one node fits, or the workload's own reason.
pub fn fit_capital(
    sys: &System,
    w: &Workload,
    choice: &MappingChoice,
    budget: f64,
) -> Result<Estimate, Box<Estimate>> {
    let why = |detail: String| {
        Box::new(Estimate::infeasible(
            sys,
            w,
            sys.node.devices as u64,
            None,
            &Reason::CostBudget { detail },
            unit_of(w),
        ))
    };
    if !sys.economics.has_capital() {
        return Err(why(format!(
            "`{}` gives no capital cost to hold to a budget (add `cost: (device: …)` to its file)",
            sys.name
        )));
    }
    let measure = |e: &Estimate| e.cost.as_ref().and_then(|c| c.deployed_capital_usd);
    match fit_nodes(sys, w, choice, budget, &measure) {
        Some((_, _, e)) => Ok(e),
        None => {
            let one = whole(&resized(sys, 1), w, choice);
            Err(if one.feasible {
                why(format!(
                    "one node costs {}, over the capital budget of {}",
                    crate::units::fmt_usd(
                        super::cost::deployed_capital(sys, sys.node.devices as u64)
                            .unwrap_or(f64::NAN)
                    ),
                    crate::units::fmt_usd(budget)
                ))
            } else {
                Box::new(one)
            })
        }
    }
}

/// The search both budgets share: the node count, the counts tried and the estimate of the
/// fastest whole-node deployment whose `measure` (power, or capital) is within `budget`.
fn fit_nodes(
    sys: &System,
    w: &Workload,
    choice: &MappingChoice,
    budget: f64,
    measure: &dyn Fn(&Estimate) -> Option<f64>,
) -> Option<(u64, usize, Estimate)> {
    let mut tried = 0;
    let mut at = |nodes: u64| -> Option<Estimate> {
        tried += 1;
        let s = resized(sys, nodes);
        let e = whole(&s, w, choice);
        (e.feasible && measure(&e).is_some_and(|p| p <= budget)).then_some(e)
    };
    // the measure per node, from the file's own size (or one node where that is infeasible)
    let probe = whole(sys, w, choice);
    let per_node = match measure(&probe) {
        Some(p) if probe.feasible => p / sys.nodes as f64,
        _ => {
            let one = whole(&resized(sys, 1), w, choice);
            measure(&one).filter(|_| one.feasible)?
        }
    };
    let guess = ((budget / per_node).floor() as u64).max(1);
    // Step down from the guess; power is close to linear in nodes, so the first feasible count
    // within budget is near it. Counts that do not divide the mapping are skipped.
    const TRIES: u64 = 256;
    let mut best = None;
    for n in (guess.saturating_sub(TRIES)..=guess)
        .rev()
        .filter(|&n| n > 0)
    {
        if let Some(e) = at(n) {
            best = Some((n, e));
            break;
        }
    }
    // The guess may be low (fixed parts amortise): climb while the next counts still fit.
    if let Some((n0, _)) = &best {
        let mut n = *n0;
        let (mut misses, mut steps) = (0, 0);
        while misses < 8 && steps < TRIES {
            steps += 1;
            n += 1;
            match at(n) {
                Some(e) => {
                    best = Some((n, e));
                    misses = 0;
                }
                None => misses += 1,
            }
        }
    }
    let (largest, _) = best.as_ref()?;
    // fewer nodes may be faster: halvings of the largest count, every power of two below it
    // (parallel mappings divide such counts best), and the file's own size
    let mut smaller: Vec<u64> = std::iter::successors(Some(*largest / 2), |n| Some(n / 2))
        .take_while(|&n| n > 0)
        .chain((0..64).map(|k| 1u64 << k).take_while(|&n| n < *largest))
        .collect();
    if sys.nodes < *largest {
        smaller.push(sys.nodes);
    }
    // a batch that scales with the deployment suits the one with `per_device` samples on each
    // device: that count too, where it is whole nodes
    if let Task::Training(t) = &w.task {
        if let Some(b) = t.batch_scaling {
            let devices = t.global_batch / b.per_device.max(1);
            let per_node = (sys.node.devices as u64).max(1);
            if devices > 0 && devices % per_node == 0 && devices / per_node <= *largest + TRIES {
                smaller.push(devices / per_node);
            }
        }
    }
    smaller.sort_unstable();
    smaller.dedup();
    for n in smaller {
        if let Some(e) = at(n) {
            let (_, b) = best.as_ref()?;
            if e.throughput_per_s > b.throughput_per_s {
                best = Some((n, e));
            }
        }
    }
    let (nodes, estimate) = best?;
    Some((nodes, tried, estimate))
}
