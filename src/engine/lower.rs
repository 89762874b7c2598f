//! Lowering: a workload under a mapping onto a system → the flat cost program of one device, and
//! the system → its machine vector. All model arithmetic (FLOPs, bytes, collectives, memory
//! footprint, pipeline schedule) lives here, once.

use super::program::*;
use crate::model::mapping::{Mapping, Recompute};
use crate::model::precision::Precision;
use crate::model::system::System;
use crate::model::workload::*;
use crate::spec::arch::MemoryKind;
use crate::spec::workload::CollectiveKind;

/// The machine vector of `sys` when `devices` of its devices are used.
pub fn machine(sys: &System, devices: u64) -> Machine {
    let d = &sys.device;
    let mut sram_cap = 0.0;
    let mut sram_bw: f64 = 0.0;
    let mut sram_e = 0.0;
    let mut hbm_cap = 0.0;
    let mut hbm_bw = 0.0;
    let mut hbm_e = 0.0;
    for m in &d.memory {
        if m.cache {
            continue;
        }
        if m.kind == MemoryKind::Sram {
            sram_cap += m.capacity;
            sram_bw = sram_bw.max(m.bandwidth);
            sram_e = m.energy_per_byte;
        } else {
            hbm_cap += m.capacity;
            hbm_bw += m.bandwidth;
            hbm_e = m.energy_per_byte;
        }
    }
    let (up_bw, up_lat, up_inr, up_e) = match &sys.scale_up {
        Some(u) => (
            u.bandwidth,
            u.latency,
            u.in_network_reduction,
            u.energy_per_bit * 8.0,
        ),
        None => (0.0, 0.0, false, 0.0),
    };
    let (out_bw, out_lat, out_inr, out_e) = match &sys.scale_out {
        Some(o) => (
            o.bandwidth / o.oversubscription,
            o.latency,
            o.in_network_reduction,
            o.energy_per_bit * 8.0,
        ),
        None => (0.0, 0.0, false, 0.0),
    };
    let (ext_cap, ext_bw, ext_lat) = match &sys.weight_store {
        Some(w) => (w.capacity, w.bandwidth, w.latency),
        None => (0.0, 0.0, 0.0),
    };
    let _ = devices;
    let mut vector_peak = d.vector_peak;
    for p in Precision::ALL {
        vector_peak[p.index()] = d.vector_rate(p);
    }
    Machine {
        matrix_peak: d.matrix_peak,
        vector_peak,
        eff_matmul: d.efficiency.matmul,
        eff_low_precision: d.efficiency.low_precision_matmul,
        eff_vector: d.efficiency.vector,
        eff_memory: d.efficiency.memory,
        eff_network: d.efficiency.network,
        kernel_overhead: d.efficiency.kernel_overhead,
        sram_capacity: sram_cap,
        sram_bandwidth: sram_bw,
        sram_energy_per_byte: sram_e,
        hbm_capacity: hbm_cap,
        hbm_bandwidth: hbm_bw,
        hbm_energy_per_byte: hbm_e,
        ext_capacity: ext_cap,
        ext_bandwidth: ext_bw,
        ext_latency: ext_lat,
        up_bandwidth: up_bw,
        up_latency: up_lat,
        up_in_network_reduction: up_inr,
        up_energy_per_byte: up_e,
        out_bandwidth: out_bw,
        out_latency: out_lat,
        out_in_network_reduction: out_inr,
        out_energy_per_byte: out_e,
        tdp: d.tdp,
        idle_power: d.idle_power,
        energy_per_flop: d.energy_per_flop,
        overhead_power: sys.overhead_power() / sys.devices as f64,
        pue: sys.pue,
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
        g: (f64, f64),
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
        });
    }
}

