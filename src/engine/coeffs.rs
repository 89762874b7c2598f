//! What an evaluator needs of each operator and collective, settled at lowering time (the types
//! are the cost program's, in `program.rs`; the rules are here): the typed
//! efficiency class of an operator (which peak and which efficiencies of the machine table its
//! rate is), and a collective's alpha-beta coefficients per link class (how many latencies and
//! how many bytes it puts on the scale-up link, the scale-out link and the weight-store link, with
//! and without in-network reduction). The CPU evaluator and the WGSL kernel read only these, so
//! the collective algorithms (ring, hierarchical, tree across domains, in-network reduction) are
//! written once, here.

use super::program::{Booking, Coeffs, CollKind, Comm, Link, Op, Phase, Tier};
use super::table as t;
use serde::Serialize;

/// Which engines an operator runs on, and so which slots of the machine its rate reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[repr(u32)]
pub enum EffClass {
    /// Matrix engines at the matrix efficiency.
    #[default]
    Matrix = 0,
    /// Matrix engines at fp8 and narrower: matrix efficiency × the low-precision factor.
    MatrixLowPrecision = 1,
    /// Vector engines at the vector efficiency.
    Vector = 2,
    /// Matrix engines at fp4 in the backward pass: the low-precision efficiency × the factor
    /// an FP4 training recipe's backward reaches (`fp4_backward_matmul`).
    MatrixFp4Backward = 3,
}

/// Slots an operator's rate reads: peak row, efficiency, and up to two more efficiency factors
/// (`t::NX` = none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateSlots {
    pub peak: usize,
    pub eff: usize,
    pub eff2: usize,
    pub eff3: usize,
}

impl EffClass {
    /// The class of work on the matrix (`matrix`) or vector engines at precision index `p`, in
    /// the backward pass or not: the one place the "fp8 and narrower" and the "fp4 backward"
    /// rules are applied to operators.
    pub fn of(matrix: bool, p: usize, backward: bool) -> EffClass {
        match (matrix, t::low_precision(p), t::fp4(p) && backward) {
            (false, _, _) => EffClass::Vector,
            (true, _, true) => EffClass::MatrixFp4Backward,
            (true, true, false) => EffClass::MatrixLowPrecision,
            (true, false, false) => EffClass::Matrix,
        }
    }

    pub fn slots(self) -> RateSlots {
        match self {
            EffClass::Matrix => RateSlots {
                peak: t::MATRIX_PEAK,
                eff: t::EFF_MATMUL,
                eff2: t::NX,
                eff3: t::NX,
            },
            EffClass::MatrixLowPrecision => RateSlots {
                peak: t::MATRIX_PEAK,
                eff: t::EFF_MATMUL,
                eff2: t::EFF_LOW_PRECISION,
                eff3: t::NX,
            },
            EffClass::MatrixFp4Backward => RateSlots {
                peak: t::MATRIX_PEAK,
                eff: t::EFF_MATMUL,
                eff2: t::EFF_LOW_PRECISION,
                eff3: t::EFF_FP4_BACKWARD,
            },
            EffClass::Vector => RateSlots {
                peak: t::VECTOR_PEAK,
                eff: t::EFF_VECTOR,
                eff2: t::NX,
                eff3: t::NX,
            },
        }
    }
}

impl Op {
    /// The efficiency class of this operator.
    pub fn class(&self) -> EffClass {
        EffClass::of(self.matrix, self.precision, self.phase == Phase::Backward)
    }
}

/// The cost of one dependent software stage of a streamed chain on a wafer's mesh, in router
/// cycles (mesh hops of one cycle each): a core's router hands the arriving wavelet up to the
/// core and the core's result back down, 2·T_R + 1 cycles with T_R the core-router ramp latency,
/// about 2 cycles on a WSE-2 (Luczynski et al., "Near-Optimal Wafer-Scale Reduce", HPDC'24,
/// arXiv 2404.15888: T = max(C, E/N + L) + (2·T_R + 1)·D for D dependent steps, within 4 % of
/// CS-2 measurements; read in a secondary source, `shared/reference/wafer-nearmem-2026-12.md`).
/// No figure is published for a WSE-3; the WSE-2's is taken.
pub const MESH_STAGE_HOPS: f64 = 2.0 * 2.0 + 1.0;

