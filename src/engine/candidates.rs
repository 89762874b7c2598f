//! The mappings `--mapping auto` tries: every legal layout of a workload on N devices (tensor,
//! context, pipeline, data and expert parallelism, micro-batches, interleaving, recomputation,
//! state sharding, link order, overlap methods), the offloading variants of training layouts and
//! the prefill pools of serving. Enumeration only: `search` evaluates them.

use crate::model::mapping::{Mapping, Placement, Pool, Recompute};
use crate::model::system::{Execution, System};
use crate::model::workload::{Model, Task, Workload};
use crate::vocab::{Dim, TpOverlapMethod};

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

/// Whether a training layout splits the model only along the dimensions the system's execution
/// mode allows (`Execution::parallel`; expert parallelism only where it allows every one).
pub fn admits(x: &Execution, m: &Mapping) -> bool {
    let free = |d: Dim, degree: u64| degree <= 1 || x.allows(d);
    free(Dim::Tp, m.tp)
        && free(Dim::Cp, m.cp)
        && free(Dim::Pp, m.pp)
        && free(Dim::Dp, m.dp)
        && (x.parallel.is_none() || (m.ep <= 1 && m.etp.unwrap_or(1) <= 1))
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
    let mut bases = Vec::new();
    let mut out = Vec::new();
    match (&w.model, &w.task) {
        (Model::Transformer(t), Task::Training(tr)) => {
            out = training_candidates(sys, t, tr, n, base);
            // the vendor's execution mode: only the dimensions its software splits along
            out.retain(|m| admits(&sys.execution, m));
            // `search` evaluates a variant only where its base layout does not run.
            if sys.node.host_link.is_some() {
                let variants = offload_variants(t, &out);
                bases = vec![None; out.len()];
                for (i, m) in variants {
                    out.push(m);
                    bases.push(Some(i));
                }
            }
        }
        (Model::Transformer(t), Task::Inference(inf)) => {
            out = inference_candidates(t, inf, n, base);
            out.extend(pooled_candidates(sys, t, inf, n, base));
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

/// The layouts of transformer training on `n` devices: tensor, context, pipeline and data
/// parallelism that divide the devices, the heads and the global batch, each micro-batch and
/// interleaving that fits, and every recomputation; then [`layout_variants`] of each.
fn training_candidates(
    sys: &System,
    t: &crate::model::workload::Transformer,
    tr: &crate::model::workload::Training,
    n: u64,
    base: Mapping,
) -> Vec<Mapping> {
    let mut out = Vec::new();
    let dom = sys.scale_up_size().min(n).max(1);
    let tps: Vec<u64> = pow2_upto(dom.min(t.heads))
        .into_iter()
        .filter(|tp| t.heads.is_multiple_of(*tp))
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
                if !tr.global_batch.is_multiple_of(dp) {
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
                    // the uniform split of the layers, and where Megatron-Core's rule allows it
                    // (layers + 2 a multiple of pp × v), the split that counts the embedding
                    // and the loss as a layer each
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
                            let l = Layout {
                                dp,
                                tp,
                                pp,
                                cp,
                                mb,
                                v,
                                counted,
                                rc,
                            };
                            layout_variants(&mut out, t, &l, &eps, dom, base);
                        }
                    }
                }
            }
        }
    }
    out
}

/// One parallel layout of a training search, before its state sharding and link order.
struct Layout {
    dp: u64,
    tp: u64,
    pp: u64,
    cp: u64,
    mb: u64,
    v: u64,
    counted: bool,
    rc: Recompute,
}

/// The variants of layout `l` a search tries: each ZeRO stage (and hybrid sharding) it allows,
/// each order of its dimensions on the links, each overlap method and expert layout.
fn layout_variants(
    out: &mut Vec<Mapping>,
    t: &crate::model::workload::Transformer,
    l: &Layout,
    eps: &[u64],
    dom: u64,
    base: Mapping,
) {
    let Layout {
        dp,
        tp,
        pp,
        cp,
        mb,
        v,
        counted,
        rc,
    } = *l;
    let overlap = base.overlap;
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
    if pp == 1 && tp == 1 && dom > 1 && dp > dom && dp.is_multiple_of(dom) {
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
    let orders: Vec<[Dim; 4]> = if pp > 1 && dp > 1 && tp * cp < dom {
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
    // SMs its kernels keep (`engine::lower::training::linear`)
    let methods: &[Option<TpOverlapMethod>] = if overlap.tensor_parallel && tp > 1 {
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
        for (&ep, &etp) in eps.iter().flat_map(|e| etps.iter().map(move |x| (e, x))) {
            let ranks = match etp {
                None => dp * cp,
                Some(_) => tp * cp * dp,
            };
            if !ranks.is_multiple_of(ep) || (etp.is_some() && ep == 1) {
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
                recompute_layers: None,
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
                expert_dispatch: base.expert_dispatch,
                tp_overlap_method,
            });
        }
    }
}

/// Activations offloaded to host memory where the node has a link to it: half or all of a
/// stage's layers, as an alternative to recomputing them. And the optimizer state kept and
/// updated in host memory (Megatron-Core's `HybridDeviceOptimizer` at fraction 1) on the
/// distributed optimizer's layouts; and the layers' weights kept there and copied in per pass
/// (Calculon's weight offload; Megatron-Core's `cpu_offloading_weights`, under the same
/// no-pipeline rule as its activations) where ZeRO 3 does not shard them. Each with the index of
/// the layout it varies.
fn offload_variants(
    t: &crate::model::workload::Transformer,
    out: &[Mapping],
) -> Vec<(usize, Mapping)> {
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
    variants
}

/// Disaggregated serving: a prefill pool, its instances of the widest tensor-parallel width that
/// fits a scale-up domain and divides the heads and the pool (and of half that), beside the
/// decode instances' tensor-parallel candidates on the rest (one stage each, their default
/// micro-batch split: the search stays fast) (not on a device with a mesh of cores, whose phases
/// take core `regions` instead; a pool instance whose devices cannot hold the weights is not
/// tried).
fn pooled_candidates(
    sys: &System,
    t: &crate::model::workload::Transformer,
    inf: &crate::model::workload::Inference,
    n: u64,
    base: Mapping,
) -> Vec<Mapping> {
    let mut out = Vec::new();
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
    out
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
