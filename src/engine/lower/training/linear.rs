//! A layer's linear products as the GEMMs one device runs ([`Linear`]), and their tile and wave
//! occupancy forward and backward, with what Transformer Engine's userbuffers (the
//! tensor-parallel collectives overlapped with the GEMMs) do to their shapes.

use super::shape::Shape;
use crate::engine::tiling::{self, Gemm};
use crate::vocab::TpOverlapMethod;

/// A linear layer's products on one device, `groups` of them alike (the local experts): rows
/// `m` (tokens), input width `k`, output width `n`, and its forward FLOPs. Its backward is the
/// input gradient (m × k, over n) and, for trained weights, the weight gradient (k × n, over m),
/// each as many FLOPs as the forward.
#[derive(Clone, Copy)]
pub(super) struct Linear {
    pub(super) m: f64,
    pub(super) k: f64,
    pub(super) n: f64,
    pub(super) groups: f64,
    pub(super) flops: f64,
    /// Which side of a tensor-parallel pair it is, for what overlapping its collectives does to
    /// its GEMMs ([`Userbuffers`]).
    pub(super) side: Side,
}

/// Megatron's tensor-parallel linear layers: column-parallel (QKV, FFN up: the input
/// all-gathered under sequence parallelism) and row-parallel (the output projection, FFN down:
/// the output reduce-scattered); `Neither` for the layers no userbuffer overlaps (routed experts,
/// the LM head).
#[derive(Clone, Copy)]
pub(super) enum Side {
    Neither,
    Column,
    Row,
}

/// How a GEMM runs beside the collective it is overlapped with: in `chunks` along its rows, one
/// after another, on all but `taken` of the device's units.
#[derive(Clone, Copy)]
struct Chunks {
    chunks: f64,
    taken: f64,
}

const WHOLE: Chunks = Chunks {
    chunks: 1.0,
    taken: 0.0,
};

/// Transformer Engine's pipelined overlap: 4 chunks, its reduce-scatter kernels on 16 SMs kept
/// from the GEMM (`set_sm_margin`): TE's defaults (`transformer_engine/pytorch/module/base.py`,
/// `initialize_ub`: `num_splits` 4, `num_sm` 16 for every method but the ring exchange).
const PIPELINE: Chunks = Chunks {
    chunks: 4.0,
    taken: 16.0,
};

/// What Transformer Engine's userbuffers (NeMo / Megatron-Core `tp_comm_overlap`, which needs
/// sequence parallelism) do to the GEMMs of a layer whose tensor-parallel collectives they hide
/// (TE `initialize_ub`; the method of each GEMM: `vocab::TpOverlapMethod`):
/// - a column-parallel forward and a row-parallel input gradient (`qkv_fprop`, `fc1_fprop`,
///   `proj_dgrad`, `fc2_dgrad`) all-gather their input by a ring exchange on the copy engines:
///   the GEMM runs in tp chunks, each on the shard that has arrived;
/// - a row-parallel forward (`proj_fprop`, `fc2_fprop`) reduce-scatters its output as a
///   pipeline (4 chunks, 16 SMs kept from the GEMM) or a ring exchange (tp chunks);
/// - the column-parallel input and weight gradients (`qkv_dgrad`, `qkv_wgrad`, `fc1_*`) keep
///   their shape: TE's bulk overlap runs their collectives beside them on a few SMs it shares,
///   not charged (the tensor-parallel role takes no cores, `Role::takes_cores`: an assumption).
///
/// Each chunk is a smaller product, whose tile and wave quantization (`engine::tiling`) is what
/// the split costs; on a device without a tiling it costs nothing. The collectives themselves
/// are marked overlapped by `comms::overlap_communication`.
#[derive(Clone, Copy)]
struct Userbuffers {
    tp: f64,
    method: TpOverlapMethod,
}

impl Userbuffers {
    fn of(d: &Shape) -> Option<Userbuffers> {
        d.m.tp_overlap_method_for(d.prec.bytes())
            .map(|method| Userbuffers {
                tp: d.m.tp as f64,
                method,
            })
    }

    fn ring(self) -> Chunks {
        Chunks {
            chunks: self.tp,
            taken: 0.0,
        }
    }

    /// The forward GEMM of a layer on `side`.
    fn forward(this: Option<Self>, side: Side) -> Chunks {
        match (this, side) {
            (Some(u), Side::Column) => u.ring(),
            (Some(u), Side::Row) => match u.method {
                TpOverlapMethod::Pipeline => PIPELINE,
                TpOverlapMethod::RingExchange => u.ring(),
            },
            _ => WHOLE,
        }
    }

    /// The input-gradient GEMM of a layer on `side`.
    fn input_gradient(this: Option<Self>, side: Side) -> Chunks {
        match (this, side) {
            (Some(u), Side::Row) => u.ring(),
            _ => WHOLE,
        }
    }
}

impl Linear {
    /// `groups` alike products of `m` rows, input width `k` and output width `n` on `side`, with
    /// their forward FLOPs.
    pub(super) fn new(m: f64, k: f64, n: f64, groups: f64, side: Side) -> Linear {
        Linear {
            m,
            k,
            n,
            groups,
            flops: 2.0 * m * k * n * groups,
            side,
        }
    }

    /// The forward's and the backward's occupancy of a set of linear layers run one after the
    /// other (`trained`: with weight gradients).
    pub(super) fn occupancy(d: &Shape, set: &[Linear], trained: bool) -> [f64; 2] {
        let ub = Userbuffers::of(d);
        let part = |l: &Linear, c: Chunks, m: f64, n: f64, k: f64| {
            (
                l.flops,
                Gemm::grouped(m / c.chunks, n, k, l.groups),
                c.taken,
            )
        };
        let fwd: Vec<(f64, Gemm, f64)> = set
            .iter()
            .map(|l| part(l, Userbuffers::forward(ub, l.side), l.m, l.n, l.k))
            .collect();
        let mut bwd: Vec<(f64, Gemm, f64)> = set
            .iter()
            .map(|l| part(l, Userbuffers::input_gradient(ub, l.side), l.m, l.k, l.n))
            .collect();
        if trained {
            bwd.extend(set.iter().map(|l| part(l, WHOLE, l.k, l.n, l.m)));
        }
        [
            tiling::occupancy_without(d.tiling, &fwd),
            tiling::occupancy_without(d.tiling, &bwd),
        ]
    }
}
