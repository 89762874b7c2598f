//! `tessera validate [PATH...]`: run every validation case (default `validation/`) against its
//! published value; print each case with its role and the summary by hardware family and metric,
//! the check set apart from the calibration set; exit 1 when a check case is outside its tolerance
//! (calibration cases and cases under `known-gaps/` are reported, not gated). With
//! `--cross-validate family` it also reports each source family predicted out of sample (the
//! library's `validate::crossval`); the exit code stays the in-sample gate's.

use super::{report, DiskFs, Exit, Format};
use std::io::Write;
use tessera::report::render::{Block, Csv, Rendered, Table};
use tessera::units::fmt_si;
use tessera::validate::crossval::{cross_validate, source_family, CrossValidation};
use tessera::validate::{load_case, run_case, summarize, CaseResult, Metric, Stats, Summary};

/// What `--cross-validate` holds out in turn.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrossBy {
    /// One source family (the directory a case file lies in: `mlperf`, `megatron-bridge`, …).
    Family,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Case files or directories of them (searched recursively; `Claim` files are skipped).
    #[arg(default_value = "validation")]
    pub paths: Vec<String>,
    /// `json` prints {"cases": [...], "summary": {...}, "known_gaps": [...]}.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also report the leave-one-family-out error: each source family's cases predicted with the
    /// fitted figures refitted without them (a report; the gate stays the in-sample check set).
    /// JSON adds {"cross_validation": {"by_family": [...], "overall": {...}}}.
    #[arg(long, value_enum)]
    pub cross_validate: Option<CrossBy>,
    #[command(flatten)]
    pub plot: super::plot::PlotArgs,
    #[command(flatten)]
    pub report: super::plot::ReportArgs,
    /// Write the error bands of this run (each hardware family's check-set error spread, for
    /// training and serving, per figure) to FILE, as RON: what estimates and comparisons report
    /// as `error_band` (`tessera validate --write-bands src/validate/bands.ron` updates the
    /// shipped ones).
    #[arg(long, value_name = "FILE")]
    pub write_bands: Option<String>,
}

/// Predicted against published for every evaluated case, by family, with the most common
/// tolerance as the band (each case is judged against its own).
fn picture(results: &[CaseResult]) -> tessera::plot::validate::ValidationPlot {
    let mut tols: Vec<f64> = results.iter().map(|r| r.tolerance).collect();
    tols.sort_by(f64::total_cmp);
    let band = tols.get(tols.len() / 2).copied().unwrap_or(0.1);
    tessera::plot::validate::ValidationPlot {
        title: "tessera validate: predicted against published".into(),
        quantity: "value (each case's unit, SI)".into(),
        tolerance: band,
        points: results
            .iter()
            .filter_map(|r| {
                Some(tessera::plot::validate::ValidationPoint {
                    case: r.id.clone(),
                    family: r.family.clone(),
                    published: r.published,
                    predicted: r.predicted?,
                    pass: r.within,
                })
            })
            .collect(),
    }
}

