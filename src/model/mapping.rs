//! A parallel mapping: how a workload is split over devices (data, tensor, pipeline, expert and
//! context parallelism, ZeRO stage, micro-batching, recomputation).

use crate::spec::mapping::{MappingSpec, OverlapKind, RecomputeSpec};
use crate::vocab::{Dim, Dispatch, Kernels, LayerPart, Parts, TpOverlapMethod};
use serde::Serialize;

/// What the backward pass recomputes instead of keeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    None,
    /// The attention core where it is not fused (Korthikanti et al. 2022).
    Selective,
    /// The whole layer from its input.
    Full,
    /// These parts of each layer (a remat policy of its own): the layer's input is kept, and so
    /// is every tensor a part outside the set produces.
    Ops(Parts),
}

impl Recompute {
    /// The parts of each layer the backward re-runs (`Selective`: none of these; its attention
    /// core is handled apart, and only where attention is not fused).
    pub fn parts(self) -> Parts {
        match self {
            Recompute::None | Recompute::Selective => Parts::default(),
            Recompute::Full => Parts::ALL,
            Recompute::Ops(p) => p,
        }
    }
}

impl std::fmt::Display for Recompute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Recompute::None => f.write_str("None"),
            Recompute::Selective => f.write_str("Selective"),
            Recompute::Full => f.write_str("Full"),
            Recompute::Ops(p) => {
                let names: Vec<&str> = p.iter().map(LayerPart::label).collect();
                write!(f, "Ops({})", names.join(", "))
            }
        }
    }
}

impl From<&RecomputeSpec> for Recompute {
    fn from(r: &RecomputeSpec) -> Self {
        match r {
            RecomputeSpec::None => Recompute::None,
            RecomputeSpec::Selective => Recompute::Selective,
            RecomputeSpec::Full => Recompute::Full,
            RecomputeSpec::Ops(parts) => Recompute::Ops(Parts::of(parts)),
        }
    }
}

/// A mapping as written (a mapping file or a workload's published one), checked but not yet
/// resolved against a device count: absent degrees are filled when it is resolved
/// ([`Mapping::resolve`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MappingPlan {
    pub dp: Option<u64>,
    pub tp: Option<u64>,
    pub pp: Option<u64>,
    pub ep: Option<u64>,
    /// Expert tensor parallelism as written (`None`: equal to `tp`).
    pub etp: Option<u64>,
    pub cp: Option<u64>,
    pub sp: Option<bool>,
    pub zero: Option<u8>,
    pub shard: Option<u64>,
    pub micro_batch: Option<u64>,
    pub interleave: Option<u64>,
    pub recompute: Option<Recompute>,
    pub recompute_layers: Option<u64>,
    pub overlap_grad_reduce: Option<bool>,
    pub embedding_in_pipeline_split: Option<bool>,
    pub loss_in_pipeline_split: Option<bool>,
    pub overlap: ExtraOverlap,
    pub order: Option<Vec<Dim>>,
    /// Pipeline stages as written: (layers, devices) per stage.
    pub stages: Option<Vec<(u64, u64)>>,
    /// Core regions of the phases on a wafer, as written.
    pub regions: Regions,
    /// The prefill pool of disaggregated serving, as written (none: interleaved).
    pub pool: Pool,
    /// Inference: the serving stack's kernels, as written (`None`: the device's).
    pub kernels: Option<Kernels>,
    /// Expert parallelism's dispatcher, as written (`None`: a plain all-to-all).
    pub expert_dispatch: Option<Dispatch>,
    /// Tensor-parallel overlap's method for the row-parallel GEMMs, as written (`None`: as
    /// NeMo's presets choose by precision).
    pub tp_overlap_method: Option<TpOverlapMethod>,
    pub offload_activation_layers: Option<u64>,
    pub offload_optimizer: Option<f64>,
    pub offload_weights: Option<bool>,
}

