//! A stage's traffic over a wafer's mesh of cores: activations region to region (and the tokens
//! back across the wafer), the reductions of every quantity a row of cores sums in decode
//! (MeshGEMV and the attention's, the norms' and the softmax's), prefill's cyclic shifts
//! (MeshGEMM) and score reductions, and the output head's reduction.

use super::piece::Piece;
use super::shape::{At, Round, Shape};
use crate::engine::lower::builder::{Builder, Collective};
use crate::engine::lower::place::mesh_gemm_bytes;
use crate::engine::program::{CollKind, Overlap, Role, Section};

/// A collective along a line of the region's cores (the group is the mesh's, not the devices').
fn on_mesh(
    name: &'static str,
    kind: CollKind,
    bytes: f64,
    count: f64,
    section: Section,
) -> Collective {
    Collective {
        name: name.into(),
        role: Role::TensorParallel,
        kind,
        bytes,
        group: (1.0, 1.0, 1.0),
        count,
        section,
        overlap: Overlap::None,
    }
}

/// The lines of cores per device that run each of the region's collectives at once: its rows
/// (`side` of them, or `side` links of its edge for a send), over the share of a device the
/// region holds (a region of a tenth of a wafer carries a tenth of the wafer's energy per device).
fn lines(c: &Piece) -> f64 {
    c.side * c.devices as f64 / c.share
}

/// The mesh traffic of stage class `c` on a mesh of `x` × `y` cores.
pub(super) fn comms(b: &mut Builder, s: &Shape, r: &Round, c: &Piece, at: &At, (x, y): (f64, f64)) {
    let (mbs, stp) = (Section::MicroBatch, Section::Step);
    let (h, ab, vt, l) = (s.h, s.ab, r.vt, at.l);
    // region to region over the mesh: to the neighbouring region (its side in hops), or back
    // across the wafer to the first (PLMR's worst case, x + y hops); the activations spread over
    // the links of the region's edge
    for (name, count, hops) in [
        ("mesh: activations to the next region", c.sends[0], c.side),
        ("mesh: tokens back to the first region", c.sends[1], x + y),
    ] {
        for (sec, n, cnt, on) in [
            (mbs, vt, count, at.dec),
            (stp, s.ptok, count * s.amort, c.prefill),
        ] {
            if !on {
                continue;
            }
            b.mesh_comm_lines(
                Collective {
                    role: Role::PipelineSendRecv,
                    ..on_mesh(name, CollKind::SendRecv, n * h * ab / c.side, cnt, sec)
                },
                hops,
                lines(c),
            );
        }
    }
    // the attention heads whose dimensions a core holds part of: heads / side where a row of
    // cores holds several heads, else one
    let held_heads = (s.attn_heads / c.side).max(1.0);
    if c.layers > 0 && at.dec {
        decode_reductions(b, s, r, c, at, held_heads);
    }
    if c.layers > 0 && c.prefill {
        prefill_shifts(b, s, c, l, held_heads);
    }
    if at.head {
        b.mesh_comm_lines(
            on_mesh(
                "mesh: lm head reduction",
                CollKind::AllReduce,
                vt * s.vocab / c.side * 4.0,
                1.0,
                mbs,
            ),
            c.side,
            lines(c),
        );
    }
}

