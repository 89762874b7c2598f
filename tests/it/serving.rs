//! Serving (issue 13): prefill and decode as two programs of one lowering, time to first token
//! and time per output token, the KV cache's limit on concurrency, latency targets in the
//! mapping search. Hand-checked: the prefill program of Llama 3.1 8B on a DGX H100 at TP 8.
//! The check: at one user, a per-user rate target makes the search pick the TP-8
//! latency mapping. Laws: more requests in flight never lower the system's throughput while
//! they fit; time to first token is never below the prefill's FLOPs at peak; a looser target
//! never gives a lower best throughput.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use proptest::prelude::*;
use tessera::engine::program::{Eval, Section};
use tessera::engine::table as t;
use tessera::engine::{self, cpu, lower, serve, MappingChoice, Objective};
use tessera::model::mapping::{Mapping, MappingPlan};
use tessera::model::serving::{Concurrency, Load, Slo};
use tessera::model::system::{load_system, System};
use tessera::model::workload::{load_workload, Task, Workload};
use tessera::vocab::Kernels;

use crate::common;
use crate::common::CrateFs;

const DGX: &str = "architectures/dgx-h100.ron";
const LLAMA8B: &str = "workloads/llama3.1-8b-serving.ron";

fn inputs() -> (System, Workload) {
    let s = load_system(DGX, &CrateFs).value.expect("system");
    let w = load_workload(LLAMA8B, &CrateFs).value.expect("workload");
    (s, w)
}

/// `s` without its GEMM tiling: every product at full occupancy, so a kernel's work takes the
/// same time however it is split into launches (with the tiling, a product split into narrower
/// launches fills fewer waves: `engine::tiling`).
fn untiled(s: &System) -> System {
    let mut s = s.clone();
    s.device.efficiency.tiles.clear();
    s
}

fn with_load(w: &Workload, load: Load) -> Workload {
    let mut w = w.clone();
    if let Task::Inference(inf) = &mut w.task {
        inf.load = load;
    }
    w
}

fn tp8() -> Mapping {
    Mapping {
        tp: 8,
        sp: true,
        micro_batch: 0,
        ..Mapping::single()
    }
}

/// `m` with the decode layer costed as one step per kind of work (its matrix products, its
/// attention, its vector work): the hand-checks of what a layer reads compare those ops whole.
fn compiled(m: Mapping) -> Mapping {
    Mapping {
        kernels: Some(Kernels::Compiled),
        ..m
    }
}

fn tp(n: u64) -> MappingChoice {
    MappingChoice::Given(MappingPlan {
        tp: Some(n),
        ..Default::default()
    })
}

#[test]
fn prefill_program_is_the_prompt_alone_through_the_layers() {
    let (s, w) = inputs();
    let m = compiled(tp8());
    let p = lower::lower_prefill(&s, &w, &m, 8).expect("prefill lowers");
    // one micro-batch: the prompt passes every stage once (the chain)
    assert_eq!(p.micro_batches, 1.0);
    assert!(p.ops.iter().all(|o| o.section == Section::MicroBatch));
    assert!(p.comms.iter().all(|c| c.section == Section::MicroBatch));
    // no decode work but the output head's first token
    assert!(p
        .ops
        .iter()
        .all(|o| !o.name.starts_with("decode:") || o.name.contains("lm head")));
    // Llama 3.1 8B: layer weights 4096² × 2 + 2 × 4096 × 1024 (Q, O; K, V) + 3 × 4096 × 14336
    let (h, kv, ffn) = (4096.0, 1024.0, 14336.0);
    let layer = 2.0 * h * h + 2.0 * h * kv + 3.0 * h * ffn;
    let mm = p
        .ops
        .iter()
        .find(|o| o.name == "prefill: layer matmuls")
        .expect("prefill matmuls");
    // 2 FLOPs per parameter per prompt token (1024), an eighth per device; once per layer
    assert!((mm.flops - 2.0 * layer / 8.0 * 1024.0).abs() / mm.flops < 1e-12);
    assert_eq!(mm.count, 32.0);
    assert!((mm.weight_bytes - layer / 8.0 * 2.0).abs() / mm.weight_bytes < 1e-12);
    let att = p
        .ops
        .iter()
        .find(|o| o.name == "prefill: attention")
        .expect("prefill attention");
    // 4 × prompt² × hidden, causal half with flash attention, an eighth per device
    assert!((att.flops - 4.0 * 1024.0 * 1024.0 * h / 8.0 * 0.5).abs() / att.flops < 1e-12);
    let ar = p
        .comms
        .iter()
        .find(|c| c.name == "prefill: tp all-reduce")
        .expect("prefill all-reduce");
    assert_eq!(ar.count, 64.0);
    assert!((ar.bytes - 1024.0 * h * 2.0).abs() < 1e-6);
}

#[test]
fn kv_cache_is_paged_and_staggered() {
    // one request: its prompt and all its output, half a page wasted on average
    assert_eq!(lower::kv_tokens(1.0, 1024.0, 1024.0), 1024.0 + 8.0 + 1024.0);
    // B requests evenly through their output: B × prompt + output × (B + 1)/2
    assert_eq!(
        lower::kv_tokens(4.0, 100.0, 64.0),
        4.0 * 108.0 + 64.0 * 5.0 / 2.0
    );
}

