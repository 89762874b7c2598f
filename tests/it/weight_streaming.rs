//! Training on wafers and tiles (issue 10): weight streaming from MemoryX with the optimizer
//! update inside the store, SwarmX between several systems, the mesh costs of training on a mesh
//! device, the weight store's power only where it is used, and a Tesla Dojo tile through the same
//! machinery.
//!
//! Laws: only what a step moves crosses the store's link (weights in, gradients out, never the
//! optimizer state); the store's power counts only when the state lives there; a model that
//! fits the device never streams; more mesh link bandwidth or less hop latency never slows a
//! training step; more systems never slow the streamed link.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use proptest::prelude::*;
use tessera::engine::program::{Phase, Program, Role, Section, Tier};
use tessera::engine::table::{self as t, Machine};
use tessera::engine::{self, cpu, MappingChoice, Objective};
use tessera::model::system::{load_system, System};
use tessera::model::workload::{load_workload, Task, Workload};

use crate::common;
use crate::common::CrateFs;

const CS3: &str = "architectures/cerebras-cs3.ron";
const CS3_CLUSTER: &str = "architectures/cerebras-cs3-cluster.ron";
const DOJO: &str = "architectures/dojo-tile.ron";
const PRETRAIN_8B: &str = "workloads/llama3.1-8b-pretrain.ron";

fn system(path: &str) -> System {
    load_system(path, &CrateFs).value.expect(path)
}

fn workload(path: &str) -> Workload {
    load_workload(path, &CrateFs).value.expect(path)
}

fn prepared(s: &System, w: &Workload, devices: Option<u64>) -> (Program, Machine) {
    match engine::prepare(s, w, &MappingChoice::Auto(Objective::Time), devices) {
        Ok(p) => (p.program, p.machine),
        Err(e) => panic!("{} × {}: {}", s.name, w.name, e.reason),
    }
}

/// As the workload's published mapping says (pure data parallelism, ZeRO 1), on `devices`.
fn given(s: &System, w: &Workload, devices: u64) -> (Program, Machine) {
    let plan = w
        .mapping
        .clone()
        .expect("the workload publishes its mapping");
    match engine::prepare(s, w, &MappingChoice::Given(plan), Some(devices)) {
        Ok(p) => (p.program, p.machine),
        Err(e) => panic!("{} × {}: {}", s.name, w.name, e.reason),
    }
}

use crate::common::tessera;

/// Bytes per step the devices' operators move to and from the weight store (their weight
/// bytes, when the state lives there), of the form the program runs on `m` (`cpu::running`: a
/// program on a system with a store carries both forms).
fn link_bytes(p: &Program, m: &Machine) -> f64 {
    cpu::running(p, m)
        .ops(p)
        .map(|(_, o)| o)
        .filter(|o| o.phase != Phase::Store)
        .map(|o| {
            let mult = if o.section == Section::MicroBatch {
                p.micro_batches
            } else {
                1.0
            };
            o.weight_bytes * o.count * mult
        })
        .sum()
}

#[test]
fn the_optimizer_update_runs_inside_memoryx_and_its_state_never_crosses_the_link() {
    let s = system(CS3);
    let w = workload(PRETRAIN_8B);
    let (p, m) = prepared(&s, &w, Some(1));
    let e = cpu::eval(&p, &m);
    assert!(e.feasible, "{:?}", e.reason());
    assert_eq!(
        e.weights_tier,
        Tier::External,
        "8B training streams its weights"
    );
    // the records that run on this machine (the program carries the on-device form too)
    let running = cpu::running(&p, &m);
    let store: Vec<_> = running
        .ops(&p)
        .filter(|(_, o)| o.phase == Phase::Store)
        .collect();
    assert_eq!(store.len(), 1, "one update, in the store");
    assert!(running.ops(&p).all(|(_, o)| o.phase != Phase::Update));
    // the update's time is the store's: ten times its memory bandwidth and compute shorten the
    // step; ten times the link's bandwidth leaves the update as it was
    let mut fast_store = m.clone();
    fast_store[t::STORE_MEMORY_BANDWIDTH] *= 10.0;
    fast_store[t::STORE_COMPUTE] *= 10.0;
    let e_fast = cpu::eval(&p, &fast_store);
    assert!(e_fast.step_time < e.step_time);
    assert!(e_fast.breakdown.other < e.breakdown.other);
    // twice the optimizer state: more work in the store, not one byte more over the link
    let mut w2 = w.clone();
    if let Task::Training(tr) = &mut w2.task {
        tr.optimizer_bytes *= 2.0;
    }
    let (p2, m2) = prepared(&s, &w2, Some(1));
    assert_eq!(link_bytes(&p, &m), link_bytes(&p2, &m2));
    let upd = |p: &Program, m: &Machine| {
        cpu::running(p, m)
            .ops(p)
            .find(|(_, o)| o.phase == Phase::Store)
            .unwrap()
            .1
            .weight_bytes
    };
    assert!(upd(&p2, &m2) > upd(&p, &m));
}

