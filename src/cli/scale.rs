//! `tessera scale --arch A --workload W --devices 4,8,...`: throughput and scaling efficiency.

use super::common::{self, si};
use super::{Exit, Format};
use std::io::Write;
use tessera::engine::{estimate, Objective};
use tessera::report::compare::{scaling, Scaling};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long)]
    pub arch: String,
    #[arg(long)]
    pub workload: String,
    /// Device counts, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub devices: Vec<u64>,
    /// A mapping file (dp fills the devices), or `auto` (default: the best mapping at each size).
    #[arg(long)]
    pub mapping: Option<String>,
    #[arg(long, value_enum, default_value = "time")]
    pub objective: Objective,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

pub fn table(s: &Scaling) -> (Vec<String>, Vec<Vec<String>>) {
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
    let (sys, w) = match (common::system(&a.arch), common::workload(&a.workload)) {
        (Ok(s), Ok(w)) => (s, w),
        _ => return Ok(Exit::Failed),
    };
    let choice = match a.mapping.as_deref() {
        None => tessera::engine::MappingChoice::Auto(a.objective),
        m => match common::mapping(m, &w, a.objective) {
            Ok(c) => c,
            Err(e) => return Ok(e),
        },
    };
    let ests = a
        .devices
        .iter()
        .map(|&n| estimate(&sys, &w, &choice, Some(n)))
        .collect();
    let s = scaling(&sys.name, &w.name, ests);
    match a.format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&s).expect("json"))?,
        f => {
            let (h, r) = table(&s);
            match f {
                Format::Table => {
                    writeln!(
                        out,
                        "{} on {} — efficiency against {} devices",
                        s.workload,
                        s.system,
                        s.baseline_devices
                            .map(|d| d.to_string())
                            .unwrap_or("—".into())
                    )?;
                    writeln!(out, "{}", tessera::report::table(&h, &r))?
                }
                Format::Markdown => writeln!(out, "{}", tessera::report::markdown_table(&h, &r))?,
                _ => write!(out, "{}", tessera::report::csv(&h, &r))?,
            }
        }
    }
    Ok(Exit::Ok)
}
