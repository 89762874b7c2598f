//! Lowering a system file into the validated [`System`]: the top level with its size and power
//! checks, the node, the scale-up and scale-out networks, and the memory levels every part shares.

use super::device::{check_version, lower_device, lower_memory};
use super::execution::lower_execution;
use super::types::{HostLink, Node, ScaleOut, ScaleUp, System, UnsetEnergy, WeightStore};
use crate::diag::Path;
use crate::model::Ctx;
use crate::spec::arch::*;
use crate::spec::Located;
use crate::units::Dimension as D;

pub(super) fn lower(
    cx: &mut Ctx,
    spec: &SystemSpec,
    device: Option<&Located<DeviceSpec>>,
    die: Option<&Located<DieSpec>>,
    node: Option<&Located<NodeSpec>>,
    reliability: Option<&Located<crate::spec::reliability::ReliabilitySpec>>,
) -> Option<System> {
    cx.declare_sources(&spec.sources);
    let sys_file = cx.file();
    check_version(cx, Some(spec.version), true);
    // The system's own default source applies to its counts (entering checks it is declared).
    let sys_source = spec.source.clone();
    cx.enter_part(cx.file(), Path::root(), sys_source.as_ref());
    if spec.name.trim().is_empty() {
        cx.error("name", "`name` is empty", None);
    }
    let nodes = cx.count("nodes", spec.nodes);
    let dev = match (device, die) {
        (Some(d), Some(die)) => lower_device(cx, d, die),
        _ => None,
    };
    let nd = node.and_then(|n| lower_node(cx, n));
    let unset_host = node.and_then(unset_host_link_energy);
    let scale_up = spec.scale_up.as_ref().and_then(|s| {
        cx.enter_field("scale_up", s.source.as_ref());
        let v = lower_scale_up(cx, s);
        cx.leave();
        v
    });
    let scale_out = spec.scale_out.as_ref().and_then(|s| {
        cx.enter_field("scale_out", s.source.as_ref());
        let v = lower_scale_out(cx, s);
        cx.leave();
        v
    });
    let weight_store = spec
        .weight_store
        .as_ref()
        .and_then(|w| lower_weight_store(cx, w));
    let store_updates = weight_store
        .as_ref()
        .is_some_and(|w| w.compute > 0.0 && w.memory_bandwidth > 0.0);
    let execution = spec
        .execution
        .as_ref()
        .and_then(|e| lower_execution(cx, e, store_updates))
        .unwrap_or_default();
    let (pue, power_limit) = lower_facility(cx, spec.facility.as_ref());
    let economics = super::cost::lower_cost(cx, spec.cost.as_ref());
    let reliability = reliability.and_then(|r| crate::model::reliability::lower_reliability(cx, r));
    let storage = spec
        .storage
        .as_ref()
        .and_then(|s| crate::model::reliability::lower_storage(cx, s));
    // Sizes are checked even when the device has errors, so all of them show at once.
    let (nodes, node_spec, node) = (nodes?, node?, nd?);
    let Some(devices) = nodes.checked_mul(node.devices as u64) else {
        cx.error(
            "nodes",
            format!(
                "{nodes} nodes × {} devices is absurdly many devices",
                node.devices
            ),
            Some("expected at most 2^64 devices".into()),
        );
        return None;
    };

    check_sizes(
        cx,
        scale_up.as_ref(),
        scale_out.is_some(),
        nodes,
        node.devices as u64,
        devices,
    );
    let device = dev?;

    let sys = System {
        name: spec.name.clone(),
        description: spec.description.clone(),
        device,
        node,
        nodes,
        devices,
        scale_up,
        scale_out,
        weight_store,
        execution,
        software: None,
        pue,
        power_limit,
        economics,
        reliability,
        storage,
        goodput: Default::default(),
        power_boundary: crate::vocab::PowerBoundary::Facility,
        fitted: cx.fitted.iter().cloned().collect(),
        fitted_sources: cx.fitted_sources.clone(),
        copied_sources: cx.copied_sources.clone(),
        assumed: cx.assumed,
        figures: cx.figures,
        unset_energy: unset_link_energy(sys_file, spec)
            .into_iter()
            .chain(unset_host)
            .collect(),
    };
    let mut sys = sys;
    sys.figures.defaulted += sys.device.defaulted.len() + sys.unset_energy.len();
    check_budgets(cx, &sys, node_spec);
    cx.leave();
    Some(sys)
}

