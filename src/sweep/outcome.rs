//! The figures of one evaluated design point, as every sweep step passes them on: the backends
//! produce them, the metrics read them, the accumulators and reports keep them. A leaf, so that
//! those steps share it without importing `sweep/mod.rs`, which re-exports them.

use crate::engine::program::{Eval, Program, Tier};
use crate::engine::reason::point as reason;
use crate::engine::table::Machine;

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
            reason::OK | reason::MEMORY | reason::POWER_CAP | reason::NON_FINITE => e.reason_code,
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
