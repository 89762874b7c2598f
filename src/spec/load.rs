//! Reading a file's text for the loader: the [`Fs`] a caller hands in, the texts read ([`Files`]),
//! UTF-8 decoding, path joining and RON parsing into file-shaped types with located diagnostics.
//! A leaf below resolving, so that `resolve.rs` uses it without importing `spec/mod.rs`, which
//! re-exports both.

use super::describe::describe_at;
use crate::diag::{offset_of_pos, pos_of_offset, Diagnostic, Path, Pos};
use serde::de::DeserializeOwned;

/// Reads files for the loader. The CLI implements it over the file system; tests over a map.
pub trait Fs {
    fn read(&self, path: &str) -> Result<Vec<u8>, String>;
}

/// Every source text read while loading, by index.
#[derive(Debug, Default, Clone)]
pub struct Files {
    pub files: Vec<(String, String)>,
}

impl Files {
    pub fn add(&mut self, name: &str, text: String) -> usize {
        self.files.push((name.to_string(), text));
        self.files.len() - 1
    }
    pub fn name(&self, id: usize) -> &str {
        &self.files[id].0
    }
    pub fn text(&self, id: usize) -> &str {
        &self.files[id].1
    }
    pub fn text_of(&self, name: &str) -> Option<&str> {
        self.files
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.as_str())
    }
    /// A located diagnostic at `path` inside file `id`.
    pub fn at(&self, id: usize, path: &Path, message: impl Into<String>) -> Diagnostic {
        let pos = crate::diag::locate_pos(self.text(id), path);
        Diagnostic::error(self.name(id), pos, message)
    }
}

/// Resolve `rel` against the directory of the file `base`, without touching the file system.
pub fn join(base: &str, rel: &str) -> String {
    let p = std::path::Path::new(rel);
    if p.is_absolute() {
        return rel.to_string();
    }
    let dir = std::path::Path::new(base)
        .parent()
        .unwrap_or(std::path::Path::new(""));
    let joined = dir.join(rel);
    // normalise `a/b/../c` without I/O
    let mut out: Vec<std::path::Component> = Vec::new();
    for c in joined.components() {
        match c {
            std::path::Component::ParentDir
                if matches!(out.last(), Some(std::path::Component::Normal(_))) =>
            {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out.iter()
        .collect::<std::path::PathBuf>()
        .to_string_lossy()
        .into_owned()
}

fn ron_options() -> ron::Options {
    ron::Options::default()
        .with_default_extension(
            ron::extensions::Extensions::IMPLICIT_SOME
                | ron::extensions::Extensions::UNWRAP_VARIANT_NEWTYPES,
        )
        .with_recursion_limit(64)
}

/// The largest input file read (64 MiB): far above any architecture, workload, sweep or summary
/// (the largest shipped file is under 100 kB), low enough that a wrong path such as a disk image
/// fails at once instead of filling memory.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Whether a file of this kind and size may be read: only a regular file (not a directory, a
/// FIFO, a device such as `/dev/zero`) of at most [`MAX_FILE_BYTES`]. `Err` is the reason, for
/// the reader's error message. (The reader checks this before it opens the file, as opening a
/// FIFO blocks.)
pub fn admit(is_file: bool, is_dir: bool, len: u64) -> Result<(), String> {
    if is_dir {
        return Err("is a directory, not a file".into());
    }
    if !is_file {
        return Err("not a regular file (a FIFO, socket or device): only files are read".into());
    }
    if len > MAX_FILE_BYTES {
        return Err(format!(
            "{:.1} MiB is over the {} MiB limit on an input file",
            len as f64 / (1u64 << 20) as f64,
            MAX_FILE_BYTES >> 20
        ));
    }
    Ok(())
}

/// Lone carriage returns (classic Mac OS line endings) become line feeds, so that such a file
/// reads as lines (a `//` comment ends at its line, locations count its lines). Same length, so
/// byte offsets into the text stay valid; CR LF is left alone.
fn lone_cr_to_lf(mut text: String) -> String {
    if !text.contains('\r') {
        return text;
    }
    let b = text.as_bytes();
    let lone: Vec<usize> = (0..b.len())
        .filter(|&i| b[i] == b'\r' && b.get(i + 1) != Some(&b'\n'))
        .collect();
    if lone.is_empty() {
        return text;
    }
    let mut bytes = std::mem::take(&mut text).into_bytes();
    for i in lone {
        bytes[i] = b'\n';
    }
    // one ASCII byte for another: still UTF-8
    String::from_utf8(bytes).unwrap_or_default()
}

/// Decode bytes as UTF-8 (dropping a leading byte-order mark; lone CRs read as line ends), or a
/// diagnostic at the first invalid byte.
pub fn decode(name: &str, bytes: Vec<u8>) -> Result<String, Diagnostic> {
    let bytes = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => rest.to_vec(),
        None => bytes,
    };
    String::from_utf8(bytes).map(lone_cr_to_lf).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let bytes = e.into_bytes();
        let prefix = String::from_utf8_lossy(&bytes[..valid]).into_owned();
        let pos = pos_of_offset(&prefix, prefix.len());
        let hint = if looks_binary(&bytes) {
            "tessera files are UTF-8 RON text; this looks like a binary file".to_string()
        } else {
            "save the file as UTF-8 (the byte may be Latin-1 or Windows-1252 text)".to_string()
        };
        Diagnostic::error(
            name,
            Some(pos),
            format!(
                "the file is not valid UTF-8 text: byte 0x{:02x} here",
                bytes[valid]
            ),
        )
        .with_hint(Some(hint))
    })
}

