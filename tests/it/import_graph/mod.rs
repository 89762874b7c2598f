//! No import circles between the files of `src/` (issue 40): no two files import each other,
//! directly or through others. Data flows one way (spec → model → engine → report), and a file
//! that both uses and is used by another cannot be read, tested or moved on its own.
//!
//! How the graph is built, from the text alone (no compiler involved):
//! - The files are the modules reached from `src/lib.rs` and `src/main.rs` by `mod x;`
//!   declarations (`x.rs` or `x/mod.rs`); a `.rs` file under `src/` that neither reaches is an
//!   error, so no file escapes the check. An inline `mod x { … }` belongs to its file.
//! - A `mod x;` declaration is *not* an edge: a parent names its children, that is all.
//! - An edge A → B is a `use` in A (`crate::…`, `super::…`, `self::…`, a child module's name,
//!   a name another `use` brought in, or `tessera::…` from the binary) or a qualified path in A's
//!   code (`crate::engine::table::Machine`, `super::Y`, `lower::run(…)`) that names B. A path
//!   names the file of its longest module prefix: `crate::engine::table::X` → `engine/table.rs`,
//!   `crate::engine::lower` → `engine/lower/mod.rs`, `crate::engine::Estimate` (an item that
//!   `engine/mod.rs` defines or re-exports) → `engine/mod.rs`.
//! - So a child's `use super::Y` is an edge child → parent, and a parent's `pub use x::Z` is an
//!   edge parent → `x.rs`: a `mod.rs` that re-exports from a child which uses items the `mod.rs`
//!   defines is a circle. The remedy is a leaf file for the shared items.
//! - `use super::*` is an edge to the parent and brings the parent's names (its children and its
//!   imports) into scope for the paths that follow.
//! - A path followed by `(` or `!` ends in a function or macro, whose name is no module's:
//!   `super::estimate(…)` calls a function even where a module `estimate` sits beside it.
//! - Test modules and feature-gated code count like the rest of their file; comments, strings and
//!   doc links are not code.
//!
//! Circles are the strongly connected components (Tarjan) of more than one file. Each is reported
//! with the shortest circle through each of its files and the lines that make its edges.
//! [`KNOWN_CIRCLES`] lists circles being untied elsewhere; it can only shrink: the test fails when
//! a listed circle no longer exists exactly as listed, so that its entry is removed.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

mod graph;
mod scan;

use graph::Graph;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Circles known and being untied (each the sorted files of one component). Empty is the goal,
/// and is where it stands: the last one (the lowering's files, whose `mod.rs` files defined items
/// their children used) was untied by moving the shared items into leaf files.
const KNOWN_CIRCLES: &[&[&str]] = &[];

#[test]
fn no_import_circles_between_files_of_src() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = BTreeMap::new();
    read_tree(root, &root.join("src"), &mut files);
    let graph = Graph::build(&files);
    let mut problems = Vec::new();
    if !graph.orphans.is_empty() {
        problems.push(format!(
            "not reached from src/lib.rs or src/main.rs by `mod` declarations: {}",
            graph.orphans.join(", ")
        ));
    }
    let circles = graph.circles();
    for c in &circles {
        if !KNOWN_CIRCLES.iter().any(|k| k.iter().eq(c.iter())) {
            problems.push(format!(
                "{}\n  (untie it; only while it is being untied, its KNOWN_CIRCLES entry: {c:?})",
                graph.describe(c)
            ));
        }
    }
    for k in KNOWN_CIRCLES {
        if !circles.iter().any(|c| k.iter().eq(c.iter())) {
            problems.push(format!(
                "KNOWN_CIRCLES lists {k:?}, which no longer exists as listed: remove (or shrink) it"
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n\n"));
}

/// Lowering never calls the evaluator (issue 40): no file of `src/engine/lower/` reaches a file of
/// `src/engine/cpu/`, directly or through others. Lowering yields the program whatever the
/// machine's figures; the choices that hang on them (whether a training step streams its weights
/// from a weight store) are the evaluators', taken on the machine they evaluate, so that a sweep
/// that moves those figures prices each point as a fresh estimate would.
#[test]
fn lowering_reaches_nothing_of_the_evaluator() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = BTreeMap::new();
    read_tree(root, &root.join("src"), &mut files);
    let graph = Graph::build(&files);
    let lower = files
        .keys()
        .filter(|f| f.starts_with("src/engine/lower/"))
        .count();
    assert!(lower > 10, "src/engine/lower/ has {lower} files: moved?");
    let problems = reaching(&graph, "src/engine/lower/", "src/engine/cpu/");
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
    // and the check sees such a path where there is one: the evaluator's own files reach it
    assert!(!reaching(&graph, "src/engine/estimate.rs", "src/engine/cpu/").is_empty());
}

/// For each file under `from` that reaches a file under `to` through the graph's edges, the
/// shortest such chain with the line of each edge.
fn reaching(graph: &Graph, from: &str, to: &str) -> Vec<String> {
    let mut out = Vec::new();
    for start in graph.nodes.iter().filter(|n| n.starts_with(from)) {
        // breadth first, remembering each file's predecessor
        let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start.as_str()]);
        let mut hit = None;
        while let Some(f) = queue.pop_front() {
            if f.starts_with(to) {
                hit = Some(f);
                break;
            }
            for (a, b) in graph.edges.keys().filter(|(a, _)| a == f) {
                if b != start && !prev.contains_key(b.as_str()) {
                    prev.insert(b, a);
                    queue.push_back(b);
                }
            }
        }
        if let Some(mut f) = hit {
            let mut chain = vec![f.to_string()];
            while let Some(&p) = prev.get(f) {
                let line = &graph.edges[&(p.to_string(), f.to_string())];
                chain.push(format!("{p} ({line})"));
                f = p;
            }
            chain.reverse();
            out.push(chain.join(" → "));
        }
    }
    out
}

