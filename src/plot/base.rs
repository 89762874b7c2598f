//! What every plot is drawn with: the picture's size and rectangles, series styles (colour,
//! marker, dash, hatch), number and text layout, label placement and legend entries. A leaf, so
//! that the axes, the SVG writer and each plot use it without importing `plot/mod.rs`, which
//! re-exports it.

use std::fmt;
use std::str::FromStr;

/// Picture size in pixels (SVG user units), as `WIDTHxHEIGHT` on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    pub width: u32,
    pub height: u32,
}

impl Default for Size {
    fn default() -> Self {
        Size {
            width: 800,
            height: 500,
        }
    }
}

impl FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Size, String> {
        let bad = || format!("`{s}` is not a size: expected WIDTHxHEIGHT in pixels, e.g. 800x500");
        let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
        let w: u32 = w.trim().parse().map_err(|_| bad())?;
        let h: u32 = h.trim().parse().map_err(|_| bad())?;
        if !(200..=10_000).contains(&w) || !(150..=10_000).contains(&h) {
            return Err(format!(
                "`{s}`: width must be 200–10000 and height 150–10000 pixels"
            ));
        }
        Ok(Size {
            width: w,
            height: h,
        })
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// A rectangle in picture coordinates (y grows downwards).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl Rect {
    pub fn right(&self) -> f64 {
        self.x + self.w
    }
    pub fn bottom(&self) -> f64 {
        self.y + self.h
    }
}

/// Marker shapes, in the order series take them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Circle,
    Square,
    TriangleUp,
    Diamond,
    TriangleDown,
    Plus,
    Cross,
    Star,
}

impl Shape {
    pub const ALL: [Shape; 8] = [
        Shape::Circle,
        Shape::Square,
        Shape::TriangleUp,
        Shape::Diamond,
        Shape::TriangleDown,
        Shape::Plus,
        Shape::Cross,
        Shape::Star,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Shape::Circle => "circle",
            Shape::Square => "square",
            Shape::TriangleUp => "triangle-up",
            Shape::Diamond => "diamond",
            Shape::TriangleDown => "triangle-down",
            Shape::Plus => "plus",
            Shape::Cross => "cross",
            Shape::Star => "star",
        }
    }
}

/// Colours that stay apart for colour-blind readers (Okabe and Ito), darkest first.
const COLORS: [&str; 7] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
];

/// Dash patterns (SVG `stroke-dasharray`; empty is solid).
const DASHES: [&str; 6] = ["", "7 4", "2 3", "9 3 2 3", "4 2", "1 4"];

/// How series number `i` is drawn: colour, marker, dash and hatching all change with `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    pub index: usize,
}

impl Style {
    pub fn nth(i: usize) -> Style {
        Style { index: i }
    }
    pub fn color(&self) -> &'static str {
        COLORS[self.index % COLORS.len()]
    }
    pub fn shape(&self) -> Shape {
        Shape::ALL[self.index % Shape::ALL.len()]
    }
    pub fn dash(&self) -> &'static str {
        DASHES[self.index % DASHES.len()]
    }
    /// The id of the hatch pattern bars of this series are filled with (see
    /// [`Doc::hatches`](crate::plot::Doc::hatches)).
    pub fn hatch_id(&self) -> String {
        format!("hatch-{}", self.index % HATCHES)
    }
    /// The grey texture of this index (categories of stacked bars).
    pub fn shade_id(&self) -> String {
        format!("shade-{}", self.index % HATCHES)
    }
}

/// Number of distinct hatch patterns.
pub const HATCHES: usize = 6;

/// A number for a label: SI prefix, three significant digits, no trailing noise.
pub fn si(v: f64, unit: &str) -> String {
    let s = crate::units::fmt_si(v, unit);
    s.trim_end().to_string()
}

/// A compact tick label: `1k`, `10M`, `0.1`, `250`.
pub fn tick_label(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    let (scale, p) = match crate::units::si_prefix(a) {
        (_, "f") => (1e-12, "p"),
        (s, "u") => (s, "µ"),
        x => x,
    };
    let x = v / scale;
    let mut s = format!("{x:.2}");
    while s.contains('.') && (s.ends_with('0') || s.ends_with('.')) {
        s.pop();
    }
    // Values below one without a prefix read better as decimals: 0.1, 0.5.
    if p == "m" && a >= 0.01 {
        let mut d = format!("{v:.3}");
        while d.contains('.') && (d.ends_with('0') || d.ends_with('.')) {
            d.pop();
        }
        return d;
    }
    format!("{s}{p}")
}

