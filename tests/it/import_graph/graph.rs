//! The file graph: the modules of both crates (the library from `src/lib.rs`, the binary from
//! `src/main.rs`), the names each scope sees, the file edges its paths make, and the components.

use super::scan::{file_facts, lex, ScopeFacts};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

const LIB: u8 = 0;
const BIN: u8 = 1;

type ModPath = (u8, Vec<String>);

struct Scope {
    module: ModPath,
    file: String,
    facts: ScopeFacts,
    names: BTreeMap<String, ModPath>,
}

pub struct Graph {
    /// (from, to) → the first line that makes the edge, as `file:line`.
    pub edges: BTreeMap<(String, String), String>,
    pub nodes: BTreeSet<String>,
    /// `.rs` files that no `mod` declaration reaches from a crate root.
    pub orphans: Vec<String>,
}

impl Graph {
    /// The graph of `files` (path from the repository root → text).
    pub fn build(files: &BTreeMap<String, String>) -> Graph {
        let mut scopes: Vec<Scope> = Vec::new();
        let mut modules: BTreeMap<ModPath, usize> = BTreeMap::new();
        let mut queue: VecDeque<(ModPath, String)> = VecDeque::new();
        for (krate, root) in [(LIB, "src/lib.rs"), (BIN, "src/main.rs")] {
            if files.contains_key(root) {
                queue.push_back(((krate, Vec::new()), root.to_string()));
            }
        }
        let mut seen = BTreeSet::new();
        while let Some(((krate, path), file)) = queue.pop_front() {
            if !seen.insert(file.clone()) {
                continue;
            }
            let (dir, own) = file.rsplit_once('/').unwrap_or(("", file.as_str()));
            let base = match own {
                "mod.rs" | "lib.rs" | "main.rs" => dir.to_string(),
                _ => format!("{dir}/{}", own.trim_end_matches(".rs")),
            };
            for facts in file_facts(&lex(&files[&file])) {
                let mut module = path.clone();
                module.extend(facts.inline.iter().cloned());
                let mut names = BTreeMap::new();
                for (m, own_file) in &facts.mods {
                    let mut child = module.clone();
                    child.push(m.clone());
                    names.insert(m.clone(), (krate, child.clone()));
                    if *own_file {
                        let under = [&[base.clone()][..], &facts.inline[..]].concat().join("/");
                        let flat = format!("{under}/{m}.rs");
                        let nested = format!("{under}/{m}/mod.rs");
                        let at = if files.contains_key(&flat) {
                            flat
                        } else {
                            nested
                        };
                        if files.contains_key(&at) {
                            queue.push_back(((krate, child), at));
                        }
                    }
                }
                modules.insert((krate, module.clone()), scopes.len());
                scopes.push(Scope {
                    module: (krate, module),
                    file: file.clone(),
                    facts,
                    names,
                });
            }
        }
        resolve_uses(&mut scopes, &modules);
        let file_of = |(krate, path): &ModPath| {
            let mut cur = Vec::new();
            for seg in path {
                cur.push(seg.clone());
                if !modules.contains_key(&(*krate, cur.clone())) {
                    cur.pop();
                    break;
                }
            }
            scopes[modules[&(*krate, cur)]].file.clone()
        };
        let mut edges = BTreeMap::new();
        for (k, s) in scopes.iter().enumerate() {
            let uses = s
                .facts
                .uses
                .iter()
                .map(|u| (&u.segs, u.line, u.segs.join("::")));
            let paths = s.facts.paths.iter().map(|(p, l, w)| (p, *l, w.clone()));
            for (segs, line, written) in uses.chain(paths) {
                if let Some(target) = resolve(&scopes, k, segs) {
                    let to = file_of(&target);
                    if to != s.file {
                        let at = format!("{}:{line}: {written}", s.file);
                        edges.entry((s.file.clone(), to)).or_insert(at);
                    }
                }
            }
        }
        let orphans = files
            .keys()
            .filter(|f| !seen.contains(*f))
            .cloned()
            .collect();
        Graph {
            edges,
            nodes: seen,
            orphans,
        }
    }

