//! The full estimate of one prepared request: its figures (the `--format json` contract of
//! estimate, compare and scale), the bottleneck and where the data lives; or infeasible with its
//! reason and reason code.

use super::cpu;
use super::program::{self, Breakdown, Eval};
use super::reason::Reason;
use super::serve;
use crate::model::mapping::{Mapping, Recompute};
use crate::model::system::System;
use crate::model::workload::{Task, Workload};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct MappingReport {
    pub dp: u64,
    pub tp: u64,
    pub pp: u64,
    pub ep: u64,
    /// Expert tensor parallelism in effect (`tp` unless the mapping writes `etp`).
    pub etp: u64,
    pub cp: u64,
    pub sp: bool,
    pub zero: u8,
    /// The ranks ZeRO shares the model state out over: dp × cp, unless hybrid sharding makes
    /// it a smaller group (`Mapping::shard_group`).
    pub shard: u64,
    pub micro_batch: u64,
    pub interleave: u64,
    pub recompute: Recompute,
    /// Training: the layers of each model chunk that run `recompute` (Megatron-Core's block
    /// method), where the mapping names fewer than all; absent: every layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recompute_layers: Option<u64>,
    /// Inference pipelines: the stages per model instance (runs of equal stages), when the
    /// mapping places layers stage by stage.
    pub stages: Option<String>,
    /// Training pipelines: the input embedding and the loss each counted as a layer when the
    /// layers are split over the stages (Megatron-Core's asymmetric split).
    pub embedding_in_pipeline_split: bool,
    pub loss_in_pipeline_split: bool,
    /// Transformer inference, disaggregated: the prefill pool (`None`: the prefill interleaved
    /// into the decode rounds); `dp`, `tp`, `pp` are then the decode instances'.
    pub prefill_pool: Option<crate::model::mapping::Pool>,
    /// Transformer inference: how the serving stack launches a decode layer (`separate`,
    /// `fused`, `compiled`: the mapping's choice, else the device's; `vocab::Kernels`).
    pub kernels: Option<crate::vocab::Kernels>,
    /// Training: transformer layers per pipeline stage whose activations are offloaded to the
    /// node's host memory (0: none).
    pub offload_activation_layers: u64,
    /// Training: the fraction of each device's optimizer state kept and updated in the node's
    /// host memory (0: none).
    pub offload_optimizer: f64,
    /// Training: the layers' weights kept in the node's host memory and copied in per layer.
    pub offload_weights: bool,
    /// Expert parallelism's dispatcher (`alltoall`, `hierarchical`: `vocab::Dispatch`).
    pub expert_dispatch: crate::vocab::Dispatch,
    /// Training with userbuffer tensor-parallel overlap in effect: how the row-parallel forward
    /// GEMMs are overlapped with their reduce-scatters (`pipeline`, `ring_exchange`:
    /// `vocab::TpOverlapMethod`, as written or as NeMo's presets choose for the run's GEMM
    /// precision); absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tp_overlap_method: Option<crate::vocab::TpOverlapMethod>,
    /// The order the parallel dimensions are laid over the devices, innermost (nearest links)
    /// first: `["Tp", "Cp", "Dp", "Pp"]` is Megatron's.
    pub order: [crate::vocab::Dim; 4],
    /// Inference on a wafer whose mapping states core regions: the block of cores, `[columns,
    /// rows]`, each phase runs a layer on, as chosen inside the stated region (the fastest square
    /// block within it); absent where no region is stated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regions: Option<crate::model::mapping::Regions>,
}

impl MappingReport {
    /// The shard group where hybrid sharding makes it smaller than dp × cp (`Mapping::hybrid_shard`).
    pub fn hybrid_shard(&self) -> Option<u64> {
        (self.shard < self.dp * self.cp).then_some(self.shard)
    }

