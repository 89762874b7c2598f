//! Resolving `Use("...")` references between part files: reading and parsing the file a part
//! names, relative to the file that names it, and reporting missing and circular references.

use super::arch;
use super::load::{decode, join, lossy_text, parse_ron_all, Files, Fs, Located};
use crate::diag::{Diagnostic, Path};
use serde::de::DeserializeOwned;

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

impl PartRef for super::reliability::ReliabilityRef {
    type Spec = super::reliability::ReliabilitySpec;
    fn split(self) -> Result<Self::Spec, String> {
        match self {
            super::reliability::ReliabilityRef::Reliability(r) => Ok(r),
            super::reliability::ReliabilityRef::Use(p) => Err(p),
        }
    }
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
        match parse_ron_all::<T>(name, self.files.text(id)) {
            Ok(v) => Some((v, id)),
            Err(d) => {
                self.diagnostics.extend(d);
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
                let parsed = match parse_ron_all::<R>(&target, self.files.text(id)) {
                    Ok(v) => v,
                    Err(d) => {
                        self.diagnostics.extend(d.into_iter().map(&with_use));
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
