//! Validation as a picture: each case's predicted value against the published one on log-log
//! axes, the identity line, the tolerance band around it, marks by family (filled when the case
//! passes, hollow when it fails) and failing cases named.
//!
//! The input is a small struct of its own ([`ValidationPlot`]) so the validation report can fill
//! it. Classes: `point` (one per case with positive values; `data-family`, `data-pass`), `band`,
//! `identity`, `point-label` (failing cases).

use super::svg::legend::flow_height;
use super::svg::{Anchor, Frame};
use super::{ellipsize, si, Axis, Doc, LegendEntry, LegendKind, Rect, Size, Style};
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
    doc.title(&v.title);
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
    let top = 34.0 + lh + 12.0;
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
    doc.legend_flow(20.0, 34.0, lw, &entries);
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
        if !p.pass {
            doc.text(
                px + 7.0,
                py + 4.0,
                &format!("{} ({:+.0}%)", ellipsize(&p.case, 28), err * 100.0),
                9.0,
                Anchor::Start,
                "point-label",
                r##"fill="#B00000""##,
            );
        }
    }
    doc.close_group();
    let pass = shown.iter().filter(|p| p.pass).count();
    doc.note(
        rect.right(),
        rect.y - 4.0,
        &format!("{pass} of {} cases within tolerance", shown.len()),
        Anchor::End,
    );
    doc.finish(out)
}
