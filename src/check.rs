//! Checking any tessera file: find its kind from the top-level name, then load and lower it,
//! gathering every diagnostic.

use crate::diag::{Diagnostic, Pos};
use crate::spec::{decode, Files, Fs};

/// The kinds of file tessera reads, by their top-level struct name.
pub const KINDS: &[&str] = &[
    "System",
    "Device",
    "Die",
    "Node",
    "Software",
    "Reliability",
    "Workload",
    "Mapping",
    "Case",
    "Claim",
    "Sweep",
];

/// The first identifier of the document (after comments and `#![enable(..)]` attributes).
pub fn kind_of(text: &str) -> Option<String> {
    let s = &text[value_start(text)..];
    let ident: String = s
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!ident.is_empty()).then_some(ident)
}

/// Byte offset of the document's value: after blanks, comments and `#![enable(..)]` attributes.
fn value_start(text: &str) -> usize {
    let mut off = 0;
    loop {
        off = crate::diag::skip_trivia(text, off);
        let rest = &text[off..];
        if rest.starts_with("#!") || rest.starts_with("#[") {
            off = match rest.find(']') {
                Some(i) => off + i + 1,
                None => text.len(),
            };
        } else {
            return off;
        }
    }
}

/// The kind of part an alias file (`Use("other.ron")`) stands for, following the chain of
/// aliases; `None` when the chain is broken or circular (loading it then says why).
fn alias_kind(name: &str, text: &str, fs: &dyn Fs) -> Option<&'static str> {
    let mut seen = vec![name.to_string()];
    let (mut name, mut text) = (name.to_string(), text.to_string());
    loop {
        match kind_of(&text).as_deref() {
            Some("Device") => return Some("Device"),
            Some("Die") => return Some("Die"),
            Some("Node") => return Some("Node"),
            Some("Use") => {}
            _ => return None,
        }
        let Ok(crate::spec::arch::DeviceRef::Use(rel)) =
            crate::spec::parse_ron::<crate::spec::arch::DeviceRef>(&name, &text)
        else {
            return None;
        };
        let next = crate::spec::join(&name, &rel);
        if seen.contains(&next) || seen.len() > 64 {
            return None;
        }
        let bytes = fs.read(&next).ok()?;
        text = crate::spec::decode(&next, bytes).ok()?;
        seen.push(next.clone());
        name = next;
    }
}

/// The device each validation case ran on, by case id (the CLI reads the cases; the library
/// reads no directory).
pub type CaseDevices = std::collections::BTreeMap<String, String>;

/// Warnings for fitted figures of device `device` whose citation names only cases that ran on
/// other devices: a fit copied to a device it was not fitted on is an assumption, not a fit.
pub fn copied_fits(
    files: &Files,
    device: &str,
    fitted: &[crate::model::FittedSource],
    cases: &CaseDevices,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for f in fitted {
        let named = crate::validate::cases_named(&f.citation, cases.keys().map(|k| k.as_str()));
        if named.is_empty() || named.iter().any(|id| cases[*id] == device) {
            continue;
        }
        let mut on: Vec<&str> = named.iter().map(|id| cases[*id].as_str()).collect();
        on.sort();
        on.dedup();
        let mut d = files
            .at(
                f.file,
                &f.at,
                format!(
                    "fitted figure `{}` was fitted on {} ({}), not on this device ({device})",
                    f.key,
                    named.join(", "),
                    on.join(", ")
                ),
            )
            .with_hint(Some(format!(
                "a fit copied to another device is an assumption: fit it on this device's own cases with `tessera calibrate`, or declare it under a key that does not start with `fitted` (e.g. `copied-{}`) saying where it comes from",
                f.key.trim_start_matches("fitted-")
            )));
        d.severity = crate::diag::Severity::Warning;
        out.push(d);
    }
    out
}

/// Check one file of any kind; returns the texts read and every diagnostic.
pub fn check_file(name: &str, fs: &dyn Fs) -> (Files, Vec<Diagnostic>) {
    check_file_with(name, fs, &CaseDevices::new())
}