#[test]
fn figures_combine_prefill_and_round() {
    let (s, w) = inputs();
    let e = engine::estimate(&s, &w, &tp(8), None);
    assert!(e.feasible, "{:?}", e.reason);
    let (ttft, tpot, pre) = (
        e.ttft_s.unwrap(),
        e.tpot_s.unwrap(),
        e.prefill_time_s.unwrap(),
    );
    // one user: the time to first token is the prompt's prefill alone
    assert_eq!(e.concurrency, Some(1));
    assert!((ttft - pre).abs() <= 1e-15 * ttft);
    assert_eq!(Some(tpot), e.latency_per_token_s);
    assert!((e.user_tokens_per_s.unwrap() * tpot - 1.0).abs() < 1e-12);
    assert_eq!(e.system_tokens_per_s, e.throughput_per_s);
    // the prefill of 1,024 tokens takes longer than one decode round
    assert!(pre > tpot, "prefill {pre} s, round {tpot} s");
    // the KV cache of an H100 at TP 8 holds many more requests than one
    assert!(e.max_concurrency.unwrap() > 100, "{:?}", e.max_concurrency);
    assert_eq!(serve::ttft(2.0, 1.0, 4.0), 2.75);
}

#[test]
fn per_user_target_picks_the_latency_mapping() {
    let (s, w) = inputs();
    // no target: the search maximises the system's throughput (eight instances of one user)
    let free = engine::estimate(&s, &w, &MappingChoice::Auto(Objective::Time), None);
    let m = free.mapping.as_ref().unwrap();
    assert!(m.dp > 1, "dp {} tp {}", m.dp, m.tp);
    let slow = free.user_tokens_per_s.unwrap();
    // at least 500 tokens/s for the one user (a target serves the workload's batch over the
    // whole system): TP 8
    let w5 = with_load(
        &w,
        serve::with_target(
            Load {
                slo: Slo {
                    min_user_rate: Some(500.0),
                    ..Slo::default()
                },
                ..Load::default()
            },
            1,
        ),
    );
    assert_eq!(
        match &w5.task {
            Task::Inference(i) => i.load.concurrency,
            _ => unreachable!(),
        },
        Concurrency::Total(1)
    );
    let fast = engine::estimate(&s, &w5, &MappingChoice::Auto(Objective::Time), None);
    let m = fast.mapping.as_ref().unwrap();
    assert_eq!((m.dp, m.tp, m.pp), (1, 8, 1), "{m:?}");
    assert_eq!(fast.slo_met, Some(true));
    assert!(fast.user_tokens_per_s.unwrap() > 500.0 && slow < 500.0);
    // the same on the command line
    let out = common::tessera(&[
        "estimate",
        "--arch",
        DGX,
        "--workload",
        LLAMA8B,
        "--min-user-rate",
        "500/s",
        "--format",
        "json",
    ]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["mapping"]["tp"], 8);
    assert_eq!(j["slo_met"], true);
    // a target nothing meets: the closest point, said so
    let w_imp = with_load(
        &w,
        Load {
            slo: Slo {
                tpot_s: Some(1e-6),
                ..Slo::default()
            },
            ..Load::default()
        },
    );
    let imp = engine::estimate(&s, &w_imp, &MappingChoice::Auto(Objective::Time), None);
    assert!(imp.feasible);
    assert_eq!(imp.slo_met, Some(false));
    assert_eq!(imp.mapping.as_ref().unwrap().tp, 8);
}

#[test]
fn one_user_over_the_system_is_one_instance() {
    let (s, w) = inputs();
    let w1 = with_load(
        &w,
        Load {
            concurrency: Concurrency::Total(1),
            ..Load::default()
        },
    );
    let e = engine::estimate(&s, &w1, &MappingChoice::Auto(Objective::Time), None);
    assert_eq!(e.concurrency, Some(1));
    assert_eq!(e.mapping.as_ref().unwrap().dp, 1);
    // more requests than the KV cache holds: infeasible by memory, with the limit stated
    let many = with_load(
        &w,
        Load {
            concurrency: Concurrency::Total(1 << 20),
            ..Load::default()
        },
    );
    let e = engine::estimate(&s, &many, &tp(8), None);
    assert!(!e.feasible);
    assert_eq!(e.reason_code, Some("memory"));
    let cap = e.max_concurrency.unwrap();
    // and at that limit it fits
    let at = with_load(
        &w,
        Load {
            concurrency: Concurrency::Total(cap),
            ..Load::default()
        },
    );
    let e = engine::estimate(&s, &at, &tp(8), None);
    assert!(e.feasible, "{cap}: {:?}", e.reason);
    // `max`: the same requests in flight
    let max = with_load(
        &w,
        Load {
            concurrency: Concurrency::Max,
            ..Load::default()
        },
    );
    assert_eq!(
        engine::estimate(&s, &max, &tp(8), None).concurrency,
        Some(cap)
    );
}

