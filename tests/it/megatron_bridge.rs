//! The Megatron-Bridge family (validation/megatron-bridge/ and its known gaps): every row states
//! the published figure the way the summary prints it (tokens/s/GPU) and the case compares its
//! product with the GPU count; the mapping written is the row's TP/PP/CP/VP/EP and batch.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use std::path::PathBuf;

use crate::common::root;

fn cases() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for dir in ["validation/megatron-bridge", "validation/known-gaps"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("mbridge-") && name.ends_with(".ron") {
                let text = std::fs::read_to_string(&p).unwrap();
                out.push((p, text));
            }
        }
    }
    out
}

/// The number just before `unit` in `text` (e.g. `"| 843 tokens/s/GPU"`).
fn number_before(text: &str, unit: &str) -> u64 {
    let at = text.find(unit).unwrap_or_else(|| panic!("no `{unit}`"));
    let digits: String = text[..at]
        .trim_end()
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.chars().rev().collect::<String>().parse().unwrap()
}

/// The number after `key` in `text` (e.g. `"devices: 256"`).
fn number_after(text: &str, key: &str) -> u64 {
    let at = text.find(key).unwrap_or_else(|| panic!("no `{key}`")) + key.len();
    text[at..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap()
}

#[test]
fn each_row_is_its_per_gpu_figure_times_its_gpus() {
    let all = cases();
    assert!(all.len() >= 35, "{} Megatron-Bridge rows", all.len());
    for (p, text) in &all {
        // the row as quoted in the source (a known gap's comment may quote other rows)
        let src = &text[text.find("\"mbridge-perf\":").unwrap()..];
        let per_gpu = number_before(&src[..src.find('\n').unwrap()], "tokens/s/GPU");
        let devices = number_after(text, "devices:");
        let published = number_after(text, "published: \"");
        assert_eq!(published, per_gpu * devices, "{}", p.display());
    }
}

#[test]
fn each_row_maps_as_published() {
    for (p, text) in cases() {
        let src = &text[text.find("\"mbridge-perf\":").unwrap()..];
        let row = &src[..src.find('\n').unwrap()];
        let mapping = &text[text.find("mapping: Given(").unwrap()..];
        let mapping = &mapping[..mapping.find('\n').unwrap()];
        for (col, key, default) in [("TP ", "tp: ", 1), ("PP ", "pp: ", 1), ("CP ", "cp: ", 1)] {
            let want = number_after(row, &format!("| {col}"));
            assert_eq!(
                number_after(mapping, key),
                want.max(default),
                "{} {col}",
                p.display()
            );
        }
        for (col, key) in [("VP ", "interleave: "), ("EP ", "ep: ")] {
            let cell = &row[row.find(&format!("| {col}")).unwrap() + col.len() + 2..];
            if cell.starts_with("n/a") {
                assert!(!mapping.contains(key), "{} {col}", p.display());
            } else {
                let want = number_after(cell, "");
                if want > 1 {
                    assert_eq!(number_after(mapping, key), want, "{} {col}", p.display());
                }
            }
        }
        let fsdp = number_after(row, "| FSDP ");
        let zero = number_after(mapping, "zero: ");
        assert_eq!(zero, if fsdp > 0 { 3 } else { 1 }, "{}", p.display());
    }
}

#[test]
fn each_row_runs_the_scaling_recipe_of_its_precision_column() {
    // The summary's precision column names the recipe: FP8-CS is per-tensor current scaling,
    // MXFP8 and FP8-MX are MXFP8 blocks, NVFP4 NVIDIA's FP4 blocks; BF16 and plain FP8 rows
    // state none (delayed per-tensor scaling, the default).
    for (p, text) in cases() {
        let src = &text[text.find("\"mbridge-perf\":").unwrap()..];
        let row = &src[..src.find('\n').unwrap()];
        let want = if row.contains("| FP8-CS |") {
            Some("Current")
        } else if row.contains("| MXFP8 |") || row.contains("| FP8-MX |") {
            Some("Mxfp8")
        } else if row.contains("| NVFP4 |") {
            Some("Nvfp4")
        } else {
            None
        };
        let run = &text[text
            .find("run: (")
            .unwrap_or_else(|| panic!("{p:?}: no run"))..];
        let run = &run[..run.find(')').unwrap()];
        match want {
            Some(s) => assert!(
                run.contains(&format!("scaling: {s}")),
                "{p:?}: its row says {s}, its run {run}"
            ),
            None => assert!(!run.contains("scaling:"), "{p:?}: {run}"),
        }
    }
}
