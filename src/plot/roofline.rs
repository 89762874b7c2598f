//! The hierarchical roofline picture: bandwidth roofs (one per memory level), compute ceilings (one
//! per number format and engine), and every operator as a numbered mark with a key beside the plot.
//!
//! Classes: `roof` (one per memory level), `ceiling` (one per format group), `point` (one per
//! operator shown, with `data-op` holding its number), `point-label`, `key-entry`.

use super::svg::{n, Anchor, Frame};
use super::{
    ellipsize, si, text_width, Axis, Doc, LabelPlacer, LegendEntry, LegendKind, Rect, Size, Style,
};
use crate::report::roofline::{OpPoint, Roofline};

/// Marker style of an operator by phase (forward, backward, recompute, update).
fn phase_style(phase: &str) -> Style {
    Style::nth(match phase {
        "forward" => 0,
        "backward" => 1,
        "recompute" => 2,
        _ => 3,
    })
}

/// An operator shown on the plot: its row, its intensity (FLOP/B) and its achieved rate (FLOP/s).
type Shown<'a> = (&'a OpPoint, f64, f64);

/// Write the roofline of `r` as SVG: the title and the layout's note, the frame every operator,
/// ceiling and ridge fits in, the roofs and ceilings, their labels, the operators, the phases'
/// legend, what is not shown, and the key.
pub fn roofline(r: &Roofline, size: Size, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let (w, h) = (size.width as f64, size.height as f64);
    let mut doc = Doc::new(
        size,
        &format!("Roofline: {} on {}", r.workload, r.device),
        "tessera-plot roofline",
    );
    let dy = doc.title(&format!("Roofline — {} — {}", r.device, r.workload));
    let m = &r.mapping;
    doc.note(
        w / 2.0,
        38.0 + dy,
        &ellipsize(
            &format!(
                "{}, {} devices, dp {} × tp {} × pp {} × cp {}, micro-batch {}; per device, per call",
                r.system, r.devices, m.dp, m.tp, m.pp, m.cp, m.micro_batch
            ),
            (w / 5.5) as usize,
        ),
        Anchor::Middle,
    );

    let shown: Vec<Shown> = r
        .ops
        .iter()
        .filter_map(|o| match (o.intensity, o.achieved_flops_per_s) {
            (Some(i), Some(a)) if i > 0.0 && a > 0.0 => Some((o, i, a)),
            _ => None,
        })
        .collect();
    let key_w = if r.ops.is_empty() {
        0.0
    } else {
        (w * 0.3).clamp(150.0, 300.0)
    };
    let f = frame(r, &shown, size, dy, key_w);
    let rect = f.rect;
    doc.raw(&format!(
        "<defs><clipPath id=\"plot-clip\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath></defs>\n",
        n(rect.x),
        n(rect.y),
        n(rect.w),
        n(rect.h)
    ));
    doc.axes(&f);

    let top = r.ceilings.first().map(|c| c.flops_per_s).unwrap_or(f.y.max);
    let fastest = r
        .roofs
        .iter()
        .map(|l| l.bandwidth_bytes_per_s)
        .fold(0.0, f64::max);
    // Pixel slope of a roof (one decade up per decade right) for its label's angle.
    let dec = |a: &Axis| (a.max / a.min).log10();
    let angle = -((rect.h / dec(&f.y)) / (rect.w / dec(&f.x)))
        .atan()
        .to_degrees();

    roofs_and_ceilings(&mut doc, r, &f, fastest, top);
    roof_labels(&mut doc, r, &f, angle, fastest, top);
    points(&mut doc, &shown, &f);
    phase_legend(&mut doc, r, rect);
    if !r.feasible {
        doc.text(
            rect.x + rect.w / 2.0,
            rect.y + rect.h / 2.0,
            &ellipsize(
                &format!("infeasible: {}", r.reason.clone().unwrap_or_default()),
                (rect.w / 6.0) as usize,
            ),
            12.0,
            Anchor::Middle,
            "infeasible",
            r##"fill="#B00000""##,
        );
    }
    let hidden = r.ops.len() - shown.len();
    if hidden > 0 {
        doc.note(
            rect.x,
            h - 8.0,
            &format!("{hidden} operator(s) without FLOPs or memory traffic not shown"),
            Anchor::Start,
        );
    }

    if key_w > 0.0 {
        key(&mut doc, r, rect, key_w, h);
    }
    doc.finish(out)
}

