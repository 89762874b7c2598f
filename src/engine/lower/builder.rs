//! The builder every workload family's lowering fills: the collectives as lowering states them
//! ([`Collective`]) and the operators, in program order, each dropped where it does nothing. A
//! leaf, so that the lowering's files read it without reading one another.

use super::place::Group;
use crate::engine::program::{CollKind, Comm, Form, Name, Op, Overlap, Role, Section};

/// One collective as lowering states it: what it is for, its shape and its group. [`Builder::comm`]
/// turns it into the program's [`Comm`].
#[derive(Clone)]
pub(super) struct Collective {
    pub(super) name: Name,
    pub(super) role: Role,
    pub(super) kind: CollKind,
    /// Payload per device (see [`Comm::bytes`]).
    pub(super) bytes: f64,
    pub(super) group: Group,
    pub(super) count: f64,
    pub(super) section: Section,
    pub(super) overlap: Overlap,
}

/// Collects a program's operators and collectives in order, dropping those that do nothing.
#[derive(Default)]
pub(super) struct Builder {
    pub(super) ops: Vec<Op>,
    pub(super) comms: Vec<Comm>,
}

/// Bytes of the last gradient bucket of a data-parallel reduction (PyTorch DDP's default
/// `bucket_cap_mb` = 25). Gradients are reduced bucket by bucket as the backward pass produces
/// them, so the reduction hides behind the backward compute, except the last bucket: it is
/// ready only when the backward pass ends and is reduced after it.
const LAST_GRAD_BUCKET: f64 = 25e6;

impl Builder {
    /// Add `op` unless it never runs (count ≤ 0) or does no work (no FLOPs, no bytes).
    pub(super) fn op(&mut self, op: Op) {
        if op.count <= 0.0 || (op.flops <= 0.0 && op.weight_bytes <= 0.0 && op.act_bytes <= 0.0) {
            return;
        }
        self.ops.push(op);
    }

    /// Add `c` as a collective on the device's own mesh of cores, along a line of `cores` cores
    /// (its group is ignored), unless it never runs, moves nothing or spans a single core. Every
    /// row of a square of `cores` × `cores` cores runs it (its energy: `cores` lines).
    pub(super) fn mesh_comm(&mut self, c: Collective, cores: f64) {
        self.mesh_comm_lines(c, cores, cores);
    }

    /// [`Builder::mesh_comm`] run by `lines` lines of cores at once per device (a region's rows
    /// over the share of a device it holds): the collective's bytes × hops on the mesh, for its
    /// energy per bit-hop, are one line's (`coeffs::mesh_hop_bytes`) × `lines`.
    pub(super) fn mesh_comm_lines(&mut self, c: Collective, cores: f64, lines: f64) {
        if c.count <= 0.0 || c.bytes <= 0.0 || cores <= 1.0 {
            return;
        }
        let hop_bytes = crate::engine::coeffs::mesh_hop_bytes(c.kind, cores, c.bytes) * lines;
        self.comms.push(
            Comm {
                name: c.name,
                role: c.role,
                kind: c.kind,
                bytes: c.bytes,
                inner: 1.0,
                outer: 1.0,
                count: c.count,
                section: c.section,
                overlap: c.overlap,
                weight_stream: false,
                host: false,
                inner_share: 1.0,
                mesh: cores,
                coeffs: Default::default(),
                form: Form::Both,
            }
            .with_coeffs(),
        );
        if let Some(last) = self.comms.last_mut() {
            last.coeffs.mesh.hop_bytes = hop_bytes;
        }
    }

    /// Add the expert all-to-all `c` of `top_k` copies per token as `dispatch` sends it
    /// (`Comm::hierarchical_dispatch`), unless it never runs, moves nothing or has one rank.
    pub(super) fn expert_all_to_all(
        &mut self,
        c: Collective,
        top_k: f64,
        dispatch: crate::vocab::Dispatch,
    ) {
        let n = self.comms.len();
        self.comm(c);
        if dispatch == crate::vocab::Dispatch::Hierarchical && self.comms.len() > n {
            if let Some(x) = self.comms.pop() {
                self.comms.push(x.hierarchical_dispatch(top_k));
            }
        }
    }

    /// Add `c` unless it never runs, moves nothing or has a single rank.
    pub(super) fn comm(&mut self, c: Collective) {
        let g = c.group;
        if c.count <= 0.0 || c.bytes <= 0.0 || (g.0 <= 1.0 && g.1 <= 1.0) {
            return;
        }
        self.comms.push(
            Comm {
                name: c.name,
                role: c.role,
                kind: c.kind,
                bytes: c.bytes,
                inner: g.0,
                outer: g.1,
                count: c.count,
                section: c.section,
                overlap: c.overlap,
                weight_stream: false,
                host: false,
                inner_share: g.2,
                mesh: 0.0,
                coeffs: Default::default(),
                form: Form::Both,
            }
            .with_coeffs(),
        );
    }

    /// A data-parallel gradient reduction: overlapped with the backward pass when `c.overlap`
    /// says so, but for its last bucket, which is exposed at the step's end.
    ///
    /// `every`: `Some(micro-batches per step)` where the gradients are reduced after each
    /// micro-batch's backward rather than once per step (sharded gradients, ZeRO 2 and 3). The
    /// bulk then runs in the micro-batch section, behind each micro-batch's backward, and the
    /// last bucket of every micro-batch but the step's last behind the next micro-batch's
    /// forward (`Overlap::Forward`: the timeline of a micro-batch stands for its neighbour's);
    /// the step's last one is exposed as above. The bytes per step are micro-batches × `c.bytes`.
    pub(super) fn grad_comm(&mut self, c: Collective, every: Option<f64>) {
        let section = if every.is_some() {
            Section::MicroBatch
        } else {
            c.section
        };
        if c.overlap == Overlap::Backward && c.bytes > LAST_GRAD_BUCKET {
            let last = Collective {
                name: format!("{} (last bucket)", c.name).into(),
                bytes: LAST_GRAD_BUCKET,
                overlap: Overlap::None,
                ..c.clone()
            };
            self.comm(Collective {
                bytes: c.bytes - LAST_GRAD_BUCKET,
                section,
                ..c.clone()
            });
            if let Some(m) = every.filter(|m| *m > 1.0) {
                self.comm(Collective {
                    name: format!("{} (last bucket, behind the next forward)", c.name).into(),
                    bytes: LAST_GRAD_BUCKET,
                    count: c.count * (m - 1.0) / m,
                    section,
                    overlap: Overlap::Forward,
                    ..c
                });
            }
            self.comm(last);
        } else {
            self.comm(Collective { section, ..c });
        }
    }
}
