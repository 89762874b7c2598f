//! The validated system: one accelerator type in nodes, a scale-up domain, a scale-out network,
//! with power for each part, all in SI units. [`load_system`] reads, resolves and lowers a file.

use super::precision::{Precision, NPREC};
use super::Ctx;
use crate::diag::{Diagnostic, Path, Severity};
use crate::spec::arch::*;
use crate::spec::{Files, Fs, Located, Resolver, FORMAT_VERSION};
use crate::units::Dimension as D;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct System {
    pub name: String,
    pub description: String,
    pub device: Device,
    pub node: Node,
    pub nodes: u64,
    /// Accelerator devices in the whole system.
    pub devices: u64,
    pub scale_up: Option<ScaleUp>,
    pub scale_out: Option<ScaleOut>,
    pub weight_store: Option<WeightStore>,
    pub pue: f64,
    pub power_limit: Option<f64>,
    /// Citations of figures marked fitted (they name the validation cases they were fitted on).
    pub fitted: Vec<String>,
    /// Number of figures marked `@assumed`.
    pub assumed: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Device {
    pub name: String,
    pub dies: u32,
    /// Cores over all dies.
    pub cores: u64,
    /// Dense matrix-engine peak per precision (FLOP/s, whole package; 0 = unsupported).
    pub matrix_peak: [f64; NPREC],
    /// Vector-engine peak per precision.
    pub vector_peak: [f64; NPREC],
    /// Memory levels the device computes from, fastest first (per device totals).
    pub memory: Vec<MemLevel>,
    pub tdp: f64,
    pub idle_power: f64,
    pub efficiency: Efficiency,
    /// Dynamic energy per FLOP by precision (J); derived from TDP where the file gives none.
    pub energy_per_flop: [f64; NPREC],
    pub energy_per_flop_derived: bool,
    pub mesh: Option<Mesh>,
    pub die_to_die_bandwidth: Option<f64>,
    pub area: Option<f64>,
    pub clock: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Efficiency {
    pub matmul: f64,
    pub low_precision_matmul: f64,
    pub vector: f64,
    pub memory: f64,
    pub network: f64,
    pub kernel_overhead: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemLevel {
    pub name: String,
    pub kind: MemoryKind,
    /// Bytes per device.
    pub capacity: f64,
    /// B/s per device.
    pub bandwidth: f64,
    pub latency: f64,
    pub energy_per_byte: f64,
    /// A cache holds no data placement of its own; data streams through it.
    pub cache: bool,
    pub compute: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Mesh {
    pub topology: MeshTopology,
    pub dims: Vec<u64>,
    pub link_bandwidth: f64,
    pub hop_latency: f64,
    /// J per byte per hop (the file writes it per bit).
    pub energy_per_byte_hop: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Node {
    pub name: String,
    pub devices: u32,
    pub host_power: f64,
    pub nic_count: u32,
    /// Per node, per direction.
    pub nic_bandwidth: f64,
    pub nic_power: f64,
    pub other_power: f64,
    pub memory: Vec<MemLevel>,
    pub power_limit: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScaleUp {
    pub name: String,
    pub topology: ScaleUpTopology,
    pub size: u64,
    pub dims: Vec<u64>,
    /// Per device, per direction.
    pub bandwidth: f64,
    pub latency: f64,
    pub in_network_reduction: bool,
    /// J per byte sent (the file writes it per bit; units convert it).
    pub energy_per_byte: f64,
    pub switch_count: u64,
    pub switch_power: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScaleOut {
    pub name: String,
    pub topology: ScaleOutTopology,
    /// Per device, per direction.
    pub bandwidth: f64,
    pub latency: f64,
    pub oversubscription: f64,
    pub in_network_reduction: bool,
    /// J per byte sent (the file writes it per bit; units convert it).
    pub energy_per_byte: f64,
    pub switch_count: u64,
    pub switch_power: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct WeightStore {
    pub name: String,
    pub capacity: f64,
    /// Per device, per direction.
    pub bandwidth: f64,
    pub latency: f64,
    pub power: f64,
}

impl System {
    /// Scale-up domains in the system.
    pub fn domains(&self) -> u64 {
        match &self.scale_up {
            Some(s) => self.devices.div_ceil(s.size),
            None => self.devices,
        }
    }

    /// Devices that share the fastest link tier (1 without a scale-up domain).
    pub fn scale_up_size(&self) -> u64 {
        self.scale_up
            .as_ref()
            .map(|s| s.size.min(self.devices))
            .unwrap_or(1)
    }

    /// Power of everything but the accelerators, whole system (W): hosts, NICs, other node parts,
    /// switches, weight store.
    pub fn overhead_power(&self) -> f64 {
        let n = self.nodes as f64;
        let node = (self.node.host_power + self.node.nic_power + self.node.other_power) * n;
        let su = self
            .scale_up
            .as_ref()
            .map(|s| s.switch_count as f64 * s.switch_power * self.domains() as f64)
            .unwrap_or(0.0);
        let so = self
            .scale_out
            .as_ref()
            .map(|s| s.switch_count as f64 * s.switch_power)
            .unwrap_or(0.0);
        let ws = self.weight_store.as_ref().map(|w| w.power).unwrap_or(0.0);
        node + su + so + ws
    }

    /// Rated power of the whole system: devices at TDP plus everything else (W, IT power).
    pub fn rated_power(&self) -> f64 {
        self.device.tdp * self.devices as f64 + self.overhead_power()
    }

    /// Peak dense FLOP/s of the whole system per precision, matrix and vector engines combined
    /// (the larger of the two, as they are quoted separately).
    pub fn peak_flops(&self) -> [f64; NPREC] {
        let mut out = [0.0; NPREC];
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.device.matrix_peak[i].max(self.device.vector_peak[i]) * self.devices as f64;
        }
        out
    }
}

impl Device {
    /// Matrix peak for precision `p`, falling back to the nearest supported format.
    pub fn matmul_rate(&self, p: Precision) -> (f64, Precision) {
        for f in p.fallbacks() {
            let r = self.matrix_peak[f.index()];
            if r > 0.0 {
                return (r, *f);
            }
        }
        for f in p.fallbacks() {
            let r = self.vector_peak[f.index()];
            if r > 0.0 {
                return (r, *f);
            }
        }
        (0.0, p)
    }
    /// Vector peak for precision `p` (fallbacks as above; the matrix rate where no vector rate is given).
    pub fn vector_rate(&self, p: Precision) -> f64 {
        for f in p.fallbacks() {
            let r = self.vector_peak[f.index()];
            if r > 0.0 {
                return r;
            }
        }
        // No vector figure: elementwise work runs at a sixteenth of the matrix rate (assumption
        // documented in README: on GPUs the vector rate is 1/16-1/30 of tensor rate).
        self.matmul_rate(p).0 / 16.0
    }
    /// The storage level data lives in (not a cache): index into `memory`.
    pub fn main_memory(&self) -> Option<usize> {
        self.memory
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.cache)
            .max_by(|a, b| a.1.capacity.total_cmp(&b.1.capacity))
            .map(|(i, _)| i)
    }
}

/// Read, resolve and lower a system file. `value` is `None` when any error was found.
pub fn load_system(name: &str, fs: &dyn Fs) -> crate::spec::Loaded<System> {
    let mut r = Resolver::new(fs);
    let Some((spec, id)) = r.load_file::<SystemSpec>(name) else {
        return crate::spec::Loaded {
            value: None,
            files: r.files,
            diagnostics: r.diagnostics,
        };
    };
    let root = Path::root();
    let device = r.resolve(spec.device.clone(), id, root.field("device"));
    let die = device.as_ref().and_then(|d| {
        let dr = d.spec.die.clone();
        r.resolve(dr, d.file, d.path.field("die"))
    });
    let node = r.resolve(spec.node.clone(), id, root.field("node"));
    let mut diags = std::mem::take(&mut r.diagnostics);
    let files = r.files;
    let value = {
        let mut cx = Ctx::new(&files, id);
        let v = lower(&mut cx, &spec, device.as_ref(), die.as_ref(), node.as_ref());
        diags.extend(cx.diags);
        v
    };
    let ok = !diags.iter().any(|d| d.severity == Severity::Error);
    crate::spec::Loaded {
        value: if ok { value } else { None },
        files,
        diagnostics: diags,
    }
}

fn check_version(cx: &mut Ctx, v: Option<u32>, top: bool) {
    match v {
        Some(FORMAT_VERSION) => {}
        Some(other) => cx.error(
            "version",
            format!("unsupported format version {other}"),
            Some(format!("this tessera reads version {FORMAT_VERSION}")),
        ),
        None if top => cx.error(
            "",
            "a part file needs `version: 1`",
            Some("add `version: 1,` as the first field".into()),
        ),
        None => {}
    }
}

fn lower(
    cx: &mut Ctx,
    spec: &SystemSpec,
    device: Option<&Located<DeviceSpec>>,
    die: Option<&Located<DieSpec>>,
    node: Option<&Located<NodeSpec>>,
) -> Option<System> {
    cx.declare_sources(&spec.sources);
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
    let weight_store = spec.weight_store.as_ref().and_then(|w| {
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
        cx.leave();
        Some(WeightStore {
            name: w.name.clone(),
            capacity: capacity?,
            bandwidth: bandwidth?,
            latency: latency.unwrap_or(0.0),
            power: power.unwrap_or(0.0),
        })
    });
    let (pue, power_limit) = match &spec.facility {
        Some(f) => {
            cx.enter_field("facility", f.source.as_ref());
            let pue = f.pue.as_ref().and_then(|q| cx.q("pue", q, D::Ratio));
            if let Some(p) = pue {
                if !(1.0..=3.0).contains(&p) {
                    cx.error(
                        "pue",
                        format!("`pue` must be between 1 and 3, found {p}"),
                        Some("PUE is facility power / IT power; 1.0 is the ideal, ~1.1-1.6 is typical".into()),
                    );
                }
            }
            let lim = f
                .power_limit
                .as_ref()
                .and_then(|q| cx.positive("power_limit", q, D::Power));
            cx.leave();
            (pue.unwrap_or(1.0), lim)
        }
        None => (1.0, None),
    };
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

    // Sizes that must multiply out.
    if let Some(su) = &scale_up {
        let nd = node.devices as u64;
        let fits_nodes = if su.size >= nd {
            su.size % nd == 0
        } else {
            nd % su.size == 0
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
        } else if devices % su.size != 0 {
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
    if devices > 1 && scale_up.as_ref().is_none_or(|s| s.size < devices) && scale_out.is_none() {
        cx.error_at(
            &Path::root().field("nodes"),
            format!("{devices} devices but no network joins the scale-up domains"),
            Some("add `scale_out: (...)` or make the scale-up domain span the system".into()),
        );
    }
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
        pue,
        power_limit,
        fitted: cx.fitted.iter().cloned().collect(),
        assumed: cx.assumed,
    };
    // Budgets.
    if let Some(lim) = sys.node.power_limit {
        let parts = sys.device.tdp * sys.node.devices as f64
            + sys.node.host_power
            + sys.node.nic_power
            + sys.node.other_power;
        if parts > lim * 1.0001 {
            // At the node's `power_limit`, in whichever file the node is written.
            cx.enter_part(node_spec.file, node_spec.path.clone(), None);
            cx.error(
                "power_limit",
                format!(
                    "node parts add up to {} but the node's `power_limit` is {}",
                    crate::units::fmt_si(parts, "W"),
                    crate::units::fmt_si(lim, "W")
                ),
                Some("devices × tdp + host + NICs + other_power must fit the node's rating".into()),
            );
            cx.leave();
        }
    }
    if let Some(lim) = sys.power_limit {
        let rated = sys.rated_power();
        if rated > lim * 1.0001 {
            cx.error_at(
                &Path::root().field("facility").field("power_limit"),
                format!(
                    "rated power of the system's parts is {} but `power_limit` is {}",
                    crate::units::fmt_si(rated, "W"),
                    crate::units::fmt_si(lim, "W")
                ),
                Some(
                    "sum of component TDPs (devices, hosts, NICs, switches) exceeds the budget"
                        .into(),
                ),
            );
        }
    }
    cx.leave();
    Some(sys)
}

fn lower_device(cx: &mut Ctx, d: &Located<DeviceSpec>, die: &Located<DieSpec>) -> Option<Device> {
    let s = &d.spec;
    let top = d.path.0.is_empty();
    cx.enter_part(d.file, d.path.clone(), None);
    cx.declare_sources(&s.sources);
    cx.leave();
    cx.enter_part(d.file, d.path.clone(), s.source.as_ref());
    check_version(cx, s.version, top);
    let dies = cx.count("dies", s.dies as u64).unwrap_or(1) as u32;
    let tdp = cx.positive("tdp", &s.tdp, D::Power);
    let idle = match &s.idle_power {
        Some(q) => cx.non_negative("idle_power", q, D::Power),
        None => tdp.map(|t| 0.25 * t),
    };
    if let (Some(t), Some(i)) = (tdp, idle) {
        if i > t {
            cx.error(
                "idle_power",
                format!(
                    "`idle_power` ({}) is above `tdp` ({})",
                    crate::units::fmt_si(i, "W"),
                    crate::units::fmt_si(t, "W")
                ),
                Some(
                    "idle power is what the device draws doing nothing; it is below its TDP".into(),
                ),
            );
        }
    }
    // Die.
    let dl = lower_die(cx, die);
    cx.enter_field("efficiency", None);
    let e = &s.efficiency;
    let matmul = cx.fraction("matmul", &e.matmul);
    let memory_eff = cx.fraction("memory", &e.memory);
    let network = cx.fraction("network", &e.network);
    let vector = e.vector.as_ref().and_then(|q| cx.fraction("vector", q));
    let lowp = e
        .low_precision_matmul
        .as_ref()
        .and_then(|q| cx.fraction("low_precision_matmul", q));
    let overhead = e
        .kernel_overhead
        .as_ref()
        .and_then(|q| cx.non_negative("kernel_overhead", q, D::Time));
    cx.leave();

    let mut memory = Vec::new();
    let (die_mem, cores_per_die, mut matrix_peak, mut vector_peak, epf, mesh, area, clock) = dl?;
    for mut m in die_mem {
        // per-die totals scale with dies
        m.capacity *= dies as f64;
        m.bandwidth *= dies as f64;
        if let Some(c) = m.compute.as_mut() {
            *c *= dies as f64;
        }
        memory.push(m);
    }
    for (i, m) in s.memory.iter().enumerate() {
        cx.enter(crate::diag::Seg::Field("memory".into()), None);
        cx.enter(crate::diag::Seg::Index(i), m.source.as_ref());
        let lvl = lower_memory(cx, m, cores_per_die.saturating_mul(dies as u64), dies);
        cx.leave();
        cx.leave();
        if let Some(l) = lvl {
            memory.push(l);
        }
    }
    for p in matrix_peak.iter_mut().chain(vector_peak.iter_mut()) {
        *p *= dies as f64;
    }
    let d2d = s.die_to_die.as_ref().and_then(|l| {
        cx.enter_field("die_to_die", l.source.as_ref());
        let v = cx.positive("bandwidth", &l.bandwidth, D::Bandwidth);
        cx.leave();
        v
    });
    if memory.is_empty() {
        cx.error(
            "memory",
            "the device has no memory level",
            Some("add HBM under `memory` or SRAM under the die's `sram`".into()),
        );
    }
    cx.leave();
    let (tdp, idle) = (tdp?, idle?);
    // Fastest first: by bandwidth, descending.
    memory.sort_by(|a, b| b.bandwidth.total_cmp(&a.bandwidth));
    let mut energy_per_flop = epf;
    let derived = energy_per_flop.iter().all(|e| *e == 0.0);
    for p in Precision::ALL {
        let i = p.index();
        if energy_per_flop[i] == 0.0 {
            let peak = matrix_peak[i].max(vector_peak[i]);
            if peak > 0.0 {
                // Assumption: a device running its matrix engines flat out at `p` draws its TDP.
                energy_per_flop[i] = (tdp - idle) / peak;
            }
        }
    }
    Some(Device {
        name: s.name.clone(),
        dies,
        cores: cores_per_die.saturating_mul(dies as u64),
        matrix_peak,
        vector_peak,
        memory,
        tdp,
        idle_power: idle,
        efficiency: Efficiency {
            matmul: matmul?,
            low_precision_matmul: lowp.unwrap_or(1.0),
            vector: vector.unwrap_or(memory_eff?),
            memory: memory_eff?,
            network: network?,
            kernel_overhead: overhead.unwrap_or(0.0),
        },
        energy_per_flop,
        energy_per_flop_derived: derived,
        mesh,
        die_to_die_bandwidth: d2d,
        area,
        clock,
    })
}

type DieOut = (
    Vec<MemLevel>,
    u64,
    [f64; NPREC],
    [f64; NPREC],
    [f64; NPREC],
    Option<Mesh>,
    Option<f64>,
    Option<f64>,
);

fn lower_die(cx: &mut Ctx, die: &Located<DieSpec>) -> Option<DieOut> {
    let s = &die.spec;
    let top = die.path.0.is_empty();
    cx.enter_part(die.file, die.path.clone(), None);
    cx.declare_sources(&s.sources);
    cx.leave();
    cx.enter_part(die.file, die.path.clone(), s.source.as_ref());
    check_version(cx, s.version, top);
    let clock = s
        .clock
        .as_ref()
        .and_then(|q| cx.positive("clock", q, D::Frequency));
    let area = s
        .area
        .as_ref()
        .and_then(|q| cx.positive("area", q, D::Area));
    let _process = s
        .process
        .as_ref()
        .and_then(|q| cx.positive("process", q, D::Length));
    if let Some(a) = area {
        if a > 0.0472 {
            cx.error(
                "area",
                format!(
                    "a die of {:.0} mm² is larger than a 300 mm wafer's largest square",
                    a * 1e6
                ),
                Some("a wafer-scale engine is 46,225 mm²".into()),
            );
        }
    }
    let cores = match s.cores {
        Some(c) => cx.count("cores", c).unwrap_or(1),
        None => 1,
    };
    let mut matrix = [0.0; NPREC];
    let mut vector = [0.0; NPREC];
    if s.compute.is_empty() {
        cx.error(
            "compute",
            "the die has no compute engine",
            Some("add `compute: [(name: ..., kind: Matrix, peak: {\"bf16\": \"...\"})]`".into()),
        );
    }
    for (i, e) in s.compute.iter().enumerate() {
        cx.enter_field("compute", None);
        cx.enter(crate::diag::Seg::Index(i), None);
        let sparsity = if e.sparse {
            e.sparsity_factor
                .as_ref()
                .and_then(|q| cx.q("sparsity_factor", q, D::Ratio))
                .unwrap_or(2.0)
        } else {
            1.0
        };
        if e.peak.is_empty() && (e.units.is_none() || e.ops_per_cycle.is_empty()) {
            cx.error(
                "peak",
                format!("engine `{}` has no peak rate", e.name),
                Some("give `peak: {\"bf16\": \"989.4 TFLOP/s\"}` or `units` with `ops_per_cycle` and a die `clock`".into()),
            );
        }
        let mut rates = [0.0; NPREC];
        for (k, q) in &e.peak {
            let Some(p) = precision_key(cx, "peak", k) else {
                continue;
            };
            if let Some(v) = cx.q_key("peak", k, q, D::FlopRate) {
                if v <= 0.0 {
                    cx.error_at(
                        &cx.path().field("peak").key(k),
                        format!("peak `{k}` must be greater than zero"),
                        None,
                    );
                }
                rates[p.index()] = v / sparsity;
            }
        }
        if let (Some(units), false) = (e.units, e.ops_per_cycle.is_empty()) {
            for (k, q) in &e.ops_per_cycle {
                let Some(p) = precision_key(cx, "ops_per_cycle", k) else {
                    continue;
                };
                let Some(opc) = cx.q_key("ops_per_cycle", k, q, D::FlopsPerCycle) else {
                    continue;
                };
                let Some(clk) = clock else {
                    cx.error(
                        "ops_per_cycle",
                        "deriving a peak from `ops_per_cycle` needs the die's `clock`",
                        Some("add the die's clock, e.g. `clock: \"1.98 GHz\"`, or give `peak` directly".into()),
                    );
                    continue;
                };
                let derived = units as f64 * opc * clk;
                let given = rates[p.index()];
                if given > 0.0 {
                    let ratio = given / derived;
                    if (ratio - 2.0).abs() < 0.1 && !e.sparse {
                        cx.error_at(
                            &cx.path().field("peak").key(k),
                            format!(
                                "peak `{k}` is {:.2}x the rate derived from units × ops_per_cycle × clock ({}): it looks like a 2:4 sparse figure written as dense",
                                ratio,
                                crate::units::fmt_si(derived, "FLOP/s")
                            ),
                            Some("write the dense figure, or set `sparse: true` if the peaks are quoted with sparsity".into()),
                        );
                    } else if (ratio - 1.0).abs() > 0.1 {
                        cx.error_at(
                            &cx.path().field("peak").key(k),
                            format!(
                                "peak `{k}` disagrees with units × ops_per_cycle × clock = {} ({:.0}% off)",
                                crate::units::fmt_si(derived, "FLOP/s"),
                                (ratio - 1.0) * 100.0
                            ),
                            Some("check the clock (boost or base?) and the per-unit rate".into()),
                        );
                    }
                } else {
                    rates[p.index()] = derived / sparsity;
                }
            }
        }
        let target = match e.kind {
            EngineKind::Matrix => &mut matrix,
            EngineKind::Vector => &mut vector,
        };
        for (t, r) in target.iter_mut().zip(rates) {
            *t += r;
        }
        cx.leave();
        cx.leave();
    }
    // Sparse figures written as dense: an fp8 rate 4x the bf16 rate (where 2x is the rule).
    let (b, f8) = (
        matrix[Precision::Bf16.index()],
        matrix[Precision::Fp8.index()],
    );
    if b > 0.0 && f8 > 0.0 && (f8 / b - 4.0).abs() < 0.2 {
        // At the (first) fp8 matrix peak written, else at `compute`.
        let at = s
            .compute
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == EngineKind::Matrix)
            .find_map(|(i, e)| {
                let k = e
                    .peak
                    .keys()
                    .find(|k| Precision::parse(k) == Some(Precision::Fp8))?;
                Some(cx.path().field("compute").index(i).field("peak").key(k))
            })
            .unwrap_or_else(|| cx.path().field("compute"));
        cx.error_at(
            &at,
            "the fp8 peak is 4x the bf16 peak: one of them is probably a 2:4 sparse figure",
            Some(
                "dense fp8 is 2x dense bf16 on every current tensor core; write both dense".into(),
            ),
        );
    }
    let mut mem = Vec::new();
    for (i, m) in s.sram.iter().enumerate() {
        cx.enter_field("sram", None);
        cx.enter(crate::diag::Seg::Index(i), m.source.as_ref());
        if let Some(l) = lower_memory(cx, m, cores, 1) {
            mem.push(l);
        }
        cx.leave();
        cx.leave();
    }
    let mesh = s.mesh.as_ref().and_then(|m| {
        cx.enter_field("mesh", m.source.as_ref());
        let bw = cx.positive("link_bandwidth", &m.link_bandwidth, D::Bandwidth);
        let lat = cx.non_negative("hop_latency", &m.hop_latency, D::Time);
        let e = m
            .energy_per_bit_hop
            .as_ref()
            .and_then(|q| cx.non_negative("energy_per_bit_hop", q, D::EnergyPerByte));
        let product = m
            .dims
            .iter()
            .try_fold(1u64, |a, d| a.checked_mul(*d))
            .unwrap_or(u64::MAX);
        if m.dims.is_empty() || m.dims.contains(&0) {
            cx.error(
                "dims",
                "mesh `dims` must be non-empty and positive",
                Some("e.g. `dims: [750, 994]`".into()),
            );
        } else if s.cores.is_some() && product != cores && product != 0 {
            cx.error(
                "dims",
                format!(
                    "mesh dims {:?} multiply to {product}, but the die has {cores} cores",
                    m.dims
                ),
                Some("the mesh must span the die's cores: dims multiply to `cores`".into()),
            );
        }
        cx.leave();
        Some(Mesh {
            topology: m.topology,
            dims: m.dims.clone(),
            link_bandwidth: bw?,
            hop_latency: lat?,
            energy_per_byte_hop: e.unwrap_or(0.0),
        })
    });
    let mut epf = [0.0; NPREC];
    for (k, q) in &s.energy_per_flop {
        let Some(p) = precision_key(cx, "energy_per_flop", k) else {
            continue;
        };
        if let Some(v) = cx.q_key("energy_per_flop", k, q, D::EnergyPerFlop) {
            epf[p.index()] = v;
        }
    }
    cx.leave();
    Some((mem, cores, matrix, vector, epf, mesh, area, clock))
}

fn precision_key(cx: &mut Ctx, field: &str, k: &str) -> Option<Precision> {
    match Precision::parse(k) {
        Some(p) => Some(p),
        None => {
            let hint = match crate::diag::did_you_mean(k, Precision::names()) {
                Some(s) => format!(
                    "did you mean `{s}`? precisions: {}",
                    Precision::names().collect::<Vec<_>>().join(", ")
                ),
                None => format!(
                    "precisions: {}",
                    Precision::names().collect::<Vec<_>>().join(", ")
                ),
            };
            let p = cx.path().field(field).key(k);
            cx.error_at(&p, format!("unknown precision `{k}`"), Some(hint));
            None
        }
    }
}

fn lower_memory(cx: &mut Ctx, m: &MemorySpec, cores: u64, dies: u32) -> Option<MemLevel> {
    let cap = cx.positive("capacity", &m.capacity, D::Bytes);
    let bw = cx.positive("bandwidth", &m.bandwidth, D::Bandwidth);
    let lat = m
        .latency
        .as_ref()
        .and_then(|q| cx.non_negative("latency", q, D::Time));
    let e = m
        .energy_per_byte
        .as_ref()
        .and_then(|q| cx.non_negative("energy_per_byte", q, D::EnergyPerByte));
    let compute = m
        .compute
        .as_ref()
        .and_then(|q| cx.positive("compute", q, D::FlopRate));
    let instances = match m.attach {
        Attach::Core => cores as f64,
        Attach::Die => dies as f64,
        _ => 1.0,
    };
    Some(MemLevel {
        name: m.name.clone(),
        kind: m.kind,
        capacity: cap? * instances,
        bandwidth: bw? * instances,
        latency: lat.unwrap_or(0.0),
        energy_per_byte: e.unwrap_or(0.0),
        cache: m.kind == MemoryKind::Cache,
        compute,
    })
}

fn lower_node(cx: &mut Ctx, n: &Located<NodeSpec>) -> Option<Node> {
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
        cx.leave();
        tdp.map(|t| t * h.cpus as f64)
    });
    let (nic_count, nic_bw, nic_power) = match &s.nics {
        Some(nn) => {
            cx.enter_field("nics", nn.source.as_ref());
            let bw = cx.positive("bandwidth", &nn.bandwidth, D::Bandwidth);
            let p = nn
                .power
                .as_ref()
                .and_then(|q| cx.non_negative("power", q, D::Power));
            cx.leave();
            (
                nn.count,
                bw.unwrap_or(0.0) * nn.count as f64,
                p.unwrap_or(0.0) * nn.count as f64,
            )
        }
        None => (0, 0.0, 0.0),
    };
    let other = s
        .other_power
        .as_ref()
        .and_then(|q| cx.non_negative("other_power", q, D::Power));
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
    cx.leave();
    Some(Node {
        name: s.name.clone(),
        devices: devices? as u32,
        host_power: host.unwrap_or(0.0),
        nic_count,
        nic_bandwidth: nic_bw,
        nic_power,
        other_power: other.unwrap_or(0.0),
        memory,
        power_limit: limit,
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
    let (sc, sp) = match &s.switches {
        Some(sw) => {
            cx.enter_field("switches", sw.source.as_ref());
            let p = cx.non_negative("power", &sw.power, D::Power);
            cx.leave();
            (sw.count, p.unwrap_or(0.0))
        }
        None => (0, 0.0),
    };
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
        latency: lat?,
        in_network_reduction: s.in_network_reduction,
        energy_per_byte: e.unwrap_or(0.0),
        switch_count: sc,
        switch_power: sp,
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
        if o < 1.0 {
            cx.error(
                "oversubscription",
                format!("`oversubscription` must be at least 1, found {o}"),
                Some("1 is a non-blocking fabric; 2 means half the uplink bandwidth".into()),
            );
        }
    }
    let e = s
        .energy_per_bit
        .as_ref()
        .and_then(|q| cx.non_negative("energy_per_bit", q, D::EnergyPerByte));
    let (sc, sp) = match &s.switches {
        Some(sw) => {
            cx.enter_field("switches", sw.source.as_ref());
            let p = cx.non_negative("power", &sw.power, D::Power);
            cx.leave();
            (sw.count, p.unwrap_or(0.0))
        }
        None => (0, 0.0),
    };
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
    })
}

/// Errors only (warnings dropped), for callers that treat any error as fatal.
pub fn errors(diags: &[Diagnostic]) -> impl Iterator<Item = &Diagnostic> {
    diags.iter().filter(|d| d.severity == Severity::Error)
}

/// A file map for tests and in-memory use.
#[derive(Default)]
pub struct MemFs(pub std::collections::BTreeMap<String, Vec<u8>>);

impl Fs for MemFs {
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        self.0
            .get(path)
            .cloned()
            .ok_or_else(|| "no such file".to_string())
    }
}

/// Files of a system, for rendering diagnostics.
pub fn source_of<'a>(files: &'a Files, name: &str) -> Option<&'a str> {
    files.text_of(name)
}

