//! Cost and carbon (`engine::cost`, `docs/cost.md`): an estimate's price worked by hand from the
//! shipped DGX H100's `cost` block, the laws its parts obey (capital scales with the price and
//! inversely with life × utilisation, energy with the energy price, carbon with the grid), cost
//! unknown (never 0) where a file has no capital, `--set cost.*`, a located error for a bad money
//! string, and `compare --budget` holding every system within an equal capital.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common;

use crate::common::CrateFs;
use proptest::prelude::*;
use serde_json::Value;
use tessera::engine::{estimate, Estimate, MappingChoice};
use tessera::model::system::{cost::set_field, load_system, System};
use tessera::model::workload::{load_workload, Workload};

/// Li et al.'s U.S. average grid water intensity, 3.142 L/kWh (written so that no literal reads
/// as an approximation of π).
const GRID_WATER: f64 = 3142.0 / 1000.0;

fn sys(path: &str) -> System {
    load_system(path, &CrateFs).value.expect("loads")
}

fn work(path: &str) -> Workload {
    load_workload(path, &CrateFs).value.expect("loads")
}

fn serve(s: &System) -> Estimate {
    let w = work("workloads/llama3.1-8b-serving.ron");
    let choice = match &w.mapping {
        Some(m) => MappingChoice::Given(m.clone()),
        None => MappingChoice::Auto(tessera::engine::Objective::Time),
    };
    estimate(s, &w, &choice, Some(8))
}

#[test]
fn dgx_h100_serving_is_priced_by_hand() {
    let s = sys("architectures/dgx-h100.ron");
    let e = serve(&s);
    assert!(e.feasible, "{:?}", e.reason);
    let c = e.cost.as_ref().expect("priced");
    assert_eq!(c.per, "1M tokens");
    // one node: 8 GPUs at $30k and the node at $60k, and the facility's $11.7M per MW of critical
    // load (Cushman & Wakefield 2025) for the node's rated IT power, written off over 5 Julian
    // years at 80 %
    let mut it = s.clone();
    it.power_boundary = tessera::vocab::PowerBoundary::It;
    let rated_it = serve(&it).rated_power_w.expect("rated power");
    // eight 700 W GPUs and their host, at most the DGX H100's 10.2 kW
    assert!(rated_it > 8.0 * 700.0 && rated_it <= 10.2e3, "{rated_it}");
    let deployed = 8.0 * 30e3 + 60e3 + 11.7 * rated_it;
    let got = c.deployed_capital_usd.unwrap();
    assert!(
        (got - deployed).abs() <= 1e-9 * deployed,
        "{got} vs {deployed}"
    );
    let paid = 5.0 * 365.25 * 86400.0 * 0.8;
    let time = 1e6 / e.throughput_per_s.unwrap();
    assert!((c.time_s - time).abs() <= 1e-12 * time);
    let capital = deployed / paid * time;
    assert!((c.capital_usd.unwrap() - capital).abs() <= 1e-9 * capital);
    // the energy at the facility boundary, at EIA's 2023 industrial price
    let kwh = e.energy_per_unit_j.unwrap() * 1e6 / 3.6e6;
    assert!((c.energy_kwh - kwh).abs() <= 1e-12 * kwh);
    assert!((c.energy_usd - kwh * 0.0806).abs() <= 1e-9 * c.energy_usd);
    let total = e.cost_per_unit_usd.unwrap();
    assert!((total - (capital + kwh * 0.0806)).abs() <= 1e-9 * total);
    // rented: 8 GPUs at $2.00 per GPU-hour
    let rented = 8.0 * 2.0 / 3600.0 * time;
    assert!((c.rented_usd.unwrap() - rented).abs() <= 1e-9 * rented);
    // carbon: operational only (no embodied figure), at EIA's 2023 US average
    assert!((e.carbon_kg_co2e.unwrap() - kwh * 0.366).abs() <= 1e-9 * kwh);
    assert_eq!(c.embodied_kg_co2e, None);
    assert!(c.carbon_scope.starts_with("operational only"));
    // water (Li et al.'s U.S. averages): on site the IT energy (the facility's over the file's
    // PUE, 1.3) at 0.55 L/kWh, off site the energy drawn at 3.142 L/kWh
    assert_eq!(s.pue, 1.3);
    let onsite = kwh / 1.3 * 0.55;
    let offsite = kwh * GRID_WATER;
    assert!((c.water_onsite_l - onsite).abs() <= 1e-9 * onsite);
    assert!((c.water_offsite_l - offsite).abs() <= 1e-9 * offsite);
    assert!((e.water_l.unwrap() - (onsite + offsite)).abs() <= 1e-9 * offsite);
    assert_eq!(
        (c.wue_l_per_kwh, c.grid_water_l_per_kwh),
        (0.55, GRID_WATER)
    );
    // energy price, grid intensity, WUE and grid water: the four defaults, each with its source
    assert_eq!(c.defaults.len(), 4, "{:?}", c.defaults);
    assert!(c.defaults.iter().any(|d| d.contains("Making AI Less")));
}

