//! A system's economics, validated and in SI (USD, seconds, joules, kg CO2e, m³): capital per
//! part, the amortisation period and utilisation, the energy price, grid carbon intensity and
//! on-site and off-site water intensities (with sourced defaults where a file gives none), a
//! published rental price, embodied carbon. A leaf: lowering
//! builds it, `engine::cost` prices an estimate with it, `--set cost.<field>` edits it.

use crate::model::Ctx;
use crate::spec::cost::CostSpec;
use crate::units::Dimension as D;
use serde::Serialize;

/// The energy price an estimate uses where the system file gives none (USD/J): the average
/// retail price of electricity to US industrial customers in 2023, 8.06 ¢/kWh.
pub const DEFAULT_ENERGY_PRICE: f64 = 0.0806 / 3.6e6;
/// Where [`DEFAULT_ENERGY_PRICE`] comes from.
pub const DEFAULT_ENERGY_PRICE_SOURCE: &str = "US EIA, average retail price of electricity to industrial customers, 2023: 8.06 cents/kWh (EIA Electric Power Annual, as charted by Statista, 'Average retail electricity price for industrial consumers in the United States 1970-2023')";
/// The grid intensity an estimate uses where the system file gives none (kg CO2e per J): the
/// US utility-scale generation average of 2023, 1.53 Gt CO2 over 4.18 PWh = 0.366 kg/kWh.
pub const DEFAULT_GRID_INTENSITY: f64 = 0.366 / 3.6e6;
/// Where [`DEFAULT_GRID_INTENSITY`] comes from.
pub const DEFAULT_GRID_SOURCE: &str = "US EIA FAQ 'How much carbon dioxide is produced per kilowatthour of U.S. electricity generation?': 2023, 4.18 trillion kWh and 1.53 billion metric tons of CO2, about 0.81 lb (0.366 kg) per kWh";

/// The on-site water usage effectiveness an estimate uses where the system file gives none (m³
/// per J of IT energy): Li et al.'s U.S. average, 0.55 L/kWh.
pub const DEFAULT_WUE: f64 = 0.55e-3 / 3.6e6;
/// Where [`DEFAULT_WUE`] comes from.
pub const DEFAULT_WUE_SOURCE: &str = "P. Li, J. Yang, M. A. Islam, S. Ren, 'Making AI Less \"Thirsty\"' (arXiv 2304.03271, 2023), Table 1, U.S. average on-site WUE 0.55 L/kWh (checked against its abstract's 700,000 L evaporated training GPT-3: 1,287 MWh x 0.55 L/kWh = 708,000 L)";
/// The grid's water intensity an estimate uses where the system file gives none (m³ per J of
/// electricity drawn): Li et al.'s U.S. average electricity water intensity factor, 3.14 L/kWh.
pub const DEFAULT_WATER_INTENSITY: f64 = 3.142e-3 / 3.6e6;
/// Where [`DEFAULT_WATER_INTENSITY`] comes from.
pub const DEFAULT_WATER_SOURCE: &str = "P. Li, J. Yang, M. A. Islam, S. Ren, 'Making AI Less \"Thirsty\"' (arXiv 2304.03271, 2023), Table 1, U.S. average off-site electricity water intensity factor 3.142 L/kWh (checked: with its PUE 1.17 and the on-site 0.71 ML it gives the 5.4 ML its GPT-3 estimate is quoted at)";

/// A system's cost and carbon figures (SI: USD, s, USD/J, USD/s, USD/W, kg, kg/J).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Economics {
    /// Capital of one device.
    pub device_usd: Option<f64>,
    /// Capital of one node beyond its devices.
    pub node_usd: Option<f64>,
    /// Capital of one scale-up domain beyond its nodes.
    pub rack_usd: Option<f64>,
    /// The network's capital as a share of devices, nodes and racks (0 where not given).
    pub network_share: f64,
    /// Facility capital per watt of rated IT power (0 where not given).
    pub facility_usd_per_w: f64,
    /// Amortisation period (s).
    pub life_s: Option<f64>,
    /// Share of that period the hardware does paid work.
    pub utilization: Option<f64>,
    /// Energy price at the power boundary (USD/J).
    pub energy_price: f64,
    /// The energy price is tessera's default ([`DEFAULT_ENERGY_PRICE`]), not the file's.
    pub energy_price_default: bool,
    /// Published rental price per device (USD/s).
    pub rental_usd_per_s: Option<f64>,
    /// Grid carbon intensity (kg CO2e per J).
    pub grid_intensity: f64,
    /// The grid intensity is tessera's default ([`DEFAULT_GRID_INTENSITY`]).
    pub grid_default: bool,
    /// On-site water per unit of IT energy (m³/J).
    pub wue: f64,
    /// The WUE is tessera's default ([`DEFAULT_WUE`]).
    pub wue_default: bool,
    /// Off-site water per unit of electricity drawn from the grid (m³/J).
    pub water_intensity: f64,
    /// The grid's water intensity is tessera's default ([`DEFAULT_WATER_INTENSITY`]).
    pub water_default: bool,
    /// Embodied carbon of one device (kg CO2e).
    pub embodied_device_kg: Option<f64>,
    /// Embodied carbon of one node beyond its devices (kg CO2e).
    pub embodied_node_kg: Option<f64>,
}

