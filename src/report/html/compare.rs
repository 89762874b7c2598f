//! `compare --report`: a comparison as one HTML page to share — the conditions every system ran
//! under, the table (the numbers of `--format json`, each cell keeping its exact value), each
//! system's assumptions and sources (where its figures come from, its mapping, the published
//! result its error band rests on), the error bands side by side, the pictures inline and the
//! JSON itself.

use super::page::{Cell, Column, Page, Picture};
use crate::engine::Estimate;
use crate::report::compare::{CompareRow, Comparison};

/// The conditions every system was compared under, one line each.
fn conditions(c: &Comparison) -> Vec<String> {
    let mut out = vec![
        format!("workload: {}", c.workload),
        format!("baseline (ratios are to it): {}", c.baseline),
        format!(
            "power and energy counted at the {} boundary",
            c.power_boundary
        ),
    ];
    if let Some(sw) = &c.software {
        out.push(format!("software stack: {sw} (every system)"));
    }
    if let Some(l) = &c.concurrency {
        out.push(format!(
            "load: {l} requests in flight on every system; latency target: {}",
            c.slo.as_deref().unwrap_or("none")
        ));
    }
    if let Some(b) = c.power_budget_w {
        out.push(format!(
            "power budget: {} per system, held against {} power",
            crate::units::fmt_si(b, "W").trim(),
            c.power_budget_basis.unwrap_or("rated")
        ));
    }
    if let Some(b) = c.budget_usd {
        out.push(format!(
            "capital budget: {} per system",
            crate::report::money(b)
        ));
    }
    if let (Some(gb), Some(from)) = (c.global_batch, c.global_batch_scaled_from) {
        out.push(format!(
            "global batch: {gb} samples on every system, scaled from the workload's {from}"
        ));
    }
    out
}

/// `dp 8 × tp 1 × pp 1 …, micro-batch 2` (the parallel degrees above one, and dp always).
fn mapping(e: &Estimate) -> String {
    let Some(m) = &e.mapping else {
        return "—".into();
    };
    let mut parts = vec![format!("dp {}", m.dp)];
    for (name, v) in [("tp", m.tp), ("pp", m.pp), ("ep", m.ep), ("cp", m.cp)] {
        if v > 1 {
            parts.push(format!("{name} {v}"));
        }
    }
    if m.micro_batch > 0 {
        format!("{}, micro-batch {}", parts.join(" × "), m.micro_batch)
    } else {
        parts.join(" × ")
    }
}

