//! Serving's throughput-latency picture: for each system, the system's output tokens/s against
//! the tokens/s each user sees (log-log; one point per concurrency, the line through them: the
//! trade a batch makes between users and operator), and the energy per output token against the
//! same per-user rate. Up and to the right is better on the left panel, down and to the right on
//! the right one.
//!
//! Classes: `series` (one line per system and panel), `point` (one per feasible point;
//! `data-system`, `data-concurrency`), `target` (the latency target's fewest tokens/s per user,
//! dashed, where a target bounds it).

use super::svg::{stroke, Frame};
use super::{Axis, Doc, LegendEntry, LegendKind, Size, Style};
use crate::engine::curve::Curve;

/// Write the curves `c` (one per system) as SVG.
pub fn curve(c: &[Curve], size: Size, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let (w, h) = (size.width as f64, size.height as f64);
    let workload = c.first().map(|x| x.workload.as_str()).unwrap_or("");
    let mut doc = Doc::new(
        size,
        &format!("Serving curve of {workload}"),
        "tessera-plot serve-curve",
    );
    let target = c
        .first()
        .and_then(|x| x.slo.clone())
        .map(|s| format!(" at {s}"))
        .unwrap_or_default();
    doc.title(&format!(
        "{workload} — throughput against speed per user{target}"
    ));
    let entries: Vec<LegendEntry> = c
        .iter()
        .enumerate()
        .map(|(i, x)| LegendEntry {
            label: x.system.clone(),
            style: Style::nth(i),
            kind: LegendKind::Line,
        })
        .collect();
    let (left, right) = doc.legend_over_two_panels(w, h, &entries);
    let feasible = |x: &Curve| -> Vec<(u64, f64, f64, f64)> {
        let mut v: Vec<_> = x
            .points
            .iter()
            .filter(|e| e.feasible)
            .filter_map(|e| {
                Some((
                    e.concurrency?,
                    e.user_tokens_per_s?,
                    e.system_tokens_per_s?,
                    e.energy_per_unit_j?,
                ))
            })
            .collect();
        v.sort_by_key(|p| p.0);
        v
    };
    let all: Vec<(u64, f64, f64, f64)> = c.iter().flat_map(feasible).collect();
    let target = c.iter().find_map(|x| x.min_user_rate);
    let user = Axis::log(
        "tokens/s per user",
        all.iter()
            .map(|p| p.1)
            .chain(target.filter(|_| !all.is_empty())),
    );
    let fl = Frame {
        rect: left,
        x: user.clone(),
        y: Axis::log("system throughput (tokens/s)", all.iter().map(|p| p.2)),
    };
    let fr = Frame {
        rect: right,
        x: user,
        y: Axis::log("energy per output token (J)", all.iter().map(|p| p.3)),
    };
    doc.axes(&fl);
    doc.axes(&fr);
    // the latency target: the fewest tokens/s per user it allows, a dashed line on both panels
    // (points to its right meet it)
    if let Some(rate) = target {
        for f in [&fl, &fr] {
            let x = f.px(rate);
            if x >= f.rect.x && x <= f.rect.x + f.rect.w {
                doc.line(
                    x,
                    f.rect.y,
                    x,
                    f.rect.bottom(),
                    "target",
                    r##"stroke="#444" stroke-width="1" stroke-dasharray="4 3""##,
                );
                doc.text(
                    x + 3.0,
                    f.rect.y + 11.0,
                    "target",
                    10.0,
                    super::svg::Anchor::Start,
                    "target-label",
                    "",
                );
            }
        }
    }
    for (i, x) in c.iter().enumerate() {
        let st = Style::nth(i);
        doc.open_group("system", Some(&format!("system-{i}")));
        let pts = feasible(x);
        let l: Vec<(f64, f64)> = pts.iter().map(|p| (fl.px(p.1), fl.py(p.2))).collect();
        doc.polyline(&l, "series", &stroke(st, 1.8));
        let r: Vec<(f64, f64)> = pts.iter().map(|p| (fr.px(p.1), fr.py(p.3))).collect();
        doc.polyline(&r, "series", &stroke(st, 1.8));
        for (conc, u, s, e) in &pts {
            let data = format!(r#"data-system="{i}" data-concurrency="{conc}""#);
            let tip = format!(
                "{}: {conc} in flight, {} tokens/s per user, {} tokens/s, {} J/token",
                x.system,
                super::si(*u, ""),
                super::si(*s, ""),
                super::si(*e, "")
            );
            for (f, y) in [(&fl, *s), (&fr, *e)] {
                doc.marker(
                    f.px(*u),
                    f.py(y),
                    4.0,
                    st,
                    st.shape(),
                    true,
                    "point",
                    &data,
                    &tip,
                );
            }
        }
        doc.close_group();
    }
    doc.finish(out)
}
