//! `tessera calibrate CASES… --fit PATH[=LO..HI],…`: fit figures of an architecture to the
//! published results of calibration cases by least squares (the library's
//! `validate::calibrate`); print the fit with residuals and 95 % intervals, and with `-o FILE`
//! write the device's part file with the fitted figures citing the cases and the command.

use super::{report, DiskFs, Exit, Format};
use std::io::Write;
use tessera::diag::{Diagnostic, Path};
use tessera::report::render::{Csv, Rendered, Table};
use tessera::units::fmt_si;
use tessera::validate::calibrate::{calibrate, write_part, Fit, Param};
use tessera::validate::{load_case, Case, Role};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Calibration case files or folders of them (searched recursively; `Check` cases are refused).
    #[arg(required = true)]
    pub cases: Vec<String>,
    /// Figures to fit, by sweep path (`tessera sweep --list-paths`), comma-separated; each may
    /// carry a box as the file writes values: `device.efficiency.network=0.5..0.9`,
    /// `device.efficiency.kernel_overhead=1 us..20 us`; `A+B` fits A and moves B with it at the
    /// ratio the file gives them (`device.energy_per_flop.int4+device.energy_per_flop.int8`).
    #[arg(long, required = true, value_delimiter = ',')]
    pub fit: Vec<String>,
    /// Write the calibrated part file here: the device file of the cases' architecture with each
    /// fitted figure replaced, citing the cases and this command.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
    /// The device part file to rewrite (default: the one `Device` file the first case reads).
    #[arg(long)]
    pub part: Option<String>,
    /// Key of the calibration's source in the written part file.
    #[arg(long, default_value = "fitted-calibrate")]
    pub key: String,
    /// `json` prints {"figures": [...], "residuals": [...], "rss_before", "rss_after", "dof", …}.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

fn error(msg: &str, hint: Option<&str>) -> std::io::Result<Exit> {
    let mut e = std::io::stderr().lock();
    writeln!(e, "error: {msg}")?;
    if let Some(h) = hint {
        writeln!(e, "  = hint: {h}")?;
    }
    Ok(Exit::Failed)
}

/// `PATH` or `PATH=LO..HI` against the first case's system.
fn param(text: &str, c: &Case) -> Result<Param, (String, Option<String>)> {
    tessera::validate::calibrate::param(text, &c.system).map_err(|e| (e.message, e.hint))
}

fn show(v: f64, unit: &str) -> String {
    if unit.is_empty() {
        format!("{v:.4}")
    } else {
        fmt_si(v, unit)
    }
}

/// The fit as a report: its JSON is `json`; the other formats show its two tables and a line.
fn rendered<'a>(fit: &Fit, json: &'a serde_json::Value) -> Rendered<'a> {
    let figs: Vec<Vec<String>> = fit
        .figures
        .iter()
        .map(|f| {
            vec![
                std::iter::once(f.path.clone())
                    .chain(
                        f.tied
                            .iter()
                            .map(|t| format!("+ {} (× {:.4})", t.path, t.ratio)),
                    )
                    .collect::<Vec<_>>()
                    .join("\n"),
                show(f.start, f.unit),
                show(f.value, f.unit),
                f.std_error
                    .map(|s| show(s, f.unit))
                    .unwrap_or_else(|| "—".into()),
                match f.ci95 {
                    Some([a, b]) => format!("{} … {}", show(a, f.unit), show(b, f.unit)),
                    None if f.at_bound => "at a bound".into(),
                    None => "— (no residual freedom)".into(),
                },
                format!("{} … {}", show(f.lo, f.unit), show(f.hi, f.unit)),
            ]
        })
        .collect();
    let res: Vec<Vec<String>> = fit
        .residuals
        .iter()
        .map(|r| {
            vec![
                r.id.clone(),
                format!("{:.6e}", r.published),
                format!("{:+.2}%", r.error_before * 100.0),
                format!("{:+.2}%", r.error_after * 100.0),
            ]
        })
        .collect();
    // the same text in every format but JSON: calibrate has no Markdown or CSV of its own
    let figures = Table::of(
        &[
            "figure",
            "before",
            "fitted",
            "std error",
            "95% interval",
            "bounds",
        ],
        figs,
    );
    let residuals = Table::of(
        &["case", "published (SI)", "error before", "error after"],
        res,
    );
    let mut doc = Rendered::new(json, Csv::AsTable);
    doc.text(figures.text()).text(residuals.text()).text(format!(
        "{} cases, {} figures, {} residual degrees of freedom; sum of squared relative errors {:.3e} → {:.3e}; {} after {} iterations ({} case evaluations)",
        fit.residuals.len(),
        fit.figures.len(),
        fit.dof,
        fit.rss_before,
        fit.rss_after,
        if fit.converged { "converged" } else { "NOT converged" },
        fit.iterations,
        fit.evaluations,
    ));
    doc
}