fn link(latencies: f64, bytes: f64) -> Link {
    Link {
        latencies,
        bytes,
        relayed: 0.0,
        hop_bytes: 0.0,
    }
}

/// Bytes × hops one line of `n` cores moves for a collective of `s` bytes a core, as
/// [`Coeffs::mesh`] runs it (groups of √n cores, streamed chains: every byte of a stream crosses
/// each link of its chain once). A reduction: inside each of the n/√n groups √n − 1 links, and
/// across the group roots n/√n − 1 gaps of √n hops, each carrying the segment: (2n − n/√n − √n)·s.
/// The multicast back reaches the other n − 1 cores, one hop each: (n − 1)·s. An all-gather's
/// cyclic shifts (Cannon with INTERLEAVE) bring each core (n − 1)/n of the buffer over two hops:
/// 2(n − 1)·s. A send crosses its n hops: n·s (per link of the boundary, as the caller passes
/// bytes).
pub fn mesh_hop_bytes(kind: CollKind, n: f64, s: f64) -> f64 {
    if n <= 1.0 {
        return 0.0;
    }
    let r = n.sqrt();
    let reduce = (2.0 * n - n / r - r) * s;
    let multicast = (n - 1.0) * s;
    match kind {
        CollKind::AllReduce => reduce + multicast,
        CollKind::ReduceScatter => reduce,
        CollKind::Broadcast => multicast,
        CollKind::AllGather | CollKind::AllToAll => 2.0 * (n - 1.0) * s,
        CollKind::SendRecv => n * s,
    }
}

impl Coeffs {
    /// A collective along a line of `n` cores of a device's 2D mesh (a row of a wafer region),
    /// payload `s` bytes per core (a core's segment of the partial result), as WaferLLM runs it
    /// (MeshInfra/WaferLLM @2cd13b5, `MeshGEMV/WSE-2/src/comm_lib/comm_pe.csl` l.157-214,
    /// `two_tree_allreduce_y`): a streamed chain in two phases, inside groups of about √n cores
    /// and then across the group roots, each phase's two halves of the line converging on a root
    /// in their middle, then a router multicast back from the final root. Each core on a chain
    /// receives, adds and sends on element by element, so a phase streams the segment through
    /// each link once (the root takes both halves' streams through its one port: 2 s a phase),
    /// and its critical path is its hops at one cycle each (the SDK: a wavelet reaches the
    /// neighbouring core in one cycle) plus a cost per dependent software stage,
    /// [`MESH_STAGE_HOPS`] cycles. With groups of √n cores: a reduction runs √n stages over
    /// (n + √n)/2 hops and moves 4 s through the root's port; an all-reduce adds the multicast
    /// (one stage, the same hops, 2 s out of the root); a broadcast is that multicast alone. An
    /// all-gather (MeshGEMM's cyclic shifts, Cannon with INTERLEAVE: every step at most two
    /// hops) runs n − 1 steps and brings each core (n − 1)/n of the buffer. A send between
    /// regions crosses `n` hops, its payload spread over the boundary's links (the caller passes
    /// bytes per link). Latencies count mesh hops: a stage's cycles are written as hops of one
    /// cycle each, so the stage cost scales with the hop latency a file or a sweep gives; the
    /// elements the chain's root relays are counted apart (`Link::relayed`), for the time a
    /// software stack spends on each element it relays (`software.mesh_relay_time`, `Link::relayed`).
    pub fn mesh(kind: CollKind, n: f64, s: f64) -> Link {
        if n <= 1.0 {
            return Link::default();
        }
        let r = n.sqrt();
        // the reduction's hops to the middle root and its dependent stages, as hop latencies
        let reduce = 0.5 * (n + r) + MESH_STAGE_HOPS * r;
        let multicast = 0.5 * (n + r) + MESH_STAGE_HOPS;
        // the root adds both halves' streams in each of the reduction's two phases: 4 segments of
        // s / 4 wavelets, s elements in all (the multicast is the routers')
        let relayed = |l: Link| Link { relayed: s, ..l };
        match kind {
            CollKind::AllReduce => relayed(link(reduce + multicast, 6.0 * s)),
            CollKind::ReduceScatter => relayed(link(reduce, 4.0 * s)),
            CollKind::Broadcast => link(multicast, 2.0 * s),
            CollKind::AllGather | CollKind::AllToAll => link(2.0 * (n - 1.0), (n - 1.0) / n * s),
            CollKind::SendRecv => link(n, s),
        }
    }

