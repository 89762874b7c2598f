//! One estimate of Llama 3.1 405B training on 8,192 H100s (lowering + evaluation), and the full
//! `--mapping auto` search for it. Targets: ≤ 10 µs per estimate, ≤ 0.1 s per search. And the
//! per-layer inference pipeline (issue 11): evaluating IBM's 15-stage NorthPole layout, and the
//! search over placements that finds it. And a serving search at a latency target (issue 13:
//! interleaved layouts and prefill pools). And a wafer (issue 10): Llama 3.1 8B decode on a
//! CS-3, each layer on its region of cores with its mesh collectives (target: microseconds per
//! estimate), and WaferLLM's Llama3-8B on a WSE-2 in its stated core regions, whose block inside
//! each region is searched.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use tessera::engine::{cpu, lower, search, MappingChoice, Objective};
use tessera::model::mapping::Mapping;
use tessera::spec::Fs;

struct Disk;
impl Fs for Disk {
    fn read(&self, p: &str) -> Result<Vec<u8>, String> {
        std::fs::read(p).map_err(|e| e.to_string())
    }
}

fn inputs() -> (
    tessera::model::system::System,
    tessera::model::workload::Workload,
) {
    let s = tessera::model::system::load_system("architectures/eos-h100.ron", &Disk);
    let w = tessera::model::workload::load_workload("workloads/llama3.1-405b-pretrain.ron", &Disk);
    (
        s.value.expect("eos-h100 loads"),
        w.value.expect("405B loads"),
    )
}

fn bench(c: &mut Criterion) {
    let (sys, w) = inputs();
    let spec = w.mapping.clone().expect("published mapping");
    let n = 8192;
    let m = Mapping::resolve(&spec, n, 1).expect("mapping resolves");
    c.bench_function("estimate/lower+eval 405B on 8192 H100", |b| {
        b.iter(|| {
            let mach = lower::machine(&sys, n);
            let p = lower::lower(&sys, &w, &m, n).unwrap();
            black_box(cpu::eval(&p, &mach))
        })
    });
    let mach = lower::machine(&sys, n);
    let p = lower::lower(&sys, &w, &m, n).unwrap();
    c.bench_function("estimate/eval only 405B on 8192 H100", |b| {
        b.iter(|| black_box(cpu::eval(black_box(&p), &mach)))
    });
    c.bench_function("estimate/full report 405B on 8192 H100", |b| {
        b.iter(|| {
            black_box(tessera::engine::estimate(
                &sys,
                &w,
                &MappingChoice::Given(spec.clone()),
                Some(n),
            ))
        })
    });
    let mut g = c.benchmark_group("search");
    g.sample_size(10);
    g.bench_function("auto mapping 405B on 8192 H100", |b| {
        b.iter(|| black_box(search::search(&sys, &w, n, Objective::Time).ranked.len()))
    });
    g.finish();

    let np = tessera::model::system::load_system("architectures/northpole-16.ron", &Disk)
        .value
        .expect("northpole-16 loads");
    let gw = tessera::model::workload::load_workload("workloads/granite-3b-northpole.ron", &Disk)
        .value
        .expect("granite-3b loads");
    let plan = tessera::model::mapping::MappingPlan {
        pp: Some(16),
        ..Default::default()
    };
    let m = Mapping::resolve(&plan, 16, 0).expect("pipeline resolves");
    let mach = lower::machine(&np, 16);
    let p = lower::lower(&np, &gw, &m, 16).unwrap();
    c.bench_function("estimate/eval only 3B pipeline on NorthPole-16", |b| {
        b.iter(|| black_box(cpu::eval(black_box(&p), &mach)))
    });
    c.bench_function("search/auto placement 3B on NorthPole-16", |b| {
        b.iter(|| black_box(search::search(&np, &gw, 16, Objective::Time).ranked.len()))
    });

    // a wafer: one region of cores per layer, every layer's mesh collectives (issue 10)
    let cs3 = tessera::model::system::load_system("architectures/cerebras-cs3.ron", &Disk)
        .value
        .expect("cerebras-cs3 loads");
    let l8 = tessera::model::workload::load_workload("workloads/llama3.1-8b-serving.ron", &Disk)
        .value
        .expect("llama3.1-8b-serving loads");
    let single = Mapping::resolve(&tessera::model::mapping::MappingPlan::default(), 1, 0)
        .expect("one wafer resolves");
    c.bench_function("estimate/lower+eval 8B decode on a CS-3", |b| {
        b.iter(|| {
            let mach = lower::machine(&cs3, 1);
            let p = lower::lower(&cs3, &l8, &single, 1).unwrap();
            black_box(cpu::eval(&p, &mach))
        })
    });
    let cs2 = tessera::model::system::load_system("architectures/cerebras-cs2.ron", &Disk)
        .value
        .expect("cerebras-cs2 loads");
    let wl = tessera::model::workload::load_workload(
        "workloads/llama3-8b-waferllm-2048-2048.ron",
        &Disk,
    )
    .value
    .expect("waferllm workload loads");
    let regions = tessera::model::workload::load_mapping(
        "workloads/mappings/waferllm-wse2-llama3-8b-regions.ron",
        &Disk,
    )
    .value
    .expect("waferllm regions load");
    c.bench_function(
        "estimate/full report 8B in WaferLLM's regions on a WSE-2",
        |b| {
            b.iter(|| {
                black_box(tessera::engine::estimate(
                    &cs2,
                    &wl,
                    &MappingChoice::Given(regions.clone()),
                    Some(1),
                ))
            })
        },
    );

    // serving at a latency target: every interleaved layout and every prefill pool (issue 13)
    let dgx = tessera::model::system::load_system("architectures/dgx-h100.ron", &Disk)
        .value
        .expect("dgx-h100 loads");
    let mut sw = tessera::model::workload::load_workload("workloads/llama3-70b-serving.ron", &Disk)
        .value
        .expect("llama3-70b-serving loads");
    tessera::engine::serve::set_load(
        &mut sw,
        Some(tessera::model::serving::Slo::parse("p99 ttft<=1s,tpot<=8ms").unwrap()),
        None,
        Some(tessera::model::serving::Concurrency::Max),
    )
    .unwrap();
    c.bench_function("search/serving 70B at a p99 target on DGX H100", |b| {
        b.iter(|| black_box(search::search(&dgx, &sw, 8, Objective::Time).ranked.len()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
