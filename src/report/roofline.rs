//! The hierarchical roofline of a device with a workload's operators placed on it: one roof per
//! memory level of the device (caches and on-chip SRAM included, and the external weight store
//! where there is one), one ceiling per number format the device computes in, and each operator
//! at its arithmetic intensity (FLOP per byte of the traffic it makes to the memory its data
//! lives in) and the rate it achieves in the evaluated step.

use crate::engine::program::{Eval, Phase, Program, Tier};
use crate::engine::running::Running;
use crate::engine::table::{self as t, Machine};
use crate::engine::{cpu, MappingReport};
use crate::model::mapping::Mapping;
use crate::model::precision::Precision;
use crate::model::system::System;
use crate::model::workload::Workload;
use crate::vocab::MemoryKind;
use serde::Serialize;

/// A bandwidth roof: FLOP/s = intensity × bandwidth.
#[derive(Debug, Clone, Serialize)]
pub struct Roof {
    pub level: String,
    /// `sram`, `hbm`, `dram`, … or `weight store`.
    pub kind: String,
    pub cache: bool,
    /// Peak B/s per device.
    pub bandwidth_bytes_per_s: f64,
    /// Where the workload's data lives in this level (model state and/or working data).
    pub holds: Option<String>,
}

/// A compute ceiling: peak FLOP/s per device for one or more formats on one engine.
#[derive(Debug, Clone, Serialize)]
pub struct Ceiling {
    /// `bf16/fp16 matrix`, `fp32 vector`, …
    pub label: String,
    pub engine: &'static str,
    pub precisions: Vec<String>,
    pub flops_per_s: f64,
    /// Not a figure of the architecture file: the vector rate assumed from the matrix rate.
    pub derived: bool,
}

/// One operator of the program, per device and per call.
#[derive(Debug, Clone, Serialize)]
pub struct OpPoint {
    /// 1-based, as labelled on the plot.
    pub index: usize,
    pub name: String,
    pub phase: &'static str,
    pub precision: &'static str,
    pub engine: &'static str,
    pub flops: f64,
    /// Share of the matrix units' time its products keep busy with useful work (tile and wave
    /// quantization, `engine::tiling`); 1 for vector work and where the device has no tiling.
    pub occupancy: f64,
    /// Bytes to and from the memory the operator's data lives in.
    pub bytes: f64,
    /// FLOP per byte; `None` without memory traffic.
    pub intensity: Option<f64>,
    /// FLOP/s over the time the call takes (launch overhead included); `None` without FLOPs.
    pub achieved_flops_per_s: Option<f64>,
    pub seconds_per_call: f64,
    pub calls_per_step: f64,
    /// Share of the step this operator's calls take.
    pub share_of_step: f64,
    /// `compute (bf16 matrix)`, a memory level's name, or `launch overhead`.
    pub bound_by: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Roofline {
    pub system: String,
    pub device: String,
    pub workload: String,
    pub devices: u64,
    pub mapping: MappingReport,
    pub feasible: bool,
    pub reason: Option<String>,
    /// The stable code of `reason`.
    pub reason_code: Option<&'static str>,
    pub step_time_s: Option<f64>,
    pub roofs: Vec<Roof>,
    pub ceilings: Vec<Ceiling>,
    pub ops: Vec<OpPoint>,
    /// A mesh device: one core's rates, the mesh links and hop latency (`null` without a mesh).
    pub mesh: Option<crate::report::system::MeshSummary>,
    /// A mesh device: the regions of cores the program's stages got, in pipeline order.
    pub regions: Vec<crate::report::placement::Region>,
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Forward => "forward",
        Phase::Backward => "backward",
        Phase::Recompute => "recompute",
        Phase::Update => "update",
        Phase::Store => "update in the weight store",
        Phase::Host => "update on the host",
    }
}

fn kind_name(k: MemoryKind) -> String {
    format!("{k:?}").to_lowercase()
}

/// Group equal peaks: `[(rate, [fp8, int8])]` in the order of [`Precision::ALL`], fastest first.
fn group(peaks: impl Iterator<Item = (Precision, f64)>) -> Vec<(f64, Vec<Precision>)> {
    let mut out: Vec<(f64, Vec<Precision>)> = Vec::new();
    for (p, r) in peaks {
        if r <= 0.0 {
            continue;
        }
        match out.iter_mut().find(|(x, _)| ((x - r) / r).abs() < 1e-9) {
            Some((_, v)) => v.push(p),
            None => out.push((r, vec![p])),
        }
    }
    out.sort_by(|a, b| b.0.total_cmp(&a.0));
    out
}