/// Decode's reductions across a row of the region.
fn decode_reductions(b: &mut Builder, s: &Shape, r: &Round, c: &Piece, at: &At, held_heads: f64) {
    let (mbs, ab, vt, l) = (Section::MicroBatch, s.ab, r.vt, at.l);
    // the outputs of a layer's matrix-vector products, per token, each reduced across a row of
    // its region: Q/K/V, the output projection, the FFN's up (and gate) and down projections,
    // and the attention's weighted sum
    let reductions = 5.0;
    let reduced = (s.qd + 2.0 * s.kvd) + s.h + (s.ffn_mats - 1.0) * s.ffn_width + s.h + s.vd;
    // every matrix-vector product reduces its partial outputs across a row of the region
    // (MeshGEMV); each core holds 1/side of the output vector
    b.mesh_comm_lines(
        on_mesh(
            "mesh: decode all-reduce (MeshGEMV)",
            CollKind::AllReduce,
            vt * reduced / reductions / c.side * ab,
            reductions * l,
            mbs,
        ),
        c.side,
        lines(c),
    );
    // A vector spread over a row of cores needs a reduction for every quantity summed over it,
    // not only the matrix-vector outputs. WaferLLM's decode layer (MeshInfra/WaferLLM
    // `Decode/WSE-2/src/decode.csl`, `decode_struct`) runs ten two-tree all-reduces: the five
    // outputs above, the attention scores (each core's partial dot products for its share of the
    // cached positions, reduced across the row that holds the query's dimensions), the two
    // RMSNorm sums of squares and the softmax's maximum and sum (one value per token and per
    // head a core holds: `held_heads`)
    b.mesh_comm_lines(
        on_mesh(
            "mesh: decode attention-score all-reduce",
            CollKind::AllReduce,
            vt * s.ctx / c.side * held_heads * ab,
            l,
            mbs,
        ),
        c.side,
        lines(c),
    );
    b.mesh_comm_lines(
        on_mesh(
            "mesh: decode RMSNorm and softmax all-reduces",
            CollKind::AllReduce,
            // two norms (one value per token), softmax max and sum (per held head)
            vt * (1.0 + held_heads) / 2.0 * ab,
            4.0 * l,
            mbs,
        ),
        c.side,
        lines(c),
    );
}

/// Prefill's traffic across the region's rows and columns.
fn prefill_shifts(b: &mut Builder, s: &Shape, c: &Piece, l: f64, held_heads: f64) {
    let (t, stp, ab, wb, ptok, amort) = (s.t, Section::Step, s.ab, s.wb, s.ptok, s.amort);
    let (h, vd, ffn_mats) = (s.h, s.vd, s.ffn_mats);
    // prefill's matrix products as cyclic shifts along rows and columns (MeshGEMM,
    // `mesh_gemm_bytes`), behind the multiplications (WaferLLM's prefill kernel,
    // Prefill/WSE-2/src/comm_lib/comm_pe.csl `mm_two_hop_comm`, starts each step's shifts
    // asynchronously into the second buffer): QKV, the output projection, the FFN's up (and
    // gate) and down projections, as (the prompt's input activations, the weights)
    let (qkv_split, qkv_shared) = t.qkv_params();
    let ffn_active = t.layer_ffn_active();
    let products = [
        (ptok * h * ab, (qkv_split + qkv_shared) * wb),
        (ptok * vd * ab, vd * h * wb),
        (ptok * h * ab, ffn_active * (ffn_mats - 1.0) / ffn_mats * wb),
        (ptok * s.ffn_width * ab, ffn_active / ffn_mats * wb),
    ];
    b.mesh_comm_lines(
        Collective {
            overlap: Overlap::Compute,
            ..on_mesh(
                "mesh: prefill shifts (MeshGEMM)",
                CollKind::AllGather,
                mesh_gemm_bytes(&products, c.side),
                l * amort,
                stp,
            )
        },
        c.side,
        lines(c),
    );
    // The scores Q·Kᵀ contract over the hidden dimensions, which a row of cores splits:
    // WaferLLM's prefill kernel (`Prefill/WSE-2/src/prefill.csl`, `matmul_T_compute`) reduces
    // each step's partial score tile (a request's (prompt / side)² scores per held head) to a
    // root of the row (a reduction: on a mesh line it costs what a reduce-scatter does,
    // `Coeffs::mesh`), one for each of the side's steps; the two RMSNorms and the softmax's max
    // and sum all-reduce across the row, one value per token (and held head) a core holds.
    let tile = s.inf.prompt as f64 / c.side;
    for (name, kind, bytes, count) in [
        (
            "mesh: prefill score reductions (transposed MeshGEMM)",
            CollKind::ReduceScatter,
            s.batch * tile * tile * held_heads * ab,
            l * c.side,
        ),
        (
            "mesh: prefill RMSNorm and softmax all-reduces",
            CollKind::AllReduce,
            ptok / c.side * (1.0 + held_heads) / 2.0 * ab,
            4.0 * l,
        ),
    ] {
        b.mesh_comm_lines(
            on_mesh(name, kind, bytes, count * amort, stp),
            c.side,
            lines(c),
        );
    }
}