impl From<&MappingSpec> for MappingPlan {
    fn from(s: &MappingSpec) -> Self {
        MappingPlan {
            dp: s.dp,
            tp: s.tp,
            pp: s.pp,
            ep: s.ep,
            etp: s.etp,
            cp: s.cp,
            sp: s.sp,
            zero: s.zero,
            shard: s.shard,
            micro_batch: s.micro_batch,
            interleave: s.interleave,
            recompute: s.recompute.as_ref().map(Into::into),
            recompute_layers: s.recompute_layers,
            overlap_grad_reduce: s.overlap_grad_reduce,
            embedding_in_pipeline_split: s.embedding_in_pipeline_split,
            loss_in_pipeline_split: s.loss_in_pipeline_split,
            overlap: ExtraOverlap::from_kinds(&s.overlap),
            order: s.order.clone(),
            stages: s
                .stages
                .as_ref()
                .map(|v| v.iter().map(|x| (x.layers, x.devices)).collect()),
            regions: s
                .regions
                .map(|r| Regions {
                    prefill: r.prefill.map(|x| x.cores),
                    decode: r.decode.map(|x| x.cores),
                })
                .unwrap_or_default(),
            pool: s
                .prefill_pool
                .map(|p| Pool {
                    instances: p.instances,
                    tp: p.tp.max(1),
                })
                .unwrap_or_default(),
            kernels: s.kernels,
            expert_dispatch: s.expert_dispatch,
            tp_overlap_method: s.tp_overlap_method,
            offload_activation_layers: s.offload_activation_layers,
            offload_optimizer: s.offload_optimizer,
            offload_weights: s.offload_weights,
        }
    }
}

/// Disaggregated serving's prefill pool (DistServe, Zhong et al., OSDI 2024, arXiv 2401.09670;
/// Splitwise, Patel et al., ISCA 2024, arXiv 2311.18677): `instances` prefill instances of `tp`
/// tensor-parallel devices each, apart from the mapping's decode instances. They only prefill:
/// each prompt of a request that joins runs on one of them, and its KV cache goes to the decode
/// instance that serves the request, which only decodes. `instances == 0`: no pool (the prefill
/// interleaved into the decode rounds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Pool {
    pub instances: u64,
    pub tp: u64,
}

impl Pool {
    pub fn any(&self) -> bool {
        self.instances > 0
    }
    /// Devices of the pool (0 without one).
    pub fn devices(&self) -> u64 {
        self.instances * self.tp.max(1)
    }
}

/// Inference on a mesh device (a wafer): the block of cores, (columns, rows), each phase runs a
/// layer on; `None`: the automatic placement (every layer on its share of the mesh, in
/// proportion to the weights it holds). As many blocks as tile the mesh hold consecutive layers
/// (a block holds the layers it runs, weights and KV cache); a model on fewer cores than the
/// mesh leaves the rest idle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Regions {
    pub prefill: Option<(u64, u64)>,
    pub decode: Option<(u64, u64)>,
}

impl Regions {
    pub fn any(&self) -> bool {
        self.prefill.is_some() || self.decode.is_some()
    }
}

/// The most runs of differently shaped stages a placement holds (each becomes a stage class of
/// the cost program, at most `engine::program::MAX_STAGES`).
pub const MAX_STAGE_GROUPS: usize = 6;

/// A run of identical pipeline stages: `stages` stages of `layers` consecutive layers, each on
/// `devices` devices (tensor-parallel inside the stage).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StageGroup {
    pub stages: u64,
    pub layers: u64,
    pub devices: u64,
}

/// A per-layer pipeline placement of one model instance: runs of stages in order. The embedding
/// table sits on the first stage, the output head on the last (a last stage of no layers holds
/// only the head). Empty (`n == 0`): the uniform `tp` × `pp` layout of the mapping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Placement {
    pub groups: [StageGroup; MAX_STAGE_GROUPS],
    pub n: usize,
}

impl Placement {
    /// Runs of equal neighbours in a list of (layers, devices) stages.
    pub fn runs(stages: impl Iterator<Item = (u64, u64)>) -> usize {
        let mut last = None;
        let mut n = 0;
        for s in stages {
            if last != Some(s) {
                n += 1;
                last = Some(s);
            }
        }
        n
    }

    /// From a list of (layers, devices) stages; `None` with more than [`MAX_STAGE_GROUPS`] runs.
    pub fn from_stages(stages: &[(u64, u64)]) -> Option<Placement> {
        let mut p = Placement::default();
        for &(layers, devices) in stages {
            if p.n > 0 {
                let g = &mut p.groups[p.n - 1];
                if g.layers == layers && g.devices == devices {
                    g.stages += 1;
                    continue;
                }
            }
            if p.n == MAX_STAGE_GROUPS {
                return None;
            }
            p.groups[p.n] = StageGroup {
                stages: 1,
                layers,
                devices,
            };
            p.n += 1;
        }
        Some(p)
    }

