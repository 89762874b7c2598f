//! Every parameter path a sweep can vary, on every shipped architecture, must produce the machine
//! the engine would build from the same system with that number edited: `lower::machine` on the
//! edited model (plus the loader's energy-per-FLOP derivation where the file gives none). This is
//! what makes the fast path (writing axis values straight into the machine vector) trustworthy.
//! `paths::edit_system` (the model edit) is written independently of `paths::resolve` (the fast
//! path's targets); the values below come from the model, not from either.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common;
use tessera::engine::lower;
use tessera::engine::table as fields;
use tessera::model::precision::Precision;
use tessera::model::system::{load_system, System};
use tessera::sweep::paths;
use tessera::sweep::plan;
use tessera::sweep::space::{Axis, Sampling, Space, Values};

fn systems() -> Vec<(String, System)> {
    let mut v = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir("architectures")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "ron"))
        .collect();
    names.sort();
    for p in names {
        let name = p.to_string_lossy().into_owned();
        let l = load_system(&name, &common::CrateFs);
        // Files other engineers are still writing may not load; those are their tests' business.
        let Some(sys) = l.value else { continue };
        v.push((name, sys));
    }
    assert!(v.len() >= 3, "expected the shipped architectures to load");
    v
}

fn current(sys: &System, path: &str) -> Option<f64> {
    let parts: Vec<&str> = path.split('.').collect();
    let d = &sys.device;
    Some(match parts.as_slice() {
        ["device", "peak", p] => d.matrix_peak[Precision::parse(p)?.index()],
        ["device", "vector_peak", p] => d.vector_peak[Precision::parse(p)?.index()],
        ["device", "energy_per_flop", p] => d.energy_per_flop[Precision::parse(p)?.index()],
        ["device", "tdp"] => d.tdp,
        ["device", "idle_power"] => d.idle_power,
        ["device", "efficiency", e] => match *e {
            "matmul" => d.efficiency.matmul,
            "low_precision_matmul" => d.efficiency.low_precision_matmul,
            "fp4_backward_matmul" => d.efficiency.fp4_backward_matmul,
            "collective_compute_share" => d.efficiency.collective_compute_share,
            "vector" => d.efficiency.vector,
            "memory" => d.efficiency.memory,
            "network" => d.efficiency.network,
            "kernel_overhead" => d.efficiency.kernel_overhead,
            _ => return None,
        },
        ["device", "memory", rest @ ..] => {
            let name = rest[..rest.len() - 1].join(".");
            let m = d.memory.iter().find(|m| m.name == name)?;
            match rest[rest.len() - 1] {
                "capacity" => m.capacity,
                "bandwidth" => m.bandwidth,
                "energy_per_byte" => m.energy_per_byte,
                "latency" => m.latency,
                _ => return None,
            }
        }
        ["device", "mesh", w] => {
            let m = d.mesh.as_ref()?;
            match *w {
                "x" => m.dims.first().copied()? as f64,
                "y" => m.dims.get(1).copied().unwrap_or(1) as f64,
                "link_bandwidth" => m.link_bandwidth,
                "hop_latency" => m.hop_latency,
                "energy_per_bit_hop" => m.energy_per_byte_hop,
                _ => return None,
            }
        }
        ["scale_up", w] => {
            let u = sys.scale_up.as_ref()?;
            match *w {
                "bandwidth" if u.counted_both_directions => u.bandwidth * 2.0,
                "bandwidth" => u.bandwidth,
                "latency" => u.latency,
                "energy_per_bit" => u.energy_per_byte,
                "in_network_reduction" => u.in_network_reduction as u8 as f64,
                _ => return None,
            }
        }
        ["scale_out", w] => {
            let o = sys.scale_out.as_ref()?;
            match *w {
                "bandwidth" => o.bandwidth,
                "latency" => o.latency,
                "energy_per_bit" => o.energy_per_byte,
                "oversubscription" => o.oversubscription,
                "in_network_reduction" => o.in_network_reduction as u8 as f64,
                _ => return None,
            }
        }
        ["weight_store", w] => {
            let s = sys.weight_store.as_ref()?;
            match *w {
                "capacity" => s.capacity,
                "bandwidth" => s.bandwidth,
                "latency" => s.latency,
                _ => return None,
            }
        }
        ["facility", "pue"] => sys.pue,
        _ => return None,
    })
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

#[test]
fn every_path_equals_editing_the_system() {
    let mut checked = 0;
    for (name, sys) in systems() {
        let n = sys.devices;
        let base = plan::base_fields(&sys, n);
        // the precisions the loader derived from TDP, as the model records them
        let derived = (0..tessera::model::precision::NPREC)
            .filter(|&i| sys.device.energy_per_flop_from_tdp[i])
            .fold(0u32, |m, i| m | 1 << i);
        for path in paths::known(&sys) {
            let Ok(knob) = paths::resolve(&path, &sys) else {
                continue;
            };
            let Some(now) = current(&sys, &path) else {
                continue;
            };
            // A new value: flip a flag, else scale by 1.37 (from 1 when the base is 0).
            let v = if path.ends_with("in_network_reduction") {
                1.0 - now
            } else if path == "device.mesh.x" || path == "device.mesh.y" {
                // a core count
                (now * 2.0).max(1.0)
            } else if now == 0.0 {
                1.0
            } else {
                now * 1.37
            };
            let bit = |o: Option<usize>| o.map(|i| 1u32 << i).unwrap_or(0);
            let derive = if knob.derive {
                paths::derivation(&sys, bit(knob.device_energy), bit(knob.machine_energy))
            } else {
                Default::default()
            };
            let space = Space::new(
                vec![Axis {
                    path: path.clone(),
                    dimension: knob.dimension,
                    values: Values::List(vec![v]),
                    targets: knob.targets.clone(),
                }],
                Sampling::Grid,
                derive,
            )
            .unwrap();
            let fast = space.machine(&base, &[v]).0;

            let mut edited = sys.clone();
            paths::edit_system(&mut edited, &path, v).expect("editable");
            if knob.derive {
                // the loader's derivation where the file gives none; `lower::machine` does the rest
                paths::derive_energy(&mut edited, derived & !bit(knob.device_energy));
            }
            let reference = lower::machine(&edited, n).0;
            for i in 0..fields::NF {
                assert!(
                    close(fast[i], reference[i]),
                    "{name}: `{path}` = {v}: field {} is {} on the fast path, {} by editing the system",
                    fields::name(i),
                    fast[i],
                    reference[i]
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} paths checked");
}

#[test]
fn unknown_paths_say_what_was_meant() {
    let (_, sys) = systems()
        .into_iter()
        .find(|s| s.0.contains("gb200-nvl72"))
        .unwrap();
    let e = paths::resolve("device.memory.HBM3.bandwidth", &sys).unwrap_err();
    assert!(e.0.contains("no memory level `HBM3`"), "{e:?}");
    assert!(e.1.unwrap().contains("did you mean `HBM3e`"));
    let e = paths::resolve("device.peek.fp8", &sys).unwrap_err();
    assert!(
        e.1.unwrap().contains("did you mean `device.peak.fp8`"),
        "hint"
    );
    let e = paths::resolve("scale_up.size", &sys).unwrap_err();
    assert!(e.0.contains("changes the cost program"), "{e:?}");
    let e = paths::resolve("device.peak.fp6", &sys).unwrap_err();
    assert!(e.0.contains("no fp6 matrix peak"), "{e:?}");
}