    /// Ring algorithms inside a scale-up domain, hierarchical (scale-up, then scale-out, then
    /// scale-up) across domains, in-network reduction where the switches offer it. Across
    /// domains an all-reduce takes a tree's 2 log2(domains) latency steps (NCCL's Tree
    /// algorithm, which it runs for all-reduce only), while a reduce-scatter or an all-gather
    /// takes a ring's (domains − 1): NCCL runs these two only as Ring (or PAT, NVLS, CollNet),
    /// and its own cost model charges the ring `nNodes − 1` inter-node latency steps
    /// (NVIDIA/nccl `src/graph/tuning.cc`, `ncclTopoTuneModel`: `nInterSteps = nNodes − 1` for
    /// ReduceScatter and AllGather, `log2i(nNodes)` only for the Tree all-reduce; PAT, the one
    /// logarithmic choice, still adds 2.8 µs per rank). With in-network reduction on the
    /// scale-out tier (SHARP) the aggregation tree keeps log2(domains) steps.
    pub fn of(c: &Comm) -> Coeffs {
        let mut k = Coeffs::default();
        let s = c.bytes;
        if c.weight_stream {
            k.ext = link(1.0, s);
            return k;
        }
        if c.host {
            k.host = link(1.0, s);
            return k;
        }
        if c.mesh > 0.0 {
            k.mesh = Coeffs::mesh(c.kind, c.mesh, s);
            return k;
        }
        let u = c.inner.max(1.0);
        let o = c.outer.max(1.0);
        if u <= 1.0 && o <= 1.0 {
            return k;
        }
        let log2o = o.log2().max(1.0);
        let both = |l: Link| [l, l];
        match c.kind {
            CollKind::AllReduce => {
                // reduce-scatter + all-reduce across domains + all-gather
                if u > 1.0 {
                    k.up = [link(2.0 * (u - 1.0), 2.0 * (u - 1.0) / u * s), link(2.0, s)];
                }
                let shard = s / u;
                if o > 1.0 {
                    k.out = [
                        link(2.0 * log2o, 2.0 * (o - 1.0) / o * shard),
                        link(2.0 * log2o, shard),
                    ];
                }
            }
            CollKind::AllGather | CollKind::ReduceScatter => {
                if o > 1.0 {
                    let part = s / u;
                    let bytes = (o - 1.0) / o * part;
                    k.out = [link(o - 1.0, bytes), link(log2o, bytes)];
                }
                if u > 1.0 {
                    k.up = both(link(u - 1.0, (u - 1.0) / u * s));
                }
            }
            CollKind::AllToAll => {
                let n = u * o;
                if u > 1.0 {
                    k.up = both(link(1.0, (u - 1.0) / n * s));
                }
                if o > 1.0 {
                    k.out = both(link(1.0, (n - u) / n * s));
                }
                k.overlapped = true;
            }
            CollKind::Broadcast => {
                if o > 1.0 {
                    k.out = both(link(log2o, s));
                } else {
                    k.up = both(link(u.log2().max(1.0), s));
                }
            }
            CollKind::SendRecv => {
                if o > 1.0 {
                    k.out = both(link(1.0, s));
                } else {
                    k.up = both(link(1.0, s));
                }
            }
        }
        k
    }
}

