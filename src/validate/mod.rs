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
//! per-case correction factors. Cases under a `known-gaps/` directory are run and reported but not
//! gated.

pub mod audit;

use crate::diag::{Diagnostic, Severity};
use crate::engine::program::{Phase, Section};
use crate::engine::{self, cpu, MappingChoice, Objective};
use crate::model::precision::Precision;
use crate::model::system::{load_system, System};
use crate::model::workload::{load_mapping, load_workload, Target, Task, Workload};
use crate::model::Ctx;
use crate::spec::validation::*;
use crate::spec::{join, Files, Fs, Loaded, FORMAT_VERSION};
use crate::units::Dimension;
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

/// A loaded, checked case.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    pub family: String,
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

/// Whether `text` names `id` as a whole word (ids are `[a-z0-9-]`).
pub fn mentions(text: &str, id: &str) -> bool {
    let is_id = |c: char| c.is_ascii_alphanumeric() || c == '-';
    text.match_indices(id).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + id.len()..].chars().next();
        !before.is_some_and(is_id) && !after.is_some_and(is_id)
    })
}

/// Whether a path lies in a `known-gaps` directory.
pub fn is_known_gap(path: &str) -> bool {
    std::path::Path::new(path)
        .components()
        .any(|c| c.as_os_str() == "known-gaps")
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !id.starts_with('-')
        && !id.ends_with('-')
}

