//! Prefill: the prompts' tokens through a stage's layers (the round's joining requests, amortised
//! over the tokens they generate; or one prompt alone for the time to first token), and a
//! disaggregated prefill pool's instances with the KV cache they send to the decode instances.

use super::layer::{self, PREFILL};
use super::shape::Shape;
use super::{build, At, Mode};
use crate::engine::lower::{place_group, Builder, Collective};
use crate::engine::program::*;
use crate::engine::reason::Reason;
use crate::engine::tiling::{self, Gemm};
use crate::model::mapping::{Mapping, Placement, Pool, Regions};
use crate::model::system::System;
use crate::model::workload::{Inference, Transformer};

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

/// The mapping of a prefill pool's instances: `instances` model instances, each one stage of the
/// pool's `tp` devices, running only prompts.
fn pool_mapping(m: &Mapping) -> Mapping {
    Mapping {
        dp: m.pool.instances.max(1),
        tp: m.pool.tp.max(1),
        pp: 1,
        ep: 1,
        cp: 1,
        micro_batch: 0,
        placement: Placement::default(),
        batch: 0,
        regions: Regions::default(),
        pool: Pool::default(),
        ..*m
    }
}

/// One prompt alone on a prefill pool's instance (disaggregated serving, [`Mapping::pool`]):
/// its prefill by the same builder as an instance's own ([`Mode::Prefill`] under
/// [`pool_mapping`]), and its KV cache sent to the decode instance that serves the request, layer
/// by layer while the next layers compute (DistServe §4, Splitwise §4.2: the transfer overlaps
/// the prefill; `Overlap::Compute`). Each pool device sends its share of the prompt's KV cache
/// (all layers, its KV heads), each decode device receives its own: the fewer devices of the two
/// sides bound it. Over the scale-up network where the decode instances and the pool fit one
/// scale-up domain, else over the scale-out network.
pub(super) fn pool_prefill(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
) -> Result<Program, Reason> {
    if sys.device.has_mesh() {
        return Err(Reason::unsupported(
            "a prefill pool on a device with a mesh of cores: give the phases core `regions` instead",
        ));
    }
    if m.regions.any() {
        return Err(Reason::unsupported("a prefill pool beside core `regions`"));
    }
    let pm = pool_mapping(m);
    let mut p = build(sys, t, inf, &pm, Mode::Prefill)?;
    let per_instance = (m.decode_devices() / m.dp.max(1)).max(1);
    let sides = pm.tp.min(per_instance).max(1) as f64;
    let bytes =
        inf.prompt as f64 * t.kv_cache_dim() * inf.kv_cache.bytes() * t.layers as f64 / sides;
    let dom = sys.scale_up_size().max(1);
    let group = if m.devices() <= dom {
        place_group(sys, 2, 1, dom)
    } else {
        (1.0, 2.0, 1.0)
    };
    let mut b = Builder::default();
    b.comm(Collective {
        name: "prefill pool: kv cache to decode instance".into(),
        role: Role::KvTransfer,
        kind: CollKind::SendRecv,
        bytes,
        group,
        count: 1.0,
        section: Section::MicroBatch,
        overlap: Overlap::Compute,
    });
    p.comms.extend(b.comms);
    if let Some(last) = p.stages.last_mut() {
        last.comms.end = p.comms.len();
    }
    Ok(p)
}

/// The prefill pool's stage class of a disaggregated round ([`Stage::pool`]): per round, the
/// prompts of the requests that join (as many as finish: `batch` × dp / output over the system,
/// speculative or not, the round being per output token), spread evenly over the pool's
/// instances, each [`pool_prefill`]'s work (its KV transfer hidden behind the pool's compute);
/// its devices the pool's, its footprint one prompt's prefill beside the weights.
pub(super) fn pool_stage(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
    batch: f64,
    b: &mut Builder,
) -> Result<Stage, Reason> {
    let one = pool_prefill(sys, t, inf, m)?;
    let per_round =
        batch * m.dp as f64 / (inf.output.max(1) as f64 * m.pool.instances.max(1) as f64);
    let (o0, c0) = (b.ops.len(), b.comms.len());
    let stp = Section::Step;
    b.ops.extend(one.ops.into_iter().map(|o| Op {
        count: o.count * per_round,
        section: stp,
        ..o
    }));
    b.comms.extend(one.comms.into_iter().map(|c| Comm {
        count: c.count * per_round,
        section: stp,
        ..c
    }));
    Ok(Stage {
        name: format!(
            "prefill pool: {} instance(s) of {} device(s)",
            m.pool.instances, m.pool.tp
        )
        .into(),
        ops: o0..b.ops.len(),
        comms: c0..b.comms.len(),
        repeat: 1.0,
        devices: m.pool.devices() as f64,
        footprint: one.footprint,
        pool: true,
        hands_on: 0.0,
    })
}
