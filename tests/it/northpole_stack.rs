//! NorthPole's serving stack (issue 41): the time each pipeline stage adds per micro-batch it
//! passes on (`software.pipeline_stage_time`), by hand on IBM's appliance layout, a law (more of
//! it never speeds a round up), and a zero figure giving back the unfitted model to the bit.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common;
use proptest::prelude::*;
use tessera::engine::table as t;
use tessera::engine::{self, cpu, MappingChoice, Objective};
use tessera::model::system::{load_software, load_system, System};
use tessera::model::workload::{load_workload, Workload};

const STACK: &str = "architectures/software/northpole-2024.ron";

fn northpole() -> (System, Workload) {
    let s = load_system("architectures/northpole-16.ron", &common::CrateFs)
        .value
        .expect("system");
    let w = load_workload("workloads/granite-3b-northpole.ron", &common::CrateFs)
        .value
        .expect("workload");
    (s, w)
}

fn auto() -> MappingChoice {
    MappingChoice::Auto(Objective::Time)
}

#[test]
fn every_stage_of_the_chain_adds_its_hand_off_once_per_micro_batch() {
    // IBM's layout as the search finds it: 14 one-layer stages and a 2-card head, 14
    // micro-batches of 2 users in flight for 15 stages, so a round is the chain of all 15
    // stages (validation/near-memory/northpole-granite-3b-throughput.ron). A hand-off of c per
    // stage lengthens that chain by 15 c (and 14 micro-batches × the slowest stage by only 14 c,
    // so the chain still binds).
    let (s, w) = northpole();
    let prep = engine::prepare(&s, &w, &auto(), None).expect("feasible");
    let (p, m) = (prep.program, prep.machine);
    let chain: f64 = p.stages.iter().map(|st| st.repeat).sum();
    assert_eq!(chain, 15.0, "{:?}", p.stages);
    assert!(p.stages.iter().all(|st| st.hands_on == 1.0));
    assert_eq!(m[t::PIPELINE_STAGE_TIME], 0.0, "no stack named");
    let bare = cpu::eval(&p, &m);
    let c = 2e-6;
    let mut with = m.clone();
    with[t::PIPELINE_STAGE_TIME] = c;
    let e = cpu::eval(&p, &with);
    approx::assert_relative_eq!(e.step_time - bare.step_time, 15.0 * c, max_relative = 1e-9);
    approx::assert_relative_eq!(
        e.breakdown.other - bare.breakdown.other,
        15.0 * c,
        max_relative = 1e-9
    );
}

#[test]
fn a_single_stage_hands_nothing_on() {
    // one card running the whole model (no pipeline): the figure costs nothing
    let s = load_system("architectures/northpole-card.ron", &common::CrateFs)
        .value
        .expect("system");
    let w = load_workload("workloads/resnet50-northpole.ron", &common::CrateFs)
        .value
        .expect("workload");
    let prep = engine::prepare(&s, &w, &auto(), Some(1)).expect("feasible");
    let (p, m) = (prep.program, prep.machine);
    assert!(p.stages.iter().all(|st| st.hands_on == 0.0));
    let mut with = m.clone();
    with[t::PIPELINE_STAGE_TIME] = 1e-3;
    assert_eq!(cpu::eval(&p, &with).step_time, cpu::eval(&p, &m).step_time);
}

#[test]
fn a_stack_with_no_stage_time_gives_back_the_hardware_model() {
    let (s, w) = northpole();
    let mut stack = load_software(STACK, &common::CrateFs).value.expect("stack");
    assert!(stack.pipeline_stage_time > 0.0, "the fitted figure");
    let bare = engine::estimate(&s, &w, &auto(), None);
    let mut on = s.clone();
    on.with_software(stack.clone());
    let fitted = engine::estimate(&on, &w, &auto(), None);
    assert!(fitted.throughput_per_s < bare.throughput_per_s);
    stack.pipeline_stage_time = 0.0;
    let mut zero = s.clone();
    zero.with_software(stack);
    let z = engine::estimate(&zero, &w, &auto(), None);
    assert_eq!(z.throughput_per_s, bare.throughput_per_s);
    assert_eq!(z.step_time_s, bare.step_time_s);
    assert_eq!(z.energy_per_step_j, bare.energy_per_step_j);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// More time per hand-off never shortens a round.
    #[test]
    fn more_stage_time_is_never_faster(a in 0.0f64..100e-6, b in 0.0f64..100e-6) {
        let (s, w) = northpole();
        let prep = engine::prepare(&s, &w, &auto(), None).expect("feasible");
        let (lo, hi) = (a.min(b), a.max(b));
        let at = |c: f64| {
            let mut m = prep.machine.clone();
            m[t::PIPELINE_STAGE_TIME] = c;
            cpu::eval(&prep.program, &m).step_time
        };
        prop_assert!(at(hi) >= at(lo));
    }
}
