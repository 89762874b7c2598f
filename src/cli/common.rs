//! Loading the inputs every analysis subcommand takes, with diagnostics on failure.

use super::{report, DiskFs, Exit};
use tessera::diag::Diagnostic;
use tessera::engine::{MappingChoice, Objective};
use tessera::model::serving::{Concurrency, Slo};
use tessera::model::system::{load_system, System};
use tessera::model::workload::{load_mapping, load_workload, Workload};
use tessera::request::{Mapping, Request};
use tessera::spec::Files;
use tessera::vocab::PowerBoundary;

pub fn system(path: &str) -> Result<System, Exit> {
    let l = load_system(path, &DiskFs);
    if report(&l.diagnostics, &l.files) {
        return Err(Exit::Failed);
    }
    l.value.ok_or(Exit::Failed)
}

pub fn workload(path: &str) -> Result<Workload, Exit> {
    let l = load_workload(path, &DiskFs);
    if report(&l.diagnostics, &l.files) {
        return Err(Exit::Failed);
    }
    l.value.ok_or(Exit::Failed)
}

/// `--mapping auto` or `--mapping FILE` (read and checked), or `None` when absent (the
/// command's default: [`Request::ESTIMATE_DEFAULT`] or [`Request::COMPARE_DEFAULT`]).
pub fn mapping_arg(arg: Option<&str>) -> Result<Option<Mapping>, Exit> {
    match arg {
        None => Ok(None),
        Some("auto") => Ok(Some(Mapping::Auto)),
        Some(path) => {
            let l = load_mapping(path, &DiskFs);
            if report(&l.diagnostics, &l.files) {
                return Err(Exit::Failed);
            }
            l.value.map(|m| Some(Mapping::Given(m))).ok_or(Exit::Failed)
        }
    }
}

/// `--mapping` for commands that compare systems (compare, scale, serve-curve): without it, each
/// system gets its best mapping (`auto`), not the workload's published one.
pub fn mapping_or_auto(
    arg: Option<&str>,
    w: &Workload,
    objective: Objective,
) -> Result<MappingChoice, Exit> {
    Ok(mapping_arg(arg)?
        .unwrap_or(Request::COMPARE_DEFAULT)
        .choice(w, objective))
}

/// The errors of `--set` overrides on stderr, as a failure.
pub fn set_failed(diags: &[Diagnostic]) -> Exit {
    report(diags, &Files::default());
    Exit::Failed
}

/// Format an optional number with an SI prefix, or "—".
pub fn si(v: Option<f64>, unit: &str) -> String {
    v.map(|x| tessera::units::fmt_si(x, unit).trim_end().to_string())
        .unwrap_or_else(|| "—".into())
}

/// A duration in the largest sensible unit.
pub fn duration(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(s) if s >= 86400.0 => format!("{:.2} d", s / 86400.0),
        Some(s) if s >= 3600.0 => format!("{:.2} h", s / 3600.0),
        Some(s) if s >= 60.0 => format!("{:.2} min", s / 60.0),
        Some(s) => tessera::units::fmt_si(s, "s"),
    }
}

/// The inputs of a single run: a system, a workload, how to map it, on how many devices.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Architecture file (a `System(...)`).
    #[arg(long)]
    pub arch: String,
    /// Workload file (a `Workload(...)`).
    #[arg(long)]
    pub workload: String,
    /// A mapping file, or `auto` to search every legal mapping (default: the workload's published
    /// mapping, else auto).
    #[arg(long)]
    pub mapping: Option<String>,
    /// What `--mapping auto` minimises.
    #[arg(long, value_parser = choice::<Objective>(), default_value = "time")]
    pub objective: Objective,
    /// Devices to use (default: all of the system).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub devices: Option<u64>,
    #[command(flatten)]
    pub software: SoftwareArgs,
    #[command(flatten)]
    pub power: PowerArgs,
    #[command(flatten)]
    pub set: SetArgs,
    #[command(flatten)]
    pub serve: ServeArgs,
    #[command(flatten)]
    pub goodput: GoodputArgs,
}

/// Goodput choices of a training estimate on a system that states its reliability.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct GoodputArgs {
    /// Training time between checkpoints: `auto` (the interval that minimises the expected time
    /// to train, near Young/Daly's √(2·write·MTBF)) or a time (`30min`).
    #[arg(long, value_parser = tessera::model::reliability::Interval::parse, default_value = "auto")]
    pub checkpoint_interval: tessera::model::reliability::Interval,
    /// Stragglers' slowdown of every step, as a fraction (`5%`, `0.05`).
    #[arg(long, value_parser = tessera::model::reliability::GoodputOptions::parse_straggler, default_value = "0")]
    pub straggler: f64,
}

impl GoodputArgs {
    pub fn options(&self) -> tessera::model::reliability::GoodputOptions {
        tessera::model::reliability::GoodputOptions {
            interval: self.checkpoint_interval,
            straggler: self.straggler,
            no_failures: false,
        }
    }
}

