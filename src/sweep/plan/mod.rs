//! A sweep resolved into what the backends evaluate: the programs (one per device count and
//! mapping), the machine-vector space, constraints and what to rank by. Built from a sweep file,
//! from `--vary` options, or both; every input error is reported with its place, all at once.

use super::metric::Metric;
use super::outcome::Outcome;
use super::space::{Sampling, Space};
use crate::engine::paths;

use crate::diag::{Diagnostic, Severity};
use crate::engine::program::{Machine, Program};
use crate::engine::reason::Reason;
use crate::engine::table::Fields;
use crate::engine::{self, cpu, default_micro_batch, lower, search, unit_of};
use crate::model::mapping::{Mapping, MappingPlan, Recompute};
use crate::model::system::{load_system, System};
use crate::model::workload::{load_mapping, load_workload, Workload};
use crate::spec::sweep::AxisValues;
use crate::spec::{Files, Fs, Loaded, Q};
use crate::units::Dimension;

pub use crate::engine::paths::MAPPING_AXES;

mod axes;
mod input;
use axes::{read_axes, Axes};
use input::merge_files;
pub use input::{read_file, AxisInput, Inputs, Loc};

/// One program of the sweep.
#[derive(Clone, Debug)]
pub struct ProgramEntry {
    pub devices: u64,
    pub mapping: Mapping,
    pub program: Program,
    /// The machine fields every point of this program starts from.
    pub base: Fields,
    pub label: String,
}

/// A program that could not be built (mapping does not divide the devices, …).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Skipped {
    pub label: String,
    pub reason: String,
    /// The stable code of `reason` (summaries written before it existed read as "").
    #[serde(default)]
    pub reason_code: String,
}

#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Constraints {
    /// W, facility power of the devices used.
    pub power_budget: Option<f64>,
    /// W: a budget the devices throttle to meet (each device's limit its share of it). Left out
    /// of the summary when absent, so sweeps without one keep their fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_cap: Option<f64>,
    /// Bytes free per device after placement.
    pub memory_floor: Option<f64>,
}

/// A resolved sweep.
#[derive(Clone, Debug)]
pub struct Plan {
    pub name: String,
    pub system: String,
    pub workload: String,
    pub unit: &'static str,
    pub programs: Vec<ProgramEntry>,
    pub skipped: Vec<Skipped>,
    pub space: Space,
    pub constraints: Constraints,
    pub objective: Metric,
    pub pareto: (Metric, Metric),
    pub top: usize,
    /// Identifies the sweep (inputs, programs, axes, sampling) so shards of different sweeps are
    /// never merged.
    pub fingerprint: String,
}

impl Plan {
    /// Design points in the whole sweep.
    pub fn total(&self) -> u64 {
        self.programs.len() as u64 * self.space.points
    }

    /// (program, machine point) of a global index.
    pub fn locate(&self, index: u64) -> (usize, u64) {
        (
            (index / self.space.points) as usize,
            index % self.space.points,
        )
    }

    /// Axis values of a point.
    pub fn values(&self, index: u64) -> Vec<f64> {
        let mut v = vec![0.0; self.space.axes.len()];
        self.space.sample(self.locate(index).1, &mut v);
        v
    }

    /// The machine of a point.
    pub fn machine(&self, index: u64) -> Machine {
        let (p, mi) = self.locate(index);
        let mut v = vec![0.0; self.space.axes.len()];
        self.space.sample(mi, &mut v);
        self.space.machine(&self.programs[p].base, &v)
    }

    /// Evaluate one point in f64 with `cpu::eval`; `vals` is scratch of one value per axis.
    #[inline]
    pub fn evaluate(&self, index: u64, vals: &mut [f64]) -> Outcome {
        let (p, mi) = self.locate(index);
        let prog = &self.programs[p];
        self.space.sample(mi, vals);
        let mut x = prog.base;
        self.space.apply(vals, &mut x);
        let m = Machine(x);
        let e = cpu::eval(&prog.program, &m);
        let mut o = Outcome::from_eval(index, &prog.program, &m, &e);
        self.constrain(&mut o);
        o
    }

