//! The parts every HTML report is built from: escaping, the page's head with its inline style,
//! sections, tables whose number cells carry the exact value they show, figures that inline an
//! SVG picture (ids made unique per picture) and the report's data as embedded JSON. A leaf, so
//! that each report (`compare`, `validate`) uses it without importing `html/mod.rs`.
//!
//! Nothing here fetches anything: no external stylesheet, script, font or image, so the file
//! reads the same offline, attached to a mail or opened years later.

use std::fmt::Write as _;

/// Escape text for element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {}
            c => o.push(c),
        }
    }
    o
}

/// The inline style: readable type, tables with rules, numbers right-aligned in tabular figures,
/// pictures as wide as the page allows. Prints in black and white.
const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif;\
margin:2rem auto;max-width:72rem;padding:0 1rem;color:#1a1a1a;line-height:1.45}\
h1{font-size:1.5rem;margin-bottom:.25rem}h2{font-size:1.2rem;margin-top:2rem;\
border-bottom:1px solid #ccc;padding-bottom:.2rem}h3{font-size:1rem;margin-bottom:.3rem}\
p.meta,p.note{color:#555;font-size:.9rem}ul.facts{padding-left:1.2rem}\
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.88rem}\
th,td{border-bottom:1px solid #ddd;padding:.3rem .55rem;text-align:left;vertical-align:top}\
th{background:#f3f3f3;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums;\
white-space:nowrap}tr.infeasible td{color:#8a0000}tr.outside td.err{color:#b00000;font-weight:600}\
.scroll{overflow-x:auto}figure{margin:1rem 0}figure svg{max-width:100%;height:auto;\
border:1px solid #eee}figcaption{color:#555;font-size:.9rem}\
@media print{body{margin:0;max-width:none}.scroll{overflow:visible}}";

/// A picture for a report: the SVG as the plotting code wrote it and its caption.
pub struct Picture {
    pub svg: String,
    pub caption: String,
}

/// A report page being built.
pub struct Page {
    buf: String,
    pictures: usize,
}

/// One column of a table: its heading and, for columns of numbers, the JSON key its cells
/// hold (written as `data-key`).
pub struct Column {
    pub heading: String,
    pub key: Option<String>,
}

impl Column {
    pub fn text(heading: &str) -> Column {
        Column {
            heading: heading.to_string(),
            key: None,
        }
    }
    pub fn num(heading: &str, key: &str) -> Column {
        Column {
            heading: heading.to_string(),
            key: Some(key.to_string()),
        }
    }
}

/// One cell: text, or a number shown as `shown` with its exact value kept in `data-value`.
pub enum Cell {
    Text(String),
    Num(Option<f64>, String),
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }
    /// `v` shown with an SI prefix and `unit` (— where absent).
    pub fn si(v: Option<f64>, unit: &str) -> Cell {
        let shown = v.map_or("—".to_string(), |x| {
            crate::units::fmt_si(x, unit).trim().to_string()
        });
        Cell::Num(v, shown)
    }
    /// `v` as a percentage with one decimal.
    pub fn pct(v: Option<f64>) -> Cell {
        Cell::Num(v, v.map_or("—".into(), |x| format!("{:.1} %", x * 100.0)))
    }
    /// `v` with `digits` decimals and a suffix (`×`).
    pub fn fixed(v: Option<f64>, digits: usize, suffix: &str) -> Cell {
        Cell::Num(v, v.map_or("—".into(), |x| format!("{x:.digits$}{suffix}")))
    }
}

impl Page {
    /// Start a page: the document head with `title` and the inline style, the heading and a
    /// line under it (`meta`).
    pub fn new(title: &str, meta: &str) -> Page {
        let mut buf = String::new();
        let _ = write!(
            buf,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <meta name=\"generator\" content=\"tessera {}\">\n<title>{}</title>\n\
             <style>{STYLE}</style>\n</head>\n<body>\n<header>\n<h1>{}</h1>\n<p class=\"meta\">{}</p>\n</header>\n",
            env!("CARGO_PKG_VERSION"),
            esc(title),
            esc(title),
            esc(meta)
        );
        Page { buf, pictures: 0 }
    }

    pub fn open_section(&mut self, id: &str, heading: &str) {
        let _ = writeln!(
            self.buf,
            "<section id=\"{}\">\n<h2>{}</h2>",
            esc(id),
            esc(heading)
        );
    }

    pub fn close_section(&mut self) {
        self.buf.push_str("</section>\n");
    }

    pub fn h3(&mut self, s: &str) {
        let _ = writeln!(self.buf, "<h3>{}</h3>", esc(s));
    }

    /// A paragraph of `class` (`note`, `meta` or none).
    pub fn para(&mut self, class: &str, s: &str) {
        if class.is_empty() {
            let _ = writeln!(self.buf, "<p>{}</p>", esc(s));
        } else {
            let _ = writeln!(self.buf, "<p class=\"{}\">{}</p>", esc(class), esc(s));
        }
    }

    /// A list of short facts.
    pub fn facts(&mut self, items: &[String]) {
        if items.is_empty() {
            return;
        }
        self.buf.push_str("<ul class=\"facts\">\n");
        for i in items {
            let _ = writeln!(self.buf, "<li>{}</li>", esc(i));
        }
        self.buf.push_str("</ul>\n");
    }

    /// A table of `class`; each row is (its class, its `data-name`, its cells).
    pub fn table(&mut self, class: &str, cols: &[Column], rows: &[(String, String, Vec<Cell>)]) {
        let _ = writeln!(
            self.buf,
            "<div class=\"scroll\"><table class=\"{}\">\n<thead><tr>",
            esc(class)
        );
        for c in cols {
            match &c.key {
                Some(k) => {
                    let _ = write!(
                        self.buf,
                        "<th data-key=\"{}\">{}</th>",
                        esc(k),
                        esc(&c.heading)
                    );
                }
                None => {
                    let _ = write!(self.buf, "<th>{}</th>", esc(&c.heading));
                }
            }
        }
        self.buf.push_str("</tr></thead>\n<tbody>\n");
        for (class, name, cells) in rows {
            let _ = write!(
                self.buf,
                "<tr class=\"{}\" data-name=\"{}\">",
                esc(class),
                esc(name)
            );
            for (c, col) in cells.iter().zip(cols) {
                match c {
                    Cell::Text(s) => {
                        let _ = write!(self.buf, "<td>{}</td>", esc(s));
                    }
                    Cell::Num(v, shown) => {
                        let key = col.key.as_deref().unwrap_or("");
                        let err = if key.ends_with("error") { " err" } else { "" };
                        let value = v.map_or("null".to_string(), |x| format!("{x:?}"));
                        let _ = write!(
                            self.buf,
                            "<td class=\"num{err}\" data-key=\"{}\" data-value=\"{}\">{}</td>",
                            esc(key),
                            esc(&value),
                            esc(shown)
                        );
                    }
                }
            }
            self.buf.push_str("</tr>\n");
        }
        self.buf.push_str("</tbody>\n</table></div>\n");
    }

    /// A picture inline with its caption. The SVG is the plotting code's own (its text already
    /// escaped); its namespace attribute is dropped (HTML needs none, and the page then names
    /// no URL at all) and its ids are prefixed so that two pictures' patterns and clips cannot
    /// take each other's.
    pub fn figure(&mut self, svg: &str, caption: &str) {
        self.pictures += 1;
        let p = format!("fig{}-", self.pictures);
        let svg = svg
            .replace(" xmlns=\"http://www.w3.org/2000/svg\"", "")
            .replace(" id=\"", &format!(" id=\"{p}"))
            .replace("url(#", &format!("url(#{p}"))
            .replace("href=\"#", &format!("href=\"#{p}"));
        let _ = writeln!(
            self.buf,
            "<figure>\n{}<figcaption>{}</figcaption>\n</figure>",
            svg.trim_start_matches("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"),
            esc(caption)
        );
    }

    /// The report's data as the CLI's `--format json` writes it, for a reader's scripts: a
    /// `<script type="application/json">` the browser does not run, with `<`, `>` and `&` as
    /// JSON escapes so no text in it can close the element.
    pub fn data(&mut self, json: &str) {
        let safe = json
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026");
        let _ = writeln!(
            self.buf,
            "<script type=\"application/json\" id=\"tessera-data\">{safe}</script>"
        );
    }

    /// Close the document.
    pub fn finish(mut self) -> String {
        self.buf.push_str("</body>\n</html>\n");
        self.buf
    }
}

/// `v` as compact JSON, as the CLI's `--format json` holds it; where it cannot be written (a
/// map with keys that are not text: none of the reports has one) the error, as JSON.
pub fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v)
        .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_everywhere() {
        let mut p = Page::new("<b>&\"'", "m<");
        p.para("note", "</p><script>x</script>");
        p.table(
            "t",
            &[Column::text("a<"), Column::num("n", "k\"")],
            &[(
                "r".into(),
                "<n>".into(),
                vec![Cell::text("<i>"), Cell::si(Some(1.5e3), "W")],
            )],
        );
        p.data(r#"{"s": "</script><script>alert(1)</script>"}"#);
        let html = p.finish();
        assert!(!html.contains("<b>"), "{html}");
        assert!(!html.contains("<i>"));
        assert!(!html.contains("<script>"));
        assert_eq!(html.matches("</script>").count(), 1, "only the data's own");
        assert!(html.contains("&lt;b&gt;&amp;&quot;&#39;"));
        // the exact value beside what is shown
        assert!(
            html.contains(r#"data-value="1500.0">1.50 kW</td>"#),
            "{html}"
        );
    }

    #[test]
    fn pictures_get_their_own_ids() {
        let svg = r##"<svg xmlns="http://www.w3.org/2000/svg"><defs><pattern id="hatch-0"/></defs><rect fill="url(#hatch-0)"/></svg>"##;
        let mut p = Page::new("t", "m");
        p.figure(svg, "one");
        p.figure(svg, "two");
        let html = p.finish();
        assert!(html.contains(r#"id="fig1-hatch-0""#) && html.contains("url(#fig1-hatch-0)"));
        assert!(html.contains(r#"id="fig2-hatch-0""#) && html.contains("url(#fig2-hatch-0)"));
        assert!(!html.contains("http"), "no URL left: {html}");
    }
}