/// [`check_file`], also warning where a fitted figure of a system or device names only cases
/// that ran on another device ([`copied_fits`]).
pub fn check_file_with(name: &str, fs: &dyn Fs, cases: &CaseDevices) -> (Files, Vec<Diagnostic>) {
    let bytes = match fs.read(name) {
        Ok(b) => b,
        Err(e) => {
            return (
                Files::default(),
                vec![Diagnostic::error(
                    name,
                    None,
                    format!("cannot read the file: {e}"),
                )],
            )
        }
    };
    let text = match decode(name, bytes.clone()) {
        Ok(t) => t,
        Err(d) => {
            let mut files = Files::default();
            if let Some(t) = crate::spec::lossy_text(&bytes) {
                files.add(name, t);
            }
            return (files, vec![d]);
        }
    };
    let kind = kind_of(&text);
    match kind.as_deref() {
        Some("System") => {
            let mut l = crate::model::system::load_system(name, fs);
            if let Some(s) = &l.value {
                let w = copied_fits(&l.files, &s.device.name, &s.fitted_sources, cases);
                l.diagnostics.extend(w);
                l.diagnostics
                    .extend(crate::model::system::unset_energy_warnings(
                        &l.files,
                        &s.device.unset_energy,
                    ));
                l.diagnostics
                    .extend(crate::model::system::unset_energy_warnings(
                        &l.files,
                        &s.unset_energy,
                    ));
            }
            (l.files, l.diagnostics)
        }
        Some(k @ ("Device" | "Die" | "Node")) => {
            let (files, mut diags, fitted) = crate::model::system::check_part_fitted(name, k, fs);
            if let Some((device, f)) = fitted {
                diags.extend(copied_fits(&files, &device, &f, cases));
            }
            (files, diags)
        }
        Some("Software") => {
            let l = crate::model::system::load_software(name, fs);
            (l.files, l.diagnostics)
        }
        Some("Reliability") => {
            let l = crate::model::reliability::load_reliability(name, fs);
            (l.files, l.diagnostics)
        }
        Some("Workload") => {
            let l = crate::model::workload::load_workload(name, fs);
            (l.files, l.diagnostics)
        }
        Some("Case") => {
            let l = crate::validate::load_case(name, fs);
            (l.files, l.diagnostics)
        }
        Some("Claim") => {
            let l = crate::validate::audit::load_claim(name, fs);
            (l.files, l.diagnostics)
        }
        Some("Mapping") => {
            let l = crate::model::workload::load_mapping(name, fs);
            (l.files, l.diagnostics)
        }
        Some("Sweep") => {
            // the file, then the plan it builds: architecture, workload, mapping and every path
            let l = crate::sweep::plan::read_file(name, fs);
            let fatal = l
                .diagnostics
                .iter()
                .any(|d| d.severity == crate::diag::Severity::Error);
            match l.value {
                Some(inputs) if !fatal => {
                    let p = crate::sweep::plan::build(&inputs, fs, l.files, l.diagnostics);
                    (p.files, p.diagnostics)
                }
                _ => (l.files, l.diagnostics),
            }
        }
        // A part file that is an alias of another: check it as the kind it stands for (a broken
        // or circular chain is reported by the loader, whichever kind it is read as).
        Some("Use") => {
            let k = alias_kind(name, &text, fs).unwrap_or("Device");
            crate::model::system::check_part(name, k, fs)
        }
        other => {
            let mut files = Files::default();
            files.add(name, text.clone());
            let start = value_start(&text);
            let (msg, hint) = match other {
                None if text.trim().is_empty() => (
                    "the file is empty".to_string(),
                    "run `tessera new --template gpu-node NAME` for a starter file".to_string(),
                ),
                None if start == text.len() => (
                    "the file holds only comments".to_string(),
                    format!(
                        "a tessera file holds one value: one of {}",
                        KINDS.join(", ")
                    ),
                ),
                None => (
                    "the file does not start with a tessera value".to_string(),
                    format!("a tessera file starts with one of: {}", KINDS.join(", ")),
                ),
                Some(k) => {
                    let hint = match crate::diag::did_you_mean(k, KINDS.iter().copied()) {
                        Some(s) => format!("did you mean `{s}`? kinds: {}", KINDS.join(", ")),
                        None => format!("a tessera file starts with one of: {}", KINDS.join(", ")),
                    };
                    (format!("unknown kind of file `{k}`"), hint)
                }
            };
            let pos = if start >= text.trim_end().len() {
                Pos { line: 1, col: 1 }
            } else {
                crate::diag::pos_of_offset(&text, start)
            };
            (
                files,
                vec![Diagnostic::error(name, Some(pos), msg).with_hint(Some(hint))],
            )
        }
    }
}

