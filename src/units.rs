//! Quantities with units written in the files ("3.35 TB/s", "700 W"), parsed once into SI values.
//!
//! A quantity string is `<number> <prefix><unit> [@source]`. The dimension a field expects is known
//! by the field, so `"700 W"` where a bandwidth belongs is an error naming the expected dimension.
//! SI prefixes (k, M, G, T, P, E, m, u/µ, n, p, f) and binary prefixes (Ki, Mi, Gi, Ti, Pi, Ei) are
//! accepted; bits (`b`) and bytes (`B`) are distinct, and bits are converted to bytes.

use std::fmt;

/// What a quantity measures. Internal values are SI: s, B, B/s, FLOP/s, W, J, J/FLOP, J/B, Hz, m², m.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dimension {
    /// Plain number (a fraction, a factor); `%` is accepted.
    Ratio,
    Time,
    Bytes,
    Bandwidth,
    FlopRate,
    Power,
    Energy,
    EnergyPerFlop,
    EnergyPerByte,
    Frequency,
    Area,
    Length,
    /// FLOPs (or operations) per cycle per unit.
    FlopsPerCycle,
    /// Money, in US dollars (`"$30k"`, `"2.5 MUSD"`).
    Money,
    /// A price of energy, USD per joule (`"0.08 $/kWh"`).
    MoneyPerEnergy,
    /// A price per hour of use, USD per second (`"$2.99/h"`).
    MoneyPerTime,
    /// A capital cost per watt of power provisioned, USD per watt (`"$10M/MW"`).
    MoneyPerPower,
    /// A mass of CO2-equivalent, kg (`"1.3 t"`, `"150 kgCO2e"`).
    Mass,
    /// CO2-equivalent per energy, kg per joule (`"0.39 kg/kWh"`, `"57 gCO2e/kWh"`).
    CarbonIntensity,
    /// Water consumed per energy, m³ per joule (`"0.55 L/kWh"`, `"3.1 m3/MWh"`).
    WaterIntensity,
}

impl Dimension {
    /// The SI symbol values of this dimension are held in ("" for ratios and counts).
    pub fn si_symbol(self) -> &'static str {
        match self {
            Dimension::Ratio => "",
            Dimension::Time => "s",
            Dimension::Bytes => "B",
            Dimension::Bandwidth => "B/s",
            Dimension::FlopRate => "FLOP/s",
            Dimension::Power => "W",
            Dimension::Energy => "J",
            Dimension::EnergyPerFlop => "J/FLOP",
            Dimension::EnergyPerByte => "J/B",
            Dimension::Frequency => "Hz",
            Dimension::Area => "m2",
            Dimension::Length => "m",
            Dimension::FlopsPerCycle => "FLOP/cycle",
            Dimension::Money => "USD",
            Dimension::MoneyPerEnergy => "USD/J",
            Dimension::MoneyPerTime => "USD/s",
            Dimension::MoneyPerPower => "USD/W",
            Dimension::Mass => "kg",
            Dimension::CarbonIntensity => "kg/J",
            Dimension::WaterIntensity => "m3/J",
        }
    }
    /// Units a user may write for this dimension, for messages and did-you-mean hints.
    pub fn example_units(self) -> &'static [&'static str] {
        match self {
            Dimension::Ratio => &["", "%"],
            Dimension::Time => &["s", "ms", "us", "ns", "min", "h", "d"],
            Dimension::Bytes => &[
                "B", "KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB", "b",
            ],
            Dimension::Bandwidth => &["B/s", "GB/s", "TB/s", "PB/s", "Gb/s", "Tb/s", "GiB/s"],
            Dimension::FlopRate => &["FLOP/s", "TFLOP/s", "PFLOP/s", "OP/s", "TOP/s", "TOPS"],
            Dimension::Power => &["W", "kW", "MW"],
            Dimension::Energy => &["J", "kJ", "MJ", "GJ", "Wh", "kWh", "MWh"],
            Dimension::EnergyPerFlop => &["J/FLOP", "pJ/FLOP", "fJ/FLOP", "pJ/OP"],
            Dimension::EnergyPerByte => &["J/B", "pJ/B", "pJ/bit", "pJ/b"],
            Dimension::Frequency => &["Hz", "MHz", "GHz"],
            Dimension::Area => &["mm2", "mm^2", "cm2", "m2"],
            Dimension::Length => &["nm", "um", "mm", "m"],
            Dimension::FlopsPerCycle => &["FLOP/cycle", "OP/cycle"],
            Dimension::Money => &["$", "k$", "M$", "USD", "kUSD", "MUSD", "($10M)"],
            Dimension::MoneyPerEnergy => &["$/kWh", "$/MWh", "USD/kWh"],
            Dimension::MoneyPerTime => &["$/h", "$/hr", "USD/h"],
            Dimension::MoneyPerPower => &["$/W", "$/kW", "$/MW", "M$/MW"],
            Dimension::Mass => &["kg", "t", "g", "kgCO2e", "tCO2e"],
            Dimension::CarbonIntensity => &["kg/kWh", "g/kWh", "gCO2e/kWh", "t/MWh"],
            Dimension::WaterIntensity => &["L/kWh", "mL/kWh", "L/MWh", "m3/MWh"],
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dimension::Ratio => "a plain number (ratio)",
            Dimension::Time => "a time",
            Dimension::Bytes => "a size in bytes",
            Dimension::Bandwidth => "a bandwidth",
            Dimension::FlopRate => "a compute rate",
            Dimension::Power => "a power",
            Dimension::Energy => "an energy",
            Dimension::EnergyPerFlop => "an energy per operation",
            Dimension::EnergyPerByte => "an energy per byte (or bit)",
            Dimension::Frequency => "a frequency",
            Dimension::Area => "an area",
            Dimension::Length => "a length",
            Dimension::FlopsPerCycle => "operations per cycle",
            Dimension::Money => "an amount of money",
            Dimension::MoneyPerEnergy => "a price of energy",
            Dimension::MoneyPerTime => "a price per hour",
            Dimension::MoneyPerPower => "a cost per unit of power",
            Dimension::Mass => "a mass (of CO2-equivalent)",
            Dimension::CarbonIntensity => "a carbon intensity (CO2-equivalent per energy)",
            Dimension::WaterIntensity => "a water intensity (water consumed per energy)",
        }
    }
}

