//! What the engine's steps share: how the mapping is chosen ([`MappingChoice`], by an
//! [`Objective`] when searched for) and two facts of a workload every step asks (its throughput
//! unit, its default micro-batch). A leaf, so that preparing, searching, serving and estimating
//! use them without importing `engine/mod.rs`, which re-exports those steps.

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

impl crate::choice::Choice for Objective {
    const ALL: &'static [(&'static str, Self, &'static str)] = &[
        ("time", Self::Time, "Shortest step (highest throughput)"),
        ("energy", Self::Energy, "Least energy per unit of work"),
    ];
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

#[cfg(test)]
mod tests {
    use super::Objective;
    use crate::choice::Choice;

    #[test]
    fn objective_names_round_trip() {
        for (n, v, _) in Objective::ALL {
            assert_eq!(Objective::parse(n), Some(*v));
            assert_eq!(v.name(), *n);
        }
        assert_eq!(Objective::parse("speed"), None);
    }
}
