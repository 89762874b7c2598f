//! Lowering a device and its die: peak rates per precision (given or derived from units, ops per
//! cycle and clock, with the sparse-as-dense checks), on-die memory, the core mesh and energy.
//! The device's own figures (power, efficiency, energy per FLOP, what it leaves at a default)
//! are read in `figures`.

mod figures;

use super::types::{Device, Efficiency, MemLevel, Mesh};
use crate::model::precision::{Precision, NPREC};
use crate::model::Ctx;
use crate::spec::arch::*;
use crate::spec::{Located, FORMAT_VERSION};
use crate::units::Dimension as D;
use figures::{derive_energy_per_flop, lower_efficiency, lower_power, unset_figures, EffIn};

pub(super) fn lower_device(
    cx: &mut Ctx,
    d: &Located<DeviceSpec>,
    die: &Located<DieSpec>,
) -> Option<Device> {
    let s = &d.spec;
    let top = d.path.0.is_empty();
    cx.enter_part(d.file, d.path.clone(), None);
    cx.declare_sources(&s.sources);
    cx.leave();
    cx.enter_part(d.file, d.path.clone(), s.source.as_ref());
    check_version(cx, s.version, top);
    let dies = cx.count("dies", s.dies as u64).unwrap_or(1) as u32;
    let (tdp, full, idle, dvfs) = lower_power(cx, s);
    // Die.
    let dl = lower_die(cx, die);
    let e = &s.efficiency;
    let EffIn {
        matmul,
        memory: memory_eff,
        network,
        vector,
        lowp,
        fp4,
        comm_share,
        overhead,
        tiles,
    } = lower_efficiency(cx, e, die.spec.cores.is_some());

    let mut memory = Vec::new();
    let (die_mem, cores_per_die, mut matrix_peak, mut vector_peak, epf, mesh, area, clock) = dl?;
    for mut m in die_mem {
        // per-die totals scale with dies
        m.capacity *= dies as f64;
        m.bandwidth *= dies as f64;
        if let Some(c) = m.compute.as_mut() {
            *c *= dies as f64;
        }
        memory.push(m);
    }
    for (i, m) in s.memory.iter().enumerate() {
        cx.enter(crate::diag::Seg::Field("memory".into()), None);
        cx.enter(crate::diag::Seg::Index(i), m.source.as_ref());
        let lvl = lower_memory(cx, m, cores_per_die.saturating_mul(dies as u64), dies);
        cx.leave();
        cx.leave();
        if let Some(l) = lvl {
            memory.push(l);
        }
    }
    for p in matrix_peak.iter_mut().chain(vector_peak.iter_mut()) {
        *p *= dies as f64;
    }
    cx.enter_field("efficiency", None);
    let attention = super::attention::lower_attention(cx, &e.attention, &matrix_peak);
    cx.leave();
    let d2d = s.die_to_die.as_ref().and_then(|l| {
        cx.enter_field("die_to_die", l.source.as_ref());
        let v = cx.positive("bandwidth", &l.bandwidth, D::Bandwidth);
        cx.leave();
        v
    });
    if memory.is_empty() {
        cx.error(
            "memory",
            "the device has no memory level",
            Some("add HBM under `memory` or SRAM under the die's `sram`".into()),
        );
    }
    cx.leave();
    let (tdp, full, idle, dvfs) = (tdp?, full?, idle?, dvfs?);
    // Fastest first: by bandwidth, descending.
    memory.sort_by(|a, b| b.bandwidth.total_cmp(&a.bandwidth));
    let (energy_per_flop, derived, from_tdp) = derive_energy_per_flop(
        epf,
        (full, idle),
        (&matrix_peak, &vector_peak),
        [matmul, lowp, vector, memory_eff],
        &memory,
    );
    let (unset_energy, defaulted) = unset_figures(d, idle, &memory, &matrix_peak);
    Some(Device {
        defaulted,
        unset_energy,
        name: s.name.clone(),
        dies,
        cores: cores_per_die.saturating_mul(dies as u64),
        matrix_peak,
        vector_peak,
        memory,
        tdp,
        rated_tdp: full,
        idle_power: idle,
        dvfs,
        efficiency: Efficiency {
            matmul: matmul?,
            low_precision_matmul: lowp.unwrap_or(1.0),
            fp4_backward_matmul: fp4.unwrap_or(1.0),
            collective_compute_share: comm_share.unwrap_or(0.0),
            vector: vector.unwrap_or(memory_eff?),
            memory: memory_eff?,
            network: network?,
            kernel_overhead: overhead.unwrap_or(0.0),
            kernels: e.kernels.unwrap_or_default(),
            tiles,
            attention,
        },
        energy_per_flop,
        energy_per_flop_derived: derived,
        energy_per_flop_from_tdp: from_tdp,
        mesh,
        die_to_die_bandwidth: d2d,
        area,
        clock,
    })
}

