//! Calibration as a command: fit named figures of an architecture (sweep paths such as
//! `device.efficiency.matmul`) to the published results of calibration cases by least squares.
//!
//! The residual of a case is its relative error, (predicted − published) / published, with the
//! prediction the validation run itself makes ([`super::predict`]): the case's system is edited at
//! each path the way the architecture file edited at that number would lower
//! ([`crate::engine::paths::edit_system`], the sweep's one path vocabulary) and the case lowered and
//! evaluated through the cost program. Levenberg-Marquardt with bounds (a figure at a bound that
//! the descent would push out is held there and the step solved over the rest; steps projected
//! onto the box), the Jacobian by central finite differences over the same evaluation. The fit
//! reports each figure with its standard error and 95 % interval from the residual variance
//! s² (JᵀJ)⁻¹ (Student t quantile), and every case's error before and after.
//!
//! Only `Calibration` cases are fitted on: a `Check` case is refused, so the check set stays a
//! set the model was never fitted to. [`write_part`] turns a fit into the text of a calibrated part
//! file whose figures cite the cases and the command (the library returns text; the CLI writes it).

use super::{Case, Role};
use crate::engine::paths;
use crate::units::Dimension;
use nalgebra::{DMatrix, DVector};
use serde::Serialize;

/// One figure to fit: its path and the box it may move in (SI), and the figures that move with it
/// at the ratio the architecture gives them (`--fit A+B`: B held at B/A of the file times A).
#[derive(Debug, Clone)]
pub struct Param {
    pub path: String,
    pub lo: f64,
    pub hi: f64,
    /// Paths tied to this figure, each with its ratio to it.
    pub follow: Vec<(String, f64)>,
}

/// Why a fit cannot be made (a message and a hint).
#[derive(Debug, Clone)]
pub struct CalibrateError {
    pub message: String,
    pub hint: Option<String>,
}

fn fail(message: impl Into<String>, hint: Option<&str>) -> CalibrateError {
    CalibrateError {
        message: message.into(),
        hint: hint.map(String::from),
    }
}

/// A fitted figure.
#[derive(Debug, Clone, Serialize)]
pub struct Fitted {
    pub path: String,
    /// SI unit ("" for ratios).
    pub unit: &'static str,
    /// The value the cases' architecture holds now.
    pub start: f64,
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
    /// The fit stopped at a bound (no interval then: the bound decides it).
    pub at_bound: bool,
    /// Standard error; `null` without residual degrees of freedom or at a bound.
    pub std_error: Option<f64>,
    /// 95 % confidence interval.
    pub ci95: Option<[f64; 2]>,
    /// Figures moved with this one at the ratio the architecture gives them (`--fit A+B`).
    pub tied: Vec<Tied>,
}

/// A figure tied to a fitted one.
#[derive(Debug, Clone, Serialize)]
pub struct Tied {
    pub path: String,
    /// Its ratio to the fitted figure (the architecture's).
    pub ratio: f64,
    /// Its value at the fit.
    pub value: f64,
}

/// A case's error before and after the fit.
#[derive(Debug, Clone, Serialize)]
pub struct Residual {
    pub id: String,
    pub published: f64,
    pub before: f64,
    pub after: f64,
    /// (predicted − published) / published.
    pub error_before: f64,
    pub error_after: f64,
}

/// The result of a fit.
#[derive(Debug, Clone, Serialize)]
pub struct Fit {
    pub figures: Vec<Fitted>,
    pub residuals: Vec<Residual>,
    /// Sum of squared relative errors, before and after.
    pub rss_before: f64,
    pub rss_after: f64,
    /// Cases less free figures.
    pub dof: usize,
    pub iterations: usize,
    pub converged: bool,
    /// Cost-program evaluations of a case made by the fit.
    pub evaluations: usize,
}

/// The default box of a path: a ratio of peak in (0, 1], anything else positive (a lower bound of
/// 0 is taken as a millionth of the start: a figure of 0 is no machine).
pub fn default_bounds(path: &str, dim: Dimension) -> (f64, f64) {
    let ratio = path.starts_with("device.efficiency.") && dim == Dimension::Ratio;
    (0.0, if ratio { 1.0 } else { f64::INFINITY })
}

