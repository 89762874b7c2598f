//! Pictures that read: every picture the CLI draws from the shipped files keeps all of its text
//! on the canvas, no two pieces of text overlap, and no title is cut short. The check reads the
//! SVG as written — each `<text>` element's x, y, font size, anchor, rotation and content — and
//! sizes its box with the same width estimate the plotting code lays text out with
//! ([`tessera::plot::text_width`], bold a tenth wider), from the baseline 0.8 of the font size up
//! and 0.2 down, turned with the text; two boxes overlap when no edge of either separates them
//! (by more than half a pixel of rounding). Each picture is drawn at the default 800×500 and,
//! where its command takes `--plot-size`, at 640×400.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common;
use std::path::PathBuf;

/// One piece of text as drawn: its box (left, top, right, bottom) and what it says.
#[derive(Debug, Clone)]
struct TextBox {
    class: String,
    text: String,
    b: [f64; 4],
    /// The box's corners as drawn (turned with the text).
    corners: [(f64, f64); 4],
}

/// How deep two boxes (each four corners in order) overlap: the least overlap of their
/// projections on the axes of their edges (separating axes; zero or less: apart).
fn overlap_depth(p: &[(f64, f64); 4], q: &[(f64, f64); 4]) -> f64 {
    let mut depth = f64::INFINITY;
    for poly in [p, q] {
        for i in 0..2 {
            let (a, b) = (poly[i], poly[i + 1]);
            let len = ((b.0 - a.0).powi(2) + (b.1 - a.1).powi(2)).sqrt();
            if len == 0.0 {
                continue;
            }
            let axis = (-(b.1 - a.1) / len, (b.0 - a.0) / len);
            let span = |c: &[(f64, f64); 4]| {
                let d: Vec<f64> = c.iter().map(|v| v.0 * axis.0 + v.1 * axis.1).collect();
                (
                    d.iter().copied().fold(f64::INFINITY, f64::min),
                    d.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                )
            };
            let ((p0, p1), (q0, q1)) = (span(p), span(q));
            depth = depth.min(p1.min(q1) - p0.max(q0));
        }
    }
    depth
}

fn attr(attrs: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let spaced = format!(" {attrs}");
    let at = spaced.find(&key)?;
    spaced[at + key.len()..].split('"').next().map(String::from)
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// The canvas size from the root element.
fn canvas(svg: &str) -> (f64, f64) {
    let root = svg.split('>').next().unwrap();
    let w = attr(root, "width").unwrap().parse().unwrap();
    let h = attr(root, "height").unwrap().parse().unwrap();
    (w, h)
}

/// Every `<text>` element's box.
fn text_boxes(svg: &str) -> Vec<TextBox> {
    let mut out = Vec::new();
    for part in svg.split("<text ").skip(1) {
        let (attrs, rest) = part.split_once('>').expect("a text element");
        let text = unescape(rest.split("</text>").next().unwrap_or(""));
        let num = |k: &str| -> f64 {
            attr(attrs, k)
                .unwrap_or_else(|| panic!("<text {attrs}> has no {k}"))
                .parse()
                .unwrap()
        };
        let (x, y, fs) = (num("x"), num("y"), num("font-size"));
        let bold = attr(attrs, "font-weight").as_deref() == Some("bold");
        let w = tessera::plot::text_width(&text, fs) * if bold { 1.1 } else { 1.0 };
        let x0 = match attr(attrs, "text-anchor").as_deref().unwrap_or("start") {
            "middle" => x - w / 2.0,
            "end" => x - w,
            _ => x,
        };
        let (top, bottom) = (y - 0.8 * fs, y + 0.2 * fs);
        // Turned around (x, y) by `rotate(DEG X Y)`, the only transform the plots write.
        let deg = match attr(attrs, "transform").as_deref() {
            None => 0.0,
            Some(t) => {
                let v: Vec<f64> = t
                    .strip_prefix("rotate(")
                    .and_then(|r| r.strip_suffix(')'))
                    .unwrap_or_else(|| panic!("a text transform this check does not know: {t}"))
                    .split([' ', ','])
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse().unwrap())
                    .collect();
                assert!(
                    v.len() == 3 && v[1] == x && v[2] == y,
                    "rotation not about the anchor: {t}"
                );
                v[0]
            }
        };
        let (sin, cos) = f64::to_radians(deg).sin_cos();
        let turn = |px: f64, py: f64| {
            let (dx, dy) = (px - x, py - y);
            (x + dx * cos - dy * sin, y + dx * sin + dy * cos)
        };
        let corners = [
            turn(x0, top),
            turn(x0 + w, top),
            turn(x0 + w, bottom),
            turn(x0, bottom),
        ];
        let b = [
            corners.iter().map(|p| p.0).fold(f64::INFINITY, f64::min),
            corners.iter().map(|p| p.1).fold(f64::INFINITY, f64::min),
            corners
                .iter()
                .map(|p| p.0)
                .fold(f64::NEG_INFINITY, f64::max),
            corners
                .iter()
                .map(|p| p.1)
                .fold(f64::NEG_INFINITY, f64::max),
        ];
        out.push(TextBox {
            class: attr(attrs, "class").unwrap_or_default(),
            text,
            b,
            corners,
        });
    }
    out
}

