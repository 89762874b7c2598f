//! The placement of a program on a mesh device as a picture: each device's mesh of cores as a
//! grid, every region of it filled in its layer's colour and numbered in pipeline order, the
//! activations' path from region to region (and back to the first), and the region whose
//! busiest mesh link carries the most bytes per step outlined.
//!
//! Classes: `device` (one per device drawn), `region` (one per piece of a region; `data-region`,
//! `data-stage`), `region-label`, `path` (the activation path), `busiest`.

use super::svg::Anchor;
use super::{si, Doc, Size, Style};
use crate::report::placement::Placement;

/// Write `p` as SVG.
pub fn placement(p: &Placement, size: Size, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let (w, h) = (size.width as f64, size.height as f64);
    let mut doc = Doc::new(
        size,
        &format!("Placement of {} on {}", p.workload, p.system),
        "tessera-plot placement",
    );
    doc.title(&format!(
        "{} on {}: {} regions on {} device(s) of {} × {} cores",
        p.workload,
        p.system,
        p.regions.len(),
        p.devices,
        p.mesh.0,
        p.mesh.1
    ));
    let (mx, my) = (p.mesh.0 as f64, p.mesh.1 as f64);
    let n = p.devices.max(1) as f64;
    let (top, bottom, gap) = (44.0, h - 44.0, 16.0);
    let avail_w = w - 40.0 - gap * (n - 1.0);
    let scale = (avail_w / (n * mx)).min((bottom - top) / my);
    let panel_w = mx * scale;
    let left = (w - (n * panel_w + gap * (n - 1.0))) / 2.0;
    let origin = |dev: u64| (left + dev as f64 * (panel_w + gap), top);
    for d in 0..p.devices {
        let (ox, oy) = origin(d);
        doc.rect(
            ox,
            oy,
            panel_w,
            my * scale,
            "device",
            r##"fill="#f4f4f4" stroke="#444444" stroke-width="1""##,
            &format!("device {d}: {} × {} cores", p.mesh.0, p.mesh.1),
        );
    }
    let busiest = p
        .regions
        .iter()
        .max_by(|a, b| a.mesh_bytes_per_step.total_cmp(&b.mesh_bytes_per_step))
        .filter(|r| r.mesh_bytes_per_step > 0.0)
        .map(|r| r.index);
    let mut centres = Vec::with_capacity(p.regions.len());
    for r in &p.regions {
        let style = Style::nth(r.index);
        let tip = format!(
            "region {}: {} — {:.0} cores ({:.2} % of a device); busiest mesh link {}B per step",
            r.index + 1,
            r.stage,
            r.cores,
            100.0 * r.share,
            si(r.mesh_bytes_per_step, "")
        );
        let mut biggest = (0.0, 0.0, 0.0);
        for &(dev, x0, y0, rw, rh) in &r.rects {
            let (ox, oy) = origin(dev);
            let (px, py, pw, ph) = (ox + x0 * scale, oy + y0 * scale, rw * scale, rh * scale);
            doc.rect(
                px,
                py,
                pw,
                ph,
                "region",
                &format!(
                    r##"data-region="{}" data-stage="{}" fill="{}" fill-opacity="0.75" stroke="#ffffff" stroke-width="0.5""##,
                    r.index,
                    super::svg::esc(&r.stage),
                    style.color()
                ),
                &tip,
            );
            if pw * ph > biggest.0 {
                biggest = (pw * ph, px + pw / 2.0, py + ph / 2.0);
            }
            if Some(r.index) == busiest {
                doc.rect(
                    px,
                    py,
                    pw,
                    ph,
                    "busiest",
                    r##"fill="none" stroke="#000000" stroke-width="2.5""##,
                    "",
                );
            }
        }
        centres.push((biggest.1, biggest.2));
        if biggest.0 > 140.0 {
            doc.text(
                biggest.1,
                biggest.2 + 4.0,
                &(r.index + 1).to_string(),
                10.0,
                Anchor::Middle,
                "region-label",
                "",
            );
        }
    }
    if centres.len() > 1 {
        doc.polyline(
            &centres,
            "path",
            r##"stroke="#222222" stroke-width="1.2" stroke-opacity="0.7""##,
        );
        let (first, last) = (centres[0], centres[centres.len() - 1]);
        doc.polyline(
            &[last, first],
            "path",
            r##"stroke="#222222" stroke-width="1.2" stroke-dasharray="5 4" stroke-opacity="0.7""##,
        );
    }
    let note = match busiest.map(|i| &p.regions[i]) {
        Some(r) => format!(
            "line: activations region to region (dashed: back to the first); outlined: region {} ({}), busiest mesh link {}B per step",
            r.index + 1,
            r.stage,
            si(r.mesh_bytes_per_step, "")
        ),
        None => "line: activations region to region (dashed: back to the first)".to_string(),
    };
    doc.note(20.0, h - 18.0, &note, Anchor::Start);
    doc.finish(out)
}
