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
            Some(p) => format!(
                "{}:{}:{}: {sev}: {}\n",
                self.file, p.line, p.col, self.message
            ),
            None => format!("{}: {sev}: {}\n", self.file, self.message),
        };
        if let (Some(p), Some(src)) = (self.pos, source) {
            // (A blank line with a caret under nothing shows nothing: leave it out.)
            if let Some(line) = src
                .lines()
                .nth(p.line.saturating_sub(1))
                .filter(|l| !l.trim().is_empty())
            {
                // Control characters (NUL, escapes) would garble the terminal: show them as `�`,
                // one character for one, so the caret still lines up.
                let line: String = line
                    .chars()
                    .take(160)
                    .map(|c| {
                        if c.is_control() && c != '\t' {
                            '\u{fffd}'
                        } else {
                            c
                        }
                    })
                    .collect();
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

/// 1-based line and character column → byte offset (clamped to the text).
pub fn offset_of_pos(src: &str, pos: Pos) -> usize {
    let mut line = 1;
    let mut start = 0;
    if pos.line > 1 {
        for (i, b) in src.bytes().enumerate() {
            if b == b'\n' {
                line += 1;
                if line == pos.line {
                    start = i + 1;
                    break;
                }
            }
        }
        if line < pos.line {
            return src.len();
        }
    }
    let rest = &src[start..];
    let mut off = start;
    for (n, (i, c)) in rest.char_indices().enumerate() {
        if n + 1 >= pos.col || c == '\n' {
            return start + i;
        }
        off = start + i + c.len_utf8();
    }
    off
}

/// The offset of the first character at or after `off` that is neither whitespace nor inside a
/// comment (`src.len()` when there is none).
pub fn skip_trivia(src: &str, mut off: usize) -> usize {
    let b = src.as_bytes();
    while off < b.len() {
        if b[off].is_ascii_whitespace() {
            off += 1;
        } else if b[off] == b'/' && b.get(off + 1) == Some(&b'/') {
            while off < b.len() && b[off] != b'\n' {
                off += 1;
            }
        } else if b[off] == b'/' && b.get(off + 1) == Some(&b'*') {
            let mut depth = 0usize;
            while off < b.len() {
                if b[off] == b'/' && b.get(off + 1) == Some(&b'*') {
                    depth += 1;
                    off += 2;
                } else if b[off] == b'*' && b.get(off + 1) == Some(&b'/') {
                    depth = depth.saturating_sub(1);
                    off += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    off += 1;
                }
            }
        } else {
            break;
        }
    }
    while off < src.len() && !src.is_char_boundary(off) {
        off += 1;
    }
    off.min(src.len())
}

/// A token of the text as the locator sees it: where it starts and ends (bytes), whether it
/// opens or closes a bracket, and whether it is a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenSpan {
    pub start: usize,
    pub end: usize,
    pub open: bool,
    pub close: bool,
    pub string: bool,
}

/// The last token that ends at or before `off`.
pub fn token_before(src: &str, off: usize) -> Option<TokenSpan> {
    tokenize(src)
        .into_iter()
        .take_while(|t| t.2 <= off)
        .last()
        .map(|t| TokenSpan {
            start: t.1,
            end: t.2,
            open: matches!(t.0, Tok::Open(_)),
            close: matches!(t.0, Tok::Close(_)),
            string: t.0 == Tok::Str,
        })
}

/// Where the struct, list or map that the closing bracket at `close` belongs to starts: its name
/// (`System` in `System(`) when it has one, else its opening bracket.
pub fn opening_of(src: &str, close: usize) -> Option<usize> {
    let t = tokenize(src);
    let k = t
        .iter()
        .position(|x| x.1 == close && matches!(x.0, Tok::Close(_)))?;
    let mut depth = 0usize;
    for j in (0..=k).rev() {
        match t[j].0 {
            Tok::Close(_) => depth += 1,
            Tok::Open(_) => {
                depth -= 1;
                if depth == 0 {
                    if j > 0 && t[j - 1].0 == Tok::Ident && t[j - 1].2 == t[j].1 {
                        return Some(t[j - 1].1);
                    }
                    return Some(t[j].1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The start of a block comment (`/*`) that is never closed, if any.
pub fn unclosed_comment(src: &str) -> Option<usize> {
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            let start = i;
            let mut depth = 0usize;
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
            if depth > 0 {
                return Some(start);
            }
        } else {
            i += 1;
        }
    }
    None
}

/// The innermost bracket left open at the end of the text, as the offset of its name or bracket.
pub fn innermost_unclosed(src: &str) -> Option<usize> {
    let t = tokenize(src);
    let mut stack: Vec<usize> = Vec::new();
    for (j, x) in t.iter().enumerate() {
        match x.0 {
            Tok::Open(_) => stack.push(j),
            Tok::Close(_) => {
                stack.pop();
            }
            _ => {}
        }
    }
    let j = *stack.last()?;
    if j > 0 && t[j - 1].0 == Tok::Ident && t[j - 1].2 == t[j].1 {
        return Some(t[j - 1].1);
    }
    Some(t[j].1)
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
                if b[i] == b'"'
                    && b[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == b'#')
                        .count()
                        == hashes
                {
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
        // An enum variant written as `Name(...)` is named by the path (`model.Transformer.heads`):
        // the segment names the value we are at, so it consumes no token.
        if let (Seg::Field(n), Some((Tok::Ident, a, b)), Some((Tok::Open(b'('), _, _))) =
            (seg, t.get(i).copied(), t.get(i + 1).copied())
        {
            if &src[a..b] == n {
                continue;
            }
        }
        // step into the value at i
        if t.get(i).map(|x| x.0) == Some(Tok::Ident)
            && matches!(t.get(i + 1), Some((Tok::Open(_), _, _)))
        {
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
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
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
        let p = Path::root()
            .field("device")
            .field("memory")
            .index(1)
            .field("bandwidth");
        let pos = locate_pos(SRC, &p).unwrap();
        // The opening quote of `"bad"`.
        assert_eq!(pos, Pos { line: 7, col: 37 });
        let p = Path::root().field("sources").key("c");
        assert_eq!(locate_pos(SRC, &p).unwrap(), Pos { line: 10, col: 31 });
    }

    #[test]
    fn missing_field_points_at_parent() {
        let p = Path::root().field("device").field("nope");
        assert_eq!(locate_pos(SRC, &p).unwrap(), Pos { line: 4, col: 13 });
    }

    #[test]
    fn offsets_and_positions_round_trip() {
        let src = "ab\n\tçd\n\nxyz";
        for off in [0, 1, 2, 3, 4, 6, 7, 8, 9, 12] {
            let p = pos_of_offset(src, off);
            assert_eq!(offset_of_pos(src, p), off, "{p:?}");
        }
        assert_eq!(offset_of_pos(src, Pos { line: 9, col: 1 }), src.len());
        assert_eq!(offset_of_pos(src, Pos { line: 1, col: 99 }), 2);
    }

    #[test]
    fn skips_blanks_and_comments() {
        let src = "a  // x\n /* y /* z */ */ b";
        assert_eq!(&src[skip_trivia(src, 1)..], "b");
        assert_eq!(skip_trivia("  /* open", 0), 9);
    }

    #[test]
    fn finds_openers_and_unclosed_things() {
        let src = "System(\n  a: (x: [1, 2]),\n)";
        let close = src.rfind(')').unwrap();
        assert_eq!(opening_of(src, close), Some(0));
        let inner = src.find("])").unwrap() + 1;
        assert_eq!(opening_of(src, inner), Some(13));
        assert_eq!(innermost_unclosed("System(\n  a: (x: [1, 2]"), Some(13));
        assert_eq!(innermost_unclosed(src), None);
        assert_eq!(unclosed_comment("a /* b */ \"/*\" // /*\n /* c"), Some(22));
        assert_eq!(unclosed_comment("a /* b /* c */ d */"), None);
        let t = token_before(src, src.find("2]").unwrap() + 1).unwrap();
        assert_eq!(&src[t.start..t.end], "2");
    }

    #[test]
    fn render_hides_control_characters_and_blank_lines() {
        let d = Diagnostic::error("f.ron", Some(Pos { line: 1, col: 3 }), "bad");
        let r = d.render(Some("a\u{1b}[31mb"));
        assert!(!r.contains('\u{1b}'), "{r}");
        assert!(r.contains("a\u{fffd}[31mb"), "{r}");
        let r = d.render(Some("   \nx"));
        assert_eq!(r, "f.ron:1:3: error: bad\n");
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
