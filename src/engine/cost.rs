//! What an estimate costs and emits: the capital of what the run deploys written off over the
//! hardware's paid hours, the energy the estimate counts at its power boundary at the system's
//! energy price, the same work at a published rental price, carbon (operational from that
//! energy and the grid's intensity, embodied written off like capital) and water (on-site from
//! the IT energy and the facility's WUE, off-site from that energy and the grid's water
//! intensity). Economics, not physics:
//! every figure comes from the estimate's time, energy and devices, so the cost program stays the
//! one source of truth for the physics and both backends price alike.

use super::rated::rated_power_of;
use crate::model::system::System;
use crate::vocab::PowerBoundary;
use serde::Serialize;

/// Tokens (or samples) a per-unit cost is stated for when the run has no training target.
pub const UNITS_PER_PRICE: f64 = 1e6;

/// An estimate's cost and carbon per unit of work (`per`), with its parts. Keys of the
/// `--format json` contract, units in the names.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CostReport {
    /// The unit of work the figures are per: `run` (a training run to its target) or `1M
    /// tokens` (`1M samples`): a million units served or trained.
    pub per: String,
    /// Wall-clock seconds of the deployment the unit takes.
    pub time_s: f64,
    /// Energy of the unit at the estimate's power boundary (kWh).
    pub energy_kwh: f64,
    /// Capital the run deploys: its whole nodes' devices and nodes, their share of the racks,
    /// the network's share, the facility's capital for their rated IT power (null: no capital
    /// figures).
    pub deployed_capital_usd: Option<f64>,
    /// The capital share of the unit: deployed capital over the hardware's paid seconds (life ×
    /// utilisation), times the unit's time.
    pub capital_usd: Option<f64>,
    /// The energy share of the unit: its energy at the energy price.
    pub energy_usd: f64,
    /// The same work at the published rental price per device-hour (null: none published).
    pub rented_usd: Option<f64>,
    /// The energy price used (USD/kWh).
    pub energy_price_usd_per_kwh: f64,
    /// Operational carbon: the unit's energy at the grid's intensity.
    pub operational_kg_co2e: f64,
    /// Embodied carbon written off like capital (null: no embodied figure).
    pub embodied_kg_co2e: Option<f64>,
    /// The grid intensity used (kg CO2e per kWh).
    pub grid_kg_co2e_per_kwh: f64,
    /// On-site water: the unit's IT energy (its energy at the boundary, over the PUE at the
    /// facility boundary) at the facility's WUE (litres).
    pub water_onsite_l: f64,
    /// Off-site water: the unit's energy at the boundary, as drawn from the grid, at the grid's
    /// water intensity (litres).
    pub water_offsite_l: f64,
    /// The on-site water usage effectiveness used (litres per kWh of IT energy).
    pub wue_l_per_kwh: f64,
    /// The grid's water intensity used (litres per kWh drawn).
    pub grid_water_l_per_kwh: f64,
    /// The defaults used for figures the system file does not give, each with its source.
    pub defaults: Vec<String>,
    /// Why `cost_per_unit_usd` is null (no capital figures, no amortisation period).
    pub unknown_reason: Option<String>,
    /// What `carbon_kg_co2e` leaves out (embodied carbon without a published figure).
    pub carbon_scope: String,
}

/// What pricing reads of an estimate (its figures, not the estimate: the estimate imports this
/// module for its report, and the import graph stays a tree).
pub struct Work<'a> {
    pub feasible: bool,
    pub time_to_train_s: Option<f64>,
    pub energy_j: Option<f64>,
    pub throughput_per_s: Option<f64>,
    pub energy_per_unit_j: Option<f64>,
    pub throughput_unit: &'a str,
    pub devices: u64,
}

/// What pricing gives back: the estimate's `cost_per_unit_usd`, `carbon_kg_co2e` and `cost`.
#[derive(Default)]
pub struct Priced {
    pub cost_per_unit_usd: Option<f64>,
    pub carbon_kg_co2e: Option<f64>,
    pub water_l: Option<f64>,
    pub cost: Option<CostReport>,
}

/// The unit an estimate is priced per, its time (s) and energy (J); `None` for an infeasible
/// estimate or one without throughput.
fn unit_of(e: &Work) -> Option<(String, f64, f64)> {
    if !e.feasible {
        return None;
    }
    if let (Some(t), Some(j)) = (e.time_to_train_s, e.energy_j) {
        if t > 0.0 {
            return Some(("run".into(), t, j));
        }
    }
    let rate = e.throughput_per_s.filter(|r| *r > 0.0)?;
    let per_j = e.energy_per_unit_j?;
    Some((
        format!("1M {}", e.throughput_unit),
        UNITS_PER_PRICE / rate,
        UNITS_PER_PRICE * per_j,
    ))
}

/// The whole nodes holding `devices` devices of `sys`.
fn nodes_of(sys: &System, devices: u64) -> u64 {
    devices.div_ceil(u64::from(sys.node.devices.max(1))).max(1)
}

