//! A serving run's load and latency target: how many requests are in flight over the system
//! (as the workload's batch says, a total, or as many as fit) and the service-level objective
//! the estimate and the mapping search must meet (`--slo "ttft<=2s,tpot<=40ms"`,
//! `--min-user-rate "50/s"`, a validation case's `slo`), either on the mean figures or, written
//! `"p99 ttft<=2s,tpot<=200ms"`, at a percentile of requests arriving at random (MLPerf's server
//! scenario checks both bounds at the 99th percentile under Poisson arrivals). The engine's `serve` module computes
//! the figures these are checked against.

use serde::Serialize;

/// Requests in flight over the whole system (all model instances together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Concurrency {
    /// The workload's `batch` on each model instance (the mapping's data-parallel replicas).
    #[default]
    Workload,
    /// This many over the system, split evenly over the model instances (a mapping whose
    /// instances do not divide it is infeasible).
    Total(u64),
    /// As many as the KV cache holds on each instance (MLPerf's offline scenario: the
    /// highest throughput, whatever the latency), or, with a target, as many as still meet it
    /// (the server scenario).
    Max,
}

impl Concurrency {
    /// `"64"` or `"max"`.
    pub fn parse(s: &str) -> Result<Concurrency, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("max") {
            return Ok(Concurrency::Max);
        }
        match t.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Concurrency::Total(n)),
            _ => Err(format!(
                "`{s}` is not a concurrency\nhint: a count of requests in flight over the system (`64`) or `max` (as many as the KV cache holds)"
            )),
        }
    }
}

/// Latency limits a serving run must meet; every bound optional.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Slo {
    /// Time to first token, at most (s).
    pub ttft_s: Option<f64>,
    /// Time per output token, at most (s).
    pub tpot_s: Option<f64>,
    /// Output tokens per second each user sees, at least (1 / time per output token).
    pub min_user_rate: Option<f64>,
    /// The percentile of requests the bounds hold for (`Some(99.0)`: written `p99`), with
    /// requests arriving at random (Poisson) and queueing for their prefill
    /// (`engine::serve::tail`); `None`: the bounds hold for the mean figures of the steady
    /// state (evenly spaced joins, no queueing), as a target without a percentile always meant.
    pub percentile: Option<f64>,
}

impl Slo {
    /// No bound at all.
    pub fn is_empty(&self) -> bool {
        self.ttft_s.is_none() && self.tpot_s.is_none() && self.min_user_rate.is_none()
    }

    /// The tightest bound on time per output token (TPOT and the per-user rate are one bound).
    pub fn tpot_bound(&self) -> Option<f64> {
        let r = self.min_user_rate.map(|r| 1.0 / r);
        match (self.tpot_s, r) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// How far figures are from the target: the largest ratio of a figure to its bound (≤ 1:
    /// met). 0 without bounds.
    pub fn violation(&self, ttft: f64, tpot: f64) -> f64 {
        let mut v: f64 = 0.0;
        if let Some(b) = self.ttft_s {
            v = v.max(ttft / b);
        }
        if let Some(b) = self.tpot_bound() {
            v = v.max(tpot / b);
        }
        v
    }

    /// Both figures within their bounds.
    pub fn met(&self, ttft: f64, tpot: f64) -> bool {
        self.violation(ttft, tpot) <= 1.0
    }

    /// The quantile the bounds hold at (0.99 for `p99`), `None` for the mean.
    pub fn quantile(&self) -> Option<f64> {
        self.percentile.map(|p| p / 100.0)
    }

    /// Parse `"ttft<=2s,tpot<=40ms"` (also `user>=50/s`); units as in files (`2 s`, `40 ms`);
    /// a leading `p99 ` (any percentile above 0 and below 100, e.g. `p99.9`) states the
    /// percentile the bounds hold at.
    pub fn parse(s: &str) -> Result<Slo, String> {
        let mut slo = Slo::default();
        let hint = "hint: bounds separated by commas: `ttft<=2s`, `tpot<=40ms`, `user>=50/s` (output tokens per second per user), optionally after a percentile: `p99 ttft<=2s,tpot<=200ms`";
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let part = match percentile_prefix(part) {
                Some((p, rest)) => {
                    let p = p.map_err(|e| format!("{e}\n{hint}"))?;
                    if slo.percentile.is_some_and(|q| q != p) {
                        return Err(format!("`{s}` states two percentiles\n{hint}"));
                    }
                    slo.percentile = Some(p);
                    if rest.is_empty() {
                        continue;
                    }
                    rest
                }
                None => part,
            };
            let (key, value, le) = if let Some((k, v)) = part.split_once("<=") {
                (k.trim(), v.trim(), true)
            } else if let Some((k, v)) = part.split_once(">=") {
                (k.trim(), v.trim(), false)
            } else {
                return Err(format!("`{part}` is not a bound\n{hint}"));
            };
            match (key.to_ascii_lowercase().as_str(), le) {
                ("ttft", true) => slo.ttft_s = Some(time(value)?),
                ("tpot", true) => slo.tpot_s = Some(time(value)?),
                ("user" | "user_rate" | "user-rate", false) => {
                    slo.min_user_rate = Some(rate(value)?)
                }
                _ => return Err(format!("`{part}`: unknown bound\n{hint}")),
            }
        }
        if slo.is_empty() {
            return Err(format!("`{s}` states no bound\n{hint}"));
        }
        Ok(slo)
    }

