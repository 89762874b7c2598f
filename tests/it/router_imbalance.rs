//! Router imbalance in MoE training (`experts: (…, load_imbalance: x)`): with expert parallelism
//! each MoE layer waits for the rank that received the most routed tokens, so its expert GEMMs,
//! its token exchange and the activations it keeps scale by the busiest rank's load over the
//! mean. Hand counts on an 8-layer model with 8 experts (top-2) over 8 GPUs
//! (`common::MOE_8_EXPERTS`); balanced is the old program to the bit; all experts on every device
//! has no busiest rank; more imbalance never makes a step faster.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use approx::assert_relative_eq;
use tessera::engine::program::{Phase, Program, Role};

use crate::common;

/// The `load_imbalance` clause, or nothing.
fn clause(imbalance: Option<f64>) -> String {
    imbalance.map_or(String::new(), |x| format!(", load_imbalance: {x}"))
}

fn program(imbalance: Option<f64>, ep: u64) -> (Program, f64) {
    common::moe_program(&clause(imbalance), ep)
}

fn ffn_forward_flops(p: &Program) -> f64 {
    p.ops
        .iter()
        .filter(|o| o.name == "ffn" && o.phase == Phase::Forward)
        .map(|o| o.flops)
        .sum()
}

fn all_to_all_bytes(p: &Program) -> f64 {
    p.comms
        .iter()
        .filter(|c| c.role == Role::ExpertAllToAll)
        .map(|c| c.bytes)
        .sum()
}

#[test]
fn balanced_is_the_old_program() {
    let ((a, ta), (b, tb)) = (program(None, 8), program(Some(1.0), 8));
    assert_eq!(ffn_forward_flops(&a), ffn_forward_flops(&b));
    assert_eq!(all_to_all_bytes(&a), all_to_all_bytes(&b));
    assert_eq!(ta, tb);
}

#[test]
fn the_busiest_rank_computes_and_receives_its_load() {
    let (p, _) = program(Some(1.25), 8);
    // per device and layer: tok × top-2 pairs × 1.25 on the busiest rank, each 2·h·768 FLOPs
    // through each of the 3 matrices of a gated expert
    let tok = 4096.0;
    assert_relative_eq!(
        ffn_forward_flops(&p),
        2.0 * tok * 2048.0 * 768.0 * 3.0 * (2.0 * 1.25),
        max_relative = 1e-12
    );
    // the dispatch and the combine carry its tok × top-2 × h bf16 values, × 1.25
    assert_relative_eq!(
        all_to_all_bytes(&p),
        tok * 2048.0 * 2.0 * 2.0 * 1.25,
        max_relative = 1e-12
    );
}

/// The busiest rank also keeps its routed pairs' FFN activations for the backward: the gate and
/// up outputs and the down projection's input, 3 × 768 bf16 values per pair and layer.
#[test]
fn the_busiest_rank_keeps_its_load_of_activations() {
    let ((a, _), (b, _)) = (program(None, 8), program(Some(1.25), 8));
    let extra_pairs = 4096.0 * 2.0 * 0.25;
    assert_relative_eq!(
        b.footprint.activations - a.footprint.activations,
        8.0 * extra_pairs * 3.0 * 768.0 * 2.0,
        max_relative = 1e-9
    );
}

#[test]
fn with_every_expert_on_every_device_no_rank_is_busiest() {
    let ((a, ta), (b, tb)) = (program(None, 1), program(Some(1.25), 1));
    assert_eq!(ffn_forward_flops(&a), ffn_forward_flops(&b));
    assert_eq!(ta, tb);
}

#[test]
fn more_imbalance_never_makes_a_step_faster() {
    let mut last = 0.0;
    for x in [1.0, 1.05, 1.2, 1.5, 2.0, 4.0] {
        let (_, t) = program(Some(x), 8);
        assert!(t >= last, "load_imbalance {x}: {t} < {last}");
        last = t;
    }
    // and the busiest rank's fourfold load is not free
    assert!(last > program(Some(1.0), 8).1 * 1.1);
}

#[test]
fn an_imbalance_below_one_is_an_error_with_its_place() {
    let dir = common::scratch_dir("tessera-router-imbalance");
    let path = dir.join("below.ron");
    std::fs::write(
        &path,
        common::MOE_8_EXPERTS.replace("{moe}", &clause(Some(0.8))),
    )
    .unwrap();
    let out = common::tessera(&["check", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("below.ron:4:"), "{err}");
    assert!(err.contains("`load_imbalance` 0.8 is below 1"), "{err}");
}
