//! What a serving mapping must satisfy before anything is built: no context parallelism, expert
//! parallelism that divides the experts and the instances, and stages that hold the model's
//! layers with devices that divide its attention heads. A mapping that fails is infeasible, with
//! its reason.

use crate::engine::reason::Reason;
use crate::model::mapping::{Mapping, Placement};
use crate::model::workload::Transformer;

/// The mapping's stages (its `placement`, else `pp` uniform stages of `tp` devices), checked.
pub(super) fn placement(t: &Transformer, m: &Mapping) -> Result<Placement, Reason> {
    if m.cp > 1 {
        return Err(Reason::unsupported(
            "context parallelism is modelled for training only",
        ));
    }
    // Expert parallelism: `ep` of the `dp` model instances share their experts.
    if m.ep > 1 {
        let Some(e) = t.experts.as_ref() else {
            return Err(Reason::mapping(
                "expert parallelism needs a mixture-of-experts model",
            ));
        };
        if m.ep > e.count || !e.count.is_multiple_of(m.ep) {
            return Err(Reason::mapping(format!(
                "ep {} does not divide {} experts",
                m.ep, e.count
            )));
        }
        if !m.dp.is_multiple_of(m.ep) {
            return Err(Reason::mapping(format!(
                "ep {} does not divide the {} model instances (dp)",
                m.ep, m.dp
            )));
        }
    }
    let placement = if m.placement.n > 0 {
        m.placement
    } else {
        Placement::uniform(t.layers, m.tp, m.pp)
    };
    if placement.layers() != t.layers {
        return Err(Reason::mapping(format!(
            "the stages hold {} layers, the model has {}",
            placement.layers(),
            t.layers
        )));
    }
    for g in placement.groups() {
        if g.layers > 0 && !t.heads.is_multiple_of(g.devices) {
            return Err(Reason::mapping(format!(
                "a stage's {} devices do not divide {} attention heads",
                g.devices, t.heads
            )));
        }
    }
    Ok(placement)
}
