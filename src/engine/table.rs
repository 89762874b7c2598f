//! The machine vector as a flat array of numbers, one index per quantity: the form sweep axes
//! write into and the WGSL kernel reads. [`to_fields`] and [`from_fields`] convert to and from
//! [`Machine`] without loss; the field indices are handed to the kernel as generated constants, so
//! the host and the shader cannot disagree on the layout.
//!
//! After the [`NF`] machine fields come a few "shadow" fields a sweep needs to re-derive dependent
//! quantities the way the loader does (the raw per-precision peaks the default energy per FLOP is
//! derived from).

use crate::engine::program::Machine;
use crate::model::precision::NPREC;
use crate::units::Dimension;

pub const MATRIX_PEAK: usize = 0;
pub const VECTOR_PEAK: usize = MATRIX_PEAK + NPREC;
pub const EFF_MATMUL: usize = VECTOR_PEAK + NPREC;
pub const EFF_LOW_PRECISION: usize = EFF_MATMUL + 1;
pub const EFF_VECTOR: usize = EFF_MATMUL + 2;
pub const EFF_MEMORY: usize = EFF_MATMUL + 3;
pub const EFF_NETWORK: usize = EFF_MATMUL + 4;
pub const KERNEL_OVERHEAD: usize = EFF_MATMUL + 5;
pub const SRAM_CAPACITY: usize = EFF_MATMUL + 6;
pub const SRAM_BANDWIDTH: usize = EFF_MATMUL + 7;
pub const SRAM_ENERGY: usize = EFF_MATMUL + 8;
pub const HBM_CAPACITY: usize = EFF_MATMUL + 9;
pub const HBM_BANDWIDTH: usize = EFF_MATMUL + 10;
pub const HBM_ENERGY: usize = EFF_MATMUL + 11;
pub const EXT_CAPACITY: usize = EFF_MATMUL + 12;
pub const EXT_BANDWIDTH: usize = EFF_MATMUL + 13;
pub const EXT_LATENCY: usize = EFF_MATMUL + 14;
pub const UP_BANDWIDTH: usize = EFF_MATMUL + 15;
pub const UP_LATENCY: usize = EFF_MATMUL + 16;
pub const UP_INR: usize = EFF_MATMUL + 17;
pub const UP_ENERGY: usize = EFF_MATMUL + 18;
pub const OUT_BANDWIDTH: usize = EFF_MATMUL + 19;
pub const OUT_LATENCY: usize = EFF_MATMUL + 20;
pub const OUT_INR: usize = EFF_MATMUL + 21;
pub const OUT_ENERGY: usize = EFF_MATMUL + 22;
pub const TDP: usize = EFF_MATMUL + 23;
pub const IDLE_POWER: usize = EFF_MATMUL + 24;
pub const ENERGY_PER_FLOP: usize = EFF_MATMUL + 25;
pub const OVERHEAD_POWER: usize = ENERGY_PER_FLOP + NPREC;
pub const PUE: usize = OVERHEAD_POWER + 1;
/// Fields of [`Machine`].
pub const NF: usize = PUE + 1;
/// Shadow: the device's own matrix and vector peaks per precision (before the vector-rate
/// fallback), from which the loader derives energy per FLOP when the file gives none.
pub const RAW_MATRIX: usize = NF;
pub const RAW_VECTOR: usize = RAW_MATRIX + NPREC;
/// Shadow: the device's energy per FLOP as the model holds it, before `lower::machine` divides a
/// derived figure by the efficiency of its engines.
pub const RAW_EPF: usize = RAW_VECTOR + NPREC;
/// All fields, machine and shadow.
pub const NX: usize = RAW_EPF + NPREC;

/// The flat form of a machine plus its shadow fields.
pub type Fields = [f64; NX];

