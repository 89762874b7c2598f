//! File-shaped types of validation files: a [`CaseSpec`] is one published result tessera must
//! reproduce (system, workload and mapping as published, the metric, the value, its source and a
//! tolerance set from the measurement's own uncertainty); a [`ClaimSpec`] is a published claim the
//! audit checks against what the hardware physically allows.

use super::format::Q;
use super::mapping::MappingSpec;
use serde::Deserialize;
use std::collections::BTreeMap;

/// One published result to reproduce.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename = "Case")]
pub struct CaseSpec {
    pub version: u32,
    /// Unique id: lower-case letters, digits and `-`. Fitted citations in architecture files name
    /// the cases they were fitted on by this id.
    pub id: String,
    /// Hardware family the case belongs to, for the summary (e.g. "NVIDIA Hopper").
    pub family: String,
    /// `Calibration` (its figures were used to fit a `fitted-…` figure; reported, not gated) or
    /// `Check` (never fitted on; the gate). Required: the loader says so, located, when missing.
    #[serde(default)]
    pub role: Option<RoleSpec>,
    #[serde(default)]
    pub description: String,
    /// Citations by key; `source` and quantities name one with `@key`.
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    /// Where the published value comes from (a key of `sources`).
    pub source: String,
    /// The architecture file, relative to this file.
    pub system: String,
    /// The workload file, relative to this file.
    pub workload: String,
    /// Devices the published run used (default: the whole system).
    #[serde(default)]
    pub devices: Option<u64>,
    /// The mapping as published; `Auto` where the source does not say.
    #[serde(default)]
    pub mapping: CaseMapping,
    /// Conditions of the published run that the workload file leaves open or sets differently
    /// (the run's global batch and samples to converge, its evaluation schedule).
    #[serde(default)]
    pub run: Option<RunConditions>,
    /// Serving cases: the latency target the published run met (MLPerf Inference's server
    /// scenario, `"ttft<=2s,tpot<=200ms"`; also `user>=50/s`). The mapping search (`mapping:
    /// Auto`) then returns the highest throughput that meets it.
    #[serde(default)]
    pub slo: Option<String>,
    /// Serving cases: requests in flight over the system, `"64"`, or `"max"` (as many as the
    /// KV cache holds: MLPerf's offline scenario; with `slo`, as many as still meet it, the
    /// server scenario). Default: the workload's batch on each model instance.
    #[serde(default)]
    pub concurrency: Option<String>,
    /// Settings of the published run that differ from the files, by the `--set` path vocabulary
    /// (`tessera sweep --list-paths`): the submitter's device power limit (`{"device.tdp": "500
    /// W"}`, a cap the device throttles to; its energy per FLOP still follows the rated TDP), a
    /// mapping field of a given mapping, a workload figure. Each value's source belongs in
    /// `sources`.
    #[serde(default)]
    pub set: Option<BTreeMap<String, String>>,
    pub metric: MetricSpec,
    /// The published value with its unit (`"20.807 min"`, `"51.4 %"`, `"6.11 MJ"`,
    /// `"28356 tokens/s"`).
    pub published: Q,
    /// Allowed |predicted − published| / published, e.g. `"10 %"`.
    pub tolerance: Q,
    /// Why this tolerance: the measurement's own uncertainty and what the model leaves out, set
    /// before looking at the result.
    pub tolerance_basis: String,
}

/// What a case is for: fitting figures, or checking the model.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub enum RoleSpec {
    /// Its published figures were used to fit a `fitted-…` figure (or may be, by
    /// `tessera calibrate`); reported by `validate`, not gated.
    Calibration,
    /// Never used to fit anything: the gate measures the model on these.
    Check,
}

/// How a case chooses its mapping.
#[derive(Debug, Clone, Default, Deserialize)]
pub enum CaseMapping {
    /// The mapping the workload file publishes (else `Auto`).
    #[default]
    Published,
    /// The best mapping `--mapping auto` finds (minimum step time).
    Auto,
    /// Written out here.
    Given(Box<MappingSpec>),
    /// A mapping file, relative to this file.
    Use(String),
}

