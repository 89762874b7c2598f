//! File-shaped types of architecture files: what an author writes, before names, units and
//! references are resolved. Every struct denies unknown fields so a misspelt field is an error.
//!
//! Reuse: a `device`, `die` or `node` is either written inline (`device: Device(...)`) or taken from
//! another file (`device: Use("parts/b200.ron")`), resolved relative to the file that names it.

use super::format::Q;
pub use crate::vocab::{MemoryKind, MeshTopology, ScaleUpTopology};
use serde::Deserialize;
use std::collections::BTreeMap;

/// A whole system: devices in nodes, joined by a scale-up domain and a scale-out network.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename = "System")]
pub struct SystemSpec {
    pub version: u32,
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Citations by key; quantities name one with `@key`.
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    /// Default source for the counts and figures of this struct that carry no `@key`.
    #[serde(default)]
    pub source: Option<String>,
    pub device: DeviceRef,
    pub node: NodeRef,
    /// Number of nodes in the system.
    pub nodes: u64,
    #[serde(default)]
    pub scale_up: Option<ScaleUpSpec>,
    #[serde(default)]
    pub scale_out: Option<ScaleOutSpec>,
    /// An external store the weights stream from (Cerebras MemoryX).
    #[serde(default)]
    pub weight_store: Option<WeightStoreSpec>,
    #[serde(default)]
    pub facility: Option<FacilitySpec>,
    /// How the vendor's software runs the system (Cerebras clusters: data parallel, the training
    /// state streamed from MemoryX; CS-3 inference: 16-bit weights). `--mapping auto` and the
    /// placement stay inside it unless the run asks for `--execution free`.
    #[serde(default)]
    pub execution: Option<ExecutionSpec>,
    /// What the system costs and emits ([`super::cost::CostSpec`]).
    #[serde(default)]
    pub cost: Option<super::cost::CostSpec>,
    /// Failure rates and restart cost (`spec::reliability`): with them a training estimate
    /// carries its goodput.
    #[serde(default)]
    pub reliability: Option<super::reliability::ReliabilityRef>,
    /// The storage checkpoints cross.
    #[serde(default)]
    pub storage: Option<super::reliability::StorageSpec>,
}

/// A system's execution modes, as its vendor's software runs it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionSpec {
    #[serde(default)]
    pub training: Option<TrainingModeSpec>,
    #[serde(default)]
    pub serving: Option<ServingModeSpec>,
    /// The citation (a key of `sources`) that states the modes.
    #[serde(default)]
    pub source: Option<String>,
}

/// How training runs: the parallel dimensions the software splits a model along (every other
/// stays 1; expert parallelism too) and where the model state lives.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingModeSpec {
    /// e.g. `[Dp]`; absent: every dimension.
    #[serde(default)]
    pub parallel: Option<Vec<crate::vocab::Dim>>,
    /// `Streamed`: the state lives in the weight store and the weights stream through the
    /// devices layer by layer (the store runs the update) even where it would fit on them.
    #[serde(default)]
    pub state: Option<StateMode>,
    /// Models below this many parameters run the other way (Cerebras: "pipeline execution"
    /// below about 1B parameters, every layer resident on the wafer).
    #[serde(default)]
    pub streamed_from_params: Option<f64>,
    /// The software stack the vendor trains with: a `Software` file, relative to this one.
    #[serde(default)]
    pub software: Option<String>,
}

/// Where a training run keeps its model state.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum StateMode {
    /// Wherever it fits best (the evaluators' placement rule).
    Placed,
    /// In the weight store, streamed through the devices.
    Streamed,
}

/// How serving runs: the precision the vendor serves at (weights and compute; every serving
/// workload takes it on this system).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServingModeSpec {
    #[serde(default)]
    pub precision: Option<String>,
    /// The software stack the vendor serves with (`Software` file, relative to this one): its
    /// fitted per-stack costs join every serving run unless the run names another stack.
    #[serde(default)]
    pub software: Option<String>,
}

// Parsed once per file: the size difference between the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Deserialize)]
pub enum DeviceRef {
    Use(String),
    Device(DeviceSpec),
}

// Parsed once per file: the size difference between the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Deserialize)]
pub enum DieRef {
    Use(String),
    Die(DieSpec),
}