/// The plot's frame on a canvas of `size`, `dy` below the title, `key_w` left for the key: log
/// axes over every operator shown, every ceiling and every ridge point, at most nine decades of
/// rate (very slow operators sit on the floor).
fn frame(r: &Roofline, shown: &[Shown], size: Size, dy: f64, key_w: f64) -> Frame {
    let (w, h) = (size.width as f64, size.height as f64);
    let mut xs: Vec<f64> = shown.iter().map(|s| s.1).collect();
    let mut ys: Vec<f64> = shown.iter().map(|s| s.2).collect();
    for c in &r.ceilings {
        ys.push(c.flops_per_s);
        for roof in &r.roofs {
            if roof.bandwidth_bytes_per_s > 0.0 {
                xs.push(c.flops_per_s / roof.bandwidth_bytes_per_s);
            }
        }
    }
    if let Some(top) = r.ceilings.first() {
        ys.push(top.flops_per_s * 2.0);
    }
    let rect = Rect {
        x: 78.0,
        y: 52.0 + dy,
        w: (w - 78.0 - 20.0 - key_w).max(100.0),
        h: (h - 52.0 - dy - 52.0).max(80.0),
    };
    let x = Axis::log("arithmetic intensity (FLOP/byte of memory traffic)", xs);
    let mut y = Axis::log("achieved rate (FLOP/s per device)", ys);
    if y.max / y.min > 1e9 {
        y.min = y.max / 1e9;
    }
    Frame { rect, x, y }
}

