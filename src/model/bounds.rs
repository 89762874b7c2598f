//! The bounds a figure must lie in, each stated once. Lowering a file (`Ctx::positive`,
//! `Ctx::fraction`, `Ctx::count`, the mapping checks) and overriding a figure (`--set`, a sweep
//! axis, through `engine::paths`) call the same functions, so a value a file may not hold cannot
//! enter from the command line either. Each returns the value, or a message naming `field` with
//! a hint; the caller places it (a file's span, or the argument that gave the value).

use crate::units::{self, Dimension};

/// What is wrong with a value: a message naming the field, and a hint.
pub type Problem = (String, Option<String>);

/// The bound of one figure of the architecture, as its file's lowering applies it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    /// Greater than zero (a bandwidth, a peak, a TDP).
    Positive,
    /// Zero or more (a latency, an energy, a power).
    NonNegative,
    /// An efficiency: achieved / peak, in (0, 1].
    Fraction,
    /// A part taken away, never all of it: [0, 1), with the hint that says of what.
    Share(&'static str),
    /// Facility power / IT power, between 1 and 3.
    Pue,
    /// A fabric's oversubscription, at least 1.
    Oversubscription,
    /// A whole number of at least 1 (a mesh side).
    Count,
    /// A switch: 0 (off) or 1 (on).
    Flag,
}

/// The collective share's hint, as the device file's `efficiency.collective_compute_share` gives
/// it.
pub const COLLECTIVE_SHARE_HINT: &str =
    "the share of the device's cores a running collective occupies, e.g. \"0.15\" for 20 of 132 SMs";

impl Bound {
    /// Check `v` (SI, of dimension `dim`, written `written`) against the bound and the
    /// plausible range of its dimension.
    pub fn check(self, field: &str, written: &str, v: f64, dim: Dimension) -> Result<f64, Problem> {
        let v = plausible(field, written, v, dim)?;
        match self {
            Bound::Positive => positive(field, written, v, dim),
            Bound::NonNegative => non_negative(field, written, v),
            Bound::Fraction => fraction(field, written, v),
            Bound::Share(hint) => share(field, written, v, hint),
            Bound::Pue => pue(field, v),
            Bound::Oversubscription => oversubscription(field, v),
            Bound::Count => {
                if v.fract() != 0.0 || v < 0.0 {
                    return Err((
                        format!("`{field}` must be a whole number, found `{written}`"),
                        None,
                    ));
                }
                count(field, v as u64).map(|c| c as f64)
            }
            Bound::Flag => {
                if v == 0.0 || v == 1.0 {
                    Ok(v)
                } else {
                    Err((
                        format!("`{field}` is a switch, 0 or 1, found `{written}`"),
                        Some("1 turns it on, 0 off".into()),
                    ))
                }
            }
        }
    }
}

/// Finite, and no larger than any real figure of its dimension (beyond that it is surely a
/// typo: an exaflop-scale single link, say).
pub fn plausible(field: &str, written: &str, v: f64, dim: Dimension) -> Result<f64, Problem> {
    if !v.is_finite() {
        return Err((
            format!("`{field}` = {written} is not a finite number"),
            Some("quantities must be finite; write the measured or datasheet value".into()),
        ));
    }
    let hi = upper_bound(dim);
    if v > hi {
        return Err((
            format!("`{field}` = {written} is absurdly large for {dim}"),
            Some(format!(
                "expected at most {}",
                units::fmt_si(hi, dim.si_symbol())
            )),
        ));
    }
    Ok(v)
}

/// The largest plausible figure of a dimension.
fn upper_bound(dim: Dimension) -> f64 {
    match dim {
        Dimension::FlopRate => 1e20,
        Dimension::Bandwidth => 1e18,
        Dimension::Bytes => 1e19,
        Dimension::Power => 1e9,
        Dimension::Energy => 1e16,
        Dimension::Time => 1e9,
        Dimension::EnergyPerFlop => 1e-6,
        Dimension::EnergyPerByte => 1e-6,
        Dimension::Frequency => 1e11,
        Dimension::Area => 1.0,
        Dimension::Length => 1.0,
        Dimension::FlopsPerCycle => 1e9,
        Dimension::Ratio => 1e9,
        Dimension::Money => 1e13,
        Dimension::MoneyPerEnergy => 1e-3,
        Dimension::MoneyPerTime => 1e3,
        Dimension::MoneyPerPower => 1e3,
        Dimension::Mass => 1e9,
        Dimension::CarbonIntensity => 1e-5,
        // 3,600 L/kWh: a thousand times the wettest published grid figure
        Dimension::WaterIntensity => 1e-6,
    }
}

/// A quantity that must be > 0.
pub fn positive(field: &str, written: &str, v: f64, dim: Dimension) -> Result<f64, Problem> {
    if v > 0.0 {
        return Ok(v);
    }
    Err((
        format!("`{field}` must be greater than zero, found `{written}`"),
        Some(format!("e.g. \"{}\"", units::example(dim))),
    ))
}

/// A quantity that must be ≥ 0.
pub fn non_negative(field: &str, written: &str, v: f64) -> Result<f64, Problem> {
    if v >= 0.0 {
        return Ok(v);
    }
    Err((
        format!("`{field}` must not be negative, found `{written}`"),
        None,
    ))
}

/// An efficiency in (0, 1].
pub fn fraction(field: &str, written: &str, v: f64) -> Result<f64, Problem> {
    fraction_with(
        field,
        written,
        v,
        "efficiencies are achieved / peak, e.g. \"0.7\" or \"70 %\"",
    )
}

/// A fraction in (0, 1], with a hint saying what it is a fraction of.
pub fn fraction_with(field: &str, written: &str, v: f64, hint: &str) -> Result<f64, Problem> {
    ratio_in(field, written, v, v > 0.0 && v <= 1.0, "(0, 1]", hint)
}

