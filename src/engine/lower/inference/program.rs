//! The stage loop of a serving program: the mapping's checks, the shape, the stage classes, and
//! each class's decode passes, sends, mesh traffic, prefill and footprint gathered into one
//! program. The entry points (`mod.rs`) and the prefill pool (`pool`) call it.

use super::piece::Piece;
use super::shape::{At, Mode, Round, Shape};
use super::{checks, decode, footprint, mesh, prefill, stages};
use crate::engine::lower::builder::Builder;
use crate::engine::program::*;
use crate::engine::reason::Reason;
use crate::model::mapping::Mapping;
use crate::model::system::System;
use crate::model::workload::{Inference, Transformer};

/// The program of a serving run in `mode` on the decode instances (a prefill pool's stage is
/// added apart: `pool::attach`): the mapping's checks, the figures derived once, the stage
/// classes, then each class's operators, collectives and footprint in turn.
pub(super) fn build(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
    mode: Mode,
) -> Result<Program, Reason> {
    let placement = checks::placement(t, m)?;
    let s = Shape::new(sys, t, inf, m, mode, placement);
    let pieces = stages::pieces(&s)?;
    let r = Round::of(&s, &pieces);
    let mut b = Builder::default();
    let mut out_stages: Vec<Stage> = Vec::new();
    let mut biggest = Footprint::default();
    for c in pieces {
        let st = stage(&mut b, &s, &r, &c);
        if st.footprint.total() > biggest.total() {
            biggest = st.footprint;
        }
        out_stages.push(st);
    }
    // a stage hands its micro-batch on only where the pipeline has more than one
    if out_stages.iter().map(|st| st.repeat).sum::<f64>() <= 1.0 {
        for st in &mut out_stages {
            st.hands_on = 0.0;
        }
    }
    debug_assert!(out_stages.len() <= MAX_STAGES);
    let (tokens_per_round, ctx) = if s.prefill_only {
        // the prompt's tokens, at their mean context
        (inf.prompt as f64 * s.dp, inf.prompt as f64 / 2.0)
    } else {
        (s.batch * s.dp, s.ctx)
    };
    let model_flops = tokens_per_round * t.forward_flops_per_token((ctx as u64).max(1), false);
    Ok(Program {
        ops: b.ops,
        comms: b.comms,
        stages: out_stages,
        micro_batches: r.micro_batches,
        bubble: 0.0,
        footprint: biggest,
        devices: m.devices() as f64,
        units_per_step: tokens_per_round,
        unit: "tokens",
        model_flops_per_step: model_flops,
        mfu_precision: s.prec.index(),
        steps: None,
        host_steps: 0.0,
    })
}

/// One stage class's operators, collectives and footprint, in program order: its decode passes,
/// its sends, its traffic over a wafer's mesh, its prefill; in the prompt-alone program only the
/// prefill's, and per output token under speculative decoding.
fn stage(b: &mut Builder, s: &Shape, r: &Round, c: &Piece) -> Stage {
    let (o0, c0) = (b.ops.len(), b.comms.len());
    let at = At::of(s, c);
    decode::passes(b, s, r, c, &at);
    decode::sends(b, s, r, c, &at);
    if let Some(xy) = s.mesh {
        mesh::comms(b, s, r, c, &at, xy);
    }
    if c.layers > 0 && c.prefill {
        prefill::work(b, s, &at);
    }
    if s.prefill_only {
        prefill::alone(b, o0, c0);
    }
    if s.gain != 1.0 {
        // per output token: the round's micro-batch work over the tokens it gains
        let mbs = Section::MicroBatch;
        for o in &mut b.ops[o0..] {
            if o.section == mbs {
                o.count /= s.gain;
            }
        }
        for cm in &mut b.comms[c0..] {
            if cm.section == mbs {
                cm.count /= s.gain;
            }
        }
    }
    Stage {
        name: c.label().into(),
        ops: o0..b.ops.len(),
        comms: c0..b.comms.len(),
        repeat: c.repeat as f64,
        devices: at.d * s.dp,
        footprint: footprint::of(s, r, c, &at),
        pool: false,
        // the pipeline's hand-offs are set once all its stages are known (`build`)
        hands_on: 1.0 / s.gain,
    }
}
