//! The flat cost program and machine vector: the one form of the physics both backends evaluate.
//!
//! Lowering a workload under a mapping onto a system yields a [`Program`]: per-device work (FLOPs
//! by precision, bytes by data class, collectives with their groups) and a few scalars (micro-batch
//! count, bubble factor, memory footprint). A [`Machine`] holds every number of the system a sweep
//! may vary. `eval` in `cpu/` and the WGSL kernel read exactly these two.

use serde::Serialize;
use std::borrow::Cow;

/// An operator's or collective's report label: a literal where it can be (no allocation when a
/// program is lowered), a built string where it must be.
pub type Name = Cow<'static, str>;

/// Where an operator's work is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[repr(u32)]
pub enum Section {
    /// Once per micro-batch on one pipeline stage (multiplied by the pipeline schedule).
    MicroBatch = 0,
    /// Once per step (optimizer update, gradient reduction).
    Step = 1,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[repr(u32)]
pub enum Phase {
    Forward = 0,
    Backward = 1,
    Recompute = 2,
    Update = 3,
    /// The optimizer update run inside the external weight store (MemoryX) while the devices
    /// stream their weights from it: at the store's compute and memory bandwidth
    /// (`STORE_COMPUTE`, `STORE_MEMORY_BANDWIDTH`), off the devices' clock and power (the
    /// store's own power is `STORE_POWER`), exposed at the step's end.
    Store = 4,
    /// The optimizer update of the state offloaded to the node's host memory, run by the host's
    /// CPUs (Megatron-Core's `HybridDeviceOptimizer`, DeepSpeed's ZeRO-Offload): bound by the
    /// device's share of the host memory's bandwidth (`HOST_MEMORY_BANDWIDTH`; a fused Adam on
    /// tens of cores does about 12 FLOPs per 28 bytes it moves, so the CPUs' rate is not what
    /// limits it: an assumption), off the devices' clock and power, exposed at the step's end.
    Host = 5,
}

/// Which form of its stage's program a record belongs to. A training step on a system with a
/// weight store is lowered in both its forms at once (`lower::training::stream`): the weights on
/// the devices, or streamed layer by layer from the store that runs the optimizer update
/// (Cerebras' weight streaming). The records the two share are [`Form::Both`]; each evaluator
/// runs, per stage, the form that the stage's placement on the machine it evaluates selects
/// (`cpu::streams`), so a point whose capacities move the state into the store (or out of it) is
/// priced in the form a fresh lowering of that system would give. Readers outside the evaluators
/// see only the records that run (`cpu::running`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[repr(u32)]
pub enum Form {
    /// In both forms (every record of a program with one form).
    #[default]
    Both = 0,
    /// Only where the state stays on the devices (the update on the devices or the host, the
    /// gradient reduction and parameter gathers between replicas).
    OnDevice = 1,
    /// Only where the weights stream from the store (the update in the store, the stream's
    /// broadcast/reduce tree).
    Streamed = 2,
}

impl Form {
    /// Whether a record of this form runs in a stage that streams its weights (`streams`) or
    /// keeps them on its devices.
    #[inline]
    pub fn runs(self, streams: bool) -> bool {
        match self {
            Form::Both => true,
            Form::OnDevice => !streams,
            Form::Streamed => streams,
        }
    }
}

/// One operator, per device.
#[derive(Clone, Debug, Serialize)]
pub struct Op {
    pub name: Name,
    /// Runs on the matrix engines (else the vector engines).
    pub matrix: bool,
    pub precision: usize,
    pub flops: f64,
    /// Share of the matrix units' time its products keep busy with useful work, in (0, 1]: tile
    /// and wave quantization (`engine::tiling`), or for an attention core run at its kernel's
    /// published rate that rate's share of the dense-GEMM rate (`model::system::attention`);
    /// its compute time is its FLOPs over the rate × this. 1 for vector work and on devices
    /// without a tiling.
    pub occupancy: f64,
    /// Bytes of weights (or optimizer state) it reads or writes.
    pub weight_bytes: f64,
    /// Bytes of activations / KV cache it reads and writes.
    pub act_bytes: f64,
    /// Occurrences per section.
    pub count: f64,
    pub section: Section,
    pub phase: Phase,
    /// The form of the program it belongs to ([`Form::Both`] but in a program lowered in two).
    pub form: Form,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[repr(u32)]
pub enum CollKind {
    AllReduce = 0,
    AllGather = 1,
    ReduceScatter = 2,
    AllToAll = 3,
    Broadcast = 4,
    SendRecv = 5,
}

/// Which part of its time a collective can hide behind. The windows are shared through link
/// timelines (`cpu::schedule`): each link class is busy with one collective phase at a time, a
/// collective's phases run one after the other once each link is free, and a section lasts until
/// both its compute and the collectives it waits for are done, so a collective exposes what its
/// finish adds to the section's end (`cpu::extend`). A micro-batch's timeline takes its forward- and compute-overlapped collectives from its start,
/// then those behind its backward (which begins `busy − backward` into it, later by what the
/// forward collectives delayed); the step section's compute-overlapped collectives have their
/// own; the step's collectives behind the backward ride the last micro-batch's timeline, those
/// behind the forward the first's; with one micro-batch per step the two are one, and the
/// backward's start and the micro-batch's end move by what the forward waited (`Booking::pass`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[repr(u32)]
pub enum Overlap {
    None = 0,
    /// Behind the backward compute of the last micro-batch (gradient reduction).
    Backward = 1,
    /// Behind all compute of the section (prefetched weight gathers).
    Compute = 2,
    /// Behind the forward compute of the micro-batch (activations copied to host memory while
    /// the next layers run).
    Forward = 3,
    /// A step's collective spread over the backward passes of `count` micro-batches before the
    /// step's last, one call (of `bytes`) behind each: an interleaved pipeline schedule reduces
    /// each model chunk's gradients as soon as that chunk's last backward is done, while the
    /// later chunks' backwards still run (`dp::chunk_windows`). In a micro-batch section it is
    /// [`Overlap::Backward`].
    TailBackward = 4,
    /// A step's collective spread over the forward passes of the step's first `count`
    /// micro-batches, one call behind each: an interleaved schedule gathers each model chunk's
    /// updated parameters while the chunks before it run their first forwards. In a
    /// micro-batch section it is [`Overlap::Forward`].
    HeadForward = 5,
}

/// Where a collective is booked on a stage's link timelines and whose compute it takes cores
/// from, settled once from its [`Overlap`] and [`Section`] ([`Booking::of`]): the CPU evaluator
/// reads it through [`Comm::booking`] and the GPU kernel from its packed record, so neither
/// re-derives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[repr(u32)]
pub enum Booking {
    /// Hides behind nothing: its links' time is exposed.
    Exposed = 0,
    /// A micro-batch's collective behind that micro-batch's forward.
    MicroBatchForward = 1,
    /// A micro-batch's collective behind all of that micro-batch's compute.
    MicroBatch = 2,
    /// A step-section collective behind the step section's compute.
    Step = 3,
    /// A micro-batch's collective behind its backward.
    MicroBatchBackward = 4,
    /// A once-per-step collective riding the next step's first forward.
    StepForward = 5,
    /// A once-per-step collective behind the last micro-batch's backward.
    StepBackward = 6,
    /// A once-per-step collective spread over the backwards of `count` micro-batches before the
    /// last ([`Overlap::TailBackward`]).
    StepTailBackward = 7,
    /// A once-per-step collective spread over the forwards of the first `count` micro-batches
    /// ([`Overlap::HeadForward`]).
    StepHeadForward = 8,
}

impl Booking {
    /// Every booking, by code.
    pub const ALL: [Booking; 9] = [
        Booking::Exposed,
        Booking::MicroBatchForward,
        Booking::MicroBatch,
        Booking::Step,
        Booking::MicroBatchBackward,
        Booking::StepForward,
        Booking::StepBackward,
        Booking::StepTailBackward,
        Booking::StepHeadForward,
    ];

