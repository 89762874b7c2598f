//! Validated model types: names resolved, units in SI, invariants checked. The engine reads only
//! these. Lowering a spec collects every error of a file (with its location) instead of stopping at
//! the first.

pub mod band;
pub mod bounds;
pub mod mapping;
pub mod precision;
pub mod reliability;
pub mod rules;
pub mod serving;
pub mod system;
pub mod workload;

use crate::diag::{Diagnostic, Path, Severity};
use crate::spec::{Files, Fs, Loaded, Resolver, Q};
use crate::units::{self, Dimension};
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, BTreeSet};

/// A file read and lowered: its file-shaped spec, the lowered value, the texts read and every
/// diagnostic so far.
pub struct Read<S, T> {
    pub spec: S,
    /// Index of the file in `files`.
    pub file: usize,
    pub value: Option<T>,
    pub files: Files,
    pub diagnostics: Vec<Diagnostic>,
}

/// A file that could not be read or parsed, with why.
pub struct Unread {
    pub files: Files,
    pub diagnostics: Vec<Diagnostic>,
}

impl<T> From<Unread> for Loaded<T> {
    fn from(u: Unread) -> Self {
        Loaded {
            value: None,
            files: u.files,
            diagnostics: u.diagnostics,
        }
    }
}

/// Read `name` as the file-shaped `S` and lower it with `lower`, which gets a [`Ctx`] on the
/// file.
pub fn read_lowered<S: DeserializeOwned, T>(
    name: &str,
    fs: &dyn Fs,
    lower: impl FnOnce(&mut Ctx, &S) -> Option<T>,
) -> Result<Read<S, T>, Unread> {
    let mut r = Resolver::new(fs);
    let Some((spec, id)) = r.load_file::<S>(name) else {
        return Err(Unread {
            files: r.files,
            diagnostics: r.diagnostics,
        });
    };
    let mut diagnostics = std::mem::take(&mut r.diagnostics);
    let files = r.files;
    let value = {
        let mut cx = Ctx::new(&files, id);
        let v = lower(&mut cx, &spec);
        diagnostics.extend(cx.diags);
        v
    };
    Ok(Read {
        spec,
        file: id,
        value,
        files,
        diagnostics,
    })
}

/// The result of loading: the value only when no diagnostic is an error.
pub fn checked<T>(value: Option<T>, files: Files, diagnostics: Vec<Diagnostic>) -> Loaded<T> {
    let ok = !diagnostics.iter().any(|d| d.severity == Severity::Error);
    Loaded {
        value: if ok { value } else { None },
        files,
        diagnostics,
    }
}

/// A fitted figure's source: where its key is declared and the citation (which names the cases it
/// was fitted on), for `tessera check`'s copied-fit warning and `validate --cross-validate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FittedSource {
    /// Index into the load's `Files`.
    pub file: usize,
    /// Where the key is declared (`sources.<key>`).
    pub at: Path,
    pub key: String,
    pub citation: String,
    /// Where, in that file, each figure that cites the key with `@key` is written.
    pub figures: Vec<Path>,
}

/// Reserved source tag for a figure the author guessed.
pub const ASSUMED: &str = "assumed";

/// Walks a spec collecting diagnostics; knows which file and path it is in and which source
/// applies to figures that carry no `@key` of their own.
pub struct Ctx<'a> {
    pub files: &'a Files,
    pub diags: Vec<Diagnostic>,
    /// Source keys declared per file.
    known: BTreeMap<usize, BTreeMap<String, String>>,
    /// The frame being walked: (file, path, default source).
    frame: (usize, Path, Option<String>),
    /// The frames it was entered from, innermost last.
    outer: Vec<(usize, Path, Option<String>)>,
    /// Source texts of figures marked fitted, for the validation summary.
    pub fitted: BTreeSet<String>,
    /// The same, with where each key is declared.
    pub fitted_sources: Vec<FittedSource>,
    /// Sources of figures copied from a fit (keys starting `copied-`): assumptions, not fits, but
    /// a cross-validation that leaves the fit's cases out moves them with the fit.
    pub copied_sources: Vec<FittedSource>,
    /// Where each file's `sources` map was declared.
    sources_at: BTreeMap<usize, Path>,
    pub assumed: usize,
    /// Figures read so far by where they come from (`Figures`), for the estimate's `figures`.
    pub figures: Figures,
}