/// At a boundary inside the IT the energy counted is the IT energy: on-site water is that at the
/// WUE, with no PUE taken off; at the facility boundary the PUE comes off first.
#[test]
fn water_counts_the_it_energy_on_site_at_every_boundary() {
    use tessera::engine::cost::water_of;
    use tessera::vocab::PowerBoundary;
    let mut s = sys("architectures/dgx-h100.ron");
    let e = 3.6e9; // 1,000 kWh
    s.power_boundary = PowerBoundary::Facility;
    let (on, off) = water_of(&s, e);
    assert!((on - 1000.0 / 1.3 * 0.55).abs() < 1e-9 && (off - 3142.0).abs() < 1e-9);
    s.power_boundary = PowerBoundary::It;
    let (on, off) = water_of(&s, e);
    assert!((on - 550.0).abs() < 1e-9 && (off - 3142.0).abs() < 1e-9);
    set_field(&mut s.economics, "wue", "0 L/kWh").unwrap();
    assert_eq!(water_of(&s, e).0, 0.0);
}

#[test]
fn a_system_without_capital_reports_cost_unknown_with_its_reason() {
    let s = sys("architectures/tpu-v5p-pod.ron");
    assert!(!s.economics.has_capital());
    let w = work("workloads/llama3.1-8b-serving.ron");
    let e = estimate(
        &s,
        &w,
        &MappingChoice::Auto(tessera::engine::Objective::Time),
        Some(8),
    );
    assert!(e.feasible, "{:?}", e.reason);
    assert_eq!(e.cost_per_unit_usd, None);
    let c = e.cost.as_ref().unwrap();
    assert!(c
        .unknown_reason
        .as_ref()
        .unwrap()
        .contains("gives no capital cost"));
    assert_eq!(c.capital_usd, None);
    // energy and carbon are still known
    assert!(c.energy_usd > 0.0 && e.carbon_kg_co2e.unwrap() > 0.0);
}

