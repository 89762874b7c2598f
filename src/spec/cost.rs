//! File-shaped cost and carbon figures of a system (`cost: (...)` in an architecture file): what
//! the hardware costs to buy or rent, how long it is written off over, what its energy costs and
//! what its electricity and its manufacture emit. Apart from `arch.rs` so that the economics of a
//! system stay one block an author can add without touching its physics.

use super::format::Q;
use serde::Deserialize;

/// A system's economics. Every figure is optional; a system whose capital figures are absent
/// reports its cost as unknown (with the reason), never 0.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostSpec {
    /// Capital cost of one accelerator device (`"$30k @source"`).
    #[serde(default)]
    pub device: Option<Q>,
    /// Capital cost of one node beyond its devices (hosts, NICs, chassis, power supplies).
    #[serde(default)]
    pub node: Option<Q>,
    /// Capital cost of one scale-up domain beyond its nodes (an NVL72 rack's switch trays, power
    /// shelves and cooling), or of the whole rack where no finer split is published.
    #[serde(default)]
    pub rack: Option<Q>,
    /// The scale-out network's capital (NICs' share, switches, optics, cables) as a share of the
    /// devices', nodes' and racks' (`"15 %"`).
    #[serde(default)]
    pub network: Option<Q>,
    /// Capital cost of the data-centre building, power and cooling per watt of rated IT power
    /// (`"$10M/MW"`).
    #[serde(default)]
    pub facility: Option<Q>,
    /// The period the hardware is written off over (`"5 years"`).
    #[serde(default)]
    pub life: Option<Q>,
    /// The share of that period the hardware does paid work (`"80 %"`).
    #[serde(default)]
    pub utilization: Option<Q>,
    /// The price of energy at the estimate's power boundary (`"0.08 $/kWh"`); a sourced default
    /// where absent.
    #[serde(default)]
    pub energy_price: Option<Q>,
    /// A published rental price per device-hour (`"$2.99/h"`).
    #[serde(default)]
    pub rental: Option<Q>,
    /// The grid's carbon intensity (`"0.37 kg/kWh"`); a sourced default where absent.
    #[serde(default)]
    pub grid_intensity: Option<Q>,
    /// On-site water: the facility's water usage effectiveness, water evaporated for cooling per
    /// unit of IT energy (`"0.55 L/kWh"`); a sourced default where absent.
    #[serde(default)]
    pub wue: Option<Q>,
    /// Off-site water: the grid's water intensity, water consumed generating a unit of the
    /// electricity drawn (`"3.14 L/kWh"`); a sourced default where absent.
    #[serde(default)]
    pub water_intensity: Option<Q>,
    /// Embodied (manufacturing) carbon of one device (`"150 kg"`).
    #[serde(default)]
    pub embodied_device: Option<Q>,
    /// Embodied carbon of one node beyond its devices.
    #[serde(default)]
    pub embodied_node: Option<Q>,
    #[serde(default)]
    pub source: Option<String>,
}
