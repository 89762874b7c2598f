//! CSV as data: a report's JSON records (one per system, point or case) flattened to columns
//! named by their JSON keys (`power.total_w`, array items by index: `phases.0.time_s`), so that a
//! CSV carries the same numbers, in the same SI units under the same unit-suffixed names, as
//! `--format json` — never the display strings of the table.

use serde::Serialize;
use serde_json::Value;

/// Flatten `v` into `(column, cell)` pairs: numbers as JSON writes them, strings as they are,
/// booleans as `true`/`false`, null as an empty cell.
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                flatten(&key(k), x, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                flatten(&key(&i.to_string()), x, out);
            }
        }
        Value::Null => out.push((prefix.to_string(), String::new())),
        Value::Bool(b) => out.push((prefix.to_string(), b.to_string())),
        Value::Number(n) => out.push((prefix.to_string(), n.to_string())),
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
    }
}

/// The records as CSV: one row each, one column per key any record has (in the order first
/// met), an empty cell where a record lacks it. A record that is not an object is one column,
/// `value`.
pub fn csv_of<T: Serialize>(records: &[T]) -> String {
    let mut columns: Vec<String> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut rows = Vec::new();
    for r in records {
        let v = serde_json::to_value(r).unwrap_or(Value::Null);
        let mut cells = Vec::new();
        flatten(if v.is_object() { "" } else { "value" }, &v, &mut cells);
        for (k, _) in &cells {
            index.entry(k.clone()).or_insert_with(|| {
                columns.push(k.clone());
                columns.len() - 1
            });
        }
        rows.push(cells);
    }
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|cells| {
            let mut row = vec![String::new(); columns.len()];
            for (k, c) in cells {
                row[index[&k]] = c;
            }
            row
        })
        .collect();
    super::csv(&columns, &rows)
}

/// A record with leading columns (e.g. the `system` a series' point belongs to), for
/// [`csv_of`].
pub fn led<T: Serialize>(lead: &[(&str, &str)], record: &T) -> Value {
    let mut m = serde_json::Map::new();
    for (k, v) in lead {
        m.insert((*k).to_string(), Value::String((*v).to_string()));
    }
    match serde_json::to_value(record).unwrap_or(Value::Null) {
        Value::Object(o) => {
            for (k, v) in o {
                m.entry(k).or_insert(v);
            }
        }
        other => {
            m.insert("value".into(), other);
        }
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattens_nested_keys_and_fills_gaps() {
        let a = serde_json::json!({"name": "a, b", "power": {"total_w": 1500.0}, "x": [1, 2]});
        let b = serde_json::json!({"name": "c", "y_s": null, "ok": true});
        let text = csv_of(&[a, b]);
        assert_eq!(
            text,
            "name,power.total_w,x.0,x.1,ok,y_s\n\"a, b\",1500.0,1,2,,\nc,,,,true,\n"
        );
    }
}
