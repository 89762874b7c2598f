//! A wafer as a mesh of cores (issue 10): each layer on a region of cores, every matrix-vector
//! product, attention score, norm and softmax reduced across its region over the mesh (hops ×
//! hop latency + bytes / link bandwidth). Laws: more mesh link bandwidth or less hop latency
//! never slows a step; a CS-3 is never slower than a CS-2 on Llama 3.1 8B decode; the mesh
//! figures reach the decode time through `--set` and `sweep --vary`; no wafer part file
//! carries a fitted figure.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use approx::assert_relative_eq;
use proptest::prelude::*;
use tessera::engine::program::Program;
use tessera::engine::table::{self as t, Machine};
use tessera::engine::{self, cpu, MappingChoice, Objective};
use tessera::model::system::load_system;
use tessera::model::workload::load_workload;

use crate::common;
use crate::common::CrateFs;

const LLAMA8B: &str = "workloads/llama3.1-8b-serving.ron";

fn prepared(arch: &str, work: &str) -> (Program, Machine) {
    let s = load_system(arch, &CrateFs).value.expect("system");
    let w = load_workload(work, &CrateFs).value.expect("workload");
    let Ok(p) = engine::prepare(&s, &w, &MappingChoice::Auto(Objective::Time), Some(1)) else {
        panic!("{arch} × {work}: infeasible");
    };
    (p.program, p.machine)
}

use crate::common::tessera;

#[test]
fn decode_on_a_wafer_pays_its_mesh_reductions() {
    let (p, m) = prepared("architectures/cerebras-cs3.ron", LLAMA8B);
    // one region per layer, chained
    let regions: f64 = p.stages.iter().map(|s| s.repeat).sum();
    assert_eq!(regions, 32.0, "{:?}", p.stages);
    assert!(p.comms.iter().any(|c| c.coeffs.mesh.latencies > 0.0));
    let e = cpu::eval(&p, &m);
    assert!(e.feasible);
    // the mesh collectives are most of a decode step, and no fixed time per operator is left
    assert_eq!(e.breakdown.other, 0.0);
    assert!(
        e.breakdown.communication > e.breakdown.compute,
        "{:?}",
        e.breakdown
    );
    let mut slow = m.clone();
    slow[t::MESH_HOP_LATENCY] *= 10.0;
    assert!(cpu::eval(&p, &slow).step_time > 1.5 * e.step_time);
}

#[test]
fn a_cs3_is_never_slower_than_a_cs2_on_llama_8b_decode() {
    let (p3, m3) = prepared("architectures/cerebras-cs3.ron", LLAMA8B);
    let (p2, m2) = prepared("architectures/cerebras-cs2.ron", LLAMA8B);
    let (e3, e2) = (cpu::eval(&p3, &m3), cpu::eval(&p2, &m2));
    assert!(e3.feasible && e2.feasible);
    assert!(
        e3.step_time <= e2.step_time,
        "{} > {}",
        e3.step_time,
        e2.step_time
    );
}

#[test]
fn no_wafer_part_file_carries_a_fitted_figure() {
    for part in [
        "architectures/parts/wse3-cs3.ron",
        "architectures/parts/wse2-cs2.ron",
    ] {
        let text = std::fs::read_to_string(part).unwrap();
        assert!(!text.contains("fitted"), "{part}");
        assert!(!text.contains("kernel_overhead:"), "{part}");
    }
}

