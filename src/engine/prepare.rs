//! One path from a request to something to evaluate: choose the mapping (as given, or by the
//! search, run once), check it against the device count, lower the workload into its cost
//! program and build the machine vector; or say, as a typed reason, why it is infeasible.
//! estimate, roofline, compare, scale, validate and the sweep planner all start here.

use super::common::{default_micro_batch, unit_of, MappingChoice};
use super::estimate::{finish, Estimate};
use super::lower;
use super::program::{Machine, Program};
use super::reason::Reason;
use super::search::{self, SearchResult};
use crate::model::mapping::Mapping;
use crate::model::system::System;
use crate::model::workload::Workload;

/// A workload ready to evaluate on a system.
pub struct Prepared {
    pub mapping: Mapping,
    pub program: Program,
    pub machine: Machine,
    pub devices: u64,
    /// Devices the request offered: more than `devices` when the search found the job faster on
    /// fewer of them (a training run's global batch cannot spread over 216 = 8 × 27 GPUs as well
    /// as over 128); the rest are left idle for other work and are not counted.
    pub requested: u64,
    /// The ranked search, when the mapping was chosen by it.
    pub search: Option<SearchResult>,
}

/// Why a request cannot be evaluated, with what was known when it failed.
#[derive(Clone, Debug)]
pub struct Infeasible {
    pub reason: Reason,
    pub devices: u64,
    /// The mapping, when one was resolved before the failure.
    pub mapping: Option<Mapping>,
}

/// Choose the mapping for `w` on `devices` devices of `sys` (all when `None`), lower it and
/// build the machine.
pub fn prepare(
    sys: &System,
    w: &Workload,
    choice: &MappingChoice,
    devices: Option<u64>,
) -> Result<Prepared, Box<Infeasible>> {
    prepare_with(sys, w, choice, devices, true)
}

/// [`prepare`], with `may_idle` saying whether the search may leave devices idle (the
/// iso-power fit does not: it tries the smaller deployments itself and counts whole nodes).
pub(crate) fn prepare_with(
    sys: &System,
    w: &Workload,
    choice: &MappingChoice,
    devices: Option<u64>,
    may_idle: bool,
) -> Result<Prepared, Box<Infeasible>> {
    let n = devices.unwrap_or(sys.devices);
    let fail = |reason: Reason, mapping: Option<Mapping>| {
        Box::new(Infeasible {
            reason,
            devices: n,
            mapping,
        })
    };
    if n == 0 || n > sys.devices {
        return Err(fail(
            Reason::Devices {
                requested: n,
                available: sys.devices,
            },
            None,
        ));
    }
    let (mapping, search) = match choice {
        MappingChoice::Given(spec) => match Mapping::resolve(spec, n, default_micro_batch(w)) {
            // the serving load's requests per instance
            Ok(m) => match super::serve::resolve(sys, w, m, n) {
                // with a target and a free concurrency: as many as still meet it
                Ok(r) => (search::given_batch(sys, w, m, n).unwrap_or(r), None),
                Err(r) => return Err(fail(r, Some(m))),
            },
            Err(r) => return Err(fail(Reason::mapping(r), None)),
        },
        MappingChoice::Auto(obj) => {
            let mut res = search::search(sys, w, n, *obj);
            // More devices never make a result worse: a training job may run on a subset of
            // them (the rest idle, counted in `idle_devices`) where that is better, so every
            // subset a smaller request would consider is searched too (search::subsets), down
            // to the point where even a perfect step on fewer devices cannot win.
            if may_idle {
                for k in search::subsets(sys, w, n) {
                    if search::cannot_win(&res, *obj, k) {
                        break;
                    }
                    let r = search::search(sys, w, k, *obj);
                    let tried = res.tried + r.tried;
                    let better = match (r.best(), res.best()) {
                        (Some(a), Some(b)) => search::cost(&a.1, *obj) < search::cost(&b.1, *obj),
                        (Some(_), None) => true,
                        _ => false,
                    };
                    if better {
                        res = r;
                    }
                    res.tried = tried;
                }
            }
            match res.best() {
                Some((m, _)) => (*m, Some(res)),
                None => return Err(fail(res.why_none(), None)),
            }
        }
    };
    let used = mapping.devices();
    let mut p = prepare_mapping(sys, w, mapping, used)?;
    p.requested = n;
    p.search = search;
    Ok(p)
}

