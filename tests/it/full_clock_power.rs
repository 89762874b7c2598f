//! One die, one energy per FLOP: a device file's `full_clock_power` (what its silicon draws flat
//! out where a package rates it lower) sets the energy per FLOP derived from power, and the TDP
//! throttles the device under full load. The shipped MI300X is the MI325X's die at 750 W.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a test: may use the disk

use proptest::prelude::*;
use tessera::engine::cpu::eval;
use tessera::engine::lower::lower;
use tessera::engine::machine::{energy_rules, machine};
use tessera::engine::paths::{derive_energy, edit_system};
use tessera::engine::table as t;
use tessera::model::mapping::{Mapping, Recompute};
use tessera::model::precision::Precision;
use tessera::model::system::{load_system, System};
use tessera::model::workload::load_workload;

use crate::common;

fn shipped(file: &str) -> System {
    let s = load_system(file, &common::CrateFs);
    assert!(s.diagnostics.is_empty(), "{:?}", s.diagnostics);
    s.value.unwrap()
}

/// The MI300X and the MI325X share a die: their derived energy per FLOP is the same at every
/// precision both run, though one is rated 750 W and the other 1000 W.
#[test]
fn the_mi300x_spends_the_mi325x_dies_energy_per_flop() {
    let (a, b) = (
        shipped("architectures/mi300x-node.ron"),
        shipped("architectures/mi325x-node.ron"),
    );
    assert_eq!(a.device.tdp, 750.0);
    assert_eq!(a.device.rated_tdp, 1000.0);
    assert_eq!(b.device.rated_tdp, b.device.tdp);
    // a quarter of the die's full-clock power, as the MI325X takes it
    assert_eq!(a.device.idle_power, b.device.idle_power);
    let (ma, mb) = (machine(&a, 8), machine(&b, 8));
    for p in [Precision::Fp8, Precision::Bf16] {
        let (ea, eb) = (
            ma[t::ENERGY_PER_FLOP + p.index()],
            mb[t::ENERGY_PER_FLOP + p.index()],
        );
        assert!(ea > 0.0);
        assert!((ea / eb - 1.0).abs() < 1e-12, "{p:?}: {ea} vs {eb}");
    }
    // a device that states none draws its TDP flat out, as before
    let h = shipped("architectures/dgx-h100.ron");
    assert_eq!(h.device.rated_tdp, h.device.tdp);
}

fn offline(arch: &str, set: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "estimate",
        "--arch",
        arch,
        "--workload",
        "workloads/llama2-70b-mlperf-inference-b2048.ron",
        "--concurrency",
        "max",
        "--format",
        "json",
    ];
    for s in set {
        args.extend(["--set", s]);
    }
    let out = common::tessera_ok(&args);
    common::stdout_json(&args, &out)
}

/// Under MLPerf's Llama 2 70B Offline load the MI300X's die wants more than its 750 W: the limit
/// throttles it, it draws its limit, and what it would have drawn is what the same device draws
/// with its limit lifted to its full-clock power, where it runs faster at full clock.
#[test]
fn the_lower_rating_throttles_the_same_die() {
    let arch = "architectures/mi300x-node.ron";
    let capped = offline(arch, &[]);
    let free = offline(arch, &["device.tdp=1000 W"]);
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k}: {v}"));
    assert_eq!(capped["power_limited"], true, "{capped}");
    assert_eq!(free["power_limited"], false, "{free}");
    assert!((f(&capped, "device_power_w") - 750.0).abs() < 1e-6);
    assert!(f(&capped, "throttle") < 1.0);
    let (want, drew) = (
        f(&capped, "demanded_device_power_w"),
        f(&free, "device_power_w"),
    );
    assert!((want / drew - 1.0).abs() < 1e-9, "{want} vs {drew}");
    assert!(drew > 750.0 && drew <= 1000.0 + 1e-6, "{drew}");
    assert!(f(&capped, "throughput_per_s") < f(&free, "throughput_per_s"));
}

/// The figure is held where it enters: in a device file (at its line) and through `--set`, a
/// full-clock power below the idle power is an error, as is one set where nothing derives from
/// it; `show` reports it beside the TDP.
#[test]
fn a_full_clock_power_below_idle_is_an_error_wherever_it_enters() {
    let text = std::fs::read_to_string(common::root().join("architectures/parts/mi300x.ron"))
        .unwrap()
        .replace(
            "full_clock_power: \"1000 W @assumed\"",
            "full_clock_power: \"100 W @assumed\"",
        );
    let line = 1 + text
        .lines()
        .position(|l| l.contains("full_clock_power: \"100 W"))
        .expect("the MI300X states its full-clock power");
    let file = common::scratch_dir("full-clock").join("mi300x.ron");
    std::fs::write(&file, text).unwrap();
    common::refused(
        &["check", file.to_str().unwrap()],
        &[
            &format!("mi300x.ron:{line}:"),
            "`idle_power` (250 W) is above `full_clock_power` (100 W)",
        ],
    );
    common::refused(
        &[
            "estimate",
            "--arch",
            "architectures/mi300x-node.ron",
            "--workload",
            "workloads/llama2-70b-mlperf-inference-b2048.ron",
            "--set",
            "device.full_clock_power=100 W",
        ],
        &[
            "--set device.full_clock_power=100 W",
            "is below the device's idle power (250 W)",
        ],
    );

    // where the file states every energy per FLOP, the figure would move nothing: refused
    common::refused(
        &[
            "estimate",
            "--arch",
            "architectures/northpole-16.ron",
            "--workload",
            "workloads/granite-3b-northpole.ron",
            "--set",
            "device.full_clock_power=100 W",
        ],
        &["`device.full_clock_power` moves nothing here"],
    );

    let args = ["show", "architectures/mi300x-node.ron", "--format", "json"];
    let v = common::stdout_json(&args, &common::tessera_ok(&args));
    assert_eq!(v["device_tdp_w"], 750.0);
    assert_eq!(v["device_full_clock_power_w"], 1000.0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The law the figure obeys: under the same 750 W limit, silicon that draws more flat out
    /// (more energy per FLOP) never makes a training step shorter, and no device draws above its
    /// limit, whatever the figure (below the limit too, where the limit never binds).
    #[test]
    fn hungrier_silicon_under_one_limit_is_never_faster(
        f in 300.0f64..1500.0, more in 0.0f64..1.0,
    ) {
        let base = shipped("architectures/mi300x-node.ron");
        let wl = load_workload("workloads/llama3.1-8b-pretrain.ron", &common::CrateFs);
        prop_assert!(wl.diagnostics.is_empty());
        let w = wl.value.unwrap();
        let m = Mapping { dp: 8, recompute: Recompute::Selective, ..Mapping::single() };
        let step = |full: f64| {
            let mut sys = base.clone();
            edit_system(&mut sys, "device.full_clock_power", full).unwrap();
            derive_energy(&mut sys, energy_rules(&base).rederive);
            let e = eval(&lower(&sys, &w, &m, 8).unwrap(), &machine(&sys, 8));
            assert!(e.feasible);
            assert!(e.device_power <= 750.0 * (1.0 + 1e-9), "{} W", e.device_power);
            e.step_time
        };
        let (lo, hi) = (step(f), step(f * (1.0 + more)));
        prop_assert!(hi >= lo * (1.0 - 1e-12), "{hi} < {lo}");
    }
}
