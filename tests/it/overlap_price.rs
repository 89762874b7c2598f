//! What overlap costs: hand-checked cases of the priced overlap (collectives NCCL runs on the
//! SMs take a share of the compute they hide behind, the copy-engine tensor-parallel exchange
//! does not; FSDP's gathers hide pass by pass, one layer of each pass exposed) and two laws every
//! step obeys: more work never shortens it, and overlap never makes it shorter than the busy time
//! of its busiest resource (the compute, or any one link).

use approx::assert_relative_eq;
use proptest::prelude::*;
use tessera::engine::cpu::{collective, collective_links, eval, op_time, LINKS};
use tessera::engine::program::*;
use tessera::engine::table as t;

use crate::common;
use crate::common::{comm, h100, timed_program as program};

/// `c` with another role, its coefficients settled again (what the role decides: `cores`).
fn as_role(c: Comm, role: Role) -> Comm {
    Comm { role, ..c }.with_coeffs()
}

fn with(c: Comm, section: Section, overlap: Overlap) -> Comm {
    Comm {
        section,
        overlap,
        ..c
    }
}

#[test]
fn nccl_collectives_take_cores_and_the_copy_engine_exchange_does_not() {
    let mut m = h100();
    m[t::COMM_SHARE] = 0.18;
    // A 3.6 GB all-gather over the 8 GPUs of a node: 7/8 · 3.6e9 / 450e9 = 7 ms on NVLink,
    // overlapped with a 10 ms micro-batch (4 ms forward, 6 ms backward).
    let ag = with(
        comm(CollKind::AllGather, 3.6e9, 8.0, 1.0),
        Section::MicroBatch,
        Overlap::Compute,
    );
    assert_relative_eq!(collective(&ag, &m).0, 0.007, max_relative = 1e-12);
    // Run by NCCL (a data-parallel gather): its 24 of 132 SMs leave the GEMMs beside it 0.18
    // fewer for its 7 ms, 1.26 ms more compute, still hidden: 11.26 ms.
    let nccl = as_role(ag.clone(), Role::WeightGather);
    assert_eq!(nccl.coeffs.cores, 1.0);
    let e = eval(&program(0.004, 0.006, 0.0, 1.0, vec![nccl]), &m);
    assert_relative_eq!(e.step_time, 0.010 + 0.18 * 0.007, max_relative = 1e-9);
    assert_relative_eq!(e.breakdown.communication, 0.0, epsilon = 1e-15);
    // Transformer Engine's ring exchange on the copy engines: hidden for nothing, 10 ms.
    let ce = as_role(ag, Role::TensorParallel);
    assert_eq!(ce.coeffs.cores, 0.0);
    let e = eval(&program(0.004, 0.006, 0.0, 1.0, vec![ce]), &m);
    assert_relative_eq!(e.step_time, 0.010, max_relative = 1e-9);
    // The roles: what NCCL runs takes cores, DMA and the copy engines do not.
    for r in [
        Role::GradientReduction,
        Role::ParameterGather,
        Role::WeightGather,
        Role::ContextParallel,
        Role::PipelineSendRecv,
        Role::ExpertAllToAll,
    ] {
        assert!(r.takes_cores(), "{r:?}");
    }
    for r in [
        Role::TensorParallel,
        Role::ActivationOffload,
        Role::OptimizerOffload,
        Role::WeightOffload,
    ] {
        assert!(!r.takes_cores(), "{r:?}");
    }
}

/// NCCL gives a network peer 2 channels, and a pipeline stage (or a context-parallel ring
/// rank) talks to two at once: 4 of the 24 channels a collective runs on, so an exchange between
/// nodes takes a sixth of the share; inside a node (NVLink) it takes the whole.
#[test]
fn a_point_to_point_exchange_between_nodes_takes_its_few_channels() {
    let mut m = h100();
    m[t::COMM_SHARE] = 0.18;
    // 350 MB to a stage on the next node: 350e6 / 50e9 = 7 ms on the NIC, behind a 10 ms
    // micro-batch: 0.18 / 6 × 7 ms = 0.21 ms more compute, still hidden.
    let p2p = as_role(
        with(
            comm(CollKind::SendRecv, 350e6, 1.0, 2.0),
            Section::MicroBatch,
            Overlap::Compute,
        ),
        Role::PipelineSendRecv,
    );
    assert_relative_eq!(collective(&p2p, &m).0, 0.007, max_relative = 1e-12);
    assert_relative_eq!(p2p.coeffs.cores, 4.0 / 24.0, max_relative = 1e-15);
    let e = eval(&program(0.004, 0.006, 0.0, 1.0, vec![p2p]), &m);
    assert_relative_eq!(e.step_time, 0.010 + 0.18 / 6.0 * 0.007, max_relative = 1e-9);
    // the context-parallel ring between nodes alike; inside a node, the whole share
    for (role, outer, part) in [
        (Role::ContextParallel, 2.0, 4.0 / 24.0),
        (Role::PipelineSendRecv, 1.0, 1.0),
        (Role::GradientReduction, 2.0, 1.0),
        (Role::TensorParallel, 2.0, 0.0),
    ] {
        assert_eq!(
            role.core_share(outer),
            part,
            "{role:?} over {outer} domains"
        );
    }
}

