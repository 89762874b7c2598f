//! `compare --report` and `validate --report`: one self-contained HTML file (nothing fetched from
//! elsewhere) whose tables hold the same numbers as `--format json`, whose structure is pinned
//! by a snapshot (headings, columns and rows; the numbers are left out, so the physics may move
//! them), and which leaves stdout as it was.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common;
use std::path::PathBuf;

use crate::common::tessera;

/// A path for `name` in a folder of its own (`common::scratch_dir`).
fn tmp(name: &str) -> PathBuf {
    common::scratch_dir("tessera-report-html").join(name)
}

const SYSTEMS: [&str; 3] = [
    "architectures/gb200-nvl72.ron",
    "architectures/cerebras-cs3.ron",
    "architectures/northpole-16.ron",
];

/// The README's serving comparison, with `extra` arguments.
fn compare(extra: &[&str]) -> std::process::Output {
    let mut args = vec!["compare"];
    args.extend(SYSTEMS);
    args.extend([
        "--workload",
        "workloads/granite-3b-northpole.ron",
        "--slo",
        "tpot<=1ms",
    ]);
    args.extend(extra);
    let out = tessera(&args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let at = tag.find(&key)?;
    tag[at + key.len()..].split('"').next().map(String::from)
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Text of every element `<tag …>…</tag>` in order (tags not nested in themselves).
fn elements(html: &str, tag: &str) -> Vec<(String, String)> {
    let open = format!("<{tag}");
    let close = format!("</{tag}>");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find(&open) {
        let after = &rest[i + open.len()..];
        if !after.starts_with([' ', '>']) {
            rest = after;
            continue;
        }
        let (head, body) = after.split_once('>').unwrap();
        let inner = body.split(&close).next().unwrap_or("");
        out.push((head.to_string(), inner.to_string()));
        rest = body;
    }
    out
}

/// The page's structure without its numbers: sections, headings, each table's columns and row
/// names, and the pictures.
fn skeleton(html: &str) -> String {
    let mut out = String::new();
    for line in html.lines() {
        let l = line.trim();
        if let Some(id) = l.strip_prefix("<section id=\"") {
            out.push_str(&format!("section {}\n", id.split('"').next().unwrap()));
        }
        for h in ["h1", "h2", "h3"] {
            if l.starts_with(&format!("<{h}>")) {
                let t = l.trim_start_matches(&format!("<{h}>"));
                out.push_str(&format!(
                    "  {h} {}\n",
                    unescape(t.split('<').next().unwrap())
                ));
            }
        }
        if l.starts_with("<div class=\"scroll\"><table") {
            let table = l.split("<table").nth(1).unwrap();
            out.push_str(&format!("  table {}\n", attr(table, "class").unwrap()));
        }
        if l.starts_with("<th>") || l.starts_with("<th ") {
            let cols: Vec<String> = elements(l, "th")
                .into_iter()
                .map(|(head, t)| match attr(&head, "data-key") {
                    Some(k) => format!("{} [{k}]", unescape(&t)),
                    None => unescape(&t),
                })
                .collect();
            out.push_str(&format!("    columns: {}\n", cols.join(" | ")));
        }
        if l.starts_with("<tr class=") {
            out.push_str(&format!(
                "    row {} ({})\n",
                unescape(&attr(l, "data-name").unwrap()),
                attr(l, "class").unwrap()
            ));
        }
        if l.starts_with("<svg ") {
            out.push_str(&format!("  svg {}\n", attr(l, "class").unwrap()));
        }
        if l.starts_with("<script type=\"application/json\"") {
            out.push_str("data script#tessera-data\n");
        }
    }
    out
}

/// Nothing in the page loads from elsewhere: no stylesheet, script or image by URL, every
/// `url(…)` and `href` inside the page.
fn self_contained(html: &str) {
    for bad in ["<link", " src=", "@import", "<iframe", "<object", "<img"] {
        assert!(!html.contains(bad), "the page loads something: {bad}");
    }
    for (i, _) in html.match_indices("url(") {
        assert!(html[i..].starts_with("url(#"), "url() outside the page");
    }
    for (i, _) in html.match_indices("href=\"") {
        assert!(html[i..].starts_with("href=\"#"), "href outside the page");
    }
    assert!(
        !html.contains("xmlns=\"http"),
        "a namespace URL left in an inline picture"
    );
}

/// The value at a dotted JSON key (`ratio_to_baseline.throughput`).
fn at<'a>(v: &'a serde_json::Value, key: &str) -> &'a serde_json::Value {
    key.split('.').fold(v, |v, k| &v[k])
}

