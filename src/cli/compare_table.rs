//! `compare`'s table: one column per system, one row per figure (its unit in the row's header),
//! reasons and notes as numbered footnotes under it, fitted to the terminal's width.

use super::common::{duration, si};
use tessera::report::compare::{CompareRow, Comparison};
use tessera::report::render::Table;

/// The width a table is fitted to without a terminal width (`COLUMNS`).
pub const DEFAULT_WIDTH: usize = 100;

/// The terminal's width: `COLUMNS` where it is set to a number, else [`DEFAULT_WIDTH`].
pub fn width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
        .unwrap_or(DEFAULT_WIDTH)
}

/// What a system's file leaves to a default the table must state.
#[derive(Debug, Clone, Copy, Default)]
pub struct Defaults {
    /// The file states no PUE: 1 is taken (facility power = IT power).
    pub no_pue: bool,
}

/// Footnotes, each given once: the same text marks the same number.
#[derive(Default)]
struct Notes(Vec<String>);

impl Notes {
    fn mark(&mut self, text: String) -> String {
        let i = match self.0.iter().position(|n| *n == text) {
            Some(i) => i,
            None => {
                self.0.push(text);
                self.0.len() - 1
            }
        };
        format!("[{}]", i + 1)
    }
}

fn ratio(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.2}×")).unwrap_or_else(|| "—".into())
}

/// A number with an SI prefix and no unit (the row's header names it).
fn num(v: Option<f64>) -> String {
    si(v, "")
}

/// One row: its label, then each system's cell (`—` for an infeasible system).
fn row(c: &Comparison, label: &str, cell: impl Fn(&CompareRow) -> String) -> Vec<String> {
    std::iter::once(label.to_string())
        .chain(c.systems.iter().map(|r| {
            if r.estimate.feasible {
                cell(r)
            } else {
                "—".into()
            }
        }))
        .collect()
}

/// Serving: requests in flight per device that serves them.
fn per_device(e: &tessera::engine::Estimate) -> Option<f64> {
    let n = e.concurrency? as f64;
    (e.feasible && e.devices > 0).then(|| n / e.devices as f64)
}

/// Serving: requests in flight per kW of rated power at the comparison's boundary.
fn per_rated_kw(e: &tessera::engine::Estimate) -> Option<f64> {
    let n = e.concurrency? as f64;
    let p = e.rated_power_w.filter(|p| *p > 0.0)?;
    e.feasible.then(|| n / (p / 1e3))
}

/// What the rows are counted in: the throughput's unit (`tokens`), one of it (`token`), and
/// whether the systems serve or train to a target.
struct Units<'a> {
    unit: &'a str,
    per: &'a str,
    serving: bool,
    trained: bool,
}

