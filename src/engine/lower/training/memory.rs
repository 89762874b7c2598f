//! The memory footprint of transformer training per device: parameters and model state by ZeRO
//! stage, and the activations kept for the backward pass under the pipeline schedule.

use super::shape::Shape;
use crate::model::mapping::Recompute;
use crate::model::precision::Precision;
use crate::vocab::LayerPart;

/// Parameters and model state per device of one stage class.
pub(super) struct State {
    /// Parameters held by one device before ZeRO sharding.
    pub params_local: f64,
    /// Parameters it trains (the adapters only under LoRA).
    pub trainable_local: f64,
    /// Of those, the routed experts' (held by one device: expert params / (ep × etp)), and the
    /// routed experts' it trains (none under LoRA). They are replicated over the expert-data-
    /// parallel ranks (`Mapping::edp`), not over dp × cp.
    pub expert_local: f64,
    pub trainable_expert: f64,
    /// Parameters whose update this device runs: what it trains, sharded by ZeRO (1 and up).
    pub updated: f64,
    /// Of those, the ones whose optimizer state lives in host memory and whose update the host
    /// runs (`Mapping::offload_optimizer` × `updated`).
    pub host_updated: f64,
    /// Bytes of weights, gradients and optimizer state it holds.
    pub weights: f64,
    pub gradients: f64,
    pub optimizer: f64,
    /// Bytes the offloaded optimizer state takes in host memory.
    pub host_optimizer: f64,
    /// With the weights offloaded (`Mapping::offload_weights`): one layer's weights on this device
    /// (the bytes copied in before each of its passes), and all the stage's layers' weights, which
    /// host memory holds. 0 without.
    pub layer_weights: f64,
    pub host_weights: f64,
}

/// Bytes per parameter of the fp32 master weights. Megatron-Core's `HybridDeviceOptimizer` keeps
/// them on the device and moves the rest of the optimizer state (Adam's two moments) to host
/// memory: at fraction 1 it frees 15.3 GB per device of Qwen3-30B-A3B at TP 2, PP 2, EP 4 on 16
/// H100, 8 bytes for each of the 1.91 billion parameters a device updates there
/// (NVIDIA-NeMo/Megatron-Bridge `skills/nemo-mbridge-perf-cpu-offloading/card.yaml`, measured;
/// `tests/it/offload_state.rs` checks the count). The host holds its own fp32 copy of the master weights
/// and of their gradients for the update.
pub(super) const MASTER_BYTES: f64 = 4.0;

