//! The WGSL kernel mirrors the CPU evaluator function by function (issue 40: the evaluator is
//! one program interpreted twice, so a change on one side without the other is a bug waiting for
//! the parity test's random points to find it). Every function of `src/engine/cpu/` is named as a
//! `cpu::` counterpart in the kernel's comments, or listed below as CPU only with the reason;
//! every function of the kernel names its CPU counterpart in the comment above it, or is listed
//! as kernel only; and every `cpu::` name the kernel cites exists. The figures agree by
//! `tests/it/gpu_parity.rs`; this test keeps the two sides' structure from drifting apart.

#![allow(clippy::disallowed_methods)] // reads the sources from the disk

use std::collections::BTreeSet;

/// CPU functions with no counterpart in the kernel, and why.
const CPU_ONLY: &[(&str, &str)] = &[
    (
        "eval",
        "the untraced entry point: `eval_traced` without a trace",
    ),
    (
        "compose",
        "the step's breakdown by category, which the kernel does not report",
    ),
    (
        "stretch",
        "scales the breakdown of a duty-cycled step; the kernel reports no breakdown",
    ),
    (
        "throttle",
        "the throttle figure of a single estimate; the kernel reports no throttle",
    ),
    (
        "running",
        "which records of a program run on one machine, for the readers of a single estimate \
         (reports, traces); the kernel selects each stage's form in its loop (`streams`)",
    ),
    (
        "largest_usable_capacity",
        "the capacity an infeasible estimate reports; the kernel reports the shortfall only",
    ),
];

/// Kernel functions with no counterpart on the CPU, and why.
const KERNEL_ONLY: &[(&str, &str)] = &[
    (
        "div",
        "f32 division that flags a zero divisor (the CPU tests `is_finite` instead)",
    ),
    (
        "tax_group",
        "reads a collective's packed `booking` as `program::Booking::tax_group`, a method the \
         CPU evaluator calls on the lowering's type (not under `engine/cpu/`)",
    ),
    (
        "runs",
        "reads a record's packed `form` as `program::Form::runs`, a method the CPU evaluator \
         calls on the lowering's type (not under `engine/cpu/`)",
    ),
    (
        "booking_pass",
        "reads a collective's packed `booking` as `program::Booking::pass`, a method the CPU \
         evaluator calls on the lowering's type (not under `engine/cpu/`)",
    ),
];