/// What is wrong with a picture's text: boxes off the canvas, pairs that overlap, cut titles.
fn problems(svg: &str) -> Vec<String> {
    let (w, h) = canvas(svg);
    let boxes = text_boxes(svg);
    let mut bad = Vec::new();
    for t in &boxes {
        let [l, tp, r, bt] = t.b;
        if l < 0.0 || tp < 0.0 || r > w || bt > h {
            bad.push(format!(
                "off the {w}×{h} canvas: {} {:?} at [{l:.0}, {tp:.0}, {r:.0}, {bt:.0}]",
                t.class, t.text
            ));
        }
        if t.class == "title" && t.text.ends_with('…') {
            bad.push(format!("title cut short: {:?}", t.text));
        }
    }
    for (i, p) in boxes.iter().enumerate() {
        for q in &boxes[..i] {
            // Half a pixel is rounding in the written coordinates, not an overlap.
            let depth = overlap_depth(&p.corners, &q.corners);
            if depth > 0.5 {
                bad.push(format!(
                    "overlap ({depth:.1} px deep): {} {:?} and {} {:?}",
                    p.class, p.text, q.class, q.text
                ));
            }
        }
    }
    bad
}

fn tmp(name: &str) -> PathBuf {
    common::scratch_dir("tessera-picture-text").join(name)
}