/// The serving load and latency target of a transformer inference workload.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServeArgs {
    /// Serving latency target, e.g. "ttft<=2s,tpot<=40ms" (also "user>=50/s"), on the mean
    /// figures, or at a percentile of requests arriving at random: "p99 ttft<=2s,tpot<=200ms"
    /// (MLPerf's server scenario): the estimate says whether it is met; `--mapping auto` returns
    /// the highest throughput that meets it, or the closest point when none does.
    #[arg(long, value_parser = slo_arg)]
    pub slo: Option<Slo>,
    /// Serving: the fewest output tokens per second each user must see ("50/s"); the same bound
    /// as `user>=50/s` in `--slo`.
    #[arg(long, value_parser = rate_arg)]
    pub min_user_rate: Option<f64>,
    /// Serving: requests in flight over the whole system ("64"), or "max" (as many as the KV
    /// cache holds; with a target, as many as still meet it). Default, the one load rule: the
    /// workload's batch on each model instance of the mapping `estimate` runs (with a target
    /// alone: the batch over the whole system); `compare` holds every system at the requests
    /// that gives on the first.
    #[arg(long, value_parser = concurrency_arg)]
    pub concurrency: Option<Concurrency>,
}

fn slo_arg(s: &str) -> Result<Slo, String> {
    Slo::parse(s)
}

fn rate_arg(s: &str) -> Result<f64, String> {
    tessera::model::serving::rate(s)
}

fn concurrency_arg(s: &str) -> Result<Concurrency, String> {
    Concurrency::parse(s)
}

impl ServeArgs {
    /// Set the load and target on `w` (an error on stderr when it is not transformer inference).
    pub fn apply(&self, w: &mut Workload) -> Result<(), Exit> {
        tessera::engine::serve::set_load(w, self.slo, self.min_user_rate, self.concurrency)
            .map_err(load_failed)
    }
}

/// A load that does not apply ([`tessera::engine::serve::set_load`]'s message) on stderr, in the
/// flags' words, as a failure.
pub fn load_failed(m: String) -> Exit {
    use std::io::Write as _;
    let m = m.replacen(
        "a latency target and a concurrency apply",
        "--slo, --min-user-rate and --concurrency apply",
        1,
    );
    let _ = writeln!(std::io::stderr(), "error: {m}");
    Exit::Failed
}

/// The software stack the runs execute on.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SoftwareArgs {
    /// The software stack the run executes on, a `Software` file
    /// (`architectures/software/*.ron`): its fixed per-step costs join each training step (every
    /// system runs on it).
    #[arg(long, value_name = "FILE")]
    pub software: Option<String>,
    /// How each system's execution mode (its file's `execution`) binds the run.
    #[arg(long, value_parser = choice::<tessera::request::Execution>(), default_value = "vendor")]
    pub execution: tessera::request::Execution,
}

impl SoftwareArgs {
    /// The stack named, read and checked (diagnostics on stderr).
    pub fn load(&self) -> Result<Option<tessera::model::system::Software>, Exit> {
        let Some(path) = &self.software else {
            return Ok(None);
        };
        let l = tessera::model::system::load_software(path, &DiskFs);
        if report(&l.diagnostics, &l.files) {
            return Err(Exit::Failed);
        }
        l.value.ok_or(Exit::Failed).map(Some)
    }

    /// `sys` with its execution mode lifted where `--execution free` asks.
    pub fn lift(&self, mut sys: System) -> System {
        if self.execution == tessera::request::Execution::Free {
            sys.execution = Default::default();
        }
        sys
    }

    /// `sys` on the stack, if one is named.
    pub fn apply(sw: &Option<tessera::model::system::Software>, mut sys: System) -> System {
        if let Some(sw) = sw {
            sys.with_software(sw.clone());
        }
        sys
    }
}

/// Which parts power and energy count.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct PowerArgs {
    /// Which parts power and energy count, innermost first (each includes the ones before it);
    /// printed in the report.
    #[arg(long, value_parser = choice::<PowerBoundary>(), default_value = "facility")]
    pub power_boundary: PowerBoundary,
    /// A power budget at that boundary ("20 MW"): each system as many whole nodes as it holds
    /// (growing past its file by whole nodes where needed).
    #[arg(long, value_parser = power_quantity)]
    pub power_budget: Option<f64>,
    /// What the power budget is held against: the rated power of what is deployed at the
    /// boundary (what a facility provisions), or the run's modelled average power.
    #[arg(long, value_parser = choice::<tessera::engine::budget::Basis>(), default_value = "rated")]
    pub budget_basis: tessera::engine::budget::Basis,
}

fn power_quantity(s: &str) -> Result<f64, String> {
    tessera::request::power_budget(s)
}

impl PowerArgs {
    /// `sys` with the chosen boundary.
    pub fn apply(&self, mut sys: System) -> System {
        sys.power_boundary = self.power_boundary;
        sys
    }
}

/// The report header line naming the power boundary.
pub fn boundary_line(b: &str) -> String {
    let what = match b {
        "device" => "the accelerators alone",
        "node" => "accelerators and their nodes' hosts, NICs and fans",
        "rack" => "nodes and the scale-up switches",
        "it" => "every IT part: nodes, switches, network and any weight store in use",
        _ => "IT power × each system's PUE",
    };
    format!("power boundary: {b} ({what})")
}

