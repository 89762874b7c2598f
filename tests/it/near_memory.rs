//! Near-memory inference as per-layer pipelines (issue 11): stages of layers on their own
//! devices, memory per stage, the head on its own stage, precisions per tensor kind, and a law
//! of the round (more bandwidth, compute or link speed never slows it).

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common;
use proptest::prelude::*;
use tessera::engine::table as t;
use tessera::engine::{self, cpu, MappingChoice, Objective};
use tessera::model::mapping::{MappingPlan, Placement};
use tessera::model::system::{load_system, System};
use tessera::model::workload::{load_workload, Workload};
use tessera::spec::Fs;

fn load(arch: &str, work: &str) -> (System, Workload) {
    let s = load_system(arch, &common::CrateFs).value.expect("system");
    let w = load_workload(work, &common::CrateFs)
        .value
        .expect("workload");
    (s, w)
}

fn northpole() -> (System, Workload) {
    load(
        "architectures/northpole-16.ron",
        "workloads/granite-3b-northpole.ron",
    )
}

#[test]
fn northpole_search_finds_ibms_layout_under_one_ms_per_token() {
    let (s, w) = northpole();
    let e = engine::estimate(&s, &w, &MappingChoice::Auto(Objective::Time), None);
    assert!(e.feasible, "{:?}", e.reason);
    let m = e.mapping.as_ref().unwrap();
    // 14 one-layer stages of one card and the output head on the other two
    assert_eq!(
        m.stages.as_deref(),
        Some("14×(1 layer, 1 dev) + 1×(head, 2 dev)")
    );
    let lat = e.latency_per_token_s.unwrap();
    assert!(lat < 1e-3, "latency per token {lat} s");
    assert!(e.placement.as_deref().unwrap().contains("sram"));
}

#[test]
fn pp_may_exceed_the_layer_count_and_the_head_is_counted_once() {
    let (s, w) = northpole();
    // pp 16 over 14 layers: 14 layer stages and a 2-card head stage (the old limit said no)
    let plan = MappingPlan {
        pp: Some(16),
        ..MappingPlan::default()
    };
    let prep = engine::prepare(&s, &w, &MappingChoice::Given(plan), None).expect("feasible");
    let p = &prep.program;
    assert_eq!(p.stages.len(), 2);
    let layer = &p.stages[0];
    let head = &p.stages[1];
    assert_eq!((layer.repeat, head.repeat, head.devices), (14.0, 1.0, 2.0));
    // 14 layers at 4-bit weights: 218 M parameters per layer = 109 MB; the 201 M-parameter head
    // (tied with the embedding) only on its own stage, split over its 2 cards
    let lw = layer.footprint.weights;
    assert!((lw - 218.1e6 * 0.5).abs() < 1e6, "layer stage weights {lw}");
    let hw = head.footprint.weights;
    assert!(
        (hw - 49152.0 * 4096.0 * 0.5 / 2.0).abs() < 1.0,
        "head weights {hw}"
    );
    assert!(cpu::eval(p, &prep.machine).feasible);
}

#[test]
fn activations_travel_at_their_own_precision() {
    let (s, mut w) = northpole();
    let plan = MappingPlan {
        stages: Some(
            std::iter::repeat_n((1, 1), 14)
                .chain(std::iter::once((0, 2)))
                .collect(),
        ),
        ..MappingPlan::default()
    };
    let bytes = |w: &Workload| {
        let prep = engine::prepare(&s, w, &MappingChoice::Given(plan.clone()), None)
            .ok()
            .unwrap();
        let c = prep
            .program
            .comms
            .iter()
            .find(|c| c.name.starts_with("pp send/recv"))
            .unwrap()
            .bytes;
        c
    };
    let a8 = bytes(&w);
    if let tessera::model::workload::Task::Inference(i) = &mut w.task {
        i.activations = tessera::model::precision::Precision::Bf16;
    }
    assert_eq!(bytes(&w), 2.0 * a8);
}