    /// The core blocks a wafer's phases run on, where the mapping states regions: "prefill 660 ×
    /// 660, decode 336 × 336".
    pub fn core_regions(&self) -> Option<String> {
        let r = self.regions?;
        let block =
            |phase: &str, b: Option<(u64, u64)>| b.map(|(a, c)| format!("{phase} {a} × {c}"));
        let parts: Vec<String> = [block("prefill", r.prefill), block("decode", r.decode)]
            .into_iter()
            .flatten()
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// The order, where it is not Megatron's (`mapping::DEFAULT_ORDER`), innermost first.
    pub fn unusual_order(&self) -> Option<String> {
        (self.order != crate::model::mapping::DEFAULT_ORDER).then(|| {
            self.order
                .iter()
                .map(|d| format!("{d:?}").to_lowercase())
                .collect::<Vec<_>>()
                .join(" < ")
        })
    }
}

impl From<&Mapping> for MappingReport {
    fn from(m: &Mapping) -> Self {
        MappingReport {
            dp: m.dp,
            tp: m.tp,
            pp: m.pp,
            ep: m.ep,
            etp: m.etp(),
            cp: m.cp,
            sp: m.sp,
            zero: m.zero,
            shard: m.shard_group(),
            micro_batch: m.micro_batch,
            interleave: m.interleave,
            recompute: m.recompute,
            recompute_layers: m.recompute_layers,
            stages: (m.placement.n > 0).then(|| m.placement.describe()),
            embedding_in_pipeline_split: m.embedding_in_pipeline_split,
            loss_in_pipeline_split: m.loss_in_pipeline_split,
            prefill_pool: m.pool.any().then_some(m.pool),
            kernels: m.kernels,
            offload_activation_layers: m.offload_activation_layers,
            offload_optimizer: m.offload_optimizer,
            offload_weights: m.offload_weights,
            expert_dispatch: m.expert_dispatch,
            tp_overlap_method: None,
            order: m.order,
            regions: m.regions.any().then_some(m.regions),
        }
    }
}

/// One estimate: a feasible result with its figures, or infeasible with a reason. Keys of the
/// `--format json` contract; SI units.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    pub system: String,
    pub workload: String,
    /// The software stack the run executes on (`--software`, a case's `run.software`), when one
    /// is named: its per-step time is in the breakdown's `other`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub software: Option<String>,
    /// The system's execution mode as its vendor runs it, where its file states one and the run
    /// keeps it (`--execution vendor`): e.g. "trains dp parallel only; weights streamed from the
    /// weight store". Null: none stated, or lifted.
    pub execution_mode: Option<String>,
    /// Training: samples per optimizer step as run (grown with the deployment where the workload
    /// scales it and a comparison sized the system to a budget).
    pub global_batch: Option<u64>,
    /// Training: the batch the workload states, where the run's was scaled from it (null: not
    /// scaled).
    pub global_batch_scaled_from: Option<u64>,
    /// That stack's figures that are not zero, keyed with their units (`pipeline_stage_time_s`,
    /// `mesh_relay_time_s`, `step_overhead_s`, `memory_reserve_bytes`; `Software::figures`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub software_figures: Option<std::collections::BTreeMap<String, f64>>,
    /// The attention kernel that stack names (`attention_kernel`), whose published rates a fused
    /// attention core runs at; absent: none named, the core runs at the dense-GEMM rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention_kernel: Option<String>,
    pub feasible: bool,
    pub reason: Option<String>,
    /// The stable code of `reason` (see [`Reason::code`]).
    pub reason_code: Option<&'static str>,
    pub step_time_s: Option<f64>,
    pub throughput_per_s: Option<f64>,
    pub throughput_unit: &'static str,
    pub time_to_train_s: Option<f64>,
    pub mfu: Option<f64>,
    pub average_power_w: Option<f64>,
    /// What the run deploys at its rated power, at the same boundary (W): the whole nodes its
    /// devices occupy, devices at TDP, every other part at its rating, × PUE at `facility`
    /// ([`super::rated::rated_power`], `show`'s rule): what a facility must provision.
    pub rated_power_w: Option<f64>,
    /// The validation evidence behind the throughput and times: the check-set error spread of
    /// the system's hardware family for this task ([`crate::validate::bands`]); null where no
    /// check case covers it (unvalidated). The front ends attach it, from the shipped bands.
    pub error_band: Option<crate::model::band::Band>,
    /// Whole run with a training target, else one step.
    pub energy_j: Option<f64>,
    pub energy_per_step_j: Option<f64>,
    pub breakdown_s: Option<Breakdown>,
    pub bottleneck: Option<String>,
    /// The op or collective that takes the most time inside the bottleneck's category, with its
    /// share of the step.
    pub bottleneck_detail: Option<String>,
    pub mapping: Option<MappingReport>,
    pub devices: u64,
    /// Devices of the request the chosen mapping leaves idle (0 unless `--mapping auto` found the
    /// job faster on fewer: a global batch that does not spread over all of them). They are not
    /// counted in power or energy: a scheduler gives them to other work.
    pub idle_devices: u64,
    pub scaling_efficiency: Option<f64>,
    /// Where model state and working data live (sram, hbm, external).
    pub placement: Option<String>,
    pub memory_per_device_bytes: Option<f64>,
    /// What each device keeps in its node's host memory (offloaded activations, optimizer state
    /// and weights); 0 without offload.
    pub host_memory_per_device_bytes: Option<f64>,
    /// With `--mapping auto`: how many mappings the search evaluated (null for a given mapping).
    pub mappings_tried: Option<usize>,
    pub perf_per_watt: Option<f64>,
    /// Energy per unit of work (J per token or sample), facility included.
    pub energy_per_unit_j: Option<f64>,
    /// Inference: time between a user's output tokens (one decode round, prefill amortised).
    pub latency_per_token_s: Option<f64>,
    /// Which parts `average_power_w` and the energies count: `device`, `node`, `rack`, `it` or
    /// `facility` (× PUE).
    pub power_boundary: &'static str,
    /// The device's power limit throttled its clock (its demand at full clock is above it).
    pub power_limited: Option<bool>,
    /// The device's clock as a fraction of full clock (1 unless power-limited; in a pipeline
    /// whose stage classes run at clocks of their own, the lowest).
    pub throttle: Option<f64>,
    /// Power of one device at its operating point (W), the device alone.
    pub device_power_w: Option<f64>,
    /// What one device would draw at full clock (W): above its limit when power-limited.
    pub demanded_device_power_w: Option<f64>,
    /// The device's power limit (W): its TDP, or its share of a node or facility limit.
    pub device_power_limit_w: Option<f64>,
    /// Serving (transformer inference, `engine::serve`): requests in flight over the system.
    pub concurrency: Option<u64>,
    /// Serving: tokens of each request's prompt and output.
    pub prompt_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// Serving: time to first token (s), the prompt's prefill and the round it shares.
    pub ttft_s: Option<f64>,
    /// Serving: time per output token (s), one steady-state round (= `latency_per_token_s`).
    pub tpot_s: Option<f64>,
    /// Serving: output tokens/s each user sees (1 / `tpot_s`).
    pub user_tokens_per_s: Option<f64>,
    /// Serving: output tokens/s over the system (= `throughput_per_s`).
    pub system_tokens_per_s: Option<f64>,
    /// Serving: one prompt's prefill alone on its instance (s).
    pub prefill_time_s: Option<f64>,
    /// Serving: the most requests in flight whose paged KV cache fits (also when infeasible).
    pub max_concurrency: Option<u64>,
    /// Serving: the latency target, as `ttft<=2 s,tpot<=40 ms` (none: `None`).
    pub slo: Option<String>,
    /// Serving: the figures meet `slo`.
    pub slo_met: Option<bool>,
    /// Serving with requests arriving at random (Poisson, `engine::serve::tail`): time to first
    /// token at the 99th percentile, or at the target's percentile where it states one (s).
    pub ttft_p99_s: Option<f64>,
    /// Serving: a request's time per output token at the same percentile (s).
    pub tpot_p99_s: Option<f64>,
    /// Serving: requests arriving per second over the system (all instances).
    pub arrival_rate_per_s: Option<f64>,
    /// Serving: the share of its time each instance's prefill works (≥ 1: saturated);
    /// disaggregated, each prefill pool instance's.
    pub utilization: Option<f64>,
    /// Serving: the prefill runs on a separate pool (`mapping.prefill_pool`) rather than
    /// interleaved into the decode rounds.
    pub disaggregated: Option<bool>,
    /// Serving, disaggregated: devices of the prefill pool (counted in `devices`, power and
    /// energy).
    pub prefill_pool_devices: Option<u64>,
    /// Training with a precision schedule: each phase's share of the steps, its precision and
    /// its step (the run's own precision last, for the steps the schedule leaves); the
    /// estimate's per-step figures are then the run's means (`step_time_s` = time to train /
    /// steps). Null without a schedule.
    pub precision_schedule: Option<Vec<PhaseReport>>,
    /// What a unit of the work costs (USD): per training run with a training target, else per
    /// million tokens (samples) served or trained (`cost.per` names it); capital share plus
    /// energy share. Null where the system file gives no capital figures (`cost.unknown_reason`
    /// says so) or the estimate is infeasible.
    pub cost_per_unit_usd: Option<f64>,
    /// Carbon of the same unit (kg CO2e): operational, plus embodied where the file gives it
    /// (`cost.carbon_scope`).
    pub carbon_kg_co2e: Option<f64>,
    /// Water the same unit consumes (litres): on site, cooling at the facility's WUE, and off
    /// site, generating its electricity (`cost.water_onsite_l`, `cost.water_offsite_l`).
    pub water_l: Option<f64>,
    /// The parts of all three ([`super::cost::CostReport`]).
    pub cost: Option<super::cost::CostReport>,
    /// Training on a system that states its reliability and checkpoint storage: the goodput
    /// with failures, checkpoints and stragglers (`engine::goodput`); null otherwise (serving
    /// included: a serving system's availability is not modelled).
    pub goodput: Option<super::goodput::Goodput>,
    /// The system's figures by where they come from: `sourced` (a datasheet, paper or result
    /// named in its file), `assumed` (marked `@assumed`, copied from another part's fit, or
    /// unsourced), `fitted` (to validation cases) and `defaulted` (left out of the file, taken
    /// at the model's default): how much of this estimate rests on guesses.
    pub figures: crate::model::Figures,
}

