//! A parallel mapping: how a workload is split over devices (data, tensor, pipeline, expert and
//! context parallelism, ZeRO stage, micro-batching, recomputation).

use crate::spec::mapping::{MappingSpec, OverlapKind, RecomputeSpec};
use crate::vocab::Dim;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    None,
    Selective,
    Full,
}

impl From<RecomputeSpec> for Recompute {
    fn from(r: RecomputeSpec) -> Self {
        match r {
            RecomputeSpec::None => Recompute::None,
            RecomputeSpec::Selective => Recompute::Selective,
            RecomputeSpec::Full => Recompute::Full,
        }
    }
}

/// A mapping as written (a mapping file or a workload's published one), checked but not yet
/// resolved against a device count: absent degrees are filled when it is resolved
/// ([`Mapping::resolve`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MappingPlan {
    pub dp: Option<u64>,
    pub tp: Option<u64>,
    pub pp: Option<u64>,
    pub ep: Option<u64>,
    pub cp: Option<u64>,
    pub sp: Option<bool>,
    pub zero: Option<u8>,
    pub micro_batch: Option<u64>,
    pub interleave: Option<u64>,
    pub recompute: Option<Recompute>,
    pub overlap_grad_reduce: Option<bool>,
    pub overlap: ExtraOverlap,
    pub order: Option<Vec<Dim>>,
}

impl From<&MappingSpec> for MappingPlan {
    fn from(s: &MappingSpec) -> Self {
        MappingPlan {
            dp: s.dp,
            tp: s.tp,
            pp: s.pp,
            ep: s.ep,
            cp: s.cp,
            sp: s.sp,
            zero: s.zero,
            micro_batch: s.micro_batch,
            interleave: s.interleave,
            recompute: s.recompute.map(Into::into),
            overlap_grad_reduce: s.overlap_grad_reduce,
            overlap: ExtraOverlap::from_kinds(&s.overlap),
            order: s.order.clone(),
        }
    }
}

/// A resolved mapping. Devices used = dp × tp × pp × cp; ep divides dp × cp (experts are sharded
/// across the data-parallel ranks, as in Megatron-LM).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Mapping {
    pub dp: u64,
    pub tp: u64,
    pub pp: u64,
    pub ep: u64,
    pub cp: u64,
    pub sp: bool,
    pub zero: u8,
    pub micro_batch: u64,
    pub interleave: u64,
    pub recompute: Recompute,
    pub overlap_grad_reduce: bool,
    /// Communication the framework overlaps with compute beyond the gradient reduction.
    pub overlap: ExtraOverlap,
    /// Parallel dimensions from innermost (nearest devices) to outermost.
    pub order: [Dim; 4],
}

/// Megatron-LM's layout: tensor parallelism innermost, pipeline stages outermost.
pub const DEFAULT_ORDER: [Dim; 4] = [Dim::Tp, Dim::Cp, Dim::Dp, Dim::Pp];

/// Communication a framework can overlap with compute beyond the gradient reduction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ExtraOverlap {
    /// Tensor-parallel collectives pipelined with the GEMMs they feed (Transformer Engine's
    /// userbuffers, NeMo / Megatron-Core `tp_comm_overlap`): exposed only beyond the
    /// micro-batch's compute.
    pub tensor_parallel: bool,
    /// Pipeline sends and receives of the interleaved 1F1B schedule issued asynchronously while
    /// the next chunk computes (Megatron-Core `overlap_p2p_comm`).
    pub pipeline: bool,
    /// The data-parallel parameter all-gather after the optimizer step overlapped with the next
    /// step's first micro-batch (Megatron-Core `overlap_param_gather`).
    pub parameter_gather: bool,
}

impl ExtraOverlap {
    pub fn from_kinds(kinds: &[OverlapKind]) -> Self {
        ExtraOverlap {
            tensor_parallel: kinds.contains(&OverlapKind::TensorParallel),
            pipeline: kinds.contains(&OverlapKind::PipelineSendRecv),
            parameter_gather: kinds.contains(&OverlapKind::ParameterGather),
        }
    }
}

impl Mapping {
    pub fn devices(&self) -> u64 {
        self.dp * self.tp * self.pp * self.cp
    }

    /// A single-device mapping.
    pub fn single() -> Self {
        Mapping {
            dp: 1,
            tp: 1,
            pp: 1,
            ep: 1,
            cp: 1,
            sp: false,
            zero: 0,
            micro_batch: 1,
            interleave: 1,
            recompute: Recompute::None,
            overlap_grad_reduce: true,
            overlap: ExtraOverlap::default(),
            order: DEFAULT_ORDER,
        }
    }

    /// Size of a parallel dimension.
    pub fn size(&self, d: Dim) -> u64 {
        match d {
            Dim::Tp => self.tp,
            Dim::Cp => self.cp,
            Dim::Dp => self.dp,
            Dim::Pp => self.pp,
        }
    }

    /// Distance between neighbouring ranks of dimension `d`: the product of the sizes of the
    /// dimensions laid inside it.
    pub fn stride(&self, d: Dim) -> u64 {
        self.order
            .iter()
            .take_while(|x| **x != d)
            .map(|x| self.size(*x))
            .product()
    }

    /// Resolve a spec for `devices` devices: `dp` fills the devices the other dimensions leave.
    /// `Err` is the reason the mapping is infeasible (a result, not an input error).
    pub fn resolve(
        spec: &MappingPlan,
        devices: u64,
        default_micro_batch: u64,
    ) -> Result<Mapping, String> {
        let tp = spec.tp.unwrap_or(1).max(1);
        let pp = spec.pp.unwrap_or(1).max(1);
        let cp = spec.cp.unwrap_or(1).max(1);
        let inner = tp * pp * cp;
        let dp = match spec.dp {
            Some(d) => d.max(1),
            None => {
                if devices % inner != 0 {
                    return Err(format!(
                        "tp × pp × cp = {tp} × {pp} × {cp} = {inner} does not divide {devices} devices"
                    ));
                }
                devices / inner
            }
        };
        let m = Mapping {
            dp,
            tp,
            pp,
            ep: spec.ep.unwrap_or(1).max(1),
            cp,
            sp: spec.sp.unwrap_or(tp > 1),
            zero: spec.zero.unwrap_or(1),
            micro_batch: spec.micro_batch.unwrap_or(default_micro_batch).max(1),
            interleave: spec.interleave.unwrap_or(1).max(1),
            recompute: spec.recompute.unwrap_or(Recompute::None),
            overlap_grad_reduce: spec.overlap_grad_reduce.unwrap_or(true),
            overlap: spec.overlap,
            order: match &spec.order {
                None => DEFAULT_ORDER,
                Some(o) => match <[Dim; 4]>::try_from(o.as_slice()) {
                    Ok(a) if DEFAULT_ORDER.iter().all(|d| a.contains(d)) => a,
                    _ => {
                        return Err(format!(
                            "`order` must name each of Tp, Cp, Dp, Pp once, found {o:?}"
                        ))
                    }
                },
            },
        };
        if m.devices() != devices {
            return Err(format!(
                "dp × tp × pp × cp = {} × {} × {} × {} = {} devices, but {} are available",
                m.dp,
                m.tp,
                m.pp,
                m.cp,
                m.devices(),
                devices
            ));
        }
        if m.zero > 3 {
            return Err(format!("ZeRO stage {} does not exist (0-3)", m.zero));
        }
        Ok(m)
    }
}