/// The weight store outside the devices: its capacity, bandwidth and latency, its power, and the
/// compute and memory bandwidth with which it runs the optimizer update (both or neither).
fn lower_weight_store(cx: &mut Ctx, w: &WeightStoreSpec) -> Option<WeightStore> {
    cx.enter_field("weight_store", w.source.as_ref());
    let capacity = cx.positive("capacity", &w.capacity, D::Bytes);
    let bandwidth = cx.positive("bandwidth", &w.bandwidth, D::Bandwidth);
    let latency = w
        .latency
        .as_ref()
        .and_then(|q| cx.non_negative("latency", q, D::Time));
    let power = w
        .power
        .as_ref()
        .and_then(|q| cx.non_negative("power", q, D::Power));
    let compute = w
        .compute
        .as_ref()
        .and_then(|q| cx.positive("compute", q, D::FlopRate));
    let memory_bandwidth = w
        .memory_bandwidth
        .as_ref()
        .and_then(|q| cx.positive("memory_bandwidth", q, D::Bandwidth));
    if compute.is_some() != memory_bandwidth.is_some() {
        cx.error(
            if compute.is_some() {
                "compute"
            } else {
                "memory_bandwidth"
            },
            "a weight store that runs the optimizer update needs both `compute` and `memory_bandwidth`",
            Some("give both (the update reads and writes the optimizer state in the store's memory), or neither (the update runs on the devices)".into()),
        );
    }
    cx.leave();
    Some(WeightStore {
        name: w.name.clone(),
        capacity: capacity?,
        bandwidth: bandwidth?,
        latency: latency.unwrap_or(0.0),
        power: power.unwrap_or(0.0),
        compute: compute.unwrap_or(0.0),
        memory_bandwidth: memory_bandwidth.unwrap_or(0.0),
    })
}

/// The facility's PUE (1 where not given) and power limit.
fn lower_facility(cx: &mut Ctx, facility: Option<&FacilitySpec>) -> (f64, Option<f64>) {
    match facility {
        Some(f) => {
            cx.enter_field("facility", f.source.as_ref());
            let pue = f.pue.as_ref().and_then(|q| cx.q("pue", q, D::Ratio));
            if let Some(p) = pue {
                cx.check("pue", crate::model::bounds::pue("pue", p));
            }
            let lim = f
                .power_limit
                .as_ref()
                .and_then(|q| cx.positive("power_limit", q, D::Power));
            cx.leave();
            (pue.unwrap_or(1.0), lim)
        }
        None => (1.0, None),
    }
}

/// Sizes that must multiply out: the scale-up domain against the nodes and the system, and a
/// network joining the domains where there are several.
fn check_sizes(
    cx: &mut Ctx,
    scale_up: Option<&ScaleUp>,
    has_scale_out: bool,
    nodes: u64,
    node_devices: u64,
    devices: u64,
) {
    if let Some(su) = scale_up {
        let nd = node_devices;
        let fits_nodes = if su.size >= nd {
            su.size % nd == 0
        } else {
            nd.is_multiple_of(su.size)
        };
        if !fits_nodes {
            cx.error_at(
                &Path::root().field("scale_up").field("size"),
                format!(
                    "scale-up domain of {} devices does not align with nodes of {} devices",
                    su.size, nd
                ),
                Some("a domain is a whole number of nodes, or a node holds a whole number of domains".into()),
            );
        }
        if su.size > devices {
            cx.error_at(
                &Path::root().field("scale_up").field("size"),
                format!("scale-up domain of {} devices is larger than the system ({devices} devices = {nodes} nodes × {nd})", su.size),
                Some("lower `size` or raise `nodes`".into()),
            );
        } else if !devices.is_multiple_of(su.size) {
            cx.error_at(
                &Path::root().field("scale_up").field("size"),
                format!(
                    "{devices} devices ({nodes} nodes × {nd}) do not divide into domains of {}",
                    su.size
                ),
                Some("every device belongs to a whole domain: change `size` or `nodes`".into()),
            );
        }
    }
    if devices > 1 && scale_up.is_none_or(|s| s.size < devices) && !has_scale_out {
        cx.error_at(
            &Path::root().field("nodes"),
            format!("{devices} devices but no network joins the scale-up domains"),
            Some("add `scale_out: (...)` or make the scale-up domain span the system".into()),
        );
    }
}