#[test]
fn fsdp_gathers_hide_pass_by_pass_with_each_passs_first_layer_exposed() {
    let m = h100();
    // A 4-layer stage's weights, 700 MB gathered over 2 nodes (one rank each) on the NIC: a
    // ring all-gather across domains receives 1/2 of it: 350 MB / 50 GB/s = 7 ms a pass.
    // Split as lowering splits it (`weight_gathers`): 3/4 behind each pass, 1/4 (the first
    // layer, 1.75 ms) exposed in each pass.
    let whole = comm(CollKind::AllGather, 700e6, 1.0, 2.0);
    let t_whole = collective(&whole, &m).0;
    assert_relative_eq!(t_whole, 0.007, max_relative = 1e-12);
    let mb = Section::MicroBatch;
    let part = |bytes: f64, overlap, count| Comm {
        count,
        ..with(
            as_role(
                comm(CollKind::AllGather, bytes, 1.0, 2.0),
                Role::WeightGather,
            ),
            mb,
            overlap,
        )
    };
    let gathers = vec![
        part(525e6, Overlap::Forward, 1.0),
        part(525e6, Overlap::Backward, 1.0),
        part(175e6, Overlap::None, 2.0),
    ];
    // A 4 ms forward cannot hide its 5.25 ms: 1.25 ms exposed; a 12 ms backward hides its
    // whole; the two first layers 2 × 1.75 ms: 4 + 1.25 + 12 + 3.5 = 20.75 ms.
    let e = eval(&program(0.004, 0.012, 0.0, 1.0, gathers.clone()), &m);
    assert_relative_eq!(e.step_time, 0.02075, max_relative = 1e-9);
    assert_relative_eq!(e.breakdown.communication, 0.00475, max_relative = 1e-9);
    // With both passes long enough, only the first layers: 8 + 12 + 3.5 ms.
    let e = eval(&program(0.008, 0.012, 0.0, 1.0, gathers), &m);
    assert_relative_eq!(e.step_time, 0.0235, max_relative = 1e-9);
}

/// A collective drawn from the kinds, links, sections, overlaps and roles a lowering emits.
fn any_comm() -> impl Strategy<Value = Comm> {
    (
        0usize..5,
        1e6f64..8e9,
        0u32..3,
        0usize..6,
        any::<bool>(),
        any::<bool>(),
        0.05f64..1.0,
    )
        .prop_map(|(kind, bytes, outer_log, overlap, step, nccl, windows)| {
            let kinds = [
                CollKind::AllGather,
                CollKind::AllReduce,
                CollKind::AllToAll,
                CollKind::SendRecv,
                CollKind::ReduceScatter,
            ];
            let overlaps = [
                Overlap::None,
                Overlap::Backward,
                Overlap::Compute,
                Overlap::Forward,
                Overlap::TailBackward,
                Overlap::HeadForward,
            ];
            let inner = if kinds[kind] == CollKind::SendRecv {
                1.0
            } else {
                8.0
            };
            let role = if nccl {
                Role::GradientReduction
            } else {
                Role::TensorParallel
            };
            let section = if step {
                Section::Step
            } else {
                Section::MicroBatch
            };
            let c = with(
                as_role(
                    comm(kinds[kind], bytes, inner, f64::from(1u32 << outer_log)),
                    role,
                ),
                section,
                overlaps[overlap],
            );
            // a spread collective's calls: a share of the micro-batches but the last, set by
            // `within` once the step's micro-batches are drawn (as `dp::chunk_windows` keeps them)
            if matches!(
                overlaps[overlap],
                Overlap::TailBackward | Overlap::HeadForward
            ) {
                Comm {
                    count: windows,
                    ..c
                }
            } else {
                c
            }
        })
}

/// `comms` with each spread collective's windows made a number of the `mbs` micro-batches but
/// one, the same for every collective spread the same way (as `dp::chunk_windows` gives every
/// chunked collective of a stage its schedule's windows), the two spreads on micro-batches of
/// their own: each the first one's share (its `count`, drawn in (0, 1)) of half of `mbs` − 1,
/// none with one micro-batch.
fn within(comms: Vec<Comm>, mbs: f64) -> Vec<Comm> {
    let share = |o: Overlap| {
        comms
            .iter()
            .find(|c| c.overlap == o)
            .map_or(0.0, |c| c.count)
    };
    let (tail, head) = (share(Overlap::TailBackward), share(Overlap::HeadForward));
    // the two spreads' windows are micro-batches of their own
    let (tail, head) = (tail / 2.0, head / 2.0);
    comms
        .into_iter()
        .map(|c| match c.overlap {
            Overlap::TailBackward => Comm {
                count: tail * (mbs - 1.0),
                ..c
            },
            Overlap::HeadForward => Comm {
                count: head * (mbs - 1.0),
                ..c
            },
            _ => c,
        })
        .collect()
}