#[test]
fn a_model_that_fits_the_wafer_never_streams_and_updates_on_the_wafer() {
    let s = system(CS3);
    let w = workload("workloads/bert-large-mlperf.ron");
    let (p, m) = prepared(&s, &w, Some(1));
    let e = cpu::eval(&p, &m);
    assert!(e.feasible, "{:?}", e.reason());
    assert_eq!(e.weights_tier, Tier::Sram);
    assert!(cpu::running(&p, &m)
        .ops(&p)
        .all(|(_, o)| o.phase != Phase::Store));
}

#[test]
fn swarmx_replaces_the_gradient_all_reduce_between_systems() {
    let s = system(CS3_CLUSTER);
    let w = workload(PRETRAIN_8B);
    // data parallel as Cerebras runs it (a search would shard the state over the wafers' SRAM)
    let (p, m) = given(&s, &w, 16);
    let e = cpu::eval(&p, &m);
    assert!(e.feasible, "{:?}", e.reason());
    assert_eq!(e.weights_tier, Tier::External);
    // no all-reduce of gradients between the systems: the tree reduces them in the stream
    let running = cpu::running(&p, &m);
    let grads: Vec<_> = running
        .comms(&p)
        .map(|(_, c)| c)
        .filter(|c| c.role == Role::GradientReduction)
        .collect();
    assert!(!grads.is_empty(), "the tree's latency is charged");
    for c in &grads {
        assert_eq!(c.coeffs.out[0].bytes + c.coeffs.out[1].bytes, 0.0, "{c:?}");
        assert!(c.coeffs.out[1].latencies > 0.0);
    }
    // each system's link carries the stream once: per device, the bytes over the link are those
    // of one system's share of the batch
    let (p1, m1) = given(&s, &w, 1);
    let per_mb = |p: &Program, m: &Machine| link_bytes(p, m) / p.micro_batches;
    assert!((per_mb(&p, &m) - per_mb(&p1, &m1)).abs() <= 1e-9 * per_mb(&p1, &m1));
}