#[test]
fn a_stage_that_does_not_fit_is_infeasible_with_its_reason() {
    let (s, w) = northpole();
    // 7 stages of 2 layers: 218 MB of weights per card plus the KV cache exceed 224 MB
    let plan = MappingPlan {
        stages: Some(
            std::iter::repeat_n((2, 1), 7)
                .chain(std::iter::once((0, 2)))
                .collect(),
        ),
        ..MappingPlan::default()
    };
    let e = engine::estimate(&s, &w, &MappingChoice::Given(plan), Some(9));
    assert!(!e.feasible);
    assert_eq!(e.reason_code, Some("memory"), "{:?}", e.reason);
}

#[test]
fn balanced_placement_puts_the_extra_layers_first() {
    let p = Placement::balanced(14, 4, 2, 0);
    assert_eq!(p.describe(), "2×(4 layers, 2 dev) + 2×(3 layers, 2 dev)");
    assert_eq!((p.layers(), p.devices(), p.stages()), (14, 8, 4));
    let u = Placement::uniform(14, 1, 16);
    assert_eq!(u.describe(), "14×(1 layer, 1 dev) + 1×(head, 2 dev)");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// More on-chip bandwidth, a higher INT8 rate or a faster link between cards never slows a
    /// round, whatever the micro-batch.
    #[test]
    fn more_resources_never_slow_a_pipeline(
        bw in 0.5f64..4.0, peak in 0.5f64..4.0, lat in 0.1f64..1.0, mb in 0u64..29
    ) {
        let (s, w) = northpole();
        let plan = MappingPlan { pp: Some(16), micro_batch: (mb > 0).then_some(mb), ..MappingPlan::default() };
        let prep = engine::prepare(&s, &w, &MappingChoice::Given(plan), None).ok().unwrap();
        let base = cpu::eval(&prep.program, &prep.machine);
        // (a large micro-batch's prefill working set may not fit a card)
        prop_assume!(base.feasible);
        let mut m = prep.machine.clone();
        m[t::SRAM_BANDWIDTH] *= 1.0 + bw;
        m[t::MATRIX_PEAK + tessera::model::precision::Precision::Int8.index()] *= 1.0 + peak;
        m[t::UP_LATENCY] *= lat;
        let fast = cpu::eval(&prep.program, &m);
        prop_assert!(base.feasible && fast.feasible);
        prop_assert!(fast.step_time <= base.step_time * (1.0 + 1e-12));
    }
}

fn given_dp1() -> MappingChoice {
    MappingChoice::Given(MappingPlan {
        dp: Some(1),
        ..MappingPlan::default()
    })
}

/// A host transfer in a graph workload costs its bytes over the system's link to the host's
/// memory (`weight_store`) plus that link's latency, by hand: 838,860,800 B / 6.68 GB/s + 10 us
/// (architectures/upmem-pim.ron; network efficiency 1.0 there).
#[test]
fn a_host_transfer_costs_its_bytes_over_the_host_link() {
    let (s, w) = load(
        "architectures/upmem-pim.ron",
        "workloads/prim-va-cpu-dpu-upmem.ron",
    );
    let e = engine::estimate(&s, &w, &given_dp1(), Some(1));
    assert!(e.feasible, "{:?}", e.reason);
    let want = 838_860_800.0 / 6.68e9 + 10e-6;
    let got = e.step_time_s.unwrap();
    assert!((got / want - 1.0).abs() < 1e-9, "{got} s against {want} s");
}

/// Without a host link a host transfer is an infeasible design with its reason, not an error.
#[test]
fn a_host_transfer_without_a_host_link_is_unsupported() {
    let (s, w) = load(
        "architectures/northpole-16.ron",
        "workloads/prim-va-cpu-dpu-upmem.ron",
    );
    let e = engine::estimate(&s, &w, &given_dp1(), Some(1));
    assert!(!e.feasible);
    assert_eq!(e.reason_code, Some("unsupported"), "{:?}", e.reason);
}

