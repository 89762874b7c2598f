//! Legends: a boxed legend with one entry a row, and a flowing legend that sets entries side by
//! side and wraps them at a width (with the height it takes, for laying out plots around it).

use super::{stroke, Anchor, Doc, REFERENCE_STROKE};
use crate::plot::base::{text_width, LegendEntry, LegendKind};

impl Doc {
    /// A legend box with its top-left corner at (x, y); returns its height.
    pub fn legend(&mut self, x: f64, y: f64, entries: &[LegendEntry]) -> f64 {
        if entries.is_empty() {
            return 0.0;
        }
        let row = 17.0;
        let w = entries
            .iter()
            .map(|e| text_width(&e.label, 11.0))
            .fold(0.0, f64::max)
            + 44.0;
        let h = row * entries.len() as f64 + 8.0;
        self.buf.push_str("<g class=\"legend\">\n");
        self.rect(
            x,
            y,
            w,
            h,
            "legend-box",
            r##"fill="#ffffff" fill-opacity="0.9" stroke="#999999""##,
            "",
        );
        for (i, e) in entries.iter().enumerate() {
            let cy = y + 4.0 + row * (i as f64 + 0.5);
            let s = e.style;
            let stroke = format!(
                r#"stroke="{}" stroke-width="1.8"{}"#,
                s.color(),
                if s.dash().is_empty() {
                    String::new()
                } else {
                    format!(r#" stroke-dasharray="{}""#, s.dash())
                }
            );
            match e.kind {
                LegendKind::Marker => {
                    self.marker(x + 16.0, cy, 4.5, s, s.shape(), true, "legend-mark", "", "")
                }
                LegendKind::Line => {
                    self.line(x + 4.0, cy, x + 28.0, cy, "legend-line", &stroke);
                    self.marker(x + 16.0, cy, 4.0, s, s.shape(), true, "legend-mark", "", "");
                }
                LegendKind::Dash => {
                    self.line(x + 4.0, cy, x + 28.0, cy, "legend-line", REFERENCE_STROKE)
                }
                LegendKind::Swatch | LegendKind::Shade => self.rect(
                    x + 6.0,
                    cy - 6.0,
                    20.0,
                    12.0,
                    "legend-swatch",
                    &format!(r#"fill="url(#{})" stroke="{}""#, s.hatch_id(), s.color()),
                    "",
                ),
            }
            self.text(
                x + 34.0,
                cy + 4.0,
                &e.label,
                11.0,
                Anchor::Start,
                "legend-label",
                "",
            );
        }
        self.buf.push_str("</g>\n");
        h
    }

    /// A flowing legend across the top of a `w` × `h` picture and, below it, two panels side
    /// by side (left and right plot areas, room left for their axes): the layout of the
    /// two-panel pictures (`scale`, `serve-curve`).
    pub fn legend_over_two_panels(
        &mut self,
        w: f64,
        h: f64,
        entries: &[LegendEntry],
    ) -> (super::Rect, super::Rect) {
        let lw = w - 40.0;
        let lh = flow_height(lw, entries);
        let y0 = 34.0 + self.title_dy;
        self.legend_flow(20.0, y0, lw, entries);
        let top = y0 + lh + 14.0;
        let bottom = h - 50.0;
        let split = (w * 0.5).round();
        let left = super::Rect {
            x: 70.0,
            y: top,
            w: split - 70.0 - 18.0,
            h: (bottom - top).max(60.0),
        };
        let right = super::Rect {
            x: split + 58.0,
            y: top,
            w: w - split - 58.0 - 16.0,
            h: (bottom - top).max(60.0),
        };
        (left, right)
    }

    /// Legend entries side by side from (x, y), wrapping at `width`; returns the height used
    /// (the same as [`flow_height`]).
    pub fn legend_flow(&mut self, x: f64, y: f64, width: f64, entries: &[LegendEntry]) -> f64 {
        let (places, height) = flow(width, entries);
        if entries.is_empty() {
            return 0.0;
        }
        self.buf.push_str("<g class=\"legend\">\n");
        for (e, (dx, dy, label)) in entries.iter().zip(places) {
            let (cx, cy) = (x + dx, y + dy);
            let s = e.style;
            match e.kind {
                LegendKind::Swatch => self.rect(
                    cx + 2.0,
                    cy - 6.0,
                    22.0,
                    12.0,
                    "legend-swatch",
                    &format!(r#"fill="url(#{})" stroke="{}""#, s.hatch_id(), s.color()),
                    "",
                ),
                LegendKind::Shade => self.rect(
                    cx + 2.0,
                    cy - 6.0,
                    22.0,
                    12.0,
                    "legend-swatch",
                    &format!(r##"fill="url(#{})" stroke="#333333""##, s.shade_id()),
                    "",
                ),
                LegendKind::Marker => self.marker(
                    cx + 13.0,
                    cy,
                    4.5,
                    s,
                    s.shape(),
                    true,
                    "legend-mark",
                    "",
                    "",
                ),
                LegendKind::Line => {
                    self.line(cx, cy, cx + 26.0, cy, "legend-line", &stroke(s, 1.8));
                    self.marker(
                        cx + 13.0,
                        cy,
                        4.0,
                        s,
                        s.shape(),
                        true,
                        "legend-mark",
                        "",
                        "",
                    );
                }
                LegendKind::Dash => {
                    self.line(cx, cy, cx + 26.0, cy, "legend-line", REFERENCE_STROKE)
                }
            }
            self.text(
                cx + 32.0,
                cy + 4.0,
                &label,
                11.0,
                Anchor::Start,
                "legend-label",
                "",
            );
        }
        self.buf.push_str("</g>\n");
        height
    }
}

/// Where each legend entry of a flowing legend goes (offsets of its row centre) and the height.
fn flow(width: f64, entries: &[LegendEntry]) -> (Vec<(f64, f64, String)>, f64) {
    let row = 17.0;
    let (mut cx, mut cy) = (0.0, row / 2.0);
    let mut out = Vec::new();
    for e in entries {
        let label =
            crate::plot::base::ellipsize(&e.label, ((width - 40.0) / 6.0).max(8.0) as usize);
        let ew = 32.0 + text_width(&label, 11.0) + 16.0;
        if cx > 0.0 && cx + ew > width {
            cx = 0.0;
            cy += row;
        }
        out.push((cx, cy, label));
        cx += ew;
    }
    let h = if entries.is_empty() {
        0.0
    } else {
        cy + row / 2.0
    };
    (out, h)
}

/// The height a flowing legend of `entries` takes at `width`.
pub fn flow_height(width: f64, entries: &[LegendEntry]) -> f64 {
    flow(width, entries).1
}
