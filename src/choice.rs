//! Named choices a front end offers by name (an objective, a sweep backend, a starter
//! template): the library states the names and their help, the CLI (and the Python package)
//! parse them, so the library needs no argument-parsing crate.

/// A closed set of named values.
pub trait Choice: Sized + Copy + PartialEq + 'static {
    /// (name, value, one-line help), in the order a front end lists them.
    const ALL: &'static [(&'static str, Self, &'static str)];

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _, _)| *n == s).map(|c| c.1)
    }

    fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|c| c.1 == self)
            .map(|c| c.0)
            .unwrap_or("")
    }
}

impl Choice for crate::vocab::PowerBoundary {
    const ALL: &'static [(&'static str, Self, &'static str)] = &[
        ("device", Self::Device, "The accelerators alone"),
        (
            "node",
            Self::Node,
            "+ hosts, NICs, fans and other node parts",
        ),
        ("rack", Self::Rack, "+ the scale-up domain's switches"),
        (
            "it",
            Self::It,
            "+ the scale-out network and a weight store the run uses (IT power at the wall)",
        ),
        ("facility", Self::Facility, "IT power × the facility's PUE"),
    ];
}

impl Choice for crate::engine::Objective {
    const ALL: &'static [(&'static str, Self, &'static str)] = &[
        ("time", Self::Time, "Shortest step (highest throughput)"),
        ("energy", Self::Energy, "Least energy per unit of work"),
    ];
}

impl Choice for crate::sweep::run::Backend {
    const ALL: &'static [(&'static str, Self, &'static str)] = &[
        (
            "auto",
            Self::Auto,
            "The GPU for large sweeps on a hardware adapter, else the CPU",
        ),
        ("cpu", Self::Cpu, "Every CPU core (rayon), f64"),
        (
            "gpu",
            Self::Gpu,
            "The wgpu kernel (f32 screening, f64 re-evaluation)",
        ),
    ];
}

impl Choice for crate::templates::Template {
    const ALL: &'static [(&'static str, Self, &'static str)] = &[
        (
            "gpu-node",
            Self::GpuNode,
            "One GPU server: 8 accelerators on an NVSwitch, InfiniBand NICs",
        ),
        (
            "nvl-rack",
            Self::NvlRack,
            "A rack-scale NVLink domain (NVL72-like)",
        ),
        (
            "wafer",
            Self::Wafer,
            "A wafer-scale engine with its on-wafer mesh and an external weight store",
        ),
        (
            "near-memory",
            Self::NearMemory,
            "Near-memory inference cards with on-chip weights",
        ),
    ];
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Objective;

    #[test]
    fn names_round_trip() {
        for (n, v, _) in Objective::ALL {
            assert_eq!(Objective::parse(n), Some(*v));
            assert_eq!(v.name(), *n);
        }
        assert_eq!(Objective::parse("speed"), None);
    }
}
