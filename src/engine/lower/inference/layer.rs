//! A transformer layer's kernels at serving time, as data: what one device of a stage reads and
//! computes for a pass of some tokens through a layer, kernel by kernel as the serving stack
//! launches them (`vocab::Kernels`); what of a layer it reads is `params`'. Decode, the draft
//! and prefill build their operators from the same list.

use super::params::read;
use super::shape::Shape;
use crate::engine::lower::builder::Builder;
use crate::engine::program::{Form, Op, Phase, Section};
use crate::engine::tiling::{self, Gemm};
use crate::vocab::Kernels;

/// The names of a pass's kernels: [matrix products (compiled), qkv, output projection, mlp up,
/// mlp down, elementwise].
pub(super) type Names = [&'static str; 6];

pub(super) const DECODE: Names = [
    "decode: layer matmuls",
    "decode: qkv projection",
    "decode: output projection",
    "decode: mlp up",
    "decode: mlp down",
    "decode: elementwise",
];

pub(super) const DRAFT: Names = [
    "decode: draft layer matmuls",
    "decode: draft qkv projection",
    "decode: draft output projection",
    "decode: draft mlp up",
    "decode: draft mlp down",
    "decode: draft elementwise",
];

pub(super) const PREFILL: Names = [
    "prefill: layer matmuls",
    "prefill: qkv projection",
    "prefill: output projection",
    "prefill: mlp up",
    "prefill: mlp down",
    "prefill: elementwise",
];

/// One kind of kernel of a layer pass on one device: launched `launches` times per layer, each
/// launch doing 1/`launches` of the work below and paying the device's kernel overhead once.
struct Kernel {
    /// Its name's index in [`Names`].
    name: usize,
    matrix: bool,
    launches: f64,
    /// Work of all its launches in one layer pass.
    flops: f64,
    weight_bytes: f64,
    act_bytes: f64,
    /// One launch's product (its tile and wave occupancy, `engine::tiling`); `None`: full
    /// occupancy.
    gemm: Option<Gemm>,
}

/// The kernels of a pass of `tokens` tokens through one layer on a device holding `d` devices'
/// share of it. `Compiled`: one kernel of all the layer's matrix products, one of its vector
/// work. Otherwise Q, K, V (three GEMMs, or one), the output projection, the MLP's up and gate
/// (two GEMMs, or one with the activation in its epilogue) and its down projection, each of
/// `(n, inner)`: the columns of a launch's output (tokens × n) and the width it sums over (routed
/// experts taken as one product of their active width); then the vector kernels.
fn kernels(s: &Shape, d: f64, tokens: f64) -> Vec<Kernel> {
    let (t, h, ab, wb) = (s.t, s.h, s.ab, s.wb);
    let read = read(t, tokens, s.ep);
    let sep = s.kernels == Kernels::Separate;
    let mut out = Vec::with_capacity(5);
    let gemm = |name: usize, k: f64, active: f64, read: f64, (n, inner): (f64, f64)| Kernel {
        name,
        matrix: true,
        launches: k,
        flops: 2.0 * active / d * tokens,
        weight_bytes: read / d * wb,
        act_bytes: tokens * h * ab,
        gemm: Some(Gemm::new(tokens, n, inner)),
    };
    if s.kernels == Kernels::Compiled {
        out.push(Kernel {
            name: 0,
            matrix: true,
            launches: 1.0,
            flops: 2.0 * s.layer_active / d * tokens,
            weight_bytes: read / d * wb,
            act_bytes: 4.0 * tokens * h * ab,
            gemm: None,
        });
    } else {
        let ffn_mats = s.ffn_mats;
        let ffn_read = read - t.attn_params();
        let (qkv_split, qkv_shared) = t.qkv_params();
        let (qkv, o) = (qkv_split + qkv_shared, s.vd * h);
        let up_share = (ffn_mats - 1.0) / ffn_mats;
        let active = t.layer_ffn_active();
        // Q, K, V and the MLP's up projection split their output columns over the devices; the
        // output and down projections their inner width (output h wide)
        let qkv_k = if sep { 3.0 } else { 1.0 };
        out.push(gemm(1, qkv_k, qkv, qkv, (qkv / (h * d * qkv_k), h)));
        out.push(gemm(2, 1.0, o, o, (h, s.vd / d)));
        let up_k = if sep { ffn_mats - 1.0 } else { 1.0 };
        let up = active * up_share;
        out.push(gemm(
            3,
            up_k,
            up,
            ffn_read * up_share,
            (up / (h * d * up_k), h),
        ));
        let down = active / ffn_mats;
        out.push(gemm(4, 1.0, down, ffn_read / ffn_mats, (h, down / (h * d))));
    }
    // vector kernels: two residual-add + RMSNorm (fused), else the norms, the adds, rotary, the
    // cache append and the activation apart; a layer with experts adds its routing kernels (the
    // router GEMM's FLOPs are the MLP's); compiled, one step
    let (vector, routing) = match s.kernels {
        Kernels::Separate => (7.0, 4.0),
        Kernels::Fused => (2.0, 3.0),
        Kernels::Compiled => (1.0, 0.0),
    };
    out.push(Kernel {
        name: 5,
        matrix: false,
        launches: vector + routing * t.moe_fraction(),
        flops: 10.0 * tokens * h,
        weight_bytes: 0.0,
        act_bytes: 12.0 * tokens * h * ab,
        gemm: None,
    });
    out
}

/// The operators of `count` layer passes of `tokens` tokens (per `section`), named by `names`,
/// on a device holding `d` devices' share of each layer.
pub(super) fn work(
    b: &mut Builder,
    s: &Shape,
    d: f64,
    names: Names,
    tokens: f64,
    count: f64,
    section: Section,
) {
    for k in kernels(s, d, tokens) {
        let l = k.launches;
        b.op(Op {
            name: names[k.name].into(),
            matrix: k.matrix,
            precision: if k.matrix { s.p } else { s.vecp },
            flops: k.flops / l,
            occupancy: k
                .gemm
                .map_or(1.0, |g| tiling::occupancy(s.tiling, &[(1.0, g)])),
            weight_bytes: k.weight_bytes / l,
            act_bytes: k.act_bytes / l,
            count: count * l,
            section,
            phase: Phase::Forward,
            form: Form::Both,
        });
    }
}
