//! Parameter paths a sweep may vary, mapped onto the machine vector.
//!
//! A path names a number of the architecture the way its file does (`scale_up.bandwidth` as
//! counted in the file, `scale_out.bandwidth` before oversubscription, `energy_per_bit` written per
//! bit and held per byte)
//! or, under `device.`, per device as `tessera show` reports it (peaks of all dies together).
//! Each path resolves to the machine-table slots it sets (the table in `engine/table.rs` names
//! the paths of every slot), with the same conversions `engine::machine` applies, so a point
//! equals the base system with that number edited (tested for every path of every shipped
//! architecture in `tests/sweep_paths.rs`). Dependent quantities move with it: a vector rate the
//! device derives from a matrix peak, and energy per FLOP the loader derived from
//! (TDP − idle) / peak, as the model records.
//!
//! Also: `machine.<field>` sets any machine-vector field directly (per device, SI), and
//! `devices` / `mapping.<dim>` are program axes (see `plan.rs`).

use super::space::{Op, Target};
use crate::engine::table as f;
use crate::model::bounds::{self, Bound, COLLECTIVE_SHARE_HINT};
use crate::model::precision::{Precision, NPREC};
use crate::model::system::{System, VectorSource};
use crate::units::Dimension;
use crate::vocab::MemoryKind;

/// Mapping fields that may be sweep axes (`mapping.tp`).
pub const MAPPING_AXES: [&str; 17] = [
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
    "sp",
    "offload_activation_layers",
    "offload_optimizer",
    "offload_weights",
    "expert_dispatch",
    "tp_overlap_method",
];

/// What a machine path resolves to.
#[derive(Clone, Debug)]
pub struct Knob {
    pub dimension: Dimension,
    pub targets: Vec<Target>,
    /// It moves a quantity a derived energy per FLOP depends on (TDP, idle power, a peak, an
    /// efficiency, the model's energy per FLOP).
    pub derive: bool,
    /// `device.energy_per_flop.<p>`: the model's figure for this precision (not re-derived from
    /// TDP, still divided by efficiency where the engine does that).
    pub device_energy: Option<usize>,
    /// `machine.energy_per_flop.<p>`: the machine's figure itself (nothing derived).
    pub machine_energy: Option<usize>,
    /// The bound the architecture file's figure must satisfy (`model::bounds`): an override or an
    /// axis value is held to it as the file is.
    pub bound: Bound,
}

impl Knob {
    fn with(self, bound: Bound) -> Knob {
        Knob { bound, ..self }
    }
}

fn set(field: usize) -> Target {
    scaled(field, 1.0)
}
fn scaled(field: usize, scale: f64) -> Target {
    Target {
        field,
        op: Op::Set {
            scale,
            offset: 0.0,
            floor: f64::NEG_INFINITY,
        },
    }
}

fn knob(dimension: Dimension, targets: Vec<Target>) -> Knob {
    Knob {
        dimension,
        targets,
        derive: false,
        device_energy: None,
        machine_energy: None,
        bound: Bound::NonNegative,
    }
}

/// Which peak the device's vector rate for `q` comes from: (true = a vector peak, precision), or
/// a matrix peak divided by 16 — the model's rule (`Device::vector_source`).
fn vector_source(sys: &System, q: Precision) -> Option<(bool, usize)> {
    match sys.device.vector_source(q)? {
        VectorSource::Vector(p) => Some((true, p.index())),
        VectorSource::Matrix(p) => Some((false, p.index())),
    }
}

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

/// Paths that change the cost program itself rather than the machine vector.
const STRUCTURAL: &[(&str, &str)] = &[
    (
        "scale_up.size",
        "the scale-up domain size decides which collectives cross the scale-out network",
    ),
    ("node.devices", "devices per node change the system's shape"),
    (
        "device.dies",
        "the die count is folded into every per-device figure",
    ),
];