/// Name of field `i` as the `machine.<name>` sweep path spells it (per-precision fields as
/// `matrix_peak.fp8`).
pub fn name(i: usize) -> String {
    use crate::model::precision::Precision;
    let prec = |base: usize| Precision::ALL[i - base].name();
    match i {
        _ if i < VECTOR_PEAK => format!("matrix_peak.{}", prec(MATRIX_PEAK)),
        _ if i < EFF_MATMUL => format!("vector_peak.{}", prec(VECTOR_PEAK)),
        _ if (ENERGY_PER_FLOP..OVERHEAD_POWER).contains(&i) => {
            format!("energy_per_flop.{}", prec(ENERGY_PER_FLOP))
        }
        _ if (RAW_MATRIX..RAW_VECTOR).contains(&i) => {
            format!("raw_matrix_peak.{}", prec(RAW_MATRIX))
        }
        _ if (RAW_VECTOR..RAW_EPF).contains(&i) => {
            format!("raw_vector_peak.{}", prec(RAW_VECTOR))
        }
        _ if (RAW_EPF..NX).contains(&i) => format!("raw_energy_per_flop.{}", prec(RAW_EPF)),
        EFF_MATMUL => "eff_matmul".into(),
        EFF_LOW_PRECISION => "eff_low_precision".into(),
        EFF_VECTOR => "eff_vector".into(),
        EFF_MEMORY => "eff_memory".into(),
        EFF_NETWORK => "eff_network".into(),
        KERNEL_OVERHEAD => "kernel_overhead".into(),
        SRAM_CAPACITY => "sram_capacity".into(),
        SRAM_BANDWIDTH => "sram_bandwidth".into(),
        SRAM_ENERGY => "sram_energy_per_byte".into(),
        HBM_CAPACITY => "hbm_capacity".into(),
        HBM_BANDWIDTH => "hbm_bandwidth".into(),
        HBM_ENERGY => "hbm_energy_per_byte".into(),
        EXT_CAPACITY => "ext_capacity".into(),
        EXT_BANDWIDTH => "ext_bandwidth".into(),
        EXT_LATENCY => "ext_latency".into(),
        UP_BANDWIDTH => "up_bandwidth".into(),
        UP_LATENCY => "up_latency".into(),
        UP_INR => "up_in_network_reduction".into(),
        UP_ENERGY => "up_energy_per_byte".into(),
        OUT_BANDWIDTH => "out_bandwidth".into(),
        OUT_LATENCY => "out_latency".into(),
        OUT_INR => "out_in_network_reduction".into(),
        OUT_ENERGY => "out_energy_per_byte".into(),
        TDP => "tdp".into(),
        IDLE_POWER => "idle_power".into(),
        OVERHEAD_POWER => "overhead_power".into(),
        PUE => "pue".into(),
        _ => format!("field{i}"),
    }
}

/// What field `i` measures (its values are SI in that dimension).
pub fn dimension(i: usize) -> Dimension {
    match i {
        _ if i < EFF_MATMUL => Dimension::FlopRate,
        _ if (RAW_MATRIX..RAW_EPF).contains(&i) => Dimension::FlopRate,
        _ if (RAW_EPF..NX).contains(&i) => Dimension::EnergyPerFlop,
        _ if (ENERGY_PER_FLOP..OVERHEAD_POWER).contains(&i) => Dimension::EnergyPerFlop,
        KERNEL_OVERHEAD | EXT_LATENCY | UP_LATENCY | OUT_LATENCY => Dimension::Time,
        SRAM_CAPACITY | HBM_CAPACITY | EXT_CAPACITY => Dimension::Bytes,
        SRAM_BANDWIDTH | HBM_BANDWIDTH | EXT_BANDWIDTH | UP_BANDWIDTH | OUT_BANDWIDTH => {
            Dimension::Bandwidth
        }
        SRAM_ENERGY | HBM_ENERGY | UP_ENERGY | OUT_ENERGY => Dimension::EnergyPerByte,
        TDP | IDLE_POWER | OVERHEAD_POWER => Dimension::Power,
        _ => Dimension::Ratio,
    }
}

