//! `tessera show FILE`: the resolved system and its totals.

use super::{fail_on_errors, DiskFs, Exit, Format};
use std::io::Write;
use tessera::model::system::load_system;
use tessera::report::{kv_table, system};

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
    match a.format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&s).expect("json"))?,
        Format::Markdown => {
            let rows: Vec<Vec<String>> = system::rows(&s)
                .into_iter()
                .map(|(k, v)| vec![k, v])
                .collect();
            writeln!(
                out,
                "{}",
                tessera::report::markdown_table(&["quantity".into(), "value".into()], &rows)
            )?
        }
        Format::Csv => write!(
            out,
            "{}",
            tessera::report::records::csv_of(std::slice::from_ref(&s))
        )?,
        Format::Table => writeln!(out, "{}", kv_table(&system::rows(&s)))?,
    }
    Ok(Exit::Ok)
}
