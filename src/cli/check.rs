//! `tessera check FILE...`: every error of every file at once; exit 1 if any. Systems and devices
//! are also checked against the validation cases their fitted figures name (a fit copied to another
//! device is warned about).

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

/// The device every validation case ran on, by id: the cases under the first `validation/`
/// folder found above the working directory, else above the checked files; empty when there is
/// none.
// Looks for the project's validation folder.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
fn case_devices(files: &[String]) -> tessera::check::CaseDevices {
    let mut map = tessera::check::CaseDevices::new();
    let cwd = std::env::current_dir().unwrap_or_default();
    let dir = std::iter::once(cwd)
        .chain(files.iter().filter_map(|f| std::fs::canonicalize(f).ok()))
        .find_map(|p| {
            p.ancestors()
                .map(|a| a.join("validation"))
                .find(|v| v.is_dir())
        });
    let Some(dir) = dir else { return map };
    let dir = dir.to_string_lossy().into_owned();
    let Ok(cases) = super::validate::collect(&[dir]) else {
        return map;
    };
    for f in cases.iter().filter(|f| super::validate::is_case(f)) {
        if let Some(c) = tessera::validate::load_case(f, &DiskFs).value {
            map.insert(c.id, c.system.device.name);
        }
    }
    map
}

pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let mut failed = false;
    let mut warned = false;
    let cases = case_devices(&a.files);
    for f in &a.files {
        let (files, diags) = tessera::check::check_file_with(f, &DiskFs, &cases);
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
