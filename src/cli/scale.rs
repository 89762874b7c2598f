//! `tessera scale --arch A [--arch B …] --workload W --devices 4,8,...`: throughput and scaling
//! efficiency, for one system or several on one chart.

use super::common::{self, si};
use super::plot::PlotArgs;
use super::{Exit, Format};
use std::io::Write;
use tessera::engine::{budget, estimate, Objective};
use tessera::report::compare::{scaling, Scaling};
use tessera::report::records::led;
use tessera::report::render::{Block, Csv, Data, Rendered};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Architecture file; give it more than once to scale several systems side by side.
    #[arg(long, required = true)]
    pub arch: Vec<String>,
    #[arg(long)]
    pub workload: String,
    /// Device counts, comma-separated (with `--power-budget`: the counts that fit an eighth, a
    /// quarter, half and all of the budget).
    #[arg(long, value_delimiter = ',', required_unless_present = "power_budget", value_parser = clap::value_parser!(u64).range(1..))]
    pub devices: Vec<u64>,
    /// A mapping file (dp fills the devices), or `auto` (default: the best mapping at each size).
    #[arg(long)]
    pub mapping: Option<String>,
    #[arg(long, value_parser = common::choice::<Objective>(), default_value = "time")]
    pub objective: Objective,
    #[command(flatten)]
    pub software: common::SoftwareArgs,
    #[command(flatten)]
    pub power: common::PowerArgs,
    /// Overrides by sweep path (`devices` and `nodes` are the scale's own axis here).
    #[command(flatten)]
    pub set: common::SetArgs,
    /// Training on systems that state their reliability: add the time to train with failures,
    /// checkpoints and restarts beside the failure-free one, and draw both against the device
    /// count (`--plot`).
    #[arg(long)]
    pub goodput: bool,
    #[command(flatten)]
    pub goodput_options: common::GoodputArgs,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    #[command(flatten)]
    pub plot: PlotArgs,
}

/// The time to train, failure-free and with failures, and the goodput, of each point.
fn goodput_columns(s: &Scaling, header: &mut Vec<String>, rows: &mut [Vec<String>]) {
    header.extend(
        ["time to train", "with failures", "goodput", "job MTBF"]
            .iter()
            .map(|x| x.to_string()),
    );
    for (p, row) in s.points.iter().zip(rows.iter_mut()) {
        let g = p.estimate.goodput.as_ref();
        row.extend([
            common::duration(p.estimate.time_to_train_s),
            common::duration(g.and_then(|g| g.expected_time_to_train_s)),
            g.map_or("—".into(), |g| format!("{:.1}%", 100.0 * g.fraction)),
            common::duration(g.and_then(|g| g.mtbf_s)),
        ]);
    }
}

pub fn table(s: &Scaling, goodput: bool) -> (Vec<String>, Vec<Vec<String>>) {
    let (mut h, mut r) = rows(s);
    if goodput {
        goodput_columns(s, &mut h, &mut r);
    }
    if s.power_budget_w.is_none() {
        return (h, r);
    }
    // iso-power rows name the share of the budget each is the fastest deployment within
    let header = std::iter::once("within".to_string()).chain(h).collect();
    let rows = s
        .points
        .iter()
        .zip(r)
        .map(|(p, row)| {
            std::iter::once(si(p.within_power_w, "W"))
                .chain(row)
                .collect()
        })
        .collect();
    (header, rows)
}