impl<'a> Units<'a> {
    fn of(c: &'a Comparison) -> Units<'a> {
        let unit = c
            .systems
            .iter()
            .find(|r| r.estimate.feasible)
            .or(c.systems.first())
            .map_or("units", |r| r.estimate.throughput_unit);
        Units {
            unit,
            per: unit.trim_end_matches('s'),
            serving: c.systems.iter().any(|r| r.estimate.tpot_s.is_some()),
            trained: c
                .systems
                .iter()
                .any(|r| r.estimate.time_to_train_s.is_some()),
        }
    }
}

/// The devices row: each system's count (and idle ones), marked with the vendor's execution
/// mode where a system runs in one.
fn devices(c: &Comparison, notes: &mut Notes) -> Vec<String> {
    let mut row = std::iter::once("devices".to_string())
        .chain(c.systems.iter().map(|r| {
            let e = &r.estimate;
            if e.idle_devices > 0 {
                format!("{} (+{} idle)", e.devices, e.idle_devices)
            } else {
                e.devices.to_string()
            }
        }))
        .collect::<Vec<_>>();
    for (cell, r) in row[1..].iter_mut().zip(&c.systems) {
        if let Some(x) = &r.estimate.execution_mode {
            // the stack's fitted figures, where the row runs on its vendor's (not on `--software`)
            let figures = match (&c.software, &r.estimate.software) {
                (None, Some(_)) => {
                    let f = super::common::software_line("", r.estimate.software_figures.as_ref());
                    format!(" {}", f.trim_start()).trim_end().to_string()
                }
                _ => String::new(),
            };
            cell.push(' ');
            cell.push_str(&notes.mark(format!(
                "{}: as its vendor runs it, {x}{figures} (`--execution free` lifts it)",
                r.estimate.system
            )));
        }
    }
    row
}

/// Throughput (an infeasible system's reason marked there), its ratio (marked where the error
/// bands overlap) and the error band (marked with the published result nearest it).
fn throughput(c: &Comparison, u: &Units, notes: &mut Notes) -> [Vec<String>; 3] {
    let mut throughput = row(c, &format!("throughput ({}/s)", u.unit), |r| {
        num(r.estimate.throughput_per_s)
    });
    for (cell, r) in throughput[1..].iter_mut().zip(&c.systems) {
        if !r.estimate.feasible {
            let why = r.estimate.reason.clone().unwrap_or_default();
            *cell = format!(
                "infeasible {}",
                notes.mark(format!("{}: {why}", r.estimate.system))
            );
        }
    }
    let mut times = row(c, "× baseline", |r| ratio(r.ratio_to_baseline.throughput));
    for (i, (cell, r)) in times[1..].iter_mut().zip(&c.systems).enumerate() {
        if i > 0 && r.ratio_to_baseline.throughput_bands_overlap == Some(true) {
            cell.push(' ');
            cell.push_str(
                &notes.mark(
                    "within the error bands: the throughputs' validated error bands overlap, so \
                 the model cannot tell the two apart"
                        .into(),
                ),
            );
        }
    }
    let mut band = row(c, "error band", |r| match &r.estimate.error_band {
        Some(b) => format!(
            "±{:.1}% ({} case{})",
            b.relative * 100.0,
            b.cases,
            if b.cases == 1 { "" } else { "s" }
        ),
        None => "unvalidated".into(),
    });
    // the published result behind each band that is nearest the row, for its reader to look up
    for (cell, r) in band[1..].iter_mut().zip(&c.systems) {
        if let Some(a) = r
            .estimate
            .error_band
            .as_ref()
            .and_then(|b| b.anchor.as_ref())
        {
            cell.push(' ');
            cell.push_str(&notes.mark(format!(
                "{}: nearest published result `{}` ({} on {}): model {:+.1}%",
                r.estimate.system,
                a.case,
                a.workload,
                a.system,
                a.error * 100.0
            )));
        }
    }
    [throughput, times, band]
}

/// The load each serves at its best, then the time of a token, of training or of a step, then MFU.
fn times(c: &Comparison, u: &Units) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    if c.concurrency.as_deref() == Some("max") {
        // each at its best: the most users each serves within the target, per device and per
        // provisioned kW
        rows.push(row(c, "requests in flight", |r| {
            r.estimate
                .concurrency
                .map(|n| n.to_string())
                .unwrap_or_else(|| "—".into())
        }));
        rows.push(row(c, "per device", |r| num(per_device(&r.estimate))));
        rows.push(row(c, "per rated kW", |r| num(per_rated_kw(&r.estimate))));
    }
    if u.serving {
        rows.push(row(c, "time per output token", |r| {
            si(r.estimate.tpot_s, "s")
        }));
        rows.push(row(c, "time to first token", |r| {
            si(r.estimate.ttft_s, "s")
        }));
    } else if u.trained {
        rows.push(row(c, "time to train", |r| {
            duration(r.estimate.time_to_train_s)
        }));
    } else {
        rows.push(row(c, "step time", |r| si(r.estimate.step_time_s, "s")));
    }
    rows.push(row(c, "MFU", |r| {
        r.estimate
            .mfu
            .map(|m| format!("{:.1}%", m * 100.0))
            .unwrap_or_else(|| "—".into())
    }));
    rows
}

