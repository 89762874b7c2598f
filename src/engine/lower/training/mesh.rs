//! Training on a device that is a mesh of cores (a wafer, a Dojo tile): a layer's matrix
//! products are partitioned over the device's cores, and the tiles they need move over the mesh.
//! After WaferLLM's MeshGEMM (He et al., OSDI'25; no code copied): on a square region of s × s
//! cores each core's activation tile passes every core of its row and its weight tile every core
//! of its column, in cyclic shifts of at most two hops. The two move over different links (row
//! and column), so the busiest link of an [M, K] × [K, N] product carries max(M·K, K·N) / s
//! bytes, shifted while the previous tile is multiplied (overlapped with the compute).

use super::shape::Shape;
use crate::engine::lower::builder::{Builder, Collective};
use crate::engine::lower::place::mesh_gemm_bytes;
use crate::engine::program::*;
use crate::model::system::System;
use crate::vocab::LayerPart;

/// The mesh collectives of one training step on `sys`'s device, if it has a mesh.
pub(super) fn build(b: &mut Builder, sys: &System, d: &Shape) {
    let Some(ms) = sys.device.mesh.as_ref() else {
        return;
    };
    // the whole device's cores as one square region, no wider than the mesh
    let side = ms.square_side();
    if side <= 1.0 {
        return;
    }
    let Shape {
        tok,
        h,
        vd,
        ab,
        wb,
        tpf,
        l,
        ..
    } = *d;
    // The layer's GEMMs (QKV, output projection, FFN up with its gate, FFN down) as (input
    // activations, weights) per device; the experts a token visits for a mixture of experts.
    // QKV holds `Transformer::qkv_params` (heads × head_dim wide, latent attention's projections
    // through its latents), the output projection maps the context (vd) back to h.
    let (qkv_split, qkv_shared) = d.t.qkv_params();
    let inner = d.ffn_inner / tpf;
    let up_w = (d.act_in * h * d.ffn_inner) / tpf;
    let gemms = [
        (tok * h, qkv_split / tpf + qkv_shared),
        (tok * vd / tpf, vd * h / tpf),
        (tok * h, up_w),
        (tok * inner, h * d.ffn_inner / tpf),
    ];
    let bytes = gemms.map(|(a, w)| (a * ab, w * wb));
    let per_core = mesh_gemm_bytes(&bytes, side);
    // forward once; backward twice (input and weight gradients); once more for the GEMMs the
    // recomputation re-runs (all of them under full recomputation)
    let parts = d.m.recompute.parts();
    let redone: f64 = [
        LayerPart::Qkv,
        LayerPart::OutProj,
        LayerPart::FfnUp,
        LayerPart::FfnDown,
    ]
    .iter()
    .zip(&bytes)
    .filter(|(p, _)| parts.has(**p))
    .map(|(_, g)| mesh_gemm_bytes(&[*g], side))
    .sum::<f64>();
    let redo = if per_core > 0.0 {
        redone / per_core * d.redone_share()
    } else {
        0.0
    };
    b.mesh_comm(
        Collective {
            name: "mesh: matmul shifts (MeshGEMM)".into(),
            role: Role::TensorParallel,
            kind: CollKind::AllGather,
            bytes: per_core,
            group: (1.0, 1.0, 1.0),
            count: l * (1.0 + 2.0 + redo),
            section: Section::MicroBatch,
            overlap: Overlap::Compute,
        },
        side,
    );
}