/// Parse a throughput as written in a case (`"28356 tokens/s"`, `"1.8 k tokens/s"`,
/// `"38400 images/s"`): a number, an optional SI prefix, a unit of work per second.
pub fn parse_throughput(text: &str) -> Result<f64, String> {
    let q = split_tag(text).0;
    let (num, unit) = match q.find(|c: char| c.is_whitespace()) {
        Some(i) => (q[..i].trim(), q[i..].trim()),
        None => return Err(format!("`{q}` has no unit: write e.g. \"28356 tokens/s\"")),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{num}` is not a number"))?;
    let (scale, rest) = match unit.split_once(' ') {
        Some((p, r)) => match p {
            "k" => (1e3, r),
            "M" => (1e6, r),
            "G" => (1e9, r),
            _ => return Err(format!("unknown prefix `{p}`: use k, M or G")),
        },
        None => (1.0, unit),
    };
    const UNITS: [&str; 6] = [
        "tokens/s",
        "samples/s",
        "images/s",
        "sequences/s",
        "queries/s",
        "/s",
    ];
    if !UNITS.contains(&rest) {
        return Err(format!(
            "unknown throughput unit `{rest}`: use one of {}",
            UNITS.join(", ")
        ));
    }
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("throughput must be positive, found {v}"));
    }
    Ok(v * scale)
}

/// Read and check a case file, its architecture and its workload.
pub fn load_case(name: &str, fs: &dyn Fs) -> Loaded<Case> {
    let crate::model::Read {
        spec,
        file: id,
        value: mut lowered,
        mut files,
        diagnostics: mut diags,
    } = match crate::model::read_lowered::<CaseSpec, _>(name, fs, |cx, s| lower_case(cx, s, name)) {
        Ok(r) => r,
        Err(u) => return u.into(),
    };
    // The architecture, workload and mapping files the case names, with their own diagnostics.
    let sys_path = join(name, &spec.system);
    let ls = load_system(&sys_path, fs);
    merge(&mut files, ls.files, &mut diags, ls.diagnostics);
    let wl_path = join(name, &spec.workload);
    let lw = load_workload(&wl_path, fs);
    merge(&mut files, lw.files, &mut diags, lw.diagnostics);
    let mapping = match &spec.mapping {
        CaseMapping::Use(rel) => {
            let lm = load_mapping(&join(name, rel), fs);
            let v = lm.value.clone();
            merge(&mut files, lm.files, &mut diags, lm.diagnostics);
            v.map(MappingChoice::Given)
        }
        CaseMapping::Given(m) => Some(MappingChoice::Given(m.clone())),
        CaseMapping::Auto => Some(MappingChoice::Auto(Objective::Time)),
        CaseMapping::Published => lw.value.as_ref().map(|w| match &w.mapping {
            Some(m) => MappingChoice::Given(m.clone()),
            None => MappingChoice::Auto(Objective::Time),
        }),
    };
    let value = match (lowered.as_mut(), ls.value, lw.value, mapping) {
        (Some(l), Some(sys), Some(mut w), Some(mapping)) => {
            let fitted = sys.fitted.iter().any(|t| mentions(t, &spec.id));
            if let Err(msg) = apply_run(&mut w, spec.run.as_ref()) {
                let mut cx = Ctx::new(&files, id);
                cx.error("run", msg, None);
                diags.extend(cx.diags);
            }
            if let (Some(b), Some(n)) = (l.baseline, spec.devices.or(Some(sys.devices))) {
                if b == 0 || b >= n {
                    let mut cx = Ctx::new(&files, id);
                    cx.error(
                        "metric",
                        format!("the baseline ({b} devices) must be between 1 and the case's {n} devices"),
                        None,
                    );
                    diags.extend(cx.diags);
                }
            }
            Some(Case {
                id: spec.id.clone(),
                family: spec.family.clone(),
                description: spec.description.clone(),
                file: name.to_string(),
                citation: l.citation.clone(),
                system: sys,
                workload: w,
                devices: spec.devices,
                mapping,
                metric: l.metric,
                baseline: l.baseline,
                published: l.published,
                tolerance: l.tolerance,
                tolerance_basis: spec.tolerance_basis.clone(),
                evaluation: l.evaluation,
                startup_s: l.startup_s,
                boundary: l.boundary,
                known_gap: is_known_gap(name),
                fitted,
            })
        }
        _ => None,
    };
    let ok = !diags.iter().any(|d| d.severity == Severity::Error);
    Loaded {
        value: if ok { value } else { None },
        files,
        diagnostics: diags,
    }
}

/// Append another load's files and diagnostics.
pub(crate) fn merge(
    files: &mut Files,
    more: Files,
    diags: &mut Vec<Diagnostic>,
    more_diags: Vec<Diagnostic>,
) {
    for (n, t) in more.files {
        if files.text_of(&n).is_none() {
            files.add(&n, t);
        }
    }
    diags.extend(more_diags);
}

/// The figures of a case file, checked.
struct Lowered {
    citation: String,
    metric: Metric,
    baseline: Option<u64>,
    published: f64,
    tolerance: f64,
    evaluation: Option<(f64, f64, f64)>,
    startup_s: f64,
    boundary: PowerBoundary,
}

fn lower_case(cx: &mut Ctx, s: &CaseSpec, name: &str) -> Option<Lowered> {
    cx.declare_sources(&s.sources);
    if s.version != FORMAT_VERSION {
        cx.error(
            "version",
            format!("unsupported format version {}", s.version),
            Some(format!("this tessera reads version {FORMAT_VERSION}")),
        );
    }
    if !valid_id(&s.id) {
        cx.error(
            "id",
            format!("case id `{}` must be lower-case letters, digits and `-`", s.id),
            Some("ids are named in fitted citations of architecture files, e.g. `mlperf-v50-llama405b-h100-8192`".into()),
        );
    }
    let stem = std::path::Path::new(name)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if stem != s.id && valid_id(&s.id) {
        cx.warn(
            "id",
            format!("case id `{}` differs from the file name `{stem}`", s.id),
            Some("name the file after the id so a case is easy to find".into()),
        );
    }
    if s.family.trim().is_empty() {
        cx.error("family", "the case names no hardware family", None);
    }
    if s.tolerance_basis.trim().is_empty() {
        cx.error(
            "tolerance_basis",
            "say why the tolerance is what it is",
            Some("the measurement's own uncertainty and what the model leaves out, set before looking at the result".into()),
        );
    }
    let citation = s.sources.get(&s.source).cloned();
    if citation.is_none() {
        cx.error(
            "source",
            format!("source `{}` is not declared in `sources`", s.source),
            Some(
                "cite the MLPerf round, submitter, system and result path, or the paper and table"
                    .into(),
            ),
        );
    }
    let (metric, baseline) = match &s.metric {
        MetricSpec::TimeToTrain => (Metric::TimeToTrain, None),
        MetricSpec::StepTime => (Metric::StepTime, None),
        MetricSpec::Throughput => (Metric::Throughput, None),
        MetricSpec::Mfu => (Metric::Mfu, None),
        MetricSpec::ScalingEfficiency(b) => (Metric::ScalingEfficiency, Some(b.baseline)),
        MetricSpec::AveragePower => (Metric::AveragePower, None),
        MetricSpec::Energy => (Metric::Energy, None),
    };
    cx.enter_part(cx.file(), crate::diag::Path::root(), Some(&s.source));
    let published = match metric {
        Metric::TimeToTrain | Metric::StepTime => {
            cx.positive("published", &s.published, Dimension::Time)
        }
        Metric::Mfu | Metric::ScalingEfficiency => {
            let v = cx.positive("published", &s.published, Dimension::Ratio);
            if v.is_some_and(|v| v > 1.0) {
                cx.error(
                    "published",
                    format!("{} cannot exceed 100 %", metric.name()),
                    None,
                );
            }
            v
        }
        Metric::AveragePower => cx.positive("published", &s.published, Dimension::Power),
        Metric::Energy => cx.positive("published", &s.published, Dimension::Energy),
        Metric::Throughput => match parse_throughput(&s.published.0) {
            Ok(v) => {
                // check the source tag like any quantity
                let _ = cx.q(
                    "published",
                    &crate::spec::Q(format!("{v} {}", tag_of(&s.published.0))),
                    Dimension::Ratio,
                );
                Some(v)
            }
            Err(m) => {
                cx.error("published", m, None);
                None
            }
        },
    };
    let tolerance = cx.positive("tolerance", &s.tolerance, Dimension::Ratio);
    if tolerance.is_some_and(|t| t >= 1.0) {
        cx.error(
            "tolerance",
            "a tolerance of 100 % or more accepts anything",
            None,
        );
    }
    let run = s.run.clone().unwrap_or_default();
    cx.enter_field("run", None);
    let startup_s = match &run.startup {
        Some(q) => cx.non_negative("startup", q, Dimension::Time),
        None => Some(0.0),
    };
    let evaluation = run.evaluation.as_ref().and_then(|e| {
        cx.enter_field("evaluation", e.source.as_ref());
        let start = e.start.unwrap_or(e.every);
        let ok = [e.every, e.samples, start]
            .iter()
            .all(|v| v.is_finite() && *v > 0.0);
        if !ok {
            cx.error("", "`every`, `samples` and `start` must be positive", None);
        }
        if e.source.is_none() {
            cx.warn(
                "",
                "the evaluation schedule names no `source`",
                Some("cite the benchmark's reference, or write `source: \"assumed\"`".into()),
            );
        }
        cx.leave();
        ok.then_some((start, e.every, e.samples))
    });
    cx.leave();
    cx.leave();
    Some(Lowered {
        citation: citation?,
        metric,
        baseline,
        published: published?,
        tolerance: tolerance?,
        evaluation,
        startup_s: startup_s?,
        boundary: run.power_boundary.unwrap_or(PowerBoundary::It),
    })
}

