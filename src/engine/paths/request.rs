//! What a path names (devices, a mapping field, a workload field or the machine) and the
//! mapping and workload values `--set` and sweep axes give.

use super::knob::Knob;
use super::listed::{MAPPING_AXES, WORKLOAD_FIELDS};
use super::resolve::resolve;
use crate::model::bounds::{self};
use crate::model::precision::Precision;
use crate::model::system::System;

/// What a path names: the device count (in devices or whole nodes), a mapping field, a field of
/// the workload, or figures of the machine. The one classification `sweep` axes and the `--set`
/// overrides of `estimate`, `compare` and `scale` share.
#[derive(Clone, Debug)]
pub enum PathKind {
    /// `devices` (per = 1) or `nodes` (per = devices per node).
    Devices { per: u64 },
    /// `mapping.<field>`, a field of [`MAPPING_AXES`].
    Mapping(&'static str),
    /// `workload.<field>`, a field of [`WORKLOAD_FIELDS`] (overrides only, not sweep axes yet).
    Workload(&'static str),
    /// A figure of the machine.
    Machine(Knob),
}

/// Classify `path` against `sys`; `Err` carries a message and a hint listing the known paths.
pub fn classify(path: &str, sys: &System) -> Result<PathKind, (String, Option<String>)> {
    if path == "devices" {
        return Ok(PathKind::Devices { per: 1 });
    }
    if path == "nodes" {
        return Ok(PathKind::Devices {
            per: u64::from(sys.node.devices).max(1),
        });
    }
    if let Some(field) = path.strip_prefix("mapping.") {
        return match MAPPING_AXES.iter().find(|a| **a == field) {
            Some(f) => Ok(PathKind::Mapping(f)),
            None => {
                let hint = match crate::diag::did_you_mean(field, MAPPING_AXES) {
                    Some(s) => format!(
                        "did you mean `mapping.{s}`? mapping axes: {}",
                        MAPPING_AXES.join(", ")
                    ),
                    None => format!("mapping axes: {}", MAPPING_AXES.join(", ")),
                };
                Err((format!("unknown mapping axis `{path}`"), Some(hint)))
            }
        };
    }
    if let Some(field) = path.strip_prefix("workload.") {
        return match WORKLOAD_FIELDS.iter().find(|a| **a == field) {
            Some(f) => Ok(PathKind::Workload(f)),
            None => {
                let hint = match crate::diag::did_you_mean(field, WORKLOAD_FIELDS) {
                    Some(s) => format!(
                        "did you mean `workload.{s}`? workload fields: {}",
                        WORKLOAD_FIELDS.join(", ")
                    ),
                    None => format!("workload fields: {}", WORKLOAD_FIELDS.join(", ")),
                };
                Err((format!("unknown workload field `{path}`"), Some(hint)))
            }
        };
    }
    resolve(path, sys).map(PathKind::Machine)
}

/// A value of a mapping field.
#[derive(Clone, Debug, PartialEq)]
pub enum MapVal {
    Count(u64),
    Recompute(crate::model::mapping::Recompute),
    Bool(bool),
    Dispatch(crate::vocab::Dispatch),
    TpOverlap(crate::vocab::TpOverlapMethod),
    /// A share between 0 and 1 (`offload_optimizer`).
    Fraction(f64),
}

/// Parse one value of the mapping field `field` (`8`, `Selective`, `true`, `Hierarchical`); its
/// bound is `values::mapping`'s to check.
pub fn mapping_value(field: &str, word: &str) -> Result<MapVal, (String, Option<String>)> {
    use crate::model::mapping::Recompute;
    let w = word.trim();
    match field {
        "recompute" => match w.to_ascii_lowercase().as_str() {
            "none" => Ok(MapVal::Recompute(Recompute::None)),
            "selective" => Ok(MapVal::Recompute(Recompute::Selective)),
            "full" => Ok(MapVal::Recompute(Recompute::Full)),
            _ => Err((
                format!("`{w}` is not a recomputation"),
                Some("choose None, Selective or Full".into()),
            )),
        },
        "sp" | "offload_weights" => match w {
            "true" | "1" => Ok(MapVal::Bool(true)),
            "false" | "0" => Ok(MapVal::Bool(false)),
            _ => Err((format!("`{w}` is not true or false"), None)),
        },
        "expert_dispatch" => match w.to_ascii_lowercase().as_str() {
            "alltoall" => Ok(MapVal::Dispatch(crate::vocab::Dispatch::AllToAll)),
            "hierarchical" => Ok(MapVal::Dispatch(crate::vocab::Dispatch::Hierarchical)),
            _ => Err((
                format!("`{w}` is not an expert dispatcher"),
                Some("choose AllToAll or Hierarchical".into()),
            )),
        },
        "tp_overlap_method" => match w.to_ascii_lowercase().replace('_', "").as_str() {
            "pipeline" => Ok(MapVal::TpOverlap(crate::vocab::TpOverlapMethod::Pipeline)),
            "ringexchange" => Ok(MapVal::TpOverlap(
                crate::vocab::TpOverlapMethod::RingExchange,
            )),
            _ => Err((
                format!("`{w}` is not a tensor-parallel overlap method"),
                Some("choose Pipeline or RingExchange".into()),
            )),
        },
        "offload_optimizer" => match w.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(MapVal::Fraction(f)),
            _ => Err((
                format!("`{w}` is not a fraction between 0 and 1"),
                Some(
                    "the share of each device's optimizer state kept in host memory, e.g. 0.5"
                        .into(),
                ),
            )),
        },
        _ => match w.parse::<u64>() {
            Ok(c) => Ok(MapVal::Count(c)),
            Err(_) => Err((
                format!("`{w}` is not a count"),
                Some(format!("`mapping.{field}` takes a whole number, e.g. 8")),
            )),
        },
    }
}

/// Set the mapping field `field` of `s` to `v`.
pub fn set_mapping(s: &mut crate::model::mapping::MappingPlan, field: &str, v: &MapVal) {
    match (field, v) {
        ("dp", MapVal::Count(c)) => s.dp = Some(*c),
        ("tp", MapVal::Count(c)) => s.tp = Some(*c),
        ("pp", MapVal::Count(c)) => s.pp = Some(*c),
        ("cp", MapVal::Count(c)) => s.cp = Some(*c),
        ("ep", MapVal::Count(c)) => s.ep = Some(*c),
        ("etp", MapVal::Count(c)) => s.etp = Some(*c),
        ("micro_batch", MapVal::Count(c)) => s.micro_batch = Some(*c),
        ("interleave", MapVal::Count(c)) => s.interleave = Some(*c),
        ("zero", MapVal::Count(c)) => s.zero = Some((*c).min(255) as u8),
        ("shard", MapVal::Count(c)) => s.shard = Some(*c),
        ("recompute", MapVal::Recompute(r)) => s.recompute = Some(*r),
        ("recompute_layers", MapVal::Count(c)) => s.recompute_layers = Some(*c),
        ("sp", MapVal::Bool(b)) => s.sp = Some(*b),
        ("offload_activation_layers", MapVal::Count(c)) => s.offload_activation_layers = Some(*c),
        ("offload_optimizer", MapVal::Fraction(f)) => s.offload_optimizer = Some(*f),
        ("offload_weights", MapVal::Bool(b)) => s.offload_weights = Some(*b),
        ("expert_dispatch", MapVal::Dispatch(d)) => s.expert_dispatch = Some(*d),
        ("tp_overlap_method", MapVal::TpOverlap(x)) => s.tp_overlap_method = Some(*x),
        _ => {}
    }
}

/// A set degree (`tp`, `pp`, `cp`) frees `dp` to fill the devices the others leave, unless `dp`
/// is set too (the sweep's rule for `mapping.*` axes, and `--set`'s).
pub fn free_dp(s: &mut crate::model::mapping::MappingPlan, fields: &[&str]) {
    if !fields.contains(&"dp") && fields.iter().any(|f| matches!(*f, "tp" | "pp" | "cp")) {
        s.dp = None;
    }
}

/// Set the workload field `field` (of [`WORKLOAD_FIELDS`]) of `w` from its text.
pub fn set_workload(
    w: &mut crate::model::workload::Workload,
    field: &str,
    text: &str,
) -> Result<(), (String, Option<String>)> {
    use crate::model::workload::Task;
    let Task::Training(t) = &mut w.task else {
        return Err((
            format!(
                "`workload.{field}` sets a training run; `{}` is not one",
                w.name
            ),
            None,
        ));
    };
    let t_ = text.trim();
    // the workload file's rule for its batch and sequence length
    let count = || match t_.parse::<u64>() {
        Ok(c) => bounds::count(&format!("workload.{field}"), c),
        _ => Err((
            format!("`workload.{field}` takes a whole number of at least 1, not `{t_}`"),
            None,
        )),
    };
    let precision = || {
        Precision::parse(t_).ok_or_else(|| {
            let names: Vec<&str> = Precision::names().collect();
            (
                format!("unknown precision `{t_}`"),
                Some(format!("precisions: {}", names.join(", "))),
            )
        })
    };
    match field {
        "global_batch" => t.global_batch = count()?,
        "seq" => t.seq = count()?,
        "compute" => t.compute = precision()?,
        "activations" => t.activations = precision()?,
        "weights" => t.weights = precision()?,
        "gradients" => t.gradients = precision()?,
        _ => {
            return Err((
                format!("unknown workload field `workload.{field}`"),
                Some(format!("workload fields: {}", WORKLOAD_FIELDS.join(", "))),
            ))
        }
    }
    Ok(())
}
