//! Reading one file: its text as tokens (comments, strings and chars dropped), then what it
//! says: its inline module scopes, their `mod` declarations, `use` trees and qualified paths.

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
    Literal,
}

#[derive(Clone, Debug)]
pub struct Token {
    pub kind: Kind,
    pub line: u32,
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The tokens of `src`, each with its line.
pub fn lex(src: &str) -> Vec<Token> {
    let mut l = Lexer {
        c: src.chars().collect(),
        i: 0,
        line: 1,
        out: Vec::new(),
    };
    while l.i < l.c.len() {
        let ch = l.c[l.i];
        if ch == '\n' {
            l.line += 1;
            l.i += 1;
        } else if ch.is_whitespace() {
            l.i += 1;
        } else if ch == '/' && l.at(1) == '/' {
            while l.i < l.c.len() && l.c[l.i] != '\n' {
                l.i += 1;
            }
        } else if ch == '/' && l.at(1) == '*' {
            l.block_comment();
        } else if ch == '"' {
            l.quoted('"');
        } else if ch == '\'' {
            // a char literal ('x', '\n', '\u{..}'), else a lifetime or label
            if l.at(1) == '\\' {
                l.quoted('\'');
            } else if l.at(2) == '\'' {
                l.i += 3;
                l.push(Kind::Literal);
            } else {
                l.i += 1;
            }
        } else if is_ident(ch) && !ch.is_ascii_digit() {
            l.word();
        } else if ch.is_ascii_digit() {
            l.take_while(is_ident);
            l.push(Kind::Literal);
        } else if ch == ':' && l.at(1) == ':' {
            l.i += 2;
            l.push(Kind::Sep);
        } else {
            l.i += 1;
            l.push(Kind::Punct(ch));
        }
    }
    l.out
}

struct Lexer {
    c: Vec<char>,
    i: usize,
    line: u32,
    out: Vec<Token>,
}

impl Lexer {
    fn at(&self, ahead: usize) -> char {
        self.c.get(self.i + ahead).copied().unwrap_or('\0')
    }

    fn push(&mut self, kind: Kind) {
        self.out.push(Token {
            kind,
            line: self.line,
        });
    }

    fn take_while(&mut self, f: impl Fn(char) -> bool) -> String {
        let start = self.i;
        while self.i < self.c.len() && f(self.c[self.i]) {
            self.i += 1;
        }
        self.c[start..self.i].iter().collect()
    }

    /// A literal quoted by `q` whose opening quote is here.
    fn quoted(&mut self, q: char) {
        self.i += 1;
        while self.i < self.c.len() && self.c[self.i] != q {
            if self.c[self.i] == '\\' {
                self.i += 1;
            }
            self.line += u32::from(self.at(0) == '\n');
            self.i += 1;
        }
        self.i += 1;
        self.push(Kind::Literal);
    }

    /// A (nested) block comment starting here.
    fn block_comment(&mut self) {
        let mut depth = 0;
        while self.i < self.c.len() {
            if self.at(0) == '/' && self.at(1) == '*' {
                depth += 1;
                self.i += 2;
            } else if self.at(0) == '*' && self.at(1) == '/' {
                depth -= 1;
                self.i += 2;
                if depth == 0 {
                    return;
                }
            } else {
                self.line += u32::from(self.at(0) == '\n');
                self.i += 1;
            }
        }
    }

