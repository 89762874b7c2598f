//! The WGSL kernel against the f64 CPU evaluator on random design points.
//!
//! **Bound: every reported figure within a relative 1e-4 (`run::F32_BOUND`), feasibility
//! identical.** Why that bound: the kernel computes in f32 (unit roundoff u = 2^-24 ≈ 6e-8). A
//! step time is a sum of at most a few hundred positive terms (ops and collectives × sections),
//! each a product or quotient of ≤ 6 rounded quantities, so the classic bound for the sum is about
//! (n + 6)·u ≈ 70·u ≈ 4e-6 for the ~60 terms of these programs; power, energy and throughput add
//! ≤ 5 more roundings; the exposed part of an overlapped collective (t − compute) can cancel, but
//! its absolute error is bounded by u × the step, so relative to the step it stays in that budget;
//! the sampled axis values themselves (f32 table entries, `lo·exp(u·ln(hi/lo))`) add ≤ 3e-7.
//! 1e-4 leaves a factor of 25 over that estimate, and is far below anything a design decision
//! hangs on. The measured maxima are printed (`cargo test --test it gpu_parity:: -- --nocapture`).
//!
//! The sweep result itself does not rest on f32: the GPU backend screens with a margin of 4× the
//! bound and re-evaluates its candidates in f64, so both backends report identical best points
//! and fronts — checked here too, along with the best point and front of the raw f32 figures.
//!
//! With `CI=true` a missing adapter fails the test; on a developer machine without one it skips.
//! `.ci/run` installs lavapipe (Mesa's software Vulkan), which runs the kernel for real.

#![cfg(feature = "gpu")]
#![allow(clippy::print_stderr)]
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use std::collections::BTreeSet;
use tessera::sweep::accumulate::{Front, Screen, TopK};
use tessera::sweep::gpu::{Gpu, GpuError, OUT_WORDS};
use tessera::sweep::plan::{self, Plan};
use tessera::sweep::run::{self, from_words, Backend, Options, Quiet, F32_BOUND};
use tessera::sweep::Outcome;

use crate::common;

fn gpu() -> Option<&'static Gpu> {
    match Gpu::shared() {
        Ok(g) => {
            eprintln!("GPU adapter: {}", g.describe());
            Some(g)
        }
        // a kernel that does not compile or a device error fails the test everywhere: only a
        // machine without an adapter skips
        Err(e @ (GpuError::Device(_) | GpuError::Unsupported(_))) => panic!("{e}"),
        Err(e) => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("CI=true and no GPU adapter ({e}): `.ci/run` installs lavapipe (mesa-vulkan-drivers libvulkan1)");
            }
            eprintln!(
                "skipping the GPU test: {e}. Install `mesa-vulkan-drivers libvulkan1` (lavapipe) to run it."
            );
            None
        }
    }
}

fn plan_of(
    arch: &str,
    workload: &str,
    mapping: &str,
    vary: &[(&str, &str)],
    sampling: &str,
) -> Plan {
    let root = std::env::current_dir().unwrap();
    let mut text = format!(
        "Sweep(version: 1, arch: \"{r}/architectures/{arch}.ron\", workload: \"{r}/workloads/{workload}.ron\", mapping: \"{mapping}\", vary: {{",
        r = root.to_string_lossy()
    );
    for (p, v) in vary {
        text.push_str(&format!("\"{p}\": {v},"));
    }
    text.push_str(&format!("}}, sampling: {sampling})"));
    let dir = common::scratch_dir("tessera-gpu-test");
    let path = dir.join(format!("{arch}-{workload}.ron"));
    std::fs::write(&path, text).unwrap();
    let path = path.to_string_lossy().into_owned();
    let l = plan::read_file(&path, &common::CrateFs);
    let inputs = l.value.unwrap_or_else(|| panic!("{:?}", l.diagnostics));
    let b = plan::build(&inputs, &common::CrateFs, l.files, l.diagnostics);
    b.value
        .unwrap_or_else(|| panic!("{arch} × {workload}: {:?}", b.diagnostics))
}

