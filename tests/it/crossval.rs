//! `tessera validate --cross-validate family`: every gated case predicted out of sample in
//! exactly one held-out source family, a family that informs no fitted figure predicted exactly as
//! in-sample, the refit taking the least-squares fit's path on the cases left, and the exit code
//! still the in-sample gate's.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use std::collections::BTreeMap;

use serde_json::Value;
use tessera::validate::calibrate::{calibrate, param};
use tessera::validate::crossval::{cross_validate, fittings, source_family};
use tessera::validate::{load_case, run_case, Case};

use crate::common::{tessera, CrateFs as Disk};

fn case(file: &str) -> Case {
    let l = load_case(file, &Disk);
    l.value
        .unwrap_or_else(|| panic!("{file} does not load: {:?}", l.diagnostics))
}

#[test]
fn every_gated_case_is_predicted_once_and_uninformed_families_match_in_sample() {
    let out = tessera(&["validate", "--cross-validate", "family", "--format", "json"]);
    let plain = tessera(&["validate", "--format", "json"]);
    assert_eq!(
        out.status.code(),
        plain.status.code(),
        "the exit code is the in-sample gate's"
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let cv = &v["cross_validation"];
    for k in ["by_family", "overall"] {
        assert!(cv.get(k).is_some(), "cross_validation.{k} missing: {cv}");
    }
    for k in ["cases", "mape", "max_abs_error"] {
        assert!(
            cv["overall"][k].is_number(),
            "overall.{k}: {}",
            cv["overall"]
        );
    }
    // the gated cases, by id, with their in-sample error
    let gated: BTreeMap<String, Option<f64>> = v["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| (c["id"].as_str().unwrap().to_string(), c["error"].as_f64()))
        .collect();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let fams = cv["by_family"].as_array().expect("by_family");
    let mut uninformed = 0;
    for f in fams {
        for k in ["family", "cases", "mape", "max_abs_error", "refitted"] {
            assert!(f.get(k).is_some(), "by_family[].{k} missing: {f}");
        }
        let preds = f["predicted"].as_array().expect("predicted");
        assert_eq!(f["cases"].as_u64(), Some(preds.len() as u64), "{f}");
        for p in preds {
            *seen
                .entry(p["id"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        if f["refitted"].as_array().unwrap().is_empty() {
            // no figure moved: the out-of-sample errors are the in-sample ones, bit for bit
            uninformed += 1;
            for p in preds {
                let id = p["id"].as_str().unwrap();
                assert_eq!(p["error"].as_f64(), gated[id], "{id} in {}", f["family"]);
            }
        }
    }
    assert!(uninformed > 0, "some family informs no fitted figure");
    assert!(
        fams.iter()
            .any(|f| !f["refitted"].as_array().unwrap().is_empty()),
        "some family informs a fitted figure"
    );
    let once: Vec<&String> = seen.keys().collect();
    assert_eq!(
        once,
        gated.keys().collect::<Vec<_>>(),
        "every gated case, none else"
    );
    assert!(
        seen.values().all(|&n| n == 1),
        "each in exactly one family: {seen:?}"
    );
    assert_eq!(cv["overall"]["cases"].as_u64(), Some(gated.len() as u64));
    // The mlperf family shares the H100 FP8 fit with megatron-bridge: held out, the figure is
    // refitted on Megatron-Bridge's two H100 cases alone. NeMo's LoRA step cost is fitted on
    // mlperf's cases only: held out, it falls back to the loader's default.
    let mlperf = fams
        .iter()
        .find(|f| f["family"] == "mlperf")
        .expect("mlperf");
    let refitted = |key: &str| {
        mlperf["refitted"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key)
            .unwrap_or_else(|| panic!("{key} refitted without mlperf"))
            .clone()
    };
    let fp8 = refitted("fitted-h100-fp8");
    assert_eq!(fp8["path"], "device.efficiency.low_precision_matmul");
    assert!(
        fp8["basis"].as_str().unwrap().starts_with(
            "refit on mbridge-llama3-70b-h100-64-fp8, mbridge-llama31-405b-h100-1024-fp8"
        ),
        "{fp8}"
    );
    let (v, shipped) = (
        fp8["value"].as_f64().unwrap(),
        fp8["shipped"].as_f64().unwrap(),
    );
    assert!(v > 0.5 && v < 1.0 && (v - shipped).abs() > 1e-3, "{fp8}");
    let step = refitted("fitted-nemo-lora-step");
    assert_eq!(step["path"], "software.step_overhead");
    assert_eq!(step["value"].as_f64(), Some(0.0));
}

#[test]
fn a_refit_on_the_cases_left_is_the_least_squares_fit() {
    // Two cases the AutoModel stack's per-step cost was fitted on, put in two families: holding
    // one out refits the figure on the other, as `tessera calibrate` would.
    let files = [
        "validation/automodel/automodel-llama3-8b-lora-h100-1-bf16.ron",
        "validation/automodel/automodel-llama3-70b-lora-h100-16-bf16.ron",
    ];
    let cases: Vec<Case> = files.iter().map(|f| case(f)).collect();
    let (fits, _) = fittings(&cases);
    let fit = fits
        .iter()
        .find(|f| f.key == "fitted-automodel-step")
        .expect("the AutoModel step fit");
    assert_eq!(fit.params[0].path, "software.step_overhead");
    assert_eq!(fit.cases.len(), 2);
    let in_sample: Vec<_> = cases.iter().map(run_case).collect();
    let cv = cross_validate(&cases, &in_sample, |c| c.id.clone());
    assert_eq!(cv.by_family.len(), 2);
    for held in &cv.by_family {
        let other: Vec<Case> = cases
            .iter()
            .filter(|c| c.id != held.family)
            .cloned()
            .collect();
        let p = param("software.step_overhead", &other[0].system).unwrap();
        let direct = calibrate(&other, &[p]).expect("calibrate");
        let r = &held.refitted[0];
        assert_eq!(r.value, direct.figures[0].value, "{}", held.family);
        assert_ne!(r.value, r.shipped, "{}", held.family);
        assert!(r.basis.starts_with("refit on "), "{}", r.basis);
    }
    assert_eq!(
        source_family("validation/megatron-bridge/x.ron"),
        "megatron-bridge"
    );
}
