//! The validated workload: a transformer, CNN or operator graph, trained or served, with the
//! arithmetic every estimate starts from (parameters, FLOPs per token).

mod cnn;
mod graph;
mod lower;

pub use cnn::resnet;

use lower::lower;

use super::precision::Precision;
use super::Ctx;
use crate::diag::Path;
use crate::model::mapping::MappingPlan;
use crate::spec::mapping::MappingSpec;
use crate::spec::workload::*;
use crate::spec::{Fs, Loaded, FORMAT_VERSION};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    pub name: String,
    pub model: Model,
    pub task: Task,
    /// The mapping the source published, if the file gives one.
    #[serde(skip)]
    pub mapping: Option<MappingPlan>,
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
    /// Width of one attention head (`hidden / heads` unless the file sets it apart).
    pub head_dim: u64,
    pub kv_heads: u64,
    /// Multi-head latent attention (`None`: multi-head or grouped-query attention).
    pub mla: Option<Mla>,
    pub ffn: u64,
    pub gated_ffn: bool,
    pub vocab: u64,
    pub experts: Option<Experts>,
    pub tied_embeddings: bool,
    pub causal: bool,
}

/// Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 §2.1; DeepSeek-V3, arXiv
/// 2412.19437 §2.1.1). A token's hidden state is projected down to a query latent (`q_rank`
/// wide) and to a key/value latent (`kv_rank`) plus one rotary key (`rope_dim`) that all heads
/// share; each head's query (`head_dim` + `rope_dim`), key (`head_dim`, plus the shared rotary
/// key) and value (`v_head_dim`) are projected up from the latents. The KV cache keeps only the
/// latent and the rotary key. The down projections are not split by tensor parallelism (every
/// rank computes them; their weights are replicated), the up projections are split by heads.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Mla {
    /// 0: the queries come from the hidden state directly.
    pub q_rank: u64,
    pub kv_rank: u64,
    pub rope_dim: u64,
    pub v_head_dim: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Experts {
    pub count: u64,
    pub top_k: u64,
    pub ffn: u64,
    pub shared: u64,
    /// A dense/MoE layer mix: the first `dense_layers` layers have a dense FFN (the model's
    /// `ffn`), and after them the last of every `every` layers has experts, the others a dense FFN.
    /// `dense_layers: 0, every: 1` is a model whose every layer has experts. See
    /// [`Transformer::moe_layers`].
    pub dense_layers: u64,
    pub every: u64,
    /// Training with expert parallelism: the busiest expert-parallel rank's routed tokens over
    /// the mean per rank (1: balanced). Each MoE layer waits for that rank: its expert GEMMs
    /// and the token exchange scale by it.
    pub load_imbalance: f64,
    /// Training, dropped tokens at a fixed capacity dispatched by dense einsums: every expert
    /// computes capacity_factor × (tokens × top_k / experts) slots per sequence, filled or padded,
    /// whatever the routing (so no rank is busier than that), and the dispatch and combine are
    /// einsums over the slots. `None`: dropless.
    pub capacity_factor: Option<f64>,
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

/// The shape of a matrix product per device, for its tile and wave quantization
/// (`engine::tiling`): one matrix product per device (M × K by K × N), or `groups` of the same
/// shape launched together (a batched or grouped GEMM: the heads of attention, the experts of a layer).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Gemm {
    /// Rows of the output (tokens for a layer's forward).
    pub m: f64,
    /// Columns of the output; `None`: a row-blocked fused kernel (`engine::tiling`).
    pub n: Option<f64>,
    /// The inner dimension each output sums over (0 for a row-blocked kernel).
    pub k: f64,
    pub groups: f64,
}