// Reads the part file to rewrite and writes the calibrated one.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let files: Vec<String> = super::validate::collect(&a.cases)?
        .into_iter()
        .filter(|f| super::validate::is_case(f))
        .collect();
    if files.is_empty() {
        return error(
            "no calibration cases found",
            Some("name case files or folders of them"),
        );
    }
    let mut cases = Vec::new();
    let mut failed = false;
    let mut first_files = None;
    for f in &files {
        let l = load_case(f, &DiskFs);
        if report(&l.diagnostics, &l.files) {
            failed = true;
            continue;
        }
        let Some(c) = l.value else { continue };
        if c.role == Role::Check {
            // located, every one at once
            let id = l.files.files.iter().position(|(n, _)| n == f).unwrap_or(0);
            let d: Diagnostic = l
                .files
                .at(
                    id,
                    &Path::root().field("role"),
                    format!("case `{}` has role `Check`: calibrate fits on calibration cases only", c.id),
                )
                .with_hint(Some("the check set is never fitted on; fit on cases that say `role: Calibration` (a case fitted on cannot check the model)".into()));
            report(&[d], &l.files);
            failed = true;
            continue;
        }
        if first_files.is_none() {
            first_files = Some(l.files.clone());
        }
        cases.push(c);
    }
    if failed {
        return Ok(Exit::Failed);
    }
    let mut params = Vec::new();
    for t in &a.fit {
        match param(t, &cases[0]) {
            Ok(p) => params.push(p),
            Err((m, h)) => {
                error(&format!("--fit {t}: {m}"), h.as_deref())?;
                failed = true;
            }
        }
    }
    if failed {
        return Ok(Exit::Failed);
    }
    let fit = match calibrate(&cases, &params) {
        Ok(f) => f,
        Err(e) => return error(&e.message, e.hint.as_deref()),
    };
    let mut written = None;
    if let Some(o) = &a.output {
        let part = match &a.part {
            Some(p) => p.clone(),
            None => {
                // a software stack's figures live in its `Software` file, the rest in the device's
                let (kind, what) = if params.iter().all(|p| p.path.starts_with("software.")) {
                    ("Software", "software stack")
                } else {
                    ("Device", "device")
                };
                let devs: Vec<&String> = first_files
                    .iter()
                    .flat_map(|f| f.files.iter())
                    .filter(|(_, t)| tessera::check::kind_of(t).as_deref() == Some(kind))
                    .map(|(n, _)| n)
                    .collect();
                match devs.as_slice() {
                    [one] => (*one).clone(),
                    [] => {
                        return error(
                            &format!("the cases' {what} is not written in a part file of its own"),
                            Some("name the file to rewrite with `--part FILE`"),
                        )
                    }
                    _ => {
                        return error(
                            &format!("the cases read several {what} files"),
                            Some("name the one to rewrite with `--part FILE`"),
                        )
                    }
                }
            }
        };
        let text = super::output::read_text(&part).map_err(std::io::Error::other)?;
        let args: Vec<String> = std::env::args().skip(1).map(|a| shell_word(&a)).collect();
        let figs: Vec<String> = fit
            .figures
            .iter()
            .map(|f| {
                let ci = match f.ci95 {
                    Some([lo, hi]) => format!(
                        " (95 % interval {} to {})",
                        show(lo, f.unit),
                        show(hi, f.unit)
                    ),
                    None if f.at_bound => " (at its bound)".into(),
                    None => " (exact: no residual freedom)".into(),
                };
                let tied: String = f
                    .tied
                    .iter()
                    .map(|t| {
                        format!(
                            " with {} {} ({:.4} times it, the file's ratio)",
                            t.path,
                            show(t.value, f.unit),
                            t.ratio
                        )
                    })
                    .collect();
                format!("{} {}{ci}{tied}", f.path, show(f.value, f.unit))
            })
            .collect();
        let errs: Vec<String> = fit
            .residuals
            .iter()
            .map(|r| format!("{} {:+.1} %", r.id, r.error_after * 100.0))
            .collect();
        let citation = format!(
            "fitted: {}, the least-squares fit by `tessera {}` to validation cases {} (relative errors after the fit: {})",
            figs.join(", "),
            args.join(" "),
            cases.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(", "),
            errs.join(", "),
        );
        match write_part(&text, &fit, &a.key, &citation) {
            Ok(t) => std::fs::write(o, t)?,
            Err(e) => return error(&e.message, e.hint.as_deref()),
        }
        writeln!(std::io::stderr(), "wrote {o} (from {part})")?;
        written = Some(o.clone());
    }
    let mut json = serde_json::to_value(&fit).expect("json");
    json["output"] = serde_json::json!(written);
    rendered(&fit, &json).write(a.format.into(), out)?;
    Ok(Exit::Ok)
}

/// `word` as a POSIX shell reads it back: as it is when it holds only characters a shell takes
/// literally, else in single quotes (a bound written `0 us..200 us` stays one argument when the
/// recorded command is pasted into a shell).
fn shell_word(word: &str) -> String {
    let literal = |c: char| c.is_ascii_alphanumeric() || "_-./=,+:@%".contains(c);
    if !word.is_empty() && word.chars().all(literal) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn a_recorded_word_reads_back_as_one_shell_argument() {
        assert_eq!(
            shell_word("device.efficiency.matmul=0.5..0.9"),
            "device.efficiency.matmul=0.5..0.9"
        );
        assert_eq!(
            shell_word("software.pipeline_stage_time=0 us..200 us"),
            "'software.pipeline_stage_time=0 us..200 us'"
        );
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
