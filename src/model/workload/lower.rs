//! Lowering a workload file: the top level that dispatches on model and task, the transformer
//! with its shape checks, the training task, and the precision names every part uses.

use super::check::check_mapping;
use super::cnn::lower_cnn;
use super::graph::{lower_graph, precision};
use super::types::{
    BatchScaling, Experts, Inference, Lora, Mla, Model, PrecisionPhase, Run, Speculative, Target,
    Task, Training, Transformer, Workload,
};
use crate::diag::Path;
use crate::model::Ctx;
use crate::spec::workload::*;
use crate::spec::FORMAT_VERSION;

pub(super) fn lower(cx: &mut Ctx, s: &WorkloadSpec) -> Option<Workload> {
    cx.declare_sources(&s.sources);
    if s.version != FORMAT_VERSION {
        cx.error(
            "version",
            format!("unsupported format version {}", s.version),
            Some(format!("this tessera reads version {FORMAT_VERSION}")),
        );
    }
    cx.enter_part(cx.file(), Path::root(), s.source.as_ref());
    if s.source.is_none() {
        cx.warn(
            "",
            "the workload names no `source` for its figures",
            Some("add `source: \"key\"` naming an entry of `sources` (the paper or benchmark that defines it)".into()),
        );
    }
    cx.enter_field("model", None);
    let model = match &s.model {
        ModelSpec::Transformer(t) => {
            cx.enter_field("Transformer", None);
            let v = lower_transformer(cx, t);
            cx.leave();
            v.map(Model::Transformer)
        }
        ModelSpec::Cnn(c) => lower_cnn(cx, c).map(Model::Cnn),
        ModelSpec::Graph(g) => {
            cx.enter_field("Graph", None);
            let v = lower_graph(cx, g);
            cx.leave();
            v.map(Model::Graph)
        }
    };
    cx.leave();
    cx.enter_field("task", None);
    let task = match &s.task {
        TaskSpec::Training(t) => {
            cx.enter_field("Training", None);
            let v = lower_training(cx, t, model.as_ref());
            cx.leave();
            v.map(Task::Training)
        }
        TaskSpec::Inference(i) => {
            cx.enter_field("Inference", None);
            let prompt = cx.count("prompt", i.prompt);
            let output = cx.count("output", i.output);
            let batch = cx.count("batch", i.batch);
            let v = Inference {
                prompt: prompt.unwrap_or(1),
                output: output.unwrap_or(1),
                batch: batch.unwrap_or(1),
                weights: precision(cx, "weights", &i.weights),
                compute: precision(cx, "compute", &i.compute),
                kv_cache: precision(cx, "kv_cache", &i.kv_cache),
                activations: precision(cx, "activations", &i.activations),
                flash_attention: i.flash_attention,
                load: Default::default(),
                speculative: i.speculative.as_ref().and_then(|sp| {
                    cx.enter_field("speculative", None);
                    let tokens = cx.count("tokens", sp.tokens);
                    let acceptance = cx
                        .q("acceptance", &sp.acceptance, crate::units::Dimension::Ratio)
                        .and_then(|a| {
                            if a > 0.0 && a <= 1.0 {
                                return Some(a);
                            }
                            cx.error(
                                "acceptance",
                                format!(
                                    "`acceptance` is the probability that the model keeps a drafted token, in (0, 1]; found `{}`",
                                    sp.acceptance.0.trim()
                                ),
                                Some("write the measured acceptance rate with its source, e.g. \"0.85 @deepseek-v3\" (DeepSeek-V3's multi-token prediction: 85-90 % for the second token)".into()),
                            );
                            None
                        });
                    cx.leave();
                    Some(Speculative {
                        tokens: tokens?,
                        acceptance: acceptance?,
                        draft_layers: sp.draft_layers,
                    })
                }),
            };
            if matches!(model, Some(Model::Cnn(_)) | Some(Model::Graph(_))) {
                cx.error(
                    "",
                    "inference tasks are modelled for transformers",
                    Some("use `Run(...)` for an operator graph".into()),
                );
            }
            cx.leave();
            Some(Task::Inference(v))
        }
        TaskSpec::Run(r) => Some(Task::Run(Run {
            steps: r.steps,
            samples_per_step: r.samples_per_step.unwrap_or(1.0),
        })),
    };
    cx.leave();
    if let Some(m) = &s.mapping {
        cx.enter_field("mapping", m.source.as_ref());
        check_mapping(cx, m);
        cx.leave();
    }
    cx.leave();
    Some(Workload {
        name: s.name.clone(),
        model: model?,
        task: task?,
        mapping: s
            .mapping
            .as_ref()
            .map(crate::model::mapping::MappingPlan::from),
    })
}

