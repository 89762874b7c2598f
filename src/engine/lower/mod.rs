//! Lowering: a workload under a mapping onto a system → the flat cost program of one device (the
//! system → its machine vector is `engine::machine`). All model arithmetic (FLOPs, bytes,
//! collectives, memory footprint, pipeline schedule) lives under this module, once: one submodule
//! per workload family, and here what they share (the dispatch, group placement on the topology,
//! the precisions work runs at, the builder that collects operators and collectives).

mod cnn;
mod graph;
mod inference;
mod training;

pub use super::machine::machine;
use super::program::*;
use super::reason::Reason;
use crate::model::mapping::Mapping;
use crate::model::precision::Precision;
use crate::model::system::System;
use crate::model::workload::*;
use crate::vocab::ScaleUpTopology;
pub use training::pipeline_bubble;

/// Lower `w` under `m` onto `devices` devices of `sys`. `Err` is why the mapping is infeasible.
pub fn lower(sys: &System, w: &Workload, m: &Mapping, devices: u64) -> Result<Program, Reason> {
    if devices == 0 || devices > sys.devices {
        return Err(Reason::Devices {
            requested: devices,
            available: sys.devices,
        });
    }
    if m.devices() != devices {
        return Err(Reason::mapping(format!(
            "the mapping uses {} devices (dp {} × tp {} × pp {} × cp {}), not {devices}",
            m.devices(),
            m.dp,
            m.tp,
            m.pp,
            m.cp
        )));
    }
    if m.pool.any()
        && !matches!(
            (&w.model, &w.task),
            (Model::Transformer(_), Task::Inference(_))
        )
    {
        return Err(Reason::unsupported(
            "a prefill pool (disaggregated serving) is modelled for transformer inference only",
        ));
    }
    if m.placement.n > 0 && !matches!(w.task, Task::Inference(_)) {
        return Err(Reason::unsupported(
            "pipeline `stages` are modelled for transformer inference only",
        ));
    }
    let transformer_training = matches!(
        (&w.model, &w.task),
        (Model::Transformer(_), Task::Training(_))
    );
    if m.offload_activation_layers > 0 && !transformer_training {
        return Err(Reason::unsupported(
            "offloading activations to host memory is modelled for transformer training only",
        ));
    }
    if (m.offload_optimizer > 0.0 || m.offload_weights) && !transformer_training {
        return Err(Reason::unsupported(
            "offloading the optimizer state or the weights to host memory is modelled for transformer training only",
        ));
    }
    if m.etp.is_some_and(|e| e != m.tp) && !transformer_training {
        return Err(Reason::unsupported(
            "expert tensor parallelism apart from tp (etp) is modelled for transformer training only",
        ));
    }
    let split_counted = m.embedding_in_pipeline_split || m.loss_in_pipeline_split;
    if split_counted && !transformer_training {
        return Err(Reason::unsupported(
            "counting the embedding or the loss in the pipeline split is modelled for transformer training only",
        ));
    }
    match (&w.model, &w.task) {
        (Model::Transformer(t), Task::Training(tr)) => {
            training::transformer_training(sys, t, tr, m)
        }
        (Model::Transformer(t), Task::Inference(inf)) => {
            inference::transformer_inference(sys, t, inf, m)
        }
        (Model::Cnn(c), Task::Training(tr)) => cnn::cnn_training(sys, c, tr, m),
        (Model::Graph(g), Task::Run(r)) => graph::graph_run(sys, g, r, m),
        (Model::Graph(g), Task::Training(tr)) => graph::graph_run(
            sys,
            g,
            &Run {
                steps: None,
                samples_per_step: tr.global_batch as f64,
            },
            m,
        ),
        _ => Err(Reason::unsupported(
            "this combination of model and task is not modelled",
        )),
    }
}

pub use inference::{kv_tokens, KV_PAGE_TOKENS};

