//! A machine path of a system resolved to its knob: the device's figures, its memory levels,
//! the networks, the weight store, the software stack's and the facility's figures, and
//! `machine.<slot>` directly.

use super::knob::{knob, precision, scaled, set, vector_source, Knob, STRUCTURAL};
use super::knob::{Op, Target};
use super::listed::known;
use crate::engine::table as f;
use crate::model::bounds::{Bound, COLLECTIVE_SHARE_HINT};
use crate::model::precision::{Precision, NPREC};
use crate::model::system::System;
use crate::units::Dimension;
use crate::vocab::MemoryKind;

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
    let k = match parts.as_slice() {
        ["device", ..] => device_knob(path, &parts[1..], sys)?,
        ["scale_up" | "scale_out" | "weight_store", what] => {
            network_knob(path, parts[0], what, sys)?
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

/// A `device.*` path (`rest` after `device`): the peaks, energy per FLOP, the power limit and
/// DVFS line, idle power, efficiencies, memory levels and the on-chip mesh.
fn device_knob(path: &str, rest: &[&str], sys: &System) -> Result<Knob, (String, Option<String>)> {
    use Dimension as D;
    let d = &sys.device;
    let k = match rest {
        ["peak" | "matrix_peak", p] => {
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
        ["vector_peak", p] => {
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
        ["energy_per_flop", p] => {
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
        // follows the full-clock power, the next path).
        ["tdp"] => knob(D::Power, vec![set(f::TDP)]).with(Bound::Positive),
        // What the silicon draws flat out: energy per FLOP derived from power follows it, so on
        // a device whose file states every energy per FLOP it would move nothing.
        ["full_clock_power"] => {
            if !d.energy_follows_power() {
                return Err((
                    format!("`{path}` moves nothing here: the device's file states its energy per FLOP, which nothing derives from power"),
                    Some("vary `device.energy_per_flop.<precision>` instead".into()),
                ));
            }
            Knob {
                derive: true,
                ..knob(D::Power, vec![set(f::RATED_TDP)])
            }
            .with(Bound::Positive)
        }
        ["dvfs", w] => {
            let field = match *w {
                "min_clock" => f::DVFS_MIN_CLOCK,
                "min_voltage" => f::DVFS_MIN_VOLTAGE,
                _ => return Err(unknown(path, sys)),
            };
            knob(D::Ratio, vec![set(field)]).with(Bound::Fraction)
        }
        ["idle_power"] => Knob {
            derive: true,
            ..knob(D::Power, vec![set(f::IDLE_POWER)])
        },
        ["efficiency", e] => {
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
        ["memory", rest @ ..] if rest.len() >= 2 => {
            let name = rest[..rest.len() - 1].join(".");
            let what = rest[rest.len() - 1];
            memory_level(sys, &name, what).map_err(|e| match e {
                Some(e) => e,
                None => unknown(path, sys),
            })?
        }
        ["mesh", what] => {
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
        _ => return Err(unknown(path, sys)),
    };
    Ok(k)
}

/// A path of the scale-up or scale-out network or of the weight store (`net` its first word).
fn network_knob(
    path: &str,
    net: &str,
    what: &str,
    sys: &System,
) -> Result<Knob, (String, Option<String>)> {
    use Dimension as D;
    let k = match [net, what] {
        ["scale_up", what] => {
            if sys.scale_up.is_none() {
                return Err((
                    format!("`{path}`: the system has no scale_up network"),
                    Some("add a `scale_up` section to the architecture, or vary `machine.up_bandwidth`".into()),
                ));
            }
            match what {
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
            match what {
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
        ["weight_store", what] => match what {
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
