//! Reports as data, and renderers that write them as tables, JSON, CSV or Markdown to any writer.

pub mod catalogue;
pub mod html;
pub mod placement;
pub mod records;
pub mod render;
pub mod roofline;
pub mod system;

use tabled::settings::Style;

/// An amount of money as a table shows it (`$2.50M`).
pub use crate::units::fmt_usd as money;

/// Characters a table cell shows at most (names come from input files and may be of any length).
pub const CELL_MAX: usize = 200;

/// A cell as a table shows it: at most [`CELL_MAX`] characters, a longer one cut with an
/// ellipsis (display only: JSON and CSV keep the whole text).
pub fn cell(s: &str) -> String {
    if s.char_indices().nth(CELL_MAX).is_none() {
        return s.to_string();
    }
    let cut = s
        .char_indices()
        .nth(CELL_MAX - 1)
        .map_or(s.len(), |(i, _)| i);
    format!("{}…", &s[..cut])
}

/// A table with a header row.
pub fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut b = tabled::builder::Builder::default();
    b.push_record(header.iter().map(|c| cell(c)));
    for r in rows {
        b.push_record(r.iter().map(|c| cell(c)));
    }
    b.build().with(Style::sharp()).to_string()
}

/// A table with a header row, its cells wrapped (between words where they can be) so that no
/// line is wider than `width` characters: the widest columns give way first.
pub fn table_within(header: &[String], rows: &[Vec<String>], width: usize) -> String {
    use tabled::settings::{peaker::PriorityMax, Width};
    let mut b = tabled::builder::Builder::default();
    b.push_record(header.iter().map(|c| cell(c)));
    for r in rows {
        b.push_record(r.iter().map(|c| cell(c)));
    }
    b.build()
        .with(Style::sharp())
        .with(
            Width::wrap(width)
                .keep_words(true)
                .priority(PriorityMax::left()),
        )
        .to_string()
}

/// `text` wrapped between words to lines of at most `width` characters, every line after the
/// first indented by `indent` spaces (a word longer than a line is broken).
pub fn wrap_text(text: &str, width: usize, indent: usize) -> String {
    let width = width.max(indent + 8);
    let pad = " ".repeat(indent);
    let mut done: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut w = word;
        while !w.is_empty() {
            let used = line.chars().count();
            let fresh = line.trim().is_empty();
            if used + usize::from(!fresh) + w.chars().count() <= width {
                if !fresh {
                    line.push(' ');
                }
                line.push_str(w);
                break;
            }
            if fresh {
                // longer than a line: break it
                let cut = w
                    .char_indices()
                    .nth(width - used)
                    .map_or(w.len(), |(i, _)| i);
                line.push_str(&w[..cut]);
                w = &w[cut..];
            }
            done.push(std::mem::replace(&mut line, pad.clone()));
        }
    }
    if !line.trim().is_empty() || done.is_empty() {
        done.push(line);
    }
    done.join("\n")
}

/// A GitHub-flavoured Markdown table.
pub fn markdown_table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut b = tabled::builder::Builder::default();
    b.push_record(header.iter().map(|c| cell(c)));
    for r in rows {
        b.push_record(r.iter().map(|c| cell(c)));
    }
    b.build().with(Style::markdown()).to_string()
}

/// CSV with minimal quoting.
pub fn csv(header: &[String], rows: &[Vec<String>]) -> String {
    fn q(s: &str) -> String {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    }
    let mut out = header.iter().map(|h| q(h)).collect::<Vec<_>>().join(",");
    out.push('\n');
    for r in rows {
        out.push_str(&r.iter().map(|c| q(c)).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}
pub mod compare;

#[cfg(test)]
mod tests {
    #[test]
    fn money_reads_at_every_scale() {
        assert_eq!(super::money(2.5e6), "$2.50M");
        assert_eq!(super::money(30e3), "$30.0k");
        assert_eq!(super::money(12.345), "$12.35");
        assert_eq!(super::money(0.01234), "$0.0123");
        assert_eq!(super::money(0.0), "$0.00");
    }

    use super::wrap_text;

    #[test]
    fn wrap_text_keeps_words_and_indents() {
        let t = wrap_text("[1] one two three four five six", 14, 4);
        assert_eq!(t, "[1] one two\n    three four\n    five six");
        assert!(wrap_text("abcdefghijklmnopqrstuvwxyz", 12, 2)
            .lines()
            .all(|l| l.chars().count() <= 12));
        assert_eq!(wrap_text("short", 100, 2), "short");
    }

    #[test]
    fn long_cells_are_cut_with_an_ellipsis() {
        use super::{cell, CELL_MAX};
        let exact = "é".repeat(CELL_MAX);
        assert_eq!(cell(&exact), exact);
        let long = "é".repeat(CELL_MAX + 1);
        let c = cell(&long);
        assert_eq!(c.chars().count(), CELL_MAX);
        assert!(c.ends_with("é…"));
        let t = super::table(&["name".into()], &[vec!["x".repeat(50_000)]]);
        // the cell and its borders: no line wider than the cut cell and its two borders
        assert!(t.lines().all(|l| l.chars().count() <= CELL_MAX + 4), "{t}");
    }
}