fn lower_transformer(cx: &mut Ctx, t: &TransformerSpec) -> Option<Transformer> {
    let layers = cx.count("layers", t.layers);
    let hidden = cx.count("hidden", t.hidden);
    let heads = cx.count("heads", t.heads);
    let vocab = cx.count("vocab", t.vocab);
    let kv = t.kv_heads.map(|k| cx.count("kv_heads", k)).unwrap_or(heads);
    let ffn = t
        .ffn
        .map(|f| cx.count("ffn", f))
        .unwrap_or(hidden.map(|h| 4 * h));
    let head_dim = t.head_dim.map(|d| cx.count("head_dim", d));
    if let (Some(h), Some(a), None) = (hidden, heads, t.head_dim) {
        if h % a != 0 {
            cx.error(
                "heads",
                format!("hidden size {h} is not divisible by {a} heads"),
                Some(
                    "head dimension = hidden / heads must be a whole number, or give `head_dim`"
                        .into(),
                ),
            );
        }
    }
    if let (Some(a), Some(k)) = (heads, kv) {
        if k > a || a % k != 0 {
            cx.error(
                "kv_heads",
                format!("{k} key/value heads do not divide {a} attention heads"),
                Some("grouped-query attention shares each KV head among heads / kv_heads query heads".into()),
            );
        }
    }
    let experts = t.experts.as_ref().and_then(|e| {
        cx.enter_field("experts", None);
        let count = cx.count("count", e.count);
        let top_k = cx.count("top_k", e.top_k);
        if let (Some(c), Some(k)) = (count, top_k) {
            if k > c {
                cx.error("top_k", format!("top_k {k} exceeds the {c} experts"), None);
            }
        }
        let f = e.ffn.map(|f| cx.count("ffn", f)).unwrap_or(ffn);
        let every = e.every.map(|n| cx.count("every", n)).unwrap_or(Some(1));
        if let Some(l) = layers {
            if e.dense_layers >= l {
                cx.error(
                    "dense_layers",
                    format!("{} dense layers leave none of the {l} layers with experts", e.dense_layers),
                    Some("`dense_layers` counts the first layers that have a dense FFN instead of experts".into()),
                );
            }
        }
        let load_imbalance = match e.load_imbalance {
            Some(x) if !(x.is_finite() && x >= 1.0) => {
                cx.error(
                    "load_imbalance",
                    format!("`load_imbalance` {x} is below 1"),
                    Some("the busiest expert-parallel rank's routed tokens over the mean per rank: 1 is balanced, 1.2 a rank with a fifth more than the mean".into()),
                );
                None
            }
            x => Some(x.unwrap_or(1.0)),
        };
        let capacity_factor = match e.capacity_factor {
            Some(x) if !(x.is_finite() && x > 0.0) => {
                cx.error(
                    "capacity_factor",
                    format!("`capacity_factor` {x} gives the experts no capacity"),
                    Some("the slots per expert over an even share of the routed tokens: 1.25 is GShard's and MaxText's usual figure; leave it out for dropless routing".into()),
                );
                None
            }
            x => Some(x),
        };
        cx.leave();
        Some(Experts {
            count: count?,
            top_k: top_k?,
            ffn: f?,
            shared: e.shared,
            dense_layers: e.dense_layers,
            every: every?,
            load_imbalance: load_imbalance?,
            capacity_factor: capacity_factor?,
        })
    });
    let mla = t.mla.as_ref().map(|a| {
        cx.enter_field("mla", None);
        let kv_rank = cx.count("kv_rank", a.kv_rank);
        let rope_dim = cx.count("rope_dim", a.rope_dim);
        let q_rank = match a.q_rank {
            Some(r) => cx.count("q_rank", r),
            None => Some(0),
        };
        let v_head_dim = a.v_head_dim.map(|v| cx.count("v_head_dim", v));
        cx.leave();
        (q_rank, kv_rank, rope_dim, v_head_dim)
    });
    if let (Some(_), Some(k), Some(a)) = (&mla, t.kv_heads, heads) {
        if k != a {
            cx.error(
                "kv_heads",
                format!("latent attention gives every one of the {a} heads its own key and value, but `kv_heads` is {k}"),
                Some("with `mla`, leave out `kv_heads`: the heads share the key/value latent, not key/value heads".into()),
            );
        }
    }
    let head_dim = match head_dim {
        Some(d) => d?,
        None => hidden? / heads?,
    };
    let mla = match mla {
        Some((q_rank, kv_rank, rope_dim, v_head_dim)) => Some(Mla {
            q_rank: q_rank?,
            kv_rank: kv_rank?,
            rope_dim: rope_dim?,
            v_head_dim: match v_head_dim {
                Some(v) => v?,
                None => head_dim,
            },
        }),
        None => None,
    };
    Some(Transformer {
        mla,
        layers: layers?,
        hidden: hidden?,
        heads: heads?,
        head_dim,
        kv_heads: kv?,
        ffn: ffn?,
        gated_ffn: t.gated_ffn,
        vocab: vocab?,
        experts: if t.experts.is_some() {
            Some(experts?)
        } else {
            None
        },
        tied_embeddings: t.tied_embeddings,
        causal: t.causal,
    })
}