    /// The booking of a collective overlapped as `overlap` in `section`.
    pub fn of(overlap: Overlap, section: Section) -> Booking {
        match (overlap, section) {
            (Overlap::None, _) => Booking::Exposed,
            (Overlap::Forward | Overlap::HeadForward, Section::MicroBatch) => {
                Booking::MicroBatchForward
            }
            (Overlap::Compute, Section::MicroBatch) => Booking::MicroBatch,
            (Overlap::Compute, Section::Step) => Booking::Step,
            (Overlap::Backward | Overlap::TailBackward, Section::MicroBatch) => {
                Booking::MicroBatchBackward
            }
            (Overlap::Forward, Section::Step) => Booking::StepForward,
            (Overlap::Backward, Section::Step) => Booking::StepBackward,
            (Overlap::TailBackward, Section::Step) => Booking::StepTailBackward,
            (Overlap::HeadForward, Section::Step) => Booking::StepHeadForward,
        }
    }

    /// The pass of the evaluators' link timelines that books it (`cpu::PASSES`): 0, released at
    /// its section's start (and the exposed ones); 1, behind a micro-batch's backward; 2, the
    /// step's behind the next step's first forward; 3, the step's behind the last backward; 4,
    /// the step's spread over earlier backwards, on a copy of a micro-batch's timeline once its
    /// own collectives are booked; 5, the step's spread over the first forwards, on a copy of
    /// it once those released at its start are.
    pub fn pass(self) -> usize {
        match self {
            Booking::Exposed | Booking::MicroBatchForward | Booking::MicroBatch | Booking::Step => {
                0
            }
            Booking::MicroBatchBackward => 1,
            Booking::StepForward => 2,
            Booking::StepBackward => 3,
            Booking::StepTailBackward => 4,
            Booking::StepHeadForward => 5,
        }
    }

