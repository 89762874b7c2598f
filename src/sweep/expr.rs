//! Axis values as written: range expressions and lists, parsed against the dimension the path
//! expects (`"2 TB/s .. 8 TB/s step 0.5 TB/s"`, `"1 us .. 100 us log 5"`, `["1.8 TB/s", "3.6 TB/s"]`).
//!
//! Grammar (double quotes around the quantities are optional, so the issue's
//! `"2 TB/s".."8 TB/s" step "0.5 TB/s"` parses too):
//!
//! ```text
//! range  := value ".." value [ "step" value | ("x" | "points") N | "log" [N] ]
//! list   := "[" value ("," value)* "]" | value ("," value)*
//! ```
//!
//! A range without `step`, a count or `log N` is continuous (random and Latin-hypercube sampling
//! only); `log` without a count is continuous and uniform in the logarithm.

use super::space::Values;
use crate::spec::sweep::AxisValues;
use crate::units::{self, Dimension};

/// Most values one axis may enumerate.
pub const MAX_AXIS_VALUES: usize = 10_000_000;

/// A parse error: message and hint.
pub type Error = (String, Option<String>);

fn value(text: &str, dim: Dimension) -> Result<f64, Error> {
    let t = text.trim();
    if dim == Dimension::Ratio {
        match t {
            "true" => return Ok(1.0),
            "false" => return Ok(0.0),
            _ => {}
        }
    }
    units::parse(t, dim)
        .map(|p| p.value)
        .map_err(|e| (format!("`{t}`: {}", e.message), e.hint))
}

/// A range split into its ends and an optional `keyword argument` tail.
type RangeParts = (String, String, Option<(String, String)>);

/// Split `a .. b [keyword arg]`.
fn split_range(s: &str) -> Option<RangeParts> {
    let (lo, rest) = s.split_once("..")?;
    let words: Vec<&str> = rest.split_whitespace().collect();
    let kw = words
        .iter()
        .position(|w| matches!(*w, "step" | "x" | "points" | "log"));
    let (hi, tail) = match kw {
        Some(k) => (
            words[..k].join(" "),
            Some((words[k].to_string(), words[k + 1..].join(" "))),
        ),
        None => (words.join(" "), None),
    };
    Some((lo.trim().to_string(), hi, tail))
}

/// Parse the values of a machine-vector axis.
pub fn parse(v: &AxisValues, dim: Dimension) -> Result<Values, Error> {
    let out = match v {
        AxisValues::List(items) => {
            if items.is_empty() {
                return Err(("an axis needs at least one value".into(), None));
            }
            Values::List(
                items
                    .iter()
                    .map(|q| value(&q.0, dim))
                    .collect::<Result<_, _>>()?,
            )
        }
        AxisValues::Expr(e) => parse_expr(e, dim)?,
    };
    check(&out)?;
    Ok(out)
}

fn check(v: &Values) -> Result<(), Error> {
    let bad = |x: f64| !x.is_finite() || x < 0.0;
    match v {
        Values::List(xs) => {
            if let Some(x) = xs.iter().find(|x| bad(**x)) {
                return Err((
                    format!("{x} is not a usable value"),
                    Some("values must be finite and not negative".into()),
                ));
            }
            if xs.len() > MAX_AXIS_VALUES {
                return Err((
                    format!("{} values on one axis; at most {MAX_AXIS_VALUES}", xs.len()),
                    Some("use a larger step or random sampling".into()),
                ));
            }
        }
        Values::Linear { lo, hi } | Values::Log { lo, hi } => {
            if bad(*lo) || bad(*hi) {
                return Err(("range ends must be finite and not negative".into(), None));
            }
            if hi < lo {
                return Err((
                    "the range runs backwards".into(),
                    Some("write the smaller value first".into()),
                ));
            }
            if matches!(v, Values::Log { .. }) && *lo <= 0.0 {
                return Err(("a log range must start above 0".into(), None));
            }
        }
    }
    Ok(())
}

fn count(s: &str) -> Result<usize, Error> {
    s.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| {
            (
                format!("`{}` is not a point count", s.trim()),
                Some("write a whole number of points, e.g. `x 8`".into()),
            )
        })
}

