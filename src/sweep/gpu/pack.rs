//! Packing a sweep for the kernel: programs, their operators and collectives, the base machines
//! and the axes, as the generated records of `layout.rs` in the shared record array.

use super::layout::code::*;
use super::layout::{
    AxisRec, CommRec, Layout, OpRec, Params, ProgRec, StageRec, TargetRec, REC_WORDS,
};
use crate::engine::program::Program;
use crate::engine::table::{self as fields, Fields, NX};
use crate::sweep::space::{Op, Sampling, Space, Values};

/// A sweep as the kernel's buffers hold it.
pub struct Packed {
    pub recs: Vec<u32>,
    pub vals: Vec<f32>,
    pub progs: Vec<u32>,
    /// The parameters every dispatch of this sweep shares (a dispatch adds its range and mode).
    pub params: Params,
}

/// Pack `programs` (each with the machine fields its points start from) and the axes of `space`.
pub fn pack(programs: &[(&Program, &Fields)], space: &Space) -> Packed {
    let mut recs: Vec<u32> = Vec::new();
    let mut vals: Vec<f32> = Vec::new();
    let mut progs: Vec<u32> = Vec::new();
    let mut bases: Vec<&Fields> = Vec::new();
    for (p, base) in programs {
        let b = match bases.iter().position(|x| x == base) {
            Some(i) => i,
            None => {
                bases.push(base);
                bases.len() - 1
            }
        };
        let op_start = at(&recs);
        pack_ops(p, &mut recs);
        let comm_start = at(&recs);
        pack_comms(p, &mut recs);
        let stage_start = at(&recs);
        let n_stages = pack_stages(p, op_start, comm_start, &mut recs);
        let fp = &p.footprint;
        let rec = ProgRec {
            op_start,
            n_ops: p.ops.len() as u32,
            comm_start,
            n_comms: p.comms.len() as u32,
            base: (b * NX) as u32,
            mfu_prec: p.mfu_precision as u32,
            stage_start,
            n_stages,
            micro_batches: f(p.micro_batches),
            bubble: f(p.bubble),
            devices: f(p.devices),
            units: f(p.units_per_step),
            model_flops: f(p.model_flops_per_step),
            state: f(fp.state()),
            working: f(fp.working()),
            total: f(fp.total()),
            host_steps: f(p.host_steps),
            ..ProgRec::default()
        };
        progs.extend_from_slice(rec.words());
    }
    for b in &bases {
        vals.extend(b.iter().map(|x| *x as f32));
    }
    let axis_start = at(&recs);
    pack_axes(space, &mut recs, &mut vals);
    let target_start = at(&recs);
    pack_targets(space, &mut recs);
    let (sampling, seed) = match space.sampling {
        Sampling::Grid => (SAMPLING_GRID, 0),
        Sampling::Random { seed, .. } => (SAMPLING_RANDOM, crate::sweep::space::seed32(seed)),
        Sampling::LatinHypercube { seed, .. } => {
            (SAMPLING_LATIN_HYPERCUBE, crate::sweep::space::seed32(seed))
        }
    };
    Packed {
        recs,
        vals,
        progs,
        params: Params {
            points: space.points as u32,
            n_axes: space.axes.len() as u32,
            axis_start,
            n_targets: space.flat.len() as u32,
            target_start,
            sampling,
            seed,
            rederive: space.derive.rederive,
            divide: space.derive.divide,
            ..Params::default()
        },
    }
}

/// A figure as the kernel reads it (f32).
fn f(x: f64) -> f32 {
    x as f32
}

/// The index of the next `Rec` in `recs` (where the next record starts).
fn at(recs: &[u32]) -> u32 {
    (recs.len() / REC_WORDS) as u32
}

/// The program's operator records: the machine slots of its rate, efficiencies and energy, and
/// its work.
fn pack_ops(p: &Program, recs: &mut Vec<u32>) {
    for o in &p.ops {
        let r = o.class().slots();
        let rec = OpRec {
            rate: (r.peak + o.precision) as u32,
            eff: r.eff as u32,
            eff2: r.eff2 as u32,
            eff3: r.eff3 as u32,
            epf: (fields::ENERGY_PER_FLOP + o.precision) as u32,
            flops: f(o.flops),
            occupancy: f(o.occupancy),
            weight_bytes: f(o.weight_bytes),
            act_bytes: f(o.act_bytes),
            count: f(o.count),
            section: o.section as u32,
            phase: o.phase as u32,
            form: o.form as u32,
            ..OpRec::default()
        };
        recs.extend_from_slice(rec.words());
    }
}

