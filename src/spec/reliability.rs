//! File-shaped types of a system's reliability: the unexpected interruptions each class of
//! component causes, as a published study observed them (so many interruptions among so many
//! components over so long), and what a restart costs; and the storage a checkpoint crosses.
//! Kept apart from `arch.rs` so that goodput's files evolve without touching the hardware's.
//!
//! A system names its reliability inline (`reliability: Reliability(...)`) or from a shared
//! file (`reliability: Use("parts/reliability-llama3-h100.ron")`): one study's rates serve every
//! system built of the same parts.

use super::format::Q;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Inline reliability figures, or a file of them.
#[derive(Debug, Clone, Deserialize)]
pub enum ReliabilityRef {
    Use(String),
    Reliability(ReliabilitySpec),
}

/// Failure rates by component class and the cost of a restart.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename = "Reliability")]
pub struct ReliabilitySpec {
    #[serde(default)]
    pub version: Option<u32>,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    #[serde(default)]
    pub source: Option<String>,
    /// Interruptions of a synchronous training job, by the class of component that caused them.
    pub failures: Vec<FailureSpec>,
    /// Time from an interruption to training again, before the checkpoint is read back
    /// (detection, draining and rescheduling, process start, communicator set-up): `"10 min"`.
    pub restart: Q,
}

/// What a failure rate is counted per: it scales with the count of that component in the job.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum Per {
    /// Per accelerator (the GPU, its HBM, its software rank).
    Device,
    /// Per node (host, NICs, power, local storage, the node's share of the network).
    Node,
}

/// One component class: `count` interruptions observed among `population` components over
/// `over` (Llama 3: 148 from faulty GPUs among 16,384 H100 over 54 days).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureSpec {
    pub class: String,
    pub per: Per,
    /// Interruptions observed (a plain number).
    pub count: Q,
    /// Components of that kind observed (a plain number).
    pub population: Q,
    /// How long they were observed.
    pub over: Q,
    #[serde(default)]
    pub source: Option<String>,
}

/// The storage checkpoints are written to and read from (a parallel file system, an object
/// store): bandwidths of the whole store as the job sees it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSpec {
    pub name: String,
    /// Aggregate bandwidth a checkpoint is written at.
    pub write_bandwidth: Q,
    /// Aggregate bandwidth it is read back at after a restart (the write bandwidth if absent).
    #[serde(default)]
    pub read_bandwidth: Option<Q>,
    #[serde(default)]
    pub source: Option<String>,
}