type DieOut = (
    Vec<MemLevel>,
    u64,
    [f64; NPREC],
    [f64; NPREC],
    [f64; NPREC],
    Option<Mesh>,
    Option<f64>,
    Option<f64>,
);

pub(super) fn lower_die(cx: &mut Ctx, die: &Located<DieSpec>) -> Option<DieOut> {
    let s = &die.spec;
    let top = die.path.0.is_empty();
    cx.enter_part(die.file, die.path.clone(), None);
    cx.declare_sources(&s.sources);
    cx.leave();
    cx.enter_part(die.file, die.path.clone(), s.source.as_ref());
    check_version(cx, s.version, top);
    let clock = s
        .clock
        .as_ref()
        .and_then(|q| cx.positive("clock", q, D::Frequency));
    let area = s
        .area
        .as_ref()
        .and_then(|q| cx.positive("area", q, D::Area));
    let _process = s
        .process
        .as_ref()
        .and_then(|q| cx.positive("process", q, D::Length));
    if let Some(a) = area {
        if a > 0.0472 {
            cx.error(
                "area",
                format!(
                    "a die of {:.0} mm² is larger than a 300 mm wafer's largest square",
                    a * 1e6
                ),
                Some("a wafer-scale engine is 46,225 mm²".into()),
            );
        }
    }
    let cores = match s.cores {
        Some(c) => cx.count("cores", c).unwrap_or(1),
        None => 1,
    };
    let mut matrix = [0.0; NPREC];
    let mut vector = [0.0; NPREC];
    if s.compute.is_empty() {
        cx.error(
            "compute",
            "the die has no compute engine",
            Some("add `compute: [(name: ..., kind: Matrix, peak: {\"bf16\": \"...\"})]`".into()),
        );
    }
    for (i, e) in s.compute.iter().enumerate() {
        cx.enter_field("compute", None);
        cx.enter(crate::diag::Seg::Index(i), None);
        let rates = engine_rates(cx, e, clock);
        let target = match e.kind {
            EngineKind::Matrix => &mut matrix,
            EngineKind::Vector => &mut vector,
        };
        for (t, r) in target.iter_mut().zip(rates) {
            *t += r;
        }
        cx.leave();
        cx.leave();
    }
    check_fp8_peak(cx, s, &matrix);
    let mut mem = Vec::new();
    for (i, m) in s.sram.iter().enumerate() {
        cx.enter_field("sram", None);
        cx.enter(crate::diag::Seg::Index(i), m.source.as_ref());
        if let Some(l) = lower_memory(cx, m, cores, 1) {
            mem.push(l);
        }
        cx.leave();
        cx.leave();
    }
    let mesh = s
        .mesh
        .as_ref()
        .and_then(|m| lower_mesh(cx, m, s.cores.is_some(), cores));
    let mut epf = [0.0; NPREC];
    for (k, q) in &s.energy_per_flop {
        let Some(p) = precision_key(cx, "energy_per_flop", k) else {
            continue;
        };
        if let Some(v) = cx.q_key("energy_per_flop", k, q, D::EnergyPerFlop) {
            epf[p.index()] = v;
        }
    }
    cx.leave();
    Some((mem, cores, matrix, vector, epf, mesh, area, clock))
}

