//! The module graph from the `crate::` paths of every source file: layer edges point down the order docs/architecture.md gives, and the modules inside each layer form no cycle.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first; a file may name only its own layer and the ones before it.
const LAYERS: &[&str] = &["testing", "numerics", "gpu", "contract", "kernels", "weights", "exec", "text", "vision", "model", "engine", "serve", "api", "fuzz", "cli"];

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("readable dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a source with `//` comments and string literals blanked, so paths in prose do not count.
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if !in_str && c == '/' && chars.peek() == Some(&'/') {
                break;
            }
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            } else if !in_str {
                out.push(c);
            }
            prev = c;
        }
        out.push('\n');
    }
    out
}

/// The `crate::` paths of a file, as their first two segments (`a` or `a::b`); a group (`crate::{a, b::c}`, `crate::a::{b, c}`) gives each member.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + 7..];
        let mut prefix: Vec<String> = Vec::new();
        loop {
            let ident: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if ident.is_empty() || !ident.starts_with(|c: char| c.is_lowercase()) {
                break;
            }
            rest = &rest[ident.len()..];
            prefix.push(ident);
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let mut p = prefix.clone();
                p.extend(segments(item.trim()));
                out.push(p);
            }
        } else {
            out.push(prefix);
        }
    }
    out.into_iter().filter(|s| !s.is_empty()).map(|s| s.into_iter().take(2).collect()).collect()
}

/// The leading identifier segments of a path (lowercase ones: modules and functions, not types).
fn segments(s: &str) -> Vec<String> {
    s.split("::").map(|p| p.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>()).take_while(|p| !p.is_empty() && p.starts_with(|c: char| c.is_lowercase())).collect()
}

/// (layer, module within the layer) of a source file, e.g. `kernels/gemm/contract.rs` -> (kernels, gemm).
fn place(src: &Path, file: &Path) -> (String, String) {
    let rel: Vec<String> = file.strip_prefix(src).expect("under src").iter().map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
    let layer = rel[0].clone();
    let module = if rel.len() > 2 { rel[1].clone() } else if rel.len() == 2 && rel[1] != "mod" { rel[1].clone() } else { String::new() };
    (layer, module)
}

/// Layer edges and, per layer, module edges.
type Graph = (BTreeMap<String, BTreeSet<String>>, BTreeMap<String, BTreeMap<String, BTreeSet<String>>>);

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let (mut layers, mut modules): Graph = Default::default();
    let names: BTreeSet<(String, String)> = files.iter().map(|f| place(&src, f)).collect();
    for f in files {
        let (layer, module) = place(&src, &f);
        if !LAYERS.contains(&layer.as_str()) {
            continue;
        }
        let mut code = code_of(&std::fs::read_to_string(&f).expect("readable"));
        if f.parent().and_then(|d| d.parent()) == Some(src.as_path()) && !f.ends_with("mod.rs") {
            code = code.replace("super::", &format!("crate::{layer}::"));
        }
        for p in crate_paths(&code) {
            if p[0] != layer {
                layers.entry(layer.clone()).or_default().insert(p[0].clone());
            } else if let Some(m) = p.get(1) {
                if !module.is_empty() && *m != module && names.contains(&(layer.clone(), m.clone())) {
                    modules.entry(layer.clone()).or_default().entry(module.clone()).or_default().insert(m.clone());
                }
            }
        }
    }
    (layers, modules)
}

/// A cycle in `edges`, if any, as the modules along it.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(n: &str, edges: &BTreeMap<String, BTreeSet<String>>, path: &mut Vec<String>, done: &mut BTreeSet<String>) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            return Some(path[i..].to_vec());
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

#[test]
fn every_layer_edge_points_down_and_no_layer_holds_a_module_cycle() {
    let (layers, modules) = graph();
    let rank = |l: &str| LAYERS.iter().position(|x| *x == l);
    let mut up = Vec::new();
    for (from, tos) in &layers {
        eprintln!("{from} -> {}", tos.iter().cloned().collect::<Vec<_>>().join(", "));
        for to in tos {
            match (rank(from), rank(to)) {
                (Some(a), Some(b)) if b < a => {}
                _ => up.push(format!("{from} -> {to}")),
            }
        }
    }
    assert!(up.is_empty(), "edges that do not point down {LAYERS:?}: {up:?}");
    for (layer, edges) in &modules {
        for (m, tos) in edges {
            eprintln!("  {layer}::{m} -> {}", tos.iter().cloned().collect::<Vec<_>>().join(", "));
        }
        assert_eq!(cycle(edges), None, "a cycle among {layer}'s modules");
    }
}

#[test]
fn the_graph_sees_an_upward_edge_and_a_cycle_when_one_is_planted() {
    let paths = crate_paths(&code_of("use crate::{engine::Session, model};\nuse crate::exec::{shapes, Out};\nlet x = crate::kernels::gemm::oracle(); // crate::cli::run\nlet s = \"crate::server\";"));
    let want: Vec<Vec<String>> = [&["engine"][..], &["model"], &["exec", "shapes"], &["exec"], &["kernels", "gemm"]].iter().map(|v| v.iter().map(|s| s.to_string()).collect()).collect();
    assert_eq!(paths, want, "group members, types cut, comments and strings ignored");
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    assert_eq!(cycle(&edges), None);
    edges.entry("c".into()).or_default().insert("a".into());
    assert_eq!(cycle(&edges), Some(vec!["a".to_string(), "b".to_string(), "c".to_string()]));
}