/// Conditions of the published run.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConditions {
    /// The run's global batch (MLPerf submissions choose it per scale).
    #[serde(default)]
    pub global_batch: Option<u64>,
    /// How much the run trained: the run's samples (or tokens) to converge.
    #[serde(default)]
    pub target: Option<RunTarget>,
    /// Format of the published run's GEMMs, where its recipe differs from the workload file's
    /// (MaxText's `quantization=int8` trains with `int8`).
    #[serde(default)]
    pub compute: Option<String>,
    /// Format the published run stores activations in, where its recipe differs from the
    /// workload file's (NVIDIA's `FP8_ACT=1` keeps them in `fp8`).
    #[serde(default)]
    pub activations: Option<String>,
    /// How the published run scales its low-precision GEMMs' operands, where its recipe differs
    /// from the workload file's (Megatron-Bridge's FP8-CS: `Current`; MXFP8: `Mxfp8`).
    #[serde(default)]
    pub scaling: Option<crate::vocab::Scaling>,
    /// Quality evaluations inside the timed run (forward passes over the evaluation set).
    #[serde(default)]
    pub evaluation: Option<EvaluationSpec>,
    /// Timed work outside training steps and evaluations (data-loader warm-up, graph capture,
    /// the first slow steps), as a time.
    #[serde(default)]
    pub startup: Option<Q>,
    /// The software stack the run executed on, a `Software` file relative to this file: its
    /// per-step costs join every training step.
    #[serde(default)]
    pub software: Option<String>,
    /// Power draw counted by the published power or energy figure: `It` (at the wall of the nodes
    /// and switches, as MLPerf Power measures), `Devices` (the accelerators alone) or `Facility`
    /// (with the PUE). Default `It`.
    #[serde(default)]
    pub power_boundary: Option<PowerBoundary>,
    /// The rate the published power was measured at (`"42460 images/s @source"`), for a power
    /// figure measured under a known load: the case's power is evaluated at that rate (the
    /// devices' work per unit as the model lowers it, over the time the rate gives, and their
    /// static power throughout), not at the model's own rate. Only with `metric: AveragePower`.
    #[serde(default)]
    pub at_rate: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
pub enum RunTarget {
    Tokens(f64),
    Samples(f64),
    Steps(f64),
}

pub use crate::vocab::PowerBoundary;

/// An evaluation schedule: after `start` training samples (default `every`) and then every
/// `every` samples, `samples` evaluation samples run forward only.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvaluationSpec {
    pub every: f64,
    pub samples: f64,
    #[serde(default)]
    pub start: Option<f64>,
    #[serde(default)]
    pub source: Option<String>,
}

/// What the case compares.
#[derive(Debug, Clone, Deserialize)]
pub enum MetricSpec {
    /// Wall-clock time to the training target (with the run's evaluations and start-up).
    TimeToTrain,
    /// Time of one optimizer step (one iteration).
    StepTime,
    /// Work units per second over all devices (tokens/s, samples/s).
    Throughput,
    /// Model FLOPs utilisation.
    Mfu,
    /// Per-device throughput at `devices` over per-device throughput at `baseline` devices
    /// (weak scaling: the per-device batch is kept, as IBM and Facebook reported it).
    ScalingEfficiency(ScalingSpec),
    /// Average power over the run.
    AveragePower,
    /// Energy of the whole run.
    Energy,
    /// Operational carbon of the whole run (kg CO2e) as model cards count it: the rated power
    /// of what the run deploys at the case's boundary (`Devices`: each GPU at its TDP) over the
    /// run's time, at the system's grid intensity (`cost.grid_intensity`, set per case).
    RatedCarbon,
    /// Goodput: failure-free training time over expected wall time with failures, checkpoints
    /// and restarts (`engine::goodput`; published as an effective-training-time ratio).
    Goodput,
    /// The job's mean time between unexpected interruptions (a published interruption count
    /// over a run's length).
    Mtbf,
    /// What the whole run costs at a published rental price per device-hour (`cost.rental`,
    /// the system's or set per case): devices × the run's modelled time × the price, as a report
    /// that states its GPU-hours and a price per GPU-hour counts it.
    RentedCost,
    /// The most memory one device holds at the peak of a training step (`"61.2 GiB"`): the
    /// estimate's `memory_per_device_bytes` (model state and working data on the device, not
    /// what is offloaded to host memory), against a framework's measured peak
    /// (`torch.cuda.max_memory_allocated` and the like).
    PeakMemory,
    /// The model states one device holds (`"31.4 GB"`): weights, gradients and optimizer state,
    /// ZeRO-3's gathered layers included, no activations; what the ZeRO paper's tables count.
    StateMemory,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingSpec {
    pub baseline: u64,
}

/// A published claim to audit against what the hardware allows.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename = "Claim")]
pub struct ClaimSpec {
    pub version: u32,
    pub id: String,
    /// The claim as published, in words.
    pub statement: String,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    /// Where the claim was made.
    pub source: String,
    /// The architecture file of the hardware the claim names.
    pub system: String,
    /// Devices the claim names.
    pub devices: u64,
    /// Wall-clock time the claim states or its context implies.
    #[serde(default)]
    pub duration: Option<Q>,
    /// Energy claimed.
    #[serde(default)]
    pub energy: Option<Q>,
    /// Average power claimed.
    #[serde(default)]
    pub power: Option<Q>,
    /// Throughput claimed, with the workload file that defines one unit of work.
    #[serde(default)]
    pub throughput: Option<ClaimedThroughput>,
    /// Scaling efficiency claimed.
    #[serde(default)]
    pub scaling_efficiency: Option<Q>,
    /// Model FLOPs utilisation claimed.
    #[serde(default)]
    pub mfu: Option<Q>,
    /// The verdict the audit must reach (the test suite checks it).
    pub expect: Verdict,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimedThroughput {
    /// Units per second (`"28356 tokens/s"`).
    pub value: Q,
    /// The workload whose unit (token, sample) is counted, relative to the claim file.
    pub workload: String,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum Verdict {
    Plausible,
    Impossible,
}