/// Budgets: devices over their share of a limit are throttled (a value of the estimate); only
/// parts that leave the devices nothing are an error. The node's, the scale-up domain's and the
/// facility's limits, each at the line that states it.
fn check_budgets(cx: &mut Ctx, sys: &System, node_spec: &Located<NodeSpec>) {
    let fmt = crate::units::fmt_si;
    if let Some(lim) = sys.node.power_limit {
        let devices = sys.device.tdp * sys.node.devices as f64;
        let other = sys.node.host_power + sys.node.nic_power + sys.node.other_power;
        // at the node's `power_limit`, in whichever file the node is written
        cx.enter_part(node_spec.file, node_spec.path.clone(), None);
        let at = cx.path().field("power_limit");
        check_budget(
            cx,
            &at,
            Budget {
                parts: devices + other,
                other,
                limit: lim,
                share: (lim - other) / sys.node.devices as f64,
                message: format!(
                    "node parts add up to {} but the node's `power_limit` is {}",
                    fmt(devices + other, "W"),
                    fmt(lim, "W")
                ),
                whose: "its devices are",
                error_hint: "host + NICs + other_power alone reach the node's rating",
                warn_hint: "a node rated for its parts at full power needs devices × tdp + host + NICs + other_power within `power_limit`",
            },
        );
        cx.leave();
    }
    if let Some((lim, other, size)) = sys.domain_budget(false) {
        let parts = sys.device.tdp * size + other;
        let at = Path::root().field("scale_up").field("power_limit");
        check_budget(
            cx,
            &at,
            Budget {
                parts,
                other,
                limit: lim,
                share: (lim - other) / size,
                message: format!(
                    "a domain's parts add up to {} but its `power_limit` is {}",
                    fmt(parts, "W"),
                    fmt(lim, "W")
                ),
                whose: "its devices are",
                error_hint: "the domain's hosts, NICs and switches alone reach its rating",
                warn_hint: "a rack rated for its parts at full power needs devices × tdp + its nodes' other parts + switches within `power_limit`",
            },
        );
    }
    if let Some(lim) = sys.power_limit {
        let rated = sys.rated_power();
        let at = Path::root().field("facility").field("power_limit");
        check_budget(
            cx,
            &at,
            Budget {
                parts: rated,
                other: sys.overhead_power(),
                limit: lim,
                share: sys.power_cap(),
                message: format!(
                    "rated power of the system's parts is {} but `power_limit` is {}",
                    fmt(rated, "W"),
                    fmt(lim, "W")
                ),
                whose: "the devices are",
                error_hint: "hosts, NICs, switches and weight store alone reach the budget",
                warn_hint:
                    "sum of component TDPs (devices, hosts, NICs, switches) exceeds the budget",
            },
        );
    }
}

/// A power limit (a node's, a rack's, the facility's) against the parts it holds at their
/// ratings.
struct Budget {
    parts: f64,
    /// What the parts other than the devices draw.
    other: f64,
    limit: f64,
    /// What each device may draw under the limit.
    share: f64,
    message: String,
    whose: &'static str,
    error_hint: &'static str,
    warn_hint: &'static str,
}

/// Parts over a limit: a warning that the devices throttle to their share when they would draw
/// more, or an error when the other parts alone reach the limit.
fn check_budget(cx: &mut Ctx, at: &Path, b: Budget) {
    if b.parts <= b.limit * 1.0001 {
        return;
    }
    if b.other >= b.limit {
        cx.error_at(at, b.message, Some(b.error_hint.into()));
    } else {
        cx.warn_at(
            at,
            format!(
                "{}: {} throttled to {} each when they would draw more",
                b.message,
                b.whose,
                crate::units::fmt_si(b.share, "W")
            ),
            Some(b.warn_hint.into()),
        );
    }
}

