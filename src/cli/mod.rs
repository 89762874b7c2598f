//! Argument structs and the glue from each subcommand to the library. Only this module prints:
//! data on stdout, diagnostics and progress on stderr.

mod audit;
mod calibrate;
mod check;
mod common;
mod compare;
mod estimate;
mod new;
mod plot;
mod roofline;
mod scale;
mod serve_curve;
mod show;
mod sweep;
mod validate;

use clap::{Parser, Subcommand, ValueEnum};
use std::io::Write;
use tessera::diag::{Diagnostic, Severity};
use tessera::spec::{Files, Fs};

#[derive(Parser, Debug)]
#[command(
    name = "tessera",
    version,
    about = "Model wafer-scale and multi-chip AI systems and compare them honestly"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check architecture, workload, mapping and validation files; report every error at once.
    Check(check::Args),
    /// Show what a system adds up to.
    Show(show::Args),
    /// Write a commented starter architecture file that passes `check`.
    New(new::Args),
    /// Estimate a workload on a system: step time, throughput, MFU, power, energy, bottleneck.
    Estimate(estimate::Args),
    /// Sweep a design space on all CPU cores or the GPU: best points, Pareto front, every point.
    Sweep(Box<sweep::Args>),
    /// Compare systems side by side on one workload, with ratios to the first.
    Compare(compare::Args),
    /// Throughput and scaling efficiency over device counts.
    Scale(scale::Args),
    /// Serving's throughput-latency curve: tokens/s per user against the system's tokens/s and
    /// energy per token as the requests in flight grow, for each system.
    ServeCurve(serve_curve::Args),
    /// The device's hierarchical roofline with every operator of a workload placed on it.
    Roofline(roofline::Args),
    /// Run the validation cases against published results; exit 1 when one is outside tolerance.
    Validate(validate::Args),
    /// Check published claims against what the hardware physically allows.
    Audit(audit::Args),
    /// Fit named figures to calibration cases by least squares; write a calibrated part file.
    Calibrate(calibrate::Args),
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Csv,
    Markdown,
}

/// How a subcommand ended.
pub enum Exit {
    Ok,
    /// Invalid input or a failed gate.
    Failed,
}

pub fn run(cli: Cli) -> Exit {
    let out = &mut std::io::stdout().lock();
    let res = match cli.command {
        Command::Check(a) => check::run(a, out),
        Command::Show(a) => show::run(a, out),
        Command::New(a) => new::run(a, out),
        Command::Estimate(a) => estimate::run(a, out),
        Command::Sweep(a) => sweep::run(*a, out),
        Command::Compare(a) => compare::run(a, out),
        Command::Scale(a) => scale::run(a, out),
        Command::ServeCurve(a) => serve_curve::run(a, out),
        Command::Roofline(a) => roofline::run(a, out),
        Command::Validate(a) => validate::run(a, out),
        Command::Audit(a) => audit::run(a, out),
        Command::Calibrate(a) => calibrate::run(a, out),
    };
    match res {
        Ok(e) => e,
        Err(e) => {
            // A broken pipe (`| head`) is not an error worth a message.
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                let _ = writeln!(std::io::stderr(), "error: {e}");
                return Exit::Failed;
            }
            Exit::Ok
        }
    }
}

/// Reads files from disk for the library.
pub struct DiskFs;

// The one place the files the library loads are read from disk.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
impl Fs for DiskFs {
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        std::fs::read(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            _ => e.to_string(),
        })
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