/// The request the options make, before any file is read: no mapping named yet, no stack.
pub fn request(
    objective: Objective,
    devices: Option<u64>,
    power: &PowerArgs,
    serve: &ServeArgs,
    set: &SetArgs,
) -> Request {
    Request {
        mapping: None,
        objective,
        devices,
        all_devices: false,
        power_boundary: power.power_boundary,
        power_budget: power.power_budget,
        budget_basis: power.budget_basis,
        cost_budget: None,
        software: None,
        slo: serve.slo,
        min_user_rate: serve.min_user_rate,
        concurrency: serve.concurrency,
        set: set.overrides(),
        execution: Default::default(),
        goodput: Default::default(),
    }
}

impl RunArgs {
    /// Load the system and workload, resolve the mapping choice and apply the `--set` overrides
    /// (diagnostics on stderr); the devices to use (`--devices`, or a `devices`/`nodes` override).
    #[allow(clippy::type_complexity)]
    pub fn load(&self) -> Result<(System, Workload, MappingChoice, Option<u64>), Exit> {
        let (sys, mut w) = match (system(&self.arch), workload(&self.workload)) {
            (Ok(s), Ok(w)) => (s, w),
            _ => return Err(Exit::Failed),
        };
        let mut req = request(
            self.objective,
            self.devices,
            &self.power,
            &self.serve,
            &self.set,
        );
        req.software = self.software.load()?;
        req.execution = self.software.execution;
        req.goodput = self.goodput.options();
        req.load(&mut w).map_err(load_failed)?;
        req.mapping = mapping_arg(self.mapping.as_deref())?;
        let choice = req.choice(&w, Request::ESTIMATE_DEFAULT);
        let run = req.run(sys, &w, &choice).map_err(|d| set_failed(&d))?;
        Ok((run.system, run.workload, run.choice, run.devices))
    }
}

/// A clap parser for a library [`Choice`](tessera::choice::Choice): its names, with their help,
/// as the possible values.
pub fn choice<T: tessera::choice::Choice + Send + Sync>(
) -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(
        T::ALL
            .iter()
            .map(|(n, _, h)| PossibleValue::new(*n).help(*h)),
    )
    .map(|s| T::parse(&s).expect("clap admits only the possible values"))
}

/// `--set PATH=VALUE` (repeatable): the sweep's paths (`tessera sweep --list-paths`) as one-off
/// overrides of the architecture (`device.tdp=400 W`), the workload (`workload.global_batch=1024`),
/// the mapping (`mapping.tp=8`) and the device count (`devices=64`, `nodes=512`).
#[derive(clap::Args, Debug, Default)]
pub struct SetArgs {
    /// Override a number by its sweep path, e.g. `--set workload.global_batch=1024 --set
    /// mapping.tp=8 --set nodes=512 --set "device.tdp=400 W"` (repeatable; `tessera sweep
    /// --list-paths --arch FILE` lists the paths).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub set: Vec<String>,
}

impl SetArgs {
    /// Split each `PATH=VALUE` (errors are reported with the others when applied).
    pub fn parse(&self) -> Result<Overrides, Exit> {
        Ok(Overrides(self.overrides()))
    }

    /// The library's overrides, as a [`Request`] holds them.
    pub fn overrides(&self) -> tessera::sweep::set::Overrides {
        tessera::sweep::set::Overrides::parse(&self.set)
    }
}

/// The overrides as written, applied by the library (`sweep::set`); diagnostics on stderr.
pub struct Overrides(tessera::sweep::set::Overrides);

impl Overrides {
    /// Apply to one run: every error at once (each names its `--set` and gives a hint).
    pub fn apply(
        &self,
        sys: &mut System,
        w: &mut Workload,
        choice: &mut MappingChoice,
        devices: &mut Option<u64>,
    ) -> Result<(), Exit> {
        let diags = self.0.apply(sys, w, choice, devices);
        if report(&diags, &Files::default()) {
            return Err(Exit::Failed);
        }
        Ok(())
    }
}

/// A software stack's name and its figures that are not zero (`Software::figures`), as
/// `estimate` and `compare` print it: `IBM NorthPole LLM stack, 2024 (pipeline_stage_time 15.0 µs)`.
pub fn software_line(
    name: &str,
    figures: Option<&std::collections::BTreeMap<String, f64>>,
) -> String {
    let shown: Vec<String> = figures
        .into_iter()
        .flatten()
        .map(|(k, v)| match k.strip_suffix("_s") {
            Some(f) => format!("{f} {}", tessera::units::fmt_si(*v, "s")),
            None => match k.strip_suffix("_bytes") {
                Some(f) => format!("{f} {}", tessera::units::fmt_si(*v, "B")),
                None => format!("{k} {v}"),
            },
        })
        .collect();
    if shown.is_empty() {
        name.to_string()
    } else {
        format!("{name} ({})", shown.join(", "))
    }
}
