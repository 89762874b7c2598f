//! Closed vocabularies that both the files and the validated model use (memory kinds, on-chip
//! and scale-up topologies, collective kinds, parallel dimensions): defined once here, so the
//! spec types stay the files' and the model and engine never name a spec type. The spec modules
//! re-export them where the file formats use them.

use serde::Deserialize;

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum MemoryKind {
    Sram,
    Cache,
    Hbm,
    Dram,
    External,
    NearMemory,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum MeshTopology {
    Mesh2D,
    Torus2D,
    Ring,
    Crossbar,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum ScaleUpTopology {
    /// All-to-all through switches (NVSwitch).
    Switched,
    /// Direct links between every pair (xGMI, 8-GPU meshes).
    FullMesh,
    /// DGX-1 hybrid cube-mesh.
    HybridCubeMesh,
    Ring,
    Torus,
    Mesh,
    /// The fabric of a wafer.
    Wafer,
    /// A PCIe tree through the host.
    Pcie,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum CollectiveKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    SendRecv,
}

/// A parallel dimension (the order a mapping lays them over the devices).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum Dim {
    Tp,
    Cp,
    Dp,
    Pp,
}

/// Which parts a power or energy figure counts, innermost first; each boundary includes the ones
/// before it. A report states its boundary; `compare` uses one for every system.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum PowerBoundary {
    /// The accelerators alone.
    #[serde(alias = "Devices")]
    Device,
    /// The devices and each node's hosts (CPUs, memory), NICs, fans and other node parts.
    Node,
    /// The nodes and the scale-up domain's switches (NVLink switch trays).
    Rack,
    /// The racks, the scale-out network's switches and a weight store the run uses: IT power at
    /// the wall of every part, as MLPerf Power measures it.
    It,
    /// IT power × the facility's PUE (cooling, power conversion).
    Facility,
}

impl PowerBoundary {
    /// The boundary's code in the machine table's `power_boundary` slot.
    pub fn code(self) -> f64 {
        self as u8 as f64
    }
}

impl crate::choice::Choice for PowerBoundary {
    const ALL: &'static [(&'static str, Self, &'static str)] = &[
        ("device", Self::Device, "The accelerators alone"),
        (
            "node",
            Self::Node,
            "+ hosts, NICs, fans and other node parts",
        ),
        ("rack", Self::Rack, "+ the scale-up domain's switches"),
        (
            "it",
            Self::It,
            "+ the scale-out network and a weight store the run uses (IT power at the wall)",
        ),
        ("facility", Self::Facility, "IT power × the facility's PUE"),
    ];
}

/// How a serving stack launches a decoder layer's work in decode: the kernels, each paying the
/// device's `kernel_overhead` once per launch.
///
/// - `Separate`: one kernel per operator, as an eager framework runs it (PyTorch eager,
///   Hugging Face `generate`): two RMSNorms and two residual adds, the Q, K and V projections,
///   rotary embedding, the KV-cache append, attention, the output projection, and the MLP's
///   gate, up, activation-and-multiply and down (up, activation, down without a gate); a
///   mixture-of-experts layer adds the router GEMM, top-k, token permutation and the weighted
///   combine. 15 kernels per gated dense layer.
/// - `Fused`: the kernels a serving engine launches (TensorRT-LLM, vLLM with its custom ops):
///   residual add fused with the RMSNorm, one QKV GEMM, attention with rotary and the cache
///   append inside it, the output projection, the gate and up projections as one GEMM with the
///   SwiGLU in its epilogue, the down projection; a mixture-of-experts layer adds the router,
///   a fused top-k-and-permute and the finalize (unpermute and weighted sum). 7 per dense layer.
/// - `Compiled`: a compiler's whole-layer schedule on a statically scheduled or dataflow device
///   (Groq, NorthPole, a wafer, XLA on a TPU): three steps per layer (its matrix products, its
///   attention, its vector work), each paying the overhead once.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize, Default)]
#[serde(rename_all(serialize = "lowercase"))]
pub enum Kernels {
    Separate,
    #[default]
    Fused,
    Compiled,
}

