//! `validate --report`: a validation run as one HTML page to share — the verdict of the gate,
//! the error statistics by set and hardware family, the error bands the run gives estimates,
//! every case beside its published value and source, the picture inline and the JSON that
//! `validate --format json` prints.

use super::page::{Cell, Column, Page, Picture};
use crate::validate::bands::Bands;
use crate::validate::{CaseResult, Stats, Summary};

fn stats_row(name: &str, s: &Stats) -> (String, String, Vec<Cell>) {
    (
        "group".into(),
        name.to_string(),
        vec![
            Cell::text(name),
            Cell::Num(Some(s.cases as f64), s.cases.to_string()),
            Cell::Num(Some(s.within as f64), s.within.to_string()),
            Cell::pct(Some(s.mape)),
            Cell::pct(Some(s.max_abs_error)),
            Cell::text(s.worst.clone().unwrap_or_default()),
        ],
    )
}

fn stats_columns() -> Vec<Column> {
    vec![
        Column::text("group"),
        Column::num("cases", "cases"),
        Column::num("within tolerance", "within"),
        Column::num("MAPE", "mape"),
        Column::num("largest |error|", "max_abs_error"),
        Column::text("largest"),
    ]
}

/// The run's error bands: one row per hardware family, task and figure.
fn bands_table(page: &mut Page, b: &Bands) {
    let cols = [
        Column::text("hardware family"),
        Column::text("task"),
        Column::text("figure"),
        Column::text("software"),
        Column::num("band (±)", "relative"),
        Column::num("check cases", "cases"),
        Column::text("largest miss behind it"),
    ];
    let rows = b
        .bands
        .iter()
        .map(|e| {
            let worst = e
                .members
                .iter()
                .max_by(|x, y| x.error.abs().total_cmp(&y.error.abs()))
                .map_or("—".into(), |a| {
                    format!("{} ({:+.1} %)", a.case, a.error * 100.0)
                });
            (
                "band".to_string(),
                e.family.clone(),
                vec![
                    Cell::text(&e.family),
                    Cell::text(format!("{:?}", e.task).to_lowercase()),
                    Cell::text(format!("{:?}", e.figure).to_lowercase()),
                    Cell::text(e.software.clone().unwrap_or_else(|| "—".into())),
                    Cell::pct(Some(e.relative)),
                    Cell::Num(Some(e.cases as f64), e.cases.to_string()),
                    Cell::text(worst),
                ],
            )
        })
        .collect::<Vec<_>>();
    page.table("bands", &cols, &rows);
}

/// Every case: published against predicted, its tolerance, its role and its source.
fn cases_table(page: &mut Page, results: &[&CaseResult]) {
    let cols = [
        Column::text("case"),
        Column::text("hardware family"),
        Column::text("metric"),
        Column::num("published", "published"),
        Column::num("predicted", "predicted"),
        Column::num("error", "error"),
        Column::num("tolerance (±)", "tolerance"),
        Column::text("within"),
        Column::text("role"),
        Column::text("source"),
    ];
    let rows = results
        .iter()
        .map(|r| {
            let unit = r.metric.unit();
            let class = match (r.within, r.known_gap) {
                (true, _) => "case",
                (false, true) => "case outside known-gap",
                (false, false) => "case outside",
            };
            (
                class.to_string(),
                r.id.clone(),
                vec![
                    Cell::text(&r.id),
                    Cell::text(&r.family),
                    Cell::text(r.metric.name()),
                    Cell::si(Some(r.published), unit),
                    Cell::si(r.predicted, unit),
                    Cell::Num(
                        r.error,
                        r.error
                            .map_or("—".into(), |e| format!("{:+.1} %", e * 100.0)),
                    ),
                    Cell::pct(Some(r.tolerance)),
                    Cell::text(match (r.within, r.known_gap) {
                        (true, _) => "yes",
                        (false, true) => "no (known gap, not gated)",
                        (false, false) => "NO",
                    }),
                    Cell::text(format!(
                        "{}{}",
                        r.role.name(),
                        if r.fitted { ", fitted" } else { "" }
                    )),
                    Cell::text(&r.source),
                ],
            )
        })
        .collect::<Vec<_>>();
    page.table("cases", &cols, &rows);
}

/// The validation run (`results`, their `summary`, the error bands they give) as one
/// self-contained HTML page with `pictures` inline.
pub fn validate_report(
    results: &[CaseResult],
    summary: &Summary,
    bands: &Bands,
    pictures: &[Picture],
) -> String {
    let (gated, gaps): (Vec<&CaseResult>, Vec<&CaseResult>) =
        results.iter().partition(|r| !r.known_gap);
    let verdict = summary.verdict(if summary.pass { "PASS" } else { "FAIL" }, " ");
    let mut page = Page::new(
        "tessera validate: predicted against published",
        &format!("{} case(s) run", results.len()),
    );
    page.open_section("summary", "Summary");
    page.para("verdict", &verdict);
    let rows: Vec<_> = summary
        .headline()
        .into_iter()
        .map(|(name, st)| stats_row(name, st))
        .collect();
    page.table("summary", &stats_columns(), &rows);
    page.h3("Check set by hardware family");
    let fam: Vec<_> = summary
        .check_by_family
        .iter()
        .map(|g| stats_row(&g.name, &g.stats))
        .collect();
    page.table("by-family", &stats_columns(), &fam);
    page.close_section();

    page.open_section("error-bands", "Error bands");
    page.para(
        "note",
        &format!("{} {}", "How a band is taken:", bands.statistic),
    );
    bands_table(&mut page, bands);
    page.close_section();

    if !pictures.is_empty() {
        page.open_section("pictures", "Pictures");
        for p in pictures {
            page.figure(&p.svg, &p.caption);
        }
        page.close_section();
    }

    page.open_section("cases", "Cases");
    cases_table(&mut page, &gated);
    if !gaps.is_empty() {
        page.h3("Known gaps (reported, not gated)");
        cases_table(&mut page, &gaps);
    }
    page.close_section();
    let data = serde_json::json!({
        "cases": gated,
        "summary": summary,
        "known_gaps": gaps,
    });
    page.data(&super::page::json(&data));
    page.finish()
}
