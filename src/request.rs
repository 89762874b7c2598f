//! One estimate or comparison as a front end asks for it. The CLI's options (`estimate`,
//! `roofline`, `compare`) and the Python package's keywords resolve into the same [`Request`], and
//! the steps here turn it into runs: the serving load, the mapping a command uses when none is
//! named, the power boundary and software stack, the `--set` overrides, the device cap and the
//! power budget. Neither front end assembles a run of its own, so the two cannot drift apart.

use crate::diag::{Diagnostic, Severity};
use crate::engine::{budget, Estimate, MappingChoice, Objective};
use crate::model::mapping::MappingPlan;
use crate::model::serving::{Concurrency, Slo};
use crate::model::system::{Software, System};
use crate::model::workload::Workload;
use crate::report::compare::Comparison;
use crate::sweep::set::Overrides;
use crate::validate::bands::Bands;
use crate::vocab::PowerBoundary;

/// Which mapping is asked for.
#[derive(Debug, Clone)]
// one per request, never in bulk: the plan's size does not matter
#[allow(clippy::large_enum_variant)]
pub enum Mapping {
    /// The workload's published mapping, else the best by the objective (`auto`).
    Published,
    /// Search every legal mapping for the best by the objective (`--mapping auto`).
    Auto,
    /// As a mapping file writes it (`--mapping FILE`).
    Given(MappingPlan),
}

impl Mapping {
    /// The mapping choice for `w`.
    pub fn choice(&self, w: &Workload, objective: Objective) -> MappingChoice {
        match self {
            Mapping::Auto => MappingChoice::Auto(objective),
            Mapping::Given(plan) => MappingChoice::Given(plan.clone()),
            Mapping::Published => match &w.mapping {
                Some(m) => MappingChoice::Given(m.clone()),
                None => MappingChoice::Auto(objective),
            },
        }
    }
}

/// One estimate (`tessera estimate`, `estimate()` in Python) or comparison (`tessera compare`,
/// `compare()`): every option either front end takes, parsed and loaded.
#[derive(Debug, Clone)]
pub struct Request {
    /// The mapping named (`None`: the command's default, [`Request::ESTIMATE_DEFAULT`] or
    /// [`Request::COMPARE_DEFAULT`]).
    pub mapping: Option<Mapping>,
    /// What `auto` minimises.
    pub objective: Objective,
    /// Devices to use (`None`: all of each system; a comparison caps it at each system's size,
    /// and serves a serving workload's load on the fewest whole devices that meet it unless
    /// `all_devices`).
    pub devices: Option<u64>,
    /// A comparison's serving rows on every device of each system (`--devices all`) rather than
    /// the fewest that serve the load within its target.
    pub all_devices: bool,
    /// Which parts power and energy count.
    pub power_boundary: PowerBoundary,
    /// A comparison's power budget (W, at the boundary): each system as many whole nodes as fit.
    /// A single estimate does not read it.
    pub power_budget: Option<f64>,
    /// What the budget is held against: the rated power of what is deployed (default) or the
    /// run's modelled average power.
    pub budget_basis: budget::Basis,
    /// A comparison's capital budget (USD): each system as many whole nodes as its deployed
    /// capital ([`crate::engine::cost::deployed_capital`]) allows. A single estimate does not
    /// read it.
    pub cost_budget: Option<f64>,
    /// The software stack every run executes on.
    pub software: Option<Software>,
    /// Serving: the latency target.
    pub slo: Option<Slo>,
    /// Serving: the fewest output tokens per second each user must see.
    pub min_user_rate: Option<f64>,
    /// Serving: requests in flight over the whole system.
    pub concurrency: Option<Concurrency>,
    /// `--set PATH=VALUE` overrides, applied to each run (each system's paths against it).
    pub set: Overrides,
    /// Whether each system's execution mode (its file's `execution`) binds the runs.
    pub execution: Execution,
    /// Training goodput: the checkpoint interval and the stragglers' slowdown.
    pub goodput: crate::model::reliability::GoodputOptions,
}

/// How a system's execution mode (the vendor's parallel dimensions, weight streaming, serving
/// precision: [`crate::model::system::Execution`]) binds a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Execution {
    /// As the vendor's software runs it (the default).
    #[default]
    Vendor,
    /// Every layout, placement and precision the hardware admits.
    Free,
}

