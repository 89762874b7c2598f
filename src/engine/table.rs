//! The machine table: every number of the validated model an evaluator reads (and the few a
//! sweep needs to re-derive one), declared once — its slot in the flat machine vector, its name,
//! its unit, how it is obtained from the model, and the sweep paths that reach it.
//!
//! [`Machine`] *is* that vector: `engine::machine` fills it from a system, sweep axes write into
//! it, `cpu/` reads it, and the WGSL kernel gets the slot indices as generated constants
//! ([`wgsl_constants`]), so no layout is written twice. `tessera sweep --list-paths` lists the
//! table's paths.

use crate::model::precision::{Precision, NPREC};
// the rules the loader shares, stated in the model layer; re-exported where the engine reads them
pub use crate::model::rules::{fp4, low_precision, matrix_efficiency_of};
use crate::units::Dimension;

/// How a slot's value is obtained from the validated model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// A figure of the model as the architecture file states it (sourced or assumed there).
    Model,
    /// Combined from several model figures by a fixed rule (stated in the slot's doc).
    Combined,
    /// Derived where the file gives none, by a rule the model records per system (energy per FLOP
    /// from TDP); the model says which precisions were derived, nothing re-detects it.
    Derived,
}

impl How {
    pub fn name(self) -> &'static str {
        match self {
            How::Model => "model",
            How::Combined => "combined",
            How::Derived => "derived",
        }
    }
}

/// One row of the machine table.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// The `F_…` constant name (without the prefix).
    pub konst: &'static str,
    /// Name as `machine.<name>` spells it (per-precision slots add `.<precision>`).
    pub name: &'static str,
    /// First index in the machine vector.
    pub at: usize,
    /// 1, or [`NPREC`] for a per-precision slot.
    pub len: usize,
    pub dimension: Dimension,
    pub how: How,
    /// Whether an evaluator reads it today (the others are recorded for the models that will).
    pub evaluated: bool,
    /// File-shaped sweep paths that set it (`{p}` a precision, `{level}` a memory level).
    pub paths: &'static [&'static str],
    pub doc: &'static str,
}

macro_rules! machine_table {
    ($( $konst:ident [$len:expr] $name:literal, $dim:ident, $how:ident, $eval:literal,
        [$($path:literal),*], $doc:literal; )*) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[repr(usize)]
        enum Id { $($konst),* }
        const LENS: &[usize] = &[$($len),*];
        const fn offset(id: usize) -> usize {
            let (mut s, mut k) = (0, 0);
            while k < id {
                s += LENS[k];
                k += 1;
            }
            s
        }
        $( #[doc = $doc] pub const $konst: usize = offset(Id::$konst as usize); )*
        /// Slots in the machine vector.
        pub const NX: usize = offset(LENS.len());
        /// The table, in slot order.
        pub const SLOTS: &[Slot] = &[$(Slot {
            konst: stringify!($konst),
            name: $name,
            at: $konst,
            len: $len,
            dimension: Dimension::$dim,
            how: How::$how,
            evaluated: $eval,
            paths: &[$($path),*],
            doc: $doc,
        }),*];
    };
}

