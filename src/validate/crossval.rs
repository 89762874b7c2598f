//! Leave-one-family-out cross-validation: for each source family (the publisher or benchmark a
//! case comes from: the directory its file lies in, `mlperf`, `megatron-bridge`, …), refit every
//! fitted figure whose calibration cases include that family's without them, and predict the
//! family's cases with the refitted figures: the error of a model that never saw the family.
//!
//! A fitted figure is found through its source (`fitted-…` key): its citation names the cases it
//! was fitted on; the figures it fits are the `--fit` paths and bounds of the `tessera calibrate`
//! command the citation records, or else the figures that cite the key (`efficiency.*`, `tdp`,
//! `idle_power` of a device) at their default bounds. The refit is [`super::calibrate::calibrate`]
//! on the remaining cases, in memory. With none left, each figure falls back to its unfitted
//! value ([`unfitted`]). A figure copied from the fit to another device (`copied-X` beside
//! `fitted-X`) moves with it. Figures the family did not inform keep their shipped values, so a
//! family that informs none is predicted exactly as in-sample.

use super::calibrate::{calibrate, current, default_bounds, edited, param, resolve, Param};
use super::{cases_named, run_case, Case, CaseResult, Role, Stats};
use crate::diag::{Path, Seg};
use crate::model::system::System;
use serde::Serialize;
use std::collections::BTreeSet;

/// Figures fitted together: one `fitted-…` source.
#[derive(Debug, Clone)]
pub struct Fitting {
    pub key: String,
    pub citation: String,
    pub params: Vec<Param>,
    /// Ids of the loaded cases its citation names (the cases it was fitted on).
    pub cases: Vec<String>,
    /// The shipped value of each figure (SI).
    pub shipped: Vec<f64>,
    /// Each figure's SI unit.
    pub units: Vec<&'static str>,
}

/// A figure as the cross-validation set it for one held-out family.
#[derive(Debug, Clone, Serialize)]
pub struct Refit {
    /// The source key (`fitted-h100-fp8`).
    pub key: String,
    /// The figure (sweep path).
    pub path: String,
    /// SI unit ("" for ratios).
    pub unit: &'static str,
    /// The shipped value and the one used out of sample (SI).
    pub shipped: f64,
    pub value: f64,
    /// How `value` was found: `refit on N cases (…)`, or the unfitted value and why.
    pub basis: String,
}

/// One case predicted out of sample.
#[derive(Debug, Clone, Serialize)]
pub struct Predicted {
    pub id: String,
    pub role: Role,
    pub published: f64,
    pub predicted: Option<f64>,
    /// (predicted − published) / published, out of sample.
    pub error: Option<f64>,
    /// The same with the shipped figures.
    pub in_sample_error: Option<f64>,
}

/// One held-out source family.
#[derive(Debug, Clone, Serialize)]
pub struct Held {
    pub family: String,
    pub cases: usize,
    pub mape: f64,
    pub max_abs_error: f64,
    pub worst: Option<String>,
    /// Cases that could not be evaluated out of sample.
    pub failed: usize,
    /// In-sample MAPE of the same cases, for comparison.
    pub in_sample_mape: f64,
    pub refitted: Vec<Refit>,
    pub predicted: Vec<Predicted>,
}

/// Every case predicted out of sample, together.
#[derive(Debug, Clone, Serialize)]
pub struct Overall {
    pub cases: usize,
    pub mape: f64,
    pub max_abs_error: f64,
    pub worst: Option<String>,
    pub failed: usize,
    pub in_sample_mape: f64,
}

/// The cross-validation report.
#[derive(Debug, Clone, Serialize)]
pub struct CrossValidation {
    /// `"family"`: one source family held out at a time.
    pub by: &'static str,
    pub by_family: Vec<Held>,
    pub overall: Overall,
    /// Fitted sources that cannot be refitted (no figure found), kept at their shipped values.
    pub not_refittable: Vec<String>,
}

