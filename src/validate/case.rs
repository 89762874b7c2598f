//! Reading a case file: its id, metric, published value and tolerance checked with located
//! diagnostics, the architecture, workload and mapping it names, and the run's conditions applied.

use crate::diag::{Diagnostic, Severity};
use crate::engine::{MappingChoice, Objective};
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
    RatedCarbon,
    Goodput,
    Mtbf,
    RentedCost,
    /// Bytes one device holds at the peak of a step (model state and working data).
    PeakMemory,
    /// Bytes of model state (weights, gradients, optimizer state) one device holds.
    StateMemory,
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
            Metric::RatedCarbon => "carbon (rated power)",
            Metric::Goodput => "goodput",
            Metric::Mtbf => "job MTBF",
            Metric::RentedCost => "cost (rented)",
            Metric::PeakMemory => "peak memory",
            Metric::StateMemory => "model-state memory",
        }
    }
    /// SI unit of the metric's values, for display.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::TimeToTrain | Metric::StepTime | Metric::Mtbf => "s",
            Metric::Throughput => "/s",
            Metric::Mfu | Metric::ScalingEfficiency | Metric::Goodput => "",
            Metric::AveragePower => "W",
            Metric::Energy => "J",
            Metric::RatedCarbon => "kg",
            Metric::RentedCost => "USD",
            Metric::PeakMemory | Metric::StateMemory => "B",
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
    /// The published rate a power case is evaluated at (`run: (at_rate: …)`), units per second.
    pub at_rate: Option<f64>,
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