/// One compute engine's dense peak per precision: as written (over its sparsity factor where the
/// figures are quoted sparse), else derived from units × ops per cycle × the die's `clock`, with
/// a written peak checked against the derived one.
fn engine_rates(cx: &mut Ctx, e: &EngineSpec, clock: Option<f64>) -> [f64; NPREC] {
    let sparsity = if e.sparse {
        e.sparsity_factor
            .as_ref()
            .and_then(|q| cx.q("sparsity_factor", q, D::Ratio))
            .unwrap_or(2.0)
    } else {
        1.0
    };
    if e.peak.is_empty() && (e.units.is_none() || e.ops_per_cycle.is_empty()) {
        cx.error(
            "peak",
            format!("engine `{}` has no peak rate", e.name),
            Some("give `peak: {\"bf16\": \"989.4 TFLOP/s\"}` or `units` with `ops_per_cycle` and a die `clock`".into()),
        );
    }
    let mut rates = [0.0; NPREC];
    for (k, q) in &e.peak {
        let Some(p) = precision_key(cx, "peak", k) else {
            continue;
        };
        if let Some(v) = cx.q_key("peak", k, q, D::FlopRate) {
            if v <= 0.0 {
                cx.error_at(
                    &cx.path().field("peak").key(k),
                    format!("peak `{k}` must be greater than zero"),
                    None,
                );
            }
            rates[p.index()] = v / sparsity;
        }
    }
    if let (Some(units), false) = (e.units, e.ops_per_cycle.is_empty()) {
        for (k, q) in &e.ops_per_cycle {
            let Some(p) = precision_key(cx, "ops_per_cycle", k) else {
                continue;
            };
            let Some(opc) = cx.q_key("ops_per_cycle", k, q, D::FlopsPerCycle) else {
                continue;
            };
            let Some(clk) = clock else {
                cx.error(
                    "ops_per_cycle",
                    "deriving a peak from `ops_per_cycle` needs the die's `clock`",
                    Some(
                        "add the die's clock, e.g. `clock: \"1.98 GHz\"`, or give `peak` directly"
                            .into(),
                    ),
                );
                continue;
            };
            let derived = units as f64 * opc * clk;
            let given = rates[p.index()];
            if given > 0.0 {
                let ratio = given / derived;
                if (ratio - 2.0).abs() < 0.1 && !e.sparse {
                    cx.error_at(
                        &cx.path().field("peak").key(k),
                        format!(
                            "peak `{k}` is {:.2}x the rate derived from units × ops_per_cycle × clock ({}): it looks like a 2:4 sparse figure written as dense",
                            ratio,
                            crate::units::fmt_si(derived, "FLOP/s")
                        ),
                        Some("write the dense figure, or set `sparse: true` if the peaks are quoted with sparsity".into()),
                    );
                } else if (ratio - 1.0).abs() > 0.1 {
                    cx.error_at(
                        &cx.path().field("peak").key(k),
                        format!(
                            "peak `{k}` disagrees with units × ops_per_cycle × clock = {} ({:.0}% off)",
                            crate::units::fmt_si(derived, "FLOP/s"),
                            (ratio - 1.0) * 100.0
                        ),
                        Some("check the clock (boost or base?) and the per-unit rate".into()),
                    );
                }
            } else {
                rates[p.index()] = derived / sparsity;
            }
        }
    }
    rates
}

/// Sparse figures written as dense: an fp8 rate 4x the bf16 rate (where 2x is the rule).
fn check_fp8_peak(cx: &mut Ctx, s: &DieSpec, matrix: &[f64; NPREC]) {
    let (b, f8) = (
        matrix[Precision::Bf16.index()],
        matrix[Precision::Fp8.index()],
    );
    if b > 0.0 && f8 > 0.0 && (f8 / b - 4.0).abs() < 0.2 {
        // At the (first) fp8 matrix peak written, else at `compute`.
        let at = s
            .compute
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == EngineKind::Matrix)
            .find_map(|(i, e)| {
                let k = e
                    .peak
                    .keys()
                    .find(|k| Precision::parse(k) == Some(Precision::Fp8))?;
                Some(cx.path().field("compute").index(i).field("peak").key(k))
            })
            .unwrap_or_else(|| cx.path().field("compute"));
        cx.error_at(
            &at,
            "the fp8 peak is 4x the bf16 peak: one of them is probably a 2:4 sparse figure",
            Some(
                "dense fp8 is 2x dense bf16 on every current tensor core; write both dense".into(),
            ),
        );
    }
}