    /// `layers` over `stages` stages of `tp` devices, as evenly as they go (the first stages take
    /// one more where they do not divide), and the output head on `head` devices of its own
    /// (0: on the last layer stage).
    pub fn balanced(layers: u64, stages: u64, tp: u64, head: u64) -> Placement {
        let stages = stages.clamp(1, layers.max(1));
        let (q, r) = (layers / stages, layers % stages);
        let mut p = Placement::default();
        let mut push = |stages: u64, layers: u64, devices: u64| {
            if stages > 0 {
                p.groups[p.n] = StageGroup {
                    stages,
                    layers,
                    devices,
                };
                p.n += 1;
            }
        };
        push(r, q + 1, tp);
        push(stages - r, q, tp);
        if head > 0 {
            push(1, 0, head);
        }
        p
    }

    /// The placement a uniform `tp` × `pp` mapping means: `pp` stages of `tp` devices; where pp
    /// exceeds the layers, one layer per stage and the output head over the remaining devices.
    pub fn uniform(layers: u64, tp: u64, pp: u64) -> Placement {
        if pp <= layers {
            Placement::balanced(layers, pp, tp, 0)
        } else {
            Placement::balanced(layers, layers, tp, (pp - layers) * tp)
        }
    }

    pub fn groups(&self) -> &[StageGroup] {
        &self.groups[..self.n]
    }
    /// Devices of one pipeline.
    pub fn devices(&self) -> u64 {
        self.groups().iter().map(|g| g.stages * g.devices).sum()
    }
    pub fn stages(&self) -> u64 {
        self.groups().iter().map(|g| g.stages).sum()
    }
    pub fn layers(&self) -> u64 {
        self.groups().iter().map(|g| g.stages * g.layers).sum()
    }
    /// As a compact string: `14×(1 layer, 1 device) + 1×(head, 2 devices)`.
    pub fn describe(&self) -> String {
        self.groups()
            .iter()
            .map(|g| {
                let what = if g.layers == 0 {
                    "head".to_string()
                } else {
                    format!("{} layer{}", g.layers, if g.layers == 1 { "" } else { "s" })
                };
                format!("{}×({what}, {} dev)", g.stages, g.devices)
            })
            .collect::<Vec<_>>()
            .join(" + ")
    }
}

/// A resolved mapping. Devices used = dp × tp × pp × cp. The expert layers fold their own layout
/// over each stage's tp × cp × dp ranks (Megatron-Core's MoE parallel folding): ep × etp divides
/// tp × cp × dp, the rest is the expert-data-parallel width ([`Mapping::edp`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Mapping {
    pub dp: u64,
    pub tp: u64,
    pub pp: u64,
    pub ep: u64,
    /// Expert tensor parallelism as written; `None`: equal to `tp` (Megatron-Core's default for
    /// `expert_tensor_parallel_size`). Read through [`Mapping::etp`], so that a search or an
    /// override that changes `tp` carries an unwritten `etp` with it.
    pub etp: Option<u64>,
    pub cp: u64,
    pub sp: bool,
    pub zero: u8,
    /// ZeRO's shard group: the innermost `shard` of the dp × cp ranks share out the model
    /// state, replicated over the other groups (hybrid sharding); 0: all of dp × cp. Read
    /// through [`Mapping::shard_group`].
    pub shard: u64,
    pub micro_batch: u64,
    pub interleave: u64,
    pub recompute: Recompute,
    /// Training: the layers of each model chunk (a pipeline stage, or a virtual stage under
    /// `interleave`) that run `recompute`, the first ones (Megatron-Core's block method); the
    /// others keep every activation. `None`: every layer.
    pub recompute_layers: Option<u64>,
    pub overlap_grad_reduce: bool,
    /// Training: the pipeline split counts the input embedding as a layer, and the output head
    /// with its loss as another (Megatron-Core `account_for_embedding_in_pipeline_split`,
    /// `account_for_loss_in_pipeline_split`): layers + the counted units are split evenly over
    /// the `pp` × `interleave` virtual stages, and the first (last) stage holds one transformer
    /// layer fewer. No effect with one stage.
    pub embedding_in_pipeline_split: bool,
    pub loss_in_pipeline_split: bool,
    /// Communication the framework overlaps with compute beyond the gradient reduction.
    pub overlap: ExtraOverlap,
    /// Parallel dimensions from innermost (nearest devices) to outermost.
    pub order: [Dim; 4],
    /// Inference: the per-layer pipeline of one instance (`n == 0`: uniform `tp` × `pp`). With
    /// one, `pp` is its stage count and `tp` its first stage's devices.
    pub placement: Placement,
    /// Inference: requests in flight on each model instance (continuous batching's batch);
    /// 0: the workload's `batch`. Set by the serving load (`engine::serve`), not by files.
    pub batch: u64,
    /// Inference on a wafer: the core regions of prefill and decode (default: automatic).
    pub regions: Regions,
    /// Transformer inference: the prefill pool of disaggregated serving (default: none, the
    /// prefill interleaved). Its devices come beside the decode instances' ([`Mapping::devices`]
    /// counts both; [`Mapping::decode_devices`] the decode instances' alone).
    pub pool: Pool,
    /// Inference: how the serving stack launches a decoder layer (`None`: the device's
    /// `efficiency.kernels`).
    pub kernels: Option<Kernels>,
    /// Training: transformer layers per pipeline stage whose activations are offloaded to the
    /// node's host memory (0: none).
    pub offload_activation_layers: u64,
    /// Training: the fraction of each device's optimizer state kept and updated in the node's
    /// host memory (0: none; Megatron-Core's `optimizer_offload_fraction`).
    pub offload_optimizer: f64,
    /// Training: the transformer layers' weights kept in the node's host memory and copied in
    /// per layer for the forward and the backward.
    pub offload_weights: bool,
    /// Expert parallelism: how tokens reach their experts' devices (`vocab::Dispatch`).
    pub expert_dispatch: Dispatch,
    /// Training with tensor-parallel overlap: how the row-parallel layers' forward GEMMs are
    /// overlapped with their reduce-scatters (`vocab::TpOverlapMethod`); `None`: as NeMo's
    /// userbuffer presets choose by precision ([`TpOverlapMethod::for_gemm_bytes`]). Read only
    /// where `overlap.tensor_parallel` is on.
    pub tp_overlap_method: Option<TpOverlapMethod>,
}