pub(super) fn lower_node(cx: &mut Ctx, n: &Located<NodeSpec>) -> Option<Node> {
    let s = &n.spec;
    let top = n.path.0.is_empty();
    cx.enter_part(n.file, n.path.clone(), None);
    cx.declare_sources(&s.sources);
    cx.leave();
    cx.enter_part(n.file, n.path.clone(), s.source.as_ref());
    check_version(cx, s.version, top);
    let devices = cx.count("devices", s.devices as u64);
    let host = s.host.as_ref().and_then(|h| {
        cx.enter_field("host", h.source.as_ref());
        let tdp = cx.non_negative("cpu_tdp", &h.cpu_tdp, D::Power);
        let run = running(cx, "cpu_running", h.cpu_running.as_ref(), tdp, "cpu_tdp");
        cx.leave();
        tdp.map(|t| (t * h.cpus as f64, run.unwrap_or(t) * h.cpus as f64))
    });
    let (nic_count, nic_bw, nic_power, nic_running) = match &s.nics {
        Some(nn) => {
            cx.enter_field("nics", nn.source.as_ref());
            let bw = cx.positive("bandwidth", &nn.bandwidth, D::Bandwidth);
            let p = nn
                .power
                .as_ref()
                .and_then(|q| cx.non_negative("power", q, D::Power));
            let run = running(cx, "running", nn.running.as_ref(), p, "power");
            cx.leave();
            let p = p.unwrap_or(0.0);
            (
                nn.count,
                bw.unwrap_or(0.0) * nn.count as f64,
                p * nn.count as f64,
                run.unwrap_or(p) * nn.count as f64,
            )
        }
        None => (0, 0.0, 0.0, 0.0),
    };
    let other = s
        .other_power
        .as_ref()
        .and_then(|q| cx.non_negative("other_power", q, D::Power));
    let other_run = running(
        cx,
        "other_running",
        s.other_running.as_ref(),
        other,
        "other_power",
    );
    let limit = s
        .power_limit
        .as_ref()
        .and_then(|q| cx.positive("power_limit", q, D::Power));
    let mut memory = Vec::new();
    for (i, m) in s.memory.iter().enumerate() {
        cx.enter_field("memory", None);
        cx.enter(crate::diag::Seg::Index(i), m.source.as_ref());
        if let Some(l) = lower_memory(cx, m, 1, 1) {
            memory.push(l);
        }
        cx.leave();
        cx.leave();
    }
    let host_link = s.host_link.as_ref().and_then(|h| {
        cx.enter_field("host_link", h.source.as_ref());
        let bw = cx.positive("bandwidth", &h.bandwidth, D::Bandwidth);
        let lat = h
            .latency
            .as_ref()
            .and_then(|q| cx.non_negative("latency", q, D::Time));
        let energy = h
            .energy_per_bit
            .as_ref()
            .and_then(|q| cx.non_negative("energy_per_bit", q, D::EnergyPerByte));
        let shared = h.shared_by.unwrap_or(1);
        if shared == 0 {
            cx.error(
                "shared_by",
                "`shared_by` is 0: a link is shared by at least one device".to_string(),
                Some("write the devices that share one link (1 if each has its own)".into()),
            );
        }
        cx.leave();
        let per_dir = match h.counted {
            Counted::BothDirections => bw? / 2.0,
            Counted::PerDirection => bw?,
        } / shared.max(1) as f64;
        // The device's share of the host memory's bandwidth bounds what its link can carry.
        let n = s.devices.max(1) as f64;
        let mem_bw: f64 = memory.iter().map(|l| l.bandwidth).sum::<f64>() / n;
        Some(HostLink {
            name: h.name.clone(),
            bandwidth: if mem_bw > 0.0 {
                per_dir.min(mem_bw)
            } else {
                per_dir
            },
            latency: lat.unwrap_or(0.0),
            energy_per_byte: energy.unwrap_or(0.0),
        })
    });
    cx.leave();
    Some(Node {
        name: s.name.clone(),
        devices: devices? as u32,
        host_power: host.map(|h| h.0).unwrap_or(0.0),
        nic_count,
        nic_bandwidth: nic_bw,
        nic_power,
        other_power: other.unwrap_or(0.0),
        host_running: host.map(|h| h.1).unwrap_or(0.0),
        nic_running,
        other_running: other_run.or(other).unwrap_or(0.0),
        memory,
        host_link,
        power_limit: limit,
    })
}

