//! A comparison as pictures: grouped bars of throughput, performance per watt and energy, each
//! as a ratio to the baseline system; and stacked bars of where each system's time goes, per unit
//! of work (so faster systems have shorter bars).
//!
//! Classes: `bar` (one per system and metric with a value; `data-system`, `data-metric`),
//! `segment` (one per system and non-zero time category; `data-system`, `data-category`),
//! `bar-label`, `category-label`, `infeasible`.

use super::svg::legend::flow_height;
use super::svg::{Anchor, Frame};
use super::{si, wrap, Axis, Doc, LegendEntry, LegendKind, Rect, Size, Style};
use crate::report::compare::Comparison;

/// The time categories of a step, in stacking order.
pub const CATEGORIES: [&str; 5] = ["compute", "memory", "communication", "bubble", "other"];

/// Write `c` as SVG: ratios to the baseline on the left, time per unit of work on the right.
pub fn compare(c: &Comparison, size: Size, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let (w, h) = (size.width as f64, size.height as f64);
    let mut doc = Doc::new(
        size,
        &format!("Comparison on {} (baseline {})", c.workload, c.baseline),
        "tessera-plot compare",
    );
    doc.hatches();
    let dy = doc.title(&format!("{} — systems against {}", c.workload, c.baseline));

    let systems: Vec<LegendEntry> = c
        .systems
        .iter()
        .enumerate()
        .map(|(i, r)| LegendEntry {
            label: r.estimate.system.clone(),
            style: Style::nth(i),
            kind: LegendKind::Swatch,
        })
        .collect();
    let lw = w - 40.0;
    let lh = flow_height(lw, &systems);
    doc.legend_flow(20.0, 34.0 + dy, lw, &systems);

    let top = 34.0 + dy + lh + 16.0;
    let split = (w * 0.56).round();
    // The categories' legend goes under the right panel; where it needs more than two rows
    // (a narrow picture) the panels end higher.
    let cats: Vec<LegendEntry> = CATEGORIES
        .iter()
        .enumerate()
        .map(|(k, c)| LegendEntry {
            label: c.to_string(),
            style: Style::nth(k),
            kind: LegendKind::Shade,
        })
        .collect();
    let cats_x = split + 62.0 - 40.0;
    let cats_w = w - cats_x - 10.0;
    let cats_h = flow_height(cats_w, &cats);
    let bottom = h - 80.0 - (cats_h - 34.0).max(0.0);
    let left = Rect {
        x: 66.0,
        y: top,
        w: split - 66.0 - 16.0,
        h: (bottom - top).max(60.0),
    };
    let right = Rect {
        x: split + 62.0,
        y: top,
        w: w - split - 62.0 - 16.0,
        h: (bottom - top).max(60.0),
    };

    // Left: ratios to the baseline, grouped by metric.
    let per_unit = c
        .systems
        .iter()
        .all(|r| r.estimate.time_to_train_s.is_none());
    let metrics: [(&str, String); 3] = [
        ("throughput", "throughput".into()),
        ("perf_per_watt", "perf per watt".into()),
        (
            "energy",
            if per_unit {
                "energy per unit".into()
            } else {
                "energy (run)".into()
            },
        ),
    ];
    let value = |i: usize, k: &str| -> Option<f64> {
        let r = &c.systems[i].ratio_to_baseline;
        match k {
            "throughput" => r.throughput,
            "perf_per_watt" => r.perf_per_watt,
            _ if per_unit => r.energy_per_unit,
            _ => r.energy,
        }
    };
    let ns = c.systems.len().max(1);
    let mut vals = vec![1.0];
    for i in 0..c.systems.len() {
        for (k, _) in &metrics {
            vals.extend(value(i, k));
        }
    }
    let fl = Frame {
        rect: left,
        x: Axis::linear("", [0.0, 3.0], false),
        y: Axis::linear("ratio to baseline (×)", vals, true),
    };
    doc.axes_with(&fl, false);
    // The baseline's level.
    doc.line(
        left.x,
        fl.py(1.0),
        left.right(),
        fl.py(1.0),
        "baseline-line",
        r##"stroke="#333333" stroke-dasharray="5 3""##,
    );
    let gw = left.w / metrics.len() as f64;
    let bw = (gw * 0.8 / ns as f64).min(60.0);
    doc.open_group("bars", None);
    for (g, (key, label)) in metrics.iter().enumerate() {
        let gx = left.x + gw * g as f64 + (gw - bw * ns as f64) / 2.0;
        for (i, r) in c.systems.iter().enumerate() {
            let x = gx + bw * i as f64;
            let s = Style::nth(i);
            match value(i, key) {
                Some(v) => {
                    let y = fl.py(v);
                    doc.rect(
                        x,
                        y,
                        bw - 2.0,
                        fl.py(0.0) - y,
                        "bar",
                        &format!(
                            r#"fill="url(#{})" stroke="{}" data-system="{}" data-metric="{key}""#,
                            s.hatch_id(),
                            s.color(),
                            i
                        ),
                        &format!("{}: {label} {v:.2}×", r.estimate.system),
                    );
                    doc.text(
                        x + (bw - 2.0) / 2.0,
                        y - 3.0,
                        &format!("{v:.2}×"),
                        if bw > 34.0 { 10.0 } else { 9.0 },
                        Anchor::Middle,
                        "bar-label",
                        "",
                    );
                }
                None => doc.text(
                    x + (bw - 2.0) / 2.0,
                    fl.py(0.0) - 4.0,
                    "n/a",
                    9.0,
                    Anchor::Middle,
                    "infeasible",
                    r##"fill="#B00000""##,
                ),
            }
        }
        doc.text(
            left.x + gw * (g as f64 + 0.5),
            left.bottom() + 16.0,
            label,
            11.0,
            Anchor::Middle,
            "category-label",
            "",
        );
    }
    doc.close_group();
    doc.note(
        left.x + left.w / 2.0,
        left.bottom() + 32.0,
        "higher is better except energy",
        Anchor::Middle,
    );

    time_per_unit(&mut doc, c, right, ns);
    doc.legend_flow(cats_x, h - 2.0 - cats_h.max(34.0), cats_w, &cats);
    doc.finish(out)
}