/// A quantity text split into its body and its `@source` tag.
pub(crate) fn split_tag(text: &str) -> (&str, Option<&str>) {
    match text.split_once('@') {
        Some((b, t)) => (b.trim(), Some(t.trim())),
        None => (text.trim(), None),
    }
}

/// The ` @tag` of a quantity text, or "".
fn tag_of(text: &str) -> String {
    match split_tag(text).1 {
        Some(t) => format!("@{t}"),
        None => String::new(),
    }
}

/// Apply the run's global batch and target to the workload.
fn apply_run(w: &mut Workload, run: Option<&RunConditions>) -> Result<(), String> {
    let Some(run) = run else { return Ok(()) };
    if run.global_batch.is_none()
        && run.target.is_none()
        && run.activations.is_none()
        && run.compute.is_none()
    {
        return Ok(());
    }
    let Task::Training(t) = &mut w.task else {
        return Err(
            "`global_batch`, `target`, `compute` and `activations` apply to training workloads"
                .into(),
        );
    };
    let parse = |field: &str, a: &str| {
        Precision::parse(a).ok_or_else(|| {
            format!(
                "unknown precision `{a}` for `{field}`: {}",
                Precision::names().collect::<Vec<_>>().join(", ")
            )
        })
    };
    if let Some(a) = &run.activations {
        t.activations = parse("activations", a)?;
    }
    if let Some(c) = &run.compute {
        t.compute = parse("compute", c)?;
    }
    if let Some(gb) = run.global_batch {
        if gb == 0 {
            return Err("`global_batch` must be at least 1".into());
        }
        t.global_batch = gb;
    }
    if let Some(tg) = run.target {
        let (RunTarget::Tokens(v) | RunTarget::Samples(v) | RunTarget::Steps(v)) = tg;
        if !(v.is_finite() && v > 0.0) {
            return Err(format!("the target must be positive, found {v}"));
        }
        t.target = Some(match tg {
            RunTarget::Tokens(v) => Target::Tokens(v),
            RunTarget::Samples(v) => Target::Samples(v),
            RunTarget::Steps(v) => Target::Steps(v),
        });
    }
    Ok(())
}