/// Resolve a path to fit in `sys`: a figure of the machine, not a program axis.
pub fn resolve(
    path: &str,
    sys: &crate::model::system::System,
) -> Result<paths::Knob, CalibrateError> {
    if paths::listed(sys)
        .iter()
        .any(|l| l.path == path && l.kind == "program")
    {
        return Err(fail(
            format!("`{path}` is a program axis (devices, nodes, mapping), not a figure to fit"),
            Some("calibrate fits figures of the architecture file, e.g. `device.efficiency.matmul`; set the mapping in the case"),
        ));
    }
    paths::resolve(path, sys).map_err(|(message, hint)| CalibrateError { message, hint })
}

/// A figure to fit as `--fit` writes it, `PATH` or `PATH=LO..HI` (bounds as the file writes
/// values, `1 us..20 us`), resolved against `sys`; without bounds, [`default_bounds`]. `A+B+…`
/// fits `A` and moves `B`, … with it at the ratios `sys` gives them (an energy per operation at
/// two precisions whose ratio the file states).
pub fn param(text: &str, sys: &crate::model::system::System) -> Result<Param, CalibrateError> {
    let (path, bounds) = match text.split_once('=') {
        Some((p, b)) => (p.trim(), Some(b.trim())),
        None => (text.trim(), None),
    };
    let mut tied = path.split('+').map(str::trim);
    let path = tied.next().unwrap_or_default();
    let knob = resolve(path, sys)?;
    let lead = current(sys, path, &knob).filter(|v| *v != 0.0);
    let mut follow = Vec::new();
    for f in tied {
        let k = resolve(f, sys)?;
        if k.dimension != knob.dimension {
            return Err(fail(
                format!("`{f}` cannot move with `{path}`: their units differ"),
                Some("tie figures of one kind, e.g. `device.energy_per_flop.int4+device.energy_per_flop.int8`"),
            ));
        }
        let (Some(a), Some(b)) = (lead, current(sys, f, &k)) else {
            return Err(fail(
                format!("cannot read the ratio of `{f}` to `{path}` in the architecture"),
                Some("a tied figure keeps the ratio the file gives it: write both figures, the first not 0"),
            ));
        };
        if f == path || follow.iter().any(|(g, _)| g == f) {
            return Err(fail(format!("`{f}` is named twice"), None));
        }
        // to 3 significant digits: the file writes each figure to 4, so their ratio is known to
        // about 3, and a refit then finds the ratio it wrote (no drift from refit to refit)
        let ratio = b / a;
        let k = 10f64.powi(2 - ratio.abs().log10().floor() as i32);
        follow.push((f.to_string(), (ratio * k).round() / k));
    }
    let (mut lo, mut hi) = default_bounds(path, knob.dimension);
    if let Some(b) = bounds {
        let (l, h) = b.split_once("..").ok_or_else(|| {
            fail(
                format!("bounds `{b}` of `{path}` are not `LO..HI`"),
                Some("write e.g. `device.efficiency.network=0.5..0.9`"),
            )
        })?;
        let parse = |s: &str| {
            crate::units::parse(s.trim(), knob.dimension)
                .map(|p| p.value)
                .map_err(|e| CalibrateError {
                    message: format!("bound `{s}` of `{path}`: {}", e.message),
                    hint: e.hint,
                })
        };
        lo = parse(l)?;
        hi = parse(h)?;
        if lo >= hi {
            return Err(fail(
                format!("the bounds of `{path}` are empty ({l} ≥ {h})"),
                None,
            ));
        }
    }
    Ok(Param {
        path: path.to_string(),
        lo,
        hi,
        follow,
    })
}

