//! Checking any tessera file: find its kind from the top-level name, then load and lower it,
//! gathering every diagnostic.

use crate::diag::{Diagnostic, Pos};
use crate::spec::{decode, Files, Fs};

/// The kinds of file tessera reads, by their top-level struct name.
pub const KINDS: &[&str] = &["System", "Device", "Die", "Node", "Workload", "Mapping", "Case", "Sweep"];

/// The first identifier of the document (after comments and `#![enable(..)]` attributes).
pub fn kind_of(text: &str) -> Option<String> {
    let mut s = text;
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix("//") {
            s = rest.split_once('\n').map(|x| x.1).unwrap_or("");
        } else if let Some(rest) = s.strip_prefix("/*") {
            s = rest.split_once("*/").map(|x| x.1).unwrap_or("");
        } else if s.starts_with("#!") || s.starts_with("#[") {
            s = s.split_once(']').map(|x| x.1).unwrap_or("");
        } else {
            break;
        }
    }
    let ident: String = s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!ident.is_empty()).then_some(ident)
}

/// Check one file of any kind; returns the texts read and every diagnostic.
pub fn check_file(name: &str, fs: &dyn Fs) -> (Files, Vec<Diagnostic>) {
    let bytes = match fs.read(name) {
        Ok(b) => b,
        Err(e) => {
            return (
                Files::default(),
                vec![Diagnostic::error(name, None, format!("cannot read the file: {e}"))],
            )
        }
    };
    let text = match decode(name, bytes) {
        Ok(t) => t,
        Err(d) => return (Files::default(), vec![d]),
    };
    let kind = kind_of(&text);
    match kind.as_deref() {
        Some("System") => {
            let l = crate::model::system::load_system(name, fs);
            (l.files, l.diagnostics)
        }
        Some(k @ ("Device" | "Die" | "Node")) => crate::model::system::check_part(name, k, fs),
        other => {
            let mut files = Files::default();
            files.add(name, text.clone());
            let (msg, hint) = match other {
                None if text.trim().is_empty() => (
                    "the file is empty".to_string(),
                    "run `tessera new --template gpu-node NAME` for a starter file".to_string(),
                ),
                None => (
                    "the file does not start with a tessera value".to_string(),
                    format!("a tessera file starts with one of: {}", KINDS.join(", ")),
                ),
                Some(k) => {
                    let hint = match crate::diag::did_you_mean(k, KINDS.iter().copied()) {
                        Some(s) => format!("did you mean `{s}`? kinds: {}", KINDS.join(", ")),
                        None => format!("a tessera file starts with one of: {}", KINDS.join(", ")),
                    };
                    (format!("unknown kind of file `{k}`"), hint)
                }
            };
            let pos = first_token_pos(&text);
            (files, vec![Diagnostic::error(name, Some(pos), msg).with_hint(Some(hint))])
        }
    }
}

fn first_token_pos(text: &str) -> Pos {
    let off = text.len() - text.trim_start().len();
    crate::diag::pos_of_offset(text, off)
}
