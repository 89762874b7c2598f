//! Dropped-token MoE training (`experts: (…, capacity_factor: cf)`), as GShard and MaxText's
//! `dense_matmul` run it: each expert computes C = cf·S·top_k / E slots per sequence, filled or
//! padded, and the dispatch and combine are einsums over the slots (2·S·E·C·M FLOPs each per
//! sequence). Hand counts on an 8-layer model with 8 experts (top-2) over 8 GPUs; the capacity
//! holds whatever the router does; more capacity never makes a step faster.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common::moe_program as program;
use approx::assert_relative_eq;
use tessera::engine::program::{Phase, Program, Role};

use crate::common;

const TOK: f64 = 4096.0;
const H: f64 = 2048.0;

fn forward_flops(p: &Program, name: &str) -> f64 {
    p.ops
        .iter()
        .filter(|o| o.name == name && o.phase == Phase::Forward)
        .map(|o| o.flops)
        .sum()
}

#[test]
fn each_expert_computes_its_slots_and_the_einsums_cost_their_flops() {
    for ep in [1, 8] {
        let (p, _) = program(", capacity_factor: 1.25", ep);
        // cf × top-2 slots per token, each through the 3 matrices of a gated expert of 768
        assert_relative_eq!(
            forward_flops(&p, "ffn"),
            2.0 * TOK * H * 768.0 * 3.0 * (2.0 * 1.25),
            max_relative = 1e-12
        );
        // E × C = 1.25 × 4096 × 2 slots per sequence; dispatch and combine 2·S·E·C·M each
        let slots = 1.25 * 4096.0 * 2.0;
        assert_relative_eq!(
            forward_flops(&p, "moe dispatch + combine (dense einsums)"),
            2.0 * 2.0 * TOK * slots * H,
            max_relative = 1e-12
        );
        let backward: f64 = p
            .ops
            .iter()
            .filter(|o| o.name.starts_with("moe dispatch") && o.phase == Phase::Backward)
            .map(|o| o.flops)
            .sum();
        assert_relative_eq!(
            backward,
            2.0 * 2.0 * 2.0 * TOK * slots * H,
            max_relative = 1e-12
        );
    }
}

#[test]
fn dropless_routing_has_no_einsums() {
    let (p, _) = program("", 8);
    assert!(!p.ops.iter().any(|o| o.name.starts_with("moe dispatch")));
}

/// At a fixed capacity the busiest rank is capped: the router's imbalance changes nothing, and
/// the expert-parallel exchange carries the slots, cf × the routed tokens.
#[test]
fn the_capacity_holds_whatever_the_router_does() {
    let (a, ta) = program(", capacity_factor: 1.25", 8);
    let (b, tb) = program(", capacity_factor: 1.25, load_imbalance: 2.0", 8);
    assert_eq!(forward_flops(&a, "ffn"), forward_flops(&b, "ffn"));
    assert_eq!(ta, tb);
    let bytes: f64 = a
        .comms
        .iter()
        .filter(|c| c.role == Role::ExpertAllToAll)
        .map(|c| c.bytes)
        .sum();
    assert_relative_eq!(bytes, TOK * H * 2.0 * 2.0 * 1.25, max_relative = 1e-12);
}

#[test]
fn more_capacity_never_makes_a_step_faster() {
    let mut last = 0.0;
    for cf in [0.5, 1.0, 1.25, 2.0, 4.0] {
        let (_, t) = program(&format!(", capacity_factor: {cf}"), 1);
        assert!(t > last, "capacity_factor {cf}: {t} <= {last}");
        last = t;
    }
}

#[test]
fn a_capacity_of_nothing_is_an_error_with_its_place() {
    let dir = common::scratch_dir("tessera-dropped-tokens");
    let path = dir.join("zero.ron");
    std::fs::write(
        &path,
        common::MOE_8_EXPERTS.replace("{moe}", ", capacity_factor: 0.0"),
    )
    .unwrap();
    let out = common::tessera(&["check", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("zero.ron:4:"), "{err}");
    assert!(err.contains("gives the experts no capacity"), "{err}");
}
