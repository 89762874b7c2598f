//! The validated workload: a transformer, CNN or operator graph, trained or served, with the
//! arithmetic every estimate starts from (parameters, FLOPs per token).

use super::precision::Precision;
use super::Ctx;
use crate::diag::Path;
use crate::spec::mapping::MappingSpec;
use crate::spec::workload::*;
use crate::spec::{Fs, Loaded, FORMAT_VERSION};
use crate::units::Dimension as D;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    pub name: String,
    pub model: Model,
    pub task: Task,
    /// The mapping the source published, if the file gives one.
    #[serde(skip)]
    pub mapping: Option<MappingSpec>,
}

#[derive(Debug, Clone, Serialize)]
pub enum Model {
    Transformer(Transformer),
    Cnn(Cnn),
    Graph(Vec<GraphOp>),
}

#[derive(Debug, Clone, Serialize)]
pub struct Transformer {
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub ffn: u64,
    pub gated_ffn: bool,
    pub vocab: u64,
    pub experts: Option<Experts>,
    pub tied_embeddings: bool,
    pub causal: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Experts {
    pub count: u64,
    pub top_k: u64,
    pub ffn: u64,
    pub shared: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Cnn {
    pub layers: Vec<ConvLayer>,
    pub image: u64,
    pub classes: u64,
    pub name: String,
}

/// One convolution (or the final fully-connected layer, as a 1×1 conv on a 1×1 map).
#[derive(Debug, Clone, Serialize)]
pub struct ConvLayer {
    pub cin: u64,
    pub cout: u64,
    pub kernel: u64,
    /// Output side.
    pub out: u64,
    /// Input side.
    pub inp: u64,
}

impl ConvLayer {
    /// Multiply-accumulate FLOPs per image (2 per MAC).
    pub fn flops(&self) -> f64 {
        2.0 * (self.out * self.out * self.kernel * self.kernel * self.cin * self.cout) as f64
    }
    pub fn params(&self) -> f64 {
        (self.kernel * self.kernel * self.cin * self.cout) as f64
    }
    pub fn out_elems(&self) -> f64 {
        (self.out * self.out * self.cout) as f64
    }
    pub fn in_elems(&self) -> f64 {
        (self.inp * self.inp * self.cin) as f64
    }
}

#[derive(Debug, Clone, Serialize)]
pub enum GraphOp {
    /// FLOPs, weight bytes, activation bytes, precision, count.
    Compute {
        name: String,
        matrix: bool,
        flops: f64,
        weight_bytes: f64,
        act_bytes: f64,
        precision: Precision,
        count: f64,
    },
    Collective {
        kind: CollectiveKind,
        bytes: f64,
        group: u64,
        count: f64,
    },
}

#[derive(Debug, Clone, Serialize)]
pub enum Task {
    Training(Training),
    Inference(Inference),
    Run(Run),
}

#[derive(Debug, Clone, Serialize)]
pub struct Training {
    pub seq: u64,
    pub global_batch: u64,
    pub compute: Precision,
    pub weights: Precision,
    pub gradients: Precision,
    pub optimizer_bytes: f64,
    pub activations: Precision,
    pub target: Option<Target>,
    pub lora: Option<Lora>,
    pub flash_attention: bool,
    pub dataset_samples: Option<u64>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub enum Target {
    Tokens(f64),
    Samples(f64),
    Steps(f64),
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Lora {
    pub rank: u64,
    pub adapted_per_layer: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Inference {
    pub prompt: u64,
    pub output: u64,
    pub batch: u64,
    pub weights: Precision,
    pub compute: Precision,
    pub kv_cache: Precision,
    pub flash_attention: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub steps: Option<f64>,
    pub samples_per_step: f64,
}

impl Transformer {
    pub fn head_dim(&self) -> u64 {
        self.hidden / self.heads
    }
    /// Q, K, V and output projection parameters of one layer.
    pub fn attn_params(&self) -> f64 {
        let h = self.hidden as f64;
        let kv = (self.kv_heads * self.head_dim()) as f64;
        h * h + 2.0 * h * kv + h * h
    }
    fn ffn_matrices(&self) -> f64 {
        if self.gated_ffn {
            3.0
        } else {
            2.0
        }
    }
    /// Parameters of one dense FFN (or one expert).
    pub fn ffn_params(&self, ffn: u64) -> f64 {
        self.ffn_matrices() * (self.hidden * ffn) as f64
    }
    /// FFN parameters of one layer, all experts.
    pub fn layer_ffn_params(&self) -> f64 {
        match &self.experts {
            Some(e) => {
                self.ffn_params(e.ffn) * (e.count + e.shared) as f64
                    + (self.hidden * e.count) as f64
            }
            None => self.ffn_params(self.ffn),
        }
    }
    /// FFN parameters a token goes through in one layer.
    pub fn layer_ffn_active(&self) -> f64 {
        match &self.experts {
            Some(e) => self.ffn_params(e.ffn) * (e.top_k + e.shared) as f64,
            None => self.ffn_params(self.ffn),
        }
    }
    pub fn embedding_params(&self) -> f64 {
        let e = (self.vocab * self.hidden) as f64;
        if self.tied_embeddings {
            e
        } else {
            2.0 * e
        }
    }
    /// All parameters.
    pub fn params(&self) -> f64 {
        self.layers as f64 * (self.attn_params() + self.layer_ffn_params())
            + self.embedding_params()
    }
    /// Parameters a token is multiplied by (excluding the input embedding lookup).
    pub fn active_params(&self) -> f64 {
        self.layers as f64 * (self.attn_params() + self.layer_ffn_active())
            + (self.vocab * self.hidden) as f64
    }
    /// Forward FLOPs per token at context length `s` (attention over `s` keys; halved when causal
    /// blocks are skipped).
    pub fn forward_flops_per_token(&self, s: u64, causal_skip: bool) -> f64 {
        let attn = 4.0 * (s * self.hidden) as f64 * if causal_skip { 0.5 } else { 1.0 };
        2.0 * self.active_params() + self.layers as f64 * attn
    }
}

/// Read and lower a workload file.
pub fn load_workload(name: &str, fs: &dyn Fs) -> Loaded<Workload> {
    match super::read_lowered(name, fs, lower) {
        Ok(r) => super::checked(r.value, r.files, r.diagnostics),
        Err(u) => u.into(),
    }
}

/// Read and check a mapping file.
pub fn load_mapping(name: &str, fs: &dyn Fs) -> Loaded<MappingSpec> {
    let check = |cx: &mut Ctx, spec: &MappingSpec| {
        if spec.version != Some(FORMAT_VERSION) {
            cx.error(
                "version",
                match spec.version {
                    Some(v) => format!("unsupported format version {v}"),
                    None => "a mapping file needs `version: 1`".into(),
                },
                Some(format!("this tessera reads version {FORMAT_VERSION}")),
            );
        }
        cx.declare_sources(&spec.sources);
        cx.enter_part(cx.file(), Path::root(), spec.source.as_ref());
        if spec.source.is_none() {
            cx.warn(
                "",
                "the mapping names no `source`",
                Some("add `source: \"key\"` and `sources: { \"key\": \"paper, table\" }`, or `source: \"assumed\"`".into()),
            );
        }
        check_mapping(cx, spec);
        cx.leave();
        Some(spec.clone())
    };
    match super::read_lowered(name, fs, check) {
        Ok(r) => super::checked(r.value, r.files, r.diagnostics),
        Err(u) => u.into(),
    }
}

fn check_mapping(cx: &mut Ctx, m: &MappingSpec) {
    for (f, v) in [
        ("dp", m.dp),
        ("tp", m.tp),
        ("pp", m.pp),
        ("ep", m.ep),
        ("cp", m.cp),
        ("micro_batch", m.micro_batch),
        ("interleave", m.interleave),
    ] {
        if let Some(v) = v {
            cx.count(f, v);
        }
    }
    if let Some(o) = &m.order {
        use crate::spec::mapping::Dim;
        let all = [Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp];
        if o.len() != 4 || !all.iter().all(|d| o.contains(d)) {
            cx.error(
                "order",
                format!("`order` must name each of Tp, Cp, Dp, Pp once, found {o:?}"),
                Some(
                    "innermost first, e.g. `order: [Tp, Cp, Dp, Pp]` (Megatron-LM's layout)".into(),
                ),
            );
        }
    }
    if let Some(z) = m.zero {
        if z > 3 {
            cx.error(
                "zero",
                format!("ZeRO stage {z} does not exist"),
                Some("stages are 0 (none), 1 (optimizer state), 2 (+ gradients), 3 (+ weights, = FSDP)".into()),
            );
        }
    }
}

fn precision(cx: &mut Ctx, field: &str, s: &str) -> Precision {
    match Precision::parse(s) {
        Some(p) => p,
        None => {
            let names: Vec<&str> = Precision::names().collect();
            let hint = match crate::diag::did_you_mean(s, names.iter().copied()) {
                Some(x) => format!("did you mean `{x}`? precisions: {}", names.join(", ")),
                None => format!("precisions: {}", names.join(", ")),
            };
            cx.error(field, format!("unknown precision `{s}`"), Some(hint));
            Precision::Bf16
        }
    }
}

fn lower(cx: &mut Ctx, s: &WorkloadSpec) -> Option<Workload> {
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
                flash_attention: i.flash_attention,
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
        mapping: s.mapping.clone(),
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
    if let (Some(h), Some(a)) = (hidden, heads) {
        if h % a != 0 {
            cx.error(
                "heads",
                format!("hidden size {h} is not divisible by {a} heads"),
                Some("head dimension = hidden / heads must be a whole number".into()),
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
        cx.leave();
        Some(Experts {
            count: count?,
            top_k: top_k?,
            ffn: f?,
            shared: e.shared,
        })
    });
    Some(Transformer {
        layers: layers?,
        hidden: hidden?,
        heads: heads?,
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

/// ResNet v1.5 layer list: stem, four stages of blocks, classifier.
pub fn resnet(depth: u64, image: u64, classes: u64) -> Option<Vec<ConvLayer>> {
    let (blocks, bottleneck): ([u64; 4], bool) = match depth {
        18 => ([2, 2, 2, 2], false),
        34 => ([3, 4, 6, 3], false),
        50 => ([3, 4, 6, 3], true),
        101 => ([3, 4, 23, 3], true),
        152 => ([3, 8, 36, 3], true),
        _ => return None,
    };
    let mut layers = Vec::new();
    let mut side = image.div_ceil(2);
    layers.push(ConvLayer {
        cin: 3,
        cout: 64,
        kernel: 7,
        out: side,
        inp: image,
    });
    side = side.div_ceil(2); // max pool
    let mut cin = 64;
    for (stage, &n) in blocks.iter().enumerate() {
        let width = 64 << stage;
        let cout = if bottleneck { width * 4 } else { width };
        for b in 0..n {
            let stride = if stage > 0 && b == 0 { 2 } else { 1 };
            let inp = side;
            let out = side.div_ceil(stride);
            if bottleneck {
                layers.push(ConvLayer {
                    cin,
                    cout: width,
                    kernel: 1,
                    out: inp,
                    inp,
                });
                layers.push(ConvLayer {
                    cin: width,
                    cout: width,
                    kernel: 3,
                    out,
                    inp,
                });
                layers.push(ConvLayer {
                    cin: width,
                    cout,
                    kernel: 1,
                    out,
                    inp: out,
                });
            } else {
                layers.push(ConvLayer {
                    cin,
                    cout: width,
                    kernel: 3,
                    out,
                    inp,
                });
                layers.push(ConvLayer {
                    cin: width,
                    cout,
                    kernel: 3,
                    out,
                    inp: out,
                });
            }
            if b == 0 && (stride != 1 || cin != cout) {
                layers.push(ConvLayer {
                    cin,
                    cout,
                    kernel: 1,
                    out,
                    inp,
                });
            }
            cin = cout;
            side = out;
        }
    }
    layers.push(ConvLayer {
        cin,
        cout: classes,
        kernel: 1,
        out: 1,
        inp: 1,
    });
    Some(layers)
}

fn lower_cnn(cx: &mut Ctx, c: &CnnSpec) -> Option<Cnn> {
    cx.enter_field("Cnn", None);
    let image = cx.count("image", c.image);
    let classes = cx.count("classes", c.classes);
    let CnnFamily::ResNet(depth) = c.family;
    let layers = resnet(depth, image.unwrap_or(224), classes.unwrap_or(1000));
    if layers.is_none() {
        cx.error(
            "family",
            format!("ResNet depth {depth} is not one of 18, 34, 50, 101, 152"),
            None,
        );
    }
    cx.leave();
    Some(Cnn {
        layers: layers?,
        image: image?,
        classes: classes?,
        name: format!("ResNet-{depth}"),
    })
}

fn lower_graph(cx: &mut Ctx, g: &GraphSpec) -> Option<Vec<GraphOp>> {
    let mut out = Vec::new();
    let mut ok = true;
    if g.ops.is_empty() {
        cx.error("ops", "the graph has no operators", None);
        return None;
    }
    for (i, op) in g.ops.iter().enumerate() {
        cx.enter_field("ops", None);
        cx.enter(crate::diag::Seg::Index(i), None);
        let prec = |cx: &mut Ctx, p: &Option<String>| {
            p.as_deref()
                .map(|s| precision(cx, "precision", s))
                .unwrap_or(Precision::Bf16)
        };
        let cnt = |c: &Option<u64>| c.unwrap_or(1) as f64;
        let v = match op {
            OpSpec::Matmul {
                m,
                n,
                k,
                precision: p,
                count,
            } => {
                let p = prec(cx, p);
                let b = p.bytes();
                Some(GraphOp::Compute {
                    name: format!("matmul {m}x{n}x{k}"),
                    matrix: true,
                    flops: 2.0 * (*m as f64) * (*n as f64) * (*k as f64),
                    weight_bytes: (*k as f64) * (*n as f64) * b,
                    act_bytes: ((*m as f64) * (*k as f64) + (*m as f64) * (*n as f64)) * b,
                    precision: p,
                    count: cnt(count),
                })
            }
            OpSpec::Conv {
                batch,
                in_channels,
                out_channels,
                out_size,
                kernel,
                precision: p,
                count,
            } => {
                let p = prec(cx, p);
                let l = ConvLayer {
                    cin: *in_channels,
                    cout: *out_channels,
                    kernel: *kernel,
                    out: *out_size,
                    inp: *out_size,
                };
                Some(GraphOp::Compute {
                    name: format!("conv {kernel}x{kernel} {in_channels}->{out_channels}"),
                    matrix: true,
                    flops: l.flops() * *batch as f64,
                    weight_bytes: l.params() * p.bytes(),
                    act_bytes: (l.in_elems() + l.out_elems()) * *batch as f64 * p.bytes(),
                    precision: p,
                    count: cnt(count),
                })
            }
            OpSpec::Elementwise {
                elements,
                flops_per_element,
                precision: p,
                count,
            } => {
                let p = prec(cx, p);
                Some(GraphOp::Compute {
                    name: "elementwise".into(),
                    matrix: false,
                    flops: *elements as f64 * flops_per_element.unwrap_or(1.0),
                    weight_bytes: 0.0,
                    act_bytes: 2.0 * *elements as f64 * p.bytes(),
                    precision: p,
                    count: cnt(count),
                })
            }
            OpSpec::Attention {
                batch,
                seq,
                heads,
                head_dim,
                causal,
                precision: p,
                count,
            } => {
                let p = prec(cx, p);
                let f = 4.0
                    * (*batch * *seq * *seq * *heads * *head_dim) as f64
                    * if *causal { 0.5 } else { 1.0 };
                Some(GraphOp::Compute {
                    name: "attention".into(),
                    matrix: true,
                    flops: f,
                    weight_bytes: 0.0,
                    act_bytes: 4.0 * (*batch * *seq * *heads * *head_dim) as f64 * p.bytes(),
                    precision: p,
                    count: cnt(count),
                })
            }
            OpSpec::Embedding {
                tokens,
                dim,
                precision: p,
                count,
            } => {
                let p = prec(cx, p);
                Some(GraphOp::Compute {
                    name: "embedding".into(),
                    matrix: false,
                    flops: 0.0,
                    weight_bytes: (*tokens * *dim) as f64 * p.bytes(),
                    act_bytes: (*tokens * *dim) as f64 * p.bytes(),
                    precision: p,
                    count: cnt(count),
                })
            }
            OpSpec::Collective {
                kind,
                bytes,
                group,
                count,
            } => {
                let b = cx.non_negative("bytes", bytes, D::Bytes);
                let g = cx.count("group", *group);
                match (b, g) {
                    (Some(b), Some(g)) => Some(GraphOp::Collective {
                        kind: *kind,
                        bytes: b,
                        group: g,
                        count: cnt(count),
                    }),
                    _ => None,
                }
            }
        };
        cx.leave();
        cx.leave();
        match v {
            Some(v) => out.push(v),
            None => ok = false,
        }
    }
    ok.then_some(out)
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
    Some(Training {
        seq: seq?,
        global_batch: gb?,
        compute,
        weights,
        gradients,
        optimizer_bytes: p.optimizer_bytes,
        activations,
        target,
        lora,
        flash_attention: t.flash_attention,
        dataset_samples: t.dataset_samples,
    })
}
