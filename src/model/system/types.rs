//! The validated system's types: the device, its memory levels and mesh, the node, the scale-up
//! and scale-out networks, the weight store, power parts and DVFS, with what they add up to. A
//! leaf, so that lowering (`lower.rs`, `device.rs`, `parts.rs`) builds them without importing
//! `system/mod.rs`, which re-exports them beside the loaders.

use super::software::Software;
use crate::diag::{Diagnostic, Path, Severity};
use crate::model::precision::{Precision, NPREC};
use crate::spec::arch::*;
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
    /// How the vendor's software runs it (`--execution free` clears it).
    pub execution: super::execution::Execution,
    /// The software stack the run executes on (a case's `run.software`, `--software`): its
    /// per-step costs. `None`: no fixed costs beyond the modelled work.
    pub software: Option<Software>,
    pub pue: f64,
    pub power_limit: Option<f64>,
    /// What the system costs and emits ([`super::cost::Economics`]; defaults where no `cost`).
    pub economics: super::cost::Economics,
    /// Failure rates and restart cost (`model::reliability`): with them a training estimate
    /// carries its goodput.
    pub reliability: Option<crate::model::reliability::Reliability>,
    /// The storage checkpoints are written to and read from.
    pub storage: Option<crate::model::reliability::Storage>,
    /// The goodput choices of the report (checkpoint interval, stragglers): set by the front end,
    /// not figures of the file.
    pub goodput: crate::model::reliability::GoodputOptions,
    /// Which parts a power or energy figure counts (default `Facility`): a choice of the report,
    /// set by the front end (`--power-boundary`) or a validation case, not a figure of the file.
    pub power_boundary: crate::vocab::PowerBoundary,
    /// Citations of figures marked fitted (they name the validation cases they were fitted on).
    pub fitted: Vec<String>,
    /// The same, with where each is declared (for `tessera check`).
    #[serde(skip)]
    pub fitted_sources: Vec<crate::model::FittedSource>,
    /// Figures copied from another device's fit (`copied-…` keys), with where each is written.
    #[serde(skip)]
    pub copied_sources: Vec<crate::model::FittedSource>,
    /// Number of figures marked `@assumed`.
    pub assumed: usize,
    /// Its figures by where they come from: sourced, assumed, fitted, left at a default.
    pub figures: crate::model::Figures,
    /// Link energy figures the file leaves unset (that link's traffic then costs no energy),
    /// with where each link is written: `tessera check` warns about each, as it does for the
    /// device's (`Device::unset_energy`).
    #[serde(skip)]
    pub unset_energy: Vec<UnsetEnergy>,
}

impl System {
    /// Run on `sw`: its fitted figures join the system's (a case they name cannot check it).
    pub fn with_software(&mut self, sw: Software) {
        self.fitted.extend(sw.fitted.iter().cloned());
        self.software = Some(sw);
    }

    /// Where a run names no stack: the one the vendor runs `w`'s task on (the file's
    /// `execution`), if any. A stack already set (`--software`, a case's `run.software`) stays.
    pub fn on_vendor_software(&mut self, w: &crate::model::workload::Workload) {
        if self.software.is_none() {
            if let Some(sw) = self.execution.software_for(w).cloned() {
                self.with_software(sw);
            }
        }
    }

    /// `w` on this system as its vendor runs it: a serving workload at the system's serving
    /// precision, and the system on the vendor's stack for the task (where no other is set).
    pub fn as_its_vendor_runs(&mut self, w: &mut crate::model::workload::Workload) {
        self.execution.serve_at(w);
        self.on_vendor_software(w);
    }
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
    /// The device's power limit (W): its TDP as the file states it, or as a sweep or `--set`
    /// lowers it (a cap throttles the device, see [`Dvfs`]).
    pub tdp: f64,
    /// What the device's silicon draws flat out at full clock (W): the file's `full_clock_power`,
    /// else the TDP it states. Derived energy per FLOP follows it, however the limit moves.
    pub rated_tdp: f64,
    pub idle_power: f64,
    pub dvfs: Dvfs,
    pub efficiency: Efficiency,
    /// Dynamic energy per FLOP by precision (J); derived from TDP where the file gives none.
    pub energy_per_flop: [f64; NPREC],
    /// Every precision's figure derived (the file gives none): the machine then takes them
    /// against the achievable rate (see `engine::machine`).
    pub energy_per_flop_derived: bool,
    /// Per precision: the figure was derived from TDP as (TDP − idle) / peak because the file
    /// gives none for it (an assumption, recorded here so nothing downstream re-detects it).
    pub energy_per_flop_from_tdp: [bool; NPREC],
    /// Energy figures the file leaves unset (the model then takes a default or zero), with where
    /// the device is written: `tessera check` warns about each.
    #[serde(skip)]
    pub unset_energy: Vec<UnsetEnergy>,
    /// Figures the file leaves out, each taken at a default: `idle_power`,
    /// `efficiency.low_precision_matmul`, `efficiency.vector`, `dvfs`, and `energy` once per
    /// energy figure left unset.
    #[serde(skip)]
    pub defaulted: Vec<&'static str>,
    pub mesh: Option<Mesh>,
    pub die_to_die_bandwidth: Option<f64>,
    pub area: Option<f64>,
    pub clock: Option<f64>,
}

