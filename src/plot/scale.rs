//! Scaling as pictures: throughput against device count (log-log, with each system's ideal linear
//! line) and scaling efficiency against device count (with the 100 % line), several systems on one
//! chart.
//!
//! Classes: `series` (one line per system), `point` (one per feasible point; `data-system`,
//! `data-devices`), `ideal` (one per system with a baseline), `ideal-efficiency`.

use super::svg::legend::flow_height;
use super::svg::{stroke, Anchor, Frame, REFERENCE_STROKE};
use super::{Axis, Doc, LegendEntry, LegendKind, Rect, Size, Style};
use crate::report::compare::Scaling;

/// One legend line per system, in series order.
fn system_entries(s: &[Scaling]) -> Vec<LegendEntry> {
    s.iter()
        .enumerate()
        .map(|(i, x)| LegendEntry {
            label: x.system.clone(),
            style: Style::nth(i),
            kind: LegendKind::Line,
        })
        .collect()
}

/// Write the scaling series `s` (one per system) as SVG.
pub fn scale(s: &[Scaling], size: Size, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let (w, h) = (size.width as f64, size.height as f64);
    let workload = s.first().map(|x| x.workload.as_str()).unwrap_or("");
    let mut doc = Doc::new(
        size,
        &format!("Scaling of {workload}"),
        "tessera-plot scale",
    );
    doc.title(&format!("{workload} — scaling over device count"));
    let mut entries = system_entries(s);
    entries.push(LegendEntry {
        label: "ideal (linear from the smallest feasible count)".into(),
        style: Style::nth(6),
        kind: LegendKind::Dash,
    });
    let (left, right) = doc.legend_over_two_panels(w, h, &entries);
    let unit = s
        .iter()
        .flat_map(|x| x.points.iter())
        .map(|p| p.estimate.throughput_unit)
        .next()
        .unwrap_or("units");

    // Ideal lines: per-device throughput at the baseline count times N.
    let ideal = |x: &Scaling| -> Option<(u64, f64)> {
        let b = x.baseline_devices?;
        let p = x.points.iter().find(|p| p.devices == b)?;
        Some((b, p.estimate.throughput_per_s? / b as f64))
    };
    let devs: Vec<f64> = s
        .iter()
        .flat_map(|x| x.points.iter().map(|p| p.devices as f64))
        .collect();
    let mut thr: Vec<f64> = s
        .iter()
        .flat_map(|x| x.points.iter().filter_map(|p| p.estimate.throughput_per_s))
        .collect();
    for x in s {
        if let Some((_, per)) = ideal(x) {
            for p in &x.points {
                thr.push(per * p.devices as f64);
            }
        }
    }
    let eff: Vec<f64> = s
        .iter()
        .flat_map(|x| {
            x.points
                .iter()
                .filter_map(|p| p.estimate.scaling_efficiency.map(|e| e * 100.0))
        })
        .chain([0.0, 100.0])
        .collect();
    let dev_axis = Axis::log_counts("devices", devs);
    let fl = Frame {
        rect: left,
        x: dev_axis.clone(),
        y: Axis::log(&format!("throughput ({unit}/s)"), thr),
    };
    let fr = Frame {
        rect: right,
        x: dev_axis,
        y: Axis::linear("scaling efficiency (%)", eff, true),
    };
    doc.axes(&fl);
    doc.axes(&fr);
    doc.line(
        right.x,
        fr.py(100.0),
        right.right(),
        fr.py(100.0),
        "ideal-efficiency",
        REFERENCE_STROKE,
    );
    for (i, x) in s.iter().enumerate() {
        let st = Style::nth(i);
        doc.open_group("system", Some(&format!("system-{i}")));
        if let Some((b, per)) = ideal(x) {
            let hi = x.points.iter().map(|p| p.devices).max().unwrap_or(b).max(b);
            doc.polyline(
                &[
                    (fl.px(b as f64), fl.py(per * b as f64)),
                    (fl.px(hi as f64), fl.py(per * hi as f64)),
                ],
                "ideal",
                &format!(
                    r#"stroke="{}" stroke-width="1" stroke-dasharray="7 4" stroke-opacity="0.7""#,
                    st.color()
                ),
            );
        }
        let mut pts: Vec<_> = x
            .points
            .iter()
            .filter(|p| p.estimate.feasible)
            .filter_map(|p| Some((p.devices, p.estimate.throughput_per_s?, p)))
            .collect();
        pts.sort_by_key(|p| p.0);
        let line_l: Vec<(f64, f64)> = pts
            .iter()
            .map(|(d, t, _)| (fl.px(*d as f64), fl.py(*t)))
            .collect();
        doc.polyline(&line_l, "series", &stroke(st, 1.8));
        let line_r: Vec<(f64, f64)> = pts
            .iter()
            .filter_map(|(d, _, p)| {
                Some((
                    fr.px(*d as f64),
                    fr.py(p.estimate.scaling_efficiency? * 100.0),
                ))
            })
            .collect();
        doc.polyline(&line_r, "series", &stroke(st, 1.8));
        for (d, t, p) in &pts {
            let data = format!(r#"data-system="{i}" data-devices="{d}""#);
            let tip = format!("{}: {d} devices, {} {unit}/s", x.system, super::si(*t, ""));
            doc.marker(
                fl.px(*d as f64),
                fl.py(*t),
                4.5,
                st,
                st.shape(),
                true,
                "point",
                &data,
                &tip,
            );
            if let Some(e) = p.estimate.scaling_efficiency {
                doc.marker(
                    fr.px(*d as f64),
                    fr.py(e * 100.0),
                    4.5,
                    st,
                    st.shape(),
                    true,
                    "point",
                    &data,
                    &format!("{}: {d} devices, {:.1}% efficiency", x.system, e * 100.0),
                );
            }
        }
        // Infeasible counts: a cross on the efficiency floor.
        for p in x.points.iter().filter(|p| !p.estimate.feasible) {
            doc.text(
                fr.px(p.devices as f64),
                fr.py(fr.y.min) - 4.0,
                "×",
                12.0,
                Anchor::Middle,
                "infeasible",
                &format!(r#"fill="{}""#, st.color()),
            );
        }
        doc.close_group();
    }
    if s.iter()
        .any(|x| x.points.iter().any(|p| !p.estimate.feasible))
    {
        doc.note(
            right.x,
            h - 8.0,
            "× on the floor: infeasible at that count",
            Anchor::Start,
        );
    }
    doc.finish(out)
}

/// Iso-power as a picture: throughput against power (at the series' power boundary), log-log,
/// one line per system through the deployments that fill fractions of a budget (`scale
/// --power-budget`), with the budget as a vertical line. Classes: `series`, `point`
/// (`data-system`, `data-devices`, `data-power`), `budget`.
pub fn power(s: &[Scaling], size: Size, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let (w, h) = (size.width as f64, size.height as f64);
    let workload = s.first().map(|x| x.workload.as_str()).unwrap_or("");
    let boundary = s
        .iter()
        .flat_map(|x| x.points.iter())
        .map(|p| p.estimate.power_boundary)
        .next()
        .unwrap_or("facility");
    let mut doc = Doc::new(
        size,
        &format!("Throughput against power for {workload}"),
        "tessera-plot scale-power",
    );
    let dy = doc.title(&format!("{workload} — throughput against {boundary} power"));
    let entries = system_entries(s);
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
    let unit = s
        .iter()
        .flat_map(|x| x.points.iter())
        .map(|p| p.estimate.throughput_unit)
        .next()
        .unwrap_or("units");
    let feasible = |x: &Scaling| -> Vec<(f64, f64, u64)> {
        let mut v: Vec<_> = x
            .points
            .iter()
            .filter(|p| p.estimate.feasible)
            .filter_map(|p| {
                Some((
                    p.estimate.average_power_w?,
                    p.estimate.throughput_per_s?,
                    p.devices,
                ))
            })
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let budget = s.iter().find_map(|x| x.power_budget_w);
    let powers: Vec<f64> = s
        .iter()
        .flat_map(|x| feasible(x).into_iter().map(|p| p.0))
        .chain(budget)
        .collect();
    let thr: Vec<f64> = s
        .iter()
        .flat_map(|x| feasible(x).into_iter().map(|p| p.1))
        .collect();
    let f = Frame {
        rect,
        x: Axis::log(&format!("{boundary} power (W)"), powers),
        y: Axis::log(&format!("throughput ({unit}/s)"), thr),
    };
    doc.axes(&f);
    if let Some(b) = budget {
        doc.line(
            f.px(b),
            rect.y,
            f.px(b),
            rect.y + rect.h,
            "budget",
            REFERENCE_STROKE,
        );
    }
    for (i, x) in s.iter().enumerate() {
        let st = Style::nth(i);
        doc.open_group("system", Some(&format!("system-{i}")));
        let pts = feasible(x);
        let line: Vec<(f64, f64)> = pts.iter().map(|(p, t, _)| (f.px(*p), f.py(*t))).collect();
        doc.polyline(&line, "series", &stroke(st, 1.8));
        for (p, t, d) in &pts {
            let data = format!(r#"data-system="{i}" data-devices="{d}" data-power="{p}""#);
            let tip = format!(
                "{}: {d} devices, {}W, {} {unit}/s",
                x.system,
                super::si(*p, ""),
                super::si(*t, "")
            );
            doc.marker(
                f.px(*p),
                f.py(*t),
                4.5,
                st,
                st.shape(),
                true,
                "point",
                &data,
                &tip,
            );
        }
        doc.close_group();
    }
    if budget.is_some() {
        doc.note(
            rect.x,
            h - 8.0,
            "vertical line: the power budget",
            Anchor::Start,
        );
    }
    doc.finish(out)
}