/// Megatron-LM's layout: tensor parallelism innermost, pipeline stages outermost.
pub const DEFAULT_ORDER: [Dim; 4] = [Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp];

/// Communication a framework can overlap with compute beyond the gradient reduction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ExtraOverlap {
    /// Tensor-parallel collectives pipelined with the GEMMs they feed (Transformer Engine's
    /// userbuffers, NeMo / Megatron-Core `tp_comm_overlap`): exposed only beyond the
    /// micro-batch's compute.
    pub tensor_parallel: bool,
    /// Pipeline sends and receives of the interleaved 1F1B schedule issued asynchronously while
    /// the next chunk computes (Megatron-Core `overlap_p2p_comm`).
    pub pipeline: bool,
    /// The data-parallel parameter all-gather after the optimizer step overlapped with the next
    /// step's first micro-batch (Megatron-Core `overlap_param_gather`).
    pub parameter_gather: bool,
}

impl ExtraOverlap {
    pub fn from_kinds(kinds: &[OverlapKind]) -> Self {
        ExtraOverlap {
            tensor_parallel: kinds.contains(&OverlapKind::TensorParallel),
            pipeline: kinds.contains(&OverlapKind::PipelineSendRecv),
            parameter_gather: kinds.contains(&OverlapKind::ParameterGather),
        }
    }
}

impl Mapping {
    /// Devices the mapping uses: its instances', and its prefill pool's.
    pub fn devices(&self) -> u64 {
        self.decode_devices() + self.pool.devices()
    }

    /// Devices of the mapping's own instances (without a prefill pool's).
    pub fn decode_devices(&self) -> u64 {
        if self.placement.n > 0 {
            self.dp * self.placement.devices() * self.cp
        } else {
            self.dp * self.tp * self.pp * self.cp
        }
    }

    /// A single-device mapping.
    pub fn single() -> Self {
        Mapping {
            dp: 1,
            tp: 1,
            pp: 1,
            ep: 1,
            etp: None,
            cp: 1,
            sp: false,
            zero: 0,
            shard: 0,
            micro_batch: 1,
            interleave: 1,
            recompute: Recompute::None,
            recompute_layers: None,
            overlap_grad_reduce: true,
            embedding_in_pipeline_split: false,
            loss_in_pipeline_split: false,
            overlap: ExtraOverlap::default(),
            order: DEFAULT_ORDER,
            placement: Placement::default(),
            batch: 0,
            regions: Regions::default(),
            pool: Pool::default(),
            kernels: None,
            offload_activation_layers: 0,
            offload_optimizer: 0.0,
            offload_weights: false,
            expert_dispatch: Dispatch::AllToAll,
            tp_overlap_method: None,
        }
    }