/// An energy figure a device file leaves unset, for `tessera check`'s warning.
#[derive(Debug, Clone)]
pub struct UnsetEnergy {
    /// Index into the load's `Files`, and where the device is written.
    pub file: usize,
    pub at: Path,
    /// What is missing and what the model takes instead.
    pub message: String,
    pub hint: String,
}

/// A warning for each energy figure a device leaves unset (for `tessera check`).
pub fn unset_energy_warnings(files: &crate::spec::Files, unset: &[UnsetEnergy]) -> Vec<Diagnostic> {
    unset
        .iter()
        .map(|u| {
            let mut d = files
                .at(u.file, &u.at, u.message.clone())
                .with_hint(Some(u.hint.clone()));
            d.severity = Severity::Warning;
            d
        })
        .collect()
}

/// Rated power of the parts of a system other than its devices (W, whole system), by the power
/// boundary each is counted from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerParts {
    /// Hosts, NICs and other parts of every node.
    pub node: f64,
    /// The scale-up domains' switches.
    pub scale_up_switches: f64,
    /// The scale-out network's switches.
    pub scale_out_switches: f64,
    /// The external weight store.
    pub weight_store: f64,
}

impl PowerParts {
    /// Every part together.
    pub fn overhead(&self) -> f64 {
        self.node + self.scale_up_switches + self.scale_out_switches + self.weight_store
    }
}

/// How a power cap throttles the device: clock and voltage fall together along a line from
/// (full clock, nominal voltage) to (`min_clock`, `min_voltage`), both fractions of nominal, so
/// dynamic energy per operation scales with voltage² as the clock falls (CMOS dynamic power
/// α·C·V²·f). Below `min_clock` the device cannot go.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Dvfs {
    pub min_clock: f64,
    pub min_voltage: f64,
    /// Taken from [`Dvfs::ASSUMED`] because the file gives none.
    pub assumed: bool,
}

impl Dvfs {
    /// Where a device file gives no DVFS line (an assumption, stated in docs/power.md): lowest clock
    /// 30 % of full, voltage there 65 % of nominal; data-centre GPUs expose power limits down to
    /// about 30 % of TDP (H100 SXM: 200 W of 700 W, `nvidia-smi -q -d POWER`).
    pub const ASSUMED: Dvfs = Dvfs {
        min_clock: 0.30,
        min_voltage: 0.65,
        assumed: true,
    };
}

/// Energy per byte of the tier a device's data lives in, as `engine::machine` assigns tiers:
/// the last main-memory (DRAM, HBM) level's, or the last SRAM level's on a device without one.
pub fn data_energy_per_byte(memory: &[MemLevel]) -> f64 {
    let store = |sram: bool| {
        memory
            .iter()
            .rfind(|l| !l.cache && (l.kind == crate::vocab::MemoryKind::Sram) == sram)
            .map(|l| l.energy_per_byte)
    };
    store(false).or_else(|| store(true)).unwrap_or(0.0)
}

/// No vector figure: elementwise work runs at a sixteenth of the matrix rate (an assumption: on
/// GPUs the vector rate is 1/16-1/30 of the tensor rate).
pub const VECTOR_FROM_MATRIX: f64 = 16.0;

/// Where a device's vector rate for a precision comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VectorSource {
    /// The vector peak of this format.
    Vector(Precision),
    /// The matrix peak of this format / [`VECTOR_FROM_MATRIX`].
    Matrix(Precision),
}

