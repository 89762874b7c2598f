//! Design-space sweeps: many machine vectors (and device counts, mappings) evaluated on one flat
//! cost program each, on every CPU core (rayon) or on the GPU (wgpu), with the same answers.
//!
//! - [`plan`] resolves a sweep file or `--vary` options into programs and a machine-vector
//!   [`space::Space`]; [`paths`] maps parameter paths onto machine fields; [`expr`] parses values.
//! - Points are generated from their index alone ([`space`]), so a sweep streams in chunks in
//!   bounded memory, and `--shard I/N` is a contiguous slice of indices.
//! - [`accumulate`] keeps a top-K heap and an incremental Pareto front; both merge exactly, so
//!   shards and batches give the answer one pass would.
//! - [`run`] drives the backends; the GPU backend screens in f32 and re-evaluates its candidates
//!   with `cpu::eval` in f64, so both backends report the same best points and front.
//! - [`report`] holds the summary (what `sweep merge` joins) and the per-point CSV / JSON Lines;
//!   `arrow` (feature `arrow`) the per-point Arrow IPC and Parquet files.

pub mod accumulate;
#[cfg(feature = "arrow")]
pub mod arrow;
pub mod expr;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod metric;
pub mod overrides;
pub mod paths;
pub mod plan;
pub mod report;
pub mod run;
pub mod set;
pub mod space;

pub use metric::Metric;
pub use plan::Plan;
pub use report::Summary;
pub use run::{run, Backend, Options, Progress};

use crate::engine::program::{Eval, Program, Tier};
use crate::engine::table::Machine;

/// Why a point is not feasible (0 = feasible): the engine's point codes.
pub use crate::engine::reason::point as reason;

/// The figures of one evaluated design point (SI units).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    pub index: u64,
    pub reason: u8,
    pub step_time: f64,
    pub energy_per_step: f64,
    /// Average facility power of the devices used (W).
    pub power: f64,
    pub throughput: f64,
    pub mfu: f64,
    /// Bytes free per device where the working set lives (negative when it does not fit).
    pub headroom: f64,
    /// Energy per unit of work (J per token or sample).
    pub energy_per_unit: f64,
}

impl Outcome {
    pub fn feasible(&self) -> bool {
        self.reason == reason::OK
    }

    /// From a `cpu::eval` result of program `p` on machine `m`.
    #[inline]
    pub fn from_eval(index: u64, p: &Program, m: &Machine, e: &Eval) -> Outcome {
        // the least headroom over the stages (each places its own data)
        let headroom = if e.reason_code == reason::MEMORY {
            e.available_bytes - e.needed_bytes
        } else {
            use crate::engine::cpu::{place, usable_capacity};
            // what the working tier has left: beside the state, or alone with the state in a
            // weight store
            let room = |f: &crate::engine::program::Footprint| match place(f, m) {
                Some((Tier::External, at)) => usable_capacity(at, m) - f.working(),
                Some((_, at)) => usable_capacity(at, m) - f.total(),
                None => usable_capacity(Tier::Hbm, m) - f.total(),
            };
            if p.stages.is_empty() {
                room(&p.footprint)
            } else {
                p.stages
                    .iter()
                    .map(|s| room(&s.footprint))
                    .fold(f64::INFINITY, f64::min)
            }
        };
        let reason = match e.reason_code {
            reason::OK | reason::MEMORY | reason::POWER_CAP => e.reason_code,
            _ => reason::NO_COMPUTE,
        };
        Outcome {
            index,
            reason,
            step_time: e.step_time,
            energy_per_step: e.energy_per_step,
            power: e.average_power,
            throughput: e.throughput,
            mfu: e.mfu,
            headroom,
            energy_per_unit: e.energy_per_step / p.units_per_step,
        }
    }
}