/// Busy time per step of the compute and of each link class: every operator's time and every
/// collective's time on each link, all calls, whatever hides behind what.
fn busy(p: &Program, m: &Machine) -> (f64, [f64; LINKS]) {
    let per = |s: Section| match s {
        Section::MicroBatch => p.micro_batches,
        Section::Step => 1.0,
    };
    let mut compute = 0.0;
    for op in &p.ops {
        let o = op_time(op, m, Tier::Hbm, Tier::Hbm).expect("a rate");
        compute += o.compute.max(o.memory) * op.count * per(op.section);
    }
    let mut links = [0.0; LINKS];
    for c in &p.comms {
        for (l, x) in links.iter_mut().zip(collective_links(c, m)) {
            *l += x * c.count * per(c.section);
        }
    }
    (compute, links)
}

proptest! {
    /// More work never makes a step shorter: a longer forward, backward or update, more bytes
    /// in any collective, one more micro-batch, or a larger share of the cores taken.
    #[test]
    fn more_work_never_shortens_a_step(
        fwd in 1e-3f64..2e-2, bwd in 1e-3f64..4e-2, upd in 0.0f64..5e-3, mbs in 1u32..5,
        comms in proptest::collection::vec(any_comm(), 1..6), which in 0usize..6,
        pick in 0usize..6, more in 1.0f64..3.0, share in 0.0f64..0.3,
    ) {
        let mut m = h100();
        m[t::COMM_SHARE] = share;
        let p = program(fwd, bwd, upd, f64::from(mbs), within(comms, f64::from(mbs)));
        let base = eval(&p, &m).step_time;
        let (mut q, mut n) = (p.clone(), m.clone());
        match which {
            0..=2 => q.ops[which].count *= more,
            3 => {
                let k = pick % q.comms.len();
                q.comms[k] = Comm { bytes: q.comms[k].bytes * more, ..q.comms[k].clone() }
                    .with_coeffs();
            }
            4 => q.micro_batches += 1.0,
            _ => n[t::COMM_SHARE] = (share * more).min(0.9),
        }
        let longer = eval(&q, &n).step_time;
        prop_assert!(longer >= base * (1.0 - 1e-12), "{longer} < {base} ({which}, ×{more})");
    }

    /// Overlap never makes a step shorter than its busiest resource: the step lasts at least
    /// the compute's busy time and at least each link's (overlap never hides more than the idle
    /// time of the resource it uses). Step collectives behind the next step's first forward
    /// included: they once shared the first micro-batch's links with its backward's collectives
    /// (`tests/it/regressions.rs`, `a_gather_behind_the_first_forward_does_not_share_the_link_...`).
    #[test]
    fn overlap_never_beats_the_busiest_resource(
        fwd in 1e-3f64..2e-2, bwd in 1e-3f64..4e-2, upd in 0.0f64..5e-3, mbs in 1u32..5,
        comms in proptest::collection::vec(any_comm(), 1..6), share in 0.0f64..0.3,
    ) {
        let mut m = h100();
        m[t::COMM_SHARE] = share;
        let p = program(fwd, bwd, upd, f64::from(mbs), within(comms, f64::from(mbs)));
        let step = eval(&p, &m).step_time;
        let (compute, links) = busy(&p, &m);
        prop_assert!(step >= compute * (1.0 - 1e-12), "{step} < compute {compute}");
        for (k, l) in links.iter().enumerate() {
            prop_assert!(step >= l * (1.0 - 1e-12), "{step} < link {k}'s {l}");
        }
    }
}

/// Issue 43's check, in direction: `--mapping auto` for the shipped Llama 3.1 405B pretraining
/// workload on 8,192 H100 (bf16, global batch 2048) pays the overlap price, so its MFU is below
/// what the same search finds with overlap free (`collective_compute_share` 0), and never above
/// it (the search can always keep the free layout's choice).
#[test]
fn the_search_pays_the_overlap_price_on_the_405b_check() {
    let mfu = |share: &str| {
        let out = common::tessera(&[
            "estimate",
            "--arch",
            "architectures/eos-h100.ron",
            "--workload",
            "workloads/llama3.1-405b-pretrain.ron",
            "--mapping",
            "auto",
            "--set",
            "workload.compute=bf16",
            "--set",
            "workload.weights=bf16",
            "--set",
            "workload.global_batch=2048",
            "--set",
            &format!("device.efficiency.collective_compute_share={share}"),
            "--format",
            "json",
        ]);
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["mfu"].as_f64().expect("an MFU")
    };
    let (priced, free) = (mfu("0.18"), mfu("0"));
    assert!(priced < free, "priced {priced} vs free {free}");
}