/// Check the cases and paths; returns each parameter's dimension and start value.
fn prepare(cases: &[Case], params: &[Param]) -> Result<Vec<(Dimension, f64)>, CalibrateError> {
    if cases.is_empty() {
        return Err(fail(
            "no calibration case given",
            Some("name case files or folders of them"),
        ));
    }
    if params.is_empty() {
        return Err(fail(
            "no figure to fit",
            Some(
                "name the figures with `--fit device.efficiency.matmul,device.efficiency.network`",
            ),
        ));
    }
    let checks: Vec<&str> = cases
        .iter()
        .filter(|c| c.role == Role::Check)
        .map(|c| c.id.as_str())
        .collect();
    if !checks.is_empty() {
        return Err(fail(
            format!(
                "{} {} role `Check`: the check set is never fitted on",
                checks.join(", "),
                if checks.len() == 1 { "has" } else { "have" }
            ),
            Some("fit on cases that say `role: Calibration`; a case fitted on cannot check the model"),
        ));
    }
    let named = |p: &Param| {
        std::iter::once(p.path.clone())
            .chain(p.follow.iter().map(|f| f.0.clone()))
            .collect::<Vec<_>>()
    };
    for (i, p) in params.iter().enumerate() {
        for x in named(p) {
            if params[..i].iter().any(|q| named(q).contains(&x)) {
                return Err(fail(format!("`{x}` is named twice"), None));
            }
        }
    }
    let mut out = Vec::new();
    for p in params {
        let mut start = None;
        for c in cases {
            let knob = resolve(&p.path, &c.system).map_err(|e| CalibrateError {
                message: format!("{} (case {})", e.message, c.id),
                hint: e.hint,
            })?;
            let mut probe = c.system.clone();
            if paths::edit_system(&mut probe, &p.path, 1.0).is_none() {
                return Err(fail(
                    format!("`{}` names no figure of the architecture file", p.path),
                    Some("calibrate fits figures as files write them (`device.…`, `scale_up.…`, `scale_out.…`); `machine.*`, `hbm.*`, `devices` and `mapping.*` are not figures of a file"),
                ));
            }
            let v = current(&c.system, &p.path, &knob).ok_or_else(|| {
                fail(
                    format!("cannot read the current value of `{}`", p.path),
                    None,
                )
            })?;
            match start {
                None => start = Some((knob.dimension, v)),
                Some((_, s)) if ((s - v) / s).abs() > 1e-9 => return Err(fail(
                    format!(
                        "the cases' architectures disagree on `{}` ({s} and {v}, case {})",
                        p.path, c.id
                    ),
                    Some("calibrate one device at a time: its cases share the figure being fitted"),
                )),
                _ => {}
            }
        }
        let Some((dim, v)) = start else {
            return Err(fail("no calibration case given", None));
        };
        if p.lo >= p.hi {
            return Err(fail(format!("the bounds of `{}` are empty", p.path), None));
        }
        out.push((dim, v));
    }
    Ok(out)
}

/// The value the model holds at `path`: the machine slot the path sets, taken back through the
/// path's conversion.
pub(crate) fn current(
    sys: &crate::model::system::System,
    path: &str,
    knob: &paths::Knob,
) -> Option<f64> {
    let t = knob.targets.first()?;
    let m = crate::engine::machine::machine(sys, sys.devices);
    match t.op {
        crate::sweep::space::Op::Set { scale, offset, .. } if scale != 0.0 => {
            let v = (m.0[t.field] - offset) / scale;
            // the slot must be the path's own figure: editing it there gives the same slot
            let mut probe = sys.clone();
            paths::edit_system(&mut probe, path, v)?;
            let m2 = crate::engine::machine::machine(&probe, sys.devices);
            (((m2.0[t.field] - m.0[t.field]) / m.0[t.field].abs().max(1e-300)).abs() < 1e-9)
                .then_some(v)
        }
        _ => None,
    }
}

/// A case with every path set to `theta`.
pub(crate) fn edited(c: &Case, params: &[Param], theta: &[f64]) -> Case {
    let mut c = c.clone();
    let rules = crate::engine::machine::energy_rules(&c.system);
    let mut rederive = false;
    for (p, v) in params.iter().zip(theta) {
        paths::edit_system(&mut c.system, &p.path, *v);
        rederive |= paths::resolve(&p.path, &c.system).is_ok_and(|k| k.derive);
        for (f, ratio) in &p.follow {
            paths::edit_system(&mut c.system, f, v * ratio);
            rederive |= paths::resolve(f, &c.system).is_ok_and(|k| k.derive);
        }
    }
    if rederive {
        // energy per FLOP the loader derived from TDP moves with what it derives from
        paths::derive_energy(&mut c.system, rules.rederive);
    }
    c
}

struct Problem<'a> {
    cases: &'a [Case],
    params: &'a [Param],
    evaluations: usize,
}

