//! A design-space sweep as a picture: every evaluated point on two metrics, the Pareto front
//! highlighted and joined, and the best point by the sweep's objective named.
//!
//! The input is a small struct of its own ([`SweepPlot`]) so the sweep report can fill it from
//! whatever it keeps. Classes: `point` (one per point shown that is not on the front),
//! `front-point` (one per front point), `front` (the line joining them), `best`, `best-label`.

use super::svg::{stroke, Anchor, Frame};
use super::{ellipsize, Axis, Doc, LegendEntry, LegendKind, Rect, Size, Style};
use serde::Serialize;

/// One metric on one axis.
#[derive(Debug, Clone, Serialize)]
pub struct Dim {
    /// Axis title with unit, e.g. `throughput (tokens/s)`.
    pub title: String,
    pub higher_is_better: bool,
    pub log: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    /// What the point is (its design values), for hover titles and the best point's label.
    pub label: String,
    pub x: f64,
    pub y: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepPlot {
    pub title: String,
    pub x: Dim,
    pub y: Dim,
    /// Feasible points only.
    pub points: Vec<SweepPoint>,
    /// Indices into `points` of the Pareto front; computed from the points when `None`.
    pub front: Option<Vec<usize>>,
    /// Index of the best point by the sweep's objective, and the objective's name.
    pub best: Option<(usize, String)>,
}

/// Most points drawn one by one; beyond that an evenly spaced subset (the front and the best
/// point always among them), so a million-point sweep still gives a picture a browser opens.
pub const MAX_POINTS: usize = 5000;

/// Indices of the points no other point beats on both metrics, ordered by x.
pub fn pareto_front(points: &[SweepPoint], x_hib: bool, y_hib: bool) -> Vec<usize> {
    let key = |p: &SweepPoint| {
        (
            if x_hib { p.x } else { -p.x },
            if y_hib { p.y } else { -p.y },
        )
    };
    let mut idx: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].x.is_finite() && points[i].y.is_finite())
        .collect();
    // Best x first; among equal x, best y first. Sweep keeping the best y seen.
    idx.sort_by(|&a, &b| {
        let (ka, kb) = (key(&points[a]), key(&points[b]));
        kb.0.total_cmp(&ka.0)
            .then(kb.1.total_cmp(&ka.1))
            .then(a.cmp(&b))
    });
    let mut front = Vec::new();
    let mut best_y = f64::NEG_INFINITY;
    for i in idx {
        let (_, y) = key(&points[i]);
        if y > best_y {
            front.push(i);
            best_y = y;
        }
    }
    front.sort_by(|&a, &b| points[a].x.total_cmp(&points[b].x).then(a.cmp(&b)));
    front
}

/// The indices of the points a plot of `p` draws: all of them up to [`MAX_POINTS`], else an
/// evenly spaced subset plus the front and the best point.
pub fn shown(p: &SweepPlot, front: &[usize]) -> Vec<usize> {
    let n = p.points.len();
    if n <= MAX_POINTS {
        return (0..n).collect();
    }
    let mut keep = vec![false; n];
    let step = n as f64 / MAX_POINTS as f64;
    for k in 0..MAX_POINTS {
        keep[((k as f64) * step) as usize] = true;
    }
    for &i in front {
        keep[i] = true;
    }
    if let Some((b, _)) = &p.best {
        if *b < n {
            keep[*b] = true;
        }
    }
    (0..n).filter(|&i| keep[i]).collect()
}

fn axis(d: &Dim, v: impl IntoIterator<Item = f64>) -> Axis {
    if d.log {
        Axis::log(&d.title, v)
    } else {
        Axis::linear(&d.title, v, false)
    }
}

/// Write the sweep plot `p` as SVG.
pub fn sweep(p: &SweepPlot, size: Size, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let (w, h) = (size.width as f64, size.height as f64);
    let mut doc = Doc::new(size, &p.title, "tessera-plot sweep");
    let dy = doc.title(&p.title);
    let front = p
        .front
        .clone()
        .unwrap_or_else(|| pareto_front(&p.points, p.x.higher_is_better, p.y.higher_is_better));
    let show = shown(p, &front);
    let rect = Rect {
        x: 78.0,
        y: 48.0 + dy,
        w: w - 78.0 - 24.0,
        h: h - 48.0 - dy - 76.0,
    };
    let f = Frame {
        rect,
        x: axis(&p.x, p.points.iter().map(|q| q.x)),
        y: axis(&p.y, p.points.iter().map(|q| q.y)),
    };
    doc.axes(&f);
    let on_front: std::collections::BTreeSet<usize> = front.iter().copied().collect();
    let all = Style::nth(6);
    doc.open_group("points", None);
    for &i in &show {
        if on_front.contains(&i) {
            continue;
        }
        let q = &p.points[i];
        doc.marker(
            f.px(q.x),
            f.py(q.y),
            2.6,
            all,
            super::Shape::Circle,
            false,
            "point",
            &format!(r#"data-index="{i}""#),
            &q.label,
        );
    }
    doc.close_group();
    let fs = Style::nth(1);
    let line: Vec<(f64, f64)> = front
        .iter()
        .map(|&i| (f.px(p.points[i].x), f.py(p.points[i].y)))
        .collect();
    doc.polyline(&line, "front", &stroke(fs, 2.0));
    doc.open_group("front-points", None);
    for &i in &front {
        let q = &p.points[i];
        doc.marker(
            f.px(q.x),
            f.py(q.y),
            4.5,
            fs,
            fs.shape(),
            true,
            "front-point",
            &format!(r#"data-index="{i}""#),
            &q.label,
        );
    }
    doc.close_group();
    if let Some((b, metric)) = &p.best {
        if let Some(q) = p.points.get(*b) {
            let (bx, by) = (f.px(q.x), f.py(q.y));
            let bs = Style::nth(2);
            doc.marker(
                bx,
                by,
                7.0,
                bs,
                super::Shape::Star,
                false,
                "best",
                "",
                &q.label,
            );
            let label = ellipsize(&format!("best by {metric}: {}", q.label), 70);
            let right_half = bx > rect.x + rect.w / 2.0;
            let (tx, anchor) = if right_half {
                (bx - 12.0, Anchor::End)
            } else {
                (bx + 12.0, Anchor::Start)
            };
            let ty = if by < rect.y + 24.0 {
                by + 18.0
            } else {
                by - 10.0
            };
            doc.text(
                tx,
                ty,
                &label,
                11.0,
                anchor,
                "best-label",
                r#"font-weight="bold""#,
            );
        }
    }
    let better = |d: &Dim| {
        if d.higher_is_better {
            "higher"
        } else {
            "lower"
        }
    };
    let entries = vec![
        LegendEntry {
            label: format!("design points ({} of {} shown)", show.len(), p.points.len()),
            style: all,
            kind: LegendKind::Marker,
        },
        LegendEntry {
            label: format!("Pareto front ({} points)", front.len()),
            style: fs,
            kind: LegendKind::Line,
        },
    ];
    doc.legend_flow(rect.x, h - 26.0, rect.w, &entries);
    doc.note(
        rect.right(),
        40.0,
        &format!("better: {} x, {} y", better(&p.x), better(&p.y)),
        Anchor::End,
    );
    doc.finish(out)
}