/// Design spaces that together cover every op, collective kind, placement tier and axis kind.
fn plans() -> Vec<Plan> {
    vec![
        // the reference: Llama 3.1 405B training on GB200 NVL72 racks
        plan_of(
            "gb200-cluster",
            "llama3.1-405b-pretrain",
            "published",
            &[
                ("devices", "[1024, 2048]"),
                ("device.memory.HBM3e.bandwidth", "\"2 TB/s .. 16 TB/s\""),
                ("device.memory.HBM3e.capacity", "\"40 GB .. 300 GB\""),
                (
                    "device.memory.HBM3e.energy_per_byte",
                    "\"1 pJ/bit .. 8 pJ/bit\"",
                ),
                ("scale_up.bandwidth", "\"0.5 TB/s .. 8 TB/s log\""),
                ("scale_up.latency", "\"0.2 us .. 10 us log\""),
                ("scale_up.in_network_reduction", "[0, 1]"),
                ("scale_up.energy_per_bit", "\"0.5 pJ/bit .. 5 pJ/bit\""),
                ("scale_out.bandwidth", "\"50 Gb/s .. 3200 Gb/s log\""),
                ("scale_out.oversubscription", "\"1 .. 4\""),
                ("scale_out.in_network_reduction", "[0, 1]"),
                ("scale_out.latency", "\"1 us .. 20 us\""),
                ("device.peak.fp8", "\"1 PFLOP/s .. 20 PFLOP/s log\""),
                ("device.peak.bf16", "\"0.5 PFLOP/s .. 10 PFLOP/s log\""),
                ("device.efficiency.matmul", "\"0.3 .. 0.9\""),
                ("device.efficiency.memory", "\"0.5 .. 0.95\""),
                ("device.efficiency.network", "\"0.5 .. 0.95\""),
                ("device.efficiency.kernel_overhead", "\"0 us .. 20 us\""),
                ("device.efficiency.collective_compute_share", "\"0 .. 0.3\""),
                ("device.tdp", "\"600 W .. 2000 W\""),
                ("device.full_clock_power", "\"600 W .. 2000 W\""),
                ("device.idle_power", "\"50 W .. 500 W\""),
                ("facility.pue", "\"1 .. 1.6\""),
            ],
            "Random(points: 30000, seed: 11)",
        ),
        // training with pipeline stage classes of their own: Megatron-Bridge's 405B layout, the
        // embedding and the loss counted in the split (first, middle and last stages differ).
        // Under power limits too: where the stages are communication-bound their micro-batch
        // times tie (each is the exposed pipeline send's) and f32 and f64 pick different ones,
        // so the round is composed at the throttled clock (`cpu::Round`), continuous in it
        // (taking the full clock's pick put the two 1 % apart at 776 W).
        plan_of(
            "gb200-cluster",
            "mbridge-llama3.1-405b",
            &format!(
                "{}/workloads/mappings/mbridge-llama31-405b-tp4-pp16-vp8.ron",
                std::env::current_dir().unwrap().to_string_lossy()
            ),
            &[
                ("devices", "[256, 512]"),
                ("device.memory.HBM3e.capacity", "\"100 GB .. 300 GB\""),
                ("device.peak.fp8", "\"1 PFLOP/s .. 20 PFLOP/s log\""),
                ("scale_up.bandwidth", "\"0.5 TB/s .. 8 TB/s log\""),
                ("scale_out.bandwidth", "\"50 Gb/s .. 3200 Gb/s log\""),
                ("device.efficiency.kernel_overhead", "\"0 us .. 20 us\""),
                ("device.tdp", "\"600 W .. 1600 W\""),
                // FSDP under the pipeline: the weights gathered once, behind the step's first
                // forward (a step-section collective riding the first micro-batch)
                ("mapping.zero", "[1, 3]"),
            ],
            "Random(points: 400, seed: 23)",
        ),
        // mixture of experts (all-to-all), every legal mapping on a DGX H100
        plan_of(
            "dgx-h100",
            "mixtral-8x7b-pretrain",
            "auto",
            &[
                ("hbm.bandwidth", "\"1 TB/s .. 8 TB/s\""),
                ("hbm.capacity", "\"40 GB .. 200 GB\""),
                ("scale_up.bandwidth", "\"0.2 TB/s .. 2 TB/s log\""),
                ("device.efficiency.vector", "\"0.3 .. 0.9\""),
                ("device.tdp", "\"400 W .. 1000 W\""),
            ],
            "LatinHypercube(points: 50, seed: 5)",
        ),
        // wafer-scale with an external weight store: SRAM, external and mixed placements; the
        // update in the store where the state streams from it
        plan_of(
            "cerebras-cs3-cluster",
            "gpt3-175b-mlperf",
            "auto",
            &[
                ("device.memory.SRAM.capacity", "\"10 GB .. 400 GB log\""),
                ("device.memory.SRAM.bandwidth", "\"5 PB/s .. 40 PB/s\""),
                ("weight_store.bandwidth", "\"0.2 TB/s .. 5 TB/s log\""),
                ("weight_store.capacity", "[\"1 TB\", \"12 TB\", \"100 TB\"]"),
                ("scale_out.bandwidth", "\"100 Gb/s .. 2400 Gb/s\""),
                ("device.tdp", "\"15 kW .. 30 kW\""),
                // the optimizer update inside the store, and the training's mesh shifts
                ("weight_store.compute", "\"10 TFLOP/s .. 10 PFLOP/s log\""),
                (
                    "weight_store.memory_bandwidth",
                    "\"1 TB/s .. 500 TB/s log\"",
                ),
                ("device.mesh.link_bandwidth", "\"0.1 GB/s .. 50 GB/s log\""),
            ],
            "Random(points: 120, seed: 3)",
        ),
        threshold_plan(),
        // inference
        plan_of(
            "dgx-h100",
            "llama3-70b-serving",
            "auto",
            &[
                ("hbm.bandwidth", "\"1 TB/s .. 8 TB/s\""),
                ("device.peak.fp8", "\"1 PFLOP/s .. 4 PFLOP/s\""),
                ("scale_up.latency", "\"0.5 us .. 5 us\""),
            ],
            "LatinHypercube(points: 500, seed: 9)",
        ),
        // disaggregated serving: a concurrent prefill pool beside the decode instance, the
        // round the longer of the two (the pool's work per round or the decode round: both
        // bind across this space), its KV-cache sends hidden behind the pool's compute
        plan_of(
            "dgx-h100",
            "llama3-70b-serving",
            &format!(
                "{}/workloads/mappings/dgx-h100-llama3-70b-disaggregated.ron",
                std::env::current_dir().unwrap().to_string_lossy()
            ),
            &[
                ("hbm.bandwidth", "\"1 TB/s .. 8 TB/s\""),
                ("device.peak.fp8", "\"0.3 PFLOP/s .. 4 PFLOP/s log\""),
                ("hbm.capacity", "\"40 GB .. 200 GB\""),
                ("scale_up.bandwidth", "\"20 GB/s .. 2 TB/s log\""),
                ("device.tdp", "\"300 W .. 1000 W\""),
            ],
            "Random(points: 400, seed: 29)",
        ),
        // a wafer: one region of the mesh per layer, chained, every matrix-vector product
        // reduced across its region (mesh collectives on the mesh slots, streamed at the slower of
        // the link and the stack's relay of each element)
        plan_of(
            "cerebras-cs3",
            "llama3.1-8b-serving",
            "auto",
            &[
                ("device.mesh.hop_latency", "\"0.2 ns .. 50 ns log\""),
                ("device.mesh.link_bandwidth", "\"0.5 GB/s .. 50 GB/s log\""),
                // the software's relay of each element of a chain, against the link
                ("software.mesh_relay_time", "\"0 ns .. 50 ns\""),
                // the mesh traffic's energy: bytes × hops × energy per bit-hop, in both
                ("device.mesh.energy_per_bit_hop", "\"0 pJ/bit .. 2 pJ/bit\""),
                ("device.memory.SRAM.bandwidth", "\"5 PB/s .. 40 PB/s\""),
                ("device.memory.SRAM.capacity", "\"20 GB .. 100 GB log\""),
                ("device.tdp", "\"15 kW .. 30 kW\""),
            ],
            "Random(points: 300, seed: 17)",
        ),
        // activations offloaded to host memory over the host link: the copies out behind the
        // forward compute and back behind the backward's, exposed where the link is slow; over
        // host memory infeasible
        plan_of(
            "gb200-nvl72",
            "mbridge-llama3-70b",
            &format!(
                "{}/workloads/mappings/mbridge-llama3-70b-fsdp-offload.ron",
                std::env::current_dir().unwrap().to_string_lossy()
            ),
            &[
                ("devices", "[64]"),
                ("machine.host_bandwidth", "\"5 GB/s .. 500 GB/s log\""),
                ("machine.host_capacity", "\"50 GB .. 400 GB\""),
                ("device.memory.HBM3e.capacity", "\"150 GB .. 300 GB\""),
                ("device.peak.bf16", "\"0.5 PFLOP/s .. 10 PFLOP/s log\""),
            ],
            "Random(points: 400, seed: 31)",
        ),
        // the optimizer state offloaded to host memory: the host's update at the host memory's
        // bandwidth and the two copies at the step's end over the host link; with and without the
        // layers' weights offloaded too (copied in per pass); over host memory infeasible
        plan_of(
            "eos-h100",
            "mbridge-qwen3-30b-a3b",
            &format!(
                "{}/workloads/mappings/mbridge-qwen3-30b-a3b-optimizer-offload.ron",
                std::env::current_dir().unwrap().to_string_lossy()
            ),
            &[
                ("devices", "[16]"),
                ("machine.host_bandwidth", "\"5 GB/s .. 500 GB/s log\""),
                ("machine.host_memory_bandwidth", "\"10 GB/s .. 1 TB/s log\""),
                ("machine.host_capacity", "\"10 GB .. 100 GB\""),
                ("device.peak.fp8", "\"0.5 PFLOP/s .. 10 PFLOP/s log\""),
                ("mapping.offload_weights", "[\"false\", \"true\"]"),
            ],
            "Random(points: 400, seed: 37)",
        ),
        // near-memory inference: a per-layer pipeline of stage classes that differ (layer
        // stages, a head stage on its own devices), pipelined or chained rounds, SRAM placement;
        // under power limits each class at the clock its own devices' limit allows
        plan_of(
            "northpole-16",
            "granite-3b-northpole",
            &format!(
                "{}/workloads/mappings/northpole-granite-3b-pipeline.ron",
                std::env::current_dir().unwrap().to_string_lossy()
            ),
            &[
                ("sram.bandwidth", "\"1 TB/s .. 40 TB/s log\""),
                ("sram.capacity", "\"100 MB .. 400 MB\""),
                ("device.peak.int8", "\"50 TOP/s .. 800 TOP/s log\""),
                ("scale_up.latency", "\"0.5 us .. 50 us log\""),
                ("device.efficiency.kernel_overhead", "\"0 us .. 20 us\""),
                ("device.mesh.hop_latency", "\"1 ns .. 100 ns log\""),
                // the stack's hand-off of each micro-batch a stage passes on
                ("software.pipeline_stage_time", "\"0 us .. 80 us\""),
                ("device.tdp", "\"5 W .. 60 W\""),
            ],
            "Random(points: 400, seed: 21)",
        ),
        // machine points whose figures agree to a few parts in 1e8, one better in throughput
        // and the other in power (FSDP or the distributed optimizer under a pipeline, the same
        // bytes gathered at another point of the step): equal in f32, both on the exact front
        plan_of(
            "eos-h100",
            "mixtral-8x7b-pretrain",
            &{
                let m = common::scratch_dir("tessera-gpu-test").join("mixtral-tp2-pp4.ron");
                std::fs::write(
                    &m,
                    "Mapping(version: 1, tp: 2, pp: 4, micro_batch: 1, interleave: 2, source: \"t\", sources: {\"t\": \"test layout\"})",
                )
                .unwrap();
                m.to_string_lossy().into_owned()
            },
            &[
                ("devices", "[64]"),
                ("mapping.zero", "[1, 3]"),
                ("device.memory.HBM3.bandwidth", "\"1 TB/s .. 8 TB/s\""),
                ("device.memory.HBM3.capacity", "\"60 GB .. 120 GB\""),
                ("device.tdp", "\"400 W .. 1000 W\""),
                ("scale_up.bandwidth", "\"0.2 TB/s .. 2 TB/s\""),
            ],
            "LatinHypercube(points: 3000, seed: 4)",
        ),
    ]
}

