//! `tessera sweep`'s report on stdout: the run's counts, the best points and the Pareto front as a
//! table, Markdown, CSV or JSON (split from `sweep.rs`, which runs the sweep and writes its files).

use super::Format;
use std::io::Write;
use tessera::report::render::{Csv, Rendered};
use tessera::sweep::report::{PointReport, Summary};
use tessera::sweep::space::Sampling;
use tessera::units::fmt_si;

/// Rows of the Pareto front a table shows.
const FRONT_ROWS: usize = 25;

fn points_table(s: &Summary, pts: &[(usize, &PointReport)]) -> (Vec<String>, Vec<Vec<String>>) {
    let many = s.programs.len() > 1;
    let mut h = vec!["#".to_string()];
    for a in &s.axes {
        h.push(a.path.clone());
    }
    if many {
        h.push("devices, mapping".into());
    }
    for x in [
        "step time",
        "throughput",
        "power",
        "energy per unit",
        "MFU",
        "free memory",
    ] {
        h.push(x.into());
    }
    let rows = pts
        .iter()
        .map(|(i, p)| {
            let mut r = vec![(i + 1).to_string()];
            for (a, v) in s.axes.iter().zip(&p.values) {
                r.push(if a.unit.is_empty() {
                    format!("{v:.4}")
                } else {
                    fmt_si(*v, &a.unit)
                });
            }
            if many {
                r.push(s.programs.get(p.program).cloned().unwrap_or_default());
            }
            r.push(fmt_si(p.step_time_s, "s"));
            r.push(format!(
                "{} {}/s",
                fmt_si(p.throughput_per_s, "").trim_end(),
                s.unit
            ));
            r.push(fmt_si(p.average_power_w, "W"));
            r.push(fmt_si(p.energy_per_unit_j, "J"));
            r.push(format!("{:.1}%", p.mfu * 100.0));
            r.push(fmt_si(p.memory_headroom_bytes, "B"));
            r
        })
        .collect();
    (h, rows)
}

/// The sweep, its points and how many of them were evaluated and feasible.
fn counts(s: &Summary, doc: &mut Rendered) {
    doc.text(format!(
        "sweep: {} ({} on {})",
        s.name, s.workload, s.system
    ));
    let shards = if s.shards.len() == 1 && s.shards[0].count > 1 {
        format!(
            ", shard {}/{} (points {}..{})",
            s.shards[0].index, s.shards[0].count, s.shards[0].start, s.shards[0].end
        )
    } else {
        String::new()
    };
    doc.text(format!(
        "{} points: {} program(s) × {} machine points ({}){shards}",
        s.total_points,
        s.programs.len(),
        s.points_per_program,
        match s.sampling {
            Sampling::Grid => "grid".to_string(),
            Sampling::Random { seed, .. } => format!("random, seed {seed}"),
            Sampling::LatinHypercube { seed, .. } => format!("Latin hypercube, seed {seed}"),
        }
    ));
    let inf: Vec<String> = s
        .infeasible
        .iter()
        .map(|(r, n)| format!("{n} {r}"))
        .collect();
    doc.text(format!(
        "evaluated {}: {} feasible{}",
        s.evaluated,
        s.feasible,
        if inf.is_empty() {
            String::new()
        } else {
            format!("; infeasible: {}", inf.join(", "))
        }
    ));
    if !s.skipped_programs.is_empty() {
        doc.text(format!(
            "{} program(s) skipped, e.g. {}: {}",
            s.skipped_programs.len(),
            s.skipped_programs[0].label,
            s.skipped_programs[0].reason
        ));
    }
}

/// The run's counts, then the best points and the Pareto front, for a table and Markdown alike;
/// CSV and JSON carry the points as data.
pub fn print(s: &Summary, format: Format, out: &mut dyn Write) -> std::io::Result<()> {
    let mut doc = Rendered::new(s, Csv::Text(tessera::sweep::report::csv_points(s)));
    counts(s, &mut doc);
    doc.text(format!("\nbest {} by {}:", s.top.len(), s.objective));
    let top: Vec<(usize, &PointReport)> = s.top.iter().enumerate().collect();
    doc.table(points_table(s, &top).into());
    doc.text(format!(
        "\nPareto front, {} vs {} ({} points):",
        s.pareto[0],
        s.pareto[1],
        s.front.len()
    ));
    // A long front is summarised in tables by rows spread evenly along it; CSV and JSON carry
    // all of it.
    let n = s.front.len();
    let pick: Vec<(usize, &PointReport)> = if n <= FRONT_ROWS {
        s.front.iter().enumerate().collect()
    } else {
        let mut v: Vec<usize> = (0..FRONT_ROWS)
            .map(|i| i * (n - 1) / (FRONT_ROWS - 1))
            .collect();
        v.dedup();
        v.into_iter().map(|i| (i, &s.front[i])).collect()
    };
    doc.table(points_table(s, &pick).into());
    if pick.len() < n {
        doc.text(format!(
            "{} of {n} front points shown, spread along it (`--format json` or `--format csv` lists all)",
            pick.len()
        ));
    }
    doc.write(format.into(), out)
}