    /// The group whose compute window an overlapped collective takes cores from
    /// (`cpu::collective_tax`): a micro-batch's forward, its backward, the whole micro-batch;
    /// the step section; the forward or backward a step's collective rides; the backwards and
    /// the forwards a step's collective is spread over. `None`: exposed.
    pub fn tax_group(self) -> Option<usize> {
        match self {
            Booking::Exposed => None,
            Booking::MicroBatchForward => Some(0),
            Booking::MicroBatchBackward => Some(1),
            Booking::MicroBatch => Some(2),
            Booking::Step => Some(3),
            Booking::StepForward => Some(4),
            Booking::StepBackward => Some(5),
            Booking::StepTailBackward => Some(6),
            Booking::StepHeadForward => Some(7),
        }
    }
}

/// What a collective is for: policies (which collectives a framework overlaps) read this, never
/// the report label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Role {
    /// Tensor-parallel activation collectives (all-reduce, or all-gather / reduce-scatter with
    /// sequence parallelism), forward and backward, training and inference.
    TensorParallel,
    /// Backward tensor-parallel collectives of frozen (LoRA base) weights: no weight-gradient
    /// GEMMs to hide behind.
    FrozenTensorParallel,
    /// Context-parallel key/value gathers and their gradient reductions.
    ContextParallel,
    /// Activations (and their gradients) between pipeline stages.
    PipelineSendRecv,
    /// Data-parallel gradient reduction (all-reduce or ZeRO reduce-scatter), once per step.
    GradientReduction,
    /// Data-parallel all-gather of the updated parameters after the optimizer step (ZeRO 1, 2).
    ParameterGather,
    /// ZeRO-3 all-gather of the weights before their use: per micro-batch, or once per step
    /// under a pipeline schedule (`Mapping::weights_sharded_through_step`).
    WeightGather,
    /// Expert-parallel token dispatch and combine.
    ExpertAllToAll,
    /// Disaggregated serving: a prompt's KV cache from the prefill pool to its decode instance.
    KvTransfer,
    /// Activations copied to host memory in the forward pass and back before their backward.
    ActivationOffload,
    /// Optimizer offload: the gradients of the offloaded state copied to host memory for the
    /// host's update, and the updated master weights copied back, once per step.
    OptimizerOffload,
    /// Weight offload: each layer's weights copied in from host memory before its forward and
    /// its backward, and the updated weights back once per step.
    WeightOffload,
    /// The tensor-parallel collectives of LoRA adapters on sequence-parallel layers, issued by
    /// the adapter modules themselves outside the fused tensor-parallel overlap: exposed.
    LoraAdapter,
    /// A collective a graph workload states explicitly.
    Other,
}

impl Role {
    /// Whether the library that runs this collective drives it from the device's cores while
    /// compute runs beside it. NCCL (and RCCL) run every collective, point-to-point included,
    /// as kernels whose channels are thread blocks on the SMs (NCCL documentation,
    /// `NCCL_MIN_NCHANNELS` / `NCCL_MAX_NCHANNELS`: one block per channel): the data-parallel
    /// reductions and gathers, FSDP's, context-parallel and pipeline exchanges and the expert
    /// all-to-all (DeepSeek-V3's dispatch kernels keep 20 SMs, arXiv:2412.19437 §3.2.2).
    /// Transformer Engine's tensor-parallel overlap moves its all-gathers by ring exchange on
    /// the copy engines (TE `userbuffers`, `method: ring_exchange`; its pipelined
    /// reduce-scatters keep a few SMs, taken as none: an assumption), and host-link, weight-store
    /// and mesh transfers are DMA: none of these take cores.
    pub fn takes_cores(self) -> bool {
        !matches!(
            self,
            Role::TensorParallel
                | Role::FrozenTensorParallel
                | Role::LoraAdapter
                | Role::KvTransfer
                | Role::ActivationOffload
                | Role::OptimizerOffload
                | Role::WeightOffload
        )
    }

