//! `tessera check FILE...`: every error of every file at once; exit 1 if any.

use super::{report, DiskFs, Exit};
use std::io::Write;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Files to check (architectures, parts, workloads, mappings, validation cases, sweeps).
    #[arg(required = true)]
    pub files: Vec<String>,
    /// Treat warnings (figures without a source) as errors.
    #[arg(long)]
    pub deny_warnings: bool,
}

pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let mut failed = false;
    let mut warned = false;
    for f in &a.files {
        let (files, diags) = tessera::check::check_file(f, &DiskFs);
        warned |= !diags.is_empty();
        if report(&diags, &files) {
            failed = true;
        } else {
            writeln!(out, "{f}: ok")?;
        }
    }
    Ok(if failed || (a.deny_warnings && warned) {
        Exit::Failed
    } else {
        Exit::Ok
    })
}