/// The capital of the whole nodes holding `devices` devices of `sys` (USD; `None` without
/// capital figures): their devices and nodes, their share of the racks (scale-up domains), the
/// network's share of those, and the facility's capital for their rated IT power.
pub fn deployed_capital(sys: &System, devices: u64) -> Option<f64> {
    let ec = &sys.economics;
    if !ec.has_capital() {
        return None;
    }
    let nodes = nodes_of(sys, devices) as f64;
    let held = nodes * f64::from(sys.node.devices);
    let domain = sys
        .scale_up
        .as_ref()
        .map_or(f64::from(sys.node.devices), |s| s.size as f64);
    let hardware = held * ec.device_usd.unwrap_or(0.0)
        + nodes * ec.node_usd.unwrap_or(0.0)
        + held / domain.max(1.0) * ec.rack_usd.unwrap_or(0.0);
    let facility = if ec.facility_usd_per_w > 0.0 {
        let mut it = sys.clone();
        it.power_boundary = PowerBoundary::It;
        ec.facility_usd_per_w * rated_power_of(&it, devices)
    } else {
        0.0
    };
    Some(hardware * (1.0 + ec.network_share) + facility)
}

/// The embodied carbon of the whole nodes holding `devices` devices (kg CO2e; `None` without
/// a figure).
fn deployed_embodied(sys: &System, devices: u64) -> Option<f64> {
    let ec = &sys.economics;
    if !ec.has_embodied() {
        return None;
    }
    let nodes = nodes_of(sys, devices) as f64;
    Some(
        nodes * f64::from(sys.node.devices) * ec.embodied_device_kg.unwrap_or(0.0)
            + nodes * ec.embodied_node_kg.unwrap_or(0.0),
    )
}

/// Litres of water consumed on site and off site for `energy` J counted at the boundary of
/// `sys` (Li et al. 2023: on-site = IT energy × WUE, off-site = energy drawn × the grid's water
/// intensity). At the facility boundary the IT energy is the energy over the PUE; at a boundary
/// inside the IT it is the energy counted there, as carbon counts it.
pub fn water_of(sys: &System, energy: f64) -> (f64, f64) {
    let ec = &sys.economics;
    let it = match sys.power_boundary {
        PowerBoundary::Facility if sys.pue > 0.0 => energy / sys.pue,
        _ => energy,
    };
    (it * ec.wue * 1e3, energy * ec.water_intensity * 1e3)
}

/// Price the work `e` of a run on `sys`: its `cost_per_unit_usd`, `carbon_kg_co2e` and `cost`
/// (nothing for an infeasible estimate).
pub fn price(sys: &System, e: &Work) -> Priced {
    let Some((per, time, energy)) = unit_of(e) else {
        return Priced::default();
    };
    let ec = &sys.economics;
    let kwh = energy / 3.6e6;
    // the figures left at a default, each with its value, unit, precision and source
    use crate::model::system::cost as dc;
    let left = [
        (
            ec.energy_price_default,
            "energy price",
            ec.energy_price * 3.6e6,
            4,
            "$/kWh",
            dc::DEFAULT_ENERGY_PRICE_SOURCE,
        ),
        (
            ec.grid_default,
            "grid intensity",
            ec.grid_intensity * 3.6e6,
            3,
            "kg/kWh",
            dc::DEFAULT_GRID_SOURCE,
        ),
        (
            ec.wue_default,
            "on-site WUE",
            ec.wue * 3.6e9,
            2,
            "L/kWh",
            dc::DEFAULT_WUE_SOURCE,
        ),
        (
            ec.water_default,
            "grid water intensity",
            ec.water_intensity * 3.6e9,
            2,
            "L/kWh",
            dc::DEFAULT_WATER_SOURCE,
        ),
    ];
    let defaults: Vec<String> = left
        .into_iter()
        .filter(|l| l.0)
        .map(|(_, what, v, prec, unit, src)| format!("{what} {v:.prec$} {unit}: {src}"))
        .collect();
    let (onsite, offsite) = water_of(sys, energy);
    let deployed = deployed_capital(sys, e.devices);
    let paid = ec.paid_seconds();
    let capital = deployed.zip(paid).map(|(c, p)| c / p * time);
    let embodied = deployed_embodied(sys, e.devices)
        .zip(paid)
        .map(|(c, p)| c / p * time);
    let energy_usd = energy * ec.energy_price;
    let operational = energy * ec.grid_intensity;
    let unknown_reason = match (deployed, paid) {
        (Some(_), Some(_)) => None,
        (None, _) => Some(format!(
            "`{}` gives no capital cost (add `cost: (device: \"$…\", life: …, utilization: …)` to its file)",
            sys.name
        )),
        (Some(_), None) => Some("no amortisation period or utilisation".into()),
    };
    let report = CostReport {
        per,
        time_s: time,
        energy_kwh: kwh,
        deployed_capital_usd: deployed,
        capital_usd: capital,
        energy_usd,
        rented_usd: ec.rental_usd_per_s.map(|r| r * e.devices as f64 * time),
        energy_price_usd_per_kwh: ec.energy_price * 3.6e6,
        operational_kg_co2e: operational,
        embodied_kg_co2e: embodied,
        grid_kg_co2e_per_kwh: ec.grid_intensity * 3.6e6,
        water_onsite_l: onsite,
        water_offsite_l: offsite,
        wue_l_per_kwh: ec.wue * 3.6e9,
        grid_water_l_per_kwh: ec.water_intensity * 3.6e9,
        defaults,
        unknown_reason,
        carbon_scope: if embodied.is_some() {
            "operational and embodied".into()
        } else {
            "operational only (no embodied figure in the system file)".into()
        },
    };
    Priced {
        cost_per_unit_usd: capital.map(|c| c + energy_usd),
        carbon_kg_co2e: Some(operational + embodied.unwrap_or(0.0)),
        water_l: Some(onsite + offsite),
        cost: Some(report),
    }
}
