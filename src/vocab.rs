//! Closed vocabularies that both the files and the validated model use (memory kinds, on-chip
//! and scale-up topologies, collective kinds, parallel dimensions): defined once here, so the
//! spec types stay the files' and the model and engine never name a spec type. The spec modules
//! re-export them where the file formats use them.

use serde::Deserialize;

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum MemoryKind {
    Sram,
    Cache,
    Hbm,
    Dram,
    External,
    NearMemory,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum MeshTopology {
    Mesh2D,
    Torus2D,
    Ring,
    Crossbar,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum ScaleUpTopology {
    /// All-to-all through switches (NVSwitch).
    Switched,
    /// Direct links between every pair (xGMI, 8-GPU meshes).
    FullMesh,
    /// DGX-1 hybrid cube-mesh.
    HybridCubeMesh,
    Ring,
    Torus,
    Mesh,
    /// The fabric of a wafer.
    Wafer,
    /// A PCIe tree through the host.
    Pcie,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum CollectiveKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    SendRecv,
}

/// A parallel dimension (the order a mapping lays them over the devices).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, serde::Serialize)]
pub enum Dim {
    Tp,
    Cp,
    Dp,
    Pp,
}