/// A training step across the weight-streaming threshold (issue 40): MPT-760m on the CS-3
/// cluster, below the 1e9 parameters from which the cluster always streams, keeps its state in
/// SRAM where it fits and streams it from MemoryX where it does not, point by point; the program
/// carries both forms and each evaluator runs the one the point's placement selects. With the
/// store's compute and memory bandwidth swept too (the update in the store), and ZeRO 0 so that
/// the whole state is each device's.
fn threshold_plan() -> Plan {
    let m = common::scratch_dir("tessera-gpu-test").join("zero0-mb1.ron");
    std::fs::write(
        &m,
        "Mapping(version: 1, micro_batch: 1, zero: 0, source: \"t\", sources: {\"t\": \"test layout\"})",
    )
    .unwrap();
    plan_of(
        "cerebras-cs3-cluster",
        "mpt-760m-foundry",
        &m.to_string_lossy(),
        &[
            ("device.memory.SRAM.capacity", "\"4 GB .. 60 GB log\""),
            ("weight_store.bandwidth", "\"0.2 TB/s .. 5 TB/s log\""),
            ("weight_store.compute", "\"10 TFLOP/s .. 10 PFLOP/s log\""),
            (
                "weight_store.memory_bandwidth",
                "\"1 TB/s .. 500 TB/s log\"",
            ),
            ("device.tdp", "\"15 kW .. 30 kW\""),
        ],
        "Random(points: 300, seed: 43)",
    )
}