    /// The part of `collective_compute_share` this collective takes while it is overlapped,
    /// for a group spanning `outer` scale-up domains: none where it takes no cores, 1 for a
    /// collective (the share is an NCCL collective's 24 channels of the 132 SMs, parts/h100-sxm.ron
    /// `nccl-sms`), and for a point-to-point exchange between domains its channels over those
    /// 24: NCCL gives a network peer 2 channels (`NCCL_NCHANNELS_PER_NET_PEER`, default "2
    /// channels per NIC", NVIDIA/nccl src/graph/paths.cc `ncclTopoGetNchannels`), and a
    /// pipeline stage or a context-parallel ring rank talks to two peers at once (receive from
    /// the one before, send to the one after: TE's ring attention and Megatron's
    /// `batch_isend_irecv`): 4 channels, [`P2P_NET_CHANNELS`] / [`COLLECTIVE_CHANNELS`]. Over
    /// NVLink NCCL gives a peer 2 channels per link's worth of bandwidth (18 links on an H100:
    /// as many as a collective), so an exchange inside a domain takes the full share.
    pub fn core_share(self, outer: f64) -> f64 {
        if !self.takes_cores() {
            0.0
        } else if matches!(self, Role::PipelineSendRecv | Role::ContextParallel) && outer > 1.0 {
            P2P_NET_CHANNELS / COLLECTIVE_CHANNELS
        } else {
            1.0
        }
    }
}

/// The thread blocks (channels) an NCCL collective beside a GEMM launches on an H100, the
/// measurement `collective_compute_share` is (parts/h100-sxm.ron `nccl-sms`: 24 of 132 SMs).
pub const COLLECTIVE_CHANNELS: f64 = 24.0;

/// The channels a point-to-point exchange with two network peers runs on: 2 per network peer
/// (NCCL's default, NVIDIA/nccl src/graph/paths.cc) × a peer before and a peer after.
pub const P2P_NET_CHANNELS: f64 = 4.0;

/// One collective, per device. The group spans `inner` devices inside a scale-up domain and
/// `outer` domains (ranks in different domains talk over the scale-out network).
#[derive(Clone, Debug, Serialize)]
pub struct Comm {
    pub name: Name,
    pub role: Role,
    pub kind: CollKind,
    /// Payload: the full buffer size per device (all-reduce input, gathered output).
    pub bytes: f64,
    pub inner: f64,
    pub outer: f64,
    pub count: f64,
    pub section: Section,
    pub overlap: Overlap,
    /// Goes to the external weight store rather than to peers.
    pub weight_stream: bool,
    /// Goes to the node's host memory over the device's host link (activation offload): its
    /// coefficients are on [`Coeffs::host`] only.
    pub host: bool,
    /// Fraction of the device's scale-up bandwidth the ranks inside a domain can use: 1 through
    /// switches; on a 3D torus, the share of its dimensions the group spans; on a full mesh, the
    /// share of the links that lead to other members of the group.
    pub inner_share: f64,
    /// Cores along the on-chip mesh line the collective spans (a row of a wafer region); 0: a
    /// collective between devices. A mesh collective puts its coefficients on [`Coeffs::mesh`] only.
    pub mesh: f64,
    /// Its alpha-beta coefficients per link class, settled when it is built
    /// ([`Comm::with_coeffs`]); the evaluators read only these.
    pub coeffs: Coeffs,
    /// The form of the program it belongs to ([`Form::Both`] but in a program lowered in two).
    pub form: Form,
}

/// Latencies and bytes one call of a collective puts on one link class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Link {
    /// Number of link latencies on the critical path.
    pub latencies: f64,
    /// Bytes each device sends over the link.
    pub bytes: f64,
    /// 32-bit elements the busiest core of a streamed chain on a wafer's mesh relays in software
    /// (receives, adds and sends on, element by element), each taking the software stack's
    /// `mesh_relay_time`; the chain streams at the slower of that and its link. 0 on every other
    /// link.
    pub relayed: f64,
    /// Bytes × hops the collective moves over the wafer's mesh, summed over every link it uses on
    /// a device (each byte counted once per hop it crosses): what the mesh's energy per bit-hop
    /// is charged on. 0 on every other link (their energy is per byte sent).
    pub hop_bytes: f64,
}