impl Gemm {
    pub fn new(m: f64, n: f64, k: f64) -> Gemm {
        Gemm::grouped(m, n, k, 1.0)
    }
    /// `groups` products of one shape launched together.
    pub fn grouped(m: f64, n: f64, k: f64, groups: f64) -> Gemm {
        Gemm {
            m,
            n: Some(n),
            k,
            groups,
        }
    }
    /// A row-blocked fused kernel over `groups` × `m` rows.
    pub fn rows(m: f64, groups: f64) -> Gemm {
        Gemm {
            m,
            n: None,
            k: 0.0,
            groups,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub enum GraphOp {
    /// FLOPs, weight bytes, activation bytes, precision, count.
    Compute {
        name: String,
        matrix: bool,
        /// The product's shape where it is one (its occupancy is then the device's for it).
        gemm: Option<Gemm>,
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
    /// Bytes per device between the device and the host's memory, over the host link.
    HostTransfer { bytes: f64, count: f64 },
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
    /// How the low-precision GEMMs' operands are scaled (their quantization work).
    pub scaling: crate::vocab::Scaling,
    pub target: Option<Target>,
    pub lora: Option<Lora>,
    pub flash_attention: bool,
    /// The run applies dropout (its masks are kept for the backward pass).
    pub dropout: bool,
    pub dataset_samples: Option<u64>,
    /// Phases of other compute precisions from the start of the run (empty: the whole run at
    /// `compute`); the steps they leave run at `compute` and `scaling`.
    pub precision_schedule: Vec<PrecisionPhase>,
}

/// A share of a training run's optimizer steps at a compute precision of its own.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PrecisionPhase {
    pub share: f64,
    pub compute: Precision,
    pub scaling: crate::vocab::Scaling,
}

impl Training {
    /// The run's phases as (share of the steps, the task at that phase's precision): the
    /// schedule's phases, then the rest at the task's own precision (left out where the schedule
    /// covers every step). Without a schedule, the task alone.
    pub fn phases(&self) -> Vec<(f64, Training)> {
        let mut out: Vec<(f64, Training)> = self
            .precision_schedule
            .iter()
            .map(|ph| {
                (
                    ph.share,
                    Training {
                        compute: ph.compute,
                        scaling: ph.scaling,
                        precision_schedule: Vec::new(),
                        ..self.clone()
                    },
                )
            })
            .collect();
        let rest = 1.0 - self.precision_schedule.iter().map(|p| p.share).sum::<f64>();
        if rest > 1e-12 {
            out.push((
                rest,
                Training {
                    precision_schedule: Vec::new(),
                    ..self.clone()
                },
            ));
        }
        out
    }
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
    /// Activations between layers and pipeline stages.
    pub activations: Precision,
    pub flash_attention: bool,
    /// Requests in flight and the latency target (`--concurrency`, `--slo`, a case's `slo`).
    pub load: crate::model::serving::Load,
    /// Speculative decoding, if the serving stack uses it.
    pub speculative: Option<Speculative>,
}

/// Speculative decoding as validated: `tokens` drafted per request and round (γ ≥ 1), each
/// accepted with probability `acceptance` (α in (0, 1]), by a draft of `draft_layers` layers of
/// the model's shape and its output head.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Speculative {
    pub tokens: u64,
    pub acceptance: f64,
    pub draft_layers: u64,
}

impl Speculative {
    /// Tokens a request gains per round: the accepted prefix of the γ drafted tokens and the
    /// model's own next token, (1 − α^(γ+1)) / (1 − α) on average (Leviathan et al. 2023, eq. 1),
    /// γ + 1 when every drafted token is accepted.
    pub fn tokens_per_round(&self) -> f64 {
        let (a, g) = (self.acceptance, self.tokens as f64);
        if a >= 1.0 {
            g + 1.0
        } else {
            (1.0 - a.powf(g + 1.0)) / (1.0 - a)
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub steps: Option<f64>,
    pub samples_per_step: f64,
}

impl Transformer {
    pub fn head_dim(&self) -> u64 {
        self.head_dim
    }
    /// Width of one head's query and key in the attention core: `head_dim`, plus the rotary
    /// part with latent attention.
    pub fn qk_head_dim(&self) -> u64 {
        self.head_dim + self.mla.map_or(0, |a| a.rope_dim)
    }
    /// Width of one head's value (and of its share of the attention's context).
    pub fn v_head_dim(&self) -> u64 {
        self.mla.map_or(self.head_dim, |a| a.v_head_dim)
    }
    /// Width of the queries: heads × their query/key width; equal to `hidden` unless the model
    /// sets `head_dim` apart or uses latent attention.
    pub fn q_dim(&self) -> u64 {
        self.heads * self.qk_head_dim()
    }
    /// Width of the attention's context (the values' width over all heads), the output
    /// projection's input: `q_dim` but for latent attention with a value width of its own.
    pub fn v_dim(&self) -> u64 {
        self.heads * self.v_head_dim()
    }
    /// The mean of the key and value widths per token in the attention core (keys and values
    /// together are twice it): kv heads × head dimension; with latent attention, every head's
    /// key and value as projected up from the latent.
    pub fn kv_dim(&self) -> f64 {
        match self.mla {
            Some(_) => (self.q_dim() + self.v_dim()) as f64 / 2.0,
            None => (self.kv_heads * self.head_dim) as f64,
        }
    }
    /// Parameters of the projections that produce a layer's queries, keys and values, as
    /// (split over the tensor-parallel ranks by heads, replicated on every rank): `hidden ×
    /// (q_dim + 2 kv_dim)` and none; with latent attention the up projections from the
    /// latents, and the down projections to them (with the shared rotary key).
    pub fn qkv_params(&self) -> (f64, f64) {
        let h = self.hidden as f64;
        match self.mla {
            Some(a) => {
                let q = self.q_dim() as f64;
                let kv_up = (a.kv_rank * self.heads * (self.head_dim + a.v_head_dim)) as f64;
                let kv_down = h * (a.kv_rank + a.rope_dim) as f64;
                if a.q_rank > 0 {
                    let r = a.q_rank as f64;
                    (r * q + kv_up, h * r + kv_down)
                } else {
                    (h * q + kv_up, kv_down)
                }
            }
            None => (h * (self.q_dim() as f64 + 2.0 * self.kv_dim()), 0.0),
        }
    }
    /// Width of the latents a token's down projections write (query latent, key/value latent
    /// and rotary key): 0 without latent attention.
    pub fn latent_dim(&self) -> f64 {
        self.mla
            .map_or(0.0, |a| (a.q_rank + a.kv_rank + a.rope_dim) as f64)
    }
    /// Elements one token keeps in the KV cache of one layer: its key and value (2 × kv heads ×
    /// head dimension), or with latent attention its key/value latent and rotary key.
    pub fn kv_cache_dim(&self) -> f64 {
        match self.mla {
            Some(a) => (a.kv_rank + a.rope_dim) as f64,
            None => 2.0 * self.kv_dim(),
        }
    }
    /// Whether tensor parallelism splits the KV cache (by its kv heads). The latent cache is
    /// shared by every head, so each tensor-parallel rank keeps all of it.
    pub fn kv_cache_split(&self) -> bool {
        self.mla.is_none()
    }
    /// Decode-time attention over one cached position, per head, as (score width, context
    /// width) in multiply-accumulates: the head's query/key and value widths; with latent
    /// attention, the absorbed form that works on the latent directly (DeepSeek-V2 §2.1.2: the
    /// key up projection folded into the query, the value up projection into the output), so
    /// (`kv_rank` + `rope_dim`, `kv_rank`).
    pub fn decode_core_dims(&self) -> (f64, f64) {
        match self.mla {
            Some(a) => ((a.kv_rank + a.rope_dim) as f64, a.kv_rank as f64),
            None => (self.qk_head_dim() as f64, self.v_head_dim() as f64),
        }
    }
    /// Q, K, V and output projection parameters of one layer.
    pub fn attn_params(&self) -> f64 {
        let (split, shared) = self.qkv_params();
        split + shared + (self.v_dim() * self.hidden) as f64
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
    /// Layers with experts: after the first `dense_layers`, the last of every `every` layers
    /// (all layers of a plain MoE model; none without experts). DeepSeek-V3 (61 layers, 3 dense):
    /// 58; Llama 4 Maverick (48 layers, every 2): 24.
    pub fn moe_layers(&self) -> u64 {
        match &self.experts {
            Some(e) => self.layers.saturating_sub(e.dense_layers) / e.every.max(1),
            None => 0,
        }
    }
    /// The share of layers with experts: 1 for a plain MoE model, 0 for a dense one.
    pub fn moe_fraction(&self) -> f64 {
        self.moe_layers() as f64 / self.layers as f64
    }
    /// Mean over the layers of `moe` (a MoE layer's figure) and `dense` (a dense layer's): exactly
    /// `moe` when every layer has experts.
    pub fn layer_mix(&self, moe: f64, dense: f64) -> f64 {
        let f = self.moe_fraction();
        moe * f + dense * (1.0 - f)
    }
    /// FFN parameters of one layer, all experts (with a dense/MoE mix: the mean over the layers,
    /// so that `layers ×` it is the model's FFN total).
    pub fn layer_ffn_params(&self) -> f64 {
        match &self.experts {
            Some(e) => self.layer_mix(
                self.ffn_params(e.ffn) * (e.count + e.shared) as f64
                    + (self.hidden * e.count) as f64,
                self.ffn_params(self.ffn),
            ),
            None => self.ffn_params(self.ffn),
        }
    }
    /// FFN parameters a token goes through in one layer (the mean over the layers with a mix).
    pub fn layer_ffn_active(&self) -> f64 {
        match &self.experts {
            Some(e) => self.layer_mix(
                self.ffn_params(e.ffn) * (e.top_k + e.shared) as f64,
                self.ffn_params(self.ffn),
            ),
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
        let attn =
            2.0 * (s * (self.q_dim() + self.v_dim())) as f64 * if causal_skip { 0.5 } else { 1.0 };
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
pub fn load_mapping(name: &str, fs: &dyn Fs) -> Loaded<MappingPlan> {
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
        Some(MappingPlan::from(spec))
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
        ("shard", m.shard),
    ] {
        if let Some(v) = v {
            cx.count(f, v);
        }
    }
    match m.etp {
        Some(0) => cx.error(
            "etp",
            "`etp` must be at least 1",
            Some("the routed experts' tensor-parallel width (Megatron-Core `expert_tensor_parallel_size`): 1 keeps each expert whole on its device; leave it out for etp = tp".into()),
        ),
        Some(v) => {
            cx.count("etp", v);
        }
        None => {}
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
    if let Some(stages) = &m.stages {
        check_stages(cx, m, stages);
    }
    if let Some(r) = &m.regions {
        check_regions(cx, m, r);
    }
    if let Some(p) = &m.prefill_pool {
        check_pool(cx, m, p);
    }
    check_split(cx, m);
    if let Some(crate::spec::mapping::RecomputeSpec::Ops(parts)) = &m.recompute {
        if parts.is_empty() {
            cx.error(
                "recompute",
                "`recompute: Ops([])` names no part of the layer to re-run",
                Some("list what the backward re-runs, from Qkv, Attention, OutProj, FfnUp, FfnDown, Elementwise; or write `recompute: None`".into()),
            );
        }
    }
    if let Some(f) = m.offload_optimizer {
        if !(0.0..=1.0).contains(&f) {
            cx.error(
                "offload_optimizer",
                format!("`offload_optimizer` must be a fraction between 0 and 1, found {f}"),
                Some("the share of each device's optimizer state kept in host memory, as Megatron-Core's `optimizer_offload_fraction`: 0 none, 1 all (e.g. `offload_optimizer: 0.5`)".into()),
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

/// Counting the embedding or the loss in the pipeline split balances a uniform split of the
/// layers over `pp` stages: it has nothing to count beside `stages` (which place the embedding on
/// the first stage and the head on the last themselves) or `regions` (one wafer, no pipeline of
/// devices).
fn check_split(cx: &mut Ctx, m: &MappingSpec) {
    for (f, on) in [
        ("embedding_in_pipeline_split", m.embedding_in_pipeline_split),
        ("loss_in_pipeline_split", m.loss_in_pipeline_split),
    ] {
        if on != Some(true) {
            continue;
        }
        let beside = if m.stages.is_some() {
            Some((
                "stages",
                "a pipeline written stage by stage places the embedding on its first stage and the head on its last itself (a last stage of `layers: 0` holds only the head)",
            ))
        } else if m.regions.is_some() {
            Some((
                "regions",
                "`regions` places the whole model on one wafer's cores: there is no pipeline split",
            ))
        } else {
            None
        };
        if let Some((other, why)) = beside {
            cx.error(
                f,
                format!("`{f}` cannot be given beside `{other}`"),
                Some(format!(
                    "{why}; leave `{f}` out, or give `pp` instead of `{other}`"
                )),
            );
        }
    }
}

/// Core regions of a wafer's phases: each block at least one core along both sides, and the
/// model on one wafer (no `tp`, `pp` or `stages` beside them). Whether a block fits the mesh and
/// holds its layers is a property of the system: the lowering reports it as the design's
/// infeasibility (`Reason::Region`).
fn check_regions(cx: &mut Ctx, m: &MappingSpec, r: &crate::spec::mapping::RegionsSpec) {
    for (f, bad) in [
        ("tp", m.tp.is_some_and(|v| v > 1)),
        ("pp", m.pp.is_some_and(|v| v > 1)),
        ("stages", m.stages.is_some()),
    ] {
        if bad {
            cx.error(
                f,
                format!("`{f}` cannot be given beside `regions`"),
                Some("`regions` places the whole model on one wafer's cores; give `dp` for more wafers".into()),
            );
        }
    }
    cx.enter_field("regions", None);
    if r.prefill.is_none() && r.decode.is_none() {
        cx.error(
            "",
            "`regions` names neither phase",
            Some("write `regions: (prefill: (cores: (660, 660)), decode: (cores: (360, 360)))`, or leave `regions` out for the automatic placement".into()),
        );
    }
    for (phase, reg) in [("prefill", r.prefill), ("decode", r.decode)] {
        let Some(reg) = reg else { continue };
        cx.enter_field(phase, None);
        let (a, b) = reg.cores;
        if a == 0 || b == 0 {
            cx.error(
                "cores",
                format!("the {phase} region has {a} × {b} cores"),
                Some("`cores: (columns, rows)`, each at least 1".into()),
            );
        }
        cx.leave();
    }
    cx.leave();
}

/// A prefill pool (disaggregated serving): at least one instance of at least one device, apart
/// from a wafer's core regions (which split one wafer between the phases instead). That the
/// workload is transformer inference and the system has the pool's devices beside the decode
/// instances' is a property of the request: the lowering and the mapping's resolution report it
/// as the design's infeasibility.
fn check_pool(cx: &mut Ctx, m: &MappingSpec, p: &crate::spec::mapping::PoolSpec) {
    if m.regions.is_some() {
        cx.error(
            "prefill_pool",
            "`prefill_pool` cannot be given beside `regions`",
            Some("`regions` splits one wafer's cores between prefill and decode; a prefill pool puts the prefill on devices of its own: give one of them".into()),
        );
    }
    cx.enter_field("prefill_pool", None);
    if p.instances == 0 {
        cx.error(
            "instances",
            "the prefill pool has no instances",
            Some("`prefill_pool: (instances: N, tp: T)` with N ≥ 1, or leave `prefill_pool` out to interleave the prefill into the decode rounds".into()),
        );
    } else {
        cx.count("instances", p.instances);
    }
    cx.count("tp", p.tp);
    cx.leave();
}

/// A pipeline written stage by stage: at least one stage, devices at least 1, a head-only stage
/// (`layers: 0`) only last, no `tp`/`pp` beside it, and at most
/// [`crate::model::mapping::MAX_STAGE_GROUPS`] runs of differently shaped stages.
fn check_stages(cx: &mut Ctx, m: &MappingSpec, stages: &[crate::spec::mapping::StageSpec]) {
    use crate::model::mapping::{Placement, MAX_STAGE_GROUPS};
    if stages.is_empty() {
        cx.error(
            "stages",
            "`stages` lists no stage",
            Some(
                "write one `(layers: N, devices: D)` per pipeline stage, or leave `stages` out"
                    .into(),
            ),
        );
        return;
    }
    for (f, v) in [("tp", m.tp), ("pp", m.pp)] {
        if v.is_some() {
            cx.error(
                f,
                format!("`{f}` cannot be given beside `stages`"),
                Some("`stages` sets the pipeline depth and each stage's devices".into()),
            );
        }
    }
    cx.enter_field("stages", None);
    let n = stages.len();
    for (i, st) in stages.iter().enumerate() {
        cx.enter(crate::diag::Seg::Index(i), None);
        cx.count("devices", st.devices);
        if st.layers == 0 && i + 1 != n {
            cx.error(
                "layers",
                format!("stage {i} holds no layers but is not the last stage"),
                Some("only the last stage may hold the output head alone (`layers: 0`)".into()),
            );
        }
        cx.leave();
    }
    let runs = Placement::runs(stages.iter().map(|s| (s.layers, s.devices)));
    if runs > MAX_STAGE_GROUPS {
        cx.error(
            "",
            format!("the stages form {runs} runs of differently shaped stages, more than {MAX_STAGE_GROUPS}"),
            Some("give neighbouring stages the same layers and devices, so they form runs".into()),
        );
    }
    cx.leave();
}
