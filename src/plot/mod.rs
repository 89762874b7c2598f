//! Pictures of reports as SVG text: rooflines, comparisons, scaling curves, sweep clouds and
//! validation scatters. Each plot takes report data and a [`Size`] and writes SVG to any
//! [`std::io::Write`]; nothing here touches the file system.
//!
//! The SVG is written by hand rather than through a plotting crate: every mark carries a `class`
//! (`point`, `bar`, `segment`, `roof`, `ceiling`, …) so tests and stylesheets can find it, text is
//! plain `<text>` with the generic `font-family="sans-serif"` (no font is looked up at generation
//! time; the viewer renders it), and numbers are written with fixed precision so the same report
//! always gives the same bytes. Series differ by marker shape, dash pattern and hatching as well
//! as colour, so the pictures read in black and white.

mod axis;
mod base;
pub mod compare;
pub mod cost;
pub mod curve;
pub mod goodput;
pub mod placement;
pub mod roofline;
pub mod scale;
mod svg;
pub mod sweep;
pub mod validate;

pub use axis::{Axis, ScaleKind};
pub use base::{
    ellipsize, fit_lines, si, text_width, tick_label, wrap, LabelPlacer, LegendEntry, LegendKind,
    Rect, Shape, Size, Style, HATCHES,
};
pub use svg::Doc;
