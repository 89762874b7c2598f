//! `tessera calibrate`: the shipped `fitted-…` figures are reproduced from their calibration
//! cases (within the precision each is written to), check cases are refused with a located error,
//! bad paths are told with a hint, and `-o` writes a part file that checks clean and cites the
//! cases and the command.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common::{root, tessera};
use serde_json::Value;

/// The figure `field` of a part file as written (`matmul: "0.41 @fitted-ibm-ddl"`): its value
/// and the number of decimals it is written to; it must cite a `fitted` source.
fn written(part: &str, field: &str) -> (f64, usize) {
    let text = std::fs::read_to_string(root().join(part)).unwrap();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{field}:")) && l.contains("@fitted"))
        .unwrap_or_else(|| panic!("{part} writes no fitted `{field}`"));
    let q = line.split('"').nth(1).unwrap();
    let num = q.split_whitespace().next().unwrap();
    let decimals = num.split_once('.').map(|(_, d)| d.len()).unwrap_or(0);
    (num.parse().unwrap(), decimals)
}

/// `got`, a figure `calibrate` found, is the one `part` writes for `field`, to the digits it is
/// written with.
fn assert_written(part: &str, field: &str, got: f64) {
    let (value, decimals) = written(part, field);
    let half = 0.5 * 10f64.powi(-(decimals as i32));
    assert!(
        (got - value).abs() <= half + 1e-12,
        "{part} {field}: written {value}, calibrate finds {got}"
    );
}

