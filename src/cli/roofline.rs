//! `tessera roofline --arch A --workload W [--plot roofline.svg]`: the device's hierarchical
//! roofline with every operator of the workload on it, as a table and optionally a picture.

use super::common::{self, si};
use super::plot::PlotArgs;
use super::{Exit, Format};
use std::io::Write;
use tessera::engine::prepare;
use tessera::report::render::{Block, Csv, Rendered};
use tessera::report::roofline::{roofline, Roofline};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub run: common::RunArgs,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    #[command(flatten)]
    pub plot: PlotArgs,
}

/// The per-operator table: one row per operator, numbered as on the plot.
pub fn table(r: &Roofline) -> (Vec<String>, Vec<Vec<String>>) {
    let header = [
        "#",
        "operator",
        "phase",
        "format",
        "FLOPs",
        "occupancy",
        "bytes",
        "intensity (FLOP/B)",
        "achieved",
        "share of step",
        "bound by",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows = r
        .ops
        .iter()
        .map(|o| {
            vec![
                o.index.to_string(),
                o.name.clone(),
                o.phase.to_string(),
                format!("{} {}", o.precision, o.engine),
                si(Some(o.flops), "FLOP"),
                if o.engine == "matrix" {
                    format!("{:.0}%", o.occupancy * 100.0)
                } else {
                    "—".into()
                },
                si(Some(o.bytes), "B"),
                o.intensity
                    .map(|i| format!("{i:.2}"))
                    .unwrap_or_else(|| "—".into()),
                si(o.achieved_flops_per_s, "FLOP/s"),
                format!("{:.1}%", o.share_of_step * 100.0),
                o.bound_by.clone(),
            ]
        })
        .collect();
    (header, rows)
}

/// Roofs and ceilings, one row each.
pub fn limits(r: &Roofline) -> (Vec<String>, Vec<Vec<String>>) {
    let header = ["limit", "kind", "peak per device", "holds"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut rows: Vec<Vec<String>> = r
        .roofs
        .iter()
        .map(|l| {
            vec![
                l.level.clone(),
                if l.cache {
                    "cache".into()
                } else {
                    l.kind.clone()
                },
                si(Some(l.bandwidth_bytes_per_s), "B/s"),
                l.holds.clone().unwrap_or_default(),
            ]
        })
        .collect();
    rows.extend(r.ceilings.iter().map(|c| {
        vec![
            c.label.clone(),
            format!("{} engine", c.engine),
            si(Some(c.flops_per_s), "FLOP/s"),
            String::new(),
        ]
    }));
    (header, rows)
}

/// One core of a mesh device: its rates, its SRAM, its links.
fn per_core(m: &tessera::report::system::MeshSummary) -> String {
    let peaks: Vec<String> = m
        .per_core_peak_flops_per_s
        .iter()
        .map(|(p, v)| format!("{p} {}", si(Some(*v), "FLOP/s")))
        .collect();
    format!(
        "per core ({:?} mesh): {}; SRAM {} at {}; links {} per direction, {} per hop",
        m.dims,
        peaks.join(", "),
        si(Some(m.per_core_sram_bytes), "B"),
        si(Some(m.per_core_sram_bandwidth_bytes_per_s), "B/s"),
        si(Some(m.link_bandwidth_bytes_per_s), "B/s"),
        si(Some(m.hop_latency_s), "s")
    )
}

/// The regions of cores the stages got, consecutive regions of one stage class in one row.
pub fn regions(r: &Roofline) -> (Vec<String>, Vec<Vec<String>>) {
    let header = [
        "regions",
        "stage",
        "cores each",
        "busiest mesh link per step",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut k = 0;
    while k < r.regions.len() {
        let g = &r.regions[k];
        let mut j = k;
        while j + 1 < r.regions.len() && r.regions[j + 1].stage == g.stage {
            j += 1;
        }
        rows.push(vec![
            if j > k {
                format!("{}–{}", k + 1, j + 1)
            } else {
                (k + 1).to_string()
            },
            g.stage.clone(),
            format!("{:.0}", g.cores),
            si(Some(g.mesh_bytes_per_step), "B"),
        ]);
        k = j + 1;
    }
    (header, rows)
}

fn heading(r: &Roofline) -> String {
    let m = &r.mapping;
    format!(
        "{} on {} ({}, {} devices, dp {} × tp {} × pp {} × cp {}, micro-batch {}): per device, per call",
        r.workload, r.device, r.system, r.devices, m.dp, m.tp, m.pp, m.cp, m.micro_batch
    )
}

pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    let (sys, w, choice, devices) = match a.run.load() {
        Ok(x) => x,
        Err(e) => return Ok(e),
    };
    let n = devices.unwrap_or(sys.devices).min(sys.devices).max(1);
    let prep = match prepare(&sys, &w, &choice, Some(n)) {
        Ok(p) => p,
        Err(i) => {
            writeln!(std::io::stderr(), "error: infeasible: {}", i.reason)?;
            return Ok(Exit::Failed);
        }
    };
    let (m, p, mach) = (prep.mapping, prep.program, prep.machine);
    let r = roofline(&sys, &w, &m, &p, &mach);
    a.plot
        .draw(|size, o| tessera::plot::roofline::roofline(&r, size, o))?;
    let mut doc = Rendered::new(&r, Csv::Records(&r.ops)); // CSV: one row per operator
    doc.markdown(Block::Text(format!(
        "# Roofline: {} on {}\n",
        r.workload, r.device
    )))
    .terminal(Block::Text(heading(&r)))
    .markdown(Block::Text(format!("{}\n", heading(&r))));
    if let Some(img) = a.plot.markdown_image(&format!("Roofline of {}", r.device)) {
        doc.markdown(Block::Text(format!("{img}\n")));
    }
    if let Some(reason) = &r.reason {
        doc.terminal(Block::Text(format!("infeasible: {reason}")))
            .markdown(Block::Text(format!("Infeasible: {reason}\n")));
    }
    doc.table(limits(&r).into())
        .markdown(Block::Text(String::new()));
    if let Some(ms) = &r.mesh {
        doc.terminal(Block::Text(per_core(ms)))
            .terminal(Block::Table(regions(&r).into()));
    }
    doc.table(table(&r).into());
    a.plot.output(out, |out| doc.write(a.format.into(), out))?;
    Ok(Exit::Ok)
}
