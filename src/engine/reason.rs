//! Why a design is infeasible, as one typed list: the human `reason`, the stable machine-readable
//! `reason_code` every JSON output carries beside it, and the small integer codes a design point
//! carries through the evaluators (the WGSL kernel gets them as generated constants).
//!
//! Codes are a contract (scripts and the Python package read them): add new ones, rename none.

use crate::units::fmt_si;
use serde::Serialize;

/// Why an estimate, a mapping or a design point is infeasible.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Reason {
    /// No devices, or more than the system has.
    Devices { requested: u64, available: u64 },
    /// The mapping does not fit the workload or the device count (a dimension that does not
    /// divide, a batch that does not split, more stages than layers).
    Mapping { detail: String },
    /// This combination of model, task and mapping is not modelled.
    Unsupported { detail: String },
    /// The mapping search found nothing feasible: how many it tried and the most common reason.
    NoFeasibleMapping {
        tried: usize,
        most_often: Option<(String, usize)>,
    },
    /// Model state and working data fit in no memory tier (bytes per device); with `host`, what
    /// is offloaded to host memory (activations, optimizer state, weights) exceeds each device's
    /// share of it.
    Memory {
        needed: f64,
        available: f64,
        host: bool,
    },
    /// No compute rate for a number format the work needs, or a zero bandwidth where data must
    /// move.
    NoCompute,
    /// A sweep point over the facility power budget.
    PowerBudget,
    /// A sweep point with less free memory per device than the floor.
    MemoryFloor,
    /// A capital budget (`compare --budget`) holds not even one node, or the system gives no
    /// capital cost to hold it to.
    CostBudget { detail: String },
    /// The device's power limit does not cover its static power (W per device): no clock, however
    /// low, runs the step within it.
    PowerCap { needed: f64, cap: f64 },
    /// The step time, energy or power came out infinite or not a number: a figure of the system
    /// so near zero (a bandwidth of 1e-308 GB/s) or so large that the result overflows.
    NonFinite,
    /// A phase's core region on a wafer (a mapping's `regions`) does not fit: larger than the
    /// mesh (`needed`/`available` in cores), or the layers it holds, weights and KV cache, over
    /// its cores' SRAM (in bytes).
    Region {
        phase: String,
        what: RegionShortfall,
        needed: f64,
        available: f64,
    },
}

/// What a core region lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RegionShortfall {
    /// More cores along a side than the mesh has.
    Cores,
    /// Its layers' weights and KV cache exceed its cores' SRAM.
    Memory,
}

/// Per-point reason codes (0 = feasible), as evaluators and sweep counts carry them.
pub mod point {
    pub const OK: u8 = 0;
    /// Does not fit in memory.
    pub const MEMORY: u8 = 1;
    /// No compute rate for a precision, or a zero bandwidth where data must move.
    pub const NO_COMPUTE: u8 = 2;
    /// Over the power budget.
    pub const POWER: u8 = 3;
    /// Less free memory per device than the floor.
    pub const MEMORY_FLOOR: u8 = 4;
    /// The power limit does not cover the device's static power.
    pub const POWER_CAP: u8 = 5;
    /// The step time, energy or power is not a finite number.
    pub const NON_FINITE: u8 = 6;
    pub const COUNT: usize = 7;
    /// Not a reason: the GPU screen's mark for a point within the f32 margin of a threshold (or
    /// whose figures overflow f32), which the host classifies (and counts) in f64.
    pub const AMBIGUOUS: u8 = 8;

    /// The human name of a point code (the keys of a sweep's `infeasible` counts).
    pub fn name(r: u8) -> &'static str {
        match r {
            OK => "feasible",
            MEMORY => "does not fit in memory",
            NO_COMPUTE => "no compute rate or no bandwidth",
            POWER => "over the power budget",
            MEMORY_FLOOR => "below the memory floor",
            POWER_CAP => "power limit below static power",
            NON_FINITE => "result not a finite number",
            _ => "infeasible",
        }
    }

    /// The stable `reason_code` of a point code.
    pub fn code(r: u8) -> &'static str {
        match r {
            OK => "feasible",
            MEMORY => "memory",
            NO_COMPUTE => "no_compute",
            POWER => "power_budget",
            MEMORY_FLOOR => "memory_floor",
            POWER_CAP => "power_cap",
            NON_FINITE => "non_finite",
            _ => "infeasible",
        }
    }

    /// WGSL constants for the point codes, prepended to the kernel's source.
    pub fn wgsl_constants() -> String {
        [
            ("REASON_OK", OK),
            ("REASON_MEMORY", MEMORY),
            ("REASON_NO_COMPUTE", NO_COMPUTE),
            ("REASON_POWER", POWER),
            ("REASON_MEMORY_FLOOR", MEMORY_FLOOR),
            ("REASON_POWER_CAP", POWER_CAP),
            ("REASON_NON_FINITE", NON_FINITE),
            ("REASON_COUNT", COUNT as u8),
            ("AMBIGUOUS", AMBIGUOUS),
        ]
        .iter()
        .map(|(n, v)| format!("const {n}: u32 = {v}u;\n"))
        .collect()
    }
}

