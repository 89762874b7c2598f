//! Serving's curve in dollars: for each system, the cost of a million output tokens against the
//! time per output token each user sees (log-log; one point per concurrency, as the serving
//! curve's), and the carbon of a million output tokens against the same. Down and to the left is
//! better on both panels. A system whose file gives no capital cost has no line on the left
//! panel; the note under the title names it.
//!
//! Classes: `series` (one line per system and panel), `point` (one per priced point;
//! `data-system`, `data-concurrency`), `unpriced` (the note naming systems without a cost).

use super::svg::{stroke, Anchor, Frame};
use super::{Axis, Doc, LegendEntry, LegendKind, Size, Style};
use crate::engine::curve::Curve;

/// One priced point: requests in flight, TPOT (s), cost and carbon per million output tokens.
type Priced = (u64, f64, Option<f64>, f64);

fn priced(x: &Curve) -> Vec<Priced> {
    let mut v: Vec<Priced> = x
        .points
        .iter()
        .filter(|e| e.feasible)
        .filter_map(|e| {
            Some((
                e.concurrency?,
                e.tpot_s?,
                e.cost_per_unit_usd,
                e.carbon_kg_co2e?,
            ))
        })
        .collect();
    v.sort_by_key(|p| p.0);
    v
}

/// Write the cost curves of `c` (one per system) as SVG.
pub fn cost_curve(c: &[Curve], size: Size, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let (w, h) = (size.width as f64, size.height as f64);
    let workload = c.first().map(|x| x.workload.as_str()).unwrap_or("");
    let mut doc = Doc::new(
        size,
        &format!("Serving cost of {workload}"),
        "tessera-plot serve-cost",
    );
    doc.title(&format!(
        "{workload} — cost and carbon per million output tokens against time per token"
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
    let all: Vec<Priced> = c.iter().flat_map(priced).collect();
    let tpot = Axis::log("time per output token (s)", all.iter().map(|p| p.1));
    let fl = Frame {
        rect: left,
        x: tpot.clone(),
        y: Axis::log(
            "cost per 1M output tokens (USD)",
            all.iter().filter_map(|p| p.2),
        ),
    };
    let fr = Frame {
        rect: right,
        x: tpot,
        y: Axis::log(
            "carbon per 1M output tokens (kg CO2e)",
            all.iter().map(|p| p.3),
        ),
    };
    doc.axes(&fl);
    doc.axes(&fr);
    let unpriced: Vec<&str> = c
        .iter()
        .filter(|x| !priced(x).iter().any(|p| p.2.is_some()))
        .map(|x| x.system.as_str())
        .collect();
    if !unpriced.is_empty() {
        doc.open_group("unpriced", None);
        doc.note(
            fl.rect.x,
            fl.rect.y - 4.0,
            &format!("cost unknown (no capital figures): {}", unpriced.join(", ")),
            Anchor::Start,
        );
        doc.close_group();
    }
    for (i, x) in c.iter().enumerate() {
        let st = Style::nth(i);
        doc.open_group("system", Some(&format!("system-{i}")));
        let pts = priced(x);
        let l: Vec<(f64, f64)> = pts
            .iter()
            .filter_map(|p| Some((fl.px(p.1), fl.py(p.2?))))
            .collect();
        doc.polyline(&l, "series", &stroke(st, 1.8));
        let r: Vec<(f64, f64)> = pts.iter().map(|p| (fr.px(p.1), fr.py(p.3))).collect();
        doc.polyline(&r, "series", &stroke(st, 1.8));
        for (conc, t, usd, kg) in &pts {
            let data = format!(r#"data-system="{i}" data-concurrency="{conc}""#);
            let tip = format!(
                "{}: {conc} in flight, {} per token, {} per 1M tokens, {} kg CO2e per 1M tokens",
                x.system,
                super::si(*t, "s"),
                usd.map_or_else(|| "cost unknown".into(), crate::units::fmt_usd),
                super::si(*kg, "")
            );
            let mut at = vec![(&fr, *kg)];
            if let Some(u) = usd {
                at.insert(0, (&fl, *u));
            }
            for (f, y) in at {
                doc.marker(
                    f.px(*t),
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