impl fmt::Display for Dimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A parsed quantity: SI value plus the source tag written after `@`, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed {
    pub value: f64,
    pub source: Option<String>,
}

/// Why a quantity string did not parse; `hint` is a suggestion for the author.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitError {
    pub message: String,
    pub hint: Option<String>,
}

fn err(message: impl Into<String>, hint: Option<String>) -> UnitError {
    UnitError {
        message: message.into(),
        hint,
    }
}

/// Base units per dimension with their factor to SI. Prefixes are applied on top.
fn base_units(dim: Dimension) -> &'static [(&'static str, f64)] {
    match dim {
        Dimension::Ratio => &[("", 1.0), ("%", 0.01), ("x", 1.0)],
        Dimension::Time => &[
            ("s", 1.0),
            ("min", 60.0),
            ("h", 3600.0),
            ("d", 86400.0),
            // a Julian year, the unit amortisation periods are written in
            ("years", YEAR),
            ("year", YEAR),
            ("yr", YEAR),
            ("y", YEAR),
        ],
        Dimension::Bytes => &[("B", 1.0), ("b", 0.125), ("bit", 0.125)],
        Dimension::Bandwidth => &[
            ("B/s", 1.0),
            ("b/s", 0.125),
            ("bit/s", 0.125),
            ("bps", 0.125),
        ],
        Dimension::FlopRate => &[("FLOP/s", 1.0), ("FLOPS", 1.0), ("OP/s", 1.0), ("OPS", 1.0)],
        Dimension::Power => &[("W", 1.0)],
        Dimension::Energy => &[("J", 1.0), ("Wh", 3600.0)],
        Dimension::EnergyPerFlop => &[("J/FLOP", 1.0), ("J/OP", 1.0)],
        Dimension::EnergyPerByte => &[("J/B", 1.0), ("J/bit", 8.0), ("J/b", 8.0)],
        Dimension::Frequency => &[("Hz", 1.0)],
        Dimension::Area => &[("m2", 1.0), ("m^2", 1.0), ("m²", 1.0)],
        Dimension::Length => &[("m", 1.0)],
        Dimension::FlopsPerCycle => &[("FLOP/cycle", 1.0), ("OP/cycle", 1.0)],
        // money units are matched after `USD` is spelt `$` (see `money_unit`)
        Dimension::Money => &[("$", 1.0)],
        Dimension::MoneyPerEnergy => &[
            ("$/J", 1.0),
            ("$/Wh", 1.0 / 3.6e3),
            ("$/kWh", 1.0 / 3.6e6),
            ("$/MWh", 1.0 / 3.6e9),
        ],
        Dimension::MoneyPerTime => &[("$/s", 1.0), ("$/h", 1.0 / 3600.0), ("$/hr", 1.0 / 3600.0)],
        Dimension::MoneyPerPower => &[("$/W", 1.0), ("$/kW", 1e-3), ("$/MW", 1e-6)],
        Dimension::Mass => &[("g", 1e-3), ("gCO2e", 1e-3), ("t", 1e3), ("tCO2e", 1e3)],
        Dimension::CarbonIntensity => &[
            ("g/kWh", 1e-3 / 3.6e6),
            ("gCO2e/kWh", 1e-3 / 3.6e6),
            ("g/MWh", 1e-3 / 3.6e9),
            ("t/MWh", 1e3 / 3.6e9),
            ("tCO2e/MWh", 1e3 / 3.6e9),
        ],
        // litres (and cubic metres) per energy; SI m³ per joule
        Dimension::WaterIntensity => &[
            ("L/kWh", 1e-3 / 3.6e6),
            ("l/kWh", 1e-3 / 3.6e6),
            ("L/MWh", 1e-3 / 3.6e9),
            ("m3/MWh", 1.0 / 3.6e9),
            ("m3/J", 1.0),
        ],
    }
}