#[test]
fn compare_report_holds_the_json_numbers_and_leaves_stdout_alone() {
    let plain = compare(&["--format", "json"]);
    let path = tmp("compare.html");
    let p = path.to_string_lossy().into_owned();
    let with = compare(&["--format", "json", "--report", &p]);
    assert_eq!(
        plain.stdout, with.stdout,
        "--report must not change stdout's JSON"
    );
    let json: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    let html = std::fs::read_to_string(&path).unwrap();
    self_contained(&html);

    // The comparison table: one row per system, every number cell equal to the JSON's value.
    let table = html
        .split("<table class=\"comparison\">")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap();
    let systems = json["systems"].as_array().unwrap();
    let rows: Vec<&str> = table.split("<tr class=\"system").skip(1).collect();
    assert_eq!(rows.len(), systems.len());
    let mut checked = 0;
    for (row, sys) in rows.iter().zip(systems) {
        assert!(row.contains(&format!(
            "data-name=\"{}\"",
            sys["system"].as_str().unwrap()
        )));
        for (head, _) in elements(row, "td") {
            let (Some(key), Some(value)) = (attr(&head, "data-key"), attr(&head, "data-value"))
            else {
                continue;
            };
            let want = at(sys, &key);
            if value == "null" {
                assert!(want.is_null(), "{key}: {want} shown as absent");
            } else {
                let got: f64 = value.parse().unwrap();
                let want = want.as_f64().unwrap_or_else(|| panic!("{key}: {want}"));
                assert_eq!(got, want, "{key}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 3 * 10, "only {checked} numbers checked");

    // The error bands and each system's sources, as the JSON has them.
    for sys in systems {
        let band = &sys["error_band"];
        if let Some(case) = band["anchor"]["case"].as_str() {
            assert!(html.contains(case), "{case} named");
        }
        let f = &sys["figures"];
        assert!(html.contains(&format!(
            "figures: {} sourced",
            f["sourced"].as_u64().unwrap()
        )));
    }
    for file in SYSTEMS {
        assert!(html.contains(&format!("described by {file}")));
    }
    // The JSON itself, embedded, equal to stdout's.
    let data = html
        .split("<script type=\"application/json\" id=\"tessera-data\">")
        .nth(1)
        .unwrap()
        .split("</script>")
        .next()
        .unwrap();
    let embedded: serde_json::Value = serde_json::from_str(data).unwrap();
    assert_eq!(embedded, json);
    insta::assert_snapshot!("compare_report", skeleton(&html));
}

#[test]
fn validate_report_holds_every_case_and_the_bands() {
    let plain = tessera(&["validate", "--format", "json"]);
    let path = tmp("validate.html");
    let p = path.to_string_lossy().into_owned();
    let with = tessera(&["validate", "--format", "json", "--report", &p]);
    assert_eq!(plain.status.code(), with.status.code());
    assert_eq!(plain.stdout, with.stdout, "--report must not change stdout");
    let json: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    let html = std::fs::read_to_string(&path).unwrap();
    self_contained(&html);
    let cases = json["cases"].as_array().unwrap();
    let table = html
        .split("<table class=\"cases\">")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap();
    assert_eq!(table.matches("<tr class=\"case").count(), cases.len());
    for c in cases {
        let id = c["id"].as_str().unwrap();
        assert!(table.contains(&format!("data-name=\"{id}\"")), "{id}");
    }
    let check = &json["summary"]["check"];
    assert!(html.contains(&format!(
        "{} of {} check cases within tolerance",
        check["within"], check["cases"]
    )));
    assert!(html.contains("<table class=\"bands\">"));
    assert_eq!(html.matches("<svg ").count(), 1);
    let skel = skeleton(&html);
    // The case rows move with the validation set; the rest is the structure.
    let structure: String = skel
        .lines()
        .filter(|l| !l.starts_with("    row "))
        .map(|l| format!("{l}\n"))
        .collect();
    insta::assert_snapshot!("validate_report", structure);
}

#[test]
fn report_to_a_folder_that_cannot_be_made_is_an_error_with_the_path() {
    let out = tessera(&[
        "validate",
        "validation/mlperf",
        "--report",
        "/proc/version/x/r.html",
    ]);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/proc/version/x"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