impl Problem<'_> {
    fn predictions(&mut self, theta: &[f64]) -> Result<Vec<f64>, CalibrateError> {
        self.evaluations += self.cases.len();
        self.cases
            .iter()
            .map(|c| {
                super::predict(&edited(c, self.params, theta))
                    .map(|(v, _)| v)
                    .map_err(|r| {
                        fail(
                            format!("case {} cannot be evaluated at {theta:?}: {r}", c.id),
                            Some("narrow the bounds (`--fit PATH=LO..HI`) to where every case is feasible"),
                        )
                    })
            })
            .collect()
    }
    fn residuals(&mut self, theta: &[f64]) -> Result<DVector<f64>, CalibrateError> {
        let p = self.predictions(theta)?;
        Ok(DVector::from_iterator(
            p.len(),
            p.iter()
                .zip(self.cases)
                .map(|(v, c)| (v - c.published) / c.published),
        ))
    }
    /// Central differences, one-sided at a bound.
    fn jacobian(&mut self, theta: &[f64]) -> Result<DMatrix<f64>, CalibrateError> {
        let n = self.cases.len();
        let mut j = DMatrix::zeros(n, theta.len());
        for k in 0..theta.len() {
            let (lo, hi) = (self.params[k].lo, self.params[k].hi);
            // relative to the figure; from a figure of 0 (a stack with no per-step cost yet),
            // relative to its box, or to one SI unit in an open one
            let scale = if theta[k] != 0.0 {
                theta[k].abs()
            } else if hi.is_finite() {
                hi - lo
            } else {
                1.0
            };
            let h = 1e-4 * scale;
            let mut up = theta.to_vec();
            let mut dn = theta.to_vec();
            up[k] = (theta[k] + h).min(hi);
            dn[k] = (theta[k] - h).max(lo);
            let ru = self.residuals(&up)?;
            let rd = self.residuals(&dn)?;
            let d = up[k] - dn[k];
            for i in 0..n {
                j[(i, k)] = (ru[i] - rd[i]) / d;
            }
        }
        Ok(j)
    }
}

/// Two-sided 95 % quantile of Student's t with `dof` degrees of freedom.
fn t95(dof: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    T.get(dof.wrapping_sub(1)).copied().unwrap_or(1.96)
}

