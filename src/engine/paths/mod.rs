//! Parameter paths a sweep may vary, mapped onto the machine vector.
//!
//! A path names a number of the architecture the way its file does (`scale_up.bandwidth` as
//! counted in the file, `scale_out.bandwidth` before oversubscription, `energy_per_bit` written per
//! bit and held per byte)
//! or, under `device.`, per device as `tessera show` reports it (peaks of all dies together).
//! Each path resolves to the machine-table slots it sets (the table in `engine/table.rs` names
//! the paths of every slot), with the same conversions `engine::machine` applies, so a point
//! equals the base system with that number edited (tested for every path of every shipped
//! architecture in `tests/it/sweep_paths.rs`). Dependent quantities move with it: a vector rate the
//! device derives from a matrix peak, and energy per FLOP the loader derived from
//! (TDP − idle) / peak, as the model records.
//!
//! Also: `machine.<field>` sets any machine-vector field directly (per device, SI), and
//! `devices` / `mapping.<dim>` are program axes (see `plan.rs`).

mod edit;
mod knob;
mod listed;
mod request;
mod resolve;

pub use edit::{derivation, derive_energy, edit_system};
pub use knob::{Knob, Op, Target};
pub use listed::{known, listed, Listed, MAPPING_AXES, WORKLOAD_FIELDS};
pub use request::{classify, free_dp, mapping_value, set_mapping, set_workload, MapVal, PathKind};
pub use resolve::resolve;
