//! Goodput at scale (`engine::goodput`): the laws of the expected-time model as properties, the
//! checkpoint interval against a brute-force scan, and the shipped H100 cluster's goodput by
//! hand through the CLI's JSON.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a test: may use the disk

use crate::common;

use crate::common::tessera;
use proptest::prelude::*;
use serde_json::Value;
use tessera::engine::goodput::{interval_of, optimal_interval, wall_factor, Inputs};
use tessera::model::reliability::Interval;

fn inputs(rate: f64, write: f64, restart: f64, straggler: f64, interval: Interval) -> Inputs {
    Inputs {
        rate_per_s: rate,
        write_s: write,
        restart_s: restart,
        straggler,
        interval,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Goodput is in (0, 1]; more failures never shorten the expected time to train, at any
    /// interval (stated or optimal); a slower checkpoint or restart never either.
    #[test]
    fn more_failures_never_shorten_time_to_train(
        mtbf_h in 0.05f64..1000.0, more in 1.0f64..20.0,
        write in 0.0f64..3600.0, restart in 0.0f64..7200.0,
        straggler in 0.0f64..0.5, every in prop::option::of(1.0f64..1e5),
    ) {
        let rate = 1.0 / (mtbf_h * 3600.0);
        let interval = every.map_or(Interval::Auto, Interval::Every);
        let a = inputs(rate, write, restart, straggler, interval);
        let b = Inputs { rate_per_s: rate * more, ..a };
        let fa = wall_factor(&a, interval_of(&a).0);
        let fb = wall_factor(&b, interval_of(&b).0);
        let goodput = 1.0 / fa;
        prop_assert!(goodput > 0.0 && goodput <= 1.0, "goodput {goodput}");
        prop_assert!(fb >= fa * (1.0 - 1e-12), "{fb} < {fa}");
        let c = Inputs { write_s: write * more + 1.0, restart_s: restart * more + 1.0, ..a };
        prop_assert!(wall_factor(&c, interval_of(&c).0) >= fa * (1.0 - 1e-12));
        // no failures: only checkpoints and stragglers cost anything
        let none = Inputs { rate_per_s: 0.0, ..a };
        prop_assert!(wall_factor(&none, interval_of(&none).0) <= fa * (1.0 + 1e-12));
    }

    /// Past the optimum a longer checkpoint interval never helps, and short of it a shorter one
    /// never does: the expected time is unimodal in the interval, its minimum at `auto`'s.
    #[test]
    fn a_longer_interval_past_the_optimum_never_helps(
        mtbf_h in 0.05f64..1000.0, write in 0.01f64..3600.0, restart in 0.0f64..3600.0,
        straggler in 0.0f64..0.5, a in 1.0f64..50.0, b in 1.0f64..50.0,
    ) {
        let rate = 1.0 / (mtbf_h * 3600.0);
        let i = inputs(rate, write, restart, straggler, Interval::Auto);
        let best = optimal_interval(rate, write);
        let (near, far) = (a.min(b), a.max(b));
        let f = |tau: f64| wall_factor(&i, tau);
        prop_assert!(f(best * far) >= f(best * near) * (1.0 - 1e-12), "past: {far} beats {near}");
        prop_assert!(f(best / far) >= f(best / near) * (1.0 - 1e-12), "short: {far} beats {near}");
        prop_assert!(f(best * near) >= f(best) * (1.0 - 1e-12));
    }

    /// `auto` minimises the modelled expected time: no interval of a fine log-spaced scan from
    /// a thousandth to a thousand times it does better, and Young/Daly's √(2δM) comes within
    /// 1 % of it where a checkpoint takes under a hundredth of the MTBF.
    #[test]
    fn optimal_interval_beats_a_brute_force_scan(
        mtbf_h in 0.05f64..1000.0, write in 0.01f64..3600.0, restart in 0.0f64..3600.0,
    ) {
        let (m, rate) = (mtbf_h * 3600.0, 1.0 / (mtbf_h * 3600.0));
        let i = inputs(rate, write, restart, 0.0, Interval::Auto);
        let best = optimal_interval(rate, write);
        let at_best = wall_factor(&i, best);
        for k in 0..=3000 {
            let tau = best * 10f64.powf(-3.0 + 6.0 * k as f64 / 3000.0);
            prop_assert!(wall_factor(&i, tau) >= at_best * (1.0 - 1e-12), "τ {tau} beats {best}");
        }
        if write < 0.01 * m {
            let young = (2.0 * write * m).sqrt();
            prop_assert!(wall_factor(&i, young) <= at_best * 1.01);
        }
    }
}

fn estimate(args: &[&str]) -> Value {
    let mut all = vec!["estimate", "--format", "json"];
    all.extend_from_slice(args);
    let out = tessera(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// Llama 3.1 405B on the 16,384 H100 of Meta's cluster, by hand: 405.85e9 parameters × (1 byte of
/// FP8 weights + 12 of optimizer state) = 5.276 TB, written at Tectonic's 2 TB/s in 2.64 s; the
/// job's rate is Table 5's 419 interruptions per 54 days (every class over the cluster it was
/// counted on), MTBF 11,135 s.
#[test]
fn llama3_cluster_goodput_by_hand() {
    let e = estimate(&[
        "--arch",
        "architectures/llama3-h100-16k.ron",
        "--workload",
        "workloads/llama3.1-405b-pretrain.ron",
    ]);
    let g = &e["goodput"];
    let f = |k: &str| g[k].as_f64().unwrap_or_else(|| panic!("{k}: {g}"));
    let close = |a: f64, b: f64, tol: f64| (a - b).abs() <= tol * b.abs();
    assert!(close(f("mtbf_s"), 54.0 * 86400.0 / 419.0, 1e-9), "{g}");
    let bytes = f("checkpoint_bytes");
    assert!(close(bytes, 405.85e9 * 13.0, 0.005), "{bytes}");
    assert!(close(f("checkpoint_write_s"), bytes / 2e12, 1e-12));
    assert_eq!(f("restart_s"), 600.0);
    // the interval that minimises the expected time, near Young/Daly's
    let (tau, young) = (f("checkpoint_interval_s"), f("young_daly_interval_s"));
    assert!(close(
        young,
        (2.0 * bytes / 2e12 * f("mtbf_s")).sqrt(),
        1e-12
    ));
    assert!(close(tau, young, 0.02), "{tau} vs {young}");
    // goodput from Daly's expected time: M e^(R/M) (e^((τ+δ)/M) − 1) / τ
    let (m, d, r) = (
        f("mtbf_s"),
        f("checkpoint_write_s"),
        600.0 + f("checkpoint_read_s"),
    );
    let factor = m * (r / m).exp() * ((tau + d) / m).exp_m1() / tau;
    assert!(close(f("fraction"), 1.0 / factor, 1e-9));
    assert!(f("fraction") > 0.9 && f("fraction") < 0.95, "{g}");
    let ttt = e["time_to_train_s"].as_f64().expect("time to train");
    assert!(close(f("expected_time_to_train_s"), ttt * factor, 1e-9));
    assert!(close(f("expected_interruptions"), ttt * factor / m, 1e-9));
    assert!(close(
        f("effective_throughput_per_s"),
        e["throughput_per_s"].as_f64().unwrap() / factor,
        1e-9
    ));
}

/// A stated interval and a straggler slowdown reach the JSON; a longer interval than the optimum
/// costs goodput; serving carries no goodput; a system without reliability figures neither.
#[test]
fn options_and_absence() {
    let base = [
        "--arch",
        "architectures/llama3-h100-16k.ron",
        "--workload",
        "workloads/llama3.1-405b-pretrain.ron",
    ];
    let auto = estimate(&base);
    let mut args = base.to_vec();
    args.extend(["--checkpoint-interval", "2h", "--straggler", "5%"]);
    let set = estimate(&args);
    let g = &set["goodput"];
    assert_eq!(g["checkpoint_interval_s"].as_f64(), Some(7200.0));
    assert_eq!(g["checkpoint_interval_auto"], Value::Bool(false));
    assert_eq!(g["straggler_slowdown"].as_f64(), Some(0.05));
    assert!(g["fraction"].as_f64() < auto["goodput"]["fraction"].as_f64());
    // step times do not move: goodput is on top of them
    assert_eq!(set["step_time_s"], auto["step_time_s"]);
    let serving = estimate(&[
        "--arch",
        "architectures/eos-h100.ron",
        "--workload",
        "workloads/llama3.1-70b-serving.ron",
    ]);
    assert_eq!(serving["goodput"], Value::Null);
    let none = estimate(&[
        "--arch",
        "architectures/dgx-h100.ron",
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
    ]);
    assert_eq!(none["goodput"], Value::Null);
}

/// A bad interval is a usage error naming the flag's value, not a panic.
#[test]
fn bad_interval_is_refused() {
    let out = tessera(&[
        "estimate",
        "--arch",
        "architectures/llama3-h100-16k.ron",
        "--workload",
        "workloads/llama3.1-405b-pretrain.ron",
        "--checkpoint-interval",
        "30 parsecs",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("checkpoint interval"), "{err}");
}

/// The shipped reliability files check clean on their own.
#[test]
fn shipped_reliability_files_check_clean() {
    for f in ["llama3-h100", "rsc1-a100"] {
        let path = format!("architectures/reliability/{f}.ron");
        let out = tessera(&["check", &path]);
        assert!(
            out.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A failure class observed over a size instead of a time, and a storage bandwidth in watts: each
/// a located error naming the field and the dimension it expects, never a panic.
#[test]
fn bad_reliability_is_located() {
    let dir = common::scratch_dir("goodput-bad");
    let rel = dir.join("rel.ron");
    std::fs::write(
        &rel,
        r#"Reliability(
    version: 1,
    name: "bad",
    failures: [
        (class: "GPU", per: Device, count: "3 @assumed", population: "10 @assumed", over: "5 GB @assumed"),
    ],
    restart: "10 min @assumed",
)
"#,
    )
    .expect("write");
    let out = tessera(&["check", rel.to_str().expect("path")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rel.ron:5:"), "{err}");
    assert!(err.contains("over"), "{err}");
    let sys = std::fs::read_to_string("architectures/llama3-h100-16k.ron")
        .expect("read")
        .replace(
            "write_bandwidth: \"2 TB/s @llama3-cluster\"",
            "write_bandwidth: \"2 kW @llama3-cluster\"",
        );
    // beside the parts it names, as the shipped file is
    for d in ["parts", "reliability"] {
        std::os::unix::fs::symlink(common::root().join("architectures").join(d), dir.join(d))
            .expect("link");
    }
    let path = dir.join("sys.ron");
    std::fs::write(&path, sys).expect("write");
    let out = tessera(&["check", path.to_str().expect("path")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("write_bandwidth") && err.contains("bandwidth"),
        "{err}"
    );
}

/// `scale --goodput`: per system a failure-free and a with-failures line, a mark per feasible
/// point of each, the time with failures never below the failure-free one, and the gap
/// widening with the devices (goodput falls as the job's MTBF shrinks).
#[test]
fn scale_draws_time_to_train_with_and_without_failures() {
    let dir = common::scratch_dir("goodput-scale");
    let svg = dir.join("goodput.svg");
    let out = tessera(&[
        "scale",
        "--arch",
        "architectures/llama3-h100-16k.ron",
        "--workload",
        "workloads/llama3.1-405b-pretrain.ron",
        "--devices",
        "1024,4096,16384",
        "--goodput",
        "--format",
        "json",
        "--plot",
        svg.to_str().expect("path"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let pts = v["points"].as_array().expect("points");
    assert_eq!(pts.len(), 3);
    let mut last = 1.0;
    for p in pts {
        let e = p;
        let (t, g) = (e["time_to_train_s"].as_f64().expect("ttt"), &e["goodput"]);
        let with = g["expected_time_to_train_s"]
            .as_f64()
            .expect("with failures");
        assert!(with > t, "{with} <= {t}");
        let f = g["fraction"].as_f64().expect("fraction");
        assert!(f < last, "goodput {f} does not fall with the devices");
        last = f;
    }
    let text = std::fs::read_to_string(&svg).expect("svg");
    let n = |needle: &str| text.matches(needle).count();
    assert_eq!(n(r#"class="series""#), 2, "{text}");
    assert_eq!(n(r#"data-kind="ideal""#), 1 + 3);
    assert_eq!(n(r#"data-kind="failures""#), 1 + 3);
    assert!(text.contains("time to train (h)"));
}
