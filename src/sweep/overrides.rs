//! Options that override or extend a sweep file's [`Inputs`] (the CLI's `--arch`, `--vary`,
//! `--points`, …, and the Python package's keyword arguments), applied in one place so both
//! front ends mean the same thing by them.

use super::plan::{AxisInput, Inputs, Loc};
use super::space::Sampling;
use crate::spec::Q;

/// How an option is named where its user wrote it (for the place an error points at).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// `--power-budget`
    Cli,
    /// `power_budget=`
    Python,
}

impl Naming {
    fn name(self, option: &str) -> String {
        match self {
            Naming::Cli => format!("--{}", option.replace('_', "-")),
            Naming::Python => format!("{option}="),
        }
    }
    fn loc(self, option: &str) -> Loc {
        Loc::option(&self.name(option))
    }
}

/// Every option a sweep takes beside (or instead of) a sweep file; `None` / empty leaves the
/// file's value.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub arch: Option<String>,
    pub workload: Option<String>,
    pub mapping: Option<String>,
    /// `PATH=VALUES`, as `--vary` takes them.
    pub vary: Vec<String>,
    pub sampling: Option<String>,
    pub points: Option<u64>,
    pub seed: Option<u64>,
    pub power_budget: Option<String>,
    pub memory_floor: Option<String>,
    pub objective: Option<String>,
    /// The two metrics of the Pareto front.
    pub pareto: Option<Vec<String>>,
    pub top: Option<usize>,
}

impl Overrides {
    /// Apply to `inp` (an option replaces the file's axis of the same path). The error is a
    /// message naming the option as `naming` writes it.
    pub fn apply(&self, inp: &mut Inputs, naming: Naming) -> Result<(), String> {
        if let Some(x) = &self.arch {
            inp.arch = Some((x.clone(), naming.loc("arch")));
        }
        if let Some(x) = &self.workload {
            inp.workload = Some((x.clone(), naming.loc("workload")));
        }
        if let Some(x) = &self.mapping {
            inp.mapping = Some((x.clone(), naming.loc("mapping")));
        }
        for v in &self.vary {
            let Some((path, values)) = super::expr::split_cli(v) else {
                return Err(format!(
                    "{} `{v}`: expected PATH=VALUES, e.g. `device.tdp=1000 W..1400 W step 100 W`",
                    naming.name("vary")
                ));
            };
            inp.axes.retain(|x| x.path != path);
            inp.axes.push(AxisInput {
                path,
                values,
                at: Loc::option(&format!("{} {v}", naming.name("vary"))),
            });
        }
        if self.sampling.is_some() || self.points.is_some() || self.seed.is_some() {
            let (old_points, old_seed) = match inp.sampling {
                Sampling::Grid => (None, None),
                Sampling::Random { points, seed } | Sampling::LatinHypercube { points, seed } => {
                    (Some(points), Some(seed))
                }
            };
            let kind = match self.sampling.as_deref() {
                Some(s) => s.to_ascii_lowercase(),
                None => match inp.sampling {
                    Sampling::Grid => "grid".into(),
                    Sampling::Random { .. } => "random".into(),
                    Sampling::LatinHypercube { .. } => "lhs".into(),
                },
            };
            let points = self.points.or(old_points);
            let seed = self.seed.or(old_seed).unwrap_or(0);
            inp.sampling = match (kind.as_str(), points) {
                ("grid", _) => Sampling::Grid,
                ("random", Some(points)) => Sampling::Random { points, seed },
                ("lhs" | "latin-hypercube" | "latin_hypercube", Some(points)) => {
                    Sampling::LatinHypercube { points, seed }
                }
                ("random" | "lhs" | "latin-hypercube" | "latin_hypercube", None) => {
                    return Err(format!(
                        "random and lhs sampling need `{} N`",
                        naming.name("points")
                    ))
                }
                (other, _) => {
                    return Err(format!(
                        "{} `{other}`: choose grid, random or lhs",
                        naming.name("sampling")
                    ))
                }
            };
            inp.sampling_at = naming.loc("sampling");
        }
        if let Some(x) = &self.power_budget {
            inp.power_budget = Some((Q(x.clone()), naming.loc("power_budget")));
        }
        if let Some(x) = &self.memory_floor {
            inp.memory_floor = Some((Q(x.clone()), naming.loc("memory_floor")));
        }
        if let Some(x) = &self.objective {
            inp.objective = Some((x.clone(), naming.loc("objective")));
        }
        if let Some(x) = &self.pareto {
            inp.pareto = Some((
                x.iter().map(|s| s.trim().to_string()).collect(),
                naming.loc("pareto"),
            ));
        }
        if let Some(t) = self.top {
            inp.top = Some(t);
        }
        Ok(())
    }
}

/// `I/N` with `0 ≤ I < N`, as `--shard` takes it.
pub fn parse_shard(s: &str) -> Option<(u64, u64)> {
    let (i, n) = s.split_once('/')?;
    let (i, n) = (i.trim().parse().ok()?, n.trim().parse().ok()?);
    (n > 0 && i < n).then_some((i, n))
}