pub(super) fn state(d: &Shape) -> State {
    let Shape {
        t,
        tr,
        m,
        l,
        tpf,
        wb,
        gb,
        shardn,
        eshardn,
        etpf,
        ..
    } = *d;
    let experts = t.experts.as_ref();
    // Per layer, the mean over a dense/MoE mix (`Transformer::layer_mix`): the shared experts
    // and the router (or a dense FFN) are replicated over ep, the routed experts sharded.
    let dense_layer = t.attn_params()
        + match experts {
            Some(e) => t.layer_mix(
                t.ffn_params(e.ffn) * e.shared as f64 + (t.hidden * e.count) as f64,
                t.ffn_params(t.ffn),
            ),
            None => t.layer_ffn_params(),
        };
    let expert_layer = experts
        .map(|e| t.layer_mix(t.ffn_params(e.ffn) * e.count as f64, 0.0))
        .unwrap_or(0.0);
    // The last stage holds the output head, the first the input embedding (vocab × hidden
    // each); one stage holds both, as one table where they are tied.
    let table = (t.vocab * t.hidden) as f64;
    let embed = match (d.embedding, d.head) {
        (true, true) => t.embedding_params(),
        (e, h) => table * (e as u8 + h as u8) as f64,
    };
    // The routed experts are split by ep × etp (MoE parallel folding: expert tensor parallelism
    // apart from the attention's tp); the rest by tp.
    let expert_local = l * expert_layer / (etpf * m.ep as f64);
    let params_local = l * (dense_layer / tpf) + expert_local + embed / tpf;
    let (trainable_local, trainable_expert) = match tr.lora {
        Some(lr) => (
            l * (lr.adapted_per_layer * 2 * lr.rank * t.hidden) as f64 / tpf,
            0.0,
        ),
        None => (params_local, expert_local),
    };
    let z = m.zero;
    // ZeRO shards each parameter's state over the ranks that hold the same parameter: dp × cp
    // for the dense ones, the expert-data-parallel ranks for the routed experts (Megatron-Core's
    // distributed optimizer keeps the expert parameters in their own buffer, sharded over the
    // expert-data-parallel group); under hybrid sharding over the shard group only.
    // Weights (ZeRO 3) and gradients (ZeRO 2, 3) stay whole through the step under a pipeline
    // schedule (`Mapping::weights_sharded_through_step`, `gradients_sharded_through_step`): only
    // the optimizer state and the master weights are then sharded, as under ZeRO 1.
    let (weights_sharded, gradients_sharded) = (
        m.weights_sharded_through_step(),
        m.gradients_sharded_through_step(),
    );
    let shard = |sharded: bool, dense: f64, expert: f64| {
        if sharded {
            dense / shardn + expert / eshardn
        } else {
            dense + expert
        }
    };
    // ZeRO-3 gathers each layer's parameters before its forward and backward: a device holds the
    // gathered layer besides its shard, and the next layer's gather in flight (prefetch), so two
    // layers' unsharded parameters (DeepSpeed's `stage3_prefetch_bucket_size` / FSDP's
    // `forward_prefetch` keep one ahead; Rajbhandari et al., ZeRO, SC'20, §5.3 — an assumption
    // of two buffers). A stage of one layer has no next layer to prefetch: one buffer (two would
    // make sharding a one-layer stage's weights cost more than holding them whole).
    let gather = if weights_sharded && (shardn > 1.0 || eshardn > 1.0) {
        let per_layer = (dense_layer / tpf * (1.0 - 1.0 / shardn))
            .max(expert_layer / (etpf * m.ep as f64) * (1.0 - 1.0 / eshardn));
        l.min(2.0) * per_layer * wb
    } else {
        0.0
    };
    let (dense_params, dense_trained) = (
        params_local - expert_local,
        trainable_local - trainable_expert,
    );
    let updated = shard(z >= 1, dense_trained, trainable_expert);
    let host_updated = updated * m.offload_optimizer;
    let moments = (tr.optimizer_bytes - MASTER_BYTES).max(0.0);
    // Weight offload (ZeRO 0-2: the weights are whole on the device): the layers' weights go to
    // host memory, the layer computing and the next one's copy in flight stay (double buffer, as
    // Calculon keeps two blocks: an assumption); the embedding and the head stay.
    let (layer_weights, host_weights) = if m.offload_weights {
        let per_layer = (dense_layer / tpf + expert_layer / (etpf * m.ep as f64)) * wb;
        (per_layer, l * per_layer)
    } else {
        (0.0, 0.0)
    };
    let resident_layers = l.min(2.0) * layer_weights;
    State {
        params_local,
        trainable_local,
        expert_local,
        trainable_expert,
        updated,
        host_updated,
        weights: shard(weights_sharded, dense_params, expert_local) * wb + gather - host_weights
            + resident_layers,
        gradients: shard(gradients_sharded, dense_trained, trainable_expert) * gb,
        optimizer: updated * tr.optimizer_bytes - host_updated * moments,
        host_optimizer: host_updated * (moments + 2.0 * MASTER_BYTES),
        layer_weights,
        host_weights,
    }
}

/// The activations of one device at the peak of the pipeline schedule.
pub(super) struct Activations {
    /// Bytes on the device.
    pub resident: f64,
    /// Bytes offloaded to the node's host memory.
    pub offloaded: f64,
    /// Bytes one offloaded layer sends to host memory per micro-batch (and brings back).
    pub offload_per_layer: f64,
    /// The stage's layers offloaded (the mapping's, at most the stage's layers).
    pub offloaded_layers: f64,
}

