//! `--plot`, `--plot-size` and `--out`, shared by the commands that draw: writing the SVG file,
//! sending the report to a file, and linking the picture from a Markdown report.

use std::io::Write;
use std::path::{Component, Path, PathBuf};
use tessera::plot::Size;

#[derive(clap::Args, Debug, Clone)]
pub struct PlotArgs {
    /// Also draw the report as an SVG picture into FILE (folders are created).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Size of the picture in pixels.
    #[arg(long, value_name = "WIDTHxHEIGHT", default_value = "800x500")]
    pub plot_size: Size,
    /// Write the report to FILE instead of stdout. A Markdown report links its picture relative
    /// to FILE's folder (to the current folder without --out), so `--out report/x.md --plot
    /// report/x.svg` makes a folder that can be committed as it is.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

// Writes the picture and its Markdown report where --plot and --out say.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
impl PlotArgs {
    /// Write the picture if `--plot` was given, and say so on stderr.
    pub fn draw(
        &self,
        render: impl FnOnce(Size, &mut dyn Write) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let Some(path) = &self.plot else {
            return Ok(());
        };
        let mut buf = Vec::new();
        render(self.plot_size, &mut buf)?;
        create_parent(path)?;
        std::fs::write(path, buf).map_err(|e| with_path(e, path))?;
        let _ = writeln!(std::io::stderr(), "wrote {}", path.display());
        Ok(())
    }

    /// Run `f` with the report's destination: the `--out` file, or `stdout`.
    pub fn output(
        &self,
        stdout: &mut dyn Write,
        f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        match &self.out {
            None => f(stdout),
            Some(path) => {
                create_parent(path)?;
                let file = std::fs::File::create(path).map_err(|e| with_path(e, path))?;
                let mut w = std::io::BufWriter::new(file);
                f(&mut w)?;
                w.flush()?;
                let _ = writeln!(std::io::stderr(), "wrote {}", path.display());
                Ok(())
            }
        }
    }

    /// A Markdown image line for the picture, `![alt](path)`, with the path relative to where the
    /// report goes; `None` without `--plot`.
    pub fn markdown_image(&self, alt: &str) -> Option<String> {
        let svg = self.plot.as_ref()?;
        let base = self
            .out
            .as_ref()
            .and_then(|o| o.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        let rel = relative(svg, &base);
        let alt = alt.replace(['[', ']'], "");
        Some(format!(
            "![{alt}]({})",
            rel.to_string_lossy().replace('\\', "/").replace(' ', "%20")
        ))
    }
}

/// `--report FILE.html`, for the commands whose result is worth sharing as one document.
#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// Also write the report as one self-contained HTML file (tables, assumptions and sources,
    /// error bands, the pictures inline; nothing fetched from elsewhere): what stdout shows is
    /// unchanged.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
}

// Writes the HTML file --report names.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
impl ReportArgs {
    /// Build the page (only when `--report` was given), write it whole and say so on stderr.
    pub fn write(&self, page: impl FnOnce() -> String) -> std::io::Result<()> {
        let Some(path) = &self.report else {
            return Ok(());
        };
        let html = page();
        create_parent(path)?;
        super::output::write_atomic(path, html.as_bytes()).map_err(|e| with_path(e, path))?;
        let _ = writeln!(std::io::stderr(), "wrote {}", path.display());
        Ok(())
    }
}

/// An SVG picture drawn into memory, for a report.
pub fn svg_string(
    render: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<String> {
    let mut buf = Vec::new();
    render(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn with_path(e: std::io::Error, p: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))
}

// Creates the folder an output file goes into.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
fn create_parent(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => {
            std::fs::create_dir_all(d).map_err(|e| with_path(e, d))
        }
        _ => Ok(()),
    }
}

/// Absolute and lexically normal (`.` and `..` folded) form of `p`.
fn absolute(p: &Path) -> PathBuf {
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let mut out = PathBuf::new();
    for c in full.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// `target` relative to the folder `base` (both relative to the current folder unless absolute).
pub fn relative(target: &Path, base: &Path) -> PathBuf {
    let (t, b) = (absolute(target), absolute(base));
    let tc: Vec<_> = t.components().collect();
    let bc: Vec<_> = b.components().collect();
    let common = tc.iter().zip(&bc).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..bc.len() {
        out.push("..");
    }
    for c in &tc[common..] {
        out.push(c.as_os_str());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_relative_to_the_report() {
        assert_eq!(
            relative(Path::new("report/compare.svg"), Path::new("report")),
            PathBuf::from("compare.svg")
        );
        assert_eq!(
            relative(Path::new("img/a.svg"), Path::new("report")),
            PathBuf::from("../img/a.svg")
        );
        assert_eq!(
            relative(Path::new("a.svg"), Path::new("")),
            PathBuf::from("a.svg")
        );
    }
}
