//! What a sweep ranks points by and which two metrics its Pareto front trades off.

use super::outcome::Outcome;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Work units per second (tokens, samples): higher is better.
    Throughput,
    /// Seconds per step: lower is better.
    StepTime,
    /// Average facility power of the devices used (W): lower is better.
    Power,
    /// Energy per unit of work (J per token or sample): lower is better.
    Energy,
    /// Throughput per watt: higher is better.
    PerfPerWatt,
    /// Model FLOPs utilisation: higher is better.
    Mfu,
}

impl Metric {
    pub const ALL: [Metric; 6] = [
        Metric::Throughput,
        Metric::StepTime,
        Metric::Power,
        Metric::Energy,
        Metric::PerfPerWatt,
        Metric::Mfu,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput",
            Metric::StepTime => "step_time",
            Metric::Power => "power",
            Metric::Energy => "energy",
            Metric::PerfPerWatt => "perf_per_watt",
            Metric::Mfu => "mfu",
        }
    }

    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::Throughput | Metric::PerfPerWatt | Metric::Mfu)
    }

    /// The metric's code in the WGSL kernel (`score` in `eval.wgsl`).
    pub fn code(self) -> u32 {
        match self {
            Metric::Throughput => 0,
            Metric::StepTime => 1,
            Metric::Power => 2,
            Metric::Energy => 3,
            Metric::PerfPerWatt => 4,
            Metric::Mfu => 5,
        }
    }

    /// The metric's value for a point (SI).
    pub fn value(self, o: &Outcome) -> f64 {
        match self {
            Metric::Throughput => o.throughput,
            Metric::StepTime => o.step_time,
            Metric::Power => o.power,
            Metric::Energy => o.energy_per_unit,
            Metric::PerfPerWatt => o.throughput / o.power,
            Metric::Mfu => o.mfu,
        }
    }

    /// Larger is better; NaN for infeasible points.
    pub fn score(self, o: &Outcome) -> f64 {
        if o.reason != 0 {
            return f64::NAN;
        }
        let v = self.value(o);
        if self.higher_is_better() {
            v
        } else {
            -v
        }
    }

    /// Parse a metric name (`perf-per-watt` and `perf_per_watt` both work).
    pub fn parse(s: &str) -> Result<Metric, String> {
        let k = s.trim().to_ascii_lowercase().replace('-', "_");
        let k = match k.as_str() {
            "time" => "step_time",
            "energy_per_unit" | "energy_per_token" => "energy",
            "perf_per_w" | "efficiency" => "perf_per_watt",
            other => other,
        };
        Metric::ALL
            .into_iter()
            .find(|m| m.name() == k)
            .ok_or_else(|| {
                let names: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
                match crate::diag::did_you_mean(k, names.iter().copied()) {
                    Some(d) => format!(
                        "unknown metric `{s}`; did you mean `{d}`? ({})",
                        names.join(", ")
                    ),
                    None => format!("unknown metric `{s}`; choose from {}", names.join(", ")),
                }
            })
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
