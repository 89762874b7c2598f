//! Tensor-parallel overlap as Transformer Engine's userbuffers run it
//! (`engine::lower::training::ops::Userbuffers`): the overlapped GEMMs split into chunks along
//! their rows, the pipelined reduce-scatter's kernels keeping 16 SMs from its GEMM, hand-checked
//! on a tiled device; which method a run takes unwritten (NeMo's presets, by GEMM precision); and
//! the search trying both methods where the framework overlaps tensor parallelism.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use approx::assert_relative_eq;
use tessera::engine::program::{Phase, Program};
use tessera::engine::tiling::{Gemm, Tiling};
use tessera::model::mapping::{ExtraOverlap, Mapping};
use tessera::vocab::TpOverlapMethod;

use crate::common;

fn tiled_node() -> String {
    common::tiled_node(40)
}

const TILES: Tiling<'static> = Tiling {
    units: 40.0,
    tiles: &[(128, 128)],
};

/// A small transformer (hidden 256, 4 heads, FFN 1024, vocab 1000) trained at sequence 2048,
/// micro-batch 1, in BF16 or FP8.
fn small(compute: &str) -> String {
    format!(
        r#"Workload(
    version: 1, name: "small", source: "t", sources: {{ "t": "test fixture" }},
    model: Transformer(layers: 4, hidden: 256, heads: 4, ffn: 1024, vocab: 1000),
    task: Training(seq_len: 2048, global_batch: 8, target: Steps(10), flash_attention: true, dropout: false,
        precision: (compute: "{compute}")),
)"#
    )
}

/// Tensor parallelism 2 with sequence parallelism, overlapped (`method`: as written) or not.
fn tp2(overlap: bool, method: Option<TpOverlapMethod>) -> Mapping {
    Mapping {
        tp: 2,
        sp: true,
        micro_batch: 1,
        overlap: ExtraOverlap {
            tensor_parallel: overlap,
            ..ExtraOverlap::default()
        },
        tp_overlap_method: method,
        ..Mapping::single()
    }
}

fn program(compute: &str, m: &Mapping) -> Program {
    let (sys, w) = common::load_texts(&tiled_node(), &small(compute));
    tessera::engine::lower::lower(&sys, &w, m, m.devices()).unwrap_or_else(|r| panic!("{r}"))
}