machine_table! {
    MATRIX_PEAK [NPREC] "matrix_peak", FlopRate, Combined, true, ["device.peak.{p}"],
        "Matrix-engine peak per precision (FLOP/s); the vector rate where a precision has no matrix rate.";
    VECTOR_PEAK [NPREC] "vector_peak", FlopRate, Combined, true, ["device.vector_peak.{p}"],
        "Vector rate per precision: the vector peak, a wider format's, or the matrix peak / 16.";
    EFF_MATMUL [1] "eff_matmul", Ratio, Model, true, ["device.efficiency.matmul"],
        "Achievable fraction of the matrix peak.";
    EFF_LOW_PRECISION [1] "eff_low_precision", Ratio, Model, true,
        ["device.efficiency.low_precision_matmul"],
        "Extra factor on the matrix efficiency for fp8 and narrower.";
    EFF_FP4_BACKWARD [1] "eff_fp4_backward", Ratio, Model, true, ["device.efficiency.fp4_backward_matmul"],
        "Extra factor on the low-precision efficiency for backward fp4 GEMMs (an FP4 recipe's work).";
    COMM_SHARE [1] "collective_compute_share", Ratio, Model, true,
        ["device.efficiency.collective_compute_share"],
        "Fraction of the device's compute an overlapped collective on the scale-up or scale-out links takes while it runs (its library's kernels on the cores).";
    EFF_VECTOR [1] "eff_vector", Ratio, Model, true, ["device.efficiency.vector"],
        "Achievable fraction of the vector peak.";
    EFF_MEMORY [1] "eff_memory", Ratio, Model, true, ["device.efficiency.memory"],
        "Achievable fraction of memory bandwidth.";
    EFF_NETWORK [1] "eff_network", Ratio, Model, true, ["device.efficiency.network"],
        "Achievable fraction of link bandwidth.";
    KERNEL_OVERHEAD [1] "kernel_overhead", Time, Model, true, ["device.efficiency.kernel_overhead"],
        "Fixed time per operator call (s).";
    STEP_OVERHEAD [1] "step_overhead", Time, Model, true, ["software.step_overhead"],
        "The software stack's time per optimizer step outside the devices' work (s; 0 = no stack named): the program's `host_steps` of it join each step, the devices at static power meanwhile.";
    MEMORY_RESERVE [1] "memory_reserve", Bytes, Model, true, ["software.memory_reserve"],
        "Main memory per device the software stack keeps for itself (B; 0 = no stack named): taken from the main tier's capacity (HBM where the device has it, else SRAM) before placement and the KV-cache solve.";
    SRAM_CAPACITY [1] "sram_capacity", Bytes, Combined, true,
        ["device.memory.{sram}.capacity", "sram.capacity"],
        "On-chip data SRAM per device: the sum of the SRAM levels (B).";
    SRAM_BANDWIDTH [1] "sram_bandwidth", Bandwidth, Combined, true,
        ["device.memory.{sram}.bandwidth", "sram.bandwidth"],
        "SRAM bandwidth per device: the fastest SRAM level (B/s).";
    SRAM_ENERGY [1] "sram_energy_per_byte", EnergyPerByte, Model, true,
        ["device.memory.{sram}.energy_per_byte", "sram.energy_per_byte"],
        "Energy per byte of SRAM traffic: the last SRAM level's (J/B).";
    HBM_CAPACITY [1] "hbm_capacity", Bytes, Combined, true,
        ["device.memory.{dram}.capacity", "hbm.capacity"],
        "Device main memory (HBM, DRAM): the sum of its levels (B).";
    HBM_BANDWIDTH [1] "hbm_bandwidth", Bandwidth, Combined, true,
        ["device.memory.{dram}.bandwidth", "hbm.bandwidth"],
        "Main-memory bandwidth: the sum of its levels (B/s).";
    HBM_ENERGY [1] "hbm_energy_per_byte", EnergyPerByte, Model, true,
        ["device.memory.{dram}.energy_per_byte", "hbm.energy_per_byte"],
        "Energy per byte of main-memory traffic: the last level's (J/B).";
    EXT_CAPACITY [1] "ext_capacity", Bytes, Model, true, ["weight_store.capacity"],
        "External weight store per device (0 = none) (B).";
    EXT_BANDWIDTH [1] "ext_bandwidth", Bandwidth, Model, true, ["weight_store.bandwidth"],
        "Weight-store bandwidth per device (B/s).";
    EXT_LATENCY [1] "ext_latency", Time, Model, true, ["weight_store.latency"],
        "Weight-store latency (s).";
    HOST_CAPACITY [1] "host_capacity", Bytes, Model, true, [],
        "Host memory per device: the node's memory shared by its devices (B); activations offloaded to host memory must fit it.";
    HOST_BANDWIDTH [1] "host_bandwidth", Bandwidth, Model, true, [],
        "Each device's link to host memory, per direction (NVLink-C2C, PCIe), bounded by its share of the host memory's bandwidth (B/s).";
    HOST_MEMORY_BANDWIDTH [1] "host_memory_bandwidth", Bandwidth, Combined, true, [],
        "Each device's share of its node's host memory bandwidth (B/s): what bounds the optimizer update of the state offloaded there (`Phase::Host`).";
    HOST_LATENCY [1] "host_latency", Time, Model, true, [],
        "Latency of one transfer over that link (s).";
    HOST_ENERGY [1] "host_energy_per_byte", EnergyPerByte, Model, true, [],
        "Energy per byte over the host link (J/B; the file writes it per bit).";
    UP_BANDWIDTH [1] "up_bandwidth", Bandwidth, Model, true, ["scale_up.bandwidth"],
        "Scale-up bandwidth per device, per direction (B/s); a file counting both directions is halved.";
    UP_LATENCY [1] "up_latency", Time, Model, true, ["scale_up.latency"],
        "Scale-up latency per step of a collective (s).";
    UP_INR [1] "up_in_network_reduction", Ratio, Model, true, ["scale_up.in_network_reduction"],
        "1 where the scale-up switches reduce in the network (SHARP), else 0.";
    UP_ENERGY [1] "up_energy_per_byte", EnergyPerByte, Model, true, ["scale_up.energy_per_bit"],
        "Energy per byte over the scale-up link (J/B; the file writes it per bit).";
    OUT_BANDWIDTH [1] "out_bandwidth", Bandwidth, Combined, true,
        ["scale_out.bandwidth", "scale_out.oversubscription"],
        "Scale-out bandwidth per device, per direction, divided by the oversubscription (B/s).";
    OUT_LATENCY [1] "out_latency", Time, Model, true, ["scale_out.latency"],
        "Scale-out latency per step of a collective (s).";
    OUT_INR [1] "out_in_network_reduction", Ratio, Model, true, ["scale_out.in_network_reduction"],
        "1 where the scale-out switches reduce in the network, else 0.";
    OUT_ENERGY [1] "out_energy_per_byte", EnergyPerByte, Model, true, ["scale_out.energy_per_bit"],
        "Energy per byte over the scale-out link (J/B).";
    TDP [1] "tdp", Power, Model, true, ["device.tdp"],
        "Device power limit (W): demand above it (or above `power_cap`) throttles the clock.";
    IDLE_POWER [1] "idle_power", Power, Model, true, ["device.idle_power"],
        "Device static power: drawn whenever it runs, whatever its clock (W).";
    ENERGY_PER_FLOP [NPREC] "energy_per_flop", EnergyPerFlop, Derived, true,
        ["device.energy_per_flop.{p}"],
        "Dynamic energy per FLOP at full clock (J): the file's figure, or (rated TDP − idle) / peak where it gives none, taken against the achievable rate when every figure is derived.";
    DVFS_MIN_CLOCK [1] "dvfs_min_clock", Ratio, Model, true, ["device.dvfs.min_clock"],
        "Lowest clock a power cap may throttle the device to, as a fraction of full clock.";
    DVFS_MIN_VOLTAGE [1] "dvfs_min_voltage", Ratio, Model, true, ["device.dvfs.min_voltage"],
        "Supply voltage at the lowest clock, as a fraction of nominal (voltage is linear in clock in between; dynamic energy per operation scales with voltage²).";
    POWER_CAP [1] "power_cap", Power, Combined, true, [],
        "Per-device share of the node and facility power limits the file declares (W, 0 = none): (node limit − node parts) / devices per node, (facility limit / PUE − non-device parts) / devices.";
    NODE_POWER [1] "node_power", Power, Combined, true, ["overhead_power"],
        "Hosts (CPUs, memory), NICs, fans and other node parts, per device (W); counted from the `node` boundary out. (`overhead_power` sets it and clears the switch and network shares: the lump it used to be.)";
    SWITCH_POWER [1] "switch_power", Power, Combined, true, [],
        "Scale-up switches (NVLink switch trays), per device (W); counted from the `rack` boundary out.";
    NETWORK_POWER [1] "network_power", Power, Combined, true, [],
        "Scale-out switches, per device (W); counted from the `it` boundary out.";
    STORE_POWER [1] "weight_store_power", Power, Model, true, ["weight_store.power"],
        "External weight store (MemoryX), per device (W): counted from the `it` boundary out, and only when the point keeps its state there.";
    STORE_COMPUTE [1] "weight_store_compute", FlopRate, Model, true, ["weight_store.compute"],
        "Each device's share of the weight store's compute for the optimizer update it runs (FLOP/s; 0 = the update runs on the devices).";
    STORE_MEMORY_BANDWIDTH [1] "weight_store_memory_bandwidth", Bandwidth, Model, true,
        ["weight_store.memory_bandwidth"],
        "Each device's share of the weight store's memory bandwidth for that update (B/s).";
    PUE [1] "pue", Ratio, Model, true, ["facility.pue"],
        "Facility power usage effectiveness.";
    BOUNDARY [1] "power_boundary", Ratio, Model, true, [],
        "Which parts power and energy count: 0 device, 1 node, 2 rack, 3 IT, 4 facility (× PUE) (`vocab::PowerBoundary`).";
    SRAM_LATENCY [1] "sram_latency", Time, Model, false, ["device.memory.{sram}.latency"],
        "Access latency of the fastest SRAM level (s).";
    HBM_LATENCY [1] "hbm_latency", Time, Model, false, ["device.memory.{dram}.latency"],
        "Access latency of the fastest main-memory level (s).";
    MESH_X [1] "mesh_x", Ratio, Model, false, ["device.mesh.x"],
        "Cores along the first dimension of the on-chip mesh (0 = no mesh).";
    MESH_Y [1] "mesh_y", Ratio, Model, false, ["device.mesh.y"],
        "Cores along the second dimension of the on-chip mesh.";
    MESH_LINK_BANDWIDTH [1] "mesh_link_bandwidth", Bandwidth, Model, true,
        ["device.mesh.link_bandwidth"],
        "Bandwidth of one mesh link, per direction (B/s).";
    MESH_HOP_LATENCY [1] "mesh_hop_latency", Time, Model, true, ["device.mesh.hop_latency"],
        "Latency of one mesh hop (s).";
    PIPELINE_STAGE_TIME [1] "pipeline_stage_time", Time, Model, true, ["software.pipeline_stage_time"],
        "The software stack's time each stage of a multi-device pipeline adds per micro-batch it passes on (s; 0 = no stack named): added to the stage's micro-batch as `Stage::hands_on` times this.";
    MESH_RELAY_TIME [1] "mesh_relay_time", Time, Model, true, ["software.mesh_relay_time"],
        "The software stack's time per 32-bit element a core of a streamed chain on the mesh relays (receives, adds, sends on) (s; 0 = no stack named): a mesh collective streams at the slower of its link and its `relayed` elements at this time each.";
    MESH_ENERGY [1] "mesh_energy_per_byte_hop", EnergyPerByte, Model, true,
        ["device.mesh.energy_per_bit_hop"],
        "Energy per byte per mesh hop (J/B; the file writes it per bit): a mesh collective's dynamic energy is its bytes × hops (`Link::hop_bytes`) times this.";
    RAW_MATRIX [NPREC] "raw_matrix_peak", FlopRate, Model, false, [],
        "The device's own matrix peaks (before the vector-rate fallback), which derived energy per FLOP follows.";
    RAW_VECTOR [NPREC] "raw_vector_peak", FlopRate, Model, false, [],
        "The device's own vector peaks, which derived energy per FLOP follows.";
    RAW_EPF [NPREC] "raw_energy_per_flop", EnergyPerFlop, Model, false, [],
        "Energy per FLOP as the model holds it (before the division by efficiency).";
    RATED_TDP [1] "rated_tdp", Power, Model, true, ["device.full_clock_power"],
        "What the device draws flat out at full clock (the file's `full_clock_power`, else its TDP), which derived energy per FLOP follows (a lower power limit does not make a FLOP cheaper).";
}

