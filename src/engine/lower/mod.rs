//! Lowering: a workload under a mapping onto a system → the flat cost program of one device (the
//! system → its machine vector is `engine::machine`). All model arithmetic (FLOPs, bytes,
//! collectives, memory footprint, pipeline schedule) lives under this module, once: one submodule
//! per workload family, and here the dispatch between them. What the families share sits in leaf
//! files that import nothing from here: the builder that collects operators and collectives
//! (`builder`), group placement on the topology (`place`), the precisions work runs at
//! (`precision`).

mod builder;
mod cnn;
mod graph;
mod inference;
mod place;
mod precision;
mod training;

pub use super::machine::machine;
use super::program::*;
use super::reason::Reason;
use crate::model::mapping::Mapping;
use crate::model::system::System;
use crate::model::workload::*;
pub use inference::{kv_tokens, KV_PAGE_TOKENS};
pub use place::{place_group, split_group, Group};
pub(crate) use precision::run_precision;
pub use training::{bubble_chunks, loss_bytes_per_logit, named_attention_kernel, pipeline_bubble};

/// Lower `w` under `m` onto `devices` devices of `sys`. `Err` is why the mapping is infeasible.
pub fn lower(sys: &System, w: &Workload, m: &Mapping, devices: u64) -> Result<Program, Reason> {
    if devices == 0 || devices > sys.devices {
        return Err(Reason::Devices {
            requested: devices,
            available: sys.devices,
        });
    }
    if m.devices() != devices {
        return Err(Reason::mapping(format!(
            "the mapping uses {} devices (dp {} × tp {} × pp {} × cp {}), not {devices}",
            m.devices(),
            m.dp,
            m.tp,
            m.pp,
            m.cp
        )));
    }
    if m.pool.any()
        && !matches!(
            (&w.model, &w.task),
            (Model::Transformer(_), Task::Inference(_))
        )
    {
        return Err(Reason::unsupported(
            "a prefill pool (disaggregated serving) is modelled for transformer inference only",
        ));
    }
    if m.placement.n > 0 && !matches!(w.task, Task::Inference(_)) {
        return Err(Reason::unsupported(
            "pipeline `stages` are modelled for transformer inference only",
        ));
    }
    let transformer_training = matches!(
        (&w.model, &w.task),
        (Model::Transformer(_), Task::Training(_))
    );
    if m.offload_activation_layers > 0 && !transformer_training {
        return Err(Reason::unsupported(
            "offloading activations to host memory is modelled for transformer training only",
        ));
    }
    if (m.offload_optimizer > 0.0 || m.offload_weights) && !transformer_training {
        return Err(Reason::unsupported(
            "offloading the optimizer state or the weights to host memory is modelled for transformer training only",
        ));
    }
    if m.etp.is_some_and(|e| e != m.tp) && !transformer_training {
        return Err(Reason::unsupported(
            "expert tensor parallelism apart from tp (etp) is modelled for transformer training only",
        ));
    }
    let split_counted = m.embedding_in_pipeline_split || m.loss_in_pipeline_split;
    if split_counted && !transformer_training {
        return Err(Reason::unsupported(
            "counting the embedding or the loss in the pipeline split is modelled for transformer training only",
        ));
    }
    match (&w.model, &w.task) {
        (Model::Transformer(t), Task::Training(tr)) => {
            training::transformer_training(sys, t, tr, m)
        }
        (Model::Transformer(t), Task::Inference(inf)) => {
            inference::transformer_inference(sys, t, inf, m)
        }
        (Model::Cnn(c), Task::Training(tr)) => cnn::cnn_training(sys, c, tr, m),
        (Model::Graph(g), Task::Run(r)) => graph::graph_run(sys, g, r, m),
        (Model::Graph(g), Task::Training(tr)) => graph::graph_run(
            sys,
            g,
            &Run {
                steps: None,
                samples_per_step: tr.global_batch as f64,
            },
            m,
        ),
        _ => Err(Reason::unsupported(
            "this combination of model and task is not modelled",
        )),
    }
}

/// The prefill of one request's prompt of a transformer inference workload `w` under `m`, alone
/// through its instance: the program time to first token is made of (`engine::serve`). The
/// same lowering as [`lower`]'s round, with the decode left out. `Err`: why it cannot run.
pub fn lower_prefill(
    sys: &System,
    w: &Workload,
    m: &Mapping,
    devices: u64,
) -> Result<Program, Reason> {
    match (&w.model, &w.task) {
        (Model::Transformer(t), Task::Inference(inf)) if m.devices() == devices => {
            inference::transformer_prefill(sys, t, inf, m)
        }
        (Model::Transformer(_), Task::Inference(_)) => lower(sys, w, m, devices),
        _ => Err(Reason::unsupported(
            "time to first token is modelled for transformer inference",
        )),
    }
}