impl Default for Economics {
    /// No figures: the defaults for energy price and grid intensity, cost unknown.
    fn default() -> Economics {
        Economics {
            device_usd: None,
            node_usd: None,
            rack_usd: None,
            network_share: 0.0,
            facility_usd_per_w: 0.0,
            life_s: None,
            utilization: None,
            energy_price: DEFAULT_ENERGY_PRICE,
            energy_price_default: true,
            rental_usd_per_s: None,
            grid_intensity: DEFAULT_GRID_INTENSITY,
            grid_default: true,
            wue: DEFAULT_WUE,
            wue_default: true,
            water_intensity: DEFAULT_WATER_INTENSITY,
            water_default: true,
            embodied_device_kg: None,
            embodied_node_kg: None,
        }
    }
}

impl Economics {
    /// Some capital figure is given.
    pub fn has_capital(&self) -> bool {
        self.device_usd.is_some() || self.node_usd.is_some() || self.rack_usd.is_some()
    }
    /// Some embodied-carbon figure is given.
    pub fn has_embodied(&self) -> bool {
        self.embodied_device_kg.is_some() || self.embodied_node_kg.is_some()
    }
    /// The seconds of paid work the hardware is written off over (life × utilisation).
    pub fn paid_seconds(&self) -> Option<f64> {
        Some(self.life_s? * self.utilization?)
    }
}

/// Paths `--set cost.<field>` takes, with the dimension of each.
pub const SET_FIELDS: [(&str, D); 14] = [
    ("device", D::Money),
    ("node", D::Money),
    ("rack", D::Money),
    ("network", D::Ratio),
    ("facility", D::MoneyPerPower),
    ("life", D::Time),
    ("utilization", D::Ratio),
    ("energy_price", D::MoneyPerEnergy),
    ("rental", D::MoneyPerTime),
    ("grid_intensity", D::CarbonIntensity),
    ("wue", D::WaterIntensity),
    ("water_intensity", D::WaterIntensity),
    ("embodied_device", D::Mass),
    ("embodied_node", D::Mass),
];

/// Set `cost.<field>` to `text` (a quantity with its unit): `Err` with a message and a hint for
/// an unknown field, a value that does not parse or one out of bounds.
pub fn set_field(
    e: &mut Economics,
    field: &str,
    text: &str,
) -> Result<(), (String, Option<String>)> {
    let names: Vec<&str> = SET_FIELDS.iter().map(|(n, _)| *n).collect();
    let Some(&(_, dim)) = SET_FIELDS.iter().find(|(n, _)| *n == field) else {
        let hint = match crate::diag::did_you_mean(field, names.iter().copied()) {
            Some(s) => format!("did you mean `cost.{s}`? cost fields: {}", names.join(", ")),
            None => format!("cost fields: {}", names.join(", ")),
        };
        return Err((format!("unknown cost field `cost.{field}`"), Some(hint)));
    };
    let v = crate::units::parse(text, dim)
        .map_err(|u| (format!("`cost.{field}`: {}", u.message), u.hint))?
        .value;
    check(field, v).map_err(|m| (format!("`cost.{field}`: {m}"), None))?;
    match field {
        "device" => e.device_usd = Some(v),
        "node" => e.node_usd = Some(v),
        "rack" => e.rack_usd = Some(v),
        "network" => e.network_share = v,
        "facility" => e.facility_usd_per_w = v,
        "life" => e.life_s = Some(v),
        "utilization" => e.utilization = Some(v),
        "energy_price" => {
            e.energy_price = v;
            e.energy_price_default = false;
        }
        "rental" => e.rental_usd_per_s = Some(v),
        "grid_intensity" => {
            e.grid_intensity = v;
            e.grid_default = false;
        }
        "wue" => {
            e.wue = v;
            e.wue_default = false;
        }
        "water_intensity" => {
            e.water_intensity = v;
            e.water_default = false;
        }
        "embodied_device" => e.embodied_device_kg = Some(v),
        _ => e.embodied_node_kg = Some(v),
    }
    Ok(())
}

/// The bound of each field: life positive, utilisation a fraction in (0, 1], every other figure
/// finite and ≥ 0.
fn check(field: &str, v: f64) -> Result<(), String> {
    match field {
        "life" if v <= 0.0 => Err("the amortisation period must be greater than zero".into()),
        "utilization" if !(v > 0.0 && v <= 1.0) => {
            Err(format!("utilisation must be in (0, 100 %], found {v}"))
        }
        _ if v < 0.0 || !v.is_finite() => Err(format!("must be a finite figure ≥ 0, found {v}")),
        _ => Ok(()),
    }
}