/// The program's collective records: the alpha-beta coefficients of each link class it uses.
fn pack_comms(p: &Program, recs: &mut Vec<u32>) {
    for c in &p.comms {
        let k = &c.coeffs;
        let rec = CommRec {
            section: c.section as u32,
            overlap: c.overlap as u32,
            overlapped: k.overlapped as u32,
            cores: f(k.cores),
            share: f(c.inner_share),
            count: f(c.count),
            ext_lat: f(k.ext.latencies),
            ext_bytes: f(k.ext.bytes),
            up_lat: f(k.up[0].latencies),
            up_bytes: f(k.up[0].bytes),
            up_lat_inr: f(k.up[1].latencies),
            up_bytes_inr: f(k.up[1].bytes),
            out_lat: f(k.out[0].latencies),
            out_bytes: f(k.out[0].bytes),
            out_lat_inr: f(k.out[1].latencies),
            out_bytes_inr: f(k.out[1].bytes),
            mesh_lat: f(k.mesh.latencies),
            mesh_bytes: f(k.mesh.bytes),
            mesh_relayed: f(k.mesh.relayed),
            mesh_hop_bytes: f(k.mesh.hop_bytes),
            booking: c.booking() as u32,
            host_lat: f(k.host.latencies),
            host_bytes: f(k.host.bytes),
            form: c.form as u32,
        };
        recs.extend_from_slice(rec.words());
    }
}

/// The program's stage class records, each pointing at its operators and collectives (from
/// `op_start` and `comm_start`); how many there are.
fn pack_stages(p: &Program, op_start: u32, comm_start: u32, recs: &mut Vec<u32>) -> u32 {
    let stages = p.stage_list();
    for st in stages.iter() {
        let fp = &st.footprint;
        let rec = StageRec {
            op_start: op_start + (st.ops.start * OpRec::recs()) as u32,
            n_ops: st.ops.len() as u32,
            comm_start: comm_start + (st.comms.start * CommRec::recs()) as u32,
            n_comms: st.comms.len() as u32,
            repeat: f(st.repeat),
            devices: f(st.devices),
            state: f(fp.state()),
            working: f(fp.working()),
            total: f(fp.total()),
            offloaded: f(fp.offloaded),
            pool: u32::from(st.pool),
            streamed: u32::from(fp.streamed),
            hands_on: f(st.hands_on),
            ..StageRec::default()
        };
        recs.extend_from_slice(rec.words());
    }
    stages.len() as u32
}

/// The sweep's axes: a list's values into `vals`, a range's ends (and a log range's ratio).
fn pack_axes(space: &Space, recs: &mut Vec<u32>, vals: &mut Vec<f32>) {
    for a in &space.axes {
        let rec = match &a.values {
            Values::List(v) => {
                let offset = vals.len() as u32;
                vals.extend(v.iter().map(|x| *x as f32));
                AxisRec {
                    kind: AXIS_LIST,
                    count: v.len() as u32,
                    offset,
                    ..AxisRec::default()
                }
            }
            Values::Linear { lo, hi } => AxisRec {
                kind: AXIS_LINEAR,
                lo: f(*lo),
                hi: f(*hi),
                ..AxisRec::default()
            },
            Values::Log { lo, hi } => AxisRec {
                kind: AXIS_LOG,
                lo: f(*lo),
                hi: f(*hi),
                ln_ratio: f((hi / lo).ln()),
                ..AxisRec::default()
            },
        };
        recs.extend_from_slice(rec.words());
    }
}

/// What each axis sets: the machine field it writes, and how.
fn pack_targets(space: &Space, recs: &mut Vec<u32>) {
    for (axis, t) in &space.flat {
        let (op, scale, offset, floor) = match t.op {
            Op::Set {
                scale,
                offset,
                floor,
            } => (TARGET_SET, scale, offset, floor.max(f32::MIN as f64)),
            Op::DivBy { scale } => (TARGET_DIV, scale, 0.0, 0.0),
        };
        let rec = TargetRec {
            axis: *axis as u32,
            field: t.field as u32,
            op,
            scale: f(scale),
            offset: f(offset),
            floor: f(floor),
            ..TargetRec::default()
        };
        recs.extend_from_slice(rec.words());
    }
}