    /// The target as written back (`ttft<=2 s, tpot<=40 ms`, after `p99 ` where it has a
    /// percentile), for headers and JSON.
    pub fn describe(&self) -> String {
        let f = |x: f64| crate::units::fmt_si(x, "s").trim().to_string();
        let mut v = Vec::new();
        if let Some(t) = self.ttft_s {
            v.push(format!("ttft<={}", f(t)));
        }
        if let Some(t) = self.tpot_s {
            v.push(format!("tpot<={}", f(t)));
        }
        if let Some(r) = self.min_user_rate {
            v.push(format!("user>={r}/s"));
        }
        match self.percentile {
            Some(p) => format!("p{p} {}", v.join(",")),
            None => v.join(","),
        }
    }
}

/// `"p99 ttft<=2s"` → (99, `"ttft<=2s"`); `"p99"` → (99, `""`); `None` where the part does not
/// start with a percentile.
fn percentile_prefix(part: &str) -> Option<(Result<f64, String>, &str)> {
    let rest = part.strip_prefix('p').or_else(|| part.strip_prefix('P'))?;
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    if end == 0 {
        return None;
    }
    let (num, tail) = rest.split_at(end);
    if !(tail.is_empty() || tail.starts_with(char::is_whitespace)) {
        return None;
    }
    let p = match num.parse::<f64>() {
        Ok(x) if x > 0.0 && x < 100.0 => Ok(x),
        _ => Err(format!(
            "`p{num}` is not a percentile: it is above 0 and below 100 (`p99`)"
        )),
    };
    Some((p, tail.trim()))
}

fn time(v: &str) -> Result<f64, String> {
    match crate::units::parse(v, crate::units::Dimension::Time) {
        Ok(q) if q.value > 0.0 => Ok(q.value),
        Ok(_) => Err(format!("`{v}`: a latency bound is positive")),
        Err(e) => Err(match e.hint {
            Some(h) => format!("{}\nhint: {h}", e.message),
            None => e.message,
        }),
    }
}

/// `"50/s"`, `"50"` or `"50 tokens/s"`: output tokens per second per user.
pub fn rate(v: &str) -> Result<f64, String> {
    let t = v.trim();
    let num = t
        .trim_end_matches("/s")
        .trim_end_matches("tokens")
        .trim_end_matches("token")
        .trim();
    match num.parse::<f64>() {
        Ok(x) if x > 0.0 && x.is_finite() => Ok(x),
        _ => Err(format!(
            "`{v}` is not a rate\nhint: output tokens per second per user, e.g. `50/s`"
        )),
    }
}

/// A serving run's load and target (defaults: the workload's batch, no target).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Load {
    pub concurrency: Concurrency,
    pub slo: Slo,
}