/// A file of the crate, by path relative to its root (or absolute).
fn read(path: &str) -> String {
    std::fs::read_to_string(crate::common::root().join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The functions a Rust source declares (free functions and methods), by name; its unit tests
/// (the `#[cfg(test)]` module that ends a file) are not the evaluator's.
fn rust_fns(src: &str) -> Vec<String> {
    src.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .filter_map(|l| {
            let l = l.trim_start();
            let l = ["pub(super) ", "pub(crate) ", "pub "]
                .iter()
                .fold(l, |l, p| l.strip_prefix(p).unwrap_or(l));
            let l = l
                .strip_prefix("const fn ")
                .or_else(|| l.strip_prefix("fn "))?;
            Some(
                l.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect(),
            )
        })
        .collect()
}

/// Every `cpu::a::b` path the text cites, as written.
fn cited(text: &str) -> BTreeSet<String> {
    text.match_indices("cpu::")
        .map(|(i, _)| {
            text[i + 5..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect::<String>()
                .trim_end_matches(':')
                .to_string()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// The kernel's functions with the comment block right above each.
fn kernel_fns(src: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.strip_prefix("fn ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let mut comment = Vec::new();
        let mut j = i;
        while j > 0 && lines[j - 1].starts_with("//") {
            j -= 1;
            comment.push(lines[j]);
        }
        out.push((name, comment.join("\n")));
    }
    out
}

/// The CPU evaluator's sources, and every name they declare (functions, types, constants).
fn cpu_sources() -> (Vec<String>, BTreeSet<String>) {
    let mut fns = Vec::new();
    let mut names = BTreeSet::new();
    let mut files: Vec<_> = std::fs::read_dir(crate::common::root().join("src/engine/cpu"))
        .expect("src/engine/cpu")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    for path in files {
        let src = read(path.to_str().expect("utf-8 path"));
        for f in rust_fns(&src) {
            names.insert(f.clone());
            fns.push(f);
        }
        for l in src.lines() {
            for kw in ["pub struct ", "struct ", "pub const ", "const "] {
                if let Some(rest) = l.trim_start().strip_prefix(kw) {
                    let n: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    names.insert(n);
                }
            }
        }
    }
    (fns, names)
}

#[test]
fn every_cpu_function_has_a_kernel_counterpart_and_back() {
    // the interpreter: its link section and the rest
    let kernel = read("src/sweep/gpu/links.wgsl") + &read("src/sweep/gpu/eval.wgsl");
    let (cpu_fns, cpu_names) = cpu_sources();
    let cites = cited(&kernel);
    // each cited path's segments name things the CPU evaluator declares
    let dangling: Vec<_> = cites
        .iter()
        .filter(|c| !c.split("::").all(|seg| cpu_names.contains(seg)))
        .collect();
    assert!(
        dangling.is_empty(),
        "the kernel cites CPU names that do not exist: {dangling:?}"
    );
    let cited_fns: BTreeSet<&str> = cites.iter().filter_map(|c| c.rsplit("::").next()).collect();
    let cpu_only: BTreeSet<&str> = CPU_ONLY.iter().map(|(n, _)| *n).collect();
    let missing: BTreeSet<_> = cpu_fns
        .iter()
        .map(String::as_str)
        .filter(|f| !cited_fns.contains(f) && !cpu_only.contains(f))
        .collect();
    assert!(
        missing.is_empty(),
        "CPU evaluator functions with no counterpart cited in the kernel (port them, cite them \
         as `cpu::name` in the kernel's comments, or list them in CPU_ONLY with the reason): \
         {missing:?}"
    );
    let stale: Vec<_> = cpu_only
        .iter()
        .filter(|f| !cpu_fns.iter().any(|c| c == *f))
        .collect();
    assert!(
        stale.is_empty(),
        "CPU_ONLY names functions that no longer exist: {stale:?}"
    );
    let kernel_only: BTreeSet<&str> = KERNEL_ONLY.iter().map(|(n, _)| *n).collect();
    let kfns = kernel_fns(&kernel);
    let uncited: Vec<_> = kfns
        .iter()
        .filter(|(n, c)| cited(c).is_empty() && !kernel_only.contains(n.as_str()))
        .map(|(n, _)| n)
        .collect();
    assert!(
        uncited.is_empty(),
        "kernel functions whose comment names no CPU counterpart (`cpu::name`; or list them in \
         KERNEL_ONLY with the reason): {uncited:?}"
    );
    let stale: Vec<_> = kernel_only
        .iter()
        .filter(|f| !kfns.iter().any(|(n, _)| n == *f))
        .collect();
    assert!(
        stale.is_empty(),
        "KERNEL_ONLY names functions that no longer exist: {stale:?}"
    );
}

#[test]
fn the_scanners_see_what_they_must() {
    // hand-checked on small sources, so the test above cannot pass by reading nothing
    assert_eq!(
        rust_fns("pub fn a() {}\n    pub(super) fn b_2(x: u8) {}\nconst fn c() {}\n// fn d\n"),
        ["a", "b_2", "c"]
    );
    let k = kernel_fns("// x (`cpu::Round::at`).\nfn round_time() -> f32 {\n}\nfn div() {}\n");
    assert_eq!(k.len(), 2);
    assert_eq!(
        cited(&k[0].1).into_iter().collect::<Vec<_>>(),
        ["Round::at"]
    );
    assert!(cited(&k[1].1).is_empty());
    let (fns, names) = cpu_sources();
    assert!(fns.len() > 30 && names.contains("eval_traced") && names.contains("Round"));
}