/// Parse a range or list expression (quotes stripped).
pub fn parse_expr(e: &str, dim: Dimension) -> Result<Values, Error> {
    let s = e.replace('"', "");
    let s = s.trim();
    if s.is_empty() {
        return Err(("no values".into(), Some(example(dim))));
    }
    if let Some((lo, hi, tail)) = split_range(s) {
        if lo.is_empty() || hi.is_empty() {
            return Err((format!("`{s}` is not a range"), Some(example(dim))));
        }
        let (lo, hi) = (value(&lo, dim)?, value(&hi, dim)?);
        if hi < lo {
            return Err((
                "the range runs backwards".into(),
                Some("write the smaller value first".into()),
            ));
        }
        return match tail {
            None => Ok(Values::Linear { lo, hi }),
            Some((kw, arg)) => match kw.as_str() {
                "step" => {
                    if arg.is_empty() {
                        return Err(("`step` needs a value".into(), Some(example(dim))));
                    }
                    let st = value(&arg, dim)?;
                    if st <= 0.0 {
                        return Err(("the step must be positive".into(), None));
                    }
                    let n = ((hi - lo) / st + 1e-9).floor() + 1.0;
                    if n > MAX_AXIS_VALUES as f64 {
                        return Err((
                            format!("{n} values on one axis; at most {MAX_AXIS_VALUES}"),
                            Some("use a larger step or random sampling".into()),
                        ));
                    }
                    let n = n as usize;
                    let mut v: Vec<f64> = (0..n).map(|k| lo + k as f64 * st).collect();
                    if let Some(last) = v.last_mut() {
                        if (*last - hi).abs() <= 1e-9 * hi.abs() {
                            *last = hi;
                        }
                    }
                    Ok(Values::List(v))
                }
                "x" | "points" => {
                    let n = count(&arg)?;
                    Ok(Values::List(linspace(lo, hi, n)))
                }
                "log" if arg.is_empty() => Ok(Values::Log { lo, hi }),
                "log" => {
                    let n = count(&arg)?;
                    if lo <= 0.0 {
                        return Err(("a log range must start above 0".into(), None));
                    }
                    let r = (hi / lo).ln();
                    let v = (0..n)
                        .map(|k| {
                            if n == 1 {
                                lo
                            } else if k + 1 == n {
                                hi
                            } else {
                                lo * (r * k as f64 / (n - 1) as f64).exp()
                            }
                        })
                        .collect();
                    Ok(Values::List(v))
                }
                _ => unreachable!(),
            },
        };
    }
    let body = s
        .strip_prefix('[')
        .and_then(|b| b.strip_suffix(']'))
        .unwrap_or(s);
    let v = body
        .split(',')
        .map(|x| x.trim())
        .filter(|x| !x.is_empty())
        .map(|x| value(x, dim))
        .collect::<Result<Vec<f64>, _>>()?;
    if v.is_empty() {
        return Err(("no values".into(), Some(example(dim))));
    }
    Ok(Values::List(v))
}

fn linspace(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|k| {
            if n == 1 {
                lo
            } else if k + 1 == n {
                hi
            } else {
                lo + (hi - lo) * k as f64 / (n - 1) as f64
            }
        })
        .collect()
}

fn example(dim: Dimension) -> String {
    let u = units::example(dim);
    format!(
        "write a range `\"LOW .. HIGH step STEP\"` (or `x N`, `log N`, `log`), or a list `[\"{u}\", ...]`"
    )
}

/// Whole-number values of a program axis (device counts, mapping degrees).
pub fn parse_counts(v: &AxisValues) -> Result<Vec<u64>, Error> {
    let vals = match parse(v, Dimension::Ratio)? {
        Values::List(v) => v,
        _ => {
            return Err((
                "a count axis needs a list or a range with a step".into(),
                Some("e.g. `[512, 1024, 2048]` or `\"8 .. 64 step 8\"`".into()),
            ))
        }
    };
    vals.iter()
        .map(|x| {
            if x.fract() == 0.0 && *x >= 0.0 && *x < 1e15 {
                Ok(*x as u64)
            } else {
                Err((format!("{x} is not a whole number"), None))
            }
        })
        .collect()
}

/// Plain words (`["None", "Full"]`) of an enumerated program axis.
pub fn parse_words(v: &AxisValues) -> Vec<String> {
    match v {
        AxisValues::List(items) => items.iter().map(|q| q.0.trim().to_string()).collect(),
        AxisValues::Expr(e) => e
            .replace('"', "")
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect(),
    }
}

/// Split a `--vary PATH=VALUES` option.
pub fn split_cli(s: &str) -> Option<(String, AxisValues)> {
    let (p, v) = s.split_once('=')?;
    Some((p.trim().to_string(), AxisValues::Expr(v.trim().to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let v = parse_expr(
            "\"2 TB/s\"..\"8 TB/s\" step \"0.5 TB/s\"",
            Dimension::Bandwidth,
        )
        .unwrap();
        match v {
            Values::List(v) => {
                assert_eq!(v.len(), 13);
                assert_eq!(v[0], 2e12);
                assert_eq!(v[12], 8e12);
            }
            _ => panic!(),
        }
        match parse_expr("1 us .. 100 us log 3", Dimension::Time).unwrap() {
            Values::List(v) => {
                assert_eq!(v.len(), 3);
                assert!((v[1] / 1e-5 - 1.0).abs() < 1e-12);
                assert!((v[2] / 1e-4 - 1.0).abs() < 1e-12);
            }
            _ => panic!(),
        }
        assert_eq!(
            parse_expr("0.5 .. 0.9", Dimension::Ratio).unwrap(),
            Values::Linear { lo: 0.5, hi: 0.9 }
        );
        assert!(parse_expr("2 TB/s .. 1 TB/s", Dimension::Bandwidth).is_err());
        assert!(parse_expr("2 W .. 3 W", Dimension::Bandwidth).is_err());
        assert_eq!(
            parse_expr("[1, 2, 4]", Dimension::Ratio).unwrap(),
            Values::List(vec![1.0, 2.0, 4.0])
        );
    }
}
