//! The catalogue (`tessera list`): one line of figures per shipped file — systems and parts with
//! their devices, peak, memory and power; workloads with their model and task; software stacks
//! and sweeps by name — so that a user finds what ships without reading every file. The CLI walks
//! the folders; this module reads each file through [`Fs`] like every other loader.

use crate::model::precision::Precision;
use crate::model::system::{load_part, load_software, load_system, Part};
use crate::model::workload::{load_workload, Model, Task, Workload};
use crate::spec::{decode, Fs};
use serde::Serialize;

/// One file of the catalogue. Figures a kind has no use for are `None` (absent from the JSON as
/// `null`); a file that does not load keeps its kind and says why in `error`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Entry {
    pub file: String,
    /// `system`, `device`, `node`, `die`, `software`, `sweep`, `workload`, `mapping` (the file's
    /// top-level name, lower case), or `unknown`.
    pub kind: String,
    pub name: String,
    /// Accelerators: a system's total, a node's devices, 1 for a device.
    pub devices: Option<u64>,
    /// Dense peak at `peak_precision` (FLOP/s, all `devices`): bf16 where the part has it, else
    /// its highest dense rate.
    pub peak_flops_per_s: Option<f64>,
    pub peak_precision: Option<String>,
    /// Main memory of all `devices` (bytes): the largest level that is not a cache.
    pub memory_bytes: Option<f64>,
    /// Rated power (W): a system's IT power, a device's TDP, a node's host, NICs and other parts.
    pub power_w: Option<f64>,
    /// A workload's model family (`transformer`, `cnn`, `graph`).
    pub model: Option<String>,
    /// A workload's parameters (transformers and CNNs).
    pub params: Option<f64>,
    /// A workload's task (`training`, `inference`, `run`).
    pub task: Option<String>,
    /// Why the file does not load (`tessera check FILE` gives every diagnostic).
    pub error: Option<String>,
}

impl Entry {
    fn new(file: &str, kind: &str) -> Entry {
        Entry {
            file: file.to_string(),
            kind: kind.to_string(),
            name: String::new(),
            devices: None,
            peak_flops_per_s: None,
            peak_precision: None,
            memory_bytes: None,
            power_w: None,
            model: None,
            params: None,
            task: None,
            error: None,
        }
    }
}

/// The catalogue line of one file.
pub fn entry(file: &str, fs: &dyn Fs) -> Entry {
    let text = match fs
        .read(file)
        .and_then(|b| decode(file, b).map_err(|d| d.message))
    {
        Ok(t) => t,
        Err(e) => {
            let mut en = Entry::new(file, "unknown");
            en.error = Some(e);
            return en;
        }
    };
    let kind = crate::check::kind_of(&text).unwrap_or_default();
    let mut e = Entry::new(file, &kind.to_lowercase());
    let failed = "does not load: `tessera check` says why".to_string();
    match kind.as_str() {
        "System" => match load_system(file, fs).value {
            Some(s) => {
                let n = s.devices as f64;
                e.name = s.name.clone();
                e.devices = Some(s.devices);
                device_figures(&mut e, &s.device, n);
                e.power_w = Some(s.rated_power());
            }
            None => e.error = Some(failed),
        },
        "Device" | "Node" | "Use" => {
            match load_part(file, if kind == "Node" { "Node" } else { "Device" }, fs) {
                Some(Part::Device(d)) => {
                    e.kind = "device".into();
                    e.name = d.name.clone();
                    e.devices = Some(1);
                    device_figures(&mut e, &d, 1.0);
                    e.power_w = Some(d.tdp);
                }
                Some(Part::Node(n)) => {
                    e.name = n.name.clone();
                    e.devices = Some(n.devices as u64);
                    e.power_w =
                        Some(n.host_power + n.nic_power * n.nic_count as f64 + n.other_power);
                }
                None => e.error = Some(failed),
            }
        }
        "Software" => match load_software(file, fs).value {
            Some(s) => e.name = s.name,
            None => e.error = Some(failed),
        },
        "Workload" => match load_workload(file, fs).value {
            Some(w) => workload_figures(&mut e, &w),
            None => e.error = Some(failed),
        },
        _ => match named(&text) {
            Some(n) => e.name = n,
            None => e.name = file.rsplit('/').next().unwrap_or(file).to_string(),
        },
    }
    e
}