fn tokens_per_s(args: &[&str]) -> f64 {
    let v = estimate_json(args);
    v["throughput_per_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("{v}"))
}

#[test]
fn set_mesh_figures_change_decode_time() {
    // the hardware alone: on Cerebras' stack (the CS-3's vendor mode) its fitted per-element
    // relay time, not the link, bounds the mesh's reductions
    let free = ["--execution", "free"];
    let base = tokens_per_s(&free);
    let slow_hop = tokens_per_s(&[&free[..], &["--set", "device.mesh.hop_latency=5 ns"]].concat());
    let fast_link =
        tokens_per_s(&[&free[..], &["--set", "device.mesh.link_bandwidth=10 GB/s"]].concat());
    assert!(slow_hop < 0.9 * base, "{slow_hop} vs {base}");
    assert!(fast_link > 1.1 * base, "{fast_link} vs {base}");
}

#[test]
fn sweep_vary_mesh_figures_change_decode_time() {
    for (path, values) in [
        ("device.mesh.hop_latency", "[\"1 ns\", \"10 ns\"]"),
        ("device.mesh.link_bandwidth", "[\"1 GB/s\", \"10 GB/s\"]"),
    ] {
        let vary = format!("{path}={values}");
        let out = tessera(&[
            "sweep",
            "--arch",
            "architectures/cerebras-cs3.ron",
            "--workload",
            LLAMA8B,
            "--vary",
            &vary,
            "--backend",
            "cpu",
            "--format",
            "csv",
        ]);
        assert!(out.status.success(), "{out:?}");
        // the step-time column differs between the two points
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines().filter(|l| !l.starts_with("note"));
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = head
            .iter()
            .position(|h| *h == "step_time_s")
            .unwrap_or_else(|| panic!("{head:?}"));
        let times: Vec<String> = lines
            .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
            .take(2)
            .map(|l| l.split(',').nth(col).unwrap().to_string())
            .collect();
        assert_eq!(times.len(), 2, "{text}");
        assert_ne!(times[0], times[1], "{path}: {text}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// More mesh link bandwidth or less hop latency never slows a step (CS-2 and CS-3, Llama
    /// 3.1 8B decode).
    #[test]
    fn a_faster_mesh_never_slows_a_step(
        cs3 in any::<bool>(),
        bw in 1.0f64..20.0, lat in 0.05f64..1.0,
        bw0 in 0.1f64..10.0, lat0 in 0.1f64..10.0,
    ) {
        let arch = if cs3 { "architectures/cerebras-cs3.ron" } else { "architectures/cerebras-cs2.ron" };
        let (p, mut m) = prepared(arch, LLAMA8B);
        m[t::MESH_LINK_BANDWIDTH] *= bw0;
        m[t::MESH_HOP_LATENCY] *= lat0;
        let e0 = cpu::eval(&p, &m);
        prop_assume!(e0.feasible);
        let mut m2 = m.clone();
        m2[t::MESH_LINK_BANDWIDTH] *= bw;
        m2[t::MESH_HOP_LATENCY] *= lat;
        let e1 = cpu::eval(&p, &m2);
        prop_assert!(e1.feasible);
        prop_assert!(e1.step_time <= e0.step_time * (1.0 + 1e-12), "{} > {}", e1.step_time, e0.step_time);
    }
}

#[test]
fn a_decode_layer_runs_waferllm_s_ten_all_reduces_and_prefill_its_score_reductions() {
    // WaferLLM's kernels (MeshInfra/WaferLLM, Decode/WSE-2/src/decode.csl `decode_struct`;
    // Prefill/WSE-2/src/prefill.csl `matmul_T_compute`) across a row of n cores of the layer's
    // region. Llama 3.1 8B, one request of 1,024 + 1,024 tokens in bf16 on a CS-3, 32 heads:
    // a row holds 1 head's share (32 / n < 1), the mean context is 1,024 + 1,024 / 2 = 1,536.
    //   decode, per layer: five matrix-vector all-reduces (MeshGEMV), one of the attention
    //     scores (1,536 / n positions × 2 B), four of one value each (two RMSNorm sums of
    //     squares, the softmax's max and sum: 2 B); an all-reduce is a streamed chain to the
    //     row's middle root and a multicast back: n + √n hops, √n dependent stages and the
    //     multicast's one at 5 cycles (hops) each (2·T_R + 1, T_R = 2: HPDC'24)
    //   prefill, per layer and per output token (÷ 1,024): the MeshGEMM shifts, n reductions
    //     of the partial score tile, (1,024 / n)² × 2 B each, to a root of the row (½(n + √n)
    //     hops and √n stages), and four all-reduces of 1,024 / n values × 2 B
    let (p, _) = prepared("architectures/cerebras-cs3.ron", LLAMA8B);
    let find = |name: &str| {
        p.comms
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let gemv = find("mesh: decode all-reduce (MeshGEMV)");
    let n = gemv.mesh;
    assert!(n > 100.0, "{n}");
    assert_eq!(gemv.count, 5.0);
    let all_reduce_hops = n + n.sqrt() + 5.0 * (n.sqrt() + 1.0);
    assert_relative_eq!(
        gemv.coeffs.mesh.latencies,
        all_reduce_hops,
        max_relative = 1e-12
    );
    let scores = find("mesh: decode attention-score all-reduce");
    assert_eq!((scores.count, scores.mesh), (1.0, n));
    assert_relative_eq!(scores.bytes, 1536.0 / n * 2.0, max_relative = 1e-12);
    assert_relative_eq!(
        scores.coeffs.mesh.latencies,
        all_reduce_hops,
        max_relative = 1e-12
    );
    let norms = find("mesh: decode RMSNorm and softmax all-reduces");
    assert_eq!((norms.count, norms.bytes, norms.mesh), (4.0, 2.0, n));
    assert_relative_eq!(
        norms.coeffs.mesh.latencies,
        all_reduce_hops,
        max_relative = 1e-12
    );
    let tile = find("mesh: prefill score reductions (transposed MeshGEMM)");
    assert_relative_eq!(tile.count, n / 1024.0, max_relative = 1e-12);
    assert_relative_eq!(tile.bytes, (1024.0 / n).powi(2) * 2.0, max_relative = 1e-12);
    assert_relative_eq!(
        tile.coeffs.mesh.latencies,
        0.5 * (n + n.sqrt()) + 5.0 * n.sqrt(),
        max_relative = 1e-12
    );
    // streamed: six segments through the root's port for an all-reduce, four for a reduction
    assert_relative_eq!(
        gemv.coeffs.mesh.bytes,
        6.0 * gemv.bytes,
        max_relative = 1e-12
    );
    assert_relative_eq!(
        tile.coeffs.mesh.bytes,
        4.0 * tile.bytes,
        max_relative = 1e-12
    );
    // MeshGEMM's shifts: per product the larger of the prompt's activations (1,024 tokens) and
    // the weights, here the weights every time (QKV 4096 x 6144, output 4096 x 4096, gated FFN
    // 3 x 4096 x 14336: 218,103,808 parameters, 2 B each), over n; behind the multiplications
    let shifts = find("mesh: prefill shifts (MeshGEMM)");
    assert_relative_eq!(shifts.bytes, 218_103_808.0 * 2.0 / n, max_relative = 1e-12);
    assert_relative_eq!(shifts.count, 1.0 / 1024.0, max_relative = 1e-12);
    assert_eq!(shifts.overlap, tessera::engine::program::Overlap::Compute);
    let pnorms = find("mesh: prefill RMSNorm and softmax all-reduces");
    assert_relative_eq!(pnorms.count, 4.0 / 1024.0, max_relative = 1e-12);
    assert_relative_eq!(pnorms.bytes, 1024.0 / n * 2.0, max_relative = 1e-12);
}

#[test]
fn a_graph_s_matrix_products_spread_over_the_wafer_with_their_collectives() {
    // WaferLLM's GEMV [1, 16K] x [16K, 16K] in fp16 on a WSE-2 (the SDK's 750 x 994 program
    // rectangle, taken as a square no wider than the mesh: n = min(√745,500, 750) = 750 a side,
    // the widest P x P grid WaferLLM's MeshGEMV can be compiled for): one row of the output
    // per row of cores, so MeshGEMV: each core keeps its tile and all-reduces its n-th of the
    // 16,384 outputs across its row, 16,384 / n × 2 B, in n + √n hops, after the product. A
    // product with at least n rows (8,192 × 4,096 × 4,096) shifts its operands instead, behind
    // the multiplications (MeshGEMM: the busiest link carries max(m·k, k·n_cols) / n values,
    // 2(n − 1) hops).
    let mut fs = tessera::model::system::MemFs::default();
    for (file, m, nk) in [("gemv.ron", 1, 16384), ("gemm.ron", 8192, 4096)] {
        fs.0.insert(
            file.into(),
            format!(
                "Workload(version: 1, name: \"p\", description: \"\", sources: {{\"x\": \"test\"}}, \
                 source: \"x\", model: Graph(ops: [Matmul(m: {m}, n: {nk}, k: {nk}, precision: \"fp16\")]), \
                 task: Run(steps: 1, samples_per_step: 1))"
            )
            .into_bytes(),
        );
    }
    let s = load_system("architectures/cerebras-cs2.ron", &CrateFs)
        .value
        .expect("system");
    // MeshGEMV's grid divides the matrix (WaferLLM's launch reshapes the vector to (P, K / P)):
    // the largest P ≤ 750 dividing 16,384 (and 4,096) is 512; the rest of the cores idle
    let side = 512.0;
    let program = |file: &str| {
        let w = load_workload(file, &fs).value.expect("workload");
        engine::prepare(&s, &w, &MappingChoice::Auto(Objective::Time), Some(1))
            .unwrap_or_else(|_| panic!("{file}: infeasible"))
            .program
    };
    let gemv = program("gemv.ron");
    let [c] = &gemv.comms[..] else {
        panic!("{:?}", gemv.comms)
    };
    assert_eq!(c.kind, tessera::engine::program::CollKind::AllReduce);
    assert_eq!(c.overlap, tessera::engine::program::Overlap::None);
    assert_relative_eq!(c.mesh, side, max_relative = 1e-12);
    assert_relative_eq!(c.bytes, 16384.0 / side * 2.0, max_relative = 1e-12);
    assert_relative_eq!(
        c.coeffs.mesh.latencies,
        side + side.sqrt() + 5.0 * (side.sqrt() + 1.0),
        max_relative = 1e-12
    );
    // the product computes on side² of the wafer's 745,500 cores
    let [op] = &gemv.ops[..] else {
        panic!("{:?}", gemv.ops)
    };
    assert_relative_eq!(op.occupancy, side * side / 745_500.0, max_relative = 1e-12);
    let gemm = program("gemm.ron");
    let [c] = &gemm.comms[..] else {
        panic!("{:?}", gemm.comms)
    };
    assert_eq!(c.kind, tessera::engine::program::CollKind::AllGather);
    assert_eq!(c.overlap, tessera::engine::program::Overlap::Compute);
    let per_core = 8192.0 * 4096.0 / side * 2.0;
    assert_relative_eq!(c.bytes, per_core, max_relative = 1e-12);
    assert_relative_eq!(
        c.coeffs.mesh.latencies,
        2.0 * (side - 1.0),
        max_relative = 1e-12
    );
}

#[test]
fn a_stack_s_relay_time_streams_a_chain_at_the_slower_of_link_and_software() {
    // One all-reduce of WaferLLM's decode layer on a CS-3 region (Llama 3.1 8B, one request),
    // by hand: its hops at the hop latency, and its bytes through the root's port streamed at the
    // slower of the 4.4 GB/s link (6 segments) and the stack's relay of each element (the root
    // adds both halves' streams in each of two phases: 4 segments of s / 4 elements = s).
    let (p, m) = prepared("architectures/cerebras-cs3.ron", LLAMA8B);
    let gemv = p
        .comms
        .iter()
        .find(|c| c.name == "mesh: decode all-reduce (MeshGEMV)")
        .expect("a MeshGEMV all-reduce");
    let s = gemv.bytes;
    assert_relative_eq!(gemv.coeffs.mesh.relayed, s, max_relative = 1e-12);
    let hops = gemv.coeffs.mesh.latencies * m[t::MESH_HOP_LATENCY];
    let wire = 6.0 * s / m[t::MESH_LINK_BANDWIDTH];
    let time = |relay: f64| {
        let mut m = m.clone();
        m[t::MESH_RELAY_TIME] = relay;
        cpu::collective(gemv, &m).0
    };
    // no stack: the hardware model exactly
    assert_eq!(time(0.0), cpu::collective(gemv, &m).0);
    assert_relative_eq!(time(0.0), hops + wire, max_relative = 1e-12);
    // a relay faster than the link hides behind it; a slower one sets the stream
    assert_relative_eq!(time(0.1e-9), hops + wire, max_relative = 1e-12);
    assert_relative_eq!(time(18.5e-9), hops + s * 18.5e-9, max_relative = 1e-12);
}

#[test]
fn a_stack_with_no_relay_time_gives_back_the_hardware_model() {
    // The per-stack figure at zero returns the unfitted model to the bit: the Cerebras August
    // 2024 stack with its relay time set to 0 s estimates what no stack does.
    let s = load_system("architectures/cerebras-cs3.ron", &CrateFs)
        .value
        .expect("system");
    let w = load_workload("workloads/llama3.1-8b-serving.ron", &CrateFs)
        .value
        .expect("workload");
    let mut stack = tessera::model::system::load_software(
        "architectures/software/cerebras-inference-2024-08.ron",
        &CrateFs,
    )
    .value
    .expect("stack");
    assert!(stack.mesh_relay_time > 0.0, "the fitted figure");
    let auto = MappingChoice::Auto(Objective::Time);
    let bare = engine::estimate(&s, &w, &auto, Some(1));
    let mut on = s.clone();
    on.with_software(stack.clone());
    let fitted = engine::estimate(&on, &w, &auto, Some(1));
    assert!(fitted.throughput_per_s < bare.throughput_per_s);
    stack.mesh_relay_time = 0.0;
    let mut zero = s.clone();
    zero.with_software(stack);
    let z = engine::estimate(&zero, &w, &auto, Some(1));
    assert_eq!(z.throughput_per_s, bare.throughput_per_s);
    assert_eq!(z.step_time_s, bare.step_time_s);
    assert_eq!(z.energy_per_step_j, bare.energy_per_step_j);
}

fn estimate_json(args: &[&str]) -> serde_json::Value {
    let mut a = vec![
        "estimate",
        "--arch",
        "architectures/cerebras-cs3.ron",
        "--workload",
        LLAMA8B,
        "--format",
        "json",
    ];
    a.extend_from_slice(args);
    let out = common::tessera(&a);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Issues 41 and 42: a system's file names the stack its vendor serves with (`execution.serving.
/// software`); a run that names no other executes on it and says so, `--software` replaces it and
/// `--execution free` runs the hardware alone.
#[test]
fn the_cs3_serves_on_its_vendors_stack_unless_told_otherwise() {
    let vendor = estimate_json(&[]);
    assert_eq!(
        vendor["software"],
        "Cerebras Inference, August 2024 release"
    );
    assert!(
        vendor["software_figures"]["mesh_relay_time_s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(
        vendor["execution_mode"]
            .as_str()
            .unwrap()
            .contains("on its stack Cerebras Inference"),
        "{}",
        vendor["execution_mode"]
    );
    // Cerebras' 1,800 tokens/s per user (August 2024), which the stack's figure is fitted on
    let rate = vendor["throughput_per_s"].as_f64().unwrap();
    assert!((rate / 1800.0 - 1.0).abs() < 0.15, "{rate}");
    let free = estimate_json(&["--execution", "free"]);
    assert!(free["software"].is_null());
    assert!(free["throughput_per_s"].as_f64().unwrap() > 2.0 * rate);
    let other = estimate_json(&["--software", "architectures/software/northpole-2024.ron"]);
    assert_eq!(other["software"], "IBM NorthPole LLM stack, 2024");
}

/// A stack the execution modes name is read like any file: one that is missing is an error at
/// the line of the system file that names it.
#[test]
fn a_missing_vendor_stack_is_an_error_where_it_is_named() {
    struct Over(String);
    impl tessera::spec::Fs for Over {
        fn read(&self, path: &str) -> Result<Vec<u8>, String> {
            if path == "architectures/cerebras-cs3.ron" {
                Ok(self.0.clone().into_bytes())
            } else {
                tessera::spec::Fs::read(&CrateFs, path)
            }
        }
    }
    let text = std::fs::read_to_string(common::root().join("architectures/cerebras-cs3.ron"))
        .unwrap()
        .replace(
            "software/cerebras-inference-2024-08.ron",
            "software/no-such.ron",
        );
    let l = load_system("architectures/cerebras-cs3.ron", &Over(text));
    assert!(l.value.is_none());
    let d = l
        .diagnostics
        .iter()
        .find(|d| d.message.contains("no-such"))
        .unwrap_or_else(|| panic!("{:?}", l.diagnostics));
    assert!(d.file.contains("cerebras-cs3.ron"), "{d:?}");
    assert!(d.pos.is_some(), "{d:?}");
}

/// The mesh's energy (issue 41): a collective on the wafer's mesh moves bytes × hops over its
/// links, charged at the part's energy per bit-hop. WaferLLM's decode all-reduce over a row of
/// n cores, s bytes a core, by hand: a reduction in groups of √n cores (√n − 1 links in each of
/// n/√n groups, then n/√n − 1 gaps of √n hops between the roots), each link carrying the segment
/// once, and the multicast back to the other n − 1 cores: (3n − n/√n − √n − 1)·s per row; the
/// region's n rows run it at once, over the share of the wafer the region holds.
#[test]
fn a_mesh_collective_s_energy_is_its_bytes_times_hops() {
    let (p, m) = prepared("architectures/cerebras-cs3.ron", LLAMA8B);
    let (i, c) = p
        .comms
        .iter()
        .enumerate()
        .find(|(_, c)| c.name.as_ref() == "mesh: decode all-reduce (MeshGEMV)")
        .expect("the decode all-reduce");
    let st = p
        .stages
        .iter()
        .find(|s| s.comms.contains(&i))
        .expect("its stage");
    let (n, s) = (c.mesh, c.bytes);
    let r = n.sqrt();
    let per_row = (3.0 * n - n / r - r - 1.0) * s;
    let want = per_row * n / st.devices;
    assert_relative_eq!(c.coeffs.mesh.hop_bytes, want, max_relative = 1e-12);
    // the hop bytes are charged in the energy and nothing else: the step keeps its time, and the
    // energy rises by the energy per bit-hop times every mesh collective's bytes × hops
    let at = |e: f64| {
        let mut x = m.clone();
        x[t::MESH_ENERGY] = e;
        cpu::eval(&p, &x)
    };
    let (zero, one, two) = (at(0.0), at(1e-12), at(2e-12));
    assert_eq!(zero.step_time, one.step_time);
    assert!(one.energy_per_step > zero.energy_per_step);
    assert_relative_eq!(
        two.energy_per_step - one.energy_per_step,
        one.energy_per_step - zero.energy_per_step,
        max_relative = 1e-9
    );
    // the shipped part's figure is read (0.1 pJ/bit, assumed: 0.8 pJ per byte-hop)
    assert_relative_eq!(m[t::MESH_ENERGY], 0.8e-12, max_relative = 1e-12);
}

/// `tessera sweep --list-paths` shows the mesh's energy per bit-hop as a figure an evaluator
/// reads.
#[test]
fn list_paths_shows_the_mesh_energy_as_evaluated() {
    let out = tessera(&[
        "sweep",
        "--arch",
        "architectures/cerebras-cs3.ron",
        "--list-paths",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let row = v
        .as_array()
        .expect("a list of paths")
        .iter()
        .find(|r| r["path"] == "device.mesh.energy_per_bit_hop")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(row["evaluated"], true, "{row}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Energy is never lost: a dearer bit-hop never lowers a step's energy, and never changes
    /// its time.
    #[test]
    fn a_dearer_bit_hop_never_lowers_the_energy(a in 0.0f64..5e-12, b in 0.0f64..5e-12) {
        let (p, m) = prepared("architectures/cerebras-cs3.ron", LLAMA8B);
        let (lo, hi) = (a.min(b), a.max(b));
        let at = |e: f64| {
            let mut x = m.clone();
            x[t::MESH_ENERGY] = e;
            cpu::eval(&p, &x)
        };
        let (l, h) = (at(lo), at(hi));
        prop_assert!(h.energy_per_step >= l.energy_per_step);
        prop_assert_eq!(h.step_time, l.step_time);
    }
}

/// `bottleneck` is the largest category summed over its items (every region's mesh reductions
/// together); `bottleneck_detail` the largest item inside it (issue 41): on a CS-3 decoding
/// Llama 3.1 8B, communication, and the collective that takes the most of the step, where the
/// largest item of all may be an op.
#[test]
fn the_bottleneck_detail_is_the_largest_item_of_its_category() {
    let s = load_system("architectures/cerebras-cs3.ron", &CrateFs)
        .value
        .expect("system");
    let w = load_workload(LLAMA8B, &CrateFs).value.expect("workload");
    let e = engine::estimate(&s, &w, &MappingChoice::Auto(Objective::Time), Some(1));
    assert_eq!(e.bottleneck.as_deref(), Some("communication"), "{e:?}");
    let (p, m) = prepared("architectures/cerebras-cs3.ron", LLAMA8B);
    let mut tr = Vec::new();
    let ev = cpu::eval_traced(&p, &m, Some(&mut tr));
    let n = p.ops.len();
    let (i, t) = tr[n..]
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .expect("collectives");
    let name: &str = p.comms[i].name.as_ref();
    assert!(name.starts_with("mesh:"), "{name}");
    assert_eq!(
        e.bottleneck_detail,
        Some(format!(
            "{name} ({:.0}% of the step)",
            100.0 * t / ev.step_time
        ))
    );
}

/// A graph with its block: `grid: P` puts every operator on P × P cores (WaferLLM compiles its
/// decode layer for one such block) and a `MeshAllReduce` of one value (a norm's sum, a softmax's
/// max) is the streamed two-tree chain along a row of that block, as a product's MeshGEMV
/// all-reduce is. On a device with no mesh, or a block wider than the mesh, it is infeasible with
/// its reason; a block under 2 cores a side is a located error.
#[test]
fn a_graph_compiled_for_a_block_runs_every_operator_on_it() {
    let mut fs = tessera::model::system::MemFs::default();
    let graph = |grid: &str| {
        format!(
            "Workload(version: 1, name: \"p\", description: \"\", sources: {{\"x\": \"test\"}}, \
             source: \"x\", model: Graph({grid}ops: [Matmul(m: 1, n: 4320, k: 4320, precision: \"fp16\"), \
             MeshAllReduce(elements: 1, precision: \"fp16\", count: 2), \
             Elementwise(elements: 4320, precision: \"fp16\")]), \
             task: Run(steps: 1, samples_per_step: 1))"
        )
        .into_bytes()
    };
    fs.0.insert("block.ron".into(), graph("grid: 360, "));
    fs.0.insert("wide.ron".into(), graph("grid: 751, "));
    fs.0.insert("none.ron".into(), graph(""));
    fs.0.insert("one.ron".into(), graph("grid: 1, "));
    let cs2 = load_system("architectures/cerebras-cs2.ron", &CrateFs)
        .value
        .expect("system");
    let run = |sys: &tessera::model::system::System, file: &str| {
        let w = load_workload(file, &fs).value.expect("workload");
        engine::prepare(sys, &w, &MappingChoice::Auto(Objective::Time), Some(1))
    };
    let p = run(&cs2, "block.ron").expect("feasible").program;
    let side: f64 = 360.0;
    let share = side * side / 745_500.0;
    assert_eq!(p.ops.len(), 2);
    for op in &p.ops {
        assert_relative_eq!(op.occupancy, share, max_relative = 1e-12);
    }
    let [gemv, reduce] = &p.comms[..] else {
        panic!("{:?}", p.comms)
    };
    // without the block the product would take 720 (the widest side ≤ 750 dividing 4,320)
    assert_relative_eq!(gemv.mesh, side, max_relative = 1e-12);
    assert_relative_eq!(gemv.bytes, 4320.0 / side * 2.0, max_relative = 1e-12);
    assert_eq!(reduce.kind, tessera::engine::program::CollKind::AllReduce);
    assert_relative_eq!(reduce.mesh, side, max_relative = 1e-12);
    assert_relative_eq!(reduce.bytes, 2.0, max_relative = 1e-12);
    assert_eq!(reduce.count, 2.0);
    let r = side.sqrt();
    // √n stages of 5 cycles to the middle root over (n + √n)/2 hops, the multicast back
    assert_relative_eq!(
        reduce.coeffs.mesh.latencies,
        side + r + 5.0 * (r + 1.0),
        max_relative = 1e-12
    );
    assert_relative_eq!(reduce.coeffs.mesh.bytes, 12.0, max_relative = 1e-12);
    let free = run(&cs2, "none.ron").expect("feasible").program;
    assert_relative_eq!(free.comms[0].mesh, 720.0, max_relative = 1e-12);
    let Err(e) = run(&cs2, "wide.ron") else {
        panic!("a 751-wide block fits no CS-2")
    };
    assert!(format!("{e:?}").contains("751 x 751"), "{e:?}");
    let h100 = load_system("architectures/dgx-h100.ron", &CrateFs)
        .value
        .expect("system");
    let Err(e) = run(&h100, "block.ron") else {
        panic!("an H100 has no mesh of cores")
    };
    assert!(format!("{e:?}").contains("no mesh of cores"), "{e:?}");
    let bad = load_workload("one.ron", &fs);
    assert!(bad.value.is_none());
    let msg = format!("{:?}", bad.diagnostics);
    assert!(
        msg.contains("grid") && msg.contains("1 cores a side"),
        "{msg}"
    );
}
