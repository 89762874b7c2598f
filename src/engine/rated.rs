//! What a deployment must provision: the rated power of a system at its power boundary, and a
//! system resized to a number of whole nodes. Apart from the budget search so that an estimate
//! can state its rated power without depending on the search that fits budgets.

use crate::model::system::System;
use crate::vocab::PowerBoundary;

/// The rated power of `sys` at its power boundary (W): `show`'s rated power
/// ([`System::rated_power`]: devices at TDP, every other part at its rating) less the parts the
/// boundary leaves out, the parts an estimate's power counts from each boundary out (`node`:
/// hosts, NICs, other node parts; `rack`: scale-up switches; `it`: the scale-out network and the
/// weight store), × the PUE at `facility`. A weight store the file deploys counts whether or not
/// the run keeps its state there (it is provisioned either way: MemoryX's share is also the
/// cluster's SwarmX and input servers). A file that states no PUE counts 1.
pub fn rated_power(sys: &System) -> f64 {
    let b = sys.power_boundary;
    let p = sys.rated_parts();
    let mut w = sys.rated_power();
    if b < PowerBoundary::It {
        w -= p.scale_out_switches + p.weight_store;
    }
    if b < PowerBoundary::Rack {
        w -= p.scale_up_switches;
    }
    if b < PowerBoundary::Node {
        w -= p.node;
    }
    if b == PowerBoundary::Facility {
        w *= sys.pue;
    }
    w
}

/// [`rated_power`] of the whole nodes that hold `devices` devices of `sys` (its switches and
/// weight store in proportion, as [`resized`] grows or shrinks them).
pub fn rated_power_of(sys: &System, devices: u64) -> f64 {
    let nodes = devices.div_ceil(u64::from(sys.node.devices.max(1))).max(1);
    if nodes == sys.nodes {
        rated_power(sys)
    } else {
        rated_power(&resized(sys, nodes))
    }
}

/// `sys` resized to `nodes` whole nodes: devices with them, scale-out switches in proportion
/// (rounded up), a facility power limit scaled with the system, and the weight store's servers
/// (their power, the update's compute and memory bandwidth) in proportion too: a store is built
/// of servers per system it feeds (MemoryX: 8.25 kW per CS system, derived from Andromeda), so
/// one system of a 64-system cluster is not charged the whole cluster's store. Its capacity
/// (an option of the store, not of the systems) stays as the file says.
pub fn resized(sys: &System, nodes: u64) -> System {
    let mut s = sys.clone();
    let k = nodes as f64 / sys.nodes.max(1) as f64;
    s.nodes = nodes;
    s.devices = nodes * sys.node.devices as u64;
    if let Some(o) = s.scale_out.as_mut() {
        o.switch_count = (o.switch_count as f64 * k).ceil() as u64;
    }
    if let Some(ws) = s.weight_store.as_mut() {
        ws.power *= k;
        ws.compute *= k;
        ws.memory_bandwidth *= k;
    }
    s.power_limit = sys.power_limit.map(|l| l * k);
    s
}
