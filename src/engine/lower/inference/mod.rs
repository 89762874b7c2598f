//! Transformer inference as a per-layer pipeline: one decode round per step (a token for every
//! request in flight), the prefill of the batch amortised over the generated tokens. Each stage
//! is a block of consecutive layers on its own devices (tensor-parallel inside it); stages may
//! differ in layers and devices; the embedding table sits on the first stage and the output
//! head on the last (or, with tied embeddings, the one table serves both on the last); weights,
//! KV cache and activations each at their own precision; every stage sends its activations to
//! the next over the link between their devices (scale-up inside a domain, scale-out across),
//! and the last sends the next tokens back to the first. Memory is counted per stage. The stage
//! classes of the program carry the rest: a round is micro-batches × the slowest stage, or the
//! chain of all stages when fewer micro-batches are in flight (`cpu::eval_traced`).
//!
//! On a wafer a stage is a region of the mesh's cores rather than a set of devices
//! ([`stages`], [`regions`], [`mesh`]).
//!
//! Serving reads two programs of the same lowering: the round above (`Mode::Round`: its time is
//! the time per output token, its tokens the system's) and one request's prompt alone
//! (`Mode::Prefill`, for the time to first token); `engine::serve` combines them. The KV cache
//! is paged ([`kv_tokens`]).
//!
//! One file per concern, each importing only the ones before it: the mapping's checks
//! ([`checks`]); the leaves ([`kv`], [`params`], [`piece`]); the figures derived once ([`shape`]);
//! the stage classes ([`regions`], [`stages`]); the layer's kernels as data ([`layer`]); the
//! decode round ([`decode`]), the mesh's traffic ([`mesh`]), prefill ([`prefill`]) and the
//! footprint ([`footprint`]); the stage loop ([`program`]) and the prefill pool ([`pool`]). This
//! file holds the two entry points.

mod checks;
mod decode;
mod footprint;
mod kv;
mod layer;
mod mesh;
mod params;
mod piece;
mod pool;
mod prefill;
mod program;
mod regions;
mod shape;
mod stages;

use crate::engine::program::Program;
use crate::engine::reason::Reason;
use crate::model::mapping::Mapping;
use crate::model::system::System;
use crate::model::workload::{Inference, Transformer};
pub use kv::{kv_tokens, KV_PAGE_TOKENS};
use shape::Mode;

/// The steady-state round of continuous batching on the decode instances, with a prefill pool's
/// stage beside them where the mapping has one.
pub(super) fn transformer_inference(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
) -> Result<Program, Reason> {
    let mut p = program::build(sys, t, inf, m, Mode::Round)?;
    if m.pool.any() {
        pool::attach(&mut p, sys, t, inf, m)?;
    }
    Ok(p)
}

/// One request's prompt alone: on a prefill pool's instance where the mapping has a pool, else
/// through the instance.
pub(super) fn transformer_prefill(
    sys: &System,
    t: &Transformer,
    inf: &Inference,
    m: &Mapping,
) -> Result<Program, Reason> {
    if m.pool.any() {
        return pool::pool_prefill(sys, t, inf, m);
    }
    program::build(sys, t, inf, m, Mode::Prefill)
}