    /// Apply the constraints to an outcome.
    #[inline]
    pub fn constrain(&self, o: &mut Outcome) {
        if o.reason != 0 {
            return;
        }
        if let Some(b) = self.constraints.power_budget {
            if o.power > b {
                o.reason = crate::engine::reason::point::POWER;
                return;
            }
        }
        if let Some(f) = self.constraints.memory_floor {
            if o.headroom < f {
                o.reason = crate::engine::reason::point::MEMORY_FLOOR;
            }
        }
    }

    /// Label of an axis's unit for tables ("B/s").
    pub fn axis_unit(&self, i: usize) -> &'static str {
        self.space.axes[i].dimension.si_symbol()
    }
}

/// Nothing was read: the file itself is missing.
fn unread<T>(l: &Loaded<T>) -> bool {
    l.files.files.is_empty()
}

fn has_errors(d: &[Diagnostic]) -> bool {
    d.iter().any(|d| d.severity == Severity::Error)
}

/// Load the architecture, workload and mapping the inputs name and resolve the sweep.
pub fn build(
    inputs: &Inputs,
    fs: &dyn Fs,
    mut files: Files,
    mut diags: Vec<Diagnostic>,
) -> Loaded<Plan> {
    let fail = |files: Files, diags: Vec<Diagnostic>| Loaded {
        value: None,
        files,
        diagnostics: diags,
    };
    let Some((arch, arch_at)) = &inputs.arch else {
        diags.push(Loc::option("--arch").error(
            "no architecture to sweep",
            Some("give a sweep file, or `--arch FILE --workload FILE`".into()),
        ));
        return fail(files, diags);
    };
    let Some((wpath, w_at)) = &inputs.workload else {
        diags.push(Loc::option("--workload").error(
            "no workload to sweep",
            Some("give a sweep file, or `--arch FILE --workload FILE`".into()),
        ));
        return fail(files, diags);
    };
    let ls = load_system(arch, fs);
    let lw = load_workload(wpath, fs);
    let (sys_missing, w_missing) = (unread(&ls), unread(&lw));
    merge_files(&mut files, ls.files);
    merge_files(&mut files, lw.files);
    // A file that cannot be read at all is reported where the sweep names it.
    for (missing, l_diags, at, what) in [
        (sys_missing, &ls.diagnostics, arch_at, "architecture"),
        (w_missing, &lw.diagnostics, w_at, "workload"),
    ] {
        if missing {
            for d in l_diags {
                diags.push(at.error(
                    format!("cannot read the {what} `{}`: {}", d.file, d.message),
                    Some("paths in a sweep file are relative to the sweep file".into()),
                ));
            }
        } else {
            diags.extend(l_diags.iter().cloned());
        }
    }
    let (Some(mut sys), Some(mut w)) = (ls.value, lw.value) else {
        return fail(files, diags);
    };
    // as the vendor runs it, as `estimate` does: its serving precision and its stack
    sys.as_its_vendor_runs(&mut w);
    // A sweep evaluates one program per point; a precision schedule is several (its phases).
    if let crate::model::workload::Task::Training(tr) = &w.task {
        if !tr.precision_schedule.is_empty() {
            diags.push(w_at.error(
                format!(
                    "the workload `{}` has a precision schedule, which a sweep cannot evaluate yet",
                    w.name
                ),
                Some("sweep the workload without `precision_schedule` (each phase's precision on its own); `estimate`, `compare` and `scale` run the schedule".into()),
            ));
            return fail(files, diags);
        }
    }
    let mut mapping_mode = MappingMode::Published;
    match &inputs.mapping {
        Some((m, _)) if m == "auto" => mapping_mode = MappingMode::Auto,
        Some((m, _)) if m == "published" => {}
        Some((m, at)) => {
            let lm = load_mapping(m, fs);
            let missing = unread(&lm);
            merge_files(&mut files, lm.files);
            if missing {
                for d in &lm.diagnostics {
                    diags.push(at.error(
                        format!("cannot read the mapping `{m}`: {}", d.message),
                        None,
                    ));
                }
            } else {
                diags.extend(lm.diagnostics);
            }
            match lm.value {
                Some(s) => mapping_mode = MappingMode::Given(s),
                None => return fail(files, diags),
            }
        }
        None => {}
    }
    let plan = resolve(inputs, &sys, &w, mapping_mode, &mut diags);
    if has_errors(&diags) {
        return fail(files, diags);
    }
    Loaded {
        value: plan,
        files,
        diagnostics: diags,
    }
}