/// Lower a system file's `cost` block (`None`: the defaults). Capital needs its amortisation
/// period and utilisation: a file that gives one without the others is an error, located.
pub(super) fn lower_cost(cx: &mut Ctx, spec: Option<&CostSpec>) -> Economics {
    let mut e = Economics::default();
    let Some(s) = spec else {
        return e;
    };
    cx.enter_field("cost", s.source.as_ref());
    let q = |cx: &mut Ctx, field: &str, q: &Option<crate::spec::Q>, dim: D| -> Option<f64> {
        let q = q.as_ref()?;
        let v = cx.q(field, q, dim)?;
        match check(field, v) {
            Ok(()) => Some(v),
            Err(m) => {
                cx.error(field, format!("`{field}`: {m}"), None);
                None
            }
        }
    };
    e.device_usd = q(cx, "device", &s.device, D::Money);
    e.node_usd = q(cx, "node", &s.node, D::Money);
    e.rack_usd = q(cx, "rack", &s.rack, D::Money);
    e.network_share = q(cx, "network", &s.network, D::Ratio).unwrap_or(0.0);
    e.facility_usd_per_w = q(cx, "facility", &s.facility, D::MoneyPerPower).unwrap_or(0.0);
    e.life_s = q(cx, "life", &s.life, D::Time);
    e.utilization = q(cx, "utilization", &s.utilization, D::Ratio);
    if let Some(p) = q(cx, "energy_price", &s.energy_price, D::MoneyPerEnergy) {
        e.energy_price = p;
        e.energy_price_default = false;
    }
    e.rental_usd_per_s = q(cx, "rental", &s.rental, D::MoneyPerTime);
    if let Some(g) = q(cx, "grid_intensity", &s.grid_intensity, D::CarbonIntensity) {
        e.grid_intensity = g;
        e.grid_default = false;
    }
    if let Some(w) = q(cx, "wue", &s.wue, D::WaterIntensity) {
        e.wue = w;
        e.wue_default = false;
    }
    if let Some(w) = q(cx, "water_intensity", &s.water_intensity, D::WaterIntensity) {
        e.water_intensity = w;
        e.water_default = false;
    }
    e.embodied_device_kg = q(cx, "embodied_device", &s.embodied_device, D::Mass);
    e.embodied_node_kg = q(cx, "embodied_node", &s.embodied_node, D::Mass);
    let amortised = e.has_capital() || e.has_embodied();
    if amortised && s.life.is_none() {
        cx.error(
            "",
            "capital or embodied carbon is given without the period it is written off over",
            Some("add `life: \"5 years @source\"` (or `@assumed`) to `cost`".into()),
        );
    }
    if amortised && s.utilization.is_none() {
        cx.error(
            "",
            "capital or embodied carbon is given without the share of its life the hardware works",
            Some("add `utilization: \"80 % @source\"` (or `@assumed`) to `cost`".into()),
        );
    }
    cx.leave();
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_field_parses_money_and_checks_bounds() {
        let mut e = Economics::default();
        set_field(&mut e, "device", "$30k").unwrap();
        assert_eq!(e.device_usd, Some(30e3));
        set_field(&mut e, "energy_price", "$0.10/kWh").unwrap();
        assert!((e.energy_price * 3.6e6 - 0.10).abs() < 1e-12);
        assert!(!e.energy_price_default);
        set_field(&mut e, "grid_intensity", "57 gCO2e/kWh").unwrap();
        assert!((e.grid_intensity * 3.6e6 - 0.057).abs() < 1e-12);
        let (m, _) = set_field(&mut e, "utilization", "120 %").unwrap_err();
        assert!(m.contains("(0, 100 %]"), "{m}");
        let (m, h) = set_field(&mut e, "devise", "$1").unwrap_err();
        assert!(m.contains("unknown cost field"), "{m}");
        assert!(h.unwrap().contains("cost.device"));
        let (m, _) = set_field(&mut e, "device", "30 kW").unwrap_err();
        assert!(m.contains("an amount of money"), "{m}");
    }

    #[test]
    fn set_field_takes_both_water_intensities() {
        let mut e = Economics::default();
        assert!(e.wue_default && e.water_default);
        set_field(&mut e, "wue", "0.2 L/kWh").unwrap();
        assert!((e.wue * 3.6e6 * 1e3 - 0.2).abs() < 1e-12);
        assert!(!e.wue_default);
        set_field(&mut e, "water_intensity", "1.8 m3/MWh").unwrap();
        assert!((e.water_intensity * 3.6e6 * 1e3 - 1.8).abs() < 1e-12);
        assert!(!e.water_default);
        let (m, _) = set_field(&mut e, "wue", "0.4 kg/kWh").unwrap_err();
        assert!(m.contains("a water intensity"), "{m}");
        let (m, _) = set_field(&mut e, "water_intensity", "-1 L/kWh").unwrap_err();
        assert!(m.contains("≥ 0"), "{m}");
    }
}
