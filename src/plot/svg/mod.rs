//! A small SVG writer: elements with fixed-precision numbers, escaped text, marker shapes, hatch
//! patterns, plot frames with axes and grids, and legends.

pub(super) mod legend;

use super::axis::{Axis, ScaleKind};
use super::base::{text_width, Rect, Shape, Size, Style, HATCHES};
use std::fmt::Write as _;

/// A number with one decimal, never `-0.0`.
pub(crate) fn n(v: f64) -> String {
    let s = format!("{v:.1}");
    if s == "-0.0" {
        "0.0".into()
    } else {
        s
    }
}

/// Escape text for element content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {}
            c => o.push(c),
        }
    }
    o
}

/// Text anchoring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn attr(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// An SVG document being written.
pub struct Doc {
    buf: String,
    pub size: Size,
    /// How much lower than one line the title ends (see [`Doc::title`]).
    pub title_dy: f64,
}

/// The distance between the lines of a title.
const TITLE_LINE: f64 = 18.0;

/// A plot area with its two axes: maps data to picture coordinates.
#[derive(Clone, Debug)]
pub struct Frame {
    pub rect: Rect,
    pub x: Axis,
    pub y: Axis,
}

impl Frame {
    pub fn px(&self, v: f64) -> f64 {
        self.rect.x + self.x.fraction(v) * self.rect.w
    }
    pub fn py(&self, v: f64) -> f64 {
        self.rect.bottom() - self.y.fraction(v) * self.rect.h
    }
    /// Both coordinates inside the frame.
    pub fn inside(&self, x: f64, y: f64) -> bool {
        self.x.contains(x) && self.y.contains(y)
    }
}

impl Doc {
    /// Start a picture: the root element, its title (for screen readers and tests) and a white
    /// background.
    pub fn new(size: Size, title: &str, class: &str) -> Doc {
        let mut buf = String::new();
        let (w, h) = (size.width, size.height);
        let _ = writeln!(
            buf,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" class="{}">"#,
            esc(class)
        );
        let _ = writeln!(buf, "<title>{}</title>", esc(title));
        let _ = writeln!(
            buf,
            r##"<rect class="background" x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>"##
        );
        Doc {
            buf,
            size,
            title_dy: 0.0,
        }
    }

    /// Hatch patterns `hatch-0` … for bar fills: each has its own line direction and density and
    /// is tinted with the series colour, so bars read in black and white too.
    pub fn hatches(&mut self) {
        self.buf.push_str("<defs>\n");
        for i in 0..HATCHES {
            let s = Style::nth(i);
            self.pattern(&format!("hatch-{i}"), i, s.color());
            // The same textures in greys, for categories that must not look like series.
            self.pattern(&format!("shade-{i}"), i, SHADES[i % SHADES.len()]);
        }
        self.buf.push_str("</defs>\n");
    }

