//! Loading files into their file-shaped types, with located diagnostics.
//!
//! The library does no I/O: callers hand in a [`Fs`] that reads a path. Loading keeps every source
//! text it read in [`Files`] so later errors (from lowering) can point at `file:line:col`.

pub mod arch;
pub mod cost;
mod describe;
mod format;
mod load;
pub mod mapping;
pub mod reliability;
mod resolve;
pub mod sweep;
pub mod validation;
pub mod workload;

pub use describe::user_name;
pub use format::{FORMAT_VERSION, Q};
pub use load::{
    admit, decode, join, lossy_text, parse_ron, parse_ron_all, Files, Fs, Loaded, Located,
    MAX_FILE_BYTES,
};
pub use resolve::{PartRef, Resolver};