/// Which mappings a sweep evaluates.
#[derive(Clone, Debug)]
// Built once per sweep: boxing the spec would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum MappingMode {
    /// The workload's published mapping (every candidate if it has none), with `mapping.*` axes
    /// applied to it.
    Published,
    /// Every legal mapping (`engine::search::candidates`), each its own program.
    Auto,
    /// A mapping file, with `mapping.*` axes applied to it.
    Given(MappingPlan),
}

use crate::engine::paths::MapVal;

/// What a sweep ranks by and which two metrics its Pareto front trades off.
fn goals(
    inputs: &Inputs,
    diags: &mut Vec<Diagnostic>,
) -> (Option<Metric>, Option<(Metric, Metric)>) {
    let metric = |s: &str, at: &Loc, diags: &mut Vec<Diagnostic>| match Metric::parse(s) {
        Ok(m) => Some(m),
        Err(e) => {
            diags.push(at.error(e, None));
            None
        }
    };
    let objective = match &inputs.objective {
        Some((s, at)) => metric(s, at, diags),
        None => Some(Metric::Throughput),
    };
    let pareto = match &inputs.pareto {
        None => Some((Metric::Throughput, Metric::Power)),
        Some((v, at)) => {
            let ms: Vec<Option<Metric>> = v.iter().map(|s| metric(s, at, diags)).collect();
            match ms.as_slice() {
                [Some(a), Some(b)] if a != b => Some((*a, *b)),
                [Some(_), Some(_)] => {
                    diags.push(at.error("the Pareto front needs two different metrics", None));
                    None
                }
                [_, _] => None,
                _ => {
                    diags.push(at.error(
                        format!("the Pareto front trades off exactly two metrics, {} given", v.len()),
                        Some("e.g. `pareto: [\"throughput\", \"power\"]` or `--pareto throughput,power`".into()),
                    ));
                    None
                }
            }
        }
    };
    (objective, pareto)
}

/// The sweep's constraints (power budget, power cap, memory floor), each a non-negative quantity.
fn read_constraints(inputs: &Inputs, diags: &mut Vec<Diagnostic>) -> Constraints {
    let quantity =
        |q: &Option<(Q, Loc)>, dim: Dimension, what: &str, diags: &mut Vec<Diagnostic>| {
            q.as_ref()
                .and_then(|(q, at)| match crate::units::parse(&q.0, dim) {
                    Ok(p) if p.value >= 0.0 => Some(p.value),
                    Ok(_) => {
                        diags.push(at.error(format!("the {what} cannot be negative"), None));
                        None
                    }
                    Err(e) => {
                        diags.push(at.error(format!("{what}: {}", e.message), e.hint));
                        None
                    }
                })
        };
    Constraints {
        power_budget: quantity(
            &inputs.power_budget,
            Dimension::Power,
            "power budget",
            diags,
        ),
        power_cap: quantity(&inputs.power_cap, Dimension::Power, "power cap", diags),
        memory_floor: quantity(
            &inputs.memory_floor,
            Dimension::Bytes,
            "memory floor",
            diags,
        ),
    }
}

