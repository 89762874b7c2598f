//! One stage class's pass over its records: its operators' roofline time and energy per
//! section, then its collectives on the link timelines (what they expose, what they take from
//! the compute they hide behind). Mirrors the operator and collective loops of the kernel's
//! `evaluate`.

use super::links::{collective_links, collective_tax, combine, extend, schedule, LINKS, PASSES};
use super::roofline::{op_time, streams, tier_energy, OpTime};
use crate::engine::program::*;
use crate::engine::table::{self as t, Machine};

/// What one stage class yields on a machine: its time per section, busy time, dynamic energy per
/// device per step.
#[derive(Clone, Copy, Default)]
pub(super) struct StageEval {
    pub br: [Breakdown; 2],
    /// Per device, at full clock: the FLOPs' dynamic energy, and that of bytes and links.
    pub flop_energy: f64,
    pub dyn_energy: f64,
    /// Where the stage keeps its state (the weight store's power counts only when it is used),
    /// and its working data.
    pub weights: Tier,
    pub working: Tier,
}

/// A stage's operators summed per section: the breakdown, the busy time, the micro-batch's
/// forward and backward, and the dynamic energy per device per step at full clock.
struct Busy {
    br: [Breakdown; 2],
    busy: [f64; 2],
    fwd_mb: f64,
    bwd_mb: f64,
    flop_energy: f64,
    dyn_energy: f64,
}

/// Stage `st` with its weights in tier `wt` and its working data in `at`: its operators, the
/// software's hand-off, the collectives' tax on the compute, then the collectives on the link
/// timelines, each of the form that placement selects (`streams`). `None` when an operator has
/// FLOPs the machine has no rate for.
pub(super) fn eval_stage(
    p: &Program,
    st: &Stage,
    m: &Machine,
    (wt, at): (Tier, Tier),
    mut trace: Option<&mut Vec<f64>>,
) -> Option<StageEval> {
    let s = streams(wt, m);
    let mut b = stage_ops(p, st, m, (wt, at), s, trace.as_deref_mut())?;
    // The software stack's hand-off of each micro-batch a pipeline stage passes on: part of
    // the stage's micro-batch, at no clock.
    let hand_off = st.hands_on * m[t::PIPELINE_STAGE_TIME];
    b.br[0].other += hand_off;
    b.busy[0] += hand_off;
    // What the overlapped collectives take from the compute they hide behind
    // (`collective_tax`): it lengthens that compute before the link timelines measure what
    // they expose.
    let tax = collective_tax(p, st, m, s, [b.fwd_mb, b.bwd_mb, b.busy[0], b.busy[1]]);
    for (s, x) in [(0, tax.micro_batch), (1, tax.step)] {
        b.br[s].compute += x;
        b.busy[s] += x;
    }
    b.fwd_mb += tax.forward;
    b.bwd_mb += tax.backward;
    stage_links(p, st, m, s, &mut b, trace);
    Some(StageEval {
        br: b.br,
        flop_energy: b.flop_energy,
        dyn_energy: b.dyn_energy,
        weights: wt,
        working: at,
    })
}

/// The roofline time and the dynamic energy of a stage's operators of the form it runs
/// (`streams`), per section.
fn stage_ops(
    p: &Program,
    st: &Stage,
    m: &Machine,
    (wt, at): (Tier, Tier),
    streams: bool,
    mut trace: Option<&mut Vec<f64>>,
) -> Option<Busy> {
    let mb_mult = p.micro_batches;
    let (e_w, e_a) = (tier_energy(wt, m), tier_energy(at, m));
    // sections: [micro-batch, step]
    let mut br = [Breakdown::default(); 2];
    let mut busy = [0.0f64; 2];
    let (mut fwd_mb, mut bwd_mb) = (0.0, 0.0);
    // dynamic energy per device per step at full clock: of the FLOPs (scales with voltage²
    // when the clock throttles), and of memory and link traffic (does not)
    let mut flop_energy = 0.0;
    let mut dyn_energy = 0.0;
    for i in st.ops.clone() {
        let op = &p.ops[i];
        if !op.form.runs(streams) {
            continue;
        }
        let OpTime {
            compute: t_c,
            memory: t_m,
            ..
        } = op_time(op, m, wt, at)?;
        let s = op.section as usize;
        if matches!(op.phase, Phase::Store | Phase::Host) {
            // off the device: no clock, no device energy, nothing to hide collectives behind
            let t = t_c.max(t_m) * op.count;
            br[s].other += t;
            if let Some(tr) = trace.as_deref_mut() {
                tr[i] = t * if s == 0 { mb_mult } else { 1.0 };
            }
            continue;
        }
        let b = &mut br[s];
        if t_c >= t_m {
            b.compute += t_c * op.count;
        } else {
            b.memory += t_m * op.count;
        }
        b.other += m[t::KERNEL_OVERHEAD] * op.count;
        let t = (t_c.max(t_m) + m[t::KERNEL_OVERHEAD]) * op.count;
        busy[s] += t;
        if s == 0 && op.phase == Phase::Backward {
            bwd_mb += t;
        }
        if s == 0 && op.phase == Phase::Forward {
            fwd_mb += t;
        }
        let mult = if s == 0 { mb_mult } else { 1.0 };
        if let Some(tr) = trace.as_deref_mut() {
            tr[i] = t * mult;
        }
        flop_energy += mult * op.count * op.flops * m[t::ENERGY_PER_FLOP + op.precision];
        dyn_energy += mult * op.count * (op.weight_bytes * e_w + op.act_bytes * e_a);
    }
    Some(Busy {
        br,
        busy,
        fwd_mb,
        bwd_mb,
        flop_energy,
        dyn_energy,
    })
}

