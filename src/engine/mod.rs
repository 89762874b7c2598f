//! The analytic engine: lower a workload under a mapping onto a system into a flat cost program,
//! evaluate it (roofline per operator, collectives over the topology, pipeline bubble, memory
//! feasibility, power and energy), and search mappings.
//!
//! Every command reaches an outcome the same way: [`prepare`] (choose the mapping, lower, build
//! the machine; or a typed [`reason::Reason`] why not), then evaluate ([`finish`] for the full
//! estimate, `cpu::eval` or a sweep backend for many machines).
//!
//! This file declares the steps and re-exports what callers name; the steps import one another's
//! files (and the leaf `common.rs`), never this one, so no two files import each other
//! (`tests/it/import_graph`).

pub mod budget;
pub mod candidates;
pub mod coeffs;
mod common;
pub mod cost;
pub mod cpu;
pub mod curve;
mod estimate;
pub mod goodput;
pub mod lower;
pub mod machine;
pub mod paths;
mod prepare;
pub mod program;
mod rated;
pub mod reason;
pub mod running;
pub mod search;
pub mod serve;
pub mod table;
pub mod tiling;

pub use common::{default_micro_batch, unit_of, MappingChoice, Objective};
pub use estimate::{finish, Estimate, MappingReport};
pub use prepare::{estimate, outcome, prepare, prepare_mapping, Infeasible, Prepared};
