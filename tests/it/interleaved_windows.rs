//! An interleaved pipeline schedule reduces each model chunk's gradients once that chunk's last
//! backward is done and gathers each chunk's updated parameters while the chunks before it run
//! their first forwards (Megatron-Core's `grad_sync_func` / `param_sync_func`), so those
//! collectives hide behind more than the step's last backward or first forward. Hand-checked:
//! the evaluator's spread bookings on a two-node program, the lowering's split of a step's
//! data-parallel traffic (bytes conserved, windows by the schedule's formula), and a law:
//! spreading over at least one window never exposes more than the last backward would.

use approx::assert_relative_eq;
use tessera::engine::cpu;
use tessera::engine::lower::lower;
use tessera::engine::program::{CollKind, Comm, Overlap, Program, Role, Section};
use tessera::model::mapping::{ExtraOverlap, Mapping};

use crate::common;

/// A program of one 1 ms forward and one 2 ms backward per micro-batch, four micro-batches, no
/// bubble, on the shared H100 (a 50 GB/s NIC, no latencies): `comms` its only collectives.
fn program(comms: Vec<Comm>) -> (Program, tessera::engine::table::Machine) {
    (
        common::timed_program(1e-3, 2e-3, 0.0, 4.0, comms),
        common::h100(),
    )
}

/// An all-gather between two nodes (each receives half of `bytes` over its NIC), a step
/// collective overlapped as `overlap`, in `count` calls.
fn gather(role: Role, bytes: f64, count: f64, overlap: Overlap) -> Comm {
    Comm {
        role,
        count,
        section: Section::Step,
        overlap,
        ..common::comm(CollKind::AllGather, bytes, 1.0, 2.0)
    }
    .with_coeffs()
}

/// Three calls of 0.25 GB (2.5 ms on the NIC each) spread over three backwards of 2 ms expose
/// 3 × 0.5 ms; two calls of 0.15 GB (1.5 ms each) over two forwards of 1 ms expose 2 × 0.5 ms.
/// The same 0.75 GB behind the last backward alone would expose 7.5 − 2 = 5.5 ms.
#[test]
fn spread_calls_each_hide_behind_their_own_micro_batch() {
    let (p, m) = program(vec![
        gather(Role::GradientReduction, 0.25e9, 3.0, Overlap::TailBackward),
        gather(Role::ParameterGather, 0.15e9, 2.0, Overlap::HeadForward),
    ]);
    let nic: Vec<f64> = p
        .comms
        .iter()
        .map(|c| cpu::collective_links(c, &m)[1])
        .collect();
    assert_relative_eq!(nic[0], 2.5e-3, max_relative = 1e-12);
    assert_relative_eq!(nic[1], 1.5e-3, max_relative = 1e-12);
    let mut trace = Vec::new();
    let e = cpu::eval_traced(&p, &m, Some(&mut trace));
    // (the trace: the three operators, then the collectives)
    assert_relative_eq!(trace[3], 1.5e-3, max_relative = 1e-9);
    assert_relative_eq!(trace[4], 1.0e-3, max_relative = 1e-9);
    assert_relative_eq!(e.breakdown.communication, 2.5e-3, max_relative = 1e-9);
    assert_relative_eq!(e.step_time, 4.0 * 3e-3 + 2.5e-3, max_relative = 1e-9);

    let (last, m) = program(vec![gather(
        Role::GradientReduction,
        0.75e9,
        1.0,
        Overlap::Backward,
    )]);
    let e = cpu::eval(&last, &m);
    assert_relative_eq!(e.breakdown.communication, 5.5e-3, max_relative = 1e-9);
}