fn precision(word: &str) -> Result<Precision, (String, Option<String>)> {
    Precision::parse(word).ok_or_else(|| {
        let names: Vec<&str> = Precision::names().collect();
        (
            format!("unknown precision `{word}`"),
            Some(
                match crate::diag::did_you_mean(word, names.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`? precisions: {}", names.join(", ")),
                    None => format!("precisions: {}", names.join(", ")),
                },
            ),
        )
    })
}

/// Resolve a machine path of `sys`. `Err` carries a message and a hint.
pub fn resolve(path: &str, sys: &System) -> Result<Knob, (String, Option<String>)> {
    use Dimension as D;
    let parts: Vec<&str> = path.split('.').collect();
    if let Some((_, why)) = STRUCTURAL.iter().find(|(p, _)| *p == path) {
        return Err((
            format!("`{path}` changes the cost program, not the machine vector: {why}"),
            Some(
                "sweep axes vary numbers of the machine vector, `devices`, and `mapping.*`".into(),
            ),
        ));
    }
    let d = &sys.device;
    let k = match parts.as_slice() {
        ["device", "peak" | "matrix_peak", p] => {
            let p = precision(p)?;
            let i = p.index();
            if d.matrix_peak[i] <= 0.0 {
                return Err((
                    format!("the device has no {p} matrix peak to vary"),
                    Some("varying it would change which format the workload runs in; add the peak to the architecture first".into()),
                ));
            }
            let mut t = vec![set(f::MATRIX_PEAK + i), set(f::RAW_MATRIX + i)];
            for q in Precision::ALL {
                if vector_source(sys, q) == Some((false, i)) {
                    t.push(scaled(
                        f::VECTOR_PEAK + q.index(),
                        1.0 / crate::model::system::VECTOR_FROM_MATRIX,
                    ));
                }
            }
            Knob {
                derive: true,
                ..knob(D::FlopRate, t)
            }
            .with(Bound::Positive)
        }
        ["device", "vector_peak", p] => {
            let p = precision(p)?;
            let i = p.index();
            if d.vector_peak[i] <= 0.0 {
                return Err((
                    format!("the device has no {p} vector peak to vary"),
                    Some("vary `machine.vector_peak.<precision>` to set the rate the model uses directly".into()),
                ));
            }
            let mut t = vec![set(f::RAW_VECTOR + i)];
            for q in Precision::ALL {
                if vector_source(sys, q) == Some((true, i)) {
                    t.push(set(f::VECTOR_PEAK + q.index()));
                }
            }
            // Where the engine runs matrix products on the vector units for want of a matrix rate
            // (as `lower::machine` does now), the matrix rate follows.
            if d.matrix_peak[i] == 0.0 {
                t.push(set(f::MATRIX_PEAK + i));
            }
            Knob {
                derive: true,
                ..knob(D::FlopRate, t)
            }
            .with(Bound::Positive)
        }
        ["device", "energy_per_flop", p] => {
            let i = precision(p)?.index();
            Knob {
                derive: true,
                device_energy: Some(i),
                ..knob(
                    D::EnergyPerFlop,
                    vec![set(f::RAW_EPF + i), set(f::ENERGY_PER_FLOP + i)],
                )
            }
        }
        // The power limit: a cap throttles the clock; energy per FLOP stays the silicon's (it
        // follows the rated TDP, which no path moves).
        ["device", "tdp"] => knob(D::Power, vec![set(f::TDP)]).with(Bound::Positive),
        ["device", "dvfs", w] => {
            let field = match *w {
                "min_clock" => f::DVFS_MIN_CLOCK,
                "min_voltage" => f::DVFS_MIN_VOLTAGE,
                _ => return Err(unknown(path, sys)),
            };
            knob(D::Ratio, vec![set(field)]).with(Bound::Fraction)
        }
        ["device", "idle_power"] => Knob {
            derive: true,
            ..knob(D::Power, vec![set(f::IDLE_POWER)])
        },
        ["device", "efficiency", e] => {
            let (field, dim, bound) = match *e {
                "matmul" => (f::EFF_MATMUL, D::Ratio, Bound::Fraction),
                "low_precision_matmul" => (f::EFF_LOW_PRECISION, D::Ratio, Bound::Fraction),
                "fp4_backward_matmul" => (f::EFF_FP4_BACKWARD, D::Ratio, Bound::Fraction),
                "collective_compute_share" => {
                    (f::COMM_SHARE, D::Ratio, Bound::Share(COLLECTIVE_SHARE_HINT))
                }
                "vector" => (f::EFF_VECTOR, D::Ratio, Bound::Fraction),
                "memory" => (f::EFF_MEMORY, D::Ratio, Bound::Fraction),
                "network" => (f::EFF_NETWORK, D::Ratio, Bound::Fraction),
                "kernel_overhead" => (f::KERNEL_OVERHEAD, D::Time, Bound::NonNegative),
                _ => return Err(unknown(path, sys)),
            };
            Knob {
                // derived energy per FLOP is taken against the achievable rate
                derive: matches!(*e, "matmul" | "low_precision_matmul" | "vector"),
                ..knob(dim, vec![set(field)])
            }
            .with(bound)
        }
        ["device", "memory", rest @ ..] if rest.len() >= 2 => {
            let name = rest[..rest.len() - 1].join(".");
            let what = rest[rest.len() - 1];
            memory_level(sys, &name, what).map_err(|e| match e {
                Some(e) => e,
                None => unknown(path, sys),
            })?
        }
        [tier @ ("hbm" | "sram"), what] => {
            let sram = *tier == "sram";
            let (field, dim) = match (*what, sram) {
                ("capacity", true) => (f::SRAM_CAPACITY, D::Bytes),
                ("bandwidth", true) => (f::SRAM_BANDWIDTH, D::Bandwidth),
                ("energy_per_byte", true) => (f::SRAM_ENERGY, D::EnergyPerByte),
                ("capacity", false) => (f::HBM_CAPACITY, D::Bytes),
                ("bandwidth", false) => (f::HBM_BANDWIDTH, D::Bandwidth),
                ("energy_per_byte", false) => (f::HBM_ENERGY, D::EnergyPerByte),
                _ => return Err(unknown(path, sys)),
            };
            Knob {
                // derived energy per FLOP leaves out the reference GEMM's memory energy
                derive: *what == "energy_per_byte",
                ..knob(dim, vec![set(field)])
            }
        }
        ["scale_up", what] => {
            if sys.scale_up.is_none() {
                return Err((
                    format!("`{path}`: the system has no scale_up network"),
                    Some("add a `scale_up` section to the architecture, or vary `machine.up_bandwidth`".into()),
                ));
            }
            match *what {
                "bandwidth" => {
                    let both = sys
                        .scale_up
                        .as_ref()
                        .is_some_and(|u| u.counted_both_directions);
                    let s = if both { 0.5 } else { 1.0 };
                    knob(D::Bandwidth, vec![scaled(f::UP_BANDWIDTH, s)]).with(Bound::Positive)
                }
                "latency" => knob(D::Time, vec![set(f::UP_LATENCY)]),
                "energy_per_bit" => knob(D::EnergyPerByte, vec![set(f::UP_ENERGY)]),
                "in_network_reduction" => knob(D::Ratio, vec![set(f::UP_INR)]).with(Bound::Flag),
                _ => return Err(unknown(path, sys)),
            }
        }
        ["scale_out", what] => {
            let Some(so) = &sys.scale_out else {
                return Err((
                    format!("`{path}`: the system has no scale_out network"),
                    Some("add a `scale_out` section to the architecture, or vary `machine.out_bandwidth`".into()),
                ));
            };
            match *what {
                "bandwidth" => knob(
                    D::Bandwidth,
                    vec![scaled(f::OUT_BANDWIDTH, 1.0 / so.oversubscription)],
                )
                .with(Bound::Positive),
                "oversubscription" => knob(
                    D::Ratio,
                    vec![Target {
                        field: f::OUT_BANDWIDTH,
                        op: Op::DivBy {
                            scale: so.oversubscription,
                        },
                    }],
                )
                .with(Bound::Oversubscription),
                "latency" => knob(D::Time, vec![set(f::OUT_LATENCY)]),
                "energy_per_bit" => knob(D::EnergyPerByte, vec![set(f::OUT_ENERGY)]),
                "in_network_reduction" => knob(D::Ratio, vec![set(f::OUT_INR)]).with(Bound::Flag),
                _ => return Err(unknown(path, sys)),
            }
        }
        ["weight_store", what] => match *what {
            "capacity" => knob(D::Bytes, vec![set(f::EXT_CAPACITY)]).with(Bound::Positive),
            "bandwidth" => knob(D::Bandwidth, vec![set(f::EXT_BANDWIDTH)]).with(Bound::Positive),
            "latency" => knob(D::Time, vec![set(f::EXT_LATENCY)]),
            // the file's figure is the whole store's; the slot holds each device's share
            "power" => knob(
                D::Power,
                vec![scaled(f::STORE_POWER, 1.0 / sys.devices as f64)],
            ),
            "compute" => knob(
                D::FlopRate,
                vec![scaled(f::STORE_COMPUTE, 1.0 / sys.devices as f64)],
            )
            .with(Bound::Positive),
            "memory_bandwidth" => knob(
                D::Bandwidth,
                vec![scaled(f::STORE_MEMORY_BANDWIDTH, 1.0 / sys.devices as f64)],
            )
            .with(Bound::Positive),
            _ => return Err(unknown(path, sys)),
        },
        ["device", "mesh", what] => {
            if d.mesh.is_none() {
                return Err((
                    format!("`{path}`: the device has no on-chip mesh"),
                    Some("add a `mesh` to the die of the architecture".into()),
                ));
            }
            let (field, dim, bound) = match *what {
                "x" => (f::MESH_X, D::Ratio, Bound::Count),
                "y" => (f::MESH_Y, D::Ratio, Bound::Count),
                "link_bandwidth" => (f::MESH_LINK_BANDWIDTH, D::Bandwidth, Bound::Positive),
                "hop_latency" => (f::MESH_HOP_LATENCY, D::Time, Bound::NonNegative),
                "energy_per_bit_hop" => (f::MESH_ENERGY, D::EnergyPerByte, Bound::NonNegative),
                _ => return Err(unknown(path, sys)),
            };
            knob(dim, vec![set(field)]).with(bound)
        }
        ["software", "step_overhead"] => knob(D::Time, vec![set(f::STEP_OVERHEAD)]),
        ["software", "mesh_relay_time"] => knob(D::Time, vec![set(f::MESH_RELAY_TIME)]),
        ["software", "pipeline_stage_time"] => knob(D::Time, vec![set(f::PIPELINE_STAGE_TIME)]),
        ["software", "memory_reserve"] => knob(D::Bytes, vec![set(f::MEMORY_RESERVE)]),
        ["facility", "pue"] => knob(D::Ratio, vec![set(f::PUE)]).with(Bound::Pue),
        // Every non-device part of a node and the network as one lump per device, as this path
        // always meant: node power set, the switch and network shares cleared.
        ["overhead_power"] => knob(
            D::Power,
            vec![
                set(f::NODE_POWER),
                scaled(f::SWITCH_POWER, 0.0),
                scaled(f::NETWORK_POWER, 0.0),
            ],
        ),
        ["machine", rest @ ..] if !rest.is_empty() => {
            let name = rest.join(".");
            let Some(i) = (0..f::NF).find(|i| f::name(*i) == name) else {
                return Err(unknown(path, sys));
            };
            // Exactly this field: nothing derived from it moves.
            let mut k = knob(f::dimension(i), vec![set(i)]);
            if (f::ENERGY_PER_FLOP..f::ENERGY_PER_FLOP + NPREC).contains(&i) {
                k.machine_energy = Some(i - f::ENERGY_PER_FLOP);
            }
            k
        }
        _ => return Err(unknown(path, sys)),
    };
    Ok(k)
}

/// `device.memory.<name>.<what>`. `Err(None)` = not a known path.
fn memory_level(
    sys: &System,
    name: &str,
    what: &str,
) -> Result<Knob, Option<(String, Option<String>)>> {
    use Dimension as D;
    let d = &sys.device;
    let Some(level) = d.memory.iter().position(|m| m.name == name) else {
        let names: Vec<&str> = d
            .memory
            .iter()
            .filter(|m| !m.cache)
            .map(|m| m.name.as_str())
            .collect();
        let hint = match crate::diag::did_you_mean(name, names.iter().copied()) {
            Some(s) => format!("did you mean `{s}`? memory levels: {}", names.join(", ")),
            None => format!("memory levels: {}", names.join(", ")),
        };
        return Err(Some((
            format!("the device has no memory level `{name}`"),
            Some(hint),
        )));
    };
    let m = &d.memory[level];
    if m.cache {
        return Err(Some((
            format!("`{name}` is a cache; the model places no data in caches"),
            Some("vary a level that holds data (HBM, DRAM, SRAM)".into()),
        )));
    }
    let sram = m.kind == MemoryKind::Sram;
    // The other data-holding levels of the same class, which `lower::machine` combines with it.
    let others: Vec<&crate::model::system::MemLevel> = d
        .memory
        .iter()
        .enumerate()
        .filter(|(i, o)| *i != level && !o.cache && (o.kind == MemoryKind::Sram) == sram)
        .map(|(_, o)| o)
        .collect();
    let k = match what {
        "capacity" => {
            let field = if sram {
                f::SRAM_CAPACITY
            } else {
                f::HBM_CAPACITY
            };
            let offset: f64 = others.iter().map(|o| o.capacity).sum();
            knob(
                D::Bytes,
                vec![Target {
                    field,
                    op: Op::Set {
                        scale: 1.0,
                        offset,
                        floor: f64::NEG_INFINITY,
                    },
                }],
            )
            .with(Bound::Positive)
        }
        "bandwidth" => {
            let t = if sram {
                // the fastest SRAM level sets the rate
                let floor = others.iter().map(|o| o.bandwidth).fold(0.0, f64::max);
                Target {
                    field: f::SRAM_BANDWIDTH,
                    op: Op::Set {
                        scale: 1.0,
                        offset: 0.0,
                        floor,
                    },
                }
            } else {
                let offset: f64 = others.iter().map(|o| o.bandwidth).sum();
                Target {
                    field: f::HBM_BANDWIDTH,
                    op: Op::Set {
                        scale: 1.0,
                        offset,
                        floor: f64::NEG_INFINITY,
                    },
                }
            };
            knob(D::Bandwidth, vec![t]).with(Bound::Positive)
        }
        "latency" => {
            // `engine::machine` records the latency of the first (fastest) level of the class.
            let first = d
                .memory
                .iter()
                .position(|o| !o.cache && (o.kind == MemoryKind::Sram) == sram);
            if first != Some(level) {
                let used = first.map(|i| d.memory[i].name.clone()).unwrap_or_default();
                return Err(Some((
                    format!("the latency of `{name}` is not recorded in the machine"),
                    Some(format!(
                        "the machine keeps the latency of the fastest level of this class; vary `device.memory.{used}.latency`"
                    )),
                )));
            }
            let field = if sram {
                f::SRAM_LATENCY
            } else {
                f::HBM_LATENCY
            };
            knob(D::Time, vec![set(field)])
        }
        "energy_per_byte" => {
            // `lower::machine` takes the energy of the last level of the class (levels are
            // ordered fastest first).
            let last = d
                .memory
                .iter()
                .rposition(|o| !o.cache && (o.kind == MemoryKind::Sram) == sram);
            if last != Some(level) {
                let used = last.map(|i| d.memory[i].name.clone()).unwrap_or_default();
                return Err(Some((
                    format!("the energy per byte of `{name}` is not used by the model"),
                    Some(format!(
                        "traffic to this class of memory is charged at `{used}`'s energy; vary `device.memory.{used}.energy_per_byte`"
                    )),
                )));
            }
            let field = if sram { f::SRAM_ENERGY } else { f::HBM_ENERGY };
            // derived energy per FLOP leaves out the reference GEMM's memory energy
            Knob {
                derive: true,
                ..knob(D::EnergyPerByte, vec![set(field)])
            }
        }
        _ => return Err(None),
    };
    Ok(k)
}

fn unknown(path: &str, sys: &System) -> (String, Option<String>) {
    let known = known(sys);
    let hint = match crate::diag::did_you_mean(path, known.iter().map(|s| s.as_str())) {
        Some(s) => format!("did you mean `{s}`? run `tessera sweep --list-paths --arch FILE` for every path"),
        None => "paths look like `device.memory.<level>.bandwidth`, `device.peak.fp8`, `scale_up.bandwidth`, `device.tdp`; run `tessera sweep --list-paths --arch FILE` for every path".into(),
    };
    (format!("unknown parameter path `{path}`"), Some(hint))
}

/// How energy per FLOP must be recomputed per point when axes move what it derives from, given
/// the precisions whose figure an axis sets in the model (`device`) or in the machine
/// (`machine`) (bit masks): the model's own record (`engine::machine::energy_rules`), less what
/// the axes set.
pub fn derivation(sys: &System, device: u32, machine: u32) -> super::space::Derive {
    let r = crate::engine::machine::energy_rules(sys);
    super::space::Derive {
        rederive: r.rederive & !device & !machine,
        divide: r.divide & !machine,
    }
}

/// The reference meaning of a path: edit the validated model `sys` as the architecture file
/// edited at that number would lower to. `None` for paths that name the machine vector directly
/// (`hbm.*`, `sram.*`, `overhead_power`, `machine.*`) or that `sys` lacks.
///
/// Sweeps never call this per point; `plan` checks the fast path against it when a sweep is built,
/// and `tests/sweep_paths.rs` for every path of every shipped architecture.
pub fn edit_system(sys: &mut System, path: &str, v: f64) -> Option<()> {
    let parts: Vec<&str> = path.split('.').collect();
    let d = &mut sys.device;
    match parts.as_slice() {
        ["device", "peak" | "matrix_peak", p] => d.matrix_peak[Precision::parse(p)?.index()] = v,
        ["device", "vector_peak", p] => d.vector_peak[Precision::parse(p)?.index()] = v,
        ["device", "energy_per_flop", p] => d.energy_per_flop[Precision::parse(p)?.index()] = v,
        ["device", "tdp"] => d.tdp = v,
        ["device", "idle_power"] => d.idle_power = v,
        ["device", "dvfs", "min_clock"] => d.dvfs.min_clock = v,
        ["device", "dvfs", "min_voltage"] => d.dvfs.min_voltage = v,
        ["device", "efficiency", e] => {
            let f = &mut d.efficiency;
            match *e {
                "matmul" => f.matmul = v,
                "low_precision_matmul" => f.low_precision_matmul = v,
                "fp4_backward_matmul" => f.fp4_backward_matmul = v,
                "collective_compute_share" => f.collective_compute_share = v,
                "vector" => f.vector = v,
                "memory" => f.memory = v,
                "network" => f.network = v,
                "kernel_overhead" => f.kernel_overhead = v,
                _ => return None,
            }
        }
        ["device", "memory", rest @ ..] if rest.len() >= 2 => {
            let name = rest[..rest.len() - 1].join(".");
            let m = d.memory.iter_mut().find(|m| m.name == name)?;
            match rest[rest.len() - 1] {
                "capacity" => m.capacity = v,
                "bandwidth" => m.bandwidth = v,
                "energy_per_byte" => m.energy_per_byte = v,
                "latency" => m.latency = v,
                _ => return None,
            }
        }
        ["scale_up", w] => {
            let u = sys.scale_up.as_mut()?;
            match *w {
                // the model holds it per direction
                "bandwidth" if u.counted_both_directions => u.bandwidth = v / 2.0,
                "bandwidth" => u.bandwidth = v,
                "latency" => u.latency = v,
                "energy_per_bit" => u.energy_per_byte = v,
                "in_network_reduction" => u.in_network_reduction = v != 0.0,
                _ => return None,
            }
        }
        ["scale_out", w] => {
            let o = sys.scale_out.as_mut()?;
            match *w {
                "bandwidth" => o.bandwidth = v,
                "latency" => o.latency = v,
                "energy_per_bit" => o.energy_per_byte = v,
                "oversubscription" => o.oversubscription = v,
                "in_network_reduction" => o.in_network_reduction = v != 0.0,
                _ => return None,
            }
        }
        ["weight_store", w] => {
            let s = sys.weight_store.as_mut()?;
            match *w {
                "capacity" => s.capacity = v,
                "bandwidth" => s.bandwidth = v,
                "latency" => s.latency = v,
                "power" => s.power = v,
                "compute" => s.compute = v,
                "memory_bandwidth" => s.memory_bandwidth = v,
                _ => return None,
            }
        }
        ["device", "mesh", w] => {
            let m = d.mesh.as_mut()?;
            match *w {
                "x" | "y" => {
                    let k = usize::from(*w == "y");
                    while m.dims.len() <= k {
                        m.dims.push(1);
                    }
                    m.dims[k] = v.round().max(0.0) as u64;
                }
                "link_bandwidth" => m.link_bandwidth = v,
                "hop_latency" => m.hop_latency = v,
                "energy_per_bit_hop" => m.energy_per_byte_hop = v,
                _ => return None,
            }
        }
        ["facility", "pue"] => sys.pue = v,
        // a system named with no stack runs on an unnamed one with that cost
        ["software", field
        @ ("step_overhead" | "mesh_relay_time" | "pipeline_stage_time" | "memory_reserve")] => {
            let sw = sys
                .software
                .get_or_insert_with(|| crate::model::system::Software {
                    name: "(set)".into(),
                    step_overhead: 0.0,
                    mesh_relay_time: 0.0,
                    pipeline_stage_time: 0.0,
                    memory_reserve: 0.0,
                    fitted: Vec::new(),
                });
            match *field {
                "step_overhead" => sw.step_overhead = v,
                "mesh_relay_time" => sw.mesh_relay_time = v,
                "pipeline_stage_time" => sw.pipeline_stage_time = v,
                _ => sw.memory_reserve = v,
            }
        }
        _ => return None,
    }
    Some(())
}

/// The loader's rule for a device file without energy per FLOP: a device running flat out at a
/// precision draws its TDP, so (tdp − idle) / peak, for the precisions in `mask` (the reference
/// for tests: sweeps apply `engine::table::derive` to the machine vector).
pub fn derive_energy(sys: &mut System, mask: u32) {
    let d = &mut sys.device;
    let data_energy = crate::model::system::data_energy_per_byte(&d.memory);
    for i in 0..NPREC {
        if mask & (1 << i) != 0 {
            let e = &d.efficiency;
            let rule = crate::model::rules::TdpRule {
                tdp: d.rated_tdp,
                idle: d.idle_power,
                matrix_peak: d.matrix_peak[i],
                vector_peak: d.vector_peak[i],
                efficiency: crate::model::rules::engine_efficiency(
                    d.matrix_peak[i] > 0.0,
                    e.matmul,
                    e.low_precision_matmul,
                    e.vector,
                    i,
                ),
                at_achievable: d.energy_per_flop_derived,
                data_energy,
            };
            if let Some(v) = rule.energy_per_flop(i) {
                d.energy_per_flop[i] = v;
            }
        }
    }
}

/// What a path names: the device count (in devices or whole nodes), a mapping field, a field of
/// the workload, or figures of the machine. The one classification `sweep` axes and the `--set`
/// overrides of `estimate`, `compare` and `scale` share.
#[derive(Clone, Debug)]
pub enum PathKind {
    /// `devices` (per = 1) or `nodes` (per = devices per node).
    Devices { per: u64 },
    /// `mapping.<field>`, a field of [`MAPPING_AXES`].
    Mapping(&'static str),
    /// `workload.<field>`, a field of [`WORKLOAD_FIELDS`] (overrides only, not sweep axes yet).
    Workload(&'static str),
    /// A figure of the machine.
    Machine(Knob),
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

/// Classify `path` against `sys`; `Err` carries a message and a hint listing the known paths.
pub fn classify(path: &str, sys: &System) -> Result<PathKind, (String, Option<String>)> {
    if path == "devices" {
        return Ok(PathKind::Devices { per: 1 });
    }
    if path == "nodes" {
        return Ok(PathKind::Devices {
            per: u64::from(sys.node.devices).max(1),
        });
    }
    if let Some(field) = path.strip_prefix("mapping.") {
        return match MAPPING_AXES.iter().find(|a| **a == field) {
            Some(f) => Ok(PathKind::Mapping(f)),
            None => {
                let hint = match crate::diag::did_you_mean(field, MAPPING_AXES) {
                    Some(s) => format!(
                        "did you mean `mapping.{s}`? mapping axes: {}",
                        MAPPING_AXES.join(", ")
                    ),
                    None => format!("mapping axes: {}", MAPPING_AXES.join(", ")),
                };
                Err((format!("unknown mapping axis `{path}`"), Some(hint)))
            }
        };
    }
    if let Some(field) = path.strip_prefix("workload.") {
        return match WORKLOAD_FIELDS.iter().find(|a| **a == field) {
            Some(f) => Ok(PathKind::Workload(f)),
            None => {
                let hint = match crate::diag::did_you_mean(field, WORKLOAD_FIELDS) {
                    Some(s) => format!(
                        "did you mean `workload.{s}`? workload fields: {}",
                        WORKLOAD_FIELDS.join(", ")
                    ),
                    None => format!("workload fields: {}", WORKLOAD_FIELDS.join(", ")),
                };
                Err((format!("unknown workload field `{path}`"), Some(hint)))
            }
        };
    }
    resolve(path, sys).map(PathKind::Machine)
}

/// A value of a mapping field.
#[derive(Clone, Debug, PartialEq)]
pub enum MapVal {
    Count(u64),
    Recompute(crate::model::mapping::Recompute),
    Bool(bool),
    Dispatch(crate::vocab::Dispatch),
    TpOverlap(crate::vocab::TpOverlapMethod),
    /// A share between 0 and 1 (`offload_optimizer`).
    Fraction(f64),
}

/// Parse one value of the mapping field `field` (`8`, `Selective`, `true`, `Hierarchical`); its
/// bound is `values::mapping`'s to check.
pub fn mapping_value(field: &str, word: &str) -> Result<MapVal, (String, Option<String>)> {
    use crate::model::mapping::Recompute;
    let w = word.trim();
    match field {
        "recompute" => match w.to_ascii_lowercase().as_str() {
            "none" => Ok(MapVal::Recompute(Recompute::None)),
            "selective" => Ok(MapVal::Recompute(Recompute::Selective)),
            "full" => Ok(MapVal::Recompute(Recompute::Full)),
            _ => Err((
                format!("`{w}` is not a recomputation"),
                Some("choose None, Selective or Full".into()),
            )),
        },
        "sp" | "offload_weights" => match w {
            "true" | "1" => Ok(MapVal::Bool(true)),
            "false" | "0" => Ok(MapVal::Bool(false)),
            _ => Err((format!("`{w}` is not true or false"), None)),
        },
        "expert_dispatch" => match w.to_ascii_lowercase().as_str() {
            "alltoall" => Ok(MapVal::Dispatch(crate::vocab::Dispatch::AllToAll)),
            "hierarchical" => Ok(MapVal::Dispatch(crate::vocab::Dispatch::Hierarchical)),
            _ => Err((
                format!("`{w}` is not an expert dispatcher"),
                Some("choose AllToAll or Hierarchical".into()),
            )),
        },
        "tp_overlap_method" => match w.to_ascii_lowercase().replace('_', "").as_str() {
            "pipeline" => Ok(MapVal::TpOverlap(crate::vocab::TpOverlapMethod::Pipeline)),
            "ringexchange" => Ok(MapVal::TpOverlap(
                crate::vocab::TpOverlapMethod::RingExchange,
            )),
            _ => Err((
                format!("`{w}` is not a tensor-parallel overlap method"),
                Some("choose Pipeline or RingExchange".into()),
            )),
        },
        "offload_optimizer" => match w.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(MapVal::Fraction(f)),
            _ => Err((
                format!("`{w}` is not a fraction between 0 and 1"),
                Some(
                    "the share of each device's optimizer state kept in host memory, e.g. 0.5"
                        .into(),
                ),
            )),
        },
        _ => match w.parse::<u64>() {
            Ok(c) => Ok(MapVal::Count(c)),
            Err(_) => Err((
                format!("`{w}` is not a count"),
                Some(format!("`mapping.{field}` takes a whole number, e.g. 8")),
            )),
        },
    }
}

/// Set the mapping field `field` of `s` to `v`.
pub fn set_mapping(s: &mut crate::model::mapping::MappingPlan, field: &str, v: &MapVal) {
    match (field, v) {
        ("dp", MapVal::Count(c)) => s.dp = Some(*c),
        ("tp", MapVal::Count(c)) => s.tp = Some(*c),
        ("pp", MapVal::Count(c)) => s.pp = Some(*c),
        ("cp", MapVal::Count(c)) => s.cp = Some(*c),
        ("ep", MapVal::Count(c)) => s.ep = Some(*c),
        ("etp", MapVal::Count(c)) => s.etp = Some(*c),
        ("micro_batch", MapVal::Count(c)) => s.micro_batch = Some(*c),
        ("interleave", MapVal::Count(c)) => s.interleave = Some(*c),
        ("zero", MapVal::Count(c)) => s.zero = Some((*c).min(255) as u8),
        ("shard", MapVal::Count(c)) => s.shard = Some(*c),
        ("recompute", MapVal::Recompute(r)) => s.recompute = Some(*r),
        ("sp", MapVal::Bool(b)) => s.sp = Some(*b),
        ("offload_activation_layers", MapVal::Count(c)) => s.offload_activation_layers = Some(*c),
        ("offload_optimizer", MapVal::Fraction(f)) => s.offload_optimizer = Some(*f),
        ("offload_weights", MapVal::Bool(b)) => s.offload_weights = Some(*b),
        ("expert_dispatch", MapVal::Dispatch(d)) => s.expert_dispatch = Some(*d),
        ("tp_overlap_method", MapVal::TpOverlap(x)) => s.tp_overlap_method = Some(*x),
        _ => {}
    }
}

/// A set degree (`tp`, `pp`, `cp`) frees `dp` to fill the devices the others leave, unless `dp`
/// is set too (the sweep's rule for `mapping.*` axes, and `--set`'s).
pub fn free_dp(s: &mut crate::model::mapping::MappingPlan, fields: &[&str]) {
    if !fields.contains(&"dp") && fields.iter().any(|f| matches!(*f, "tp" | "pp" | "cp")) {
        s.dp = None;
    }
}

/// Set the workload field `field` (of [`WORKLOAD_FIELDS`]) of `w` from its text.
pub fn set_workload(
    w: &mut crate::model::workload::Workload,
    field: &str,
    text: &str,
) -> Result<(), (String, Option<String>)> {
    use crate::model::workload::Task;
    let Task::Training(t) = &mut w.task else {
        return Err((
            format!(
                "`workload.{field}` sets a training run; `{}` is not one",
                w.name
            ),
            None,
        ));
    };
    let t_ = text.trim();
    // the workload file's rule for its batch and sequence length
    let count = || match t_.parse::<u64>() {
        Ok(c) => bounds::count(&format!("workload.{field}"), c),
        _ => Err((
            format!("`workload.{field}` takes a whole number of at least 1, not `{t_}`"),
            None,
        )),
    };
    let precision = || {
        Precision::parse(t_).ok_or_else(|| {
            let names: Vec<&str> = Precision::names().collect();
            (
                format!("unknown precision `{t_}`"),
                Some(format!("precisions: {}", names.join(", "))),
            )
        })
    };
    match field {
        "global_batch" => t.global_batch = count()?,
        "seq" => t.seq = count()?,
        "compute" => t.compute = precision()?,
        "activations" => t.activations = precision()?,
        "weights" => t.weights = precision()?,
        "gradients" => t.gradients = precision()?,
        _ => {
            return Err((
                format!("unknown workload field `workload.{field}`"),
                Some(format!("workload fields: {}", WORKLOAD_FIELDS.join(", "))),
            ))
        }
    }
    Ok(())
}