/// A collective as alpha-beta coefficients per link class. The time on a link class is
/// `latencies × latency + bytes / (bandwidth × network efficiency × share)` (the share applies to
/// the scale-up link only); the classes add (hierarchical algorithms run their phases one after
/// the other) or, with `overlapped`, the slowest bounds it (all-to-all drives both at once).
/// `up[1]` and `out[1]` hold the coefficients with in-network reduction on that tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Coeffs {
    pub up: [Link; 2],
    pub out: [Link; 2],
    /// To the external weight store (over its own link, charged no link energy).
    pub ext: Link,
    /// On the device's own 2D mesh of cores: `latencies` hops × the mesh hop latency, `bytes`
    /// through the busiest link of the critical path / the mesh link bandwidth (no network
    /// efficiency: a core's router moves one word per cycle in hardware).
    pub mesh: Link,
    /// Over the device's link to its node's host memory (`HOST_BANDWIDTH`, `HOST_LATENCY`).
    pub host: Link,
    pub overlapped: bool,
    /// Its kernels run as thread blocks on the device's cores while it is overlapped (NCCL's
    /// channels), so it takes this part of `collective_compute_share` of the compute it hides
    /// behind (`cpu::collective_tax`): 0 (DMA, copy engines), 1 (a collective), or a
    /// point-to-point exchange's few channels; settled from its role and group
    /// ([`Role::core_share`]).
    pub cores: f64,
}

/// Bytes per device that must fit in memory, by class.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Footprint {
    pub weights: f64,
    pub gradients: f64,
    pub optimizer: f64,
    pub activations: f64,
    pub kv_cache: f64,
    /// What the device keeps in the node's host memory (`HOST_CAPACITY`): offloaded activations
    /// and optimizer state. Not on the device, so in none of the totals below.
    pub offloaded: f64,
    /// The system's execution mode keeps the state in its weight store and streams the weights
    /// (Cerebras weight streaming) wherever the store holds it, even where it would fit on the
    /// devices (`System::execution`).
    pub streamed: bool,
}

impl Footprint {
    /// Model state: what a weight store could hold instead of the device.
    pub fn state(&self) -> f64 {
        self.weights + self.gradients + self.optimizer
    }
    pub fn working(&self) -> f64 {
        self.activations + self.kv_cache
    }
    pub fn total(&self) -> f64 {
        self.state() + self.working()
    }
}

/// The most stage classes a program may have (the WGSL kernel keeps one energy sum per class).
pub const MAX_STAGES: usize = 8;