fn flag(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// The machine's fields; the shadow fields are left at 0 (the caller fills them from the system).
pub fn to_fields(m: &Machine) -> Fields {
    let mut x = [0.0; NX];
    x[MATRIX_PEAK..MATRIX_PEAK + NPREC].copy_from_slice(&m.matrix_peak);
    x[VECTOR_PEAK..VECTOR_PEAK + NPREC].copy_from_slice(&m.vector_peak);
    x[EFF_MATMUL] = m.eff_matmul;
    x[EFF_LOW_PRECISION] = m.eff_low_precision;
    x[EFF_VECTOR] = m.eff_vector;
    x[EFF_MEMORY] = m.eff_memory;
    x[EFF_NETWORK] = m.eff_network;
    x[KERNEL_OVERHEAD] = m.kernel_overhead;
    x[SRAM_CAPACITY] = m.sram_capacity;
    x[SRAM_BANDWIDTH] = m.sram_bandwidth;
    x[SRAM_ENERGY] = m.sram_energy_per_byte;
    x[HBM_CAPACITY] = m.hbm_capacity;
    x[HBM_BANDWIDTH] = m.hbm_bandwidth;
    x[HBM_ENERGY] = m.hbm_energy_per_byte;
    x[EXT_CAPACITY] = m.ext_capacity;
    x[EXT_BANDWIDTH] = m.ext_bandwidth;
    x[EXT_LATENCY] = m.ext_latency;
    x[UP_BANDWIDTH] = m.up_bandwidth;
    x[UP_LATENCY] = m.up_latency;
    x[UP_INR] = flag(m.up_in_network_reduction);
    x[UP_ENERGY] = m.up_energy_per_byte;
    x[OUT_BANDWIDTH] = m.out_bandwidth;
    x[OUT_LATENCY] = m.out_latency;
    x[OUT_INR] = flag(m.out_in_network_reduction);
    x[OUT_ENERGY] = m.out_energy_per_byte;
    x[TDP] = m.tdp;
    x[IDLE_POWER] = m.idle_power;
    x[ENERGY_PER_FLOP..ENERGY_PER_FLOP + NPREC].copy_from_slice(&m.energy_per_flop);
    x[OVERHEAD_POWER] = m.overhead_power;
    x[PUE] = m.pue;
    x
}

/// The machine the fields describe (flags are true where their field is not 0).
pub fn from_fields(x: &[f64]) -> Machine {
    let arr = |base: usize| -> [f64; NPREC] {
        let mut a = [0.0; NPREC];
        a.copy_from_slice(&x[base..base + NPREC]);
        a
    };
    Machine {
        matrix_peak: arr(MATRIX_PEAK),
        vector_peak: arr(VECTOR_PEAK),
        eff_matmul: x[EFF_MATMUL],
        eff_low_precision: x[EFF_LOW_PRECISION],
        eff_vector: x[EFF_VECTOR],
        eff_memory: x[EFF_MEMORY],
        eff_network: x[EFF_NETWORK],
        kernel_overhead: x[KERNEL_OVERHEAD],
        sram_capacity: x[SRAM_CAPACITY],
        sram_bandwidth: x[SRAM_BANDWIDTH],
        sram_energy_per_byte: x[SRAM_ENERGY],
        hbm_capacity: x[HBM_CAPACITY],
        hbm_bandwidth: x[HBM_BANDWIDTH],
        hbm_energy_per_byte: x[HBM_ENERGY],
        ext_capacity: x[EXT_CAPACITY],
        ext_bandwidth: x[EXT_BANDWIDTH],
        ext_latency: x[EXT_LATENCY],
        up_bandwidth: x[UP_BANDWIDTH],
        up_latency: x[UP_LATENCY],
        up_in_network_reduction: x[UP_INR] != 0.0,
        up_energy_per_byte: x[UP_ENERGY],
        out_bandwidth: x[OUT_BANDWIDTH],
        out_latency: x[OUT_LATENCY],
        out_in_network_reduction: x[OUT_INR] != 0.0,
        out_energy_per_byte: x[OUT_ENERGY],
        tdp: x[TDP],
        idle_power: x[IDLE_POWER],
        energy_per_flop: arr(ENERGY_PER_FLOP),
        overhead_power: x[OVERHEAD_POWER],
        pue: x[PUE],
    }
}

/// The WGSL constants for the field indices, prepended to the kernel's source.
pub fn wgsl_constants() -> String {
    let mut s = String::new();
    let consts = [
        ("F_MATRIX_PEAK", MATRIX_PEAK),
        ("F_VECTOR_PEAK", VECTOR_PEAK),
        ("F_EFF_MATMUL", EFF_MATMUL),
        ("F_EFF_LOW_PRECISION", EFF_LOW_PRECISION),
        ("F_EFF_VECTOR", EFF_VECTOR),
        ("F_EFF_MEMORY", EFF_MEMORY),
        ("F_EFF_NETWORK", EFF_NETWORK),
        ("F_KERNEL_OVERHEAD", KERNEL_OVERHEAD),
        ("F_SRAM_CAPACITY", SRAM_CAPACITY),
        ("F_SRAM_BANDWIDTH", SRAM_BANDWIDTH),
        ("F_SRAM_ENERGY", SRAM_ENERGY),
        ("F_HBM_CAPACITY", HBM_CAPACITY),
        ("F_HBM_BANDWIDTH", HBM_BANDWIDTH),
        ("F_HBM_ENERGY", HBM_ENERGY),
        ("F_EXT_CAPACITY", EXT_CAPACITY),
        ("F_EXT_BANDWIDTH", EXT_BANDWIDTH),
        ("F_EXT_LATENCY", EXT_LATENCY),
        ("F_UP_BANDWIDTH", UP_BANDWIDTH),
        ("F_UP_LATENCY", UP_LATENCY),
        ("F_UP_INR", UP_INR),
        ("F_UP_ENERGY", UP_ENERGY),
        ("F_OUT_BANDWIDTH", OUT_BANDWIDTH),
        ("F_OUT_LATENCY", OUT_LATENCY),
        ("F_OUT_INR", OUT_INR),
        ("F_OUT_ENERGY", OUT_ENERGY),
        ("F_TDP", TDP),
        ("F_IDLE_POWER", IDLE_POWER),
        ("F_ENERGY_PER_FLOP", ENERGY_PER_FLOP),
        ("F_OVERHEAD_POWER", OVERHEAD_POWER),
        ("F_PUE", PUE),
        ("F_RAW_MATRIX", RAW_MATRIX),
        ("F_RAW_VECTOR", RAW_VECTOR),
        ("F_RAW_EPF", RAW_EPF),
        ("NX", NX),
        ("NPREC", NPREC),
    ];
    for (n, v) in consts {
        s.push_str(&format!("const {n}: u32 = {v}u;\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_exact() {
        let mut x = [0.0; NX];
        for (i, v) in x.iter_mut().enumerate().take(NF) {
            *v = 1.0 + i as f64 * 0.37;
        }
        x[UP_INR] = 1.0;
        x[OUT_INR] = 0.0;
        let m = from_fields(&x);
        let y = to_fields(&m);
        assert_eq!(&x[..NF], &y[..NF]);
        let names: std::collections::BTreeSet<String> = (0..NX).map(name).collect();
        assert_eq!(names.len(), NX, "field names are unique");
    }
}
