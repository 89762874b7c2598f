//! The validated workload's types: the model (transformer, CNN, operator graph), the task
//! (training, inference with its serving load), with the arithmetic every estimate starts from
//! (parameters, FLOPs per token). A leaf, so that lowering (`lower.rs`, `cnn.rs`, `graph.rs`)
//! builds them without importing `workload/mod.rs`, which re-exports them beside the loaders.

use crate::model::mapping::MappingPlan;
use crate::model::precision::Precision;
use crate::vocab::CollectiveKind;
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

impl Workload {
    /// This workload on a deployment of `devices` devices, where its training batch scales
    /// with the deployment and grows there (`Training::batch_on`); `None`: it runs as stated.
    pub fn scaled_to(&self, devices: u64) -> Option<Workload> {
        let Task::Training(tr) = &self.task else {
            return None;
        };
        let gb = tr.batch_on(devices);
        if gb == tr.global_batch {
            return None;
        }
        let mut w = self.clone();
        if let Task::Training(t) = &mut w.task {
            t.scaled_from = Some(t.scaled_from.unwrap_or(t.global_batch));
            t.global_batch = gb;
        }
        Some(w)
    }
}

#[derive(Debug, Clone, Serialize)]
pub enum Model {
    Transformer(Transformer),
    Cnn(Cnn),
    Graph(Graph),
}

/// An operator graph as validated: its operators in order and, on a device with a mesh of cores,
/// the side of the square block of cores it was compiled for (`None`: each product on the widest
/// square that divides it).
#[derive(Debug, Clone, Serialize)]
pub struct Graph {
    pub ops: Vec<GraphOp>,
    pub grid: Option<f64>,
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
    /// An all-reduce of `elements` values a core along each row of the graph's block of cores
    /// (a device with a mesh of cores only), at `precision`.
    MeshReduce {
        elements: f64,
        precision: Precision,
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
    /// How the global batch grows with the deployment (`None`: fixed).
    pub batch_scaling: Option<BatchScaling>,
    /// The batch the workload states, where [`Workload::scaled_to`] changed `global_batch`.
    pub scaled_from: Option<u64>,
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
    /// The share of token positions the LM head and loss run on (1: every position; masked
    /// language modelling: the masked ones).
    pub predicted: f64,
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

/// A global batch that grows with the deployment: `per_device` samples per device, between the
/// stated batch and `max`.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct BatchScaling {
    pub per_device: u64,
    pub max: u64,
}

impl Training {
    /// The global batch on `devices` devices: the stated one where it is fixed, else
    /// `per_device` × devices between the stated batch and the maximum.
    pub fn batch_on(&self, devices: u64) -> u64 {
        match self.batch_scaling {
            Some(b) => devices
                .saturating_mul(b.per_device)
                .min(b.max)
                .max(self.global_batch),
            None => self.global_batch,
        }
    }

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
