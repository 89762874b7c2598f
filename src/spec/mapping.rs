//! File-shaped type of a parallel mapping: how a workload is split over devices.

pub use crate::vocab::{Dim, LayerPart};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, rename = "Mapping")]
pub struct MappingSpec {
    #[serde(default)]
    pub version: Option<u32>,
    /// Data-parallel degree; by default the devices left after the other dimensions.
    #[serde(default)]
    pub dp: Option<u64>,
    #[serde(default)]
    pub tp: Option<u64>,
    #[serde(default)]
    pub pp: Option<u64>,
    /// Expert parallelism (inside the data-parallel dimension, as in Megatron-LM).
    #[serde(default)]
    pub ep: Option<u64>,
    /// Expert tensor parallelism: the tensor-parallel width of the routed experts' MLPs, apart
    /// from the attention's `tp` (Megatron-Core `expert_tensor_parallel_size`; MoE parallel
    /// folding, Liu et al., arXiv 2504.14960). ep × etp must divide tp × cp × dp: the expert
    /// layers fold their ep × etp ranks over the stage's tp × cp × dp ranks. Default `tp`.
    #[serde(default)]
    pub etp: Option<u64>,
    /// Context parallelism: the sequence split across devices.
    #[serde(default)]
    pub cp: Option<u64>,
    /// Megatron sequence parallelism alongside tensor parallelism.
    #[serde(default)]
    pub sp: Option<bool>,
    /// ZeRO stage (0-3); FSDP is stage 3.
    #[serde(default)]
    pub zero: Option<u8>,
    /// Hybrid sharding: ZeRO shards the model state over groups of `shard` data-parallel ranks
    /// (the innermost of dp × cp) and replicates it over the (dp × cp) / `shard` groups (PyTorch
    /// FSDP's HYBRID_SHARD, torchtitan's dp_shard × dp_replicate, MaxText's ici_fsdp × ici_data,
    /// Megatron-Core's `num_distributed_optimizer_instances`). Default: all of dp × cp.
    #[serde(default)]
    pub shard: Option<u64>,
    #[serde(default)]
    pub micro_batch: Option<u64>,
    /// Virtual pipeline stages per device (interleaved 1F1B).
    #[serde(default)]
    pub interleave: Option<u64>,
    #[serde(default)]
    pub recompute: Option<RecomputeSpec>,
    /// Training: how many transformer layers of each model chunk (each pipeline stage, or each
    /// virtual stage under `interleave`) run the `recompute` policy; the chunk's other layers
    /// keep every activation (Megatron-Core's `recompute_method: block` with
    /// `recompute_num_layers`). Default: every layer.
    #[serde(default)]
    pub recompute_layers: Option<u64>,
    /// Overlap the data-parallel gradient reduction with the backward pass.
    #[serde(default)]
    pub overlap_grad_reduce: Option<bool>,
    /// Training with pipeline stages: the input embedding counts as one layer of the pipeline
    /// split, so the first stage holds one transformer layer fewer (Megatron-Core
    /// `account_for_embedding_in_pipeline_split`). Default false.
    #[serde(default)]
    pub embedding_in_pipeline_split: Option<bool>,
    /// Training with pipeline stages: the output head and its loss count as one layer of the
    /// split, so the last stage holds one transformer layer fewer (Megatron-Core
    /// `account_for_loss_in_pipeline_split`). Default false.
    #[serde(default)]
    pub loss_in_pipeline_split: Option<bool>,
    #[serde(default)]
    pub source: Option<String>,
    /// Communication the framework overlaps with compute beyond the gradient reduction
    /// (NeMo / Megatron-Core `tp_comm_overlap`, `overlap_p2p_comm`, `overlap_param_gather`).
    #[serde(default)]
    pub overlap: Vec<OverlapKind>,
    /// How the parallel dimensions are laid over the devices, innermost (fastest-varying, so on
    /// the fastest links) first. Default `[Tp, Cp, Dp, Pp]`, Megatron-LM's order: tensor
    /// parallelism inside the scale-up domain, pipeline stages outermost.
    #[serde(default)]
    pub order: Option<Vec<Dim>>,
    /// Inference: the pipeline stages in order, each a block of consecutive layers on its own
    /// devices (tensor-parallel inside the stage). The embedding table sits on the first stage,
    /// the output head on the last; a last stage of `layers: 0` holds only the head. Replaces
    /// `tp` and `pp`.
    #[serde(default)]
    pub stages: Option<Vec<StageSpec>>,
    /// Inference on a device with a mesh of cores (a wafer): the block of cores each phase runs
    /// a layer on, prefill and decode apart (WaferLLM prefills and decodes on different core
    /// counts). A phase left out keeps the automatic placement (the wafer shared out by weights).
    #[serde(default)]
    pub regions: Option<RegionsSpec>,
    /// Transformer inference, disaggregated serving (DistServe, Splitwise): a separate pool of
    /// `instances` prefill instances of `tp` devices each (one pipeline stage) that only
    /// prefill the prompts and send each prompt's KV cache to a decode instance; the mapping's
    /// own instances then only decode. Absent: the prompts' prefill is interleaved into the
    /// decode rounds.
    #[serde(default)]
    pub prefill_pool: Option<PoolSpec>,
    /// Inference: how the serving stack launches a decoder layer's work (`Separate`, `Fused`,
    /// `Compiled`: see `vocab::Kernels`); by default the device's `efficiency.kernels`.
    #[serde(default)]
    pub kernels: Option<crate::vocab::Kernels>,
    /// Training: the activations of this many transformer layers of each pipeline stage go to
    /// the node's host memory over the device's host link in the forward pass and come back
    /// before their backward (Megatron-Core `cpu_offloading_num_layers` with
    /// `cpu_offloading_activations`). Default 0.
    #[serde(default)]
    pub offload_activation_layers: Option<u64>,
    /// Training: the fraction (0 to 1) of each device's optimizer state kept in the node's host
    /// memory and updated there by the host's CPUs; the gradients go out over the host link and
    /// the updated master weights come back, once per step (Megatron-Core
    /// `optimizer_cpu_offload` with `optimizer_offload_fraction`, its `HybridDeviceOptimizer`;
    /// DeepSpeed ZeRO-Offload). Needs the distributed optimizer (`zero` ≥ 1). Default 0.
    #[serde(default)]
    pub offload_optimizer: Option<f64>,
    /// Training: the weights of every transformer layer of a stage live in the node's host
    /// memory and are copied to the device before the layer's forward and again before its
    /// backward, two layers resident at a time; the updated weights go back once per step
    /// (Calculon's `weight_offload`, DeepSpeed ZeRO-Infinity's parameter offload). Not with ZeRO 3.
    /// Default false.
    #[serde(default)]
    pub offload_weights: Option<bool>,
    /// Expert parallelism: how tokens reach their experts' devices (`AllToAll`, `Hierarchical`:
    /// see `vocab::Dispatch`). Default `AllToAll`.
    #[serde(default)]
    pub expert_dispatch: Option<crate::vocab::Dispatch>,
    /// Tensor-parallel overlap (`overlap: [TensorParallel]`): how Transformer Engine's
    /// userbuffers overlap the row-parallel layers' forward GEMMs with their reduce-scatters
    /// (`Pipeline`, `RingExchange`: see `vocab::TpOverlapMethod`). Default: as NeMo's userbuffer
    /// presets choose, the ring exchange for GEMMs at 8 bits or fewer, else the pipeline.
    #[serde(default)]
    pub tp_overlap_method: Option<crate::vocab::TpOverlapMethod>,
    /// Citations by key (in a mapping file of its own; inline mappings use the workload's).
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// A prefill pool: `instances` instances of `tp` tensor-parallel devices.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename = "PrefillPool")]
pub struct PoolSpec {
    pub instances: u64,
    #[serde(default = "one")]
    pub tp: u64,
}

/// The core regions of the two phases of serving on a wafer.
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename = "Regions")]
pub struct RegionsSpec {
    #[serde(default)]
    pub prefill: Option<RegionSpec>,
    #[serde(default)]
    pub decode: Option<RegionSpec>,
}

/// A block of `cores: (columns, rows)` cores of the mesh. The layers run one after another on
/// it; as many such blocks as tile the mesh hold consecutive layers, pipelined block to block.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename = "Region")]
pub struct RegionSpec {
    pub cores: (u64, u64),
}

/// One pipeline stage: `layers` consecutive transformer layers on `devices` devices.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, rename = "Stage")]
pub struct StageSpec {
    pub layers: u64,
    #[serde(default = "one")]
    pub devices: u64,
}

fn one() -> u64 {
    1
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum RecomputeSpec {
    None,
    Selective,
    Full,
    /// The backward re-runs these parts of each layer and keeps what the others produce (a JAX
    /// remat policy or a PyTorch checkpoint selection, written as what it re-runs).
    Ops(Vec<LayerPart>),
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum OverlapKind {
    /// Tensor-parallel all-gathers and reduce-scatters pipelined with the GEMMs.
    TensorParallel,
    /// Pipeline sends and receives of the interleaved schedule overlapped with compute.
    PipelineSendRecv,
    /// The data-parallel parameter all-gather after the update overlapped with the next forward.
    ParameterGather,
}
