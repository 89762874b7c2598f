//! `tessera new --template T NAME`: a commented starter file that passes `check`.

use super::Exit;
use std::io::Write;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long, value_parser = super::common::choice::<tessera::templates::Template>())]
    pub template: tessera::templates::Template,
    /// Name of the system; the file is written to NAME.ron unless --output is given.
    pub name: String,
    /// Where to write; `-` for stdout.
    #[arg(long, short)]
    pub output: Option<String>,
    /// Overwrite an existing file.
    #[arg(long)]
    pub force: bool,
}

// Writes the starter file (refusing to overwrite one without --force).
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let text = tessera::templates::render(a.template, &a.name);
    let path = a.output.clone().unwrap_or_else(|| {
        let slug: String = a
            .name
            .chars()
            .map(|c| {
                if c.is_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        format!("{slug}.ron")
    });
    if path == "-" {
        write!(out, "{text}")?;
        return Ok(Exit::Ok);
    }
    if std::path::Path::new(&path).exists() && !a.force {
        eprintln!("error: {path} exists; pass --force to overwrite");
        return Ok(Exit::Failed);
    }
    std::fs::write(&path, text)?;
    writeln!(out, "wrote {path}; check it with `tessera check {path}`")?;
    Ok(Exit::Ok)
}