/// How many of a system's figures name a source, are marked assumed, were fitted to validation
/// cases (a fit copied to another part counts as assumed), or were left out of the file so that
/// the model takes a default (an efficiency, idle power or energy figure): what an estimate rests
/// on (`figures` in its JSON).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Figures {
    pub sourced: usize,
    /// Marked `@assumed`, copied from a fit, or written with no source at all (a warning).
    pub assumed: usize,
    pub fitted: usize,
    pub defaulted: usize,
}

impl<'a> Ctx<'a> {
    pub fn new(files: &'a Files, file: usize) -> Self {
        Ctx {
            files,
            diags: Vec::new(),
            known: BTreeMap::new(),
            frame: (file, Path::root(), None),
            outer: Vec::new(),
            fitted: BTreeSet::new(),
            fitted_sources: Vec::new(),
            copied_sources: Vec::new(),
            sources_at: BTreeMap::new(),
            assumed: 0,
            figures: Figures::default(),
        }
    }

    pub fn file(&self) -> usize {
        self.frame.0
    }
    pub fn path(&self) -> &Path {
        &self.frame.1
    }
    fn default_source(&self) -> Option<&String> {
        let file = self.file();
        std::iter::once(&self.frame)
            .chain(self.outer.iter().rev())
            .take_while(|f| f.0 == file)
            .find_map(|f| f.2.as_ref())
    }

    /// Declare the `sources` map of the current file.
    pub fn declare_sources(&mut self, sources: &BTreeMap<String, String>) {
        let file = self.file();
        let entry = self.known.entry(file).or_default();
        for (k, v) in sources {
            entry.insert(k.clone(), v.clone());
        }
        let path = self.path().field("sources");
        self.sources_at.entry(file).or_insert_with(|| path.clone());
        for (k, v) in sources {
            if v.trim().is_empty() {
                let d = self
                    .files
                    .at(file, &path.key(k), format!("source `{k}` has no citation"));
                self.diags.push(d.with_hint(Some(
                    "name the datasheet, paper (with table) or MLPerf result path".into(),
                )));
            }
        }
    }

    /// Enter a child struct at `field` (same file), with its own default source.
    pub fn enter(&mut self, seg: crate::diag::Seg, source: Option<&String>) {
        let file = self.frame.0;
        let mut p = self.frame.1.clone();
        p.0.push(seg);
        self.push((file, p, source.cloned()));
        if let Some(s) = source {
            self.check_source_key(s, None);
        }
    }
    pub fn enter_field(&mut self, name: &str, source: Option<&String>) {
        self.enter(crate::diag::Seg::Field(name.to_string()), source);
    }
    /// Enter a part that lives at `path` of `file` (another file after a `Use`).
    pub fn enter_part(&mut self, file: usize, path: Path, source: Option<&String>) {
        self.push((file, path, source.cloned()));
        if let Some(s) = source {
            self.check_source_key(s, None);
        }
    }
    /// Back to the frame the last `enter` came from (at the root, stays there).
    pub fn leave(&mut self) {
        if let Some(f) = self.outer.pop() {
            self.frame = f;
        }
    }
    fn push(&mut self, frame: (usize, Path, Option<String>)) {
        let outer = std::mem::replace(&mut self.frame, frame);
        self.outer.push(outer);
    }

    pub fn error_at(&mut self, path: &Path, message: impl Into<String>, hint: Option<String>) {
        let d = self.files.at(self.file(), path, message).with_hint(hint);
        self.diags.push(d);
    }
    pub fn error(&mut self, field: &str, message: impl Into<String>, hint: Option<String>) {
        let p = if field.is_empty() {
            self.path().clone()
        } else {
            self.path().field(field)
        };
        self.error_at(&p, message, hint);
    }
    pub fn warn(&mut self, field: &str, message: impl Into<String>, hint: Option<String>) {
        let p = if field.is_empty() {
            self.path().clone()
        } else {
            self.path().field(field)
        };
        self.warn_at(&p, message, hint);
    }
    pub fn warn_at(&mut self, path: &Path, message: impl Into<String>, hint: Option<String>) {
        let mut d = self.files.at(self.file(), path, message).with_hint(hint);
        d.severity = crate::diag::Severity::Warning;
        self.diags.push(d);
    }

