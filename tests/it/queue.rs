//! Serving at a percentile under random arrivals (issue 13, MLPerf's server scenario): the
//! prefill queue (M/D/1, Pollaczek–Khinchine mean, exponential tail) and the round-to-round
//! spread of a request's time per output token, `engine::serve::tail`. Laws: the tail is never below the
//! steady state's figures (that a looser percentile target never lowers the chosen throughput
//! is `looser_slo_never_lowers_best_throughput` in tests/it/serving.rs); at vanishing load the tail's time to first token tends to the prefill.
//! Hand-checked: the M/D/1 wait against its closed form, the percentile vocabulary.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use proptest::prelude::*;
use tessera::engine::{self, serve, MappingChoice, Objective};
use tessera::model::serving::{Concurrency, Load, Slo};
use tessera::model::system::{load_system, System};
use tessera::model::workload::{load_workload, Task, Workload};

use crate::common::CrateFs;

fn inputs() -> (System, Workload) {
    let s = load_system("architectures/dgx-h100.ron", &CrateFs)
        .value
        .expect("system");
    let w = load_workload("workloads/llama3.1-8b-serving.ron", &CrateFs)
        .value
        .expect("workload");
    (s, w)
}

fn with_load(w: &Workload, load: Load) -> Workload {
    let mut w = w.clone();
    if let Task::Inference(i) = &mut w.task {
        i.load = load;
    }
    w
}

#[test]
fn percentile_vocabulary() {
    let s = Slo::parse("p99 ttft<=2s,tpot<=200ms").unwrap();
    assert_eq!(s.percentile, Some(99.0));
    assert_eq!(s.quantile(), Some(0.99));
    assert_eq!(s.ttft_s, Some(2.0));
    assert_eq!(s.describe(), "p99 ttft<=2.00 s,tpot<=200 ms");
    assert_eq!(Slo::parse(&s.describe()).unwrap(), s);
    assert_eq!(
        Slo::parse("p99.9, tpot<=40ms").unwrap().percentile,
        Some(99.9)
    );
    // without a percentile: the mean, as before
    let m = Slo::parse("ttft<=2s,tpot<=200ms").unwrap();
    assert_eq!(m.percentile, None);
    assert_eq!(m.describe(), "ttft<=2.00 s,tpot<=200 ms");
    for bad in [
        "p100 ttft<=2s",
        "p0 tpot<=1s",
        "p99",
        "p99 ttft<=2s,p90 tpot<=1s",
    ] {
        let e = Slo::parse(bad).unwrap_err();
        assert!(e.contains("hint"), "{bad}: {e}");
    }
}

#[test]
fn md1_wait_matches_its_closed_form() {
    // ρ = 0.5, s = 1 s: mean wait ρ s / (2 (1 − ρ)) = 0.5 s; P(W > t) = ρ e^{−ρ t / W}:
    // the 99th percentile is (W/ρ) ln(ρ / 0.01) = ln 50 s
    let t = serve::md1_wait(0.5, 1.0, 0.99);
    assert!((t - 50f64.ln()).abs() < 1e-12, "{t}");
    // fewer than 1 % wait at all: the 99th percentile waits nothing
    assert_eq!(serve::md1_wait(0.005, 1.0, 0.99), 0.0);
    // saturated
    assert!(serve::md1_wait(1.0, 1.0, 0.99).is_infinite());
    // Φ⁻¹(0.99) = 2.326 (A&S 26.2.23 to 4.5e-4)
    assert!((serve::normal_quantile(0.99) - 2.326348).abs() < 5e-4);
    assert!(serve::normal_quantile(0.5).abs() < 5e-4);
}

#[test]
fn server_target_at_p99_binds_where_the_mean_does_not() {
    // Llama 3.1 8B on a DGX H100, as many requests as meet the target: the p99 target is the
    // stricter one, so it never serves more
    let (s, w) = inputs();
    let run = |slo: &str| {
        let wl = with_load(
            &w,
            Load {
                concurrency: Concurrency::Max,
                slo: Slo::parse(slo).unwrap(),
            },
        );
        engine::estimate(&s, &wl, &MappingChoice::Auto(Objective::Time), None)
    };
    let mean = run("ttft<=200ms,tpot<=30ms");
    let p99 = run("p99 ttft<=200ms,tpot<=30ms");
    assert_eq!(p99.slo_met, Some(true));
    assert!(p99.ttft_p99_s.unwrap() <= 0.2 && p99.tpot_p99_s.unwrap() <= 0.03);
    assert!(
        p99.throughput_per_s.unwrap() <= mean.throughput_per_s.unwrap() * (1.0 + 1e-12),
        "{:?} > {:?}",
        p99.throughput_per_s,
        mean.throughput_per_s
    );
    assert!(p99.arrival_rate_per_s.unwrap() > 0.0 && p99.utilization.unwrap() < 1.0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, .. ProptestConfig::default() })]

    /// The tail is never below the steady state's mean figures (TTFT with evenly spaced joins,
    /// the round time), in the model and in estimates.
    #[test]
    fn p99_is_at_least_the_mean(prefill in 1e-4f64..2.0, tpot in 1e-3f64..0.3, slope in 0.0f64..1e-3,
                                b in 1.0f64..2048.0, out in 1u64..2000, stages in 1u64..8, c in 1u64..512) {
        let t = serve::tail(prefill, stages, tpot, slope, b, out, 0.99);
        prop_assert!(t.ttft_s >= serve::ttft(prefill, tpot, b));
        prop_assert!(t.tpot_s >= tpot);
        let (s, w) = inputs();
        let wl = with_load(&w, Load { concurrency: Concurrency::Total(c), ..Load::default() });
        let e = engine::estimate(&s, &wl, &MappingChoice::Auto(Objective::Time), None);
        if e.feasible {
            // null only where the prefill queue is saturated
            if let Some(t99) = e.ttft_p99_s {
                prop_assert!(t99 >= e.ttft_s.unwrap());
            } else {
                prop_assert!(e.utilization.unwrap() >= 1.0);
            }
            prop_assert!(e.tpot_p99_s.unwrap() >= e.tpot_s.unwrap());
        }
    }

    /// At vanishing load (one request per instance, ever rarer arrivals) the tail's time to
    /// first token tends to the prefill alone.
    #[test]
    fn vanishing_load_p99_ttft_is_the_prefill(prefill in 1e-4f64..2.0, tpot in 1e-3f64..0.3, stages in 1u64..8) {
        let mut last = f64::INFINITY;
        for out in [10u64, 1_000, 100_000, 10_000_000] {
            let t = serve::tail(prefill, stages, tpot, 0.0, 1.0, out, 0.99);
            let excess = t.ttft_s - prefill;
            prop_assert!(excess >= 0.0 && excess <= last);
            last = excess;
        }
        prop_assert!(last <= 1e-9 * prefill.max(1.0), "{last}");
    }
}