#[derive(Debug, Clone, Serialize)]
pub struct Efficiency {
    pub matmul: f64,
    pub low_precision_matmul: f64,
    /// Extra factor on `low_precision_matmul` for the backward pass's fp4 GEMMs (1 where the file
    /// gives none).
    pub fp4_backward_matmul: f64,
    /// Fraction of the device's compute an overlapped collective on the scale-up or scale-out
    /// links takes while it runs (0 where the file gives none).
    pub collective_compute_share: f64,
    pub vector: f64,
    pub memory: f64,
    pub network: f64,
    pub kernel_overhead: f64,
    /// How serving launches a decoder layer by default on this device.
    pub kernels: crate::vocab::Kernels,
    /// Output tiles (rows, columns) its GEMM library chooses among, spread over the device's
    /// `cores`; empty: matrix products are taken at full occupancy whatever their size.
    pub tiles: Vec<(u32, u32)>,
    /// Attention kernels' published rates on this device (`attention`); a software stack picks
    /// one by name.
    pub attention: Vec<super::attention::AttentionKernel>,
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

impl Mesh {
    /// Cores along its two sides (columns, rows); a side the file leaves out counts one.
    pub fn sides(&self) -> (u64, u64) {
        let side = |i: usize| self.dims.get(i).copied().unwrap_or(1);
        (side(0), side(1))
    }