/// The scale-up and scale-out links that give no `energy_per_bit`: their traffic would cost no
/// energy, so `tessera check` warns (the NICs' and switches' own power is static and counted
/// apart; the per-bit figure is what moving a bit adds to it).
fn unset_link_energy(file: usize, spec: &SystemSpec) -> Vec<UnsetEnergy> {
    let hint = "add `energy_per_bit` with its source: only the energy that moving a bit adds \
                (SerDes/PHY, switch datapath), not the idle draw already in the NIC and switch \
                `power` figures; mark a guess `@assumed`";
    let mut out = Vec::new();
    let mut link = |field: &str, what: &str, name: &str, set: bool| {
        if !set {
            out.push(UnsetEnergy {
                file,
                at: Path::root().field(field),
                message: format!(
                    "{what} link `{name}` gives no `energy_per_bit`: its traffic costs no energy"
                ),
                hint: hint.into(),
            });
        }
    };
    if let Some(s) = &spec.scale_up {
        link("scale_up", "scale-up", &s.name, s.energy_per_bit.is_some());
    }
    if let Some(s) = &spec.scale_out {
        link(
            "scale_out",
            "scale-out",
            &s.name,
            s.energy_per_bit.is_some(),
        );
    }
    out
}

/// A host link that gives no `energy_per_bit`: the copies to and from host memory (activation
/// offload) would cost no energy, so `tessera check` warns, where the node is written.
fn unset_host_link_energy(n: &Located<NodeSpec>) -> Option<UnsetEnergy> {
    let h = n.spec.host_link.as_ref()?;
    if h.energy_per_bit.is_some() {
        return None;
    }
    Some(UnsetEnergy {
        file: n.file,
        at: n.path.clone().field("host_link"),
        message: format!(
            "host link `{}` gives no `energy_per_bit`: copies to and from host memory cost no energy",
            h.name
        ),
        hint: "add `energy_per_bit` with its source (\"1.3 pJ/bit\" for NVLink-C2C), or mark a \
               guess `@assumed`"
            .into(),
    })
}

fn lower_scale_up(cx: &mut Ctx, s: &ScaleUpSpec) -> Option<ScaleUp> {
    let size = cx.count("size", s.size);
    let bw = cx.positive("bandwidth", &s.bandwidth, D::Bandwidth);
    let lat = cx.non_negative("latency", &s.latency, D::Time);
    let e = s
        .energy_per_bit
        .as_ref()
        .and_then(|q| cx.non_negative("energy_per_bit", q, D::EnergyPerByte));
    if matches!(s.topology, ScaleUpTopology::Torus | ScaleUpTopology::Mesh) && s.dims.is_empty() {
        cx.error(
            "topology",
            "a torus or mesh needs `dims`",
            Some(
                "add `dims` that multiply out to `size`, e.g. `dims: [4, 4, 4]` for size 64".into(),
            ),
        );
    }
    if !s.dims.is_empty() {
        let product = s.dims.iter().try_fold(1u64, |a, d| a.checked_mul(*d));
        if product != size {
            let product = match product {
                Some(p) => p.to_string(),
                None => "more than 2^64".into(),
            };
            cx.error(
                "dims",
                format!(
                    "dims {:?} multiply to {product}, not the domain size {}",
                    s.dims, s.size
                ),
                Some("`dims` must multiply out to `size`".into()),
            );
        }
    }
    let (sc, sp, sr) = switches(cx, s.switches.as_ref());
    fabric_contradictions(cx, s.topology, sc, s.in_network_reduction);
    let power_limit = s
        .power_limit
        .as_ref()
        .and_then(|q| cx.positive("power_limit", q, D::Power));
    let bw = bw?;
    Some(ScaleUp {
        name: s.name.clone(),
        topology: s.topology,
        size: size?,
        dims: s.dims.clone(),
        bandwidth: match s.counted {
            Counted::BothDirections => bw / 2.0,
            Counted::PerDirection => bw,
        },
        counted_both_directions: s.counted == Counted::BothDirections,
        latency: lat?,
        in_network_reduction: s.in_network_reduction,
        energy_per_byte: e.unwrap_or(0.0),
        switch_count: sc,
        switch_power: sp,
        switch_running: sr,
        power_limit,
    })
}

