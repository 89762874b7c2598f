//! A device file's own figures, apart from its die's: its power (TDP, idle, DVFS), its
//! `efficiency` block (with the GEMM tiles), the energy per FLOP derived from the TDP where the
//! die states none, and the figures it leaves at a default. A leaf of `device`.

use crate::model::precision::{Precision, NPREC};
use crate::model::rules::{engine_efficiency, TdpRule};
use crate::model::system::types::{data_energy_per_byte, Dvfs, MemLevel, UnsetEnergy};
use crate::model::Ctx;
use crate::spec::arch::*;
use crate::spec::Located;
use crate::units::Dimension as D;

/// What [`lower_power`] reads: the power limit, the full-clock draw derived energy per FLOP
/// follows (the limit where the file gives none), the idle power and the DVFS line.
pub(super) type Power = (Option<f64>, Option<f64>, Option<f64>, Option<Dvfs>);

/// The device's power: its TDP, the draw of its silicon at full clock (its TDP where the file
/// gives none; above the TDP, full load throttles the device, below it the limit never binds),
/// its idle power (a quarter of that draw where the file gives none, and above neither) and its
/// DVFS line (an assumed one where the file gives none).
pub(super) fn lower_power(cx: &mut Ctx, s: &DeviceSpec) -> Power {
    let tdp = cx.positive("tdp", &s.tdp, D::Power);
    let full = match &s.full_clock_power {
        Some(q) => cx.positive("full_clock_power", q, D::Power),
        None => tdp,
    };
    let idle = match &s.idle_power {
        Some(q) => cx.non_negative("idle_power", q, D::Power),
        // the silicon's: a quarter of what it draws flat out
        None => full.map(|f| 0.25 * f),
    };
    // idle power is what the device draws doing nothing: below its limit and below its draw flat out
    above(
        cx,
        "idle_power",
        ("idle_power", idle),
        ("tdp", tdp),
        "idle power is what the device draws doing nothing; it is below its TDP",
    );
    if s.full_clock_power.is_some() {
        above(
            cx,
            "full_clock_power",
            ("idle_power", idle),
            ("full_clock_power", full),
            "`full_clock_power` is what the silicon draws running flat out at full clock: its \
             static power and the dynamic power of the work",
        );
    }
    let dvfs = match &s.dvfs {
        None => Some(Dvfs::ASSUMED),
        Some(v) => {
            cx.enter_field("dvfs", v.source.as_ref());
            let c = cx.fraction("min_clock", &v.min_clock);
            let u = cx.fraction("min_voltage", &v.min_voltage);
            cx.leave();
            match (c, u) {
                (Some(min_clock), Some(min_voltage)) => Some(Dvfs {
                    min_clock,
                    min_voltage,
                    assumed: false,
                }),
                _ => None,
            }
        }
    };
    (tdp, full, idle, dvfs)
}

/// An error at `field` where the power `low` is above `high` (each named as the file writes it).
fn above(
    cx: &mut Ctx,
    field: &str,
    (low_name, low): (&str, Option<f64>),
    (high_name, high): (&str, Option<f64>),
    hint: &str,
) {
    if let (Some(l), Some(h)) = (low, high) {
        if l > h {
            let w = |v| crate::units::fmt_si(v, "W");
            cx.error(
                field,
                format!("`{low_name}` ({}) is above `{high_name}` ({})", w(l), w(h)),
                Some(hint.into()),
            );
        }
    }
}

/// The `efficiency` figures of a device file as read (each `None` where absent or invalid; the
/// defaults are the caller's).
pub(super) struct EffIn {
    pub(super) matmul: Option<f64>,
    pub(super) memory: Option<f64>,
    pub(super) network: Option<f64>,
    pub(super) vector: Option<f64>,
    pub(super) lowp: Option<f64>,
    pub(super) fp4: Option<f64>,
    pub(super) comm_share: Option<f64>,
    pub(super) overhead: Option<f64>,
    pub(super) tiles: Vec<(u32, u32)>,
}