/// Law: spread over `w` ≥ 1 backwards, a reduction never exposes more than the same bytes behind
/// the last backward, and it exposes exactly what its link time exceeds the `w` windows by.
#[test]
fn spreading_over_at_least_one_window_never_exposes_more() {
    for total in [0.05e9, 0.2e9, 0.5e9, 1e9, 4e9] {
        let (last, m) = program(vec![gather(
            Role::GradientReduction,
            total,
            1.0,
            Overlap::Backward,
        )]);
        let behind_last = cpu::eval(&last, &m);
        for w in [1.0, 1.5, 2.75, 6.0] {
            let (p, m) = program(vec![gather(
                Role::GradientReduction,
                total / w,
                w,
                Overlap::TailBackward,
            )]);
            let e = cpu::eval(&p, &m);
            let link = total / 2.0 / 50e9;
            let c = e.breakdown.communication;
            assert!(
                c <= behind_last.breakdown.communication + 1e-12,
                "{total} B over {w}: {c} > {}",
                behind_last.breakdown.communication
            );
            assert_relative_eq!(c, (link - w * 2e-3).max(0.0), epsilon = 1e-12);
        }
    }
}

/// A dense 24-layer model (one to six layers per virtual stage) trained at micro-batch 1, global
/// batch 32, on 8 GPUs as pp 4 × dp 2, ZeRO 1 with the parameter gather overlapped: 16
/// micro-batches per replica.
const WORKLOAD: &str = r#"Workload(
    version: 1, name: "test", source: "t", sources: { "t": "test fixture" },
    model: Transformer(layers: 24, hidden: 4096, heads: 32, kv_heads: 8, ffn: 14336, gated_ffn: true, vocab: 32000),
    task: Training(seq_len: 2048, global_batch: 32, target: Steps(10), flash_attention: true, dropout: false),
)"#;

fn interleaved(v: u64) -> Program {
    let (sys, w) = common::load_texts(common::NODE_8, WORKLOAD);
    let m = Mapping {
        dp: 2,
        pp: 4,
        interleave: v,
        zero: 1,
        micro_batch: 1,
        overlap_grad_reduce: true,
        overlap: ExtraOverlap {
            parameter_gather: true,
            ..ExtraOverlap::default()
        },
        ..Mapping::single()
    };
    lower(&sys, &w, &m, 8).unwrap_or_else(|r| panic!("interleave {v}: {r}"))
}

fn of(p: &Program, role: Role, overlap: Overlap) -> Vec<&Comm> {
    p.comms
        .iter()
        .filter(|c| c.role == role && c.overlap == overlap && c.section == Section::Step)
        .collect()
}

/// The schedule's windows: groups of g = min(16, pp 4) = 4 micro-batches, so with v chunks the
/// other chunks' reductions get (v − 1)·4/v − 1 backwards and their gathers (v − 1)·4/v
/// forwards, each carrying (v − 1)/v of the step's bytes over its windows; the last chunk's
/// reduction and the first chunk's gather stay where they were, 1/v of the bytes. Without
/// interleaving nothing is spread, and the bytes per step are the same at every v.
#[test]
fn the_lowering_spreads_all_chunks_but_one_by_the_schedule() {
    let flat = interleaved(1);
    assert!(flat
        .comms
        .iter()
        .all(|c| !matches!(c.overlap, Overlap::TailBackward | Overlap::HeadForward)));
    let bytes =
        |p: &Program, role| common::bytes_per_step(p, p.comms.iter().filter(|c| c.role == role));
    for v in [2u64, 3, 6] {
        let p = interleaved(v);
        let vf = v as f64;
        for (role, overlap, windows) in [
            (
                Role::GradientReduction,
                Overlap::TailBackward,
                (vf - 1.0) * 4.0 / vf - 1.0,
            ),
            (
                Role::ParameterGather,
                Overlap::HeadForward,
                (vf - 1.0) * 4.0 / vf,
            ),
        ] {
            let total = bytes(&flat, role);
            assert_relative_eq!(bytes(&p, role), total, max_relative = 1e-12);
            let spread = of(&p, role, overlap);
            assert_eq!(spread.len(), 1, "v {v}: {role:?} spread once");
            let s = spread[0];
            assert_relative_eq!(s.count, windows, max_relative = 1e-12);
            assert_relative_eq!(
                s.bytes * s.count,
                total * (vf - 1.0) / vf,
                max_relative = 1e-12
            );
        }
    }
}