#[test]
fn slo_parses_and_rejects() {
    let s = Slo::parse("ttft<=2s, tpot<=40ms").unwrap();
    assert_eq!(s.ttft_s, Some(2.0));
    assert!((s.tpot_s.unwrap() - 0.04).abs() < 1e-15);
    assert_eq!(Slo::parse("user>=50/s").unwrap().min_user_rate, Some(50.0));
    assert!(Slo::parse("ttft<2s").unwrap_err().contains("hint"));
    assert!(Slo::parse("ttft<=2 kg").is_err());
    assert!(Slo::parse("latency<=2s").is_err());
    assert!(Concurrency::parse("0").is_err());
    assert_eq!(Concurrency::parse("max"), Ok(Concurrency::Max));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

    /// On one instance without a pipeline, more requests in flight never lower the system's
    /// throughput while they fit (each round reads the weights once for all of them). A law of
    /// the roofline: with the device's GEMM tiles a batch one row past a tile boundary pays for
    /// a whole tile more (`the_tile_boundary_is_a_throughput_cliff`), so it is stated untiled.
    #[test]
    fn more_concurrency_never_lowers_throughput(a in 1u64..400, b in 1u64..400, k in 0usize..4) {
        let (s, w) = inputs();
        let s = untiled(&s);
        let (lo, hi) = (a.min(b), a.max(b));
        let tpn = [1u64, 2, 4, 8][k];
        let run = |c: u64| {
            let wl = with_load(&w, Load { concurrency: Concurrency::Total(c), ..Load::default() });
            engine::estimate(&s, &wl, &tp(tpn), Some(tpn))
        };
        let (x, y) = (run(lo), run(hi));
        if x.feasible && y.feasible {
            prop_assert!(y.throughput_per_s.unwrap() >= x.throughput_per_s.unwrap() * (1.0 - 1e-12),
                "tp {tpn}: {lo} → {:?}, {hi} → {:?}", x.throughput_per_s, y.throughput_per_s);
        }
    }

    /// Time to first token is never below the prompt's FLOPs at the device's peak.
    #[test]
    fn ttft_is_at_least_prefill_compute(c in 1u64..256, k in 0usize..4) {
        let (s, w) = inputs();
        let tpn = [1u64, 2, 4, 8][k];
        let wl = with_load(&w, Load { concurrency: Concurrency::Total(c), ..Load::default() });
        let e = engine::estimate(&s, &wl, &tp(tpn), Some(tpn));
        if e.feasible {
            let m = Mapping { tp: tpn, batch: c, micro_batch: 0, ..Mapping::single() };
            let p = lower::lower_prefill(&s, &wl, &m, tpn).unwrap();
            let mach = lower::machine(&s, tpn);
            let at_peak = p.model_flops_per_step / (tpn as f64 * mach[t::MATRIX_PEAK + p.mfu_precision]);
            prop_assert!(e.ttft_s.unwrap() >= at_peak, "{:?} < {at_peak}", e.ttft_s);
            let pe = cpu::eval(&p, &mach);
            prop_assert!(e.ttft_s.unwrap() >= pe.step_time * (1.0 - 1e-12));
        }
    }

    /// A looser latency target never gives a lower best throughput, for bounds on the mean and
    /// at the 99th percentile (the search over mappings and requests in flight, and its
    /// bisection, keep every point the tighter one kept).
    #[test]
    fn looser_slo_never_lowers_best_throughput(a in 1.0f64..60.0, b in 1.0f64..60.0, ttft in prop::option::of(0.05f64..2.0), p99 in prop::bool::ANY) {
        let (s, w) = inputs();
        let (tight, loose) = (a.min(b) * 1e-3, a.max(b) * 1e-3);
        let best = |tpot: f64| {
            let slo = Slo { tpot_s: Some(tpot), ttft_s: ttft, percentile: p99.then_some(99.0), ..Slo::default() };
            let wl = with_load(&w, Load { concurrency: Concurrency::Max, slo });
            engine::estimate(&s, &wl, &MappingChoice::Auto(Objective::Time), None)
        };
        let (x, y) = (best(tight), best(loose));
        if x.slo_met == Some(true) {
            prop_assert_eq!(y.slo_met, Some(true));
            prop_assert!(y.throughput_per_s.unwrap() >= x.throughput_per_s.unwrap() * (1.0 - 1e-12),
                "{tight} s → {:?}, {loose} s → {:?}", x.throughput_per_s, y.throughput_per_s);
        }
    }
}

/// Mixtral 8x7B (8 experts, top-2) served in BF16: 1,024-token prompts, 256 generated tokens,
/// `batch` requests per instance.
fn mixtral_serving(batch: u64) -> Workload {
    use tessera::model::precision::Precision;
    use tessera::model::workload::Inference;
    let mut w = load_workload("workloads/mixtral-8x7b-pretrain.ron", &CrateFs)
        .value
        .expect("workload");
    w.mapping = None;
    w.task = Task::Inference(Inference {
        prompt: 1024,
        output: 256,
        batch,
        weights: Precision::Bf16,
        compute: Precision::Bf16,
        kv_cache: Precision::Bf16,
        activations: Precision::Bf16,
        flash_attention: true,
        load: Load::default(),
        speculative: None,
    });
    w
}

#[test]
fn moe_decode_reads_only_the_experts_its_tokens_touch() {
    let (s, _) = inputs();
    let w = mixtral_serving(1);
    let p = lower::lower(&s, &w, &compiled(tp8()), 8).expect("lowers");
    let (h, kv, ffn) = (4096.0, 1024.0, 14336.0);
    let attn = 2.0 * h * h + 2.0 * h * kv;
    let expert = 3.0 * h * ffn;
    let router = h * 8.0;
    let op = |name: &str| p.ops.iter().find(|o| o.name == name).expect(name).clone();
    // one token: its 2 experts of 8
    let dec = op("decode: layer matmuls");
    let want = (attn + router + 2.0 * expert) / 8.0 * 2.0;
    assert!(
        (dec.weight_bytes - want).abs() / want < 1e-12,
        "{} vs {want}",
        dec.weight_bytes
    );
    // a prompt of 1,024 tokens: all 8 (1 − (3/4)^1024 = 1 to machine precision)
    let pre = op("prefill: layer matmuls");
    let all = (attn + router + 8.0 * expert) / 8.0 * 2.0;
    assert!((pre.weight_bytes - all).abs() / all < 1e-12);
    // 4 requests in a round: 8 × (1 − (3/4)^4) ≈ 5.47 experts
    let four = Mapping {
        batch: 4,
        ..compiled(tp8())
    };
    let p4 = lower::lower(&s, &w, &four, 8).expect("lowers");
    let d4 = p4
        .ops
        .iter()
        .find(|o| o.name == "decode: layer matmuls")
        .unwrap();
    let distinct = 8.0 * (1.0 - 0.75f64.powi(4));
    let want4 = (attn + router + distinct * expert) / 8.0 * 2.0;
    assert!((d4.weight_bytes - want4).abs() / want4 < 1e-12);
}

