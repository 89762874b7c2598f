//! The command tree (clap's [`Cli`] and [`Command`]) and the dispatch from a parsed command to its
//! subcommand's glue. Apart from `cli/mod.rs`, whose shared plumbing (the output format, `Exit`,
//! reading files and reporting their diagnostics) every subcommand uses, so that no subcommand
//! imports a file that imports it.

use super::{
    audit, calibrate, check, compare, estimate, list, new, roofline, scale, serve_curve, show,
    sweep, validate, Exit,
};
use clap::{Parser, Subcommand};
use std::io::Write;

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
    /// The shipped systems, parts, software stacks, sweeps and workloads, one line each.
    List(list::Args),
    /// Show what a system adds up to.
    Show(show::Args),
    /// Write a commented starter architecture file that passes `check`.
    New(new::Args),
    /// Estimate a workload on a system: step time, throughput, MFU, power, energy, bottleneck.
    ///
    /// Serving load (one rule for estimate, compare, scale and serve-curve): the requests in
    /// flight `--concurrency` names (a latency target alone: the workload's `batch` over the
    /// whole system); else the workload's `batch` on each model instance of the mapping run.
    Estimate(estimate::Args),
    /// Sweep a design space on all CPU cores or the GPU: best points, Pareto front, every point.
    Sweep(Box<sweep::Args>),
    /// Compare systems side by side on one workload, with ratios to the first.
    ///
    /// Serving load (one rule for estimate, compare, scale and serve-curve): the requests in
    /// flight `--concurrency` names (a latency target alone: the workload's `batch` over the
    /// whole system); else the workload's `batch` on each model instance of the mapping run.
    /// `compare` runs that rule on the first system, as `estimate` does, and holds every system
    /// at the requests in flight it gives (each on the fewest devices that serve them).
    Compare(compare::Args),
    /// Throughput and scaling efficiency over device counts.
    ///
    /// Serving load (one rule for estimate, compare, scale and serve-curve): the requests in
    /// flight `--concurrency` names (a latency target alone: the workload's `batch` over the
    /// whole system); else the workload's `batch` on each model instance of the mapping run.
    /// `scale` applies it at each device count, as `estimate --devices N` does.
    Scale(scale::Args),
    /// Serving's throughput-latency curve: tokens/s per user against the system's tokens/s and
    /// energy per token as the requests in flight grow, for each system.
    ///
    /// Serving load (one rule for estimate, compare, scale and serve-curve): here the requests in
    /// flight over the system are the curve's axis, 1, 2, 4, … (`--max-concurrency`), the
    /// workload's `batch` unused.
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

pub fn run(cli: Cli) -> Exit {
    let out = &mut std::io::stdout().lock();
    let res = match cli.command {
        Command::Check(a) => check::run(a, out),
        Command::List(a) => list::run(a, out),
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