/// The source family of a case file: the directory it lies in (`validation/mlperf/x.ron` →
/// `mlperf`). The case's `family` field is its hardware family, not its source.
pub fn source_family(file: &str) -> String {
    std::path::Path::new(file)
        .parent()
        .and_then(|p| p.file_name())
        .map_or_else(|| ".".into(), |n| n.to_string_lossy().into_owned())
}

/// The value a figure takes without a fit, and where it comes from: the loader's default where
/// the file may leave it out, else the value `tessera new`'s GPU template assumes (`sys`: a
/// system carrying the figure, for the figures whose default derives from another).
pub fn unfitted(path: &str, sys: Option<&System>) -> Option<(f64, &'static str)> {
    Some(match path {
        "device.efficiency.low_precision_matmul" | "device.efficiency.fp4_backward_matmul" => {
            (1.0, "the loader's default when the file gives none")
        }
        "device.efficiency.kernel_overhead"
        | "device.efficiency.collective_compute_share"
        | "software.step_overhead"
        | "software.mesh_relay_time"
        | "software.pipeline_stage_time" => (0.0, "the loader's default when the file gives none"),
        "device.idle_power" => (
            0.25 * sys?.device.rated_tdp,
            "the loader's default (a quarter of TDP)",
        ),
        "device.efficiency.matmul" => (0.65, "the value `tessera new`'s GPU template assumes"),
        "device.efficiency.memory" => (0.85, "the value `tessera new`'s GPU template assumes"),
        "device.efficiency.network" => (0.80, "the value `tessera new`'s GPU template assumes"),
        _ => return None,
    })
}

/// The `--fit` figures and `--key` of a `tessera calibrate` command a citation records.
fn command(citation: &str) -> Option<(Vec<String>, Option<String>)> {
    let at = citation.find("`tessera calibrate ")?;
    let rest = &citation[at + 1..];
    let cmd = &rest[..rest.find('`')?];
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let mut fit = Vec::new();
    let mut key = None;
    let mut i = 0;
    while i < words.len() {
        match words[i] {
            "--fit" => {
                let mut spec = Vec::new();
                i += 1;
                while i < words.len() && !words[i].starts_with('-') {
                    spec.push(words[i]);
                    i += 1;
                }
                // `calibrate` records a figure with a space in its bound in single quotes
                let spec = spec.join(" ");
                let spec = spec.trim_matches('\'');
                fit.extend(spec.split(',').map(|s| s.trim().to_string()));
                continue;
            }
            "--key" => key = words.get(i + 1).map(|s| s.to_string()),
            _ => {}
        }
        i += 1;
    }
    (!fit.is_empty()).then_some((fit, key))
}

/// The sweep path of a figure written at `p` in a device file (`efficiency.matmul` →
/// `device.efficiency.matmul`); `None` for figures calibrate does not fit.
fn sweep_path(p: &Path) -> Option<String> {
    let segs: Vec<&str> =
        p.0.iter()
            .map(|s| match s {
                Seg::Field(f) => Some(f.as_str()),
                _ => None,
            })
            .collect::<Option<_>>()?;
    let segs = match segs.as_slice() {
        ["device", rest @ ..] => rest,
        s => s,
    };
    match segs {
        ["efficiency", e] => Some(format!("device.efficiency.{e}")),
        [f @ ("tdp" | "idle_power")] => Some(format!("device.{f}")),
        _ => None,
    }
}