impl crate::choice::Choice for Execution {
    const ALL: &'static [(&'static str, Self, &'static str)] = &[
        (
            "vendor",
            Self::Vendor,
            "As the vendor's software runs each system: its file's parallel dimensions, weight streaming and serving precision",
        ),
        (
            "free",
            Self::Free,
            "Every layout, placement and precision the hardware admits (a system file's `execution` lifted)",
        ),
    ];
}

impl Default for Request {
    /// Nothing named: the CLI without options.
    fn default() -> Request {
        Request {
            mapping: None,
            objective: Objective::Time,
            devices: None,
            all_devices: false,
            power_boundary: PowerBoundary::Facility,
            power_budget: None,
            budget_basis: budget::Basis::Rated,
            cost_budget: None,
            software: None,
            slo: None,
            min_user_rate: None,
            concurrency: None,
            set: Overrides::default(),
            execution: Execution::Vendor,
            goodput: Default::default(),
        }
    }
}

/// Why a request cannot run: the serving options do not apply to the workload, or `--set`
/// overrides failed (every error at once).
#[derive(Debug, Clone)]
pub enum Refused {
    /// From [`crate::engine::serve::set_load`]: the message, then `\nhint: …`.
    Load(String),
    /// The overrides' diagnostics, each naming its `--set` (for a comparison, every system's).
    Set(Vec<Diagnostic>),
}

/// One run's inputs, every option applied.
#[derive(Debug, Clone)]
pub struct Run {
    pub system: System,
    pub workload: Workload,
    pub choice: MappingChoice,
    pub devices: Option<u64>,
}

impl Run {
    /// The run's estimate, with the validation evidence behind it (the shipped error band).
    pub fn estimate(&self) -> Estimate {
        let mut e =
            crate::engine::estimate(&self.system, &self.workload, &self.choice, self.devices);
        Bands::shipped().attach(&self.system, &self.workload, &mut e);
        e
    }
}

/// `w` at one global batch for every row of a comparison whose fits scaled it: the largest batch
/// a feasible row ran at, rounded down to a multiple of 192, fixed there (`None`: no row scaled
/// it).
fn one_batch(w: &Workload, rows: &[Estimate]) -> Option<Workload> {
    let crate::model::workload::Task::Training(tr) = &w.task else {
        return None;
    };
    tr.batch_scaling?;
    let most = rows
        .iter()
        .filter(|e| e.feasible)
        .filter_map(|e| e.global_batch)
        .max()?;
    // down to a multiple of 192 = 2^6 × 3, so that the data-parallel degrees of every
    // deployment divide it (1,192 from 596 GPUs would leave 24 wafers only 8 ways to split)
    const STEP: u64 = 192;
    let most = if most >= STEP {
        (most / STEP * STEP).max(tr.global_batch)
    } else {
        most
    };
    if most == tr.global_batch {
        return None;
    }
    let mut at = w.clone();
    if let crate::model::workload::Task::Training(t) = &mut at.task {
        t.scaled_from = Some(t.global_batch);
        t.global_batch = most;
        // fixed there (the fit still reads the per-device figure: the deployment it suits)
        if let Some(b) = t.batch_scaling.as_mut() {
            b.max = most;
        }
    }
    Some(at)
}

/// Device counts a serving load may take on `sys`, fewest first: powers of two below a node,
/// then whole nodes by powers of two, then the whole system.
pub fn serving_counts(sys: &System) -> Vec<u64> {
    let node = u64::from(sys.node.devices.max(1));
    let mut out: Vec<u64> = (0..64)
        .map(|k| 1u64 << k)
        .take_while(|&k| k < node)
        .chain((0..64).map(|k| node << k).take_while(|&k| k < sys.devices))
        .collect();
    out.push(sys.devices);
    out.dedup();
    out
}

/// A serving run on the fewest devices of [`serving_counts`] whose estimate is feasible: that
/// serves the load (`Concurrency::Total`) within its target and holds it in memory. A run that
/// is not serving a stated total load, or that no smaller count serves, takes the whole system.
fn fewest_serving(run: &Run) -> Estimate {
    use crate::model::serving::Concurrency;
    use crate::model::workload::Task;
    let total = match &run.workload.task {
        Task::Inference(i) => matches!(i.load.concurrency, Concurrency::Total(_)),
        _ => false,
    };
    let all = || crate::engine::estimate(&run.system, &run.workload, &run.choice, None);
    if !total {
        return all();
    }
    for k in serving_counts(&run.system) {
        let e = crate::engine::estimate(&run.system, &run.workload, &run.choice, Some(k));
        if e.feasible {
            return e;
        }
    }
    all()
}