/// Rated and average power (the budget's basis first; a PUE the facility boundary takes by
/// default marked), energy, performance per watt and its ratio.
fn power(c: &Comparison, u: &Units, defaults: &[Defaults], notes: &mut Notes) -> Vec<Vec<String>> {
    // a default the facility boundary takes is marked where the power is
    let mut power = |label: &str, f: fn(&CompareRow) -> Option<f64>| {
        let mut v = row(c, label, |r| num(f(r)));
        for (i, cell) in v[1..].iter_mut().enumerate() {
            let no_pue = defaults.get(i).is_some_and(|d| d.no_pue);
            if c.systems[i].estimate.feasible && no_pue && c.power_boundary == "facility" {
                cell.push_str(&format!(
                    " {}",
                    notes.mark(format!(
                        "{}: its file states no PUE; 1 is taken (facility power = IT power)",
                        c.systems[i].estimate.system
                    ))
                ));
            }
        }
        v
    };
    let rated = power("rated power (W)", |r| r.estimate.rated_power_w);
    let average = power("average power (W)", |r| r.estimate.average_power_w);
    // the basis a budget was held against first
    let mut rows = if c.power_budget_basis == Some("average") {
        vec![average, rated]
    } else {
        vec![rated, average]
    };
    if u.trained {
        rows.push(row(c, "energy, whole run (J)", |r| {
            num(r.estimate.energy_j)
        }));
    } else {
        rows.push(row(c, &format!("energy (J/{})", u.per), |r| {
            num(r.estimate.energy_per_unit_j)
        }));
    }
    rows.push(row(c, &format!("{}/J", u.unit), |r| {
        num(r.estimate.perf_per_watt)
    }));
    rows.push(row(c, "× baseline", |r| {
        ratio(r.ratio_to_baseline.perf_per_watt)
    }));
    rows
}

/// What a unit of the work costs (a system without capital figures says why in a note), its
/// ratio, and the carbon.
fn cost(c: &Comparison, u: &Units, notes: &mut Notes) -> [Vec<String>; 3] {
    let per_cost = if u.trained {
        "cost, whole run".to_string()
    } else {
        format!("cost (per 1M {})", u.unit)
    };
    let mut cost = row(c, &per_cost, |r| {
        r.estimate
            .cost_per_unit_usd
            .map_or_else(|| "—".into(), tessera::report::money)
    });
    for (cell, r) in cost[1..].iter_mut().zip(&c.systems) {
        let why = r
            .estimate
            .cost
            .as_ref()
            .and_then(|x| x.unknown_reason.clone());
        if let (true, Some(why)) = (r.estimate.cost_per_unit_usd.is_none(), why) {
            *cell = format!("unknown {}", notes.mark(why));
        }
    }
    [
        cost,
        row(c, "× baseline", |r| {
            ratio(r.ratio_to_baseline.cost_per_unit)
        }),
        row(c, "carbon (kg CO2e, same unit)", |r| {
            r.estimate
                .carbon_kg_co2e
                .map_or_else(|| "—".into(), |v| format!("{v:.4}"))
        }),
    ]
}

/// Training on systems that state their reliability: the goodput and the time with failures.
fn goodput(c: &Comparison) -> Vec<Vec<String>> {
    if !c.systems.iter().any(|r| r.estimate.goodput.is_some()) {
        return Vec::new();
    }
    vec![
        row(c, "goodput", |r| {
            r.estimate
                .goodput
                .as_ref()
                .map_or_else(|| "—".into(), |g| format!("{:.1} %", g.fraction * 100.0))
        }),
        row(c, "time to train with failures", |r| {
            duration(
                r.estimate
                    .goodput
                    .as_ref()
                    .and_then(|g| g.expected_time_to_train_s),
            )
        }),
    ]
}

/// `c` as a table: a column per system (`defaults[i]` for the i-th), a row per figure, its
/// footnotes numbered in the order the rows first mention them.
pub fn render(c: &Comparison, defaults: &[Defaults]) -> Table {
    let mut notes = Notes::default();
    let u = Units::of(c);
    let header: Vec<String> = std::iter::once("system".to_string())
        .chain(c.systems.iter().map(|r| r.estimate.system.clone()))
        .collect();
    let mut rows = vec![devices(c, &mut notes)];
    rows.extend(throughput(c, &u, &mut notes));
    rows.extend(times(c, &u));
    rows.extend(power(c, &u, defaults, &mut notes));
    rows.extend(cost(c, &u, &mut notes));
    rows.extend(goodput(c));
    rows.push(row(c, "bottleneck", |r| {
        r.estimate.bottleneck.clone().unwrap_or_else(|| "—".into())
    }));
    Table {
        notes: notes.0,
        ..Table::new(header, rows)
    }
}
