//! Time to train against device count, with and without failures (`scale --goodput`): per
//! system a solid line through the failure-free times to train and a dashed one through the
//! expected times with failures, checkpoints and restarts (`engine::goodput`), log-log; the gap
//! between them is what reliability costs at each scale.
//!
//! Classes: `series` (`data-kind` `ideal` or `failures`), `point` (`data-system`,
//! `data-devices`, `data-kind`).

use super::svg::legend::flow_height;
use super::svg::{Anchor, Frame};
use super::{Axis, Doc, LegendEntry, LegendKind, Rect, Size, Style};
use crate::report::compare::Scaling;

/// Each feasible point's (devices, failure-free time, expected time with failures).
fn points(x: &Scaling) -> Vec<(u64, f64, Option<f64>)> {
    let mut v: Vec<_> = x
        .points
        .iter()
        .filter(|p| p.estimate.feasible)
        .filter_map(|p| {
            let g = p
                .estimate
                .goodput
                .as_ref()
                .and_then(|g| g.expected_time_to_train_s);
            Some((p.devices, p.estimate.time_to_train_s?, g))
        })
        .collect();
    v.sort_by_key(|p| p.0);
    v
}

/// Write the time-to-train series `s` (one per system) as SVG.
pub fn time_to_train(
    s: &[Scaling],
    size: Size,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let (w, h) = (size.width as f64, size.height as f64);
    let workload = s.first().map(|x| x.workload.as_str()).unwrap_or("");
    let mut doc = Doc::new(
        size,
        &format!("Time to train {workload} with and without failures"),
        "tessera-plot scale-goodput",
    );
    let dy = doc.title(&format!(
        "{workload} — time to train, failure-free and with failures"
    ));
    let mut entries: Vec<LegendEntry> = s
        .iter()
        .enumerate()
        .map(|(i, x)| LegendEntry {
            label: format!("{} (solid: failure-free)", x.system),
            style: Style::nth(i),
            kind: LegendKind::Line,
        })
        .collect();
    entries.push(LegendEntry {
        label: "dashed: with failures, checkpoints and restarts".into(),
        style: Style::nth(6),
        kind: LegendKind::Dash,
    });
    let lw = w - 40.0;
    let lh = flow_height(lw, &entries);
    doc.legend_flow(20.0, 34.0 + dy, lw, &entries);
    let top = 34.0 + dy + lh + 14.0;
    let rect = Rect {
        x: 80.0,
        y: top,
        w: w - 80.0 - 24.0,
        h: (h - 50.0 - top).max(60.0),
    };
    let hours = 3600.0;
    let devs: Vec<f64> = s
        .iter()
        .flat_map(|x| points(x).into_iter().map(|p| p.0 as f64))
        .collect();
    let times: Vec<f64> = s
        .iter()
        .flat_map(|x| {
            points(x)
                .into_iter()
                .flat_map(|p| std::iter::once(p.1).chain(p.2))
        })
        .map(|t| t / hours)
        .collect();
    let f = Frame {
        rect,
        x: Axis::log_counts("devices", devs),
        y: Axis::log("time to train (h)", times),
    };
    doc.axes(&f);
    let mut without = false;
    for (i, x) in s.iter().enumerate() {
        let st = Style::nth(i);
        doc.open_group("system", Some(&format!("system-{i}")));
        let pts = points(x);
        let ideal: Vec<(f64, f64)> = pts
            .iter()
            .map(|(d, t, _)| (f.px(*d as f64), f.py(t / hours)))
            .collect();
        doc.polyline(
            &ideal,
            "series",
            &format!(
                r#"stroke="{}" stroke-width="1.8" data-kind="ideal""#,
                st.color()
            ),
        );
        let fail: Vec<(f64, f64)> = pts
            .iter()
            .filter_map(|(d, _, g)| Some((f.px(*d as f64), f.py((*g)? / hours))))
            .collect();
        without |= fail.len() < pts.len();
        doc.polyline(
            &fail,
            "series",
            &format!(
                r#"stroke="{}" stroke-width="1.8" stroke-dasharray="7 4" data-kind="failures""#,
                st.color()
            ),
        );
        for (d, t, g) in &pts {
            for (kind, v, filled) in [("ideal", Some(*t), true), ("failures", *g, false)] {
                let Some(v) = v else { continue };
                let data = format!(r#"data-system="{i}" data-devices="{d}" data-kind="{kind}""#);
                let tip = format!(
                    "{}: {d} devices, {:.1} h {}",
                    x.system,
                    v / hours,
                    if kind == "ideal" {
                        "failure-free"
                    } else {
                        "with failures"
                    }
                );
                doc.marker(
                    f.px(*d as f64),
                    f.py(v / hours),
                    4.5,
                    st,
                    st.shape(),
                    filled,
                    "point",
                    &data,
                    &tip,
                );
            }
        }
        doc.close_group();
    }
    if without {
        doc.note(
            rect.x,
            h - 8.0,
            "a point without its dashed twin: the system states no reliability or storage",
            Anchor::Start,
        );
    }
    doc.finish(out)
}
