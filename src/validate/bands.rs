//! Error bands: how far the model was off on the check cases of a system's hardware family, for
//! training or serving, per figure. `tessera validate --write-bands FILE` computes them from a
//! validation run; the shipped ones (`bands.ron` beside this file, written by
//! `tessera validate --write-bands src/validate/bands.ron`) are compiled in, so an estimate states
//! the evidence behind it without running the validation and without reading a file
//! (`tests/it/bands.rs` fails when they differ from what `tessera validate` computes now).
//!
//! The spread is the 90th percentile (nearest rank) of the cases' absolute relative errors: one
//! outlier among seventy Hopper cases does not set the band of every Hopper estimate, and below
//! ten cases it is the largest error.

use super::case::{Metric, Role};
use super::run::CaseResult;
use crate::model::band::Anchor;
pub use crate::model::band::{Band, Figure, TaskKind};
use crate::model::system::System;
use crate::model::workload::Workload;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The figure a case's metric checks (`None`: scaling efficiency, a ratio of two runs; goodput).
pub fn figure_of(m: Metric) -> Option<Figure> {
    match m {
        Metric::TimeToTrain | Metric::StepTime | Metric::Throughput | Metric::Mfu => {
            Some(Figure::Throughput)
        }
        Metric::AveragePower => Some(Figure::Power),
        Metric::Energy => Some(Figure::Energy),
        // a ratio of two runs; carbon prices the time band's figure at rated power; goodput's
        // figures come from reliability data, not the roofline
        // a rented cost prices the time band's figure at a published price: kept apart like carbon
        // memory is a capacity check, not a time, power or energy figure
        Metric::ScalingEfficiency
        | Metric::RatedCarbon
        | Metric::Goodput
        | Metric::Mtbf
        | Metric::RentedCost
        | Metric::PeakMemory
        | Metric::StateMemory => None,
    }
}

/// A family's members: the systems (by name) and devices (by name) its cases run on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Family {
    pub family: String,
    pub systems: Vec<String>,
    pub devices: Vec<String>,
}

/// One band: a family's check cases of one task and figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub family: String,
    pub task: TaskKind,
    pub figure: Figure,
    /// The software stack the cases ran on (`None`: none).
    #[serde(default)]
    pub software: Option<String>,
    pub relative: f64,
    pub cases: usize,
    /// The check cases behind it.
    #[serde(default)]
    pub members: Vec<Anchor>,
}

/// Every family's members and bands, as `tessera validate --write-bands` writes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bands {
    pub version: u32,
    /// How `relative` is taken, in words.
    pub statistic: String,
    pub families: Vec<Family>,
    pub bands: Vec<Entry>,
}

/// What `relative` is: see the module doc.
pub const STATISTIC: &str =
    "90th percentile (nearest rank) of |predicted - published| / published over the check cases";