fn lower_training(cx: &mut Ctx, t: &TrainingSpec, model: Option<&Model>) -> Option<Training> {
    let gb = cx.count("global_batch", t.global_batch);
    let seq = match (t.seq_len, model) {
        (Some(s), _) => cx.count("seq_len", s),
        (None, Some(Model::Transformer(_))) => {
            cx.error(
                "",
                "a transformer training task needs `seq_len`",
                Some("add `seq_len: 2048,`".into()),
            );
            None
        }
        _ => Some(1),
    };
    cx.enter_field("precision", None);
    let p = &t.precision;
    let compute = precision(cx, "compute", &p.compute);
    let weights = precision(cx, "weights", &p.weights);
    let gradients = precision(cx, "gradients", &p.gradients);
    let activations = precision(cx, "activations", &p.activations);
    if !(p.optimizer_bytes.is_finite() && p.optimizer_bytes >= 0.0 && p.optimizer_bytes <= 64.0) {
        cx.error(
            "optimizer_bytes",
            format!(
                "`optimizer_bytes` must be between 0 and 64, found {}",
                p.optimizer_bytes
            ),
            Some("Adam with fp32 master weights keeps 12 bytes per parameter".into()),
        );
    }
    cx.leave();
    let target = t.target.as_ref().and_then(|tg| {
        let (v, kind) = match tg {
            TargetSpec::Tokens(v) => (*v, "Tokens"),
            TargetSpec::Samples(v) => (*v, "Samples"),
            TargetSpec::Epochs(v) => (*v, "Epochs"),
            TargetSpec::Steps(v) => (*v, "Steps"),
        };
        if !(v.is_finite() && v > 0.0) {
            cx.error(
                "target",
                format!("`{kind}` target must be positive and finite, found {v}"),
                None,
            );
            return None;
        }
        Some(match tg {
            TargetSpec::Tokens(v) => Target::Tokens(*v),
            TargetSpec::Samples(v) => Target::Samples(*v),
            TargetSpec::Steps(v) => Target::Steps(*v),
            TargetSpec::Epochs(e) => match t.dataset_samples {
                Some(n) => Target::Samples(e * n as f64),
                None => {
                    cx.error(
                        "target",
                        "an `Epochs` target needs `dataset_samples`",
                        Some("e.g. `dataset_samples: 1281167` for ImageNet-1K".into()),
                    );
                    return None;
                }
            },
        })
    });
    let lora = t.lora.as_ref().map(|l| Lora {
        rank: l.rank,
        adapted_per_layer: l.adapted_per_layer,
    });
    let mut schedule = Vec::new();
    let mut total = 0.0;
    for (i, ph) in t.precision_schedule.iter().enumerate() {
        cx.enter(crate::diag::Seg::Field("precision_schedule".into()), None);
        cx.enter(crate::diag::Seg::Index(i), None);
        if !(ph.share.is_finite() && ph.share > 0.0 && ph.share <= 1.0) {
            cx.error(
                "share",
                format!("a phase's `share` of the steps must be in (0, 1], found {}", ph.share),
                Some("`share: 0.9` runs the first 90 % of the optimizer steps at this phase's precision".into()),
            );
        } else {
            total += ph.share;
        }
        let compute = precision(cx, "compute", &ph.compute);
        cx.leave();
        cx.leave();
        schedule.push(PrecisionPhase {
            share: ph.share,
            compute,
            scaling: ph.scaling.unwrap_or_default(),
        });
    }
    if total > 1.0 + 1e-9 {
        cx.error(
            "precision_schedule",
            format!(
                "the schedule's phases share {} of the steps, more than all of them",
                (total * 1e9).round() / 1e9
            ),
            Some("the shares add up to at most 1; the steps they leave run at `precision`".into()),
        );
    }
    let batch_scaling = t.batch_scaling.as_ref().and_then(|b| {
        cx.enter_field("batch_scaling", b.source.as_ref());
        if b.source.is_none() {
            cx.error(
                "source",
                "a batch that scales names the source of its figures",
                Some("add `source: \"key\"`: the recipe's per-device batch and the largest batch it trains at".into()),
            );
        }
        let per = cx.count("per_device", b.per_device);
        let max = cx.count("max", b.max);
        if let (Some(m), Some(g)) = (max, gb) {
            if m < g {
                cx.error(
                    "max",
                    format!("the largest batch ({m}) is below the stated global batch ({g})"),
                    Some("`max` bounds how far the batch grows from `global_batch`".into()),
                );
            }
        }
        cx.leave();
        Some(BatchScaling {
            per_device: per?,
            max: max?,
        })
    });
    let predicted = match &t.predicted {
        Some(q) => cx.fraction_with(
            "predicted",
            q,
            "the share of token positions the head and loss run on: \"100 %\" for a causal LM (the default), \"15 %\" for BERT's masked positions",
        ),
        None => Some(1.0),
    };
    Some(Training {
        seq: seq?,
        global_batch: gb?,
        batch_scaling,
        scaled_from: None,
        compute,
        weights,
        gradients,
        optimizer_bytes: p.optimizer_bytes,
        activations,
        scaling: p.scaling.unwrap_or_default(),
        target,
        lora,
        flash_attention: t.flash_attention,
        dropout: t.dropout.unwrap_or(true),
        predicted: predicted?,
        dataset_samples: t.dataset_samples,
        precision_schedule: schedule,
    })
}