/// Build the roofline of `sys`'s device with the operators of `p` (lowered from `w` under `m`)
/// evaluated on `mach`: its roofs, its ceilings, and each operator the program runs there.
pub fn roofline(sys: &System, w: &Workload, m: &Mapping, p: &Program, mach: &Machine) -> Roofline {
    let mut trace = Vec::new();
    let e = cpu::eval_traced(p, mach, Some(&mut trace));
    // the records of the form each stage runs on `mach` (a program may carry two)
    let running = cpu::running(p, mach);
    let names = TierNames::of(sys);
    let ops = if e.feasible {
        op_points(p, mach, &running, &e, &trace, &names)
    } else {
        Vec::new()
    };
    Roofline {
        system: sys.name.clone(),
        device: sys.device.name.clone(),
        workload: w.name.clone(),
        devices: m.devices(),
        mapping: m.into(),
        feasible: e.feasible,
        reason: e.reason().map(|r| r.to_string()),
        reason_code: e.reason().map(|r| r.code()),
        step_time_s: e.feasible.then_some(e.step_time),
        roofs: roofs(sys, mach, cpu::place(&p.footprint, mach)),
        ceilings: ceilings(sys, p, mach, &running),
        ops,
        mesh: crate::report::system::mesh_summary(sys),
        regions: crate::report::placement::placement(sys, &w.name, p, mach, m.dp)
            .map(|pl| pl.regions)
            .unwrap_or_default(),
    }
}

/// The names of the places the engine keeps data in, as the system's file names them: the
/// device's SRAM levels, its main memory, the weight store, the host's memory.
struct TierNames {
    sram: String,
    main: String,
    store: String,
    host: String,
}

impl TierNames {
    fn of(sys: &System) -> TierNames {
        fn join<'a>(names: impl Iterator<Item = &'a String>) -> String {
            names.cloned().collect::<Vec<_>>().join("+")
        }
        let levels = || sys.device.memory.iter().filter(|l| !l.cache);
        TierNames {
            sram: join(
                levels()
                    .filter(|l| l.kind == MemoryKind::Sram)
                    .map(|l| &l.name),
            ),
            main: join(
                levels()
                    .filter(|l| l.kind != MemoryKind::Sram)
                    .map(|l| &l.name),
            ),
            store: sys
                .weight_store
                .as_ref()
                .map(|w| w.name.clone())
                .unwrap_or_else(|| "weight store".into()),
            host: join(sys.node.memory.iter().map(|l| &l.name)),
        }
    }

    fn tier(&self, t: Tier) -> String {
        match t {
            Tier::Sram => self.sram.clone(),
            Tier::Hbm => self.main.clone(),
            Tier::External => self.store.clone(),
        }
    }
}

/// One roof per memory level of the device and for the weight store, fastest first, each
/// saying what of the run it holds where `placed` (weights' tier, working data's tier) puts it.
fn roofs(sys: &System, mach: &Machine, placed: Option<(Tier, Tier)>) -> Vec<Roof> {
    let holds = |is: &dyn Fn(Tier) -> bool| -> Option<String> {
        let (wt, at) = placed?;
        match (is(wt), is(at)) {
            (true, true) => Some("model state and working data".into()),
            (true, false) => Some("model state".into()),
            (false, true) => Some("working data".into()),
            _ => None,
        }
    };
    let mut roofs: Vec<Roof> = sys
        .device
        .memory
        .iter()
        .map(|l| Roof {
            level: l.name.clone(),
            kind: kind_name(l.kind),
            cache: l.cache,
            bandwidth_bytes_per_s: l.bandwidth,
            holds: if l.cache {
                None
            } else if l.kind == MemoryKind::Sram {
                holds(&|t| t == Tier::Sram)
            } else {
                holds(&|t| t == Tier::Hbm)
            },
        })
        .collect();
    if let Some(ws) = &sys.weight_store {
        roofs.push(Roof {
            level: ws.name.clone(),
            kind: "weight store".into(),
            cache: false,
            bandwidth_bytes_per_s: mach[t::EXT_BANDWIDTH],
            holds: holds(&|t| t == Tier::External),
        });
    }
    roofs.sort_by(|a, b| b.bandwidth_bytes_per_s.total_cmp(&a.bandwidth_bytes_per_s));
    roofs
}