/// One line per memory level (its roof, from the left edge to the top ceiling; the level that
/// holds the data heavier) and per format's ceiling (from the fastest roof to the right edge),
/// clipped to the plot.
fn roofs_and_ceilings(doc: &mut Doc, r: &Roofline, f: &Frame, fastest: f64, top: f64) {
    doc.raw("<g class=\"roofs\" clip-path=\"url(#plot-clip)\">\n");
    for (i, roof) in r.roofs.iter().enumerate() {
        let b = roof.bandwidth_bytes_per_s;
        if b <= 0.0 {
            continue;
        }
        let style = Style::nth(i + 1);
        let main = roof.holds.is_some();
        let x0 = f.x.min;
        let x1 = top / b;
        let attrs = format!(
            r##"stroke="#222222" stroke-width="{}"{} data-level="{}" data-bandwidth="{}""##,
            if main { "2.4" } else { "1.3" },
            if main || style.dash().is_empty() {
                String::new()
            } else {
                format!(r#" stroke-dasharray="{}""#, style.dash())
            },
            super::svg::esc(&roof.level),
            si(b, "B/s")
        );
        doc.polyline(
            &[(f.px(x0), f.py(x0 * b)), (f.px(x1), f.py(top))],
            "roof",
            &attrs,
        );
    }
    for (i, c) in r.ceilings.iter().enumerate() {
        let style = Style::nth(i);
        let x0 = if fastest > 0.0 {
            c.flops_per_s / fastest
        } else {
            f.x.min
        };
        let attrs = format!(
            r##"stroke="#555555" stroke-width="{}"{} data-ceiling="{}""##,
            if i == 0 { "2.0" } else { "1.1" },
            if i == 0 || style.dash().is_empty() {
                String::new()
            } else {
                format!(r#" stroke-dasharray="{}""#, style.dash())
            },
            super::svg::esc(&c.label)
        );
        doc.polyline(
            &[
                (f.px(x0), f.py(c.flops_per_s)),
                (f.rect.right(), f.py(c.flops_per_s)),
            ],
            "ceiling",
            &attrs,
        );
    }
    doc.raw("</g>\n");
}

/// Every operator shown as a mark in its phase's style (filled on the matrix engine, hollow on
/// the vector unit) with its number beside it, placed off the others' labels.
fn points(doc: &mut Doc, shown: &[Shown], f: &Frame) {
    doc.open_group("points", None);
    let mut placer = LabelPlacer::default();
    for (o, i, a) in shown {
        let (px, py) = (f.px(*i), f.py(a.max(f.y.min)));
        let style = phase_style(o.phase);
        let tip = format!(
            "{}. {} ({}, {} {}): {:.3} FLOP/B, {}, bound by {}",
            o.index,
            o.name,
            o.phase,
            o.precision,
            o.engine,
            i,
            si(*a, "FLOP/s"),
            o.bound_by
        );
        doc.marker(
            px,
            py,
            4.5,
            style,
            style.shape(),
            o.engine == "matrix",
            "point",
            &format!(r#"data-op="{}""#, o.index),
            &tip,
        );
        let label = o.index.to_string();
        let (tx, ty, start) = placer.place(px, py, text_width(&label, 9.0), 9.0, f.rect);
        doc.text(
            tx,
            ty,
            &label,
            9.0,
            if start { Anchor::Start } else { Anchor::End },
            "point-label",
            r##"fill="#222222""##,
        );
    }
    doc.close_group();
}

/// The key beside the plot: each operator's number, name, phase and what bounds it, as many as
/// fit in `key_w` × the canvas height `h`, then how many more the table holds.
fn key(doc: &mut Doc, r: &Roofline, rect: Rect, key_w: f64, h: f64) {
    let kx = rect.right() + 16.0;
    let mut ky = rect.y + 2.0;
    doc.open_group("key", None);
    doc.text(
        kx,
        ky,
        "operators",
        11.0,
        Anchor::Start,
        "key-title",
        r#"font-weight="bold""#,
    );
    ky += 14.0;
    let row = 12.0;
    let rows = ((h - 10.0 - ky) / row).floor().max(1.0) as usize;
    let chars = ((key_w - 8.0) / text_width("n", 9.0)) as usize;
    for (k, o) in r.ops.iter().enumerate() {
        if k + 1 == rows && r.ops.len() > rows {
            doc.text(
                kx,
                ky,
                &format!("… {} more (see the table)", r.ops.len() - k),
                9.0,
                Anchor::Start,
                "key-more",
                "",
            );
            break;
        }
        let short = match o.phase {
            "forward" => "fwd",
            "backward" => "bwd",
            "recompute" => "rec",
            _ => "upd",
        };
        doc.text(
            kx,
            ky,
            &ellipsize(
                &format!(
                    "{:>2} {} ({short}; {})",
                    o.index,
                    o.name,
                    if o.bound_by.starts_with("compute") {
                        "compute"
                    } else {
                        &o.bound_by
                    }
                ),
                chars,
            ),
            9.0,
            Anchor::Start,
            "key-entry",
            "",
        );
        ky += row;
    }
    doc.close_group();
}

/// The phases' legend, bottom right (high intensity at a low rate: rarely an operator there),
/// with what filled and hollow marks mean.
fn phase_legend(doc: &mut Doc, r: &Roofline, rect: Rect) {
    let mut phases: Vec<&str> = Vec::new();
    for o in &r.ops {
        if !phases.contains(&o.phase) {
            phases.push(o.phase);
        }
    }
    let entries: Vec<LegendEntry> = phases
        .iter()
        .map(|p| LegendEntry {
            label: p.to_string(),
            style: phase_style(p),
            kind: LegendKind::Marker,
        })
        .collect();
    if !entries.is_empty() {
        let note = "filled: matrix engine; hollow: vector";
        let lw = entries
            .iter()
            .map(|e| text_width(&e.label, 11.0))
            .fold(0.0, f64::max)
            + 44.0;
        let lh = 17.0 * entries.len() as f64 + 8.0;
        let lx = rect.right() - lw.max(text_width(note, 10.0) + 8.0) - 6.0;
        let ly = rect.bottom() - lh - 22.0;
        doc.legend(lx, ly, &entries);
        doc.note(lx + 2.0, ly + lh + 13.0, note, Anchor::Start);
    }
}

/// The roofs' and ceilings' labels: ceilings at the right end above their line (equal rates
/// share one), roofs along their slope (`angle`, in degrees on the canvas) where they enter the
/// plot, kept off the ceilings' labels and dropped where they would leave it.
fn roof_labels(doc: &mut Doc, r: &Roofline, f: &Frame, angle: f64, fastest: f64, top: f64) {
    let rect = f.rect;
    // Labels: ceilings at the right end above their line, roofs along their slope where they
    // enter the plot.
    doc.open_group("roof-labels", None);
    // Ceilings of equal rate share one label.
    let mut merged: Vec<(f64, Vec<&str>)> = Vec::new();
    for c in &r.ceilings {
        match merged
            .iter_mut()
            .find(|(v, _)| ((v - c.flops_per_s) / c.flops_per_s).abs() < 1e-9)
        {
            Some((_, l)) => l.push(&c.label),
            None => merged.push((c.flops_per_s, vec![&c.label])),
        }
    }
    let mut last_y = f64::NEG_INFINITY;
    // The ceiling labels' boxes, which the roof labels keep off.
    let mut ceiling_boxes: Vec<(f64, f64, f64, f64)> = Vec::new();
    for (v, labels) in &merged {
        let yy = f.py(*v);
        if yy < rect.y || yy > rect.bottom() || (yy - last_y).abs() < 11.0 {
            continue;
        }
        last_y = yy;
        // Left of where the ceiling meets the fastest roof: above the roofs, where no operator
        // can be.
        let ridge = if fastest > 0.0 {
            f.px(*v / fastest)
        } else {
            rect.x
        };
        let text = format!("{} {}", labels.join(", "), si(*v, "FLOP/s"));
        let x1 = (ridge - 6.0).max(rect.x + 6.0 + text_width(&text, 10.0));
        ceiling_boxes.push((x1 - text_width(&text, 10.0), yy - 12.0, x1, yy));
        doc.text(
            x1,
            yy - 3.0,
            &text,
            10.0,
            Anchor::End,
            "ceiling-label",
            r##"fill="#333333""##,
        );
    }
    let mut used: Vec<(f64, f64)> = Vec::new();
    for roof in &r.roofs {
        let b = roof.bandwidth_bytes_per_s;
        if b <= 0.0 {
            continue;
        }
        // A fifth of the way (in log space) along the part of the roof inside the plot, below
        // the ceilings and their labels.
        let xe = f.x.min.max(f.y.min / b);
        let xr = (top / b).min(f.x.max);
        if xr <= xe {
            continue;
        }
        let xm = (xe * (xr / xe).powf(0.2)).max(xe * 1.5).min(xr);
        let (mut px, mut py) = (f.px(xm) - 6.0, f.py(xm * b) - 5.0);
        if px > rect.right() - 40.0 || py < rect.y + 10.0 {
            continue;
        }
        let label = format!(
            "{}{} {}",
            roof.level,
            if roof.cache { " (cache)" } else { "" },
            si(b, "B/s")
        );
        // Along the roof past other roofs' labels and off the ceilings' labels: points along
        // the label's baseline and a font height above it, turned with the text.
        let (lw, (sa, ca)) = (text_width(&label, 10.0), angle.to_radians().sin_cos());
        let on_ceiling = |px: f64, py: f64| {
            (0..=8).any(|k| {
                let t = lw * k as f64 / 8.0;
                [0.0, 8.0].iter().any(|h| {
                    let (qx, qy) = (px + t * ca + h * sa, py + t * sa - h * ca);
                    ceiling_boxes
                        .iter()
                        .any(|b| qx >= b.0 && qx <= b.2 && qy >= b.1 && qy <= b.3)
                })
            })
        };
        let mut tries = 0;
        while tries < 16
            && (on_ceiling(px, py)
                || used
                    .iter()
                    .any(|(ux, uy)| (ux - px).abs() < 60.0 && (uy - py).abs() < 12.0))
        {
            px += 24.0;
            py -= 24.0 * (-angle.to_radians()).tan();
            tries += 1;
        }
        // Dropped where it would leave the plot (its far end above the top or past the right).
        if tries == 16
            || px > rect.right() - 40.0
            || py < rect.y + 10.0
            || py + lw * sa < rect.y
            || px + lw * ca > rect.right()
        {
            continue;
        }
        used.push((px, py));
        let extra = format!(
            r##"fill="#222222" transform="rotate({} {} {})""##,
            n(angle),
            n(px),
            n(py)
        );
        doc.text(px, py, &label, 10.0, Anchor::Start, "roof-label", &extra);
    }
    doc.close_group();
}
