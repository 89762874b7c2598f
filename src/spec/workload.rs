//! File-shaped types of workload files: the model (transformer, CNN or operator graph), the task
//! (training or inference) and, optionally, the mapping the source published.

use super::format::Q;
use super::mapping::MappingSpec;
pub use crate::vocab::CollectiveKind;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename = "Workload")]
pub struct WorkloadSpec {
    pub version: u32,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    #[serde(default)]
    pub source: Option<String>,
    pub model: ModelSpec,
    pub task: TaskSpec,
    /// The mapping the source used; `--mapping` overrides it.
    #[serde(default)]
    pub mapping: Option<MappingSpec>,
}

#[derive(Debug, Clone, Deserialize)]
pub enum ModelSpec {
    Transformer(TransformerSpec),
    Cnn(CnnSpec),
    Graph(GraphSpec),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransformerSpec {
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    /// Key/value heads (grouped-query attention); defaults to `heads`.
    #[serde(default)]
    pub kv_heads: Option<u64>,
    /// Width of one attention head; defaults to `hidden / heads`. Models such as Qwen3 and
    /// GPT-OSS set it apart (Qwen3-30B-A3B: hidden 2048, 32 heads of 128), so the query and
    /// output projections are `hidden × heads·head_dim`, not square.
    #[serde(default)]
    pub head_dim: Option<u64>,
    /// Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values pass through
    /// low-rank latents, and the KV cache holds the key/value latent and one shared rotary key
    /// per token instead of every head's keys and values. `head_dim` is then the heads'
    /// non-rotary query/key width.
    #[serde(default)]
    pub mla: Option<MlaSpec>,
    /// FFN inner size; defaults to 4 × hidden.
    #[serde(default)]
    pub ffn: Option<u64>,
    /// SwiGLU-style gated FFN (three matrices instead of two).
    #[serde(default)]
    pub gated_ffn: bool,
    pub vocab: u64,
    #[serde(default)]
    pub experts: Option<Box<ExpertsSpec>>,
    /// Input and output embeddings share one matrix.
    #[serde(default)]
    pub tied_embeddings: bool,
    /// Decoder (causal) attention; `false` for bidirectional encoders such as BERT. Fused
    /// attention skips the masked half of the score matrix only when causal.
    #[serde(default = "yes")]
    pub causal: bool,
}

fn yes() -> bool {
    true
}

/// Multi-head latent attention's dimensions, as DeepSeek's configs name them (`q_lora_rank`,
/// `kv_lora_rank`, `qk_rope_head_dim`, `v_head_dim`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlaSpec {
    /// Width of the query latent; absent: the queries are projected from the hidden state
    /// directly (DeepSeek-V2-Lite).
    #[serde(default)]
    pub q_rank: Option<u64>,
    /// Width of the key/value latent (what the KV cache keeps per token, with the rotary key).
    pub kv_rank: u64,
    /// Width of the rotary part of each query and of the one rotary key all heads share.
    pub rope_dim: u64,
    /// Width of one head's value; defaults to `head_dim`.
    #[serde(default)]
    pub v_head_dim: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpertsSpec {
    pub count: u64,
    pub top_k: u64,
    /// FFN inner size of one expert; defaults to the model's `ffn`.
    #[serde(default)]
    pub ffn: Option<u64>,
    /// Experts every token goes through besides the routed ones.
    #[serde(default)]
    pub shared: u64,
    /// The first `dense_layers` layers have a dense FFN of the model's `ffn` instead of experts
    /// (DeepSeek-V3: 3 of 61). Default 0.
    #[serde(default)]
    pub dense_layers: u64,
    /// After those, every `every`-th layer has experts and the others a dense FFN (Llama 4
    /// Maverick interleaves: 2). Default 1 (all of them).
    #[serde(default)]
    pub every: Option<u64>,
    /// Training with expert parallelism: the routed tokens the busiest expert-parallel rank
    /// receives over the mean per rank (router imbalance). Default 1: balanced, as benchmark
    /// recipes force it.
    #[serde(default)]
    pub load_imbalance: Option<f64>,
    /// Training: tokens dropped at a fixed capacity, dispatched by dense einsums (GShard, Switch
    /// Transformer; MaxText with `sparse_matmul: False` and `capacity_factor` > 0). Each expert
    /// has C = capacity_factor × tokens × top_k / experts slots per sequence, filled or padded.
    /// Default: dropless (grouped GEMMs over the routed tokens).
    #[serde(default)]
    pub capacity_factor: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CnnSpec {
    pub family: CnnFamily,
    /// Input image side in pixels.
    pub image: u64,
    pub classes: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub enum CnnFamily {
    /// ResNet v1.5 with bottleneck blocks (depth 50, 101, 152) or basic blocks (18, 34).
    ResNet(u64),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphSpec {
    pub ops: Vec<OpSpec>,
    /// On a device with a mesh of cores: the side P of the square of cores the graph's kernels
    /// were compiled for (WaferLLM's `P`: every operator runs on a P × P block, the rest of the
    /// mesh idle). Default: each product on the widest square whose side divides it.
    #[serde(default)]
    pub grid: Option<u64>,
}

/// One operator of a plain operator graph. `count` repeats it.
#[derive(Debug, Clone, Deserialize)]
pub enum OpSpec {
    Matmul {
        m: u64,
        n: u64,
        k: u64,
        #[serde(default)]
        precision: Option<String>,
        #[serde(default)]
        count: Option<u64>,
    },
    Conv {
        batch: u64,
        in_channels: u64,
        out_channels: u64,
        /// Output height and width.
        out_size: u64,
        kernel: u64,
        #[serde(default)]
        precision: Option<String>,
        #[serde(default)]
        count: Option<u64>,
    },
    Elementwise {
        elements: u64,
        #[serde(default)]
        flops_per_element: Option<f64>,
        #[serde(default)]
        precision: Option<String>,
        /// Bytes read and written per element ("12 B" for `c[i] = a[i] + b[i]` on 4-byte
        /// integers); default one read and one write at the precision.
        #[serde(default)]
        bytes_per_element: Option<Q>,
        #[serde(default)]
        count: Option<u64>,
    },
    Attention {
        batch: u64,
        seq: u64,
        heads: u64,
        head_dim: u64,
        #[serde(default)]
        causal: bool,
        #[serde(default)]
        precision: Option<String>,
        #[serde(default)]
        count: Option<u64>,
    },
    Embedding {
        tokens: u64,
        dim: u64,
        #[serde(default)]
        precision: Option<String>,
        #[serde(default)]
        count: Option<u64>,
    },
    Collective {
        kind: CollectiveKind,
        bytes: Q,
        /// Devices taking part.
        group: u64,
        #[serde(default)]
        count: Option<u64>,
    },
    /// An all-reduce of `elements` values a core along each row of the block of cores the graph
    /// runs on, streamed as a chain (a norm's sum of squares, a softmax's max or sum: one value),
    /// on a device with a mesh of cores.
    MeshAllReduce {
        elements: u64,
        #[serde(default)]
        precision: Option<String>,
        #[serde(default)]
        count: Option<u64>,
    },
    /// `bytes` per device moved between the device and the host's memory over the system's
    /// host link (its `weight_store`): the CPU-to-DIMM and DIMM-to-CPU copies a processing-in-
    /// memory run needs around its kernel.
    HostTransfer {
        bytes: Q,
        #[serde(default)]
        count: Option<u64>,
    },
}

#[derive(Debug, Clone, Deserialize)]
pub enum TaskSpec {
    Training(TrainingSpec),
    Inference(InferenceSpec),
    /// Run an operator graph `steps` times (or once per step without a target).
    Run(RunSpec),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingSpec {
    /// Tokens per sample (transformers); ignored for CNNs.
    #[serde(default)]
    pub seq_len: Option<u64>,
    /// Samples (sequences or images) per optimizer step.
    pub global_batch: u64,
    /// Whether the global batch grows with the deployment (absent: fixed, as the published run
    /// states it): a comparison that sizes a system to a budget gives it this many samples per
    /// device, never fewer than `global_batch` nor more than `max`.
    #[serde(default)]
    pub batch_scaling: Option<BatchScalingSpec>,
    #[serde(default)]
    pub precision: PrecisionSpec,
    /// How much to train: tokens, samples, epochs or steps.
    #[serde(default)]
    pub target: Option<TargetSpec>,
    #[serde(default)]
    pub lora: Option<LoraSpec>,
    /// Fused attention that skips masked blocks and keeps no score matrix (FlashAttention).
    #[serde(default)]
    pub flash_attention: bool,
    /// Whether the run applies dropout, keeping two 1-byte masks per token and layer for the
    /// backward pass. Default `true`: Megatron-LM's GPT recipe (hidden and attention dropout 0.1,
    /// whose masks Korthikanti et al. 2022 §4.1 count); Llama-style recipes train without.
    #[serde(default)]
    pub dropout: Option<bool>,
    /// The share of token positions the language-model head and its loss run on, in (0, 1].
    /// Default 1: a causal LM predicts every next token. Masked language modelling predicts only
    /// the masked positions, and its implementations gather them before the head (BERT:
    /// `"15 % @source"`).
    #[serde(default)]
    pub predicted: Option<Q>,
    /// Images in the data set, for `Epochs` targets.
    #[serde(default)]
    pub dataset_samples: Option<u64>,
    /// A precision schedule: phases from the start of the run, each a share of its optimizer
    /// steps at a compute precision (and scaling recipe) of its own; the steps they leave run at
    /// `precision` (e.g. NVFP4 for the first 90 %, then the run's FP8).
    #[serde(default)]
    pub precision_schedule: Vec<PrecisionPhaseSpec>,
}

/// One phase of a precision schedule.
/// A global batch that scales with the deployment.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchScalingSpec {
    /// Samples per device (e.g. MLPerf's per-GPU micro-batch).
    pub per_device: u64,
    /// The largest global batch the recipe is known to train at (samples), with its source.
    pub max: u64,
    /// The citation (a key of `sources`) for the two figures.
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrecisionPhaseSpec {
    /// The share of the run's optimizer steps, in (0, 1].
    pub share: f64,
    /// Format of the matrix multiplications in this phase.
    pub compute: String,
    /// The scaling recipe of this phase's 8-bit-or-narrower GEMMs (default `Delayed`).
    #[serde(default)]
    pub scaling: Option<crate::vocab::Scaling>,
}

#[derive(Debug, Clone, Deserialize)]
pub enum TargetSpec {
    Tokens(f64),
    Samples(f64),
    Epochs(f64),
    Steps(f64),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoraSpec {
    pub rank: u64,
    /// Projections adapted per layer (4 = q, k, v, o).
    #[serde(default = "four")]
    pub adapted_per_layer: u64,
}

fn four() -> u64 {
    4
}

/// Number formats per part of the computation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrecisionSpec {
    /// Format of the matrix multiplications (`bf16`, `fp8`, `fp4`, `int8` …).
    #[serde(default = "bf16")]
    pub compute: String,
    /// Format weights are stored in.
    #[serde(default = "bf16")]
    pub weights: String,
    /// Format of gradients.
    #[serde(default = "bf16")]
    pub gradients: String,
    /// Bytes of optimizer state per parameter (Adam with fp32 master weights: 12).
    #[serde(default = "twelve")]
    pub optimizer_bytes: f64,
    /// Format of activations kept for the backward pass.
    #[serde(default = "bf16")]
    pub activations: String,
    /// How the 8-bit-or-narrower GEMMs' operands are scaled (`Delayed`, `Current`, `Mxfp8`,
    /// `Nvfp4`; `vocab::Scaling`): the quantization work beside the GEMMs. Default `Delayed`.
    #[serde(default)]
    pub scaling: Option<crate::vocab::Scaling>,
}

impl Default for PrecisionSpec {
    fn default() -> Self {
        PrecisionSpec {
            compute: bf16(),
            weights: bf16(),
            gradients: bf16(),
            optimizer_bytes: 12.0,
            activations: bf16(),
            scaling: None,
        }
    }
}

fn bf16() -> String {
    "bf16".into()
}
fn twelve() -> f64 {
    12.0
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InferenceSpec {
    /// Prompt tokens per request.
    pub prompt: u64,
    /// Generated tokens per request.
    pub output: u64,
    /// Requests served together (concurrent users per model instance).
    pub batch: u64,
    #[serde(default = "bf16")]
    pub weights: String,
    #[serde(default = "bf16")]
    pub compute: String,
    #[serde(default = "bf16")]
    pub kv_cache: String,
    /// Activations passed between layers and stages (NorthPole's A8: `int8`).
    #[serde(default = "bf16")]
    pub activations: String,
    #[serde(default)]
    pub flash_attention: bool,
    /// Speculative decoding: a draft proposes tokens that the model verifies in one pass.
    #[serde(default)]
    pub speculative: Option<SpeculativeSpec>,
}

/// Speculative decoding (Leviathan et al., ICML 2023): each round a draft proposes `tokens` tokens
/// per request, the model verifies them (and the one after) in one pass, and keeps the drafted
/// tokens up to the first it rejects.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeculativeSpec {
    /// Tokens the draft proposes per request and round (γ).
    pub tokens: u64,
    /// Probability that the model accepts a drafted token, each independently (α), e.g.
    /// `"0.85 @source"`.
    pub acceptance: Q,
    /// Layers of the draft, each of the model's own shape, run once per drafted token with the
    /// model's output head: 1 for an EAGLE head or DeepSeek-V3's multi-token-prediction module,
    /// 0 for heads alone (Medusa).
    #[serde(default)]
    pub draft_layers: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    #[serde(default)]
    pub steps: Option<f64>,
    /// Samples each step processes, for throughput.
    #[serde(default)]
    pub samples_per_step: Option<f64>,
}