/// Average power at a boundary, from the CLI.
fn power(arch: &str, work: &str, boundary: &str) -> f64 {
    let out = tessera(&[
        "estimate",
        "--arch",
        arch,
        "--workload",
        work,
        "--power-boundary",
        boundary,
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["average_power_w"]
        .as_f64()
        .unwrap_or_else(|| panic!("{v}"))
}

#[test]
fn inference_charges_no_memoryx_power_unless_it_streams_from_memoryx() {
    let memoryx = system(CS3).weight_store.unwrap().power;
    assert!(memoryx > 0.0);
    // Llama 3.1 8B serving sits in the wafer's SRAM: from `rack` to `it` only the network's
    // share is added (none on one CS-3), never MemoryX
    let serve = "workloads/llama3.1-8b-serving.ron";
    let (rack, it) = (power(CS3, serve, "rack"), power(CS3, serve, "it"));
    assert!(it - rack < 0.5 * memoryx, "{rack} → {it}");
    // training streams from MemoryX: its power counts at `it`
    let (rack, it) = (
        power(CS3, PRETRAIN_8B, "rack"),
        power(CS3, PRETRAIN_8B, "it"),
    );
    assert!(it - rack >= memoryx * (1.0 - 1e-9), "{rack} → {it}");
}

#[test]
fn a_dojo_tile_checks_clean() {
    let out = tessera(&[
        "check",
        "--deny-warnings",
        DOJO,
        "architectures/parts/dojo-d1.ron",
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let d1 = std::fs::read_to_string("architectures/parts/dojo-d1.ron").unwrap();
    assert!(!d1.contains("fitted"));
}

#[test]
fn a_dojo_tile_trains_through_the_mesh_machinery() {
    let s = system(DOJO);
    assert!(s.device.mesh.is_some());
    let w = workload("workloads/bert-large-mlperf.ron");
    // 24 of its 25 dies: the batch of 768 and the 16 heads do not divide over 25
    let (p, m) = prepared(&s, &w, Some(24));
    let e = cpu::eval(&p, &m);
    assert!(e.feasible, "{:?}", e.reason());
    assert!(e.throughput > 0.0);
    assert_eq!(e.weights_tier, Tier::Sram, "a tile has SRAM only");
    // its matrix products move their tiles over the die's mesh
    assert!(p
        .comms
        .iter()
        .any(|c| c.mesh > 0.0 && c.coeffs.mesh.bytes > 0.0));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// More mesh link bandwidth or less hop latency never slows a training step on a wafer or a
    /// tile.
    #[test]
    fn a_faster_mesh_never_slows_a_training_step(
        dojo in any::<bool>(),
        bw in 1.0f64..20.0, lat in 0.05f64..1.0,
        bw0 in 0.01f64..10.0, lat0 in 0.1f64..100.0,
    ) {
        let (arch, work) = if dojo {
            (DOJO, "workloads/bert-large-mlperf.ron")
        } else {
            (CS3, PRETRAIN_8B)
        };
        let s = system(arch);
        let (p, mut m) = prepared(&s, &workload(work), Some(if dojo { 24 } else { 1 }));
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
fn a_resized_cluster_keeps_each_systems_share_of_memoryx() {
    // The iso-power fit halves and grows the 64-system cluster by whole systems: MemoryX's
    // servers (8.25 kW per system by its derivation, the update's compute and bandwidth) follow
    // the systems they feed, so each system's share is the same at any size; the capacity stays.
    let sys = system(CS3_CLUSTER);
    let ws = sys.weight_store.clone().unwrap();
    for nodes in [1, 32, 64, 128] {
        let s = engine::budget::resized(&sys, nodes);
        let r = s.weight_store.as_ref().unwrap();
        let share = |v: f64, d: u64| v / d as f64;
        approx::assert_relative_eq!(share(r.power, s.devices), share(ws.power, sys.devices));
        approx::assert_relative_eq!(share(r.compute, s.devices), share(ws.compute, sys.devices));
        approx::assert_relative_eq!(
            share(r.memory_bandwidth, s.devices),
            share(ws.memory_bandwidth, sys.devices)
        );
        approx::assert_relative_eq!(r.capacity, ws.capacity);
    }
}

/// Issue 42: the CS-3 cluster trains as Cerebras runs it (data parallel, the state streamed from
/// MemoryX) unless the run lifts its execution mode; lifted, the search is free to keep the
/// state in SRAM over a pipeline. Hand-checked: every layout the search may take has tp = pp =
/// cp = 1, and the placement puts the state in the store.
#[test]
fn the_cs3_cluster_trains_data_parallel_with_weights_streamed_unless_lifted() {
    let run = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "compare",
            "architectures/gb200-nvl72.ron",
            CS3_CLUSTER,
            "--workload",
            PRETRAIN_8B,
            "--power-budget",
            "1 MW",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let o = tessera(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).expect("json")
    };
    let vendor = run(&[]);
    let cs3 = &vendor["systems"][1];
    let m = &cs3["mapping"];
    assert_eq!(
        (m["tp"].as_u64(), m["pp"].as_u64(), m["cp"].as_u64()),
        (Some(1), Some(1), Some(1)),
        "{m}"
    );
    assert_eq!(m["dp"], cs3["devices"]);
    assert!(
        cs3["placement"]
            .as_str()
            .unwrap()
            .starts_with("state: external"),
        "{}",
        cs3["placement"]
    );
    assert!(cs3["execution_mode"]
        .as_str()
        .unwrap()
        .contains("weights streamed"));
    // the batch grew with the deployment, the same on both rows
    let gb = vendor["global_batch"].as_u64().unwrap();
    assert_eq!(vendor["global_batch_scaled_from"].as_u64(), Some(16));
    assert!(gb > 16 && gb <= 2048, "{gb}");
    for r in vendor["systems"].as_array().unwrap() {
        assert_eq!(r["global_batch"].as_u64(), Some(gb));
    }
    let free = run(&["--execution", "free"]);
    let cs3 = &free["systems"][1];
    assert!(cs3["execution_mode"].is_null());
    assert!(
        cs3["placement"]
            .as_str()
            .unwrap()
            .starts_with("state: sram"),
        "lifted, the 8B state fits 24 wafers' SRAM over a pipeline: {}",
        cs3["placement"]
    );
}

/// A model below the streaming threshold keeps the placement rule (Cerebras' pipeline
/// execution), and the mode's laws hold: the vendor mode never admits a layout the mode forbids.
#[test]
fn the_execution_mode_admits_only_its_dimensions() {
    use tessera::engine::candidates::{admits, candidates};
    let cluster = system(CS3_CLUSTER);
    let w = workload(PRETRAIN_8B);
    let all = candidates(&cluster, &w, 16);
    assert!(!all.is_empty());
    for m in &all {
        assert!(admits(&cluster.execution, m), "{m:?}");
        assert_eq!((m.tp, m.pp, m.cp, m.ep), (1, 1, 1, 1));
    }
    let mut free = cluster.clone();
    free.execution = Default::default();
    assert!(candidates(&free, &w, 64)
        .iter()
        .any(|m| m.pp > 1 || m.tp > 1));
    assert!(cluster.execution.streams(8e9));
    assert!(!cluster.execution.streams(1.1e8));
}

/// A `Streamed` mode needs a store that runs the update: a located error, not a silent mode.
#[test]
fn a_streamed_mode_without_a_store_that_updates_is_an_error() {
    let text = std::fs::read_to_string(common::root().join(CS3)).unwrap();
    let start = text.find("    weight_store: (").unwrap();
    let end = start + text[start..].find("\n    ),\n").unwrap() + "\n    ),\n".len();
    let cut = format!("{}{}", &text[..start], &text[end..]);
    let dir = common::scratch_dir("stream-mode");
    std::fs::create_dir_all(dir.join("parts")).unwrap();
    for p in ["parts/wse3-cs3.ron", "parts/cs3-chassis.ron"] {
        std::fs::copy(common::root().join("architectures").join(p), dir.join(p)).unwrap();
    }
    let f = dir.join("cs3.ron");
    std::fs::write(&f, cut).unwrap();
    let o = tessera(&["check", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("`Streamed` needs a `weight_store`") && err.contains("cs3.ron:"),
        "{err}"
    );
}
