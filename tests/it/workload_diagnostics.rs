//! `tessera check` on the bad workload and mapping files under `tests/bad/workloads/`: each must
//! exit 1 (never panic, never pass) with an error that names the file, the line and column of the
//! offending text, and what is wrong.
//!
//! The expectations are written by hand from reading the files. Every file in the directory must
//! have one, so a new bad file cannot be added without saying where its error belongs.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use std::process::Output;

use crate::common::root;

/// Run `tessera check FILE` from the crate root, so paths print as `tests/bad/workloads/x.ron`.
fn check(file: &str) -> Output {
    crate::common::tessera(&["check", file])
}

/// (file stem, `line:col` of the offending text, a piece of the message).
const EXPECT: &[(&str, &str, &str)] = &[
    ("misspelt-field", "10:9", "unknown field `global_bach`"),
    ("unknown-precision", "11:30", "unknown precision `fp9`"),
    (
        "heads-not-dividing-hidden",
        "10:16",
        "hidden size 1000 is not divisible by 16 heads",
    ),
    (
        "kv-heads-not-dividing-heads",
        "11:19",
        "5 key/value heads do not divide 32 attention heads",
    ),
    ("zero-layers", "8:17", "`layers` must be at least 1"),
    (
        "mla-with-kv-heads",
        "12:19",
        "latent attention gives every one of the 32 heads its own key and value, but `kv_heads` is 8",
    ),
    (
        "speculative-acceptance-over-one",
        "12:46",
        "`acceptance` is the probability that the model keeps a drafted token, in (0, 1]; found `1.2 @paper`",
    ),
    (
        "negative-optimizer-bytes",
        "13:30",
        "`optimizer_bytes` must be between 0 and 64, found -4",
    ),
    (
        "nan-optimizer-bytes",
        "11:38",
        "`optimizer_bytes` must be between 0 and 64, found NaN",
    ),
    (
        "epochs-without-dataset",
        "10:17",
        "an `Epochs` target needs `dataset_samples`",
    ),
    (
        "predicted-over-one",
        "11:20",
        "`predicted` must be a fraction in (0, 1], found `1.5`",
    ),
    (
        "top-k-exceeds-experts",
        "14:20",
        "top_k 10 exceeds the 8 experts",
    ),
    (
        "wrong-top-level-kind",
        "2:1",
        "unknown kind of file `Worklaod`",
    ),
    ("zero-stage-5", "6:11", "ZeRO stage 5 does not exist"),
    (
        "order-missing-dimension",
        "6:12",
        "`order` must name each of Tp, Cp, Dp, Pp once",
    ),
    ("unknown-recompute", "5:16", "unknown variant `Partial`"),
    (
        "mapping-missing-version",
        "2:1",
        "a mapping file needs `version: 1`",
    ),
    ("mapping-zero-tp", "4:9", "`tp` must be at least 1"),
    (
        "embedded-mapping-zero-stage",
        "9:28",
        "ZeRO stage 4 does not exist",
    ),
    (
        "transformer-without-seq-len",
        "8:11",
        "a transformer training task needs `seq_len`",
    ),
    (
        "resnet-unknown-depth",
        "8:17",
        "ResNet depth 42 is not one of 18, 34, 50, 101, 152",
    ),
    (
        "negative-target",
        "11:17",
        "`Samples` target must be positive and finite, found -1000",
    ),
    (
        "undeclared-mapping-source",
        "9:30",
        "source `papr` is not declared in `sources`",
    ),
    (
        "graph-collective-bad-unit",
        "9:44",
        "expected a size in bytes",
    ),
    (
        "inference-of-cnn",
        "8:11",
        "inference tasks are modelled for transformers",
    ),
    (
        "mapping-stages-head-not-last",
        "6:18",
        "stage 1 holds no layers but is not the last stage",
    ),
];

/// Files whose error `tessera` currently places on the enclosing enum variant (`model:
/// Transformer(`, `model: Cnn(`, `model: Graph(`, `task: Training(`) instead of the field inside it:
/// the lowering names the variant as a path segment (`model.Transformer.heads`), which
/// `diag::locate` cannot find as a field, so it falls back to the variant's value. Until that is
/// fixed in `src/`, their exact positions are checked only by the ignored test below.
const INSIDE_VARIANT: &[&str] = &[
    "unknown-precision",
    "heads-not-dividing-hidden",
    "kv-heads-not-dividing-heads",
    "zero-layers",
    "negative-optimizer-bytes",
    "nan-optimizer-bytes",
    "epochs-without-dataset",
    "top-k-exceeds-experts",
    "resnet-unknown-depth",
    "negative-target",
    "graph-collective-bad-unit",
];

fn bad_files() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root().join("tests/bad/workloads"))
        .expect("tests/bad/workloads")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file())
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

fn path(stem: &str) -> String {
    format!("tests/bad/workloads/{stem}.ron")
}

#[test]
fn every_bad_file_has_an_expectation() {
    let files = bad_files();
    assert!(files.len() >= 12, "{files:?}");
    for f in &files {
        assert!(
            EXPECT.iter().any(|(s, _, _)| s == f),
            "tests/bad/workloads/{f}.ron has no entry in EXPECT"
        );
    }
    for (s, _, _) in EXPECT {
        assert!(
            files.contains(&s.to_string()),
            "EXPECT names a missing file {s}"
        );
    }
}

#[test]
fn bad_files_fail_with_a_located_error() {
    for (stem, pos, msg) in EXPECT {
        let file = path(stem);
        let out = check(&file);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{file}: exit status\n{stdout}{stderr}"
        );
        assert!(
            !stdout.contains(": ok"),
            "{file} passed the check:\n{stdout}"
        );
        assert!(!stderr.contains("panicked"), "{file} panicked:\n{stderr}");
        // The first error names the file and says what is wrong.
        let first = stderr
            .lines()
            .find(|l| l.contains(": error:"))
            .unwrap_or_else(|| panic!("{file}: no error line in\n{stderr}"));
        assert!(first.starts_with(&format!("{file}:")), "{file}: {first}");
        assert!(first.contains(msg), "{file}: expected `{msg}` in\n{stderr}");
        if !INSIDE_VARIANT.contains(stem) {
            let want = format!("{file}:{pos}: error:");
            assert!(
                first.starts_with(&want),
                "{file}: expected `{want}`, got\n{stderr}"
            );
        }
    }
}

#[test]
fn errors_inside_enum_variants_point_at_the_field() {
    let mut wrong = Vec::new();
    for (stem, pos, _) in EXPECT.iter().filter(|(s, _, _)| INSIDE_VARIANT.contains(s)) {
        let file = path(stem);
        let out = check(&file);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let want = format!("{file}:{pos}: error:");
        if !stderr.contains(&want) {
            wrong.push(format!(
                "{want} — got {}",
                stderr
                    .lines()
                    .find(|l| l.contains(": error:"))
                    .unwrap_or("")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