// Parsed once per file: the size difference between the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Deserialize)]
pub enum NodeRef {
    Use(String),
    Node(NodeSpec),
}

/// The accelerator package: the unit the parallel mapping places work on (a GPU, a TPU chip, a
/// wafer, a NorthPole card).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename = "Device")]
pub struct DeviceSpec {
    #[serde(default)]
    pub version: Option<u32>,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    #[serde(default)]
    pub source: Option<String>,
    /// Number of compute dies in the package (a B200 has 2).
    #[serde(default = "one")]
    pub dies: u32,
    pub die: DieRef,
    /// Package-attached memory (HBM stacks), totals for the package.
    #[serde(default)]
    pub memory: Vec<MemorySpec>,
    #[serde(default)]
    pub die_to_die: Option<LinkSpec>,
    /// The device's power limit: what its package is rated to draw (a cap above it throttles).
    pub tdp: Q,
    /// What the device's silicon draws running its matrix engines flat out at full clock, where
    /// that is not its `tdp`: the same die sold under another limit (an MI300X is an MI325X's
    /// die at 750 W instead of 1000 W). Energy per FLOP derived from power follows this figure;
    /// above `tdp`, full load throttles the device to its limit. Default: `tdp`.
    #[serde(default)]
    pub full_clock_power: Option<Q>,
    #[serde(default)]
    pub idle_power: Option<Q>,
    /// How clock and voltage fall together when a power cap throttles the device.
    #[serde(default)]
    pub dvfs: Option<DvfsSpec>,
    pub efficiency: EfficiencySpec,
}

/// The device's DVFS line: from full clock at nominal voltage down to its lowest clock at its
/// lowest voltage, both as fractions of nominal, voltage linear in clock between them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DvfsSpec {
    /// Lowest clock a power cap may throttle to, as a fraction of the full clock.
    pub min_clock: Q,
    /// Supply voltage at that clock, as a fraction of the nominal voltage.
    pub min_voltage: Q,
    #[serde(default)]
    pub source: Option<String>,
}

fn one() -> u32 {
    1
}

/// One die: compute engines, on-die SRAM, the on-chip network.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename = "Die")]
pub struct DieSpec {
    #[serde(default)]
    pub version: Option<u32>,
    pub name: String,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub process: Option<Q>,
    #[serde(default)]
    pub area: Option<Q>,
    #[serde(default)]
    pub clock: Option<Q>,
    /// Cores (SMs, PEs, tiles) on the die.
    #[serde(default)]
    pub cores: Option<u64>,
    pub compute: Vec<EngineSpec>,
    /// On-die SRAM levels (per core or shared).
    #[serde(default)]
    pub sram: Vec<MemorySpec>,
    #[serde(default)]
    pub mesh: Option<MeshSpec>,
    /// Dynamic energy per operation, by precision.
    #[serde(default)]
    pub energy_per_flop: BTreeMap<String, Q>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum EngineKind {
    Matrix,
    Vector,
}

/// A kind of compute engine with its dense peak rate per precision for the whole die, or the
/// figures to derive it (`units` × `ops_per_cycle` × die clock).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSpec {
    pub name: String,
    pub kind: EngineKind,
    #[serde(default)]
    pub peak: BTreeMap<String, Q>,
    #[serde(default)]
    pub units: Option<u64>,
    #[serde(default)]
    pub ops_per_cycle: BTreeMap<String, Q>,
    /// The `peak` figures include 2:4 structured sparsity (vendors' headline numbers); tessera
    /// divides by `sparsity_factor` to get dense rates.
    #[serde(default)]
    pub sparse: bool,
    #[serde(default)]
    pub sparsity_factor: Option<Q>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum Attach {
    Core,
    Die,
    Package,
    Node,
    External,
}

/// One memory level. `capacity` and `bandwidth` are per instance of what it attaches to (per core
/// for `Core`, per die for `Die`, for the package for `Package`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySpec {
    pub name: String,
    pub kind: MemoryKind,
    pub attach: Attach,
    pub capacity: Q,
    pub bandwidth: Q,
    #[serde(default)]
    pub latency: Option<Q>,
    #[serde(default)]
    pub energy_per_byte: Option<Q>,
    /// Compute inside the memory (processing-in-memory), total for the level.
    #[serde(default)]
    pub compute: Option<Q>,
    #[serde(default)]
    pub source: Option<String>,
}

