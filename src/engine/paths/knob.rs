//! What a machine path resolves to (`Knob`: the machine-vector slots it sets, its dimension and
//! bound, and the edits `Target` makes to the machine vector) and the small builders every
//! path's resolution shares.

use crate::model::bounds::Bound;
use crate::model::precision::Precision;
use crate::model::system::{System, VectorSource};
use crate::units::Dimension;

/// How an axis value `v` changes one field. Sets run before multiplies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// field = max(v × scale + offset, floor)
    Set { scale: f64, offset: f64, floor: f64 },
    /// field = field × scale / v
    DivBy { scale: f64 },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Target {
    pub field: usize,
    pub op: Op,
}

/// What a machine path resolves to.
#[derive(Clone, Debug)]
pub struct Knob {
    pub dimension: Dimension,
    pub targets: Vec<Target>,
    /// It moves a quantity a derived energy per FLOP depends on (TDP, idle power, a peak, an
    /// efficiency, the model's energy per FLOP).
    pub derive: bool,
    /// `device.energy_per_flop.<p>`: the model's figure for this precision (not re-derived from
    /// TDP, still divided by efficiency where the engine does that).
    pub device_energy: Option<usize>,
    /// `machine.energy_per_flop.<p>`: the machine's figure itself (nothing derived).
    pub machine_energy: Option<usize>,
    /// The bound the architecture file's figure must satisfy (`model::bounds`): an override or an
    /// axis value is held to it as the file is.
    pub bound: Bound,
}

impl Knob {
    pub(super) fn with(self, bound: Bound) -> Knob {
        Knob { bound, ..self }
    }
}

pub(super) fn set(field: usize) -> Target {
    scaled(field, 1.0)
}
pub(super) fn scaled(field: usize, scale: f64) -> Target {
    Target {
        field,
        op: Op::Set {
            scale,
            offset: 0.0,
            floor: f64::NEG_INFINITY,
        },
    }
}

pub(super) fn knob(dimension: Dimension, targets: Vec<Target>) -> Knob {
    Knob {
        dimension,
        targets,
        derive: false,
        device_energy: None,
        machine_energy: None,
        bound: Bound::NonNegative,
    }
}

/// Which peak the device's vector rate for `q` comes from: (true = a vector peak, precision), or
/// a matrix peak divided by 16 — the model's rule (`Device::vector_source`).
pub(super) fn vector_source(sys: &System, q: Precision) -> Option<(bool, usize)> {
    match sys.device.vector_source(q)? {
        VectorSource::Vector(p) => Some((true, p.index())),
        VectorSource::Matrix(p) => Some((false, p.index())),
    }
}

/// Paths that change the cost program itself rather than the machine vector.
pub(super) const STRUCTURAL: &[(&str, &str)] = &[
    (
        "scale_up.size",
        "the scale-up domain size decides which collectives cross the scale-out network",
    ),
    ("node.devices", "devices per node change the system's shape"),
    (
        "device.dies",
        "the die count is folded into every per-device figure",
    ),
];

pub(super) fn precision(word: &str) -> Result<Precision, (String, Option<String>)> {
    Precision::parse(word).ok_or_else(|| {
        let names: Vec<&str> = Precision::names().collect();
        (
            format!("unknown precision `{word}`"),
            Some(
                match crate::diag::did_you_mean(word, names.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`? precisions: {}", names.join(", ")),
                    None => format!("precisions: {}", names.join(", ")),
                },
            ),
        )
    })
}
