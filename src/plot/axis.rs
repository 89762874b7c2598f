//! Axes: linear or logarithmic ranges, their ticks, and the mapping from data to the unit interval.

use super::base::tick_label;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleKind {
    Linear,
    Log,
}

/// A data range on one axis, with its title (quantity and unit).
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub kind: ScaleKind,
    pub min: f64,
    pub max: f64,
    pub title: String,
    /// Ticks to use instead of the computed ones.
    pub marks: Option<Vec<f64>>,
}

impl Axis {
    /// A logarithmic axis over whole decades that hold every positive finite value given
    /// (`1..10` when there is none).
    pub fn log(title: &str, values: impl IntoIterator<Item = f64>) -> Axis {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            if v > 0.0 && v.is_finite() {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        if !lo.is_finite() {
            (lo, hi) = (1.0, 10.0);
        }
        let mut a = lo.log10().floor();
        let mut b = hi.log10().ceil();
        // Values sitting exactly on a decade get a little room.
        if (lo.log10() - a).abs() < 0.02 {
            a -= 1.0;
        }
        if (b - hi.log10()).abs() < 0.02 {
            b += 1.0;
        }
        if b - a < 1.0 {
            b = a + 1.0;
        }
        Axis {
            kind: ScaleKind::Log,
            min: 10f64.powf(a),
            max: 10f64.powf(b),
            title: title.to_string(),
            marks: None,
        }
    }

    /// A logarithmic axis for counts (devices): a little room around the data, ticks at the
    /// powers of two when there are few enough, else at decades.
    pub fn log_counts(title: &str, values: impl IntoIterator<Item = f64>) -> Axis {
        let v: Vec<f64> = values
            .into_iter()
            .filter(|v| *v > 0.0 && v.is_finite())
            .collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !lo.is_finite() {
            return Axis::log(title, v);
        }
        let (min, max) = (lo / 1.4, (hi * 1.4).max(lo * 2.0));
        let (a, b) = (min.log2().ceil() as i32, max.log2().floor() as i32);
        let marks = if b - a <= 12 {
            Some((a..=b).map(|k| 2f64.powi(k)).collect())
        } else {
            None
        };
        Axis {
            kind: ScaleKind::Log,
            min,
            max,
            title: title.to_string(),
            marks,
        }
    }

    /// A linear axis from a rounded bound below the data (zero when `from_zero`) to one above.
    pub fn linear(title: &str, values: impl IntoIterator<Item = f64>, from_zero: bool) -> Axis {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            if v.is_finite() {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        if from_zero {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        if hi - lo <= 0.0 {
            hi = lo + if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        }
        let step = nice_step((hi - lo) / 5.0);
        let min = if from_zero && lo >= 0.0 {
            0.0
        } else {
            (lo / step).floor() * step
        };
        let mut max = (hi / step).ceil() * step;
        if (max - hi).abs() < step * 0.05 {
            max += step;
        }
        Axis {
            kind: ScaleKind::Linear,
            min,
            max,
            title: title.to_string(),
            marks: None,
        }
    }

    /// Where `v` falls, 0 at `min` and 1 at `max` (outside for values out of range).
    pub fn fraction(&self, v: f64) -> f64 {
        match self.kind {
            ScaleKind::Linear => (v - self.min) / (self.max - self.min),
            ScaleKind::Log => {
                let v = v.max(self.min * 1e-6);
                (v.log10() - self.min.log10()) / (self.max.log10() - self.min.log10())
            }
        }
    }

    pub fn contains(&self, v: f64) -> bool {
        let f = self.fraction(v);
        (-1e-9..=1.0 + 1e-9).contains(&f)
    }

    /// Major ticks with their labels.
    pub fn ticks(&self) -> Vec<(f64, String)> {
        if let Some(m) = &self.marks {
            // Given marks are counts: whole numbers read better than 1.02k.
            return m
                .iter()
                .filter(|v| self.contains(**v))
                .map(|v| {
                    let l = if v.fract() == 0.0 && *v < 1e5 {
                        format!("{v:.0}")
                    } else {
                        tick_label(*v)
                    };
                    (*v, l)
                })
                .collect();
        }
        match self.kind {
            ScaleKind::Linear => {
                let step = nice_step((self.max - self.min) / 5.0);
                let first = (self.min / step - 1e-9).ceil() as i64;
                let last = (self.max / step + 1e-9).floor() as i64;
                (first..=last)
                    .map(|k| {
                        let v = k as f64 * step;
                        (v, tick_label(v))
                    })
                    .collect()
            }
            ScaleKind::Log => {
                let (a, b) = self.decades();
                let decades = b - a;
                // Too many decades: label every second or third.
                let every = (decades as f64 / 8.0).ceil().max(1.0) as i32;
                let mut out = Vec::new();
                for k in a - 1..=b {
                    let v = 10f64.powi(k);
                    if (k - a) % every == 0 && self.contains(v) {
                        out.push((v, tick_label(v)));
                    }
                    if decades <= 1 {
                        for m in [2.0, 5.0] {
                            let v = m * 10f64.powi(k);
                            if self.contains(v) {
                                out.push((v, tick_label(v)));
                            }
                        }
                    }
                }
                out
            }
        }
    }

    /// First and last whole decade inside a log axis.
    fn decades(&self) -> (i32, i32) {
        (
            (self.min.log10() - 1e-9).ceil() as i32,
            (self.max.log10() + 1e-9).floor() as i32,
        )
    }

    /// Minor grid positions (log axes: 2..9 in each decade when there are few decades).
    pub fn minor(&self) -> Vec<f64> {
        match self.kind {
            ScaleKind::Linear => Vec::new(),
            ScaleKind::Log => {
                let (a, b) = self.decades();
                if b - a > 6 {
                    return Vec::new();
                }
                (a - 1..=b)
                    .flat_map(|k| (2..10).map(move |m| m as f64 * 10f64.powi(k)))
                    .filter(|v| self.contains(*v))
                    .collect()
            }
        }
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw > 0.0 && raw.is_finite()) {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let k = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    k * p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axis_covers_decades() {
        let a = Axis::log("x", [3.0, 420.0]);
        assert_eq!((a.min, a.max), (1.0, 1000.0));
        assert_eq!(a.ticks().len(), 4);
        assert!((a.fraction(10.0) - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn linear_axis_is_nice() {
        let a = Axis::linear("y", [0.2, 0.93], true);
        assert_eq!(a.min, 0.0);
        assert!(a.max >= 0.93 && a.max <= 1.2, "{}", a.max);
        let t = a.ticks();
        assert_eq!(t[0].1, "0");
    }
}
