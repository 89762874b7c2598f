//! The claim audit: is a published claim physically possible on the hardware it names?
//!
//! Each check compares the claim with a bound the architecture file sets, never with a model
//! estimate: energy and power against the rated power of the nodes that hold the devices (at
//! TDP, with host, NICs, switches and the facility's PUE) and against their idle floor; throughput
//! against peak FLOP/s and, for generation, against memory bandwidth; scaling efficiency and MFU
//! against 100 %. A claim beyond a bound is impossible, by the factor it exceeds it.

use super::{merge, parse_throughput, split_tag};
use crate::diag::Severity;
use crate::model::system::{load_system, System};
use crate::model::workload::{load_workload, Model, Task, Workload};
use crate::model::Ctx;
use crate::spec::validation::{ClaimSpec, Verdict};
use crate::spec::{join, Fs, Loaded, FORMAT_VERSION, Q};
use crate::units::Dimension;
use serde::Serialize;

/// A loaded, checked claim.
#[derive(Debug, Clone)]
pub struct Claim {
    pub id: String,
    pub statement: String,
    pub file: String,
    pub citation: String,
    pub system: System,
    pub devices: u64,
    pub duration: Option<f64>,
    pub energy: Option<f64>,
    pub power: Option<f64>,
    pub throughput: Option<(f64, Workload)>,
    pub scaling_efficiency: Option<f64>,
    pub mfu: Option<f64>,
    pub expect: Option<Verdict>,
}

/// One comparison of a claimed figure with a physical bound.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub quantity: String,
    pub claimed: f64,
    pub bound: f64,
    /// `upper`: the claim may not exceed the bound; `lower`: it may not fall below it.
    pub kind: &'static str,
    pub unit: &'static str,
    pub possible: bool,
    /// How far the claim is beyond the bound (≥ 1 when impossible; ≤ 1 is the margin left).
    pub factor: f64,
    pub why: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct AuditResult {
    pub id: String,
    pub statement: String,
    pub source: String,
    pub verdict: Verdict,
    /// The largest factor by which a bound is exceeded (1 when none is).
    pub factor: f64,
    pub checks: Vec<Check>,
    pub expect: Option<Verdict>,
    pub as_expected: bool,
    /// Figures the claim implies (e.g. the average power of an energy over a duration).
    pub implied: Vec<(String, String)>,
}

/// Read and check a claim file and the architecture (and workload) it names.
pub fn load_claim(name: &str, fs: &dyn Fs) -> Loaded<Claim> {
    let crate::model::Read {
        spec,
        file: id,
        value: figures,
        mut files,
        diagnostics: mut diags,
    } = match crate::model::read_lowered::<ClaimSpec, _>(name, fs, lower_claim) {
        Ok(r) => r,
        Err(u) => return u.into(),
    };
    let ls = load_system(&join(name, &spec.system), fs);
    merge(&mut files, ls.files, &mut diags, ls.diagnostics);
    let workload = spec.throughput.as_ref().map(|t| {
        let lw = load_workload(&join(name, &t.workload), fs);
        let v = lw.value.clone();
        merge(&mut files, lw.files, &mut diags, lw.diagnostics);
        v
    });
    let value = match (figures, ls.value) {
        (Some(f), Some(sys)) => {
            let throughput = match (f.throughput, workload) {
                (Some(v), Some(Some(w))) => Some((v, w)),
                _ => None,
            };
            if spec.devices == 0 || spec.devices > sys.devices {
                let mut cx = Ctx::new(&files, id);
                cx.error(
                    "devices",
                    format!(
                        "the claim names {} devices; `{}` has {}",
                        spec.devices, sys.name, sys.devices
                    ),
                    Some("name an architecture file with at least as many devices".into()),
                );
                diags.extend(cx.diags);
            }
            Some(Claim {
                id: spec.id.clone(),
                statement: spec.statement.clone(),
                file: name.to_string(),
                citation: spec.sources.get(&spec.source).cloned().unwrap_or_default(),
                system: sys,
                devices: spec.devices,
                duration: f.duration,
                energy: f.energy,
                power: f.power,
                throughput,
                scaling_efficiency: f.scaling,
                mfu: f.mfu,
                expect: Some(spec.expect),
            })
        }
        _ => None,
    };
    let ok = !diags.iter().any(|d| d.severity == Severity::Error);
    Loaded {
        value: if ok { value } else { None },
        files,
        diagnostics: diags,
    }
}

struct Figures {
    duration: Option<f64>,
    energy: Option<f64>,
    power: Option<f64>,
    throughput: Option<f64>,
    scaling: Option<f64>,
    mfu: Option<f64>,
}