/// The slots of the machine the evaluators and `machine.*` axes address: all but the raw model
/// figures at the end.
pub const NF: usize = RAW_MATRIX;

/// The machine vector: one number per slot of [`SLOTS`], per device, SI. Flags are 1 or 0.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine(pub [f64; NX]);

impl Machine {
    pub fn zero() -> Machine {
        Machine([0.0; NX])
    }
    pub fn set_row(&mut self, at: usize, v: &[f64; NPREC]) {
        self.0[at..at + NPREC].copy_from_slice(v);
    }
    pub fn flag(&self, at: usize) -> bool {
        self.0[at] != 0.0
    }
}

impl std::ops::Index<usize> for Machine {
    type Output = f64;
    #[inline]
    fn index(&self, i: usize) -> &f64 {
        &self.0[i]
    }
}

impl std::ops::IndexMut<usize> for Machine {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut f64 {
        &mut self.0[i]
    }
}

/// The flat form a sweep writes into (the same vector).
pub type Fields = [f64; NX];

/// The slot holding index `i`.
pub fn slot_of(i: usize) -> &'static Slot {
    let k = SLOTS.partition_point(|s| s.at <= i);
    &SLOTS[k - 1]
}

/// Name of index `i` as the `machine.<name>` sweep path spells it (per-precision slots as
/// `matrix_peak.fp8`).
pub fn name(i: usize) -> String {
    let s = slot_of(i);
    if s.len == NPREC {
        format!("{}.{}", s.name, Precision::ALL[i - s.at].name())
    } else {
        s.name.to_string()
    }
}

