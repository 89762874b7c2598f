//! Where a program's groups sit on the hardware: a collective's group placed on the system's
//! scale-up topology (ranks per domain, domains, the share of the scale-up bandwidth it drives),
//! the scale-up domain a program sees, and the bytes a matrix product spread over a wafer's mesh
//! of cores puts on a link. A leaf: every workload family's lowering reads it.

use crate::model::system::System;
use crate::vocab::ScaleUpTopology;

/// A collective's group: (ranks per scale-up domain, domains, share of the scale-up bandwidth
/// the ranks inside a domain can use).
pub type Group = (f64, f64, f64);

/// Place a group of `size` ranks spaced `stride` apart on the system's topology (domains of
/// `domain` devices): how it splits over domains ([`split_group`]) and which share of a device's
/// scale-up bandwidth its collectives can drive. Through switches that is all of it. On a torus
/// or mesh of d dimensions the group, placed on a compact sub-box, runs its collectives along the
/// k ≤ log2(g) dimensions it spans (ring or bucket algorithms per dimension), using k/d of the
/// links. On a full mesh (xGMI, DGX-1's hybrid cube-mesh) of D devices each rank reaches the
/// other g − 1 members over direct links: (g − 1)/(D − 1) of its links.
pub fn place_group(sys: &System, size: u64, stride: u64, domain: u64) -> Group {
    let (inner, outer) = split_group(size, stride, domain);
    (inner, outer, inner_share(sys, inner as u64, stride, domain))
}

fn inner_share(sys: &System, inner: u64, stride: u64, domain: u64) -> f64 {
    let Some(u) = &sys.scale_up else { return 1.0 };
    if inner <= 1 {
        return 1.0;
    }
    match u.topology {
        ScaleUpTopology::Torus | ScaleUpTopology::Mesh if !u.dims.is_empty() => {
            // The runtime places each group on a compact sub-box of the torus (XLA's device
            // assignment does): g ranks span up to log2(g) dimensions, 2 ranks one, 4 two, 8 or
            // more three.
            let _ = stride;
            let spanned = (inner as f64).log2().floor().max(1.0);
            spanned.min(u.dims.len() as f64) / u.dims.len() as f64
        }
        ScaleUpTopology::FullMesh | ScaleUpTopology::HybridCubeMesh => {
            let d = domain.min(u.size) as f64;
            if d <= 1.0 {
                1.0
            } else {
                ((inner as f64 - 1.0) / (d - 1.0)).clamp(f64::MIN_POSITIVE, 1.0)
            }
        }
        _ => 1.0,
    }
}

/// Split a group of `size` ranks spaced `stride` apart over domains of `domain` devices:
/// (ranks per domain, domains).
pub fn split_group(size: u64, stride: u64, domain: u64) -> (f64, f64) {
    if size <= 1 {
        return (1.0, 1.0);
    }
    let domain = domain.max(1);
    if stride >= domain {
        (1.0, size as f64)
    } else if stride * size <= domain {
        (size as f64, 1.0)
    } else {
        let inner = (domain / stride).max(1);
        (inner as f64, (size as f64 / inner as f64).max(1.0))
    }
}

/// The scale-up domain a program of `devices` devices sees: the system's, or all of them when
/// fewer.
pub(super) fn domain_size(sys: &System, devices: u64) -> u64 {
    sys.scale_up_size().min(devices).max(1)
}

/// The bytes MeshGEMM (He et al., OSDI'25; Cannon's algorithm, double-buffered) puts on a core's
/// busiest mesh link for matrix products given as (input-activation bytes, weight bytes) each,
/// spread over a square of `side` × `side` cores: each core's activation tile passes every core
/// of its row and its weight tile every core of its column, over different links at once, so a
/// product loads its links with the larger of the two over `side`. The shifts run behind the
/// multiplications (the next tiles arrive while the current ones are multiplied), so callers
/// add them as `Overlap::Compute`.
pub(super) fn mesh_gemm_bytes(products: &[(f64, f64)], side: f64) -> f64 {
    products.iter().map(|&(a, w)| a.max(w)).sum::<f64>() / side
}