fn lower_claim(cx: &mut Ctx, s: &ClaimSpec) -> Option<Figures> {
    cx.declare_sources(&s.sources);
    if s.version != FORMAT_VERSION {
        cx.error(
            "version",
            format!("unsupported format version {}", s.version),
            Some(format!("this tessera reads version {FORMAT_VERSION}")),
        );
    }
    if !s.sources.contains_key(&s.source) {
        cx.error(
            "source",
            format!("source `{}` is not declared in `sources`", s.source),
            Some("cite where the claim was made".into()),
        );
    }
    cx.enter_part(cx.file(), crate::diag::Path::root(), Some(&s.source));
    let mut ok = true;
    let mut opt = |cx: &mut Ctx, field: &str, q: &Option<Q>, dim: Dimension| match q {
        Some(q) => {
            let v = cx.positive(field, q, dim);
            ok &= v.is_some();
            v
        }
        None => None,
    };
    let duration = opt(cx, "duration", &s.duration, Dimension::Time);
    let energy = opt(cx, "energy", &s.energy, Dimension::Energy);
    let power = opt(cx, "power", &s.power, Dimension::Power);
    let scaling = opt(
        cx,
        "scaling_efficiency",
        &s.scaling_efficiency,
        Dimension::Ratio,
    );
    let mfu = opt(cx, "mfu", &s.mfu, Dimension::Ratio);
    let throughput = match &s.throughput {
        Some(t) => match parse_throughput(&t.value.0) {
            Ok(v) => {
                if let Some(tag) = split_tag(&t.value.0).1 {
                    cx.enter_field("throughput", None);
                    let _ = cx.q("value", &Q(format!("1 @{tag}")), Dimension::Ratio);
                    cx.leave();
                }
                Some(v)
            }
            Err(m) => {
                cx.enter_field("throughput", None);
                cx.error("value", m, None);
                cx.leave();
                ok = false;
                None
            }
        },
        None => None,
    };
    if [energy, power, throughput, scaling, mfu]
        .iter()
        .all(Option::is_none)
    {
        cx.error(
            "",
            "the claim states nothing to check",
            Some(
                "give at least one of `energy`, `power`, `throughput`, `scaling_efficiency`, `mfu`"
                    .into(),
            ),
        );
        ok = false;
    }
    cx.leave();
    ok.then_some(Figures {
        duration,
        energy,
        power,
        throughput,
        scaling,
        mfu,
    })
}

/// Largest power `devices` devices of `sys` can draw: the nodes that hold them at rated power
/// (each device at its power limit, as the estimate throttles it: its TDP or its share of a node or
/// facility limit; hosts, NICs, other parts; the node's power limit when larger), their share of
/// the switches, network and weight
/// store at their ratings (`System::rated_parts`, split as the estimate splits them), times the PUE.
pub fn max_power(sys: &System, devices: u64) -> f64 {
    let per_node = sys.node.devices.max(1) as u64;
    let nodes = devices.div_ceil(per_node) as f64;
    let cap = sys.power_cap();
    let limit = if cap > 0.0 {
        sys.device.tdp.min(cap)
    } else {
        sys.device.tdp
    };
    let p = sys.rated_parts();
    let parts = per_node as f64 * limit + p.node / sys.nodes.max(1) as f64;
    // the node's own rating, where larger, bounds what it can draw (parts the file leaves out)
    let node = sys.node.power_limit.unwrap_or(0.0).max(parts);
    let shared = p.scale_up_switches + p.scale_out_switches + p.weight_store;
    let share = shared * nodes / sys.nodes.max(1) as f64;
    (nodes * node + share) * sys.pue
}

/// Least power the devices draw while running: their idle power (0 where the file gives none).
pub fn min_power(sys: &System, devices: u64) -> f64 {
    devices as f64 * sys.device.idle_power
}

/// Model FLOPs per unit of work (token or sample) and the precision they run at.
fn flops_per_unit(w: &Workload) -> Option<(f64, crate::model::precision::Precision)> {
    match (&w.model, &w.task) {
        (Model::Transformer(t), Task::Training(tr)) => {
            let k = if tr.lora.is_some() { 2.0 } else { 3.0 };
            Some((
                k * t.forward_flops_per_token(tr.seq, tr.flash_attention),
                tr.compute,
            ))
        }
        (Model::Transformer(t), Task::Inference(i)) => {
            let ctx = i.prompt + i.output / 2;
            Some((t.forward_flops_per_token(ctx.max(1), false), i.compute))
        }
        (Model::Cnn(c), Task::Training(tr)) => Some((
            3.0 * c.layers.iter().map(|l| l.flops()).sum::<f64>(),
            tr.compute,
        )),
        _ => None,
    }
}

fn check(
    quantity: &str,
    claimed: f64,
    bound: f64,
    kind: &'static str,
    unit: &'static str,
    why: String,
) -> Check {
    let (possible, factor) = if kind == "upper" {
        (claimed <= bound * (1.0 + 1e-9), claimed / bound)
    } else {
        (
            claimed >= bound * (1.0 - 1e-9),
            if claimed > 0.0 {
                bound / claimed
            } else {
                f64::INFINITY
            },
        )
    };
    Check {
        quantity: quantity.to_string(),
        claimed,
        bound,
        kind,
        unit,
        possible,
        factor,
        why,
    }
}