/// The machine slots of a memory tier: capacity (`t::NX` for the weight store, whose capacity
/// is the separate `EXT_CAPACITY`), bandwidth, the efficiency applied to it, energy per byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TierSlots {
    pub capacity: usize,
    pub bandwidth: usize,
    pub efficiency: usize,
    pub energy: usize,
}

impl Tier {
    /// In the order the kernel indexes them (0 SRAM, 1 main memory, 2 weight store).
    pub const ALL: [Tier; 3] = [Tier::Sram, Tier::Hbm, Tier::External];

    pub fn slots(self) -> TierSlots {
        match self {
            Tier::Sram => TierSlots {
                capacity: t::SRAM_CAPACITY,
                bandwidth: t::SRAM_BANDWIDTH,
                efficiency: t::EFF_MEMORY,
                energy: t::SRAM_ENERGY,
            },
            Tier::Hbm => TierSlots {
                capacity: t::HBM_CAPACITY,
                bandwidth: t::HBM_BANDWIDTH,
                efficiency: t::EFF_MEMORY,
                energy: t::HBM_ENERGY,
            },
            // Streamed over the scale-out fabric: charged its energy per byte.
            Tier::External => TierSlots {
                capacity: t::NX,
                bandwidth: t::EXT_BANDWIDTH,
                efficiency: t::EFF_NETWORK,
                energy: t::OUT_ENERGY,
            },
        }
    }

    /// Index of this tier in the kernel's tier constants.
    pub fn index(self) -> u32 {
        match self {
            Tier::Sram => 0,
            Tier::Hbm => 1,
            Tier::External => 2,
        }
    }
}

/// The tier slots as WGSL constant arrays (`TIER_CAPACITY` covers the two tiers that hold data
/// on the device).
pub fn tier_wgsl() -> String {
    let row = |name: &str, f: &dyn Fn(TierSlots) -> usize, n: usize| {
        let v: Vec<String> = Tier::ALL[..n]
            .iter()
            .map(|t| format!("{}u", f(t.slots())))
            .collect();
        format!("const {name} = array<u32, {n}>({});\n", v.join(", "))
    };
    [
        format!(
            "const TIER_SRAM: u32 = {}u;\nconst TIER_HBM: u32 = {}u;\nconst TIER_EXTERNAL: u32 = {}u;\nconst TIER_NONE: u32 = {}u;\n",
            Tier::Sram.index(),
            Tier::Hbm.index(),
            Tier::External.index(),
            Tier::ALL.len()
        ),
        row("TIER_CAPACITY", &|s| s.capacity, 2),
        row("TIER_BANDWIDTH", &|s| s.bandwidth, 3),
        row("TIER_EFFICIENCY", &|s| s.efficiency, 3),
        row("TIER_ENERGY", &|s| s.energy, 3),
    ]
    .concat()
}

impl Comm {
    /// Where it is booked on the link timelines ([`Booking::of`] its overlap and section).
    pub fn booking(&self) -> Booking {
        Booking::of(self.overlap, self.section)
    }

    /// This collective with its coefficients computed from its kind, payload and group.
    pub fn with_coeffs(mut self) -> Comm {
        self.coeffs = Coeffs {
            cores: self.role.core_share(self.outer),
            ..Coeffs::of(&self)
        };
        self
    }