/// Text in a legacy encoding has a few stray bytes; a binary file has NULs or mostly non-text
/// bytes.
fn looks_binary(bytes: &[u8]) -> bool {
    bytes.contains(&0)
        || String::from_utf8_lossy(bytes)
            .chars()
            .filter(|c| *c == '\u{fffd}' || (c.is_control() && !c.is_whitespace()))
            .count()
            * 10
            > bytes.len()
}

/// The text of a file that is not valid UTF-8, with invalid bytes replaced, for showing the line
/// of a [`decode`] diagnostic; `None` for a binary file (its "lines" mean nothing).
pub fn lossy_text(bytes: &[u8]) -> Option<String> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    (!looks_binary(bytes)).then(|| String::from_utf8_lossy(bytes).into_owned())
}

/// Parse RON text into `T`, turning a syntax or shape error into a located diagnostic with a hint.
pub fn parse_ron<T: DeserializeOwned>(name: &str, text: &str) -> Result<T, Diagnostic> {
    if text.trim().is_empty() {
        return Err(
            Diagnostic::error(name, Some(Pos { line: 1, col: 1 }), "the file is empty").with_hint(
                Some("run `tessera new --template gpu-node NAME` for a starter file".into()),
            ),
        );
    }
    ron_options().from_str::<T>(text).map_err(|e| {
        let at = Pos {
            line: e.span.start.line.max(1),
            col: e.span.start.col.max(1),
        };
        let (offset, message, hint) = describe_at(text, offset_of_pos(text, at), &e.code);
        Diagnostic::error(name, Some(pos_of_offset(text, offset)), message).with_hint(hint)
    })
}

/// [`parse_ron`], reporting every unknown and duplicate field of the file at once: each such
/// error is recorded, its `name: value` blanked out (spaces, so every later line and column stays
/// where it was) and the text parsed again. Sound because such a field is rejected whatever it
/// holds, so removing it changes nothing else the parser sees (a field then missing from a struct
/// where an unknown field was blanked is taken for that field misnamed, not reported again). A syntax error or a value of the
/// wrong shape stops there: what follows it cannot be read reliably (RON has no resynchronising
/// points), and a missing field is only known once the struct is closed.
pub fn parse_ron_all<T: DeserializeOwned>(name: &str, text: &str) -> Result<T, Vec<Diagnostic>> {
    /// Past this many, the file is not the one meant (the first errors tell).
    const MAX: usize = 32;
    let mut work = text.to_string();
    let mut diags = Vec::new();
    loop {
        match parse_ron::<T>(name, &work) {
            Ok(v) if diags.is_empty() => return Ok(v),
            Ok(_) => return Err(diags),
            Err(d) => {
                let removable = d.message.starts_with("unknown field `")
                    || (d.message.starts_with("field `") && d.message.contains("appears twice"));
                let span = d
                    .pos
                    .filter(|_| removable && diags.len() < MAX)
                    .and_then(|p| field_span(&work, offset_of_pos(&work, p)));
                // A field missing from a struct where an unknown field was blanked is most likely
                // that field misnamed (`node_count` for `nodes`): the earlier error's fix.
                let within = |m: &str| m.splitn(3, '`').nth(2).map(str::to_string);
                let cascade = d.message.starts_with("missing field `")
                    && diags.iter().any(|e: &Diagnostic| {
                        e.message.starts_with("unknown field `")
                            && within(&e.message) == within(&d.message)
                    });
                if cascade {
                    return Err(diags);
                }
                // The diagnostic shows the file as written, not the blanked copy.
                diags.push(d);
                match span {
                    Some((a, b)) => {
                        let blank: String = work[a..b]
                            .chars()
                            .map(|c| if c == '\n' { c } else { ' ' })
                            .collect();
                        work.replace_range(a..b, &blank);
                    }
                    None => return Err(diags),
                }
            }
        }
    }
}

/// The byte span of the field `name: value,` whose name starts at `at` (the trailing comma
/// included), or `None` when the text there is not one.
fn field_span(text: &str, at: usize) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = at;
    if !b.get(i).copied().is_some_and(ident) {
        return None;
    }
    while b.get(i).copied().is_some_and(ident) {
        i += 1;
    }
    i = crate::diag::skip_trivia(text, i);
    if b.get(i) != Some(&b':') {
        return None;
    }
    i += 1;
    // The value: up to a `,` or a closing bracket at depth 0, over strings and comments.
    let mut depth = 0i64;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if matches!(b.get(i + 1), Some(b'/') | Some(b'*')) => {
                i = crate::diag::skip_trivia(text, i);
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' if depth == 0 => return Some((at, i)),
            b')' | b']' | b'}' => depth -= 1,
            b',' if depth == 0 => return Some((at, i + 1)),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The outcome of loading: the value (absent when a file did not parse), the texts read, and the
/// diagnostics found so far.
pub struct Loaded<T> {
    pub value: Option<T>,
    pub files: Files,
    pub diagnostics: Vec<Diagnostic>,
}

/// A part read from another file (or written inline), with the file and path it came from.
#[derive(Debug, Clone)]
pub struct Located<T> {
    pub spec: T,
    pub file: usize,
    pub path: Path,
}