/// A training workload's global batch as run, and the stated one where it was scaled.
fn batch(w: &Workload) -> (Option<u64>, Option<u64>) {
    match &w.task {
        crate::model::workload::Task::Training(t) => (Some(t.global_batch), t.scaled_from),
        _ => (None, None),
    }
}

/// The attention kernel a training run's core runs at, as its lowering reads it
/// (`lower::named_attention_kernel`); `None` for inference, which runs no such kernel.
fn attention_kernel(sys: &System, w: &Workload) -> Option<String> {
    match &w.task {
        crate::model::workload::Task::Training(t) => {
            crate::engine::lower::named_attention_kernel(sys, t).map(str::to_string)
        }
        _ => None,
    }
}

/// One phase of a training run's precision schedule, as estimated.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    pub share: f64,
    pub compute: &'static str,
    pub scaling: crate::vocab::Scaling,
    pub step_time_s: f64,
    pub energy_per_step_j: f64,
}

impl Estimate {
    pub fn infeasible(
        sys: &System,
        w: &Workload,
        devices: u64,
        mapping: Option<&Mapping>,
        reason: &Reason,
        unit: &'static str,
    ) -> Self {
        Estimate {
            system: sys.name.clone(),
            workload: w.name.clone(),
            software: sys.software.as_ref().map(|s| s.name.clone()),
            execution_mode: sys.execution.line(w),
            global_batch: batch(w).0,
            global_batch_scaled_from: batch(w).1,
            software_figures: sys.software.as_ref().map(|s| s.figures()),
            attention_kernel: attention_kernel(sys, w),
            feasible: false,
            reason: Some(reason.to_string()),
            reason_code: Some(reason.code()),
            step_time_s: None,
            throughput_per_s: None,
            throughput_unit: unit,
            time_to_train_s: None,
            mfu: None,
            average_power_w: None,
            rated_power_w: None,
            error_band: None,
            energy_j: None,
            energy_per_step_j: None,
            breakdown_s: None,
            bottleneck: None,
            bottleneck_detail: None,
            mapping: mapping.map(Into::into),
            devices,
            idle_devices: 0,
            scaling_efficiency: None,
            placement: None,
            memory_per_device_bytes: None,
            host_memory_per_device_bytes: None,
            mappings_tried: None,
            perf_per_watt: None,
            latency_per_token_s: None,
            energy_per_unit_j: None,
            power_boundary: crate::choice::Choice::name(sys.power_boundary),
            figures: sys.figures,
            power_limited: None,
            throttle: None,
            device_power_w: None,
            demanded_device_power_w: None,
            device_power_limit_w: None,
            concurrency: None,
            prompt_tokens: None,
            output_tokens: None,
            ttft_s: None,
            tpot_s: None,
            user_tokens_per_s: None,
            system_tokens_per_s: None,
            prefill_time_s: None,
            max_concurrency: None,
            slo: slo_text(w),
            slo_met: None,
            ttft_p99_s: None,
            tpot_p99_s: None,
            arrival_rate_per_s: None,
            utilization: None,
            disaggregated: None,
            prefill_pool_devices: None,
            precision_schedule: None,
            cost_per_unit_usd: None,
            carbon_kg_co2e: None,
            water_l: None,
            cost: None,
            goodput: None,
        }
    }
}

