//! The rules that fill in the device figures an architecture file leaves out: the achievable
//! fraction of the matrix peak at a precision, and energy per FLOP from TDP less the reference
//! GEMM's memory power. Stated once, in the model layer, so that the loader (`model::system`),
//! the machine table's per-point re-derivation (`engine::table::derive`) and the sweep's
//! reference (`engine::paths`) call the same functions, and the model imports nothing of the
//! engine.

use crate::model::precision::Precision;

/// Whether precision index `p` uses the low-precision matrix efficiency (fp8 and narrower): the
/// one statement of that rule, read by the evaluators, the energy derivation and the kernel's
/// generated `FIRST_LOW_PRECISION`.
#[inline]
pub fn low_precision(p: usize) -> bool {
    p >= Precision::Fp8.index()
}

/// Whether precision index `p` is fp4, whose backward GEMMs also take the factor
/// `fp4_backward_matmul` on top of the low-precision one (`coeffs::EffClass::of` applies it).
#[inline]
pub fn fp4(p: usize) -> bool {
    p == Precision::Fp4.index()
}

/// The achievable fraction of the matrix peak at precision index `p` from a device's factors:
/// `matmul`, × `low_precision` for fp8 and narrower (a forward GEMM's rate; the backward fp4
/// factor is a recipe's, left out of this reference). The one place the product is formed (the
/// loader's energy derivation and the sweep's reference call it; the kernel's
/// `matrix_efficiency` is its port).
#[inline]
pub fn matrix_efficiency_of(matmul: f64, low_precision_f: f64, p: usize) -> f64 {
    let mut e = matmul;
    if low_precision(p) {
        e *= low_precision_f;
    }
    e
}

/// Energy per FLOP where the file gives none (an assumption): a device running its engines flat
/// out at a precision draws its TDP. What it draws then is static power, the FLOPs' energy and the
/// energy of the memory traffic the work needs; the FLOPs get what is left, so
/// (TDP − idle − `memory_power`) / peak, where `memory_power` is [`reference_memory_power`] at the
/// rate the rule assumes (so memory energy the cost program counts is not counted twice).
pub fn energy_per_flop_from_tdp(tdp: f64, idle: f64, peak: f64, memory_power: f64) -> f64 {
    (tdp - idle - memory_power).max(0.0) / peak
}

/// What the TDP rule ([`energy_per_flop_from_tdp`]) reads of a device at one precision. The one
/// statement of the rule with its rate and its fallbacks: the loader, the sweep's per-point
/// re-derivation (`engine::table::derive`) and its test reference (`engine::paths::derive_energy`)
/// fill it from their own shape of the device and call [`TdpRule::energy_per_flop`]; the WGSL
/// kernel (`sample.wgsl`) is its port.
#[derive(Clone, Copy, Debug)]
pub struct TdpRule {
    pub tdp: f64,
    pub idle: f64,
    pub matrix_peak: f64,
    pub vector_peak: f64,
    /// The efficiency of the engines that run the precision ([`engine_efficiency`]).
    pub efficiency: f64,
    /// Every energy figure of the device is derived: it draws its TDP at the achievable rate
    /// (peak × efficiency), not at its peak.
    pub at_achievable: bool,
    /// Energy per byte of the tier the device's data lives in (J/B).
    pub data_energy: f64,
}

impl TdpRule {
    /// Energy per FLOP at precision index `p` (J), or `None` where the device has no peak at it.
    pub fn energy_per_flop(&self, p: usize) -> Option<f64> {
        let peak = self.matrix_peak.max(self.vector_peak);
        if peak <= 0.0 {
            return None;
        }
        let rate = if self.at_achievable && self.efficiency > 0.0 {
            peak * self.efficiency
        } else {
            peak
        };
        let mem = reference_memory_power(self.data_energy, rate, p);
        Some(energy_per_flop_from_tdp(self.tdp, self.idle, peak, mem))
    }
}

/// The efficiency of the engines that run precision index `p`: the matrix engines' (with the
/// low-precision factor) where the device has a matrix peak at it, else the vector engines'.
#[inline]
pub fn engine_efficiency(
    matrix: bool,
    matmul: f64,
    low_precision_f: f64,
    vector: f64,
    p: usize,
) -> f64 {
    if matrix {
        matrix_efficiency_of(matmul, low_precision_f, p)
    } else {
        vector
    }
}

/// Order of the square GEMM whose draw a TDP-derived energy per FLOP follows (an assumption: the
/// large GEMMs a device's power limit is set on; n = 8192 is the size vendors' GEMM benchmarks and
/// the efficiency figures of the architecture files quote).
pub const REFERENCE_GEMM_N: f64 = 8192.0;

/// Main-memory bytes per FLOP of the reference GEMM at precision index `p`, counted as the cost
/// program counts an operator's traffic (each operand read once, the result written once):
/// 3 n² elements over 2 n³ FLOPs.
pub fn reference_bytes_per_flop(p: usize) -> f64 {
    3.0 * Precision::ALL[p].bytes() / (2.0 * REFERENCE_GEMM_N)
}

/// Memory power of the reference GEMM at precision index `p` running at `rate` FLOP/s, with
/// `energy_per_byte` the energy of the tier its operands live in (W).
pub fn reference_memory_power(energy_per_byte: f64, rate: f64, p: usize) -> f64 {
    energy_per_byte * rate * reference_bytes_per_flop(p)
}
