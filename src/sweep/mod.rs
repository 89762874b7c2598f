//! Design-space sweeps: many machine vectors (and device counts, mappings) evaluated on one flat
//! cost program each, on every CPU core (rayon) or on the GPU (wgpu), with the same answers.
//!
//! - [`plan`] resolves a sweep file or `--vary` options into programs and a machine-vector
//!   [`space::Space`]; [`paths`] (the engine's path vocabulary, re-exported) maps parameter paths onto machine fields; [`expr`] parses values.
//! - Points are generated from their index alone ([`space`]), so a sweep streams in chunks in
//!   bounded memory, and `--shard I/N` is a contiguous slice of indices.
//! - [`accumulate`] keeps a top-K heap and an incremental Pareto front; both merge exactly, so
//!   shards and batches give the answer one pass would.
//! - [`run`] drives the backends; the GPU backend screens in f32 and re-evaluates its candidates
//!   with `cpu::eval` in f64, so both backends report the same best points and front.
//! - [`merge`] verifies and joins shard summaries; [`report`] holds the summary (what `sweep merge` joins) and the per-point CSV / JSON Lines;
//!   `arrow` (feature `arrow`) the per-point Arrow IPC and Parquet files.

pub mod accumulate;
#[cfg(feature = "arrow")]
pub mod arrow;
pub mod expr;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod merge;
pub mod metric;
mod outcome;
pub mod overrides;
/// The path vocabulary lives in the engine (`engine::paths`), shared by sweeps, `--set`, calibrate
/// and Python; `sweep::paths` stays its name for existing callers.
pub use crate::engine::paths;
pub mod plan;
pub mod report;
pub mod run;
pub mod set;
pub mod space;
pub mod values;

pub use metric::Metric;
pub use outcome::Outcome;
pub use plan::Plan;
pub use report::Summary;
pub use run::{run, Backend, Options, Progress};

/// Why a point is not feasible (0 = feasible): the engine's point codes.
pub use crate::engine::reason::point as reason;