    /// How userbuffer overlap runs the row-parallel forward GEMMs, where it is in effect
    /// (tensor-parallel overlap on, tp > 1 with sequence parallelism, which Transformer Engine's
    /// userbuffers need): as written, else as NeMo's presets choose for GEMMs whose operands take
    /// `gemm_bytes` per element ([`TpOverlapMethod::for_gemm_bytes`]). `None` elsewhere.
    pub fn tp_overlap_method_for(&self, gemm_bytes: f64) -> Option<TpOverlapMethod> {
        (self.overlap.tensor_parallel && self.sp && self.tp > 1).then(|| {
            self.tp_overlap_method
                .unwrap_or_else(|| TpOverlapMethod::for_gemm_bytes(gemm_bytes))
        })
    }

    /// The ranks that share out the model state under ZeRO: `shard` where written, else all of
    /// dp × cp.
    pub fn shard_group(&self) -> u64 {
        let n = self.dp * self.cp;
        if self.shard == 0 {
            n
        } else {
            self.shard.min(n)
        }
    }

    /// Whether the gradients are sharded through the step and reduce-scattered as each
    /// micro-batch's backward produces them (ZeRO 2 and 3 without a pipeline). Under a pipeline
    /// schedule they stay whole until the step's last backward and are reduced once, as ZeRO 1's
    /// are: PyTorch's pipeline stages turn FSDP's gradient sync and its resharding after backward
    /// off for every backward but the last (`torch/distributed/pipelining/stage.py`,
    /// `_PipelineStageBase.backward_maybe_with_nosync`), and DeepSpeed's pipeline engine refuses
    /// ZeRO 2 and 3 ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism").
    pub fn gradients_sharded_through_step(&self) -> bool {
        self.zero >= 2 && self.pp <= 1
    }

    /// Whether the weights stay sharded through the step and are gathered before each
    /// micro-batch's forward and backward (ZeRO 3 without a pipeline). Under a pipeline schedule
    /// FSDP gathers a stage's weights once, in the step's first forward, and keeps them whole
    /// until its last backward: torchtitan does not reshard after the forward where pipeline
    /// parallelism is on (`reshard_after_forward = not pp_enabled`, "to avoid per-microbatch
    /// all-gathers") and the pipeline stages do not reshard after the backward (as above).
    pub fn weights_sharded_through_step(&self) -> bool {
        self.zero >= 3 && self.pp <= 1
    }

    /// The shard group where hybrid sharding makes it smaller than dp × cp, else `None`.
    pub fn hybrid_shard(&self) -> Option<u64> {
        let g = self.shard_group();
        (g < self.dp * self.cp).then_some(g)
    }

    /// Tensor-parallel width of the routed experts (`tp` unless written).
    pub fn etp(&self) -> u64 {
        self.etp.unwrap_or(self.tp).max(1)
    }

    /// Expert-data-parallel width: the ranks of a stage holding the same expert shard,
    /// tp × cp × dp / (ep × etp), over which expert gradients are reduced and expert state is
    /// sharded by ZeRO. Whole only where ep × etp divides tp × cp × dp (training's `check`).
    pub fn edp(&self) -> u64 {
        (self.tp * self.cp * self.dp / (self.ep.max(1) * self.etp())).max(1)
    }

    /// Size of a parallel dimension.
    pub fn size(&self, d: Dim) -> u64 {
        match d {
            Dim::Tp => self.tp,
            Dim::Cp => self.cp,
            Dim::Dp => self.dp,
            Dim::Pp => self.pp,
        }
    }

    /// Distance between neighbouring ranks of dimension `d`: the product of the sizes of the
    /// dimensions laid inside it.
    pub fn stride(&self, d: Dim) -> u64 {
        self.order
            .iter()
            .take_while(|x| **x != d)
            .map(|x| self.size(*x))
            .product()
    }

