//! One renderer for every command's `--format table|json|csv|markdown`: a command fills a
//! [`Rendered`] once (its JSON value, its CSV, and the text blocks a table or Markdown shows) and
//! [`Rendered::write`] writes it in the chosen format to any writer.
//!
//! A command keeps only what is its own: its columns, its lines of text and its JSON value. What
//! the formats share is here: JSON pretty-printed, CSV flattened from the JSON records (or from
//! cells), tables box-drawn for a terminal or GitHub-flavoured for Markdown, footnotes numbered
//! under a table, every block ended by a newline.

use serde::Serialize;
use std::io::Write;

/// The output formats a command writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Csv,
    Markdown,
}

/// A value to write as data: any `Serialize`, as `--format json` writes it and as CSV records.
pub trait Data {
    /// Pretty-printed JSON, written to `out`.
    fn json(&self, out: &mut dyn Write) -> std::io::Result<()>;
    /// CSV of its records ([`super::records::csv_of`]): a list's items, one row each; any other
    /// value is one record.
    fn csv(&self) -> String;
}

impl<T: Serialize> Data for T {
    fn json(&self, out: &mut dyn Write) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, self)?;
        Ok(())
    }

    fn csv(&self) -> String {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Array(items)) => super::records::csv_of(&items),
            _ => super::records::csv_of(std::slice::from_ref(self)),
        }
    }
}

/// A table as cells: a header row, the rows, and footnotes numbered from 1 (`[1]` in a cell).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Shown under the table: `[i] note` in a terminal, a numbered list in Markdown.
    pub notes: Vec<String>,
    /// Fit the terminal table and its footnotes within this many characters (cells wrapped
    /// between words, the widest columns first); `None`: as wide as its cells.
    pub width: Option<usize>,
}

impl Table {
    /// A table of `header` and `rows`, without footnotes or a width.
    pub fn new(header: Vec<String>, rows: Vec<Vec<String>>) -> Table {
        Table {
            header,
            rows,
            ..Table::default()
        }
    }

    /// A table whose header is given as text.
    pub fn of(header: &[&str], rows: Vec<Vec<String>>) -> Table {
        Table::new(header.iter().map(|h| h.to_string()).collect(), rows)
    }

    /// A two-column (quantity, value) table.
    pub fn kv(rows: Vec<(String, String)>) -> Table {
        Table::of(
            &["quantity", "value"],
            rows.into_iter().map(|(k, v)| vec![k, v]).collect(),
        )
    }

    /// The box-drawn table, then its footnotes (each wrapped to the width, if there is one).
    pub fn text(&self) -> String {
        let mut out = match self.width {
            Some(w) => super::table_within(&self.header, &self.rows, w),
            None => super::table(&self.header, &self.rows),
        };
        for (i, n) in self.notes.iter().enumerate() {
            let mark = format!("[{}] ", i + 1);
            out.push('\n');
            match self.width {
                Some(w) => out.push_str(&super::wrap_text(&format!("{mark}{n}"), w, mark.len())),
                None => out.push_str(&format!("{mark}{n}")),
            }
        }
        out
    }

    /// The table in Markdown, its footnotes as a numbered list under it.
    pub fn markdown(&self) -> String {
        let mut out = super::markdown_table(&self.header, &self.rows);
        if !self.notes.is_empty() {
            out.push('\n');
        }
        for (i, n) in self.notes.iter().enumerate() {
            out.push_str(&format!("\n{}. {n}", i + 1));
        }
        out
    }
}

impl From<(Vec<String>, Vec<Vec<String>>)> for Table {
    /// A table of a header and rows.
    fn from((header, rows): (Vec<String>, Vec<Vec<String>>)) -> Table {
        Table::new(header, rows)
    }
}

/// One piece of what a table or Markdown shows; each is written followed by a newline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Block {
    /// Text as it is (an empty one is a blank line).
    Text(String),
    /// A table: box-drawn in a terminal, GitHub-flavoured in Markdown.
    Table(Table),
}

/// What `--format csv` writes.
pub enum Csv<'a> {
    /// The records of a value ([`Data::csv`]): the JSON's numbers under its keys.
    Records(&'a dyn Data),
    /// A table of cells.
    Table(Table),
    /// Text as the command made it.
    Text(String),
    /// What `--format table` shows (a command that has no CSV of its own).
    AsTable,
}

/// In which of the two text formats a block shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shown {
    Both,
    Table,
    Markdown,
}

/// What one command writes, in every format: filled once, written by [`Rendered::write`].
pub struct Rendered<'a> {
    json: &'a dyn Data,
    csv: Csv<'a>,
    blocks: Vec<(Shown, Block)>,
}