/// The on-chip network. A wafer-scale engine is a die whose mesh spans all its cores.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeshSpec {
    pub topology: MeshTopology,
    pub dims: Vec<u64>,
    /// Bandwidth of one link, per direction.
    pub link_bandwidth: Q,
    pub hop_latency: Q,
    #[serde(default)]
    pub energy_per_bit_hop: Option<Q>,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub bandwidth: Q,
    #[serde(default)]
    pub latency: Option<Q>,
    #[serde(default)]
    pub energy_per_bit: Option<Q>,
    #[serde(default)]
    pub source: Option<String>,
}

/// Achievable fractions of peak: sourced, or marked as assumptions / fitted with `@key`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EfficiencySpec {
    /// Fraction of dense matrix peak a large GEMM reaches.
    pub matmul: Q,
    /// Fraction of vector peak elementwise kernels reach.
    #[serde(default)]
    pub vector: Option<Q>,
    /// Fraction of memory bandwidth a streaming kernel reaches.
    pub memory: Q,
    /// Fraction of link bandwidth a collective reaches (bus bandwidth / link bandwidth).
    pub network: Q,
    /// Fixed cost per kernel launch (or per layer step on dataflow devices).
    #[serde(default)]
    pub kernel_overhead: Option<Q>,
    /// Fraction of peak reached with FP8 (or lower) GEMMs relative to `matmul`, when it differs.
    #[serde(default)]
    pub low_precision_matmul: Option<Q>,
    /// Fraction of the device's compute a collective running beside it takes, while it runs
    /// (NCCL runs its channels, and Transformer Engine its overlapped communication kernels, as
    /// thread blocks on the SMs; a DMA or copy-engine transfer takes none): an overlapped
    /// collective on the scale-up or scale-out links slows the operators it hides behind by this
    /// share of its own time, at most of theirs. 0 (no cost) where the file gives none.
    #[serde(default)]
    pub collective_compute_share: Option<Q>,
    /// Fraction of the low-precision efficiency the backward pass's FP4 GEMMs reach in an FP4
    /// training recipe (NVFP4: random Hadamard transforms on the weight-gradient inputs,
    /// stochastic rounding of gradients, work beside the GEMMs the model does not cost apart),
    /// when it differs: they run at `matmul` × `low_precision_matmul` × this. Forward FP4 GEMMs,
    /// in training and in serving, run at `matmul` × `low_precision_matmul`.
    #[serde(default)]
    pub fp4_backward_matmul: Option<Q>,
    /// How serving on this device launches a decoder layer by default (`Fused`, a serving
    /// engine's kernels, unless given; `Compiled` for statically scheduled and dataflow
    /// devices): what `kernel_overhead` is paid per. A mapping's `kernels` overrides it.
    #[serde(default)]
    pub kernels: Option<crate::vocab::Kernels>,
    /// The output tiles a GEMM library may split a matrix product into, spread over the die's
    /// `cores` (SMs): what makes small or oddly sized GEMMs slow (tile and wave quantization).
    #[serde(default)]
    pub tiling: Option<TilingSpec>,
    /// Attention kernels as they run on this device: each kernel's published rate by sequence
    /// length, head dimension, causality and pass (`model::system::attention`). A software
    /// stack that names one of them (`Software::attention_kernel`) runs its attention core at
    /// that rate instead of the dense-GEMM efficiency.
    #[serde(default)]
    pub attention: Vec<AttentionKernelSpec>,
}

/// One attention kernel's published rates on a device.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttentionKernelSpec {
    /// The name a software stack's `attention_kernel` refers to ("flash-attention-2").
    pub kernel: String,
    /// The precision the rates were measured at ("fp16", "bf16"): they count against the
    /// device's matrix peak at it.
    pub precision: String,
    /// Rates as the benchmark counts them: the forward at 4·seq²·head_dim FLOPs per head and
    /// sequence (half that when causal), the backward at 2.5 × the forward's.
    pub curves: Vec<AttentionCurveSpec>,
    #[serde(default)]
    pub source: Option<String>,
}