/// A training run's precision schedule, evaluated: each phase (`Training::phases`) with its share
/// of the steps, its task, its program on the run's mapping and machine, and its evaluation.
type Phases = Vec<(
    f64,
    crate::model::workload::Training,
    program::Program,
    Eval,
)>;

/// Each phase of `w`'s precision schedule lowered on mapping `m` and evaluated on `mach`: `None`
/// without a schedule, the first phase that cannot run as its reason.
fn scheduled(
    sys: &System,
    w: &Workload,
    m: &Mapping,
    mach: &program::Machine,
) -> Option<Result<Phases, Reason>> {
    let Task::Training(tr) = &w.task else {
        return None;
    };
    if tr.precision_schedule.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for (share, phase) in tr.phases() {
        let wp = Workload {
            task: Task::Training(phase.clone()),
            ..w.clone()
        };
        let p = match super::lower::lower(sys, &wp, m, m.devices()) {
            Ok(p) => p,
            Err(r) => return Some(Err(r)),
        };
        let e = cpu::eval(&p, mach);
        if let Some(r) = e.reason() {
            return Some(Err(r));
        }
        out.push((share, phase, p, e));
    }
    Some(Ok(out))
}

/// The run's mean step over its phases: times, breakdowns and energies weighted by the phases'
/// shares of the steps (so time to train and energy are the sums over the phases), power the
/// energy over the time, the device's power weighted by time, its clock the lowest of any phase.
fn mean_step(phases: &Phases, units: f64) -> Eval {
    // the run's own precision is the last phase (`Training::phases`): MFU is against its peak
    let own = &phases[phases.len() - 1].3;
    let mut e = own.clone();
    let (mut t, mut energy, mut device, mut demand) = (0.0, 0.0, 0.0, 0.0f64);
    let mut b = Breakdown::default();
    for (share, _, _, x) in phases {
        t += share * x.step_time;
        energy += share * x.energy_per_step;
        device += share * x.step_time * x.device_power;
        demand = demand.max(x.demand_power);
        b.add(&x.breakdown.scale(*share));
        e.throttle = e.throttle.min(x.throttle);
    }
    e.mfu = own.mfu * own.step_time / t;
    e.step_time = t;
    e.breakdown = b;
    e.energy_per_step = energy;
    e.average_power = energy / t;
    e.throughput = units / t;
    e.device_power = device / t;
    e.demand_power = demand;
    e
}