/// Seconds in a Julian year (365.25 days).
pub const YEAR: f64 = 365.25 * 86400.0;

/// Whether `dim` measures money (its units are written with `$` or `USD`).
fn is_money(dim: Dimension) -> bool {
    matches!(
        dim,
        Dimension::Money
            | Dimension::MoneyPerEnergy
            | Dimension::MoneyPerTime
            | Dimension::MoneyPerPower
    )
}

/// A money quantity as written (`"$10M"`, `"$0.08/kWh"`, `"10 MUSD"`, `"2.99 USD/h"`) in the
/// `<number> <prefix>$[/unit]` form the unit table holds: a leading `$` moves behind the
/// number (before any `/`), and `USD` is spelt `$`.
fn money_text(body: &str) -> String {
    let body = body.trim().replace("USD", "$");
    let Some(rest) = body.strip_prefix('$') else {
        return body;
    };
    let rest = rest.trim_start();
    let num_end = rest
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || matches!(c, '.' | '_' | 'e' | 'E' | '-' | '+')))
        .map(|(i, _)| i)
        .unwrap_or(rest.len());
    let (num, unit) = rest.split_at(num_end);
    let unit = unit.trim();
    match unit.split_once('/') {
        Some((prefix, per)) => format!("{num} {}$/{per}", prefix.trim()),
        None => format!("{num} {unit}$"),
    }
}

const SI_PREFIXES: &[(&str, f64)] = &[
    ("", 1.0),
    ("k", 1e3),
    ("K", 1e3),
    ("M", 1e6),
    ("G", 1e9),
    ("T", 1e12),
    ("P", 1e15),
    ("E", 1e18),
    ("m", 1e-3),
    ("u", 1e-6),
    ("µ", 1e-6),
    ("n", 1e-9),
    ("p", 1e-12),
    ("f", 1e-15),
];
const BIN_PREFIXES: &[(&str, f64)] = &[
    ("Ki", 1024.0),
    ("Mi", 1048576.0),
    ("Gi", 1073741824.0),
    ("Ti", 1099511627776.0),
    ("Pi", 1125899906842624.0),
    ("Ei", 1152921504606846976.0),
];

/// Dimensions a unit text could mean, for the "expected X, found Y" message.
fn dimension_of_unit(unit: &str) -> Option<Dimension> {
    use Dimension::*;
    [
        Bandwidth,
        FlopRate,
        Power,
        Energy,
        EnergyPerFlop,
        EnergyPerByte,
        Frequency,
        Area,
        Bytes,
        Time,
        Length,
        FlopsPerCycle,
        Money,
        MoneyPerEnergy,
        MoneyPerTime,
        MoneyPerPower,
        CarbonIntensity,
        WaterIntensity,
        Mass,
    ]
    .into_iter()
    .find(|d| unit_factor(*d, unit).is_some())
}

