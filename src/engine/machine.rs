//! The system → its machine vector: every slot of the machine table filled from the validated
//! model, per device and in SI, with the rules that combine the model's figures (memory levels
//! into tiers, oversubscription into the scale-out bandwidth, energy per FLOP derived from TDP
//! where the model records that the file gives none).

use super::table::{self as t, Derive, Machine};
use crate::model::precision::{Precision, NPREC};
use crate::model::system::System;
use crate::vocab::MemoryKind;

/// The machine vector of `sys` when `devices` of its devices are used.
pub fn machine(sys: &System, devices: u64) -> Machine {
    let _ = devices;
    let d = &sys.device;
    let mut m = Machine::zero();
    // Memory levels (fastest first) into two tiers: SRAM capacities add and the fastest level
    // sets the rate; main-memory capacities and bandwidths add; a tier's energy per byte and
    // latency are those of its last and its first level.
    let mut seen = [false; 2];
    for l in d.memory.iter().filter(|l| !l.cache) {
        let sram = l.kind == MemoryKind::Sram;
        if sram {
            m[t::SRAM_CAPACITY] += l.capacity;
            m[t::SRAM_BANDWIDTH] = m[t::SRAM_BANDWIDTH].max(l.bandwidth);
            m[t::SRAM_ENERGY] = l.energy_per_byte;
        } else {
            m[t::HBM_CAPACITY] += l.capacity;
            m[t::HBM_BANDWIDTH] += l.bandwidth;
            m[t::HBM_ENERGY] = l.energy_per_byte;
        }
        let (k, lat) = if sram {
            (0, t::SRAM_LATENCY)
        } else {
            (1, t::HBM_LATENCY)
        };
        if !seen[k] {
            m[lat] = l.latency;
            seen[k] = true;
        }
    }
    if let Some(u) = &sys.scale_up {
        m[t::UP_BANDWIDTH] = u.bandwidth;
        m[t::UP_LATENCY] = u.latency;
        m[t::UP_INR] = flag(u.in_network_reduction);
        m[t::UP_ENERGY] = u.energy_per_byte;
    }
    if let Some(o) = &sys.scale_out {
        m[t::OUT_BANDWIDTH] = o.bandwidth / o.oversubscription;
        m[t::OUT_LATENCY] = o.latency;
        m[t::OUT_INR] = flag(o.in_network_reduction);
        m[t::OUT_ENERGY] = o.energy_per_byte;
    }
    if let Some(w) = &sys.weight_store {
        m[t::EXT_CAPACITY] = w.capacity;
        m[t::EXT_BANDWIDTH] = w.bandwidth;
        m[t::EXT_LATENCY] = w.latency;
    }
    if let Some(h) = &sys.node.host_link {
        m[t::HOST_CAPACITY] = sys.node.host_capacity();
        m[t::HOST_MEMORY_BANDWIDTH] = sys.node.host_memory_bandwidth();
        m[t::HOST_BANDWIDTH] = h.bandwidth;
        m[t::HOST_LATENCY] = h.latency;
        m[t::HOST_ENERGY] = h.energy_per_byte;
    }
    if let Some(mesh) = &d.mesh {
        m[t::MESH_X] = mesh.dims.first().copied().unwrap_or(0) as f64;
        m[t::MESH_Y] = mesh.dims.get(1).copied().unwrap_or(1) as f64;
        m[t::MESH_LINK_BANDWIDTH] = mesh.link_bandwidth;
        m[t::MESH_HOP_LATENCY] = mesh.hop_latency;
        m[t::MESH_ENERGY] = mesh.energy_per_byte_hop;
    }
    let mut vector_peak = [0.0; NPREC];
    for p in Precision::ALL {
        vector_peak[p.index()] = d.vector_rate(p);
    }
    m.set_row(t::VECTOR_PEAK, &vector_peak);
    // A matrix product runs on the vector units where a precision has no matrix-engine rate
    // (P100 and V100 CUDA cores, UPMEM): the matrix rate is then the vector rate.
    let mut matrix_peak = d.matrix_peak;
    for (mp, v) in matrix_peak.iter_mut().zip(d.vector_peak) {
        if *mp == 0.0 {
            *mp = v;
        }
    }
    m.set_row(t::MATRIX_PEAK, &matrix_peak);
    m.set_row(t::RAW_MATRIX, &d.matrix_peak);
    m.set_row(t::RAW_VECTOR, &d.vector_peak);
    m.set_row(t::RAW_EPF, &d.energy_per_flop);
    let e = &d.efficiency;
    m[t::EFF_MATMUL] = e.matmul;
    m[t::EFF_LOW_PRECISION] = e.low_precision_matmul;
    m[t::EFF_FP4_BACKWARD] = e.fp4_backward_matmul;
    m[t::COMM_SHARE] = e.collective_compute_share;
    m[t::EFF_VECTOR] = e.vector;
    m[t::EFF_MEMORY] = e.memory;
    m[t::EFF_NETWORK] = e.network;
    m[t::KERNEL_OVERHEAD] = e.kernel_overhead;
    m[t::STEP_OVERHEAD] = sys.software.as_ref().map_or(0.0, |s| s.step_overhead);
    m[t::MESH_RELAY_TIME] = sys.software.as_ref().map_or(0.0, |s| s.mesh_relay_time);
    m[t::PIPELINE_STAGE_TIME] = sys.software.as_ref().map_or(0.0, |s| s.pipeline_stage_time);
    m[t::MEMORY_RESERVE] = sys.software.as_ref().map_or(0.0, |s| s.memory_reserve);
    m[t::TDP] = d.tdp;
    m[t::RATED_TDP] = d.rated_tdp;
    m[t::IDLE_POWER] = d.idle_power;
    m[t::DVFS_MIN_CLOCK] = d.dvfs.min_clock;
    m[t::DVFS_MIN_VOLTAGE] = d.dvfs.min_voltage;
    m.set_row(t::ENERGY_PER_FLOP, &d.energy_per_flop);
    // The model already holds the derived figures; only the division by efficiency remains.
    t::derive(
        Derive {
            rederive: 0,
            divide: energy_rules(sys).divide,
        },
        &mut m.0,
    );
    let p = sys.power_parts();
    let n = sys.devices as f64;
    m[t::NODE_POWER] = p.node / n;
    m[t::SWITCH_POWER] = p.scale_up_switches / n;
    m[t::NETWORK_POWER] = p.scale_out_switches / n;
    m[t::STORE_POWER] = p.weight_store / n;
    // the store updates every device's weights once: each device's share of its rates
    if let Some(w) = &sys.weight_store {
        m[t::STORE_COMPUTE] = w.compute / n;
        m[t::STORE_MEMORY_BANDWIDTH] = w.memory_bandwidth / n;
    }
    m[t::POWER_CAP] = sys.power_cap();
    m[t::PUE] = sys.pue;
    m[t::BOUNDARY] = sys.power_boundary.code();
    m
}

fn flag(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// How energy per FLOP follows the other figures on this system, as the model records it.
///
/// Where the architecture gives no energy per FLOP, the model derives it from the TDP as
/// (TDP − idle) / peak: the device would draw its TDP only at 100 % of peak. Accelerators reach
/// their TDP (and are power-capped there) when their engines run at the *achievable* rate of
/// large GEMMs, so where every figure is derived it is taken against the achievable rate: divided
/// by the efficiency of each precision. A device then draws its TDP at its stated efficiency, and
/// a training step's power is TDP × (achieved / achievable) plus memory and link energy.
pub fn energy_rules(sys: &System) -> Derive {
    let d = &sys.device;
    let mut r = Derive::default();
    for i in 0..NPREC {
        if d.energy_per_flop_from_tdp[i] {
            r.rederive |= 1 << i;
        }
        if d.energy_per_flop_derived {
            r.divide |= 1 << i;
        }
    }
    r
}
