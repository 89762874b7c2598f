//! `tessera estimate --arch A --workload W`: how fast, how efficient, at what power.

use super::common::{self, duration, si};
use super::{Exit, Format};
use std::io::Write;
use tessera::engine::{outcome, prepare, Estimate, MappingReport, Prepared};
use tessera::report::render::{Block, Csv, Rendered, Table};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub run: common::RunArgs,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Also draw where the layers sit on the device's mesh of cores (a wafer) as an SVG picture
    /// into FILE: one region per pipeline stage, coloured and numbered in pipeline order.
    #[arg(long, value_name = "FILE.svg")]
    pub placement_svg: Option<std::path::PathBuf>,
    /// Size of the placement picture in pixels.
    #[arg(long, value_name = "WIDTHxHEIGHT", default_value = "800x500")]
    pub placement_size: tessera::plot::Size,
}

/// The goodput lines: the fraction and expected time to train, then what makes them.
fn goodput_rows(g: &tessera::engine::goodput::Goodput) -> Vec<(String, String)> {
    let interval = match g.checkpoint_interval_s {
        Some(t) => format!(
            "every {}{}",
            duration(Some(t)),
            if g.checkpoint_interval_auto {
                format!(
                    " (optimal; Young/Daly √(2δM) {})",
                    duration(g.young_daly_interval_s)
                )
            } else {
                String::new()
            }
        ),
        None => "none (no failures)".into(),
    };
    vec![
        (
            "goodput".into(),
            format!(
                "{:.1} % ({}): expected time to train {}",
                100.0 * g.fraction,
                if g.failures_included {
                    "failures, checkpoints, stragglers"
                } else {
                    "checkpoints and stragglers; failures left out"
                },
                duration(g.expected_time_to_train_s)
            ),
        ),
        (
            "failures".into(),
            match g.mtbf_s {
                Some(m) => format!(
                    "job MTBF {}{} ({})",
                    duration(Some(m)),
                    g.expected_interruptions.map_or(String::new(), |n| format!(
                        ", {n:.1} interruptions expected"
                    )),
                    g.reliability
                ),
                None => "left out".into(),
            },
        ),
        (
            "checkpoints".into(),
            format!(
                "{} each, written in {}, read in {}; restart {}; {interval}",
                si(Some(g.checkpoint_bytes), "B"),
                duration(Some(g.checkpoint_write_s)),
                duration(Some(g.checkpoint_read_s)),
                duration(Some(g.restart_s)),
            ),
        ),
    ]
}

pub fn rows(e: &Estimate) -> Vec<(String, String)> {
    let mut r = vec![
        ("system".to_string(), e.system.clone()),
        ("workload".into(), e.workload.clone()),
    ];
    match &e.software {
        Some(sw) => {
            let line = common::software_line(sw, e.software_figures.as_ref());
            r.push((
                "software".into(),
                match &e.attention_kernel {
                    Some(k) => format!("{line}; attention on {k}"),
                    None => line,
                },
            ));
        }
        None => r.push((
            "software".into(),
            if e.global_batch.is_some() {
                "none named: the hardware alone, no per-step cost and no attention kernel (`--software FILE` names a stack)"
            } else {
                "none named: the hardware alone (`--software FILE` names a stack)"
            }
            .into(),
        )),
    }
    r.extend([
        (
            "devices".into(),
            if e.idle_devices > 0 {
                format!(
                    "{} ({} of the {} offered left idle: the job is faster on fewer)",
                    e.devices,
                    e.idle_devices,
                    e.devices + e.idle_devices
                )
            } else {
                e.devices.to_string()
            },
        ),
        (
            "feasible".into(),
            if e.feasible {
                "yes".into()
            } else {
                format!("no: {}", e.reason.clone().unwrap_or_default())
            },
        ),
    ]);
    if let Some(m) = &e.mapping {
        r.extend(mapping_rows(m));
    }
    if e.feasible {
        r.extend(speed_rows(e));
        r.extend(power_rows(e));
        r.extend(where_rows(e));
    }
    if let Some(s) = e.scaling_efficiency {
        r.push(("scaling efficiency".into(), format!("{:.1}%", s * 100.0)));
    }
    r
}