/// The right panel: each system's time per unit of work, stacked by category (compute, memory,
/// communication, bubble, other) on one axis in a readable unit, the system's name under its
/// bar; "infeasible" where a system has no step.
fn time_per_unit(doc: &mut Doc, c: &Comparison, right: Rect, ns: usize) {
    // Right: time per unit of work by category.
    let unit = c
        .systems
        .first()
        .map(|r| r.estimate.throughput_unit.trim_end_matches('s'))
        .unwrap_or("unit");
    let parts: Vec<Option<[f64; 5]>> = c
        .systems
        .iter()
        .map(|r| {
            let e = &r.estimate;
            let (b, t, thr) = (e.breakdown_s?, e.step_time_s?, e.throughput_per_s?);
            if !(t > 0.0 && thr > 0.0) {
                return None;
            }
            // seconds of the step per unit of work: category / step time / throughput
            let k = 1.0 / (t * thr);
            Some([
                b.compute * k,
                b.memory * k,
                b.communication * k,
                b.bubble * k,
                b.other * k,
            ])
        })
        .collect();
    let totals: Vec<f64> = parts.iter().flatten().map(|p| p.iter().sum()).collect();
    let tmax = totals.iter().copied().fold(0.0, f64::max);
    // Pick a readable unit for the y axis.
    let (scale, prefix) = [
        (1.0, ""),
        (1e-3, "m"),
        (1e-6, "µ"),
        (1e-9, "n"),
        (1e-12, "p"),
    ]
    .into_iter()
    .find(|(s, _)| tmax >= *s)
    .unwrap_or((1e-12, "p"));
    let fr = Frame {
        rect: right,
        x: Axis::linear("", [0.0, 1.0], false),
        y: Axis::linear(
            &format!("time per {unit} ({prefix}s)"),
            totals.iter().map(|t| t / scale),
            true,
        ),
    };
    doc.axes_with(&fr, false);
    let sw = right.w / ns as f64;
    let bw2 = (sw * 0.6).min(70.0);
    doc.open_group("stacks", None);
    for (i, r) in c.systems.iter().enumerate() {
        let x = right.x + sw * i as f64 + (sw - bw2) / 2.0;
        match &parts[i] {
            Some(p) => {
                let mut acc = 0.0;
                for (k, cat) in CATEGORIES.iter().enumerate() {
                    let v = p[k] / scale;
                    if v <= 0.0 {
                        continue;
                    }
                    let (y0, y1) = (fr.py(acc), fr.py(acc + v));
                    let s = Style::nth(k);
                    doc.rect(
                        x,
                        y1,
                        bw2,
                        y0 - y1,
                        "segment",
                        &format!(
                            r##"fill="url(#{})" stroke="#333333" stroke-width="0.6" data-system="{i}" data-category="{cat}""##,
                            s.shade_id()
                        ),
                        &format!(
                            "{}: {cat} {} per {unit}",
                            r.estimate.system,
                            si(p[k], "s")
                        ),
                    );
                    acc += v;
                }
                doc.text(
                    x + bw2 / 2.0,
                    fr.py(acc) - 3.0,
                    &si(acc * scale, "s"),
                    10.0,
                    Anchor::Middle,
                    "bar-label",
                    "",
                );
            }
            None => doc.text(
                x + bw2 / 2.0,
                fr.py(0.0) - 4.0,
                "infeasible",
                10.0,
                Anchor::Middle,
                "infeasible",
                r##"fill="#B00000""##,
            ),
        }
        // System under its bar, in its series colour, on up to two lines.
        let chars = ((sw - 4.0) / 6.0).max(4.0) as usize;
        for (k, line) in wrap(&r.estimate.system, chars, 2).iter().enumerate() {
            doc.text(
                x + bw2 / 2.0,
                right.bottom() + 15.0 + 12.0 * k as f64,
                line,
                10.0,
                Anchor::Middle,
                "category-label",
                &format!(r#"fill="{}""#, Style::nth(i).color()),
            );
        }
    }
    doc.close_group();
}
