//! The precisions lowered work runs at on a device: its nearest supported matrix format, the
//! attention core's and the vector work's. A leaf shared by every workload family's lowering.

use crate::model::precision::Precision;
use crate::model::system::System;

/// The precision the device actually runs `p` at (its nearest supported format).
pub(crate) fn run_precision(sys: &System, p: Precision) -> Precision {
    sys.device.matmul_rate(p).1
}

/// The precision of the attention core and the language-model head when the GEMMs of the
/// transformer block run at `prec`. Mixed-precision recipes with 8-bit (or narrower) formats
/// (NVIDIA Transformer Engine, AMD's port of it, MaxText's AQT) quantise the linear layers of the
/// block only: the fused attention kernels (QK^T, softmax, AV) and the output layer run in bf16.
/// Where the device has no bf16 rate (int-only inference chips) the work stays at `prec`.
pub(super) fn attention_precision(sys: &System, prec: Precision) -> usize {
    let b = Precision::Bf16;
    if prec.index() >= Precision::Fp8.index() && sys.device.matmul_rate(b).1 == b {
        b.index()
    } else {
        prec.index()
    }
}

/// Elementwise work runs in bf16 on the vector engines where the device has a bf16 vector
/// rate, else at the precision of the matrix work.
pub(super) fn vector_precision(sys: &System, matmul: usize) -> usize {
    let b = Precision::Bf16.index();
    if sys.device.vector_peak[b] > 0.0 || sys.device.matrix_peak[b] > 0.0 {
        b
    } else {
        matmul
    }
}