/// The mapping as chosen: its parallel degrees and settings, stages, wafer blocks and offload.
fn mapping_rows(m: &MappingReport) -> Vec<(String, String)> {
    let mut r = Vec::new();
    r.push((
        "mapping".into(),
        format!(
            "dp {} × tp {} × pp {} × cp {} (ep {}{}, interleave {}, micro-batch {}, ZeRO {}{}, recompute {}{}{}{}{})",
            m.dp, m.tp, m.pp, m.cp, m.ep,
            // expert tensor parallelism, where it differs from tp (MoE parallel folding)
            if m.etp != m.tp { format!(", etp {}", m.etp) } else { String::new() },
            m.interleave, m.micro_batch, m.zero,
            // hybrid sharding, where the shard group is smaller than dp × cp
            m.hybrid_shard().map_or(String::new(), |g| format!(" sharded over {g}")),
            m.recompute,
            // the first layers of each model chunk only (Megatron-Core's block method)
            m.recompute_layers.map_or(String::new(), |n| format!(" on {n} layers a chunk")),
            if m.sp { ", sequence parallel" } else { "" },
            // how userbuffer overlap runs the row-parallel GEMMs, where it is in effect
            match m.tp_overlap_method {
                Some(tessera::vocab::TpOverlapMethod::Pipeline) => ", tp overlap: pipeline",
                Some(tessera::vocab::TpOverlapMethod::RingExchange) => {
                    ", tp overlap: ring exchange"
                }
                None => "",
            },
            // the devices' order where it is not Megatron's, innermost first
            m.unusual_order().map_or(String::new(), |o| format!(", order {o}"))
        ),
    ));
    if let Some(st) = &m.stages {
        r.push(("pipeline stages".into(), st.clone()));
    }
    if let Some(blocks) = m.core_regions() {
        r.push(("core blocks (wafer)".into(), blocks));
    }
    if let Some(what) = offloaded(m, true) {
        r.push(("offloaded to host memory".into(), what));
    }
    r
}

/// How fast: step, throughput, time to train, goodput, error band, serving latency and MFU.
fn speed_rows(e: &Estimate) -> Vec<(String, String)> {
    let mut r = Vec::new();
    r.push(("step time".into(), si(e.step_time_s, "s")));
    r.push((
        "throughput".into(),
        format!(
            "{}/s",
            si(e.throughput_per_s, "").trim_end().to_string() + " " + e.throughput_unit
        ),
    ));
    r.push(("time to train".into(), duration(e.time_to_train_s)));
    if let Some(g) = &e.goodput {
        r.extend(goodput_rows(g));
    }
    r.push(("error band (validated)".into(), band_words(e)));
    if let Some(l) = e.latency_per_token_s {
        r.push((
            "time per output token (per user)".into(),
            format!("{} ({:.0} tokens/s per user)", si(Some(l), "s"), 1.0 / l),
        ));
    }
    if let (Some(c), Some(t)) = (e.concurrency, e.ttft_s) {
        r.push((
            "serving".into(),
            format!(
                "{c} requests in flight ({} + {} tokens each; KV cache holds {}): time to first token {} (prefill {}), {:.0} tokens/s per system",
                e.prompt_tokens.unwrap_or(0),
                e.output_tokens.unwrap_or(0),
                e.max_concurrency.map(|m| m.to_string()).unwrap_or_else(|| "—".into()),
                si(Some(t), "s"),
                si(e.prefill_time_s, "s"),
                e.system_tokens_per_s.unwrap_or(0.0)
            ),
        ));
    }
    if let Some(slo) = &e.slo {
        r.push((
            "latency target".into(),
            format!(
                "{slo}: {}",
                match e.slo_met {
                    Some(true) => "met",
                    Some(false) => "not met",
                    None => "—",
                }
            ),
        ));
    }
    r.push((
        "MFU".into(),
        e.mfu
            .map(|m| format!("{:.1}%", m * 100.0))
            .unwrap_or_default(),
    ));
    r
}

