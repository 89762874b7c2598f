//! Transformer inference: one decode round per step (a token for every request of a
//! micro-batch on each stage), with the prefill of the batch amortised over the generated tokens,
//! the KV cache and the tensor- and pipeline-parallel traffic.

use super::{
    domain_size, place_group, run_precision, vector_precision, Builder, Collective, Reason,
};
use crate::engine::program::*;
use crate::model::mapping::Mapping;
use crate::model::system::System;
use crate::model::workload::{Inference, Transformer};

pub(super) fn transformer_inference(
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
    use crate::vocab::Dim;
    let g_tp = place_group(sys, tp, m.stride(Dim::Tp), dom);
    let g_pp = place_group(sys, pp, m.stride(Dim::Pp), dom);
    let mut b = Builder::default();
    let (mbs, stp) = (Section::MicroBatch, Section::Step);
    let phase = Phase::Forward;
    // decode: one token for each request of a micro-batch, on one stage
    b.op(Op {
        name: "decode: layer matmuls".into(),
        matrix: true,
        precision: p,
        flops: layer_active_f * mbatch,
        weight_bytes: layer_w,
        act_bytes: 4.0 * mbatch * h * ab,
        count: l,
        section: mbs,
        phase,
    });
    let attn_f = 4.0 * mbatch * ctx * h / tpf;
    let kv_read = mbatch * ctx * 2.0 * kvd / tpf * kvb;
    b.op(Op {
        name: "decode: attention over KV cache".into(),
        matrix: true,
        precision: p,
        flops: attn_f,
        weight_bytes: 0.0,
        act_bytes: kv_read,
        count: l,
        section: mbs,
        phase,
    });
    b.op(Op {
        name: "decode: elementwise".into(),
        matrix: false,
        precision: vecp,
        flops: 10.0 * mbatch * h,
        weight_bytes: 0.0,
        act_bytes: 12.0 * mbatch * h * ab,
        count: l,
        section: mbs,
        phase,
    });
    b.op(Op {
        name: "decode: lm head".into(),
        matrix: true,
        precision: p,
        flops: 2.0 * mbatch * h * t.vocab as f64 / tpf,
        weight_bytes: h * t.vocab as f64 / tpf * wb,
        act_bytes: mbatch * t.vocab as f64 / tpf * 4.0,
        count: 1.0,
        section: mbs,
        phase,
    });
    if tp > 1 {
        b.comm(Collective {
            name: "tp all-reduce".into(),
            role: Role::TensorParallel,
            kind: CollKind::AllReduce,
            bytes: mbatch * h * ab,
            group: g_tp,
            count: 2.0 * l,
            section: mbs,
            overlap: Overlap::None,
        });
    }
    if pp > 1 {
        b.comm(Collective {
            name: "pp send/recv".into(),
            role: Role::PipelineSendRecv,
            kind: CollKind::SendRecv,
            bytes: mbatch * h * ab,
            group: (
                g_pp.0.min(2.0),
                if g_pp.1 > 1.0 { 2.0 } else { 1.0 },
                g_pp.2,
            ),
            count: 1.0,
            section: mbs,
            overlap: Overlap::None,
        });
    }
    // prefill of the whole batch, amortised over the generated tokens (count = 1 / output)
    let ptok = batch * inf.prompt as f64;
    let amort = 1.0 / inf.output as f64;
    let causal = if inf.flash_attention && t.causal {
        0.5
    } else {
        1.0
    };
    b.op(Op {
        name: "prefill: layer matmuls".into(),
        matrix: true,
        precision: p,
        flops: layer_active_f * ptok,
        weight_bytes: layer_w,
        act_bytes: 4.0 * ptok * h * ab,
        count: l * amort,
        section: stp,
        phase,
    });
    b.op(Op {
        name: "prefill: attention".into(),
        matrix: true,
        precision: p,
        flops: 4.0 * ptok * inf.prompt as f64 * h / tpf * causal,
        weight_bytes: 0.0,
        act_bytes: ptok * (2.0 * h + 2.0 * kvd) / tpf * ab,
        count: l * amort,
        section: stp,
        phase,
    });
    if tp > 1 {
        b.comm(Collective {
            name: "prefill: tp all-reduce".into(),
            role: Role::TensorParallel,
            kind: CollKind::AllReduce,
            bytes: ptok * h * ab,
            group: g_tp,
            count: 2.0 * l * amort,
            section: stp,
            overlap: Overlap::None,
        });
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