/// The 90th percentile, nearest rank, of `v` (not empty).
fn p90(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let rank = (0.9 * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

impl Bands {
    /// The bands of a validation run: members from every case, spreads from the check set
    /// (role `Check`, outside `known-gaps/`, evaluated), rounded to 1e-4.
    pub fn of(results: &[CaseResult]) -> Bands {
        let mut members: BTreeMap<&str, (Vec<String>, Vec<String>)> = BTreeMap::new();
        type Key<'a> = (&'a str, TaskKind, Figure, Option<&'a str>);
        let mut errors: BTreeMap<Key, Vec<Anchor>> = BTreeMap::new();
        for r in results {
            let m = members.entry(&r.family).or_default();
            m.0.push(r.system.clone());
            m.1.push(r.device.clone());
            let (Some(e), Some(f)) = (r.error, figure_of(r.metric)) else {
                continue;
            };
            if r.role == Role::Check && !r.known_gap {
                errors
                    .entry((&r.family, r.task, f, r.software.as_deref()))
                    .or_default()
                    .push(Anchor {
                        case: r.id.clone(),
                        system: r.system.clone(),
                        workload: r.workload.clone(),
                        error: (e * 1e4).round() / 1e4,
                    });
            }
        }
        let families = members
            .into_iter()
            .map(|(name, (mut s, mut d))| {
                s.sort();
                s.dedup();
                d.sort();
                d.dedup();
                Family {
                    family: name.to_string(),
                    systems: s,
                    devices: d,
                }
            })
            .collect();
        let bands = errors
            .into_iter()
            .map(|((family, task, figure, software), members)| Entry {
                family: family.to_string(),
                task,
                figure,
                software: software.map(str::to_string),
                cases: members.len(),
                relative: (p90(members.iter().map(|m| m.error.abs()).collect()) * 1e4).round()
                    / 1e4,
                members,
            })
            .collect();
        Bands {
            version: 1,
            statistic: STATISTIC.into(),
            families,
            bands,
        }
    }

    /// As RON, the way the shipped file is written.
    pub fn to_ron(&self) -> String {
        let cfg = ron::ser::PrettyConfig::new().struct_names(true);
        // plain data: serializing cannot fail
        let mut s = ron::ser::to_string_pretty(self, cfg).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Read bands from RON text.
    pub fn parse(text: &str) -> Result<Bands, String> {
        ron::from_str(text).map_err(|e| e.to_string())
    }

    /// The bands shipped with this build (`bands.ron`; a unit test checks that it parses:
    /// were it not to, every figure would read unvalidated).
    pub fn shipped() -> &'static Bands {
        static SHIPPED: std::sync::OnceLock<Bands> = std::sync::OnceLock::new();
        SHIPPED.get_or_init(|| {
            Bands::parse(include_str!("bands.ron")).unwrap_or_else(|_| Bands {
                version: 1,
                statistic: STATISTIC.into(),
                families: Vec::new(),
                bands: Vec::new(),
            })
        })
    }

    /// The family of `sys`: the one whose cases run on a system of its name, else on its device.
    pub fn family_of(&self, sys: &System) -> Option<&str> {
        let by = |f: &dyn Fn(&Family) -> bool| self.families.iter().find(|x| f(x));
        by(&|x| x.systems.contains(&sys.name))
            .or_else(|| by(&|x| x.devices.contains(&sys.device.name)))
            .map(|x| x.family.as_str())
    }

    /// `e` (an estimate of `w` on `sys`) with the band of its throughput, where it is feasible.
    pub fn attach(&self, sys: &System, w: &Workload, e: &mut crate::engine::Estimate) {
        if e.feasible {
            e.error_band = self.band(sys, w, Figure::Throughput);
        }
    }

    /// The band of `figure` for `w` on `sys`: its family's check cases of the same task on the
    /// same software stack (`None`: no case runs on the system or its device, or none of its
    /// family checks that task and figure on that stack: unvalidated).
    pub fn band(&self, sys: &System, w: &Workload, figure: Figure) -> Option<Band> {
        let family = self.family_of(sys)?;
        let task = TaskKind::of(w);
        let software = sys.software.as_ref().map(|s| s.name.as_str());
        self.bands
            .iter()
            .find(|b| {
                b.family == family
                    && b.task == task
                    && b.figure == figure
                    && b.software.as_deref() == software
            })
            .map(|b| Band {
                relative: b.relative,
                cases: b.cases,
                family: b.family.clone(),
                task,
                figure,
                software: b.software.clone(),
                anchor: nearest(&b.members, &sys.name, &w.name),
            })
    }
}

/// The member closest to an estimate of `workload` on `system`: the same system and workload,
/// else the same workload, else the same system, else the largest miss (ties: the first).
fn nearest(members: &[Anchor], system: &str, workload: &str) -> Option<Anchor> {
    let rank = |m: &Anchor| {
        let (s, w) = (m.system == system, m.workload == workload);
        ((s && w) as u8, w as u8, s as u8)
    };
    members
        .iter()
        .rev()
        .max_by(|a, b| {
            rank(a)
                .cmp(&rank(b))
                .then(a.error.abs().total_cmp(&b.error.abs()))
        })
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p90_is_the_nearest_rank() {
        assert_eq!(p90(vec![0.3]), 0.3);
        assert_eq!(p90((1..=10).map(f64::from).collect()), 9.0);
        assert_eq!(p90((1..=5).map(f64::from).collect()), 5.0);
        assert_eq!(p90((1..=20).map(f64::from).collect()), 18.0);
    }

    #[test]
    fn bands_overlap_when_their_intervals_meet() {
        let b = |r| Band {
            relative: r,
            cases: 3,
            family: "f".into(),
            task: TaskKind::Training,
            figure: Figure::Throughput,
            software: None,
            anchor: None,
        };
        assert!(Band::overlap(1.0, &b(0.1), 1.15, &b(0.1)));
        assert!(!Band::overlap(1.0, &b(0.05), 1.2, &b(0.05)));
    }

    #[test]
    fn the_anchor_is_the_nearest_published_result() {
        let m = |case: &str, system: &str, workload: &str, error: f64| Anchor {
            case: case.into(),
            system: system.into(),
            workload: workload.into(),
            error,
        };
        let members = vec![
            m("a", "S", "W", 0.01),
            m("b", "S", "V", 0.09),
            m("c", "T", "W", 0.02),
            m("d", "T", "V", -0.12),
        ];
        let at = |s: &str, w: &str| nearest(&members, s, w).map(|a| a.case);
        assert_eq!(at("S", "W").as_deref(), Some("a")); // same system and workload
        assert_eq!(at("T", "W").as_deref(), Some("c")); // same system and workload
        assert_eq!(at("U", "W").as_deref(), Some("c")); // same workload: the larger miss
        assert_eq!(at("S", "X").as_deref(), Some("b")); // same system: the larger miss
        assert_eq!(at("U", "X").as_deref(), Some("d")); // neither: the largest miss
        assert_eq!(nearest(&[], "S", "W"), None);
    }

    #[test]
    fn the_shipped_bands_parse() {
        let b = Bands::shipped();
        assert!(!b.families.is_empty() && !b.bands.is_empty());
        assert_eq!(Bands::parse(&b.to_ron()).as_ref(), Ok(b));
    }
}
