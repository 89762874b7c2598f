//! Every path a system offers, from the machine table and the program axes: what
//! `sweep --list-paths` shows and what did-you-mean hints draw from.

use crate::engine::table as f;
use crate::model::precision::Precision;
use crate::model::system::System;
use crate::vocab::MemoryKind;

/// Mapping fields that may be sweep axes (`mapping.tp`).
pub const MAPPING_AXES: [&str; 18] = [
    "dp",
    "tp",
    "pp",
    "cp",
    "ep",
    "etp",
    "micro_batch",
    "interleave",
    "zero",
    "shard",
    "recompute",
    "recompute_layers",
    "sp",
    "offload_activation_layers",
    "offload_optimizer",
    "offload_weights",
    "expert_dispatch",
    "tp_overlap_method",
];

/// One path `tessera sweep --list-paths` shows.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Listed {
    pub path: String,
    /// SI unit of its values ("" for ratios and counts).
    pub unit: &'static str,
    /// The machine-table slot it sets (`null` for program axes).
    pub slot: Option<&'static str>,
    /// How the slot is obtained from the model: `model`, `combined` or `derived` (`null` for
    /// program axes).
    pub how: Option<&'static str>,
    /// What the slot holds (`null` for program axes).
    pub doc: Option<&'static str>,
    /// Whether an evaluator reads that slot today (recorded-only slots wait for their models).
    pub evaluated: bool,
    /// `machine` (the machine vector) or `program` (devices, nodes, mapping).
    pub kind: &'static str,
}

impl Listed {
    fn slot(path: String, slot: &f::Slot) -> Listed {
        Listed {
            path,
            unit: slot.dimension.si_symbol(),
            slot: Some(slot.name),
            how: Some(slot.how.name()),
            doc: Some(slot.doc),
            evaluated: slot.evaluated,
            kind: "machine",
        }
    }
}

/// Every path of `sys`, from the machine table (each slot's file-shaped paths, expanded over the
/// system's precisions and memory levels, and `machine.<slot>`), then the program axes.
pub fn listed(sys: &System) -> Vec<Listed> {
    let d = &sys.device;
    let mut v = Vec::new();
    let present = |path: &str| match path.split('.').next() {
        Some("scale_up") => sys.scale_up.is_some(),
        Some("scale_out") => sys.scale_out.is_some(),
        Some("weight_store") => sys.weight_store.is_some(),
        // moves only energy per FLOP derived from power
        _ if path == "device.full_clock_power" => d.energy_follows_power(),
        _ => !path.starts_with("device.mesh.") || d.mesh.is_some(),
    };
    for slot in f::SLOTS {
        let mut push = |path: String| v.push(Listed::slot(path, slot));
        for t in slot.paths {
            if t.contains("{p}") {
                for p in Precision::ALL {
                    let i = p.index();
                    let has = match *t {
                        "device.peak.{p}" => d.matrix_peak[i] > 0.0,
                        "device.vector_peak.{p}" => d.vector_peak[i] > 0.0,
                        _ => true,
                    };
                    if has {
                        push(t.replace("{p}", p.name()));
                    }
                }
            } else if t.contains("{sram}") || t.contains("{dram}") {
                let sram = t.contains("{sram}");
                for m in d.memory.iter().filter(|m| !m.cache) {
                    if (m.kind == MemoryKind::Sram) == sram {
                        push(t.replace(if sram { "{sram}" } else { "{dram}" }, &m.name));
                    }
                }
            } else if present(t) {
                push(t.to_string());
            }
        }
    }
    for i in 0..f::NF {
        v.push(Listed::slot(
            format!("machine.{}", f::name(i)),
            f::slot_of(i),
        ));
    }
    for p in ["devices", "nodes"]
        .into_iter()
        .map(String::from)
        .chain(MAPPING_AXES.iter().map(|s| format!("mapping.{s}")))
    {
        v.push(Listed {
            path: p,
            unit: "",
            slot: None,
            how: None,
            doc: None,
            evaluated: true,
            kind: "program",
        });
    }
    for f in WORKLOAD_FIELDS {
        v.push(Listed {
            path: format!("workload.{f}"),
            unit: "",
            slot: None,
            how: None,
            doc: Some("a field of the workload: an override (`--set`) of estimate, compare and scale; not a sweep axis yet"),
            evaluated: true,
            kind: "program",
        });
    }
    v
}

/// Every path of `sys`, for did-you-mean hints and `tessera sweep --list-paths`.
pub fn known(sys: &System) -> Vec<String> {
    listed(sys).into_iter().map(|l| l.path).collect()
}

/// Workload fields a path may set (`workload.global_batch`): training runs' batch and sequence
/// length, and the formats their GEMMs, activations, weights and gradients are held in.
pub const WORKLOAD_FIELDS: [&str; 6] = [
    "global_batch",
    "seq",
    "compute",
    "activations",
    "weights",
    "gradients",
];
