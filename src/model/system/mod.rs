//! The validated system: one accelerator type in nodes, a scale-up domain, a scale-out network,
//! with power for each part, all in SI units. [`load_system`] reads, resolves and lowers a file.

pub mod attention;
pub mod cost;
mod device;
mod execution;
mod lower;
mod parts;
mod software;
mod types;

pub use execution::Execution;
pub use parts::{check_part, check_part_fitted, load_part, source_of, MemFs, Part};
pub use software::Software;
pub use types::{
    data_energy_per_byte, unset_energy_warnings, Device, Dvfs, Efficiency, HostLink, MemLevel,
    Mesh, Node, PowerParts, ScaleOut, ScaleUp, System, UnsetEnergy, VectorSource, WeightStore,
    VECTOR_FROM_MATRIX,
};
// the rules the loader applies, stated in `model::rules`, at their earlier paths
pub use crate::model::rules::{
    energy_per_flop_from_tdp, reference_bytes_per_flop, reference_memory_power, REFERENCE_GEMM_N,
};

use lower::lower;

use super::Ctx;
use crate::diag::{Diagnostic, Path, Severity};
use crate::spec::arch::*;
use crate::spec::{Fs, Resolver};

/// Read and check a `Software` file.
pub fn load_software(name: &str, fs: &dyn Fs) -> crate::spec::Loaded<Software> {
    let check = |cx: &mut Ctx, spec: &SoftwareSpec| {
        if spec.version != crate::spec::FORMAT_VERSION {
            cx.error(
                "version",
                format!("unsupported format version {}", spec.version),
                Some(format!(
                    "this tessera reads version {}",
                    crate::spec::FORMAT_VERSION
                )),
            );
        }
        if spec.name.trim().is_empty() {
            cx.error(
                "name",
                "the software stack has no name",
                Some("name the stack and its version, e.g. \"NVIDIA NeMo 24.04\"".into()),
            );
        }
        cx.declare_sources(&spec.sources);
        cx.enter_part(cx.file(), Path::root(), spec.source.as_ref());
        let mut optional = |field: &str, q: &Option<crate::spec::Q>, dim| match q {
            Some(q) => cx.non_negative(field, q, dim),
            None => Some(0.0),
        };
        let time = crate::units::Dimension::Time;
        let step = optional("step_overhead", &spec.step_overhead, time);
        let relay = optional("mesh_relay_time", &spec.mesh_relay_time, time);
        let stage = optional("pipeline_stage_time", &spec.pipeline_stage_time, time);
        let reserve = optional(
            "memory_reserve",
            &spec.memory_reserve,
            crate::units::Dimension::Bytes,
        );
        if spec
            .attention_kernel
            .as_ref()
            .is_some_and(|k| k.trim().is_empty())
        {
            cx.error(
                "attention_kernel",
                "the attention kernel has no name",
                Some("name a kernel the devices' `efficiency.attention` tables list, e.g. \"flash-attention-2\", or leave the field out".into()),
            );
        }
        cx.leave();
        Some(Software {
            name: spec.name.clone(),
            attention_kernel: spec.attention_kernel.as_ref().map(|k| k.trim().to_string()),
            loss_kernel: spec.loss_kernel.unwrap_or_default(),
            step_overhead: step?,
            mesh_relay_time: relay?,
            pipeline_stage_time: stage?,
            memory_reserve: reserve?,
            fitted: cx.fitted.iter().cloned().collect(),
        })
    };
    match super::read_lowered(name, fs, check) {
        Ok(r) => super::checked(r.value, r.files, r.diagnostics),
        Err(u) => u.into(),
    }
}

/// Read, resolve and lower a system file. `value` is `None` when any error was found.
pub fn load_system(name: &str, fs: &dyn Fs) -> crate::spec::Loaded<System> {
    let mut r = Resolver::new(fs);
    let Some((spec, id)) = r.load_file::<SystemSpec>(name) else {
        return crate::spec::Loaded {
            value: None,
            files: r.files,
            diagnostics: r.diagnostics,
        };
    };
    let root = Path::root();
    let device = r.resolve(spec.device.clone(), id, root.field("device"));
    let die = device.as_ref().and_then(|d| {
        let dr = d.spec.die.clone();
        r.resolve(dr, d.file, d.path.field("die"))
    });
    let node = r.resolve(spec.node.clone(), id, root.field("node"));
    let reliability = spec
        .reliability
        .clone()
        .and_then(|rel| r.resolve(rel, id, root.field("reliability")));
    let mut diags = std::mem::take(&mut r.diagnostics);
    let mut files = r.files;
    // The stacks the execution modes name, each a file of its own with its own diagnostics; one
    // that cannot be read is reported where the system file names it.
    let modes = spec.execution.as_ref();
    let mut unread = Vec::new();
    let mut stack = |mode: &'static str, rel: Option<&String>| {
        let rel = rel?;
        let l = load_software(&crate::spec::join(name, rel), fs);
        if l.files.files.is_empty() {
            let why = l.diagnostics.first().map(|d| d.message.clone());
            unread.push((mode, rel.clone(), why.unwrap_or_default()));
            return None;
        }
        for (n, t) in l.files.files {
            if files.text_of(&n).is_none() {
                files.add(&n, t);
            }
        }
        diags.extend(l.diagnostics);
        l.value
    };
    let serving_sw = stack(
        "serving",
        modes.and_then(|e| e.serving.as_ref()?.software.as_ref()),
    );
    let training_sw = stack(
        "training",
        modes.and_then(|e| e.training.as_ref()?.software.as_ref()),
    );
    let mut value = {
        let mut cx = Ctx::new(&files, id);
        let v = lower(
            &mut cx,
            &spec,
            device.as_ref(),
            die.as_ref(),
            node.as_ref(),
            reliability.as_ref(),
        );
        for (mode, rel, why) in &unread {
            cx.error_at(
                &root.field("execution").field(mode).field("software"),
                format!("cannot read the software stack `{rel}`: {why}"),
                Some(
                    "name a `Software` file (architectures/software/), relative to this file"
                        .into(),
                ),
            );
        }
        diags.extend(cx.diags);
        v
    };
    if let Some(sys) = value.as_mut() {
        sys.execution.serving_software = serving_sw;
        sys.execution.training_software = training_sw;
    }
    let ok = !diags.iter().any(|d| d.severity == Severity::Error);
    crate::spec::Loaded {
        value: if ok { value } else { None },
        files,
        diagnostics: diags,
    }
}

/// Errors only (warnings dropped), for callers that treat any error as fatal.
pub fn errors(diags: &[Diagnostic]) -> impl Iterator<Item = &Diagnostic> {
    diags.iter().filter(|d| d.severity == Severity::Error)
}