/// Check a claim against every bound that applies.
pub fn audit(c: &Claim) -> AuditResult {
    let sys = &c.system;
    let n = c.devices;
    let pmax = max_power(sys, n);
    let pmin = min_power(sys, n);
    let nodes = n.div_ceil(sys.node.devices.max(1) as u64);
    let fmt = crate::units::fmt_si;
    let power_why = format!(
        "{n} × {} at most: {nodes} node(s) of `{}` at rated power ({} per device TDP, hosts, NICs, switches) × PUE {}",
        sys.device.name,
        sys.node.name,
        fmt(sys.device.tdp, "W"),
        sys.pue
    );
    let mut checks = Vec::new();
    let mut implied = Vec::new();
    if let Some(e) = c.energy {
        match c.duration {
            Some(d) => {
                implied.push(("average power".into(), fmt(e / d, "W")));
                let dev = n as f64 * sys.device.tdp * d;
                implied.push((
                    format!("share of the {n} devices alone at TDP"),
                    format!("{} at most, {:.2}× of it claimed", fmt(dev, "J"), e / dev),
                ));
                implied.push((
                    "time at the power bound".into(),
                    format!("at least {}", fmt_time(e / pmax)),
                ));
                checks.push(check(
                    "energy",
                    e,
                    pmax * d,
                    "upper",
                    "J",
                    format!("{power_why}, over {}", fmt_time(d)),
                ));
                if pmin > 0.0 {
                    checks.push(check(
                        "energy",
                        e,
                        pmin * d,
                        "lower",
                        "J",
                        format!(
                            "{n} devices idle at {} each, over {}",
                            fmt(sys.device.idle_power, "W"),
                            fmt_time(d)
                        ),
                    ));
                }
            }
            None => implied.push((
                "time at the power bound".into(),
                format!(
                    "at least {} (no duration stated: energy alone bounds nothing)",
                    fmt_time(e / pmax)
                ),
            )),
        }
    }
    if let Some(p) = c.power {
        checks.push(check("power", p, pmax, "upper", "W", power_why.clone()));
        if pmin > 0.0 {
            checks.push(check(
                "power",
                p,
                pmin,
                "lower",
                "W",
                format!(
                    "{n} devices idle at {} each",
                    fmt(sys.device.idle_power, "W")
                ),
            ));
        }
    }
    if let Some((thr, w)) = &c.throughput {
        if let Some((fpu, prec)) = flops_per_unit(w) {
            let (rate, run) = sys.device.matmul_rate(prec);
            let peak = rate * n as f64;
            checks.push(check(
                "throughput",
                *thr,
                peak / fpu,
                "upper",
                "/s",
                format!(
                    "{} of {} at {} peak ({} per device) over {} FLOP per unit",
                    fmt(peak, "FLOP/s"),
                    n,
                    run,
                    fmt(rate, "FLOP/s"),
                    fmt(fpu, "")
                ),
            ));
            implied.push(("FLOP/s implied".into(), fmt(thr * fpu, "FLOP/s")));
        }
        if let (Model::Transformer(t), Task::Inference(i)) = (&w.model, &w.task) {
            // Each generation step of a batch reads all weights once; with every device's
            // fastest memory streaming them, `batch` tokens per weight read at most.
            let weights = t.params() * i.weights.bytes();
            let bw = sys
                .device
                .memory
                .iter()
                .filter(|m| !m.cache)
                .map(|m| m.bandwidth)
                .fold(0.0, f64::max);
            if bw > 0.0 && weights > 0.0 {
                let bound = i.batch as f64 * bw * n as f64 / weights;
                checks.push(check(
                    "throughput",
                    *thr,
                    bound,
                    "upper",
                    "/s",
                    format!(
                        "batch {} × {} × {n} devices ({} each) / {} of weights: one weight read per generated token of each request",
                        i.batch,
                        fmt(bw, "B/s"),
                        sys.device.name,
                        fmt(weights, "B")
                    ),
                ));
            }
        }
    }
    if let Some(s) = c.scaling_efficiency {
        checks.push(check(
            "scaling efficiency",
            s,
            1.0,
            "upper",
            "",
            "N devices cannot do more than N times the work of one (super-linear scaling needs a memory effect the claim must name)".into(),
        ));
    }
    if let Some(m) = c.mfu {
        checks.push(check(
            "MFU",
            m,
            1.0,
            "upper",
            "",
            "model FLOPs cannot exceed the devices' peak".into(),
        ));
    }
    let factor = checks
        .iter()
        .filter(|k| !k.possible)
        .map(|k| k.factor)
        .fold(1.0, f64::max);
    let verdict = if checks.iter().all(|k| k.possible) {
        Verdict::Plausible
    } else {
        Verdict::Impossible
    };
    AuditResult {
        id: c.id.clone(),
        statement: c.statement.clone(),
        source: c.citation.clone(),
        verdict,
        factor,
        checks,
        expect: c.expect,
        as_expected: c.expect.is_none_or(|e| e == verdict),
        implied,
    }
}

/// A duration in the largest sensible unit.
pub fn fmt_time(s: f64) -> String {
    if s >= 86400.0 {
        format!("{:.1} days", s / 86400.0)
    } else if s >= 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 60.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        crate::units::fmt_si(s, "s")
    }
}