/// One measured series of an attention kernel: a head dimension, causal or not, one pass.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttentionCurveSpec {
    pub head_dim: u32,
    pub causal: bool,
    /// `Forward`, `Backward`, or `Both` (forward and backward together, FLOPs 3.5 × forward).
    pub pass: crate::vocab::AttentionPass,
    /// (sequence length, rate) pairs, sequence lengths increasing: `(2048, "265 TFLOP/s")`.
    pub rates: Vec<(u32, Q)>,
    #[serde(default)]
    pub source: Option<String>,
}

/// Output tile shapes (rows × columns of the product) a GEMM library chooses among; the units
/// they are spread over are the die's `cores` over all dies.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TilingSpec {
    pub tiles: Vec<(u32, u32)>,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename = "Node")]
pub struct NodeSpec {
    #[serde(default)]
    pub version: Option<u32>,
    pub name: String,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    #[serde(default)]
    pub source: Option<String>,
    /// Accelerator devices per node.
    pub devices: u32,
    #[serde(default)]
    pub host: Option<HostSpec>,
    #[serde(default)]
    pub nics: Option<NicSpec>,
    /// Node-attached memory (host DRAM, Grace LPDDR).
    #[serde(default)]
    pub memory: Vec<MemorySpec>,
    /// The link between each device and that host memory (NVLink-C2C, PCIe): what activations
    /// offloaded to host memory cross.
    #[serde(default)]
    pub host_link: Option<HostLinkSpec>,
    /// Fans, storage, power conversion, board: power beyond devices, host and NICs.
    #[serde(default)]
    pub other_power: Option<Q>,
    /// What those other parts draw while the node trains or serves (their rating where absent).
    #[serde(default)]
    pub other_running: Option<Q>,
    /// The node's rated maximum power; the sum of its parts may not exceed it.
    #[serde(default)]
    pub power_limit: Option<Q>,
}