impl<'a> Rendered<'a> {
    /// A report whose JSON is `json` and whose CSV is `csv`, with no text blocks yet.
    pub fn new(json: &'a dyn Data, csv: Csv<'a>) -> Rendered<'a> {
        Rendered {
            json,
            csv,
            blocks: Vec::new(),
        }
    }

    /// A line (or lines) of text, in a table and in Markdown.
    pub fn text(&mut self, s: impl Into<String>) -> &mut Self {
        self.push(Shown::Both, Block::Text(s.into()))
    }

    /// A table, in a table and in Markdown.
    pub fn table(&mut self, t: Table) -> &mut Self {
        self.push(Shown::Both, Block::Table(t))
    }

    /// A block only `--format table` shows.
    pub fn terminal(&mut self, b: Block) -> &mut Self {
        self.push(Shown::Table, b)
    }

    /// A block only `--format markdown` shows.
    pub fn markdown(&mut self, b: Block) -> &mut Self {
        self.push(Shown::Markdown, b)
    }

    fn push(&mut self, shown: Shown, b: Block) -> &mut Self {
        self.blocks.push((shown, b));
        self
    }

    /// Write the report in `format` to `out`.
    pub fn write(&self, format: Format, out: &mut dyn Write) -> std::io::Result<()> {
        match (format, &self.csv) {
            (Format::Json, _) => {
                self.json.json(out)?;
                writeln!(out)
            }
            (Format::Csv, Csv::Records(d)) => write!(out, "{}", d.csv()),
            (Format::Csv, Csv::Table(t)) => write!(out, "{}", super::csv(&t.header, &t.rows)),
            (Format::Csv, Csv::Text(s)) => write!(out, "{s}"),
            (Format::Csv, Csv::AsTable) | (Format::Table, _) => self.blocks(Shown::Table, out),
            (Format::Markdown, _) => self.blocks(Shown::Markdown, out),
        }
    }

    /// The blocks `form` shows, each followed by a newline.
    fn blocks(&self, form: Shown, out: &mut dyn Write) -> std::io::Result<()> {
        for (shown, b) in &self.blocks {
            if *shown != Shown::Both && *shown != form {
                continue;
            }
            match (b, form) {
                (Block::Text(s), _) => writeln!(out, "{s}")?,
                (Block::Table(t), Shown::Markdown) => writeln!(out, "{}", t.markdown())?,
                (Block::Table(t), _) => writeln!(out, "{}", t.text())?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        name: &'static str,
        power: Power,
    }

    #[derive(Serialize)]
    struct Power {
        total_w: f64,
    }

    fn sample(rows: &[Row; 2]) -> Rendered<'_> {
        let cells = rows
            .iter()
            .map(|r| vec![r.name.to_string(), format!("{} W", r.power.total_w)])
            .collect();
        let mut t = Table::of(&["name", "power"], cells);
        t.notes.push("at the wall".into());
        let mut r = Rendered::new(rows, Csv::Records(rows));
        r.text("two systems")
            .table(t)
            .terminal(Block::Text("terminal only".into()))
            .markdown(Block::Text("markdown only".into()));
        r
    }

    fn written(r: &Rendered, f: Format) -> String {
        let mut out = Vec::new();
        r.write(f, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    const ROWS: [Row; 2] = [
        Row {
            name: "a",
            power: Power { total_w: 1500.0 },
        },
        Row {
            name: "b, c",
            power: Power { total_w: 20.5 },
        },
    ];

    #[test]
    fn a_table_is_box_drawn_with_its_notes_and_its_own_lines() {
        let expected = "two systems
┌──────┬────────┐
│ name │ power  │
├──────┼────────┤
│ a    │ 1500 W │
│ b, c │ 20.5 W │
└──────┴────────┘
[1] at the wall
terminal only
";
        assert_eq!(written(&sample(&ROWS), Format::Table), expected);
    }

    #[test]
    fn markdown_lists_the_notes_and_keeps_its_own_lines() {
        let expected = "two systems
| name | power  |
|------|--------|
| a    | 1500 W |
| b, c | 20.5 W |

1. at the wall
markdown only
";
        assert_eq!(written(&sample(&ROWS), Format::Markdown), expected);
    }

    #[test]
    fn csv_flattens_the_records_and_json_is_pretty() {
        let r = sample(&ROWS);
        assert_eq!(
            written(&r, Format::Csv),
            "name,power.total_w\na,1500.0\n\"b, c\",20.5\n"
        );
        let json = "[
  {
    \"name\": \"a\",
    \"power\": {
      \"total_w\": 1500.0
    }
  },
  {
    \"name\": \"b, c\",
    \"power\": {
      \"total_w\": 20.5
    }
  }
]
";
        assert_eq!(written(&r, Format::Json), json);
    }

    #[test]
    fn csv_of_cells_of_text_or_of_the_table() {
        let value = serde_json::json!({"n": 1});
        let t = Table::of(&["k", "v"], vec![vec!["x".into(), "1,5".into()]]);
        let mut r = Rendered::new(&value, Csv::Table(t.clone()));
        r.table(t);
        assert_eq!(written(&r, Format::Csv), "k,v\nx,\"1,5\"\n");
        let one = Rendered::new(&value, Csv::Records(&value));
        assert_eq!(written(&one, Format::Csv), "n\n1\n");
        let text = Rendered::new(&value, Csv::Text("as made\n".into()));
        assert_eq!(written(&text, Format::Csv), "as made\n");
        let mut same = Rendered::new(&value, Csv::AsTable);
        same.text("line").markdown(Block::Text("not here".into()));
        assert_eq!(written(&same, Format::Csv), "line\n");
    }

    #[test]
    fn a_table_within_a_width_wraps_its_notes() {
        let mut t = Table::of(&["k"], vec![vec!["v".into()]]);
        t.notes.push("one two three four five".into());
        t.width = Some(14);
        assert_eq!(
            t.text(),
            "┌───┐\n│ k │\n├───┤\n│ v │\n└───┘\n[1] one two\n    three four\n    five"
        );
    }
}
