//! Model shapes beyond the uniform transformer: `head_dim` set apart from `hidden / heads` (Qwen3,
//! GPT-OSS: the attention projections are `hidden × heads·head_dim`, the attention core is
//! `heads·head_dim` wide) and dense/MoE layer mixes (DeepSeek-V3's first dense layers, Llama 4's
//! interleave). Writing a default changes nothing; the rest are hand counts and properties.

use approx::assert_relative_eq;
use proptest::prelude::*;
use tessera::engine::cpu::eval;
use tessera::engine::lower::{lower, machine};
use tessera::model::mapping::Mapping;
use tessera::model::system::{MemFs, System};
use tessera::model::workload::{load_workload, Model, Transformer, Workload};

use crate::common;

use crate::common::NODE_8 as SYSTEM;

fn workload(head_dim: Option<u64>, experts: bool) -> String {
    workload_mix(head_dim, experts.then_some(""))
}

/// `mix`: `None` dense; `Some(extra)` 8 experts of 768 (top-2) with `extra` fields.
fn workload_mix(head_dim: Option<u64>, mix: Option<&str>) -> String {
    let hd = head_dim
        .map(|d| format!("head_dim: {d},"))
        .unwrap_or_default();
    let ex = match mix {
        Some(extra) => format!("experts: (count: 8, top_k: 2, ffn: 768, {extra}),"),
        None => String::new(),
    };
    format!(
        r#"Workload(
    version: 1, name: "test", source: "t", sources: {{ "t": "test fixture" }},
    model: Transformer(layers: 8, hidden: 2048, heads: 32, kv_heads: 4, {hd} ffn: 6144, gated_ffn: true, vocab: 32000, {ex}),
    task: Training(seq_len: 4096, global_batch: 16, target: Steps(10), flash_attention: true, dropout: false),
)"#
    )
}

fn load(w: &str) -> (System, Workload) {
    common::load_texts(SYSTEM, w)
}

fn transformer(w: &Workload) -> &Transformer {
    let Model::Transformer(t) = &w.model else {
        panic!("a transformer")
    };
    t
}

fn step(w: &str, m: &Mapping) -> (f64, f64) {
    let (sys, w) = load(w);
    let p = lower(&sys, &w, m, 8).unwrap();
    let e = eval(&p, &machine(&sys, 8));
    assert!(e.feasible);
    (e.step_time, p.model_flops_per_step)
}

fn dp8() -> Mapping {
    Mapping {
        dp: 8,
        micro_batch: 1,
        ..Mapping::single()
    }
}

#[test]
fn writing_the_default_head_dim_changes_nothing() {
    let m = dp8();
    for experts in [false, true] {
        let a = step(&workload(None, experts), &m);
        let b = step(&workload(Some(2048 / 32), experts), &m);
        assert_eq!(a, b, "experts {experts}");
    }
}

#[test]
fn projections_are_hidden_by_heads_times_head_dim() {
    // Qwen3-30B-A3B's attention: hidden 2048, 32 query heads and 4 KV heads of 128. Q and O are
    // 2048 × 4096 each, K and V 2048 × 512 each: 2·2048·4096 + 2·2048·512 = 18,874,368.
    let (_, w) = load(&workload(Some(128), false));
    let t = transformer(&w);
    assert_eq!(t.q_dim(), 4096);
    assert_relative_eq!(t.attn_params(), 18_874_368.0);
    // With the default (64) the same model has Q and O square: 2·2048² + 2·2048·256.
    let (_, w) = load(&workload(None, false));
    assert_relative_eq!(transformer(&w).attn_params(), 9_437_184.0);
}