#[test]
fn the_overlapped_gemms_run_in_chunks_and_the_pipeline_keeps_its_sms() {
    // Per device at tp 2: Q, K and V are 2048 tokens × 384 over 256, the output projection
    // 2048 × 256 over 128 (the context's half).
    let plain = program("bf16", &tp2(false, None));
    let pipeline = program("bf16", &tp2(true, Some(TpOverlapMethod::Pipeline)));
    let ring = program("bf16", &tp2(true, Some(TpOverlapMethod::RingExchange)));

    // Without overlap: 16 × 3 = 48 tiles on 40 units, two waves.
    assert_relative_eq!(
        common::occupancy_of(&plain, "qkv projection", Phase::Forward),
        48.0 / 80.0,
        max_relative = 1e-12
    );
    // QKV's forward all-gathers its input by the ring exchange under either method: two chunks
    // of 1024 rows, 8 × 3 = 24 tiles each, too few for a wave, so split four ways along K into
    // 64-deep slices: 96 blocks in three waves of 40, 0.8. (The chunk fills its waves better
    // than the whole product's 1.2 waves: `engine::tiling` splits K only below one wave, so a
    // chunk can come out ahead of its product.)
    for p in [&pipeline, &ring] {
        assert_relative_eq!(
            common::occupancy_of(p, "qkv projection", Phase::Forward),
            0.8,
            max_relative = 1e-12
        );
        assert_relative_eq!(
            common::occupancy_of(p, "qkv projection", Phase::Forward),
            TILES.occupancy(Gemm::new(1024.0, 384.0, 256.0)),
            max_relative = 1e-12
        );
    }

    // The output projection's forward reduce-scatters its output. Whole: 16 × 2 = 32 tiles, one
    // wave of 40 units at 0.8.
    assert_relative_eq!(
        common::occupancy_of(&plain, "attention output projection", Phase::Forward),
        0.8,
        max_relative = 1e-12
    );
    // Pipelined: 4 chunks of 512 rows (4 × 2 = 8 tiles) on the 40 − 16 = 24 units the
    // reduce-scatter leaves it. A grid of 8 tiles splits K = 128 in two (16 blocks in one wave
    // of 24, each a 64-deep slice): 8 × 128 × 128 × 128 of work against 24 units × 128 × 128 ×
    // 64 = 2/3 of those units, 24/40 of the device: 0.4.
    assert_relative_eq!(
        common::occupancy_of(&pipeline, "attention output projection", Phase::Forward),
        0.4,
        max_relative = 1e-12
    );
    assert_relative_eq!(
        common::occupancy_of(&pipeline, "attention output projection", Phase::Forward),
        Tiling {
            units: 24.0,
            ..TILES
        }
        .occupancy(Gemm::new(512.0, 256.0, 128.0))
            * 24.0
            / 40.0,
        max_relative = 1e-12
    );
    // Ring exchange: 2 chunks of 1024 rows on every unit.
    assert_relative_eq!(
        common::occupancy_of(&ring, "attention output projection", Phase::Forward),
        TILES.occupancy(Gemm::new(1024.0, 256.0, 128.0)),
        max_relative = 1e-12
    );

    // The output projection's input gradient (1024-row chunks of 2048 × 128 over 256) under
    // either method, beside its whole weight gradient (256 × 128 over 2048): equal FLOPs, their
    // harmonic mean.
    let dgrad = TILES.occupancy(Gemm::new(1024.0, 128.0, 256.0));
    let wgrad = TILES.occupancy(Gemm::new(128.0, 256.0, 2048.0));
    for p in [&pipeline, &ring] {
        assert_relative_eq!(
            common::occupancy_of(p, "attention output projection", Phase::Backward),
            2.0 / (1.0 / dgrad + 1.0 / wgrad),
            max_relative = 1e-12
        );
    }
    // QKV's backward keeps its shapes (TE's bulk overlap beside them, costed by
    // `collective_compute_share` as any overlapped collective)
    for p in [&pipeline, &ring] {
        assert_eq!(
            common::occupancy_of(p, "qkv projection", Phase::Backward),
            common::occupancy_of(&plain, "qkv projection", Phase::Backward)
        );
    }
    // and the pipeline's SMs cost more than the ring's chunks here
    let time = |p: &Program| {
        tessera::engine::cpu::eval(p, &{
            let (sys, _) = common::load_texts(&tiled_node(), &small("bf16"));
            tessera::engine::lower::machine(&sys, 2)
        })
        .step_time
    };
    assert!(time(&pipeline) >= time(&ring));
}

#[test]
fn without_sequence_parallelism_or_overlap_nothing_is_split() {
    let plain = program("bf16", &tp2(false, None));
    let no_sp = program(
        "bf16",
        &Mapping {
            sp: false,
            ..tp2(true, Some(TpOverlapMethod::Pipeline))
        },
    );
    let one = program(
        "bf16",
        &Mapping {
            tp: 1,
            sp: false,
            ..tp2(true, Some(TpOverlapMethod::Pipeline))
        },
    );
    let no_sp_plain = program(
        "bf16",
        &Mapping {
            sp: false,
            ..tp2(false, None)
        },
    );
    let single = program("bf16", &Mapping::single());
    for (a, b) in [(&no_sp, &no_sp_plain), (&one, &single)] {
        for (x, y) in a.ops.iter().zip(&b.ops) {
            assert_eq!(x.occupancy, y.occupancy, "{}", x.name);
        }
    }
    // and the plain tp 2 layout differs from its overlapped twin only where userbuffers split
    let ring = program("bf16", &tp2(true, Some(TpOverlapMethod::RingExchange)));
    for (x, y) in plain.ops.iter().zip(&ring.ops) {
        if !["qkv projection", "attention output projection", "ffn"].contains(&&*x.name) {
            assert_eq!(x.occupancy, y.occupancy, "{}", x.name);
        }
    }
}