fn rows(s: &Scaling) -> (Vec<String>, Vec<Vec<String>>) {
    let header: Vec<String> = [
        "devices",
        "mapping (dp×tp×pp×cp)",
        "step time",
        "throughput",
        "per device",
        "scaling efficiency",
        "MFU",
        "power",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows = s
        .points
        .iter()
        .map(|p| {
            let e = &p.estimate;
            if !e.feasible {
                let mut v = vec![
                    p.devices.to_string(),
                    format!("infeasible: {}", e.reason.clone().unwrap_or_default()),
                ];
                v.resize(header.len(), "—".into());
                return v;
            }
            let m = e
                .mapping
                .as_ref()
                .map(|m| format!("{}×{}×{}×{}", m.dp, m.tp, m.pp, m.cp))
                .unwrap_or_default();
            vec![
                p.devices.to_string(),
                m,
                si(e.step_time_s, "s"),
                format!("{} {}/s", si(e.throughput_per_s, ""), e.throughput_unit),
                si(p.throughput_per_device, ""),
                e.scaling_efficiency
                    .map(|x| format!("{:.1}%", x * 100.0))
                    .unwrap_or_default(),
                e.mfu
                    .map(|x| format!("{:.1}%", x * 100.0))
                    .unwrap_or_default(),
                si(e.average_power_w, "W"),
            ]
        })
        .collect();
    (header, rows)
}

pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let w = match common::workload(&a.workload) {
        Ok(w) => w,
        Err(e) => return Ok(e),
    };
    let software = match a.software.load() {
        Ok(s) => s,
        Err(e) => return Ok(e),
    };
    let mut systems = Vec::new();
    for path in &a.arch {
        match common::system(path) {
            Ok(mut s) => {
                s.goodput = a.goodput_options.options();
                let mut s = a
                    .software
                    .lift(common::SoftwareArgs::apply(&software, a.power.apply(s)));
                s.on_vendor_software(&w);
                systems.push(s)
            }
            Err(e) => return Ok(e),
        }
    }
    let choice = match common::mapping_or_auto(a.mapping.as_deref(), &w, a.objective) {
        Ok(c) => c,
        Err(e) => return Ok(e),
    };
    let set = match a.set.parse() {
        Ok(s) => s,
        Err(e) => return Ok(e),
    };
    let mut runs = Vec::new();
    for mut sys in systems {
        let (mut w, mut choice, mut devices) = (w.clone(), choice.clone(), None);
        if let Err(e) = set.apply(&mut sys, &mut w, &mut choice, &mut devices) {
            return Ok(e);
        }
        if devices.is_some() {
            writeln!(
                std::io::stderr(),
                "error: --set devices / nodes: `scale` takes its device counts from `--devices`\n  = hint: drop the override and list the counts in `--devices 8,64,512`"
            )?;
            // two arguments that contradict each other: a usage error
            return Ok(Exit::Usage);
        }
        runs.push((sys, w, choice));
    }
    let series: Vec<Scaling> = runs
        .iter()
        .map(|(sys, w, choice)| {
            let (within, ests): (Vec<Option<f64>>, Vec<_>) = match a.power.power_budget {
                // iso-power: what fractions of the budget hold, and what they deliver
                Some(b) => [0.125, 0.25, 0.5, 1.0]
                    .iter()
                    .filter_map(|f| budget::fit(sys, w, choice, b * f, a.power.budget_basis).ok())
                    .map(|f| (Some(f.power_budget_w), f.estimate))
                    .unzip(),
                None => a
                    .devices
                    .iter()
                    .map(|&n| (None, estimate(sys, w, choice, Some(n))))
                    .unzip(),
            };
            let mut s = scaling(&sys.name, &w.name, ests);
            s.power_budget_w = a.power.power_budget;
            s.power_budget_basis = a
                .power
                .power_budget
                .map(|_| tessera::choice::Choice::name(a.power.budget_basis));
            for (p, b) in s.points.iter_mut().zip(within) {
                p.within_power_w = b;
            }
            s
        })
        .collect();
    a.plot.draw(|size, o| match a.power.power_budget {
        _ if a.goodput => tessera::plot::goodput::time_to_train(&series, size, o),
        Some(_) => tessera::plot::scale::power(&series, size, o),
        None => tessera::plot::scale::scale(&series, size, o),
    })?;
    let several = series.len() > 1;
    // CSV: one row per (system, device count), the points' JSON keys as columns
    let records: Vec<serde_json::Value> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| led(&[("system", &s.system)], p)))
        .collect();
    // JSON: one system keeps the single-object shape; several give an array
    let json: &dyn Data = if several { &series } else { &series[0] };
    let mut doc = Rendered::new(json, Csv::Records(&records));
    doc.markdown(Block::Text(format!("# Scaling: {}\n", w.name)));
    for s in &series {
        doc.terminal(Block::Text(title(s)));
        if let Some(p) = s.points.first() {
            doc.terminal(Block::Text(common::boundary_line(
                p.estimate.power_boundary,
            )));
            if let Some(sw) = &p.estimate.software {
                doc.terminal(Block::Text(format!("software: {sw}")));
            }
        }
        if let Some(b) = s.power_budget_w {
            doc.terminal(Block::Text(format!(
                "power budget: {} of {} power (rows: the fastest whole-node deployment within 1/8, 1/4, 1/2 and all of it; a row repeated: more power would not run it faster)",
                si(Some(b), "W"),
                s.power_budget_basis.unwrap_or("rated")
            )));
        }
        if several {
            doc.markdown(Block::Text(format!("## {}\n", s.system)));
        }
        doc.markdown(Block::Text(format!("{}.\n", title(s))))
            .table(table(s, a.goodput).into())
            .markdown(Block::Text(String::new()));
    }
    if let Some(img) = a.plot.markdown_image(&format!("Scaling of {}", w.name)) {
        doc.markdown(Block::Text(img));
    }
    a.plot.output(out, |out| doc.write(a.format.into(), out))?;
    Ok(Exit::Ok)
}

fn title(s: &Scaling) -> String {
    format!(
        "{} on {} — efficiency against {} devices",
        s.workload,
        s.system,
        s.baseline_devices
            .map(|d| d.to_string())
            .unwrap_or("—".into())
    )
}
