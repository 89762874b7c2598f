//! A sweep's axes read from its inputs: the machine axes (each checked against the bound its
//! file field has), the device counts and the mapping axes, with the energy figures the machine
//! axes make each point re-derive. Apart from the plan so the plan's resolution reads as steps.

use super::super::expr;
use super::super::space::Axis;
use super::super::values as allowed;
use super::input::Inputs;
use crate::diag::Diagnostic;
use crate::engine::paths::{self, MapVal};
use crate::model::system::System;

/// The sweep's axes as the inputs give them: the machine axes, the device counts, the
/// mapping axes, and which energy figures the machine axes make a point re-derive.
#[derive(Default)]
pub(super) struct Axes {
    pub axes: Vec<Axis>,
    pub devices: Option<Vec<u64>>,
    pub map_axes: Vec<(String, Vec<MapVal>)>,
    pub derive: bool,
    pub device_energy: u32,
    pub machine_energy: u32,
}

/// Read every axis of `inputs`, each checked against the bound its file field has; errors go
/// to `diags` and the axis is left out.
pub(super) fn read_axes(inputs: &Inputs, sys: &System, diags: &mut Vec<Diagnostic>) -> Axes {
    let mut out = Axes::default();
    let Axes {
        axes,
        devices,
        map_axes,
        derive,
        device_energy,
        machine_energy,
    } = &mut out;
    let mut seen: Vec<&str> = Vec::new();
    for a in &inputs.axes {
        let p = a.path.trim();
        if seen.contains(&p) {
            diags.push(a.at.error(
                format!("`{p}` is varied twice"),
                Some("give each parameter one list of values".into()),
            ));
            continue;
        }
        seen.push(p);
        let kind = match paths::classify(p, sys) {
            Ok(k) => k,
            Err((m, h)) => {
                diags.push(a.at.error(m, h));
                continue;
            }
        };
        let knob = match kind {
            paths::PathKind::Devices { per } => {
                // `nodes` is the device count in whole nodes of the system's kind.
                if devices.is_some() {
                    diags.push(a.at.error(
                        format!(
                            "`{p}` sets the device count, which `devices` or `nodes` already varies"
                        ),
                        Some("vary `devices` or `nodes`, not both".into()),
                    ));
                    continue;
                }
                let counts: Result<Vec<u64>, _> = expr::parse_counts(&a.values)
                    .map_err(|(m, h)| (format!("`{p}`: {m}"), h))
                    .and_then(|v| v.into_iter().map(|n| allowed::devices(p, n)).collect());
                match counts {
                    Ok(v) => *devices = Some(v.iter().map(|n| n.saturating_mul(per)).collect()),
                    Err((m, h)) => diags.push(a.at.error(m, h)),
                }
                continue;
            }
            paths::PathKind::Mapping(field) => {
                let vals: Result<Vec<MapVal>, (String, Option<String>)> = match field {
                    "recompute" | "sp" | "expert_dispatch" | "tp_overlap_method"
                    | "offload_optimizer" | "offload_weights" => expr::parse_words(&a.values)
                        .iter()
                        .map(|s| paths::mapping_value(field, s))
                        .collect(),
                    _ => expr::parse_counts(&a.values)
                        .map(|v| v.into_iter().map(MapVal::Count).collect()),
                };
                // the bound a mapping file holds the field to (its message names the path)
                let bound = |v: &Vec<MapVal>| v.iter().try_for_each(|x| allowed::mapping(field, x));
                match vals.map_err(|(m, h)| (format!("`{p}`: {m}"), h)) {
                    Ok(v) if v.is_empty() => {
                        diags.push(a.at.error(format!("`{p}` has no values"), None))
                    }
                    Ok(v) => match bound(&v) {
                        Ok(()) => map_axes.push((field.to_string(), v)),
                        Err((m, h)) => diags.push(a.at.error(m, h)),
                    },
                    Err((m, h)) => diags.push(a.at.error(m, h)),
                }
                continue;
            }
            paths::PathKind::Workload(_) => {
                diags.push(a.at.error(
                    format!("`{p}` is a field of the workload, not a sweep axis yet"),
                    Some("write the value in the workload file, or set it on `estimate`, `compare` or `scale` with `--set`".into()),
                ));
                continue;
            }
            paths::PathKind::Machine(k) => k,
        };
        let values = match expr::parse(&a.values, knob.dimension) {
            Ok(v) => v,
            Err((m, h)) => {
                diags.push(a.at.error(format!("`{p}`: {m}"), h));
                continue;
            }
        };
        // the bound the architecture file holds the figure to
        if let Err((m, h)) = allowed::machine_axis(p, &knob, &values) {
            diags.push(a.at.error(m, h));
            continue;
        }
        *derive |= knob.derive;
        if let Some(i) = knob.device_energy {
            *device_energy |= 1 << i;
        }
        if let Some(i) = knob.machine_energy {
            *machine_energy |= 1 << i;
        }
        axes.push(Axis {
            path: p.to_string(),
            dimension: knob.dimension,
            values,
            targets: knob.targets,
        });
    }
    out
}
