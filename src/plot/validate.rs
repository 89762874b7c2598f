//! Validation as a picture: each case's predicted value against the published one on log-log
//! axes, the identity line, the tolerance band around it, marks by family (filled when the case
//! passes, hollow when it fails) and failing cases named.
//!
//! The input is a small struct of its own ([`ValidationPlot`]) so the validation report can fill
//! it. Classes: `point` (one per case with positive values; `data-family`, `data-pass`), `band`,
//! `identity`, `point-label` (failing cases).

use super::svg::legend::flow_height;
use super::svg::{Anchor, Frame};
use super::{si, Axis, Doc, LabelPlacer, LegendEntry, LegendKind, Rect, Size, Style};

/// At most this many cases outside the tolerance are named on the picture.
const LABELLED: usize = 12;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct ValidationPoint {
    pub case: String,
    /// Grouping for marks and legend (e.g. `training`, `inference`, `scaling`).
    pub family: String,
    pub published: f64,
    pub predicted: f64,
    pub pass: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ValidationPlot {
    pub title: String,
    /// What is compared, with unit (cases of mixed quantities: `value (case's unit)`).
    pub quantity: String,
    /// Relative tolerance of the band (0.15 = ±15 %).
    pub tolerance: f64,
    pub points: Vec<ValidationPoint>,
}

/// Write `v` as SVG.
pub fn validate(
    v: &ValidationPlot,
    size: Size,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let (w, h) = (size.width as f64, size.height as f64);
    let mut doc = Doc::new(size, &v.title, "tessera-plot validate");
    let dy = doc.title(&v.title);
    let mut families: Vec<&str> = Vec::new();
    for p in &v.points {
        if !families.contains(&p.family.as_str()) {
            families.push(&p.family);
        }
    }
    let mut entries: Vec<LegendEntry> = families
        .iter()
        .enumerate()
        .map(|(i, f)| LegendEntry {
            label: f.to_string(),
            style: Style::nth(i),
            kind: LegendKind::Marker,
        })
        .collect();
    entries.push(LegendEntry {
        label: format!("±{:.0}% band (hollow: outside)", v.tolerance * 100.0),
        style: Style::nth(6),
        kind: LegendKind::Swatch,
    });
    let lw = w - 40.0;
    let lh = flow_height(lw, &entries);
    let shown: Vec<&ValidationPoint> = v
        .points
        .iter()
        .filter(|p| p.published > 0.0 && p.predicted > 0.0)
        .collect();
    let vals: Vec<f64> = shown
        .iter()
        .flat_map(|p| [p.published, p.predicted])
        .collect();
    let a = Axis::log("", vals);
    let top = 34.0 + dy + lh + 16.0;
    // A square plot, as large as fits, so the identity line runs at 45°.
    let side = (h - top - 52.0).min(w - 90.0 - 20.0).max(60.0);
    let rect = Rect {
        x: 80.0 + ((w - 100.0 - side) / 2.0).max(0.0),
        y: top,
        w: side,
        h: side,
    };
    let f = Frame {
        rect,
        x: Axis {
            title: format!("published {}", v.quantity),
            ..a.clone()
        },
        y: Axis {
            title: format!("predicted {}", v.quantity),
            ..a
        },
    };
    doc.hatches();
    doc.legend_flow(20.0, 34.0 + dy, lw, &entries);
    doc.raw(&format!(
        "<defs><clipPath id=\"plot-clip\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath></defs>\n",
        super::svg::n(rect.x),
        super::svg::n(rect.y),
        super::svg::n(rect.w),
        super::svg::n(rect.h)
    ));
    // Band and identity under the grid lines' labels but over the background.
    let (lo, hi) = (f.x.min, f.x.max);
    let t = v.tolerance.max(0.0);
    doc.raw("<g clip-path=\"url(#plot-clip)\">\n");
    doc.polygon(
        &[
            (f.px(lo), f.py(lo * (1.0 + t))),
            (f.px(hi), f.py(hi * (1.0 + t))),
            (f.px(hi), f.py(hi * (1.0 - t).max(1e-9))),
            (f.px(lo), f.py(lo * (1.0 - t).max(1e-9))),
        ],
        "band",
        &format!(
            r##"fill="url(#{})" fill-opacity="0.35" stroke="#999999" stroke-dasharray="3 3""##,
            Style::nth(6).hatch_id()
        ),
    );
    doc.raw("</g>\n");
    doc.axes(&f);
    doc.line(
        f.px(lo),
        f.py(lo),
        f.px(hi),
        f.py(hi),
        "identity",
        r##"stroke="#222222" stroke-width="1.2""##,
    );
    doc.open_group("points", None);
    for p in &shown {
        let fi = families.iter().position(|x| *x == p.family).unwrap_or(0);
        let st = Style::nth(fi);
        let (px, py) = (f.px(p.published), f.py(p.predicted));
        let err = p.predicted / p.published - 1.0;
        doc.marker(
            px,
            py,
            5.0,
            st,
            st.shape(),
            p.pass,
            "point",
            &format!(
                r#"data-family="{}" data-pass="{}""#,
                super::svg::esc(&p.family),
                p.pass
            ),
            &format!(
                "{}: published {}, predicted {} ({:+.1}%)",
                p.case,
                si(p.published, ""),
                si(p.predicted, ""),
                err * 100.0
            ),
        );
    }
    doc.close_group();
    // Labels for the cases outside the tolerance, the largest errors first, each where it
    // overlaps no other; at most LABELLED of them, and the note says how many.
    let mut outside: Vec<&&ValidationPoint> = shown.iter().filter(|p| !p.pass).collect();
    outside.sort_by(|a, b| {
        let e = |p: &ValidationPoint| (p.predicted / p.published).ln().abs();
        e(b).total_cmp(&e(a)).then_with(|| a.case.cmp(&b.case))
    });
    let mut placer = LabelPlacer::default();
    // Labels keep off the marks too, so that no label hides a case.
    for p in &shown {
        let (px, py) = (f.px(p.published), f.py(p.predicted));
        placer.reserve((px - 5.0, py - 5.0, px + 5.0, py + 5.0));
    }
    let mut labelled = 0;
    doc.open_group("point-labels", None);
    for p in outside {
        if labelled == LABELLED {
            break;
        }
        let (px, py) = (f.px(p.published), f.py(p.predicted));
        let err = p.predicted / p.published - 1.0;
        let label = format!("{} ({:+.0}%)", p.case, err * 100.0);
        let width = super::text_width(&label, 9.0);
        if let Some((tx, ty, start)) = placer.try_place(px, py, width, 9.0, rect) {
            doc.text(
                tx,
                ty,
                &label,
                9.0,
                if start { Anchor::Start } else { Anchor::End },
                "point-label",
                r##"fill="#B00000""##,
            );
            labelled += 1;
        }
    }
    doc.close_group();
    let pass = shown.iter().filter(|p| p.pass).count();
    let fail = shown.len() - pass;
    let named = if fail == 0 {
        String::new()
    } else if labelled == fail {
        "; every case outside named".to_string()
    } else {
        format!("; {labelled} of the {fail} outside named, largest first")
    };
    // Right-aligned over the plot; where it is wider than the plot it reaches right rather
    // than over the vertical axis's title.
    let note = format!("{pass} of {} cases within tolerance{named}", shown.len());
    let nx = rect
        .right()
        .max((rect.x - 10.0 + super::text_width(&note, 10.0)).min(w - 10.0));
    doc.note(nx, rect.y - 8.0, &note, Anchor::End);
    doc.finish(out)
}
