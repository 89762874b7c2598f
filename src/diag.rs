//! Diagnostics as data: what is wrong, where (file, line, column), and a hint for the author.
//!
//! The library never prints; the CLI renders diagnostics with [`Diagnostic::render`]. Semantic errors
//! found after parsing carry a [`Path`] into the file (`device.memory[0].bandwidth`), which
//! [`locate`] turns into a line and column by scanning the RON text, so every error of a file can be
//! reported at once and at its place.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One step of a path into a RON document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    Field(String),
    Index(usize),
    Key(String),
}

/// A path into a document, e.g. `device.memory[0].bandwidth`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Path(pub Vec<Seg>);

impl Path {
    pub fn root() -> Self {
        Path(Vec::new())
    }
    pub fn field(&self, name: &str) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Field(name.to_string()));
        p
    }
    pub fn index(&self, i: usize) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }
    pub fn key(&self, k: &str) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Key(k.to_string()));
        p
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for s in &self.0 {
            match s {
                Seg::Field(n) => {
                    if !first {
                        f.write_str(".")?;
                    }
                    f.write_str(n)?;
                }
                Seg::Index(i) => write!(f, "[{i}]")?,
                Seg::Key(k) => write!(f, "[\"{k}\"]")?,
            }
            first = false;
        }
        Ok(())
    }
}

/// A 1-based line and column (columns count characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// The file as the user named it.
    pub file: String,
    pub pos: Option<Pos>,
    pub message: String,
    pub hint: Option<String>,
}

impl Diagnostic {
    pub fn error(file: &str, pos: Option<Pos>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            file: file.to_string(),
            pos,
            message: message.into(),
            hint: None,
        }
    }
    pub fn warning(file: &str, pos: Option<Pos>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(file, pos, message)
        }
    }
    pub fn with_hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }

    /// `path:line:col: error: message`, then the source line with a caret and `= hint: …`.
    pub fn render(&self, source: Option<&str>) -> String {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut out = match self.pos {
            Some(p) => format!("{}:{}:{}: {sev}: {}\n", self.file, p.line, p.col, self.message),
            None => format!("{}: {sev}: {}\n", self.file, self.message),
        };
        if let (Some(p), Some(src)) = (self.pos, source) {
            if let Some(line) = src.lines().nth(p.line.saturating_sub(1)) {
                let line: String = line.chars().take(160).collect();
                let gutter = p.line.to_string();
                out.push_str(&format!("{} |\n", " ".repeat(gutter.len())));
                out.push_str(&format!("{gutter} | {line}\n"));
                let pad: String = line
                    .chars()
                    .take(p.col.saturating_sub(1))
                    .map(|c| if c == '\t' { '\t' } else { ' ' })
                    .collect();
                out.push_str(&format!("{} | {pad}^\n", " ".repeat(gutter.len())));
            }
        }
        if let Some(h) = &self.hint {
            out.push_str(&format!("  = hint: {h}\n"));
        }
        out
    }
}

/// Diagnostics gathered while lowering one file; `errors()` tells whether any is fatal.
#[derive(Debug, Default)]
pub struct Sink {
    pub items: Vec<Diagnostic>,
}

impl Sink {
    pub fn has_errors(&self) -> bool {
        self.items.iter().any(|d| d.severity == Severity::Error)
    }
    pub fn push(&mut self, d: Diagnostic) {
        if !self.items.contains(&d) {
            self.items.push(d);
        }
    }
}

/// Byte offset → 1-based line and character column.
pub fn pos_of_offset(src: &str, offset: usize) -> Pos {
    let offset = offset.min(src.len());
    let mut line = 1;
    let mut line_start = 0;
    for (i, b) in src.bytes().enumerate() {
        if i >= offset {
            break;
        }
        if b == b'\n' {
            line += 1;
            line_start = i + 1;
        }
    }
    let mut end = offset;
    while !src.is_char_boundary(end) {
        end -= 1;
    }
    let col = src[line_start..end].chars().count() + 1;
    Pos { line, col }
}

// ---------------------------------------------------------------------------------------------
// A small RON scanner that finds where a path points, for semantic errors.

#[derive(Clone, Copy, Debug, PartialEq)]
enum Tok {
    Ident,
    Str,
    Other,
    Open(u8),
    Close(u8),
    Colon,
    Comma,
}