#[test]
fn checker_finds_a_circle_through_a_reexport_and_a_super_import() {
    let files = synthetic(&[
        ("src/lib.rs", "pub mod a;\npub mod b;\nmod c;\n"),
        // a/mod.rs re-exports from its child, the child uses an item of a/mod.rs
        ("src/a/mod.rs", "mod x;\npub use x::Z;\npub struct Y;\n"),
        ("src/a/x.rs", "use super::Y;\npub struct Z(pub Y);\n"),
        // b ↔ c through a qualified path and a grouped use
        (
            "src/b.rs",
            "pub fn f() -> u8 { crate::c::g() }\npub struct B;\n",
        ),
        (
            "src/c.rs",
            "use crate::{a, b::{self, B}};\npub fn g() -> u8 { 1 }\n",
        ),
    ]);
    let g = Graph::build(&files);
    assert!(g.orphans.is_empty(), "{:?}", g.orphans);
    assert_eq!(
        g.circles(),
        vec![
            vec!["src/a/mod.rs".to_string(), "src/a/x.rs".to_string()],
            vec!["src/b.rs".to_string(), "src/c.rs".to_string()],
        ]
    );
    let text = g.describe(&g.circles()[1]);
    assert!(text.contains("src/b.rs → src/c.rs → src/b.rs"), "{text}");
}

#[test]
fn checker_passes_a_dag_and_ignores_comments_strings_and_mod_declarations() {
    let files = synthetic(&[
        (
            "src/lib.rs",
            "pub mod a;\npub mod b;\n/// see [crate::b::B]\npub use a::A;\n",
        ),
        ("src/a.rs", "use crate::b::B;\npub struct A(pub B);\n"),
        (
            "src/b.rs",
            "// use crate::a::A;\n/* crate::a::A */\npub struct B;\n\
             pub const S: &str = \"crate::a::A\";\npub const R: &str = r#\"use crate::a;\"#;\n\
             pub fn f<'a>(x: &'a str) -> char { let _ = x; 'a' }\n\
             mod tests { use super::B; fn t() -> B { B } }\n",
        ),
        ("src/main.rs", "mod cli;\nfn main() { cli::run() }\n"),
        ("src/cli/mod.rs", "use tessera::a::A;\npub fn run() {}\n"),
        ("src/stray.rs", "pub fn lost() {}\n"),
    ]);
    let g = Graph::build(&files);
    assert!(g.circles().is_empty(), "{:?}", g.circles());
    assert_eq!(g.orphans, vec!["src/stray.rs".to_string()]);
    // the edges it did see: lib → a (re-export), a → b, cli → a (the binary's view of the lib)
    let edges: BTreeSet<(&str, &str)> = g
        .edges
        .keys()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    let want: BTreeSet<(&str, &str)> = [
        ("src/a.rs", "src/b.rs"),
        ("src/cli/mod.rs", "src/a.rs"),
        ("src/lib.rs", "src/a.rs"),
        ("src/main.rs", "src/cli/mod.rs"),
    ]
    .into_iter()
    .collect();
    assert_eq!(edges, want);
}

fn synthetic(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    files
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect()
}

/// Every `.rs` file under `dir`, keyed by its path from `root` with `/` separators.
fn read_tree(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            read_tree(root, &p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p.strip_prefix(root).unwrap();
            let key: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.insert(key.join("/"), std::fs::read_to_string(&p).unwrap());
        }
    }
}