/// A device's link to the node's host memory.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostLinkSpec {
    pub name: String,
    /// The link's bandwidth as published (`counted` says whether it adds both directions).
    pub bandwidth: Q,
    pub counted: Counted,
    /// Devices that share one such link (two B200 on a GB200 superchip's NVLink-C2C); 1 where
    /// absent.
    #[serde(default)]
    pub shared_by: Option<u32>,
    #[serde(default)]
    pub latency: Option<Q>,
    /// Energy of moving a bit over the link ("1.3 pJ/bit"): what the copies to and from host
    /// memory add to the step's dynamic energy.
    #[serde(default)]
    pub energy_per_bit: Option<Q>,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub cpus: u32,
    #[serde(default)]
    pub model: String,
    pub cpu_tdp: Q,
    /// What each CPU draws while it feeds the accelerators (its TDP where absent).
    #[serde(default)]
    pub cpu_running: Option<Q>,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicSpec {
    pub count: u32,
    /// Per NIC, per direction.
    pub bandwidth: Q,
    #[serde(default)]
    pub power: Option<Q>,
    /// What each NIC draws under the run's traffic (its `power` where absent).
    #[serde(default)]
    pub running: Option<Q>,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum Counted {
    /// The figure adds both directions (NVIDIA's "1.8 TB/s per GPU").
    BothDirections,
    PerDirection,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleUpSpec {
    pub name: String,
    pub topology: ScaleUpTopology,
    /// Devices in one domain.
    pub size: u64,
    #[serde(default)]
    pub dims: Vec<u64>,
    /// Bandwidth per device into the domain.
    pub bandwidth: Q,
    pub counted: Counted,
    pub latency: Q,
    #[serde(default)]
    pub in_network_reduction: bool,
    #[serde(default)]
    pub energy_per_bit: Option<Q>,
    #[serde(default)]
    pub switches: Option<SwitchSpec>,
    /// What one domain may draw, devices, hosts and switches together: a rack's power shelves
    /// (an NVL72 rack's 132 kW). Devices demanding more than their share throttle.
    #[serde(default)]
    pub power_limit: Option<Q>,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum ScaleOutTopology {
    FatTree,
    RailOptimized,
    Torus,
    Dragonfly,
    /// A broadcast/reduce tree (Cerebras SwarmX).
    Tree,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleOutSpec {
    pub name: String,
    pub topology: ScaleOutTopology,
    /// Per device, per direction.
    pub bandwidth: Q,
    pub latency: Q,
    /// Ratio of downlink to uplink bandwidth at the first switch level (1 = non-blocking).
    #[serde(default)]
    pub oversubscription: Option<Q>,
    #[serde(default)]
    pub in_network_reduction: bool,
    #[serde(default)]
    pub energy_per_bit: Option<Q>,
    /// Switches of the whole network.
    #[serde(default)]
    pub switches: Option<SwitchSpec>,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    pub count: u64,
    #[serde(default)]
    pub radix: Option<u64>,
    pub power: Q,
    /// What each switch draws under the run's traffic (its `power` where absent).
    #[serde(default)]
    pub running: Option<Q>,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightStoreSpec {
    pub name: String,
    pub capacity: Q,
    /// Per device, per direction.
    pub bandwidth: Q,
    #[serde(default)]
    pub latency: Option<Q>,
    #[serde(default)]
    pub power: Option<Q>,
    /// Compute of the whole store for the optimizer update it runs (FLOP/s): with it, a training
    /// step that streams its weights from the store updates them there (MemoryX), and the
    /// optimizer state never crosses the link.
    #[serde(default)]
    pub compute: Option<Q>,
    /// Memory bandwidth of the whole store for that update (B/s).
    #[serde(default)]
    pub memory_bandwidth: Option<Q>,
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FacilitySpec {
    /// Power usage effectiveness: facility power / IT power.
    #[serde(default)]
    pub pue: Option<Q>,
    /// The power the system must stay within (a rack's budget).
    #[serde(default)]
    pub power_limit: Option<Q>,
    #[serde(default)]
    pub source: Option<String>,
}

/// The software stack a run executes on (NeMo/Megatron, MaxText/JAX, PyTorch FSDP, DeepSpeed):
/// the costs it adds to every training step beyond the work the cost program models.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename = "Software")]
pub struct SoftwareSpec {
    pub version: u32,
    /// The stack and its version ("NVIDIA NeMo 24.04 (MLPerf Training v4.0 recipes)").
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    #[serde(default)]
    pub source: Option<String>,
    /// Time per optimizer step the stack spends outside the devices' modelled work (the training
    /// loop's host work, the step's synchronisations, optimizer and gradient-norm launches),
    /// during which the devices draw their static power: `"0.2 s"`. Default 0 (a serving stack
    /// has no optimizer step).
    #[serde(default)]
    pub step_overhead: Option<Q>,
    /// Time the stack's software spends on each 32-bit element a core of a streamed chain over a
    /// wafer's mesh of cores relays (receives, adds and sends on, element by element: the
    /// reductions of `engine::coeffs::Coeffs::mesh`); the chain streams at the slower of this
    /// and its link: `"12 ns"`. Default 0.
    #[serde(default)]
    pub mesh_relay_time: Option<Q>,
    /// Time each stage of a pipeline spread over several devices adds for every micro-batch (a
    /// decode round's tokens) it passes on to the next stage or out, beyond its modelled work
    /// and its send (the stack's hand-off: scheduling the micro-batch, packing and posting the
    /// activations, the receiver's wake-up): `"15 us"`. Default 0.
    #[serde(default)]
    pub pipeline_stage_time: Option<Q>,
    /// Device memory the stack keeps for itself on every device (its runtime's context, kernel
    /// and communication workspaces, allocator slack), taken from the device's main memory
    /// before the run's weights, state and activations: `"2 GiB"`. Default 0.
    #[serde(default)]
    pub memory_reserve: Option<Q>,
    /// The attention kernel the stack runs, by the name the device's `efficiency.attention`
    /// tables give it ("flash-attention-2"): its attention core then runs at that kernel's
    /// published rate. Unset: at the device's dense-GEMM efficiency.
    #[serde(default)]
    pub attention_kernel: Option<String>,
    /// How the stack computes the loss over the vocabulary (`Upcast`, `Fused`: see
    /// `vocab::LossKernel`). Unset: `Upcast`.
    #[serde(default)]
    pub loss_kernel: Option<crate::vocab::LossKernel>,
}