/// Lower `w` under a resolved `mapping` onto `devices` devices of `sys` and build the machine:
/// the step [`prepare`] ends with, and what a sweep does for each of its mappings.
pub fn prepare_mapping(
    sys: &System,
    w: &Workload,
    mapping: Mapping,
    devices: u64,
) -> Result<Prepared, Box<Infeasible>> {
    let mapping = if mapping.regions.any() {
        fit_regions(sys, w, mapping, devices)
    } else {
        mapping
    };
    match lower::lower(sys, w, &mapping, devices) {
        Ok(program) => Ok(Prepared {
            mapping,
            program,
            machine: lower::machine(sys, devices),
            devices,
            requested: devices,
            search: None,
        }),
        Err(reason) => Err(Box::new(Infeasible {
            reason,
            devices,
            mapping: Some(mapping),
        })),
    }
}

/// A phase's core region on a wafer is the cores it may use: each of its layers runs on the
/// block that makes the phase fastest among the region itself and every square block inside it
/// (a larger region can always leave cores idle, so it is never slower; decode's all-reduces
/// grow with the block's side while its memory time shrinks, which is why WaferLLM decodes on
/// fewer cores than it prefills on). The phases' stages are apart, so each phase's block is
/// chosen with the other's fixed: prefill's by the prompt alone (time to first token), decode's
/// by the round. Where no block inside is feasible, or the region is wider than the mesh, it
/// stays as written, and lowering says why.
fn fit_regions(sys: &System, w: &Workload, mut mapping: Mapping, devices: u64) -> Mapping {
    let machine = lower::machine(sys, devices);
    // each phase by its own time: the prompt alone through the instance (prefill), the round
    // (decode; the prompts' share of it is the prefill stages', fixed meanwhile)
    let time = |m: &Mapping, decode: bool| {
        if decode {
            lower::lower(sys, w, m, devices)
        } else {
            lower::lower_prefill(sys, w, m, devices)
        }
        .ok()
        .map(|p| super::cpu::eval(&p, &machine))
        .filter(|e| e.feasible)
        .map(|e| e.step_time)
    };
    for decode in [false, true] {
        fn slot(m: &mut Mapping, decode: bool) -> &mut Option<(u64, u64)> {
            if decode {
                &mut m.regions.decode
            } else {
                &mut m.regions.prefill
            }
        }
        let Some((a, b)) = *slot(&mut mapping, decode) else {
            continue;
        };
        // a region wider than the mesh is wrong as written: no block inside it is tried
        if let Err(super::reason::Reason::Region {
            what: super::reason::RegionShortfall::Cores,
            ..
        }) = lower::lower(sys, w, &mapping, devices)
        {
            continue;
        }
        let mut best: Option<((u64, u64), f64)> = None;
        let candidates = std::iter::once((a, b)).chain((1..=a.min(b)).rev().map(|s| (s, s)));
        for block in candidates {
            let mut m = mapping;
            *slot(&mut m, decode) = Some(block);
            if let Some(t) = time(&m, decode) {
                if best.is_none_or(|(_, tb)| t < tb) {
                    best = Some((block, t));
                }
            }
        }
        if let Some((block, _)) = best {
            *slot(&mut mapping, decode) = Some(block);
        }
    }
    mapping
}

/// Estimate `w` on `devices` devices of `sys` (all of them when `None`).
pub fn estimate(
    sys: &System,
    w: &Workload,
    choice: &MappingChoice,
    devices: Option<u64>,
) -> Estimate {
    outcome(sys, w, &prepare(sys, w, choice, devices))
}

/// The estimate of a prepared request, or its infeasibility as an estimate.
pub fn outcome(sys: &System, w: &Workload, prep: &Result<Prepared, Box<Infeasible>>) -> Estimate {
    match prep {
        Ok(p) => {
            let mut e = finish(sys, w, &p.mapping, &p.program, &p.machine);
            e.idle_devices = p.requested.saturating_sub(p.devices);
            e.mappings_tried = p.search.as_ref().map(|s| s.tried);
            e
        }
        Err(i) => {
            let mut e =
                Estimate::infeasible(sys, w, i.devices, i.mapping.as_ref(), &i.reason, unit_of(w));
            if let Reason::NoFeasibleMapping { tried, .. } = &i.reason {
                e.mappings_tried = Some(*tried);
            }
            e
        }
    }
}
