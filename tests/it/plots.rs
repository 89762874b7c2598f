//! Pictures: every plot parses as SVG and renders to pixels, carries the series, labels and one
//! mark per point it should, keeps its structure (insta snapshots of element counts and labels),
//! and the pictures the README and the pages under `docs/` show are exactly what the commands
//! beside them produce.
//!
//! `TESSERA_BLESS=1 cargo test --release --test it plots::readme` rewrites `docs/img/*.svg` from those pages'
//! commands after a deliberate change to the physics or the pictures.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use std::collections::BTreeMap;
use std::path::PathBuf;
use tessera::engine::program::Breakdown;
use tessera::engine::{estimate, lower, search, Estimate, MappingChoice, Objective};
use tessera::model::system::{load_system, System};
use tessera::model::workload::{load_workload, Workload};
use tessera::plot::sweep::{pareto_front, Dim, SweepPlot, SweepPoint};
use tessera::plot::validate::{ValidationPlot, ValidationPoint};
use tessera::plot::Size;
use tessera::report::compare::{compare, scaling};
use tessera::report::roofline::roofline;

use crate::common::CrateFs as Disk;

fn system(path: &str) -> System {
    load_system(path, &Disk).value.expect(path)
}

fn workload(path: &str) -> Workload {
    load_workload(path, &Disk).value.expect(path)
}

const SIZE: Size = Size {
    width: 800,
    height: 500,
};

fn svg_of(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut buf = Vec::new();
    f(&mut buf).expect("write");
    String::from_utf8(buf).expect("utf-8")
}

/// Parse with usvg and render with resvg (no fonts: text is skipped); the picture must have ink.
fn renders(svg: &str) {
    let opt = resvg::usvg::Options::default();
    let tree = resvg::usvg::Tree::from_str(svg, &opt).expect("valid SVG");
    let size = tree.size().to_int_size();
    assert_eq!((size.width(), size.height()), (SIZE.width, SIZE.height));
    let mut pix = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).expect("pixmap");
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pix.as_mut(),
    );
    let ink = pix
        .pixels()
        .iter()
        .filter(|p| p.red() < 200 || p.green() < 200 || p.blue() < 200)
        .count();
    assert!(ink > 2000, "almost nothing drawn: {ink} dark pixels");
}

/// Elements whose `class` attribute has `class` as one of its words.
fn count(svg: &str, class: &str) -> usize {
    svg.split("class=\"")
        .skip(1)
        .filter(|s| {
            s.split('"')
                .next()
                .unwrap_or("")
                .split(' ')
                .any(|c| c == class)
        })
        .count()
}

/// Contents of every `<text>` element with `class` (all texts when empty), unescaped.
fn texts(svg: &str, class: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in svg.split("<text ").skip(1) {
        let (attrs, rest) = part.split_once('>').unwrap_or(("", ""));
        let body = rest.split("</text>").next().unwrap_or("");
        let cls = attrs
            .split("class=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or("");
        if class.is_empty() || cls.split(' ').any(|c| c == class) {
            out.push(
                body.replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&quot;", "\"")
                    .replace("&apos;", "'")
                    .replace("&amp;", "&"),
            );
        }
    }
    out
}