/// The stage's collectives of the form it runs (`streams`) on the link timelines: what each
/// exposes (added to its section's communication) and the energy of its traffic.
fn stage_links(
    p: &Program,
    st: &Stage,
    m: &Machine,
    streams: bool,
    b: &mut Busy,
    mut trace: Option<&mut Vec<f64>>,
) {
    let mb_mult = p.micro_batches;
    let Busy {
        br,
        busy,
        fwd_mb,
        bwd_mb,
        dyn_energy,
        ..
    } = b;
    let (busy, fwd_mb, bwd_mb) = (*busy, *fwd_mb, *bwd_mb);
    // Link timelines (`schedule`), one per link class: a micro-batch's (its forward- and
    // compute-overlapped collectives from its start, then those behind its backward, which
    // begins `busy − bwd` into it, later by what the forward collectives delayed the
    // forward), the step section's own, and the first micro-batch's (`first`: its forward's
    // collectives, then the step's behind that forward (pass 2), then its backward's again,
    // released once its forward, which waited for both, is done), on which the step's
    // collectives behind the last backward run when the first micro-batch is the last (pass
    // 3; else they run on the micro-batch's timeline after its backward's).
    // Each section's end is the latest of its compute and what its collectives finish
    // behind; a collective exposes what it moves that end (`extend`); what the first
    // micro-batch's backward collectives add there counts to the step section. Every end is
    // a maximum of sums of durations, so faster compute or a faster link never lengthens a
    // step, and no link time is booked twice (`tests/it/regressions.rs`).
    let mut free = [0.0f64; LINKS];
    let mut free_step = [0.0f64; LINKS];
    let mut first = [0.0f64; LINKS];
    // the copies of a micro-batch's timeline the spread collectives' calls run on (`spread`):
    // after its collectives released at its start (the forwards'), and after all of its own
    let (mut head, mut tail) = ([0.0f64; LINKS], [0.0f64; LINKS]);
    let (mut end_head, mut end_tail) = (0.0, 0.0);
    // the head's windows (the most any of its collectives takes), what its calls delay the
    // forward by, and the last of them (for the trace)
    let (mut head_windows, mut late_head, mut last_head) = (0.0f64, 0.0f64, None);
    let (mut end_mb, mut end_step) = (busy[0], busy[1]);
    let (mut end_last, mut end_first) = (0.0, 0.0);
    let (mut late_fwd, mut late_first) = (0.0f64, 0.0f64);
    let (mut release_bwd, mut release_first, mut release_head) = (0.0, 0.0, 0.0);
    let mut last_step_fwd = None;
    for (pass, &books) in PASSES.iter().enumerate() {
        match pass {
            1 => {
                first = free;
                release_bwd = busy[0] - bwd_mb + late_fwd;
            }
            // a copy of the micro-batch's timeline as its forward left it, and its end once its
            // own collectives are all booked
            2 => (head, end_head, late_head) = (first, end_mb, late_fwd),
            3 => {
                if last_head.is_none() {
                    continue;
                }
                release_head = busy[0] - bwd_mb + late_head;
            }
            4 => (tail, end_tail) = (free, end_mb),
            5 => {
                (end_last, end_first) = (end_mb, end_mb);
                late_first = late_fwd;
            }
            6 => {
                if last_step_fwd.is_none() {
                    // nothing rode the first forward: the first micro-batch is like any other
                    continue;
                }
                release_first = busy[0] - bwd_mb + late_first;
            }
            7 if p.micro_batches <= 1.0 && last_step_fwd.is_some() => {
                (free, release_bwd, end_last) = (first, release_first, end_first);
            }
            _ => {}
        }
        for i in st.comms.clone() {
            let c = &p.comms[i];
            let booking = c.booking();
            if booking.pass() != books || !c.form.runs(streams) {
                continue;
            }
            let s = c.section as usize;
            let mut lt = collective_links(c, m);
            // a spread collective's calls each run behind their own micro-batch (`count` of
            // them); the others run all their calls on one timeline
            let spread = matches!(
                booking,
                Booking::StepTailBackward | Booking::StepHeadForward
            );
            if !spread {
                for x in &mut lt {
                    *x *= c.count;
                }
            }
            let o = c.coeffs.overlapped;
            if pass == 3 {
                // a head window's backward collectives again, on its copy, after the head's
                // calls: what they add to its end is the head's doing, once per window (traced on
                // the last head collective); their energy counts once, in pass 1
                let x =
                    head_windows * extend(&mut end_head, schedule(&lt, o, release_head, &mut head));
                br[1].communication += x;
                if let (Some(tr), Some(j)) = (trace.as_deref_mut(), last_head) {
                    tr[p.ops.len() + j] += x;
                }
                continue;
            }
            if pass == 6 {
                // the first micro-batch's backward collectives again, on its timeline: what
                // they add to its end is the step's collectives' doing (traced on the last
                // of them); their energy counts once, in pass 1
                let x = extend(&mut end_first, schedule(&lt, o, release_first, &mut first));
                br[1].communication += x;
                if let (Some(tr), Some(j)) = (trace.as_deref_mut(), last_step_fwd) {
                    tr[p.ops.len() + j] += x;
                }
                continue;
            }
            let exposed = match booking {
                Booking::Exposed => combine(&lt, o),
                Booking::MicroBatchForward => {
                    let f = schedule(&lt, o, 0.0, &mut free);
                    late_fwd = late_fwd.max(f - fwd_mb);
                    extend(&mut end_mb, f - fwd_mb + busy[0])
                }
                Booking::MicroBatch => extend(&mut end_mb, schedule(&lt, o, 0.0, &mut free)),
                Booking::Step => extend(&mut end_step, schedule(&lt, o, 0.0, &mut free_step)),
                Booking::MicroBatchBackward => {
                    extend(&mut end_mb, schedule(&lt, o, release_bwd, &mut free))
                }
                Booking::StepBackward => {
                    extend(&mut end_last, schedule(&lt, o, release_bwd, &mut free))
                }
                Booking::StepForward => {
                    let f = schedule(&lt, o, 0.0, &mut first);
                    late_first = late_first.max(f - fwd_mb);
                    last_step_fwd = Some(i);
                    extend(&mut end_first, f + busy[0] - fwd_mb)
                }
                // one call behind each of `count` micro-batches' backwards (forwards), each
                // delaying its micro-batch by what it exposes on a copy of that micro-batch's
                // timeline: its links' other traffic is that micro-batch's own
                Booking::StepTailBackward => {
                    let f = schedule(&lt, o, release_bwd, &mut tail);
                    c.count * extend(&mut end_tail, f)
                }
                Booking::StepHeadForward => {
                    let f = schedule(&lt, o, 0.0, &mut head);
                    late_head = late_head.max(f - fwd_mb);
                    head_windows = head_windows.max(c.count);
                    last_head = Some(i);
                    c.count * extend(&mut end_head, f - fwd_mb + busy[0])
                }
            };
            br[s].communication += exposed;
            let mult = if s == 0 { mb_mult } else { 1.0 };
            if let Some(tr) = trace.as_deref_mut() {
                tr[p.ops.len() + i] = exposed * mult;
            }
            *dyn_energy += mult * c.count * traffic_energy(c, m);
        }
    }
}

/// The dynamic energy of one call of `c`'s traffic: its bytes on each link class at that class's
/// energy per byte, and the mesh's at its energy per bit-hop (bytes × hops, `Link::hop_bytes`).
fn traffic_energy(c: &Comm, m: &Machine) -> f64 {
    let k = &c.coeffs;
    let bu = k.up[usize::from(m.flag(t::UP_INR))].bytes;
    let bo = k.out[usize::from(m.flag(t::OUT_INR))].bytes;
    bu * m[t::UP_ENERGY]
        + bo * m[t::OUT_ENERGY]
        + k.host.bytes * m[t::HOST_ENERGY]
        + k.mesh.hop_bytes * m[t::MESH_ENERGY]
}
