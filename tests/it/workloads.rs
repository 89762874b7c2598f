//! The shipped workload and mapping files, and the workload arithmetic checked by hand.
//!
//! (a) Every file under `workloads/` (and `workloads/mappings/`) loads with no error and no
//!     warning.
//! (b) Parameter counts and FLOPs per image against the published figures, with the arithmetic
//!     written out here so a reader can check it without running anything.
//! (c) Megatron-LM model FLOPs: tessera's per-token forward FLOPs reproduce the closed form of
//!     Korthikanti et al. 2022 (and, with the recompute pass, Narayanan et al. 2021 Eq. 3).
//! (d) The shipped files carry the figures of their sources (batch, mapping, targets).

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common;
use std::path::PathBuf;

use tessera::model::mapping::{MappingPlan, Recompute};
use tessera::model::workload::{
    load_mapping, load_workload, resnet, Model, Target, Task, Workload,
};

use crate::common::root;

/// `.ron` files directly under `dir` (relative to the crate root), sorted.
fn ron_files(dir: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "ron"))
        .map(|p: PathBuf| format!("{dir}/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    out.sort();
    out
}

fn workload(name: &str) -> Workload {
    let l = load_workload(name, &common::CrateFs);
    assert!(
        l.diagnostics.is_empty(),
        "{name}: {:#?}",
        l.diagnostics
            .iter()
            .map(|d| format!("{:?} {:?}: {}", d.severity, d.pos, d.message))
            .collect::<Vec<_>>()
    );
    l.value.unwrap_or_else(|| panic!("{name} did not load"))
}

fn mapping(name: &str) -> MappingPlan {
    let l = load_mapping(name, &common::CrateFs);
    assert!(
        l.diagnostics.is_empty(),
        "{name}: {:#?}",
        l.diagnostics
            .iter()
            .map(|d| format!("{:?} {:?}: {}", d.severity, d.pos, d.message))
            .collect::<Vec<_>>()
    );
    l.value.unwrap_or_else(|| panic!("{name} did not load"))
}

fn transformer(w: &Workload) -> &tessera::model::workload::Transformer {
    match &w.model {
        Model::Transformer(t) => t,
        _ => panic!("{} is not a transformer", w.name),
    }
}

fn training(w: &Workload) -> &tessera::model::workload::Training {
    match &w.task {
        Task::Training(t) => t,
        _ => panic!("{} is not a training task", w.name),
    }
}

/// |a/b − 1| ≤ tol.
fn close(a: f64, b: f64, tol: f64) -> bool {
    (a / b - 1.0).abs() <= tol
}

// ---------------------------------------------------------------------------------------------
// (a) every shipped file loads cleanly

#[test]
fn every_workload_file_loads_without_diagnostics() {
    let files = ron_files("workloads");
    assert!(
        files.len() >= 17,
        "expected the shipped workloads, found {files:?}"
    );
    for f in &files {
        workload(f);
    }
}

#[test]
fn every_mapping_file_loads_without_diagnostics() {
    let files = ron_files("workloads/mappings");
    assert!(
        files.len() >= 4,
        "expected the shipped mappings, found {files:?}"
    );
    for f in &files {
        // the loader rejects any version but 1, so a clean load says it is version 1
        let m = mapping(f);
        assert!(
            m.tp.is_some()
                || m.pp.is_some()
                || m.dp.is_some()
                || m.stages.is_some()
                || m.regions.any(),
            "{f} names no parallel degree and no core region"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// (b) parameter counts and CNN FLOPs

#[test]
fn gpt3_175b_parameters() {
    let w = workload("workloads/gpt3-175b-mlperf.ron");
    let t = transformer(&w);
    // 12·l·h² for the layers (4h² attention + 8h² FFN), one tied 50257 × h embedding:
    //   12 · 96 · 12288² = 173,946,175,488
    //   50,257 · 12,288  =     617,558,016
    //                       174,563,733,504 ≈ 174.6e9
    let by_hand = 12.0 * 96.0 * 12288f64.powi(2) + 50257.0 * 12288.0;
    assert_eq!(by_hand, 174_563_733_504.0);
    assert_eq!(t.params(), by_hand);
    // GPT-3 "175B" (Brown et al. Table 2.1) within 1 %.
    assert!(close(t.params(), 175e9, 0.01), "{}", t.params());
    assert!(close(t.params(), 174.6e9, 0.001), "{}", t.params());
    // Untied it would be 1,235,116,032 for the two embeddings: 175.18e9.
    let untied = 12.0 * 96.0 * 12288f64.powi(2) + 2.0 * 50257.0 * 12288.0;
    assert!(close(untied, 175.18e9, 0.001));
}

#[test]
fn llama31_405b_parameters() {
    let w = workload("workloads/llama3.1-405b-pretrain.ron");
    let t = transformer(&w);
    // attention: q and o 2·h² + k and v 2·h·(8 heads · 128) = 536,870,912 + 33,554,432
    let attn = 2.0 * 16384f64.powi(2) + 2.0 * 16384.0 * 1024.0;
    assert_eq!(attn, 570_425_344.0);
    // SwiGLU FFN: 3 · h · 53248 = 2,617,245,696
    let ffn = 3.0 * 16384.0 * 53248.0;
    assert_eq!(ffn, 2_617_245_696.0);
    // 126 layers + untied input and output embeddings 2 · 128256 · 16384 = 4,202,692,608
    let by_hand = 126.0 * (attn + ffn) + 2.0 * 128256.0 * 16384.0;
    assert_eq!(by_hand, 405_849_243_648.0);
    assert_eq!(t.params(), by_hand);
    assert!(close(t.params(), 405.8e9, 0.01), "{}", t.params());
}

#[test]
fn llama2_70b_parameters() {
    let w = workload("workloads/llama2-70b-lora.ron");
    let t = transformer(&w);
    // attention 2·8192² + 2·8192·1024 = 150,994,944; SwiGLU 3·8192·28672 = 704,643,072
    // 80 layers: 68,451,041,280; embeddings 2·32000·8192 = 524,288,000
    let by_hand = 80.0 * (2.0 * 8192f64.powi(2) + 2.0 * 8192.0 * 1024.0 + 3.0 * 8192.0 * 28672.0)
        + 2.0 * 32000.0 * 8192.0;
    assert_eq!(by_hand, 68_975_329_280.0);
    assert_eq!(t.params(), by_hand);
    assert!(close(t.params(), 69e9, 0.01), "{}", t.params());
    // LoRA trains a negligible share: 80 · 2 adapters · 2 · 16 · 8192 = 41.9 M
    let tr = training(&w);
    let lora = tr.lora.expect("LoRA");
    assert_eq!((lora.rank, lora.adapted_per_layer), (16, 2));
    let adapters = 80.0 * (lora.adapted_per_layer * 2 * lora.rank * 8192) as f64;
    assert_eq!(adapters, 41_943_040.0);
}

#[test]
fn llama31_8b_and_3_70b_parameters() {
    let t8 = workload("workloads/llama3.1-8b-pretrain.ron");
    // 32 · (2·4096² + 2·4096·1024 + 3·4096·14336) + 2·128256·4096 = 8,029,995,008; the Hugging
    // Face count, 8,030,261,248, adds the 65 RMSNorm weight vectors (65 · 4096 = 266,240).
    let by_hand = 32.0 * (2.0 * 4096f64.powi(2) + 2.0 * 4096.0 * 1024.0 + 3.0 * 4096.0 * 14336.0)
        + 2.0 * 128256.0 * 4096.0;
    assert_eq!(by_hand, 8_029_995_008.0);
    assert_eq!(by_hand + 65.0 * 4096.0, 8_030_261_248.0);
    assert_eq!(transformer(&t8).params(), by_hand);
    let s8 = workload("workloads/llama3.1-8b-serving.ron");
    assert_eq!(transformer(&s8).params(), by_hand);
    // Llama 3 70B: 80 · 855,638,016 + 2 · 128256 · 8192 = 70,552,387,584; Hugging Face's
    // 70,553,706,496 adds 161 RMSNorm vectors (161 · 8192 = 1,318,912).
    let s70 = workload("workloads/llama3-70b-serving.ron");
    let by_hand = 80.0 * (2.0 * 8192f64.powi(2) + 2.0 * 8192.0 * 1024.0 + 3.0 * 8192.0 * 28672.0)
        + 2.0 * 128256.0 * 8192.0;
    assert_eq!(by_hand, 70_552_387_584.0);
    assert_eq!(by_hand + 161.0 * 8192.0, 70_553_706_496.0);
    assert_eq!(transformer(&s70).params(), by_hand);
}

#[test]
fn bert_large_parameters() {
    let w = workload("workloads/bert-large-mlperf.ron");
    // 24 · 12 · 1024² + 30522 · 1024 (tied) = 301,989,888 + 31,254,528 = 333.2 M; BERT-large is
    // quoted as 334-340 M with biases, norms, position/segment embeddings and the pooler.
    let by_hand = 24.0 * 12.0 * 1024f64.powi(2) + 30522.0 * 1024.0;
    assert_eq!(transformer(&w).params(), by_hand);
    assert!(close(by_hand, 336e6, 0.02), "{by_hand}");
}

#[test]
fn granite_3b_northpole_is_about_3b() {
    let w = workload("workloads/granite-3b-northpole.ron");
    // 14 · (2·4096² + 2·4096·1024 + 3·4096·14336) + 49152·4096 (tied) = 3,254,779,904
    let by_hand = 14.0 * (2.0 * 4096f64.powi(2) + 2.0 * 4096.0 * 1024.0 + 3.0 * 4096.0 * 14336.0)
        + 49152.0 * 4096.0;
    assert_eq!(transformer(&w).params(), by_hand);
    assert!(close(by_hand, 3e9, 0.10), "{by_hand}");
}

/// (MACs, parameters) of a ResNet as tessera generates it: every convolution and the classifier.
fn resnet_totals(depth: u64, classes: u64) -> (f64, f64) {
    let layers = resnet(depth, 224, classes).expect("depth");
    let macs: f64 = layers.iter().map(|l| l.flops() / 2.0).sum();
    let params: f64 = layers.iter().map(|l| l.params()).sum();
    (macs, params)
}

#[test]
fn resnet50_flops_and_parameters() {
    let (macs, params) = resnet_totals(50, 1000);
    // ResNet-50 (v1.5) is quoted at 4.1 GMAC = 8.2 GFLOP per 224×224 image (±5 %) and 25.6 M
    // parameters (±3 %; the generator leaves out batch-norm scales/shifts and the FC bias, about
    // 54 k). The stem alone: 112² · 7² · 3 · 64 = 118,013,952 MACs.
    assert!(close(macs, 4.1e9, 0.05), "{macs}");
    assert!(close(2.0 * macs, 8.2e9, 0.05), "{macs}");
    assert!(close(params, 25.6e6, 0.03), "{params}");
    let stem = &resnet(50, 224, 1000).unwrap()[0];
    assert_eq!(stem.flops() / 2.0, 118_013_952.0);
    // Conv and FC weights, counted by hand from He et al. Table 1 (v1.5 changes only strides):
    //   stem 9,408; stage 1: 212,992; stage 2: 1,212,416; stage 3: 7,077,888;
    //   stage 4: 14,942,208; FC 2,048,000 → 25,502,912
    let stage = |cin: f64, w: f64, blocks: f64| {
        // first block: 1×1 cin→w, 3×3 w→w, 1×1 w→4w, projection cin→4w; then (blocks−1) × (1×1
        // 4w→w, 3×3 w→w, 1×1 w→4w)
        (cin * w + 9.0 * w * w + w * 4.0 * w + cin * 4.0 * w)
            + (blocks - 1.0) * (4.0 * w * w + 9.0 * w * w + 4.0 * w * w)
    };
    let by_hand = 7.0 * 7.0 * 3.0 * 64.0
        + stage(64.0, 64.0, 3.0)
        + stage(256.0, 128.0, 4.0)
        + stage(512.0, 256.0, 6.0)
        + stage(1024.0, 512.0, 3.0)
        + 2048.0 * 1000.0;
    assert_eq!(by_hand, 25_502_912.0);
    assert_eq!(params, by_hand);
}

#[test]
fn resnet101_flops_and_parameters() {
    let (macs, params) = resnet_totals(101, 1000);
    // ResNet-101: 7.8 GMAC and 44.5 M parameters (He et al. Table 1: 7.6e9 "FLOPs", i.e. MACs, for
    // v1; v1.5 moves the stride onto the 3×3 convolutions and costs a little more).
    assert!(close(macs, 7.8e9, 0.05), "{macs}");
    assert!(close(params, 44.5e6, 0.03), "{params}");
    // The 22K classifier adds 2048 · (21841 − 1000) = 42,682,368 weights.
    let (_, p22k) = resnet_totals(101, 21841);
    assert_eq!(p22k - params, 2048.0 * (21841.0 - 1000.0));
}

// ---------------------------------------------------------------------------------------------
// (c) Megatron model FLOPs

/// Korthikanti et al. 2022: model FLOPs per iteration (forward + backward, no recompute)
/// F = 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)).
fn korthikanti_flops(b: f64, s: f64, l: f64, h: f64, v: f64) -> f64 {
    72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h))
}

#[test]
fn megatron_model_flops_match_the_closed_form() {
    for (file, b, l, h) in [
        ("workloads/megatron-22b.ron", 4.0, 48.0, 6144.0),
        ("workloads/megatron-175b.ron", 64.0, 96.0, 12288.0),
        ("workloads/megatron-530b.ron", 280.0, 105.0, 20480.0),
        ("workloads/megatron-1t.ron", 512.0, 128.0, 25600.0),
    ] {
        let w = workload(file);
        let t = transformer(&w);
        let tr = training(&w);
        assert_eq!((tr.global_batch as f64, tr.seq), (b, 2048), "{file}");
        let tokens = b * 2048.0;
        let tessera = 3.0 * t.forward_flops_per_token(2048, false) * tokens;
        let paper = korthikanti_flops(b, 2048.0, l, h, 51200.0);
        assert!(
            close(tessera, paper, 0.005),
            "{file}: {tessera:e} vs {paper:e}"
        );
    }
    // 175B in numbers: 1.411e17 FLOP per iteration; over 13.75 s on 64 A100 (312 TFLOP/s) that
    // is the 51.4 % MFU the paper reports.
    let f = korthikanti_flops(64.0, 2048.0, 96.0, 12288.0, 51200.0);
    assert!(close(f, 1.411e17, 0.001), "{f:e}");
    assert!(close(f / (64.0 * 312e12 * 13.75), 0.514, 0.005));
}

#[test]
fn narayanan_eq3_counts_the_recompute_pass() {
    // Narayanan et al. 2021 Eq. 3: F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)): four passes over
    // the layers (forward, recomputed forward, backward = 2) but three over the LM head.
    let w = workload("workloads/megatron-1t-narayanan.ron");
    let t = transformer(&w);
    let (b, s, l, h, v) = (3072.0, 2048.0, 128.0, 25600.0, 51200.0);
    let eq3 = 96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
    let head = 2.0 * h * v; // forward FLOPs per token of the LM head
    let per_token = 4.0 * (t.forward_flops_per_token(2048, false) - head) + 3.0 * head;
    assert!(close(per_token * b * s, eq3, 0.005));
    // 163 TFLOP/s per GPU on 3072 GPUs gives the 102.6 s iteration of megatron-selene.md.
    assert!(
        close(eq3 / (3072.0 * 163e12), 102.63, 0.001),
        "{}",
        eq3 / (3072.0 * 163e12)
    );
}

// ---------------------------------------------------------------------------------------------
// (d) the figures of the sources

#[test]
fn megatron_files_carry_the_papers_tables() {
    // (file, layers, hidden, heads, tp, pp, interleave, micro-batch, global batch)
    for (file, l, h, a, tp, pp, v, mb, gb) in [
        ("megatron-22b", 48, 6144, 64, 8, 1, 1, 4, 4),
        ("megatron-175b", 96, 12288, 96, 8, 8, 3, 1, 64),
        ("megatron-530b", 105, 20480, 128, 8, 35, 3, 1, 280),
        ("megatron-1t", 128, 25600, 160, 8, 64, 1, 1, 512),
    ] {
        let w = workload(&format!("workloads/{file}.ron"));
        let t = transformer(&w);
        assert_eq!(
            (t.layers, t.hidden, t.heads, t.ffn, t.vocab),
            (l, h, a, 4 * h, 51200),
            "{file}"
        );
        let tr = training(&w);
        assert_eq!(tr.global_batch, gb, "{file}");
        assert!(
            !tr.flash_attention,
            "{file}: 2022 runs had no FlashAttention"
        );
        let m = w.mapping.as_ref().expect("mapping");
        assert_eq!(
            (m.dp, m.tp, m.pp, m.interleave, m.micro_batch),
            (Some(1), Some(tp), Some(pp), Some(v), Some(mb)),
            "{file}"
        );
        assert_eq!(
            (m.sp, m.recompute),
            (Some(true), Some(Recompute::Selective)),
            "{file}"
        );
        let full = mapping(&format!("workloads/mappings/{file}-full-recompute.ron"));
        assert_eq!(
            (full.dp, full.tp, full.pp, full.interleave, full.micro_batch),
            (Some(1), Some(tp), Some(pp), Some(v), Some(mb)),
            "{file}"
        );
        assert_eq!(
            (full.sp, full.recompute),
            (Some(false), Some(Recompute::Full)),
            "{file}"
        );
        // the layers divide evenly over the (virtual) pipeline stages
        assert_eq!(l % (pp * v), 0, "{file}");
    }
    let w = workload("workloads/megatron-1t-narayanan.ron");
    let m = w.mapping.as_ref().unwrap();
    assert_eq!((m.dp, m.tp, m.pp), (Some(6), Some(8), Some(64)));
    assert_eq!(m.dp.unwrap() * m.tp.unwrap() * m.pp.unwrap(), 3072);
    assert_eq!(m.recompute, Some(Recompute::Full));
    assert_eq!(training(&w).global_batch, 3072);
}

#[test]
fn mlperf_files_carry_the_published_runs() {
    // GPT-3: 512 H100 (v4.1), GBS 2048 = 128 per DP rank × 512 / (TP 4 · PP 8); 288 steps.
    let w = workload("workloads/gpt3-175b-mlperf.ron");
    let tr = training(&w);
    assert_eq!((tr.seq, tr.global_batch), (2048, 2048));
    let Some(Target::Tokens(tokens)) = tr.target else {
        panic!("gpt3 target")
    };
    assert_eq!(tokens, 1_207_959_552.0);
    assert_eq!(tokens / (2048.0 * 2048.0), 288.0);
    let m = w.mapping.as_ref().unwrap();
    assert_eq!(
        (m.tp, m.pp, m.micro_batch, m.interleave),
        (Some(4), Some(8), Some(2), Some(6))
    );
    assert_eq!(128 * 512 / (4 * 8), 2048);

    // Llama 3.1 405B: 8192 H100 (v5.0), GBS 1536 = 1024 nodes × 24 / 16; 210 steps.
    let w = workload("workloads/llama3.1-405b-pretrain.ron");
    let tr = training(&w);
    assert_eq!((tr.seq, tr.global_batch), (8192, 1536));
    assert!(matches!(tr.target, Some(Target::Samples(s)) if s == 322_560.0));
    let m = w.mapping.as_ref().unwrap();
    assert_eq!(
        (m.tp, m.pp, m.cp, m.interleave, m.micro_batch),
        (Some(8), Some(8), Some(2), Some(8), Some(1))
    );
    assert_eq!(8192 / (8 * 8 * 2) * 24, 1536);

    // Llama 2 70B LoRA: 8 GPUs, GBS 8, 3216 samples (402 steps).
    let w = workload("workloads/llama2-70b-lora.ron");
    let tr = training(&w);
    assert_eq!((tr.seq, tr.global_batch), (8192, 8));
    assert!(matches!(tr.target, Some(Target::Samples(s)) if s == 3216.0));

    // BERT: 8 H100 (v4.0), GBS 768, 2,549,468 samples of 256 tokens (512-token packs of two).
    let w = workload("workloads/bert-large-mlperf.ron");
    let tr = training(&w);
    assert_eq!((tr.seq, tr.global_batch), (256, 768));
    assert!(matches!(tr.target, Some(Target::Samples(s)) if s == 2_549_468.0));
    // BERT is bidirectional: fused attention, but no causal halving of its FLOPs.
    assert!(tr.flash_attention && !transformer(&w).causal);

    // ResNet-50: epochs become samples through `dataset_samples`.
    let w = workload("workloads/resnet50-mlperf.ron");
    let tr = training(&w);
    assert_eq!(tr.global_batch, 3200);
    assert!(matches!(tr.target, Some(Target::Samples(s)) if s == 35.0 * 1_281_167.0));
    let w = workload("workloads/resnet50-imagenet1k.ron");
    assert!(matches!(training(&w).target, Some(Target::Samples(s)) if s == 90.0 * 1_281_167.0));
}

#[test]
fn inference_files_describe_their_claims() {
    let w = workload("workloads/granite-3b-northpole.ron");
    let Task::Inference(i) = &w.task else {
        panic!("inference")
    };
    assert_eq!(i.batch, 28);
    // 28,356 tokens/s over 28 users is about 1 ms per token per user.
    assert!(close(28.0 / 28_356.0, 1e-3, 0.02));
    let w = workload("workloads/llama3.1-8b-serving.ron");
    let Task::Inference(i) = &w.task else {
        panic!("inference")
    };
    assert_eq!(i.batch, 1);
    let w = workload("workloads/graph-gemm-example.ron");
    assert!(matches!(w.model, Model::Graph(ref g) if g.ops.len() == 4 && g.grid.is_none()));
    assert!(matches!(w.task, Task::Run(ref r) if r.steps == Some(100.0)));
}