/// Fit `params` to the published values of `cases` (calibration cases only).
pub fn calibrate(cases: &[Case], params: &[Param]) -> Result<Fit, CalibrateError> {
    let dims = prepare(cases, params)?;
    let params: Vec<Param> = params
        .iter()
        .zip(&dims)
        .map(|(p, d)| Param {
            lo: if p.lo > 0.0 { p.lo } else { 1e-6 * d.1.abs() },
            ..p.clone()
        })
        .collect();
    let params = params.as_slice();
    let mut pb = Problem {
        cases,
        params,
        evaluations: 0,
    };
    let start: Vec<f64> = dims
        .iter()
        .zip(params)
        .map(|(d, p)| d.1.clamp(p.lo, p.hi))
        .collect();
    let before = pb.predictions(&start)?;
    let mut theta = start.clone();
    let mut r = pb.residuals(&theta)?;
    let rss_before = r.norm_squared();
    let mut rss = rss_before;
    let mut lambda = 1e-3;
    let (mut iterations, mut converged) = (0, false);
    let k = theta.len();
    while iterations < 100 {
        iterations += 1;
        let j = pb.jacobian(&theta)?;
        let a = j.transpose() * &j;
        let g = j.transpose() * &r;
        // The active set: a figure at a bound whose descent direction (−g) leaves the box is
        // held there, and the step is solved over the others alone. Solving for every figure
        // and clamping after would plan the free figures' step as if the held one moved, and
        // crawl along the bound without converging.
        let held: Vec<bool> = (0..k)
            .map(|i| {
                let tol = 1e-12 * theta[i].abs().max(1e-300);
                (theta[i] - params[i].lo <= tol && g[i] > 0.0)
                    || (params[i].hi - theta[i] <= tol && g[i] < 0.0)
            })
            .collect();
        let free: Vec<usize> = (0..k).filter(|&i| !held[i]).collect();
        if free.is_empty() || free.iter().all(|&i| g[i].abs() < 1e-14) {
            converged = true;
            break;
        }
        let mut improved = false;
        while lambda < 1e12 {
            let mut m = a.select_rows(&free).select_columns(&free);
            for (x, &i) in free.iter().enumerate() {
                m[(x, x)] += lambda * a[(i, i)].max(1e-12);
            }
            let rhs = -g.select_rows(&free);
            let Some(sub) = m.lu().solve(&rhs) else {
                lambda *= 10.0;
                continue;
            };
            let mut step = vec![0.0; k];
            for (x, &i) in free.iter().enumerate() {
                step[i] = sub[x];
            }
            let next: Vec<f64> = (0..k)
                .map(|i| (theta[i] + step[i]).clamp(params[i].lo, params[i].hi))
                .collect();
            // a trial point where a case cannot be evaluated (does not fit) is no better
            let Ok(rn) = pb.residuals(&next) else {
                lambda *= 4.0;
                continue;
            };
            let rss_n = rn.norm_squared();
            if rss_n < rss {
                let moved = (0..k)
                    .map(|i| ((next[i] - theta[i]) / theta[i].abs().max(1e-300)).abs())
                    .fold(0.0, f64::max);
                let gain = (rss - rss_n) / rss.max(1e-300);
                theta = next;
                r = rn;
                rss = rss_n;
                lambda = (lambda / 3.0).max(1e-12);
                improved = true;
                if moved < 1e-6 || gain < 1e-10 {
                    converged = true;
                }
                break;
            }
            lambda *= 4.0;
        }
        if !improved {
            // no step lowers the sum: a minimum (within the box) at this precision
            converged = true;
        }
        if converged {
            break;
        }
    }
    // Intervals from the residual variance over the free figures (those not at a bound).
    let at_bound: Vec<bool> = (0..k)
        .map(|i| {
            let (lo, hi) = (params[i].lo, params[i].hi);
            let tol = 1e-9 * theta[i].abs().max(1e-300);
            (theta[i] - lo).abs() <= tol || (hi - theta[i]).abs() <= tol
        })
        .collect();
    let free: Vec<usize> = (0..k).filter(|i| !at_bound[*i]).collect();
    let n = cases.len();
    let dof = n.saturating_sub(free.len());
    let mut se = vec![None; k];
    if dof > 0 && !free.is_empty() {
        let j = pb.jacobian(&theta)?;
        let jf = j.select_columns(&free);
        if let Some(inv) = (jf.transpose() * &jf).try_inverse() {
            let s2 = rss / dof as f64;
            for (a, &i) in free.iter().enumerate() {
                let v = s2 * inv[(a, a)];
                if v.is_finite() && v >= 0.0 {
                    se[i] = Some(v.sqrt());
                }
            }
        }
    }
    let after = pb.predictions(&theta)?;
    let t = t95(dof);
    Ok(Fit {
        figures: (0..k)
            .map(|i| Fitted {
                path: params[i].path.clone(),
                unit: dims[i].0.si_symbol(),
                start: start[i],
                value: theta[i],
                lo: params[i].lo,
                hi: params[i].hi,
                at_bound: at_bound[i],
                std_error: se[i],
                ci95: se[i].map(|s| [theta[i] - t * s, theta[i] + t * s]),
                tied: params[i]
                    .follow
                    .iter()
                    .map(|(path, ratio)| Tied {
                        path: path.clone(),
                        ratio: *ratio,
                        value: theta[i] * ratio,
                    })
                    .collect(),
            })
            .collect(),
        residuals: cases
            .iter()
            .enumerate()
            .map(|(i, c)| Residual {
                id: c.id.clone(),
                published: c.published,
                before: before[i],
                after: after[i],
                error_before: (before[i] - c.published) / c.published,
                error_after: (after[i] - c.published) / c.published,
            })
            .collect(),
        rss_before,
        rss_after: rss,
        dof,
        iterations,
        converged,
        evaluations: pb.evaluations,
    })
}

/// The field of a Device (or Software) file a path writes, for [`write_part`].
fn part_field(path: &str) -> Option<crate::diag::Path> {
    let root = crate::diag::Path::root();
    match path.split('.').collect::<Vec<_>>().as_slice() {
        ["device", "efficiency", e] => Some(root.field("efficiency").field(e)),
        ["device", f @ ("tdp" | "idle_power")] => Some(root.field(f)),
        // one precision's entry of the die's map (a die written inside the device file)
        ["device", "energy_per_flop", p] => Some(root.field("die").field("energy_per_flop").key(p)),
        // a `Software` file's own figure
        ["software", f @ ("step_overhead" | "mesh_relay_time" | "pipeline_stage_time")] => {
            Some(root.field(f))
        }
        _ => None,
    }
}

/// A value as a part file writes it, with its unit, to 4 significant digits.
pub fn written(v: f64, dim: Dimension) -> String {
    let sig = |x: f64| {
        let d = (3 - x.abs().log10().floor() as i32).max(0) as usize;
        format!("{x:.d$}")
    };
    match dim {
        Dimension::Ratio => sig(v),
        Dimension::Time if v < 1e-3 => format!("{} us", sig(v * 1e6)),
        Dimension::Time => format!("{} s", sig(v)),
        Dimension::Power => format!("{} W", sig(v)),
        _ => crate::units::fmt_si(v, dim.si_symbol()),
    }
}

