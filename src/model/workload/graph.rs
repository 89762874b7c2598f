//! Operator-graph workloads: each matmul, convolution, elementwise, attention, embedding,
//! collective or host-transfer operator lowered to its FLOPs and bytes.

use super::types::{ConvLayer, Gemm, Graph, GraphOp};
use crate::model::precision::Precision;
use crate::model::Ctx;
use crate::spec::workload::*;
use crate::units::Dimension as D;

pub(super) fn lower_graph(cx: &mut Ctx, g: &GraphSpec) -> Option<Graph> {
    let mut out = Vec::new();
    let mut ok = true;
    if g.ops.is_empty() {
        cx.error("ops", "the graph has no operators", None);
        return None;
    }
    let grid = match g.grid {
        Some(p) if p < 2 => {
            cx.error(
                "grid",
                format!("a block of {p} cores a side runs nothing in parallel"),
                Some(
                    "give the side P of the P x P block the kernels were compiled for (at least 2), or leave `grid` out"
                        .into(),
                ),
            );
            ok = false;
            None
        }
        p => p.map(|p| p as f64),
    };
    for (i, op) in g.ops.iter().enumerate() {
        cx.enter_field("ops", None);
        cx.enter(crate::diag::Seg::Index(i), None);
        let v = lower_op(cx, op);
        cx.leave();
        cx.leave();
        match v {
            Some(v) => out.push(v),
            None => ok = false,
        }
    }
    ok.then_some(Graph { ops: out, grid })
}

/// One operator of a graph file as the engine reads it: its FLOPs and bytes, or a collective, a
/// mesh reduction or a host transfer; `None` where a figure of it is in error (reported to `cx`).
fn lower_op(cx: &mut Ctx, op: &OpSpec) -> Option<GraphOp> {
    let prec = |cx: &mut Ctx, p: &Option<String>| {
        p.as_deref()
            .map(|s| precision(cx, "precision", s))
            .unwrap_or(Precision::Bf16)
    };
    let cnt = |c: &Option<u64>| c.unwrap_or(1) as f64;
    match op {
        OpSpec::Matmul {
            m,
            n,
            k,
            precision: p,
            count,
        } => {
            let p = prec(cx, p);
            let b = p.bytes();
            Some(GraphOp::Compute {
                name: format!("matmul {m}x{n}x{k}"),
                matrix: true,
                gemm: Some(Gemm::new(*m as f64, *n as f64, *k as f64)),
                flops: 2.0 * (*m as f64) * (*n as f64) * (*k as f64),
                weight_bytes: (*k as f64) * (*n as f64) * b,
                act_bytes: ((*m as f64) * (*k as f64) + (*m as f64) * (*n as f64)) * b,
                precision: p,
                count: cnt(count),
            })
        }
        OpSpec::Conv {
            batch,
            in_channels,
            out_channels,
            out_size,
            kernel,
            precision: p,
            count,
        } => {
            let p = prec(cx, p);
            let l = ConvLayer {
                cin: *in_channels,
                cout: *out_channels,
                kernel: *kernel,
                out: *out_size,
                inp: *out_size,
            };
            Some(GraphOp::Compute {
                name: format!("conv {kernel}x{kernel} {in_channels}->{out_channels}"),
                matrix: true,
                // an implicit GEMM: a row per output pixel, a column per output channel
                gemm: Some(Gemm::new(
                    (*batch * *out_size * *out_size) as f64,
                    *out_channels as f64,
                    (*in_channels * *kernel * *kernel) as f64,
                )),
                flops: l.flops() * *batch as f64,
                weight_bytes: l.params() * p.bytes(),
                act_bytes: (l.in_elems() + l.out_elems()) * *batch as f64 * p.bytes(),
                precision: p,
                count: cnt(count),
            })
        }
        OpSpec::Elementwise {
            elements,
            flops_per_element,
            precision: p,
            bytes_per_element,
            count,
        } => {
            let p = prec(cx, p);
            let per = match bytes_per_element {
                Some(q) => cx.non_negative("bytes_per_element", q, D::Bytes),
                None => Some(2.0 * p.bytes()),
            };
            per.map(|per| GraphOp::Compute {
                name: "elementwise".into(),
                matrix: false,
                gemm: None,
                flops: *elements as f64 * flops_per_element.unwrap_or(1.0),
                weight_bytes: 0.0,
                act_bytes: *elements as f64 * per,
                precision: p,
                count: cnt(count),
            })
        }
        OpSpec::Attention {
            batch,
            seq,
            heads,
            head_dim,
            causal,
            precision: p,
            count,
        } => {
            let p = prec(cx, p);
            let f = 4.0
                * (*batch * *seq * *seq * *heads * *head_dim) as f64
                * if *causal { 0.5 } else { 1.0 };
            Some(GraphOp::Compute {
                name: "attention".into(),
                matrix: true,
                gemm: Some(Gemm::rows(*seq as f64, (*batch * *heads) as f64)),
                flops: f,
                weight_bytes: 0.0,
                act_bytes: 4.0 * (*batch * *seq * *heads * *head_dim) as f64 * p.bytes(),
                precision: p,
                count: cnt(count),
            })
        }
        OpSpec::Embedding {
            tokens,
            dim,
            precision: p,
            count,
        } => {
            let p = prec(cx, p);
            Some(GraphOp::Compute {
                name: "embedding".into(),
                matrix: false,
                gemm: None,
                flops: 0.0,
                weight_bytes: (*tokens * *dim) as f64 * p.bytes(),
                act_bytes: (*tokens * *dim) as f64 * p.bytes(),
                precision: p,
                count: cnt(count),
            })
        }
        OpSpec::Collective {
            kind,
            bytes,
            group,
            count,
        } => {
            let b = cx.non_negative("bytes", bytes, D::Bytes);
            let g = cx.count("group", *group);
            match (b, g) {
                (Some(b), Some(g)) => Some(GraphOp::Collective {
                    kind: *kind,
                    bytes: b,
                    group: g,
                    count: cnt(count),
                }),
                _ => None,
            }
        }
        OpSpec::MeshAllReduce {
            elements,
            precision: p,
            count,
        } => {
            let p = prec(cx, p);
            cx.count("elements", *elements)
                .map(|e| GraphOp::MeshReduce {
                    elements: e as f64,
                    precision: p,
                    count: cnt(count),
                })
        }
        OpSpec::HostTransfer { bytes, count } => {
            cx.non_negative("bytes", bytes, D::Bytes)
                .map(|b| GraphOp::HostTransfer {
                    bytes: b,
                    count: cnt(count),
                })
        }
    }
}

pub(super) fn precision(cx: &mut Ctx, field: &str, s: &str) -> Precision {
    match Precision::parse(s) {
        Some(p) => p,
        None => {
            let names: Vec<&str> = Precision::names().collect();
            let hint = match crate::diag::did_you_mean(s, names.iter().copied()) {
                Some(x) => format!("did you mean `{x}`? precisions: {}", names.join(", ")),
                None => format!("precisions: {}", names.join(", ")),
            };
            cx.error(field, format!("unknown precision `{s}`"), Some(hint));
            Precision::Bf16
        }
    }
}