/// What index `i` measures (its values are SI in that dimension).
pub fn dimension(i: usize) -> Dimension {
    slot_of(i).dimension
}

/// The WGSL constants for the slot indices, prepended to the kernel's source.
pub fn wgsl_constants() -> String {
    let mut s: String = SLOTS
        .iter()
        .map(|r| format!("const F_{}: u32 = {}u;\n", r.konst, r.at))
        .collect();
    s.push_str(&format!(
        "const NX: u32 = {NX}u;\nconst NPREC: u32 = {NPREC}u;\n"
    ));
    s.push_str(&format!(
        "const FIRST_LOW_PRECISION: u32 = {}u;\n",
        Precision::Fp8.index()
    ));
    // The reference GEMM's bytes per FLOP by precision (`model::rules::reference_bytes_per_flop`),
    // as a function: a switch needs no dynamic indexing of a constant array.
    s.push_str("fn reference_bytes_per_flop(i: u32) -> f32 {\n    switch i {\n");
    for i in 0..NPREC {
        s.push_str(&format!(
            "        case {i}u: {{ return {:e}; }}\n",
            crate::model::rules::reference_bytes_per_flop(i)
        ));
    }
    s.push_str("        default: { return 0.0; }\n    }\n}\n");
    s
}

/// The achievable fraction of peak for matrix work at precision index `p` on `m`.
#[inline]
pub fn matrix_efficiency(m: &[f64], p: usize) -> f64 {
    matrix_efficiency_of(m[EFF_MATMUL], m[EFF_LOW_PRECISION], p)
}

