//! The placement of a program on a mesh device as a picture: each device's mesh of cores as a
//! grid with its core counts along two sides and a scale bar in cores, every region of it filled
//! in its layer's colour and numbered in pipeline order, the activations' path from region to
//! region (and back to the first), the region whose busiest mesh link carries the most bytes per
//! step outlined, and a legend that reads the regions (runs of like regions with their cores),
//! the cores used and the marks.
//!
//! Classes: `device` (one per device drawn), `region` (one per piece of a region; `data-region`,
//! `data-stage`), `region-label`, `path` (the activation path), `busiest`, `core-count` (the
//! mesh's sides), `scale-bar` and `scale-label`, `legend` (with `legend-swatch`, `legend-label`).

use super::svg::Anchor;
use super::{fit_lines, si, Doc, Size, Style};
use crate::report::placement::{Placement, Region};

/// `n` with thousands separated by commas: 883,350.
fn count(n: f64) -> String {
    let digits = format!("{:.0}", n.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The longest round number of cores (1, 2 or 5 × 10^k) whose bar is at most `max_px` long at
/// `scale` pixels per core.
fn bar_cores(scale: f64, max_px: f64) -> f64 {
    let most = (max_px / scale).max(1.0);
    let p = 10f64.powf(most.log10().floor());
    [5.0, 2.0, 1.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&c| c <= most)
        .unwrap_or(p)
}

/// Runs of consecutive regions with the same stage and the same cores: (first, last) indices.
fn runs(regions: &[Region]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (i, r) in regions.iter().enumerate() {
        match out.last_mut() {
            Some((a, b))
                if regions[*a].stage == r.stage && (regions[*a].cores - r.cores).abs() < 0.5 =>
            {
                *b = i
            }
            _ => out.push((i, i)),
        }
    }
    out
}

/// Write `p` as SVG.
pub fn placement(p: &Placement, size: Size, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let (w, h) = (size.width as f64, size.height as f64);
    let mut doc = Doc::new(
        size,
        &format!("Placement of {} on {}", p.workload, p.system),
        "tessera-plot placement",
    );
    let dy = doc.title(&format!(
        "{} on {}: {} regions on {} device(s) of {} × {} cores",
        p.workload,
        p.system,
        p.regions.len(),
        p.devices,
        count(p.mesh.0 as f64),
        count(p.mesh.1 as f64)
    ));
    let (mx, my) = (p.mesh.0 as f64, p.mesh.1 as f64);
    let n = p.devices.max(1) as f64;
    // The legend takes a column on the right; the devices the rest, with room above them for
    // the core count along x, left of them for the count along y and below for the scale bar.
    let key_w = (w * 0.3).clamp(170.0, 280.0);
    let (top, bottom, gap) = (62.0 + dy, h - 46.0, 16.0);
    let (area_x, area_w) = (40.0, w - 40.0 - key_w - 24.0);
    let avail_w = area_w - gap * (n - 1.0);
    let scale = (avail_w / (n * mx)).min((bottom - top) / my).max(1e-9);
    let panel_w = mx * scale;
    let left = area_x + (area_w - (n * panel_w + gap * (n - 1.0))) / 2.0;
    let origin = |dev: u64| (left + dev as f64 * (panel_w + gap), top);
    devices(&mut doc, p, (left, top), panel_w, gap, scale);
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
        let mut biggest = (0.0, 0.0, 0.0, 0.0);
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
                biggest = (pw * ph, px + pw / 2.0, py + ph / 2.0, pw.min(ph));
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
        let label = (r.index + 1).to_string();
        // Numbered where the number fits inside the region's largest piece.
        if biggest.3 >= 12.0 && super::text_width(&label, 10.0) + 4.0 <= biggest.0 / biggest.3 {
            doc.text(
                biggest.1,
                biggest.2 + 4.0,
                &label,
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
    let kx = w - key_w - 12.0;
    legend(&mut doc, p, busiest, (kx, top, key_w, h - 12.0));
    doc.finish(out)
}

/// The devices' panels from `at` (each `panel_w` wide, `gap` apart, `scale` pixels per core),
/// the mesh's core counts along the top and the left side, and a scale bar in cores below.
fn devices(doc: &mut Doc, p: &Placement, at: (f64, f64), panel_w: f64, gap: f64, scale: f64) {
    let (mx, my) = (p.mesh.0 as f64, p.mesh.1 as f64);
    let origin = |dev: u64| (at.0 + dev as f64 * (panel_w + gap), at.1);
    let top = at.1;
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
        let across = if p.devices > 1 {
            format!("device {}: {} cores", d + 1, count(mx))
        } else {
            format!("{} cores", count(mx))
        };
        doc.text(
            ox + panel_w / 2.0,
            oy - 6.0,
            &across,
            10.0,
            Anchor::Middle,
            "core-count",
            "",
        );
    }
    let (ox, oy) = origin(0);
    doc.vtext(
        ox - 8.0,
        oy + my * scale / 2.0,
        &format!("{} cores", count(my)),
        10.0,
        "core-count",
    );
    // Scale bar under the first device.
    let bar = bar_cores(scale, (panel_w * 0.5).clamp(20.0, 140.0));
    let (bx, by) = (ox, top + my * scale + 14.0);
    doc.line(
        bx,
        by,
        bx + bar * scale,
        by,
        "scale-bar",
        r##"stroke="#222222" stroke-width="2""##,
    );
    for x in [bx, bx + bar * scale] {
        doc.line(
            x,
            by - 4.0,
            x,
            by + 4.0,
            "scale-bar",
            r##"stroke="#222222" stroke-width="1""##,
        );
    }
    doc.text(
        bx + bar * scale + 6.0,
        by + 4.0,
        &format!("{} cores", count(bar)),
        10.0,
        Anchor::Start,
        "scale-label",
        "",
    );
}

/// The legend in the column from (x, y), `width` wide, down to `bottom`: runs of like regions
/// (their colours, numbers, cores and stage), the cores used of the devices', and the marks.
fn legend(doc: &mut Doc, p: &Placement, busiest: Option<usize>, col: (f64, f64, f64, f64)) {
    let (x, mut y, width, bottom) = col;
    let line = 13.0;
    let mut lines: Vec<(String, &str)> = Vec::new();
    doc.open_group("legend", None);
    doc.text(
        x,
        y + 9.0,
        "regions, in pipeline order",
        11.0,
        Anchor::Start,
        "key-title",
        r#"font-weight="bold""#,
    );
    y += 24.0;
    let all = runs(&p.regions);
    for (k, &(a, b)) in all.iter().enumerate() {
        let ra = &p.regions[a];
        let numbers = if a == b {
            format!("{}", a + 1)
        } else {
            format!("{}–{}", a + 1, b + 1)
        };
        let text = format!(
            "{numbers}: {} cores{} ({:.2} % of a device) — {}",
            count(ra.cores),
            if a == b { "" } else { " each" },
            100.0 * ra.share,
            ra.stage
        );
        let wrapped = fit_lines(&text, 10.0, width - 22.0, 3);
        let needed = line * wrapped.len() as f64 + 6.0;
        // Keep room for the summary below; say how many runs are left out when they do not fit.
        if y + needed > bottom - 5.0 * line && k + 1 < all.len() {
            let rest = all.len() - k;
            let more = format!("… {rest} more run(s); each region's cores are in its hover text");
            for l in fit_lines(&more, 10.0, width, 2) {
                doc.text(x, y + 9.0, &l, 10.0, Anchor::Start, "legend-label", "");
                y += line;
            }
            y += 6.0;
            break;
        }
        let shown = (b - a + 1).min(3);
        for j in 0..shown {
            let s = Style::nth(p.regions[a + j].index);
            doc.rect(
                x + j as f64 * 5.0,
                y + j as f64 * 2.0,
                10.0,
                10.0,
                "legend-swatch",
                &format!(
                    r##"fill="{}" fill-opacity="0.75" stroke="#ffffff" stroke-width="0.5""##,
                    s.color()
                ),
                "",
            );
        }
        for (i, l) in wrapped.iter().enumerate() {
            doc.text(
                x + 22.0,
                y + 9.0 + line * i as f64,
                l,
                10.0,
                Anchor::Start,
                "legend-label",
                "",
            );
        }
        y += needed;
    }
    let used: f64 = p.regions.iter().map(|r| r.cores).sum();
    let total = (p.mesh.0 * p.mesh.1 * p.devices.max(1)) as f64;
    lines.push((
        format!(
            "cores used: {} of {} ({:.1} %)",
            count(used),
            count(total),
            100.0 * used / total.max(1.0)
        ),
        "legend-label",
    ));
    lines.push((
        "line: activations region to region, dashed back to the first".into(),
        "note",
    ));
    if let Some(r) = busiest.map(|i| &p.regions[i]) {
        lines.push((
            format!(
                "outlined: region {}, the busiest mesh link ({}B per step)",
                r.index + 1,
                si(r.mesh_bytes_per_step, "")
            ),
            "note",
        ));
    }
    y += 4.0;
    for (text, class) in lines {
        for l in fit_lines(&text, 10.0, width, 3) {
            if y + 9.0 > bottom {
                break;
            }
            let fill = if class == "note" {
                r##"fill="#555555""##
            } else {
                ""
            };
            doc.text(x, y + 9.0, &l, 10.0, Anchor::Start, class, fill);
            y += line;
        }
        y += 3.0;
    }
    doc.close_group();
}
