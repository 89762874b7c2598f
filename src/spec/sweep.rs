//! File-shaped type of a sweep file (`architectures/sweeps/*.ron`): a base architecture, workload
//! and mapping, the parameters to vary by their path in the architecture, how to sample them, and
//! constraints. Paths to other files are relative to the sweep file.
//!
//! ```ron
//! Sweep(
//!     version: 1,
//!     name: "GB200 cluster: HBM and NVLink bandwidth",
//!     arch: "../gb200-cluster.ron",
//!     workload: "../../workloads/llama3.1-405b-pretrain.ron",
//!     mapping: "published",            // or "auto", or a mapping file
//!     vary: {
//!         "device.memory.HBM3e.bandwidth": "2 TB/s .. 8 TB/s step 0.5 TB/s",
//!         "scale_up.bandwidth": ["0.9 TB/s", "1.8 TB/s", "3.6 TB/s"],
//!         "devices": [1024, 2048],
//!     },
//!     sampling: Grid,                  // Random(points: N, seed: S), LatinHypercube(points: N, seed: S)
//!     constraints: (power_budget: "5 MW", memory_floor: "10 GB"),
//!     objective: "throughput",
//!     pareto: ["throughput", "power"],
//!     top: 10,
//! )
//! ```

use super::format::Q;
use serde::Deserialize;
use std::fmt;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename = "Sweep")]
pub struct SweepSpec {
    pub version: u32,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// The base architecture file.
    pub arch: String,
    pub workload: String,
    /// `"published"` (the workload's own mapping; the default), `"auto"` (every legal mapping,
    /// each its own program) or a mapping file.
    #[serde(default)]
    pub mapping: Option<String>,
    /// Parameter path → values, in the order written (the last varies fastest on a grid).
    #[serde(default)]
    pub vary: Axes,
    #[serde(default)]
    pub sampling: Option<SamplingSpec>,
    #[serde(default)]
    pub constraints: Option<ConstraintsSpec>,
    /// Metric the best points are ranked by (default `throughput`).
    #[serde(default)]
    pub objective: Option<String>,
    /// The two metrics of the Pareto front (default `["throughput", "power"]`).
    #[serde(default)]
    pub pareto: Option<Vec<String>>,
    /// How many best points to keep (default 10).
    #[serde(default)]
    pub top: Option<usize>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub enum SamplingSpec {
    Grid,
    Random { points: u64, seed: u64 },
    LatinHypercube { points: u64, seed: u64 },
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstraintsSpec {
    /// Largest average facility power of the devices used.
    #[serde(default)]
    pub power_budget: Option<Q>,
    /// A power budget the devices throttle to meet (at the sweep's power boundary): each device's
    /// power limit becomes its share of it, so points slow down instead of being filtered out.
    #[serde(default)]
    pub power_cap: Option<Q>,
    /// Memory each device must have free after the model's state and working set are placed.
    #[serde(default)]
    pub memory_floor: Option<Q>,
}

/// The values of one axis as written: a range expression (`"2 TB/s .. 8 TB/s step 0.5 TB/s"`,
/// `"1 us .. 100 us log 5"`, `"0.5 .. 0.9"`) or a list of values.
#[derive(Debug, Clone, PartialEq)]
pub enum AxisValues {
    Expr(String),
    List(Vec<Q>),
}

/// The `vary` map, in file order.
#[derive(Debug, Clone, Default)]
pub struct Axes(pub Vec<(String, AxisValues)>);

impl<'de> Deserialize<'de> for AxisValues {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = AxisValues;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a range as a string (\"2 TB/s .. 8 TB/s step 0.5 TB/s\") or a list of values",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<AxisValues, E> {
                Ok(AxisValues::Expr(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<AxisValues, E> {
                Ok(AxisValues::List(vec![Q(format!("{v}"))]))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<AxisValues, E> {
                Ok(AxisValues::List(vec![Q(v.to_string())]))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<AxisValues, E> {
                Ok(AxisValues::List(vec![Q(v.to_string())]))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<AxisValues, E> {
                Ok(AxisValues::List(vec![Q(v.to_string())]))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<AxisValues, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = seq.next_element::<Item>()? {
                    v.push(Q(x.0));
                }
                Ok(AxisValues::List(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// One list element: a quantity, a number, a bool or an identifier-like string.
struct Item(String);

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Item;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a value: a number, or a quantity with its unit as a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Item, E> {
                Ok(Item(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Item, E> {
                Ok(Item(format!("{v}")))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Item, E> {
                Ok(Item(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Item, E> {
                Ok(Item(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Item, E> {
                Ok(Item(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Axes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Axes;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map from parameter path to values, e.g. { \"device.tdp\": \"1000 W .. 1400 W step 100 W\" }")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Axes, A::Error> {
                let mut v = Vec::new();
                while let Some((k, x)) = map.next_entry::<String, AxisValues>()? {
                    v.push((k, x));
                }
                Ok(Axes(v))
            }
        }
        d.deserialize_map(V)
    }
}
