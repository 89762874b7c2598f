//! Operator-graph workloads: the operators and collectives a file states, taken as written (run
//! at the device's nearest precision, collectives placed on the topology, host transfers on the
//! link to the host's memory); on a device with a mesh of cores (a wafer), each matrix product
//! spread over the mesh with the collectives that spreading needs.

use super::builder::{Builder, Collective};
use super::place::{domain_size, mesh_gemm_bytes, place_group};
use super::precision::run_precision;
use crate::engine::program::*;
use crate::engine::reason::Reason;
use crate::model::mapping::Mapping;
use crate::model::precision::Precision;
use crate::model::system::System;
use crate::model::workload::{Graph, GraphOp, Run};
use crate::vocab::CollectiveKind;

pub(super) fn graph_run(sys: &System, g: &Graph, r: &Run, m: &Mapping) -> Result<Program, Reason> {
    let n = m.devices();
    let dom = domain_size(sys, n);
    let mut b = Builder::default();
    let tiling = crate::engine::tiling::Tiling::of(&sys.device);
    // the cores along a side of the device's mesh, where it has one: the whole device's cores as
    // one square region, no wider than the mesh (as training on a mesh takes it), and its cores
    let mesh = sys
        .device
        .mesh
        .as_ref()
        .map(|ms| {
            let (x, y) = ms.sides();
            (ms.square_side(), x as f64 * y as f64)
        })
        .filter(|&(side, _)| side > 1.0);
    // the block of cores the file compiled the graph for, where it names one: every operator on it
    let block = block(g.grid, mesh)?;
    let mut wbytes = 0.0;
    let mut abytes: f64 = 0.0;
    let mut flops = 0.0;
    let mut mfu_p = Precision::Bf16;
    for op in &g.ops {
        match op {
            GraphOp::Compute {
                name,
                matrix,
                gemm,
                flops: f,
                weight_bytes,
                act_bytes,
                precision,
                count,
            } => {
                let pr = run_precision(sys, *precision);
                // on a mesh, a product's square of cores ([`grid_side`]); the rest idle
                let grid = match (block, mesh, gemm, *matrix) {
                    (Some(b), ..) => Some(b),
                    (None, Some((side, cores)), Some(g), true) => {
                        let p = grid_side(side, g);
                        Some((p, p * p / cores))
                    }
                    _ => None,
                };
                b.op(Op {
                    name: name.clone().into(),
                    matrix: *matrix,
                    precision: pr.index(),
                    flops: *f,
                    occupancy: match gemm {
                        Some(g) => crate::engine::tiling::occupancy(tiling, &[(1.0, *g)]),
                        None => 1.0,
                    } * grid.map_or(1.0, |(_, share)| share),
                    weight_bytes: *weight_bytes,
                    act_bytes: *act_bytes,
                    count: *count,
                    section: Section::MicroBatch,
                    phase: Phase::Forward,
                    form: Form::Both,
                });
                if let (Some((side, _)), Some(g), true) = (grid, gemm, *matrix) {
                    if let Some(c) = mesh_product(name, g, side, pr.bytes(), *count) {
                        b.mesh_comm(c, side);
                    }
                }
                wbytes += weight_bytes;
                abytes = abytes.max(*act_bytes);
                flops += f * count;
                if *matrix {
                    mfu_p = *precision;
                }
            }
            GraphOp::Collective {
                kind,
                bytes,
                group,
                count,
            } => {
                if *group > n {
                    return Err(Reason::mapping(format!(
                        "a collective over {group} devices, but the mapping uses {n}"
                    )));
                }
                let k = match kind {
                    CollectiveKind::AllReduce => CollKind::AllReduce,
                    CollectiveKind::AllGather => CollKind::AllGather,
                    CollectiveKind::ReduceScatter => CollKind::ReduceScatter,
                    CollectiveKind::AllToAll => CollKind::AllToAll,
                    CollectiveKind::Broadcast => CollKind::Broadcast,
                    CollectiveKind::SendRecv => CollKind::SendRecv,
                };
                b.comm(Collective {
                    name: "collective".into(),
                    role: Role::Other,
                    kind: k,
                    bytes: *bytes,
                    group: place_group(sys, *group, 1, dom),
                    count: *count,
                    section: Section::MicroBatch,
                    overlap: Overlap::None,
                });
            }
            GraphOp::MeshReduce {
                elements,
                precision,
                count,
            } => {
                // along a row of the graph's block, or of the device's widest square
                let Some(side) = block.or(mesh).map(|(side, _)| side) else {
                    return Err(Reason::unsupported(
                        "an all-reduce over a mesh of cores, but the device has no mesh",
                    ));
                };
                let pr = run_precision(sys, *precision);
                b.mesh_comm(
                    Collective {
                        name: format!("mesh: all-reduce of {elements} values").into(),
                        role: Role::TensorParallel,
                        kind: CollKind::AllReduce,
                        bytes: elements * pr.bytes(),
                        group: (1.0, 1.0, 1.0),
                        count: *count,
                        section: Section::MicroBatch,
                        overlap: Overlap::None,
                    },
                    side,
                );
            }
            GraphOp::HostTransfer { bytes, count } => {
                if sys.weight_store.is_none() {
                    return Err(Reason::unsupported(
                        "a host transfer, but the system declares no host link (`weight_store`)",
                    ));
                }
                if *count > 0.0 && *bytes > 0.0 {
                    b.comms.push(host_transfer(*bytes, *count));
                }
            }
        }
    }
    Ok(Program {
        ops: b.ops,
        comms: b.comms,
        stages: Vec::new(),
        micro_batches: 1.0,
        bubble: 0.0,
        footprint: Footprint {
            weights: wbytes,
            activations: abytes,
            ..Footprint::default()
        },
        devices: n as f64,
        units_per_step: r.samples_per_step * m.dp as f64,
        unit: "samples",
        model_flops_per_step: flops * n as f64,
        mfu_precision: mfu_p.index(),
        steps: r.steps,
        host_steps: 0.0,
    })
}

