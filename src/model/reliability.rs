//! A system's reliability as the engine reads it: each component class's interruption rate per
//! component (1/s), the restart's fixed cost, the checkpoint storage's bandwidths, and the
//! goodput choices a front end makes (checkpoint interval, straggler slowdown). A leaf module:
//! the system's lowering and the engine's goodput both import it, it imports neither.

use crate::model::Ctx;
use crate::spec::reliability::{Per, ReliabilitySpec, StorageSpec};
use crate::spec::Located;
use crate::units::Dimension as D;
use serde::Serialize;

/// Failure rates by component class and the restart's cost (SI).
#[derive(Debug, Clone, Serialize)]
pub struct Reliability {
    pub name: String,
    pub classes: Vec<FailureClass>,
    /// Seconds from an interruption to training again, before the checkpoint is read.
    pub restart_s: f64,
}

/// One class: interruptions per second per component of kind `per`.
#[derive(Debug, Clone, Serialize)]
pub struct FailureClass {
    pub class: String,
    pub per: Per,
    pub rate_per_s: f64,
}

/// The checkpoint store's aggregate bandwidths (B/s).
#[derive(Debug, Clone, Serialize)]
pub struct Storage {
    pub name: String,
    pub write_bandwidth: f64,
    pub read_bandwidth: f64,
}

/// How often a job checkpoints: the interval that minimises the expected time to train
/// (`Auto`), or a stated one (s of training between checkpoints).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Interval {
    #[default]
    Auto,
    Every(f64),
}

impl Interval {
    /// `auto`, or a time (`"30 min"`, `"600 s"`).
    pub fn parse(s: &str) -> Result<Interval, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(Interval::Auto);
        }
        let v = crate::units::parse(s, D::Time)
            .map_err(|e| {
                format!(
                    "checkpoint interval `{s}`: {}; write `auto` or a time such as `30 min`",
                    e.message
                )
            })?
            .value;
        if v > 0.0 && v.is_finite() {
            Ok(Interval::Every(v))
        } else {
            Err(format!("checkpoint interval `{s}` must be a positive time"))
        }
    }
}

/// The goodput choices of a report (not figures of a file): set by the front end.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct GoodputOptions {
    pub interval: Interval,
    /// The fraction by which stragglers slow every step (0.05: 5 % slower), as stated.
    pub straggler: f64,
    /// Leave failures out (the failure-free curve of a picture): goodput counts only the
    /// checkpoints and stragglers.
    pub no_failures: bool,
}

impl GoodputOptions {
    /// A straggler slowdown as a fraction (`"5 %"`, `"0.05"`), in [0, 10].
    pub fn parse_straggler(s: &str) -> Result<f64, String> {
        let v = crate::units::parse(s, D::Ratio)
            .map_err(|e| format!("straggler slowdown `{s}`: {}", e.message))?
            .value;
        if (0.0..=10.0).contains(&v) {
            Ok(v)
        } else {
            Err(format!(
                "straggler slowdown `{s}` must be a fraction of the step time in [0, 10] (`5 %`)"
            ))
        }
    }
}

/// Read and lower a reliability file on its own (`tessera check`).
pub fn load_reliability(name: &str, fs: &dyn crate::spec::Fs) -> crate::spec::Loaded<Reliability> {
    let mut r = crate::spec::Resolver::new(fs);
    let Some((spec, id)) = r.load_file::<crate::spec::reliability::ReliabilityRef>(name) else {
        return crate::spec::Loaded {
            value: None,
            files: r.files,
            diagnostics: r.diagnostics,
        };
    };
    let located = r.resolve(spec, id, crate::diag::Path::root());
    let mut diags = std::mem::take(&mut r.diagnostics);
    let files = r.files;
    let value = located.and_then(|l| {
        let mut cx = Ctx::new(&files, id);
        let v = lower_reliability(&mut cx, &l);
        diags.extend(cx.diags);
        v
    });
    let ok = !diags
        .iter()
        .any(|d| d.severity == crate::diag::Severity::Error);
    crate::spec::Loaded {
        value: if ok { value } else { None },
        files,
        diagnostics: diags,
    }
}

pub(crate) fn lower_reliability(cx: &mut Ctx, r: &Located<ReliabilitySpec>) -> Option<Reliability> {
    let s = &r.spec;
    // the sources are declared in the reliability's own file before its default source is checked
    cx.enter_part(r.file, r.path.clone(), None);
    cx.declare_sources(&s.sources);
    cx.leave();
    cx.enter_part(r.file, r.path.clone(), s.source.as_ref());
    if s.name.trim().is_empty() {
        cx.error("name", "`name` is empty", None);
    }
    if s.failures.is_empty() {
        cx.error(
            "failures",
            "no failure classes",
            Some("give at least one `(class: ..., per: Device, count: ..., population: ..., over: ...)`, or leave `reliability` out".into()),
        );
    }
    let restart = cx.non_negative("restart", &s.restart, D::Time);
    let mut classes = Vec::new();
    let mut ok = true;
    for (i, f) in s.failures.iter().enumerate() {
        cx.enter(crate::diag::Seg::Field("failures".into()), None);
        cx.enter(crate::diag::Seg::Index(i), f.source.as_ref());
        if f.class.trim().is_empty() {
            cx.error("class", "`class` is empty", None);
        }
        let count = cx.non_negative("count", &f.count, D::Ratio);
        let population = cx.positive("population", &f.population, D::Ratio);
        let over = cx.positive("over", &f.over, D::Time);
        cx.leave();
        cx.leave();
        match (count, population, over) {
            (Some(c), Some(p), Some(t)) => classes.push(FailureClass {
                class: f.class.clone(),
                per: f.per,
                rate_per_s: c / (p * t),
            }),
            _ => ok = false,
        }
    }
    cx.leave();
    (ok && !classes.is_empty()).then_some(())?;
    Some(Reliability {
        name: s.name.clone(),
        classes,
        restart_s: restart?,
    })
}

pub(crate) fn lower_storage(cx: &mut Ctx, s: &StorageSpec) -> Option<Storage> {
    cx.enter_field("storage", s.source.as_ref());
    if s.name.trim().is_empty() {
        cx.error("name", "`name` is empty", None);
    }
    let write = cx.positive("write_bandwidth", &s.write_bandwidth, D::Bandwidth);
    let read = match &s.read_bandwidth {
        Some(q) => cx.positive("read_bandwidth", q, D::Bandwidth),
        None => write,
    };
    cx.leave();
    Some(Storage {
        name: s.name.clone(),
        write_bandwidth: write?,
        read_bandwidth: read?,
    })
}
