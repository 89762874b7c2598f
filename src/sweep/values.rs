//! The values an override (`--set`, `set.rs`) or a sweep axis (`--vary`, a sweep file's axes,
//! `plan`) gives a path, held to the bound the file's field is held to (`model::bounds`): one
//! rule for every way a figure enters, so an efficiency of 1.5 or a degree of 0 that a file may
//! not hold cannot enter from the command line either.

use super::space::Values;
use crate::engine::paths::{Knob, MapVal};
use crate::model::bounds::{self, Problem};
use crate::units::{self, Dimension};

/// A figure of the machine at `path`, as written (`written`, SI `v`): the bound of its field.
pub fn machine(path: &str, knob: &Knob, written: &str, v: f64) -> Result<f64, Problem> {
    knob.bound.check(path, written, v, knob.dimension)
}

/// The values of a machine axis: each listed value, or both ends of a continuous range (the
/// bounds are intervals, so the ends decide). The first value out of bounds, if any.
pub fn machine_axis(path: &str, knob: &Knob, values: &Values) -> Result<(), Problem> {
    let ends;
    let vals: &[f64] = match values {
        Values::List(v) => v,
        Values::Linear { lo, hi } | Values::Log { lo, hi } => {
            ends = [*lo, *hi];
            &ends
        }
    };
    for &v in vals {
        machine(path, knob, &written(v, knob.dimension), v)?;
    }
    Ok(())
}

/// A value in SI as a user would write it (`1.5`, `400 W`).
fn written(v: f64, dim: Dimension) -> String {
    match dim {
        Dimension::Ratio => format!("{v}"),
        _ => units::fmt_si(v, dim.si_symbol()),
    }
}

/// A value of the mapping field `field` (`mapping.<field>`): the bound a mapping file holds the
/// field to (degrees, splits and micro-batches at least 1, a ZeRO stage 0 to 3, an offloaded
/// share 0 to 1), the message naming `mapping.<field>`.
pub fn mapping(field: &str, v: &MapVal) -> Result<(), Problem> {
    let name = format!("mapping.{field}");
    match v {
        MapVal::Count(c) => bounds::mapping_count(&name, *c).map(drop),
        MapVal::Fraction(f) => bounds::offload_fraction(&name, *f).map(drop),
        _ => Ok(()),
    }
}

/// A device count (`devices`, `nodes`), as a system file holds its counts.
pub fn devices(path: &str, n: u64) -> Result<u64, Problem> {
    bounds::count(path, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ends_of_a_range_decide() {
        let knob = Knob {
            dimension: Dimension::Ratio,
            targets: Vec::new(),
            derive: false,
            device_energy: None,
            machine_energy: None,
            bound: bounds::Bound::Fraction,
        };
        let p = "device.efficiency.matmul";
        assert!(machine_axis(p, &knob, &Values::List(vec![0.5, 1.0])).is_ok());
        let (m, h) = machine_axis(p, &knob, &Values::List(vec![0.5, 1.5])).unwrap_err();
        assert!(
            m.contains(p) && m.contains("(0, 1]") && m.contains("1.5"),
            "{m}"
        );
        assert!(h.is_some());
        let range = Values::Linear { lo: 0.5, hi: 1.2 };
        assert!(machine_axis(p, &knob, &range).is_err());
        assert!(mapping("dp", &MapVal::Count(0)).is_err());
        assert!(mapping("zero", &MapVal::Count(0)).is_ok());
        assert!(mapping("offload_optimizer", &MapVal::Fraction(1.5)).is_err());
    }
}