/// A column of numbers (heading, JSON key, cell of a row), kept only where some system has a
/// value.
type NumCol<H> = (H, &'static str, fn(&CompareRow) -> Cell);

fn num_columns(unit: &str) -> Vec<NumCol<String>> {
    let cols: Vec<NumCol<&str>> = vec![
        ("devices", "devices", |r| {
            Cell::Num(
                Some(r.estimate.devices as f64),
                r.estimate.devices.to_string(),
            )
        }),
        ("throughput (UNIT/s)", "throughput_per_s", |r| {
            Cell::si(r.estimate.throughput_per_s, "")
        }),
        ("× baseline", "ratio_to_baseline.throughput", |r| {
            Cell::fixed(r.ratio_to_baseline.throughput, 2, " ×")
        }),
        ("step time", "step_time_s", |r| {
            Cell::si(r.estimate.step_time_s, "s")
        }),
        ("time to train", "time_to_train_s", |r| {
            Cell::si(r.estimate.time_to_train_s, "s")
        }),
        ("time to first token", "ttft_s", |r| {
            Cell::si(r.estimate.ttft_s, "s")
        }),
        ("time per output token", "tpot_s", |r| {
            Cell::si(r.estimate.tpot_s, "s")
        }),
        ("MFU", "mfu", |r| Cell::pct(r.estimate.mfu)),
        ("average power", "average_power_w", |r| {
            Cell::si(r.estimate.average_power_w, "W")
        }),
        ("rated power", "rated_power_w", |r| {
            Cell::si(r.estimate.rated_power_w, "W")
        }),
        ("energy per ONE", "energy_per_unit_j", |r| {
            Cell::si(r.estimate.energy_per_unit_j, "J")
        }),
        ("UNIT per joule", "perf_per_watt", |r| {
            Cell::si(r.estimate.perf_per_watt, "")
        }),
        ("cost per unit of work", "cost_per_unit_usd", |r| {
            Cell::Num(
                r.estimate.cost_per_unit_usd,
                r.estimate
                    .cost_per_unit_usd
                    .map_or("—".into(), crate::report::money),
            )
        }),
        ("carbon per unit of work", "carbon_kg_co2e", |r| {
            Cell::Num(
                r.estimate.carbon_kg_co2e,
                r.estimate
                    .carbon_kg_co2e
                    .map_or("—".into(), |v| format!("{v:.3} kg CO2e")),
            )
        }),
    ];
    cols.into_iter()
        .map(|(h, k, f)| {
            let one = unit.strip_suffix('s').unwrap_or(unit);
            (h.replace("UNIT", unit).replace("ONE", one), k, f)
        })
        .collect()
}

/// The comparison table: one row per system, a column per figure any system has.
fn table(page: &mut Page, c: &Comparison) {
    let unit = c
        .systems
        .first()
        .map_or("unit", |r| r.estimate.throughput_unit);
    let all = num_columns(unit);
    let kept: Vec<_> = all
        .into_iter()
        .filter(|(_, _, f)| {
            c.systems
                .iter()
                .any(|r| matches!(f(r), Cell::Num(Some(_), _)))
        })
        .collect();
    let mut cols = vec![Column::text("system"), Column::text("mapping")];
    cols.extend(kept.iter().map(|(h, k, _)| Column::num(h, k)));
    cols.push(Column::text("bottleneck, or why infeasible"));
    let rows = c
        .systems
        .iter()
        .map(|r| {
            let e = &r.estimate;
            let mut cells = vec![Cell::text(&e.system), Cell::text(mapping(e))];
            cells.extend(kept.iter().map(|(_, _, f)| f(r)));
            cells.push(Cell::text(if e.feasible {
                e.bottleneck.clone().unwrap_or_default()
            } else {
                format!("infeasible: {}", e.reason.clone().unwrap_or_default())
            }));
            let class = if e.feasible {
                "system"
            } else {
                "system infeasible"
            };
            (class.to_string(), e.system.clone(), cells)
        })
        .collect::<Vec<_>>();
    page.table("comparison", &cols, &rows);
}

/// Where a system's figures come from, its file, mapping and validation evidence, in words.
fn assumptions(e: &Estimate, file: Option<&str>) -> Vec<String> {
    let f = &e.figures;
    let total = f.sourced + f.assumed + f.fitted + f.defaulted;
    let mut out = Vec::new();
    if let Some(file) = file {
        out.push(format!("described by {file}"));
    }
    out.push(format!(
        "figures: {} sourced (a datasheet, paper or result named in the file), {} assumed, \
         {} fitted to validation cases, {} left at the model's default — {} in all, {:.0} % \
         of them sourced",
        f.sourced,
        f.assumed,
        f.fitted,
        f.defaulted,
        total,
        100.0 * f.sourced as f64 / (total.max(1)) as f64
    ));
    out.push(format!(
        "mapping: {}{}",
        mapping(e),
        e.mappings_tried
            .map_or(String::new(), |n| format!(" (best of {n} searched)"))
    ));
    if let Some(m) = &e.execution_mode {
        out.push(format!("execution: {m}"));
    }
    out.push(band_line(e));
    out
}

/// The error band in words: how far the model has been from published results on this
/// hardware and task, and the closest published result behind it.
fn band_line(e: &Estimate) -> String {
    match &e.error_band {
        None => "error band: none — no check case covers this hardware family for this task \
                 (unvalidated)"
            .into(),
        Some(b) => {
            let mut s = format!(
                "error band: ±{:.1} % on {} ({}), from {} check case(s) on {}",
                b.relative * 100.0,
                format!("{:?}", b.figure).to_lowercase(),
                format!("{:?}", b.task).to_lowercase(),
                b.cases,
                b.family
            );
            if let Some(a) = &b.anchor {
                s.push_str(&format!(
                    "; closest published result: {} ({} on {}), model error {:+.1} %",
                    a.case,
                    a.workload,
                    a.system,
                    a.error * 100.0
                ));
            }
            s
        }
    }
}

/// The error bands side by side.
fn bands(page: &mut Page, c: &Comparison) {
    let cols = [
        Column::text("system"),
        Column::text("hardware family"),
        Column::text("task, figure"),
        Column::num("band (±)", "error_band.relative"),
        Column::num("check cases", "error_band.cases"),
        Column::text("closest published result"),
        Column::num("its model error", "error_band.anchor.error"),
        Column::text("throughput apart from the baseline's?"),
    ];
    let rows = c
        .systems
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let e = &r.estimate;
            let b = e.error_band.as_ref();
            let apart = match r.ratio_to_baseline.throughput_bands_overlap {
                _ if i == 0 => "— (the baseline)",
                Some(true) => "no: the bands overlap",
                Some(false) => "yes",
                None => "—",
            };
            let cells = vec![
                Cell::text(&e.system),
                Cell::text(b.map_or("— (unvalidated)".into(), |b| b.family.clone())),
                Cell::text(b.map_or(String::new(), |b| {
                    format!("{:?}, {:?}", b.task, b.figure).to_lowercase()
                })),
                Cell::pct(b.map(|b| b.relative)),
                Cell::Num(
                    b.map(|b| b.cases as f64),
                    b.map_or("—".into(), |b| b.cases.to_string()),
                ),
                Cell::text(
                    b.and_then(|b| b.anchor.as_ref())
                        .map_or("—".into(), |a| a.case.clone()),
                ),
                Cell::Num(
                    b.and_then(|b| b.anchor.as_ref()).map(|a| a.error),
                    b.and_then(|b| b.anchor.as_ref())
                        .map_or("—".into(), |a| format!("{:+.1} %", a.error * 100.0)),
                ),
                Cell::text(apart),
            ];
            ("band".to_string(), e.system.clone(), cells)
        })
        .collect::<Vec<_>>();
    page.table("bands", &cols, &rows);
}