fn lower_scale_out(cx: &mut Ctx, s: &ScaleOutSpec) -> Option<ScaleOut> {
    let bw = cx.positive("bandwidth", &s.bandwidth, D::Bandwidth);
    let lat = cx.non_negative("latency", &s.latency, D::Time);
    let over = s
        .oversubscription
        .as_ref()
        .and_then(|q| cx.q("oversubscription", q, D::Ratio));
    if let Some(o) = over {
        cx.check(
            "oversubscription",
            crate::model::bounds::oversubscription("oversubscription", o),
        );
    }
    let e = s
        .energy_per_bit
        .as_ref()
        .and_then(|q| cx.non_negative("energy_per_bit", q, D::EnergyPerByte));
    let (sc, sp, sr) = switches(cx, s.switches.as_ref());
    Some(ScaleOut {
        name: s.name.clone(),
        topology: s.topology,
        bandwidth: bw?,
        latency: lat?,
        oversubscription: over.unwrap_or(1.0).max(1.0),
        in_network_reduction: s.in_network_reduction,
        energy_per_byte: e.unwrap_or(0.0),
        switch_count: sc,
        switch_power: sp,
        switch_running: sr,
    })
}

/// A switch set's count, rating and running power per switch (W).
fn switches(cx: &mut Ctx, sw: Option<&SwitchSpec>) -> (u64, f64, f64) {
    match sw {
        Some(sw) => {
            cx.enter_field("switches", sw.source.as_ref());
            let p = cx.non_negative("power", &sw.power, D::Power);
            let r = running(cx, "running", sw.running.as_ref(), p, "power");
            cx.leave();
            let p = p.unwrap_or(0.0);
            (sw.count, p, r.unwrap_or(p))
        }
        None => (0, 0.0, 0.0),
    }
}

/// A part's running power (what it draws under load): at most its rating, which it stands for
/// where the file gives none (`None` then).
fn running(
    cx: &mut Ctx,
    field: &str,
    q: Option<&crate::spec::Q>,
    rating: Option<f64>,
    rating_field: &str,
) -> Option<f64> {
    let r = cx.non_negative(field, q?, D::Power)?;
    if let Some(t) = rating {
        if r > t * 1.0001 {
            cx.error(
                field,
                format!(
                    "`{field}` ({}) is above `{rating_field}` ({})",
                    crate::units::fmt_si(r, "W"),
                    crate::units::fmt_si(t, "W")
                ),
                Some(format!(
                    "`{field}` is what the part draws while the system runs; `{rating_field}` is the most it may draw"
                )),
            );
        }
    }
    Some(r)
}

/// Warnings for a scale-up fabric whose topology contradicts its parts: switches on a fabric of
/// direct links (a full mesh, cube-mesh, ring, mesh or wafer: their power counted for nothing),
/// or reduction in the network where no switch sits to do it. A torus may ride optical circuit
/// switches (TPU v4) and a PCIe tree its PCIe switches.
fn fabric_contradictions(cx: &mut Ctx, t: ScaleUpTopology, switches: u64, in_network: bool) {
    use ScaleUpTopology as T;
    let direct = matches!(
        t,
        T::FullMesh | T::HybridCubeMesh | T::Ring | T::Mesh | T::Wafer
    );
    let name = format!("{t:?}");
    if direct && switches > 0 {
        cx.warn(
            "switches",
            format!("{switches} switches on a `{name}` fabric of direct links: their power is counted, but nothing routes through them"),
            Some("drop `switches`, or make the topology `Switched` if the devices talk through them".into()),
        );
    }
    if in_network && t != T::Switched {
        cx.warn(
            "in_network_reduction",
            format!("`in_network_reduction` on a `{name}` fabric: reduction in the network needs switches that reduce (NVLink SHARP)"),
            Some("set `in_network_reduction: false`, or make the topology `Switched`".into()),
        );
    }
}