/// The `.ron` files under `paths`, sorted; directories are walked recursively.
// Walks the folders named on the command line for case files.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
pub fn collect(paths: &[String]) -> std::io::Result<Vec<String>> {
    fn walk(dir: &std::path::Path, out: &mut Vec<String>) -> std::io::Result<()> {
        for e in std::fs::read_dir(dir)? {
            let p = e?.path();
            if p.is_dir() {
                walk(&p, out)?;
            } else if p.extension().is_some_and(|x| x == "ron") {
                out.push(p.to_string_lossy().into_owned());
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for p in paths {
        let path = std::path::Path::new(p);
        if path.is_dir() {
            walk(path, &mut out)?;
        } else {
            out.push(p.clone());
        }
    }
    out.sort();
    Ok(out)
}

/// Whether the file holds a `Case` (claims and other kinds under `validation/` are skipped).
// Peeks at a file's kind before the loader reads it (a FIFO or an oversized file is left to the
// loader, which reports it).
pub fn is_case(path: &str) -> bool {
    match super::output::read_text(path) {
        Ok(t) => tessera::check::kind_of(&t).as_deref() == Some("Case"),
        // unreadable: let the loader report it
        Err(_) => true,
    }
}

fn value(m: Metric, v: f64) -> String {
    match m {
        Metric::Mfu | Metric::ScalingEfficiency => format!("{:.1}%", v * 100.0),
        Metric::TimeToTrain | Metric::StepTime if v >= 3600.0 => format!("{:.3} h", v / 3600.0),
        Metric::TimeToTrain | Metric::StepTime if v >= 60.0 => format!("{:.2} min", v / 60.0),
        Metric::TimeToTrain | Metric::StepTime if v >= 1.0 => format!("{v:.3} s"),
        // carbon in grams with a prefix (kg with one reads as `kkg`)
        Metric::RatedCarbon => fmt_si(v * 1e3, "g"),
        Metric::RentedCost => tessera::report::money(v),
        // below a second in SI prefixes (ms, us), three significant digits
        _ => fmt_si(v, m.unit()),
    }
}

fn pct(e: f64) -> String {
    format!("{:+.1}%", e * 100.0)
}

fn row(r: &CaseResult) -> Vec<String> {
    vec![
        r.id.clone(),
        r.family.clone(),
        r.metric.name().to_string(),
        value(r.metric, r.published),
        r.predicted
            .map(|p| value(r.metric, p))
            .unwrap_or_else(|| "—".into()),
        r.error.map(pct).unwrap_or_else(|| "—".into()),
        format!("±{:.0}%", r.tolerance * 100.0),
        match (r.within, r.known_gap) {
            (true, _) => "yes".into(),
            (false, true) => "no (known gap)".into(),
            (false, false) => "NO".into(),
        },
        if r.fitted { "fitted" } else { "" }.into(),
        r.role.name().into(),
    ]
}

fn stats_row(name: &str, s: &Stats) -> Vec<String> {
    vec![
        name.to_string(),
        s.cases.to_string(),
        s.within.to_string(),
        format!("{:.1}%", s.mape * 100.0),
        format!("{:.1}%", s.max_abs_error * 100.0),
        s.worst.clone().unwrap_or_default(),
    ]
}

fn summary_tables(s: &Summary) -> Vec<(String, Vec<String>, Vec<Vec<String>>)> {
    let h: Vec<String> = ["group", "cases", "within", "MAPE", "max |error|", "largest"]
        .iter()
        .map(|x| x.to_string())
        .collect();
    let head = s
        .headline()
        .into_iter()
        .map(|(name, st)| stats_row(name, st))
        .collect();
    let fam = s
        .by_family
        .iter()
        .map(|g| stats_row(&g.name, &g.stats))
        .collect();
    let met = s
        .by_metric
        .iter()
        .map(|g| stats_row(&g.name, &g.stats))
        .collect();
    let check_fam = s
        .check_by_family
        .iter()
        .map(|g| stats_row(&g.name, &g.stats))
        .collect();
    vec![
        ("summary".into(), h.clone(), head),
        ("check set by hardware family".into(), h.clone(), check_fam),
        ("by hardware family".into(), h.clone(), fam),
        ("by metric".into(), h, met),
    ]
}

/// The cross-validation as a table (one row per held-out family, then overall) and the refitted
/// figures in words.
fn cross_table(cv: &CrossValidation) -> (Vec<String>, Vec<Vec<String>>, Vec<String>) {
    let h: Vec<String> = [
        "held out",
        "cases",
        "MAPE out of sample",
        "MAPE in sample",
        "max |error|",
        "largest",
        "figures refitted",
    ]
    .iter()
    .map(|x| x.to_string())
    .collect();
    let p = |x: f64| format!("{:.1}%", x * 100.0);
    let mut rows: Vec<Vec<String>> = cv
        .by_family
        .iter()
        .map(|f| {
            let mut keys: Vec<&str> = f.refitted.iter().map(|r| r.key.as_str()).collect();
            keys.dedup();
            vec![
                f.family.clone(),
                f.cases.to_string(),
                p(f.mape),
                p(f.in_sample_mape),
                p(f.max_abs_error),
                f.worst.clone().unwrap_or_default(),
                if keys.is_empty() {
                    "—".into()
                } else {
                    keys.join(", ")
                },
            ]
        })
        .collect();
    let o = &cv.overall;
    rows.push(vec![
        "overall".into(),
        o.cases.to_string(),
        p(o.mape),
        p(o.in_sample_mape),
        p(o.max_abs_error),
        o.worst.clone().unwrap_or_default(),
        String::new(),
    ]);
    let show = |v: f64, unit: &str| {
        if unit.is_empty() {
            format!("{v:.4}")
        } else {
            fmt_si(v, unit)
        }
    };
    let mut notes = Vec::new();
    for f in &cv.by_family {
        for r in &f.refitted {
            notes.push(format!(
                "  {} held out: {} ({}) {} → {}: {}",
                f.family,
                r.path,
                r.key,
                show(r.shipped, r.unit),
                show(r.value, r.unit),
                r.basis
            ));
        }
    }
    for k in &cv.not_refittable {
        notes.push(format!("  kept as shipped: {k}"));
    }
    (h, rows, notes)
}

/// The run's error bands to `path`.
// Writes the file the user named.
#[allow(clippy::disallowed_methods)]
fn write_bands(path: &str, results: &[CaseResult]) -> std::io::Result<()> {
    std::fs::write(path, tessera::validate::bands::Bands::of(results).to_ron())
}

/// What a table and Markdown show: the gated cases, the known gaps, the cases not evaluated, the
/// summary tables, the cross-validation, and the verdict's line.
fn texts(
    doc: &mut Rendered,
    results: &[CaseResult],
    (gated, gaps): (&[&CaseResult], &[&CaseResult]),
    summary: &Summary,
    cv: Option<&CrossValidation>,
    verdict: &str,
) {
    let header = [
        "case",
        "family",
        "metric",
        "published",
        "predicted",
        "error",
        "tolerance",
        "within",
        "fitted",
        "role",
    ];
    doc.table(Table::of(&header, gated.iter().map(|r| row(r)).collect()));
    if !gaps.is_empty() {
        doc.text("\nknown gaps (reported, not gated):")
            .table(Table::of(&header, gaps.iter().map(|r| row(r)).collect()));
    }
    for r in results.iter().filter(|r| r.predicted.is_none()) {
        doc.text(format!("{}: not evaluated: {}", r.id, r.detail));
    }
    for (title, h, rows) in summary_tables(summary) {
        doc.text(format!("\n{title}:")).table(Table::new(h, rows));
    }
    if let Some(cv) = cv {
        let (h, rows, notes) = cross_table(cv);
        doc.text(
            "\ncross-validated (each source family predicted with the figures fitted on it refitted without it):",
        )
        .table(Table::new(h, rows));
        for n in notes {
            doc.text(n);
        }
    }
    doc.text(format!("\n{}", summary.verdict(verdict, "")));
}

pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let files: Vec<String> = collect(&a.paths)?
        .into_iter()
        .filter(|f| is_case(f))
        .collect();
    let mut failed_load = false;
    let mut results = Vec::new();
    let mut cases = Vec::new();
    for f in &files {
        let l = load_case(f, &DiskFs);
        if report(&l.diagnostics, &l.files) {
            failed_load = true;
            continue;
        }
        if let Some(c) = l.value {
            results.push(run_case(&c));
            if a.cross_validate.is_some() {
                cases.push(c);
            }
        }
    }
    if files.is_empty() {
        writeln!(std::io::stderr(), "error: no validation cases found")?;
        return Ok(Exit::Failed);
    }
    if results.is_empty() {
        writeln!(
            std::io::stderr(),
            "error: no validation case could be evaluated"
        )?;
        return Ok(Exit::Failed);
    }
    let summary = summarize(&results);
    if let Some(path) = &a.write_bands {
        write_bands(path, &results)?;
    }
    let cv = a
        .cross_validate
        .map(|_| cross_validate(&cases, &results, |c| source_family(&c.file)));
    let (gated, gaps): (Vec<&CaseResult>, Vec<&CaseResult>) =
        results.iter().partition(|r| !r.known_gap);
    let mut json = serde_json::json!({
        "cases": gated,
        "summary": summary,
        "known_gaps": gaps,
    });
    if let Some(cv) = &cv {
        json["cross_validation"] = serde_json::to_value(cv).expect("json");
    }
    // CSV: one row per case (`known_gap` true for the ones reported, not gated), the cases' JSON
    // keys as columns
    let mut doc = Rendered::new(&json, Csv::Records(&results));
    let verdict = if summary.pass && !failed_load {
        "PASS"
    } else {
        "FAIL"
    };
    texts(
        &mut doc,
        &results,
        (&gated, &gaps),
        &summary,
        cv.as_ref(),
        verdict,
    );
    let p = picture(&results);
    a.plot
        .draw(|size, w| tessera::plot::validate::validate(&p, size, w))?;
    if a.report.report.is_some() {
        let svg = super::plot::svg_string(|w| {
            tessera::plot::validate::validate(&p, a.plot.plot_size, w)
        })?;
        a.report.write(|| {
            let pictures = [tessera::report::html::page::Picture {
                svg,
                caption: "Every case predicted against published, by hardware family, with the \
                          median tolerance as the band (each case is judged against its own)"
                    .into(),
            }];
            let bands = tessera::validate::bands::Bands::of(&results);
            tessera::report::html::validate::validate_report(&results, &summary, &bands, &pictures)
        })?;
    }
    if let Some(img) = a.plot.markdown_image("predicted against published") {
        doc.markdown(Block::Text(format!("\n{img}")));
    }
    a.plot.output(out, |w| doc.write(a.format.into(), w))?;
    Ok(if summary.pass && !failed_load {
        Exit::Ok
    } else {
        Exit::Failed
    })
}
