//! The authoring loop's diagnostics, end to end: every file under `tests/bad/` makes
//! `tessera check` exit 1 (never panic) with errors at the right place, snapshotted under
//! `tests/it/snapshots/`; the shipped files pass; usage errors exit 2; and no input, however mangled,
//! makes the loader panic.
//!
//! Regenerate the snapshots with `INSTA_UPDATE=always cargo test --test it diagnostics::`, then read
//! them: each must point at the offending text with a helpful message.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tessera::check::check_file;
use tessera::diag::Severity;
use tessera::model::system::MemFs;

// `tessera ARGS...` runs from the crate root, so paths print as `tests/bad/x.ron`.
use crate::common::{root, tessera};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The bad files, as paths relative to the crate root (helper parts under `tests/bad/parts/` are
/// referenced by them, not checked on their own; `tests/bad/workloads/` has its own test;
/// `tests/bad/gen_corpus.py` wrote them).
fn bad_files() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root().join("tests/bad"))
        .expect("tests/bad")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "ron"))
        .map(|p| format!("tests/bad/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    out.sort();
    out
}

/// The list of file kinds grows as tessera learns to read more of them: snapshot it as a name.
fn stable(stderr: &str) -> String {
    stderr.replace(&tessera::check::KINDS.join(", "), "{KINDS}")
}

fn stem(file: &str) -> String {
    Path::new(file)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// Where the first diagnostic of each bad file must point and what it must say: the file that holds
/// the offending text, `line:col`, and a piece of the message. Written by hand from reading the
/// files; the snapshots hold the full text (source line, caret, hint, further errors).
const EXPECT: &[(&str, &str, &str, &str)] = &[
    ("absurd-count", "tests/bad/absurd-count.ron", "28:12", "`nodes` = 18000000000000 is absurdly large"),
    ("absurdly-large-value", "tests/bad/absurdly-large-value.ron", "40:10", "absurdly large for a power"),
    ("alias-chain-to-broken", "tests/bad/parts/broken-device.ron", "39:10", "unknown unit `V`"),
    ("alias-of-missing", "tests/bad/alias-of-missing.ron", "2:1", "cannot read referenced file `tests/bad/parts/nowhere.ron`"),
    ("binary-garbage", "tests/bad/binary-garbage.ron", "1:1", "not valid UTF-8"),
    ("attention-table-broken", "tests/bad/attention-table-broken.ron", "30:96", "1200 TFLOP/s is above the device's matrix peak at fp16"),
    ("software-empty-attention-kernel", "tests/bad/software-empty-attention-kernel.ron", "9:23", "the attention kernel has no name"),
    ("collective-share-of-one", "tests/bad/collective-share-of-one.ron", "47:35", "`collective_compute_share` must be a fraction in [0, 1)"),
    ("bom-then-error", "tests/bad/bom-then-error.ron", "28:5", "unknown field `node_count`"),
    ("circular-reference", "tests/bad/parts/circ-b.ron", "2:1", "circular reference: tests/bad/circular-reference.ron -> tests/bad/parts/circ-a.ron -> tests/bad/parts/circ-b.ron -> tests/bad/parts/circ-a.ron"),
    ("comment-only", "tests/bad/comment-only.ron", "1:1", "the file holds only comments"),
    ("crlf-line-endings", "tests/bad/crlf-line-endings.ron", "33:20", "unknown unit `TB/S`"),
    ("cr-only-line-endings", "tests/bad/cr-only-line-endings.ron", "33:20", "unknown unit `TB/S`"),
    ("derived-peak-disagrees", "tests/bad/derived-peak-disagrees.ron", "17:29", "disagrees with units × ops_per_cycle × clock"),
    ("derived-peak-needs-clock", "tests/bad/derived-peak-needs-clock.ron", "15:74", "needs the die's `clock`"),
    ("derived-peak-sparse", "tests/bad/derived-peak-sparse.ron", "17:29", "2:4 sparse figure written as dense"),
    ("devices-overflow", "tests/bad/devices-overflow.ron", "28:12", "absurdly many devices"),
    ("die-larger-than-wafer", "tests/bad/die-larger-than-wafer.ron", "12:15", "larger than a 300 mm wafer"),
    ("die-part-undeclared-sources", "tests/bad/parts/blackwell-die.ron", "4:18", "source `glk-b200` of `process` is not declared"),
    ("die-reference-missing", "tests/bad/die-reference-missing.ron", "14:10", "cannot read referenced file `tests/bad/parts/no-such-die.ron`"),
    ("die-reference-wrong-kind", "tests/bad/parts/b200-gb200.ron", "3:1", "expected a `Die` or `Use(\"file.ron\")`, found `Device`"),
    ("dims-overflow", "tests/bad/dims-overflow.ron", "33:15", "multiply to more than 2^64"),
    ("domain-does-not-divide", "tests/bad/domain-does-not-divide.ron", "32:15", "68 devices (17 nodes × 4) do not divide into domains of 24"),
    ("domain-larger-than-system", "tests/bad/domain-larger-than-system.ron", "32:15", "larger than the system"),
    ("domain-not-aligned-to-node", "tests/bad/domain-not-aligned-to-node.ron", "32:15", "does not align with nodes of 4 devices"),
    ("duplicate-field", "tests/bad/duplicate-field.ron", "29:5", "field `nodes` appears twice"),
    ("efficiency-over-one", "tests/bad/efficiency-over-one.ron", "43:17", "`matmul` must be a fraction in (0, 1]"),
    ("efficiency-percent-over", "tests/bad/efficiency-percent-over.ron", "45:18", "`network` must be a fraction in (0, 1]"),
    ("empty-citation", "tests/bad/empty-citation.ron", "10:29", "source `techpowerup-b200` has no citation"),
    ("empty-name", "tests/bad/empty-name.ron", "5:11", "`name` is empty"),
    ("empty-quantity", "tests/bad/empty-quantity.ron", "40:10", "empty quantity"),
    ("empty", "tests/bad/empty.ron", "1:1", "the file is empty"),
    ("engine-without-peak", "tests/bad/engine-without-peak.ron", "16:13", "engine `tensor` has no peak rate"),
    ("facility-power-exceeded", "tests/bad/facility-power-exceeded.ron", "48:51", "108 kW but `power_limit` is 10.0 kW"),
    ("idle-above-tdp", "tests/bad/idle-above-tdp.ron", "41:17", "`idle_power` (1.50 kW) is above `tdp` (1.20 kW)"),
    ("infinite-value", "tests/bad/infinite-value.ron", "40:10", "not a finite number"),
    ("integer-out-of-range", "tests/bad/integer-out-of-range.ron", "28:12", "integer out of range"),
    ("invalid-utf8", "tests/bad/invalid-utf8.ron", "4:31", "not valid UTF-8 text: byte 0xff"),
    ("mesh-dims-empty", "tests/bad/mesh-dims-empty.ron", "22:40", "mesh `dims` must be non-empty"),
    ("mesh-dims-not-cores", "tests/bad/mesh-dims-not-cores.ron", "22:40", "multiply to 899100, but the die has 900000 cores"),
    ("mapping-kernels-misspelt", "tests/bad/mapping-kernels-misspelt.ron", "6:14", "unknown variant `Fuzed` for `Kernels`"),
    ("host-link-shared-by-zero", "tests/bad/host-link-shared-by-zero.ron", "26:104", "`shared_by` is 0: a link is shared by at least one device"),
    ("mapping-region-zero", "tests/bad/mapping-region-zero.ron", "6:25", "the decode region has 0 × 360 cores"),
    ("mapping-pool-no-instances", "tests/bad/mapping-pool-no-instances.ron", "6:31", "the prefill pool has no instances"),
    ("mapping-etp-zero", "tests/bad/mapping-etp-zero.ron", "6:10", "`etp` must be at least 1"),
    ("mapping-offload-optimizer-over-one", "tests/bad/mapping-offload-optimizer-over-one.ron", "6:24", "`offload_optimizer` must be a fraction between 0 and 1"),
    ("mapping-split-beside-stages", "tests/bad/mapping-split-beside-stages.ron", "6:29", "`loss_in_pipeline_split` cannot be given beside `stages`"),
    ("missing-field", "tests/bad/missing-field.ron", "3:1", "missing field `nodes` in `System`"),
    ("missing-reference", "tests/bad/missing-reference.ron", "15:13", "cannot read referenced file `tests/bad/parts/b200-gb300.ron`"),
    ("missing-source-warning-and-error", "tests/bad/missing-source-warning-and-error.ron", "40:10", "warning: `tdp` has no source"),
    ("misspelt-source", "tests/bad/misspelt-source.ron", "40:10", "source `glk-b20` of `tdp` is not declared"),
    ("misspelt-unit", "tests/bad/misspelt-unit.ron", "33:20", "unknown unit `TB/S`"),
    ("multi-error-across-files", "tests/bad/multi-error-across-files.ron", "32:15", "does not align with nodes of 5 devices"),
    ("multi-error-device", "tests/bad/multi-error-device.ron", "22:25", "unknown precision `bf61`"),
    ("multi-error-system", "tests/bad/multi-error-system.ron", "20:72", "`cpu_tdp` must not be negative"),
    ("nan-value", "tests/bad/nan-value.ron", "40:10", "`NaN W` is not a finite number"),
    ("negative-count", "tests/bad/negative-count.ron", "28:12", "a count cannot be negative"),
    ("negative-value", "tests/bad/negative-value.ron", "40:10", "`tdp` must be greater than zero"),
    ("no-compute-no-memory", "tests/bad/no-compute-no-memory.ron", "3:1", "the device has no memory level"),
    ("no-scale-out", "tests/bad/no-scale-out.ron", "28:12", "72 devices but no network joins the scale-up domains"),
    ("node-power-exceeded", "tests/bad/node-power-exceeded.ron", "26:22", "node parts add up to 5.80 kW but the node's `power_limit` is 1.00 kW"),
    ("node-reference-wrong-kind", "tests/bad/node-reference-wrong-kind.ron", "17:5", "unknown field `unused` in `System`"),
    ("not-a-tessera-value", "tests/bad/not-a-tessera-value.ron", "1:1", "does not start with a tessera value"),
    ("nul-bytes", "tests/bad/nul-bytes.ron", "1:8", "expected a field name, found the control character U+0000"),
    ("overflowing-value", "tests/bad/overflowing-value.ron", "40:10", "`1e400 W` is not a finite number"),
    ("oversubscription-below-one", "tests/bad/oversubscription-below-one.ron", "45:27", "`oversubscription` must be at least 1"),
    ("part-missing-version", "tests/bad/part-missing-version.ron", "4:1", "a part file needs `version: 1`"),
    ("pue-below-one", "tests/bad/pue-below-one.ron", "48:21", "`pue` must be between 1 and 3"),
    ("quantity-as-bare-number", "tests/bad/quantity-as-bare-number.ron", "40:10", "missing unit in `1200`; expected a power"),
    ("quantity-without-unit", "tests/bad/quantity-without-unit.ron", "33:20", "missing unit in `1.8`; expected a bandwidth"),
    ("rack-power-exceeded", "tests/bad/rack-power-exceeded.ron", "39:22", "a domain's parts add up to 108 kW but its `power_limit` is 12.0 kW"),
    ("reference-back-to-root", "tests/bad/parts/cycle-to-root.ron", "2:1", "circular reference: tests/bad/reference-back-to-root.ron -> tests/bad/parts/cycle-to-root.ron -> tests/bad/reference-back-to-root.ron"),
    ("reference-directory", "tests/bad/reference-directory.ron", "15:13", "cannot read referenced file `tests/bad/parts`"),
    ("reference-empty-path", "tests/bad/reference-empty-path.ron", "15:13", "`Use(\"\")` names no file"),
    ("reference-invalid-utf8", "tests/bad/parts/latin1-device.ron", "5:40", "not valid UTF-8 text: byte 0xe9"),
    ("reference-missing-version", "tests/bad/parts/unversioned-device.ron", "3:1", "a part file needs `version: 1`"),
    ("reference-syntax-error", "tests/bad/parts/syntax-error-device.ron", "12:12", "expected `,`"),
    ("reference-with-errors", "tests/bad/parts/broken-device.ron", "39:10", "unknown unit `V` in `1200 V`; expected a power"),
    ("reference-wrong-kind", "tests/bad/parts/node-tray.ron", "1:1", "expected a `Device` or `Use(\"file.ron\")`, found `Node`"),
    ("self-reference", "tests/bad/self-reference.ron", "2:1", "circular reference: tests/bad/self-reference.ron -> tests/bad/self-reference.ron"),
    ("source-tag-with-space", "tests/bad/source-tag-with-space.ron", "40:10", "must be one word after `@`"),
    ("software-negative-overhead", "tests/bad/software-negative-overhead.ron", "5:20", "`step_overhead` must not be negative"),
    ("software-reserve-not-bytes", "tests/bad/software-reserve-not-bytes.ron", "6:21", "`memory_reserve`: expected a size in bytes, found `s`, which is a time"),
    ("sparse-as-dense", "tests/bad/sparse-as-dense.ron", "21:24", "the fp8 peak is 4x the bf16 peak"),
    ("syntax-deep-nesting", "tests/bad/syntax-deep-nesting.ron", "4:11", "expected a string in double quotes"),
    ("syntax-map-missing-colon", "tests/bad/syntax-map-missing-colon.ron", "22:24", "expected `:` after the map key"),
    ("syntax-missing-colon", "tests/bad/syntax-missing-colon.ron", "28:11", "expected `:` after the field name `nodes`"),
    ("syntax-missing-comma", "tests/bad/syntax-missing-comma.ron", "28:14", "expected `,`"),
    ("syntax-semicolon", "tests/bad/syntax-semicolon.ron", "28:14", "expected `,`, found `;`"),
    ("syntax-trailing-characters", "tests/bad/syntax-trailing-characters.ron", "50:1", "unexpected text after the end of the value"),
    ("syntax-unclosed-block-comment", "tests/bad/syntax-unclosed-block-comment.ron", "28:5", "the block comment is not closed"),
    ("syntax-stray-comma-in-map", "tests/bad/syntax-stray-comma-in-map.ron", "13:5", "expected a string in double quotes, found `,`"),
    ("syntax-unclosed-map", "tests/bad/syntax-unclosed-map.ron", "13:5", "expected a map key in double quotes, found the field name `source`"),
    ("syntax-unclosed-nested", "tests/bad/syntax-unclosed-nested.ron", "40:5", "unknown field `scale_out` in `scale_up`"),
    ("syntax-unclosed-paren", "tests/bad/syntax-unclosed-paren.ron", "48:75", "unexpected end of file"),
    ("syntax-unterminated-string-at-end", "tests/bad/syntax-unterminated-string-at-end.ron", "48:35", "the string is not closed"),
    ("syntax-unterminated-string", "tests/bad/syntax-unterminated-string.ron", "5:11", "the string that starts here runs on to line 6"),
    ("system-missing-version", "tests/bad/system-missing-version.ron", "3:1", "missing field `version` in `System`"),
    ("system-self-reference", "tests/bad/system-self-reference.ron", "15:13", "circular reference"),
    ("tabs-and-unicode", "tests/bad/tabs-and-unicode.ron", "48:18", "unknown unit `,15`"),
    ("torus-dims-mismatch", "tests/bad/torus-dims-mismatch.ron", "33:15", "dims [4, 4, 4] multiply to 64, not the domain size 72"),
    ("torus-without-dims", "tests/bad/torus-without-dims.ron", "31:19", "a torus or mesh needs `dims`"),
    ("undeclared-default-source", "tests/bad/undeclared-default-source.ron", "14:13", "source `set-loop` is not declared"),
    ("undeclared-source", "tests/bad/undeclared-source.ron", "40:10", "source `nvidia-spec` of `tdp` is not declared"),
    ("unknown-field-misspelt", "tests/bad/unknown-field-misspelt.ron", "28:5", "unknown field `nodse` in `System`"),
    ("unknown-field-nested", "tests/bad/unknown-field-nested.ron", "33:9", "unknown field `bandwith` in `scale_up`"),
    ("unknown-field-no-suggestion", "tests/bad/unknown-field-no-suggestion.ron", "29:5", "unknown field `colour`"),
    ("unknown-precision", "tests/bad/unknown-precision.ron", "22:25", "unknown precision `bf61`"),
    ("unknown-unit", "tests/bad/unknown-unit.ron", "44:18", "unknown unit `furlongs`"),
    ("unknown-variant", "tests/bad/unknown-variant.ron", "31:19", "unknown variant `Swiched`"),
    ("unsupported-version", "tests/bad/unsupported-version.ron", "4:14", "unsupported format version 7"),
    ("whitespace-only", "tests/bad/whitespace-only.ron", "1:1", "the file is empty"),
    ("wrong-dimension", "tests/bad/wrong-dimension.ron", "33:20", "expected a bandwidth, found `W`, which is a power"),
    ("wrong-kind", "tests/bad/wrong-kind.ron", "3:1", "unknown kind of file `Sytem`"),
    ("wrong-struct-name", "tests/bad/wrong-struct-name.ron", "29:15", "found a struct named `ScaleUp`"),
    ("wrong-type-bool", "tests/bad/wrong-type-bool.ron", "36:31", "expected `true` or `false`"),
    ("wrong-type-list-for-quantity", "tests/bad/wrong-type-list-for-quantity.ron", "40:10", "found a list"),
    ("wrong-type-string-count", "tests/bad/wrong-type-string-count.ron", "28:12", "expected a whole number"),
    ("zero-count", "tests/bad/zero-count.ron", "28:12", "`nodes` must be at least 1"),
    ("zero-value", "tests/bad/zero-value.ron", "33:20", "`bandwidth` must be greater than zero"),
];

#[test]
fn corpus_is_large_and_fully_described() {
    let files = bad_files();
    assert!(files.len() >= 40, "only {} bad files", files.len());
    let stems: Vec<String> = files.iter().map(|f| stem(f)).collect();
    for s in &stems {
        assert!(
            EXPECT.iter().any(|e| e.0 == s),
            "no expectation for tests/bad/{s}.ron"
        );
    }
    for e in EXPECT {
        assert!(
            stems.iter().any(|s| s == e.0),
            "expectation for missing file {}",
            e.0
        );
    }
}

#[test]
fn every_bad_file_fails_at_the_right_place() {
    let mut problems = Vec::new();
    for file in bad_files() {
        let name = stem(&file);
        let out = tessera(&["check", &file]);
        let stderr = text(&out.stderr);
        let code = out.status.code();
        if code != Some(1) {
            problems.push(format!("{file}: exit {code:?} (want 1)\n{stderr}"));
            continue;
        }
        if stderr.contains("panicked") || !stderr.contains("error:") {
            problems.push(format!("{file}: no error or a panic\n{stderr}"));
        }
        if !out.stdout.is_empty() {
            problems.push(format!("{file}: wrote to stdout: {}", text(&out.stdout)));
        }
        let Some((_, at, line_col, msg)) = EXPECT.iter().find(|e| e.0 == name) else {
            continue;
        };
        let first = stderr.lines().next().unwrap_or("");
        let want = format!("{at}:{line_col}: ");
        if !first.starts_with(&want) || !first.contains(msg) {
            problems.push(format!(
                "{file}: first line\n  {first}\nwant `{want}` … `{msg}`"
            ));
        }
        insta::assert_snapshot!(name, stable(&stderr));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// Each diagnostic that has a place also shows the source line with a caret under the column.
#[test]
fn carets_sit_under_the_reported_column() {
    let mut checked = 0;
    for file in bad_files() {
        let out = tessera(&["check", &file]);
        let stderr = text(&out.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let Some((loc, _)) = l
                .split_once(": error: ")
                .or_else(|| l.split_once(": warning: "))
            else {
                continue;
            };
            let mut parts = loc.rsplitn(3, ':');
            let (Some(col), Some(_line)) = (parts.next(), parts.next()) else {
                continue;
            };
            let Ok(col) = col.parse::<usize>() else {
                continue;
            };
            // `N | source`, then `  | ^`
            let (Some(src), Some(caret)) = (lines.get(i + 2), lines.get(i + 3)) else {
                continue;
            };
            let (Some((_, src)), Some((_, caret))) =
                (src.split_once(" | "), caret.split_once(" | "))
            else {
                continue;
            };
            let pad = caret.chars().position(|c| c == '^').expect("caret");
            assert_eq!(
                pad + 1,
                col,
                "{file}: caret misplaced under\n{src}\n{caret}"
            );
            assert!(
                src.chars().count() + 1 >= col,
                "{file}: column {col} beyond the line\n{src}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 100, "only {checked} carets checked");
}

#[test]
fn good_files_pass() {
    let mut files: Vec<String> = Vec::new();
    for dir in [
        "architectures",
        "architectures/parts",
        "architectures/software",
    ] {
        for e in std::fs::read_dir(root().join(dir)).expect(dir) {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "ron") {
                files.push(format!(
                    "{dir}/{}",
                    p.file_name().unwrap().to_string_lossy()
                ));
            }
        }
    }
    files.sort();
    assert!(files.len() >= 2);
    let args: Vec<&str> = std::iter::once("check")
        .chain(files.iter().map(|s| s.as_str()))
        .collect();
    let out = tessera(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for f in &files {
        assert!(stdout.contains(&format!("{f}: ok")), "{stdout}");
    }
    // Checking a good file on its own gives the same verdict.
    for f in &files {
        let out = tessera(&["check", f]);
        assert_eq!(out.status.code(), Some(0), "{f}: {}", text(&out.stderr));
        assert!(
            !text(&out.stderr).contains("error:"),
            "{f}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn an_alias_of_a_good_part_passes() {
    let out = tessera(&["check", "tests/bad/parts/alias-to-device.ron"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["check"][..],
        &["frobnicate"][..],
        &[][..],
        &["check", "--no-such-flag", "architectures/gb200-nvl72.ron"][..],
    ] {
        let out = tessera(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "tessera {args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).to_lowercase().contains("usage"),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn errors_of_every_file_at_once() {
    let out = tessera(&[
        "check",
        "tests/bad/misspelt-unit.ron",
        "architectures/gb200-nvl72.ron",
        "tests/bad/multi-error-device.ron",
        "tests/bad/empty.ron",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("tests/bad/misspelt-unit.ron:33:20: error:"),
        "{stderr}"
    );
    assert!(
        stderr.contains("tests/bad/empty.ron:1:1: error: the file is empty"),
        "{stderr}"
    );
    // All six errors of the multi-error file.
    let n = stderr.matches("tests/bad/multi-error-device.ron:").count();
    assert_eq!(n, 6, "{stderr}");
    assert!(text(&out.stdout).contains("architectures/gb200-nvl72.ron: ok"));
    insta::assert_snapshot!("several_files", stable(&stderr));
}

#[test]
fn all_semantic_errors_of_a_file_are_reported() {
    let out = tessera(&["check", "tests/bad/multi-error-system.ron"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let at: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("tests/bad/multi-error-system.ron:") && l.contains(": error: "))
        .collect();
    assert_eq!(at.len(), 6, "{stderr}");
}

/// Errors in a system file and in the part file it uses come out together.
#[test]
fn errors_in_a_file_and_its_parts_are_reported_together() {
    let out = tessera(&["check", "tests/bad/multi-error-across-files.ron"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let count = |prefix: &str| {
        stderr
            .lines()
            .filter(|l| l.starts_with(prefix) && l.contains(": error: "))
            .count()
    };
    assert_eq!(
        count("tests/bad/multi-error-across-files.ron:"),
        4,
        "{stderr}"
    );
    assert_eq!(count("tests/bad/parts/broken-device.ron:"), 2, "{stderr}");
}

#[test]
fn a_missing_file_is_an_error_not_a_usage_error() {
    let out = tessera(&["check", "tests/bad/no-such-file.ron"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr)
        .contains("tests/bad/no-such-file.ron: error: cannot read the file: no such file"));
}

/// Figures with no source are warnings: exit 0, unless `--deny-warnings`.
#[test]
fn unsourced_figures_warn() {
    let good = std::fs::read_to_string(root().join("architectures/parts/b200-gb200.ron")).unwrap();
    let unsourced = good.replace("\"1200 W @glk-b200\"", "\"1200 W\"");
    assert_ne!(good, unsourced);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join("unsourced-b200.ron");
    std::fs::write(&path, &unsourced).unwrap();
    let p = path.to_string_lossy().into_owned();
    let out = tessera(&["check", &p]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("warning: `tdp` has no source"), "{stderr}");
    assert!(stderr.contains("\"1200 W @datasheet\""), "{stderr}");
    let out = tessera(&["check", "--deny-warnings", &p]);
    assert_eq!(out.status.code(), Some(1));
}

/// Issue 12: a scale-up or scale-out link that gives no `energy_per_bit` is a warning of `check`
/// (its traffic would cost no energy), located at the link's block with a hint, as an unset device
/// energy figure is; the starter template with both figures set checks clean.
#[test]
fn unset_link_energy_warns() {
    use tessera::templates::{render, Template};
    let good = render(Template::NvlRack, "link energy");
    let bare: String = good
        .lines()
        .filter(|l| !l.trim_start().starts_with("energy_per_bit:"))
        .map(|l| format!("{l}\n"))
        .collect();
    // the lines of the two link blocks in the file without the figures
    let at = |key: &str| 1 + bare.lines().position(|l| l == key).unwrap();
    let (up, out) = (at("    scale_up: ("), at("    scale_out: ("));
    assert_eq!(good.matches("energy_per_bit:").count(), 2, "{good}");
    for (text, want) in [
        (good.clone(), vec![]),
        (bare, vec![(up, "scale-up"), (out, "scale-out")]),
    ] {
        let fs = MemFs(BTreeMap::from([(
            "rack.ron".to_string(),
            text.into_bytes(),
        )]));
        let (files, diags) = check_file("rack.ron", &fs);
        let rendered: Vec<String> = diags
            .iter()
            .map(|d| d.render(files.text_of(&d.file)))
            .collect();
        assert_eq!(diags.len(), want.len(), "{rendered:#?}");
        for (d, (line, what)) in diags.iter().zip(want) {
            assert_eq!(d.severity, Severity::Warning, "{d:?}");
            assert_eq!(d.pos.map(|p| p.line), Some(line), "{d:?}");
            assert!(
                d.message.starts_with(&format!("{what} link `"))
                    && d.message
                        .ends_with("gives no `energy_per_bit`: its traffic costs no energy"),
                "{d:?}"
            );
            assert!(
                d.hint.as_deref().unwrap_or("").contains("@assumed"),
                "{d:?}"
            );
        }
    }
}

/// A host link that gives no `energy_per_bit` is a warning too (offload copies would cost no
/// energy), at the host link's line with a hint; the shipped rack, which gives it, checks clean.
#[test]
fn unset_host_link_energy_warns() {
    let good = std::fs::read_to_string(root().join("architectures/gb200-nvl72.ron")).unwrap();
    let bare = good.replace(", energy_per_bit: \"1.3 pJ/bit @nv-c2c-energy\"", "");
    assert_ne!(good, bare);
    let line = 1 + bare
        .lines()
        .position(|l| l.contains("host_link: ("))
        .unwrap();
    // in a folder of its own whose `parts` is the shipped one, so its relative references
    // resolve and no test reading `architectures/` meets it
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("unset-host-energy");
    std::fs::create_dir_all(&dir).unwrap();
    let parts = dir.join("parts");
    if !parts.exists() {
        std::os::unix::fs::symlink(root().join("architectures/parts"), &parts).unwrap();
    }
    let path = dir.join("unset-host-energy-test.ron");
    std::fs::write(&path, &bare).unwrap();
    let out = tessera(&["check", path.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "unset-host-energy-test.ron:{line}:"
        )) && stderr.contains(
            "warning: host link `NVLink-C2C` gives no `energy_per_bit`: copies to and from host memory cost no energy"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint:") && stderr.contains("@assumed"),
        "{stderr}"
    );
    let out = tessera(&["check", "--deny-warnings", "architectures/gb200-nvl72.ron"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// Issue 11: a `compute` rate on a memory level runs no operator (processing in memory is
/// written as the die's compute reading its banks, as the UPMEM file does), so `check` warns at
/// the rate with that hint rather than keep it silently; the shipped PIM server checks clean.
#[test]
fn a_memory_levels_compute_rate_warns() {
    let good = std::fs::read_to_string(root().join("architectures/upmem-pim.ron")).unwrap();
    let with = good.replace(
        "bandwidth: \"0.7 GB/s @prim-mram-bw\",",
        "bandwidth: \"0.7 GB/s @prim-mram-bw\", compute: \"44.8 GOP/s @upmem-compute\",",
    );
    assert_ne!(good, with);
    let line = 1 + with
        .lines()
        .position(|l| l.contains("compute: \"44.8 GOP/s"))
        .unwrap();
    for (text, warned) in [(good, false), (with, true)] {
        let fs = MemFs(BTreeMap::from([("pim.ron".to_string(), text.into_bytes())]));
        let (files, diags) = check_file("pim.ron", &fs);
        let rendered: Vec<String> = diags
            .iter()
            .map(|d| d.render(files.text_of(&d.file)))
            .collect();
        assert_eq!(diags.len(), warned as usize, "{rendered:#?}");
        if let Some(d) = diags.first() {
            assert_eq!(d.severity, Severity::Warning, "{d:?}");
            assert_eq!(d.pos.map(|p| p.line), Some(line), "{d:?}");
            assert!(
                d.message.starts_with("memory `MRAM (PIM DRAM banks)` gives a `compute` rate that no operator runs on"),
                "{d:?}"
            );
            assert!(
                d.hint.as_deref().unwrap_or("").contains("upmem-pim.ron"),
                "{d:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// No panic, whatever the input.

const SYSTEM: &str = "architectures/gb200-nvl72.ron";
const PART: &str = "architectures/parts/b200-gb200.ron";

fn good(path: &str) -> Vec<u8> {
    std::fs::read(root().join(path)).unwrap()
}

/// Check `main` with `files` in memory; diagnostics must be well-formed.
fn check_in_memory(main: &str, files: BTreeMap<String, Vec<u8>>) {
    let fs = MemFs(files);
    let (loaded, diags) = check_file(main, &fs);
    for d in &diags {
        assert!(!d.message.is_empty(), "empty message: {d:?}");
        if let Some(p) = d.pos {
            assert!(p.line >= 1 && p.col >= 1, "{d:?}");
        }
        // Rendering must not panic either.
        let _ = d.render(loaded.text_of(&d.file));
    }
    // An error-free verdict means there is nothing fatal; the converse is checked by the corpus.
    let _ = diags.iter().any(|d| d.severity == Severity::Error);
}

#[derive(Debug, Clone)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, String),
    Replace(usize, String),
}

fn edit() -> impl Strategy<Value = Edit> {
    let snippet = prop_oneof![
        Just("(".to_string()),
        Just(")".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("\"".to_string()),
        Just(",".to_string()),
        Just(":".to_string()),
        Just("0".to_string()),
        Just("-".to_string()),
        Just("/*".to_string()),
        Just("//".to_string()),
        Just("@".to_string()),
        Just("Use(\"gb200-nvl72.ron\")".to_string()),
        Just("Use(\"parts/b200-gb200.ron\")".to_string()),
        Just("99999999999999999999".to_string()),
        Just("4294967296".to_string()),
        Just("NaN".to_string()),
        Just("1e308 TW".to_string()),
        Just("\u{feff}".to_string()),
        Just("é".to_string()),
        Just("\0".to_string()),
        "\\PC{0,8}",
        "[ -~]{0,12}",
    ];
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(a, n)| Edit::Delete(a, n)),
        (any::<usize>(), snippet.clone()).prop_map(|(a, s)| Edit::Insert(a, s)),
        (any::<usize>(), snippet).prop_map(|(a, s)| Edit::Replace(a, s)),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> Vec<u8> {
    let mut t: Vec<char> = text.chars().collect();
    for e in edits {
        let len = t.len().max(1);
        match e {
            Edit::Delete(a, n) => {
                let a = a % len;
                let b = (a + n).min(t.len());
                if a < b {
                    t.drain(a..b);
                }
            }
            Edit::Insert(a, s) => {
                let a = a % (t.len() + 1);
                t.splice(a..a, s.chars());
            }
            Edit::Replace(a, s) => {
                let a = a % len;
                let b = (a + s.chars().count()).min(t.len());
                if a <= b && b <= t.len() {
                    t.splice(a..b, s.chars());
                }
            }
        }
    }
    t.into_iter().collect::<String>().into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(main in proptest::collection::vec(any::<u8>(), 0..2048),
                                part in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut files = BTreeMap::new();
        files.insert(SYSTEM.to_string(), main);
        files.insert(PART.to_string(), part);
        check_in_memory(SYSTEM, files);
    }

    #[test]
    fn mutated_system_never_panics(edits in proptest::collection::vec(edit(), 1..6),
                                   part_edits in proptest::collection::vec(edit(), 0..3)) {
        let sys = String::from_utf8(good(SYSTEM)).unwrap();
        let part = String::from_utf8(good(PART)).unwrap();
        let mut files = BTreeMap::new();
        files.insert(SYSTEM.to_string(), apply(&sys, &edits));
        files.insert(PART.to_string(), apply(&part, &part_edits));
        check_in_memory(SYSTEM, files);
    }

    #[test]
    fn mutated_part_never_panics(edits in proptest::collection::vec(edit(), 1..6)) {
        let part = String::from_utf8(good(PART)).unwrap();
        let mut files = BTreeMap::new();
        files.insert(PART.to_string(), apply(&part, &edits));
        check_in_memory(PART, files);
    }

    #[test]
    fn mutated_bad_files_never_panic(i in any::<usize>(), edits in proptest::collection::vec(edit(), 0..4)) {
        let files = bad_files();
        let f = &files[i % files.len()];
        let bytes = std::fs::read(root().join(f)).unwrap();
        let t = String::from_utf8_lossy(&bytes).into_owned();
        let mut mem = BTreeMap::new();
        mem.insert(f.clone(), apply(&t, &edits));
        // Its parts, so references resolve.
        for e in std::fs::read_dir(root().join("tests/bad/parts")).unwrap() {
            let p = e.unwrap().path();
            let name = format!("tests/bad/parts/{}", p.file_name().unwrap().to_string_lossy());
            mem.insert(name, std::fs::read(&p).unwrap());
        }
        check_in_memory(f, mem);
    }
}

/// Issue 41: a device with no idle figure is not silently given a quarter of its TDP: `check`
/// warns at the device, with the hint to state `idle_power` with its source or `@assumed`, and
/// `--deny-warnings` (as CI runs it over the shipped files) fails on it. Files under
/// `tests/bad/warnings/` are sound apart from the warning they show.
#[test]
fn a_device_without_an_idle_figure_warns() {
    let file = "tests/bad/warnings/device-without-idle-power.ron";
    let out = tessera(&["check", file]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let first = stderr.lines().next().unwrap_or("");
    assert!(
        first.starts_with(&format!("{file}:4:1: warning: "))
            && first.contains("gives no `idle_power`")
            && first.contains("a quarter of its TDP (125 W)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: add `idle_power` with its source"),
        "{stderr}"
    );
    insta::assert_snapshot!("device-without-idle-power", stable(&stderr));
    let denied = tessera(&["check", "--deny-warnings", file]);
    assert_eq!(denied.status.code(), Some(1), "{}", text(&denied.stderr));
}
