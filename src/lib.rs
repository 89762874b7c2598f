//! tessera: model wafer-scale and multi-chip AI systems and tell which layout trains or serves a
//! model faster and on less power, with numbers that can be checked.
//!
//! Data flows one way: file text → [`spec`] (file-shaped) → [`model`] (validated, SI) → engine →
//! report. The library does no I/O; the `tessera` binary reads files and prints.

pub mod diag;
pub mod model;
pub mod spec;
pub mod units;
pub mod report;
pub mod check;
pub mod templates;