/// The prefill of one request's prompt of a transformer inference workload `w` under `m`, alone
/// through its instance: the program time to first token is made of (`engine::serve`). The
/// same lowering as [`lower`]'s round, with the decode left out. `Err`: why it cannot run.
pub fn lower_prefill(
    sys: &System,
    w: &Workload,
    m: &Mapping,
    devices: u64,
) -> Result<Program, Reason> {
    match (&w.model, &w.task) {
        (Model::Transformer(t), Task::Inference(inf)) if m.devices() == devices => {
            inference::transformer_prefill(sys, t, inf, m)
        }
        (Model::Transformer(_), Task::Inference(_)) => lower(sys, w, m, devices),
        _ => Err(Reason::unsupported(
            "time to first token is modelled for transformer inference",
        )),
    }
}

/// A collective's group: (ranks per scale-up domain, domains, share of the scale-up bandwidth
/// the ranks inside a domain can use).
pub type Group = (f64, f64, f64);

/// Place a group of `size` ranks spaced `stride` apart on the system's topology (domains of
/// `domain` devices): how it splits over domains ([`split_group`]) and which share of a device's
/// scale-up bandwidth its collectives can drive. Through switches that is all of it. On a torus
/// or mesh of d dimensions the group, placed on a compact sub-box, runs its collectives along the
/// k ≤ log2(g) dimensions it spans (ring or bucket algorithms per dimension), using k/d of the
/// links. On a full mesh (xGMI, DGX-1's hybrid cube-mesh) of D devices each rank reaches the
/// other g − 1 members over direct links: (g − 1)/(D − 1) of its links.
pub fn place_group(sys: &System, size: u64, stride: u64, domain: u64) -> Group {
    let (inner, outer) = split_group(size, stride, domain);
    (inner, outer, inner_share(sys, inner as u64, stride, domain))
}

fn inner_share(sys: &System, inner: u64, stride: u64, domain: u64) -> f64 {
    let Some(u) = &sys.scale_up else { return 1.0 };
    if inner <= 1 {
        return 1.0;
    }
    match u.topology {
        ScaleUpTopology::Torus | ScaleUpTopology::Mesh if !u.dims.is_empty() => {
            // The runtime places each group on a compact sub-box of the torus (XLA's device
            // assignment does): g ranks span up to log2(g) dimensions, 2 ranks one, 4 two, 8 or
            // more three.
            let _ = stride;
            let spanned = (inner as f64).log2().floor().max(1.0);
            spanned.min(u.dims.len() as f64) / u.dims.len() as f64
        }
        ScaleUpTopology::FullMesh | ScaleUpTopology::HybridCubeMesh => {
            let d = domain.min(u.size) as f64;
            if d <= 1.0 {
                1.0
            } else {
                ((inner as f64 - 1.0) / (d - 1.0)).clamp(f64::MIN_POSITIVE, 1.0)
            }
        }
        _ => 1.0,
    }
}

/// Split a group of `size` ranks spaced `stride` apart over domains of `domain` devices:
/// (ranks per domain, domains).
pub fn split_group(size: u64, stride: u64, domain: u64) -> (f64, f64) {
    if size <= 1 {
        return (1.0, 1.0);
    }
    let domain = domain.max(1);
    if stride >= domain {
        (1.0, size as f64)
    } else if stride * size <= domain {
        (size as f64, 1.0)
    } else {
        let inner = (domain / stride).max(1);
        (inner as f64, (size as f64 / inner as f64).max(1.0))
    }
}

/// The scale-up domain a program of `devices` devices sees: the system's, or all of them when
/// fewer.
fn domain_size(sys: &System, devices: u64) -> u64 {
    sys.scale_up_size().min(devices).max(1)
}

/// The bytes MeshGEMM (He et al., OSDI'25; Cannon's algorithm, double-buffered) puts on a core's
/// busiest mesh link for matrix products given as (input-activation bytes, weight bytes) each,
/// spread over a square of `side` × `side` cores: each core's activation tile passes every core
/// of its row and its weight tile every core of its column, over different links at once, so a
/// product loads its links with the larger of the two over `side`. The shifts run behind the
/// multiplications (the next tiles arrive while the current ones are multiplied), so callers
/// add them as `Overlap::Compute`.
fn mesh_gemm_bytes(products: &[(f64, f64)], side: f64) -> f64 {
    products.iter().map(|&(a, w)| a.max(w)).sum::<f64>() / side
}

/// The precision the device actually runs `p` at (its nearest supported format).
pub(crate) fn run_precision(sys: &System, p: Precision) -> Precision {
    sys.device.matmul_rate(p).1
}