/// The threshold plan straddles the threshold: on the CPU evaluator, some of its feasible points
/// keep the state on the devices and some stream it (so the parity test above prices both forms
/// on both evaluators). Runs without a GPU.
#[test]
fn the_threshold_plan_prices_both_forms() {
    use tessera::engine::{cpu, program::Tier};
    let plan = threshold_plan();
    let (mut on_device, mut streamed) = (0, 0);
    for i in 0..plan.total() {
        let p = &plan.programs[plan.locate(i).0].program;
        let m = plan.machine(i);
        let e = cpu::eval(p, &m);
        if !e.feasible {
            continue;
        }
        if e.weights_tier == Tier::External && cpu::streams(e.weights_tier, &m) {
            streamed += 1;
        } else {
            on_device += 1;
        }
    }
    assert!(
        on_device >= 30 && streamed >= 30,
        "on the devices {on_device}, streamed {streamed} of {}",
        plan.total()
    );
}

fn rel(a: f64, b: f64) -> f64 {
    if a == b {
        0.0
    } else {
        (a - b).abs() / a.abs().max(b.abs())
    }
}

fn raw(g: &Gpu, plan: &Plan, limits: Option<(u32, u32)>) -> Vec<f32> {
    let design = g
        .upload(
            &plan
                .programs
                .iter()
                .map(|p| (&p.program, &p.base))
                .collect::<Vec<_>>(),
            &plan.space,
        )
        .expect("upload");
    let mut words = Vec::with_capacity(plan.total() as usize * OUT_WORDS);
    let mut next = 0u64;
    g.evaluate(&design, 0, plan.total(), limits, &mut |first, w| {
        assert_eq!(first, next, "batches come in order");
        next += (w.len() / OUT_WORDS) as u64;
        words.extend_from_slice(w);
        true
    })
    .expect("the kernel runs");
    assert_eq!(next, plan.total());
    words
}

/// The kernel's output words for the first `n` points of one hand-built program on machine
/// `m` over `space`.
fn kernel_words(
    g: &Gpu,
    program: &tessera::engine::program::Program,
    m: &tessera::engine::table::Machine,
    space: &tessera::sweep::space::Space,
    n: u64,
) -> Vec<f32> {
    let design = g.upload(&[(program, &m.0)], space).expect("upload");
    let mut words = Vec::new();
    g.evaluate(&design, 0, n, None, &mut |_, w| {
        words.extend_from_slice(w);
        true
    })
    .expect("the kernel runs");
    words
}

