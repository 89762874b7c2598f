//! `tessera compare A.ron B.ron ... --workload W`: systems side by side, with ratios to the first.

use super::common::{self, si};
use super::compare_table::{self, Defaults};
use super::plot::{svg_string, PlotArgs, ReportArgs};
use super::{Exit, Format};
use std::io::Write;
use tessera::engine::{MappingChoice, Objective};
use tessera::report::compare::Comparison;
use tessera::report::render::{Block, Csv, Rendered};
use tessera::request::Request;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Architecture files; the first is the baseline.
    #[arg(required = true)]
    pub systems: Vec<String>,
    #[arg(long, required = true)]
    pub workload: String,
    /// A mapping file for every system, or `auto` (default: each system's best mapping).
    #[arg(long)]
    pub mapping: Option<String>,
    #[arg(long, value_parser = common::choice::<Objective>(), default_value = "time")]
    pub objective: Objective,
    /// Devices per system, or `all`. Default: all of each system, but for a serving workload at
    /// a stated load (requests in flight), the fewest whole devices of each system that serve it
    /// within the latency target (powers of two below a node, then whole nodes); `all` keeps
    /// every device.
    #[arg(long, value_parser = devices_arg)]
    pub devices: Option<Devices>,
    #[command(flatten)]
    pub software: common::SoftwareArgs,
    #[command(flatten)]
    pub power: common::PowerArgs,
    /// A capital budget ("$10M", "10 MUSD"): each system as many whole nodes as its deployed
    /// capital allows (the system file's `cost`; docs/cost.md), beside `--power-budget`.
    #[arg(long, value_parser = cost_quantity)]
    pub budget: Option<f64>,
    #[command(flatten)]
    pub set: common::SetArgs,
    /// Serving: every system at the same requests in flight (default: those `estimate` runs on
    /// the first system) and the same latency target.
    #[command(flatten)]
    pub serve: common::ServeArgs,
    /// Training goodput on systems that state their reliability: the checkpoint interval and
    /// the stragglers' slowdown, every system alike (as `estimate` takes them).
    #[command(flatten)]
    pub goodput: common::GoodputArgs,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    #[command(flatten)]
    pub plot: PlotArgs,
    #[command(flatten)]
    pub report: ReportArgs,
}

/// The line stating the budget and what it is held against.
fn budget_line(b: f64, basis: Option<&str>) -> String {
    let against = match basis {
        Some("average") => "each system's modelled average power (rated power beside it)",
        _ => {
            "the rated power of what each system deploys, as a facility provisions it \
             (average power beside it)"
        }
    };
    format!(
        "power budget: {} per system, as many whole nodes as fit, held against {against}",
        si(Some(b), "W")
    )
}

fn cost_quantity(s: &str) -> Result<f64, String> {
    tessera::request::cost_budget(s)
}

/// `--devices`: a count, or every device of each system.
#[derive(Clone, Copy, Debug)]
pub enum Devices {
    Count(u64),
    All,
}

fn devices_arg(s: &str) -> Result<Devices, String> {
    match s {
        "all" => Ok(Devices::All),
        _ => match s.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Devices::Count(n)),
            _ => Err("a positive device count, or `all`".into()),
        },
    }
}

/// The lines above the table: what was compared, at which boundary, load, budget and batch.
fn head_lines(c: &Comparison) -> Vec<String> {
    let mut head = vec![format!("{} — baseline: {}", c.workload, c.baseline)];
    head.push(common::boundary_line(c.power_boundary));
    if let Some(sw) = &c.software {
        let figures = c
            .systems
            .first()
            .and_then(|r| r.estimate.software_figures.as_ref());
        head.push(format!(
            "software: {} (every system)",
            common::software_line(sw, figures)
        ));
    }
    if let Some(l) = &c.concurrency {
        head.push(format!(
            "load: {} requests in flight on every system; latency target: {}",
            if l == "max" { "as many" } else { l },
            c.slo.as_deref().unwrap_or("none")
        ));
    }
    if let Some(b) = c.power_budget_w {
        head.push(budget_line(b, c.power_budget_basis));
    }
    if let (Some(gb), Some(from)) = (c.global_batch, c.global_batch_scaled_from) {
        let x = gb as f64 / from as f64;
        let times = if x.fract() == 0.0 {
            format!("{x:.0}")
        } else {
            format!("{x:.2}")
        };
        head.push(format!(
            "global batch: {gb} samples on every system, scaled with the deployment \
             from the workload's {from} (×{times}; the largest any system's fit grew it to)",
        ));
    }
    if let Some(b) = c.budget_usd {
        head.push(format!(
            "capital budget: {} per system, as many whole nodes as its deployed capital allows (docs/cost.md)",
            tessera::report::money(b)
        ));
    }
    head
}

pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let mut w = match common::workload(&a.workload) {
        Ok(w) => w,
        Err(e) => return Ok(e),
    };
    let count = match a.devices {
        Some(Devices::Count(n)) => Some(n),
        _ => None,
    };
    let mut req = common::request(a.objective, count, &a.power, &a.serve, &a.set);
    req.all_devices = matches!(a.devices, Some(Devices::All));
    req.cost_budget = a.budget;
    req.goodput = a.goodput.options();
    req.mapping = match common::mapping_arg(a.mapping.as_deref()) {
        Ok(m) => m,
        Err(e) => return Ok(e),
    };
    req.software = match a.software.load() {
        Ok(s) => s,
        Err(e) => return Ok(e),
    };
    req.execution = a.software.execution;
    let mut systems = Vec::new();
    let mut defaults = Vec::new();
    let mut failed = false;
    for s in &a.systems {
        match common::system(s) {
            Ok(sys) => {
                defaults.push(Defaults {
                    no_pue: sys.pue == 1.0,
                });
                systems.push(sys);
            }
            Err(_) => failed = true,
        }
    }
    if failed {
        return Ok(Exit::Failed);
    }
    // one load for every system: the requests `estimate` runs on the first (`compare_load`)
    if let Some(first) = systems.first() {
        if let Err(m) = req.compare_load(&mut w, first) {
            return Ok(common::load_failed(m));
        }
    }
    let choice = req.choice(&w, Request::COMPARE_DEFAULT);
    // each system with the same overrides (its own paths resolved against it)
    let c = match req.compare_at_load(&systems, &w, &choice) {
        Ok(c) => c,
        Err(tessera::request::Refused::Set(diags)) => return Ok(common::set_failed(&diags)),
        Err(tessera::request::Refused::Load(m)) => return Ok(common::load_failed(m)),
    };
    a.plot
        .draw(|size, o| tessera::plot::compare::compare(&c, size, o))?;
    if a.report.report.is_some() {
        let svg = svg_string(|o| tessera::plot::compare::compare(&c, a.plot.plot_size, o))?;
        a.report.write(|| {
            let pictures = [tessera::report::html::page::Picture {
                svg,
                caption: format!(
                    "Systems against {}: throughput, performance per watt and energy as ratios, \
                     and where the time per unit of work goes",
                    c.baseline
                ),
            }];
            tessera::report::html::compare::compare_report(&c, &a.systems, &pictures)
        })?;
    }
    let width = compare_table::width();
    let mut table = compare_table::render(&c, &defaults);
    table.width = Some(width);
    let mut doc = Rendered::new(&c, Csv::Records(&c.systems));
    for l in head_lines(&c) {
        doc.terminal(Block::Text(tessera::report::wrap_text(&l, width, 2)));
    }
    doc.markdown(Block::Text(format!("# {}\n", c.workload)))
        .markdown(Block::Text(format!("Baseline: {}.\n", c.baseline)))
        .table(table);
    if matches!(choice, MappingChoice::Auto(_)) {
        let l = format!(
            "each system with its best mapping (--mapping auto, objective: {:?})",
            a.objective
        );
        doc.terminal(Block::Text(tessera::report::wrap_text(&l, width, 2)));
    }
    if let Some(img) = a
        .plot
        .markdown_image(&format!("Comparison on {}", c.workload))
    {
        doc.markdown(Block::Text(format!("\n{img}")));
    }
    a.plot.output(out, |out| doc.write(a.format.into(), out))?;
    Ok(Exit::Ok)
}