/// The programs a sweep evaluates: device counts × mapping axes (or every candidate under
/// auto), each lowered once; the infeasible ones as skipped, with their reasons.
fn programs(
    sys: &System,
    w: &Workload,
    mode: &MappingMode,
    devices: Option<Vec<u64>>,
    map_axes: &[(String, Vec<MapVal>)],
    constraints: &Constraints,
) -> (Vec<ProgramEntry>, Vec<Skipped>) {
    let counts = devices.unwrap_or_else(|| vec![sys.devices]);
    let mut programs = Vec::new();
    let mut skipped = Vec::new();
    for &n in &counts {
        if n > sys.devices {
            skipped.push(Skipped {
                label: format!("{n} devices"),
                reason: format!("the system has {} devices", sys.devices),
                reason_code: Reason::Devices {
                    requested: n,
                    available: sys.devices,
                }
                .code()
                .into(),
            });
            continue;
        }
        let add = |m: Mapping, programs: &mut Vec<ProgramEntry>, skipped: &mut Vec<Skipped>| {
            let label = label(n, &m);
            match engine::prepare_mapping(sys, w, m, n) {
                Ok(mut p) => {
                    if let Some(cap) = constraints.power_cap {
                        cap_share(&mut p.machine, cap, p.program.devices);
                    }
                    programs.push(ProgramEntry {
                        devices: n,
                        mapping: m,
                        program: p.program,
                        base: p.machine.0,
                        label,
                    })
                }
                Err(i) => skipped.push(Skipped {
                    label,
                    reason: i.reason.to_string(),
                    reason_code: i.reason.code().into(),
                }),
            }
        };
        match mode {
            MappingMode::Auto => {
                for m in search::candidates(sys, w, n) {
                    add(m, &mut programs, &mut skipped);
                }
            }
            MappingMode::Published | MappingMode::Given(_) => {
                let spec = match mode {
                    MappingMode::Given(s) => s.clone(),
                    _ => match &w.mapping {
                        Some(s) => s.clone(),
                        None => {
                            // No published mapping: fall back to every candidate, as `estimate` does.
                            if map_axes.is_empty() {
                                for m in search::candidates(sys, w, n) {
                                    add(m, &mut programs, &mut skipped);
                                }
                                continue;
                            }
                            MappingPlan::default()
                        }
                    },
                };
                for combo in combinations(map_axes) {
                    let mut s = spec.clone();
                    let mut desc = Vec::new();
                    for (field, v) in map_axes.iter().map(|a| a.0.as_str()).zip(&combo) {
                        desc.push(format!("{field} {v:?}"));
                        paths::set_mapping(&mut s, field, v);
                    }
                    // A varied degree frees `dp` to fill the devices the others leave.
                    let fields: Vec<&str> = map_axes.iter().map(|a| a.0.as_str()).collect();
                    paths::free_dp(&mut s, &fields);
                    match Mapping::resolve(&s, n, default_micro_batch(w)) {
                        Ok(m) => add(m, &mut programs, &mut skipped),
                        Err(r) => skipped.push(Skipped {
                            label: format!("{n} devices, {}", desc.join(", ")),
                            reason_code: Reason::mapping(r.as_str()).code().into(),
                            reason: r,
                        }),
                    }
                }
            }
        }
    }
    (programs, skipped)
}

/// Resolve inputs against a loaded system and workload.
fn resolve(
    inputs: &Inputs,
    sys: &System,
    w: &Workload,
    mode: MappingMode,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let start_errors = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let Axes {
        axes,
        devices,
        map_axes,
        derive,
        device_energy,
        machine_energy,
    } = read_axes(inputs, sys, diags);
    if !map_axes.is_empty() && matches!(mode, MappingMode::Auto) {
        let at = inputs
            .mapping
            .as_ref()
            .map(|m| m.1.clone())
            .unwrap_or(Loc::option("--mapping"));
        diags.push(at.error(
            "`mapping.*` axes vary a given mapping; `auto` already tries every mapping",
            Some("drop the `mapping.*` axes, or name a mapping (or `published`)".into()),
        ));
    }
    let derivation = if derive {
        paths::derivation(sys, device_energy, machine_energy)
    } else {
        super::space::Derive::default()
    };
    let space = match Space::new(axes, inputs.sampling, derivation) {
        Ok(s) => Some(s),
        Err(m) => {
            diags.push(inputs.sampling_at.error(
                m,
                Some("give every axis a `step` or a point count, or use `Random(points: N, seed: S)` / `LatinHypercube(points: N, seed: S)`".into()),
            ));
            None
        }
    };
    let (objective, pareto) = goals(inputs, diags);
    let constraints = read_constraints(inputs, diags);
    let now_errors = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    if now_errors > start_errors {
        return None;
    }
    let (space, objective, pareto) = (space?, objective?, pareto?);
    let (programs, skipped) = programs(sys, w, &mode, devices, &map_axes, &constraints);
    if programs.is_empty() {
        let why = skipped
            .first()
            .map(|s| format!("{}: {}", s.label, s.reason))
            .unwrap_or_else(|| "no mapping to try".into());
        diags.push(inputs.sampling_at.error(
            format!(
                "no program to evaluate: every device count and mapping was infeasible ({why})"
            ),
            None,
        ));
        return None;
    }
    let top = inputs.top.unwrap_or(10);
    let name = inputs
        .name
        .clone()
        .unwrap_or_else(|| format!("{} on {}", w.name, sys.name));
    let mut plan = Plan {
        name,
        system: sys.name.clone(),
        workload: w.name.clone(),
        unit: unit_of(w),
        programs,
        skipped,
        space,
        constraints,
        objective,
        pareto,
        top,
        fingerprint: String::new(),
    };
    plan.fingerprint = fingerprint(&plan);
    Some(plan)
}