    /// An expert all-to-all of `top_k` copies per token sent by the hierarchical dispatcher
    /// (`vocab::Dispatch::Hierarchical`): where the group spans `o` > 1 scale-up domains of `u`
    /// ranks, each token crosses the scale-out network once per other domain holding any of its
    /// experts, on average (o − 1)(1 − (1 − 1/o)^k) of them (the routing spread evenly), and
    /// every copy but the ones a rank keeps for itself arrives over the scale-up links, sent by
    /// a peer or forwarded by the rank that received it from another domain: (u − 1)/u of the
    /// payload. The two phases are pipelined (the slower bounds it). Within one domain it is the
    /// plain all-to-all.
    pub fn hierarchical_dispatch(mut self, top_k: f64) -> Comm {
        let (u, o, s) = (self.inner.max(1.0), self.outer.max(1.0), self.bytes);
        if self.kind == CollKind::AllToAll && o > 1.0 && top_k >= 1.0 {
            let remote = (o - 1.0) * (1.0 - (1.0 - 1.0 / o).powf(top_k));
            let out = link(1.0, s / top_k * remote);
            self.coeffs.out = [out, out];
            let up = if u > 1.0 {
                link(1.0, (u - 1.0) / u * s)
            } else {
                Link::default()
            };
            self.coeffs.up = [up, up];
            self.coeffs.overlapped = true;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// WaferLLM's all-reduce over a row of 360 cores (groups of about √360 = 19), by hand: to the
    /// middle root (360 + 19)/2 hops and 19 dependent stages of 5 cycles, the multicast back over
    /// the same hops plus one stage; the segment streams through the root's port twice a phase,
    /// three phases: 6 segments. A reduction alone is the first half with 4 segments, a
    /// broadcast the multicast with 2.
    #[test]
    fn mesh_chains_by_hand() {
        let (n, s) = (360.0_f64, 100.0);
        let r = n.sqrt();
        let to_root = (n + r) / 2.0;
        let ar = Coeffs::mesh(CollKind::AllReduce, n, s);
        assert!((ar.latencies - (to_root + 5.0 * r + to_root + 5.0)).abs() < 1e-9);
        assert!((ar.latencies - 478.8).abs() < 0.1, "{}", ar.latencies);
        assert_eq!(ar.bytes, 600.0);
        let rs = Coeffs::mesh(CollKind::ReduceScatter, n, s);
        assert!((rs.latencies - (to_root + 5.0 * r)).abs() < 1e-9);
        assert_eq!(rs.bytes, 400.0);
        let bc = Coeffs::mesh(CollKind::Broadcast, n, s);
        assert!((bc.latencies - (to_root + 5.0)).abs() < 1e-9);
        assert_eq!(bc.bytes, 200.0);
        // streamed: the bytes on the busiest port do not grow with the line
        let long = Coeffs::mesh(CollKind::AllReduce, 4.0 * n, s);
        assert_eq!(long.bytes, ar.bytes);
        assert!(long.latencies > ar.latencies);
        // one core: nothing
        assert_eq!(Coeffs::mesh(CollKind::AllReduce, 1.0, s), Link::default());
    }

    /// Bytes × hops on a row of 16 cores (groups of 4), 10 bytes a core, by hand: a reduction
    /// crosses 3 links in each of 4 groups and 3 gaps of 4 hops between the roots (24 hops of 10
    /// bytes), the multicast the other 15 cores (15 hops); an all-gather's shifts 15 steps of 2
    /// hops; a send its 16 hops.
    #[test]
    fn mesh_hop_bytes_by_hand() {
        let s = 10.0;
        assert_eq!(mesh_hop_bytes(CollKind::ReduceScatter, 16.0, s), 240.0);
        assert_eq!(mesh_hop_bytes(CollKind::Broadcast, 16.0, s), 150.0);
        assert_eq!(mesh_hop_bytes(CollKind::AllReduce, 16.0, s), 390.0);
        assert_eq!(mesh_hop_bytes(CollKind::AllGather, 16.0, s), 300.0);
        assert_eq!(mesh_hop_bytes(CollKind::SendRecv, 16.0, s), 160.0);
        assert_eq!(mesh_hop_bytes(CollKind::AllReduce, 1.0, s), 0.0);
    }
}