#[test]
fn an_unwritten_method_follows_nemos_presets_by_gemm_precision() {
    let m = tp2(true, None);
    assert_eq!(
        m.tp_overlap_method_for(1.0),
        Some(TpOverlapMethod::RingExchange)
    );
    assert_eq!(
        m.tp_overlap_method_for(0.5),
        Some(TpOverlapMethod::RingExchange)
    );
    assert_eq!(
        m.tp_overlap_method_for(2.0),
        Some(TpOverlapMethod::Pipeline)
    );
    // written, it holds at any precision
    let written = tp2(true, Some(TpOverlapMethod::Pipeline));
    assert_eq!(
        written.tp_overlap_method_for(1.0),
        Some(TpOverlapMethod::Pipeline)
    );
    // not in effect: no overlap, one rank, or no sequence parallelism
    assert_eq!(tp2(false, None).tp_overlap_method_for(2.0), None);
    assert_eq!(Mapping { sp: false, ..m }.tp_overlap_method_for(2.0), None);
    // the lowering reads the same rule: FP8 unwritten is the ring exchange's program
    let fp8 = program("fp8", &m);
    let fp8_ring = program("fp8", &tp2(true, Some(TpOverlapMethod::RingExchange)));
    let bf16 = program("bf16", &m);
    let bf16_pipe = program("bf16", &tp2(true, Some(TpOverlapMethod::Pipeline)));
    for (a, b) in [(&fp8, &fp8_ring), (&bf16, &bf16_pipe)] {
        for (x, y) in a.ops.iter().zip(&b.ops) {
            assert_eq!(x.occupancy, y.occupancy, "{}", x.name);
        }
    }
}

#[test]
fn the_search_tries_both_methods_where_the_framework_overlaps() {
    // Llama 3.1 405B's workload overlaps tensor parallelism (NeMo): the auto search reports the
    // method it chose and tried both
    let out = common::tessera(&[
        "estimate",
        "--arch",
        "architectures/gb200-cluster.ron",
        "--workload",
        "workloads/llama3.1-405b-pretrain.ron",
        "--mapping",
        "auto",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let method = v["mapping"]["tp_overlap_method"]
        .as_str()
        .unwrap_or("absent");
    assert!(
        ["pipeline", "ring_exchange"].contains(&method),
        "{}",
        v["mapping"]
    );
    // on a fixture: every overlapped tp > 1 candidate comes in both methods, and only those
    let (sys, w) = common::load_texts(&tiled_node(), &small("bf16"));
    let w = tessera::model::workload::Workload {
        mapping: Some(tessera::model::mapping::MappingPlan {
            overlap: ExtraOverlap {
                tensor_parallel: true,
                ..ExtraOverlap::default()
            },
            ..Default::default()
        }),
        ..w
    };
    let c = tessera::engine::search::candidates(&sys, &w, 8);
    let with = |x: Option<TpOverlapMethod>| {
        c.iter()
            .filter(|m| m.tp > 1 && m.tp_overlap_method == x)
            .count()
    };
    assert!(with(Some(TpOverlapMethod::Pipeline)) > 0);
    assert_eq!(
        with(Some(TpOverlapMethod::Pipeline)),
        with(Some(TpOverlapMethod::RingExchange))
    );
    assert_eq!(with(None), 0);
    assert!(c
        .iter()
        .filter(|m| m.tp == 1)
        .all(|m| m.tp_overlap_method.is_none()));
}

#[test]
fn the_method_is_an_override_and_a_bad_one_is_told_with_a_hint() {
    // GPT-3 175B FP8 on Eos, with `--set`s after the files
    let gpt3 = |extra: &[&str]| {
        let mut a = vec![
            "estimate",
            "--arch",
            "architectures/eos-h100.ron",
            "--workload",
            "workloads/gpt3-175b-mlperf.ron",
        ];
        a.extend(extra);
        common::tessera(&a)
    };
    let json = |set: &[&str]| {
        let out = gpt3(&[&["--format", "json"], set].concat());
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    // it takes the ring exchange unwritten (NeMo's FP8 presets); the pipeline's 16 SMs make it
    // no faster
    let unwritten = json(&[]);
    let ring = json(&["--set", "mapping.tp_overlap_method=RingExchange"]);
    let pipeline = json(&["--set", "mapping.tp_overlap_method=pipeline"]);
    assert_eq!(unwritten["mapping"]["tp_overlap_method"], "ring_exchange");
    assert_eq!(pipeline["mapping"]["tp_overlap_method"], "pipeline");
    assert_eq!(unwritten["step_time_s"], ring["step_time_s"]);
    assert!(
        pipeline["step_time_s"].as_f64().unwrap() > ring["step_time_s"].as_f64().unwrap(),
        "{} {}",
        pipeline["step_time_s"],
        ring["step_time_s"]
    );
    // the table names the method in the mapping's line
    let out = gpt3(&["--set", "mapping.tp_overlap_method=Pipeline"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("sequence parallel, tp overlap: pipeline"),
        "{table}"
    );
    let out = gpt3(&["--set", "mapping.tp_overlap_method=bulk"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a tensor-parallel overlap method")
            && err.contains("choose Pipeline or RingExchange"),
        "{err}"
    );
}