#[test]
fn expert_parallel_instances_share_their_experts() {
    // Mixtral 8x7B (8 experts, top-2) on a DGX H100 as eight one-GPU instances, the eight
    // sharing their experts (ep 8: one expert of each layer per GPU), hand-checked: what a GPU
    // holds and reads, and the dispatch and combine all-to-alls of every layer.
    use tessera::engine::program::{CollKind, Role};
    let (s, _) = inputs();
    let w = mixtral_serving(4);
    let one = |ep: u64| Mapping {
        dp: 8,
        ep,
        micro_batch: 0,
        ..compiled(Mapping::single())
    };
    let (p1, p8) = (
        lower::lower(&s, &w, &one(1), 8).expect("lowers"),
        lower::lower(&s, &w, &one(8), 8).expect("lowers"),
    );
    let (h, kv, ffn, layers) = (4096.0, 1024.0, 14336.0, 32.0);
    let attn = 2.0 * h * h + 2.0 * h * kv;
    let expert = 3.0 * h * ffn;
    let router = h * 8.0;
    let op = |p: &tessera::engine::program::Program, name: &str| {
        p.ops.iter().find(|o| o.name == name).expect(name).clone()
    };
    // the round's 4 tokens per instance: 32 over the group, each of a GPU's one expert missed
    // by all of them with probability (3/4)^32
    let dec = op(&p8, "decode: layer matmuls");
    let want = (attn + router + (1.0 - 0.75f64.powi(32)) * expert) * 2.0;
    assert!(
        (dec.weight_bytes - want).abs() / want < 1e-12,
        "{} vs {want}",
        dec.weight_bytes
    );
    // the same work: a GPU computes its experts' share of the group's tokens
    assert_eq!(dec.flops, op(&p1, "decode: layer matmuls").flops);
    // it holds attention, the router and one expert per layer (and the vocabulary tables)
    let table = 2.0 * h * 32000.0 * 2.0;
    let held = layers * (attn + router + expert) * 2.0 + table;
    assert!(
        (p8.footprint.weights - held).abs() / held < 1e-12,
        "{} vs {held}",
        p8.footprint.weights
    );
    let held1 = layers * (attn + router + 8.0 * expert) * 2.0 + table;
    assert!((p1.footprint.weights - held1).abs() / held1 < 1e-12);
    // each of the 4 tokens goes to 2 experts and comes back: two all-to-alls of 4 × 2 hidden
    // states per layer, over the 8 GPUs; none without expert parallelism
    let a2a: Vec<_> = p8
        .comms
        .iter()
        .filter(|c| c.role == Role::ExpertAllToAll)
        .collect();
    assert_eq!(a2a.len(), 2, "decode and prefill");
    let d = a2a
        .iter()
        .find(|c| c.name == "ep all-to-all")
        .expect("decode all-to-all");
    assert_eq!(d.kind, CollKind::AllToAll);
    assert_eq!(d.bytes, 4.0 * 2.0 * h * 2.0);
    assert_eq!(d.count, 2.0 * layers);
    assert!(p1.comms.iter().all(|c| c.role != Role::ExpertAllToAll));
    // and a dense model, or a group that does not divide the instances, is refused
    let llama = inputs().1;
    assert!(lower::lower(&s, &llama, &one(2), 8).is_err());
    let three = Mapping {
        dp: 8,
        ep: 3,
        micro_batch: 0,
        ..Mapping::single()
    };
    assert!(lower::lower(&s, &w, &three, 8).is_err());
}

fn speculating(w: &Workload, sp: Option<tessera::model::workload::Speculative>) -> Workload {
    let mut w = w.clone();
    if let Task::Inference(inf) = &mut w.task {
        inf.speculative = sp;
    }
    w
}