fn slo_text(w: &Workload) -> Option<String> {
    let slo = super::serve::load_of(w).slo;
    (!slo.is_empty()).then(|| slo.describe())
}

/// The item `bottleneck_detail` names: the op or collective that takes the most of the step
/// inside the bottleneck's category (`bottleneck`, the largest category summed over its items,
/// every region's mesh reductions together): a collective for `communication`, an op bound by
/// compute or memory for those, any item for the rest (or where the category has none).
fn detail(
    p: &program::Program,
    m: &program::Machine,
    e: &Eval,
    trace: &[f64],
    category: Option<&str>,
) -> Option<String> {
    use program::Phase;
    let n_ops = p.ops.len();
    // (only the records of the form each stage runs on this machine)
    let running = cpu::running(p, m);
    let category_of = |i: usize| -> &'static str {
        let Some(op) = p.ops.get(i) else {
            return "communication";
        };
        if matches!(op.phase, Phase::Store | Phase::Host) {
            return "other";
        }
        match cpu::op_time(op, m, e.weights_tier, e.working_tier) {
            Some(t) if t.compute >= t.memory => "compute",
            Some(_) => "memory",
            None => "other",
        }
    };
    let largest = |want: Option<&str>| {
        trace
            .iter()
            .enumerate()
            .filter(|(i, t)| {
                **t > 0.0 && running.record(*i) && want.is_none_or(|w| category_of(*i) == w)
            })
            .max_by(|a, b| a.1.total_cmp(b.1))
    };
    let (i, t) = largest(category).or_else(|| largest(None))?;
    let name: &str = match p.ops.get(i) {
        Some(op) => op.name.as_ref(),
        None => p.comms[i - n_ops].name.as_ref(),
    };
    Some(format!(
        "{name} ({:.0}% of the step)",
        100.0 * t / e.step_time
    ))
}