    /// The components of more than one file, each sorted, in order.
    pub fn circles(&self) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = tarjan(&self.nodes, &self.edges)
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|mut c| {
                c.sort();
                c
            })
            .collect();
        out.sort();
        out
    }

    /// One component: the shortest circle through each of its files, then its edges.
    pub fn describe(&self, component: &[String]) -> String {
        let inside: BTreeSet<&String> = component.iter().collect();
        let next = |f: &String| {
            self.edges
                .keys()
                .filter(|(a, b)| a == f && inside.contains(b))
                .map(|(_, b)| b.clone())
                .collect::<Vec<_>>()
        };
        let mut chains = BTreeSet::new();
        for start in component {
            // breadth first from `start` back to it
            let mut prev: BTreeMap<String, String> = BTreeMap::new();
            let mut queue = VecDeque::from([start.clone()]);
            'search: while let Some(f) = queue.pop_front() {
                for n in next(&f) {
                    if &n == start {
                        let mut chain = vec![f.clone()];
                        while let Some(p) = prev.get(&chain[chain.len() - 1]) {
                            chain.push(p.clone());
                        }
                        chain.reverse();
                        chain.push(start.clone());
                        chains.insert(chain.join(" → "));
                        break 'search;
                    }
                    if n != *start && !prev.contains_key(&n) {
                        prev.insert(n.clone(), f.clone());
                        queue.push_back(n);
                    }
                }
            }
        }
        let mut text = format!("import circle among {} files:", component.len());
        for c in chains {
            text += &format!("\n  {c}");
        }
        text += "\n  its edges:";
        for ((a, b), at) in &self.edges {
            if inside.contains(a) && inside.contains(b) {
                text += &format!("\n    {a} → {b}  ({at})");
            }
        }
        text
    }
}

/// Where `segs`, written in scope `k`, points: a module path (perhaps ending in an item).
fn resolve(scopes: &[Scope], k: usize, segs: &[String]) -> Option<ModPath> {
    let s = &scopes[k];
    let (krate, here) = &s.module;
    let first = segs.first()?;
    let (krate, mut path, rest) = match first.as_str() {
        "crate" => (*krate, Vec::new(), 1),
        "self" => (*krate, here.clone(), 1),
        "super" => {
            let ups = segs.iter().take_while(|x| *x == "super").count();
            let keep = here.len().checked_sub(ups)?;
            (*krate, here[..keep].to_vec(), ups)
        }
        "tessera" if *krate == BIN => (LIB, Vec::new(), 1),
        name => {
            let (kr, p) = s.names.get(name)?;
            (*kr, p.clone(), 1)
        }
    };
    path.extend(segs[rest..].iter().cloned());
    Some((krate, path))
}

/// Names brought in by `use`s, to a fixed point (a `use` may start from a name another brought
/// in; `use m::*` brings `m`'s names).
fn resolve_uses(scopes: &mut [Scope], modules: &BTreeMap<ModPath, usize>) {
    for _ in 0..16 {
        let mut changed = false;
        for k in 0..scopes.len() {
            for u in scopes[k].facts.uses.clone() {
                let Some(target) = resolve(scopes, k, &u.segs) else {
                    continue;
                };
                let mut add = |names: &mut BTreeMap<String, ModPath>, n: String, p: ModPath| {
                    if let std::collections::btree_map::Entry::Vacant(e) = names.entry(n) {
                        e.insert(p);
                        changed = true;
                    }
                };
                if u.glob {
                    if let Some(&m) = modules.get(&target) {
                        for (n, p) in scopes[m].names.clone() {
                            add(&mut scopes[k].names, n, p);
                        }
                    }
                } else if let Some(name) = u.name {
                    add(&mut scopes[k].names, name, target);
                }
            }
        }
        if !changed {
            return;
        }
    }
}

/// Tarjan's strongly connected components.
fn tarjan(
    nodes: &BTreeSet<String>,
    edges: &BTreeMap<(String, String), String>,
) -> Vec<Vec<String>> {
    let ids: BTreeMap<&String, usize> = nodes.iter().enumerate().map(|(i, n)| (n, i)).collect();
    let names: Vec<&String> = nodes.iter().collect();
    let mut adj = vec![Vec::new(); nodes.len()];
    for (a, b) in edges.keys() {
        if let (Some(&x), Some(&y)) = (ids.get(a), ids.get(b)) {
            adj[x].push(y);
        }
    }
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, adj: &[Vec<usize>], st: &mut State) {
        st.index[v] = Some(st.next);
        st.low[v] = st.next;
        st.next += 1;
        st.stack.push(v);
        st.on_stack[v] = true;
        for &w in &adj[v] {
            match st.index[w] {
                None => {
                    visit(w, adj, st);
                    st.low[v] = st.low[v].min(st.low[w]);
                }
                Some(iw) if st.on_stack[w] => st.low[v] = st.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(st.low[v]) == st.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = st.stack.pop() {
                st.on_stack[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            st.out.push(comp);
        }
    }
    let n = nodes.len();
    let mut st = State {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if st.index[v].is_none() {
            visit(v, &adj, &mut st);
        }
    }
    st.out
        .into_iter()
        .map(|c| c.into_iter().map(|i| names[i].clone()).collect())
        .collect()
}