/// A class of identical pipeline stages: `repeat` stages one after the other, each on `devices`
/// devices (over all data-parallel replicas), running the operators `ops` and the collectives
/// `comms` of the program once per micro-batch (and the step section once per step), holding
/// `footprint` per device. A round of `micro_batches` micro-batches through the stages takes
/// the longer of the pipelined time (micro-batches × the slowest stage, plus the bubble) and the
/// chain (every stage once, one after the other: one micro-batch's way through the pipeline);
/// the step section is bounded by its slowest stage (the stages work on it concurrently).
///
/// A stage class with `pool` set is a **concurrent pool** outside that chain (disaggregated
/// serving's prefill pool): its devices work beside the pipeline on work of their own, which
/// the pipeline's round waits for only where it is longer. Its time per round is its
/// micro-batch section × micro-batches plus its step section (its collectives hide behind its
/// own compute only); the round is the longer of the pipeline's round (as above, over the
/// stages without `pool`, whose chain, slowest stage and step section it leaves out) and the
/// slowest pool's time; where the pool's is longer, the round's breakdown is the pool's. Its
/// devices count in power and energy with their own demand at their own clock, as any stage's
/// (each class runs at the highest clock its devices' power limit allows, `cpu::Demand`). A
/// program has at least one stage without `pool`.
#[derive(Clone, Debug, Serialize)]
pub struct Stage {
    pub name: Name,
    pub ops: std::ops::Range<usize>,
    pub comms: std::ops::Range<usize>,
    pub repeat: f64,
    pub devices: f64,
    pub footprint: Footprint,
    /// A concurrent pool outside the pipeline's chain (see above).
    pub pool: bool,
    /// Micro-batches each stage of the class passes on per micro-batch it runs: 1 for a stage of
    /// an inference pipeline over more than one stage (÷ the tokens a round gains under
    /// speculative decoding), 0 otherwise. Each costs the software stack's
    /// `pipeline_stage_time`, added to the stage's micro-batch.
    pub hands_on: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Program {
    pub ops: Vec<Op>,
    pub comms: Vec<Comm>,
    /// Pipeline stage classes (at most [`MAX_STAGES`]); empty: one stage of all operators on
    /// all [`Program::devices`] with [`Program::footprint`].
    pub stages: Vec<Stage>,
    /// Micro-batches per step through one pipeline.
    pub micro_batches: f64,
    /// Pipeline bubble in units of one micro-batch's stage time: (pp − 1) / interleave where the
    /// schedule allows it (`lower::training::pipeline_bubble`).
    pub bubble: f64,
    /// Per device; with stages, the largest stage's.
    pub footprint: Footprint,
    /// Devices this program runs on.
    pub devices: f64,
    /// Work units per step for throughput (tokens, samples, output tokens).
    pub units_per_step: f64,
    pub unit: &'static str,
    /// Model FLOPs per step over all devices (for MFU).
    pub model_flops_per_step: f64,
    /// Precision whose peak MFU is measured against.
    pub mfu_precision: usize,
    /// Steps to reach the training target, if one is set.
    pub steps: Option<f64>,
    /// Optimizer steps of the software stack per program step (1 for a training step, 0 where
    /// a step is no optimizer step: a serving round, a kernel graph's run): each adds the
    /// machine's `step_overhead`, a time outside the devices' work in which they draw their
    /// static power.
    pub host_steps: f64,
}

impl Program {
    /// The stage classes, or the one implicit stage of a program without any.
    pub fn stage_list(&self) -> Cow<'_, [Stage]> {
        if self.stages.is_empty() {
            Cow::Owned(vec![Stage {
                name: "all".into(),
                ops: 0..self.ops.len(),
                comms: 0..self.comms.len(),
                repeat: 1.0,
                devices: self.devices,
                footprint: self.footprint,
                pool: false,
                hands_on: 0.0,
            }])
        } else {
            Cow::Borrowed(&self.stages)
        }
    }
}

pub use super::table::Machine;

/// Where a data class lives for one design point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Sram,
    #[default]
    Hbm,
    External,
}

/// Time split of a step (seconds); they add up to the step time.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Breakdown {
    pub compute: f64,
    pub memory: f64,
    pub communication: f64,
    pub bubble: f64,
    pub other: f64,
}

impl Breakdown {
    pub fn total(&self) -> f64 {
        self.compute + self.memory + self.communication + self.bubble + self.other
    }
    fn scaled(&self, k: f64) -> Breakdown {
        Breakdown {
            compute: self.compute * k,
            memory: self.memory * k,
            communication: self.communication * k,
            bubble: self.bubble * k,
            other: self.other * k,
        }
    }
    pub fn add(&mut self, o: &Breakdown) {
        self.compute += o.compute;
        self.memory += o.memory;
        self.communication += o.communication;
        self.bubble += o.bubble;
        self.other += o.other;
    }
    pub fn scale(&self, k: f64) -> Breakdown {
        self.scaled(k)
    }
}