/// The comparison `c` as one self-contained HTML page: `files` are the systems' files in the
/// order of `c.systems` (named under each system's assumptions), `pictures` go inline.
pub fn compare_report(c: &Comparison, files: &[String], pictures: &[Picture]) -> String {
    let mut page = Page::new(
        &format!("{} — systems compared", c.workload),
        &format!(
            "tessera compare: {} system(s), baseline {}",
            c.systems.len(),
            c.baseline
        ),
    );
    page.open_section("conditions", "Conditions");
    page.facts(&conditions(c));
    page.close_section();

    page.open_section("comparison", "Comparison");
    table(&mut page, c);
    page.para(
        "note",
        "Each number cell keeps its exact value (data-value) under the JSON key it comes from \
         (data-key); the whole comparison, as `tessera compare --format json` prints it, is \
         embedded at the end of this file (script#tessera-data).",
    );
    page.close_section();

    page.open_section("assumptions", "Assumptions and sources");
    for (i, r) in c.systems.iter().enumerate() {
        page.h3(&r.estimate.system);
        page.facts(&assumptions(&r.estimate, files.get(i).map(String::as_str)));
    }
    page.close_section();

    page.open_section("error-bands", "Error bands");
    page.para(
        "note",
        "A band is the spread of the model's error on the validation check cases of the \
         system's hardware family for this task (tessera validate): a ratio between two \
         systems whose bands overlap is within what the validation can tell apart.",
    );
    bands(&mut page, c);
    page.close_section();

    if !pictures.is_empty() {
        page.open_section("pictures", "Pictures");
        for p in pictures {
            page.figure(&p.svg, &p.caption);
        }
        page.close_section();
    }
    page.data(&super::page::json(c));
    page.finish()
}