    fn note_fitted(&mut self, file: usize, key: &str, text: String, figure: Option<&Path>) {
        let copied = key.starts_with("copied-");
        let list = if copied {
            &mut self.copied_sources
        } else {
            &mut self.fitted_sources
        };
        let i = match list.iter().position(|f| f.file == file && f.key == key) {
            Some(i) => i,
            None => {
                let at = self
                    .sources_at
                    .get(&file)
                    .cloned()
                    .unwrap_or_else(|| Path::root().field("sources"))
                    .key(key);
                list.push(FittedSource {
                    file,
                    at,
                    key: key.to_string(),
                    citation: text.clone(),
                    figures: Vec::new(),
                });
                list.len() - 1
            }
        };
        if let Some(p) = figure {
            if !list[i].figures.contains(p) {
                list[i].figures.push(p.clone());
            }
        }
        if !copied {
            self.fitted.insert(text);
        }
    }

    fn check_source_key(&mut self, key: &str, field: Option<&str>) -> bool {
        if key == ASSUMED {
            self.assumed += 1;
            return true;
        }
        let file = self.file();
        let known = self.known.get(&file);
        if let Some(text) = known.and_then(|k| k.get(key)) {
            if key.starts_with("fitted") {
                let text = text.clone();
                self.note_fitted(file, key, text, None);
            }
            return true;
        }
        let keys: Vec<&str> = known
            .map(|k| k.keys().map(|s| s.as_str()).collect())
            .unwrap_or_default();
        // A figure cites its key after `@` ("700 W @key"); a `source:` field names it bare.
        let (at, assumed) = match field {
            Some(_) => ("@", "`@assumed`"),
            None => ("", "`source: \"assumed\"`"),
        };
        let hint = match crate::diag::did_you_mean(key, keys.iter().copied()) {
            Some(s) => format!("did you mean `{at}{s}`? declare every key in this file's `sources`, or write {assumed}"),
            None => format!("declare the key in this file's `sources: {{ \"key\": \"citation\" }}`, or write {assumed}"),
        };
        let msg = format!("source `{key}` is not declared in `sources`");
        match field {
            Some(f) => self.error(f, msg, Some(hint)),
            None => self.error("source", msg, Some(hint)),
        }
        false
    }

    /// Count a figure by its source tag (`None`: the file's or part's default source, if any).
    fn count_figure(&mut self, tag: Option<&str>) {
        let key = tag
            .map(str::to_string)
            .or_else(|| self.default_source().cloned());
        match key.as_deref() {
            Some(k) if k.starts_with("fitted") => self.figures.fitted += 1,
            Some(k) if k == ASSUMED || k.starts_with("copied-") => self.figures.assumed += 1,
            Some(_) => self.figures.sourced += 1,
            None => self.figures.assumed += 1,
        }
    }

    /// Parse a quantity at `field`, check its source, and return its SI value.
    pub fn q(&mut self, field: &str, q: &Q, dim: Dimension) -> Option<f64> {
        self.q_at(&self.path().field(field), field, q, dim)
    }

    /// Like [`Ctx::q`] for a quantity inside a map (`peak: {"bf16": ...}`).
    pub fn q_key(&mut self, field: &str, key: &str, q: &Q, dim: Dimension) -> Option<f64> {
        let p = self.path().field(field).key(key);
        self.q_at(&p, field, q, dim)
    }