/// What one evaluation of a program on a machine yields.
#[derive(Clone, Debug, Serialize)]
pub struct Eval {
    pub feasible: bool,
    /// Point code of the infeasibility reason (0 = feasible): see [`super::reason::point`].
    pub reason_code: u8,
    pub step_time: f64,
    pub breakdown: Breakdown,
    /// Energy of one step, all devices used plus their share of overheads, facility included (J).
    pub energy_per_step: f64,
    pub average_power: f64,
    pub throughput: f64,
    pub mfu: f64,
    pub weights_tier: Tier,
    pub working_tier: Tier,
    /// Per-device bytes needed / available in the tier that binds, for messages (for a power
    /// cap: the watts the device needs at its lowest clock, and its limit).
    pub needed_bytes: f64,
    pub available_bytes: f64,
    /// The clock of the most throttled stage class's devices, as a fraction of full clock (× the
    /// share of the step they work where they duty-cycle): below 1 where a power limit throttles.
    pub throttle: f64,
    /// Power of one device of the class that draws the most (W).
    pub device_power: f64,
    /// Power one device of the class that demands the most would draw at full clock (W): above
    /// its limit where throttled.
    pub demand_power: f64,
    /// The memory that did not fit is the host's (offloaded activations): `needed_bytes` and
    /// `available_bytes` are then its figures.
    pub host_memory: bool,
}

impl Eval {
    /// Why the point is infeasible (`None` when feasible).
    pub fn reason(&self) -> Option<super::reason::Reason> {
        use super::reason::Reason;
        match Reason::of_point(self.reason_code, self.needed_bytes, self.available_bytes) {
            Some(Reason::Memory {
                needed, available, ..
            }) => Some(Reason::Memory {
                needed,
                available,
                host: self.host_memory,
            }),
            r => r,
        }
    }
}

#[cfg(test)]
mod booking_tests {
    use super::{Booking, Overlap, Section};

    /// Each overlap in each section books one distinct way (a spread one in a micro-batch
    /// section as the overlap it spreads); only a collective overlapped with nothing is
    /// exposed, and only an exposed one takes no cores from any compute window.
    #[test]
    fn every_overlap_and_section_books_once() {
        let mut seen = Vec::new();
        for o in [
            Overlap::None,
            Overlap::Backward,
            Overlap::Compute,
            Overlap::Forward,
            Overlap::TailBackward,
            Overlap::HeadForward,
        ] {
            for s in [Section::MicroBatch, Section::Step] {
                let b = Booking::of(o, s);
                assert_eq!(b == Booking::Exposed, o == Overlap::None);
                assert_eq!(b.tax_group().is_none(), o == Overlap::None);
                assert!(Booking::ALL.contains(&b));
                let spread_in_micro_batch = s == Section::MicroBatch
                    && matches!(o, Overlap::TailBackward | Overlap::HeadForward);
                if o != Overlap::None && !spread_in_micro_batch {
                    assert!(!seen.contains(&b), "{o:?} {s:?} books as another pair does");
                }
                seen.push(b);
            }
        }
        // the step's collectives that ride a micro-batch get their own passes (2, 3)
        assert_eq!(Booking::of(Overlap::Forward, Section::Step).pass(), 2);
        assert_eq!(Booking::of(Overlap::Backward, Section::Step).pass(), 3);
        assert_eq!(Booking::of(Overlap::TailBackward, Section::Step).pass(), 4);
        assert_eq!(Booking::of(Overlap::HeadForward, Section::Step).pass(), 5);
        assert_eq!(
            Booking::of(Overlap::TailBackward, Section::MicroBatch),
            Booking::MicroBatchBackward
        );
        assert_eq!(
            Booking::of(Overlap::Backward, Section::MicroBatch).pass(),
            1
        );
        for (i, b) in Booking::ALL.iter().enumerate() {
            assert_eq!(*b as usize, i);
        }
    }
}
