//! The reference meaning of a path: the validated model edited as its file would be at that
//! number, and energy per FLOP re-derived where a path moves what it derives from.

use crate::model::precision::{Precision, NPREC};
use crate::model::system::System;

/// the axes set.
/// How energy per FLOP must be recomputed per point when axes move what it derives from, given
/// the precisions whose figure an axis sets in the model (`device`) or in the machine
/// (`machine`) (bit masks): the model's own record (`engine::machine::energy_rules`), less what
pub fn derivation(sys: &System, device: u32, machine: u32) -> crate::engine::table::Derive {
    let r = crate::engine::machine::energy_rules(sys);
    crate::engine::table::Derive {
        rederive: r.rederive & !device & !machine,
        divide: r.divide & !machine,
    }
}

/// The reference meaning of a path: edit the validated model `sys` as the architecture file
/// edited at that number would lower to. `None` for paths that name the machine vector directly
/// (`hbm.*`, `sram.*`, `overhead_power`, `machine.*`) or that `sys` lacks.
///
/// Sweeps never call this per point; `plan` checks the fast path against it when a sweep is built,
/// and `tests/it/sweep_paths.rs` for every path of every shipped architecture.
pub fn edit_system(sys: &mut System, path: &str, v: f64) -> Option<()> {
    let parts: Vec<&str> = path.split('.').collect();
    let d = &mut sys.device;
    match parts.as_slice() {
        ["device", "peak" | "matrix_peak", p] => d.matrix_peak[Precision::parse(p)?.index()] = v,
        ["device", "vector_peak", p] => d.vector_peak[Precision::parse(p)?.index()] = v,
        ["device", "energy_per_flop", p] => d.energy_per_flop[Precision::parse(p)?.index()] = v,
        ["device", "tdp"] => d.tdp = v,
        ["device", "full_clock_power"] => d.rated_tdp = v,
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
                    attention_kernel: None,
                    loss_kernel: Default::default(),
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