/// Build the full estimate from a program and its evaluation.
pub fn finish(
    sys: &System,
    w: &Workload,
    m: &Mapping,
    p: &program::Program,
    mach: &program::Machine,
) -> Estimate {
    let phases = match scheduled(sys, w, m, mach) {
        Some(Err(r)) => return Estimate::infeasible(sys, w, m.devices(), Some(m), &r, p.unit),
        Some(Ok(ph)) => Some(ph),
        None => None,
    };
    // With a schedule, the phase that takes the most of the run names the bottleneck and the
    // placement; the memory is the largest any phase needs.
    let dominant = phases.as_ref().and_then(|ph| {
        ph.iter()
            .max_by(|a, b| (a.0 * a.3.step_time).total_cmp(&(b.0 * b.3.step_time)))
    });
    let footprint = phases.as_ref().map_or(p.footprint.total(), |ph| {
        ph.iter().map(|x| x.2.footprint.total()).fold(0.0, f64::max)
    });
    let p = dominant.map_or(p, |d| &d.2);
    let mut trace = Vec::new();
    let e: Eval = cpu::eval_traced(p, mach, Some(&mut trace));
    let devices = m.devices();
    let max_concurrency = serve::max_concurrency(sys, w, m, devices);
    if let Some(r) = e.reason() {
        let mut est = Estimate::infeasible(sys, w, devices, Some(m), &r, p.unit);
        est.max_concurrency = max_concurrency;
        return est;
    }
    let sv = serve::figures(sys, w, m, devices, &e, mach);
    let slo = serve::load_of(w).slo;
    let traced = e.clone();
    let e = match &phases {
        Some(ph) => mean_step(ph, p.units_per_step),
        None => e,
    };
    let b = e.breakdown;
    let bottleneck = [
        ("compute", b.compute),
        ("memory", b.memory),
        ("communication", b.communication),
        ("bubble", b.bubble),
        ("other", b.other),
    ]
    .iter()
    .max_by(|a, b| a.1.total_cmp(&b.1))
    .map(|c| c.0.to_string());
    let detail = detail(p, mach, &traced, &trace, bottleneck.as_deref());
    let steps = p.steps;
    let tier = |t: program::Tier| format!("{t:?}").to_lowercase();
    let time_to_train_s = steps.map(|s| s * e.step_time);
    let mut est = Estimate {
        system: sys.name.clone(),
        workload: w.name.clone(),
        software: sys.software.as_ref().map(|s| s.name.clone()),
        execution_mode: sys.execution.line(w),
        global_batch: batch(w).0,
        global_batch_scaled_from: batch(w).1,
        software_figures: sys.software.as_ref().map(|s| s.figures()),
        attention_kernel: attention_kernel(sys, w),
        feasible: true,
        reason: None,
        reason_code: None,
        step_time_s: Some(e.step_time),
        throughput_per_s: Some(e.throughput),
        throughput_unit: p.unit,
        time_to_train_s,
        mfu: Some(e.mfu),
        average_power_w: Some(e.average_power),
        rated_power_w: Some(super::rated::rated_power_of(sys, devices)),
        error_band: None,
        energy_j: Some(
            steps
                .map(|s| s * e.energy_per_step)
                .unwrap_or(e.energy_per_step),
        ),
        energy_per_step_j: Some(e.energy_per_step),
        breakdown_s: Some(b),
        bottleneck,
        bottleneck_detail: detail,
        mapping: Some(MappingReport {
            kernels: sv.map(|_| m.kernels.unwrap_or(sys.device.efficiency.kernels)),
            tp_overlap_method: match &w.task {
                Task::Training(tr) => {
                    m.tp_overlap_method_for(super::lower::run_precision(sys, tr.compute).bytes())
                }
                _ => None,
            },
            ..m.into()
        }),
        devices,
        idle_devices: 0,
        scaling_efficiency: None,
        placement: Some(format!(
            "state: {}, working set: {}",
            tier(e.weights_tier),
            tier(e.working_tier)
        )),
        memory_per_device_bytes: Some(footprint),
        host_memory_per_device_bytes: Some(p.footprint.offloaded),
        mappings_tried: None,
        perf_per_watt: Some(e.throughput / e.average_power),
        energy_per_unit_j: Some(e.average_power / e.throughput),
        latency_per_token_s: matches!(w.task, Task::Inference(_)).then_some(e.step_time),
        power_boundary: crate::choice::Choice::name(sys.power_boundary),
        figures: sys.figures,
        power_limited: Some(e.throttle < 1.0),
        throttle: Some(e.throttle),
        device_power_w: Some(e.device_power),
        demanded_device_power_w: Some(e.demand_power),
        device_power_limit_w: Some(cpu::power_limit(mach)),
        concurrency: sv.map(|s| s.concurrency),
        prompt_tokens: sv.map(|s| s.prompt_tokens),
        output_tokens: sv.map(|s| s.output_tokens),
        ttft_s: sv.map(|s| s.ttft_s),
        tpot_s: sv.map(|s| s.tpot_s),
        user_tokens_per_s: sv.map(|s| s.user_tokens_per_s),
        system_tokens_per_s: sv.map(|s| s.system_tokens_per_s),
        prefill_time_s: sv.map(|s| s.prefill_s),
        max_concurrency,
        slo: slo_text(w),
        slo_met: sv.filter(|_| !slo.is_empty()).map(|s| serve::met(&s, &slo)),
        ttft_p99_s: sv.map(|s| s.tail.ttft_s).filter(|x| x.is_finite()),
        tpot_p99_s: sv.map(|s| s.tail.tpot_s),
        arrival_rate_per_s: sv.map(|s| s.tail.arrival_rate_per_s * m.dp as f64),
        utilization: sv.map(|s| s.tail.utilization),
        disaggregated: sv.map(|s| s.disaggregated),
        prefill_pool_devices: sv.filter(|s| s.disaggregated).map(|_| m.pool.devices()),
        precision_schedule: phases.as_ref().map(|ph| {
            ph.iter()
                .map(|(share, tr, _, x)| PhaseReport {
                    share: *share,
                    compute: tr.compute.name(),
                    scaling: tr.scaling,
                    step_time_s: x.step_time,
                    energy_per_step_j: x.energy_per_step,
                })
                .collect()
        }),
        cost_per_unit_usd: None,
        carbon_kg_co2e: None,
        water_l: None,
        cost: None,
        goodput: super::goodput::assess(sys, w, devices, time_to_train_s, e.throughput),
    };
    let priced = super::cost::price(
        sys,
        &super::cost::Work {
            feasible: est.feasible,
            time_to_train_s: est.time_to_train_s,
            energy_j: est.energy_j,
            throughput_per_s: est.throughput_per_s,
            energy_per_unit_j: est.energy_per_unit_j,
            throughput_unit: est.throughput_unit,
            devices: est.devices,
        },
    );
    est.cost_per_unit_usd = priced.cost_per_unit_usd;
    est.carbon_kg_co2e = priced.carbon_kg_co2e;
    est.water_l = priced.water_l;
    est.cost = priced.cost;
    est
}