fn fit(cases: &[&str], fit: &str) -> Value {
    let mut a = vec!["calibrate"];
    a.extend_from_slice(cases);
    a.extend_from_slice(&["--fit", fit, "--format", "json"]);
    let out = tessera(&a);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_shipped_fitted_figures_are_reproduced_from_their_cases() {
    // (part file, field, the path calibrate fits, scale from SI to the file's unit, cases the
    // citation names)
    let shipped: &[(&str, &str, &str, f64, &[&str])] = &[
        (
            "architectures/software/nemo-24.04.ron",
            "step_overhead",
            "software.step_overhead",
            1.0,
            &[
                "validation/mlperf/mlperf-v40-lora-h100-64-step.ron",
                "validation/mlperf/mlperf-v40-lora-h100-1024-step.ron",
            ],
        ),
        (
            "architectures/software/nemo-automodel.ron",
            "step_overhead",
            "software.step_overhead",
            1.0,
            &[
                "validation/automodel/automodel-llama3-8b-lora-h100-1-bf16.ron",
                "validation/automodel/automodel-llama3-70b-lora-h100-16-bf16.ron",
            ],
        ),
        (
            "architectures/parts/h100-sxm.ron",
            "low_precision_matmul",
            "device.efficiency.low_precision_matmul",
            1.0,
            &[
                "validation/mlperf/mlperf-v41-gpt3-h100-512.ron",
                "validation/mlperf/mlperf-v50-llama405b-h100-8192.ron",
                "validation/megatron-bridge/mbridge-llama3-70b-h100-64-fp8.ron",
                "validation/megatron-bridge/mbridge-llama31-405b-h100-1024-fp8.ron",
            ],
        ),
        (
            "architectures/parts/b200-gb200.ron",
            "low_precision_matmul",
            "device.efficiency.low_precision_matmul",
            1.0,
            &[
                "validation/mlperf/mlperf-v50-llama405b-gb200-512.ron",
                "validation/mlperf/mlperf-v50-llama405b-gb200-2496.ron",
                "validation/megatron-bridge/mbridge-llama3-70b-gb200-64-fp8.ron",
                "validation/megatron-bridge/mbridge-llama31-405b-gb200-256-fp8.ron",
            ],
        ),
        (
            "architectures/parts/b200-gb200.ron",
            "fp4_backward_matmul",
            "device.efficiency.fp4_backward_matmul",
            1.0,
            &["validation/megatron-bridge/mbridge-llama3-70b-gb200-64-nvfp4.ron"],
        ),
        (
            "architectures/parts/gb300.ron",
            "low_precision_matmul",
            "device.efficiency.low_precision_matmul",
            1.0,
            &[
                "validation/megatron-bridge/mbridge-llama3-70b-gb300-64-fp8.ron",
                "validation/megatron-bridge/mbridge-llama31-405b-gb300-256-fp8.ron",
            ],
        ),
        (
            "architectures/parts/gb300.ron",
            "fp4_backward_matmul",
            "device.efficiency.fp4_backward_matmul",
            1.0,
            &["validation/megatron-bridge/mbridge-llama3-70b-gb300-64-nvfp4.ron"],
        ),
        (
            "architectures/parts/mi325x.ron",
            "low_precision_matmul",
            "device.efficiency.low_precision_matmul",
            1.0,
            &["validation/mlperf/mlperf-v50-lora-mi325x-8.ron"],
        ),
        (
            "architectures/parts/p100-sxm2.ron",
            "matmul",
            "device.efficiency.matmul",
            1.0,
            &["validation/ibm/ibm-ddl-resnet50-256.ron"],
        ),
    ];
    for (part, field, path, scale, cases) in shipped {
        let v = fit(cases, path);
        let f = &v["figures"][0];
        assert_written(part, field, f["value"].as_f64().unwrap() * scale);
        assert_eq!(v["converged"], true, "{part}");
        // with as many cases as figures the fit is exact and has no interval
        let exact = cases.len() == 1;
        assert_eq!(f["ci95"].is_null(), exact, "{part}: {f}");
        for r in v["residuals"].as_array().unwrap() {
            if exact {
                assert!(r["error_after"].as_f64().unwrap().abs() < 1e-6, "{r}");
            }
        }
        // the least-squares fit never ends above where it started
        assert!(v["rss_after"].as_f64() <= v["rss_before"].as_f64(), "{v}");
    }
}

/// NorthPole's power figures (issue 41): static power and energy per operation from the two
/// published powers, each case evaluated at the rate it was measured at (`run: (at_rate: …)`),
/// the int8 energy tied to the int4 one at the file's ratio (`--fit A+B`). Two cases, two
/// figures: an exact fit, reproducing the part file to its digits.
#[test]
fn the_northpole_power_figures_are_reproduced_from_two_published_powers() {
    let v = fit(
        &[
            "validation/near-memory/northpole-resnet50-power.ron",
            "validation/near-memory/northpole-granite-3b-power.ron",
        ],
        "device.idle_power,device.energy_per_flop.int4+device.energy_per_flop.int8",
    );
    assert_eq!(v["converged"], true, "{v}");
    let part = "architectures/parts/northpole-card.ron";
    let idle = &v["figures"][0];
    assert_eq!(idle["path"], "device.idle_power");
    assert_written(part, "idle_power", idle["value"].as_f64().unwrap());
    let e = &v["figures"][1];
    let tied = &e["tied"][0];
    assert_eq!(tied["path"], "device.energy_per_flop.int8");
    assert_eq!(tied["ratio"].as_f64(), Some(2.0), "{tied}");
    // the map entries of the die, in pJ per operation
    let text = std::fs::read_to_string(root().join(part)).unwrap();
    let map = &text[text.find("energy_per_flop: {").expect("the die's map")..];
    let entry = |p: &str| -> f64 {
        let at = map.find(&format!("\"{p}\": \"")).expect(p) + p.len() + 5;
        map[at..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let e4 = e["value"].as_f64().unwrap() * 1e12;
    assert!((e4 - entry("int4")).abs() <= 0.5e-4 + 1e-12, "{e4}");
    assert!((2.0 * e4 - entry("int8")).abs() <= 0.5e-4 + 1e-12, "{e4}");
    for r in v["residuals"].as_array().unwrap() {
        assert!(r["error_after"].as_f64().unwrap().abs() < 1e-6, "{r}");
    }
}

/// A tie names figures of one kind, each once.
#[test]
fn a_tie_of_figures_of_two_kinds_is_refused() {
    let out = tessera(&[
        "calibrate",
        "validation/near-memory/northpole-resnet50-power.ron",
        "--fit",
        "device.idle_power+device.energy_per_flop.int8",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("their units differ"), "{err}");
}

/// The A100's three figures, fitted together with the network figure held at its lower bound:
/// the fit converges (it crawled along the bound for 100 iterations before the active set) and
/// lands on the written figures.
#[test]
fn the_a100_three_figure_fit_is_reproduced() {
    let v = fit(
        &[
            "validation/megatron/megatron-22b-selective.ron",
            "validation/megatron/megatron-175b-selective.ron",
            "validation/megatron/megatron-530b-selective.ron",
            "validation/megatron/megatron-1t-selective.ron",
        ],
        "device.efficiency.matmul,device.efficiency.network=0.5..0.9,device.efficiency.memory=0.5..0.95",
    );
    assert_eq!(v["converged"], true, "{v}");
    let part = "architectures/parts/a100-sxm-80gb.ron";
    for (i, field) in ["matmul", "network", "memory"].iter().enumerate() {
        let f = &v["figures"][i];
        assert_written(part, field, f["value"].as_f64().unwrap());
        assert_eq!(f["at_bound"], *field == "network", "{f}");
    }
}

#[test]
fn check_cases_are_refused_where_they_say_so() {
    let out = tessera(&[
        "calibrate",
        "validation/mlperf/mlperf-v50-llama405b-h100-512.ron",
        "validation/mlperf/mlperf-v50-llama405b-h100-8192.ron",
        "--fit",
        "device.efficiency.low_precision_matmul",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("validation/mlperf/mlperf-v50-llama405b-h100-512.ron:"),
        "{err}"
    );
    assert!(err.contains("has role `Check`"), "{err}");
    assert!(err.contains("hint:"), "{err}");
}

#[test]
fn a_bad_path_or_bound_is_told_with_a_hint() {
    let case = "validation/mlperf/mlperf-v50-lora-mi325x-8.ron";
    for (fit, says) in [
        (
            "device.efficiency.matmull",
            "did you mean `device.efficiency.matmul`",
        ),
        ("device.efficiency.matmul=0.9..0.5", "are empty"),
        ("device.efficiency.matmul=0.5", "not `LO..HI`"),
        ("mapping.tp", "figure"),
    ] {
        let out = tessera(&["calibrate", case, "--fit", fit]);
        assert_eq!(out.status.code(), Some(1), "{fit}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{fit}: {err}");
    }
}

#[test]
fn the_calibrated_part_file_cites_the_cases_and_the_command() {
    // beside the original, so its relative references still resolve
    let o = root().join("architectures/parts/calibrated-test-mi325x.ron");
    let out = tessera(&[
        "calibrate",
        "validation/mlperf/mlperf-v50-lora-mi325x-8.ron",
        "--fit",
        "device.efficiency.low_precision_matmul",
        "-o",
        o.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&o).unwrap();
    let check = tessera(&["check", o.to_str().unwrap()]);
    std::fs::remove_file(&o).unwrap();
    assert!(check.status.success(), "{check:?}\n{text}");
    assert!(
        text.contains("low_precision_matmul: \"0.6416 @fitted-calibrate\""),
        "{text}"
    );
    assert!(
        text.contains(
            "\"fitted-calibrate\": \"fitted: device.efficiency.low_precision_matmul 0.6416"
        ),
        "{text}"
    );
    assert!(text.contains("mlperf-v50-lora-mi325x-8"), "{text}");
    assert!(text.contains("tessera calibrate validation/mlperf/mlperf-v50-lora-mi325x-8.ron --fit device.efficiency.low_precision_matmul"), "{text}");
}

/// Fits the stack's step overhead from `case` under the key `fitted-stack`, writes the stack to
/// `out` and returns what was written.
fn fit_stack_into(case: &std::path::Path, out: &std::path::Path) -> String {
    let run = tessera(&[
        "calibrate",
        case.to_str().unwrap(),
        "--fit",
        "software.step_overhead",
        "--key",
        "fitted-stack",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{run:?}");
    std::fs::read_to_string(out).unwrap()
}

#[test]
fn a_stacks_step_overhead_is_fitted_from_zero() {
    // A calibration copy of the 8-H100 LoRA case on a stack that says 0 s per step: the fit moves
    // the figure off zero (its finite differences step relative to one second there) to where the
    // case's time-to-train is matched, and the case's error goes to zero with one free figure.
    let dir = crate::common::scratch_dir("calibrate-stack");
    let abs = root().to_string_lossy().into_owned() + "/";
    let case = std::fs::read_to_string(root().join("validation/mlperf/mlperf-v40-lora-h100-8.ron"))
        .unwrap()
        .replace("../../", &abs)
        .replace("role: Check", "role: Calibration")
        .replace("    run: (", r#"    run: (software: "stack.ron", "#);
    std::fs::write(dir.join("mlperf-v40-lora-h100-8.ron"), case).unwrap();
    std::fs::write(
        dir.join("stack.ron"),
        "Software(\n    version: 1,\n    name: \"A stack\",\n    sources: {},\n    step_overhead: \"0 s @assumed\",\n)\n",
    )
    .unwrap();
    let file = dir.join("mlperf-v40-lora-h100-8.ron");
    let v = fit(&[file.to_str().unwrap()], "software.step_overhead");
    let f = &v["figures"][0];
    assert_eq!(f["start"].as_f64(), Some(0.0), "{v}");
    let before = v["residuals"][0]["error_before"].as_f64().unwrap();
    let after = v["residuals"][0]["error_after"].as_f64().unwrap();
    assert!(before < -0.05, "{v}");
    assert!(after.abs() < 1e-6, "{v}");
    // 396 steps: the run's shortfall spread over them
    let published = v["residuals"][0]["published"].as_f64().unwrap();
    let want = -before * published / 396.0;
    approx::assert_relative_eq!(f["value"].as_f64().unwrap(), want, max_relative = 1e-3);
    // written out: the citation enters the empty `sources: {}`, whose closing brace gets a line
    // of its own, and the file loads
    let o = dir.join("stack-calibrated.ron");
    let text = fit_stack_into(&file, &o);
    assert!(
        text.contains(
            "    sources: {\n        \"fitted-stack\": \"fitted: software.step_overhead "
        ),
        "{text}"
    );
    assert!(
        text.contains("\",\n    },\n    step_overhead: \""),
        "{text}"
    );
    assert!(text.contains("@fitted-stack\""), "{text}");
    let check = tessera(&["check", o.to_str().unwrap()]);
    assert!(check.status.success(), "{check:?}\n{text}");
    // refitted under the same key (the stack now cites `fitted-stack`): its citation is replaced,
    // not written a second time
    std::fs::copy(&o, dir.join("stack.ron")).unwrap();
    let again = dir.join("stack-refitted.ron");
    let text = fit_stack_into(&file, &again);
    assert_eq!(text.matches("\"fitted-stack\":").count(), 1, "{text}");
    assert!(text.contains("fitted: software.step_overhead "), "{text}");
    let check = tessera(&["check", again.to_str().unwrap()]);
    assert!(check.status.success(), "{check:?}\n{text}");
    std::fs::remove_dir_all(&dir).ok();
}