/// The precision of the attention core and the language-model head when the GEMMs of the
/// transformer block run at `prec`. Mixed-precision recipes with 8-bit (or narrower) formats
/// (NVIDIA Transformer Engine, AMD's port of it, MaxText's AQT) quantise the linear layers of the
/// block only: the fused attention kernels (QK^T, softmax, AV) and the output layer run in bf16.
/// Where the device has no bf16 rate (int-only inference chips) the work stays at `prec`.
fn attention_precision(sys: &System, prec: Precision) -> usize {
    let b = Precision::Bf16;
    if prec.index() >= Precision::Fp8.index() && sys.device.matmul_rate(b).1 == b {
        b.index()
    } else {
        prec.index()
    }
}

/// Elementwise work runs in bf16 on the vector engines where the device has a bf16 vector
/// rate, else at the precision of the matrix work.
fn vector_precision(sys: &System, matmul: usize) -> usize {
    let b = Precision::Bf16.index();
    if sys.device.vector_peak[b] > 0.0 || sys.device.matrix_peak[b] > 0.0 {
        b
    } else {
        matmul
    }
}

/// One collective as lowering states it: what it is for, its shape and its group. [`Builder::comm`]
/// turns it into the program's [`Comm`].
#[derive(Clone)]
struct Collective {
    name: Name,
    role: Role,
    kind: CollKind,
    /// Payload per device (see [`Comm::bytes`]).
    bytes: f64,
    group: Group,
    count: f64,
    section: Section,
    overlap: Overlap,
}

/// Collects a program's operators and collectives in order, dropping those that do nothing.
#[derive(Default)]
struct Builder {
    ops: Vec<Op>,
    comms: Vec<Comm>,
}

/// Bytes of the last gradient bucket of a data-parallel reduction (PyTorch DDP's default
/// `bucket_cap_mb` = 25). Gradients are reduced bucket by bucket as the backward pass produces
/// them, so the reduction hides behind the backward compute, except the last bucket: it is
/// ready only when the backward pass ends and is reduced after it.
const LAST_GRAD_BUCKET: f64 = 25e6;

impl Builder {
    /// Add `op` unless it never runs (count ≤ 0) or does no work (no FLOPs, no bytes).
    fn op(&mut self, op: Op) {
        if op.count <= 0.0 || (op.flops <= 0.0 && op.weight_bytes <= 0.0 && op.act_bytes <= 0.0) {
            return;
        }
        self.ops.push(op);
    }

    /// Add `c` as a collective on the device's own mesh of cores, along a line of `cores` cores
    /// (its group is ignored), unless it never runs, moves nothing or spans a single core. Every
    /// row of a square of `cores` × `cores` cores runs it (its energy: `cores` lines).
    fn mesh_comm(&mut self, c: Collective, cores: f64) {
        self.mesh_comm_lines(c, cores, cores);
    }

    /// [`Builder::mesh_comm`] run by `lines` lines of cores at once per device (a region's rows
    /// over the share of a device it holds): the collective's bytes × hops on the mesh, for its
    /// energy per bit-hop, are one line's (`coeffs::mesh_hop_bytes`) × `lines`.
    fn mesh_comm_lines(&mut self, c: Collective, cores: f64, lines: f64) {
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
            }
            .with_coeffs(),
        );
        if let Some(last) = self.comms.last_mut() {
            last.coeffs.mesh.hop_bytes = hop_bytes;
        }
    }

    /// Add the expert all-to-all `c` of `top_k` copies per token as `dispatch` sends it
    /// (`Comm::hierarchical_dispatch`), unless it never runs, moves nothing or has one rank.
    fn expert_all_to_all(&mut self, c: Collective, top_k: f64, dispatch: crate::vocab::Dispatch) {
        let n = self.comms.len();
        self.comm(c);
        if dispatch == crate::vocab::Dispatch::Hierarchical && self.comms.len() > n {
            if let Some(x) = self.comms.pop() {
                self.comms.push(x.hierarchical_dispatch(top_k));
            }
        }
    }

    /// Add `c` unless it never runs, moves nothing or has a single rank.
    fn comm(&mut self, c: Collective) {
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
    fn grad_comm(&mut self, c: Collective, every: Option<f64>) {
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