#[test]
fn kernel_matches_cpu_eval_on_100k_random_points() {
    let Some(g) = gpu() else { return };
    let names = [
        "step time",
        "energy per step",
        "power",
        "throughput",
        "MFU",
        "energy per unit",
    ];
    let mut worst = [0.0f64; 6];
    let mut points = 0u64;
    let mut feasible = 0u64;
    let mut reasons = [0u64; tessera::engine::reason::point::COUNT];
    for plan in plans() {
        let words = raw(g, &plan, None);
        let mut vals = vec![0.0; plan.space.axes.len()];
        let mut gpu_out: Vec<Outcome> = Vec::new();
        let mut cpu_out: Vec<Outcome> = Vec::new();
        for i in 0..plan.total() {
            let c = plan.evaluate(i, &mut vals);
            let o = from_words(
                i,
                &words[i as usize * OUT_WORDS..(i as usize + 1) * OUT_WORDS],
            );
            assert_eq!(
                o.reason,
                c.reason,
                "{}: point {i} ({:?}): feasibility differs: gpu {o:?} cpu {c:?}",
                plan.name,
                plan.values(i)
            );
            reasons[c.reason as usize] += 1;
            if c.feasible() {
                let pairs = [
                    (o.step_time, c.step_time),
                    (o.energy_per_step, c.energy_per_step),
                    (o.power, c.power),
                    (o.throughput, c.throughput),
                    (o.mfu, c.mfu),
                    (o.energy_per_unit, c.energy_per_unit),
                ];
                for (k, (a, b)) in pairs.iter().enumerate() {
                    let r = rel(*a, *b);
                    worst[k] = worst[k].max(r);
                    assert!(
                        r <= F32_BOUND,
                        "{}: point {i}: {} gpu {a} cpu {b} (relative {r:e} > {F32_BOUND:e})",
                        plan.name,
                        names[k]
                    );
                }
                feasible += 1;
            }
            gpu_out.push(o);
            cpu_out.push(c);
        }
        points += plan.total();

        // The raw f32 figures already pick the same best point; their Pareto front, screened
        // with the f32 margin, holds every point of the exact one (points a power limit pins
        // at the same draw tie to within f32 rounding, so the raw fronts need not be equal:
        // the host's f64 re-evaluation of the candidates decides, checked just below).
        let pick = |outs: &[Outcome]| {
            let mut t = TopK::new(1, plan.objective);
            let mut f = Front::new(plan.pareto.0, plan.pareto.1);
            for o in outs.iter().filter(|o| o.feasible()) {
                t.push(o);
                f.push(o);
            }
            (
                t.into_sorted().first().map(|o| o.index),
                f.into_sorted()
                    .iter()
                    .map(|o| o.index)
                    .collect::<BTreeSet<u64>>(),
            )
        };
        let (gb, _) = pick(&gpu_out);
        let (cb, cf) = pick(&cpu_out);
        assert_eq!(gb, cb, "{}: best point", plan.name);
        let mut screen = Screen::new(1, 0, plan.objective, plan.pareto, 4.0 * F32_BOUND);
        for o in gpu_out.iter().filter(|o| o.feasible()) {
            screen.push(o);
        }
        let kept: BTreeSet<u64> = screen.candidates().into_iter().collect();
        assert!(
            cf.is_subset(&kept),
            "{}: exact front points the f32 screen drops: {:?}",
            plan.name,
            cf.difference(&kept).collect::<Vec<_>>()
        );

        // And the backends' sweep results are identical.
        let opts = |b| Options {
            backend: b,
            ..Options::new(&plan)
        };
        let s_gpu = run::run(&plan, &opts(Backend::Gpu), None, &Quiet).unwrap();
        let s_cpu = run::run(&plan, &opts(Backend::Cpu), None, &Quiet).unwrap();
        assert!(s_gpu.backend.starts_with("gpu"), "{}", s_gpu.backend);
        assert_eq!(s_gpu.top, s_cpu.top, "{}: top points", plan.name);
        assert_eq!(s_gpu.front, s_cpu.front, "{}: front", plan.name);
        assert_eq!(s_gpu.evaluated, s_cpu.evaluated);
        assert_eq!(s_gpu.feasible, s_cpu.feasible, "{}: counts", plan.name);
        // with every point read back (for per-point output) too
        let mut rows = Vec::new();
        let s_rows = run::run(
            &plan,
            &opts(Backend::Gpu),
            Some((&mut rows, tessera::sweep::report::RowFormat::Csv)),
            &Quiet,
        )
        .unwrap();
        assert_eq!(s_rows.top, s_cpu.top, "{}: top points, rows", plan.name);
        assert_eq!(s_rows.front, s_cpu.front, "{}: front, rows", plan.name);
        assert_eq!(
            rows.iter().filter(|b| **b == b'\n').count() as u64,
            plan.total() + 1
        );

        // Constraints screened on the device: a power budget at the median power and a memory
        // floor at the median headroom of the feasible points.
        let mut feasible: Vec<&Outcome> = cpu_out.iter().filter(|o| o.feasible()).collect();
        if feasible.len() > 10 {
            let mut c = plan.clone();
            feasible.sort_by(|a, b| a.power.total_cmp(&b.power));
            let budget = feasible[feasible.len() / 2].power;
            feasible.sort_by(|a, b| a.headroom.total_cmp(&b.headroom));
            let floor = feasible[feasible.len() / 3].headroom;
            c.constraints.power_budget = Some(budget);
            c.constraints.memory_floor = Some(floor);
            let g_ = run::run(&c, &opts(Backend::Gpu), None, &Quiet).unwrap();
            let c_ = run::run(&c, &opts(Backend::Cpu), None, &Quiet).unwrap();
            assert_eq!(g_.top, c_.top, "{}: constrained top points", plan.name);
            assert_eq!(g_.front, c_.front, "{}: constrained front", plan.name);
            assert_eq!(
                g_.infeasible, c_.infeasible,
                "{}: constrained counts",
                plan.name
            );
            assert!(c_.infeasible.len() >= 2, "{:?}", c_.infeasible);
        }
    }
    eprintln!(
        "parity over {points} points ({feasible} feasible; infeasible by memory {}, no compute {}):",
        reasons[1], reasons[2]
    );
    for (n, w) in names.iter().zip(worst) {
        eprintln!("  {n:>16}: max relative difference {w:.2e} (bound {F32_BOUND:e})");
    }
    assert!(points >= 100_000, "{points} points");
    assert!(
        feasible > 10_000 && reasons[1] > 100,
        "the spaces cover feasible and infeasible points"
    );
}