/// Which precisions' energy per FLOP follows the other figures, and how (bit i = precision i):
/// recorded in the model by the loader (see `Device::energy_per_flop_from_tdp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Derive {
    /// The loader's rule where the file gives no figure: (tdp − idle) / peak.
    pub rederive: u32,
    /// Divide by the efficiency of the engines that run the precision (every figure of the device
    /// derived: it draws its TDP at the achievable rate).
    pub divide: u32,
}

impl Derive {
    pub fn active(&self) -> bool {
        (self.rederive | self.divide) != 0
    }
}

/// Energy per FLOP from the raw model figures, by the rules `d` names: the one place the rule
/// lives (`engine::machine` calls it once, sweeps per point; the kernel has its port).
pub fn derive(d: Derive, x: &mut [f64]) {
    for i in 0..NPREC {
        let bit = 1u32 << i;
        if (d.rederive | d.divide) & bit == 0 {
            continue;
        }
        let mut e = x[RAW_EPF + i];
        let eff = if x[RAW_MATRIX + i] > 0.0 {
            matrix_efficiency(x, i)
        } else {
            x[EFF_VECTOR]
        };
        if d.rederive & bit != 0 {
            let rule = crate::model::rules::TdpRule {
                tdp: x[RATED_TDP],
                idle: x[IDLE_POWER],
                matrix_peak: x[RAW_MATRIX + i],
                vector_peak: x[RAW_VECTOR + i],
                efficiency: eff,
                at_achievable: d.divide & bit != 0,
                data_energy: data_energy(x),
            };
            e = rule.energy_per_flop(i).unwrap_or(e);
        }
        if d.divide & bit != 0 && eff > 0.0 {
            e /= eff;
        }
        x[ENERGY_PER_FLOP + i] = e;
    }
}

/// Energy per byte of the tier a device's data lives in: main memory's, or SRAM's on a device
/// without main memory (`model::system::data_energy_per_byte` on the machine vector).
#[inline]
pub fn data_energy(x: &[f64]) -> f64 {
    if x[HBM_CAPACITY] > 0.0 {
        x[HBM_ENERGY]
    } else {
        x[SRAM_ENERGY]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_tile_the_vector_and_names_are_unique() {
        let mut next = 0;
        for s in SLOTS {
            assert_eq!(s.at, next, "{} starts where the last ended", s.konst);
            next += s.len;
        }
        assert_eq!(next, NX);
        let names: std::collections::BTreeSet<String> = (0..NX).map(name).collect();
        assert_eq!(names.len(), NX, "slot names are unique");
        assert_eq!(
            name(MATRIX_PEAK + Precision::Fp8.index()),
            "matrix_peak.fp8"
        );
        assert_eq!(name(TDP), "tdp");
        assert_eq!(dimension(UP_BANDWIDTH), Dimension::Bandwidth);
    }
}