/// Rough width of `text` at `font_size` in sans-serif (for layout only; the viewer draws it).
pub fn text_width(text: &str, font_size: f64) -> f64 {
    text.chars()
        .map(|c| match c {
            'i' | 'l' | 'j' | 'I' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' => 0.3,
            't' | 'f' | 'r' => 0.42,
            ' ' => 0.32,
            '(' | ')' | '[' | ']' | '-' | '/' => 0.4,
            'm' | 'w' | 'M' | 'W' => 0.9,
            c if c.is_ascii_uppercase() => 0.7,
            c if c.is_ascii_digit() => 0.62,
            c if c.is_ascii_lowercase() => 0.58,
            _ => 0.75,
        })
        .sum::<f64>()
        * font_size
}

/// Shorten `text` to at most `max` characters, ending in an ellipsis when cut.
pub fn ellipsize(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// Break `text` at spaces into at most `lines` lines of about `chars` characters; the last is
/// shortened with an ellipsis when the text does not fit.
pub fn wrap(text: &str, chars: usize, lines: usize) -> Vec<String> {
    let chars = chars.max(4);
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > chars {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    if out.len() > lines {
        let rest = out[lines - 1..].join(" ");
        out.truncate(lines - 1);
        out.push(rest);
    }
    out.into_iter().map(|l| ellipsize(&l, chars)).collect()
}

/// Break `text` at spaces into lines no wider than `width` at `font_size` (by [`text_width`]),
/// at most `lines` of them; a word wider than the line stands on its own line, and the last line
/// is shortened with an ellipsis only when the text needs more lines than that.
pub fn fit_lines(text: &str, font_size: f64, width: f64, lines: usize) -> Vec<String> {
    let lines = lines.max(1);
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        let joined = if cur.is_empty() {
            word.to_string()
        } else {
            format!("{cur} {word}")
        };
        if !cur.is_empty() && text_width(&joined, font_size) > width {
            out.push(std::mem::replace(&mut cur, word.to_string()));
        } else {
            cur = joined;
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    if out.len() > lines {
        let mut last = out[lines - 1..].join(" ");
        out.truncate(lines - 1);
        while text_width(&format!("{last}…"), font_size) > width && last.chars().count() > 1 {
            last.pop();
        }
        out.push(format!("{}…", last.trim_end()));
    }
    out
}

/// Places small labels next to marks so that they overlap each other as little as it can: each
/// label takes the first free spot of a few around its mark, else the first spot.
#[derive(Default)]
pub struct LabelPlacer {
    boxes: Vec<(f64, f64, f64, f64)>,
}

impl LabelPlacer {
    /// Where to put a label of `width` × `height` next to a mark at (x, y), inside `bounds`:
    /// the text's anchor point and whether it is anchored at its start (else its end). When
    /// every spot is taken it still places the label (on the first spot inside).
    pub fn place(
        &mut self,
        x: f64,
        y: f64,
        width: f64,
        height: f64,
        bounds: Rect,
    ) -> (f64, f64, bool) {
        let (free, inside) = self.spots(x, y, width, height, bounds);
        let (tx, ty, start, b) = free.or(inside).unwrap_or((
            x + 6.0,
            y - 5.0,
            true,
            (x + 6.0, y - 5.0 - height, x + 6.0 + width, y - 3.0),
        ));
        self.boxes.push(b);
        (tx, ty, start)
    }

    /// As [`LabelPlacer::place`], but only on a spot inside `bounds` that no label placed
    /// before overlaps; `None` (and nothing taken) when there is none.
    pub fn try_place(
        &mut self,
        x: f64,
        y: f64,
        width: f64,
        height: f64,
        bounds: Rect,
    ) -> Option<(f64, f64, bool)> {
        let (tx, ty, start, b) = self.spots(x, y, width, height, bounds).0?;
        self.boxes.push(b);
        Some((tx, ty, start))
    }

    /// Keep the box (left, top, right, bottom) free of labels placed after it (a mark's own
    /// text, a note).
    pub fn reserve(&mut self, b: (f64, f64, f64, f64)) {
        self.boxes.push(b);
    }

    /// The first free spot inside `bounds` and the first spot inside at all.
    #[allow(clippy::type_complexity)]
    fn spots(
        &self,
        x: f64,
        y: f64,
        width: f64,
        height: f64,
        bounds: Rect,
    ) -> (Option<Spot>, Option<Spot>) {
        let spots = [
            (6.0, -5.0, true),
            (6.0, 12.0, true),
            (-6.0, -5.0, false),
            (-6.0, 12.0, false),
            (6.0, -16.0, true),
            (-6.0, -16.0, false),
            (6.0, 23.0, true),
            (-6.0, 23.0, false),
            (14.0, 3.0, true),
            (-14.0, 3.0, false),
        ];
        let mut first_inside = None;
        for (dx, dy, start) in spots {
            let (tx, ty) = (x + dx, y + dy);
            let x0 = if start { tx } else { tx - width };
            let b = (x0, ty - height, x0 + width, ty + 2.0);
            let inside = b.0 >= bounds.x
                && b.2 <= bounds.right()
                && b.1 >= bounds.y
                && b.3 <= bounds.bottom();
            let free = !self
                .boxes
                .iter()
                .any(|o| b.0 < o.2 && o.0 < b.2 && b.1 < o.3 && o.1 < b.3);
            if inside && free {
                return (
                    Some((tx, ty, start, b)),
                    first_inside.or(Some((tx, ty, start, b))),
                );
            }
            if first_inside.is_none() && inside {
                first_inside = Some((tx, ty, start, b));
            }
        }
        (None, first_inside)
    }
}

/// A label's spot: anchor x, y, anchored at its start, and its box.
type Spot = (f64, f64, bool, (f64, f64, f64, f64));

/// One entry of a legend: a label drawn with a series' marker, line or hatch.
#[derive(Clone, Debug)]
pub struct LegendEntry {
    pub label: String,
    pub style: Style,
    pub kind: LegendKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LegendKind {
    /// Marker only.
    Marker,
    /// Line with marker.
    Line,
    /// A dashed reference line (ideal scaling, 100 %), whatever the style.
    Dash,
    /// A hatched box in the series colour (bars).
    Swatch,
    /// A hatched box in greys (categories of stacked bars).
    Shade,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_parses() {
        assert_eq!(
            "800x500".parse::<Size>().unwrap(),
            Size {
                width: 800,
                height: 500
            }
        );
        assert!("800".parse::<Size>().is_err());
        assert!("10x10".parse::<Size>().is_err());
    }

    #[test]
    fn ticks_read_well() {
        assert_eq!(tick_label(1000.0), "1k");
        assert_eq!(tick_label(0.1), "0.1");
        assert_eq!(tick_label(2.5e15), "2.5P");
        assert_eq!(tick_label(1.0), "1");
        assert_eq!(tick_label(0.001), "1m");
    }

    #[test]
    fn lines_fit_their_width() {
        // Hand-checked: "aaaa bbbb" is 8 × 0.58 + 0.32 = 4.96 font sizes, 49.6 px at 10 px.
        let t = "aaaa bbbb cccc dddd";
        assert_eq!(fit_lines(t, 10.0, 1000.0, 3), vec![t.to_string()]);
        assert_eq!(
            fit_lines(t, 10.0, 50.0, 3),
            vec!["aaaa bbbb".to_string(), "cccc dddd".to_string()]
        );
        for l in fit_lines(t, 10.0, 50.0, 3) {
            assert!(text_width(&l, 10.0) <= 50.0, "{l}");
        }
        // Too long for the lines allowed: the last is cut, with an ellipsis, within the width.
        let cut = fit_lines(t, 10.0, 30.0, 2);
        assert_eq!(cut.len(), 2);
        assert_eq!(cut[0], "aaaa");
        assert!(
            cut[1].ends_with('…') && text_width(&cut[1], 10.0) <= 30.0,
            "{cut:?}"
        );
    }
}
