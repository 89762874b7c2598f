//! Argument structs and the glue from each subcommand to the library. Only this module prints:
//! data on stdout, diagnostics and progress on stderr.
//!
//! This file holds what every subcommand shares; [`command`] holds the command tree and the
//! dispatch to each subcommand, so that the subcommands import this file and nothing imports
//! them back (`tests/it/import_graph/`).

mod audit;
mod calibrate;
mod check;
pub mod command;
mod common;
mod compare;
mod compare_table;
mod estimate;
mod list;
mod new;
pub mod output;
mod plot;
mod roofline;
mod scale;
mod serve_curve;
mod show;
mod sweep;
mod sweep_print;
mod validate;

use clap::ValueEnum;
use std::io::Write;
use tessera::diag::{Diagnostic, Severity};
use tessera::spec::{Files, Fs};

/// `--format`: every command that writes a report takes it, and hands it to the one renderer
/// ([`tessera::report::render::Rendered::write`]).
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Csv,
    Markdown,
}

impl From<Format> for tessera::report::render::Format {
    fn from(f: Format) -> Self {
        use tessera::report::render::Format as To;
        match f {
            Format::Table => To::Table,
            Format::Json => To::Json,
            Format::Csv => To::Csv,
            Format::Markdown => To::Markdown,
        }
    }
}

/// How a subcommand ended.
pub enum Exit {
    Ok,
    /// Invalid input or a failed gate.
    Failed,
    /// Arguments that do not make a command (exit 2, as clap's own usage errors).
    Usage,
    /// Stopped by this signal (SIGINT, SIGTERM): exit 128 + its number, as a shell reports it.
    Signal(i32),
}

/// Reads files from disk for the library.
pub struct DiskFs;

// The one place the files the library loads are read from disk (through `output::read_input`).
impl Fs for DiskFs {
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        output::read_input(path)
    }
}

/// Print diagnostics to stderr, with source snippets. Returns true if any is an error.
pub fn report(diags: &[Diagnostic], files: &Files) -> bool {
    let mut err = std::io::stderr().lock();
    let mut sorted: Vec<&Diagnostic> = diags.iter().collect();
    sorted.sort_by(|a, b| (&a.file, a.pos, a.severity).cmp(&(&b.file, b.pos, b.severity)));
    for d in sorted {
        let _ = write!(err, "{}", d.render(files.text_of(&d.file)));
    }
    diags.iter().any(|d| d.severity == Severity::Error)
}

/// Print diagnostics and turn them into a failure when there are errors.
pub fn fail_on_errors(diags: &[Diagnostic], files: &Files) -> Result<(), Exit> {
    if report(diags, files) {
        Err(Exit::Failed)
    } else {
        Ok(())
    }
}