#[test]
fn speculative_decoding_verifies_the_drafts_in_one_pass() {
    // Llama 3.1 8B on a DGX H100 at TP 8 with one request, drafting as DeepSeek-V3's
    // multi-token prediction does: one token per round by one layer of the model's shape and its
    // head, accepted 85 % of the time (1.85 tokens a round), hand-checked against the plain round.
    use tessera::model::workload::Speculative;
    let (s, w) = inputs();
    let sp = Speculative {
        tokens: 1,
        acceptance: 0.85,
        draft_layers: 1,
    };
    assert!((sp.tokens_per_round() - 1.85).abs() < 1e-12);
    let all = Speculative {
        acceptance: 1.0,
        tokens: 3,
        ..sp
    };
    assert_eq!(all.tokens_per_round(), 4.0);
    let m = Mapping {
        batch: 1,
        ..compiled(tp8())
    };
    let p0 = lower::lower(&s, &w, &m, 8).expect("lowers");
    let p1 = lower::lower(&s, &speculating(&w, Some(sp)), &m, 8).expect("lowers");
    let op = |p: &tessera::engine::program::Program, name: &str| {
        p.ops.iter().find(|o| o.name == name).expect(name).clone()
    };
    // the model's pass: two tokens through every layer, its weights and KV cache read once, and
    // per output token 1 / 1.85 of a round
    let (a, b) = (
        op(&p0, "decode: layer matmuls"),
        op(&p1, "decode: layer matmuls"),
    );
    assert_eq!(b.flops, 2.0 * a.flops);
    assert_eq!(b.weight_bytes, a.weight_bytes);
    assert!((b.count - a.count / 1.85).abs() < 1e-12);
    let (a, b) = (
        op(&p0, "decode: attention over KV cache"),
        op(&p1, "decode: attention over KV cache"),
    );
    assert_eq!((b.flops, b.act_bytes), (2.0 * a.flops, a.act_bytes));
    // the draft: one layer of the model's and its head, once a round
    let layer = op(&p0, "decode: layer matmuls");
    let draft = op(&p1, "decode: draft layer matmuls");
    assert_eq!(
        (draft.flops, draft.weight_bytes),
        (layer.flops, layer.weight_bytes)
    );
    assert!((draft.count - 1.0 / 1.85).abs() < 1e-12);
    assert!((op(&p1, "decode: draft lm head").count - 1.0 / 1.85).abs() < 1e-12);
    let ew = op(&p0, "decode: elementwise");
    let draft_ew = op(&p1, "decode: draft elementwise");
    assert_eq!(
        (draft_ew.flops, draft_ew.act_bytes),
        (ew.flops, ew.act_bytes)
    );
    // it holds the draft layer's weights and KV cache beside the head
    assert!(p1.footprint.weights > p0.footprint.weights);
    assert!(p1.footprint.kv_cache > p0.footprint.kv_cache);
    // one request's decode reads the weights for one token: drafting halves those reads per
    // output token, less the draft's, so the time per output token falls
    let mach = lower::machine(&s, 8);
    let (e0, e1) = (cpu::eval(&p0, &mach), cpu::eval(&p1, &mach));
    assert!(
        e1.step_time < e0.step_time,
        "{} vs {}",
        e1.step_time,
        e0.step_time
    );
    // and the prompt alone is untouched (the first token comes from the model)
    let q0 = lower::lower_prefill(&s, &w, &m, 8).expect("prefill");
    let q1 = lower::lower_prefill(&s, &speculating(&w, Some(sp)), &m, 8).expect("prefill");
    assert_eq!(
        cpu::eval(&q0, &mach).step_time,
        cpu::eval(&q1, &mach).step_time
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    /// A draft the model accepts more often never makes a token slower to come.
    #[test]
    fn a_higher_acceptance_never_slows_decoding(a in 0.05f64..1.0, b in 0.05f64..1.0, g in 1u64..6, dl in 0u64..3, c in 1u64..64) {
        use tessera::model::workload::Speculative;
        let (s, w) = inputs();
        let m = Mapping { batch: c, ..tp8() };
        let mach = lower::machine(&s, 8);
        let tpot = |acc: f64| {
            let sp = Speculative { tokens: g, acceptance: acc, draft_layers: dl };
            let p = lower::lower(&s, &speculating(&w, Some(sp)), &m, 8).expect("lowers");
            cpu::eval(&p, &mach).step_time
        };
        let (lo, hi) = (a.min(b), a.max(b));
        prop_assert!(tpot(hi) <= tpot(lo) * (1.0 + 1e-12), "{lo} → {}, {hi} → {}", tpot(lo), tpot(hi));
    }
}

fn at_batch(w: &Workload, batch: u64) -> Workload {
    let mut w = w.clone();
    if let Task::Inference(inf) = &mut w.task {
        inf.batch = batch;
    }
    w
}

/// The round of `w` under `m` with the serving stack launching `k` kernels (`None`: the
/// device's choice), on `n` devices of `s`.
fn eval_with(s: &System, w: &Workload, m: &Mapping, n: u64, k: Option<Kernels>) -> Eval {
    let m = Mapping { kernels: k, ..*m };
    let p = lower::lower(s, w, &m, n).expect("lowers");
    let e = cpu::eval(&p, &lower::machine(s, n));
    assert!(e.feasible, "{:?}", e.reason());
    e
}

fn round_with(s: &System, w: &Workload, m: &Mapping, n: u64, k: Option<Kernels>) -> f64 {
    eval_with(s, w, m, n, k).step_time
}

#[test]
fn a_decode_layer_pays_one_overhead_per_kernel_its_stack_launches() {
    // Llama 3.1 8B (32 gated dense layers) at one request on one H100: every kernel is bound by
    // its bytes, so the kernels' work adds to the same time however it is split (without the
    // tiling's quantization of the prompt's products), and the stacks differ by their launches
    // alone: 15 (separate), 7 (fused), 3 (compiled) per layer.
    let (s, w) = inputs();
    let s = untiled(&s);
    let w = at_batch(&w, 1);
    let m = Mapping {
        micro_batch: 0,
        ..Mapping::single()
    };
    let ko = lower::machine(&s, 1)[t::KERNEL_OVERHEAD];
    assert_eq!(ko, 4e-6, "the H100 file's kernel overhead");
    let r = |k| round_with(&s, &w, &m, 1, Some(k));
    let (sep, fused, compiled) = (
        r(Kernels::Separate),
        r(Kernels::Fused),
        r(Kernels::Compiled),
    );
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
    // a round's launches: its own layer passes and, amortised, 1/output of the prompt's (the
    // prefill of the prompts that join it launches the same kernels)
    let per_round = |w: &Workload| match &w.task {
        Task::Inference(inf) => 1.0 + 1.0 / inf.output as f64,
        _ => unreachable!(),
    };
    let launches = 32.0 * ko * per_round(&w);
    assert!(
        close(sep - fused, 8.0 * launches),
        "{sep} - {fused} = {}",
        sep - fused
    );
    assert!(
        close(fused - compiled, 4.0 * launches),
        "{fused} - {compiled}"
    );
    // a GPU's serving stack is a serving engine's fused kernels unless the mapping says otherwise
    assert_eq!(round_with(&s, &w, &m, 1, None), fused);
    // the kernels share out the compiled layer's work: its matrix products' FLOPs and weights,
    // its vector work, whatever the stack
    let work = |k: Kernels, matrix: bool| {
        let p = lower::lower(
            &s,
            &w,
            &Mapping {
                kernels: Some(k),
                ..m
            },
            1,
        )
        .expect("lowers");
        p.ops
            .iter()
            .filter(|o| {
                o.name.starts_with("decode:")
                    && o.matrix == matrix
                    && !o.name.contains("attention")
                    && !o.name.contains("lm head")
            })
            .map(|o| {
                (
                    o.count * o.flops,
                    o.count * o.weight_bytes,
                    o.count * o.act_bytes,
                )
            })
            .fold((0.0, 0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
    };
    for matrix in [true, false] {
        let c = work(Kernels::Compiled, matrix);
        for k in [Kernels::Fused, Kernels::Separate] {
            let x = work(k, matrix);
            assert!(
                close(x.0, c.0) && close(x.1, c.1) && close(x.2, c.2),
                "{k:?}: {x:?} vs {c:?}"
            );
        }
    }

    // Mixtral 8x7B (32 layers, all with experts; 93 GB in BF16: two H100s at TP 2) adds its
    // routing kernels: 3 fused, 4 apart
    let mx = mixtral_serving(1);
    let m2 = Mapping {
        tp: 2,
        sp: true,
        micro_batch: 0,
        ..Mapping::single()
    };
    let r = |k| round_with(&s, &mx, &m2, 2, Some(k));
    let (sep, fused, compiled) = (
        r(Kernels::Separate),
        r(Kernels::Fused),
        r(Kernels::Compiled),
    );
    let launches = 32.0 * ko * per_round(&mx);
    assert!(close(sep - fused, (15.0 + 4.0 - 7.0 - 3.0) * launches));
    assert!(close(fused - compiled, (7.0 + 3.0 - 3.0) * launches));
}

#[test]
fn a_statically_scheduled_device_defaults_to_its_compiled_layer() {
    let groq = load_system("architectures/groq-lpu.ron", &CrateFs)
        .value
        .expect("system");
    assert_eq!(groq.device.efficiency.kernels, Kernels::Compiled);
    let (h100, w) = inputs();
    assert_eq!(h100.device.efficiency.kernels, Kernels::Fused);
    // the estimate says which stack it costed
    let e = engine::estimate(&h100, &w, &tp(8), Some(8));
    let j = serde_json::to_value(&e).expect("json");
    assert_eq!(j["mapping"]["kernels"], "fused");
    let given = MappingChoice::Given(MappingPlan {
        tp: Some(8),
        kernels: Some(Kernels::Separate),
        ..Default::default()
    });
    let e2 = engine::estimate(&h100, &w, &given, Some(8));
    let j2 = serde_json::to_value(&e2).expect("json");
    assert_eq!(j2["mapping"]["kernels"], "separate");
    assert!(e2.step_time_s.expect("feasible") > e.step_time_s.expect("feasible"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Compute- or memory-bound, splitting a fused kernel into equal separate ones costs exactly
    /// their extra launches while the clock runs free, and a compiled layer (its matrix work
    /// merged into one step) is never slower than the fused kernels; under a power limit the
    /// extra launches still never make the round faster (the idle time lets the clock rise, but
    /// never by more than the time it adds). The equality holds without the GEMM tiling; with
    /// it, narrower separate products fill no more of their waves, so separate kernels are still
    /// never faster.
    #[test]
    fn fewer_launches_never_slow_a_round(batch in 1u64..160, tp_log in 0u32..4) {
        let (tiled, w) = inputs();
        let w = at_batch(&w, batch);
        let n = 1u64 << tp_log;
        let m = Mapping { tp: n, sp: n > 1, micro_batch: 0, ..Mapping::single() };
        let sep = eval_with(&tiled, &w, &m, n, Some(Kernels::Separate));
        let fused = eval_with(&tiled, &w, &m, n, Some(Kernels::Fused));
        prop_assert!(sep.step_time >= fused.step_time * (1.0 - 1e-12));
        let s = untiled(&tiled);
        let ko = lower::machine(&s, n)[t::KERNEL_OVERHEAD];
        let r = |k| eval_with(&s, &w, &m, n, Some(k));
        let (sep, fused, compiled) = (r(Kernels::Separate), r(Kernels::Fused), r(Kernels::Compiled));
        prop_assert!(sep.step_time >= fused.step_time);
        if sep.throttle == 1.0 && fused.throttle == 1.0 && compiled.throttle == 1.0 {
            let out = match &w.task { Task::Inference(inf) => inf.output as f64, _ => unreachable!() };
            let extra = 8.0 * 32.0 * ko * (1.0 + 1.0 / out);
            prop_assert!(((sep.step_time - fused.step_time) - extra).abs() <= 1e-9 * sep.step_time);
            prop_assert!(compiled.step_time <= fused.step_time * (1.0 + 1e-12));
        }
    }
}

// Disaggregated serving (issue 13: "prefill … on a separate pool (disaggregated), as a mapping
// choice"): a prefill pool beside the decode instances.

const LLAMA70B: &str = "workloads/llama3-70b-serving.ron";

/// Llama 3 70B (FP8, 2048 in / 256 out) on a DGX H100, `batch` requests per decode instance.
fn inputs_70b(batch: u64) -> (System, Workload) {
    let s = load_system(DGX, &CrateFs).value.expect("system");
    let mut w = load_workload(LLAMA70B, &CrateFs).value.expect("workload");
    if let Task::Inference(inf) = &mut w.task {
        inf.batch = batch;
    }
    (s, w)
}

/// TP `tp` × `dp` decode instances, and a prefill pool of `instances` × TP `pool_tp`.
fn pooled(tp: u64, dp: u64, instances: u64, pool_tp: u64) -> Mapping {
    Mapping {
        tp,
        dp,
        sp: tp > 1,
        micro_batch: 0,
        pool: tessera::model::mapping::Pool {
            instances,
            tp: pool_tp,
        },
        ..Mapping::single()
    }
}

/// The round, its evaluation and its serving figures.
fn serve_at(
    s: &System,
    w: &Workload,
    m: &Mapping,
) -> (
    tessera::engine::program::Program,
    tessera::engine::program::Eval,
    serve::Serving,
) {
    let n = m.devices();
    let p = lower::lower(s, w, m, n).expect("lowers");
    let mach = lower::machine(s, n);
    let e = cpu::eval(&p, &mach);
    assert!(e.feasible, "{m:?}: {:?}", e.reason());
    let sv = serve::figures(s, w, m, n, &e, &mach).expect("serving figures");
    (p, e, sv)
}

#[test]
fn a_disaggregated_round_has_no_prefill_in_its_decode_stages() {
    let (s, w) = inputs_70b(32);
    let m = pooled(4, 1, 1, 4);
    let (p, _, sv) = serve_at(&s, &w, &m);
    assert!(sv.disaggregated);
    let pool = p
        .stages
        .iter()
        .position(|st| st.pool)
        .expect("a pool stage");
    assert_eq!(p.stages.iter().filter(|st| st.pool).count(), 1);
    assert_eq!(p.stages[pool].devices, 4.0);
    assert_eq!(p.devices, 8.0);
    for (k, st) in p.stages.iter().enumerate() {
        let prefill_ops = p.ops[st.ops.clone()]
            .iter()
            .filter(|o| o.name.starts_with("prefill"))
            .count();
        if k == pool {
            // the pool's work per round: all in the step section, its KV cache sent
            assert!(prefill_ops > 0);
            assert!(p.ops[st.ops.clone()]
                .iter()
                .all(|o| o.section == Section::Step));
            assert!(p.comms[st.comms.clone()]
                .iter()
                .any(|c| c.name.contains("kv cache")));
        } else {
            assert_eq!(prefill_ops, 0, "{}", st.name);
        }
    }
    // the pool's prompts per round: 32 requests / 256 output tokens = 1/8 per round; the pool's
    // ops are the one-prompt prefill program's × 1/8
    let one = lower::lower_prefill(&s, &w, &m, 8).unwrap();
    let mm = &p.ops[p.stages[pool].ops.clone()][0];
    assert_eq!(one.ops[0].name, mm.name);
    assert!((mm.count - one.ops[0].count / 8.0).abs() < 1e-12);
    // TTFT is the pool's prefill with its KV transfer, no decode round added
    assert_eq!(sv.ttft_s, sv.prefill_s);
    let mach = lower::machine(&s, 8);
    assert!((sv.prefill_s - cpu::eval(&one, &mach).step_time).abs() < 1e-15);
}

#[test]
fn an_interleaved_mappings_figures_are_unchanged_by_the_pool_code() {
    // the same decode instance without a pool: the prefill interleaved (its TTFT adds (B-1)/B of
    // a round), and the pool-free round is faster than or equal to the pooled one's decode
    let (s, w) = inputs_70b(32);
    let m = Mapping {
        pool: Default::default(),
        ..pooled(4, 2, 0, 1)
    };
    let (p, e, sv) = serve_at(&s, &w, &m);
    assert!(!sv.disaggregated);
    assert!(p.stages.iter().all(|st| !st.pool));
    let want = serve::ttft(sv.prefill_s, e.step_time, 32.0);
    assert!((sv.ttft_s - want).abs() <= 1e-12 * want);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Disaggregated: the time to first token does not grow with the decode batch (it is the
    /// pool's prefill alone), the system's throughput never exceeds the pool's prefill capacity
    /// (instances / prefill time prompts per second, × output tokens) nor the decode instances'
    /// interleave-free round rate, and another pool instance never lowers the throughput.
    #[test]
    fn a_prefill_pool_bounds_throughput_and_keeps_ttft_off_the_rounds(
        b in 1u64..=96,
        instances in 1u64..=3,
    ) {
        let (s, w1) = inputs_70b(b);
        let (_, w2) = inputs_70b(2 * b);
        let m = pooled(4, 1, instances, 1);
        let (p, e, sv) = serve_at(&s, &w1, &m);
        let (_, _, sv2) = serve_at(&s, &w2, &m);
        prop_assert!(sv2.ttft_s <= sv.ttft_s * (1.0 + 1e-12));
        let capacity = instances as f64 / sv.prefill_s * 256.0;
        prop_assert!(e.throughput <= capacity * (1.0 + 1e-9), "{} > {}", e.throughput, capacity);
        // the decode instance alone (the round without its pool stage)
        let mut dec = p.clone();
        dec.stages.retain(|st| !st.pool);
        let e_dec = cpu::eval(&dec, &lower::machine(&s, m.devices()));
        prop_assert!(e.throughput <= e_dec.throughput * (1.0 + 1e-9));
        let more = pooled(4, 1, instances + 1, 1);
        let (_, e_more, _) = serve_at(&s, &w1, &more);
        prop_assert!(e_more.throughput >= e.throughput * (1.0 - 1e-9),
            "{} instances: {} < {}", instances + 1, e_more.throughput, e.throughput);
    }
}

/// The search may pick either: Llama 3.1 8B with long prompts and short outputs (8192 in / 128
/// out, @assumed) on a DGX H100 picks a disaggregated mapping at a tight time per output token
/// (the interleaved rounds carry the prompts' prefill, the pooled ones do not), and an
/// interleaved one at a loose target and without one (every device works on both phases).
#[test]
fn the_search_picks_a_prefill_pool_only_where_the_target_asks_for_it() {
    let (s, mut w) = inputs();
    if let Task::Inference(inf) = &mut w.task {
        inf.prompt = 8192;
        inf.output = 128;
    }
    let pick = |slo: Option<&str>| {
        let mut w = w.clone();
        serve::set_load(
            &mut w,
            slo.map(|x| Slo::parse(x).unwrap()),
            None,
            Some(Concurrency::Max),
        )
        .unwrap();
        let e = engine::estimate(&s, &w, &MappingChoice::Auto(Objective::Time), None);
        assert!(e.feasible, "{slo:?}: {:?}", e.reason);
        if slo.is_some() {
            assert_eq!(e.slo_met, Some(true), "{slo:?}");
        }
        e
    };
    let tight = pick(Some("p99 ttft<=1s,tpot<=8ms"));
    assert_eq!(tight.disaggregated, Some(true));
    assert!(tight.mapping.unwrap().prefill_pool.is_some());
    for slo in [None, Some("p99 ttft<=2s,tpot<=30ms")] {
        let e = pick(slo);
        assert_eq!(e.disaggregated, Some(false), "{slo:?}");
    }
}

/// A software stack's memory reserve comes out of the KV cache: the requests the paged cache
/// holds fall by the reserve over one request's bytes (the solve's slope), the placement agrees
/// with the solve at the new limit, and one request more is infeasible for memory.
#[test]
fn a_stacks_memory_reserve_shrinks_the_kv_cache() {
    let (s, w) = inputs();
    let m = tp8();
    let n = s.devices;
    let bare = serve::max_concurrency(&s, &w, &m, n).expect("a KV limit");
    let mut on = s.clone();
    on.with_software(tessera::model::system::Software {
        name: "test stack".into(),
        step_overhead: 0.0,
        mesh_relay_time: 0.0,
        pipeline_stage_time: 0.0,
        memory_reserve: 8e9,
        attention_kernel: None,
        loss_kernel: Default::default(),
        fitted: Vec::new(),
    });
    let held = serve::max_concurrency(&on, &w, &m, n).expect("a KV limit");
    assert!(held < bare, "{held} vs {bare}");
    // one request's device bytes, from two lowerings (the solve's own slope)
    let per = |b: u64| {
        lower::lower(&s, &w, &Mapping { batch: b, ..m }, n)
            .unwrap()
            .footprint
            .total()
    };
    let slope = (per(128) - per(64)) / 64.0;
    let dropped = (bare - held) as f64;
    let want = 8e9 / slope;
    assert!(
        (dropped - want).abs() <= 1.0 + 1e-9,
        "dropped {dropped} requests, the reserve holds {want}"
    );
    let at = |c: u64| {
        let w = with_load(
            &w,
            Load {
                concurrency: Concurrency::Total(c),
                ..Load::default()
            },
        );
        engine::estimate(&on, &w, &tp(8), None)
    };
    // the estimate's own limit (its tensor-parallel mapping at 8) is the one its placement keeps
    let held = at(1).max_concurrency.expect("a KV limit");
    let e = at(held);
    assert!(e.feasible, "{held}: {:?}", e.reason);
    let e = at(held + 1);
    assert!(!e.feasible);
    assert_eq!(e.reason_code, Some("memory"));
}

/// Tile quantization in serving: on one H100, a decode batch of 193 requests pads its products'
/// rows to a fourth 64-row tile (cuBLAS's smallest), where 192 fill three exactly, so the system
/// serves fewer tokens per second at 193 than at 192 (the cliff NVIDIA's *Matrix Multiplication
/// Background* guide describes, and why serving engines pad batches to tile multiples). Without
/// the tiles the extra request only adds throughput.
#[test]
fn the_tile_boundary_is_a_throughput_cliff() {
    let (s, w) = inputs();
    let thr = |sys: &System, c: u64| {
        let wl = with_load(
            &w,
            Load {
                concurrency: Concurrency::Total(c),
                ..Load::default()
            },
        );
        engine::estimate(sys, &wl, &tp(1), Some(1))
            .throughput_per_s
            .unwrap()
    };
    assert!(
        thr(&s, 193) < thr(&s, 192),
        "{} {}",
        thr(&s, 193),
        thr(&s, 192)
    );
    let flat = untiled(&s);
    assert!(thr(&flat, 193) > thr(&flat, 192));
    // one request less than the boundary pads nothing more: the tiled rate still grows
    assert!(thr(&s, 192) > thr(&s, 191));
}

#[test]
fn compare_serves_an_equal_load_on_the_fewest_devices() {
    // The README's serving comparison: 28 requests in flight within 1 ms per token. Each system
    // takes the fewest whole devices that serve them (issue 42): one GB200 of the rack's 72, one
    // CS-3, the 16-card NorthPole appliance; the next smaller count of each misses the target or
    // the memory. `--devices all` keeps every device.
    let base = [
        "compare",
        "architectures/gb200-nvl72.ron",
        "architectures/cerebras-cs3.ron",
        "architectures/northpole-16.ron",
        "--workload",
        "workloads/granite-3b-northpole.ron",
        "--slo",
        "tpot<=1ms",
        "--format",
        "json",
    ];
    let rows = |extra: &[&str]| -> Vec<serde_json::Value> {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let out = common::tessera(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["systems"].as_array().expect("systems").clone()
    };
    let fewest = rows(&[]);
    let devices: Vec<u64> = fewest
        .iter()
        .map(|r| r["devices"].as_u64().unwrap())
        .collect();
    assert_eq!(devices, [1, 1, 16]);
    assert!(fewest.iter().all(|r| r["feasible"] == true));
    let all = rows(&["--devices", "all"]);
    let devices: Vec<u64> = all.iter().map(|r| r["devices"].as_u64().unwrap()).collect();
    assert_eq!(devices, [72, 1, 16]);
    // fewer than the appliance's 16 cards (the next count tried, 8) cannot hold the load
    let out = common::tessera(&[
        "estimate",
        "--arch",
        "architectures/northpole-16.ron",
        "--workload",
        "workloads/granite-3b-northpole.ron",
        "--mapping",
        "auto",
        "--devices",
        "8",
        "--concurrency",
        "28",
        "--slo",
        "tpot<=1ms",
        "--format",
        "json",
    ]);
    let e: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(e["feasible"], false, "{e}");
}
