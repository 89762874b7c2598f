//! A software stack's fixed costs, apart from the system types: the execution modes name the
//! vendor's stack and the system carries the one a run executes on, so both read it from here.

use serde::Serialize;

/// A software stack's fixed costs (SI).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Software {
    pub name: String,
    /// Seconds per optimizer step outside the modelled work, the devices at static power.
    pub step_overhead: f64,
    /// Seconds of software per 32-bit element a core of a streamed chain on a wafer's mesh relays
    /// (the machine's `mesh_relay_time`).
    pub mesh_relay_time: f64,
    /// Seconds of software each stage of a pipeline adds per micro-batch it passes on (the
    /// machine's `pipeline_stage_time`).
    pub pipeline_stage_time: f64,
    /// Bytes of each device's main memory the stack keeps for itself (the run's data gets the
    /// rest).
    pub memory_reserve: f64,
    /// The attention kernel it runs, by the name the device's attention tables give it
    /// (`Efficiency::attention`); `None`: the attention core runs at the dense-GEMM efficiency.
    pub attention_kernel: Option<String>,
    /// How it computes the loss over the vocabulary.
    pub loss_kernel: crate::vocab::LossKernel,
    /// Citations of its fitted figures (they name the cases they were fitted on).
    pub fitted: Vec<String>,
}

impl Software {
    /// Its figures that are not zero, as JSON keys with their units (`step_overhead_s`,
    /// `mesh_relay_time_s`, `pipeline_stage_time_s`, `memory_reserve_bytes`) and SI values: what
    /// `estimate` and `compare` print beside the stack's name.
    pub fn figures(&self) -> std::collections::BTreeMap<String, f64> {
        [
            ("step_overhead_s", self.step_overhead),
            ("mesh_relay_time_s", self.mesh_relay_time),
            ("pipeline_stage_time_s", self.pipeline_stage_time),
            ("memory_reserve_bytes", self.memory_reserve),
        ]
        .into_iter()
        .filter(|(_, v)| *v != 0.0)
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}