/// Factor to SI of `unit` in dimension `dim`, trying every prefix/base split.
pub fn unit_factor(dim: Dimension, unit: &str) -> Option<f64> {
    // Area needs the prefix squared ("mm2" = 1e-6 m²).
    let squared = dim == Dimension::Area;
    for (base, bf) in base_units(dim) {
        let Some(prefix) = unit.strip_suffix(base) else {
            continue;
        };
        if base.is_empty() && !prefix.is_empty() {
            continue;
        }
        let table: Vec<&(&str, f64)> = SI_PREFIXES.iter().chain(BIN_PREFIXES.iter()).collect();
        for (p, pf) in table {
            if *p == prefix {
                // Binary prefixes only make sense for bytes.
                if p.ends_with('i') && !matches!(dim, Dimension::Bytes | Dimension::Bandwidth) {
                    return None;
                }
                let pf = if squared { pf * pf } else { *pf };
                return Some(pf * bf);
            }
        }
    }
    // Common aliases.
    match (dim, unit) {
        (Dimension::Time, "us" | "µs") => Some(1e-6),
        (Dimension::FlopRate, u) if u.ends_with("TOPS") && u.len() == 4 => Some(1e12),
        _ => None,
    }
}

/// Every spelling the parser accepts for a dimension, used for did-you-mean suggestions.
fn candidate_spellings(dim: Dimension) -> Vec<String> {
    let mut out = Vec::new();
    for (base, _) in base_units(dim) {
        for (p, _) in SI_PREFIXES.iter().chain(BIN_PREFIXES.iter()) {
            let s = format!("{p}{base}");
            if unit_factor(dim, &s).is_some() && !s.is_empty() {
                out.push(s);
            }
        }
    }
    out
}

/// The closest accepted spelling to `unit`, when one is close enough to be a likely typo.
pub fn suggest_unit(dim: Dimension, unit: &str) -> Option<String> {
    let lower = unit.to_lowercase();
    let mut best: Option<(f64, String)> = None;
    for cand in candidate_spellings(dim) {
        // Same letters in another case rank first; among those, the closest in case wins, so
        // `Gb/S` suggests `Gb/s` (bits), not `GB/s` (bytes, 8× more).
        let score = if cand.to_lowercase() == lower {
            1.0 + strsim::jaro_winkler(&cand, unit)
        } else {
            strsim::jaro_winkler(&cand, unit)
        };
        if best.as_ref().is_none_or(|(s, _)| score > *s) {
            best = Some((score, cand));
        }
    }
    best.filter(|(s, _)| *s >= 0.8).map(|(_, c)| c)
}

/// Parse a quantity such as `"3.35 TB/s @nv-h100"` as the dimension `dim`.
pub fn parse(text: &str, dim: Dimension) -> Result<Parsed, UnitError> {
    let (body, source) = match text.split_once('@') {
        Some((b, s)) => {
            let s = s.trim();
            if s.is_empty() || s.contains(char::is_whitespace) {
                return Err(err(
                    format!("source tag in `{text}` must be one word after `@`"),
                    Some(
                        "write the key of an entry in `sources`, e.g. \"700 W @nv-h100-datasheet\""
                            .into(),
                    ),
                ));
            }
            (b.trim(), Some(s.to_string()))
        }
        None => (text.trim(), None),
    };
    let money;
    let body = if is_money(dim) {
        money = money_text(body);
        money.as_str()
    } else {
        body
    };
    if body.is_empty() {
        return Err(err(
            "empty quantity",
            Some(format!(
                "write a number with a unit, e.g. \"{}\"",
                example(dim)
            )),
        ));
    }
    // Split the leading number from the unit.
    let num_end = body
        .char_indices()
        .find(|(i, c)| {
            !(c.is_ascii_digit()
                || *c == '.'
                || *c == '_'
                || ((*c == '-' || *c == '+')
                    && (*i == 0 || matches!(body.as_bytes()[i - 1], b'e' | b'E')))
                || ((*c == 'e' || *c == 'E')
                    && *i > 0
                    && body[..*i].chars().any(|d| d.is_ascii_digit())
                    && body[i + 1..]
                        .starts_with(|n: char| n.is_ascii_digit() || n == '-' || n == '+')))
        })
        .map(|(i, _)| i)
        .unwrap_or(body.len());
    let (num, unit) = body.split_at(num_end);
    let num = num.replace('_', "");
    let unit = unit.trim();
    let lower_num = body.to_ascii_lowercase();
    if lower_num.starts_with("nan") || lower_num.starts_with("inf") || lower_num.starts_with("-inf")
    {
        return Err(err(
            format!("`{body}` is not a finite number"),
            Some("quantities must be finite; write the measured or datasheet value".into()),
        ));
    }
    let value: f64 = num.parse().map_err(|_| {
        err(
            format!("`{body}` does not start with a number"),
            Some(format!(
                "write a number then a unit, e.g. \"{}\"",
                example(dim)
            )),
        )
    })?;
    if !value.is_finite() {
        return Err(err(
            format!("`{body}` is not a finite number"),
            Some("the number is too large to represent".into()),
        ));
    }
    let factor = match unit_factor(dim, unit) {
        Some(f) => f,
        None => {
            if let Some(other) = dimension_of_unit(unit).filter(|d| *d != dim) {
                return Err(err(
                    format!("expected {dim}, found `{unit}`, which is {other}"),
                    Some(format!("units for {dim}: {}", units_list(dim))),
                ));
            }
            let hint = if unit.starts_with(',') {
                "write the decimal separator as a point: \"1.15\", not \"1,15\"".to_string()
            } else {
                match suggest_unit(dim, unit) {
                    Some(s) => format!("did you mean `{s}`? units for {dim}: {}", units_list(dim)),
                    None => format!("units for {dim}: {}", units_list(dim)),
                }
            };
            let what = if unit.is_empty() {
                "missing unit".to_string()
            } else {
                format!("unknown unit `{unit}`")
            };
            return Err(err(
                format!("{what} in `{body}`; expected {dim}"),
                Some(hint),
            ));
        }
    };
    let si = value * factor;
    if !si.is_finite() {
        return Err(err(format!("`{body}` overflows"), None));
    }
    Ok(Parsed { value: si, source })
}