/// What it draws and costs: power at the boundary, the device's clock, energy, cost, perf per watt.
fn power_rows(e: &Estimate) -> Vec<(String, String)> {
    let mut r = Vec::new();
    r.push((
        format!("average power ({})", e.power_boundary),
        si(e.average_power_w, "W"),
    ));
    r.push((
        format!("rated power ({})", e.power_boundary),
        si(e.rated_power_w, "W"),
    ));
    if let (Some(dev), Some(lim), Some(s)) = (e.device_power_w, e.device_power_limit_w, e.throttle)
    {
        let state = if s < 1.0 {
            format!(
                "power-limited: clock at {:.1}% (would draw {})",
                100.0 * s,
                si(e.demanded_device_power_w, "W")
            )
        } else {
            "full clock".into()
        };
        r.push((
            "device power".into(),
            format!(
                "{} of a {} limit, {state}",
                si(Some(dev), "W"),
                si(Some(lim), "W")
            ),
        ));
    }
    r.push((
        if e.time_to_train_s.is_some() {
            "energy (run)"
        } else {
            "energy (step)"
        }
        .into(),
        format!(
            "{} ({:.3} MWh)",
            si(e.energy_j, "J"),
            e.energy_j.unwrap_or(0.0) / 3.6e9
        ),
    ));
    r.extend(cost_rows(e));
    r.push((
        "perf per watt".into(),
        format!(
            "{:.3} {}/s/W",
            e.perf_per_watt.unwrap_or(0.0),
            e.throughput_unit
        ),
    ));
    r
}

/// Where the time and memory go: breakdown, bottleneck, memory per device and placement.
fn where_rows(e: &Estimate) -> Vec<(String, String)> {
    let mut r = Vec::new();
    if let Some(b) = &e.breakdown_s {
        r.push((
            "breakdown".into(),
            format!(
                "compute {}, memory {}, communication {}, bubble {}, other {}",
                si(Some(b.compute), "s"),
                si(Some(b.memory), "s"),
                si(Some(b.communication), "s"),
                si(Some(b.bubble), "s"),
                si(Some(b.other), "s")
            ),
        ));
    }
    r.push((
        "bottleneck".into(),
        format!(
            "{} — {}",
            e.bottleneck.clone().unwrap_or_default(),
            e.bottleneck_detail.clone().unwrap_or_default()
        ),
    ));
    r.push((
        "memory per device".into(),
        si(e.memory_per_device_bytes, "B"),
    ));
    if let Some(h) = e.host_memory_per_device_bytes.filter(|h| *h > 0.0) {
        let what = e.mapping.as_ref().and_then(|m| offloaded(m, false));
        r.push((
            "host memory per device".into(),
            format!(
                "{} (offloaded {})",
                si(Some(h), "B"),
                what.unwrap_or_else(|| "data".into())
            ),
        ));
    }
    r.push(("placement".into(), e.placement.clone().unwrap_or_default()));
    r
}

/// What a training mapping keeps in host memory, in words (`None`: nothing): with `how_much`,
/// the layers and the share of the state.
fn offloaded(m: &tessera::engine::MappingReport, how_much: bool) -> Option<String> {
    let mut parts = Vec::new();
    if m.offload_activation_layers > 0 {
        parts.push(if how_much {
            format!(
                "activations of {} layers per stage",
                m.offload_activation_layers
            )
        } else {
            "activations".into()
        });
    }
    if m.offload_optimizer > 0.0 {
        parts.push(if how_much {
            format!(
                "{:.0}% of the optimizer state, updated by the host",
                m.offload_optimizer * 100.0
            )
        } else {
            "optimizer state".into()
        });
    }
    if m.offload_weights {
        parts.push(if how_much {
            "the layers' weights, copied in per layer".into()
        } else {
            "weights".into()
        });
    }
    (!parts.is_empty()).then(|| parts.join(if how_much { "; " } else { ", " }))
}

/// The error band of the throughput and times, in words.
pub fn band_words(e: &tessera::engine::Estimate) -> String {
    match &e.error_band {
        Some(b) => format!(
            "±{:.1}% (throughput and times; {} {} check case{} of {})",
            b.relative * 100.0,
            b.cases,
            match b.task {
                tessera::validate::bands::TaskKind::Training => "training",
                tessera::validate::bands::TaskKind::Serving => "serving",
                tessera::validate::bands::TaskKind::Kernel => "kernel",
            },
            if b.cases == 1 { "" } else { "s" },
            b.family
        ),
        None => "unvalidated (no check case covers this system's family for this task)".into(),
    }
}

