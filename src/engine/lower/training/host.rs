//! The copies between a device and its node's host memory a training step makes: offloaded
//! activations, an offloaded optimizer state's gradients and master weights, and offloaded
//! weights, each hidden behind the compute beside it where the framework overlaps it.

use super::memory::{Activations, State};
use super::shape::Shape;
use crate::engine::lower::builder::Builder;
use crate::engine::program::*;

/// The copies of offloaded activations between the device and its node's host memory, per
/// micro-batch: each offloaded layer's saved tensors out over the host link as the forward pass
/// leaves the layer, hidden behind the forward compute (the copy runs on its own stream while the
/// next layers compute), and back before the layer's backward, hidden behind the backward
/// compute. What the compute does not cover is exposed.
pub(super) fn offload(b: &mut Builder, act: &Activations) {
    if act.offloaded <= 0.0 {
        return;
    }
    beside_passes(
        b,
        Role::ActivationOffload,
        act.offload_per_layer,
        act.offloaded_layers,
        [
            "offload activations to host",
            "reload activations from host",
        ],
    );
}

/// Per micro-batch, `count` copies of `bytes` over the host link hidden behind the forward
/// compute (`names[0]`) and as many behind the backward compute (`names[1]`).
fn beside_passes(b: &mut Builder, role: Role, bytes: f64, count: f64, names: [&'static str; 2]) {
    for (name, overlap) in names.into_iter().zip([Overlap::Forward, Overlap::Backward]) {
        b.comms.push(host_copy(
            name,
            role,
            bytes,
            count,
            Section::MicroBatch,
            overlap,
        ));
    }
}

/// One copy between a device and its node's host memory, over the host link alone.
fn host_copy(
    name: &'static str,
    role: Role,
    bytes: f64,
    count: f64,
    section: Section,
    overlap: Overlap,
) -> Comm {
    Comm {
        name: name.into(),
        role,
        kind: CollKind::SendRecv,
        bytes,
        inner: 1.0,
        outer: 1.0,
        count,
        section,
        overlap,
        weight_stream: false,
        host: true,
        inner_share: 1.0,
        mesh: 0.0,
        coeffs: Default::default(),
        form: Form::Both,
    }
    .with_coeffs()
}

/// The copies of an offloaded optimizer state's step over the host link: the fp32 gradients of
/// the parameters the host updates out to host memory, and the updated fp32 master weights back,
/// one after the other at the step's end (Megatron-Core's `HybridDeviceOptimizer` without
/// `overlap_cpu_optimizer_d2h_h2d`).
pub(super) fn offload_optimizer(b: &mut Builder, state: &State) {
    if state.host_updated <= 0.0 {
        return;
    }
    for name in [
        "optimizer offload: gradients to host",
        "optimizer offload: master weights from host",
    ] {
        b.comms.push(host_copy(
            name,
            Role::OptimizerOffload,
            state.host_updated * super::memory::MASTER_BYTES,
            1.0,
            Section::Step,
            Overlap::None,
        ));
    }
}

/// The copies of offloaded weights over the host link: each layer's weights in before its
/// forward, hidden behind the forward compute (the next layer's copy runs while this one
/// computes), and in again before its backward, hidden behind the backward's; once per step the
/// updated weights back to host memory, exposed at the step's end.
pub(super) fn offload_weights(b: &mut Builder, d: &Shape, state: &State) {
    if state.host_weights <= 0.0 {
        return;
    }
    beside_passes(
        b,
        Role::WeightOffload,
        state.layer_weights,
        d.l,
        [
            "weights from host for the forward",
            "weights from host for the backward",
        ],
    );
    b.comms.push(host_copy(
        "updated weights to host",
        Role::WeightOffload,
        state.host_weights,
        1.0,
        Section::Step,
        Overlap::None,
    ));
}