fn units_list(dim: Dimension) -> String {
    dim.example_units()
        .iter()
        .map(|u| {
            if u.is_empty() {
                "(none)".to_string()
            } else {
                format!("`{u}`")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// An example quantity of the dimension, for hints.
pub fn example(dim: Dimension) -> &'static str {
    match dim {
        Dimension::Ratio => "0.7",
        Dimension::Time => "1.5 us",
        Dimension::Bytes => "80 GiB",
        Dimension::Bandwidth => "3.35 TB/s",
        Dimension::FlopRate => "989.4 TFLOP/s",
        Dimension::Power => "700 W",
        Dimension::Energy => "6.11 MJ",
        Dimension::EnergyPerFlop => "0.5 pJ/FLOP",
        Dimension::EnergyPerByte => "3.9 pJ/bit",
        Dimension::Frequency => "1.98 GHz",
        Dimension::Area => "814 mm2",
        Dimension::Length => "4 nm",
        Dimension::FlopsPerCycle => "1024 FLOP/cycle",
        Dimension::Money => "$30k",
        Dimension::MoneyPerEnergy => "0.08 $/kWh",
        Dimension::MoneyPerTime => "$2.99/h",
        Dimension::MoneyPerPower => "$10M/MW",
        Dimension::Mass => "150 kg",
        Dimension::CarbonIntensity => "0.37 kg/kWh",
        Dimension::WaterIntensity => "0.55 L/kWh",
    }
}

/// The engineering prefix for magnitude `a` (|value|): its scale and symbol (`u` for micro).
pub fn si_prefix(a: f64) -> (f64, &'static str) {
    const PREFIXES: [(f64, &str); 12] = [
        (1e18, "E"),
        (1e15, "P"),
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "k"),
        (1.0, ""),
        (1e-3, "m"),
        (1e-6, "u"),
        (1e-9, "n"),
        (1e-12, "p"),
        (1e-15, "f"),
    ];
    PREFIXES
        .iter()
        .find(|(s, _)| a >= *s * 0.9995)
        .copied()
        .unwrap_or((1e-15, "f"))
}

/// Format an SI value with an engineering prefix and unit, e.g. `fmt_si(3.35e12, "B/s")` = "3.35 TB/s".
pub fn fmt_si(value: f64, unit: &str) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value} {unit}");
    }
    let (scale, p) = si_prefix(value.abs());
    let v = value / scale;
    let digits = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {p}{unit}")
}

