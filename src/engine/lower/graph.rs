//! Operator-graph workloads: the operators and collectives a file states, taken as written (run
//! at the device's nearest precision, collectives placed on the topology, host transfers on the
//! link to the host's memory).

use super::{domain_size, place_group, run_precision, Builder, Collective, Reason};
use crate::engine::program::*;
use crate::model::mapping::Mapping;
use crate::model::precision::Precision;
use crate::model::system::System;
use crate::model::workload::{GraphOp, Run};
use crate::vocab::CollectiveKind;

pub(super) fn graph_run(
    sys: &System,
    g: &[GraphOp],
    r: &Run,
    m: &Mapping,
) -> Result<Program, Reason> {
    let n = m.devices();
    let dom = domain_size(sys, n);
    let mut b = Builder::default();
    let tiling = crate::engine::tiling::Tiling::of(&sys.device);
    let mut wbytes = 0.0;
    let mut abytes: f64 = 0.0;
    let mut flops = 0.0;
    let mut mfu_p = Precision::Bf16;
    for op in g {
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
                b.op(Op {
                    name: name.clone().into(),
                    matrix: *matrix,
                    precision: pr.index(),
                    flops: *f,
                    occupancy: match gemm {
                        Some(g) => crate::engine::tiling::occupancy(tiling, &[(1.0, *g)]),
                        None => 1.0,
                    },
                    weight_bytes: *weight_bytes,
                    act_bytes: *act_bytes,
                    count: *count,
                    section: Section::MicroBatch,
                    phase: Phase::Forward,
                });
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
    }
    .with_coeffs()
}