/// The estimate's cost and carbon rows: per unit, with their parts (`docs/cost.md`).
pub fn cost_rows(e: &Estimate) -> Vec<(String, String)> {
    let Some(c) = &e.cost else {
        return Vec::new();
    };
    let usd = |v: f64| tessera::report::money(v);
    let cost = match e.cost_per_unit_usd {
        Some(v) => format!(
            "{} (capital {}, energy {} at {:.3} $/kWh){}",
            usd(v),
            usd(c.capital_usd.unwrap_or(0.0)),
            usd(c.energy_usd),
            c.energy_price_usd_per_kwh,
            c.rented_usd
                .map_or(String::new(), |r| format!("; rented {}", usd(r)))
        ),
        None => format!(
            "unknown: {}{}",
            c.unknown_reason.as_deref().unwrap_or("no capital figures"),
            c.rented_usd
                .map_or(String::new(), |r| format!("; rented {}", usd(r)))
        ),
    };
    let carbon = format!(
        "{:.4} kg CO2e (operational {:.4} at {:.3} kg/kWh{})",
        e.carbon_kg_co2e.unwrap_or(0.0),
        c.operational_kg_co2e,
        c.grid_kg_co2e_per_kwh,
        match c.embodied_kg_co2e {
            Some(x) => format!(", embodied {x:.4}"),
            None => ", no embodied figure".into(),
        }
    );
    vec![
        (format!("cost (per {})", c.per), cost),
        (format!("carbon (per {})", c.per), carbon),
    ]
}

/// The search's best mappings (a table shows them): the line that introduces them, and the five.
fn searched(res: &tessera::engine::search::SearchResult) -> (String, Table) {
    let rows: Vec<Vec<String>> = res
        .ranked
        .iter()
        .take(5)
        .enumerate()
        .map(|(i, (m, ev))| {
            vec![
                (i + 1).to_string(),
                m.dp.to_string(),
                m.tp.to_string(),
                m.pp.to_string(),
                m.cp.to_string(),
                m.interleave.to_string(),
                m.micro_batch.to_string(),
                m.recompute.to_string(),
                si(Some(ev.step_time), "s"),
                si(Some(ev.throughput), "/s"),
            ]
        })
        .collect();
    let title = match res.slo_met {
        Some(false) => format!(
            "\nno mapping meets the latency target: the closest ({} tried, {} feasible):",
            res.tried,
            res.ranked.len()
        ),
        Some(true) => format!(
            "\nbest mappings that meet the latency target, of {} tried ({} meet it):",
            res.tried,
            res.ranked.len()
        ),
        None => format!(
            "\nbest mappings of {} tried ({} feasible):",
            res.tried,
            res.ranked.len()
        ),
    };
    let header = [
        "rank",
        "dp",
        "tp",
        "pp",
        "cp",
        "v",
        "mb",
        "recompute",
        "step time",
        "throughput",
    ];
    (title, Table::of(&header, rows))
}

pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let (sys, w, choice, devices) = match a.run.load() {
        Ok(x) => x,
        Err(e) => return Ok(e),
    };
    let prep = prepare(&sys, &w, &choice, devices);
    let mut e = outcome(&sys, &w, &prep);
    tessera::validate::bands::Bands::shipped().attach(&sys, &w, &mut e);
    if let Some(path) = &a.placement_svg {
        let picture = match &prep {
            Ok(p) => tessera::report::placement::placement(
                &sys,
                &w.name,
                &p.program,
                &p.machine,
                p.mapping.dp,
            )
            .ok_or_else(|| {
                format!(
                    "{}'s device has no mesh of cores: the placement picture draws a mesh device (a wafer)",
                    sys.name
                )
            }),
            Err(inf) => Err(format!("no placement to draw: {}", inf.reason)),
        };
        match picture {
            Ok(pl) => {
                let args = super::plot::PlotArgs {
                    plot: Some(path.clone()),
                    plot_size: a.placement_size,
                    out: None,
                };
                args.draw(|size, o| tessera::plot::placement::placement(&pl, size, o))?;
            }
            Err(msg) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "error: {msg}\nhint: drop --placement-svg, or estimate on a system whose device declares a `mesh`"
                );
                return Ok(Exit::Failed);
            }
        }
    }
    let mut report = Rendered::new(&e, Csv::Records(&e));
    report.table(Table::kv(rows(&e)));
    if let Ok(Prepared {
        search: Some(res), ..
    }) = &prep
    {
        let (title, table) = searched(res);
        report
            .terminal(Block::Text(title))
            .terminal(Block::Table(table));
    }
    report.write(a.format.into(), out)?;
    Ok(Exit::Ok)
}