/// Figures a device may leave out for the model to take a default (`Device::defaulted`) that a
/// shipped device may give instead: what `tessera check` compares a new part with.
pub const DEFAULTABLE: [(&str, &str); 3] = [
    (
        "efficiency.low_precision_matmul",
        "its fp8, fp6, fp4 and integer GEMMs then run at the bf16 efficiency (1.0 × `matmul`)",
    ),
    (
        "efficiency.vector",
        "its vector work then runs at the `memory` efficiency",
    ),
    (
        "dvfs",
        "a power limit then throttles it by an assumed clock-voltage curve",
    ),
];

/// For each figure of [`DEFAULTABLE`], the shipped devices (files) that give it.
pub type ShippedFigures = std::collections::BTreeMap<&'static str, Vec<String>>;

/// The figures of [`DEFAULTABLE`] the device parts `parts` give (parts that do not load are
/// skipped: checking them says why).
pub fn shipped_figures(parts: &[String], fs: &dyn Fs) -> ShippedFigures {
    let mut out = ShippedFigures::new();
    for p in parts {
        let Some(crate::model::system::Part::Device(d)) =
            crate::model::system::load_part(p, "Device", fs)
        else {
            continue;
        };
        // a device with no fp8-or-lower matrix peak has no use for the low-precision figure
        let low = (0..d.matrix_peak.len())
            .any(|i| crate::model::rules::low_precision(i) && d.matrix_peak[i] > 0.0);
        for (k, _) in DEFAULTABLE {
            let applies = low || k != "efficiency.low_precision_matmul";
            if applies && !d.defaulted.contains(&k) {
                out.entry(k).or_default().push(p.clone());
            }
        }
    }
    out
}

/// Warnings where the device of `file` (its text `text`) leaves a figure at the model's default
/// (`defaulted`) that shipped devices give (`shipped`, its own file left out): a new part written
/// from a template otherwise runs at 100 % of a peak the shipped parts never reach, silently.
pub fn defaults_left(
    file: &str,
    text: &str,
    defaulted: &[&str],
    shipped: &ShippedFigures,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (k, effect) in DEFAULTABLE {
        if !defaulted.contains(&k) {
            continue;
        }
        let same = |f: &String| {
            f.trim_start_matches("./") == file.trim_start_matches("./")
                || f.ends_with(&format!("/{file}"))
                || file.ends_with(&format!("/{f}"))
        };
        let givers: Vec<&String> = shipped
            .get(k)
            .map(|v| v.iter().filter(|f| !same(f)).collect())
            .unwrap_or_default();
        if givers.is_empty() {
            continue;
        }
        let field = k.split('.').next().unwrap_or(k);
        let off = text
            .find(&format!("{field}:"))
            .unwrap_or_else(|| value_start(text));
        let eg: Vec<&str> = givers.iter().take(2).map(|s| s.as_str()).collect();
        out.push(
            Diagnostic::warning(
                file,
                Some(crate::diag::pos_of_offset(text, off)),
                format!(
                    "`{k}` is left out, so the model takes a default: {effect}; {} shipped device(s) give it (e.g. {})",
                    givers.len(),
                    eg.join(", ")
                ),
            )
            .with_hint(Some(format!(
                "add `{k}` with its source (a measured or fitted figure, as those parts do), or mark a guess `@assumed`"
            ))),
        );
    }
    out
}
