//! `--mapping auto`: enumerate every legal mapping of a workload on N devices, evaluate each, and
//! keep the best by time or energy, with the runners-up and the most common reason others failed.

use super::common::Objective;
use super::program::{Eval, Footprint, Program};
use super::reason::Reason;
use super::{cpu, lower, serve};
use crate::model::mapping::{Mapping, Placement, Pool, Recompute};
use crate::model::serving::Concurrency;
use crate::model::system::System;
use crate::model::workload::{Model, Task, Workload};
use crate::vocab::{Dim, TpOverlapMethod};
use rayon::prelude::*;
use std::collections::BTreeMap;

pub struct SearchResult {
    /// Feasible mappings, best first.
    pub ranked: Vec<(Mapping, Eval)>,
    pub tried: usize,
    /// Reasons mappings were infeasible (without their figures), with counts.
    pub reasons: BTreeMap<String, usize>,
    /// With a latency target: whether the ranked mappings meet it (`false`: none does, and
    /// `ranked` holds the feasible ones closest to it first).
    pub slo_met: Option<bool>,
}

impl SearchResult {
    pub fn best(&self) -> Option<&(Mapping, Eval)> {
        self.ranked.first()
    }
    /// Why no mapping was feasible: the most common reason.
    pub fn why_none(&self) -> Reason {
        Reason::NoFeasibleMapping {
            tried: self.tried,
            most_often: self
                .reasons
                .iter()
                .max_by_key(|(_, c)| **c)
                .map(|(r, c)| (r.clone(), *c)),
        }
    }
}

fn pow2_upto(n: u64) -> Vec<u64> {
    let mut v = vec![1];
    while v.last().copied().unwrap_or(1) * 2 <= n {
        let x = v.last().copied().unwrap_or(1) * 2;
        v.push(x);
    }
    v
}

/// Micro-batch sizes worth trying for `per_pipe` samples per pipeline and step: every power of
/// two that divides it, and the whole of it (no gradient accumulation, as small models run: e.g.
/// NVIDIA's MLPerf BERT, 48 packs of two samples per GPU in one micro-batch). Large micro-batches
/// amortise per-kernel overheads and feed larger GEMMs; memory and the pipeline bubble bound them,
/// and the evaluation, not this list, decides.
fn micro_batches(per_pipe: u64) -> Vec<u64> {
    let mut v: Vec<u64> = pow2_upto(per_pipe)
        .into_iter()
        .filter(|mb| per_pipe.is_multiple_of(*mb))
        .collect();
    if per_pipe > 0 && v.last() != Some(&per_pipe) {
        v.push(per_pipe);
    }
    v
}

/// `order` with dimensions `a` and `b` in each other's place.
fn swapped(order: [Dim; 4], a: Dim, b: Dim) -> [Dim; 4] {
    order.map(|d| match d {
        d if d == a => b,
        d if d == b => a,
        d => d,
    })
}

fn divisors(n: u64) -> Vec<u64> {
    let mut d: Vec<u64> = (1..=((n as f64).sqrt() as u64))
        .filter(|i| n.is_multiple_of(*i))
        .flat_map(|i| [i, n / i])
        .collect();
    d.sort_unstable();
    d.dedup();
    d
}

/// Every candidate mapping of `w` on `n` devices worth evaluating.
pub fn candidates(sys: &System, w: &Workload, n: u64) -> Vec<Mapping> {
    candidates_with_bases(sys, w, n).0
}