    /// Cores along a side of the largest square region it holds of its whole count: the whole
    /// device's cores as one square, no wider than the mesh (how a product spread over the whole
    /// device is costed: training and operator graphs on a wafer).
    pub fn square_side(&self) -> f64 {
        let (x, y) = self.sides();
        let (x, y) = (x as f64, y as f64);
        (x * y).sqrt().min(x.min(y))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Node {
    pub name: String,
    pub devices: u32,
    /// Ratings (W, per node): CPUs at their TDP, NICs and other parts at their stated power.
    pub host_power: f64,
    pub nic_count: u32,
    /// Per node, per direction.
    pub nic_bandwidth: f64,
    pub nic_power: f64,
    pub other_power: f64,
    /// What the same parts draw while the node runs (W, per node): the file's `cpu_running`,
    /// NIC `running` and `other_running`, each its rating where the file gives none.
    pub host_running: f64,
    pub nic_running: f64,
    pub other_running: f64,
    pub memory: Vec<MemLevel>,
    /// Each device's link to that memory, if the file declares one.
    pub host_link: Option<HostLink>,
    pub power_limit: Option<f64>,
}

/// A device's link to its node's host memory (where activations are offloaded).
#[derive(Debug, Clone, Serialize)]
pub struct HostLink {
    pub name: String,
    /// Per device, per direction: the link's share, bounded by the device's share of the host
    /// memory's bandwidth.
    pub bandwidth: f64,
    pub latency: f64,
    /// J per byte moved over it (the file writes it per bit; 0 where it gives none).
    pub energy_per_byte: f64,
}

impl Node {
    /// Host memory per device (B): the node's memory shared evenly by its devices.
    pub fn host_capacity(&self) -> f64 {
        self.memory.iter().map(|l| l.capacity).sum::<f64>() / self.devices.max(1) as f64
    }

    /// Host memory bandwidth per device (B/s): the node's memory bandwidth shared evenly by its
    /// devices.
    pub fn host_memory_bandwidth(&self) -> f64 {
        self.memory.iter().map(|l| l.bandwidth).sum::<f64>() / self.devices.max(1) as f64
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ScaleUp {
    pub name: String,
    pub topology: ScaleUpTopology,
    pub size: u64,
    pub dims: Vec<u64>,
    /// Per device, per direction.
    pub bandwidth: f64,
    /// The file counts `bandwidth` in both directions (the model halved it).
    pub counted_both_directions: bool,
    pub latency: f64,
    pub in_network_reduction: bool,
    /// J per byte sent (the file writes it per bit; units convert it).
    pub energy_per_byte: f64,
    pub switch_count: u64,
    /// Rating per switch (W).
    pub switch_power: f64,
    /// What each switch draws under the run's traffic (W; its rating where the file gives none).
    pub switch_running: f64,
    /// What one domain (its rack) may draw, all its parts together (W).
    pub power_limit: Option<f64>,
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
    /// Rating per switch (W).
    pub switch_power: f64,
    /// What each switch draws under the run's traffic (W; its rating where the file gives none).
    pub switch_running: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct WeightStore {
    pub name: String,
    pub capacity: f64,
    /// Per device, per direction.
    pub bandwidth: f64,
    pub latency: f64,
    pub power: f64,
    /// Compute and memory bandwidth of the whole store for the optimizer update it runs inside
    /// (FLOP/s, B/s; 0 = it runs none: the update runs on the devices).
    pub compute: f64,
    pub memory_bandwidth: f64,
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

    /// Rated power of everything but the accelerators, whole system (W): hosts, NICs, other node
    /// parts, switches, weight store, each at its rating.
    pub fn overhead_power(&self) -> f64 {
        self.rated_parts().overhead()
    }

    /// What every part but the devices draws while the system runs (W, whole system): each part's
    /// running figure, its rating where the file gives none. This is what an estimate counts.
    pub fn power_parts(&self) -> PowerParts {
        self.parts(true)
    }

    /// The power of every part but the devices, at its rating (W, whole system): what a node or
    /// facility must be provisioned for (`show`, `audit`'s upper bound, the budget checks).
    pub fn rated_parts(&self) -> PowerParts {
        self.parts(false)
    }

    fn parts(&self, running: bool) -> PowerParts {
        let n = self.nodes as f64;
        let node = if running {
            self.node.host_running + self.node.nic_running + self.node.other_running
        } else {
            self.node.host_power + self.node.nic_power + self.node.other_power
        };
        let pick = |rating: f64, run: f64| if running { run } else { rating };
        PowerParts {
            node: node * n,
            scale_up_switches: self
                .scale_up
                .as_ref()
                .map(|s| {
                    s.switch_count as f64
                        * pick(s.switch_power, s.switch_running)
                        * self.domains() as f64
                })
                .unwrap_or(0.0),
            scale_out_switches: self
                .scale_out
                .as_ref()
                .map(|s| s.switch_count as f64 * pick(s.switch_power, s.switch_running))
                .unwrap_or(0.0),
            weight_store: self.weight_store.as_ref().map(|w| w.power).unwrap_or(0.0),
        }
    }

    /// The per-device share of the power limits the file declares (W; 0 = none): a node's
    /// `power_limit` less what its other parts draw over its devices, and the facility's
    /// `power_limit` (IT power) less what every non-device part draws over all devices. A device
    /// demanding more is throttled.
    pub fn power_cap(&self) -> f64 {
        let mut cap = f64::INFINITY;
        let node_other = self.node.host_running + self.node.nic_running + self.node.other_running;
        if let Some(lim) = self.node.power_limit {
            cap = cap.min((lim - node_other) / self.node.devices as f64);
        }
        if let Some((lim, other, size)) = self.domain_budget(true) {
            cap = cap.min((lim - other) / size);
        }
        if let Some(lim) = self.power_limit {
            cap = cap.min((lim - self.power_parts().overhead()) / self.devices as f64);
        }
        if cap.is_finite() {
            cap.max(0.0)
        } else {
            0.0
        }
    }

    /// A scale-up domain's `power_limit` with what its other parts draw (its nodes' hosts, NICs
    /// and other parts, its switches; running figures, or ratings with `running: false`) and
    /// its device count: `(limit, other, devices)`, W.
    pub fn domain_budget(&self, running: bool) -> Option<(f64, f64, f64)> {
        let su = self.scale_up.as_ref()?;
        let lim = su.power_limit?;
        let size = su.size as f64;
        let nodes = size / (self.node.devices as f64).max(1.0);
        let (node, switch) = if running {
            (
                self.node.host_running + self.node.nic_running + self.node.other_running,
                su.switch_running,
            )
        } else {
            (
                self.node.host_power + self.node.nic_power + self.node.other_power,
                su.switch_power,
            )
        };
        Some((lim, nodes * node + su.switch_count as f64 * switch, size))
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
    /// Some precision's energy per FLOP is derived from power (the file states none for it), so
    /// the full-clock power (`rated_tdp`) moves it; otherwise that figure moves nothing.
    pub fn energy_follows_power(&self) -> bool {
        self.energy_per_flop_from_tdp.contains(&true)
    }
    /// The device is a mesh of more than one core (a wafer, a tile of cores), whose serving
    /// phases take core `regions` rather than pools of devices.
    pub fn has_mesh(&self) -> bool {
        self.mesh
            .as_ref()
            .is_some_and(|ms| ms.dims.iter().product::<u64>() > 1)
    }
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
        match self.vector_source(p) {
            Some(VectorSource::Vector(f)) => self.vector_peak[f.index()],
            Some(VectorSource::Matrix(f)) => self.matrix_peak[f.index()] / VECTOR_FROM_MATRIX,
            None => self.matmul_rate(p).0 / VECTOR_FROM_MATRIX,
        }
    }
    /// Which peak the vector rate for `p` comes from (`None`: no rate, or one the matrix
    /// fallback takes from a vector peak of another format).
    pub fn vector_source(&self, p: Precision) -> Option<VectorSource> {
        for f in p.fallbacks() {
            if self.vector_peak[f.index()] > 0.0 {
                return Some(VectorSource::Vector(*f));
            }
        }
        let (r, f) = self.matmul_rate(p);
        (r > 0.0 && self.matrix_peak[f.index()] > 0.0).then_some(VectorSource::Matrix(f))
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