/// An amount of US dollars as a table shows it: `$1.23`, `$0.0123` below a dollar (three
/// significant digits), `$12.3k`, `$4.56M` with a prefix from a thousand up.
pub fn fmt_usd(usd: f64) -> String {
    if !usd.is_finite() {
        return format!("${usd}");
    }
    let a = usd.abs();
    if a >= 1e3 {
        let s = fmt_si(usd, "");
        return format!("${}", s.replace(' ', ""));
    }
    if a >= 1.0 || a == 0.0 {
        return format!("${usd:.2}");
    }
    let digits = (2 - a.log10().floor() as i32).max(2) as usize;
    format!("${usd:.digits$}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn p(s: &str, d: Dimension) -> f64 {
        parse(s, d).unwrap().value
    }

    #[test]
    fn parses_common_quantities() {
        assert_relative_eq!(p("3.35 TB/s", Dimension::Bandwidth), 3.35e12);
        assert_relative_eq!(p("400 Gb/s", Dimension::Bandwidth), 50e9);
        assert_relative_eq!(p("80 GiB", Dimension::Bytes), 80.0 * 1073741824.0);
        assert_relative_eq!(p("989.4 TFLOP/s", Dimension::FlopRate), 989.4e12);
        assert_relative_eq!(p("750 TOPS", Dimension::FlopRate), 750e12);
        assert_relative_eq!(p("700 W", Dimension::Power), 700.0);
        assert_relative_eq!(p("1.1 pJ/FLOP", Dimension::EnergyPerFlop), 1.1e-12);
        assert_relative_eq!(p("1.5 us", Dimension::Time), 1.5e-6);
        assert_relative_eq!(p("814 mm2", Dimension::Area), 814e-6);
        assert_relative_eq!(p("5.4 pJ/bit", Dimension::EnergyPerByte), 43.2e-12);
        assert_relative_eq!(p("1.70 kWh", Dimension::Energy), 1.70 * 3.6e6);
        assert_relative_eq!(p("70 %", Dimension::Ratio), 0.7);
        assert_relative_eq!(p("0.7", Dimension::Ratio), 0.7);
        assert_relative_eq!(p("1e3 W", Dimension::Power), 1000.0);
        assert_relative_eq!(p("20 min", Dimension::Time), 1200.0);
    }

    /// Water intensity: litres per kWh and cubic metres per MWh are the same figure (1 L/kWh =
    /// 1 m³/MWh = 1e-3 m³ / 3.6e6 J), a carbon intensity is not one.
    #[test]
    fn parses_water_intensity() {
        let w = Dimension::WaterIntensity;
        assert_relative_eq!(p("0.55 L/kWh", w), 0.55e-3 / 3.6e6);
        assert_relative_eq!(p("3.14 m3/MWh", w), p("3.14 L/kWh", w));
        assert_relative_eq!(p("550 mL/kWh", w), p("0.55 L/kWh", w));
        assert_relative_eq!(p("1000 L/MWh", w), p("1 L/kWh", w));
        let e = parse("0.37 kg/kWh", w).unwrap_err();
        assert!(e.message.contains("a water intensity"), "{}", e.message);
    }

    #[test]
    fn source_tag_is_kept() {
        let q = parse("700 W @nv-h100", Dimension::Power).unwrap();
        assert_eq!(q.source.as_deref(), Some("nv-h100"));
    }

    #[test]
    fn wrong_dimension_names_both() {
        let e = parse("700 W", Dimension::Bandwidth).unwrap_err();
        assert!(e.message.contains("expected a bandwidth"), "{}", e.message);
        assert!(e.message.contains("a power"), "{}", e.message);
    }

    #[test]
    fn suggestion_keeps_bits_and_bytes_apart() {
        let e = parse("400 Gb/S", Dimension::Bandwidth).unwrap_err();
        assert!(e.hint.unwrap().starts_with("did you mean `Gb/s`"));
        let e = parse("1,15 W", Dimension::Power).unwrap_err();
        assert!(e.hint.unwrap().contains("decimal"));
    }

    #[test]
    fn misspelt_unit_gets_suggestion() {
        let e = parse("3.35 TB/S", Dimension::Bandwidth).unwrap_err();
        assert!(e.hint.unwrap().contains("`TB/s`"));
    }

    #[test]
    fn non_finite_rejected() {
        assert!(parse("NaN W", Dimension::Power).is_err());
        assert!(parse("inf W", Dimension::Power).is_err());
        assert!(parse("1e400 W", Dimension::Power).is_err());
    }

    #[test]
    fn formats_with_prefix() {
        assert_eq!(fmt_si(3.35e12, "B/s"), "3.35 TB/s");
        assert_eq!(fmt_si(700.0, "W"), "700 W");
        assert_eq!(fmt_si(1.3e14, "B/s"), "130 TB/s");
    }
}