#[test]
fn embodied_carbon_is_written_off_like_capital() {
    let s = sys("architectures/dgx-a100.ron");
    let w = work("workloads/llama2-13b-pretrain.ron");
    let choice = MappingChoice::Given(w.mapping.clone().unwrap());
    let e = estimate(&s, &w, &choice, None);
    assert!(e.feasible, "{:?}", e.reason);
    let c = e.cost.as_ref().unwrap();
    assert_eq!(c.per, "run");
    let paid = 5.0 * 365.25 * 86400.0 * 0.8;
    let embodied = 8.0 * 318.0 / paid * e.time_to_train_s.unwrap();
    assert!((c.embodied_kg_co2e.unwrap() - embodied).abs() <= 1e-9 * embodied);
    let total = c.operational_kg_co2e + embodied;
    assert!((e.carbon_kg_co2e.unwrap() - total).abs() <= 1e-9 * total);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    /// Capital share ∝ price / (life × utilisation); energy share ∝ energy price; operational
    /// carbon ∝ grid intensity; time, energy and throughput untouched by any of them.
    #[test]
    fn the_price_scales_as_its_figures(k in 0.1f64..10.0, life in 1.0f64..10.0, util in 0.05f64..1.0) {
        let base = sys("architectures/dgx-h100.ron");
        let e0 = serve(&base);
        let mut s = base.clone();
        set_field(&mut s.economics, "device", &format!("{} USD", 30e3 * k)).unwrap();
        set_field(&mut s.economics, "node", &format!("{} USD", 60e3 * k)).unwrap();
        set_field(&mut s.economics, "facility", &format!("{} $/W", 11.7 * k)).unwrap();
        set_field(&mut s.economics, "life", &format!("{life} years")).unwrap();
        set_field(&mut s.economics, "utilization", &format!("{util}")).unwrap();
        set_field(&mut s.economics, "energy_price", &format!("{} $/kWh", 0.0806 * k)).unwrap();
        set_field(&mut s.economics, "grid_intensity", &format!("{} kg/kWh", 0.366 * k)).unwrap();
        set_field(&mut s.economics, "wue", &format!("{} L/kWh", 0.55 * k)).unwrap();
        set_field(&mut s.economics, "water_intensity", &format!("{} L/kWh", GRID_WATER * k)).unwrap();
        let e1 = serve(&s);
        prop_assert_eq!(e0.throughput_per_s, e1.throughput_per_s);
        prop_assert_eq!(e0.energy_per_unit_j, e1.energy_per_unit_j);
        let (c0, c1) = (e0.cost.unwrap(), e1.cost.unwrap());
        let want = c0.capital_usd.unwrap() * k * (5.0 * 0.8) / (life * util);
        prop_assert!((c1.capital_usd.unwrap() - want).abs() <= 1e-9 * want);
        prop_assert!((c1.energy_usd - c0.energy_usd * k).abs() <= 1e-9 * c1.energy_usd);
        prop_assert!((c1.operational_kg_co2e - c0.operational_kg_co2e * k).abs() <= 1e-9 * c1.operational_kg_co2e);
        prop_assert!((c1.water_onsite_l - c0.water_onsite_l * k).abs() <= 1e-9 * c1.water_onsite_l);
        prop_assert!((c1.water_offsite_l - c0.water_offsite_l * k).abs() <= 1e-9 * c1.water_offsite_l);
        prop_assert!(c1.defaults.is_empty());
    }

    /// Water and carbon scale with energy: on one system, any unit of work (serving at any
    /// number of devices, or a training run) emits and consumes the same per kWh it draws, and
    /// twice the energy is twice of each.
    #[test]
    fn water_and_carbon_scale_with_energy(devices in prop::sample::select(vec![1u64, 2, 4, 8]), k in 0.01f64..100.0) {
        use tessera::engine::cost::water_of;
        let s = sys("architectures/dgx-h100.ron");
        let w = work("workloads/llama3.1-8b-serving.ron");
        let choice = MappingChoice::Auto(tessera::engine::Objective::Time);
        let e = estimate(&s, &w, &choice, Some(devices));
        prop_assume!(e.feasible);
        let c = e.cost.as_ref().unwrap();
        let per_kwh_water = e.water_l.unwrap() / c.energy_kwh;
        let per_kwh_carbon = e.carbon_kg_co2e.unwrap() / c.energy_kwh;
        prop_assert!((per_kwh_water - (0.55 / 1.3 + GRID_WATER)).abs() <= 1e-9);
        prop_assert!((per_kwh_carbon - 0.366).abs() <= 1e-9);
        let j = c.energy_kwh * 3.6e6;
        let (on, off) = water_of(&s, j);
        let (on_k, off_k) = water_of(&s, k * j);
        prop_assert!((on_k - k * on).abs() <= 1e-9 * on_k.max(1e-300));
        prop_assert!((off_k - k * off).abs() <= 1e-9 * off_k.max(1e-300));
    }
}

fn json(args: &[&str]) -> Value {
    let out = common::tessera(args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn set_overrides_the_energy_price_and_a_bad_one_is_named() {
    let run = [
        "estimate",
        "--arch",
        "architectures/dgx-h100.ron",
        "--workload",
        "workloads/llama3.1-8b-serving.ron",
        "--format",
        "json",
    ];
    let base = json(&run);
    let mut args = run.to_vec();
    args.extend(["--set", "cost.energy_price=$0.1612/kWh"]);
    let twice = json(&args);
    let e0 = base["cost"]["energy_usd"].as_f64().unwrap();
    let e1 = twice["cost"]["energy_usd"].as_f64().unwrap();
    assert!((e1 / e0 - 2.0).abs() < 1e-9, "{e0} {e1}");
    let mut bad = run.to_vec();
    bad.extend(["--set", "cost.energy_price=0.16 W"]);
    let out = common::tessera(&bad);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cost.energy_price") && err.contains("a price of energy"),
        "{err}"
    );
}

/// `--set cost.wue` and `cost.water_intensity` override the defaults for one run (the defaults
/// then drop out of `cost.defaults`); a carbon intensity where a water intensity belongs is
/// refused with the field named.
#[test]
fn set_overrides_the_water_intensities_and_a_bad_one_is_named() {
    let run = [
        "estimate",
        "--arch",
        "architectures/dgx-h100.ron",
        "--workload",
        "workloads/llama3.1-8b-serving.ron",
        "--format",
        "json",
    ];
    let base = json(&run);
    let mut args = run.to_vec();
    args.extend([
        "--set",
        "cost.wue=1.1 L/kWh",
        "--set",
        "cost.water_intensity=0 L/kWh",
    ]);
    let v = json(&args);
    let (b, c) = (&base["cost"], &v["cost"]);
    let on = |x: &Value| x["water_onsite_l"].as_f64().unwrap();
    assert!((on(c) / on(b) - 2.0).abs() < 1e-9, "{} {}", on(b), on(c));
    assert_eq!(c["water_offsite_l"], 0.0);
    assert_eq!(v["water_l"].as_f64().unwrap(), on(c));
    let defaults = c["defaults"].as_array().unwrap();
    assert!(
        !defaults.iter().any(|d| d.as_str().unwrap().contains("WUE")),
        "{defaults:?}"
    );
    let mut bad = run.to_vec();
    bad.extend(["--set", "cost.water_intensity=3 kg/kWh"]);
    let out = common::tessera(&bad);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cost.water_intensity") && err.contains("a water intensity"),
        "{err}"
    );
}

