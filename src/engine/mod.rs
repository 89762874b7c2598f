//! The analytic engine: lower a workload under a mapping onto a system into a flat cost program,
//! evaluate it (roofline per operator, collectives over the topology, pipeline bubble, memory
//! feasibility, power and energy), and search mappings.
//!
//! Every command reaches an outcome the same way: [`prepare`] (choose the mapping, lower, build
//! the machine; or a typed [`reason::Reason`] why not), then evaluate ([`finish`] for the full
//! estimate, `cpu::eval` or a sweep backend for many machines).

pub mod budget;
pub mod coeffs;
pub mod cpu;
mod estimate;
pub mod lower;
pub mod machine;
mod prepare;
pub mod program;
pub mod reason;
pub mod search;
pub mod serve;
pub mod table;
pub mod tiling;

pub use estimate::{finish, Estimate, MappingReport};
pub use prepare::{estimate, outcome, prepare, prepare_mapping, Infeasible, Prepared};

use crate::model::mapping::MappingPlan;
use crate::model::workload::{Model, Task, Workload};
use serde::Serialize;

/// How the mapping is chosen.
#[derive(Debug, Clone)]
// one per request, never in bulk: the plan's size does not matter
#[allow(clippy::large_enum_variant)]
pub enum MappingChoice {
    /// As written (a mapping file, or the workload's published mapping).
    Given(MappingPlan),
    /// Search every legal mapping for the best by `objective`.
    Auto(Objective),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// Shortest step (highest throughput).
    Time,
    /// Least energy per unit of work.
    Energy,
}

/// The throughput unit a workload reports in.
pub fn unit_of(w: &Workload) -> &'static str {
    match (&w.model, &w.task) {
        (Model::Transformer(_), _) => "tokens",
        _ => "samples",
    }
}

/// The micro-batch a mapping without one uses.
pub fn default_micro_batch(w: &Workload) -> u64 {
    match (&w.model, &w.task) {
        (Model::Cnn(_), Task::Training(t)) => t.global_batch,
        // requests per micro-batch: chosen by lowering from the pipeline depth
        (_, Task::Inference(_)) => 0,
        _ => 1,
    }
}
