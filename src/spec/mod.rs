//! Loading files into their file-shaped types, with located diagnostics.
//!
//! The library does no I/O: callers hand in a [`Fs`] that reads a path. Loading keeps every source
//! text it read in [`Files`] so later errors (from lowering) can point at `file:line:col`.

pub mod arch;
pub mod mapping;
pub mod sweep;
pub mod validation;
pub mod workload;

use crate::diag::{
    did_you_mean, innermost_unclosed, offset_of_pos, opening_of, pos_of_offset, skip_trivia,
    token_before, unclosed_comment, Diagnostic, Path, Pos,
};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::fmt;

/// The current version of every file format.
pub const FORMAT_VERSION: u32 = 1;

/// A quantity as written (`"3.35 TB/s @source"`), parsed against its expected dimension when the
/// file is lowered, so every unit error of a file is reported together.
#[derive(Clone, Debug, PartialEq)]
pub struct Q(pub String);

impl<'de> Deserialize<'de> for Q {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Q;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a quantity with its unit as a string, e.g. \"3.35 TB/s\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Q, E> {
                Ok(Q(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Q, E> {
                Ok(Q(format!("{v}")))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Q, E> {
                Ok(Q(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Q, E> {
                Ok(Q(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

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

/// Decode bytes as UTF-8 (dropping a leading byte-order mark), or a diagnostic at the first
/// invalid byte.
pub fn decode(name: &str, bytes: Vec<u8>) -> Result<String, Diagnostic> {
    let bytes = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => rest.to_vec(),
        None => bytes,
    };
    String::from_utf8(bytes).map_err(|e| {
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

/// Message, hint and the best offset to point at for a RON error the parser reported at `off`.
fn describe_at(text: &str, off: usize, code: &ron::Error) -> (usize, String, Option<String>) {
    use ron::Error as E;
    let (message, hint) = describe(code);
    // The parser reports where it was before the offending token: step over blanks and comments
    // so the caret lands on the token itself.
    let next = skip_trivia(text, off);
    match code {
        E::Eof => {
            let hint = match innermost_unclosed(text) {
                Some(o) => {
                    let p = pos_of_offset(text, o);
                    Some(format!(
                        "`{}` opened at line {}, column {} is not closed",
                        opener_text(text, o),
                        p.line,
                        p.col
                    ))
                }
                None => hint,
            };
            (text.trim_end().len(), message, hint)
        }
        E::ExpectedComma
        | E::ExpectedArrayEnd
        | E::ExpectedMapEnd
        | E::ExpectedStructLikeEnd
        | E::ExpectedOptionEnd => {
            match token_before(text, next) {
                // A string that runs over lines before the error most likely lost its closing
                // quote: the parser only noticed at the next quote.
                Some(t) if t.string && text[t.start..t.end].contains('\n') => {
                    let last = pos_of_offset(text, t.end);
                    (
                        t.start,
                        format!("the string that starts here runs on to line {}", last.line),
                        Some("is its closing `\"` missing?".into()),
                    )
                }
                // A value or field follows without a separator: point just after the value
                // the separator should follow.
                Some(t) if !t.open && starts_value(&text[next..]) => (t.end, message, hint),
                // Something else stands where the separator belongs: point at it.
                _ => match text[next..].chars().next() {
                    Some(c) if !starts_value(&text[next..]) => {
                        (next, format!("{message}, found `{c}`"), hint)
                    }
                    _ => (next, message, hint),
                },
            }
        }
        E::ExpectedMapColon => match token_before(text, next) {
            Some(t) if !t.string && !t.open && !t.close => {
                let field = &text[t.start..t.end];
                (
                    next,
                    format!("expected `:` after the field name `{field}`"),
                    Some(format!("write `{field}: value`")),
                )
            }
            _ => (next, message, hint),
        },
        E::UnclosedBlockComment => (unclosed_comment(text).unwrap_or(next), message, hint),
        // `name: value` where a map key belongs: the map was most likely not closed.
        E::ExpectedString if in_map_at(text, next) && field_name_at(text, next).is_some() => {
            let field = field_name_at(text, next).unwrap_or_default();
            let open = innermost_unclosed(&text[..next]).unwrap_or(0);
            let p = pos_of_offset(text, open);
            (
                next,
                format!("expected a map key in double quotes, found the field name `{field}`"),
                Some(format!(
                    "is the `}}` closing the map at line {}, column {} missing?",
                    p.line, p.col
                )),
            )
        }
        E::MissingStructField { .. } => match opening_of(text, next) {
            Some(o) => (o, message, hint),
            None => (next, message, hint),
        },
        E::IntegerOutOfBounds if off > 0 && text[..off].trim_end().ends_with('-') => (
            text[..off].trim_end().len() - 1,
            "a count cannot be negative".into(),
            Some("counts are whole numbers from 0 upwards".into()),
        ),
        E::ExpectedStringEnd => {
            // Point at the opening quote of the unterminated string.
            let quote = text[..next.min(text.len())].rfind('"').unwrap_or(next);
            (quote, message, hint)
        }
        E::ExpectedString
        | E::ExpectedInteger
        | E::ExpectedFloat
        | E::ExpectedBoolean
        | E::ExpectedIdentifier
        | E::ExpectedArray
        | E::ExpectedMap
        | E::ExpectedStructLike
        | E::ExpectedNamedStructLike(_) => {
            // Name a stray punctuation character the parser stopped at.
            let message = match text[next..].chars().next() {
                Some(c)
                    if c.is_ascii_punctuation() && !matches!(c, '"' | '-' | '+' | '.' | '_') =>
                {
                    format!("{message}, found `{c}`")
                }
                Some(c) if c.is_control() && !c.is_whitespace() => {
                    format!("{message}, found the control character U+{:04X}", c as u32)
                }
                _ => message,
            };
            (next, message, hint)
        }
        _ => (next.min(text.trim_end().len()), message, hint),
    }
}

/// Whether the innermost bracket open at `off` is a map's `{`.
fn in_map_at(text: &str, off: usize) -> bool {
    innermost_unclosed(&text[..off]).is_some_and(|o| text[o..].starts_with('{'))
}

/// The identifier at `off` when it is followed by `:` (a field), else `None`.
fn field_name_at(text: &str, off: usize) -> Option<String> {
    let rest = &text[off..];
    let ident: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if ident.is_empty() || ident.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    rest[ident.len()..]
        .trim_start()
        .starts_with(':')
        .then_some(ident)
}

/// Whether `rest` starts with something that begins a field or a value (so a missing separator,
/// not a stray character, is the likely mistake).
fn starts_value(rest: &str) -> bool {
    rest.starts_with(|c: char| {
        c.is_alphanumeric() || matches!(c, '"' | '(' | '[' | '{' | '_' | '-' | '+' | '.')
    })
}

/// The text of the opener at `o` (`System(`, `[`), for hints.
fn opener_text(text: &str, o: usize) -> String {
    let rest = &text[o..];
    let ident: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let bracket = rest[ident.len()..].chars().next().unwrap_or('(');
    format!("{ident}{bracket}")
}

fn list(xs: &[&str]) -> String {
    xs.iter()
        .map(|x| format!("`{x}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How an author knows the struct or enum that serde calls `rust` (the file-shaped type's name):
/// `scale_up` for `ScaleUpSpec`, `Device` for `DeviceRef`.
pub fn user_name(rust: &str) -> String {
    let known = match rust {
        "SystemSpec" | "System" => "System",
        "DeviceSpec" | "Device" | "DeviceRef" => "Device",
        "DieSpec" | "Die" | "DieRef" => "Die",
        "NodeSpec" | "Node" | "NodeRef" => "Node",
        "EngineSpec" => "compute engine",
        "MemorySpec" => "memory level",
        "LinkSpec" => "die_to_die",
        "HostSpec" => "host",
        "NicSpec" => "nics",
        "SwitchSpec" => "switches",
        "EfficiencySpec" => "efficiency",
        "ScaleUpTopology" => "scale_up topology",
        "ScaleOutTopology" => "scale_out topology",
        "MeshTopology" => "mesh topology",
        "EngineKind" => "engine kind",
        "MemoryKind" => "memory kind",
        "Attach" => "attach",
        "Counted" => "counted",
        _ => "",
    };
    if !known.is_empty() {
        return known.to_string();
    }
    // `WeightStoreSpec` → `weight_store`
    let base = rust.strip_suffix("Spec").unwrap_or(rust);
    if base.len() == rust.len() {
        return rust.to_string();
    }
    let mut out = String::new();
    for (i, c) in base.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}

fn within(outer: &Option<String>, word: &str) -> String {
    outer
        .as_deref()
        .map(|o| format!(" {word} `{}`", user_name(o)))
        .unwrap_or_default()
}

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

fn describe(code: &ron::Error) -> (String, Option<String>) {
    use ron::Error as E;
    let s = |x: &str| Some(x.to_string());
    match code {
        E::NoSuchStructField {
            expected,
            found,
            outer,
        } => {
            let within = within(outer, "in");
            let hint = match did_you_mean(found, expected.iter().copied()) {
                Some(s) => format!("did you mean `{s}`? fields{within}: {}", list(expected)),
                None => format!("fields{within}: {}", list(expected)),
            };
            (format!("unknown field `{found}`{within}"), Some(hint))
        }
        E::MissingStructField { field, outer } => {
            let within = within(outer, "in");
            let hint = if *field == "version" {
                format!("add `version: {FORMAT_VERSION},` as the first field")
            } else {
                format!("add `{field}: ...` to this struct")
            };
            (format!("missing field `{field}`{within}"), Some(hint))
        }
        E::DuplicateStructField { field, outer } => {
            let within = within(outer, "in");
            (
                format!("field `{field}` appears twice{within}"),
                s("keep one"),
            )
        }
        E::NoSuchEnumVariant {
            expected,
            found,
            outer,
        } => {
            let close = did_you_mean(found, expected.iter().copied());
            if let Some(part) = outer.as_deref().filter(|o| o.ends_with("Ref")) {
                // `device: Node(...)`: a part of the wrong kind, inline or in a referenced file.
                let kind = user_name(part);
                let hint = match close {
                    Some(s) if s != "Use" => format!("did you mean `{s}`?"),
                    _ => format!(
                        "this place takes a `{kind}(...)`, or `Use(\"file.ron\")` naming a file that holds one"
                    ),
                };
                return (
                    format!("expected a `{kind}` or `Use(\"file.ron\")`, found `{found}`"),
                    Some(hint),
                );
            }
            let within = within(outer, "for");
            let hint = match close {
                Some(s) => format!("did you mean `{s}`? choices: {}", list(expected)),
                None => format!("choices: {}", list(expected)),
            };
            (format!("unknown variant `{found}`{within}"), Some(hint))
        }
        E::ExpectedDifferentStructName { expected, found } => {
            let name = user_name(expected);
            if matches!(name.as_str(), "System" | "Device" | "Die" | "Node") {
                (
                    format!("expected a `{name}`, found a `{found}`"),
                    Some(format!(
                        "this place takes a `{name}(...)` or `Use(\"file.ron\")` naming a `{name}` file"
                    )),
                )
            } else {
                (
                    format!("expected `{name}`, found a struct named `{found}`"),
                    s("write this struct without a name: `(...)`"),
                )
            }
        }
        E::InvalidValueForType { expected, found } => (
            format!(
                "expected {expected}, found {}",
                match found.as_str() {
                    "a sequence" => "a list",
                    f => f,
                }
            ),
            if expected.contains("quantity") {
                s("write quantities as strings with units, e.g. \"700 W\"")
            } else {
                None
            },
        ),
        E::IntegerOutOfBounds => (
            "integer out of range".into(),
            s("counts are whole numbers from 0 to 2^64-1 (2^32-1 for `devices`, `dies`, `cpus`)"),
        ),
        E::ExceededRecursionLimit => (
            "nesting is too deep".into(),
            s("tessera files nest at most 64 levels"),
        ),
        E::Eof => (
            "unexpected end of file".into(),
            s("a bracket or parenthesis is not closed"),
        ),
        E::TrailingCharacters => (
            "unexpected text after the end of the value".into(),
            s("a file holds exactly one top-level value; is there a `)` too many?"),
        ),
        E::ExpectedComma => (
            "expected `,`".into(),
            s("fields, list elements and map entries are separated by commas"),
        ),
        E::ExpectedArray => ("expected a list `[...]`".into(), None),
        E::ExpectedArrayEnd => (
            "expected `,` or `]`".into(),
            s("list elements are separated by commas"),
        ),
        E::ExpectedMap => (
            "expected a map `{...}`".into(),
            s("e.g. `{\"bf16\": \"989.4 TFLOP/s\"}`"),
        ),
        E::ExpectedMapColon => (
            "expected `:` after the map key".into(),
            s("write `\"key\": value`"),
        ),
        E::ExpectedMapEnd => (
            "expected `,` or `}`".into(),
            s("map entries are separated by commas"),
        ),
        E::ExpectedStructLike => ("expected `(`".into(), None),
        E::ExpectedNamedStructLike("") => ("expected `(`".into(), None),
        E::ExpectedNamedStructLike(n) => (format!("expected `{}(`", user_name(n)), None),
        E::ExpectedStructLikeEnd | E::ExpectedOptionEnd => (
            "expected `,` or `)`".into(),
            s("fields are separated by commas"),
        ),
        E::ExpectedBoolean => ("expected `true` or `false`".into(), None),
        E::ExpectedInteger => (
            "expected a whole number".into(),
            s("counts are written without quotes, e.g. `nodes: 18`"),
        ),
        E::ExpectedFloat => ("expected a number".into(), None),
        E::ExpectedString => (
            "expected a string in double quotes".into(),
            s("names, map keys and quantities are strings, e.g. \"700 W\""),
        ),
        E::ExpectedStringEnd => ("the string is not closed".into(), s("add the closing `\"`")),
        E::ExpectedIdentifier => (
            "expected a field name".into(),
            s("a field is written `name: value`"),
        ),
        E::UnexpectedChar(c) => (format!("unexpected character {c:?}"), None),
        E::UnclosedBlockComment => (
            "the block comment is not closed".into(),
            s("close it with `*/`"),
        ),
        E::ExpectedDifferentLength { expected, found } => {
            (format!("expected {expected}, found {found} elements"), None)
        }
        E::Message(m) => (m.clone(), None),
        other => (lower_first(&other.to_string()), None),
    }
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

/// Resolves `Use("...")` references, detecting missing and circular ones.
pub struct Resolver<'a> {
    pub fs: &'a dyn Fs,
    pub files: Files,
    pub diagnostics: Vec<Diagnostic>,
    stack: Vec<String>,
}

/// Types that are either inline or a reference to a file of the same kind.
pub trait PartRef: DeserializeOwned {
    type Spec;
    fn split(self) -> Result<Self::Spec, String>;
}

impl PartRef for arch::DeviceRef {
    type Spec = arch::DeviceSpec;
    fn split(self) -> Result<Self::Spec, String> {
        match self {
            arch::DeviceRef::Device(d) => Ok(d),
            arch::DeviceRef::Use(p) => Err(p),
        }
    }
}
impl PartRef for arch::DieRef {
    type Spec = arch::DieSpec;
    fn split(self) -> Result<Self::Spec, String> {
        match self {
            arch::DieRef::Die(d) => Ok(d),
            arch::DieRef::Use(p) => Err(p),
        }
    }
}
impl PartRef for arch::NodeRef {
    type Spec = arch::NodeSpec;
    fn split(self) -> Result<Self::Spec, String> {
        match self {
            arch::NodeRef::Node(d) => Ok(d),
            arch::NodeRef::Use(p) => Err(p),
        }
    }
}

impl<'a> Resolver<'a> {
    pub fn new(fs: &'a dyn Fs) -> Self {
        Resolver {
            fs,
            files: Files::default(),
            diagnostics: Vec::new(),
            stack: Vec::new(),
        }
    }

    /// Read and parse a top-level file.
    pub fn load_file<T: DeserializeOwned>(&mut self, name: &str) -> Option<(T, usize)> {
        let bytes = match self.fs.read(name) {
            Ok(b) => b,
            Err(e) => {
                self.diagnostics.push(Diagnostic::error(
                    name,
                    None,
                    format!("cannot read the file: {e}"),
                ));
                return None;
            }
        };
        let text = match decode(name, bytes.clone()) {
            Ok(t) => t,
            Err(d) => {
                if let Some(t) = lossy_text(&bytes) {
                    self.files.add(name, t);
                }
                self.diagnostics.push(d);
                return None;
            }
        };
        let id = self.files.add(name, text);
        match parse_ron::<T>(name, self.files.text(id)) {
            Ok(v) => Some((v, id)),
            Err(d) => {
                self.diagnostics.push(d);
                None
            }
        }
    }

    /// Resolve a part written at `path` in file `file`: inline, or by reference to another file.
    pub fn resolve<R: PartRef>(
        &mut self,
        r: R,
        file: usize,
        path: Path,
    ) -> Option<Located<R::Spec>> {
        match r.split() {
            Ok(spec) => Some(Located { spec, file, path }),
            Err(rel) => {
                let current = self.files.name(file).to_string();
                let mut here = self.files.at(file, &path, String::new());
                if rel.trim().is_empty() {
                    here.message = "`Use(\"\")` names no file".into();
                    here.hint = Some(format!(
                        "write the part file's path relative to the directory of `{current}`"
                    ));
                    self.diagnostics.push(here);
                    return None;
                }
                let target = join(&current, &rel);
                let root = self
                    .files
                    .files
                    .first()
                    .map(|f| f.0.clone())
                    .unwrap_or_default();
                if self.stack.contains(&target) || target == current || target == root {
                    let mut chain = vec![root];
                    chain.extend(self.stack.iter().cloned());
                    if chain.last() != Some(&current) {
                        chain.push(current.clone());
                    }
                    chain.push(target.clone());
                    here.message = format!("circular reference: {}", chain.join(" -> "));
                    here.hint =
                        Some("a part file may not refer back to a file that uses it".into());
                    self.diagnostics.push(here);
                    return None;
                }
                let used_at = match here.pos {
                    Some(p) => format!("{current}:{}:{}", p.line, p.col),
                    None => current.clone(),
                };
                let with_use = |d: Diagnostic| {
                    let note = format!("(this file is used at {used_at})");
                    let hint = match d.hint {
                        Some(h) => format!("{h} {note}"),
                        None => note,
                    };
                    Diagnostic {
                        hint: Some(hint),
                        ..d
                    }
                };
                let bytes = match self.fs.read(&target) {
                    Ok(b) => b,
                    Err(e) => {
                        here.message = format!("cannot read referenced file `{target}`: {e}");
                        here.hint = Some(format!(
                            "`Use(\"{rel}\")` is resolved relative to the directory of `{current}`"
                        ));
                        self.diagnostics.push(here);
                        return None;
                    }
                };
                let text = match decode(&target, bytes.clone()) {
                    Ok(t) => t,
                    Err(d) => {
                        if let Some(t) = lossy_text(&bytes) {
                            self.files.add(&target, t);
                        }
                        self.diagnostics.push(with_use(d));
                        return None;
                    }
                };
                let id = self.files.add(&target, text);
                let parsed = match parse_ron::<R>(&target, self.files.text(id)) {
                    Ok(v) => v,
                    Err(d) => {
                        self.diagnostics.push(with_use(d));
                        return None;
                    }
                };
                self.stack.push(target.clone());
                let out = self.resolve(parsed, id, Path::root());
                self.stack.pop();
                out
            }
        }
    }
}
