//! Starter files for `tessera new`: commented, complete, and passing `check` as written.

/// The kinds of system a starter file describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Template {
    /// One GPU server: 8 accelerators on an NVSwitch, InfiniBand NICs.
    GpuNode,
    /// A rack-scale NVLink domain (NVL72-like).
    NvlRack,
    /// A wafer-scale engine with its on-wafer mesh and an external weight store.
    Wafer,
    /// Near-memory inference cards with on-chip weights.
    NearMemory,
}

impl crate::choice::Choice for Template {
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

/// The starter text with the system named `name`.
pub fn render(t: Template, name: &str) -> String {
    let text = match t {
        Template::GpuNode => include_str!("templates/gpu-node.ron"),
        Template::NvlRack => include_str!("templates/nvl-rack.ron"),
        Template::Wafer => include_str!("templates/wafer.ron"),
        Template::NearMemory => include_str!("templates/near-memory.ron"),
    };
    text.replace("{{NAME}}", &name.replace('\\', "\\\\").replace('"', "\\\""))
}