/// Read a device's `efficiency` block (`has_cores`: the die states its cores, which GEMM tiles
/// are spread over).
pub(super) fn lower_efficiency(cx: &mut Ctx, e: &EfficiencySpec, has_cores: bool) -> EffIn {
    cx.enter_field("efficiency", None);
    let matmul = cx.fraction("matmul", &e.matmul);
    let memory_eff = cx.fraction("memory", &e.memory);
    let network = cx.fraction("network", &e.network);
    let vector = e.vector.as_ref().and_then(|q| cx.fraction("vector", q));
    let lowp = e
        .low_precision_matmul
        .as_ref()
        .and_then(|q| cx.fraction("low_precision_matmul", q));
    let fp4 = e
        .fp4_backward_matmul
        .as_ref()
        .and_then(|q| cx.fraction("fp4_backward_matmul", q));
    let comm_share = e.collective_compute_share.as_ref().and_then(|q| {
        cx.share(
            "collective_compute_share",
            q,
            crate::model::bounds::COLLECTIVE_SHARE_HINT,
        )
    });
    let overhead = e
        .kernel_overhead
        .as_ref()
        .and_then(|q| cx.non_negative("kernel_overhead", q, D::Time));
    let tiles = lower_tiling(cx, e.tiling.as_ref(), has_cores);
    cx.leave();
    EffIn {
        matmul,
        memory: memory_eff,
        network,
        vector,
        lowp,
        fp4,
        comm_share,
        overhead,
        tiles,
    }
}

/// The energy per FLOP per precision: as the die states it, else derived from the TDP
/// (`rules::TdpRule`). Also whether every figure is derived, and which were.
pub(super) fn derive_energy_per_flop(
    epf: [f64; NPREC],
    (tdp, idle): (f64, f64),
    (matrix_peak, vector_peak): (&[f64; NPREC], &[f64; NPREC]),
    [matmul, lowp, vector, memory_eff]: [Option<f64>; 4],
    memory: &[MemLevel],
) -> ([f64; NPREC], bool, [bool; NPREC]) {
    let mut energy_per_flop = epf;
    let derived = energy_per_flop.iter().all(|e| *e == 0.0);
    let mut from_tdp = [false; crate::model::precision::NPREC];
    let data_energy = data_energy_per_byte(memory);
    for p in Precision::ALL {
        let i = p.index();
        if energy_per_flop[i] == 0.0 {
            // Assumption: a device running its matrix engines flat out at `p` draws its TDP:
            // at its peak, or, where every figure is derived, at its achievable rate (the
            // machine divides by the efficiency; see `engine::table::derive`).
            let rule = TdpRule {
                tdp,
                idle,
                matrix_peak: matrix_peak[i],
                vector_peak: vector_peak[i],
                efficiency: reference_efficiency(
                    matrix_peak[i] > 0.0,
                    p,
                    [matmul, lowp],
                    vector,
                    memory_eff,
                ),
                at_achievable: derived,
                data_energy,
            };
            if let Some(e) = rule.energy_per_flop(i) {
                energy_per_flop[i] = e;
                from_tdp[i] = true;
            }
        }
    }
    (energy_per_flop, derived, from_tdp)
}