/// A share in [0, 1): a part of something taken away, never all of it.
pub fn share(field: &str, written: &str, v: f64, hint: &str) -> Result<f64, Problem> {
    ratio_in(field, written, v, (0.0..1.0).contains(&v), "[0, 1)", hint)
}

fn ratio_in(
    field: &str,
    written: &str,
    v: f64,
    ok: bool,
    range: &str,
    hint: &str,
) -> Result<f64, Problem> {
    if ok {
        return Ok(v);
    }
    Err((
        format!("`{field}` must be a fraction in {range}, found `{written}`"),
        Some(hint.into()),
    ))
}

/// A count ≥ 1 (and below 10^12, beyond which it is surely a typo).
pub fn count(field: &str, v: u64) -> Result<u64, Problem> {
    if v == 0 {
        return Err((format!("`{field}` must be at least 1"), None));
    }
    if v > 1_000_000_000_000 {
        return Err((
            format!("`{field}` = {v} is absurdly large"),
            Some("expected at most 10^12".into()),
        ));
    }
    Ok(v)
}

/// Facility power over IT power, between 1 and 3.
pub fn pue(field: &str, v: f64) -> Result<f64, Problem> {
    if (1.0..=3.0).contains(&v) {
        return Ok(v);
    }
    Err((
        format!("`{field}` must be between 1 and 3, found {v}"),
        Some("PUE is facility power / IT power; 1.0 is the ideal, ~1.1-1.6 is typical".into()),
    ))
}

/// A fabric's oversubscription, at least 1.
pub fn oversubscription(field: &str, v: f64) -> Result<f64, Problem> {
    if v >= 1.0 {
        return Ok(v);
    }
    Err((
        format!("`{field}` must be at least 1, found {v}"),
        Some("1 is a non-blocking fabric; 2 means half the uplink bandwidth".into()),
    ))
}

/// A count field of a mapping (`dp`, `tp`, `micro_batch`, `etp`, `zero`, …) as a mapping file
/// states it: degrees, splits and micro-batches at least 1, a ZeRO stage 0 to 3, offloaded
/// layers any number. `field` names it where the caller writes it (`dp`, `mapping.dp`).
pub fn mapping_count(field: &str, v: u64) -> Result<u64, Problem> {
    match field.rsplit('.').next().unwrap_or(field) {
        "etp" if v == 0 => Err((
            format!("`{field}` must be at least 1"),
            Some("the routed experts' tensor-parallel width (Megatron-Core `expert_tensor_parallel_size`): 1 keeps each expert whole on its device; leave it out for etp = tp".into()),
        )),
        "zero" if v > 3 => Err((
            format!("ZeRO stage {v} does not exist"),
            Some("stages are 0 (none), 1 (optimizer state), 2 (+ gradients), 3 (+ weights, = FSDP)".into()),
        )),
        "zero" | "offload_activation_layers" => Ok(v),
        name => count(field, v).map_err(|(m, h)| (m, h.or_else(|| Some(degree_hint(name).into())))),
    }
}

/// What a count field of a mapping means, for the hint of one below 1.
fn degree_hint(name: &str) -> &'static str {
    match name {
        "micro_batch" => "the samples each micro-batch holds: 1 or more",
        "interleave" => "virtual pipeline stages per device: 1 is no interleaving",
        "shard" => {
            "the data-parallel ranks ZeRO shards the model state over: 1 keeps a whole copy on each"
        }
        _ => "a parallel degree: 1 does not split the work along it",
    }
}

/// The share of each device's optimizer state kept in host memory, 0 to 1.
pub fn offload_fraction(field: &str, v: f64) -> Result<f64, Problem> {
    if (0.0..=1.0).contains(&v) {
        return Ok(v);
    }
    Err((
        format!("`{field}` must be a fraction between 0 and 1, found {v}"),
        Some("the share of each device's optimizer state kept in host memory, as Megatron-Core's `optimizer_offload_fraction`: 0 none, 1 all (e.g. `offload_optimizer: 0.5`)".into()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efficiencies_lie_in_zero_to_one() {
        assert!(Bound::Fraction
            .check("matmul", "1.5", 1.5, Dimension::Ratio)
            .is_err());
        assert!(Bound::Fraction
            .check("matmul", "0", 0.0, Dimension::Ratio)
            .is_err());
        assert_eq!(
            Bound::Fraction.check("matmul", "1", 1.0, Dimension::Ratio),
            Ok(1.0)
        );
    }

    #[test]
    fn mapping_degrees_are_at_least_one() {
        for f in ["dp", "tp", "pp", "cp", "ep", "micro_batch", "mapping.dp"] {
            assert!(mapping_count(f, 0).is_err(), "{f}");
            assert_eq!(mapping_count(f, 2), Ok(2));
        }
        assert!(mapping_count("etp", 0).is_err());
        assert_eq!(mapping_count("zero", 0), Ok(0));
        assert!(mapping_count("mapping.zero", 4).is_err());
        assert_eq!(mapping_count("offload_activation_layers", 0), Ok(0));
    }

    #[test]
    fn non_finite_and_absurd_values_are_refused() {
        for b in [Bound::Positive, Bound::NonNegative] {
            assert!(b
                .check("x", "inf", f64::INFINITY, Dimension::Power)
                .is_err());
            assert!(b.check("x", "NaN", f64::NAN, Dimension::Power).is_err());
            assert!(b.check("x", "1 TW", 1e12, Dimension::Power).is_err());
        }
        assert!(Bound::Count
            .check("x", "1.5", 1.5, Dimension::Ratio)
            .is_err());
        assert!(Bound::Flag.check("x", "2", 2.0, Dimension::Ratio).is_err());
    }
}