/// The ids among `ids` that `text` names (a fitted figure's citation names the cases it was
/// fitted on).
pub fn cases_named<'a>(text: &str, ids: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    ids.into_iter().filter(|id| mentions(text, id)).collect()
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
    let software = spec
        .run
        .as_ref()
        .and_then(|r| r.software.as_ref())
        .map(|rel| {
            let l = crate::model::system::load_software(&join(name, rel), fs);
            let v = l.value.clone();
            merge(&mut files, l.files, &mut diags, l.diagnostics);
            v
        });
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
        CaseMapping::Given(m) => Some(MappingChoice::Given(m.as_ref().into())),
        CaseMapping::Auto => Some(MappingChoice::Auto(Objective::Time)),
        CaseMapping::Published => lw.value.as_ref().map(|w| match &w.mapping {
            Some(m) => MappingChoice::Given(m.clone()),
            None => MappingChoice::Auto(Objective::Time),
        }),
    };
    let value = match (lowered.as_mut(), ls.value, lw.value, mapping) {
        (Some(l), Some(mut sys), Some(mut w), Some(mut mapping)) => {
            if let Some(Some(sw)) = software {
                sys.with_software(sw);
            }
            sys.on_vendor_software(&w);
            let fitted = sys.fitted.iter().any(|t| mentions(t, &spec.id));
            if fitted && l.role == Some(Role::Check) {
                let mut cx = Ctx::new(&files, id);
                cx.error(
                    "role",
                    format!(
                        "case `{}` is named by a fitted figure of its architecture `{}`: its figures were used to fit the model, so it cannot check it",
                        spec.id, sys.name
                    ),
                    Some("write `role: Calibration` (validate reports it beside the check set), or re-fit the figure without this case".into()),
                );
                diags.extend(cx.diags);
            }
            if let Err(msg) = apply_run(&mut w, spec.run.as_ref()) {
                let mut cx = Ctx::new(&files, id);
                cx.error("run", msg, None);
                diags.extend(cx.diags);
            }
            {
                let mut cx = Ctx::new(&files, id);
                apply_load(&mut cx, &mut w, &spec);
                diags.extend(cx.diags);
            }
            let mut devices = spec.devices;
            if let Some(set) = &spec.set {
                let o = crate::sweep::set::Overrides::from_pairs(
                    set.iter().map(|(p, v)| (p.as_str(), v.as_str())),
                );
                let mut cx = Ctx::new(&files, id);
                for d in o.apply(&mut sys, &mut w, &mut mapping, &mut devices) {
                    // Each error at its own entry (`--set PATH=VALUE` names it).
                    let at = d.file.trim_start_matches("--set ");
                    let key = at.split_once('=').map_or(at, |(p, _)| p.trim());
                    let path = crate::diag::Path::root().field("set").key(key);
                    cx.error_at(&path, format!("`{at}`: {}", d.message), d.hint);
                }
                diags.extend(cx.diags);
            }
            if let (Some(b), Some(n)) = (l.baseline, devices.or(Some(sys.devices))) {
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
                role: l.role.unwrap_or(Role::Check),
                description: spec.description.clone(),
                file: name.to_string(),
                citation: l.citation.clone(),
                system: sys,
                workload: w,
                devices,
                mapping,
                metric: l.metric,
                baseline: l.baseline,
                published: l.published,
                tolerance: l.tolerance,
                tolerance_basis: spec.tolerance_basis.clone(),
                evaluation: l.evaluation,
                startup_s: l.startup_s,
                boundary: l.boundary,
                at_rate: l.at_rate,
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

/// A serving case's `slo` and `concurrency` set on its workload, located errors where they do
/// not parse or the workload is not transformer inference.
fn apply_load(cx: &mut Ctx, w: &mut Workload, spec: &CaseSpec) {
    use crate::model::serving::{Concurrency, Slo};
    fn parsed<T>(cx: &mut Ctx, field: &str, r: Result<T, String>) -> Option<T> {
        r.map_err(|m| {
            let (msg, hint) = split_hint(&m);
            cx.error(field, msg, hint);
        })
        .ok()
    }
    let slo = spec
        .slo
        .as_deref()
        .and_then(|t| parsed(cx, "slo", Slo::parse(t)));
    let conc = spec
        .concurrency
        .as_deref()
        .and_then(|t| parsed(cx, "concurrency", Concurrency::parse(t)));
    if let Err(m) = crate::engine::serve::set_load(w, slo, None, conc) {
        let field = if spec.slo.is_some() {
            "slo"
        } else {
            "concurrency"
        };
        let (msg, hint) = split_hint(&m);
        cx.error(field, msg, hint);
    }
}

/// A message with an optional `\nhint: …` line split into its two parts.
fn split_hint(m: &str) -> (String, Option<String>) {
    match m.split_once("\nhint: ") {
        Some((a, h)) => (a.to_string(), Some(h.to_string())),
        None => (m.to_string(), None),
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
    /// `None` when the file says none (an error already reported).
    role: Option<Role>,
    citation: String,
    metric: Metric,
    baseline: Option<u64>,
    published: f64,
    tolerance: f64,
    evaluation: Option<(f64, f64, f64)>,
    startup_s: f64,
    boundary: PowerBoundary,
    at_rate: Option<f64>,
}

fn lower_case(cx: &mut Ctx, s: &CaseSpec, name: &str) -> Option<Lowered> {
    let (role, citation) = case_header(cx, s, name);
    let (metric, baseline) = metric_of(&s.metric);
    cx.enter_part(cx.file(), crate::diag::Path::root(), Some(&s.source));
    let published = published_value(cx, s, metric);
    let tolerance = cx.positive("tolerance", &s.tolerance, Dimension::Ratio);
    if tolerance.is_some_and(|t| t >= 1.0) {
        cx.error(
            "tolerance",
            "a tolerance of 100 % or more accepts anything",
            None,
        );
    }
    let run = s.run.clone().unwrap_or_default();
    let RunFigures {
        startup_s,
        evaluation,
        at_rate,
        at_rate_bad,
    } = lower_run(cx, &run, metric);
    cx.leave();
    if at_rate_bad {
        return None;
    }
    Some(Lowered {
        role,
        citation: citation?,
        metric,
        baseline,
        published: published?,
        tolerance: tolerance?,
        evaluation,
        startup_s: startup_s?,
        boundary: run.power_boundary.unwrap_or(PowerBoundary::It),
        at_rate,
    })
}

/// The case's own fields: its format version, id (against its file's name), family, role,
/// tolerance basis and the source it cites; its role and that source's citation.
fn case_header(cx: &mut Ctx, s: &CaseSpec, name: &str) -> (Option<Role>, Option<String>) {
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
    let role = s.role.map(|r| match r {
        RoleSpec::Calibration => Role::Calibration,
        RoleSpec::Check => Role::Check,
    });
    if role.is_none() {
        cx.error(
            "role",
            "the case says no `role`",
            Some("write `role: Check` (never used to fit a figure: the gate) or `role: Calibration` (named by a `fitted-…` figure's citation, or meant for `tessera calibrate`)".into()),
        );
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
    (role, citation)
}

/// The metric a case compares and, for a scaling efficiency, its baseline.
fn metric_of(m: &MetricSpec) -> (Metric, Option<u64>) {
    match m {
        MetricSpec::TimeToTrain => (Metric::TimeToTrain, None),
        MetricSpec::StepTime => (Metric::StepTime, None),
        MetricSpec::Throughput => (Metric::Throughput, None),
        MetricSpec::Mfu => (Metric::Mfu, None),
        MetricSpec::ScalingEfficiency(b) => (Metric::ScalingEfficiency, Some(b.baseline)),
        MetricSpec::AveragePower => (Metric::AveragePower, None),
        MetricSpec::Energy => (Metric::Energy, None),
        MetricSpec::RatedCarbon => (Metric::RatedCarbon, None),
        MetricSpec::Goodput => (Metric::Goodput, None),
        MetricSpec::Mtbf => (Metric::Mtbf, None),
        MetricSpec::RentedCost => (Metric::RentedCost, None),
        MetricSpec::PeakMemory => (Metric::PeakMemory, None),
        MetricSpec::StateMemory => (Metric::StateMemory, None),
    }
}

/// The published figure in the unit its metric reads (a ratio at most 1 for the shares).
fn published_value(cx: &mut Ctx, s: &CaseSpec, metric: Metric) -> Option<f64> {
    match metric {
        Metric::TimeToTrain | Metric::StepTime | Metric::Mtbf => {
            cx.positive("published", &s.published, Dimension::Time)
        }
        Metric::Mfu | Metric::ScalingEfficiency | Metric::Goodput => {
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
        Metric::RatedCarbon => cx.positive("published", &s.published, Dimension::Mass),
        Metric::RentedCost => cx.positive("published", &s.published, Dimension::Money),
        Metric::PeakMemory | Metric::StateMemory => {
            cx.positive("published", &s.published, Dimension::Bytes)
        }
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
    }
}

/// What [`lower_run`] reads of a case's `run`.
struct RunFigures {
    startup_s: Option<f64>,
    evaluation: Option<(f64, f64, f64)>,
    at_rate: Option<f64>,
    at_rate_bad: bool,
}

/// The run's settings a case states (inside its `run` field): the start-up time, the evaluation
/// schedule and, for a power figure, the load it was measured at; and whether `at_rate` was given
/// but unreadable (the case is then not lowered).
fn lower_run(cx: &mut Ctx, run: &RunConditions, metric: Metric) -> RunFigures {
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
    let at_rate = run.at_rate.as_ref().and_then(|t| {
        if metric != Metric::AveragePower {
            cx.error(
                "at_rate",
                format!(
                    "`at_rate` sets the load of a power figure; this case's metric is {}",
                    metric.name()
                ),
                Some("remove `at_rate`, or compare `metric: AveragePower`".into()),
            );
            return None;
        }
        match parse_throughput(t) {
            Ok(v) => {
                // check the source tag like any quantity
                let _ = cx.q(
                    "at_rate",
                    &crate::spec::Q(format!("{v} {}", tag_of(t))),
                    Dimension::Ratio,
                );
                Some(v)
            }
            Err(m) => {
                cx.error("at_rate", m, None);
                None
            }
        }
    });
    let at_rate_bad = run.at_rate.is_some() && at_rate.is_none();
    cx.leave();
    RunFigures {
        startup_s,
        evaluation,
        at_rate,
        at_rate_bad,
    }
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
        && run.scaling.is_none()
    {
        return Ok(());
    }
    let Task::Training(t) = &mut w.task else {
        return Err(
            "`global_batch`, `target`, `compute`, `activations` and `scaling` apply to training workloads"
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
    if let Some(s) = run.scaling {
        t.scaling = s;
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