fn combinations(axes: &[(String, Vec<MapVal>)]) -> Vec<Vec<MapVal>> {
    let mut out: Vec<Vec<MapVal>> = vec![Vec::new()];
    for (_, vals) in axes {
        let mut next = Vec::with_capacity(out.len() * vals.len());
        for prefix in &out {
            for v in vals {
                let mut p = prefix.clone();
                p.push(v.clone());
                next.push(p);
            }
        }
        out = next;
    }
    out
}

/// Make a power budget `cap` (W, at the machine's boundary) each device's limit: its share after
/// the other parts the boundary counts, taken at the program's base figures (a point that varies
/// those parts keeps the base share), tightened with any limit the file declares.
fn cap_share(m: &mut Machine, cap: f64, devices: f64) {
    let parts = engine::cpu::system_power(m, 0.0, crate::engine::program::Tier::Hbm);
    let pue = if m[crate::engine::table::BOUNDARY] >= 4.0 {
        m[crate::engine::table::PUE]
    } else {
        1.0
    };
    let share = (cap / devices - parts) / pue;
    let slot = &mut m[crate::engine::table::POWER_CAP];
    *slot = if *slot > 0.0 { slot.min(share) } else { share }.max(f64::MIN_POSITIVE);
}

/// The machine vector of `sys` on `n` devices (`engine::machine`), as a sweep starts from it.
pub fn base_fields(sys: &System, n: u64) -> Fields {
    lower::machine(sys, n).0
}

/// A short description of a program.
pub fn label(devices: u64, m: &Mapping) -> String {
    let rc = match m.recompute {
        Recompute::None => String::new(),
        Recompute::Selective => ", selective recompute".into(),
        Recompute::Full => ", full recompute".into(),
        Recompute::Ops(_) => format!(", recompute {}", m.recompute),
    };
    let shard = m
        .hybrid_shard()
        .map_or(String::new(), |g| format!(" over {g}"));
    format!(
        "{devices} devices: dp {} tp {} pp {} cp {} ep {}, mb {}, v {}, ZeRO {}{shard}{rc}",
        m.dp, m.tp, m.pp, m.cp, m.ep, m.micro_batch, m.interleave, m.zero
    )
}

/// FNV-1a over a canonical description of everything that decides the points and their values.
fn fingerprint(p: &Plan) -> String {
    let mut s = format!(
        "{}|{}|{:?}|{}|{:?}|",
        p.system, p.workload, p.space.sampling, p.space.points, p.constraints
    );
    for e in &p.programs {
        s.push_str(&format!("{}|{:?}|", e.label, e.base.map(f64::to_bits)));
    }
    for a in &p.space.axes {
        s.push_str(&format!("{}|{:?}|{:?}|", a.path, a.values, a.targets));
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Build a plan from in-memory parts (benchmarks, tests): `axes` are (path, values expression).
pub fn from_parts(
    sys: &System,
    w: &Workload,
    mapping: MappingMode,
    axes: &[(&str, &str)],
    sampling: Sampling,
) -> Result<Plan, Vec<Diagnostic>> {
    let inputs = Inputs {
        axes: axes
            .iter()
            .map(|(p, v)| AxisInput {
                path: p.to_string(),
                values: AxisValues::Expr(v.to_string()),
                at: Loc::option("--vary"),
            })
            .collect(),
        sampling,
        ..Inputs::default()
    };
    let mut diags = Vec::new();
    match resolve(&inputs, sys, w, mapping, &mut diags) {
        Some(p) if !has_errors(&diags) => Ok(p),
        _ => Err(diags),
    }
}
