//! Lowering: a workload under a mapping onto a system → the flat cost program of one device (the
//! system → its machine vector is `engine::machine`). All model arithmetic (FLOPs, bytes,
//! collectives, memory footprint, pipeline schedule) lives here, once.

pub use super::machine::machine;
use super::program::*;
use super::reason::Reason;
use crate::model::mapping::{ExtraOverlap, Mapping, Recompute};
use crate::model::precision::Precision;
use crate::model::system::System;
use crate::model::workload::*;
use crate::spec::arch::ScaleUpTopology;
use crate::spec::workload::CollectiveKind;

/// Mark the collectives of a training program that `o` says the framework overlaps.
fn overlap_communication(p: &mut Program, o: ExtraOverlap) {
    for c in &mut p.comms {
        if o.tensor_parallel && c.name.starts_with("tp ") {
            c.overlap = Overlap::Compute;
        }
        if o.pipeline && c.name == "pp send/recv" {
            c.overlap = Overlap::Compute;
        }
        if o.parameter_gather && c.name == "dp parameter all-gather" {
            c.overlap = Overlap::Backward;
        }
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

struct Builder {
    ops: Vec<Op>,
    comms: Vec<Comm>,
}

impl Builder {
    #[allow(clippy::too_many_arguments)]
    fn op(
        &mut self,
        name: &str,
        matrix: bool,
        p: usize,
        flops: f64,
        wb: f64,
        ab: f64,
        count: f64,
        section: Section,
        phase: Phase,
    ) {
        if count <= 0.0 || (flops <= 0.0 && wb <= 0.0 && ab <= 0.0) {
            return;
        }
        self.ops.push(Op {
            name: name.to_string(),
            matrix,
            precision: p,
            flops,
            weight_bytes: wb,
            act_bytes: ab,
            count,
            section,
            phase,
        });
    }
    #[allow(clippy::too_many_arguments)]
    fn comm(
        &mut self,
        name: &str,
        kind: CollKind,
        bytes: f64,
        g: Group,
        count: f64,
        section: Section,
        overlap: Overlap,
    ) {
        if count <= 0.0 || bytes <= 0.0 || (g.0 <= 1.0 && g.1 <= 1.0) {
            return;
        }
        self.comms.push(Comm {
            name: name.to_string(),
            kind,
            bytes,
            inner: g.0,
            outer: g.1,
            count,
            section,
            overlap,
            weight_stream: false,
            inner_share: g.2,
        });
    }
}

/// Bytes of the last gradient bucket of a data-parallel reduction (PyTorch DDP's default
/// `bucket_cap_mb` = 25). Gradients are reduced bucket by bucket as the backward pass produces
/// them, so the reduction hides behind the backward compute, except the last bucket: it is
/// ready only when the backward pass ends and is reduced after it.
const LAST_GRAD_BUCKET: f64 = 25e6;

impl Builder {
    /// A data-parallel gradient reduction of `bytes`: overlapped with the backward pass when
    /// `ov` says so, but for its last bucket, which is exposed.
    fn grad_comm(
        &mut self,
        name: &str,
        kind: CollKind,
        bytes: f64,
        g: Group,
        section: Section,
        ov: Overlap,
    ) {
        if ov == Overlap::Backward && bytes > LAST_GRAD_BUCKET {
            self.comm(name, kind, bytes - LAST_GRAD_BUCKET, g, 1.0, section, ov);
            self.comm(
                &format!("{name} (last bucket)"),
                kind,
                LAST_GRAD_BUCKET,
                g,
                1.0,
                section,
                Overlap::None,
            );
        } else {
            self.comm(name, kind, bytes, g, 1.0, section, ov);
        }
    }
}

/// The precision the device actually runs `p` at (its nearest supported format).
fn run_precision(sys: &System, p: Precision) -> Precision {
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
    match (&w.model, &w.task) {
        (Model::Transformer(t), Task::Training(tr)) => transformer_training(sys, t, tr, m),
        (Model::Transformer(t), Task::Inference(inf)) => transformer_inference(sys, t, inf, m),
        (Model::Cnn(c), Task::Training(tr)) => cnn_training(sys, c, tr, m),
        (Model::Graph(g), Task::Run(r)) => graph_run(sys, g, r, m),
        (Model::Graph(g), Task::Training(tr)) => graph_run(
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

fn domain_size(sys: &System, devices: u64) -> u64 {
    sys.scale_up_size().min(devices).max(1)
}

fn transformer_training(
    sys: &System,
    t: &Transformer,
    tr: &Training,
    m: &Mapping,
) -> Result<Program, Reason> {
    let (tp, pp, cp, dp, v) = (m.tp, m.pp, m.cp, m.dp, m.interleave);
    if t.heads % tp != 0 {
        return Err(Reason::mapping(format!(
            "tp {tp} does not divide {} attention heads",
            t.heads
        )));
    }
    if t.kv_heads % tp != 0 && tp % t.kv_heads != 0 {
        return Err(Reason::mapping(format!(
            "tp {tp} does not fit {} key/value heads",
            t.kv_heads
        )));
    }
    if pp * v > t.layers {
        return Err(Reason::mapping(format!(
            "pp {pp} × interleave {v} exceeds {} layers",
            t.layers
        )));
    }
    if tr.seq % cp != 0 {
        return Err(Reason::mapping(format!(
            "cp {cp} does not divide the sequence of {}",
            tr.seq
        )));
    }
    if dp * m.micro_batch > tr.global_batch || tr.global_batch % (dp * m.micro_batch) != 0 {
        return Err(Reason::mapping(format!(
            "global batch {} is not a multiple of dp {dp} × micro-batch {}",
            tr.global_batch, m.micro_batch
        )));
    }
    let experts = t.experts.as_ref();
    if let Some(e) = experts {
        if m.ep > e.count || e.count % m.ep != 0 {
            return Err(Reason::mapping(format!(
                "ep {} does not divide {} experts",
                m.ep, e.count
            )));
        }
        if (dp * cp) % m.ep != 0 {
            return Err(Reason::mapping(format!(
                "ep {} does not divide dp × cp = {}",
                m.ep,
                dp * cp
            )));
        }
    } else if m.ep > 1 {
        return Err(Reason::mapping(
            "expert parallelism needs a mixture-of-experts model",
        ));
    }
    let n = m.devices();
    let dom = domain_size(sys, n);
    let prec = run_precision(sys, tr.compute);
    let p = prec.index();
    let vecp = vector_precision(sys, p);
    let pa = attention_precision(sys, prec);
    let ab = tr.activations.bytes();
    let wb = tr.weights.bytes().max(prec.bytes());
    let gb = tr.gradients.bytes();
    let lora = tr.lora;
    let mb = m.micro_batch as f64;
    let s = tr.seq as f64;
    let tok = mb * s / cp as f64;
    let h = t.hidden as f64;
    let kvd = (t.kv_heads * t.head_dim()) as f64;
    let tpf = tp as f64;
    let layers_stage = t.layers.div_ceil(pp) as f64;
    let micro_batches = (tr.global_batch / (dp * m.micro_batch)) as f64;
    let sp = m.sp && tp > 1;
    let act_shard = if sp { tpf } else { 1.0 };
    let causal = if tr.flash_attention && t.causal {
        0.5
    } else {
        1.0
    };

    // Group placement, Megatron order: tp innermost, then cp, dp, pp outermost.
    // Group placement by the mapping's order (default Megatron: tp, cp, dp, pp outermost). The
    // gradient reduction spans dp × cp ranks (context-parallel ranks hold the same weights), laid
    // from the inner of the two; experts are sharded inside that group.
    use crate::spec::mapping::Dim;
    let dp_cp_stride = m
        .stride(Dim::Dp)
        .min(if cp > 1 { m.stride(Dim::Cp) } else { u64::MAX });
    let g_tp = place_group(sys, tp, m.stride(Dim::Tp), dom);
    let g_cp = place_group(sys, cp, m.stride(Dim::Cp), dom);
    let g_dp = place_group(sys, dp * cp, dp_cp_stride, dom);
    let g_ep = place_group(sys, m.ep, dp_cp_stride, dom);
    let g_pp = place_group(sys, pp, m.stride(Dim::Pp), dom);

    let mut b = Builder {
        ops: Vec::new(),
        comms: Vec::new(),
    };
    let (mbs, stp) = (Section::MicroBatch, Section::Step);
    let l = layers_stage;
    // Backward cost relative to forward: 2× for trained weights; LoRA computes only input
    // gradients through the frozen base (1×).
    let bwd = if lora.is_some() { 1.0 } else { 2.0 };

    // --- per layer, forward ---
    let qkv_f = 2.0 * tok * h * (h + 2.0 * kvd) / tpf;
    let qkv_w = h * (h + 2.0 * kvd) / tpf * wb;
    let attn_f = 4.0 * tok * s * h / tpf * causal;
    let proj_f = 2.0 * tok * h * h / tpf;
    let proj_w = h * h / tpf * wb;
    let (ffn_f, ffn_w) = match experts {
        Some(e) => {
            let mats = if t.gated_ffn { 3.0 } else { 2.0 };
            let local_experts = (e.count / m.ep) as f64 + e.shared as f64;
            (
                2.0 * tok * h * e.ffn as f64 * mats * (e.top_k + e.shared) as f64 / tpf,
                local_experts * mats * h * e.ffn as f64 / tpf * wb,
            )
        }
        None => (
            2.0 * tok * t.ffn_params(t.ffn) / tpf,
            t.ffn_params(t.ffn) / tpf * wb,
        ),
    };
    let ffn_inner = match experts {
        Some(e) => e.ffn as f64 * (e.top_k + e.shared) as f64,
        None => t.ffn as f64,
    };
    // activation traffic of the matmuls (read input, write output)
    let x = tok * h * ab;
    let heads_local = (t.heads / tp) as f64;
    // Attention core. Fused (FlashAttention): one kernel reading q, k, v and writing the context.
    // Unfused (Megatron-LM 2022): the QK^T and AV batched GEMMs write the score matrix and read
    // the probabilities, and a separate fused scale-mask-softmax + dropout kernel reads the scores
    // and writes the probabilities and a 1-byte dropout mask. The kernels run one after the other,
    // so the softmax is its own (memory-bound) operator rather than hidden under the GEMMs' FLOPs.
    let qkvo_bytes = (2.0 * tok * h / tpf + 2.0 * tok * kvd / tpf) * ab;
    let score_elems = mb * heads_local * (s / cp as f64) * s;
    let (attn_bytes, softmax_bytes, softmax_flops) = if tr.flash_attention {
        (qkvo_bytes, 0.0, 0.0)
    } else {
        (
            qkvo_bytes + 2.0 * score_elems * ab,
            score_elems * (4.0 * ab + 1.0),
            6.0 * score_elems,
        )
    };
    // Elementwise traffic per layer with the fused kernels of Megatron-LM / NeMo (fused layer norm,
    // fused bias-dropout-add, fused bias-activation), in tensors of tok × h: two layer norms (read
    // and write, 2 each) and two bias-dropout-adds (read the branch and the residual, write the
    // sum and a 1-byte mask: 3.5 each) = 11 forward, about the same backward (layer-norm backward
    // reads x and dy and writes dx; dropout-add backward reads the gradient and mask, writes two).
    // The FFN activation reads its inputs (2 for a gated FFN) and writes one; its backward reads
    // the gradient and the inputs and writes a gradient per input.
    let act_in = if t.gated_ffn { 2.0 } else { 1.0 };
    let elem_fwd_bytes = (11.0 * tok * h / act_shard + (act_in + 1.0) * tok * ffn_inner / tpf) * ab;
    let elem_bwd_bytes =
        (11.0 * tok * h / act_shard + (1.0 + 2.0 * act_in) * tok * ffn_inner / tpf) * ab;
    let elem_flops = 10.0 * tok * h / act_shard + 4.0 * tok * ffn_inner / tpf;

    for (phase, k) in [(Phase::Forward, 1.0), (Phase::Backward, bwd)] {
        let kb = if phase == Phase::Backward { 2.0 } else { 1.0 };
        b.op(
            "qkv projection",
            true,
            p,
            qkv_f * k,
            qkv_w * kb,
            x / act_shard + tok * (h + 2.0 * kvd) / tpf * ab,
            l,
            mbs,
            phase,
        );
        // attention has no weights: its backward is 2× forward even for LoRA
        b.op(
            "attention scores + context",
            true,
            pa,
            attn_f * kb,
            0.0,
            attn_bytes * kb,
            l,
            mbs,
            phase,
        );
        b.op(
            "attention softmax + dropout",
            false,
            vecp,
            softmax_flops * kb,
            0.0,
            softmax_bytes * kb,
            l,
            mbs,
            phase,
        );
        b.op(
            "attention output projection",
            true,
            p,
            proj_f * k,
            proj_w * kb,
            2.0 * x / tpf,
            l,
            mbs,
            phase,
        );
        b.op(
            "ffn",
            true,
            p,
            ffn_f * k,
            ffn_w * kb,
            x / act_shard + 2.0 * tok * ffn_inner / tpf * ab,
            l,
            mbs,
            phase,
        );
        b.op(
            "norms, residuals, activation",
            false,
            vecp,
            elem_flops * kb,
            0.0,
            if phase == Phase::Backward {
                elem_bwd_bytes
            } else {
                elem_fwd_bytes
            },
            l,
            mbs,
            phase,
        );
    }
    // LoRA adapters: each adapted projection adds two thin GEMMs (input × A, then × B, rank r)
    // and the sum into the frozen projection's output. Their FLOPs are negligible; their time is
    // the memory traffic: read the projection's input, write and re-read the adapter output and
    // the sum (about 4 × tok × h / tp). The backward reads and writes about twice as much.
    if let Some(lr) = lora {
        let r = lr.rank as f64;
        let n = lr.adapted_per_layer as f64;
        let f = 4.0 * tok * r * h / tpf;
        let bytes = (tok * h / act_shard + 4.0 * tok * h / tpf) * ab;
        for (phase, k) in [(Phase::Forward, 1.0), (Phase::Backward, 2.0)] {
            b.op(
                "lora adapters",
                false,
                vecp,
                f * k * n,
                0.0,
                bytes * k * n,
                l,
                mbs,
                phase,
            );
        }
    }
    // recomputation
    match m.recompute {
        Recompute::Full => {
            b.op(
                "recompute: qkv",
                true,
                p,
                qkv_f,
                qkv_w,
                x,
                l,
                mbs,
                Phase::Recompute,
            );
            b.op(
                "recompute: attention",
                true,
                pa,
                attn_f,
                0.0,
                attn_bytes,
                l,
                mbs,
                Phase::Recompute,
            );
            b.op(
                "recompute: attention softmax + dropout",
                false,
                vecp,
                softmax_flops,
                0.0,
                softmax_bytes,
                l,
                mbs,
                Phase::Recompute,
            );
            b.op(
                "recompute: output projection",
                true,
                p,
                proj_f,
                proj_w,
                2.0 * x / tpf,
                l,
                mbs,
                Phase::Recompute,
            );
            b.op(
                "recompute: ffn",
                true,
                p,
                ffn_f,
                ffn_w,
                x + 2.0 * tok * ffn_inner / tpf * ab,
                l,
                mbs,
                Phase::Recompute,
            );
            b.op(
                "recompute: elementwise",
                false,
                vecp,
                elem_flops,
                0.0,
                elem_fwd_bytes,
                l,
                mbs,
                Phase::Recompute,
            );
        }
        Recompute::Selective if !tr.flash_attention => {
            // Selective recomputation redoes the whole attention core: QK^T, softmax, dropout and
            // the product with V (Korthikanti et al. 2022, §5).
            b.op(
                "recompute: attention scores",
                true,
                pa,
                attn_f,
                0.0,
                attn_bytes,
                l,
                mbs,
                Phase::Recompute,
            );
            b.op(
                "recompute: attention softmax + dropout",
                false,
                vecp,
                softmax_flops,
                0.0,
                softmax_bytes,
                l,
                mbs,
                Phase::Recompute,
            );
        }
        _ => {}
    }
    // language-model head and loss on the last stage (the slowest stage bounds the pipeline)
    let head_f = 2.0 * tok * h * t.vocab as f64 / tpf;
    let head_w = h * t.vocab as f64 / tpf * wb;
    let logits = tok * t.vocab as f64 / tpf * 4.0;
    b.op(
        "lm head",
        true,
        pa,
        head_f,
        head_w,
        logits + x,
        1.0,
        mbs,
        Phase::Forward,
    );
    b.op(
        "lm head (backward)",
        true,
        pa,
        head_f * bwd,
        head_w * 2.0,
        logits * 2.0 + x,
        1.0,
        mbs,
        Phase::Backward,
    );

    // --- communication per micro-batch ---
    let rec_extra = if m.recompute == Recompute::Full {
        1.0
    } else {
        0.0
    };
    if tp > 1 {
        let tp_bytes = tok * h * ab;
        // Megatron tensor parallelism, per layer: two all-reduces forward (after the attention
        // projection and after the FFN), two more when the forward is recomputed, and two backward
        // at the inputs of the column-parallel GEMMs (QKV, FFN up). Megatron-LM issues the backward
        // ones asynchronously and overlaps them with the weight-gradient GEMMs
        // (`LinearWithGradAccumulationAndAsyncCommunication`), so they hide behind the backward
        // compute. Sequence parallelism (Korthikanti et al. 2022, §4.2.2) turns each all-reduce
        // into a reduce-scatter and an all-gather of the same bytes: forward 2 AG + 2 RS (blocking);
        // backward 2 AG (the conjugates of the forward RS, blocking), plus 2 RS of the input
        // gradients and 2 AG re-gathering the layer input for the weight gradients (both
        // overlapped with GEMMs). Reduce-scatter and all-gather cost the same, so the overlapped
        // pair is one entry.
        if sp {
            b.comm(
                "tp all-gather",
                CollKind::AllGather,
                tp_bytes,
                g_tp,
                l * (4.0 + 2.0 * rec_extra),
                mbs,
                Overlap::None,
            );
            b.comm(
                "tp reduce-scatter",
                CollKind::ReduceScatter,
                tp_bytes,
                g_tp,
                l * (2.0 + 2.0 * rec_extra),
                mbs,
                Overlap::None,
            );
            if lora.is_some() {
                // Frozen weights have no weight-gradient GEMMs: the re-gather is not needed and
                // the reduce-scatter of the input gradients has nothing to hide behind.
                b.comm(
                    "backward tp reduce-scatter (frozen weights, exposed)",
                    CollKind::ReduceScatter,
                    tp_bytes,
                    g_tp,
                    l * 2.0,
                    mbs,
                    Overlap::None,
                );
            } else {
                b.comm(
                    "tp backward reduce-scatter + re-gather (overlapped)",
                    CollKind::AllGather,
                    tp_bytes,
                    g_tp,
                    l * 4.0,
                    mbs,
                    Overlap::Backward,
                );
            }
        } else {
            b.comm(
                "tp all-reduce",
                CollKind::AllReduce,
                tp_bytes,
                g_tp,
                l * (2.0 + 2.0 * rec_extra),
                mbs,
                Overlap::None,
            );
            b.comm(
                if lora.is_some() {
                    "backward tp all-reduce (frozen weights, exposed)"
                } else {
                    "tp backward all-reduce (overlapped)"
                },
                CollKind::AllReduce,
                tp_bytes,
                g_tp,
                l * 2.0,
                mbs,
                if lora.is_some() {
                    Overlap::None
                } else {
                    Overlap::Backward
                },
            );
        }
    }
    if cp > 1 {
        let kv_bytes = 2.0 * mb * s * kvd / tpf * ab;
        b.comm(
            "cp kv all-gather",
            CollKind::AllGather,
            kv_bytes,
            g_cp,
            l * (1.0 + rec_extra),
            mbs,
            Overlap::Compute,
        );
        b.comm(
            "cp kv-grad reduce-scatter",
            CollKind::ReduceScatter,
            kv_bytes,
            g_cp,
            l,
            mbs,
            Overlap::Compute,
        );
    }
    if let Some(e) = experts {
        if m.ep > 1 {
            let a2a = tok * h * e.top_k as f64 * ab / act_shard;
            b.comm(
                "ep all-to-all",
                CollKind::AllToAll,
                a2a,
                g_ep,
                l * (4.0 + 2.0 * rec_extra),
                mbs,
                Overlap::None,
            );
        }
    }
    if pp > 1 {
        // Scatter/gather (Narayanan et al. 2021, §4.1): each tensor-parallel rank sends its 1/tp
        // slice of the boundary activation over its own link and the next stage all-gathers it
        // over the scale-up domain; with sequence parallelism the activation is already split.
        let p2p = tok * h * ab / tpf;
        b.comm(
            "pp send/recv",
            CollKind::SendRecv,
            p2p,
            (
                g_pp.0.min(2.0),
                if g_pp.1 > 1.0 { 2.0 } else { 1.0 },
                g_pp.2,
            ),
            2.0 * v as f64,
            mbs,
            Overlap::None,
        );
    }

    // --- parameters and state per device (the stage with the LM head) ---
    let dense_layer = t.attn_params()
        + match experts {
            Some(e) => t.ffn_params(e.ffn) * e.shared as f64 + (t.hidden * e.count) as f64,
            None => t.layer_ffn_params(),
        };
    let expert_layer = experts
        .map(|e| t.ffn_params(e.ffn) * e.count as f64)
        .unwrap_or(0.0);
    // The last stage holds the output head; with one stage it holds the input embedding too.
    let embed = if pp == 1 {
        t.embedding_params()
    } else {
        (t.vocab * t.hidden) as f64
    };
    let params_local = l * (dense_layer / tpf + expert_layer / (tpf * m.ep as f64)) + embed / tpf;
    let trainable_local = match lora {
        Some(lr) => l * (lr.adapted_per_layer * 2 * lr.rank * t.hidden) as f64 / tpf,
        None => params_local,
    };
    let dpn = (dp * cp) as f64;
    let z = m.zero;
    let weights = params_local * wb / if z >= 3 { dpn } else { 1.0 };
    let grads = trainable_local * gb / if z >= 2 { dpn } else { 1.0 };
    let optimizer = trainable_local * tr.optimizer_bytes / if z >= 1 { dpn } else { 1.0 };
    // Activations kept for the backward pass, per layer and micro-batch: the terms of Korthikanti
    // et al. 2022 (§4.1: 34·s·b·h + 5·a·s²·b bytes at 16 bits for a 4h FFN and full attention),
    // written per tensor so that GQA, gated FFNs, 8-bit recipes and LoRA change the right ones.
    //  - replicated across tensor-parallel ranks (split only with sequence parallelism): the two
    //    norm inputs, two 1-byte dropout masks, the inputs of the QKV and FFN-up GEMMs;
    //  - split by tp: Q, K and V for the attention backward, the input of the output projection,
    //    the FFN activation's inputs and the input of the FFN-down GEMM; the score matrix when the
    //    attention is not fused (5·a·s² per sequence);
    //  - GEMM inputs are what the weight gradients need: 8-bit recipes (Transformer Engine) keep
    //    them in the GEMM format, and a frozen GEMM (LoRA's base weights) keeps none, except where
    //    an adapter on it needs its input (the QKV and output projections).
    let e = ab;
    let e_lin = if p >= Precision::Fp8.index() {
        prec.bytes()
    } else {
        ab
    };
    let adapted = lora.map(|lr| lr.adapted_per_layer).unwrap_or(u64::MAX);
    let keep_qkv = if adapted >= 1 { e_lin } else { 0.0 };
    let keep_proj = if adapted >= 2 { e_lin } else { 0.0 };
    let keep_ffn = if lora.is_none() { e_lin } else { 0.0 };
    let replicated = 2.0 * h * e + 2.0 * h + h * keep_qkv + h * keep_ffn;
    let split = (h + 2.0 * kvd) * e
        + h * keep_proj
        + act_in * ffn_inner * e
        + ffn_inner * keep_ffn
        + if tr.flash_attention || m.recompute != Recompute::None {
            0.0
        } else {
            5.0 * t.heads as f64 * s * e / 2.0
        };
    let per_token = match m.recompute {
        // full recomputation keeps the layer input only
        Recompute::Full => h * e / act_shard,
        _ => replicated / act_shard + split / tpf,
    };
    let per_layer = per_token * tok;
    // 1F1B: the first stage holds the activations of min(micro-batches, pp) micro-batches; the
    // interleaved schedule raises that by 1 + (pp − 1) / (pp · v) (Korthikanti et al. 2022,
    // §4.2.3). The factor applies to the interleaved schedule only; plain 1F1B holds exactly pp.
    let interleave_factor = if v > 1 {
        1.0 + (pp as f64 - 1.0) / (pp as f64 * v as f64)
    } else {
        1.0
    };
    let in_flight = micro_batches.min(pp as f64) * interleave_factor;
    let activations = per_layer * l * in_flight + logits;

    // --- once per step: gradient reduction, parameter gather, optimizer ---
    let grad_bytes = trainable_local * gb;
    if dp * cp > 1 {
        let ov = if m.overlap_grad_reduce {
            Overlap::Backward
        } else {
            Overlap::None
        };
        if z == 0 {
            b.grad_comm(
                "dp gradient all-reduce",
                CollKind::AllReduce,
                grad_bytes,
                g_dp,
                stp,
                ov,
            );
        } else {
            b.grad_comm(
                "dp gradient reduce-scatter",
                CollKind::ReduceScatter,
                grad_bytes,
                g_dp,
                stp,
                ov,
            );
            if lora.is_none() {
                if z >= 3 {
                    b.comm(
                        "zero-3 weight all-gather",
                        CollKind::AllGather,
                        params_local * wb,
                        g_dp,
                        2.0,
                        mbs,
                        Overlap::Compute,
                    );
                } else {
                    b.comm(
                        "dp parameter all-gather",
                        CollKind::AllGather,
                        params_local * wb,
                        g_dp,
                        1.0,
                        stp,
                        ov,
                    );
                }
            }
        }
    }
    let shard = if z >= 1 { dpn } else { 1.0 };
    // The update reads and writes the optimizer state, reads the gradient and writes the weight;
    // the LLM recipes also read every gradient once more for the global-norm clipping and write
    // it once to zero it for the next step (Megatron-LM / NeMo: clip_grad 1.0, zero_grad).
    b.op(
        "optimizer update",
        false,
        vecp,
        12.0 * trainable_local / shard,
        trainable_local / shard * (2.0 * tr.optimizer_bytes + 3.0 * gb + wb),
        0.0,
        1.0,
        stp,
        Phase::Update,
    );

    let tokens = (tr.global_batch * tr.seq) as f64;
    let fwd_tok = t.forward_flops_per_token(tr.seq, tr.flash_attention && t.causal);
    let model_flops = tokens * fwd_tok * (1.0 + bwd);
    let steps = tr.target.map(|tg| match tg {
        Target::Tokens(x) => x / tokens,
        Target::Samples(x) => x / tr.global_batch as f64,
        Target::Steps(x) => x,
    });
    let mut program = Program {
        ops: b.ops,
        comms: b.comms,
        micro_batches,
        bubble: (pp as f64 - 1.0) / v as f64,
        footprint: Footprint {
            weights,
            gradients: grads,
            optimizer,
            activations,
            kv_cache: 0.0,
        },
        devices: m.devices() as f64,
        units_per_step: tokens,
        unit: "tokens",
        model_flops_per_step: model_flops,
        mfu_precision: prec.index(),
        steps,
    };
    overlap_communication(&mut program, m.overlap);
    Ok(program)
}

fn transformer_inference(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
) -> Result<Program, Reason> {
    let (tp, pp) = (m.tp, m.pp);
    if t.heads % tp != 0 {
        return Err(Reason::mapping(format!(
            "tp {tp} does not divide {} attention heads",
            t.heads
        )));
    }
    if pp > t.layers {
        return Err(Reason::mapping(format!(
            "pp {pp} exceeds {} layers",
            t.layers
        )));
    }
    if m.cp > 1 || m.ep > 1 {
        return Err(Reason::unsupported(
            "context and expert parallelism are modelled for training only",
        ));
    }
    let n = m.devices();
    let dom = domain_size(sys, n);
    let prec = run_precision(sys, inf.compute);
    let p = prec.index();
    let vecp = vector_precision(sys, p);
    let wb = inf.weights.bytes();
    let kvb = inf.kv_cache.bytes();
    let ab = 2.0;
    let h = t.hidden as f64;
    let kvd = (t.kv_heads * t.head_dim()) as f64;
    let tpf = tp as f64;
    let l = t.layers.div_ceil(pp) as f64;
    let batch = inf.batch as f64;
    // requests in flight per pipeline: the batch split into pp micro-batches keeps stages busy
    let mbatch = (batch / pp as f64).max(1.0).ceil();
    let ctx = inf.prompt as f64 + inf.output as f64 / 2.0;
    let layer_w = (t.attn_params() + t.layer_ffn_params()) / tpf * wb;
    let layer_active_f = 2.0 * (t.attn_params() + t.layer_ffn_active()) / tpf;
    use crate::spec::mapping::Dim;
    let g_tp = place_group(sys, tp, m.stride(Dim::Tp), dom);
    let g_pp = place_group(sys, pp, m.stride(Dim::Pp), dom);
    let mut b = Builder {
        ops: Vec::new(),
        comms: Vec::new(),
    };
    let (mbs, stp) = (Section::MicroBatch, Section::Step);
    // decode: one token for each request of a micro-batch, on one stage
    b.op(
        "decode: layer matmuls",
        true,
        p,
        layer_active_f * mbatch,
        layer_w,
        4.0 * mbatch * h * ab,
        l,
        mbs,
        Phase::Forward,
    );
    let attn_f = 4.0 * mbatch * ctx * h / tpf;
    let kv_read = mbatch * ctx * 2.0 * kvd / tpf * kvb;
    b.op(
        "decode: attention over KV cache",
        true,
        p,
        attn_f,
        0.0,
        kv_read,
        l,
        mbs,
        Phase::Forward,
    );
    b.op(
        "decode: elementwise",
        false,
        vecp,
        10.0 * mbatch * h,
        0.0,
        12.0 * mbatch * h * ab,
        l,
        mbs,
        Phase::Forward,
    );
    b.op(
        "decode: lm head",
        true,
        p,
        2.0 * mbatch * h * t.vocab as f64 / tpf,
        h * t.vocab as f64 / tpf * wb,
        mbatch * t.vocab as f64 / tpf * 4.0,
        1.0,
        mbs,
        Phase::Forward,
    );
    if tp > 1 {
        b.comm(
            "tp all-reduce",
            CollKind::AllReduce,
            mbatch * h * ab,
            g_tp,
            2.0 * l,
            mbs,
            Overlap::None,
        );
    }
    if pp > 1 {
        b.comm(
            "pp send/recv",
            CollKind::SendRecv,
            mbatch * h * ab,
            (
                g_pp.0.min(2.0),
                if g_pp.1 > 1.0 { 2.0 } else { 1.0 },
                g_pp.2,
            ),
            1.0,
            mbs,
            Overlap::None,
        );
    }
    // prefill of the whole batch, amortised over the generated tokens (count = 1 / output)
    let ptok = batch * inf.prompt as f64;
    let amort = 1.0 / inf.output as f64;
    let causal = if inf.flash_attention && t.causal {
        0.5
    } else {
        1.0
    };
    b.op(
        "prefill: layer matmuls",
        true,
        p,
        layer_active_f * ptok,
        layer_w,
        4.0 * ptok * h * ab,
        l * amort,
        stp,
        Phase::Forward,
    );
    b.op(
        "prefill: attention",
        true,
        p,
        4.0 * ptok * inf.prompt as f64 * h / tpf * causal,
        0.0,
        ptok * (2.0 * h + 2.0 * kvd) / tpf * ab,
        l * amort,
        stp,
        Phase::Forward,
    );
    if tp > 1 {
        b.comm(
            "prefill: tp all-reduce",
            CollKind::AllReduce,
            ptok * h * ab,
            g_tp,
            2.0 * l * amort,
            stp,
            Overlap::None,
        );
    }
    let weights = (l * (t.attn_params() + t.layer_ffn_params()) / tpf
        + (t.vocab * t.hidden) as f64 / tpf)
        * wb;
    let kv_cache = batch * (inf.prompt + inf.output) as f64 * 2.0 * kvd / tpf * kvb * l;
    let activations = mbatch.max(batch.min(4.0)) * inf.prompt as f64 * h * ab * 4.0 / tpf;
    let tokens_per_round = batch * m.dp as f64;
    let model_flops =
        tokens_per_round * t.forward_flops_per_token((ctx as u64).max(1), false) / 1.0;
    Ok(Program {
        ops: b.ops,
        comms: b.comms,
        micro_batches: pp as f64,
        bubble: 0.0,
        footprint: Footprint {
            weights,
            gradients: 0.0,
            optimizer: 0.0,
            activations,
            kv_cache,
        },
        devices: n as f64,
        units_per_step: tokens_per_round,
        unit: "tokens",
        model_flops_per_step: model_flops,
        mfu_precision: prec.index(),
        steps: None,
    })
}

fn cnn_training(sys: &System, c: &Cnn, tr: &Training, m: &Mapping) -> Result<Program, Reason> {
    if m.tp > 1 || m.pp > 1 || m.cp > 1 || m.ep > 1 {
        return Err(Reason::unsupported(
            "CNNs are mapped with data parallelism only (tp = pp = cp = ep = 1)",
        ));
    }
    let dp = m.dp;
    if tr.global_batch % dp != 0 {
        return Err(Reason::mapping(format!(
            "global batch {} is not a multiple of dp {dp}",
            tr.global_batch
        )));
    }
    let local = tr.global_batch / dp;
    let mbsz = m.micro_batch.min(local).max(1);
    if local % mbsz != 0 {
        return Err(Reason::mapping(format!(
            "per-device batch {local} is not a multiple of micro-batch {mbsz}"
        )));
    }
    let micro_batches = (local / mbsz) as f64;
    let prec = run_precision(sys, tr.compute);
    let p = prec.index();
    let vecp = vector_precision(sys, p);
    let ab = tr.activations.bytes();
    let wb = tr.weights.bytes().max(prec.bytes());
    let bsz = mbsz as f64;
    let dom = domain_size(sys, dp);
    let g_dp = place_group(sys, dp, 1, dom);
    let mut b = Builder {
        ops: Vec::new(),
        comms: Vec::new(),
    };
    let mbs = Section::MicroBatch;
    let mut params = 0.0;
    let mut act = 0.0;
    let mut fwd = 0.0;
    for layer in &c.layers {
        let f = layer.flops() * bsz;
        let wbytes = layer.params() * wb;
        let io = (layer.in_elems() + layer.out_elems()) * bsz * ab;
        b.op("conv", true, p, f, wbytes, io, 1.0, mbs, Phase::Forward);
        b.op(
            "conv (backward)",
            true,
            p,
            2.0 * f,
            2.0 * wbytes,
            2.0 * io,
            1.0,
            mbs,
            Phase::Backward,
        );
        let el = layer.out_elems() * bsz;
        b.op(
            "batch-norm + relu",
            false,
            vecp,
            8.0 * el,
            0.0,
            4.0 * el * ab,
            1.0,
            mbs,
            Phase::Forward,
        );
        b.op(
            "batch-norm + relu (backward)",
            false,
            vecp,
            12.0 * el,
            0.0,
            6.0 * el * ab,
            1.0,
            mbs,
            Phase::Backward,
        );
        params += layer.params();
        act += (layer.out_elems() * 3.0) * bsz * ab;
        fwd += layer.flops();
    }
    if dp > 1 {
        let ov = if m.overlap_grad_reduce {
            Overlap::Backward
        } else {
            Overlap::None
        };
        b.grad_comm(
            "dp gradient all-reduce",
            CollKind::AllReduce,
            params * tr.gradients.bytes(),
            g_dp,
            Section::Step,
            ov,
        );
    }
    b.op(
        "optimizer update",
        false,
        vecp,
        6.0 * params,
        params * (2.0 * tr.optimizer_bytes + tr.gradients.bytes() + wb),
        0.0,
        1.0,
        Section::Step,
        Phase::Update,
    );
    let samples = tr.global_batch as f64;
    let steps = tr.target.map(|tg| match tg {
        Target::Tokens(x) | Target::Samples(x) => x / samples,
        Target::Steps(x) => x,
    });
    Ok(Program {
        ops: b.ops,
        comms: b.comms,
        micro_batches,
        bubble: 0.0,
        footprint: Footprint {
            weights: params * wb,
            gradients: params * tr.gradients.bytes(),
            optimizer: params * tr.optimizer_bytes,
            activations: act,
            kv_cache: 0.0,
        },
        devices: dp as f64,
        units_per_step: samples,
        unit: "samples",
        model_flops_per_step: 3.0 * fwd * samples,
        mfu_precision: prec.index(),
        steps,
    })
}

fn graph_run(sys: &System, g: &[GraphOp], r: &Run, m: &Mapping) -> Result<Program, Reason> {
    let n = m.devices();
    let dom = domain_size(sys, n);
    let mut b = Builder {
        ops: Vec::new(),
        comms: Vec::new(),
    };
    let mut wbytes = 0.0;
    let mut abytes: f64 = 0.0;
    let mut flops = 0.0;
    let mut mfu_p = Precision::Bf16;
    for op in g {
        match op {
            GraphOp::Compute {
                name,
                matrix,
                flops: f,
                weight_bytes,
                act_bytes,
                precision,
                count,
            } => {
                let pr = run_precision(sys, *precision);
                b.op(
                    name,
                    *matrix,
                    pr.index(),
                    *f,
                    *weight_bytes,
                    *act_bytes,
                    *count,
                    Section::MicroBatch,
                    Phase::Forward,
                );
                wbytes += weight_bytes;
                abytes = abytes.max(*act_bytes);
                flops += f * count;
                if *matrix {
                    mfu_p = *precision;
                }
            }
            GraphOp::Collective {
                kind,
                bytes,
                group,
                count,
            } => {
                if *group > n {
                    return Err(Reason::mapping(format!(
                        "a collective over {group} devices, but the mapping uses {n}"
                    )));
                }
                let k = match kind {
                    CollectiveKind::AllReduce => CollKind::AllReduce,
                    CollectiveKind::AllGather => CollKind::AllGather,
                    CollectiveKind::ReduceScatter => CollKind::ReduceScatter,
                    CollectiveKind::AllToAll => CollKind::AllToAll,
                    CollectiveKind::Broadcast => CollKind::Broadcast,
                    CollectiveKind::SendRecv => CollKind::SendRecv,
                };
                b.comm(
                    "collective",
                    k,
                    *bytes,
                    place_group(sys, *group, 1, dom),
                    *count,
                    Section::MicroBatch,
                    Overlap::None,
                );
            }
        }
    }
    Ok(Program {
        ops: b.ops,
        comms: b.comms,
        micro_batches: 1.0,
        bubble: 0.0,
        footprint: Footprint {
            weights: wbytes,
            activations: abytes,
            ..Footprint::default()
        },
        devices: n as f64,
        units_per_step: r.samples_per_step * m.dp as f64,
        unit: "samples",
        model_flops_per_step: flops * n as f64,
        mfu_precision: mfu_p.index(),
        steps: r.steps,
    })
}
