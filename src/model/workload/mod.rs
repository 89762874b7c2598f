//! The validated workload: a transformer, CNN or operator graph, trained or served, with the
//! arithmetic every estimate starts from (parameters, FLOPs per token).

mod check;
mod cnn;
mod graph;
mod lower;
mod types;

pub use cnn::resnet;
pub use types::{
    BatchScaling, Cnn, ConvLayer, Experts, Gemm, Graph, GraphOp, Inference, Lora, Mla, Model,
    PrecisionPhase, Run, Speculative, Target, Task, Training, Transformer, Workload,
};

use check::check_mapping;
use lower::lower;

use super::Ctx;
use crate::diag::Path;
use crate::model::mapping::MappingPlan;
use crate::spec::mapping::MappingSpec;
use crate::spec::{Fs, Loaded, FORMAT_VERSION};

/// Read and lower a workload file.
pub fn load_workload(name: &str, fs: &dyn Fs) -> Loaded<Workload> {
    match super::read_lowered(name, fs, lower) {
        Ok(r) => super::checked(r.value, r.files, r.diagnostics),
        Err(u) => u.into(),
    }
}

/// Read and check a mapping file.
pub fn load_mapping(name: &str, fs: &dyn Fs) -> Loaded<MappingPlan> {
    let check = |cx: &mut Ctx, spec: &MappingSpec| {
        if spec.version != Some(FORMAT_VERSION) {
            cx.error(
                "version",
                match spec.version {
                    Some(v) => format!("unsupported format version {v}"),
                    None => "a mapping file needs `version: 1`".into(),
                },
                Some(format!("this tessera reads version {FORMAT_VERSION}")),
            );
        }
        cx.declare_sources(&spec.sources);
        cx.enter_part(cx.file(), Path::root(), spec.source.as_ref());
        if spec.source.is_none() {
            cx.warn(
                "",
                "the mapping names no `source`",
                Some("add `source: \"key\"` and `sources: { \"key\": \"paper, table\" }`, or `source: \"assumed\"`".into()),
            );
        }
        check_mapping(cx, spec);
        cx.leave();
        Some(MappingPlan::from(spec))
    };
    match super::read_lowered(name, fs, check) {
        Ok(r) => super::checked(r.value, r.files, r.diagnostics),
        Err(u) => u.into(),
    }
}
