//! tessera: model wafer-scale and multi-chip AI systems and tell which layout trains or serves a
//! model faster and on less power, with numbers that can be checked.
//!
//! Data flows one way: file text → [`spec`] (file-shaped) → [`model`] (validated, SI) → engine →
//! report. The library does no I/O; the `tessera` binary reads files and prints.

// Library code returns errors rather than panicking and leaves no dbg! behind (tests may unwrap:
// clippy.toml allows it there); clippy.toml also bans std::fs, as the library does no I/O.
#![warn(clippy::dbg_macro, clippy::unwrap_used, clippy::expect_used)]

pub mod check;
pub mod choice;
pub mod diag;
pub mod engine;
pub mod model;
pub mod plot;
pub mod report;
pub mod request;
pub mod spec;
pub mod sweep;
pub mod templates;
pub mod units;
pub mod validate;
pub mod vocab;
