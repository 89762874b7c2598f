//! What a sweep is asked for, before it is resolved: the sweep file read into [`Inputs`] (axes,
//! sampling, constraints, ranking), each input with the place it was written, so every later
//! error points at it.

use super::super::space::Sampling;
use crate::diag::{Diagnostic, Path, Pos};
use crate::spec::sweep::{AxisValues, SweepSpec};
use crate::spec::{Files, Fs, Loaded, Q};
/// Where an input was written: a file and position, or a command-line option.
#[derive(Clone, Debug)]
pub struct Loc {
    pub file: String,
    pub pos: Option<Pos>,
}

impl Loc {
    pub fn option(name: &str) -> Loc {
        Loc {
            file: name.to_string(),
            pos: None,
        }
    }
    pub(super) fn error(&self, message: impl Into<String>, hint: Option<String>) -> Diagnostic {
        Diagnostic::error(&self.file, self.pos, message).with_hint(hint)
    }
}

#[derive(Clone, Debug)]
pub struct AxisInput {
    pub path: String,
    pub values: AxisValues,
    pub at: Loc,
}

/// A sweep's inputs before resolution: from a file, the command line, or both.
#[derive(Clone, Debug)]
pub struct Inputs {
    pub name: Option<String>,
    pub arch: Option<(String, Loc)>,
    pub workload: Option<(String, Loc)>,
    /// `auto`, `published`, or a mapping file (path as it should be opened).
    pub mapping: Option<(String, Loc)>,
    pub axes: Vec<AxisInput>,
    pub sampling: Sampling,
    pub sampling_at: Loc,
    pub power_budget: Option<(Q, Loc)>,
    pub power_cap: Option<(Q, Loc)>,
    pub memory_floor: Option<(Q, Loc)>,
    pub objective: Option<(String, Loc)>,
    pub pareto: Option<(Vec<String>, Loc)>,
    pub top: Option<usize>,
}

impl Default for Inputs {
    fn default() -> Self {
        Inputs {
            name: None,
            arch: None,
            workload: None,
            mapping: None,
            axes: Vec::new(),
            sampling: Sampling::Grid,
            sampling_at: Loc::option("--sampling"),
            power_budget: None,
            power_cap: None,
            memory_floor: None,
            objective: None,
            pareto: None,
            top: None,
        }
    }
}

/// Read a sweep file into [`Inputs`] (paths resolved relative to it).
pub fn read_file(path: &str, fs: &dyn Fs) -> Loaded<Inputs> {
    let mut r = crate::spec::Resolver::new(fs);
    let Some((spec, id)) = r.load_file::<SweepSpec>(path) else {
        return Loaded {
            value: None,
            files: r.files,
            diagnostics: r.diagnostics,
        };
    };
    let files = r.files;
    let mut diags = r.diagnostics;
    let text = files.text(id).to_string();
    let at = |p: &Path| Loc {
        file: path.to_string(),
        pos: crate::diag::locate_pos(&text, p),
    };
    let root = Path::root();
    if spec.version != crate::spec::FORMAT_VERSION {
        diags.push(at(&root.field("version")).error(
            format!("unsupported format version {}", spec.version),
            Some(format!(
                "this tessera reads version {}",
                crate::spec::FORMAT_VERSION
            )),
        ));
    }
    let rel = |p: &str| crate::spec::join(path, p);
    let mapping = spec.mapping.as_ref().map(|m| {
        let v = match m.trim() {
            "auto" | "published" => m.trim().to_string(),
            file => rel(file),
        };
        (v, at(&root.field("mapping")))
    });
    // Each `vary` key, located at the key itself.
    let vary_off = crate::diag::locate(&text, &root.field("vary")).unwrap_or(0);
    let mut seen: Vec<(String, usize)> = Vec::new();
    let axes = spec
        .vary
        .0
        .iter()
        .map(|(k, v)| {
            let quoted = format!("\"{k}\"");
            let nth = seen.iter().filter(|(s, _)| s == k).count();
            let mut from = vary_off;
            let mut off = None;
            for _ in 0..=nth {
                match text[from..].find(&quoted) {
                    Some(o) => {
                        off = Some(from + o);
                        from += o + quoted.len();
                    }
                    None => break,
                }
            }
            seen.push((k.clone(), 0));
            AxisInput {
                path: k.clone(),
                values: v.clone(),
                at: Loc {
                    file: path.to_string(),
                    pos: Some(crate::diag::pos_of_offset(&text, off.unwrap_or(vary_off))),
                },
            }
        })
        .collect();
    let sampling = match spec.sampling {
        None | Some(crate::spec::sweep::SamplingSpec::Grid) => Sampling::Grid,
        Some(crate::spec::sweep::SamplingSpec::Random { points, seed }) => {
            Sampling::Random { points, seed }
        }
        Some(crate::spec::sweep::SamplingSpec::LatinHypercube { points, seed }) => {
            Sampling::LatinHypercube { points, seed }
        }
    };
    let c = spec.constraints.clone().unwrap_or_default();
    let cpath = root.field("constraints");
    let inputs = Inputs {
        name: spec.name.clone(),
        arch: Some((rel(&spec.arch), at(&root.field("arch")))),
        workload: Some((rel(&spec.workload), at(&root.field("workload")))),
        mapping,
        axes,
        sampling,
        sampling_at: at(&root.field("sampling")),
        power_budget: c
            .power_budget
            .map(|q| (q, at(&cpath.field("power_budget")))),
        power_cap: c.power_cap.map(|q| (q, at(&cpath.field("power_cap")))),
        memory_floor: c
            .memory_floor
            .map(|q| (q, at(&cpath.field("memory_floor")))),
        objective: spec
            .objective
            .clone()
            .map(|o| (o, at(&root.field("objective")))),
        pareto: spec.pareto.clone().map(|p| (p, at(&root.field("pareto")))),
        top: spec.top,
    };
    Loaded {
        value: Some(inputs),
        files,
        diagnostics: diags,
    }
}

pub(super) fn merge_files(into: &mut Files, from: Files) {
    for (n, t) in from.files {
        if into.text_of(&n).is_none() {
            into.add(&n, t);
        }
    }
}