#[test]
fn two_dimensional_dispatch_and_small_batches_agree() {
    let Some(g) = gpu() else { return };
    let plan = plans().swap_remove(3);
    let one = raw(g, &plan, None);
    // 4096 points per batch in a 4 × 4 grid of workgroups: the 2-D path, many batches.
    let two = raw(g, &plan, Some((4096, 4)));
    assert_eq!(one.len(), two.len());
    assert!(one
        .iter()
        .zip(&two)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn too_many_axes_is_an_error_not_a_panic() {
    let Some(g) = gpu() else { return };
    use tessera::engine::table as fields;
    // 40 axes of one value each: any field, at an example value of its unit
    let vary: Vec<(String, String)> = (0..fields::NF)
        .filter(|i| !fields::name(*i).contains("in_network"))
        .take(40)
        .map(|i| {
            let v = tessera::units::example(fields::dimension(i));
            (format!("machine.{}", fields::name(i)), format!("[\"{v}\"]"))
        })
        .collect();
    let vary: Vec<(&str, &str)> = vary.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let plan = plan_of("dgx-h100", "llama3-70b-serving", "published", &vary, "Grid");
    let r = g.upload(
        &plan
            .programs
            .iter()
            .map(|p| (&p.program, &p.base))
            .collect::<Vec<_>>(),
        &plan.space,
    );
    assert!(matches!(r, Err(GpuError::Unsupported(_))));
    // the sweep reports it
    let e = run::run(
        &plan,
        &Options {
            backend: Backend::Gpu,
            ..Options::new(&plan)
        },
        None,
        &Quiet,
    )
    .unwrap_err();
    assert!(e.to_string().contains("at most"), "{e}");
}

/// Regression (the structure issue): the kernel's port of `cpu::place` had drifted from it.
/// With no SRAM and an empty working set, the kernel put working data in the absent SRAM (and
/// measured headroom there) where the CPU puts it in main memory. Both now read one placement
/// rule over the same tier slots.
#[test]
fn placement_with_an_absent_tier_agrees_with_the_cpu() {
    use tessera::engine::cpu;
    use tessera::engine::program::Footprint;
    use tessera::engine::table::{self as t, Machine};
    use tessera::model::precision::Precision;
    use tessera::sweep::space::{Axis, Derive, Sampling, Space, Target, Values};
    let Some(g) = gpu() else { return };
    let bf16 = Precision::Bf16.index();
    let program = one_gemm(Footprint {
        weights: 1e9,
        ..Footprint::default()
    });
    let mut m = Machine::zero();
    m[t::MATRIX_PEAK + bf16] = 1e15;
    for e in [t::EFF_MATMUL, t::EFF_MEMORY, t::EFF_NETWORK, t::PUE] {
        m[e] = 1.0;
    }
    m[t::HBM_CAPACITY] = 0.5e9; // too small for the weights
    m[t::HBM_BANDWIDTH] = 1e12;
    m[t::EXT_CAPACITY] = 1e12; // the weight store holds them
    m[t::EXT_BANDWIDTH] = 1e11;
    m[t::TDP] = 500.0;
    let e = cpu::eval(&program, &m);
    let c = Outcome::from_eval(0, &program, &m, &e);
    assert!(c.feasible(), "{e:?}");
    assert_eq!(c.headroom, 0.5e9, "working data (none) in main memory");
    let space = Space::new(
        vec![Axis {
            path: "machine.pue".into(),
            dimension: tessera::units::Dimension::Ratio,
            values: Values::List(vec![1.0]),
            targets: vec![Target {
                field: t::PUE,
                op: tessera::sweep::space::Op::Set {
                    scale: 1.0,
                    offset: 0.0,
                    floor: f64::NEG_INFINITY,
                },
            }],
        }],
        Sampling::Grid,
        Derive::default(),
    )
    .expect("space");
    let words = kernel_words(g, &program, &m, &space, 1);
    let o = from_words(0, &words[..OUT_WORDS]);
    assert_eq!(o.reason, c.reason);
    assert!(rel(o.headroom, c.headroom) < F32_BOUND, "{o:?} vs {c:?}");
    assert!(rel(o.step_time, c.step_time) < F32_BOUND, "{o:?} vs {c:?}");
}

/// The link timelines on every (section, overlap) pair the evaluators distinguish, the ones no
/// shipped lowering emits yet included (a step collective behind the forward, a micro-batch's
/// behind its backward): a hand-built program of a forward, a backward and an update with
/// collectives on NVLink, the NIC and both (hierarchical, and an all-to-all holding both), over
/// a scale-up and a scale-out bandwidth axis wide enough that every pass binds somewhere, on a
/// software stack with a per-step cost. Each point's step time and energy agree with the CPU
/// within the f32 bound.
#[test]
fn link_timelines_agree_on_every_section_and_overlap() {
    use tessera::engine::cpu;
    use tessera::engine::program::{
        CollKind, Comm, Footprint, Op, Overlap, Phase, Program, Section,
    };
    use tessera::engine::table::{self as t, Machine};
    use tessera::model::precision::Precision;
    use tessera::sweep::space::{Axis, Derive, Sampling, Space, Target, Values};
    let Some(g) = gpu() else { return };
    let bf16 = Precision::Bf16.index();
    let op = |flops: f64, section, phase| Op {
        name: "gemm".into(),
        matrix: true,
        precision: bf16,
        flops,
        // a quantized product: the kernel must read the occupancy as the CPU does
        occupancy: 0.75,
        weight_bytes: 1e8,
        act_bytes: 1e8,
        count: 1.0,
        section,
        phase,
        form: tessera::engine::program::Form::Both,
    };
    let (mbs, stp) = (Section::MicroBatch, Section::Step);
    let comm = |kind, bytes, outer, section, overlap| Comm {
        section,
        overlap,
        ..common::comm(kind, bytes, 8.0, outer)
    };
    use CollKind::*;
    use Overlap::{Backward, Compute, Forward, None as Exposed};
    let comms = vec![
        comm(AllGather, 2e9, 1.0, mbs, Compute),
        comm(AllReduce, 1e9, 4.0, mbs, Forward),
        comm(AllToAll, 1e9, 4.0, mbs, Backward),
        comm(ReduceScatter, 4e9, 8.0, stp, Backward),
        comm(AllGather, 2e9, 8.0, stp, Forward),
        comm(AllGather, 1e9, 2.0, stp, Compute),
        comm(AllReduce, 1e8, 2.0, mbs, Exposed),
        // an interleaved schedule's reductions and gathers spread over 2.5 backwards and 3.25
        // forwards (`Overlap::TailBackward`, `Overlap::HeadForward`)
        Comm {
            count: 2.5,
            ..comm(ReduceScatter, 1e9, 8.0, stp, Overlap::TailBackward)
        },
        Comm {
            count: 3.25,
            ..comm(AllGather, 6e8, 4.0, stp, Overlap::HeadForward)
        },
    ];
    let program = Program {
        ops: vec![
            op(4e12, mbs, Phase::Forward),
            op(8e12, mbs, Phase::Backward),
            op(1e12, stp, Phase::Update),
        ],
        comms,
        stages: Vec::new(),
        micro_batches: 4.0,
        bubble: 0.75,
        footprint: Footprint {
            weights: 1e9,
            ..Footprint::default()
        },
        devices: 256.0,
        units_per_step: 1.0,
        unit: "samples",
        model_flops_per_step: 5e13,
        mfu_precision: bf16,
        steps: None,
        // an optimizer step on a software stack with a per-step cost (`t::STEP_OVERHEAD`)
        host_steps: 1.0,
    };
    let mut m = Machine::zero();
    m[t::MATRIX_PEAK + bf16] = 1e15;
    for e in [t::EFF_MATMUL, t::EFF_MEMORY, t::EFF_NETWORK, t::PUE] {
        m[e] = 1.0;
    }
    m[t::STEP_OVERHEAD] = 3e-3;
    // the overlapped collectives take a share of the compute beside them (`cpu::collective_tax`)
    m[t::COMM_SHARE] = 0.15;
    m[t::HBM_CAPACITY] = 80e9;
    m[t::HBM_BANDWIDTH] = 3e12;
    m[t::UP_LATENCY] = 2e-6;
    m[t::OUT_LATENCY] = 5e-6;
    m[t::TDP] = 1e4;
    m[t::IDLE_POWER] = 100.0;
    let set = |field| {
        vec![Target {
            field,
            op: tessera::sweep::space::Op::Set {
                scale: 1.0,
                offset: 0.0,
                floor: f64::NEG_INFINITY,
            },
        }]
    };
    let axis = |path: &str, field, lo: f64| Axis {
        path: path.into(),
        dimension: tessera::units::Dimension::Bandwidth,
        values: Values::List((0..8).map(|k| lo * 2f64.powi(k)).collect()),
        targets: set(field),
    };
    let space = Space::new(
        vec![
            axis("scale_up.bandwidth", t::UP_BANDWIDTH, 25e9),
            axis("scale_out.bandwidth", t::OUT_BANDWIDTH, 3e9),
        ],
        Sampling::Grid,
        Derive::default(),
    )
    .expect("space");
    let words = kernel_words(g, &program, &m, &space, 64);
    let mut exposed = 0;
    for (i, (up, out)) in (0..8).flat_map(|a| (0..8).map(move |b| (a, b))).enumerate() {
        let mut mi = m.clone();
        mi[t::UP_BANDWIDTH] = 25e9 * 2f64.powi(up);
        mi[t::OUT_BANDWIDTH] = 3e9 * 2f64.powi(out);
        let e = cpu::eval(&program, &mi);
        let c = Outcome::from_eval(i as u64, &program, &mi, &e);
        let o = from_words(i as u64, &words[i * OUT_WORDS..(i + 1) * OUT_WORDS]);
        assert!(c.feasible() && o.feasible(), "{o:?} vs {c:?}");
        assert!(
            rel(o.step_time, c.step_time) < F32_BOUND,
            "point {i}: {o:?} vs {c:?}"
        );
        assert!(
            rel(o.energy_per_step, c.energy_per_step) < F32_BOUND,
            "point {i}"
        );
        // the overlapped collectives expose something beyond the one exposed collective
        let alone = cpu::collective(&program.comms[6], &mi).0 * program.micro_batches;
        exposed += usize::from(e.breakdown.communication > 1.01 * alone);
    }
    assert!(
        (8..64).contains(&exposed),
        "{exposed} of 64 points expose overlapped traffic: the axes should span hidden and bound"
    );
}

/// A software stack's memory reserve (`t::MEMORY_RESERVE`) comes off the main tier in both
/// evaluators: over a reserve axis from none to more than the memory, on a device with HBM and on
/// one with SRAM only, the kernel agrees with the CPU on which points fit, the headroom left (or
/// how far over), and the step time. Checked to fail with the kernel reading the raw capacity.
#[test]
fn a_memory_reserve_places_the_same_in_both_evaluators() {
    use tessera::engine::cpu;
    use tessera::engine::program::Footprint;
    use tessera::engine::table::{self as t, Machine};
    use tessera::model::precision::Precision;
    use tessera::sweep::space::{Axis, Derive, Sampling, Space, Target, Values};
    let Some(g) = gpu() else { return };
    let bf16 = Precision::Bf16.index();
    let program = one_gemm(Footprint {
        weights: 1e9,
        activations: 0.5e9,
        ..Footprint::default()
    });
    let reserves = [0.0, 0.25e9, 0.5e9, 0.75e9, 1.0e9, 2.0e9, 3.0e9];
    let space = Space::new(
        vec![Axis {
            path: "software.memory_reserve".into(),
            dimension: tessera::units::Dimension::Bytes,
            values: Values::List(reserves.to_vec()),
            targets: vec![Target {
                field: t::MEMORY_RESERVE,
                op: tessera::sweep::space::Op::Set {
                    scale: 1.0,
                    offset: 0.0,
                    floor: f64::NEG_INFINITY,
                },
            }],
        }],
        Sampling::Grid,
        Derive::default(),
    )
    .expect("space");
    for (tier, cap) in [(t::HBM_CAPACITY, 2.5e9), (t::SRAM_CAPACITY, 2.5e9)] {
        let mut m = Machine::zero();
        m[t::MATRIX_PEAK + bf16] = 1e15;
        for e in [t::EFF_MATMUL, t::EFF_MEMORY, t::EFF_NETWORK, t::PUE] {
            m[e] = 1.0;
        }
        m[tier] = cap;
        m[t::HBM_BANDWIDTH] = 1e12;
        m[t::SRAM_BANDWIDTH] = 1e13;
        m[t::TDP] = 500.0;
        let words = kernel_words(g, &program, &m, &space, reserves.len() as u64);
        let mut fits = 0;
        for (i, r) in reserves.iter().enumerate() {
            let mut mi = m.clone();
            mi[t::MEMORY_RESERVE] = *r;
            let e = cpu::eval(&program, &mi);
            let c = Outcome::from_eval(i as u64, &program, &mi, &e);
            let o = from_words(i as u64, &words[i * OUT_WORDS..(i + 1) * OUT_WORDS]);
            assert_eq!(o.reason, c.reason, "reserve {r}: {o:?} vs {c:?}");
            assert!(
                (o.headroom - c.headroom).abs() <= 1e-6 * cap,
                "reserve {r}: {o:?} vs {c:?}"
            );
            assert!(rel(o.step_time, c.step_time) < F32_BOUND, "{o:?} vs {c:?}");
            // 1.5 GB of data in 2.5 GB: it fits while the reserve leaves 1.5 GB
            assert_eq!(c.feasible(), *r <= 1.0e9, "reserve {r}: {c:?}");
            fits += usize::from(c.feasible());
        }
        assert_eq!(fits, 5);
    }
}

/// One 1 TFLOP BF16 GEMM reading 1 GB of weights, holding `footprint`: the placement tests' program.
fn one_gemm(footprint: tessera::engine::program::Footprint) -> tessera::engine::program::Program {
    use tessera::engine::program::{Op, Phase, Program, Section};
    let bf16 = tessera::model::precision::Precision::Bf16.index();
    Program {
        ops: vec![Op {
            name: "gemm".into(),
            matrix: true,
            precision: bf16,
            flops: 1e12,
            occupancy: 1.0,
            weight_bytes: 1e9,
            act_bytes: 0.0,
            count: 1.0,
            section: Section::MicroBatch,
            phase: Phase::Forward,
            form: tessera::engine::program::Form::Both,
        }],
        comms: Vec::new(),
        stages: Vec::new(),
        micro_batches: 1.0,
        bubble: 0.0,
        footprint,
        devices: 1.0,
        units_per_step: 1.0,
        unit: "samples",
        model_flops_per_step: 1e12,
        mfu_precision: bf16,
        steps: None,
        host_steps: 0.0,
    }
}
