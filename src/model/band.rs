//! The error band an estimate carries: the validated error spread of its hardware family for its
//! task and figure (computed by `validate::bands` from a validation run). Data only, so that an
//! estimate can carry it without depending on the validation.

use crate::model::workload::{Task, Workload};
use serde::{Deserialize, Serialize};

/// The validated error spread behind an estimate's figure (`error_band` in the JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Band {
    /// The spread, as a fraction of the figure (`0.12`: ±12 %).
    pub relative: f64,
    /// Check cases behind it.
    pub cases: usize,
    /// The hardware family they ran on.
    pub family: String,
    /// `training` or `serving`.
    pub task: TaskKind,
    /// Which figures it covers: `throughput` (throughput, step time, time to train, MFU: the
    /// step's time), `power` or `energy`.
    pub figure: Figure,
    /// The software stack its cases ran on (`None`: the hardware model alone): an estimate on
    /// another stack, or on none, does not borrow their accuracy.
    #[serde(default)]
    pub software: Option<String>,
    /// The published result behind the band closest to the estimate: the same system and
    /// workload, else the same workload, else the same system, else the band's largest miss.
    #[serde(default)]
    pub anchor: Option<Anchor>,
}

/// One check case behind a band, as an estimate names it for its reader to look up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anchor {
    /// The case's id (`validation/**/<id>.ron`).
    pub case: String,
    pub system: String,
    pub workload: String,
    /// (predicted − published) / published.
    pub error: f64,
}

impl Band {
    /// Whether `a` and `b` (each with its band) could be the same value: their intervals
    /// `x (1 ± relative)` overlap.
    pub fn overlap(a: f64, ba: &Band, b: f64, bb: &Band) -> bool {
        a * (1.0 - ba.relative) <= b * (1.0 + bb.relative)
            && b * (1.0 - bb.relative) <= a * (1.0 + ba.relative)
    }
}

/// Training, serving or a kernel run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskKind {
    Training,
    Serving,
    /// An operator graph run as written (a kernel benchmark): its accuracy says nothing of a
    /// model's training or serving on the same hardware.
    Kernel,
}

impl TaskKind {
    pub fn of(w: &Workload) -> TaskKind {
        match w.task {
            Task::Training(_) => TaskKind::Training,
            Task::Inference(_) => TaskKind::Serving,
            Task::Run(_) => TaskKind::Kernel,
        }
    }
}

/// The figures a band covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Figure {
    Throughput,
    Power,
    Energy,
}
