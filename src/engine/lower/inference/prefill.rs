//! Prefill: the prompts' tokens through a stage's layers (the round's joining requests, amortised
//! over the tokens they generate; or one prompt alone for the time to first token). A
//! disaggregated prefill pool's instances are `pool`'s.

use super::layer::{self, PREFILL};
use super::shape::{At, Shape};
use crate::engine::lower::builder::{Builder, Collective};
use crate::engine::program::*;
use crate::engine::tiling::{self, Gemm};

/// The prompts' work on a stage of `at.l` layers: the layer's kernels, the attention over the
/// prompt, and its tensor- and expert-parallel collectives, per step.
pub(super) fn work(b: &mut Builder, s: &Shape, at: &At) {
    let (t, inf, d, l, amort, ptok) = (s.t, s.inf, at.d, at.l, s.amort, s.ptok);
    let (stp, ab) = (Section::Step, s.ab);
    // the prompt's tokens through the layer's kernels, as the round's
    layer::work(b, s, d, PREFILL, ptok, l * amort, stp);
    b.op(Op {
        name: "prefill: attention".into(),
        matrix: true,
        precision: s.p,
        flops: 2.0 * ptok * inf.prompt as f64 * (s.qd + s.vd) / d * s.causal,
        // FlashAttention's blocks of queries: one block row per prompt and local head
        occupancy: tiling::occupancy(
            s.tiling,
            &[(
                1.0,
                Gemm::rows(
                    inf.prompt as f64,
                    ptok / inf.prompt as f64 * t.heads as f64 / d,
                ),
            )],
        ),
        weight_bytes: 0.0,
        act_bytes: ptok * (s.qd + s.vd + 2.0 * s.kvd) / d * ab,
        count: l * amort,
        section: stp,
        phase: Phase::Forward,
        form: Form::Both,
    });
    b.comm(Collective {
        name: "prefill: tp all-reduce".into(),
        role: Role::TensorParallel,
        kind: CollKind::AllReduce,
        bytes: ptok * s.h * ab,
        group: at.g_tp,
        count: 2.0 * l * amort,
        section: stp,
        overlap: Overlap::None,
    });
    if s.ep > 1 {
        b.expert_all_to_all(
            Collective {
                name: "prefill: ep all-to-all".into(),
                role: Role::ExpertAllToAll,
                kind: CollKind::AllToAll,
                bytes: s.routed * ptok * s.h * ab / d,
                group: at.g_ep,
                count: 2.0 * l * t.moe_fraction() * amort,
                section: stp,
                overlap: Overlap::None,
            },
            s.routed,
            s.m.expert_dispatch,
        );
    }
}

/// The prompt alone: the operators and collectives a stage added from `o0` and `c0` keep only
/// their (step-section) prefill work, as the one micro-batch, and the output head's first token;
/// none of the decode round.
pub(super) fn alone(b: &mut Builder, o0: usize, c0: usize) {
    let mbs = Section::MicroBatch;
    let keep = |name: &str, sec: Section| sec == Section::Step || name.contains("lm head");
    let ops: Vec<Op> = b.ops.drain(o0..).collect();
    b.ops.extend(
        ops.into_iter()
            .filter(|o| keep(&o.name, o.section))
            .map(|o| Op { section: mbs, ..o }),
    );
    let comms: Vec<Comm> = b.comms.drain(c0..).collect();
    b.comms.extend(
        comms
            .into_iter()
            .filter(|c| keep(&c.name, c.section))
            .map(|c| Comm { section: mbs, ..c }),
    );
}