    fn pattern(&mut self, id: &str, i: usize, c: &str) {
        let body = match i {
            0 => format!(r#"<rect width="8" height="8" fill="{c}" fill-opacity="0.85"/>"#),
            1 => format!(
                r#"<rect width="8" height="8" fill="{c}" fill-opacity="0.25"/><path d="M0 8L8 0M-2 2L2 -2M6 10L10 6" stroke="{c}" stroke-width="1.6"/>"#
            ),
            2 => format!(
                r#"<rect width="8" height="8" fill="{c}" fill-opacity="0.15"/><circle cx="4" cy="4" r="1.6" fill="{c}"/>"#
            ),
            3 => format!(
                r#"<rect width="8" height="8" fill="{c}" fill-opacity="0.25"/><path d="M0 0L8 8M-2 6L2 10M6 -2L10 2" stroke="{c}" stroke-width="1.6"/>"#
            ),
            4 => format!(
                r#"<rect width="8" height="8" fill="{c}" fill-opacity="0.2"/><path d="M0 4H8M4 0V8" stroke="{c}" stroke-width="1.2"/>"#
            ),
            _ => format!(
                r#"<rect width="8" height="8" fill="{c}" fill-opacity="0.3"/><path d="M0 2H8M0 6H8" stroke="{c}" stroke-width="1.2"/>"#
            ),
        };
        let _ = writeln!(
            self.buf,
            r#"<pattern id="{id}" patternUnits="userSpaceOnUse" width="8" height="8">{body}</pattern>"#
        );
    }

    pub fn raw(&mut self, s: &str) {
        self.buf.push_str(s);
    }

    pub fn open_group(&mut self, class: &str, id: Option<&str>) {
        match id {
            Some(id) => {
                let _ = writeln!(self.buf, r#"<g class="{}" id="{}">"#, esc(class), esc(id));
            }
            None => {
                let _ = writeln!(self.buf, r#"<g class="{}">"#, esc(class));
            }
        }
    }

    pub fn close_group(&mut self) {
        self.buf.push_str("</g>\n");
    }

    #[allow(clippy::too_many_arguments)]
    pub fn text(
        &mut self,
        x: f64,
        y: f64,
        s: &str,
        font_size: f64,
        anchor: Anchor,
        class: &str,
        extra: &str,
    ) {
        let _ = writeln!(
            self.buf,
            r#"<text class="{}" x="{}" y="{}" font-size="{}" text-anchor="{}"{}{}>{}</text>"#,
            esc(class),
            n(x),
            n(y),
            n(font_size),
            anchor.attr(),
            if extra.is_empty() { "" } else { " " },
            extra,
            esc(s)
        );
    }

    /// Text turned 90° counter-clockwise around its anchor (a vertical axis title).
    pub fn vtext(&mut self, x: f64, y: f64, s: &str, font_size: f64, class: &str) {
        let extra = format!(r#"transform="rotate(-90 {} {})""#, n(x), n(y));
        self.text(x, y, s, font_size, Anchor::Middle, class, &extra);
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, class: &str, stroke: &str) {
        let _ = writeln!(
            self.buf,
            r#"<line class="{}" x1="{}" y1="{}" x2="{}" y2="{}" {stroke}/>"#,
            esc(class),
            n(x1),
            n(y1),
            n(x2),
            n(y2)
        );
    }

    /// An open polyline; `attrs` carries stroke, dash and `data-` attributes.
    pub fn polyline(&mut self, pts: &[(f64, f64)], class: &str, attrs: &str) {
        if pts.is_empty() {
            return;
        }
        let p: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{},{}", n(*x), n(*y)))
            .collect();
        let _ = writeln!(
            self.buf,
            r#"<polyline class="{}" points="{}" fill="none" {attrs}/>"#,
            esc(class),
            p.join(" ")
        );
    }

    /// A closed filled polygon.
    pub fn polygon(&mut self, pts: &[(f64, f64)], class: &str, attrs: &str) {
        let p: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{},{}", n(*x), n(*y)))
            .collect();
        let _ = writeln!(
            self.buf,
            r#"<polygon class="{}" points="{}" {attrs}/>"#,
            esc(class),
            p.join(" ")
        );
    }

    #[allow(clippy::too_many_arguments)]
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, class: &str, attrs: &str, tip: &str) {
        let body = if tip.is_empty() {
            "/>".to_string()
        } else {
            format!("><title>{}</title></rect>", esc(tip))
        };
        let _ = writeln!(
            self.buf,
            r#"<rect class="{}" x="{}" y="{}" width="{}" height="{}" {attrs}{body}"#,
            esc(class),
            n(x),
            n(y),
            n(w.max(0.0)),
            n(h.max(0.0))
        );
    }

    /// A marker of `style`'s shape centred on (x, y), radius `r`; `tip` becomes a hover title.
    #[allow(clippy::too_many_arguments)]
    pub fn marker(
        &mut self,
        x: f64,
        y: f64,
        r: f64,
        style: Style,
        shape: Shape,
        filled: bool,
        class: &str,
        data: &str,
        tip: &str,
    ) {
        let c = style.color();
        let fill = if filled {
            format!(r#"fill="{c}" fill-opacity="0.85""#)
        } else {
            r##"fill="#ffffff""##.to_string()
        };
        let paint = format!(r#"{fill} stroke="{c}" stroke-width="1.4""#);
        let d = match shape {
            Shape::Circle => None,
            Shape::Square => {
                let a = r * 0.88;
                Some(format!(
                    "M{} {}H{}V{}H{}Z",
                    n(x - a),
                    n(y - a),
                    n(x + a),
                    n(y + a),
                    n(x - a)
                ))
            }
            Shape::TriangleUp => Some(format!(
                "M{} {}L{} {}L{} {}Z",
                n(x),
                n(y - r * 1.15),
                n(x + r * 1.05),
                n(y + r * 0.8),
                n(x - r * 1.05),
                n(y + r * 0.8)
            )),
            Shape::TriangleDown => Some(format!(
                "M{} {}L{} {}L{} {}Z",
                n(x),
                n(y + r * 1.15),
                n(x + r * 1.05),
                n(y - r * 0.8),
                n(x - r * 1.05),
                n(y - r * 0.8)
            )),
            Shape::Diamond => Some(format!(
                "M{} {}L{} {}L{} {}L{} {}Z",
                n(x),
                n(y - r * 1.2),
                n(x + r * 1.2),
                n(y),
                n(x),
                n(y + r * 1.2),
                n(x - r * 1.2),
                n(y)
            )),
            Shape::Plus => Some(format!(
                "M{} {}H{}M{} {}V{}",
                n(x - r * 1.1),
                n(y),
                n(x + r * 1.1),
                n(x),
                n(y - r * 1.1),
                n(y + r * 1.1)
            )),
            Shape::Cross => Some(format!(
                "M{} {}L{} {}M{} {}L{} {}",
                n(x - r),
                n(y - r),
                n(x + r),
                n(y + r),
                n(x - r),
                n(y + r),
                n(x + r),
                n(y - r)
            )),
            Shape::Star => {
                let mut d = String::new();
                for k in 0..10 {
                    let a = std::f64::consts::PI * (k as f64) / 5.0 - std::f64::consts::FRAC_PI_2;
                    let rr = if k % 2 == 0 { r * 1.3 } else { r * 0.55 };
                    let _ = write!(
                        d,
                        "{}{} {}",
                        if k == 0 { "M" } else { "L" },
                        n(x + rr * a.cos()),
                        n(y + rr * a.sin())
                    );
                }
                d.push('Z');
                Some(d)
            }
        };
        // Open shapes (plus, cross) are strokes only; make them bolder.
        let paint = if matches!(shape, Shape::Plus | Shape::Cross) {
            format!(r#"fill="none" stroke="{c}" stroke-width="2.2""#)
        } else {
            paint
        };
        let sp = if data.is_empty() { "" } else { " " };
        let body = if tip.is_empty() {
            "/>".to_string()
        } else {
            format!(
                "><title>{}</title></{}>",
                esc(tip),
                if d.is_some() { "path" } else { "circle" }
            )
        };
        match d {
            None => {
                let _ = writeln!(
                    self.buf,
                    r#"<circle class="{}" data-shape="circle" cx="{}" cy="{}" r="{}" {paint}{sp}{data}{body}"#,
                    esc(class),
                    n(x),
                    n(y),
                    n(r)
                );
            }
            Some(d) => {
                let _ = writeln!(
                    self.buf,
                    r#"<path class="{}" data-shape="{}" d="{d}" {paint}{sp}{data}{body}"#,
                    esc(class),
                    shape.name()
                );
            }
        }
    }

    /// Draw the frame's grid, axes, ticks, tick labels and axis titles.
    pub fn axes(&mut self, f: &Frame) {
        self.axes_with(f, true)
    }

    /// [`Doc::axes`], without the x axis's ticks, grid and title when `x` is false (categories).
    pub fn axes_with(&mut self, f: &Frame, x: bool) {
        let r = f.rect;
        self.buf.push_str("<g class=\"grid\">\n");
        for v in f.x.minor() {
            if f.x.contains(v) {
                let x = f.px(v);
                self.line(x, r.y, x, r.bottom(), "grid-minor", r##"stroke="#eeeeee""##);
            }
        }
        for v in f.y.minor() {
            if f.y.contains(v) {
                let y = f.py(v);
                self.line(r.x, y, r.right(), y, "grid-minor", r##"stroke="#eeeeee""##);
            }
        }
        let xt = if x { f.x.ticks() } else { Vec::new() };
        for (v, _) in &xt {
            let x = f.px(*v);
            self.line(x, r.y, x, r.bottom(), "grid-major", r##"stroke="#d0d0d0""##);
        }
        for (v, _) in f.y.ticks() {
            let y = f.py(v);
            self.line(r.x, y, r.right(), y, "grid-major", r##"stroke="#d0d0d0""##);
        }
        self.buf.push_str("</g>\n");
        self.buf.push_str("<g class=\"axes\">\n");
        self.rect(
            r.x,
            r.y,
            r.w,
            r.h,
            "plot-area",
            r##"fill="none" stroke="#333333""##,
            "",
        );
        for (v, label) in xt {
            let x = f.px(v);
            self.line(
                x,
                r.bottom(),
                x,
                r.bottom() + 4.0,
                "tick",
                r##"stroke="#333333""##,
            );
            self.text(
                x,
                r.bottom() + 16.0,
                &label,
                11.0,
                Anchor::Middle,
                "tick-label x",
                "",
            );
        }
        for (v, label) in f.y.ticks() {
            let y = f.py(v);
            self.line(r.x - 4.0, y, r.x, y, "tick", r##"stroke="#333333""##);
            self.text(
                r.x - 7.0,
                y + 4.0,
                &label,
                11.0,
                Anchor::End,
                "tick-label y",
                "",
            );
        }
        let scale = |a: &Axis| {
            if a.kind == ScaleKind::Log {
                " (log)"
            } else {
                ""
            }
        };
        let xtitle = format!("{}{}", f.x.title, scale(&f.x));
        let yt = format!("{}{}", f.y.title, scale(&f.y));
        if x {
            self.text(
                r.x + r.w / 2.0,
                r.bottom() + 36.0,
                &xtitle,
                12.0,
                Anchor::Middle,
                "axis-title x",
                "",
            );
        }
        let ylab_w =
            f.y.ticks()
                .iter()
                .map(|(_, l)| text_width(l, 11.0))
                .fold(0.0, f64::max);
        self.vtext(
            r.x - ylab_w - 18.0,
            r.y + r.h / 2.0,
            &yt,
            12.0,
            "axis-title y",
        );
        self.buf.push_str("</g>\n");
    }

    /// The picture's title, centred at the top, broken into as many lines (up to three) as its
    /// width needs rather than cut; returns how much lower than a one-line title it ends, which
    /// each plot adds to the top of what it draws below (also kept in [`Doc::title_dy`]).
    pub fn title(&mut self, s: &str) -> f64 {
        let w = self.size.width as f64;
        // Bold type is about a fifth wider than the estimate for regular type.
        let lines = super::base::fit_lines(s, 15.0 * 1.2, w - 24.0, 3);
        for (i, line) in lines.iter().enumerate() {
            self.text(
                w / 2.0,
                22.0 + TITLE_LINE * i as f64,
                line,
                15.0,
                Anchor::Middle,
                "title",
                r#"font-weight="bold""#,
            );
        }
        self.title_dy = TITLE_LINE * lines.len().saturating_sub(1) as f64;
        self.title_dy
    }

    /// A note in small grey type.
    pub fn note(&mut self, x: f64, y: f64, s: &str, anchor: Anchor) {
        self.text(x, y, s, 10.0, anchor, "note", r##"fill="#555555""##);
    }

    /// Close the document and write it out.
    pub fn finish(mut self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        self.buf.push_str("</svg>\n");
        out.write_all(self.buf.as_bytes())
    }
}

/// Greys of the category textures (`shade-i`).
const SHADES: [&str; 6] = [
    "#444444", "#666666", "#555555", "#777777", "#333333", "#888888",
];

/// How reference lines (ideal scaling, 100 %) are drawn, and shown in legends.
pub(crate) const REFERENCE_STROKE: &str =
    r##"stroke="#444444" stroke-width="1.2" stroke-dasharray="7 4""##;

/// Stroke attributes of a series line.
pub(crate) fn stroke(style: Style, width: f64) -> String {
    let dash = style.dash();
    if dash.is_empty() {
        format!(r#"stroke="{}" stroke-width="{width}""#, style.color())
    } else {
        format!(
            r#"stroke="{}" stroke-width="{width}" stroke-dasharray="{dash}""#,
            style.color()
        )
    }
}