#[test]
fn a_head_dim_that_is_not_hidden_over_heads_is_accepted_only_when_written() {
    // hidden 2100 over 32 heads is not whole: an error without head_dim, fine with it.
    let bad = workload(None, false).replace("hidden: 2048", "hidden: 2100");
    let mut fs = MemFs::default();
    fs.0.insert("w.ron".into(), bad.as_bytes().to_vec());
    let l = load_workload("w.ron", &fs);
    assert!(
        l.diagnostics
            .iter()
            .any(|d| d.message.contains("not divisible")),
        "{:?}",
        l.diagnostics
    );
    let good = bad.replace("kv_heads: 4,", "kv_heads: 4, head_dim: 64,");
    let (_, w) = load(&good);
    assert_eq!(transformer(&w).q_dim(), 2048);
    // GPT-OSS: hidden 2880 = 64 × 45, but its heads are 64 wide (q_dim 4096, not 2880).
    let oss =
        workload(Some(64), false).replace("hidden: 2048, heads: 32", "hidden: 2880, heads: 64");
    let (_, w) = load(&oss);
    assert_eq!(transformer(&w).q_dim(), 4096);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Wider heads are more work: never fewer model FLOPs, never a shorter step (dense or MoE,
    /// any of the layouts the fixture allows).
    #[test]
    fn wider_heads_are_never_faster(
        a in prop::sample::select(vec![32u64, 64, 96, 128, 192, 256]),
        b in prop::sample::select(vec![32u64, 64, 96, 128, 192, 256]),
        tp in prop::sample::select(vec![1u64, 2, 4]),
        experts in any::<bool>(),
    ) {
        let (lo, hi) = (a.min(b), a.max(b));
        let m = Mapping { dp: 8 / tp, tp, sp: tp > 1, micro_batch: 1, ep: if experts { 8 / tp } else { 1 }, ..Mapping::single() };
        let (t_lo, f_lo) = step(&workload(Some(lo), experts), &m);
        let (t_hi, f_hi) = step(&workload(Some(hi), experts), &m);
        prop_assert!(f_hi >= f_lo, "model FLOPs {f_hi} < {f_lo}");
        prop_assert!(t_hi >= t_lo * (1.0 - 1e-12), "step {t_hi} < {t_lo}");
        if hi > lo {
            prop_assert!(f_hi > f_lo);
        }
    }
}

#[test]
fn layers_with_experts_in_a_mix() {
    // 8 layers; the first 2 dense: 6 with experts; then every 2nd: 3; every 3rd: 2.
    for (extra, moe) in [
        ("", 8),
        ("dense_layers: 2", 6),
        ("dense_layers: 2, every: 2", 3),
        ("dense_layers: 2, every: 3", 2),
    ] {
        let (_, w) = load(&workload_mix(None, Some(extra)));
        assert_eq!(transformer(&w).moe_layers(), moe, "{extra}");
    }
    // The dense model has none.
    let (_, w) = load(&workload(None, false));
    assert_eq!(transformer(&w).moe_layers(), 0);
}

#[test]
fn a_mix_counts_each_layer_as_what_it_is() {
    // hidden 2048, gated FFNs (3 matrices). Dense FFN 6144: 3·2048·6144 = 37,748,736. One MoE FFN:
    // 8 experts of 3·2048·768 = 4,718,592 each plus the router 2048·8: 37,765,120. With 2 dense
    // and 6 MoE layers the FFNs hold 2·37,748,736 + 6·37,765,120 = 302,088,192 parameters; a token
    // goes through 2·37,748,736 + 6·2·4,718,592 = 132,120,576 of them.
    let (_, w) = load(&workload_mix(None, Some("dense_layers: 2")));
    let t = transformer(&w);
    assert_relative_eq!(
        t.layers as f64 * t.layer_ffn_params(),
        302_088_192.0,
        max_relative = 1e-12
    );
    assert_relative_eq!(
        t.layers as f64 * t.layer_ffn_active(),
        132_120_576.0,
        max_relative = 1e-12
    );
}

#[test]
fn too_many_dense_layers_is_an_error() {
    let mut fs = MemFs::default();
    fs.0.insert(
        "w.ron".into(),
        workload_mix(None, Some("dense_layers: 8")).into_bytes(),
    );
    let l = load_workload("w.ron", &fs);
    assert!(
        l.diagnostics
            .iter()
            .any(|d| d.message.contains("dense layers leave none")),
        "{:?}",
        l.diagnostics
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// A mix's model FLOPs lie between the all-dense and the all-MoE model's, in proportion to
    /// its layers with experts (on one stage: data parallelism only).
    #[test]
    fn a_mix_interpolates_its_layers(dense in 0u64..8, every in 1u64..4) {
        let m = dp8();
        let extra = format!("dense_layers: {dense}, every: {every}");
        let (_, w) = load(&workload_mix(None, Some(&extra)));
        let f = transformer(&w).moe_fraction();
        let (_, mix) = step(&workload_mix(None, Some(&extra)), &m);
        let (_, moe) = step(&workload_mix(None, Some("")), &m);
        let (_, den) = step(&workload(None, false), &m);
        let want = f * moe + (1.0 - f) * den;
        prop_assert!((mix - want).abs() <= 1e-9 * want, "{mix} vs {want}");
    }
}

/// A DeepSeek-V3-shaped attention on the fixture's small model: hidden 7168, 128 heads whose
/// non-rotary query/key width is 128, latent attention with a 1536-wide query latent, a 512-wide
/// key/value latent and a 64-wide rotary key, values 128 wide. `mla: false`: the same heads as
/// plain multi-head attention (keys and values 128 wide per head). Trained, or served
/// (`serving`: 1,024-token prompts, 256 outputs, 16 requests).
fn latent_workload(mla: bool, serving: bool) -> String {
    let attention = if mla {
        "head_dim: 128, mla: (q_rank: 1536, kv_rank: 512, rope_dim: 64, v_head_dim: 128),"
    } else {
        "head_dim: 128,"
    };
    let task = if serving {
        r#"Inference(prompt: 1024, output: 256, batch: 16, weights: "bf16", compute: "bf16", kv_cache: "bf16", flash_attention: true)"#
    } else {
        "Training(seq_len: 4096, global_batch: 16, target: Steps(10), flash_attention: true, dropout: false)"
    };
    format!(
        r#"Workload(
    version: 1, name: "test", source: "t", sources: {{ "t": "test fixture" }},
    model: Transformer(layers: 2, hidden: 7168, heads: 128, {attention} ffn: 2048, gated_ffn: true, vocab: 32000),
    task: {task},
)"#
    )
}

#[test]
fn latent_attention_counts_its_projections() {
    // DeepSeek-V3's attention per layer (hand count): query down 7168·1536 = 11,010,048; query
    // up 1536·128·(128 + 64) = 37,748,736; key/value down with the rotary key 7168·(512 + 64) =
    // 4,128,768; key/value up 512·128·(128 + 128) = 16,777,216; output 128·128·7168 =
    // 117,440,512: 187,105,280 in all.
    let (_, w) = load(&latent_workload(true, false));
    let t = transformer(&w);
    assert_eq!(t.q_dim(), 128 * 192);
    assert_eq!(t.v_dim(), 128 * 128);
    assert_eq!(
        t.qkv_params(),
        (37_748_736.0 + 16_777_216.0, 11_010_048.0 + 4_128_768.0)
    );
    assert_relative_eq!(t.attn_params(), 187_105_280.0);
    // The cache keeps the latent and the rotary key per token and layer: 576 elements, where the
    // same heads as plain attention keep 2·128·128.
    assert_relative_eq!(t.kv_cache_dim(), 576.0);
    let (_, plain) = load(&latent_workload(false, false));
    assert_relative_eq!(transformer(&plain).kv_cache_dim(), 32_768.0);
    // Model FLOPs per token: the projections twice, and the attention core over 4,096 keys,
    // scores 192 and context 128 wide per head, half of it skipped when causal:
    // 2·4096·(24576 + 16384)·0.5 per layer.
    let core = 2.0 * 4096.0 * (24_576.0 + 16_384.0) * 0.5;
    assert_relative_eq!(
        t.forward_flops_per_token(4096, true),
        2.0 * t.active_params() + 2.0 * core,
        max_relative = 1e-12
    );
}

#[test]
fn latent_attention_splits_only_its_up_projections() {
    // tok = 4,096 tokens a micro-batch. The QKV operator runs the up projections' share of the
    // rank's heads and the whole down projections; the attention core the rank's heads.
    let (split, shared) = (54_525_952.0, 15_138_816.0);
    for tp in [1u64, 2, 4] {
        let (sys, w) = load(&latent_workload(true, false));
        let m = Mapping {
            dp: 8 / tp,
            tp,
            micro_batch: 1,
            ..Mapping::single()
        };
        let p = lower(&sys, &w, &m, 8).unwrap();
        let op = |name: &str| {
            p.ops
                .iter()
                .find(|o| o.name == name && o.phase == tessera::engine::program::Phase::Forward)
                .unwrap_or_else(|| panic!("no forward `{name}`"))
                .clone()
        };
        let tok = 4096.0;
        let tpf = tp as f64;
        let qkv = op("qkv projection");
        assert_relative_eq!(
            qkv.flops,
            2.0 * tok * (split / tpf + shared),
            max_relative = 1e-12
        );
        assert_relative_eq!(
            qkv.weight_bytes,
            (split / tpf + shared) * 2.0,
            max_relative = 1e-12
        );
        let core = op("attention scores + context");
        assert_relative_eq!(
            core.flops,
            2.0 * tok * 4096.0 * (24_576.0 + 16_384.0) / tpf * 0.5,
            max_relative = 1e-12
        );
        let out = op("attention output projection");
        assert_relative_eq!(
            out.flops,
            2.0 * tok * 16_384.0 * 7168.0 / tpf,
            max_relative = 1e-12
        );
        assert!(eval(&p, &machine(&sys, 8)).feasible);
    }
}

#[test]
fn a_latent_cache_is_small_and_not_split_by_tensor_parallelism() {
    let kv = |mla: bool, tp: u64| {
        let (sys, w) = load(&latent_workload(mla, true));
        let m = Mapping {
            tp,
            micro_batch: 16,
            ..Mapping::single()
        };
        lower(&sys, &w, &m, tp).unwrap().footprint.kv_cache
    };
    // One device: the latent cache is 576 / 32,768 of the plain one (same tokens, layers, bytes).
    assert_relative_eq!(
        kv(true, 1) / kv(false, 1),
        576.0 / 32_768.0,
        max_relative = 1e-12
    );
    // Tensor parallelism splits plain heads' keys and values, but every rank keeps the whole
    // latent, which all its heads read.
    assert_relative_eq!(kv(false, 4), kv(false, 1) / 4.0, max_relative = 1e-12);
    assert_relative_eq!(kv(true, 4), kv(true, 1), max_relative = 1e-12);
}

#[test]
fn latent_decode_reads_the_latent_once_per_request() {
    // Decode attention in the absorbed form: per cached position and head, scores over the latent
    // and the rotary key (576) and the context in the latent (512); the bytes it reads are the
    // cache's (576 per position and layer), not every head's keys and values.
    let (sys, w) = load(&latent_workload(true, true));
    let m = Mapping {
        micro_batch: 16,
        ..Mapping::single()
    };
    let p = lower(&sys, &w, &m, 1).unwrap();
    let attn = p
        .ops
        .iter()
        .find(|o| o.name == "decode: attention over KV cache")
        .expect("a decode attention operator");
    let ctx = 1024.0 + 256.0 / 2.0;
    assert_relative_eq!(
        attn.flops,
        2.0 * 16.0 * ctx * 128.0 * (576.0 + 512.0),
        max_relative = 1e-12
    );
    assert_relative_eq!(
        attn.act_bytes,
        16.0 * ctx * 576.0 * 2.0,
        max_relative = 1e-12
    );
}

#[test]
fn a_wafer_shifts_the_projections_as_wide_as_they_are() {
    // Training on a mesh of cores (MeshGEMM shifts, `lower::training::mesh`): each GEMM's busiest
    // link carries max(activations, weights) / side per core, side = the square region's
    // (√(755·1170) = 939.9, no wider than 755: 755 on a WSE-3's program rectangle). Qwen3-style
    // attention, hidden 2048 with 32 heads of 128 (4 KV heads), bf16, 4,096 tokens a micro-batch:
    //   QKV    max(4096·2048, 2048·(4096 + 2·512)) · 2 B = 20,971,520 B
    //   output max(4096·4096, 4096·2048) · 2 B       = 33,554,432 B (the context is 4,096 wide)
    //   up     max(4096·2048, 2·2048·6144) · 2 B     = 50,331,648 B
    //   down   max(4096·6144, 2048·6144) · 2 B       = 50,331,648 B
    let sys =
        tessera::model::system::load_system("architectures/cerebras-cs3.ron", &common::CrateFs)
            .value
            .expect("the shipped CS-3 loads");
    let mut fs = MemFs::default();
    fs.0.insert("w.ron".into(), workload(Some(128), false).into_bytes());
    let w = load_workload("w.ron", &fs).value.unwrap();
    let m = Mapping {
        micro_batch: 1,
        ..Mapping::single()
    };
    let p = lower(&sys, &w, &m, 1).unwrap();
    let shifts = p
        .comms
        .iter()
        .find(|c| c.name == "mesh: matmul shifts (MeshGEMM)")
        .expect("mesh shifts");
    let per_core = (20_971_520.0 + 33_554_432.0 + 50_331_648.0 + 50_331_648.0) / 755.0;
    assert_relative_eq!(shifts.bytes, per_core, max_relative = 1e-12);
}
