//! What a system adds up to: device count, peak compute, memory, network and power, whole system.

use crate::model::precision::Precision;
use crate::model::system::System;
use crate::units::fmt_si;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct SystemSummary {
    pub name: String,
    pub description: String,
    pub accelerator: String,
    pub accelerators: u64,
    pub nodes: u64,
    pub devices_per_node: u32,
    /// Precision → FLOP/s, dense, whole system.
    pub peak_flops_per_s: BTreeMap<String, f64>,
    /// Memory level → bytes, whole system.
    pub memory_capacity_bytes: BTreeMap<String, f64>,
    /// Memory level → B/s, whole system.
    pub memory_bandwidth_bytes_per_s: BTreeMap<String, f64>,
    pub cores_per_device: u64,
    /// The output tiles (rows, columns) its GEMM library spreads over those cores (tile and wave
    /// quantization, `engine::tiling`); empty where the file gives none.
    pub gemm_tiles: Vec<(u32, u32)>,
    /// The on-chip network of one device, if the file describes it.
    pub mesh: Option<MeshSummary>,
    pub scale_up: Option<LinkSummary>,
    pub scale_out: Option<LinkSummary>,
    /// Each device's link to its node's host memory (where activations are offloaded), if the
    /// node declares one.
    pub host_link: Option<HostLinkSummary>,
    /// Rated IT power of the whole system (devices at TDP + hosts, NICs, switches).
    pub power_w: f64,
    pub facility_power_w: f64,
    pub power_limit_w: Option<f64>,
    /// A node's `power_limit` (W).
    pub node_power_limit_w: Option<f64>,
    /// A scale-up domain's (rack's) `power_limit` (W).
    pub domain_power_limit_w: Option<f64>,
    /// What each device may draw under those limits before it throttles (W; its TDP when
    /// no limit binds tighter).
    pub device_power_cap_w: f64,
    pub device_tdp_w: f64,
    /// What the device's silicon draws flat out at full clock (W): its `full_clock_power`, else
    /// its TDP. Above the TDP, the device throttles to its TDP under full load.
    pub device_full_clock_power_w: f64,
    pub assumed_figures: usize,
    pub fitted_figures: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct MeshSummary {
    pub topology: String,
    pub dims: Vec<u64>,
    /// Per link, per direction (B/s).
    pub link_bandwidth_bytes_per_s: f64,
    /// Links cut by a line across the longest dimension × link bandwidth, one direction (B/s).
    pub bisection_bytes_per_s: f64,
    /// Hops corner to corner × hop latency (s).
    pub diameter_latency_s: f64,
    /// Latency of one hop (s).
    pub hop_latency_s: f64,
    /// One core's share of the device: precision → dense FLOP/s.
    pub per_core_peak_flops_per_s: BTreeMap<String, f64>,
    /// One core's share of the device's on-chip SRAM: capacity (B) and bandwidth (B/s).
    pub per_core_sram_bytes: f64,
    pub per_core_sram_bandwidth_bytes_per_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostLinkSummary {
    pub name: String,
    /// Per device, per direction, bounded by the device's share of the host memory's bandwidth
    /// (B/s).
    pub bandwidth_per_device_bytes_per_s: f64,
    /// The device's share of its node's host memory (B).
    pub host_memory_per_device_bytes: f64,
    pub latency_s: f64,
    /// Energy per bit moved over it (J/bit; 0 where the file gives none).
    pub energy_per_bit_j: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LinkSummary {
    pub name: String,
    pub devices_per_domain: u64,
    /// Per device, per direction (B/s).
    pub bandwidth_per_device_bytes_per_s: f64,
    /// Both directions, all devices (B/s): the figure vendors quote for NVL72 (130 TB/s).
    pub aggregate_bytes_per_s: f64,
    /// Bisection bandwidth of one domain (scale-up) or the whole network (scale-out), one direction.
    pub bisection_bytes_per_s: f64,
    pub latency_s: f64,
    pub in_network_reduction: bool,
}

pub fn summarize(s: &System) -> SystemSummary {
    let n = s.devices as f64;
    let mut peak = BTreeMap::new();
    for p in Precision::ALL {
        let v = s.peak_flops()[p.index()];
        if v > 0.0 {
            peak.insert(p.name().to_string(), v);
        }
    }
    let mut cap = BTreeMap::new();
    let mut bw = BTreeMap::new();
    for m in &s.device.memory {
        *cap.entry(m.name.clone()).or_insert(0.0) += m.capacity * n;
        *bw.entry(m.name.clone()).or_insert(0.0) += m.bandwidth * n;
    }
    for m in &s.node.memory {
        *cap.entry(m.name.clone()).or_insert(0.0) += m.capacity * s.nodes as f64;
        *bw.entry(m.name.clone()).or_insert(0.0) += m.bandwidth * s.nodes as f64;
    }
    if let Some(w) = &s.weight_store {
        cap.insert(w.name.clone(), w.capacity);
    }
    let scale_up = s.scale_up.as_ref().map(|u| {
        let size = u.size.min(s.devices);
        let bisection = match u.topology {
            crate::spec::arch::ScaleUpTopology::Torus
            | crate::spec::arch::ScaleUpTopology::Mesh
                if !u.dims.is_empty() =>
            {
                // Cut across the longest dimension: 2 × (size / max_dim) links (wraparound),
                // each link carrying bandwidth / (2 × dims) per direction.
                let maxd = *u.dims.iter().max().unwrap_or(&1) as f64;
                let links = (size as f64 / maxd)
                    * if u.topology == crate::spec::arch::ScaleUpTopology::Torus {
                        2.0
                    } else {
                        1.0
                    };
                links * u.bandwidth / (2.0 * u.dims.len() as f64)
            }
            _ => size as f64 / 2.0 * u.bandwidth,
        };
        LinkSummary {
            name: u.name.clone(),
            devices_per_domain: size,
            bandwidth_per_device_bytes_per_s: u.bandwidth,
            aggregate_bytes_per_s: 2.0 * u.bandwidth * size as f64,
            bisection_bytes_per_s: bisection,
            latency_s: u.latency,
            in_network_reduction: u.in_network_reduction,
        }
    });
    let scale_out = s.scale_out.as_ref().map(|o| LinkSummary {
        name: o.name.clone(),
        devices_per_domain: s.devices,
        bandwidth_per_device_bytes_per_s: o.bandwidth,
        aggregate_bytes_per_s: 2.0 * o.bandwidth * n,
        bisection_bytes_per_s: n / 2.0 * o.bandwidth / o.oversubscription,
        latency_s: o.latency,
        in_network_reduction: o.in_network_reduction,
    });
    let mesh = mesh_summary(s);
    let power = s.rated_power();
    SystemSummary {
        name: s.name.clone(),
        description: s.description.clone(),
        accelerator: s.device.name.clone(),
        accelerators: s.devices,
        nodes: s.nodes,
        devices_per_node: s.node.devices,
        peak_flops_per_s: peak,
        memory_capacity_bytes: cap,
        memory_bandwidth_bytes_per_s: bw,
        cores_per_device: s.device.cores,
        gemm_tiles: s.device.efficiency.tiles.clone(),
        mesh,
        scale_up,
        scale_out,
        host_link: s.node.host_link.as_ref().map(|h| HostLinkSummary {
            name: h.name.clone(),
            bandwidth_per_device_bytes_per_s: h.bandwidth,
            host_memory_per_device_bytes: s.node.host_capacity(),
            latency_s: h.latency,
            energy_per_bit_j: h.energy_per_byte / 8.0,
        }),
        power_w: power,
        facility_power_w: power * s.pue,
        power_limit_w: s.power_limit,
        node_power_limit_w: s.node.power_limit,
        domain_power_limit_w: s.scale_up.as_ref().and_then(|u| u.power_limit),
        device_power_cap_w: match s.power_cap() {
            c if c > 0.0 => c.min(s.device.tdp),
            _ => s.device.tdp,
        },
        device_tdp_w: s.device.tdp,
        device_full_clock_power_w: s.device.rated_tdp,
        assumed_figures: s.assumed,
        fitted_figures: s.fitted.len(),
    }
}

/// The on-chip mesh of `s`'s device, with one core's share of the device, if it has one.
pub fn mesh_summary(s: &System) -> Option<MeshSummary> {
    let m = s.device.mesh.as_ref()?;
    let maxd = m.dims.iter().copied().max().unwrap_or(1) as f64;
    let prod: f64 = m.dims.iter().map(|d| *d as f64).product();
    let wrap = matches!(m.topology, crate::spec::arch::MeshTopology::Torus2D) as u8 as f64 + 1.0;
    let diameter: f64 = m.dims.iter().map(|d| (*d as f64 - 1.0) / wrap).sum();
    let cores = (s.device.cores.max(1)) as f64;
    let mut per_core = BTreeMap::new();
    for p in Precision::ALL {
        let v = s.device.matrix_peak[p.index()].max(s.device.vector_peak[p.index()]);
        if v > 0.0 {
            per_core.insert(p.name().to_string(), v / cores);
        }
    }
    let mach = crate::engine::machine::machine(s, s.devices);
    Some(MeshSummary {
        topology: format!("{:?}", m.topology),
        dims: m.dims.clone(),
        link_bandwidth_bytes_per_s: m.link_bandwidth,
        bisection_bytes_per_s: prod / maxd * wrap * m.link_bandwidth,
        diameter_latency_s: diameter * m.hop_latency,
        hop_latency_s: m.hop_latency,
        per_core_peak_flops_per_s: per_core,
        per_core_sram_bytes: mach[crate::engine::table::SRAM_CAPACITY] / cores,
        per_core_sram_bandwidth_bytes_per_s: mach[crate::engine::table::SRAM_BANDWIDTH] / cores,
    })
}

/// Rows of (quantity, value) for a table.
pub fn rows(s: &SystemSummary) -> Vec<(String, String)> {
    let mut r = vec![
        ("system".to_string(), s.name.clone()),
        ("accelerator".into(), s.accelerator.clone()),
        (
            "accelerators".into(),
            format!(
                "{} ({} nodes × {})",
                s.accelerators, s.nodes, s.devices_per_node
            ),
        ),
    ];
    for (p, v) in &s.peak_flops_per_s {
        r.push((format!("peak {p} (dense)"), fmt_si(*v, "FLOP/s")));
    }
    for (m, v) in &s.memory_capacity_bytes {
        let bw = s
            .memory_bandwidth_bytes_per_s
            .get(m)
            .map(|b| format!(", {}", fmt_si(*b, "B/s")))
            .unwrap_or_default();
        r.push((format!("memory {m}"), format!("{}{bw}", fmt_si(*v, "B"))));
    }
    if s.cores_per_device > 1 {
        r.push(("cores per device".into(), s.cores_per_device.to_string()));
    }
    if !s.gemm_tiles.is_empty() {
        let tiles: Vec<String> = s
            .gemm_tiles
            .iter()
            .map(|(a, b)| format!("{a}×{b}"))
            .collect();
        r.push((
            "GEMM tiles".into(),
            format!(
                "{} over the cores (tile and wave quantization)",
                tiles.join(", ")
            ),
        ));
    }
    if let Some(m) = &s.mesh {
        r.push((
            "on-chip mesh".into(),
            format!(
                "{} {:?}: {} per link per direction, {} bisection, {} corner to corner",
                m.topology,
                m.dims,
                fmt_si(m.link_bandwidth_bytes_per_s, "B/s"),
                fmt_si(m.bisection_bytes_per_s, "B/s"),
                fmt_si(m.diameter_latency_s, "s")
            ),
        ));
        let peaks: Vec<String> = m
            .per_core_peak_flops_per_s
            .iter()
            .map(|(p, v)| format!("{p} {}", fmt_si(*v, "FLOP/s")))
            .collect();
        r.push((
            "per core".into(),
            format!(
                "{}; SRAM {} at {}; mesh links {} per direction, {} per hop",
                peaks.join(", "),
                fmt_si(m.per_core_sram_bytes, "B"),
                fmt_si(m.per_core_sram_bandwidth_bytes_per_s, "B/s"),
                fmt_si(m.link_bandwidth_bytes_per_s, "B/s"),
                fmt_si(m.hop_latency_s, "s")
            ),
        ));
    }
    for (label, l) in [("scale-up", &s.scale_up), ("scale-out", &s.scale_out)] {
        if let Some(l) = l {
            r.push((
                label.to_string(),
                format!(
                    "{}: {} per device per direction, {} aggregate, {} bisection, {} latency{}",
                    l.name,
                    fmt_si(l.bandwidth_per_device_bytes_per_s, "B/s"),
                    fmt_si(l.aggregate_bytes_per_s, "B/s"),
                    fmt_si(l.bisection_bytes_per_s, "B/s"),
                    fmt_si(l.latency_s, "s"),
                    if l.in_network_reduction {
                        ", in-network reduction"
                    } else {
                        ""
                    }
                ),
            ));
        }
    }
    if let Some(h) = &s.host_link {
        r.push((
            "host link".into(),
            format!(
                "{}: {} per device per direction to {} of host memory per device, {} latency, {}",
                h.name,
                fmt_si(h.bandwidth_per_device_bytes_per_s, "B/s"),
                fmt_si(h.host_memory_per_device_bytes, "B"),
                fmt_si(h.latency_s, "s"),
                if h.energy_per_bit_j > 0.0 {
                    fmt_si(h.energy_per_bit_j, "J/bit")
                } else {
                    "no energy per bit given".into()
                }
            ),
        ));
    }
    r.push(("device TDP".into(), fmt_si(s.device_tdp_w, "W")));
    if s.device_full_clock_power_w > s.device_tdp_w * (1.0 + 1e-9) {
        r.push((
            "device at full clock".into(),
            format!(
                "{} (its die flat out; the TDP throttles it)",
                fmt_si(s.device_full_clock_power_w, "W")
            ),
        ));
    }
    r.push(("rated power (IT)".into(), fmt_si(s.power_w, "W")));
    r.push((
        "facility power (× PUE)".into(),
        fmt_si(s.facility_power_w, "W"),
    ));
    if let Some(l) = s.node_power_limit_w {
        r.push(("node power limit".into(), fmt_si(l, "W")));
    }
    if let Some(l) = s.domain_power_limit_w {
        r.push(("rack (scale-up domain) power limit".into(), fmt_si(l, "W")));
    }
    if let Some(l) = s.power_limit_w {
        r.push(("power limit".into(), fmt_si(l, "W")));
    }
    if s.device_power_cap_w < s.device_tdp_w * (1.0 - 1e-9) {
        r.push((
            "device power under the limits".into(),
            format!(
                "{} (a device demanding more throttles)",
                fmt_si(s.device_power_cap_w, "W")
            ),
        ));
    }
    r.push((
        "figures assumed / fitted".into(),
        format!("{} / {}", s.assumed_figures, s.fitted_figures),
    ));
    r
}
