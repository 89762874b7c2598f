//! Describing RON errors for authors: the message and hint for each parser error, and the offset
//! that best shows it (the token itself, the unclosed opener, the string that lost its quote).

use super::format::FORMAT_VERSION;
use crate::diag::{
    did_you_mean, innermost_unclosed, opening_of, pos_of_offset, skip_trivia, token_before,
    unclosed_comment,
};

/// Message, hint and the best offset to point at for a RON error the parser reported at `off`.
pub(super) fn describe_at(
    text: &str,
    off: usize,
    code: &ron::Error,
) -> (usize, String, Option<String>) {
    use ron::Error as E;
    let (message, hint) = describe(code);
    // The parser reports where it was before the offending token: step over blanks and comments
    // so the caret lands on the token itself.
    let next = skip_trivia(text, off);
    match code {
        E::Eof => {
            let hint = match innermost_unclosed(text) {
                Some(o) => {
                    let p = pos_of_offset(text, o);
                    Some(format!(
                        "`{}` opened at line {}, column {} is not closed",
                        opener_text(text, o),
                        p.line,
                        p.col
                    ))
                }
                None => hint,
            };
            (text.trim_end().len(), message, hint)
        }
        E::ExpectedComma
        | E::ExpectedArrayEnd
        | E::ExpectedMapEnd
        | E::ExpectedStructLikeEnd
        | E::ExpectedOptionEnd => {
            match token_before(text, next) {
                // A string that runs over lines before the error most likely lost its closing
                // quote: the parser only noticed at the next quote.
                Some(t) if t.string && text[t.start..t.end].contains('\n') => {
                    let last = pos_of_offset(text, t.end);
                    (
                        t.start,
                        format!("the string that starts here runs on to line {}", last.line),
                        Some("is its closing `\"` missing?".into()),
                    )
                }
                // A value or field follows without a separator: point just after the value
                // the separator should follow.
                Some(t) if !t.open && starts_value(&text[next..]) => (t.end, message, hint),
                // Something else stands where the separator belongs: point at it.
                _ => match text[next..].chars().next() {
                    Some(c) if !starts_value(&text[next..]) => {
                        (next, format!("{message}, found `{c}`"), hint)
                    }
                    _ => (next, message, hint),
                },
            }
        }
        E::ExpectedMapColon => match token_before(text, next) {
            Some(t) if !t.string && !t.open && !t.close => {
                let field = &text[t.start..t.end];
                (
                    next,
                    format!("expected `:` after the field name `{field}`"),
                    Some(format!("write `{field}: value`")),
                )
            }
            _ => (next, message, hint),
        },
        E::UnclosedBlockComment => (unclosed_comment(text).unwrap_or(next), message, hint),
        // `name: value` where a map key belongs: the map was most likely not closed.
        E::ExpectedString if in_map_at(text, next) && field_name_at(text, next).is_some() => {
            let field = field_name_at(text, next).unwrap_or_default();
            let open = innermost_unclosed(&text[..next]).unwrap_or(0);
            let p = pos_of_offset(text, open);
            (
                next,
                format!("expected a map key in double quotes, found the field name `{field}`"),
                Some(format!(
                    "is the `}}` closing the map at line {}, column {} missing?",
                    p.line, p.col
                )),
            )
        }
        E::MissingStructField { .. } => match opening_of(text, next) {
            Some(o) => (o, message, hint),
            None => (next, message, hint),
        },
        E::IntegerOutOfBounds if off > 0 && text[..off].trim_end().ends_with('-') => (
            text[..off].trim_end().len() - 1,
            "a count cannot be negative".into(),
            Some("counts are whole numbers from 0 upwards".into()),
        ),
        E::ExpectedStringEnd => {
            // Point at the opening quote of the unterminated string.
            let quote = text[..next.min(text.len())].rfind('"').unwrap_or(next);
            (quote, message, hint)
        }
        E::ExpectedString
        | E::ExpectedInteger
        | E::ExpectedFloat
        | E::ExpectedBoolean
        | E::ExpectedIdentifier
        | E::ExpectedArray
        | E::ExpectedMap
        | E::ExpectedStructLike
        | E::ExpectedNamedStructLike(_) => {
            // Name a stray punctuation character the parser stopped at.
            let message = match text[next..].chars().next() {
                Some(c)
                    if c.is_ascii_punctuation() && !matches!(c, '"' | '-' | '+' | '.' | '_') =>
                {
                    format!("{message}, found `{c}`")
                }
                Some(c) if c.is_control() && !c.is_whitespace() => {
                    format!("{message}, found the control character U+{:04X}", c as u32)
                }
                _ => message,
            };
            (next, message, hint)
        }
        _ => (next.min(text.trim_end().len()), message, hint),
    }
}

/// Whether the innermost bracket open at `off` is a map's `{`.
fn in_map_at(text: &str, off: usize) -> bool {
    innermost_unclosed(&text[..off]).is_some_and(|o| text[o..].starts_with('{'))
}

