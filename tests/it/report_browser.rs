//! `compare --report` opened in a real browser: headless Chromium (Debian's `chromium`, which
//! `.ci/run` installs) loads the file and dumps the DOM it built, which must hold the comparison
//! table with a row for each system and at least one `<svg>` with drawn marks in it.
//!
//! Where no Chromium binary exists the test prints why and skips, but with `CI` set it fails:
//! CI must run it. `TESSERA_CHROMIUM=/path/to/chrome` picks the binary.

#![allow(clippy::print_stderr)] // says why it skips, and how long the browser took
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The first Chromium on PATH (or named by `TESSERA_CHROMIUM`).
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TESSERA_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome", "chrome"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Run `cmd` to its end or until `limit`, then kill it; its stdout.
fn run_with_limit(mut cmd: Command, limit: Duration) -> (bool, String, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the browser");
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let read = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let (o, e) = (read(Box::new(out)), read(Box::new(err)));
    let start = Instant::now();
    let ok = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.success();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (ok, o.join().unwrap(), e.join().unwrap())
}

#[test]
fn a_headless_browser_renders_the_compare_report() {
    let Some(browser) = chromium() else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "CI is set and no chromium binary is on PATH: `.ci/run` installs Debian's \
                 chromium for this test"
            );
        }
        eprintln!(
            "SKIPPED a_headless_browser_renders_the_compare_report: no chromium binary on PATH \
             (apt-get install --no-install-recommends chromium, or set TESSERA_CHROMIUM)"
        );
        return;
    };
    let dir = crate::common::scratch_dir("tessera-report-browser");
    let report = dir.join("r.html");
    let systems = [
        "architectures/dgx-h100.ron",
        "architectures/dgx-b200.ron",
        "architectures/mi300x-node.ron",
    ];
    let mut args = vec!["compare"];
    args.extend(systems);
    let r = report.to_string_lossy().into_owned();
    args.extend([
        "--workload",
        "workloads/llama3.1-8b-pretrain.ron",
        "--format",
        "json",
        "--report",
        &r,
    ]);
    let out = crate::common::tessera(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let started = Instant::now();
    let mut cmd = Command::new(&browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-dev-shm-usage",
    ])
    .arg(format!("--user-data-dir={}", dir.join("profile").display()))
    .arg("--dump-dom")
    .arg(format!("file://{}", absolute(&report).display()))
    // a home of its own: the browser writes its caches there
    .env("HOME", &dir);
    let (ok, dom, err) = run_with_limit(cmd, Duration::from_secs(120));
    eprintln!(
        "{} rendered the report in {:.1} s",
        browser.display(),
        started.elapsed().as_secs_f64()
    );
    assert!(ok, "{} failed or hung: {err}", browser.display());

    // The DOM as the browser built it: the comparison table with one row per system…
    let table = dom
        .split("<table class=\"comparison\">")
        .nth(1)
        .unwrap_or_else(|| panic!("no comparison table in the rendered DOM:\n{dom}"))
        .split("</table>")
        .next()
        .unwrap();
    assert!(
        table.contains("<tbody>"),
        "the browser built the table body"
    );
    let systems = json["systems"].as_array().unwrap();
    assert_eq!(
        table.matches("<tr class=\"system").count(),
        systems.len(),
        "one row per system"
    );
    for s in systems {
        let name = s["system"].as_str().unwrap();
        assert!(
            table.contains(&format!("data-name=\"{name}\"")),
            "{name} has its row"
        );
    }
    // …and a picture with marks drawn in it (the comparison's bars).
    let svg = dom
        .split("<svg")
        .nth(1)
        .unwrap_or_else(|| panic!("no <svg> in the rendered DOM"))
        .split("</svg>")
        .next()
        .unwrap();
    let bars = svg.matches("class=\"bar").count();
    assert!(bars >= systems.len(), "only {bars} bars drawn");
    assert!(svg.contains("<text"), "the picture has its text");
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap().join(p)
    }
}
