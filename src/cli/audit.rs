//! `tessera audit [PATH...]`: check published claims (default `validation/claims/`) against what
//! the hardware physically allows, or one claim given on the command line
//! (`tessera audit --arch A --devices 2 --energy "6.11 GJ" --duration "11.3 min"`). Prints the
//! verdict, by what factor a bound is exceeded and why; exits 1 when a claim file's verdict differs
//! from the one it expects.

use super::validate::collect;
use super::{common, report, DiskFs, Exit, Format};
use std::io::Write;
use tessera::report::render::{Csv, Rendered, Table};
use tessera::units::{fmt_si, parse, Dimension};
use tessera::validate::audit::{audit, load_claim, AuditResult, Claim};
use tessera::validate::parse_throughput;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Claim files or directories of them (default `validation/claims`).
    pub paths: Vec<String>,
    /// Audit one claim about this architecture instead of files.
    #[arg(long)]
    pub arch: Option<String>,
    /// Devices the claim names.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub devices: Option<u64>,
    /// Energy claimed (e.g. "6.11 GJ").
    #[arg(long)]
    pub energy: Option<String>,
    /// Duration claimed or implied (e.g. "11.3 min").
    #[arg(long)]
    pub duration: Option<String>,
    /// Average power claimed (e.g. "672 W").
    #[arg(long)]
    pub power: Option<String>,
    /// Throughput claimed (e.g. "28356 tokens/s"); needs --workload.
    #[arg(long)]
    pub throughput: Option<String>,
    /// The workload that defines the throughput's unit of work.
    #[arg(long)]
    pub workload: Option<String>,
    /// Scaling efficiency claimed (e.g. "95 %").
    #[arg(long)]
    pub scaling_efficiency: Option<String>,
    /// MFU claimed (e.g. "60 %").
    #[arg(long)]
    pub mfu: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

fn q(text: &Option<String>, dim: Dimension, what: &str) -> Result<Option<f64>, String> {
    match text {
        Some(t) => parse(t, dim)
            .map(|p| Some(p.value))
            .map_err(|e| format!("--{what}: {}", e.message)),
        None => Ok(None),
    }
}

/// The claim given by flags.
fn claim_from_flags(a: &Args, arch: &str) -> Result<Claim, Exit> {
    let fail = |m: String| {
        let _ = writeln!(std::io::stderr(), "error: {m}");
        Exit::Failed
    };
    let system = common::system(arch)?;
    let devices = a.devices.unwrap_or(system.devices);
    if devices == 0 || devices > system.devices {
        return Err(fail(format!(
            "--devices {devices}: `{}` has {} devices",
            system.name, system.devices
        )));
    }
    let throughput = match (&a.throughput, &a.workload) {
        (Some(t), Some(w)) => Some((
            parse_throughput(t).map_err(|m| fail(format!("--throughput: {m}")))?,
            common::workload(w)?,
        )),
        (Some(_), None) => return Err(fail("--throughput needs --workload".into())),
        _ => None,
    };
    let mut parts = Vec::new();
    for (flag, v) in [
        ("energy", &a.energy),
        ("power", &a.power),
        ("throughput", &a.throughput),
        ("scaling-efficiency", &a.scaling_efficiency),
        ("mfu", &a.mfu),
    ] {
        if let Some(v) = v {
            parts.push(format!("{flag} {v}"));
        }
    }
    if parts.is_empty() {
        return Err(fail(
            "nothing to audit: give --energy, --power, --throughput, --scaling-efficiency or --mfu"
                .into(),
        ));
    }
    if let Some(d) = &a.duration {
        parts.push(format!("in {d}"));
    }
    Ok(Claim {
        id: "command-line".into(),
        statement: format!("{devices} devices of {}: {}", system.name, parts.join(", ")),
        file: String::new(),
        citation: String::new(),
        devices,
        duration: q(&a.duration, Dimension::Time, "duration").map_err(fail)?,
        energy: q(&a.energy, Dimension::Energy, "energy").map_err(fail)?,
        power: q(&a.power, Dimension::Power, "power").map_err(fail)?,
        throughput,
        scaling_efficiency: q(
            &a.scaling_efficiency,
            Dimension::Ratio,
            "scaling-efficiency",
        )
        .map_err(fail)?,
        mfu: q(&a.mfu, Dimension::Ratio, "mfu").map_err(fail)?,
        expect: None,
        system,
    })
}

/// One claim's lines, its table of checks and a blank line, for a table and Markdown alike.
fn print(r: &AuditResult, doc: &mut Rendered) {
    let verdict = match r.verdict {
        tessera::spec::validation::Verdict::Plausible => "PLAUSIBLE".to_string(),
        tessera::spec::validation::Verdict::Impossible => {
            format!("IMPOSSIBLE (by a factor of {})", factor(r.factor))
        }
    };
    doc.text(format!("{}: {}", r.id, r.statement));
    if !r.source.is_empty() {
        doc.text(format!("  source: {}", r.source));
    }
    doc.text(format!("  verdict: {verdict}"));
    for (k, v) in &r.implied {
        doc.text(format!("  implies {k}: {v}"));
    }
    let rows: Vec<Vec<String>> = r
        .checks
        .iter()
        .map(|c| {
            vec![
                format!(
                    "{} ({})",
                    c.quantity,
                    if c.kind == "upper" {
                        "at most"
                    } else {
                        "at least"
                    }
                ),
                quantity(c.claimed, c.unit),
                quantity(c.bound, c.unit),
                if c.possible { "yes" } else { "NO" }.into(),
                factor(c.factor),
                c.why.clone(),
            ]
        })
        .collect();
    doc.table(Table::of(
        &["check", "claimed", "bound", "possible", "factor", "why"],
        rows,
    ));
    if !r.as_expected {
        doc.text(format!(
            "  UNEXPECTED: the claim file expects {:?}",
            r.expect
        ));
    }
    doc.text("");
}

/// A claimed or bounding figure: ratios as percentages, the rest with SI prefixes.
fn quantity(v: f64, unit: &str) -> String {
    if unit.is_empty() {
        format!("{:.1}%", v * 100.0)
    } else {
        fmt_si(v, unit)
    }
}

fn factor(f: f64) -> String {
    if f >= 100.0 {
        format!("{f:.0}×")
    } else {
        format!("{f:.2}×")
    }
}

pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let mut results = Vec::new();
    let mut failed = false;
    if let Some(arch) = &a.arch {
        match claim_from_flags(&a, arch) {
            Ok(c) => results.push(audit(&c)),
            Err(e) => return Ok(e),
        }
    } else {
        let paths = if a.paths.is_empty() {
            vec!["validation/claims".to_string()]
        } else {
            a.paths.clone()
        };
        for f in collect(&paths)? {
            let l = load_claim(&f, &DiskFs);
            if report(&l.diagnostics, &l.files) {
                failed = true;
                continue;
            }
            if let Some(c) = l.value {
                results.push(audit(&c));
            }
        }
    }
    // a table and Markdown show each claim; CSV shows what a table does
    let json = serde_json::json!({ "claims": results });
    let mut doc = Rendered::new(&json, Csv::AsTable);
    for r in &results {
        print(r, &mut doc);
    }
    doc.write(a.format.into(), out)?;
    Ok(if failed || results.iter().any(|r| !r.as_expected) {
        Exit::Failed
    } else {
        Exit::Ok
    })
}