/// The identifier at `off` when it is followed by `:` (a field), else `None`.
fn field_name_at(text: &str, off: usize) -> Option<String> {
    let rest = &text[off..];
    let ident: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if ident.is_empty() || ident.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    rest[ident.len()..]
        .trim_start()
        .starts_with(':')
        .then_some(ident)
}

/// Whether `rest` starts with something that begins a field or a value (so a missing separator,
/// not a stray character, is the likely mistake).
fn starts_value(rest: &str) -> bool {
    rest.starts_with(|c: char| {
        c.is_alphanumeric() || matches!(c, '"' | '(' | '[' | '{' | '_' | '-' | '+' | '.')
    })
}

/// The text of the opener at `o` (`System(`, `[`), for hints.
fn opener_text(text: &str, o: usize) -> String {
    let rest = &text[o..];
    let ident: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let bracket = rest[ident.len()..].chars().next().unwrap_or('(');
    format!("{ident}{bracket}")
}

fn list(xs: &[&str]) -> String {
    xs.iter()
        .map(|x| format!("`{x}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How an author knows the struct or enum that serde calls `rust` (the file-shaped type's name):
/// `scale_up` for `ScaleUpSpec`, `Device` for `DeviceRef`.
pub fn user_name(rust: &str) -> String {
    let known = match rust {
        "SystemSpec" | "System" => "System",
        "DeviceSpec" | "Device" | "DeviceRef" => "Device",
        "DieSpec" | "Die" | "DieRef" => "Die",
        "NodeSpec" | "Node" | "NodeRef" => "Node",
        "EngineSpec" => "compute engine",
        "MemorySpec" => "memory level",
        "LinkSpec" => "die_to_die",
        "HostSpec" => "host",
        "NicSpec" => "nics",
        "SwitchSpec" => "switches",
        "EfficiencySpec" => "efficiency",
        "ScaleUpTopology" => "scale_up topology",
        "ScaleOutTopology" => "scale_out topology",
        "MeshTopology" => "mesh topology",
        "EngineKind" => "engine kind",
        "MemoryKind" => "memory kind",
        "Attach" => "attach",
        "Counted" => "counted",
        _ => "",
    };
    if !known.is_empty() {
        return known.to_string();
    }
    // `WeightStoreSpec` → `weight_store`
    let base = rust.strip_suffix("Spec").unwrap_or(rust);
    if base.len() == rust.len() {
        return rust.to_string();
    }
    let mut out = String::new();
    for (i, c) in base.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}

fn within(outer: &Option<String>, word: &str) -> String {
    outer
        .as_deref()
        .map(|o| format!(" {word} `{}`", user_name(o)))
        .unwrap_or_default()
}

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

/// A file of one top-level kind given where another is expected (an architecture as
/// `--workload`, a workload as `--arch`): the message names both kinds, the hint the option or
/// command that takes the file.
fn wrong_file_kind(expected: &str, found: &str) -> Option<(String, Option<String>)> {
    let top = |k: &str| -> Option<&'static str> {
        Some(match k.strip_suffix("Spec").unwrap_or(k) {
            "System" => "System",
            "Workload" => "Workload",
            "Mapping" => "Mapping",
            "Software" => "Software",
            "Sweep" => "Sweep",
            "Case" => "Case",
            "Claim" => "Claim",
            _ => return None,
        })
    };
    let (want, have) = (top(expected)?, top(found)?);
    if want == have {
        return None;
    }
    let takes = |k: &str| match k {
        "System" => {
            "an architecture: give it as `--arch FILE` (or as a system of `tessera compare`)"
        }
        "Workload" => "a workload: give it as `--workload FILE`",
        "Mapping" => "a mapping: give it as `--mapping FILE`",
        "Software" => "a software stack: give it as `--software FILE`",
        "Sweep" => "a sweep: run it with `tessera sweep FILE`",
        _ => "a validation file: run it with `tessera validate FILE` (claims: `tessera audit`)",
    };
    Some((
        format!("expected a `{want}` file, found a `{have}`"),
        Some(format!(
            "this file holds {}; a `{want}(...)` file goes here (`tessera list` names the shipped ones)",
            takes(have)
        )),
    ))
}

fn describe(code: &ron::Error) -> (String, Option<String>) {
    use ron::Error as E;
    let s = |x: &str| Some(x.to_string());
    match code {
        E::NoSuchStructField {
            expected,
            found,
            outer,
        } => {
            let within = within(outer, "in");
            let hint = match did_you_mean(found, expected.iter().copied()) {
                Some(s) => format!("did you mean `{s}`? fields{within}: {}", list(expected)),
                None => format!("fields{within}: {}", list(expected)),
            };
            (format!("unknown field `{found}`{within}"), Some(hint))
        }
        E::MissingStructField { field, outer } => {
            let within = within(outer, "in");
            let hint = if *field == "version" {
                format!("add `version: {FORMAT_VERSION},` as the first field")
            } else {
                format!("add `{field}: ...` to this struct")
            };
            (format!("missing field `{field}`{within}"), Some(hint))
        }
        E::DuplicateStructField { field, outer } => {
            let within = within(outer, "in");
            (
                format!("field `{field}` appears twice{within}"),
                s("keep one"),
            )
        }
        E::NoSuchEnumVariant {
            expected,
            found,
            outer,
        } => {
            let close = did_you_mean(found, expected.iter().copied());
            if let Some(part) = outer.as_deref().filter(|o| o.ends_with("Ref")) {
                // `device: Node(...)`: a part of the wrong kind, inline or in a referenced file.
                let kind = user_name(part);
                if let Some(d) = wrong_file_kind(&kind, found) {
                    return d;
                }
                let hint = match close {
                    Some(s) if s != "Use" => format!("did you mean `{s}`?"),
                    _ => format!(
                        "this place takes a `{kind}(...)`, or `Use(\"file.ron\")` naming a file that holds one"
                    ),
                };
                return (
                    format!("expected a `{kind}` or `Use(\"file.ron\")`, found `{found}`"),
                    Some(hint),
                );
            }
            let within = within(outer, "for");
            let hint = match close {
                Some(s) => format!("did you mean `{s}`? choices: {}", list(expected)),
                None => format!("choices: {}", list(expected)),
            };
            (format!("unknown variant `{found}`{within}"), Some(hint))
        }
        E::ExpectedDifferentStructName { expected, found } => {
            if let Some(d) = wrong_file_kind(expected, found) {
                return d;
            }
            let name = user_name(expected);
            if matches!(name.as_str(), "System" | "Device" | "Die" | "Node") {
                (
                    format!("expected a `{name}`, found a `{found}`"),
                    Some(format!(
                        "this place takes a `{name}(...)` or `Use(\"file.ron\")` naming a `{name}` file"
                    )),
                )
            } else {
                (
                    format!("expected `{name}`, found a struct named `{found}`"),
                    s("write this struct without a name: `(...)`"),
                )
            }
        }
        E::InvalidValueForType { expected, found } => (
            format!(
                "expected {expected}, found {}",
                match found.as_str() {
                    "a sequence" => "a list",
                    f => f,
                }
            ),
            if expected.contains("quantity") {
                s("write quantities as strings with units, e.g. \"700 W\"")
            } else {
                None
            },
        ),
        E::IntegerOutOfBounds => (
            "integer out of range".into(),
            s("counts are whole numbers from 0 to 2^64-1 (2^32-1 for `devices`, `dies`, `cpus`)"),
        ),
        E::ExceededRecursionLimit => (
            "nesting is too deep".into(),
            s("tessera files nest at most 64 levels"),
        ),
        E::Eof => (
            "unexpected end of file".into(),
            s("a bracket or parenthesis is not closed"),
        ),
        E::TrailingCharacters => (
            "unexpected text after the end of the value".into(),
            s("a file holds exactly one top-level value; is there a `)` too many?"),
        ),
        E::ExpectedComma => (
            "expected `,`".into(),
            s("fields, list elements and map entries are separated by commas"),
        ),
        E::ExpectedArray => ("expected a list `[...]`".into(), None),
        E::ExpectedArrayEnd => (
            "expected `,` or `]`".into(),
            s("list elements are separated by commas"),
        ),
        E::ExpectedMap => (
            "expected a map `{...}`".into(),
            s("e.g. `{\"bf16\": \"989.4 TFLOP/s\"}`"),
        ),
        E::ExpectedMapColon => (
            "expected `:` after the map key".into(),
            s("write `\"key\": value`"),
        ),
        E::ExpectedMapEnd => (
            "expected `,` or `}`".into(),
            s("map entries are separated by commas"),
        ),
        E::ExpectedStructLike => ("expected `(`".into(), None),
        E::ExpectedNamedStructLike("") => ("expected `(`".into(), None),
        E::ExpectedNamedStructLike(n) => (format!("expected `{}(`", user_name(n)), None),
        E::ExpectedStructLikeEnd | E::ExpectedOptionEnd => (
            "expected `,` or `)`".into(),
            s("fields are separated by commas"),
        ),
        E::ExpectedBoolean => ("expected `true` or `false`".into(), None),
        E::ExpectedInteger => (
            "expected a whole number".into(),
            s("counts are written without quotes, e.g. `nodes: 18`"),
        ),
        E::ExpectedFloat => ("expected a number".into(), None),
        E::ExpectedString => (
            "expected a string in double quotes".into(),
            s("names, map keys and quantities are strings, e.g. \"700 W\""),
        ),
        E::ExpectedStringEnd => ("the string is not closed".into(), s("add the closing `\"`")),
        E::ExpectedIdentifier => (
            "expected a field name".into(),
            s("a field is written `name: value`"),
        ),
        E::UnexpectedChar(c) => (format!("unexpected character {c:?}"), None),
        E::UnclosedBlockComment => (
            "the block comment is not closed".into(),
            s("close it with `*/`"),
        ),
        E::ExpectedDifferentLength { expected, found } => {
            (format!("expected {expected}, found {found} elements"), None)
        }
        E::Message(m) => (m.clone(), None),
        other => (lower_first(&other.to_string()), None),
    }
}