/// The die's mesh of cores: its link bandwidth, hop latency and energy, and dims that multiply
/// to the die's `cores` where it states them (`has_cores`).
fn lower_mesh(cx: &mut Ctx, m: &MeshSpec, has_cores: bool, cores: u64) -> Option<Mesh> {
    cx.enter_field("mesh", m.source.as_ref());
    let bw = cx.positive("link_bandwidth", &m.link_bandwidth, D::Bandwidth);
    let lat = cx.non_negative("hop_latency", &m.hop_latency, D::Time);
    let e = m
        .energy_per_bit_hop
        .as_ref()
        .and_then(|q| cx.non_negative("energy_per_bit_hop", q, D::EnergyPerByte));
    let product = m
        .dims
        .iter()
        .try_fold(1u64, |a, d| a.checked_mul(*d))
        .unwrap_or(u64::MAX);
    if m.dims.is_empty() || m.dims.contains(&0) {
        cx.error(
            "dims",
            "mesh `dims` must be non-empty and positive",
            Some("e.g. `dims: [750, 994]`".into()),
        );
    } else if has_cores && product != cores && product != 0 {
        cx.error(
            "dims",
            format!(
                "mesh dims {:?} multiply to {product}, but the die has {cores} cores",
                m.dims
            ),
            Some("the mesh must span the die's cores: dims multiply to `cores`".into()),
        );
    }
    cx.leave();
    Some(Mesh {
        topology: m.topology,
        dims: m.dims.clone(),
        link_bandwidth: bw?,
        hop_latency: lat?,
        energy_per_byte_hop: e.unwrap_or(0.0),
    })
}

fn precision_key(cx: &mut Ctx, field: &str, k: &str) -> Option<Precision> {
    match Precision::parse(k) {
        Some(p) => Some(p),
        None => {
            let hint = match crate::diag::did_you_mean(k, Precision::names()) {
                Some(s) => format!(
                    "did you mean `{s}`? precisions: {}",
                    Precision::names().collect::<Vec<_>>().join(", ")
                ),
                None => format!(
                    "precisions: {}",
                    Precision::names().collect::<Vec<_>>().join(", ")
                ),
            };
            let p = cx.path().field(field).key(k);
            cx.error_at(&p, format!("unknown precision `{k}`"), Some(hint));
            None
        }
    }
}

pub(super) fn check_version(cx: &mut Ctx, v: Option<u32>, top: bool) {
    match v {
        Some(FORMAT_VERSION) => {}
        Some(other) => cx.error(
            "version",
            format!("unsupported format version {other}"),
            Some(format!("this tessera reads version {FORMAT_VERSION}")),
        ),
        None if top => cx.error(
            "",
            "a part file needs `version: 1`",
            Some("add `version: 1,` as the first field".into()),
        ),
        None => {}
    }
}

pub(super) fn lower_memory(
    cx: &mut Ctx,
    m: &MemorySpec,
    cores: u64,
    dies: u32,
) -> Option<MemLevel> {
    let cap = cx.positive("capacity", &m.capacity, D::Bytes);
    let bw = cx.positive("bandwidth", &m.bandwidth, D::Bandwidth);
    let lat = m
        .latency
        .as_ref()
        .and_then(|q| cx.non_negative("latency", q, D::Time));
    let e = m
        .energy_per_byte
        .as_ref()
        .and_then(|q| cx.non_negative("energy_per_byte", q, D::EnergyPerByte));
    let compute = m
        .compute
        .as_ref()
        .and_then(|q| cx.positive("compute", q, D::FlopRate));
    // Processing in memory is not costed apart from the die's engines yet: a rate written here is
    // checked and kept in the model, but no operator runs on it. Say so rather than drop it
    // silently.
    if compute.is_some() {
        cx.warn(
            "compute",
            format!(
                "memory `{}` gives a `compute` rate that no operator runs on: operators run on the die's `compute` engines, reading this memory at its `bandwidth`",
                m.name
            ),
            Some("to model processing in memory, write the in-memory units as the die's `compute` and this memory as what they read (as architectures/upmem-pim.ron writes the DPUs and their MRAM banks), and remove `compute` here".into()),
        );
    }
    let instances = match m.attach {
        Attach::Core => cores as f64,
        Attach::Die => dies as f64,
        _ => 1.0,
    };
    Some(MemLevel {
        name: m.name.clone(),
        kind: m.kind,
        capacity: cap? * instances,
        bandwidth: bw? * instances,
        latency: lat.unwrap_or(0.0),
        energy_per_byte: e.unwrap_or(0.0),
        cache: m.kind == MemoryKind::Cache,
        compute,
    })
}