    /// Resolve a spec for `devices` devices: `dp` fills the devices the other dimensions leave.
    /// `Err` is the reason the mapping is infeasible (a result, not an input error).
    pub fn resolve(
        spec: &MappingPlan,
        devices: u64,
        default_micro_batch: u64,
    ) -> Result<Mapping, String> {
        let placement = match &spec.stages {
            Some(st) => match Placement::from_stages(st) {
                Some(p) if p.n > 0 => p,
                _ => {
                    return Err(format!(
                        "the stages must form 1 to {MAX_STAGE_GROUPS} runs of equal stages"
                    ))
                }
            },
            None => Placement::default(),
        };
        let (tp, pp) = if placement.n > 0 {
            (placement.groups[0].devices.max(1), placement.stages())
        } else {
            (spec.tp.unwrap_or(1).max(1), spec.pp.unwrap_or(1).max(1))
        };
        let cp = spec.cp.unwrap_or(1).max(1);
        // a prefill pool takes its devices first; the instances fill the rest
        let pooled = spec.pool.devices();
        if pooled > 0 && pooled >= devices {
            return Err(format!(
                "the prefill pool's {pooled} devices ({} instances × tp {}) leave none of {devices} for decode",
                spec.pool.instances, spec.pool.tp
            ));
        }
        let devices = devices - pooled;
        let inner = if placement.n > 0 {
            placement.devices().max(1) * cp
        } else {
            tp * pp * cp
        };
        let dp = match spec.dp {
            Some(d) => d.max(1),
            None => {
                if !devices.is_multiple_of(inner) {
                    return Err(if placement.n > 0 {
                        format!("the stages' {inner} devices do not divide {devices} devices")
                    } else {
                        format!(
                            "tp × pp × cp = {tp} × {pp} × {cp} = {inner} does not divide {devices} devices"
                        )
                    });
                }
                devices / inner
            }
        };
        let m = Mapping {
            dp,
            tp,
            pp,
            ep: spec.ep.unwrap_or(1).max(1),
            etp: spec.etp.map(|e| e.max(1)),
            cp,
            sp: spec.sp.unwrap_or(tp > 1),
            zero: spec.zero.unwrap_or(1),
            shard: spec.shard.unwrap_or(0),
            // 0 (an inference default): requests per micro-batch chosen by lowering
            micro_batch: spec
                .micro_batch
                .map(|v| v.max(1))
                .unwrap_or(default_micro_batch),
            interleave: spec.interleave.unwrap_or(1).max(1),
            recompute: spec.recompute.unwrap_or(Recompute::None),
            recompute_layers: spec.recompute_layers.map(|n| n.max(1)),
            overlap_grad_reduce: spec.overlap_grad_reduce.unwrap_or(true),
            embedding_in_pipeline_split: spec.embedding_in_pipeline_split.unwrap_or(false),
            loss_in_pipeline_split: spec.loss_in_pipeline_split.unwrap_or(false),
            overlap: spec.overlap,
            order: match &spec.order {
                None => DEFAULT_ORDER,
                Some(o) => match <[Dim; 4]>::try_from(o.as_slice()) {
                    Ok(a) if DEFAULT_ORDER.iter().all(|d| a.contains(d)) => a,
                    _ => {
                        return Err(format!(
                            "`order` must name each of Tp, Cp, Dp, Pp once, found {o:?}"
                        ))
                    }
                },
            },
            placement,
            batch: 0,
            regions: spec.regions,
            pool: spec.pool,
            kernels: spec.kernels,
            offload_activation_layers: spec.offload_activation_layers.unwrap_or(0),
            offload_optimizer: spec.offload_optimizer.unwrap_or(0.0),
            offload_weights: spec.offload_weights.unwrap_or(false),
            expert_dispatch: spec.expert_dispatch.unwrap_or_default(),
            tp_overlap_method: spec.tp_overlap_method,
        };
        if m.recompute_layers.is_some() && m.recompute == Recompute::None {
            return Err(
                "`recompute_layers` names the layers that run `recompute`, and the mapping recomputes nothing (add e.g. `recompute: Full`)".into(),
            );
        }
        if m.shard > 0 {
            let n = m.dp * m.cp;
            if !n.is_multiple_of(m.shard) {
                return Err(format!(
                    "a shard group of {} ranks does not divide the dp × cp = {n} data-parallel ranks",
                    m.shard
                ));
            }
            if m.zero == 0 && m.shard < n {
                return Err(format!(
                    "a shard group of {} ranks shards nothing at ZeRO 0: set `zero` to 1-3",
                    m.shard
                ));
            }
        }
        if m.decode_devices() != devices {
            return Err(format!(
                "dp × tp × pp × cp = {} × {} × {} × {} = {} devices, but {} are available",
                m.dp,
                m.tp,
                m.pp,
                m.cp,
                m.decode_devices(),
                devices
            ));
        }
        if m.zero > 3 {
            return Err(format!("ZeRO stage {} does not exist (0-3)", m.zero));
        }
        if !(0.0..=1.0).contains(&m.offload_optimizer) {
            return Err(format!(
                "`offload_optimizer` is a fraction of the optimizer state (0 to 1), found {}",
                m.offload_optimizer
            ));
        }
        Ok(m)
    }
}
