//! `tessera serve-curve A.ron [B.ron …] --workload W`: the throughput-latency curve of serving,
//! per system: tokens/s per user against the system's tokens/s and the energy per token as the
//! requests in flight double from one until the KV cache holds no more, each point at its best
//! mapping for that load (and `--slo` target).

use super::common::{self, si};
use super::plot::PlotArgs;
use super::{Exit, Format};
use std::io::Write;
use tessera::engine::curve::{curve, Curve};
use tessera::engine::Objective;
use tessera::report::records::led;
use tessera::report::render::{Block, Csv, Rendered};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Architecture files, one curve each.
    #[arg(required = true)]
    pub systems: Vec<String>,
    /// A transformer inference workload (its prompt and output lengths).
    #[arg(long, required = true)]
    pub workload: String,
    /// A mapping file for every system, or `auto` (default: the best mapping at each load).
    #[arg(long)]
    pub mapping: Option<String>,
    #[arg(long, value_parser = common::choice::<Objective>(), default_value = "time")]
    pub objective: Objective,
    /// Devices per system (default: all of each system).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub devices: Option<u64>,
    /// The most requests in flight to try (the curve doubles from 1 up to it).
    #[arg(long, default_value_t = 4096)]
    pub max_concurrency: u64,
    #[command(flatten)]
    pub power: common::PowerArgs,
    #[command(flatten)]
    pub set: common::SetArgs,
    /// A latency target every point must meet (`--concurrency` is the curve's own axis).
    #[command(flatten)]
    pub serve: common::ServeArgs,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    #[command(flatten)]
    pub plot: PlotArgs,
    /// `--plot` draws the curve in dollars: cost and carbon per million output tokens against
    /// the time per output token (docs/cost.md), instead of throughput and energy against the
    /// speed per user.
    #[arg(long)]
    pub dollars: bool,
}

pub fn table(c: &[Curve]) -> (Vec<String>, Vec<Vec<String>>) {
    let header: Vec<String> = [
        "system",
        "in flight",
        "mapping (dp×tp×pp)",
        "TTFT",
        "TPOT",
        "tokens/s per user",
        "tokens/s (system)",
        "energy per token",
        "cost per 1M tokens",
        "target",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut rows = Vec::new();
    for x in c {
        for e in &x.points {
            let conc = e
                .concurrency
                .map(|c| c.to_string())
                .unwrap_or_else(|| "—".into());
            if !e.feasible {
                let mut v = vec![
                    x.system.clone(),
                    conc,
                    format!("infeasible: {}", e.reason.clone().unwrap_or_default()),
                ];
                v.resize(header.len(), "—".into());
                rows.push(v);
                continue;
            }
            let m = e
                .mapping
                .as_ref()
                .map(|m| format!("{}×{}×{}", m.dp, m.tp, m.pp))
                .unwrap_or_default();
            rows.push(vec![
                x.system.clone(),
                conc,
                m,
                si(e.ttft_s, "s"),
                si(e.tpot_s, "s"),
                format!("{:.1}", e.user_tokens_per_s.unwrap_or(0.0)),
                si(e.system_tokens_per_s, ""),
                si(e.energy_per_unit_j, "J"),
                e.cost_per_unit_usd
                    .map_or_else(|| "unknown".into(), tessera::report::money),
                match e.slo_met {
                    Some(true) => "met".into(),
                    Some(false) => "not met".into(),
                    None => "—".into(),
                },
            ]);
        }
    }
    (header, rows)
}

pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let mut w = match common::workload(&a.workload) {
        Ok(w) => w,
        Err(e) => return Ok(e),
    };
    if !matches!(w.task, tessera::model::workload::Task::Inference(_)) {
        let _ = writeln!(
            std::io::stderr(),
            "error: `{}` is not a transformer inference workload\nhint: serve-curve draws serving (a workload with `task: Inference(...)`)",
            w.name
        );
        return Ok(Exit::Failed);
    }
    if let Err(e) = a.serve.apply(&mut w) {
        return Ok(e);
    }
    let choice = match common::mapping_or_auto(a.mapping.as_deref(), &w, a.objective) {
        Ok(c) => c,
        Err(e) => return Ok(e),
    };
    let set = match a.set.parse() {
        Ok(s) => s,
        Err(e) => return Ok(e),
    };
    let mut curves = Vec::new();
    for s in &a.systems {
        let Ok(mut sys) = common::system(s).map(|s| a.power.apply(s)) else {
            return Ok(Exit::Failed);
        };
        let (mut w, mut choice, mut devices) = (w.clone(), choice.clone(), a.devices);
        // as the vendor serves it (`estimate` and `compare` do the same): its precision, its stack
        sys.as_its_vendor_runs(&mut w);
        if set
            .apply(&mut sys, &mut w, &mut choice, &mut devices)
            .is_err()
        {
            return Ok(Exit::Failed);
        }
        curves.push(curve(
            &sys,
            &w,
            &choice,
            devices.map(|d| d.min(sys.devices)),
            a.max_concurrency,
        ));
    }
    a.plot.draw(|size, o| {
        if a.dollars {
            tessera::plot::cost::cost_curve(&curves, size, o)
        } else {
            tessera::plot::curve::curve(&curves, size, o)
        }
    })?;
    // CSV: one row per (system, concurrency), the estimates' JSON keys as columns
    let records: Vec<serde_json::Value> = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| led(&[("curve", &c.system)], p)))
        .collect();
    let mut doc = Rendered::new(&curves, Csv::Records(&records));
    let boundary = curves
        .first()
        .and_then(|c| c.points.first())
        .map(|e| e.power_boundary)
        .unwrap_or("facility");
    let slo = curves
        .first()
        .and_then(|c| c.slo.clone())
        .unwrap_or_else(|| "none".into());
    doc.terminal(Block::Text(format!(
        "{} — serving curve, requests in flight doubling from 1",
        w.name
    )))
    .terminal(Block::Text(common::boundary_line(boundary)))
    .terminal(Block::Text(format!("latency target: {slo}")))
    .markdown(Block::Text(format!("# {} — serving curve\n", w.name)))
    .table(table(&curves).into());
    if let Some(img) = a
        .plot
        .markdown_image(&format!("Serving curve of {}", w.name))
    {
        doc.markdown(Block::Text(format!("\n{img}")));
    }
    a.plot.output(out, |out| doc.write(a.format.into(), out))?;
    Ok(Exit::Ok)
}