    fn q_at(&mut self, path: &Path, field: &str, q: &Q, dim: Dimension) -> Option<f64> {
        match units::parse(&q.0, dim) {
            Ok(parsed) => {
                self.count_figure(parsed.source.as_deref());
                match &parsed.source {
                    Some(tag) => {
                        if tag != ASSUMED {
                            let file = self.file();
                            let ok = self.known.get(&file).is_some_and(|k| k.contains_key(tag));
                            if !ok {
                                let keys: Vec<String> = self
                                    .known
                                    .get(&file)
                                    .map(|k| k.keys().cloned().collect())
                                    .unwrap_or_default();
                                let hint = match crate::diag::did_you_mean(
                                    tag,
                                    keys.iter().map(|s| s.as_str()),
                                ) {
                                    Some(s) => format!("did you mean `@{s}`?"),
                                    None => {
                                        "declare it in this file's `sources`, or write `@assumed`"
                                            .into()
                                    }
                                };
                                self.error_at(
                                    path,
                                    format!(
                                        "source `{tag}` of `{field}` is not declared in `sources`"
                                    ),
                                    Some(hint),
                                );
                            } else if tag.starts_with("fitted") || tag.starts_with("copied-") {
                                let text = self.known[&file][tag].clone();
                                self.note_fitted(file, tag, text, Some(path));
                            }
                        } else {
                            self.assumed += 1;
                        }
                    }
                    None => {
                        if self.default_source().is_none() {
                            let d = self
                                .files
                                .at(self.file(), path, format!("`{field}` has no source"))
                                .with_hint(Some(format!(
                                    "append `@key` naming an entry of `sources` (e.g. \"{} @datasheet\"), or `@assumed`",
                                    q.0.trim()
                                )));
                            let mut d = d;
                            d.severity = crate::diag::Severity::Warning;
                            self.diags.push(d);
                        }
                    }
                }
                match bounds::plausible(field, q.0.trim(), parsed.value, dim) {
                    Ok(v) => Some(v),
                    Err((m, h)) => {
                        self.error_at(path, m, h);
                        None
                    }
                }
            }
            Err(e) => {
                self.error_at(path, format!("`{field}`: {}", e.message), e.hint);
                None
            }
        }
    }

    /// A value `rule` accepts (`bounds::*`), else its error at `field`.
    pub fn check<T>(&mut self, field: &str, rule: Result<T, bounds::Problem>) -> Option<T> {
        match rule {
            Ok(v) => Some(v),
            Err((m, h)) => {
                self.error(field, m, h);
                None
            }
        }
    }

    /// A quantity that must be > 0.
    pub fn positive(&mut self, field: &str, q: &Q, dim: Dimension) -> Option<f64> {
        let v = self.q(field, q, dim)?;
        self.check(field, bounds::positive(field, q.0.trim(), v, dim))
    }

    /// A quantity that must be > 0, element `index` of the tuple or list at the current path
    /// (a rate in a `(sequence, rate)` pair), named `field` in messages.
    pub fn positive_index(
        &mut self,
        field: &str,
        index: usize,
        q: &Q,
        dim: Dimension,
    ) -> Option<f64> {
        let p = self.path().index(index);
        let v = self.q_at(&p, field, q, dim)?;
        match bounds::positive(field, q.0.trim(), v, dim) {
            Ok(v) => Some(v),
            Err((m, h)) => {
                self.error_at(&p, m, h);
                None
            }
        }
    }

    /// A quantity that must be ≥ 0.
    pub fn non_negative(&mut self, field: &str, q: &Q, dim: Dimension) -> Option<f64> {
        let v = self.q(field, q, dim)?;
        self.check(field, bounds::non_negative(field, q.0.trim(), v))
    }

    /// A fraction in (0, 1].
    pub fn fraction(&mut self, field: &str, q: &Q) -> Option<f64> {
        let v = self.q(field, q, Dimension::Ratio)?;
        self.check(field, bounds::fraction(field, q.0.trim(), v))
    }

    /// A fraction in (0, 1] of something other than a peak, `hint` saying of what.
    pub fn fraction_with(&mut self, field: &str, q: &Q, hint: &str) -> Option<f64> {
        let v = self.q(field, q, Dimension::Ratio)?;
        self.check(field, bounds::fraction_with(field, q.0.trim(), v, hint))
    }

    /// A share in [0, 1): a part of something taken away, never all of it.
    pub fn share(&mut self, field: &str, q: &Q, hint: &str) -> Option<f64> {
        let v = self.q(field, q, Dimension::Ratio)?;
        self.check(field, bounds::share(field, q.0.trim(), v, hint))
    }

    /// A count that must be ≥ 1.
    pub fn count(&mut self, field: &str, v: u64) -> Option<u64> {
        self.check(field, bounds::count(field, v))
    }
}