/// An energy per operation as a part file writes it, in pJ per `op` (`OP` or `FLOP`), to 4
/// significant digits.
fn written_energy_per_op(v: f64, op: &str) -> String {
    let x = v * 1e12;
    let d = (3 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.d$} pJ/{op}")
}

/// The text of the device part file `text` (a `Device` file) with each fitted figure written as
/// the fit found it, citing the new source `key`, whose citation (`citation`: the cases and the
/// command) is added to the file's `sources` (or replaces the citation a refit under the same key
/// left there). `Err` says which figure the file cannot take.
pub fn write_part(
    text: &str,
    fit: &Fit,
    key: &str,
    citation: &str,
) -> Result<String, CalibrateError> {
    use crate::diag::locate;
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    // every figure the fit sets: the fitted ones and those tied to them
    let set: Vec<(&str, f64, &str)> = fit
        .figures
        .iter()
        .flat_map(|f| {
            std::iter::once((f.path.as_str(), f.value, f.unit))
                .chain(f.tied.iter().map(|t| (t.path.as_str(), t.value, f.unit)))
        })
        .collect();
    for (path, value, unit) in set {
        let field = part_field(path).ok_or_else(|| {
            fail(
                format!("a calibrated part file writes device or software-stack figures; `{path}` is not one"),
                Some("fit `device.efficiency.*`, `device.tdp`, `device.idle_power` or `software.step_overhead` / `mesh_relay_time` / `pipeline_stage_time` to write a part file; print the fit without `-o` otherwise"),
            )
        })?;
        // a field's name, or a map key as the file quotes it
        let (last, name) = match field.0.last() {
            Some(crate::diag::Seg::Field(n)) => (n.clone(), n.clone()),
            Some(crate::diag::Seg::Key(k)) => (k.clone(), format!("\"{k}\"")),
            _ => unreachable!("part fields end in a field or a key"),
        };
        let missing = || {
            fail(
                format!("the part file writes no `{last}` for `{path}` to replace"),
                Some("write the figure in the part file first (any value, with its source), then calibrate"),
            )
        };
        let at = locate(text, &field).ok_or_else(missing)?;
        // the value found must be the field's own string (locate falls back to the parent)
        let before = text[..at].trim_end();
        if !(before.ends_with(':')
            && before[..before.len() - 1].trim_end().ends_with(&name)
            && text[at..].starts_with('"'))
        {
            return Err(missing());
        }
        let end = at + 1 + text[at + 1..].find('"').ok_or_else(missing)? + 1;
        let value = match unit {
            "s" => written(value, Dimension::Time),
            "W" => written(value, Dimension::Power),
            // in the unit the file wrote: operations or FLOPs
            "J/FLOP" => {
                let op = text[at..end].contains("/OP");
                written_energy_per_op(value, if op { "OP" } else { "FLOP" })
            }
            _ => written(value, Dimension::Ratio),
        };
        edits.push((at, end, format!("\"{value} @{key}\"")));
    }
    let root = crate::diag::Path::root();
    let src_at = locate(text, &root.field("sources"))
        .filter(|o| text[*o..].starts_with('{'))
        .ok_or_else(|| {
            fail(
                "the part file has no `sources: { … }` map to add the calibration's citation to",
                Some("add `sources: {},` to the file's top level"),
            )
        })?;
    let esc = citation.replace('\\', "\\\\").replace('"', "\\\"");
    // a key the file already cites (a refit under the same key) has its citation replaced, not
    // written twice
    let cited = locate(text, &root.field("sources").key(key)).filter(|o| {
        let before = text[..*o].trim_end();
        text[*o..].starts_with('"')
            && before.ends_with(':')
            && before[..before.len() - 1]
                .trim_end()
                .ends_with(&format!("\"{key}\""))
    });
    if let Some(at) = cited {
        let mut end = at + 1;
        let bytes = text.as_bytes();
        while end < bytes.len() && bytes[end] != b'"' {
            end += if bytes[end] == b'\\' { 2 } else { 1 };
        }
        edits.push((at, (end + 1).min(text.len()), format!("\"{esc}\"")));
    } else {
        // an empty map (`sources: {}`) gets its closing brace on a line of its own
        let close = if text[src_at + 1..].trim_start().starts_with('}') {
            "\n    "
        } else {
            ""
        };
        edits.push((
            src_at + 1,
            src_at + 1,
            format!("\n        \"{key}\": \"{esc}\",{close}"),
        ));
    }
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut out = text.to_string();
    for (a, b, s) in edits {
        out.replace_range(a..b, &s);
    }
    Ok(out)
}