/// The VA kernel on one DIMM by hand: 6 instructions per element at 16 chips x 8 DPUs x
/// 350 MHz = 29.96 ms of pipeline against 12 B per element at 128 x 0.7 GB/s x 0.90 =
/// 33.29 ms of MRAM traffic: memory-bound, plus the 50 us launch.
#[test]
fn the_va_kernel_is_bound_by_the_mram_bandwidth() {
    let (s, w) = load(
        "architectures/upmem-pim.ron",
        "workloads/prim-va-kernel-upmem.ron",
    );
    let e = engine::estimate(&s, &w, &given_dp1(), Some(1));
    assert!(e.feasible, "{:?}", e.reason);
    let n = 223_696_256.0;
    let compute = n * 6.0 / (16.0 * 8.0 * 350e6);
    let memory = n * 12.0 / (128.0 * 0.7e9 * 0.90);
    assert!(memory > compute);
    let want = memory + 50e-6;
    let got = e.step_time_s.unwrap();
    assert!((got / want - 1.0).abs() < 1e-9, "{got} s against {want} s");
}

/// A NorthPole case with its devices' figures replaced: no static power, `e4` J per int4
/// operation (twice that per int8), SRAM traffic at its file's energy times `sram`, no TDP cap;
/// returns the energy its devices spend per unit of work (J per frame or token) at the model's
/// rate (the energy per unit does not depend on the rate while nothing throttles).
fn northpole_energy_per_unit(case: &tessera::validate::Case, e4: f64, sram: f64) -> f64 {
    use tessera::model::precision::Precision;
    use tessera::validate::{predict, Metric};
    let mut c = case.clone();
    // at the model's own rate, not the published one the power case is judged at
    c.at_rate = None;
    let d = &mut c.system.device;
    d.idle_power = 0.0;
    d.tdp = 1e6;
    d.energy_per_flop = [0.0; tessera::model::precision::NPREC];
    d.energy_per_flop[Precision::Int4.index()] = e4;
    d.energy_per_flop[Precision::Int8.index()] = 2.0 * e4;
    for l in &mut d.memory {
        l.energy_per_byte *= sram;
    }
    c.metric = Metric::AveragePower;
    let power = predict(&c).expect("power").0;
    c.metric = Metric::Throughput;
    let rate = predict(&c).expect("rate").0;
    power / rate
}

