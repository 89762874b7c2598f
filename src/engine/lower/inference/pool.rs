//! Disaggregated serving (`Mapping::pool`): a prefill pool's instances run the prompts apart
//! from the decode instances and send them the KV cache. One prompt alone on a pool's instance
//! (the time to first token), and the pool's stage class beside the decode instances' round.

use super::program;
use super::shape::{requests, Mode};
use crate::engine::lower::builder::{Builder, Collective};
use crate::engine::lower::place::place_group;
use crate::engine::program::*;
use crate::engine::reason::Reason;
use crate::model::mapping::{Mapping, Placement, Pool, Regions};
use crate::model::system::System;
use crate::model::workload::{Inference, Transformer};

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
    let mut p = program::build(sys, t, inf, &pm, Mode::Prefill)?;
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

/// The prefill pool's stage class of a disaggregated round, its operators and collectives
/// appended to `p` ([`Stage::pool`]): per round, the
/// prompts of the requests that join (as many as finish: `batch` × dp / output over the system,
/// speculative or not, the round being per output token), spread evenly over the pool's
/// instances, each [`pool_prefill`]'s work (its KV transfer hidden behind the pool's compute);
/// its devices the pool's, its footprint one prompt's prefill beside the weights.
fn pool_stage(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
    batch: f64,
    p: &mut Program,
) -> Result<Stage, Reason> {
    let one = pool_prefill(sys, t, inf, m)?;
    let per_round =
        batch * m.dp as f64 / (inf.output.max(1) as f64 * m.pool.instances.max(1) as f64);
    let (o0, c0) = (p.ops.len(), p.comms.len());
    let stp = Section::Step;
    p.ops.extend(one.ops.into_iter().map(|o| Op {
        count: o.count * per_round,
        section: stp,
        ..o
    }));
    p.comms.extend(one.comms.into_iter().map(|c| Comm {
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
        ops: o0..p.ops.len(),
        comms: c0..p.comms.len(),
        repeat: 1.0,
        devices: m.pool.devices() as f64,
        footprint: one.footprint,
        pool: true,
        hands_on: 0.0,
    })
}

/// Add the prefill pool's stage class ([`pool_stage`]) to the decode instances' round `p`
/// ([`Mode::Round`]): its operators and collectives after theirs, its footprint counted with
/// theirs. Refused where the round has no room left for another stage class.
pub(super) fn attach(
    p: &mut Program,
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
) -> Result<(), Reason> {
    let st = pool_stage(sys, t, inf, m, requests(inf, m, Mode::Round), p)?;
    if p.stages.len() >= MAX_STAGES {
        return Err(Reason::unsupported(format!(
            "a prefill pool beside {} stage classes: a program holds at most {MAX_STAGES}",
            p.stages.len()
        )));
    }
    if st.footprint.total() > p.footprint.total() {
        p.footprint = st.footprint;
    }
    p.stages.push(st);
    debug_assert!(p.stages.len() <= MAX_STAGES);
    Ok(())
}
