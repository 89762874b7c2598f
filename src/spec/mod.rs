//! Loading files into their file-shaped types, with located diagnostics.
//!
//! The library does no I/O: callers hand in a [`Fs`] that reads a path. Loading keeps every source
//! text it read in [`Files`] so later errors (from lowering) can point at `file:line:col`.

pub mod arch;
pub mod mapping;
pub mod workload;

use crate::diag::{did_you_mean, pos_of_offset, Diagnostic, Path, Pos};
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
        self.files.iter().find(|(n, _)| n == name).map(|(_, t)| t.as_str())
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
    let dir = std::path::Path::new(base).parent().unwrap_or(std::path::Path::new(""));
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

/// Decode bytes as UTF-8, or a diagnostic at the first invalid byte.
pub fn decode(name: &str, bytes: Vec<u8>) -> Result<String, Diagnostic> {
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let bytes = e.into_bytes();
        let prefix = String::from_utf8_lossy(&bytes[..valid]).into_owned();
        let pos = pos_of_offset(&prefix, prefix.len());
        Diagnostic::error(name, Some(pos), "the file is not valid UTF-8 text")
            .with_hint(Some("tessera files are UTF-8 RON text; is this a binary file?".into()))
    })
}

/// Parse RON text into `T`, turning a syntax or shape error into a located diagnostic with a hint.
pub fn parse_ron<T: DeserializeOwned>(name: &str, text: &str) -> Result<T, Diagnostic> {
    if text.trim().is_empty() {
        return Err(Diagnostic::error(name, Some(Pos { line: 1, col: 1 }), "the file is empty")
            .with_hint(Some("run `tessera new --template gpu-node NAME` for a starter file".into())));
    }
    ron_options().from_str::<T>(text).map_err(|e| {
        let pos = Pos {
            line: e.span.start.line.max(1),
            col: e.span.start.col.max(1),
        };
        let (message, hint) = describe(&e.code);
        Diagnostic::error(name, Some(pos), message).with_hint(hint)
    })
}

fn list(xs: &[&str]) -> String {
    xs.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", ")
}

fn describe(code: &ron::Error) -> (String, Option<String>) {
    use ron::Error as E;
    match code {
        E::NoSuchStructField {
            expected,
            found,
            outer,
        } => {
            let within = outer.as_deref().map(|o| format!(" in `{o}`")).unwrap_or_default();
            let hint = match did_you_mean(found, expected.iter().copied()) {
                Some(s) => format!("did you mean `{s}`? fields{within}: {}", list(expected)),
                None => format!("fields{within}: {}", list(expected)),
            };
            (format!("unknown field `{found}`{within}"), Some(hint))
        }
        E::MissingStructField { field, outer } => {
            let within = outer.as_deref().map(|o| format!(" in `{o}`")).unwrap_or_default();
            (
                format!("missing field `{field}`{within}"),
                Some(format!("add `{field}: ...` to this struct")),
            )
        }
        E::DuplicateStructField { field, outer } => {
            let within = outer.as_deref().map(|o| format!(" in `{o}`")).unwrap_or_default();
            (format!("field `{field}` appears twice{within}"), Some("keep one".into()))
        }
        E::NoSuchEnumVariant {
            expected,
            found,
            outer,
        } => {
            let within = outer.as_deref().map(|o| format!(" for `{o}`")).unwrap_or_default();
            let hint = match did_you_mean(found, expected.iter().copied()) {
                Some(s) => format!("did you mean `{s}`? choices: {}", list(expected)),
                None => format!("choices: {}", list(expected)),
            };
            (format!("unknown variant `{found}`{within}"), Some(hint))
        }
        E::ExpectedDifferentStructName { expected, found } => (
            format!("expected a `{expected}`, found a `{found}`"),
            Some(format!(
                "this place takes a `{expected}(...)` or `Use(\"file.ron\")` naming a `{expected}` file"
            )),
        ),
        E::InvalidValueForType { expected, found } => (
            format!("expected {expected}, found {found}"),
            if expected.contains("quantity") {
                Some("write quantities as strings with units, e.g. \"700 W\"".into())
            } else {
                None
            },
        ),
        E::IntegerOutOfBounds => (
            "integer out of range".into(),
            Some("counts are whole numbers from 0 to 2^64-1 (2^32-1 for `devices`, `dies`, `cpus`)".into()),
        ),
        E::ExceededRecursionLimit => ("nesting is too deep".into(), None),
        E::Eof => (
            "unexpected end of file".into(),
            Some("a bracket or parenthesis is not closed".into()),
        ),
        E::TrailingCharacters => (
            "unexpected text after the end of the value".into(),
            Some("a file holds exactly one top-level value".into()),
        ),
        other => (other.to_string(), None),
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
                self.diagnostics
                    .push(Diagnostic::error(name, None, format!("cannot read the file: {e}")));
                return None;
            }
        };
        let text = match decode(name, bytes) {
            Ok(t) => t,
            Err(d) => {
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
    pub fn resolve<R: PartRef>(&mut self, r: R, file: usize, path: Path) -> Option<Located<R::Spec>> {
        match r.split() {
            Ok(spec) => Some(Located { spec, file, path }),
            Err(rel) => {
                let target = join(self.files.name(file), &rel);
                let mut here = self.files.at(file, &path, String::new());
                if self.stack.contains(&target) || target == self.files.name(file) {
                    let mut chain = vec![self.files.name(0).to_string()];
                    chain.extend(self.stack.iter().cloned());
                    chain.push(target.clone());
                    here.message = format!("circular reference: {}", chain.join(" -> "));
                    here.hint = Some("a part file may not refer back to a file that uses it".into());
                    self.diagnostics.push(here);
                    return None;
                }
                let bytes = match self.fs.read(&target) {
                    Ok(b) => b,
                    Err(e) => {
                        here.message = format!("cannot read referenced file `{target}`: {e}");
                        here.hint = Some(format!(
                            "`Use(\"{rel}\")` is resolved relative to the directory of `{}`",
                            self.files.name(file)
                        ));
                        self.diagnostics.push(here);
                        return None;
                    }
                };
                let text = match decode(&target, bytes) {
                    Ok(t) => t,
                    Err(d) => {
                        self.diagnostics.push(d);
                        return None;
                    }
                };
                let id = self.files.add(&target, text);
                let parsed = match parse_ron::<R>(&target, self.files.text(id)) {
                    Ok(v) => v,
                    Err(d) => {
                        self.diagnostics.push(d);
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