/// Issue 41: the NorthPole card's static power and energy per operation from two published
/// points, by hand. At its published rate each point is N x P_s + rate x (ops x e4 + traffic),
/// with an int8 operation counted as two int4 ones:
///   ResNet-50, one card (Science 2023): 74 W at 42,460 frames/s; 8.178 GOP a frame, of which
///     the 7x7 stem and the classifier (240.1 MOP) at int8: 8.418 G int4-equivalent operations;
///   3B LLM, 16 cards (HPEC 2024): 672 W at 28,356 tokens/s; per output token, the 14 layers'
///     products (2 x 218.1 M, q/k/v/o and the SwiGLU FFN at hidden 4096, GQA 32/8, FFN 14336)
///     for it and, amortised, for its prompt token (prompt = output = 512), the classifier
///     (2 x 4096 x 49152) and attention over 768 keys on average in decode, 256 in the prompt:
///     12.85 G int8 operations;
///   the SRAM and PCIe traffic per frame and per token as the cost program charges it.
/// Two equations, two unknowns: P_s = 34.84 W and e4 = 0.1049 pJ, as the part file writes them,
/// and at the published rates the two cases give their published powers.
#[test]
fn northpole_power_figures_come_from_the_two_published_points() {
    use tessera::model::precision::Precision;
    let load = |p: &str| {
        tessera::validate::load_case(p, &common::CrateFs)
            .value
            .unwrap_or_else(|| panic!("{p}"))
    };
    let resnet = load("validation/near-memory/northpole-resnet50-power.ron");
    let llm = load("validation/near-memory/northpole-granite-3b-power.ron");
    // operations per unit, by hand
    let stem: f64 = 2.0 * 3.0 * 64.0 * 49.0 * 112.0 * 112.0;
    let fc = 2.0 * 2048.0 * 1000.0;
    let frame = 8_178_368_512.0;
    let frame_int4_equivalent = frame + stem + fc;
    let layer: f64 = 4096.0 * (4096.0 + 2.0 * 1024.0) + 4096.0 * 4096.0 + 3.0 * 4096.0 * 14336.0;
    assert!((layer / 218.1e6 - 1.0).abs() < 1e-3, "{layer}");
    let attention = 14.0 * 4.0 * 4096.0 * (768.0 + 256.0);
    let token: f64 = 2.0 * 14.0 * 2.0 * layer + 2.0 * 4096.0 * 49152.0 + attention;
    assert!((token / 12.85e9 - 1.0).abs() < 1e-3, "{token}");
    let token_int4_equivalent = 2.0 * token;

    // the cost program's operations agree (energy per unit at 1 J per int4 operation and no
    // traffic energy, less what the links still charge)
    let pj = 1e-12;
    let ops = |c: &tessera::validate::Case| {
        (northpole_energy_per_unit(c, pj, 0.0) - northpole_energy_per_unit(c, 0.5 * pj, 0.0))
            / (0.5 * pj)
    };
    let (o_r, o_l) = (ops(&resnet), ops(&llm));
    assert!((o_r / frame_int4_equivalent - 1.0).abs() < 1e-9, "{o_r}");
    assert!((o_l / token_int4_equivalent - 1.0).abs() < 0.01, "{o_l}");
    // traffic energy per unit (SRAM at 0.2 pJ/bit, PCIe at 1.3 pJ/bit)
    let traffic = |c: &tessera::validate::Case| northpole_energy_per_unit(c, 1e-30, 1.0);
    let (t_r, t_l) = (traffic(&resnet), traffic(&llm));

    // 74 W = P_s + 42,460 (o_r e4 + t_r); 672 W = 16 P_s + 28,356 (o_l e4 + t_l)
    let (r1, r2) = (42_460.0, 28_356.0);
    let a1 = 74.0 - r1 * t_r;
    let a2 = (672.0 - r2 * t_l) / 16.0;
    let (b1, b2) = (r1 * o_r, r2 * o_l / 16.0);
    let e4 = (a1 - a2) / (b1 - b2);
    let ps = a1 - b1 * e4;
    assert!((ps - 34.84).abs() < 0.01, "static {ps} W");
    assert!((e4 / 0.1049e-12 - 1.0).abs() < 1e-3, "{e4} J per int4 op");

    // as the part file writes them, to its digits
    let d = &resnet.system.device;
    assert!((d.idle_power / ps - 1.0).abs() < 5e-4, "{} W", d.idle_power);
    let f4 = d.energy_per_flop[Precision::Int4.index()];
    let f8 = d.energy_per_flop[Precision::Int8.index()];
    assert!((f4 / e4 - 1.0).abs() < 5e-4, "{f4}");
    assert!((f8 / (2.0 * e4) - 1.0).abs() < 5e-4, "{f8}");
    // and at the published rates the file's figures give the published powers
    let p1 = d.idle_power + r1 * (o_r * f4 + t_r);
    let p2 = 16.0 * d.idle_power + r2 * (o_l * f4 + t_l);
    assert!((p1 / 74.0 - 1.0).abs() < 1e-3, "{p1} W");
    assert!((p2 / 672.0 - 1.0).abs() < 1e-3, "{p2} W");
    // and the cases, evaluated at their published rates (`run: (at_rate: …)`), are that sum
    // with each operation at its own precision's figure as the file writes it (ResNet-50's stem
    // and classifier at int8, the rest at int4; every product of the LLM at int8)
    let at = |c: &tessera::validate::Case| tessera::validate::predict(c).expect("power").0;
    let q1 = d.idle_power + r1 * ((frame - stem - fc) * f4 + (stem + fc) * f8 + t_r);
    let q2 = 16.0 * d.idle_power + r2 * (0.5 * o_l * f8 + t_l);
    assert!((at(&resnet) / q1 - 1.0).abs() < 1e-6, "{} W", at(&resnet));
    assert!((at(&llm) / q2 - 1.0).abs() < 1e-6, "{} W", at(&llm));
    // the card's TDP is no longer the appliance's 672 W / 16: at least the 74 W one card drew
    assert!(d.tdp >= 74.0, "{} W", d.tdp);
}

