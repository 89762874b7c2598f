//! The system → its machine vector: every number of the validated model an evaluator reads,
//! per device and in SI, with the rules that combine the model's figures (memory levels into
//! tiers, oversubscription into the scale-out bandwidth, energy per FLOP derived from TDP).

use super::program::Machine;
use crate::model::precision::Precision;
use crate::model::system::System;
use crate::spec::arch::MemoryKind;

/// The machine vector of `sys` when `devices` of its devices are used.
pub fn machine(sys: &System, devices: u64) -> Machine {
    let d = &sys.device;
    let mut sram_cap = 0.0;
    let mut sram_bw: f64 = 0.0;
    let mut sram_e = 0.0;
    let mut hbm_cap = 0.0;
    let mut hbm_bw = 0.0;
    let mut hbm_e = 0.0;
    for m in &d.memory {
        if m.cache {
            continue;
        }
        if m.kind == MemoryKind::Sram {
            sram_cap += m.capacity;
            sram_bw = sram_bw.max(m.bandwidth);
            sram_e = m.energy_per_byte;
        } else {
            hbm_cap += m.capacity;
            hbm_bw += m.bandwidth;
            hbm_e = m.energy_per_byte;
        }
    }
    let (up_bw, up_lat, up_inr, up_e) = match &sys.scale_up {
        Some(u) => (
            u.bandwidth,
            u.latency,
            u.in_network_reduction,
            u.energy_per_byte,
        ),
        None => (0.0, 0.0, false, 0.0),
    };
    let (out_bw, out_lat, out_inr, out_e) = match &sys.scale_out {
        Some(o) => (
            o.bandwidth / o.oversubscription,
            o.latency,
            o.in_network_reduction,
            o.energy_per_byte,
        ),
        None => (0.0, 0.0, false, 0.0),
    };
    let (ext_cap, ext_bw, ext_lat) = match &sys.weight_store {
        Some(w) => (w.capacity, w.bandwidth, w.latency),
        None => (0.0, 0.0, 0.0),
    };
    let _ = devices;
    let mut vector_peak = d.vector_peak;
    for p in Precision::ALL {
        vector_peak[p.index()] = d.vector_rate(p);
    }
    // Where the architecture gives no energy per FLOP, the model derives it from the TDP as
    // (TDP − idle) / peak: the device would draw its TDP only at 100 % of peak. Accelerators reach
    // their TDP (and are power-capped there) when their engines run at the *achievable* rate of
    // large GEMMs, so the derived figure is taken against the achievable rate: divided by the
    // efficiency of each precision. A device then draws its TDP at its stated efficiency, and a
    // training step's power is TDP × (achieved / achievable) plus memory and link energy.
    let mut energy_per_flop = d.energy_per_flop;
    if d.energy_per_flop_derived {
        let e = &d.efficiency;
        for p in Precision::ALL {
            let i = p.index();
            let eff = if d.matrix_peak[i] > 0.0 {
                e.matmul
                    * if i >= Precision::Fp8.index() {
                        e.low_precision_matmul
                    } else {
                        1.0
                    }
            } else {
                e.vector
            };
            if eff > 0.0 {
                energy_per_flop[i] /= eff;
            }
        }
    }
    // A matrix product runs on the vector units where a precision has no matrix-engine rate
    // (P100 and V100 CUDA cores, UPMEM): the matrix rate is then the vector rate.
    let mut matrix_peak = d.matrix_peak;
    for (m, v) in matrix_peak.iter_mut().zip(d.vector_peak) {
        if *m == 0.0 {
            *m = v;
        }
    }
    Machine {
        matrix_peak,
        vector_peak,
        eff_matmul: d.efficiency.matmul,
        eff_low_precision: d.efficiency.low_precision_matmul,
        eff_vector: d.efficiency.vector,
        eff_memory: d.efficiency.memory,
        eff_network: d.efficiency.network,
        kernel_overhead: d.efficiency.kernel_overhead,
        sram_capacity: sram_cap,
        sram_bandwidth: sram_bw,
        sram_energy_per_byte: sram_e,
        hbm_capacity: hbm_cap,
        hbm_bandwidth: hbm_bw,
        hbm_energy_per_byte: hbm_e,
        ext_capacity: ext_cap,
        ext_bandwidth: ext_bw,
        ext_latency: ext_lat,
        up_bandwidth: up_bw,
        up_latency: up_lat,
        up_in_network_reduction: up_inr,
        up_energy_per_byte: up_e,
        out_bandwidth: out_bw,
        out_latency: out_lat,
        out_in_network_reduction: out_inr,
        out_energy_per_byte: out_e,
        tdp: d.tdp,
        idle_power: d.idle_power,
        energy_per_flop,
        overhead_power: sys.overhead_power() / sys.devices as f64,
        pue: sys.pue,
    }
}
