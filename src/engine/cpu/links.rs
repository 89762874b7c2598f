//! Collectives on the link classes: their alpha-beta time per class, how the classes combine,
//! the link timelines that schedule them, and what overlapped ones take from the compute they
//! hide behind. Mirrors the kernel's link section (`sweep/gpu/links.wgsl`).

use crate::engine::program::*;
use crate::engine::table::{self as t, Machine};

/// The link classes a collective's time is spent on, in [`collective_links`] order: scale-up,
/// scale-out, the weight store's link, the on-chip mesh, the host link.
pub const LINKS: usize = 5;

/// Alpha-beta time of one call of a collective on each link class (`coeffs.rs`): latencies ×
/// latency + bytes / bandwidth, in [`LINKS`] order.
pub fn collective_links(c: &Comm, m: &Machine) -> [f64; LINKS] {
    let k = &c.coeffs;
    let net = m[t::EFF_NETWORK];
    let up = &k.up[usize::from(m.flag(t::UP_INR))];
    let out = &k.out[usize::from(m.flag(t::OUT_INR))];
    [
        link(
            up,
            m[t::UP_BANDWIDTH] * net * c.inner_share,
            m[t::UP_LATENCY],
        ),
        link(out, m[t::OUT_BANDWIDTH] * net, m[t::OUT_LATENCY]),
        link(&k.ext, m[t::EXT_BANDWIDTH] * net, m[t::EXT_LATENCY]),
        mesh_link(&k.mesh, m),
        link(&k.host, m[t::HOST_BANDWIDTH] * net, m[t::HOST_LATENCY]),
    ]
}

/// A collective's time from its time per link class: the classes add (hierarchical phases one
/// after the other), or the slower of scale-up and scale-out bounds an all-to-all that drives
/// both at once (`overlapped`, which leaves the weight store's link out).
pub fn combine(l: &[f64; LINKS], overlapped: bool) -> f64 {
    if overlapped {
        l[0].max(l[1]) + l[3] + l[4]
    } else {
        l[0] + l[1] + l[2] + l[3] + l[4]
    }
}

/// Alpha-beta time of one collective and the bytes each device sends over the scale-up and
/// scale-out links, from its coefficients (`coeffs.rs`): per link class, latencies × latency +
/// bytes / bandwidth; the classes add, or the slowest bounds an all-to-all.
pub fn collective(c: &Comm, m: &Machine) -> (f64, f64, f64) {
    let k = &c.coeffs;
    let up = &k.up[usize::from(m.flag(t::UP_INR))];
    let out = &k.out[usize::from(m.flag(t::OUT_INR))];
    let t = combine(&collective_links(c, m), k.overlapped);
    (t, up.bytes, out.bytes)
}

/// Run one collective's phases (`time` per link class, all its calls) on the link timelines
/// `free` (when each link class is next free), starting no earlier than `release`; returns when
/// it finishes. Its phases run one after the other in link-class order, each once its link is
/// free (hierarchical phases, as [`combine`] adds them); an all-to-all that drives scale-up and
/// scale-out at once holds both for the slower of the two (and leaves the weight store's link
/// out, as `combine` does). A link it sends nothing over does not hold it back. Finish times are
/// maxima of sums of durations, so a faster link or an earlier release never finishes it later.
pub fn schedule(
    time: &[f64; LINKS],
    overlapped: bool,
    release: f64,
    free: &mut [f64; LINKS],
) -> f64 {
    let mut at = release;
    let mut phase = |links: &[usize], d: f64, at: &mut f64| {
        if d > 0.0 {
            let start = links
                .iter()
                .filter(|&&k| time[k] > 0.0)
                .fold(*at, |a, &k| a.max(free[k]));
            *at = start + d;
            for &k in links.iter().filter(|&&k| time[k] > 0.0) {
                free[k] = *at;
            }
        }
    };
    if overlapped {
        phase(&[0, 1], time[0].max(time[1]), &mut at);
        phase(&[3], time[3], &mut at);
        phase(&[4], time[4], &mut at);
    } else {
        for (k, &d) in time.iter().enumerate() {
            phase(&[k], d, &mut at);
        }
    }
    at
}

/// Move a section's end to `at` if that is later; returns by how much (the time a collective
/// exposes: what its finish adds to the section's critical path).
#[inline]
pub(super) fn extend(end: &mut f64, at: f64) -> f64 {
    if at > *end {
        let d = at - *end;
        *end = at;
        d
    } else {
        0.0
    }
}

/// The passes [`eval_traced`] makes over a stage's collectives, each naming the
/// [`Booking::pass`] it books: the micro-batch's own released at its start (0), then those behind
/// its backward (1); the step's spread over forwards (5), each call on a copy of the timeline as
/// the forward left it, then the micro-batch's backward collectives again (1) on that copy, after
/// the calls (so a link is never booked twice at once, and only what the calls add counts); the
/// step's spread over earlier backwards (4), each call on a copy of the micro-batch's whole
/// timeline; the step's behind the first forward (2), then the first micro-batch's backward
/// collectives again (1) on that micro-batch's timeline, after the step's, then the step's behind
/// the last backward (3).
pub const PASSES: [usize; 8] = [0, 1, 5, 1, 4, 2, 1, 3];