/// A power quantity as `--power-budget` takes it ("20 MW"): watts, positive.
pub fn power_budget(s: &str) -> Result<f64, String> {
    match crate::units::parse(s, crate::units::Dimension::Power) {
        Ok(p) if p.value > 0.0 => Ok(p.value),
        Ok(_) => Err("a power budget is positive".into()),
        Err(e) => Err(match e.hint {
            Some(h) => format!("{}\nhint: {h}", e.message),
            None => e.message,
        }),
    }
}

/// A capital budget as `--budget` takes it (`"$10M"`, `"10 MUSD"`): US dollars, positive.
pub fn cost_budget(s: &str) -> Result<f64, String> {
    match crate::units::parse(s, crate::units::Dimension::Money) {
        Ok(p) if p.value > 0.0 => Ok(p.value),
        Ok(_) => Err("a capital budget is positive".into()),
        Err(e) => Err(match e.hint {
            Some(h) => format!("{}\nhint: {h}", e.message),
            None => e.message,
        }),
    }
}

impl Request {
    /// The mapping an estimate (and a roofline) uses when none is named: the workload's
    /// published one, else the best.
    pub const ESTIMATE_DEFAULT: Mapping = Mapping::Published;
    /// The mapping a comparison uses when none is named: each system's best.
    pub const COMPARE_DEFAULT: Mapping = Mapping::Auto;

    /// Put `w` at the serving load and target asked for (nothing asked, nothing changes).
    pub fn load(&self, w: &mut Workload) -> Result<(), String> {
        crate::engine::serve::set_load(w, self.slo, self.min_user_rate, self.concurrency)
    }

    /// The load a comparison puts on every system, by the one load rule of `estimate`,
    /// `compare`, `scale` and `serve-curve`: the requests in flight asked for (`--concurrency`,
    /// or a target's users); else the requests `tessera estimate` runs on the first system — the
    /// workload's `batch` on each model instance of its mapping there — held on every system, so
    /// that each serves the same users and the baseline's row runs the estimate's load.
    /// ([`crate::engine::serve::one_load`], the batch over the whole system, where that
    /// estimate does not run.)
    pub fn compare_load(&self, w: &mut Workload, baseline: &System) -> Result<(), String> {
        use crate::model::serving::Concurrency;
        use crate::model::workload::Task;
        self.load(w)?;
        let open =
            matches!(&w.task, Task::Inference(i) if i.load.concurrency == Concurrency::Workload);
        if !open {
            return Ok(());
        }
        let choice = self.choice(w, Request::ESTIMATE_DEFAULT);
        let requests = self.run(baseline.clone(), w, &choice).ok().and_then(|r| {
            let devices = r.devices.map(|d| d.min(r.system.devices));
            crate::engine::estimate(&r.system, &r.workload, &r.choice, devices).concurrency
        });
        match (requests, &mut w.task) {
            (Some(n), Task::Inference(i)) if n > 0 => i.load.concurrency = Concurrency::Total(n),
            _ => crate::engine::serve::one_load(w),
        }
        Ok(())
    }

    /// The mapping choice for `w` (at its load): the one named, else `default`.
    pub fn choice(&self, w: &Workload, default: Mapping) -> MappingChoice {
        self.mapping
            .as_ref()
            .unwrap_or(&default)
            .choice(w, self.objective)
    }

    /// `sys` at the power boundary, on the software stack, its execution mode kept or lifted.
    pub fn system(&self, mut sys: System) -> System {
        sys.power_boundary = self.power_boundary;
        if self.execution == Execution::Free {
            sys.execution = Default::default();
        }
        sys.goodput = self.goodput;
        if let Some(sw) = &self.software {
            sys.with_software(sw.clone());
        }
        sys
    }

    /// One run: `sys` at the boundary and on the stack, `w` (already at its load) and `choice`
    /// with the overrides applied, and the devices (asked for, or set by a `devices`/`nodes`
    /// override). `Err`: the overrides' errors, every one.
    pub fn run(
        &self,
        sys: System,
        w: &Workload,
        choice: &MappingChoice,
    ) -> Result<Run, Vec<Diagnostic>> {
        let mut run = Run {
            system: self.system(sys),
            workload: w.clone(),
            choice: choice.clone(),
            devices: self.devices,
        };
        // the system's serving precision and the vendor's stack for the task first, so that a
        // `--set` on the workload or the stack lifts them
        run.system.as_its_vendor_runs(&mut run.workload);
        let diags = self.set.apply(
            &mut run.system,
            &mut run.workload,
            &mut run.choice,
            &mut run.devices,
        );
        if diags.iter().any(|d| d.severity == Severity::Error) {
            return Err(diags);
        }
        Ok(run)
    }