/// [`candidates`], and for each the index of the layout it offloads from (`None`: not an
/// offloading variant). Every variant comes after its base.
pub fn candidates_with_bases(
    sys: &System,
    w: &Workload,
    n: u64,
) -> (Vec<Mapping>, Vec<Option<usize>>) {
    let mut out = Vec::new();
    let mut bases = Vec::new();
    // The framework's overlap capabilities come with the workload's published mapping: a search
    // varies the parallel layout, not the software it runs on.
    let overlap = w.mapping.as_ref().map(|m| m.overlap).unwrap_or_default();
    let expert_dispatch = w
        .mapping
        .as_ref()
        .and_then(|m| m.expert_dispatch)
        .unwrap_or_default();
    let tp_overlap_method = w.mapping.as_ref().and_then(|m| m.tp_overlap_method);
    let base = Mapping {
        overlap,
        expert_dispatch,
        tp_overlap_method,
        ..Mapping::single()
    };
    match (&w.model, &w.task) {
        (Model::Transformer(t), Task::Training(tr)) => {
            let dom = sys.scale_up_size().min(n).max(1);
            let tps: Vec<u64> = pow2_upto(dom.min(t.heads))
                .into_iter()
                .filter(|tp| t.heads % tp == 0)
                .collect();
            let cps: Vec<u64> = if tr.seq >= 8192 {
                vec![1, 2, 4, 8]
            } else {
                vec![1]
            };
            let eps: Vec<u64> = match &t.experts {
                Some(e) => pow2_upto(e.count)
                    .into_iter()
                    .filter(|x| e.count % x == 0)
                    .collect(),
                None => vec![1],
            };
            for &tp in &tps {
                for &cp in &cps {
                    if !n.is_multiple_of(tp * cp) {
                        continue;
                    }
                    for pp in divisors(n / (tp * cp)) {
                        if pp > t.layers {
                            continue;
                        }
                        let dp = n / (tp * cp * pp);
                        if tr.global_batch % dp != 0 {
                            continue;
                        }
                        let per_pipe = tr.global_batch / dp;
                        for mb in micro_batches(per_pipe) {
                            // interleaved chunks as Megatron-Bridge's recipes use them (VP 5 for
                            // Llama 3 70B, 8 for 405B, 12 for Qwen3-235B)
                            let vs: &[u64] = if pp > 1 {
                                &[1, 2, 3, 4, 5, 6, 8, 12]
                            } else {
                                &[1]
                            };
                            // the uniform split of the layers, and where Megatron-Core's rule
                            // allows it (layers + 2 a multiple of pp × v), the split that counts
                            // the embedding and the loss as a layer each
                            let splits = vs.iter().flat_map(|&v| [(v, false), (v, true)]);
                            for (v, counted) in splits {
                                let legal = if counted {
                                    pp > 1 && (t.layers + 2).is_multiple_of(pp * v)
                                } else {
                                    pp * v <= t.layers
                                };
                                if !legal {
                                    continue;
                                }
                                for rc in [Recompute::None, Recompute::Selective, Recompute::Full] {
                                    if rc == Recompute::Selective && tr.flash_attention {
                                        continue;
                                    }
                                    // the distributed optimizer (ZeRO 1), gradients sharded
                                    // too (2), and everything sharded (3: FSDP, beside tensor
                                    // parallelism as torchtitan's 2-D layouts run it). Under a
                                    // pipeline schedule the weights and gradients stay whole
                                    // through the step (`Mapping::weights_sharded_through_step`):
                                    // ZeRO 2 and 3 there hold ZeRO 1's state and move its bytes,
                                    // ZeRO 3 only gathering them behind the step's first forward
                                    // rather than after the update (which software runs, not
                                    // which layout), so only ZeRO 1 is tried.
                                    // Beside them: on a plain data-parallel layout, hybrid
                                    // sharding over one scale-up domain, replicated across
                                    // domains (HSDP); and plain data parallelism (ZeRO 0: an
                                    // all-reduce behind the backward, no parameter gather),
                                    // except where the framework overlaps the parameter
                                    // gather (ZeRO 1 then moves the same bytes hidden, in less
                                    // memory), tried last so that a tie keeps the smaller state
                                    let mut zeros: Vec<(u8, u64)> = if pp == 1 {
                                        vec![(1, 0), (2, 0), (3, 0)]
                                    } else {
                                        vec![(1, 0)]
                                    };
                                    if pp == 1
                                        && tp == 1
                                        && dom > 1
                                        && dp > dom
                                        && dp.is_multiple_of(dom)
                                    {
                                        zeros.push((3, dom));
                                    }
                                    if !overlap.parameter_gather && dp * cp > 1 {
                                        zeros.push((0, 0));
                                    }
                                    // which links each dimension takes (Calculon searches the
                                    // network of each): the file's layout (Megatron's: data
                                    // parallelism inside the pipeline stages), and with both
                                    // the pipeline inside data parallelism, where that can put
                                    // a different one of them on the scale-up links
                                    let orders: Vec<[Dim; 4]> = if pp > 1 && dp > 1 && tp * cp < dom
                                    {
                                        vec![base.order, swapped(base.order, Dim::Dp, Dim::Pp)]
                                    } else {
                                        vec![base.order]
                                    };
                                    // the experts' tensor-parallel width: the attention's
                                    // (etp = tp, ep inside dp × cp), or folded to 1 where tp > 1
                                    // (MoE parallel folding: ep over tp × cp × dp, as
                                    // Megatron-Bridge's Qwen3 recipes run it)
                                    let etps: &[Option<u64>] = if t.experts.is_some() && tp > 1 {
                                        &[None, Some(1)]
                                    } else {
                                        &[None]
                                    };
                                    // Transformer Engine's overlap methods for the
                                    // row-parallel GEMMs (Calculon searches its tensor-parallel
                                    // overlap modes) where the framework overlaps tensor
                                    // parallelism: what each costs is the GEMMs' chunks and the
                                    // SMs its kernels keep (`engine::lower::training::ops`)
                                    let methods: &[Option<TpOverlapMethod>] =
                                        if overlap.tensor_parallel && tp > 1 {
                                            &[
                                                Some(TpOverlapMethod::Pipeline),
                                                Some(TpOverlapMethod::RingExchange),
                                            ]
                                        } else {
                                            std::slice::from_ref(&base.tp_overlap_method)
                                        };
                                    for ((&(zero, shard), &order), &tp_overlap_method) in zeros
                                        .iter()
                                        .flat_map(|z| orders.iter().map(move |o| (z, o)))
                                        .flat_map(|zo| methods.iter().map(move |x| (zo, x)))
                                    {
                                        for (&ep, &etp) in eps
                                            .iter()
                                            .flat_map(|e| etps.iter().map(move |x| (e, x)))
                                        {
                                            let ranks = match etp {
                                                None => dp * cp,
                                                Some(_) => tp * cp * dp,
                                            };
                                            if !ranks.is_multiple_of(ep)
                                                || (etp.is_some() && ep == 1)
                                            {
                                                continue;
                                            }
                                            out.push(Mapping {
                                                dp,
                                                tp,
                                                pp,
                                                ep,
                                                etp,
                                                cp,
                                                sp: tp > 1,
                                                zero,
                                                shard,
                                                micro_batch: mb,
                                                interleave: v,
                                                recompute: rc,
                                                overlap_grad_reduce: true,
                                                embedding_in_pipeline_split: counted,
                                                loss_in_pipeline_split: counted,
                                                overlap,
                                                order,
                                                placement: base.placement,
                                                batch: 0,
                                                regions: base.regions,
                                                pool: base.pool,
                                                kernels: base.kernels,
                                                // offloading variants are added below
                                                offload_activation_layers: 0,
                                                offload_optimizer: 0.0,
                                                offload_weights: false,
                                                expert_dispatch,
                                                tp_overlap_method,
                                            });
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            // Activations offloaded to host memory where the node has a link to it: half or all
            // of a stage's layers, as an alternative to recomputing them.
            // And the optimizer state kept and updated in host memory (Megatron-Core's
            // `HybridDeviceOptimizer` at fraction 1) on the distributed optimizer's layouts; and
            // the layers' weights kept there and copied in per pass (Calculon's weight offload;
            // Megatron-Core's `cpu_offloading_weights`, under the same no-pipeline rule as its
            // activations) where ZeRO 3 does not shard them.
            // `search` evaluates a variant only where its base layout does not run.
            if sys.node.host_link.is_some() {
                let mut variants: Vec<(usize, Mapping)> = Vec::new();
                for (i, m) in out.iter().enumerate() {
                    // Megatron-Core offloads activations only without pipeline parallelism or
                    // recomputation (TransformerConfig.__post_init__; Megatron-Bridge
                    // docs/training/cpu-offloading.md)
                    if m.recompute == Recompute::None && m.pp == 1 {
                        let l = t.layers.div_ceil(m.pp.max(1));
                        for k in [l / 2, l].into_iter().filter(|&k| k >= 3) {
                            variants.push((
                                i,
                                Mapping {
                                    offload_activation_layers: k,
                                    ..*m
                                },
                            ));
                        }
                    }
                }
                for (i, m) in out.iter().enumerate() {
                    if m.zero >= 1 {
                        variants.push((
                            i,
                            Mapping {
                                offload_optimizer: 1.0,
                                ..*m
                            },
                        ));
                    }
                    if m.zero <= 2 && m.pp == 1 {
                        variants.push((
                            i,
                            Mapping {
                                offload_weights: true,
                                ..*m
                            },
                        ));
                    }
                }
                bases = vec![None; out.len()];
                for (i, m) in variants {
                    out.push(m);
                    bases.push(Some(i));
                }
            }
        }
        (Model::Transformer(t), Task::Inference(inf)) => {
            out = inference_candidates(t, inf, n, base);
            // Disaggregated serving: a prefill pool, its instances of the widest tensor-parallel
            // width that fits a scale-up domain and divides the heads and the pool (and of half
            // that), beside the decode instances' tensor-parallel candidates on the rest (one
            // stage each, their default micro-batch split: the search stays fast)
            // (not on a device with a mesh of cores, whose phases take core `regions` instead;
            // a pool instance whose devices cannot hold the weights is not tried)
            let dom = sys.scale_up_size().max(1);
            let mesh = sys.device.has_mesh();
            let mach = super::machine::machine(sys, n);
            let cap = super::cpu::largest_usable_capacity(&mach);
            let fits = |tp: u64| t.params() * inf.weights.bytes() / tp as f64 <= cap;
            // pools of a power of two of devices, or of all but a power of two (the decode
            // instances a power of two: prompt-heavy loads want the larger pool)
            let mut pools: Vec<u64> = pow2_upto(n.saturating_sub(1))
                .into_iter()
                .flat_map(|k| [k, n - k])
                .filter(|&k| n >= 2 && k < n && !mesh)
                .collect();
            pools.sort_unstable();
            pools.dedup();
            for pool in pools {
                let widths: Vec<u64> = pow2_upto(pool.min(dom).min(t.heads))
                    .into_iter()
                    .filter(|tp| t.heads.is_multiple_of(*tp) && pool.is_multiple_of(*tp))
                    .rev()
                    .take(2)
                    .filter(|&tp| fits(tp))
                    .collect();
                if widths.is_empty() {
                    continue;
                }
                let decode = inference_candidates(t, inf, n - pool, base);
                for tp in widths {
                    let p = Pool {
                        instances: pool / tp,
                        tp,
                    };
                    out.extend(
                        decode
                            .iter()
                            .filter(|c| c.micro_batch == 0 && c.pp == 1)
                            .map(|c| Mapping { pool: p, ..*c }),
                    );
                }
            }
        }
        (Model::Cnn(_), Task::Training(tr)) => {
            let local = tr.global_batch / n.max(1);
            for mb in [local, 256, 128, 64, 32] {
                if mb >= 1 && mb <= local && local.is_multiple_of(mb) {
                    out.push(Mapping {
                        dp: n,
                        micro_batch: mb,
                        zero: 0,
                        ..base
                    });
                }
            }
        }
        _ => out.push(Mapping { dp: n, ..base }),
    }
    bases.resize(out.len(), None);
    (out, bases)
}

/// The interleaved serving candidates of transformer inference on `n` devices.
fn inference_candidates(
    t: &crate::model::workload::Transformer,
    inf: &crate::model::workload::Inference,
    n: u64,
    base: Mapping,
) -> Vec<Mapping> {
    let mut out = Vec::new();
    // Per-layer pipelines: for each tensor-parallel width and number of model instances
    // (dp), every depth of layer stages the instance's devices allow, with the output
    // head on the last layer stage or on the devices left over; a few micro-batch sizes
    // (0: the batch split evenly over the stages); for a mixture of experts, every
    // power-of-two group of instances that may share its experts.
    // (a stage may span domains: its all-reduces then cross the scale-out network)
    for tp in pow2_upto(n.min(t.heads))
        .into_iter()
        .filter(|tp| t.heads.is_multiple_of(*tp))
    {
        for dp in divisors(n) {
            let per = n / dp;
            if per < tp {
                continue;
            }
            for s in 1..=(per / tp).min(t.layers) {
                let head = per - s * tp;
                if head > (4 * tp).max(per / 4) {
                    continue;
                }
                let placement = Placement::balanced(t.layers, s, tp, head);
                let stages = placement.stages();
                let even = inf.batch.div_ceil(stages);
                let mut mbs = vec![0, 1, inf.batch];
                mbs.retain(|&b| b == 0 || (b != even && b <= inf.batch));
                mbs.dedup();
                // expert parallelism: `ep` of the instances share their experts
                let eps: Vec<u64> = match &t.experts {
                    Some(e) => pow2_upto(dp.min(e.count))
                        .into_iter()
                        .filter(|x| dp.is_multiple_of(*x) && e.count.is_multiple_of(*x))
                        .collect(),
                    None => vec![1],
                };
                for mb in mbs {
                    for &ep in &eps {
                        out.push(Mapping {
                            dp,
                            tp,
                            pp: stages,
                            ep,
                            micro_batch: mb,
                            placement,
                            ..base
                        });
                    }
                }
            }
        }
    }
    out
}

/// Seconds per unit of work (time) or joules per unit of work (energy): lower is better.
pub fn cost(e: &Eval, obj: Objective) -> f64 {
    match obj {
        Objective::Time => 1.0 / e.throughput,
        Objective::Energy => e.energy_per_step / (e.throughput * e.step_time),
    }
}

/// Lower and evaluate one mapping: its evaluation or why it cannot run, and its program where
/// it lowers.
fn evaluate(
    sys: &System,
    w: &Workload,
    m: &Mapping,
    n: u64,
    mach: &super::program::Machine,
) -> (Result<Eval, Reason>, Option<Program>) {
    match lower::lower(sys, w, m, n) {
        Ok(p) => {
            let e = cpu::eval(&p, mach);
            if e.feasible {
                (Ok(e), Some(p))
            } else {
                let r = e.reason().unwrap_or_else(|| Reason::mapping("infeasible"));
                (Err(r), Some(p))
            }
        }
        Err(r) => (Err(r), None),
    }
}

/// One evaluated serving point: the mapping (with its requests per instance), its round (or why
/// it cannot run) and, with a latency target, how far it is from it (≤ 1: met).
pub type Point = (Mapping, Result<Eval, Reason>, f64);

/// Every point the search evaluates for one candidate mapping `m` under `w`'s load: the requests
/// per instance [`serve::batches`] gives; and, with a latency target and a free concurrency
/// (`max`), the largest number of requests that still meets it, found by bisection between the
/// largest tried that meets it and the smallest above it that does not (to 1 % or one request),
/// so the server scenario's load is not rounded down to a power of two. A looser target never
/// ends lower: every probe the tighter one passed, the looser one passes too.
pub fn points(
    sys: &System,
    w: &Workload,
    m: Mapping,
    n: u64,
    mach: &super::program::Machine,
) -> Vec<Point> {
    let load = serve::load_of(w);
    let slo = load.slo;
    let list = match &w.task {
        Task::Inference(_) if load != Default::default() => serve::batches(sys, w, m, n, &load),
        _ => vec![m],
    };
    let eval = |m: &Mapping| -> Point {
        match evaluate(sys, w, m, n, mach).0 {
            Ok(e) => {
                let v = if slo.is_empty() {
                    0.0
                } else {
                    serve::violation(sys, w, m, n, &e, mach, &slo)
                };
                (*m, Ok(e), v)
            }
            Err(r) => (*m, Err(r), f64::INFINITY),
        }
    };
    let mut out: Vec<Point> = list.iter().map(eval).collect();
    if load.concurrency == Concurrency::Max && !slo.is_empty() {
        let meets = |p: &Point| p.1.is_ok() && p.2 <= 1.0;
        let lo = out.iter().filter(|p| meets(p)).map(|p| p.0.batch).max();
        if let Some(mut lo) = lo {
            let hi = out
                .iter()
                .filter(|p| p.0.batch > lo && !meets(p))
                .map(|p| p.0.batch)
                .min();
            if let Some(mut hi) = hi {
                while hi - lo > (lo / 100).max(1) {
                    let mid = lo + (hi - lo) / 2;
                    let p = eval(&Mapping { batch: mid, ..m });
                    if meets(&p) {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                    out.push(p);
                }
            }
        }
    }
    out
}

/// Evaluate every candidate and rank the feasible ones. A serving workload's load
/// (`serve::Load`) sets each candidate's requests per instance (with a latency target and a free
/// concurrency, several: [`points`]); with a target, the ranking keeps the mappings that meet it,
/// or, when none does, ranks the feasible ones by how close they come (`slo_met: Some(false)`).
pub fn search(sys: &System, w: &Workload, n: u64, obj: Objective) -> SearchResult {
    let mach = lower::machine(sys, n);
    let slo = serve::load_of(w).slo;
    let (cands, bases) = candidates_with_bases(sys, w, n);
    let mut has_variants = vec![false; cands.len()];
    for b in bases.iter().flatten() {
        has_variants[*b] = true;
    }
    // Every layout on all CPU cores (rayon), in two passes: the layouts themselves, then the
    // offloading variants of those short of device memory. Each pass collects in candidate order,
    // so the ranking (a stable sort) and its ties are those of one thread.
    let first: Vec<(Vec<Point>, Option<Short>)> = cands
        .par_iter()
        .enumerate()
        .map(|(i, c)| {
            if bases[i].is_some() {
                (Vec::new(), None)
            } else if has_variants[i] {
                // a training layout with offloading variants (one point, no load): its program
                // kept for what its stages hold, and by how much it is short of device memory
                let (e, p) = evaluate(sys, w, c, n, &mach);
                let short = match (&e, &p) {
                    (
                        Err(Reason::Memory {
                            needed,
                            available,
                            host: false,
                        }),
                        Some(p),
                    ) => Some((needed - available, largest_freeable(p))),
                    _ => None,
                };
                let v = if e.is_ok() { 0.0 } else { f64::INFINITY };
                (vec![(*c, e, v)], short)
            } else {
                (points(sys, w, *c, n, &mach), None)
            }
        })
        .collect();
    // Offloading to host memory moves more bytes and updates in a slower memory: it never makes
    // a layout that runs without it faster or cheaper, and frees device memory only. So it is
    // tried only where the layout falls short of device memory without it, by no more than the
    // offload could free (the largest stage's optimizer state, weights or resident activations).
    let second: Vec<Vec<Point>> = cands
        .par_iter()
        .enumerate()
        .map(|(i, c)| {
            let Some(b) = bases[i] else {
                return Vec::new();
            };
            let Some((gap, f)) = &first[b].1 else {
                return Vec::new();
            };
            let frees = if c.offload_optimizer > 0.0 {
                f.optimizer
            } else if c.offload_weights {
                f.weights
            } else {
                f.activations
            };
            if frees < *gap {
                return Vec::new();
            }
            points(sys, w, *c, n, &mach)
        })
        .collect();
    let mut ranked = Vec::new();
    let mut missed = Vec::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut tried = 0;
    let all = first.into_iter().map(|(p, _)| p).zip(second);
    for (m, e, v) in all.flat_map(|(a, b)| a.into_iter().chain(b)) {
        tried += 1;
        match e {
            Ok(e) if v <= 1.0 => ranked.push((m, e)),
            Ok(e) => missed.push((v, m, e)),
            // group memory reasons regardless of the exact byte counts
            Err(r) => *reasons.entry(r.summary()).or_default() += 1,
        }
    }
    ranked.sort_by(|a, b| cost(&a.1, obj).total_cmp(&cost(&b.1, obj)));
    let mut slo_met = (!slo.is_empty()).then_some(true);
    if ranked.is_empty() && !missed.is_empty() {
        // none meets the target: the closest first
        missed.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(cost(&a.2, obj).total_cmp(&cost(&b.2, obj)))
        });
        ranked = missed.into_iter().map(|(_, m, e)| (m, e)).collect();
        slo_met = Some(false);
    }
    SearchResult {
        ranked,
        tried,
        reasons,
        slo_met,
    }
}

/// How far a layout falls short of device memory, and what each kind of offload could free at
/// most ([`largest_freeable`]).
type Short = (f64, Footprint);

/// The most a stage of `p` holds of optimizer state, weights and resident activations (each
/// stage's own; the largest of each).
fn largest_freeable(p: &Program) -> Footprint {
    let mut f = p.footprint;
    for s in &p.stages {
        f.optimizer = f.optimizer.max(s.footprint.optimizer);
        f.weights = f.weights.max(s.footprint.weights);
        f.activations = f.activations.max(s.footprint.activations);
    }
    f
}

/// A given mapping's requests per instance under a latency target with a free concurrency
/// (`max`): of its [`points`], the highest throughput that meets the target, else the closest
/// to it; the load's own resolution otherwise (`None`: no point runs).
pub fn given_batch(sys: &System, w: &Workload, m: Mapping, n: u64) -> Option<Mapping> {
    let load = serve::load_of(w);
    if load.concurrency != Concurrency::Max || load.slo.is_empty() {
        return None;
    }
    let mach = lower::machine(sys, n);
    let pts: Vec<(Mapping, Eval, f64)> = points(sys, w, m, n, &mach)
        .into_iter()
        .filter_map(|(m, e, v)| e.ok().map(|e| (m, e, v)))
        .collect();
    let best_met = pts
        .iter()
        .filter(|p| p.2 <= 1.0)
        .max_by(|a, b| a.1.throughput.total_cmp(&b.1.throughput));
    let closest = || pts.iter().min_by(|a, b| a.2.total_cmp(&b.2));
    best_met.or_else(closest).map(|p| p.0)
}

/// Smaller device counts worth searching when `n` factorises badly for a training workload:
/// the largest power of two below `n` and the largest scale-up-domain multiple of the form
/// domain × 2^k below it (144 of 216 NVL72 GPUs), each a whole number of nodes. Empty for a
/// power of two and for inference (every instance is independent there).
pub fn fewer_devices(sys: &System, w: &Workload, n: u64) -> Vec<u64> {
    if !matches!(w.task, Task::Training(_)) || n.is_power_of_two() {
        return Vec::new();
    }
    let node = (sys.node.devices as u64).max(1);
    let p2 = 1u64 << (63 - n.leading_zeros());
    let mut out = vec![p2];
    let dom = sys.scale_up_size().max(1);
    if dom > 1 && !dom.is_power_of_two() {
        let mut k = dom;
        while k * 2 <= n {
            k *= 2;
        }
        if k < n {
            out.push(k);
        }
    }
    // whole nodes (or part of one, for a request smaller than a node)
    out.retain(|&k| k < n && (k % node == 0 || k < node));
    out.sort_unstable();
    out.dedup();
    out
}
