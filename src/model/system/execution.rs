//! A system's execution modes as its vendor's software runs it (Cerebras clusters train data
//! parallel with the state streamed from MemoryX; CS-3 inference serves 16-bit weights): data of
//! the system file that `--mapping auto`, the training placement and serving's precision obey,
//! unless a run lifts them (`--execution free`).

use super::software::Software;
use crate::model::precision::Precision;
use crate::model::workload::{Task, Workload};
use crate::model::Ctx;
use crate::spec::arch::{ExecutionSpec, StateMode};
use crate::vocab::Dim;
use serde::Serialize;

/// The validated modes (SI; absent parts constrain nothing).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Execution {
    /// Training's allowed parallel dimensions (`None`: all); the others, and expert
    /// parallelism, stay 1.
    pub parallel: Option<Vec<Dim>>,
    /// Training keeps its state in the weight store and streams the weights.
    pub streamed: bool,
    /// Models below this parameter count are not streamed (0: every model).
    pub streamed_from_params: f64,
    /// The precision serving runs at on this system: its weights and its compute.
    pub serving_precision: Option<Precision>,
    /// The citation that states the modes.
    pub source: Option<String>,
    /// The software stacks the vendor serves and trains with (read by the system's loader from
    /// the files the modes name): a run on no other stack executes on the one for its task.
    pub serving_software: Option<Software>,
    pub training_software: Option<Software>,
}

impl Execution {
    /// Whether training may split a model along `d`.
    pub fn allows(&self, d: Dim) -> bool {
        self.parallel.as_ref().is_none_or(|v| v.contains(&d))
    }

    /// Whether training a model of `params` parameters streams its state.
    pub fn streams(&self, params: f64) -> bool {
        self.streamed && params >= self.streamed_from_params
    }

    /// [`Execution::describe`] for `w`'s task, or `None` where the modes impose nothing on it.
    pub fn line(&self, w: &Workload) -> Option<String> {
        let training = match w.task {
            Task::Training(_) => true,
            Task::Inference(_) => false,
            // a kernel or an operator graph: the modes impose nothing on it
            Task::Run(_) => return None,
        };
        Some(self.describe(training)).filter(|s| !s.is_empty())
    }

    /// The vendor's software stack for `w`'s task, if the modes name one (a kernel or an
    /// operator-graph run is on neither).
    pub fn software_for(&self, w: &Workload) -> Option<&Software> {
        match w.task {
            Task::Training(_) => self.training_software.as_ref(),
            Task::Inference(_) => self.serving_software.as_ref(),
            Task::Run(_) => None,
        }
    }

    /// Put a serving workload at this system's serving precision (weights and compute; the KV
    /// cache keeps the workload's). Training and other systems: unchanged.
    pub fn serve_at(&self, w: &mut Workload) {
        if let (Some(p), Task::Inference(inf)) = (self.serving_precision, &mut w.task) {
            inf.weights = p;
            inf.compute = p;
        }
    }

    /// One line for reports: what the modes impose on training (`training`) or serving.
    pub fn describe(&self, training: bool) -> String {
        let mut parts = Vec::new();
        let stack = if training {
            &self.training_software
        } else {
            &self.serving_software
        };
        if !training {
            if let Some(w) = self.serving_precision {
                parts.push(format!("serves at {w}"));
            }
            if let Some(sw) = stack {
                parts.push(format!("on its stack {}", sw.name));
            }
            return parts.join("; ");
        }
        if let Some(p) = &self.parallel {
            let dims: Vec<String> = p.iter().map(|d| format!("{d:?}").to_lowercase()).collect();
            parts.push(format!("trains {} parallel only", dims.join(" × ")));
        }
        if self.streamed {
            let from = if self.streamed_from_params > 0.0 {
                format!(
                    " (models from {} parameters)",
                    crate::units::fmt_si(self.streamed_from_params, "")
                )
            } else {
                String::new()
            };
            parts.push(format!("weights streamed from the weight store{from}"));
        }
        if let Some(sw) = stack {
            parts.push(format!("on its stack {}", sw.name));
        }
        parts.join("; ")
    }
}

/// Check and lower the `execution` block of a system file (`weight_store`: whether the file
/// declares a store with compute for the update, which streaming needs).
pub(super) fn lower_execution(
    cx: &mut Ctx,
    spec: &ExecutionSpec,
    store_updates: bool,
) -> Option<Execution> {
    cx.enter_field("execution", spec.source.as_ref());
    let mut ok = true;
    if spec.source.is_none() {
        cx.error(
            "source",
            "an execution mode names the source that states it",
            Some("add `source: \"key\"` with the vendor's documentation in `sources`".into()),
        );
        ok = false;
    }
    let mut out = Execution {
        source: spec.source.clone(),
        ..Execution::default()
    };
    if let Some(t) = &spec.training {
        let at = cx.path().field("training");
        if let Some(p) = &t.parallel {
            if p.is_empty() {
                cx.error_at(
                    &at.field("parallel"),
                    "no parallel dimension allowed",
                    Some("list at least one, e.g. `[Dp]`".into()),
                );
                ok = false;
            }
            out.parallel = Some(p.clone());
        }
        out.streamed = t.state == Some(StateMode::Streamed);
        if out.streamed && !store_updates {
            cx.error_at(
                &at.field("state"),
                "`Streamed` needs a `weight_store` with `compute` and `memory_bandwidth` (the store runs the update)",
                Some("declare the store, or write `state: Placed`".into()),
            );
            ok = false;
        }
        if let Some(n) = t.streamed_from_params {
            if !(n.is_finite() && n >= 0.0) {
                cx.error_at(
                    &at.field("streamed_from_params"),
                    format!("{n} is not a parameter count"),
                    Some("a non-negative number, e.g. 1e9".into()),
                );
                ok = false;
            } else {
                out.streamed_from_params = n;
            }
        }
    }
    if let Some(s) = &spec.serving {
        if let Some(w) = &s.precision {
            match Precision::parse(w) {
                Some(p) => out.serving_precision = Some(p),
                None => {
                    let names: Vec<&str> = Precision::names().collect();
                    let at = cx.path().field("serving").field("precision");
                    cx.error_at(
                        &at,
                        format!("unknown precision `{w}`"),
                        Some(format!("one of {}", names.join(", "))),
                    );
                    ok = false;
                }
            }
        }
    }
    cx.leave();
    ok.then_some(out)
}
