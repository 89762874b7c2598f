//! Reports as data, and renderers that write them as tables, JSON, CSV or Markdown to any writer.

pub mod placement;
pub mod roofline;
pub mod system;

use tabled::settings::Style;

/// A two-column (quantity, value) table.
pub fn kv_table(rows: &[(String, String)]) -> String {
    let mut b = tabled::builder::Builder::default();
    b.push_record(["quantity", "value"]);
    for (k, v) in rows {
        b.push_record([k.as_str(), v.as_str()]);
    }
    b.build().with(Style::sharp()).to_string()
}

/// A table with a header row.
pub fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut b = tabled::builder::Builder::default();
    b.push_record(header.iter().cloned());
    for r in rows {
        b.push_record(r.iter().cloned());
    }
    b.build().with(Style::sharp()).to_string()
}

/// A GitHub-flavoured Markdown table.
pub fn markdown_table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut b = tabled::builder::Builder::default();
    b.push_record(header.iter().cloned());
    for r in rows {
        b.push_record(r.iter().cloned());
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