fn tokenize(src: &str) -> Vec<(Tok, usize, usize)> {
    let b = src.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'#' {
            // attribute `#![enable(...)]`: skip to the closing bracket
            while i < b.len() && b[i] != b']' {
                i += 1;
            }
            i += 1;
        } else if c == b'"' {
            let s = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push((Tok::Str, s, i.min(b.len())));
        } else if c == b'r' && matches!(b.get(i + 1), Some(b'"') | Some(b'#')) {
            let s = i;
            i += 1;
            let mut hashes = 0;
            while i < b.len() && b[i] == b'#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            while i < b.len() {
                if b[i] == b'"' && b[i + 1..].iter().take(hashes).filter(|&&h| h == b'#').count() == hashes {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push((Tok::Str, s, i.min(b.len())));
        } else if matches!(c, b'(' | b'[' | b'{') {
            out.push((Tok::Open(c), i, i + 1));
            i += 1;
        } else if matches!(c, b')' | b']' | b'}') {
            out.push((Tok::Close(c), i, i + 1));
            i += 1;
        } else if c == b':' {
            out.push((Tok::Colon, i, i + 1));
            i += 1;
        } else if c == b',' {
            out.push((Tok::Comma, i, i + 1));
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Ident, s, i));
        } else {
            let s = i;
            i += 1;
            while i < b.len()
                && !b[i].is_ascii_whitespace()
                && !matches!(b[i], b'(' | b')' | b'[' | b']' | b'{' | b'}' | b':' | b',')
            {
                i += 1;
            }
            out.push((Tok::Other, s, i));
        }
    }
    out
}

/// Index of the token after the value starting at `i`.
fn skip_value(t: &[(Tok, usize, usize)], mut i: usize) -> usize {
    if i < t.len() && t[i].0 == Tok::Ident && matches!(t.get(i + 1), Some((Tok::Open(_), _, _))) {
        i += 1;
    }
    match t.get(i) {
        Some((Tok::Open(_), _, _)) => {
            let mut depth = 0;
            while i < t.len() {
                match t[i].0 {
                    Tok::Open(_) => depth += 1,
                    Tok::Close(_) => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            i
        }
        Some(_) => i + 1,
        None => i,
    }
}

/// Find the byte offset the path points at: the value of the last segment found. When a segment is
/// missing, the offset of the innermost enclosing value (or its key) is returned.
pub fn locate(src: &str, path: &Path) -> Option<usize> {
    let t = tokenize(src);
    if t.is_empty() {
        return None;
    }
    let mut i = 0;
    let mut best = t[0].1;
    for seg in &path.0 {
        // step into the value at i
        if t.get(i).map(|x| x.0) == Some(Tok::Ident) && matches!(t.get(i + 1), Some((Tok::Open(_), _, _))) {
            i += 1;
        }
        let Some((Tok::Open(open), _, _)) = t.get(i).copied() else {
            return Some(best);
        };
        let mut j = i + 1;
        let mut found = None;
        let mut index = 0usize;
        while j < t.len() && !matches!(t[j].0, Tok::Close(_)) {
            // entry: [key :] value
            let has_key = t.get(j + 1).map(|x| x.0) == Some(Tok::Colon)
                && matches!(t[j].0, Tok::Ident | Tok::Str);
            let (key_tok, vstart) = if has_key { (Some(j), j + 2) } else { (None, j) };
            let matched = match (seg, key_tok) {
                (Seg::Field(n), Some(k)) => t[k].0 == Tok::Ident && &src[t[k].1..t[k].2] == n,
                (Seg::Key(n), Some(k)) => {
                    t[k].0 == Tok::Str && src[t[k].1..t[k].2].trim_matches('"') == n
                }
                (Seg::Index(n), None) => *n == index && (open == b'[' || open == b'('),
                _ => false,
            };
            if matched {
                found = Some((key_tok, vstart));
                break;
            }
            j = skip_value(&t, vstart);
            index += 1;
            if t.get(j).map(|x| x.0) == Some(Tok::Comma) {
                j += 1;
            }
        }
        match found {
            Some((_, v)) => {
                i = v;
                if let Some(x) = t.get(i) {
                    best = x.1;
                }
            }
            None => return Some(best),
        }
    }
    Some(best)
}

/// Position of a path in `src` (1-based), for a diagnostic.
pub fn locate_pos(src: &str, path: &Path) -> Option<Pos> {
    locate(src, path).map(|o| pos_of_offset(src, o))
}

/// The closest of `candidates` to `word`, when close enough to be a likely typo.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(s, _)| *s >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"// a comment
System(
    name: "x",
    device: Device(
        memory: [
            (name: "hbm", bandwidth: "3 TB/s"),
            (name: "l2", bandwidth: "bad"),
        ],
    ),
    sources: { "a": "b", "c": "d" },
)"#;

    #[test]
    fn locates_nested_fields_and_indices() {
        let p = Path::root().field("device").field("memory").index(1).field("bandwidth");
        let pos = locate_pos(SRC, &p).unwrap();
        assert_eq!(pos, Pos { line: 7, col: 38 });
        let p = Path::root().field("sources").key("c");
        assert_eq!(locate_pos(SRC, &p).unwrap(), Pos { line: 10, col: 30 });
    }

    #[test]
    fn missing_field_points_at_parent() {
        let p = Path::root().field("device").field("nope");
        assert_eq!(locate_pos(SRC, &p).unwrap(), Pos { line: 4, col: 13 });
    }

    #[test]
    fn render_has_location_caret_and_hint() {
        let d = Diagnostic::error("f.ron", Some(Pos { line: 3, col: 11 }), "bad")
            .with_hint(Some("fix it".into()));
        let r = d.render(Some(SRC));
        assert!(r.starts_with("f.ron:3:11: error: bad\n"));
        assert!(r.contains("          ^"));
        assert!(r.contains("= hint: fix it"));
    }
}
