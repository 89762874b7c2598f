//! What of a transformer layer one serving device holds and what a pass reads where expert
//! parallelism shares out the routed experts: pure functions of the model, read by the shape
//! (what a stage holds) and by the layer's kernels (what a pass reads).

use crate::model::workload::Transformer;

/// Parameters of one layer a forward pass over `tokens` tokens reads on one device, where `ep`
/// model instances share their experts (expert parallelism: each holds E / ep of a layer's routed
/// experts and computes the tokens all `ep` instances route to them): all of a dense layer; of a
/// mixture of experts, attention, the router, the shared experts and those of the device's routed
/// experts at least one of the group's ep × `tokens` tokens goes to. With top-k of E experts and
/// routing spread evenly (what the load-balancing loss trains for @assumed), each expert is
/// missed by all n tokens with probability (1 − k/E)^n, so the device reads
/// (E / ep)(1 − (1 − k/E)^(ep × tokens)) of its experts on average: k for one token without
/// expert parallelism, all of its share for a long prompt. With a dense/MoE mix: the mean over
/// the layers (as [`Transformer::layer_ffn_params`]).
pub(super) fn read(t: &Transformer, tokens: f64, ep: u64) -> f64 {
    match &t.experts {
        Some(e) if e.count > 0 => {
            let (n, k, ep) = (
                e.count as f64,
                e.top_k.min(e.count) as f64,
                ep.max(1) as f64,
            );
            let distinct = n / ep * (1.0 - (1.0 - k / n).powf((ep * tokens).max(1.0)));
            t.attn_params()
                + t.layer_mix(
                    (t.hidden * e.count) as f64
                        + t.ffn_params(e.ffn) * (e.shared as f64 + distinct),
                    t.ffn_params(t.ffn),
                )
        }
        _ => t.attn_params() + t.layer_ffn_params(),
    }
}

/// Parameters of one layer one device holds (before tensor parallelism splits them) where `ep`
/// instances share their experts: attention, the router and the shared experts whole, E / ep of
/// the routed experts (the mean over a dense/MoE mix). Without expert parallelism, the layer.
pub(super) fn held(t: &Transformer, ep: u64) -> f64 {
    match &t.experts {
        Some(e) if e.count > 0 => {
            let share = e.count as f64 / ep.max(1) as f64;
            t.attn_params()
                + t.layer_mix(
                    t.ffn_params(e.ffn) * (share + e.shared as f64) + (t.hidden * e.count) as f64,
                    t.ffn_params(t.ffn),
                )
        }
        _ => t.attn_params() + t.layer_ffn_params(),
    }
}