/// The figures a device file leaves out: the energies it leaves unset (each with its warning)
/// and every figure taken at a default (`Figures::defaulted`, and `tessera check`'s comparison
/// with the shipped parts).
pub(super) fn unset_figures(
    d: &Located<DeviceSpec>,
    idle: f64,
    memory: &[MemLevel],
    matrix_peak: &[f64; NPREC],
) -> (Vec<UnsetEnergy>, Vec<&'static str>) {
    let s = &d.spec;
    let mut unset_energy = Vec::new();
    let mut unset = |message: String, hint: &str| {
        unset_energy.push(UnsetEnergy {
            file: d.file,
            at: d.path.clone(),
            message,
            hint: hint.into(),
        })
    };
    if s.idle_power.is_none() {
        unset(
            format!(
                "device `{}` gives no `idle_power`: its static power is taken as a quarter of its {} ({})",
                s.name,
                if s.full_clock_power.is_some() {
                    "full-clock power"
                } else {
                    "TDP"
                },
                crate::units::fmt_si(idle, "W")
            ),
            "add `idle_power` with its source (a measured idle draw), or mark a guess `@assumed`",
        );
    }
    for l in memory
        .iter()
        .filter(|l| !l.cache && l.energy_per_byte == 0.0)
    {
        unset(
            format!(
                "memory level `{}` of device `{}` gives no `energy_per_byte`: its traffic costs no energy",
                l.name, s.name
            ),
            "add `energy_per_byte` (e.g. \"3.9 pJ/bit\" for HBM2, O'Connor et al. MICRO'17) with its source, or mark a guess `@assumed`",
        );
    }
    // Figures the file leaves out, each taken at a default (`Figures::defaulted`, and
    // `tessera check`'s comparison with the shipped parts).
    let mut defaulted: Vec<&'static str> = Vec::new();
    if s.idle_power.is_none() {
        defaulted.push("idle_power");
    }
    let low_precision_peak = (0..matrix_peak.len())
        .any(|p| crate::model::rules::low_precision(p) && matrix_peak[p] > 0.0);
    if s.efficiency.low_precision_matmul.is_none() && low_precision_peak {
        defaulted.push("efficiency.low_precision_matmul");
    }
    if s.efficiency.vector.is_none() {
        defaulted.push("efficiency.vector");
    }
    if s.dvfs.is_none() {
        defaulted.push("dvfs");
    }
    let energy = unset_energy.len() - usize::from(s.idle_power.is_none());
    defaulted.extend(std::iter::repeat_n("energy", energy));
    (unset_energy, defaulted)
}

/// The achievable fraction of peak the derivation assumes at precision `p` (the machine's
/// `table::matrix_efficiency`, or the vector efficiency where the precision has no matrix rate).
fn reference_efficiency(
    matrix: bool,
    p: Precision,
    [matmul, lowp]: [Option<f64>; 2],
    vector: Option<f64>,
    memory: Option<f64>,
) -> f64 {
    engine_efficiency(
        matrix,
        matmul.unwrap_or(1.0),
        lowp.unwrap_or(1.0),
        vector.or(memory).unwrap_or(1.0),
        p.index(),
    )
}

/// The GEMM output tiles of `efficiency.tiling`: each side at least 1, at least one tile, and
/// only on a die that states its `cores` (the units the tiles are spread over).
fn lower_tiling(
    cx: &mut Ctx,
    t: Option<&crate::spec::arch::TilingSpec>,
    cores: bool,
) -> Vec<(u32, u32)> {
    let Some(t) = t else {
        return Vec::new();
    };
    cx.enter_field("tiling", t.source.as_ref());
    let mut ok = true;
    if t.tiles.is_empty() {
        cx.error(
            "tiles",
            "`tiling` lists no tile",
            Some("list the output tiles the GEMM library uses, e.g. `tiles: [(256, 128), (128, 128)]`".into()),
        );
        ok = false;
    }
    if t.tiles.iter().any(|&(r, c)| r == 0 || c == 0) {
        cx.error(
            "tiles",
            "a tile has a side of 0",
            Some("a tile is (rows, columns) of the product, each at least 1".into()),
        );
        ok = false;
    }
    if !cores {
        cx.error(
            "tiles",
            "`tiling` spreads tiles over the die's cores, but the die states no `cores`",
            Some("add `cores: N` to the die (its streaming multiprocessors or compute units per die)".into()),
        );
        ok = false;
    }
    cx.leave();
    if ok {
        t.tiles.clone()
    } else {
        Vec::new()
    }
}
