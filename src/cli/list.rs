//! `tessera list [PATH...]`: the catalogue of shipped files — systems, parts, software stacks,
//! sweeps, workloads and mappings — one line each, so that what ships is found without `ls`.

use super::{DiskFs, Exit, Format};
use std::io::Write;
use tessera::report::catalogue;
use tessera::report::render::{Csv, Rendered, Table};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Folders or files to list (default: the `architectures/` and `workloads/` folders of the
    /// project, found from the working directory upwards).
    pub paths: Vec<String>,
    /// Only files of this kind (`system`, `device`, `node`, `software`, `sweep`, `workload`,
    /// `mapping`).
    #[arg(long)]
    pub kind: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// The project's `architectures/` and `workloads/` folders: under the working directory, else
/// under the nearest ancestor that holds them.
// Looks for the project's folders.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
fn shipped() -> Vec<String> {
    let names = ["architectures", "workloads"];
    if names.iter().all(|n| std::path::Path::new(n).is_dir()) {
        return names.map(String::from).to_vec();
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    cwd.ancestors()
        .find(|a| names.iter().all(|n| a.join(n).is_dir()))
        .map(|a| {
            names
                .iter()
                .map(|n| a.join(n).to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let paths = if a.paths.is_empty() {
        shipped()
    } else {
        a.paths.clone()
    };
    if paths.is_empty() {
        writeln!(
            std::io::stderr(),
            "error: no `architectures/` and `workloads/` folders here or above\nhint: run it in the tessera repository, or name the folders: `tessera list DIR...`"
        )?;
        return Ok(Exit::Failed);
    }
    let files = match super::validate::collect(&paths) {
        Ok(f) => f,
        Err(e) => {
            writeln!(std::io::stderr(), "error: {e}")?;
            return Ok(Exit::Failed);
        }
    };
    let entries: Vec<catalogue::Entry> = files
        .iter()
        .map(|f| catalogue::entry(f, &DiskFs))
        .filter(|e| a.kind.as_deref().is_none_or(|k| e.kind == k))
        .collect();
    let (h, r) = catalogue::csv_rows(&entries);
    let csv = Csv::Table(Table::new(h, r));
    let (h, r) = catalogue::rows(&entries);
    let mut report = Rendered::new(&entries, csv);
    report.table(Table::new(h, r));
    report.write(a.format.into(), out)?;
    Ok(Exit::Ok)
}