    /// One system's row of a comparison (`w` at the comparison's load, `choice` from
    /// [`Request::choice`]): fitted to the power budget when there is one, else on the devices
    /// asked for, capped at the system's size.
    pub fn compare_row(
        &self,
        sys: System,
        w: &Workload,
        choice: &MappingChoice,
    ) -> Result<Estimate, Vec<Diagnostic>> {
        let run = self.run(sys, w, choice)?;
        let mut e = match (self.cost_budget, self.power_budget) {
            (Some(usd), _) => {
                match budget::fit_capital(&run.system, &run.workload, &run.choice, usd) {
                    Ok(e) => e,
                    Err(why) => *why,
                }
            }
            (None, Some(b)) => match budget::fit(
                &run.system,
                &run.workload,
                &run.choice,
                b,
                self.budget_basis,
            ) {
                Ok(f) => f.estimate,
                Err(why) => *why,
            },
            (None, None) => match run.devices {
                Some(d) => crate::engine::estimate(
                    &run.system,
                    &run.workload,
                    &run.choice,
                    Some(d.min(run.system.devices)),
                ),
                None if !self.all_devices => fewest_serving(&run),
                None => crate::engine::estimate(&run.system, &run.workload, &run.choice, None),
            },
        };
        Bands::shipped().attach(&run.system, &run.workload, &mut e);
        Ok(e)
    }

    /// The comparison of `rows` (the first the baseline), stating the budget, the stack and the
    /// load (`w`, at the comparison's load) every system was put at.
    pub fn comparison(&self, w: &Workload, rows: Vec<Estimate>) -> Comparison {
        let mut c = crate::report::compare::compare(rows);
        c.power_budget_w = self.power_budget;
        c.power_budget_basis = self
            .power_budget
            .map(|_| crate::choice::Choice::name(self.budget_basis));
        c.software = self.software.as_ref().map(|sw| sw.name.clone());
        c.budget_usd = self.cost_budget;
        (c.concurrency, c.slo) = crate::engine::serve::stated_load(w);
        c
    }

    /// The whole estimate of `w` on `sys`, as `tessera estimate --format json` computes it.
    pub fn estimate(&self, sys: System, w: &Workload) -> Result<Estimate, Refused> {
        let mut w = w.clone();
        self.load(&mut w).map_err(Refused::Load)?;
        let choice = self.choice(&w, Request::ESTIMATE_DEFAULT);
        let run = self.run(sys, &w, &choice).map_err(Refused::Set)?;
        Ok(run.estimate())
    }

    /// The whole comparison of `systems` (the first the baseline) on `w`, as `tessera compare
    /// --format json` computes it. `Err`: every system's override errors.
    pub fn compare(&self, systems: Vec<System>, w: &Workload) -> Result<Comparison, Refused> {
        let mut w = w.clone();
        match systems.first() {
            Some(first) => self.compare_load(&mut w, first),
            None => self.load(&mut w),
        }
        .map_err(Refused::Load)?;
        let choice = self.choice(&w, Request::COMPARE_DEFAULT);
        self.compare_at_load(&systems, &w, &choice)
    }

    /// [`Request::compare`] of `w` already at the comparison's load, on `choice`.
    pub fn compare_at_load(
        &self,
        systems: &[System],
        w: &Workload,
        choice: &MappingChoice,
    ) -> Result<Comparison, Refused> {
        let rows = self.compare_rows(systems, w, choice)?;
        // A batch that scales with the deployment: each system's fit grew it to suit its own
        // size; every system then trains at the largest of those, one batch for all (the
        // convergence a batch buys is the workload's, not the system's).
        let rows = match one_batch(w, &rows) {
            Some(at) => self.compare_rows(systems, &at, choice)?,
            None => rows,
        };
        Ok(self.comparison(w, rows))
    }

    fn compare_rows(
        &self,
        systems: &[System],
        w: &Workload,
        choice: &MappingChoice,
    ) -> Result<Vec<Estimate>, Refused> {
        let mut rows = Vec::new();
        let mut errors = Vec::new();
        for sys in systems {
            match self.compare_row(sys.clone(), w, choice) {
                Ok(e) => rows.push(e),
                Err(d) => errors.extend(d),
            }
        }
        if !errors.is_empty() {
            return Err(Refused::Set(errors));
        }
        Ok(rows)
    }
}
