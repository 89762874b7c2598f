//! Precision schedules (a training run's first steps at one compute precision, the rest at
//! another): each phase is its own program on the same mapping and machine, and the run's time
//! to train and energy are the sums over the phases. Hand-checked against single-precision
//! estimates of the same run; a schedule at the run's own precision changes nothing; a sweep
//! refuses a scheduled workload with a located error.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common::{root, tessera};
use approx::assert_relative_eq;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The shipped Llama 3.1 8B pretraining workload (FP8) with `schedule` written after its
/// precision, in a file of its own under the target directory.
fn scheduled(name: &str, schedule: &str) -> PathBuf {
    let text = std::fs::read_to_string(root().join("workloads/llama3.1-8b-pretrain.ron")).unwrap();
    let at = text.find("precision:").unwrap();
    let eol = at + text[at..].find('\n').unwrap() + 1;
    let out = format!(
        "{}        precision_schedule: {schedule},\n{}",
        &text[..eol],
        &text[eol..]
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let p = dir.join(format!("{name}.ron"));
    std::fs::write(&p, out).unwrap();
    p
}

fn estimate(workload: &Path, extra: &[&str]) -> Value {
    let w = workload.to_string_lossy().into_owned();
    let mut a = vec![
        "estimate",
        "--arch",
        "architectures/dgx-b200.ron",
        "--workload",
        &w,
        "--format",
        "json",
    ];
    a.extend_from_slice(extra);
    let out = tessera(&a);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("no `{k}` in {v}"))
}

#[test]
fn a_schedule_sums_its_phases() {
    // FP4 for the first 75 % of the steps, then the run's FP8: each phase's step is the
    // single-precision estimate's (same mapping, same machine), and time to train and energy
    // are the share-weighted sums.
    let shipped = root().join("workloads/llama3.1-8b-pretrain.ron");
    let fp8 = estimate(&shipped, &[]);
    let fp4 = estimate(&shipped, &["--set", "workload.compute=fp4"]);
    let w = scheduled("fp4-then-fp8", r#"[(share: 0.75, compute: "fp4")]"#);
    let s = estimate(&w, &[]);
    let phases = s["precision_schedule"].as_array().expect("the phases");
    assert_eq!(phases.len(), 2);
    assert_eq!(phases[0]["compute"], "fp4");
    assert_eq!(phases[1]["compute"], "fp8");
    assert_relative_eq!(f(&phases[1], "share"), 0.25, max_relative = 1e-12);
    assert_relative_eq!(
        f(&phases[0], "step_time_s"),
        f(&fp4, "step_time_s"),
        max_relative = 1e-12
    );
    assert_relative_eq!(
        f(&phases[1], "step_time_s"),
        f(&fp8, "step_time_s"),
        max_relative = 1e-12
    );
    let mean = 0.75 * f(&fp4, "step_time_s") + 0.25 * f(&fp8, "step_time_s");
    assert_relative_eq!(f(&s, "step_time_s"), mean, max_relative = 1e-12);
    let steps = f(&fp8, "time_to_train_s") / f(&fp8, "step_time_s");
    assert_relative_eq!(f(&s, "time_to_train_s"), steps * mean, max_relative = 1e-9);
    let energy = 0.75 * f(&fp4, "energy_j") + 0.25 * f(&fp8, "energy_j");
    assert_relative_eq!(f(&s, "energy_j"), energy, max_relative = 1e-9);
    assert_relative_eq!(
        f(&s, "average_power_w"),
        f(&s, "energy_j") / f(&s, "time_to_train_s"),
        max_relative = 1e-9
    );
    // FP4 steps are shorter here, so the schedule lands between the two runs.
    assert!(f(&fp4, "time_to_train_s") < f(&s, "time_to_train_s"));
    assert!(f(&s, "time_to_train_s") < f(&fp8, "time_to_train_s"));
    // Without a schedule the key is null.
    assert!(fp8["precision_schedule"].is_null());
}

#[test]
fn a_schedule_at_the_runs_own_precision_changes_nothing() {
    let shipped = root().join("workloads/llama3.1-8b-pretrain.ron");
    let plain = estimate(&shipped, &[]);
    let w = scheduled("fp8-then-fp8", r#"[(share: 0.5, compute: "fp8")]"#);
    let s = estimate(&w, &[]);
    for k in [
        "step_time_s",
        "time_to_train_s",
        "energy_j",
        "mfu",
        "average_power_w",
    ] {
        assert_relative_eq!(f(&s, k), f(&plain, k), max_relative = 1e-12);
    }
}

#[test]
fn a_bad_schedule_is_told_at_its_field() {
    let w = scheduled(
        "bad-schedule",
        r#"[(share: 0.8, compute: "fp4"), (share: 1.5, compute: "fp9"), (share: 0.4, compute: "bf16")]"#,
    );
    let out = tessera(&["check", &w.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "a phase's `share` of the steps must be in (0, 1], found 1.5",
        "unknown precision `fp9`",
        "the schedule's phases share 1.2 of the steps, more than all of them",
    ] {
        assert!(err.contains(want), "{want}\n{err}");
    }
}

#[test]
fn a_sweep_refuses_a_scheduled_workload() {
    let w = scheduled("sweep-schedule", r#"[(share: 0.9, compute: "fp4")]"#);
    let out = tessera(&[
        "sweep",
        "--arch",
        "architectures/dgx-b200.ron",
        "--workload",
        &w.to_string_lossy(),
        "--vary",
        "device.tdp=[800 W, 1000 W]",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("has a precision schedule, which a sweep cannot evaluate yet"),
        "{err}"
    );
}
