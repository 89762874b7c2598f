//! One test per finding of issue 44 about what goes in and comes out of the command line (items
//! 2 to 5): outputs that are complete or absent, merges that verify what they join, inputs that
//! are bounded, exit codes and line endings. Each is named after the bug and checks it where a
//! user would see it: the files left on disk, the exit code, the message. (`tests/it/regressions.rs`
//! holds the others, in the same style.)

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A small sweep (4 points) for shard and merge tests.
const SMALL: [&str; 9] = [
    "sweep",
    "--arch",
    "architectures/selene-a100.ron",
    "--workload",
    "workloads/megatron-22b.ron",
    "--vary",
    "devices=8",
    "--vary",
    "device.tdp=[300 W, 350 W, 400 W, 450 W]",
];

/// Shard `i` of `n` of [`SMALL`], its summary written under `dir`.
fn shard(dir: &Path, i: u64, n: u64) -> PathBuf {
    let p = dir.join(format!("s{i}.json"));
    let sh = format!("{i}/{n}");
    let out = common::tessera(
        &[
            &SMALL[..],
            &[
                "--backend",
                "cpu",
                "--quiet",
                "--shard",
                &sh,
                "--summary",
                p.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    p
}

fn merge(files: &[&Path], extra: &[&str]) -> Output {
    let mut a = vec!["sweep", "merge"];
    a.extend(files.iter().map(|p| p.to_str().unwrap()));
    a.extend_from_slice(extra);
    a.extend_from_slice(&["--format", "json"]);
    common::tessera(&a)
}

/// The summary at `p` with `f` applied to its JSON.
fn edit(p: &Path, f: impl FnOnce(&mut Value)) {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// Issue 44: `sweep merge` of a set missing one shard exited 0, with a warning on stderr and no
/// completeness field in the JSON. Now it is refused (exit 1) with the missing range; with
/// `--allow-partial` it joins them and says `complete: false` with the `missing` ranges.
#[test]
fn a_merge_missing_a_shard_is_refused_unless_allowed() {
    let dir = common::scratch_dir("merge-missing");
    let (a, c) = (shard(&dir, 0, 4), shard(&dir, 2, 4));
    let out = merge(&[&a, &c], &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("missing points 1..2, 3..4") && err.contains("--allow-partial"),
        "{err}"
    );
    let out = merge(&[&a, &c], &["--allow-partial"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["complete"], Value::Bool(false));
    assert_eq!(
        v["missing"],
        serde_json::json!([{"start": 1, "end": 2}, {"start": 3, "end": 4}])
    );
    // the whole set is complete
    let (b, d) = (shard(&dir, 1, 4), shard(&dir, 3, 4));
    let out = merge(&[&d, &b, &c, &a], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["complete"], Value::Bool(true));
    assert_eq!(v["missing"], serde_json::json!([]));
}

/// Issue 44: a shard summary whose best throughput was multiplied by 100 merged, exit 0, and
/// the edited point came out on top. Its checksum no longer matches: refused, exit 1.
#[test]
fn a_shard_with_an_edited_figure_is_refused() {
    let dir = common::scratch_dir("merge-edited");
    let (a, b) = (shard(&dir, 0, 2), shard(&dir, 1, 2));
    edit(&b, |v| {
        let t = v["top"][0]["throughput_per_s"].as_f64().unwrap();
        v["top"][0]["throughput_per_s"] = serde_json::json!(t * 100.0);
    });
    let out = merge(&[&a, &b], &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(b.to_str().unwrap()) && err.contains("checksum"),
        "{err}"
    );
}

/// Issue 44: edited counts merged (exit 0) into counts that no run gave. Refused, also when the
/// editor recomputed the checksum: the counts must add up to the shard's range.
#[test]
fn a_shard_with_edited_counts_is_refused() {
    let dir = common::scratch_dir("merge-counts");
    let (a, b) = (shard(&dir, 0, 2), shard(&dir, 1, 2));
    let mut s: tessera::sweep::Summary =
        serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
    s.evaluated += 5;
    s.feasible += 5;
    s.seal();
    std::fs::write(&b, serde_json::to_string(&s).unwrap()).unwrap();
    let out = merge(&[&a, &b], &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("counts disagree"), "{err}");
}

/// Issue 44: a shard whose range was rewritten (to cover the points of a shard that never ran)
/// merged, exit 0. The range must be the shard it names.
#[test]
fn a_shard_with_a_rewritten_range_is_refused() {
    let dir = common::scratch_dir("merge-range");
    let a = shard(&dir, 0, 2);
    let mut s: tessera::sweep::Summary =
        serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    s.shards[0].end = s.total_points;
    s.seal();
    std::fs::write(&a, serde_json::to_string(&s).unwrap()).unwrap();
    let out = merge(&[&a], &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("which is not that shard"), "{err}");
}

/// Issue 44: the first file's `format` was never checked (only the others'): a JSON file of
/// another kind, first, was joined. Refused, exit 1.
#[test]
fn a_first_file_of_another_format_is_refused() {
    let dir = common::scratch_dir("merge-format");
    let (a, b) = (shard(&dir, 0, 2), shard(&dir, 1, 2));
    edit(&a, |v| v["format"] = Value::String("something-else".into()));
    let out = merge(&[&a, &b], &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not a sweep summary: format `something-else`"),
        "{err}"
    );
}

/// A CSV sweep long enough to be stopped midway: 2,000,000 random points.
fn long_csv_sweep(out: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessera"));
    c.args([
        "sweep",
        "architectures/sweeps/gb200-cluster-llama405b.ron",
        "--sampling",
        "random",
        "--points",
        "2000000",
        "--backend",
        "cpu",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ])
    .current_dir(common::root())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    c
}

/// The files in `dir`.
fn listing(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Issue 44: a SIGTERM during a CSV sweep left a file under the final name that ended cleanly on
/// a whole row (262,144 of 2,000,000): it looked complete. The points go to a temporary file
/// that is renamed when complete; an interrupt removes it and exits 128 + 15.
#[cfg(unix)]
#[test]
fn an_interrupted_csv_sweep_leaves_no_file() {
    let dir = common::scratch_dir("sweep-sigterm");
    let out = dir.join("points.csv");
    let mut child = long_csv_sweep(&out).spawn().unwrap();
    // wait until rows are being written (the temporary file exists and grows)
    let started = Instant::now();
    loop {
        let writing = listing(&dir).iter().any(|n| {
            n.contains("tmp") && std::fs::metadata(dir.join(n)).is_ok_and(|m| m.len() > 0)
        });
        if writing {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the sweep ended early");
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no rows after 2 min"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let done = child.wait_with_output().unwrap();
    let err = text(&done.stderr);
    assert_eq!(done.status.code(), Some(143), "{err}");
    assert!(err.contains("interrupted after"), "{err}");
    assert!(listing(&dir).is_empty(), "{:?} left behind", listing(&dir));
}

/// Issue 44: out of disk, a CSV points file ended cleanly on a whole row and looked complete. A
/// file-size limit (`ulimit -f`, which fails writes as a full disk does) now fails the sweep,
/// exit 1, and leaves no file.
#[cfg(target_os = "linux")]
#[test]
fn a_write_error_leaves_no_file() {
    let dir = common::scratch_dir("sweep-full");
    let out = dir.join("points.csv");
    let cmd = long_csv_sweep(&out);
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| format!("'{}'", a.to_string_lossy()))
        .collect();
    let script = format!(
        "ulimit -f 256; exec '{}' {}",
        env!("CARGO_BIN_EXE_tessera"),
        args.join(" ")
    );
    let done = Command::new("sh")
        .args(["-c", &script])
        .current_dir(common::root())
        .output()
        .unwrap();
    let err = text(&done.stderr);
    assert_eq!(done.status.code(), Some(1), "{err}");
    assert!(err.contains("points.csv"), "{err}");
    assert!(listing(&dir).is_empty(), "{:?} left behind", listing(&dir));
}

/// Run `tessera ARGS` and insist that it ends within `secs` seconds (killed and failed if not).
fn within(secs: u64, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .current_dir(common::root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            panic!("tessera {args:?} still running after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// Issue 44: a FIFO as an input blocked forever (opening it waits for a writer). Only regular
/// files are read: a located error at once, exit 1.
#[cfg(unix)]
#[test]
fn a_fifo_as_input_is_refused_at_once() {
    let fifo = common::scratch_dir("fifo").join("system.ron");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let out = within(10, &["check", fifo.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not a regular file"), "{err}");
}

/// Issue 44: `Use("/dev/zero")` read until memory ran out. A device is not a regular file: a
/// located error at the reference, at once.
#[cfg(unix)]
#[test]
fn a_device_as_input_is_refused_at_once() {
    let dir = common::scratch_dir("dev-zero");
    let f = dir.join("system.ron");
    let text0 = std::fs::read_to_string(common::root().join("architectures/dgx-a100.ron")).unwrap();
    let at = text0.find("Use(\"").expect("the file uses a part");
    let end = at + text0[at..].find("\")").unwrap() + 2;
    let edited = format!("{}Use(\"/dev/zero\"){}", &text0[..at], &text0[end..]);
    std::fs::write(&f, edited).unwrap();
    let out = within(10, &["check", f.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("/dev/zero") && err.contains("not a regular file"),
        "{err}"
    );
    let out = within(10, &["check", "/dev/zero"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

/// Issue 44 (item 4): no size limit on what is read. A file over 64 MiB is refused before it is
/// read, and the message states the limit.
#[test]
fn an_input_over_the_size_limit_is_refused() {
    let f = common::scratch_dir("huge").join("system.ron");
    std::fs::File::create(&f)
        .unwrap()
        .set_len(tessera::spec::MAX_FILE_BYTES + 1)
        .unwrap();
    let out = within(10, &["check", f.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("over the 64 MiB limit"), "{err}");
}

/// Issue 44: a file with CR-only line endings read as "only comments" (the first `//` comment
/// ran to the end of the file). It now reads as lines: the shipped file, so saved, checks clean.
#[test]
fn cr_only_line_endings_read_as_lines() {
    let dir = common::scratch_dir("cr-only");
    let src = common::root().join("workloads/megatron-22b.ron");
    let f = dir.join("megatron-22b.ron");
    std::fs::write(
        &f,
        std::fs::read_to_string(src).unwrap().replace('\n', "\r"),
    )
    .unwrap();
    let out = common::tessera(&["check", f.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Issue 44: a 50 MB name made a 1.4 GB table. Table cells show at most 200 characters (JSON and
/// CSV keep the whole name).
#[test]
fn a_long_name_makes_a_short_table() {
    let dir = common::scratch_dir("long-name");
    let src = std::fs::read_to_string(common::root().join("workloads/megatron-22b.ron")).unwrap();
    let at = src.find("name: \"").expect("a name") + "name: \"".len();
    let end = at + src[at..].find('"').unwrap();
    let long = "n".repeat(1_000_000);
    let f = dir.join("w.ron");
    std::fs::write(&f, format!("{}{long}{}", &src[..at], &src[end..])).unwrap();
    let run = |fmt: &str| {
        common::tessera(&[
            "estimate",
            "--arch",
            "architectures/selene-a100.ron",
            "--workload",
            f.to_str().unwrap(),
            "--devices",
            "8",
            "--format",
            fmt,
        ])
    };
    let table = run("table");
    assert!(table.status.success(), "{}", text(&table.stderr));
    assert!(table.stdout.len() < 100_000, "{} bytes", table.stdout.len());
    let json = run("json");
    assert!(json.stdout.len() > 1_000_000, "JSON keeps the whole name");
}

/// Issue 44 (item 5): usage errors exit 2 everywhere. `--devices 0` ran and printed an infeasible
/// estimate, exit 0, where `--set devices=0` is refused; `scale --set devices=…` (which
/// contradicts `--devices`) exited 1. Both are now usage errors.
#[test]
fn contradictory_or_zero_device_arguments_are_usage_errors() {
    const RUN: [&str; 4] = [
        "--arch",
        "architectures/selene-a100.ron",
        "--workload",
        "workloads/megatron-22b.ron",
    ];
    for args in [
        &[&["estimate"][..], &RUN, &["--devices", "0"]].concat(),
        &[&["scale"][..], &RUN, &["--devices", "8,0"]].concat(),
        &[
            &["scale"][..],
            &RUN,
            &["--devices", "8,16", "--set", "devices=8"],
        ]
        .concat(),
    ] {
        let out = common::tessera(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}