/// The matrix engine's ceilings per format (equal rates share one), then the vector engine's:
/// every format the file gives a rate for, and the formats the running program's vector
/// operators use (their rate may be assumed from the matrix rate); fastest first.
fn ceilings(sys: &System, p: &Program, mach: &Machine, running: &Running) -> Vec<Ceiling> {
    let d = &sys.device;
    let mut ceilings = Vec::new();
    for (r, ps) in group(
        Precision::ALL
            .into_iter()
            .map(|p| (p, d.matrix_peak[p.index()])),
    ) {
        ceilings.push(Ceiling {
            label: format!(
                "{} matrix",
                ps.iter().map(|p| p.name()).collect::<Vec<_>>().join("/")
            ),
            engine: "matrix",
            precisions: ps.iter().map(|p| p.name().to_string()).collect(),
            flops_per_s: r,
            derived: false,
        });
    }
    let used: Vec<usize> = running
        .ops(p)
        .map(|(_, o)| o)
        .filter(|o| !o.matrix)
        .map(|o| o.precision)
        .collect();
    let vec_peaks = Precision::ALL.into_iter().map(|p| {
        let i = p.index();
        let r = if d.vector_peak[i] > 0.0 || used.contains(&i) {
            mach[t::VECTOR_PEAK + i]
        } else {
            0.0
        };
        (p, r)
    });
    for (r, ps) in group(vec_peaks) {
        let derived = ps.iter().all(|p| d.vector_peak[p.index()] <= 0.0);
        ceilings.push(Ceiling {
            label: format!(
                "{} vector{}",
                ps.iter().map(|p| p.name()).collect::<Vec<_>>().join("/"),
                if derived { " (assumed)" } else { "" }
            ),
            engine: "vector",
            precisions: ps.iter().map(|p| p.name().to_string()).collect(),
            flops_per_s: r,
            derived,
        });
    }
    ceilings.sort_by(|a, b| b.flops_per_s.total_cmp(&a.flops_per_s));
    ceilings
}

/// Each operator the program runs on `mach`, per call: its FLOPs and bytes, its time as the
/// evaluation traced it (`trace`, seconds per step), and what bounds it by the evaluator's own
/// roofline of the call (launch overhead, compute on its engine, or the tier its bytes come from).
fn op_points(
    p: &Program,
    mach: &Machine,
    running: &Running,
    e: &Eval,
    trace: &[f64],
    names: &TierNames,
) -> Vec<OpPoint> {
    let (wt, at) = (e.weights_tier, e.working_tier);
    let mut ops = Vec::new();
    for (k, (i, op)) in running.ops(p).enumerate() {
        let mult = if op.section as usize == 0 {
            p.micro_batches
        } else {
            1.0
        };
        let calls = op.count * mult;
        let t_total = trace.get(i).copied().unwrap_or(0.0);
        let per_call = if calls > 0.0 { t_total / calls } else { 0.0 };
        let (t_c, t_m, mem_tier) = match crate::engine::cpu::op_time(op, mach, wt, at) {
            Some(t) => (t.compute, t.memory, t.memory_tier),
            None => (0.0, 0.0, wt),
        };
        let prec = Precision::ALL[op.precision];
        let engine = if op.matrix { "matrix" } else { "vector" };
        let bound_by = if op.phase == Phase::Host {
            format!("host memory ({})", names.host)
        } else if mach[t::KERNEL_OVERHEAD] > t_c.max(t_m) {
            "launch overhead".to_string()
        } else if t_c >= t_m {
            format!("compute ({} {engine})", prec.name())
        } else {
            names.tier(mem_tier)
        };
        let bytes = op.weight_bytes + op.act_bytes;
        ops.push(OpPoint {
            index: k + 1,
            name: op.name.to_string(),
            phase: phase_name(op.phase),
            precision: prec.name(),
            engine,
            flops: op.flops,
            occupancy: op.occupancy,
            bytes,
            intensity: (bytes > 0.0).then(|| op.flops / bytes),
            achieved_flops_per_s: (op.flops > 0.0 && per_call > 0.0).then(|| op.flops / per_call),
            seconds_per_call: per_call,
            calls_per_step: calls,
            share_of_step: if e.step_time > 0.0 {
                t_total / e.step_time
            } else {
                0.0
            },
            bound_by,
        });
    }
    ops
}