    /// An identifier or keyword, or a prefixed literal (`r#"…"#`, `b"…"`, `b'x'`), or a raw
    /// identifier (`r#type`).
    fn word(&mut self) {
        let word = self.take_while(is_ident);
        let raw = matches!(word.as_str(), "r" | "br" | "cr");
        if raw && (self.at(0) == '"' || self.at(0) == '#') {
            let hashes = self.c[self.i..].iter().take_while(|c| **c == '#').count();
            if self.at(hashes) == '"' {
                self.i += hashes + 1;
                let closes = |l: &Self| l.at(0) == '"' && (1..=hashes).all(|k| l.at(k) == '#');
                while self.i < self.c.len() && !closes(self) {
                    self.line += u32::from(self.at(0) == '\n');
                    self.i += 1;
                }
                self.i += 1 + hashes;
                self.push(Kind::Literal);
                return;
            }
            if word == "r" && hashes == 1 {
                self.i += 1;
                let name = self.take_while(is_ident);
                self.push(Kind::Ident(name));
                return;
            }
        }
        if matches!(word.as_str(), "b" | "c") && self.at(0) == '"' {
            self.quoted('"');
        } else if word == "b" && self.at(0) == '\'' {
            self.quoted('\'');
        } else {
            self.push(Kind::Ident(word));
        }
    }
}

/// One `use` leaf: `use a::b::{c as d, e::*}` gives `a::b::c` named `d` and the glob `a::b::e`.
#[derive(Clone, Debug)]
pub struct UseLeaf {
    pub segs: Vec<String>,
    pub name: Option<String>,
    pub glob: bool,
    pub line: u32,
}

#[derive(Debug, Default)]
pub struct ScopeFacts {
    /// The inline module path inside the file (empty: the file's own module).
    pub inline: Vec<String>,
    /// Child modules declared here: name, and whether they live in their own file.
    pub mods: Vec<(String, bool)>,
    pub uses: Vec<UseLeaf>,
    /// Qualified paths in code: the segments that name a module or a type, the line, and the
    /// path as written.
    pub paths: Vec<(Vec<String>, u32, String)>,
}

fn ident(t: Option<&Token>) -> Option<&str> {
    match t.map(|t| &t.kind) {
        Some(Kind::Ident(s)) => Some(s),
        _ => None,
    }
}

fn is(t: Option<&Token>, k: &Kind) -> bool {
    t.is_some_and(|t| &t.kind == k)
}

pub fn file_facts(toks: &[Token]) -> Vec<ScopeFacts> {
    let mut scopes = vec![ScopeFacts::default()];
    // (scope index, brace depth outside its `{`)
    let mut stack = vec![(0usize, 0usize)];
    let (mut depth, mut i) = (0usize, 0usize);
    while i < toks.len() {
        let cur = stack.last().map_or(0, |s| s.0);
        let word = ident(toks.get(i));
        match &toks[i].kind {
            Kind::Punct('{') => depth += 1,
            Kind::Punct('}') => {
                depth = depth.saturating_sub(1);
                if stack.len() > 1 && stack.last().is_some_and(|s| s.1 == depth) {
                    stack.pop();
                }
            }
            _ if word == Some("mod") => {
                if let Some(name) = ident(toks.get(i + 1)) {
                    let name = name.to_string();
                    if is(toks.get(i + 2), &Kind::Punct(';')) {
                        scopes[cur].mods.push((name, true));
                        i += 3;
                        continue;
                    }
                    if is(toks.get(i + 2), &Kind::Punct('{')) {
                        let mut inline = scopes[cur].inline.clone();
                        inline.push(name.clone());
                        scopes[cur].mods.push((name, false));
                        scopes.push(ScopeFacts {
                            inline,
                            ..ScopeFacts::default()
                        });
                        stack.push((scopes.len() - 1, depth));
                        depth += 1;
                        i += 3;
                        continue;
                    }
                }
            }
            // `use<'a>` is a precise-capturing bound, not an import
            _ if word == Some("use") && !is(toks.get(i + 1), &Kind::Punct('<')) => {
                let line = toks[i].line;
                i += 1;
                use_tree(toks, &mut i, Vec::new(), line, &mut scopes[cur].uses);
                while i < toks.len() && !is(toks.get(i), &Kind::Punct(';')) {
                    i += 1;
                }
                continue;
            }
            Kind::Ident(first)
                if first != "Self"
                    && is(toks.get(i + 1), &Kind::Sep)
                    && ident(toks.get(i + 2)).is_some()
                    && !is(i.checked_sub(1).and_then(|p| toks.get(p)), &Kind::Sep)
                    && !is(
                        i.checked_sub(1).and_then(|p| toks.get(p)),
                        &Kind::Punct('$'),
                    ) =>
            {
                let mut segs = vec![first.clone()];
                let mut j = i + 1;
                while is(toks.get(j), &Kind::Sep) {
                    match ident(toks.get(j + 1)) {
                        Some(s) => segs.push(s.to_string()),
                        None => break,
                    }
                    j += 2;
                }
                // `a::f(…)`, `a::m!(…)`: the last segment is a function or macro (the value
                // namespace), so a module of the same name (`engine::estimate`) is not meant
                let written = segs.join("::");
                if is(toks.get(j), &Kind::Punct('(')) || is(toks.get(j), &Kind::Punct('!')) {
                    segs.pop();
                }
                scopes[cur].paths.push((segs, toks[i].line, written));
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    scopes
}

/// Reads one use tree at `*i` (after `use` or inside `{…}`) under `prefix`.
fn use_tree(toks: &[Token], i: &mut usize, prefix: Vec<String>, line: u32, out: &mut Vec<UseLeaf>) {
    let mut segs = prefix;
    let in_group = !segs.is_empty();
    if is(toks.get(*i), &Kind::Sep) {
        *i += 1;
    }
    loop {
        match toks.get(*i).map(|t| &t.kind) {
            Some(Kind::Ident(s)) => {
                let group_self = s == "self" && in_group && !is(toks.get(*i + 1), &Kind::Sep);
                if !group_self {
                    segs.push(s.clone());
                }
                *i += 1;
                if is(toks.get(*i), &Kind::Sep) {
                    *i += 1;
                    continue;
                }
                let mut name = segs.last().cloned();
                if ident(toks.get(*i)) == Some("as") {
                    name = ident(toks.get(*i + 1))
                        .filter(|n| *n != "_")
                        .map(str::to_string);
                    *i += 2;
                }
                out.push(UseLeaf {
                    segs,
                    name,
                    glob: false,
                    line,
                });
                return;
            }
            Some(Kind::Punct('*')) => {
                *i += 1;
                out.push(UseLeaf {
                    segs,
                    name: None,
                    glob: true,
                    line,
                });
                return;
            }
            Some(Kind::Punct('{')) => {
                *i += 1;
                while *i < toks.len() && !is(toks.get(*i), &Kind::Punct('}')) {
                    let before = *i;
                    use_tree(toks, i, segs.clone(), line, out);
                    if is(toks.get(*i), &Kind::Punct(',')) || *i == before {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            _ => return,
        }
    }
}