/// The block of cores a graph compiled for `grid` cores a side runs on, as (side, its share of
/// the device's cores), on a device whose mesh gives `mesh` (its widest square's side, its
/// cores); `None` without a grid. A block wider than the mesh, or on a device with none, is
/// infeasible with its reason.
fn block(grid: Option<f64>, mesh: Option<(f64, f64)>) -> Result<Option<(f64, f64)>, Reason> {
    match (grid, mesh) {
        (None, _) => Ok(None),
        (Some(p), Some((side, cores))) if p <= side => Ok(Some((p, p * p / cores))),
        (Some(p), Some((side, _))) => Err(Reason::mapping(format!(
            "the graph is compiled for a block of {p} x {p} cores, but the device's mesh \
         holds at most {side} x {side}"
        ))),
        (Some(p), None) => Err(Reason::unsupported(format!(
            "the graph is compiled for a block of {p} x {p} cores, but the device has no \
         mesh of cores"
        ))),
    }
}

/// The side of the square of cores a product `g` spreads over on a mesh whose largest square is
/// `square` cores a side. MeshGEMV and MeshGEMM lay the matrix out in P × P tiles and reshape the
/// vector to (P, K / P), so P divides the product's dimensions (MeshInfra/WaferLLM @2cd13b5,
/// `MeshGEMV/WSE-2/launch_wse2.py` l.43-52): the largest P no wider than the square that divides
/// its inner and output widths. Where no such P reaches half the square, the whole square, the
/// product taken as padded to it (as WaferLLM pads its models' dimensions to multiples of P).
fn grid_side(square: f64, g: &crate::model::workload::Gemm) -> f64 {
    let widest = square.floor();
    let divides = |p: f64| {
        [g.k, g.n.unwrap_or(g.k)]
            .iter()
            .all(|&d| d > 0.0 && (d / p).fract() == 0.0)
    };
    let mut p = widest;
    while p >= (widest / 2.0).ceil().max(2.0) {
        if divides(p) {
            return p;
        }
        p -= 1.0;
    }
    square
}