/// The compute time overlapped collectives take from the operators they run beside, per stage
/// and step (s): [`collective_tax`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tax {
    /// Per micro-batch: in all, and the parts of it that lengthen its forward and its backward.
    pub micro_batch: f64,
    pub forward: f64,
    pub backward: f64,
    /// Once per step, in the step section.
    pub step: f64,
}

/// What overlapped collectives take from the compute they hide behind. NCCL runs its channels as
/// thread blocks on the device's cores, so while a collective whose record says it takes cores
/// (`Coeffs::cores`, settled from its role and group at lowering) runs on the scale-up or
/// scale-out links, the operators beside it have `collective_compute_share` (s) × that part
/// fewer of them. Each group of collectives costs s × the smaller of its core-weighted time on
/// those links (an all-to-all that drives both at once: the slower) and
/// the compute it hides behind: a micro-batch's forward-overlapped its forward, its
/// backward-overlapped its backward, its compute-overlapped the whole micro-batch (a third of
/// that cost lengthens the forward, two thirds the backward); the step's compute-overlapped the
/// step section; and the step's collectives that ride a micro-batch that micro-batch's forward
/// or backward, once per step, so they lengthen the step section, and those spread over
/// `count` backwards or forwards (one call behind each) up to `count` such windows. Groups
/// that run at once each
/// take their own cores (a pipeline exchange beside a data-parallel reduction: two
/// communicators' kernels), so a pass can lose up to twice the share. The weight store's, the
/// mesh's and the host link's transfers are DMA and router traffic and take no cores.
/// Only the collectives of the form the stage runs count (`streams`, `Form::runs`).
/// `windows`: the micro-batch's forward, its backward, the whole micro-batch, the step section
/// (s, at full clock). A faster link or faster compute never raises it.
pub fn collective_tax(
    p: &Program,
    st: &Stage,
    m: &Machine,
    streams: bool,
    windows: [f64; 4],
) -> Tax {
    let [fwd, bwd, mb, step] = windows;
    let share = m[t::COMM_SHARE];
    let mut tax = Tax::default();
    if share <= 0.0 {
        return tax;
    }
    // core-driven link time per group: micro-batch forward, backward, compute; step compute,
    // forward-riding, backward-riding, spread over backwards, spread over forwards; and the
    // most windows a spread group's collectives take
    let mut d = [0.0f64; 8];
    let mut spread = [0.0f64; 2];
    for c in &p.comms[st.comms.clone()] {
        if c.coeffs.cores <= 0.0 || !c.form.runs(streams) {
            continue;
        }
        let Some(g) = c.booking().tax_group() else {
            continue;
        };
        let l = collective_links(c, m);
        let t = if c.coeffs.overlapped {
            l[0].max(l[1])
        } else {
            l[0] + l[1]
        };
        d[g] += t * c.count * c.coeffs.cores;
        if g >= 6 {
            spread[g - 6] = spread[g - 6].max(c.count);
        }
    }
    let cap = |d: f64, w: f64| share * d.min(w);
    let (f, b) = (cap(d[0], fwd), cap(d[1], bwd));
    let c = cap(d[2], mb);
    // the compute-overlapped ones (tensor-parallel) run in both passes: a third of their cost in
    // the forward, two in the backward, which has twice its matrix work (a fixed split, so a
    // shorter pass never moves cost into the other)
    tax.micro_batch = f + b + c;
    tax.forward = f + c / 3.0;
    tax.backward = b + 2.0 * c / 3.0;
    tax.step = cap(d[3], step)
        + cap(d[4], fwd)
        + cap(d[5], bwd)
        + cap(d[6], spread[0] * bwd)
        + cap(d[7], spread[1] * fwd);
    tax
}

/// Time on one link class: latencies × latency + bytes / bandwidth (infinite without bandwidth).
#[inline]
/// A collective on the mesh: its hops, and its bytes through the busiest port streamed at the
/// slower of the link and the software's relay of each element (`Link::relayed`).
fn mesh_link(l: &Link, m: &Machine) -> f64 {
    let streamed = Link {
        latencies: 0.0,
        ..*l
    };
    let relay = l.relayed * m[t::MESH_RELAY_TIME];
    link(&streamed, m[t::MESH_LINK_BANDWIDTH], 0.0).max(relay)
        + l.latencies * m[t::MESH_HOP_LATENCY]
}

fn link(l: &Link, bw: f64, lat: f64) -> f64 {
    let b = if l.bytes > 0.0 {
        if bw > 0.0 {
            l.bytes / bw
        } else {
            f64::INFINITY
        }
    } else {
        0.0
    };
    b + l.latencies * lat
}
