//! `tessera show FILE`: the resolved system and its totals.

use super::{fail_on_errors, DiskFs, Exit, Format};
use std::io::Write;
use tessera::model::system::load_system;
use tessera::report::render::{Csv, Rendered, Table};
use tessera::report::system;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Architecture file (a `System(...)`).
    pub file: String,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let loaded = load_system(&a.file, &DiskFs);
    if let Err(e) = fail_on_errors(&loaded.diagnostics, &loaded.files) {
        return Ok(e);
    }
    let Some(sys) = loaded.value else {
        return Ok(Exit::Failed);
    };
    let s = system::summarize(&sys);
    let mut report = Rendered::new(&s, Csv::Records(&s));
    report.table(Table::kv(system::rows(&s)));
    report.write(a.format.into(), out)?;
    Ok(Exit::Ok)
}