/// Check a part file (`Device`, `Die` or `Node`) on its own.
pub fn check_part(name: &str, kind: &str, fs: &dyn Fs) -> (Files, Vec<Diagnostic>) {
    let mut r = Resolver::new(fs);
    let mut diags = Vec::new();
    match kind {
        "Device" => {
            if let Some((d, id)) = r.load_file::<DeviceRef>(name) {
                if let Some(dev) = r.resolve(d, id, Path::root()) {
                    let die = r.resolve(dev.spec.die.clone(), dev.file, dev.path.field("die"));
                    diags.append(&mut r.diagnostics);
                    if let Some(die) = die {
                        let mut cx = Ctx::new(&r.files, id);
                        lower_device(&mut cx, &dev, &die);
                        diags.extend(cx.diags);
                    }
                }
            }
        }
        "Die" => {
            if let Some((d, id)) = r.load_file::<DieRef>(name) {
                if let Some(die) = r.resolve(d, id, Path::root()) {
                    diags.append(&mut r.diagnostics);
                    let mut cx = Ctx::new(&r.files, id);
                    lower_die(&mut cx, &die);
                    diags.extend(cx.diags);
                }
            }
        }
        _ => {
            if let Some((d, id)) = r.load_file::<NodeRef>(name) {
                if let Some(n) = r.resolve(d, id, Path::root()) {
                    diags.append(&mut r.diagnostics);
                    let mut cx = Ctx::new(&r.files, id);
                    lower_node(&mut cx, &n);
                    diags.extend(cx.diags);
                }
            }
        }
    }
    diags.append(&mut r.diagnostics);
    (r.files, diags)
}
