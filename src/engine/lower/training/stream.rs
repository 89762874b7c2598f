//! Weight streaming (Cerebras MemoryX and SwarmX): when a training step keeps its model state in
//! an external weight store that runs the optimizer update itself, the weights stream to the
//! devices layer by layer and the gradients stream back (the operators' weight bytes, placed in
//! the store by the evaluators' placement rule), the update runs inside the store at its own
//! compute and memory bandwidth, and the data-parallel replicas meet in the broadcast/reduce tree
//! that carries the stream rather than in a gradient all-reduce between them. Only what a step
//! moves crosses the link: weights in, gradients out; never the optimizer state.
//!
//! Whether a step streams depends on where its state fits, which a sweep moves point by point, so
//! lowering does not choose: on a system with a weight store it lowers both forms at once, the
//! records of each marked ([`Form`]), and the evaluators run the one the stage's placement on the
//! machine they evaluate selects (`cpu::streams`).

use super::memory::State;
use super::shape::Shape;
use crate::engine::lower::builder::Builder;
use crate::engine::program::*;
use crate::model::system::System;

/// Whether a step on `sys` is lowered in its weight-streamed form beside its on-device one: the
/// system has a weight store (whether the store can run the update, and whether the state is
/// placed in it, are the machine's figures, read where the program is evaluated).
pub(super) fn has_streamed_form(sys: &System) -> bool {
    sys.weight_store.is_some()
}

/// Add the weight-streaming form to the program of `b` (one stage class's records, all of the
/// on-device form so far): the optimizer update moves into the store (once for all replicas: each
/// device's share of it), the gradient reduction and the parameter gathers between replicas go
/// (the tree reduces the gradients at line rate on their way to the store and broadcasts the
/// weights on their way out, so every device's link carries the stream once, whatever the
/// replica count), and the tree's depth is charged per pass. What goes is marked
/// [`Form::OnDevice`], what comes [`Form::Streamed`], appended, so that each form's records are
/// in the order a lowering of that form alone gives them.
pub(super) fn add_streamed_form(b: &mut Builder, d: &Shape, state: &State) {
    let replicas = d.dpn;
    // (the state is the store's: nothing stays to offload to a host)
    for o in &mut b.ops {
        if matches!(o.phase, Phase::Update | Phase::Host) {
            o.form = Form::OnDevice;
        }
    }
    let params = state.trainable_local / replicas;
    b.ops.push(Op {
        name: "optimizer update (in the weight store)".into(),
        matrix: false,
        precision: d.vecp,
        flops: 12.0 * params,
        occupancy: 1.0,
        // read and write the optimizer state, read the reduced gradient (and again for the
        // global-norm clipping, and zero it), write the weight: as on a device, in the store's
        // memory
        weight_bytes: params * (2.0 * d.tr.optimizer_bytes + 3.0 * d.gb + d.wb),
        act_bytes: 0.0,
        count: 1.0,
        section: Section::Step,
        phase: Phase::Store,
        form: Form::Streamed,
    });
    for c in &mut b.comms {
        if matches!(
            c.role,
            Role::GradientReduction
                | Role::ParameterGather
                | Role::WeightGather
                | Role::OptimizerOffload
                | Role::WeightOffload
        ) {
            c.form = Form::OnDevice;
        }
    }
    if replicas > 1.0 {
        // SwarmX (cerebras.net/glossary/swarmx): a tree of broadcast/reduce nodes, latency
        // growing as log N. Per micro-batch the stream passes it three times: the weights out
        // for the forward and again for the backward, the gradients back. Its bytes are the
        // operators' weight bytes, already on the store's link.
        b.comms.push(
            Comm {
                name: "weight stream: broadcast/reduce tree".into(),
                role: Role::GradientReduction,
                kind: CollKind::Broadcast,
                bytes: 0.0,
                inner: 1.0,
                outer: replicas,
                count: 3.0,
                section: Section::MicroBatch,
                overlap: Overlap::None,
                weight_stream: false,
                host: false,
                inner_share: 1.0,
                mesh: 0.0,
                coeffs: Default::default(),
                form: Form::Streamed,
            }
            .with_coeffs(),
        );
    }
}