/// The outcome of one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub id: String,
    pub family: String,
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

/// Resolve the mapping and evaluate `w` on `n` devices: the estimate and, per step, the share of
/// operator time spent in forward passes (for evaluation passes).
fn evaluate(
    sys: &System,
    w: &Workload,
    choice: &MappingChoice,
    n: u64,
) -> Result<(engine::Estimate, f64), String> {
    let prep = engine::prepare(sys, w, choice, Some(n)).map_err(|i| i.reason.to_string())?;
    let (m, p, mach) = (prep.mapping, prep.program, prep.machine);
    let e = engine::finish(sys, w, &m, &p, &mach);
    if !e.feasible {
        return Err(e.reason.clone().unwrap_or_else(|| "infeasible".into()));
    }
    let mut trace = Vec::new();
    cpu::eval_traced(&p, &mach, Some(&mut trace));
    let (mut fwd, mut all) = (0.0, 0.0);
    for (op, t) in p.ops.iter().zip(&trace) {
        if op.section == Section::MicroBatch {
            all += t;
            if op.phase == Phase::Forward {
                fwd += t;
            }
        }
    }
    let share = if all > 0.0 { fwd / all } else { 1.0 };
    Ok((e, share))
}

fn mapping_words(e: &engine::Estimate) -> String {
    match &e.mapping {
        Some(m) => format!(
            "dp {} tp {} pp {} cp {} v {} mb {} zero {} {:?}",
            m.dp, m.tp, m.pp, m.cp, m.interleave, m.micro_batch, m.zero, m.recompute
        )
        .to_lowercase(),
        None => String::new(),
    }
}

fn global_batch(w: &Workload) -> Option<u64> {
    match &w.task {
        Task::Training(t) => Some(t.global_batch),
        _ => None,
    }
}

/// Predict the case's metric.
pub fn predict(c: &Case) -> Result<(f64, String), String> {
    let n = c.devices.unwrap_or(c.system.devices);
    let (e, fwd_share) = evaluate(&c.system, &c.workload, &c.mapping, n)?;
    let words = mapping_words(&e);
    let step = e.step_time_s.unwrap_or(f64::NAN);
    let facility = e.average_power_w.unwrap_or(f64::NAN);
    let it = facility / c.system.pue;
    let power = match c.boundary {
        PowerBoundary::Facility => facility,
        PowerBoundary::It => it,
        // the devices alone: IT power less their share of hosts, NICs, switches, weight store
        PowerBoundary::Devices => {
            it - n as f64 * c.system.overhead_power() / c.system.devices as f64
        }
    };
    // Wall-clock time of the whole run: training steps, the run's evaluations (forward passes
    // over the evaluation set at the training step's per-sample forward cost) and start-up.
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
                evals * samples * step * fwd_share / gb as f64
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
        workload: c.workload.name.clone(),
        devices: n,
        detail,
    }
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

/// The gate's summary: over the gated cases; the headline is `unfitted`.
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
    /// All gated cases, with the largest error's case.
    pub all: Stats,
    /// Every gated case is within its tolerance.
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
        pass: all.within == all.cases,
        all,
    }
}