/// How a software stack computes the language-model loss, the softmax cross-entropy over the
/// vocabulary, beside the head's GEMMs (`engine::lower::training::ops::LOSS_BYTES_PER_LOGIT`):
/// - `Upcast` (the default): the logits are cast to fp32 and each step of the softmax is its own
///   pass over them, kept for the backward: Megatron-Core's vocabulary-parallel cross-entropy
///   (megatron/core/tensor_parallel/cross_entropy.py), PyTorch's `cross_entropy` under autocast.
/// - `Fused`: one kernel reads the low-precision logits forward and one reads them again and
///   writes their gradient backward (flash-attention's `xentropy` CUDA kernel, which
///   llm-foundry's MPT takes by default: `loss_fn: fused_crossentropy`).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all(serialize = "snake_case"))]
pub enum LossKernel {
    #[default]
    Upcast,
    Fused,
}

/// How Transformer Engine's userbuffers overlap a row-parallel linear layer's forward GEMM with
/// the reduce-scatter of its output (`tp_overlap_method`; only where tensor-parallel overlap is
/// on). The column-parallel layers' forward and the row-parallel layers' input-gradient GEMMs
/// always take the ring exchange. TE's defaults (`transformer_engine/pytorch/module/base.py`,
/// `initialize_ub`):
/// - `Pipeline` (TE's default for these GEMMs, and NeMo's H100 BF16 presets'): the GEMM runs in 4
///   chunks along its rows, each chunk's output reduce-scattered while the next computes, by a
///   communication kernel on 16 SMs the GEMM is launched without (`set_sm_margin`).
/// - `RingExchange` (NeMo's FP8 presets for these GEMMs): the GEMM runs in tp chunks, the partial
///   outputs passed round the ring by the copy engines, every SM left to the GEMM.
///
/// Unwritten, a run takes the method NeMo's userbuffer presets give the row-parallel forward
/// GEMMs (Megatron-Bridge `training/comm_overlap.py`): the ring exchange for GEMMs at 8 bits or
/// fewer (every FP8 preset, e.g. `userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048`), the pipeline
/// for wider ones (the H100 BF16 presets, e.g. `userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192`).
/// PyTorch's async tensor parallelism splits its products one chunk per rank, the shards moved
/// by copy engines: a `RingExchange`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all(serialize = "snake_case"))]
pub enum TpOverlapMethod {
    Pipeline,
    RingExchange,
}

impl TpOverlapMethod {
    /// The method NeMo's presets give row-parallel forward GEMMs whose operands take `bytes`
    /// per element.
    pub fn for_gemm_bytes(bytes: f64) -> TpOverlapMethod {
        if bytes <= 1.0 {
            TpOverlapMethod::RingExchange
        } else {
            TpOverlapMethod::Pipeline
        }
    }
}

/// How expert parallelism moves a token to the devices of its experts and back.
///
/// - `AllToAll`: a plain all-to-all (Megatron-Core's `alltoall` dispatcher): each of a token's
///   top-k copies goes straight to its expert's device, over the scale-out network where that
///   device is in another scale-up domain.
/// - `Hierarchical`: DeepEP's and HybridEP's dispatch (Megatron-Core's `flex` dispatcher;
///   DeepSeek-V3, arXiv 2412.19437 §3.2.2): a token crosses the scale-out network once to each
///   other domain that holds any of its experts, to the device of the same local rank there,
///   which forwards it over the scale-up links to the devices of its experts; the combine returns
///   the same way. Routing spread evenly over the group (what force-balanced and load-balanced
///   routing train for), a token's k experts touch (o − 1)(1 − (1 − 1/o)^k) of the o − 1 other
///   domains on average, where a plain all-to-all sends k(o − 1)/o copies out.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize, Default)]
#[serde(rename_all(serialize = "lowercase"))]
pub enum Dispatch {
    #[default]
    AllToAll,
    Hierarchical,
}

