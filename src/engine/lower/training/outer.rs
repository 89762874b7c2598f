//! The operators of a training step outside the repeated transformer layer and its head: LoRA's
//! adapters, and the optimizer update with what the step does to the weights after it.

use super::memory::State;
use super::shape::Shape;
use crate::engine::lower::builder::Builder;
use crate::engine::program::{Form, Op, Phase, Section};

/// LoRA adapters: each adapted projection adds two thin GEMMs (input × A, then × B, rank r)
/// and the sum into the frozen projection's output. Their FLOPs are negligible; their time is
/// the memory traffic: read the projection's input, write and re-read the adapter output and
/// the sum (about 4 × tok × h / tp). The backward reads and writes about twice as much.
pub(super) fn lora(b: &mut Builder, d: &Shape) {
    let Some(lr) = d.tr.lora else { return };
    let Shape {
        tok,
        h,
        tpf,
        ab,
        act_shard,
        ..
    } = *d;
    let r = lr.rank as f64;
    let n = lr.adapted_per_layer as f64;
    let f = 4.0 * tok * r * h / tpf;
    let bytes = (tok * h / act_shard + 4.0 * tok * h / tpf) * ab;
    for (phase, k) in [(Phase::Forward, 1.0), (Phase::Backward, 2.0)] {
        b.op(Op {
            name: "lora adapters".into(),
            matrix: false,
            precision: d.vecp,
            flops: f * k * n,
            occupancy: 1.0,
            weight_bytes: 0.0,
            act_bytes: bytes * k * n,
            count: d.l,
            section: Section::MicroBatch,
            phase,
            form: Form::Both,
        });
    }
}

/// The update reads and writes the optimizer state, reads the gradient and writes the weight;
/// the LLM recipes also read every gradient once more for the global-norm clipping and write
/// it once to zero it for the next step (Megatron-LM / NeMo: clip_grad 1.0, zero_grad).
///
/// With the optimizer state offloaded (`Mapping::offload_optimizer`), the host updates its share
/// of the parameters in its own memory: it reads and writes the moments and its fp32 copy of the
/// master weights and reads their fp32 gradient (2 × optimizer bytes + 4 per parameter: 28 for
/// Adam), bound by the host memory's bandwidth (`Phase::Host`); the devices update the rest.
pub(super) fn optimizer(b: &mut Builder, d: &Shape, state: &State) {
    // ZeRO shards the dense parameters' update over dp × cp, the routed experts' over their
    // expert-data-parallel ranks, or both over the shard group of hybrid sharding
    // (`memory::state`).
    let updated = state.updated - state.host_updated;
    if state.host_updated > 0.0 {
        b.op(Op {
            name: "optimizer update (on the host)".into(),
            matrix: false,
            precision: d.vecp,
            flops: 0.0,
            occupancy: 1.0,
            weight_bytes: state.host_updated
                * (2.0 * d.tr.optimizer_bytes + super::memory::MASTER_BYTES),
            act_bytes: 0.0,
            count: 1.0,
            section: Section::Step,
            phase: Phase::Host,
            form: Form::Both,
        });
    }
    b.op(Op {
        name: "optimizer update".into(),
        matrix: false,
        precision: d.vecp,
        flops: 12.0 * updated,
        occupancy: 1.0,
        weight_bytes: updated * (2.0 * d.tr.optimizer_bytes + 3.0 * d.gb + d.wb),
        act_bytes: 0.0,
        count: 1.0,
        section: Section::Step,
        phase: Phase::Update,
        form: Form::Both,
    });
    // the updated weights quantized for the next step's GEMMs, once per step (`vocab::Scaling`;
    // none for delayed per-tensor scaling)
    let quant = if d.tr.compute.bytes() <= 1.0 {
        d.tr.scaling.bytes_per_element(d.wb)
    } else {
        0.0
    };
    if quant > 0.0 {
        b.op(Op {
            name: "quantize weights".into(),
            matrix: false,
            precision: d.vecp,
            flops: state.params_local,
            occupancy: 1.0,
            weight_bytes: state.params_local * quant,
            act_bytes: 0.0,
            count: 1.0,
            section: Section::Step,
            phase: Phase::Update,
            form: Form::Both,
        });
    }
}
