//! Design points evaluated per second, CPU (rayon, f64) and GPU (wgpu, f32), from 1e3 to 1e7
//! points: Llama 3.1 405B pretraining on 2,048 GPUs of the GB200 NVL72 cluster
//! (`architectures/gb200-cluster.ron`, the published mapping), with eight hardware parameters
//! varied by Latin-hypercube sampling. Every point is a full evaluation: its machine vector is
//! generated from its index, the program evaluated, and the top-10 and the throughput/power Pareto
//! front updated.
//!
//! `cargo bench --bench sweep`. Large sizes run 10 samples of one iteration each. On a software
//! adapter (lavapipe) the GPU runs only up to `TESSERA_BENCH_GPU_MAX` points (default 1e5): its
//! figure says nothing about a GPU. `TESSERA_BENCH_MAX` caps every size (default 1e7).

#![allow(clippy::print_stderr)]
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use std::time::Duration;
use tessera::spec::Fs;
use tessera::sweep::plan::{self, Plan};
use tessera::sweep::run::{self, Quiet};

struct Disk;
impl Fs for Disk {
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        std::fs::read(path).map_err(|e| e.to_string())
    }
}

fn arch() -> &'static str {
    if std::path::Path::new("architectures/gb200-cluster.ron").exists() {
        "architectures/gb200-cluster.ron"
    } else {
        "architectures/gb200-nvl72.ron"
    }
}

fn plan(points: u64) -> Plan {
    let root = std::env::current_dir().unwrap();
    let devices = if arch().contains("cluster") { 2048 } else { 64 };
    let text = format!(
        r#"Sweep(version: 1, arch: "{r}/{a}", workload: "{r}/workloads/llama3.1-405b-pretrain.ron",
        vary: {{
            "devices": [{devices}],
            "device.memory.HBM3e.bandwidth": "4 TB/s .. 16 TB/s",
            "device.memory.HBM3e.capacity": "96 GB .. 384 GB",
            "scale_up.bandwidth": "0.9 TB/s .. 7.2 TB/s log",
            "scale_out.bandwidth": "100 Gb/s .. 1600 Gb/s log",
            "device.peak.fp8": "2.5 PFLOP/s .. 10 PFLOP/s",
            "device.efficiency.matmul": "0.4 .. 0.8",
            "device.tdp": "800 W .. 1600 W",
            "facility.pue": "1.05 .. 1.4",
        }},
        sampling: LatinHypercube(points: {points}, seed: 1))"#,
        r = root.to_string_lossy(),
        a = arch()
    );
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("tessera-bench");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("sweep-{points}.ron"));
    std::fs::write(&p, text).unwrap();
    let p = p.to_string_lossy().into_owned();
    let l = plan::read_file(&p, &Disk);
    let b = plan::build(&l.value.expect("sweep file"), &Disk, l.files, l.diagnostics);
    b.value.unwrap_or_else(|| panic!("{:?}", b.diagnostics))
}

fn env_max(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .map(|v| v as u64)
        .unwrap_or(default)
}

fn sizes(max: u64) -> Vec<u64> {
    [1_000u64, 10_000, 100_000, 1_000_000, 10_000_000]
        .into_iter()
        .filter(|n| *n <= max)
        .collect()
}

fn configure(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, n: u64) {
    g.throughput(Throughput::Elements(n));
    if n >= 1_000_000 {
        g.sample_size(10);
        g.sampling_mode(SamplingMode::Flat);
        g.warm_up_time(Duration::from_millis(1));
        g.measurement_time(Duration::from_secs(1));
    } else {
        g.sample_size(20);
        g.sampling_mode(SamplingMode::Auto);
        g.warm_up_time(Duration::from_millis(500));
        g.measurement_time(Duration::from_secs(2));
    }
}

fn cpu(c: &mut Criterion) {
    let max = env_max("TESSERA_BENCH_MAX", 10_000_000);
    let mut g = c.benchmark_group("sweep/cpu");
    for n in sizes(max) {
        let p = plan(n);
        configure(&mut g, n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &p, |b, p| {
            b.iter(|| run::cpu(p, 10, 0, p.total(), None, &Quiet).unwrap())
        });
    }
    g.finish();
}

#[cfg(feature = "gpu")]
fn gpu(c: &mut Criterion) {
    use tessera::sweep::gpu::Gpu;
    use tessera::sweep::run::{Backend, Options};
    let g_ = match Gpu::shared() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("no GPU adapter ({e}); skipping the GPU benchmarks");
            return;
        }
    };
    let software = !g_.is_hardware();
    let max = env_max("TESSERA_BENCH_MAX", 10_000_000).min(if software {
        env_max("TESSERA_BENCH_GPU_MAX", 100_000)
    } else {
        u64::MAX
    });
    eprintln!(
        "GPU adapter: {}{}",
        g_.describe(),
        if software {
            " — a software rasteriser on the CPU: these are not GPU figures"
        } else {
            ""
        }
    );
    let label = if software {
        "sweep/gpu-software"
    } else {
        "sweep/gpu"
    };
    let mut g = c.benchmark_group(label);
    for n in sizes(max) {
        let p = plan(n);
        configure(&mut g, n);
        let opts = Options {
            backend: Backend::Gpu,
            ..Options::new(&p)
        };
        // the whole sweep: kernel, read-back, screening, f64 re-evaluation of the candidates
        g.bench_with_input(BenchmarkId::new("sweep", n), &p, |b, p| {
            b.iter(|| run::run(p, &opts, None, &Quiet).unwrap())
        });
        // the kernel and the read-back alone
        let design = g_
            .upload(
                &p.programs
                    .iter()
                    .map(|x| (&x.program, &x.base))
                    .collect::<Vec<_>>(),
                &p.space,
            )
            .unwrap();
        g.bench_with_input(BenchmarkId::new("kernel", n), &p, |b, p| {
            b.iter(|| {
                g_.evaluate(&design, 0, p.total(), None, &mut |_, _| true)
                    .unwrap()
            })
        });
    }
    g.finish();
}

#[cfg(not(feature = "gpu"))]
fn gpu(_c: &mut Criterion) {}

criterion_group!(benches, cpu, gpu);
criterion_main!(benches);