/// One fitted source as seen from case `c`: its figures, bounds and shipped values.
fn fitting(c: &Case, citation: &str, ids: &[&str]) -> Result<Fitting, String> {
    let src = c
        .system
        .fitted_sources
        .iter()
        .find(|f| f.citation == citation);
    let (params, key) = match command(citation) {
        Some((fit, key)) => {
            let params: Result<Vec<Param>, String> = fit
                .iter()
                .map(|t| param(t, &c.system).map_err(|e| e.message))
                .collect();
            (params?, key)
        }
        None => {
            let params: Vec<Param> = src
                .iter()
                .flat_map(|s| s.figures.iter().filter_map(sweep_path))
                .filter_map(|path| {
                    let k = resolve(&path, &c.system).ok()?;
                    let (lo, hi) = default_bounds(&path, k.dimension);
                    Some(Param {
                        path,
                        lo,
                        hi,
                        follow: vec![],
                    })
                })
                .collect();
            (params, None)
        }
    };
    let key = src
        .map(|s| s.key.clone())
        .or(key)
        .unwrap_or_else(|| "fitted".into());
    if params.is_empty() {
        return Err(format!("{key}: no figure calibrate can fit cites it"));
    }
    let (shipped, units) = params
        .iter()
        .map(|p| {
            let k = resolve(&p.path, &c.system).map_err(|e| e.message)?;
            let v = current(&c.system, &p.path, &k)
                .ok_or_else(|| format!("{key}: cannot read `{}`", p.path))?;
            Ok((v, k.dimension.si_symbol()))
        })
        .collect::<Result<(Vec<f64>, Vec<&'static str>), String>>()?;
    Ok(Fitting {
        key,
        citation: citation.to_string(),
        params,
        cases: cases_named(citation, ids.iter().copied())
            .into_iter()
            .map(String::from)
            .collect(),
        shipped,
        units,
    })
}

/// Every fitted source the cases' systems carry, once each; and those that cannot be refitted.
pub fn fittings(cases: &[Case]) -> (Vec<Fitting>, Vec<String>) {
    let ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    let mut seen = BTreeSet::new();
    let (mut out, mut kept) = (Vec::new(), Vec::new());
    for c in cases {
        for t in &c.system.fitted {
            if !seen.insert(t.clone()) {
                continue;
            }
            match fitting(c, t, &ids) {
                Ok(f) => out.push(f),
                Err(e) => kept.push(e),
            }
        }
    }
    (out, kept)
}

/// The values of `f`'s figures without the cases in `held`: refit on the rest, or unfitted.
fn refit(f: &Fitting, cases: &[Case], held: &BTreeSet<&str>) -> Vec<Refit> {
    let rest: Vec<Case> = cases
        .iter()
        .filter(|c| f.cases.contains(&c.id) && !held.contains(c.id.as_str()))
        .cloned()
        .collect();
    let row = |i: usize, value: f64, basis: String| Refit {
        key: f.key.clone(),
        path: f.params[i].path.clone(),
        unit: f.units[i],
        shipped: f.shipped[i],
        value,
        basis,
    };
    let mut why = "every case it was fitted on is held out".to_string();
    if !rest.is_empty() {
        match calibrate(&rest, &f.params) {
            Ok(fit) => {
                let on: Vec<&str> = rest.iter().map(|c| c.id.as_str()).collect();
                return fit
                    .figures
                    .iter()
                    .enumerate()
                    .map(|(i, x)| row(i, x.value, format!("refit on {}", on.join(", "))))
                    .collect();
            }
            Err(e) => why = format!("the refit failed ({})", e.message),
        }
    }
    let sys = cases
        .iter()
        .find(|c| c.system.fitted.contains(&f.citation))
        .map(|c| &c.system);
    (0..f.params.len())
        .map(|i| match unfitted(&f.params[i].path, sys) {
            Some((v, src)) => row(i, v, format!("{why}: unfitted, {src}")),
            None => row(i, f.shipped[i], format!("{why}: no unfitted value, kept")),
        })
        .collect()
}

/// Case `c` with the refitted figures of `fs` it carries (as a fit or as a `copied-` figure).
fn with_refits(c: &Case, fs: &[(&Fitting, Vec<Refit>)]) -> Case {
    let mut c = c.clone();
    for (f, r) in fs {
        let params: Vec<Param> = if c.system.fitted.contains(&f.citation) {
            f.params.clone()
        } else {
            let copied = f.key.replacen("fitted-", "copied-", 1);
            let at: Vec<String> = c
                .system
                .copied_sources
                .iter()
                .filter(|s| s.key == copied)
                .flat_map(|s| s.figures.iter().filter_map(sweep_path))
                .collect();
            f.params
                .iter()
                .filter(|p| at.contains(&p.path))
                .cloned()
                .collect()
        };
        if params.is_empty() {
            continue;
        }
        let theta: Vec<f64> = params
            .iter()
            .map(|p| {
                r.iter()
                    .find(|x| x.path == p.path)
                    .map_or(f64::NAN, |x| x.value)
            })
            .collect();
        c = edited(&c, &params, &theta);
    }
    c
}

fn stats_of(rs: &[CaseResult]) -> Stats {
    Stats::of(rs.iter())
}

/// Hold out each source family of the gated cases (outside `known-gaps/`) in turn; `family`
/// names a case's source family ([`source_family`] of its file, for the CLI); `in_sample` holds
/// the cases' results with the shipped figures (`run_case`; a case missing there is run).
pub fn cross_validate(
    cases: &[Case],
    in_sample: &[CaseResult],
    family: impl Fn(&Case) -> String,
) -> CrossValidation {
    use rayon::prelude::*;
    let (fits, not_refittable) = fittings(cases);
    let gated: Vec<&Case> = cases.iter().filter(|c| !c.known_gap).collect();
    let mut families: Vec<String> = gated.iter().map(|c| family(c)).collect();
    families.sort();
    families.dedup();
    let (mut by_family, mut all_out, mut all_in) = (Vec::new(), Vec::new(), Vec::new());
    for fam in families {
        let members: Vec<&Case> = gated.iter().copied().filter(|c| family(c) == fam).collect();
        let held: BTreeSet<&str> = members.iter().map(|c| c.id.as_str()).collect();
        let refits: Vec<(&Fitting, Vec<Refit>)> = fits
            .iter()
            .filter(|f| f.cases.iter().any(|id| held.contains(id.as_str())))
            .map(|f| (f, refit(f, cases, &held)))
            .collect();
        let inside: Vec<CaseResult> = members
            .iter()
            .map(
                |c| match in_sample.iter().find(|r| r.id == c.id && r.file == c.file) {
                    Some(r) => r.clone(),
                    None => run_case(c),
                },
            )
            .collect();
        // a family that informs no figure is run again all the same: its errors equal the
        // in-sample ones only if no refit leaks into it
        let out: Vec<CaseResult> = members
            .par_iter()
            .map(|c| run_case(&with_refits(c, &refits)))
            .collect();
        let (s, si) = (stats_of(&out), stats_of(&inside));
        by_family.push(Held {
            family: fam,
            cases: s.cases,
            mape: s.mape,
            max_abs_error: s.max_abs_error,
            worst: s.worst,
            failed: s.failed,
            in_sample_mape: si.mape,
            refitted: refits.into_iter().flat_map(|(_, r)| r).collect(),
            predicted: out
                .iter()
                .zip(&inside)
                .map(|(o, i)| Predicted {
                    id: o.id.clone(),
                    role: o.role,
                    published: o.published,
                    predicted: o.predicted,
                    error: o.error,
                    in_sample_error: i.error,
                })
                .collect(),
        });
        all_out.extend(out);
        all_in.extend(inside);
    }
    let (s, si) = (stats_of(&all_out), stats_of(&all_in));
    CrossValidation {
        by: "family",
        by_family,
        overall: Overall {
            cases: s.cases,
            mape: s.mape,
            max_abs_error: s.max_abs_error,
            worst: s.worst,
            failed: s.failed,
            in_sample_mape: si.mape,
        },
        not_refittable,
    }
}