/// The `name: "…"` a file gives at its top level (sweeps, mappings, cases, dies).
fn named(text: &str) -> Option<String> {
    let i = text.find("name:")?;
    let rest = text[i + 5..].trim_start().strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_string())
}

fn device_figures(e: &mut Entry, d: &crate::model::system::Device, n: f64) {
    let bf16 = d.matrix_peak[Precision::Bf16.index()];
    let (p, v) = if bf16 > 0.0 {
        (Precision::Bf16, bf16)
    } else {
        Precision::ALL
            .into_iter()
            .map(|p| (p, d.matrix_peak[p.index()].max(d.vector_peak[p.index()])))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((Precision::Bf16, 0.0))
    };
    if v > 0.0 {
        e.peak_flops_per_s = Some(v * n);
        e.peak_precision = Some(p.name().to_string());
    }
    e.memory_bytes = d.main_memory().map(|i| d.memory[i].capacity * n);
}

fn workload_figures(e: &mut Entry, w: &Workload) {
    e.name = w.name.clone();
    let (model, params) = match &w.model {
        Model::Transformer(t) => ("transformer", Some(t.params())),
        Model::Cnn(c) => ("cnn", Some(c.layers.iter().map(|l| l.params()).sum())),
        Model::Graph(_) => ("graph", None),
    };
    e.model = Some(model.into());
    e.params = params;
    e.task = Some(
        match &w.task {
            Task::Training(_) => "training",
            Task::Inference(_) => "inference",
            Task::Run(_) => "run",
        }
        .into(),
    );
}

/// The table's header and rows: one line per file, figures with SI prefixes.
pub fn rows(entries: &[Entry]) -> (Vec<String>, Vec<Vec<String>>) {
    let header = [
        "file", "kind", "name", "devices", "peak", "memory", "power", "model",
    ]
    .map(String::from)
    .to_vec();
    let si = |v: Option<f64>, u: &str| {
        v.map(|x| crate::units::fmt_si(x, u).trim_end().to_string())
            .unwrap_or_default()
    };
    let rows = entries
        .iter()
        .map(|e| {
            let peak = match (&e.peak_flops_per_s, &e.peak_precision) {
                (Some(v), Some(p)) => format!("{} {p}", si(Some(*v), "FLOP/s")),
                _ => String::new(),
            };
            let model = match (&e.model, &e.task) {
                (Some(m), Some(t)) => match e.params {
                    Some(p) => format!("{m} {}, {t}", si(Some(p), "params")),
                    None => format!("{m}, {t}"),
                },
                _ => e.error.clone().unwrap_or_default(),
            };
            vec![
                e.file.clone(),
                e.kind.clone(),
                e.name.clone(),
                e.devices.map(|d| d.to_string()).unwrap_or_default(),
                peak,
                si(e.memory_bytes, "B"),
                si(e.power_w, "W"),
                model,
            ]
        })
        .collect();
    (header, rows)
}

/// The CSV's header and rows: every figure a number in SI units (empty where absent).
pub fn csv_rows(entries: &[Entry]) -> (Vec<String>, Vec<Vec<String>>) {
    let header = [
        "file",
        "kind",
        "name",
        "devices",
        "peak_flops_per_s",
        "peak_precision",
        "memory_bytes",
        "power_w",
        "model",
        "params",
        "task",
        "error",
    ]
    .map(String::from)
    .to_vec();
    let num = |v: Option<f64>| v.map(|x| format!("{x}")).unwrap_or_default();
    let s = |v: &Option<String>| v.clone().unwrap_or_default();
    let rows = entries
        .iter()
        .map(|e| {
            vec![
                e.file.clone(),
                e.kind.clone(),
                e.name.clone(),
                e.devices.map(|d| d.to_string()).unwrap_or_default(),
                num(e.peak_flops_per_s),
                s(&e.peak_precision),
                num(e.memory_bytes),
                num(e.power_w),
                s(&e.model),
                num(e.params),
                s(&e.task),
                s(&e.error),
            ]
        })
        .collect();
    (header, rows)
}