/// A summary of a picture's structure for snapshots: how many elements of each class, and the
/// labels that are not numbers.
fn summary(svg: &str) -> String {
    let mut classes: BTreeMap<String, usize> = BTreeMap::new();
    for s in svg.split("class=\"").skip(1) {
        for c in s.split('"').next().unwrap_or("").split(' ') {
            *classes.entry(c.to_string()).or_default() += 1;
        }
    }
    let mut out = String::new();
    for (c, k) in &classes {
        out.push_str(&format!("{c}: {k}\n"));
    }
    out.push_str("--- labels\n");
    for t in texts(svg, "") {
        out.push_str(&t);
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------- roofline

fn h100_roofline() -> tessera::report::roofline::Roofline {
    let sys = system("architectures/dgx-h100.ron");
    let w = workload("workloads/llama3.1-8b-pretrain.ron");
    let res = search::search(&sys, &w, sys.devices, Objective::Time);
    let (m, _) = res.best().expect("a feasible mapping");
    let p = lower::lower(&sys, &w, m, sys.devices).expect("lowers");
    let mach = lower::machine(&sys, sys.devices);
    roofline(&sys, &w, m, &p, &mach)
}

#[test]
fn roofline_has_every_operator_roof_and_ceiling() {
    let r = h100_roofline();
    assert!(r.feasible);
    assert!(!r.ops.is_empty());
    let svg = svg_of(|o| tessera::plot::roofline::roofline(&r, SIZE, o));
    renders(&svg);
    let placed = r
        .ops
        .iter()
        .filter(|o| o.intensity.is_some() && o.achieved_flops_per_s.is_some())
        .count();
    assert_eq!(count(&svg, "point"), placed, "one mark per operator");
    assert_eq!(count(&svg, "point-label"), placed);
    assert_eq!(
        count(&svg, "roof"),
        r.roofs.len(),
        "one roof per memory level"
    );
    assert_eq!(count(&svg, "ceiling"), r.ceilings.len());
    // Every memory level of the device has a roof, with its name on it.
    let sys = system("architectures/dgx-h100.ron");
    let roof_labels = texts(&svg, "roof-label").join("\n");
    for level in &sys.device.memory {
        assert!(
            roof_labels.contains(&level.name),
            "{} in {roof_labels}",
            level.name
        );
    }
    // Formats the device computes in have ceilings; the key names every operator.
    let ceilings = texts(&svg, "ceiling-label").join("\n");
    assert!(ceilings.contains("bf16"), "{ceilings}");
    assert!(ceilings.contains("fp8"), "{ceilings}");
    let key = texts(&svg, "key-entry").join("\n");
    for o in &r.ops {
        assert!(
            key.contains(&format!("{} {}", o.index, o.name)),
            "{} in key",
            o.name
        );
    }
    let axes = texts(&svg, "axis-title").join("\n");
    assert!(
        axes.contains("FLOP/byte") && axes.contains("FLOP/s"),
        "{axes}"
    );
    // Memory-bound operators sit on or under the memory roof; nothing is above the top ceiling.
    let top = r.ceilings[0].flops_per_s;
    for o in &r.ops {
        if let (Some(i), Some(a)) = (o.intensity, o.achieved_flops_per_s) {
            assert!(a <= top * 1.0001, "{} above the top ceiling", o.name);
            let hbm = r.roofs.iter().find(|l| l.holds.is_some()).unwrap();
            assert!(
                a <= i * hbm.bandwidth_bytes_per_s * 1.0001,
                "{} above its roof",
                o.name
            );
        }
    }
}

#[test]
fn roofline_includes_caches_and_sram() {
    // The wafer keeps its data in on-chip SRAM and streams weights from MemoryX.
    let sys = system("architectures/cerebras-cs3.ron");
    let w = workload("workloads/llama3.1-8b-pretrain.ron");
    let res = search::search(&sys, &w, sys.devices, Objective::Time);
    let (m, _) = res.best().expect("a feasible mapping");
    let p = lower::lower(&sys, &w, m, sys.devices).expect("lowers");
    let r = roofline(&sys, &w, m, &p, &lower::machine(&sys, sys.devices));
    assert!(r.roofs.iter().any(|l| l.kind == "sram"));
    assert!(r.roofs.iter().any(|l| l.kind == "weight store"));
    let svg = svg_of(|o| tessera::plot::roofline::roofline(&r, SIZE, o));
    renders(&svg);
    assert_eq!(count(&svg, "roof"), sys.device.memory.len() + 1);
}

// ---------------------------------------------------------------- compare and scale

fn llama_compare() -> tessera::report::compare::Comparison {
    let w = workload("workloads/llama3.1-8b-pretrain.ron");
    let ests = [
        "architectures/dgx-h100.ron",
        "architectures/dgx-b200.ron",
        "architectures/mi300x-node.ron",
    ]
    .iter()
    .map(|p| {
        let s = system(p);
        estimate(&s, &w, &MappingChoice::Auto(Objective::Time), None)
    })
    .collect();
    compare(ests)
}

#[test]
fn compare_has_bars_per_system_and_metric() {
    let c = llama_compare();
    let svg = svg_of(|o| tessera::plot::compare::compare(&c, SIZE, o));
    renders(&svg);
    let feasible = c.systems.iter().filter(|r| r.estimate.feasible).count();
    assert_eq!(feasible, 3);
    assert_eq!(count(&svg, "bar"), 3 * feasible, "three metrics per system");
    let segments = c
        .systems
        .iter()
        .filter_map(|r| r.estimate.breakdown_s)
        .map(|b| {
            [b.compute, b.memory, b.communication, b.bubble, b.other]
                .iter()
                .filter(|x| **x > 0.0)
                .count()
        })
        .sum::<usize>();
    assert_eq!(count(&svg, "segment"), segments);
    let legend = texts(&svg, "legend-label");
    for r in &c.systems {
        assert!(
            legend.contains(&r.estimate.system),
            "{} in legend",
            r.estimate.system
        );
    }
    for cat in tessera::plot::compare::CATEGORIES {
        assert!(legend.iter().any(|l| l == cat), "{cat} in legend");
    }
    let cats = texts(&svg, "category-label");
    for m in ["throughput", "perf per watt", "energy (run)"] {
        assert!(cats.iter().any(|c| c == m), "{m} in {cats:?}");
    }
    // The baseline's bars read 1.00×.
    assert_eq!(
        texts(&svg, "bar-label")
            .iter()
            .filter(|t| *t == "1.00×")
            .count(),
        3
    );
    // Black and white: every system has its own texture.
    for i in 0..3 {
        assert!(svg.contains(&format!("fill=\"url(#hatch-{i})\"")));
    }
}

#[test]
fn compare_shows_infeasible_systems() {
    // The 405B model does not fit one DGX: the bars say so instead of vanishing silently.
    let w = workload("workloads/llama3.1-405b-pretrain.ron");
    let ests = [
        "architectures/dgx-h100.ron",
        "architectures/gb200-nvl72.ron",
    ]
    .iter()
    .map(|p| estimate(&system(p), &w, &MappingChoice::Auto(Objective::Time), None))
    .collect();
    let c = compare(ests);
    let svg = svg_of(|o| tessera::plot::compare::compare(&c, SIZE, o));
    renders(&svg);
    assert!(count(&svg, "infeasible") >= 1);
}

#[test]
fn scale_has_a_series_and_ideal_per_system() {
    let w = workload("workloads/llama3.1-8b-pretrain.ron");
    let series: Vec<_> = [
        "architectures/dgx-h100.ron",
        "architectures/gb200-nvl72.ron",
    ]
    .iter()
    .map(|p| {
        let sys = system(p);
        let ests = [1, 2, 4, 8, 16, 32]
            .iter()
            .map(|&n| estimate(&sys, &w, &MappingChoice::Auto(Objective::Time), Some(n)))
            .collect();
        scaling(&sys.name, &w.name, ests)
    })
    .collect();
    let svg = svg_of(|o| tessera::plot::scale::scale(&series, SIZE, o));
    renders(&svg);
    let feasible: usize = series
        .iter()
        .map(|s| s.points.iter().filter(|p| p.estimate.feasible).count())
        .sum();
    let with_eff: usize = series
        .iter()
        .map(|s| {
            s.points
                .iter()
                .filter(|p| p.estimate.feasible && p.estimate.scaling_efficiency.is_some())
                .count()
        })
        .sum();
    assert_eq!(
        count(&svg, "point"),
        feasible + with_eff,
        "a mark per point, both panels"
    );
    assert_eq!(count(&svg, "series"), 2 * series.len());
    assert_eq!(count(&svg, "ideal"), series.len());
    assert_eq!(count(&svg, "ideal-efficiency"), 1);
    // Each system its own marker shape, not only its own colour.
    assert!(svg.contains("data-shape=\"circle\"") && svg.contains("data-shape=\"square\""));
    let legend = texts(&svg, "legend-label");
    for s in &series {
        assert!(legend.contains(&s.system));
    }
    let axes = texts(&svg, "axis-title");
    assert!(axes.iter().any(|a| a.starts_with("devices")));
    assert!(axes.iter().any(|a| a.starts_with("scaling efficiency (%)")));
}

// ---------------------------------------------------------------- sweep and validate

fn sweep_data() -> SweepPlot {
    // A deterministic cloud: throughput against power for 60 design points.
    let points: Vec<SweepPoint> = (0..60)
        .map(|i| {
            let a = (i % 10) as f64;
            let b = (i / 10) as f64;
            let thr = 1e5 * (1.0 + a) * (1.0 + 0.3 * b) / (1.0 + 0.05 * ((i * 7) % 11) as f64);
            let power = 1e4 * (1.0 + 0.8 * a) * (1.0 + 0.1 * b);
            SweepPoint {
                label: format!("hbm_bandwidth={a} links={b}"),
                x: power,
                y: thr,
            }
        })
        .collect();
    SweepPlot {
        title: "Sweep: throughput against power".into(),
        x: Dim {
            title: "average power (W)".into(),
            higher_is_better: false,
            log: true,
        },
        y: Dim {
            title: "throughput (tokens/s)".into(),
            higher_is_better: true,
            log: true,
        },
        best: Some((59, "throughput".into())),
        points,
        front: None,
    }
}

#[test]
fn pareto_front_is_not_dominated() {
    let p = sweep_data();
    let front = pareto_front(&p.points, false, true);
    assert!(!front.is_empty());
    for &i in &front {
        let a = &p.points[i];
        assert!(
            !p.points
                .iter()
                .any(|b| b.x <= a.x && b.y >= a.y && (b.x < a.x || b.y > a.y)),
            "{i} is dominated"
        );
    }
    // Everything off the front is dominated by something on it.
    for (i, a) in p.points.iter().enumerate() {
        if !front.contains(&i) {
            assert!(front.iter().any(|&j| {
                let b = &p.points[j];
                b.x <= a.x && b.y >= a.y
            }));
        }
    }
}

#[test]
fn sweep_shows_all_points_front_and_best() {
    let p = sweep_data();
    let svg = svg_of(|o| tessera::plot::sweep::sweep(&p, SIZE, o));
    renders(&svg);
    let front = pareto_front(&p.points, false, true);
    assert_eq!(count(&svg, "front-point"), front.len());
    assert_eq!(
        count(&svg, "point") + count(&svg, "front-point"),
        p.points.len(),
        "a mark per design point"
    );
    assert_eq!(count(&svg, "front"), 1);
    assert_eq!(count(&svg, "best"), 1);
    let best = texts(&svg, "best-label");
    assert_eq!(
        best,
        vec!["best by throughput: hbm_bandwidth=9 links=5".to_string()]
    );
    insta::assert_snapshot!("sweep", summary(&svg));
}

#[test]
fn sweep_thins_huge_clouds_but_keeps_the_front() {
    let mut p = sweep_data();
    let base = p.points.clone();
    p.points = (0..12_000)
        .map(|i| {
            let mut q = base[i % base.len()].clone();
            q.x *= 1.0 + (i / base.len()) as f64 * 1e-3;
            q
        })
        .collect();
    let front = pareto_front(&p.points, false, true);
    let shown = tessera::plot::sweep::shown(&p, &front);
    let svg = svg_of(|o| tessera::plot::sweep::sweep(&p, SIZE, o));
    renders(&svg);
    assert!(shown.len() <= tessera::plot::sweep::MAX_POINTS + front.len() + 1);
    assert_eq!(
        count(&svg, "point") + count(&svg, "front-point"),
        shown.len()
    );
    assert_eq!(count(&svg, "front-point"), front.len());
}

fn validation_data() -> ValidationPlot {
    let case = |name: &str, family: &str, published: f64, predicted: f64| ValidationPoint {
        case: name.into(),
        family: family.into(),
        published,
        predicted,
        pass: (predicted / published - 1.0).abs() <= 0.15,
    };
    ValidationPlot {
        title: "Validation: predicted against published".into(),
        quantity: "(case's unit)".into(),
        tolerance: 0.15,
        points: vec![
            case("MLPerf GPT-3 on 512 H100", "training", 50.7, 48.1),
            case("MLPerf Llama 405B on 512 GB200", "training", 121.1, 130.0),
            case("Megatron 1T on 3072 A100", "training", 163.0, 131.0),
            case("Llama 3 70B serving on H200", "inference", 3.1e4, 2.9e4),
            case("Llama 3.1 8B serving on H100", "inference", 1.2e4, 1.6e4),
            case("NorthPole Granite 3B", "inference", 2.8e4, 2.7e4),
            case("IBM 256 GPU scaling", "scaling", 0.95, 0.93),
            case("Selene 1024 A100 scaling", "scaling", 0.88, 0.97),
        ],
    }
}

#[test]
fn validate_shows_cases_by_family_with_band() {
    let v = validation_data();
    let svg = svg_of(|o| tessera::plot::validate::validate(&v, SIZE, o));
    renders(&svg);
    assert_eq!(count(&svg, "point"), v.points.len());
    assert_eq!(count(&svg, "band"), 1);
    assert_eq!(count(&svg, "identity"), 1);
    let failing: Vec<&ValidationPoint> = v.points.iter().filter(|p| !p.pass).collect();
    assert_eq!(count(&svg, "point-label"), failing.len());
    let labels = texts(&svg, "point-label").join("\n");
    for p in failing {
        assert!(labels.contains(&p.case), "{} named", p.case);
    }
    let legend = texts(&svg, "legend-label");
    for f in ["training", "inference", "scaling"] {
        assert!(legend.iter().any(|l| l == f), "{f} in legend");
    }
    assert!(svg.contains("data-family=\"scaling\""));
    insta::assert_snapshot!("validate", summary(&svg));
}

#[test]
fn output_is_deterministic() {
    let p = sweep_data();
    let a = svg_of(|o| tessera::plot::sweep::sweep(&p, SIZE, o));
    let b = svg_of(|o| tessera::plot::sweep::sweep(&p, SIZE, o));
    assert_eq!(a, b);
    let r = h100_roofline();
    let a = svg_of(|o| tessera::plot::roofline::roofline(&r, SIZE, o));
    let b = svg_of(|o| tessera::plot::roofline::roofline(&r, SIZE, o));
    assert_eq!(a, b);
}

#[test]
fn sizes_are_honoured() {
    let v = validation_data();
    let size: Size = "640x480".parse().unwrap();
    let svg = svg_of(|o| tessera::plot::validate::validate(&v, size, o));
    assert!(svg.starts_with(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="640" height="480" viewBox="0 0 640 480""#
    ));
}

// ---------------------------------------------------------------- structure snapshots
//
// Fixed report data, so the snapshots change with the pictures and not with the physics.

fn fixed_estimate(system: &str, devices: u64, thr: f64, power: f64, b: [f64; 5]) -> Estimate {
    let sys = system_for_fixture();
    let w = workload("workloads/llama3.1-8b-pretrain.ron");
    let mut e = Estimate::infeasible(
        &sys,
        &w,
        devices,
        None,
        &tessera::engine::reason::Reason::NoCompute,
        "tokens",
    );
    let step: f64 = b.iter().sum();
    e.system = system.into();
    e.workload = "Fixture workload".into();
    e.feasible = true;
    e.reason = None;
    e.reason_code = None;
    e.step_time_s = Some(step);
    e.throughput_per_s = Some(thr);
    e.average_power_w = Some(power);
    e.energy_j = Some(power * step * 1000.0);
    e.time_to_train_s = Some(step * 1000.0);
    e.energy_per_unit_j = Some(power / thr);
    e.perf_per_watt = Some(thr / power);
    e.breakdown_s = Some(Breakdown {
        compute: b[0],
        memory: b[1],
        communication: b[2],
        bubble: b[3],
        other: b[4],
    });
    e
}

fn system_for_fixture() -> System {
    system("architectures/dgx-h100.ron")
}

#[test]
fn compare_structure() {
    let c = compare(vec![
        fixed_estimate("System A", 8, 1.0e5, 1.0e4, [0.6, 0.2, 0.1, 0.0, 0.05]),
        fixed_estimate("System B", 8, 2.5e5, 1.5e4, [0.3, 0.1, 0.05, 0.02, 0.01]),
        fixed_estimate("System C", 8, 0.8e5, 0.6e4, [0.7, 0.3, 0.2, 0.1, 0.1]),
    ]);
    let svg = svg_of(|o| tessera::plot::compare::compare(&c, SIZE, o));
    renders(&svg);
    assert_eq!(count(&svg, "bar"), 9);
    assert_eq!(count(&svg, "segment"), 14);
    insta::assert_snapshot!("compare", summary(&svg));
}

#[test]
fn scale_structure() {
    let series: Vec<_> = [("System A", 0.97f64), ("System B", 0.9)]
        .iter()
        .map(|(name, k)| {
            let ests = [8u64, 16, 32, 64]
                .iter()
                .map(|&n| {
                    let eff = (*k).powf((n as f64 / 8.0).log2());
                    fixed_estimate(
                        name,
                        n,
                        1e4 * n as f64 * eff,
                        1e3 * n as f64,
                        [1.0, 0.1, 0.1, 0.0, 0.0],
                    )
                })
                .collect();
            scaling(name, "Fixture workload", ests)
        })
        .collect();
    let svg = svg_of(|o| tessera::plot::scale::scale(&series, SIZE, o));
    renders(&svg);
    assert_eq!(count(&svg, "point"), 16);
    insta::assert_snapshot!("scale", summary(&svg));
}

#[test]
fn roofline_structure() {
    use tessera::report::roofline::{Ceiling, OpPoint, Roof, Roofline};
    let op =
        |index: usize, name: &str, phase: &'static str, engine: &'static str, i: f64, a: f64| {
            OpPoint {
                index,
                name: name.into(),
                phase,
                precision: "bf16",
                engine,
                flops: a * 1e-3,
                occupancy: 1.0,
                bytes: a * 1e-3 / i,
                intensity: Some(i),
                achieved_flops_per_s: Some(a),
                seconds_per_call: 1e-3,
                calls_per_step: 32.0,
                share_of_step: 0.1,
                bound_by: if i > 300.0 {
                    "compute (bf16 matrix)".into()
                } else {
                    "HBM".into()
                },
            }
        };
    let r = Roofline {
        system: "Fixture system".into(),
        device: "Fixture device".into(),
        workload: "Fixture workload".into(),
        devices: 8,
        mapping: tessera::engine::MappingReport::from(&tessera::model::mapping::Mapping::single()),
        feasible: true,
        reason: None,
        reason_code: None,
        step_time_s: Some(1.0),
        roofs: vec![
            Roof {
                level: "L2".into(),
                kind: "cache".into(),
                cache: true,
                bandwidth_bytes_per_s: 12e12,
                holds: None,
            },
            Roof {
                level: "HBM".into(),
                kind: "hbm".into(),
                cache: false,
                bandwidth_bytes_per_s: 3e12,
                holds: Some("model state and working data".into()),
            },
        ],
        ceilings: vec![
            Ceiling {
                label: "fp8 matrix".into(),
                engine: "matrix",
                precisions: vec!["fp8".into()],
                flops_per_s: 2e15,
                derived: false,
            },
            Ceiling {
                label: "bf16 matrix".into(),
                engine: "matrix",
                precisions: vec!["bf16".into()],
                flops_per_s: 1e15,
                derived: false,
            },
            Ceiling {
                label: "fp32 vector".into(),
                engine: "vector",
                precisions: vec!["fp32".into()],
                flops_per_s: 6e13,
                derived: false,
            },
        ],
        ops: vec![
            op(1, "qkv", "forward", "matrix", 900.0, 6e14),
            op(2, "attention", "forward", "matrix", 1500.0, 6.2e14),
            op(3, "ffn", "backward", "matrix", 2500.0, 6.4e14),
            op(4, "norms", "forward", "vector", 0.5, 1.2e12),
            op(5, "optimizer", "update", "vector", 0.4, 1e12),
        ],
        mesh: None,
        regions: Vec::new(),
    };
    let svg = svg_of(|o| tessera::plot::roofline::roofline(&r, SIZE, o));
    renders(&svg);
    assert_eq!(count(&svg, "point"), 5);
    assert_eq!(count(&svg, "roof"), 2);
    assert_eq!(count(&svg, "ceiling"), 3);
    insta::assert_snapshot!("roofline", summary(&svg));
}

// ---------------------------------------------------------------- the CLI and the README

use crate::common::tessera;

fn tmp(name: &str) -> PathBuf {
    crate::common::scratch_dir("plots").join(name)
}

#[test]
fn markdown_report_links_its_picture_relatively() {
    let dir = tmp("report");
    let md = dir.join("compare.md");
    let svg = dir.join("img").join("compare.svg");
    let out = tessera(&[
        "compare",
        "architectures/dgx-h100.ron",
        "architectures/dgx-b200.ron",
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
        "--format",
        "markdown",
        "--plot",
        svg.to_str().unwrap(),
        "--plot-size",
        "900x520",
        "--out",
        md.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "the report went to --out");
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(text.contains("| system"), "{text}");
    assert!(text.contains("](img/compare.svg)"), "{text}");
    let pic = std::fs::read_to_string(&svg).unwrap();
    assert!(pic.contains(r#"width="900" height="520""#));
}

#[test]
fn roofline_command_prints_the_table_and_draws() {
    let svg = tmp("roofline.svg");
    let out = tessera(&[
        "roofline",
        "--arch",
        "architectures/dgx-h100.ron",
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
        "--mapping",
        "auto",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    for col in [
        "operator",
        "FLOPs",
        "bytes",
        "intensity",
        "achieved",
        "bound by",
    ] {
        assert!(table.contains(col), "{col} in\n{table}");
    }
    assert!(table.contains("qkv projection"));
    let pic = std::fs::read_to_string(&svg).unwrap();
    renders(&pic);
}

#[test]
fn scale_takes_several_systems() {
    let out = tessera(&[
        "scale",
        "--arch",
        "architectures/dgx-h100.ron",
        "--arch",
        "architectures/dgx-b200.ron",
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
        "--devices",
        "4,8",
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.as_array().map(|a| a.len()), Some(2));
}

#[test]
fn bad_plot_size_is_a_usage_error() {
    let out = tessera(&[
        "compare",
        "architectures/dgx-h100.ron",
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
        "--plot",
        "x.svg",
        "--plot-size",
        "big",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("WIDTHxHEIGHT"));
}

/// The picture commands of the README and of every page under `docs/` (`docs/*.md`):
/// `cargo run --release -- ARGS --plot docs/img/NAME.svg`, each written from the repository root.
/// A command shown on more than one page is run once.
fn readme_commands() -> Vec<(Vec<String>, String)> {
    let root = crate::common::root();
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let mut out: Vec<(Vec<String>, String)> = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        for line in text.lines() {
            let Some(rest) = line.trim().strip_prefix("cargo run --release -- ") else {
                continue;
            };
            let args: Vec<String> = rest.split_whitespace().map(String::from).collect();
            let Some(k) = args.iter().position(|a| a == "--plot") else {
                continue;
            };
            let target = args[k + 1].clone();
            if target.starts_with("docs/img/") && !out.iter().any(|(a, _)| *a == args) {
                out.push((args, target));
            }
        }
    }
    out
}

#[test]
fn readme_pictures_are_current() {
    let cmds = readme_commands();
    assert!(
        cmds.len() >= 2,
        "the README and docs/*.md show pictures with their commands"
    );
    let bless = std::env::var_os("TESSERA_BLESS").is_some();
    let root = crate::common::root();
    let mut stale = Vec::new();
    for (args, target) in cmds {
        let fresh = tmp(target.trim_start_matches("docs/img/"));
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                if *a == target {
                    fresh.to_string_lossy().into_owned()
                } else {
                    a.clone()
                }
            })
            .collect();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = tessera(&refs);
        assert!(
            out.status.success(),
            "{refs:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let new = std::fs::read(&fresh).unwrap();
        renders(std::str::from_utf8(&new).unwrap());
        let committed = root.join(&target);
        if bless {
            std::fs::create_dir_all(committed.parent().unwrap()).unwrap();
            std::fs::write(&committed, &new).unwrap();
        } else if std::fs::read(&committed).ok().as_deref() != Some(&new[..]) {
            stale.push(target);
        }
    }
    assert!(
        stale.is_empty(),
        "pictures differ from what the docs' commands draw now: {stale:?}\n\
         if the change is meant, run: TESSERA_BLESS=1 cargo test --release --test it plots::readme"
    );
}

/// The iso-power picture: one line per system through its deployments within a budget, each
/// point at its power and throughput, and the budget drawn once.
#[test]
fn scale_against_power_has_a_line_per_system_and_the_budget() {
    let w = workload("workloads/llama3.1-8b-pretrain.ron");
    let choice = MappingChoice::Auto(Objective::Time);
    let budget = 400e3;
    let series: Vec<_> = [
        "architectures/eos-h100.ron",
        "architectures/gb200-cluster.ron",
    ]
    .iter()
    .map(|p| {
        let sys = system(p);
        let ests: Vec<Estimate> = [0.25, 0.5, 1.0]
            .iter()
            .filter_map(|f| {
                tessera::engine::budget::fit(
                    &sys,
                    &w,
                    &choice,
                    budget * f,
                    tessera::engine::budget::Basis::Average,
                )
                .ok()
            })
            .map(|f| {
                assert!(f.estimate.average_power_w.unwrap() <= budget * 1.0000001);
                f.estimate
            })
            .collect();
        assert_eq!(
            ests.len(),
            3,
            "{p}: every fraction of the budget holds a node"
        );
        let mut s = scaling(&sys.name, &w.name, ests);
        s.power_budget_w = Some(budget);
        s
    })
    .collect();
    let svg = svg_of(|o| tessera::plot::scale::power(&series, SIZE, o));
    renders(&svg);
    assert_eq!(count(&svg, "series"), 2);
    assert_eq!(count(&svg, "point"), 6);
    assert_eq!(count(&svg, "budget"), 1);
    assert!(svg.contains("facility power"));
}

// ---------------------------------------------------------------- placement

/// Llama 3.1 8B decode on one CS-3: one region of cores per layer.
fn cs3_placement() -> tessera::report::placement::Placement {
    let s = system("architectures/cerebras-cs3.ron");
    let w = workload("workloads/llama3.1-8b-serving.ron");
    let p = tessera::engine::prepare(&s, &w, &MappingChoice::Auto(Objective::Time), Some(1))
        .unwrap_or_else(|e| panic!("{}", e.reason));
    tessera::report::placement::placement(&s, &w.name, &p.program, &p.machine, p.mapping.dp)
        .expect("a wafer has a mesh")
}

#[test]
fn placement_covers_the_wafer_region_by_region() {
    let pl = cs3_placement();
    assert_eq!(pl.devices, 1);
    assert_eq!(pl.regions.len(), 32, "one region per layer");
    // the regions' pieces tile the wafer: their areas add up to its cores, none outside it
    let (x, y) = (pl.mesh.0 as f64, pl.mesh.1 as f64);
    let mut area = 0.0;
    for r in &pl.regions {
        let a: f64 = r.rects.iter().map(|q| q.3 * q.4).sum();
        assert!((a - r.cores).abs() <= 1e-6 * x * y, "region {}", r.index);
        for &(_, x0, y0, w, h) in &r.rects {
            assert!(x0 >= -1e-9 && y0 >= -1e-9 && x0 + w <= x + 1e-6 && y0 + h <= y + 1e-6);
        }
        area += a;
    }
    assert!((area - x * y).abs() <= 1e-6 * x * y, "{area} of {}", x * y);
    assert!(pl.regions.iter().any(|r| r.mesh_bytes_per_step > 0.0));
    // a device without a mesh has no placement to draw
    let h100 = system("architectures/dgx-h100.ron");
    let w = workload("workloads/llama3.1-8b-serving.ron");
    let p = tessera::engine::prepare(&h100, &w, &MappingChoice::Auto(Objective::Time), None)
        .unwrap_or_else(|e| panic!("{}", e.reason));
    assert!(tessera::report::placement::placement(
        &h100,
        &w.name,
        &p.program,
        &p.machine,
        p.mapping.dp
    )
    .is_none());
}

#[test]
fn placement_structure() {
    let pl = cs3_placement();
    let svg = svg_of(|o| tessera::plot::placement::placement(&pl, SIZE, o));
    renders(&svg);
    assert_eq!(count(&svg, "device"), 1);
    assert!(count(&svg, "region") >= 32);
    assert_eq!(count(&svg, "path"), 2);
    assert!(count(&svg, "busiest") >= 1);
    insta::assert_snapshot!("placement", summary(&svg));
}

#[test]
fn estimate_draws_the_placement_of_a_wafer() {
    let svg = tmp("placement.svg");
    let out = tessera(&[
        "estimate",
        "--arch",
        "architectures/cerebras-cs3.ron",
        "--workload",
        "workloads/llama3.1-8b-serving.ron",
        "--placement-svg",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pic = std::fs::read_to_string(&svg).unwrap();
    renders(&pic);
    assert_eq!(count(&pic, "device"), 1);
    // without a mesh: a clear error, exit 1
    let out = tessera(&[
        "estimate",
        "--arch",
        "architectures/dgx-h100.ron",
        "--workload",
        "workloads/llama3.1-8b-serving.ron",
        "--placement-svg",
        tmp("none.svg").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no mesh of cores") && err.contains("hint:"),
        "{err}"
    );
}