/// The precision the device actually runs `p` at (its nearest supported format).
fn run_precision(sys: &System, p: Precision) -> Precision {
    sys.device.matmul_rate(p).1
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
pub fn lower(sys: &System, w: &Workload, m: &Mapping, devices: u64) -> Result<Program, String> {
    if devices == 0 || devices > sys.devices {
        return Err(format!(
            "{devices} devices requested, the system has {}",
            sys.devices
        ));
    }
    if m.devices() != devices {
        return Err(format!(
            "the mapping uses {} devices (dp {} × tp {} × pp {} × cp {}), not {devices}",
            m.devices(),
            m.dp,
            m.tp,
            m.pp,
            m.cp
        ));
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
        _ => Err("this combination of model and task is not modelled".into()),
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
) -> Result<Program, String> {
    let (tp, pp, cp, dp, v) = (m.tp, m.pp, m.cp, m.dp, m.interleave);
    if t.heads % tp != 0 {
        return Err(format!(
            "tp {tp} does not divide {} attention heads",
            t.heads
        ));
    }
    if t.kv_heads % tp != 0 && tp % t.kv_heads != 0 {
        return Err(format!(
            "tp {tp} does not fit {} key/value heads",
            t.kv_heads
        ));
    }
    if pp * v > t.layers {
        return Err(format!(
            "pp {pp} × interleave {v} exceeds {} layers",
            t.layers
        ));
    }
    if tr.seq % cp != 0 {
        return Err(format!(
            "cp {cp} does not divide the sequence of {}",
            tr.seq
        ));
    }
    if dp * m.micro_batch > tr.global_batch || tr.global_batch % (dp * m.micro_batch) != 0 {
        return Err(format!(
            "global batch {} is not a multiple of dp {dp} × micro-batch {}",
            tr.global_batch, m.micro_batch
        ));
    }
    let experts = t.experts.as_ref();
    if let Some(e) = experts {
        if m.ep > e.count || e.count % m.ep != 0 {
            return Err(format!("ep {} does not divide {} experts", m.ep, e.count));
        }
        if (dp * cp) % m.ep != 0 {
            return Err(format!("ep {} does not divide dp × cp = {}", m.ep, dp * cp));
        }
    } else if m.ep > 1 {
        return Err("expert parallelism needs a mixture-of-experts model".into());
    }
    let n = m.devices();
    let dom = domain_size(sys, n);
    let prec = run_precision(sys, tr.compute);
    let p = prec.index();
    let vecp = vector_precision(sys, p);
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
    let causal = if tr.flash_attention { 0.5 } else { 1.0 };

    // Group placement, Megatron order: tp innermost, then cp, dp, pp outermost.
    let g_tp = split_group(tp, 1, dom);
    let g_cp = split_group(cp, tp, dom);
    let g_dp = split_group(dp * cp, tp, dom);
    let g_ep = split_group(m.ep, tp, dom);
    let g_pp = split_group(pp, tp * cp * dp, dom);

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
    let scores_bytes = if tr.flash_attention {
        // reads q, k, v, writes o
        (tok * h / tpf + 2.0 * tok * kvd / tpf + tok * h / tpf) * ab
    } else {
        // score matrix written, softmax read+write, read for AV, dropout mask
        5.0 * mb * heads_local * (s / cp as f64) * s * ab
    };
    let elem_bytes = (16.0 * tok * h / act_shard + 3.0 * tok * ffn_inner / tpf) * ab;
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
            p,
            attn_f * kb,
            0.0,
            scores_bytes * kb,
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
            elem_bytes * kb,
            l,
            mbs,
            phase,
        );
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
                p,
                attn_f,
                0.0,
                scores_bytes,
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
                elem_bytes,
                l,
                mbs,
                Phase::Recompute,
            );
        }
        Recompute::Selective if !tr.flash_attention => {
            b.op(
                "recompute: attention scores",
                true,
                p,
                attn_f * 0.5,
                0.0,
                scores_bytes,
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
        p,
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
        p,
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
        if sp {
            b.comm(
                "tp all-gather",
                CollKind::AllGather,
                tp_bytes,
                g_tp,
                l * (2.0 + rec_extra),
                mbs,
                Overlap::None,
            );
            b.comm(
                "tp reduce-scatter",
                CollKind::ReduceScatter,
                tp_bytes,
                g_tp,
                l * (2.0 + rec_extra),
                mbs,
                Overlap::None,
            );
        } else {
            b.comm(
                "tp all-reduce",
                CollKind::AllReduce,
                tp_bytes,
                g_tp,
                l * (4.0 + 2.0 * rec_extra),
                mbs,
                Overlap::None,
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
        let p2p = tok * h * ab / act_shard;
        b.comm(
            "pp send/recv",
            CollKind::SendRecv,
            p2p,
            (g_pp.0.min(2.0), if g_pp.1 > 1.0 { 2.0 } else { 1.0 }),
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
    // Activations (Korthikanti et al. 2022, bytes for 16-bit activations per layer per micro-batch).
    let a = t.heads as f64;
    let attn_scores = if tr.flash_attention || m.recompute != Recompute::None {
        0.0
    } else {
        5.0 * a * s / h
    };
    let per_layer = match m.recompute {
        Recompute::Full => 2.0 * s * mb * h / act_shard,
        _ => {
            let base = if sp { 34.0 / tpf } else { 10.0 + 24.0 / tpf };
            s * mb * h * (base + attn_scores / tpf)
        }
    } * (ab / 2.0)
        / cp as f64;
    let moe_factor = experts
        .map(|e| 1.0 + 0.5 * (e.top_k as f64 - 1.0))
        .unwrap_or(1.0);
    let in_flight =
        micro_batches.min(pp as f64) * (1.0 + (pp as f64 - 1.0) / (pp as f64 * v as f64));
    let activations = per_layer * moe_factor * l * in_flight + logits;

    // --- once per step: gradient reduction, parameter gather, optimizer ---
    let grad_bytes = trainable_local * gb;
    if dp * cp > 1 {
        let ov = if m.overlap_grad_reduce {
            Overlap::Backward
        } else {
            Overlap::None
        };
        if z == 0 {
            b.comm(
                "dp gradient all-reduce",
                CollKind::AllReduce,
                grad_bytes,
                g_dp,
                1.0,
                stp,
                ov,
            );
        } else {
            b.comm(
                "dp gradient reduce-scatter",
                CollKind::ReduceScatter,
                grad_bytes,
                g_dp,
                1.0,
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
    b.op(
        "optimizer update",
        false,
        vecp,
        12.0 * trainable_local / shard,
        trainable_local / shard * (2.0 * tr.optimizer_bytes + gb + wb),
        0.0,
        1.0,
        stp,
        Phase::Update,
    );

    let tokens = (tr.global_batch * tr.seq) as f64;
    let fwd_tok = t.forward_flops_per_token(tr.seq, tr.flash_attention);
    let model_flops = tokens * fwd_tok * (1.0 + bwd);
    let steps = tr.target.map(|tg| match tg {
        Target::Tokens(x) => x / tokens,
        Target::Samples(x) => x / tr.global_batch as f64,
        Target::Steps(x) => x,
    });
    Ok(Program {
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
        mfu_precision: tr.compute.index(),
        steps,
    })
}

fn transformer_inference(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
) -> Result<Program, String> {
    let (tp, pp) = (m.tp, m.pp);
    if t.heads % tp != 0 {
        return Err(format!(
            "tp {tp} does not divide {} attention heads",
            t.heads
        ));
    }
    if pp > t.layers {
        return Err(format!("pp {pp} exceeds {} layers", t.layers));
    }
    if m.cp > 1 || m.ep > 1 {
        return Err("context and expert parallelism are modelled for training only".into());
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
    let g_tp = split_group(tp, 1, dom);
    let g_pp = split_group(pp, tp * m.dp, dom);
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
            (g_pp.0.min(2.0), if g_pp.1 > 1.0 { 2.0 } else { 1.0 }),
            1.0,
            mbs,
            Overlap::None,
        );
    }
    // prefill of the whole batch, amortised over the generated tokens (count = 1 / output)
    let ptok = batch * inf.prompt as f64;
    let amort = 1.0 / inf.output as f64;
    let causal = if inf.flash_attention { 0.5 } else { 1.0 };
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
        mfu_precision: inf.compute.index(),
        steps: None,
    })
}

fn cnn_training(sys: &System, c: &Cnn, tr: &Training, m: &Mapping) -> Result<Program, String> {
    if m.tp > 1 || m.pp > 1 || m.cp > 1 || m.ep > 1 {
        return Err("CNNs are mapped with data parallelism only (tp = pp = cp = ep = 1)".into());
    }
    let dp = m.dp;
    if tr.global_batch % dp != 0 {
        return Err(format!(
            "global batch {} is not a multiple of dp {dp}",
            tr.global_batch
        ));
    }
    let local = tr.global_batch / dp;
    let mbsz = m.micro_batch.min(local).max(1);
    if local % mbsz != 0 {
        return Err(format!(
            "per-device batch {local} is not a multiple of micro-batch {mbsz}"
        ));
    }
    let micro_batches = (local / mbsz) as f64;
    let prec = run_precision(sys, tr.compute);
    let p = prec.index();
    let vecp = vector_precision(sys, p);
    let ab = tr.activations.bytes();
    let wb = tr.weights.bytes().max(prec.bytes());
    let bsz = mbsz as f64;
    let dom = domain_size(sys, dp);
    let g_dp = split_group(dp, 1, dom);
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
        b.comm(
            "dp gradient all-reduce",
            CollKind::AllReduce,
            params * tr.gradients.bytes(),
            g_dp,
            1.0,
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
        mfu_precision: tr.compute.index(),
        steps,
    })
}

fn graph_run(sys: &System, g: &[GraphOp], r: &Run, m: &Mapping) -> Result<Program, String> {
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
                    return Err(format!(
                        "a collective over {group} devices, but the mapping uses {n}"
                    ));
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
                    split_group(*group, 1, dom),
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