/// A matrix product `g` spread over a `side` × `side` square of a mesh's cores, after WaferLLM
/// (He et al., OSDI'25; MeshInfra/WaferLLM `MeshGEMV/` and `MeshGEMM/`): with fewer rows than
/// a side of cores (a matrix-vector product), each core keeps its tile of the matrix and the
/// partial outputs are all-reduced across a row of cores by a streamed two-phase chain (MeshGEMV,
/// `Coeffs::mesh`: each core ends with `m × n / side` values), after the product; otherwise the
/// operand tiles shift
/// cyclically along rows and columns while the previous tiles are multiplied (MeshGEMM, Cannon's
/// algorithm, double-buffered: A's tiles pass along the rows and B's along the columns, so the
/// busiest link carries `max(m·k, k·n) / side` values: `mesh_gemm_bytes`, as training and
/// prefill cost a layer's products). `bytes`: of one value. A row-blocked kernel (no column
/// tiling) is left as written.
fn mesh_product(
    name: &str,
    g: &crate::model::workload::Gemm,
    side: f64,
    bytes: f64,
    count: f64,
) -> Option<Collective> {
    let n = g.n?;
    let (kind, what, per_core, overlap) = if g.m < side {
        let outputs = g.m * n / side;
        (
            CollKind::AllReduce,
            "all-reduce (MeshGEMV)",
            outputs,
            Overlap::None,
        )
    } else {
        let tiles = mesh_gemm_bytes(&[(g.m * g.k, g.k * n)], side);
        (
            CollKind::AllGather,
            "shifts (MeshGEMM)",
            tiles,
            Overlap::Compute,
        )
    };
    Some(Collective {
        name: format!("mesh: {name} {what}").into(),
        role: Role::TensorParallel,
        kind,
        bytes: per_core * g.groups.max(1.0) * bytes,
        group: (1.0, 1.0, 1.0),
        count,
        section: Section::MicroBatch,
        overlap,
    })
}

/// A copy of `bytes` per device between the device and the host's memory: one transfer over the
/// link to the system's external store (`weight_store`: MemoryX for a Cerebras system, the host's
/// DDR4 behind a PIM DIMM's channel), its latency plus `bytes` over its bandwidth, each device on
/// its own link. The same coefficients a weight stream puts on that link, so both evaluators
/// already interpret it.
fn host_transfer(bytes: f64, count: f64) -> Comm {
    Comm {
        name: "host transfer".into(),
        role: Role::Other,
        kind: CollKind::SendRecv,
        bytes,
        inner: 1.0,
        outer: 1.0,
        count,
        section: Section::MicroBatch,
        overlap: Overlap::None,
        weight_stream: true,
        host: false,
        inner_share: 1.0,
        mesh: 0.0,
        coeffs: Default::default(),
        form: Form::Both,
    }
    .with_coeffs()
}

#[cfg(test)]
mod tests {
    use super::grid_side;
    use crate::model::workload::Gemm;

    /// WaferLLM's GEMV grids: P divides the matrix (16K and 32K: 512 on a 750-wide square, not
    /// 750); a width no P in the upper half divides keeps the whole square.
    #[test]
    fn grid_divides_the_product() {
        assert_eq!(grid_side(750.0, &Gemm::new(1.0, 16384.0, 16384.0)), 512.0);
        assert_eq!(grid_side(750.0, &Gemm::new(1.0, 32768.0, 32768.0)), 512.0);
        assert_eq!(grid_side(750.0, &Gemm::new(1.0, 4320.0, 4320.0)), 720.0);
        assert_eq!(grid_side(750.0, &Gemm::new(1.0, 7919.0, 7919.0)), 750.0);
        assert_eq!(grid_side(16.0, &Gemm::new(1.0, 64.0, 64.0)), 16.0);
    }
}