/// A power at a fixed rate (`run: (at_rate: …)`) at the model's own rate is the model's own
/// power; at any rate it is static power plus the work's energy per unit times the rate (affine
/// in the rate: equal steps in rate, equal steps in power), and never below the static power.
#[test]
fn power_at_a_fixed_rate_is_static_power_plus_energy_per_unit_times_the_rate() {
    use tessera::validate::{load_case, predict, Metric};
    let c = load_case(
        "validation/near-memory/northpole-granite-3b-power.ron",
        &common::CrateFs,
    )
    .value
    .expect("case");
    let mut own = c.clone();
    own.at_rate = None;
    let power = predict(&own).expect("power").0;
    own.metric = Metric::Throughput;
    let rate = predict(&own).expect("rate").0;
    let mut at = c.clone();
    let mut p = |r: f64| {
        at.at_rate = Some(r);
        predict(&at).expect("power").0
    };
    assert!(
        (p(rate) / power - 1.0).abs() < 1e-9,
        "{} W vs {power} W",
        p(rate)
    );
    let (a, b, d) = (p(0.5 * rate), p(rate), p(1.5 * rate));
    assert!(((d - b) - (b - a)).abs() < 1e-9 * b, "{a} {b} {d}");
    let idle = 16.0 * c.system.device.idle_power;
    assert!(p(1e-3) >= idle && p(1e-3) < idle * 1.001, "{} W", p(1e-3));
}

/// A rate the cards cannot sustain within their power limit is refused with the reason, not
/// extrapolated past it.
#[test]
fn a_fixed_rate_beyond_the_power_limit_is_refused() {
    use tessera::validate::{load_case, predict};
    let mut c = load_case(
        "validation/near-memory/northpole-resnet50-power.ron",
        &common::CrateFs,
    )
    .value
    .expect("case");
    c.at_rate = Some(10.0 * 42_460.0);
    let err = predict(&c).expect_err("beyond the limit");
    assert!(err.contains("above its limit"), "{err}");
}

/// `at_rate` belongs to a power figure: on another metric it is a located error.
#[test]
fn at_rate_on_a_throughput_case_is_a_located_error() {
    struct Patched;
    impl Fs for Patched {
        fn read(&self, path: &str) -> Result<Vec<u8>, String> {
            let b = common::CrateFs.read(path)?;
            if !path.ends_with("northpole-granite-3b-throughput.ron") {
                return Ok(b);
            }
            let t = String::from_utf8(b).unwrap().replace(
                "run: (software:",
                "run: (at_rate: \"28356 tokens/s @hpec2024\", software:",
            );
            Ok(t.into_bytes())
        }
    }
    let l = tessera::validate::load_case(
        "validation/near-memory/northpole-granite-3b-throughput.ron",
        &Patched,
    );
    assert!(l.value.is_none());
    let d = l
        .diagnostics
        .iter()
        .find(|d| d.message.contains("at_rate"))
        .expect("an at_rate diagnostic");
    assert!(d.message.contains("throughput"), "{}", d.message);
    assert!(d.pos.is_some_and(|p| p.line > 0), "located: {d:?}");
}