/// Run `tessera ARGS` with `{}` replaced by a fresh SVG path; the SVG it wrote.
fn draw(name: &str, args: &[&str]) -> String {
    let path = tmp(&format!("{name}.svg"));
    let p = path.to_string_lossy().into_owned();
    let args: Vec<&str> = args
        .iter()
        .map(|a| if *a == "{}" { p.as_str() } else { a })
        .collect();
    let out = common::tessera(&args);
    assert!(
        out.status.success(),
        "{name}: tessera {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&path).unwrap()
}

/// Every kind of picture, drawn from shipped files: the docs' pictures, the README's two main
/// comparisons, the serving curve, the iso-power and goodput scaling, a sweep and the placement
/// of a wafer.
const PICTURES: &[(&str, &[&str])] = &[
    (
        "roofline",
        &[
            "roofline",
            "--arch",
            "architectures/dgx-h100.ron",
            "--workload",
            "workloads/llama3.1-8b-pretrain.ron",
            "--mapping",
            "auto",
            "--plot",
            "{}",
        ],
    ),
    (
        "compare",
        &[
            "compare",
            "architectures/dgx-h100.ron",
            "architectures/dgx-b200.ron",
            "architectures/mi300x-node.ron",
            "--workload",
            "workloads/llama3.1-8b-pretrain.ron",
            "--plot",
            "{}",
        ],
    ),
    (
        "compare-serving",
        &[
            "compare",
            "architectures/gb200-nvl72.ron",
            "architectures/cerebras-cs3.ron",
            "architectures/northpole-16.ron",
            "--workload",
            "workloads/granite-3b-northpole.ron",
            "--slo",
            "tpot<=1ms",
            "--plot",
            "{}",
        ],
    ),
    (
        "compare-power-budget",
        &[
            "compare",
            "architectures/gb200-nvl72.ron",
            "architectures/cerebras-cs3-cluster.ron",
            "architectures/northpole-16.ron",
            "--workload",
            "workloads/llama3.1-8b-pretrain.ron",
            "--power-budget",
            "1 MW",
            "--plot",
            "{}",
        ],
    ),
    (
        "scale",
        &[
            "scale",
            "--arch",
            "architectures/eos-h100.ron",
            "--arch",
            "architectures/gb200-cluster.ron",
            "--workload",
            "workloads/gpt3-175b-mlperf.ron",
            "--devices",
            "64,128,256,512,1024",
            "--plot",
            "{}",
        ],
    ),
    (
        "scale-power",
        &[
            "scale",
            "--arch",
            "architectures/eos-h100.ron",
            "--arch",
            "architectures/gb200-cluster.ron",
            "--workload",
            "workloads/llama3.1-8b-pretrain.ron",
            "--power-budget",
            "20 MW",
            "--plot",
            "{}",
        ],
    ),
    (
        "goodput",
        &[
            "scale",
            "--arch",
            "architectures/llama3-h100-16k.ron",
            "--workload",
            "workloads/llama3.1-405b-pretrain.ron",
            "--devices",
            "1024,2048,4096,8192,16384",
            "--goodput",
            "--plot",
            "{}",
        ],
    ),
    (
        "curve",
        &[
            "serve-curve",
            "architectures/dgx-h100.ron",
            "architectures/dgx-b200.ron",
            "--workload",
            "workloads/llama3.1-8b-serving.ron",
            "--plot",
            "{}",
        ],
    ),
    (
        "cost",
        &[
            "serve-curve",
            "architectures/dgx-h100.ron",
            "architectures/dgx-b200.ron",
            "architectures/hgx-h200.ron",
            "--workload",
            "workloads/llama3.1-8b-serving.ron",
            "--dollars",
            "--plot",
            "{}",
        ],
    ),
    (
        "sweep",
        &[
            "sweep",
            "architectures/sweeps/gb200-cluster-llama405b.ron",
            "--quiet",
            "--top",
            "5",
            "--pareto",
            "throughput,power",
            "--plot",
            "{}",
        ],
    ),
    (
        "placement",
        &[
            "estimate",
            "--arch",
            "architectures/cerebras-cs3.ron",
            "--workload",
            "workloads/llama3.1-8b-serving.ron",
            "--placement-svg",
            "{}",
        ],
    ),
    ("validate", &["validate", "--plot", "{}"]),
];

#[test]
fn every_picture_keeps_its_text_on_the_canvas_and_apart() {
    let mut report = Vec::new();
    for (name, args) in PICTURES {
        // At the default size, and on a narrower canvas where the command takes a size.
        let mut runs = vec![(name.to_string(), args.to_vec())];
        if args.contains(&"--plot") {
            let mut narrow = args.to_vec();
            narrow.extend(["--plot-size", "640x400"]);
            runs.push((format!("{name} at 640x400"), narrow));
        }
        for (label, args) in runs {
            let svg = draw(&label.replace(' ', "-"), &args);
            let boxes = text_boxes(&svg);
            assert!(
                boxes.iter().any(|t| t.class == "title"),
                "{label}: no title"
            );
            for p in problems(&svg) {
                report.push(format!("{label}: {p}"));
            }
        }
    }
    assert!(
        report.is_empty(),
        "{} problems with the pictures' text:\n{}",
        report.len(),
        report.join("\n")
    );
}

/// The check itself can fail: a picture with a label off the canvas, two labels on top of each
/// other, a rotated axis title that runs off the top and a cut title is caught four times; the
/// same texts set apart pass.
#[test]
fn the_check_catches_what_it_is_for() {
    let head = r#"<svg xmlns="http://www.w3.org/2000/svg" width="400" height="200">"#;
    let bad = format!(
        "{head}\n\
         <text class=\"title\" x=\"200.0\" y=\"20.0\" font-size=\"15.0\" text-anchor=\"middle\" font-weight=\"bold\">A long title…</text>\n\
         <text class=\"label\" x=\"380.0\" y=\"100.0\" font-size=\"11.0\" text-anchor=\"start\">off the edge</text>\n\
         <text class=\"label\" x=\"100.0\" y=\"150.0\" font-size=\"11.0\" text-anchor=\"start\">first label</text>\n\
         <text class=\"label\" x=\"110.0\" y=\"154.0\" font-size=\"11.0\" text-anchor=\"start\">second label</text>\n\
         <text class=\"axis-title y\" x=\"20.0\" y=\"60.0\" font-size=\"12.0\" text-anchor=\"middle\" transform=\"rotate(-90 20.0 60.0)\">a rotated axis title that is long</text>\n\
         </svg>\n"
    );
    let p = problems(&bad);
    assert_eq!(p.len(), 4, "{p:#?}");
    assert!(p.iter().any(|s| s.contains("title cut short")));
    assert!(p
        .iter()
        .any(|s| s.contains("off the") && s.contains("off the edge")));
    assert!(p
        .iter()
        .any(|s| s.contains("off the") && s.contains("rotated")));
    assert!(p
        .iter()
        .any(|s| s.contains("overlap") && s.contains("second label")));
    let good = format!(
        "{head}\n\
         <text class=\"title\" x=\"200.0\" y=\"20.0\" font-size=\"15.0\" text-anchor=\"middle\" font-weight=\"bold\">A title</text>\n\
         <text class=\"label\" x=\"300.0\" y=\"100.0\" font-size=\"11.0\" text-anchor=\"start\">inside</text>\n\
         <text class=\"label\" x=\"100.0\" y=\"150.0\" font-size=\"11.0\" text-anchor=\"start\">first label</text>\n\
         <text class=\"label\" x=\"100.0\" y=\"165.0\" font-size=\"11.0\" text-anchor=\"start\">second label</text>\n\
         <text class=\"axis-title y\" x=\"20.0\" y=\"100.0\" font-size=\"12.0\" text-anchor=\"middle\" transform=\"rotate(-90 20.0 100.0)\">short</text>\n\
         </svg>\n"
    );
    assert_eq!(problems(&good), Vec::<String>::new());
}
