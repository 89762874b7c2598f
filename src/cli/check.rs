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

/// The shipped device parts (`architectures/parts/` above the working directory, else above the
/// checked files) and the figures each gives that a part may leave to a default, with the
/// shipped `architectures/` folder (its files are not compared with themselves: the comparison
/// is for new parts).
// Looks for the project's parts folder.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
fn shipped_figures(
    files: &[String],
) -> (tessera::check::ShippedFigures, Option<std::path::PathBuf>) {
    let cwd = std::env::current_dir().unwrap_or_default();
    let dir = std::iter::once(cwd)
        .chain(files.iter().filter_map(|f| std::fs::canonicalize(f).ok()))
        .find_map(|p| {
            p.ancestors()
                .map(|a| a.join("architectures").join("parts"))
                .find(|v| v.is_dir())
        });
    let Some(dir) = dir else {
        return Default::default();
    };
    let shipped = dir.parent().map(|p| p.to_path_buf());
    let dir = match dir.strip_prefix(std::env::current_dir().unwrap_or_default()) {
        Ok(rel) => rel.to_path_buf(),
        Err(_) => dir,
    };
    let Ok(parts) = super::validate::collect(&[dir.to_string_lossy().into_owned()]) else {
        return Default::default();
    };
    (tessera::check::shipped_figures(&parts, &DiskFs), shipped)
}

/// Warnings where the device of `f` (a `Device` or `System` file) leaves a figure at a default
/// that shipped devices give.
// Reads the file's text to place the warning.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
fn defaults_left(
    f: &str,
    (shipped, dir): &(tessera::check::ShippedFigures, Option<std::path::PathBuf>),
) -> Vec<tessera::diag::Diagnostic> {
    let canonical = std::fs::canonicalize(f).ok();
    if let (Some(c), Some(d)) = (&canonical, dir) {
        if c.starts_with(d) {
            return Vec::new();
        }
    }
    let Ok(text) = std::fs::read_to_string(f) else {
        return Vec::new();
    };
    let defaulted = match tessera::check::kind_of(&text).as_deref() {
        Some("Device") => match tessera::model::system::load_part(f, "Device", &DiskFs) {
            Some(tessera::model::system::Part::Device(d)) => d.defaulted,
            _ => return Vec::new(),
        },
        Some("System") => match tessera::model::system::load_system(f, &DiskFs).value {
            Some(s) => s.device.defaulted,
            None => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    tessera::check::defaults_left(f, &text, &defaulted, shipped)
}

pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let mut failed = false;
    let mut warned = false;
    let cases = case_devices(&a.files);
    let shipped = shipped_figures(&a.files);
    for f in &a.files {
        let (files, mut diags) = tessera::check::check_file_with(f, &DiskFs, &cases);
        if !diags
            .iter()
            .any(|d| d.severity == tessera::diag::Severity::Error)
        {
            diags.extend(defaults_left(f, &shipped));
        }
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