/// How a training run scales the operands of its 8-bit-or-narrower GEMMs, and so what
/// quantization work it does beside them (`engine::lower::training::layer`).
///
/// - `Delayed`: one scale per tensor from the amax history of earlier steps (Transformer
///   Engine's delayed scaling, NVIDIA's MLPerf FP8 recipe): the cast is fused into the kernel
///   that produces the tensor, no pass of its own.
/// - `Current`: one scale per tensor from the tensor's own amax (Transformer Engine's current
///   scaling, Megatron-Bridge's FP8-CS): an amax pass reads the tensor, then a cast-transpose
///   reads it again and writes the FP8 copy and its transpose (the backward's GEMMs take the
///   other layout).
/// - `Mxfp8`: OCP microscaling, one 8-bit power-of-two scale (E8M0) per 32 elements: each
///   tensor is read once and written twice, scaled along rows and along columns (the forward
///   and the weight-gradient GEMMs block it along different dimensions), each copy with its
///   scales.
/// - `Nvfp4`: NVIDIA's FP4, one E4M3 scale per 16 elements (and one FP32 scale per tensor): as
///   MXFP8, at half a byte per element and a byte of scale per 16. Its random Hadamard
///   transform of the weight-gradient inputs runs on the matrix engines inside the cast (not
///   costed).
///
/// Each quantizing pass is a memory-bound vector kernel over the GEMMs' inputs in the forward
/// (the activations each linear layer reads), their output gradients in the backward, and the
/// weights once per step.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize, Default)]
#[serde(rename_all(serialize = "lowercase"))]
pub enum Scaling {
    #[default]
    Delayed,
    Current,
    Mxfp8,
    Nvfp4,
}

impl Scaling {
    /// Bytes moved per element quantized from a `source`-byte tensor (the amax read, the
    /// reads and the writes of the copies with their scales); 0 for delayed scaling.
    pub fn bytes_per_element(self, source: f64) -> f64 {
        match self {
            Scaling::Delayed => 0.0,
            Scaling::Current => 2.0 * source + 2.0,
            Scaling::Mxfp8 => source + 2.0 * (1.0 + 1.0 / 32.0),
            Scaling::Nvfp4 => source + 2.0 * (0.5 + 1.0 / 16.0),
        }
    }
}

/// A part of a transformer layer that a recompute policy of its own (`recompute: Ops([...])`)
/// re-runs in the backward pass. JAX remat policies (MaxText's `save_dot_except_mlpwi`,
/// `qkv_proj_offloaded`, `custom`) and PyTorch checkpoint selections name what they save; the
/// backward then re-runs what it needs and was not saved, and these are the parts it can re-run:
/// - `Qkv`: the query, key and value projections;
/// - `Attention`: the attention core (scores, softmax, the product with V);
/// - `OutProj`: the attention output projection;
/// - `FfnUp`: the FFN's input projections (gate and up of a gated FFN: MaxText's `mlpwi`);
/// - `FfnDown`: the FFN's output projection (`mlpwo`);
/// - `Elementwise`: norms, residual adds, the FFN activation, dropout and quantizing casts.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum LayerPart {
    Qkv,
    Attention,
    OutProj,
    FfnUp,
    FfnDown,
    Elementwise,
}

impl LayerPart {
    pub const ALL: [LayerPart; 6] = [
        LayerPart::Qkv,
        LayerPart::Attention,
        LayerPart::OutProj,
        LayerPart::FfnUp,
        LayerPart::FfnDown,
        LayerPart::Elementwise,
    ];

    /// Its name in reports.
    pub fn label(self) -> &'static str {
        match self {
            LayerPart::Qkv => "qkv",
            LayerPart::Attention => "attention",
            LayerPart::OutProj => "output projection",
            LayerPart::FfnUp => "ffn up",
            LayerPart::FfnDown => "ffn down",
            LayerPart::Elementwise => "elementwise",
        }
    }
}

/// A set of [`LayerPart`]s (a copyable bit set, so a mapping stays `Copy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Parts(u8);

impl Parts {
    /// Every part: what full recomputation re-runs.
    pub const ALL: Parts = Parts(0b11_1111);

    pub fn of(parts: &[LayerPart]) -> Parts {
        Parts(parts.iter().fold(0, |s, p| s | 1 << *p as u8))
    }

    pub fn has(self, p: LayerPart) -> bool {
        self.0 & (1 << p as u8) != 0
    }

    pub fn iter(self) -> impl Iterator<Item = LayerPart> {
        LayerPart::ALL.into_iter().filter(move |p| self.has(*p))
    }
}

impl serde::Serialize for Parts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// Which pass of an attention kernel a published rate measures: its forward, its backward
/// (which recomputes the scores: 5 matrix products to the forward's 2, so its FLOPs are 2.5 ×
/// the forward's), or both together (3.5 × the forward's FLOPs in their summed time).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum AttentionPass {
    Forward,
    Backward,
    Both,
}