#[test]
fn a_bad_money_string_in_a_file_is_a_located_error() {
    let text = std::fs::read_to_string(common::root().join("architectures/dgx-h100.ron"))
        .unwrap()
        .replace(
            "device: \"$30k @h100-price\"",
            "device: \"30 kW @h100-price\"",
        )
        .replace("life: \"5 years @hyperscale-life\",", "");
    let mut fs = tessera::model::system::MemFs::default();
    fs.0.insert("s.ron".into(), text.into_bytes());
    for part in ["h100-sxm.ron", "dgx-h100-node.ron"] {
        let p = format!("architectures/parts/{part}");
        fs.0.insert(
            format!("parts/{part}"),
            std::fs::read(common::root().join(p)).unwrap(),
        );
    }
    let l = load_system("s.ron", &fs);
    let msgs: Vec<String> = l.diagnostics.iter().map(|d| format!("{d:?}")).collect();
    let all = msgs.join("\n");
    assert!(all.contains("an amount of money"), "{all}");
    assert!(all.contains("without the period"), "{all}");
}

#[test]
fn compare_budget_holds_every_system_to_the_same_capital() {
    let c = json(&[
        "compare",
        "architectures/dgx-h100.ron",
        "architectures/dgx-b200.ron",
        "architectures/tpu-v5p-pod.ron",
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
        "--budget",
        "$2M",
        "--format",
        "json",
    ]);
    assert_eq!(c["budget_usd"].as_f64(), Some(2e6));
    let rows = c["systems"].as_array().unwrap();
    // H100: $300k a node, so 6 nodes; B200: $515k a node, so 3
    for (row, nodes) in rows.iter().zip([6u64, 3]) {
        assert!(row["feasible"].as_bool().unwrap(), "{row}");
        let capital = row["cost"]["deployed_capital_usd"].as_f64().unwrap();
        assert!(capital <= 2e6, "{capital}");
        assert!(row["devices"].as_u64().unwrap() <= nodes * 8, "{row}");
    }
    // a system without capital figures cannot be held to a capital budget: infeasible, why said
    assert_eq!(rows[2]["feasible"], Value::Bool(false));
    assert_eq!(rows[2]["reason_code"], "cost_budget");
}

/// The serving curve in dollars: a priced line per system with capital figures on the left panel,
/// a carbon line per system on the right, a point per feasible concurrency on each, and a note
/// naming the system without a cost.
#[test]
fn the_cost_curve_draws_priced_and_unpriced_systems() {
    let w = work("workloads/llama3.1-8b-serving.ron");
    let choice = MappingChoice::Auto(tessera::engine::Objective::Time);
    let curves: Vec<_> = [
        "architectures/dgx-h100.ron",
        "architectures/tpu-v5p-pod.ron",
    ]
    .iter()
    .map(|p| tessera::engine::curve::curve(&sys(p), &w, &choice, Some(8), 64))
    .collect();
    let mut buf = Vec::new();
    let size = tessera::plot::Size {
        width: 800,
        height: 500,
    };
    tessera::plot::cost::cost_curve(&curves, size, &mut buf).unwrap();
    let svg = String::from_utf8(buf).unwrap();
    let feasible = |i: usize| curves[i].points.iter().filter(|e| e.feasible).count();
    let priced = curves[0]
        .points
        .iter()
        .filter(|e| e.feasible && e.cost_per_unit_usd.is_some())
        .count();
    assert!(priced > 1 && feasible(1) > 1);
    // a cost and a carbon line for the H100, a carbon line only for the unpriced TPU
    assert_eq!(svg.matches(r#"class="series""#).count(), 3);
    // H100 points on both panels, TPU points on the carbon panel only
    assert_eq!(
        svg.matches(r#"data-system="0""#).count(),
        2 * priced,
        "{svg}"
    );
    assert_eq!(svg.matches(r#"data-system="1""#).count(), feasible(1));
    assert!(svg.contains("cost unknown (no capital figures)"));
    assert!(svg.contains("TPU"), "the note names the unpriced system");
}
