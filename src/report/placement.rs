//! Where the layers of a program sit on a mesh device (a wafer, a Dojo die): each stage of the
//! program (one per layer region on a mesh, `engine::lower::inference`) laid out as a region of
//! the device's cores with its share of them, regions in pipeline order along serpentine bands
//! so that neighbours in the pipeline are neighbours on the mesh, and the mesh traffic through the
//! busiest link of each region per step. Data only; `plot::placement` draws it.

use crate::engine::cpu;
use crate::engine::program::{Machine, Program, Section};
use crate::model::system::System;
use serde::Serialize;

/// One region: a stage of the pipeline on a share of a device's cores.
#[derive(Clone, Debug, Serialize)]
pub struct Region {
    /// Position in the pipeline, from 0.
    pub index: usize,
    /// The stage's name (its layers and its share of a device).
    pub stage: String,
    /// Device it starts on (0-based).
    pub device: u64,
    /// Its share of one device's cores.
    pub share: f64,
    /// Cores it holds.
    pub cores: f64,
    /// Its pieces on the mesh: (device, x, y, width, height) in cores.
    pub rects: Vec<(u64, f64, f64, f64, f64)>,
    /// Bytes per step through the busiest mesh link of its collectives.
    pub mesh_bytes_per_step: f64,
}

/// The placement of one program on a system whose device is a mesh of cores.
#[derive(Clone, Debug, Serialize)]
pub struct Placement {
    pub system: String,
    pub workload: String,
    /// Cores along x and y of one device's mesh.
    pub mesh: (u64, u64),
    /// Devices one pipeline replica spans (the picture draws one replica).
    pub devices: u64,
    pub regions: Vec<Region>,
}

/// The placement of `p` (one replica of `dp`) on `sys`, with the records that run on `mach`;
/// `None` when the device has no mesh.
pub fn placement(
    sys: &System,
    workload: &str,
    p: &Program,
    mach: &Machine,
    dp: u64,
) -> Option<Placement> {
    let ms = sys.device.mesh.as_ref()?;
    let running = cpu::running(p, mach);
    let (x, y) = ms.sides();
    let dp = dp.max(1) as f64;
    // regions in pipeline order: each stage class `repeat` times, each on its share of a device
    let mut regions: Vec<(String, f64, f64)> = Vec::new();
    // where a mapping gives prefill its own core regions, the picture is decode's (the round's)
    // placement: prefill's blocks reuse the same cores at another time
    for st in p
        .stage_list()
        .iter()
        .filter(|st| !st.name.starts_with("prefill:"))
    {
        let share = st.devices / dp;
        let mut bytes = 0.0;
        for c in st
            .comms
            .clone()
            .filter(|&i| running.comm(i))
            .map(|i| &p.comms[i])
        {
            if c.mesh > 0.0 {
                let mult = if c.section == Section::MicroBatch {
                    p.micro_batches
                } else {
                    1.0
                };
                bytes += c.coeffs.mesh.bytes * c.count * mult;
            }
        }
        for _ in 0..(st.repeat.round() as u64).max(1) {
            regions.push((st.name.to_string(), share, bytes));
        }
    }
    let total: f64 = regions.iter().map(|r| r.1).sum();
    let devices = (total - 1e-9).ceil().max(1.0) as u64;
    // serpentine bands sized so that a typical region is about square
    let per_device = (regions.len() as f64 / devices as f64).max(1.0);
    let (xf, yf) = (x as f64, y as f64);
    let side = (xf * yf / per_device).sqrt();
    let bands = (yf / side).round().clamp(1.0, yf);
    let band_h = yf / bands;
    let mut at = 0.0;
    let mut out = Vec::with_capacity(regions.len());
    for (index, (stage, share, bytes)) in regions.into_iter().enumerate() {
        let (start, end) = (at, at + share);
        at = end;
        let mut rects = Vec::new();
        // walk the region's span of the concatenated devices, band by band
        let mut u = start;
        while u < end - 1e-12 {
            let dev = u.floor();
            let within = u - dev;
            let band = (within * bands).floor().min(bands - 1.0);
            let band_end = dev + (band + 1.0) / bands;
            let v = end.min(band_end);
            let (a, b) = (
                (within * bands - band) * xf,
                ((v - dev) * bands - band) * xf,
            );
            let (x0, w) = if (band as u64).is_multiple_of(2) {
                (a, b - a)
            } else {
                (xf - b, b - a)
            };
            if w > 0.0 {
                rects.push((dev as u64, x0, band * band_h, w, band_h));
            }
            u = v;
        }
        out.push(Region {
            index,
            stage,
            device: start.floor() as u64,
            share,
            cores: share * xf * yf,
            rects,
            mesh_bytes_per_step: bytes,
        });
    }
    Some(Placement {
        system: sys.name.clone(),
        workload: workload.to_string(),
        mesh: (x, y),
        devices,
        regions: out,
    })
}