/// Bytes of activations one device holds at the peak of the pipeline schedule, and what it
/// offloads to host memory.
///
/// Offloading the activations of `n` of a stage's layers (Megatron-Core's
/// `cpu_offloading_num_layers`, Transformer Engine's `get_cpu_offload_context`) copies each of
/// those layers' saved tensors to host memory as the forward pass leaves the layer and brings
/// them back before its backward. Transformer Engine double-buffers the copies (its
/// `AsyncDoubleBufferGroupOffloadHandler`): a layer's tensors stay on the device while they are
/// copied and the next layer produces its own, so two offloaded layers' activations are resident
/// at a time (an assumption from that design: no measurement of the peak is published).
pub(super) fn activations(d: &Shape) -> Activations {
    let Shape {
        t,
        tr,
        m,
        p,
        prec,
        ab,
        h,
        qd,
        kvd,
        tpf,
        seq: s,
        tok,
        l,
        ..
    } = *d;
    let (act_shard, act_in, ffn_inner) = (d.act_shard, d.act_in, d.ffn_inner);
    let lora = tr.lora;
    let (pp, v) = (m.pp, m.interleave);
    // Activations kept for the backward pass, per layer and micro-batch: the terms of Korthikanti
    // et al. 2022 (§4.1: 34·s·b·h + 5·a·s²·b bytes at 16 bits for a 4h FFN and full attention),
    // written per tensor so that GQA, gated FFNs, 8-bit recipes and LoRA change the right ones.
    //  - replicated across tensor-parallel ranks (split only with sequence parallelism): the two
    //    norm inputs, two 1-byte dropout masks (only where the run applies dropout), the inputs of the QKV and FFN-up GEMMs;
    //  - split by tp: Q, K and V for the attention backward, the input of the output projection
    //    (Q and that input are heads × head_dim wide),
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
    let dropout_masks = if tr.dropout { 2.0 * h } else { 0.0 };
    // the score matrix, kept where attention is not fused
    let scores = if tr.flash_attention {
        0.0
    } else {
        5.0 * t.heads as f64 * s * e / 2.0
    };
    // Latent attention also keeps the latents, the up projections' inputs (computed whole on
    // every tensor-parallel rank by the unsplit down projections).
    let replicated = 2.0 * h * e + dropout_masks + (h + t.latent_dim()) * keep_qkv + h * keep_ffn;
    let split =
        (qd + 2.0 * kvd) * e + d.vd * keep_proj + act_in * ffn_inner * e + ffn_inner * keep_ffn;
    // What one layer keeps per token under the policy `r`.
    let kept = |r: Recompute| match r {
        // full recomputation keeps the layer input only
        Recompute::Full => h * e / act_shard,
        // A policy of its own keeps the layer input and what the parts it does not re-run
        // produce: the second norm's input (the residual after the output projection), the
        // GEMMs' normed inputs, masks and the FFN-down input (elementwise work), Q, K, V and the
        // latents (QKV), the context (attention) and the FFN activation's inputs (FFN up).
        // Re-running every part keeps what full recomputation keeps.
        Recompute::Ops(parts) => {
            let keep = |p: LayerPart| if parts.has(p) { 0.0 } else { 1.0 };
            let replicated = h * e
                + keep(LayerPart::OutProj) * h * e
                + keep(LayerPart::Elementwise) * (dropout_masks + h * keep_qkv + h * keep_ffn)
                + keep(LayerPart::Qkv) * t.latent_dim() * keep_qkv;
            let split = keep(LayerPart::Qkv) * (qd + 2.0 * kvd) * e
                + keep(LayerPart::Attention) * d.vd * keep_proj
                + keep(LayerPart::FfnUp) * act_in * ffn_inner * e
                + keep(LayerPart::Elementwise) * ffn_inner * keep_ffn
                + keep(LayerPart::Attention) * scores;
            replicated / act_shard + split / tpf
        }
        // selective recomputation re-runs the attention core and keeps no score matrix
        Recompute::Selective => replicated / act_shard + split / tpf,
        Recompute::None => replicated / act_shard + (split + scores) / tpf,
    };
    // Only the layers that run the policy keep what it keeps; the others keep everything.
    let redone = d.redone_share();
    let per_token = redone * kept(m.recompute) + (1.0 - redone) * kept(Recompute::None);
    let per_layer = per_token * tok;
    // 1F1B: the first stage holds the activations of min(micro-batches, pp) micro-batches; the
    // interleaved schedule raises that by 1 + (pp − 1) / (pp · v) (Korthikanti et al. 2022,
    // §4.2.3). The factor applies to the interleaved schedule only; plain 1F1B holds exactly pp.
    let interleave_factor = if v > 1 {
        1.0 + (pp as f64 - 1.0) / (pp as f64 * v as f64)
    } else {
        1.0
    };
    let in_flight = d.micro_batches.min(pp as f64) * interleave_factor;
    // The stage with the head also holds a micro-batch's logits. Every stage class is charged
    // the first stage's micro-batches in flight (the most), as the one stage was.
    let off = (m.offload_activation_layers as f64).min(l);
    let buffer = per_layer * off.min(2.0);
    Activations {
        resident: per_layer * (l - off) * in_flight + buffer + if d.head { d.logits } else { 0.0 },
        offloaded: per_layer * off * in_flight,
        offload_per_layer: per_layer,
        offloaded_layers: off,
    }
}