impl Reason {
    /// The stable machine-readable code (`reason_code` in JSON).
    pub fn code(&self) -> &'static str {
        match self {
            Reason::Devices { .. } => "devices",
            Reason::Mapping { .. } => "mapping",
            Reason::Unsupported { .. } => "unsupported",
            Reason::NoFeasibleMapping { .. } => "no_feasible_mapping",
            Reason::Memory { .. } => point::code(point::MEMORY),
            Reason::NoCompute => point::code(point::NO_COMPUTE),
            Reason::PowerBudget => point::code(point::POWER),
            Reason::MemoryFloor => point::code(point::MEMORY_FLOOR),
            Reason::PowerCap { .. } => point::code(point::POWER_CAP),
            Reason::NonFinite => point::code(point::NON_FINITE),
            Reason::Region { .. } => "region",
            Reason::CostBudget { .. } => "cost_budget",
        }
    }

    pub fn mapping(detail: impl Into<String>) -> Reason {
        Reason::Mapping {
            detail: detail.into(),
        }
    }

    pub fn unsupported(detail: impl Into<String>) -> Reason {
        Reason::Unsupported {
            detail: detail.into(),
        }
    }

    /// The reason of an evaluation's point code, with what did not fit: bytes per device, or
    /// for a power limit the device's static power and the limit.
    pub fn of_point(code: u8, needed: f64, available: f64) -> Option<Reason> {
        match code {
            point::OK => None,
            point::MEMORY => Some(Reason::Memory {
                needed,
                available,
                host: false,
            }),
            point::POWER_CAP => Some(Reason::PowerCap {
                needed,
                cap: available,
            }),
            point::POWER => Some(Reason::PowerBudget),
            point::MEMORY_FLOOR => Some(Reason::MemoryFloor),
            point::NON_FINITE => Some(Reason::NonFinite),
            _ => Some(Reason::NoCompute),
        }
    }

    /// The reason without its figures, for counting reasons over many mappings.
    pub fn summary(&self) -> String {
        match self {
            Reason::Memory { .. } => point::name(point::MEMORY).into(),
            Reason::PowerCap { .. } => point::name(point::POWER_CAP).into(),
            _ => self.to_string(),
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Devices {
                requested,
                available,
            } => write!(
                f,
                "{requested} devices requested, the system has {available}"
            ),
            Reason::Mapping { detail } | Reason::Unsupported { detail } => f.write_str(detail),
            Reason::NoFeasibleMapping { tried, most_often } => match most_often {
                Some((r, c)) => write!(
                    f,
                    "no feasible mapping among {tried} tried; most often: {r} ({c} mappings)"
                ),
                None => f.write_str("no mapping to try"),
            },
            Reason::Memory {
                needed,
                available,
                host,
            } => write!(
                f,
                "does not fit in {}memory: needs {} per device, {} available",
                if *host { "host " } else { "" },
                fmt_si(*needed, "B"),
                fmt_si(*available, "B")
            ),
            Reason::NoCompute => f.write_str(
                "the device has no compute rate for the workload's number format (e.g. bf16 work on an int8-only chip)",
            ),
            Reason::PowerBudget => f.write_str(point::name(point::POWER)),
            Reason::MemoryFloor => f.write_str(point::name(point::MEMORY_FLOOR)),
            Reason::CostBudget { detail } => f.write_str(detail),
            Reason::PowerCap { needed, cap } => write!(
                f,
                "the power limit of {} per device does not cover the device's static power of {}",
                fmt_si(*cap, "W"),
                fmt_si(*needed, "W")
            ),
            Reason::NonFinite => f.write_str(
                "the step time or energy is not a finite number: a figure of the system (a bandwidth or rate near zero, say) puts the result beyond what the model can represent",
            ),
            Reason::Region {
                phase,
                what: RegionShortfall::Cores,
                needed,
                available,
            } => write!(
                f,
                "the {phase} region is larger than the wafer: {needed} cores along a side, the mesh has {available}"
            ),
            Reason::Region {
                phase,
                what: RegionShortfall::Memory,
                needed,
                available,
            } => write!(
                f,
                "the {phase} region cannot hold its layers: their weights and KV cache need {}, its cores' SRAM holds {}",
                fmt_si(*needed, "B"),
                fmt_si(*available, "B")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_stable() {
        let all = [
            Reason::Devices {
                requested: 2,
                available: 1,
            },
            Reason::mapping("x"),
            Reason::unsupported("x"),
            Reason::NoFeasibleMapping {
                tried: 0,
                most_often: None,
            },
            Reason::Memory {
                needed: 2.0,
                available: 1.0,
                host: false,
            },
            Reason::NoCompute,
            Reason::PowerBudget,
            Reason::MemoryFloor,
            Reason::CostBudget { detail: "x".into() },
            Reason::PowerCap {
                needed: 2.0,
                cap: 1.0,
            },
            Reason::NonFinite,
            Reason::Region {
                phase: "decode".into(),
                what: RegionShortfall::Memory,
                needed: 2.0,
                available: 1.0,
            },
        ];
        let codes: Vec<&str> = all.iter().map(Reason::code).collect();
        assert_eq!(
            codes,
            [
                "devices",
                "mapping",
                "unsupported",
                "no_feasible_mapping",
                "memory",
                "no_compute",
                "power_budget",
                "memory_floor",
                "cost_budget",
                "power_cap",
                "non_finite",
                "region"
            ]
        );
        for c in 0..point::COUNT as u8 {
            let r = Reason::of_point(c, 1.0, 0.0);
            assert_eq!(r.map(|r| r.code()).unwrap_or("feasible"), point::code(c));
        }
    }
}
