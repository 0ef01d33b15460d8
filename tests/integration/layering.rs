//! Layers point one way: no two files of `src/` import each other, directly or around a
//! circle, and no two top-level modules use each other. Read from the code's own paths
//! (`crate::…` and `super::…`, including `use` groups and doc comments' links), per file,
//! with test modules left out (docs/development/layout.md, "Layering").
//!
//! `ALLOWED` would list a circle not untied yet (none today): the check fails on any other
//! circle, and on a listed one that changed, so the list only ever gets shorter.
//!
//! Beyond no circles: the top-level modules are layers in the order [`LAYERS`] gives, and
//! a file uses only files of its own layer or of those below it; and outside the engine
//! only the engine's surface ([`ENGINE_SURFACE`]) is used, never its internals.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Circles still to untie, each as its files' modules sorted and joined by spaces.
const ALLOWED: &[&str] = &[];

/// The crate's layers, lowest first (src/lib.rs, docs/development/layout.md).
const LAYERS: &[&str] = &[
    "text",
    "api",
    "cluster",
    "helm",
    "health",
    "tracking",
    "telemetry",
    "webhooks",
    "engine",
    "frontend",
];

/// What of the engine the rest of the crate uses: its root (`engine/mod.rs`, whose
/// re-exports are the engine's API), the stored-release actions the dashboard runs on a
/// helm CLI release, and the Lease (whose end-to-end tests drive it directly).
const ENGINE_SURFACE: &[&str] = &["engine", "engine/stored_actions", "engine/lease"];

/// Module path (`engine/run`) of every `.rs` file under `src/`.
fn modules(root: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap().with_extension("");
                let mut module: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    module.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    module.pop();
                }
                out.insert(module, path);
            }
        }
    }
    out
}

/// The source without plain comments, string literals and `#[cfg(test)]` modules (doc
/// comments stay: a path they name is read as a use).
fn code_of(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let bytes = source.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &source[i..];
        if rest.starts_with("///") || rest.starts_with("//!") {
            // Doc comments are read: a path named there (a doc link) is a dependency too.
            i += 3;
        } else if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if let Some(after) = rest.strip_prefix("#[cfg(test)]") {
            // Skip the attribute and, when a `mod` follows, its whole braced body.
            let item = after.trim_start();
            let is_mod = ["mod ", "pub mod ", "pub(crate) mod ", "pub(super) mod "]
                .iter()
                .any(|p| item.starts_with(p));
            i += "#[cfg(test)]".len();
            if is_mod {
                let open = i + after.find('{').unwrap_or(after.len());
                let mut depth = 0usize;
                let mut j = open;
                while j < bytes.len() {
                    match bytes[j] {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                j += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                i = j;
            }
        } else if bytes[i] == b'"' {
            // A string literal (raw strings in this crate hold no paths worth reading).
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            i = j + 1;
        } else if rest.starts_with("'\"'") {
            i += 3;
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths a `use` tree or expression path spells from `at` on (after `crate::` or the
/// `super::`s): `a::b`, or every leaf of `a::{b, c::{d}}`.
fn paths_from(code: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    let mut rest = code;
    loop {
        let ident: String = rest.chars().take_while(|&c| is_ident(c)).collect();
        if ident.is_empty() {
            if let Some(group) = rest.strip_prefix('{') {
                // Split the group at its top-level commas.
                let mut depth = 0;
                let mut start = 0;
                for (k, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            paths_from(group[start..k].trim_start(), path.clone(), out);
                            return;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            paths_from(group[start..k].trim_start(), path.clone(), out);
                            start = k + 1;
                        }
                        _ => {}
                    }
                }
            }
            out.push(path);
            return;
        }
        rest = &rest[ident.len()..];
        path.push(ident);
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => {
                out.push(path);
                return;
            }
        }
    }
}

/// The files module `module` (whose code is `code`) uses.
fn uses(
    module: &[String],
    code: &str,
    files: &BTreeMap<Vec<String>, PathBuf>,
) -> BTreeSet<Vec<String>> {
    let mut paths = Vec::new();
    let mut i = 0;
    while let Some(k) = code[i..]
        .find("crate::")
        .into_iter()
        .chain(code[i..].find("super::"))
        .chain(code[i..].find("self::"))
        .min()
    {
        let at = i + k;
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == ':') {
            i = at + 1;
            continue;
        }
        let mut rest = &code[at..];
        let base = if let Some(r) = rest.strip_prefix("crate::") {
            rest = r;
            Vec::new()
        } else if let Some(r) = rest.strip_prefix("self::") {
            // A module's own children, as `pub use self::child::Item` names them.
            rest = r;
            module.to_vec()
        } else {
            let mut up = 0;
            while let Some(r) = rest.strip_prefix("super::") {
                up += 1;
                rest = r;
            }
            module[..module.len().saturating_sub(up)].to_vec()
        };
        paths_from(rest, base, &mut paths);
        i = code.len() - rest.len();
    }
    paths
        .into_iter()
        .filter_map(|p| {
            (0..=p.len())
                .rev()
                .map(|n| p[..n].to_vec())
                .find(|m| files.contains_key(m))
        })
        .filter(|m| !m.is_empty() && m != module)
        .collect()
}

/// Strongly connected components of more than one file (Tarjan).
fn circles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<BTreeSet<Vec<String>>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        found: Vec<BTreeSet<Vec<String>>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a Vec<String>) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let l = self.low[w].min(self.low[v]);
                    self.low.insert(v, l);
                } else if self.stack.contains(&w) {
                    let l = self.index[w].min(self.low[v]);
                    self.low.insert(v, l);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = BTreeSet::new();
                while let Some(w) = self.stack.pop() {
                    component.insert(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.found
}

fn graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = modules(&root);
    files
        .iter()
        .map(|(module, path)| {
            let code = code_of(&std::fs::read_to_string(path).unwrap());
            (module.clone(), uses(module, &code, &files))
        })
        .collect()
}

#[test]
fn no_import_circles_between_files() {
    let edges = graph();
    let found: BTreeSet<String> = circles(&edges)
        .iter()
        .map(|c| c.iter().map(|m| m.join("/")).collect::<Vec<_>>().join(" "))
        .collect();
    let allowed: BTreeSet<String> = ALLOWED.iter().map(|s| s.to_string()).collect();
    let new: Vec<_> = found.difference(&allowed).collect();
    let gone: Vec<_> = allowed.difference(&found).collect();
    let explain = |circle: &str| {
        let members: BTreeSet<&str> = circle.split(' ').collect();
        let mut lines = Vec::new();
        for m in &members {
            let key: Vec<String> = m.split('/').map(str::to_owned).collect();
            let to: Vec<String> = edges[&key]
                .iter()
                .map(|w| w.join("/"))
                .filter(|w| members.contains(w.as_str()))
                .collect();
            lines.push(format!("  {m} -> {}", to.join(", ")));
        }
        lines.join("\n")
    };
    assert!(
        new.is_empty(),
        "import circles between files of src/:\n{}",
        new.iter()
            .map(|c| format!("{c}\n{}", explain(c)))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        gone.is_empty(),
        "circles untied (or changed): take them off ALLOWED: {gone:?}"
    );
}

#[test]
fn no_two_top_level_modules_use_each_other() {
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in graph() {
        for t in to {
            if from.first() != t.first()
                && let (Some(a), Some(b)) = (from.first(), t.first())
            {
                top.entry(a.clone()).or_default().insert(b.clone());
            }
        }
    }
    let two_way: Vec<(String, String)> = top
        .iter()
        .flat_map(|(a, bs)| bs.iter().map(move |b| (a.clone(), b.clone())))
        .filter(|(a, b)| a < b && top.get(b).is_some_and(|x| x.contains(a)))
        .collect();
    assert!(
        two_way.is_empty(),
        "modules that use each other: {two_way:?}"
    );
}

/// Every use that runs up the layers, as `from -> to`.
fn upward(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<String> {
    let rank = |m: &[String]| m.first().and_then(|t| LAYERS.iter().position(|l| l == t));
    let mut out = Vec::new();
    for (from, to) in edges {
        for t in to {
            if let (Some(a), Some(b)) = (rank(from), rank(t))
                && b > a
            {
                out.push(format!("{} -> {}", from.join("/"), t.join("/")));
            }
        }
    }
    out
}

#[test]
fn the_layers_point_one_way() {
    let edges = graph();
    let unknown: BTreeSet<&String> = edges
        .keys()
        .filter_map(|m| m.first())
        .filter(|t| !LAYERS.contains(&t.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "top-level modules without a layer (add each to LAYERS, where it belongs): {unknown:?}"
    );
    let up = upward(&edges);
    assert!(
        up.is_empty(),
        "uses that run up the layers ({}):\n{}",
        LAYERS.join(" < "),
        up.join("\n")
    );
}

#[test]
fn the_engine_is_used_through_its_surface() {
    let inside: Vec<String> = graph()
        .into_iter()
        .filter(|(from, _)| from.first().map(String::as_str) != Some("engine"))
        .flat_map(|(from, to)| {
            to.into_iter()
                .filter(|t| t.first().map(String::as_str) == Some("engine"))
                .filter(|t| !ENGINE_SURFACE.contains(&t.join("/").as_str()))
                .map(move |t| format!("{} -> {}", from.join("/"), t.join("/")))
        })
        .collect();
    assert!(
        inside.is_empty(),
        "the engine's internals used from outside it (re-export what is needed at engine/mod.rs): {inside:?}"
    );
}

/// The checks themselves: an import that runs up the layers is found, and one along
/// them is not.
#[test]
fn an_import_up_the_layers_is_found() {
    let m = |s: &str| s.split('/').map(str::to_owned).collect::<Vec<_>>();
    let edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = [
        (
            m("cluster/tenancy"),
            BTreeSet::from([m("engine"), m("api")]),
        ),
        (m("engine/run"), BTreeSet::from([m("helm/render")])),
    ]
    .into_iter()
    .collect();
    assert_eq!(upward(&edges), ["cluster/tenancy -> engine"]);
}

/// The reader itself: paths in groups, `super::`, and what it leaves out.
#[test]
fn the_reader_finds_grouped_and_relative_paths() {
    let files: BTreeMap<Vec<String>, PathBuf> =
        ["engine", "engine/run", "engine/status", "api", "api/raw"]
            .iter()
            .map(|m| (m.split('/').map(str::to_owned).collect(), PathBuf::new()))
            .collect();
    let code = code_of(
        "use crate::api::{raw::Raw, Duration};\n// crate::engine::status\nuse super::status;\n\
         fn f() { let s = \"crate::engine\"; }\n#[cfg(test)]\nmod tests { use crate::engine; }\n",
    );
    let module: Vec<String> = vec!["engine".into(), "run".into()];
    let found: Vec<String> = uses(&module, &code, &files)
        .into_iter()
        .map(|m| m.join("/"))
        .collect();
    assert_eq!(found, ["api", "api/raw", "engine/status"]);
    // A parent's `self::child` is a use of the child's file, as much as `super::` is
    // the child's use of its parent's.
    let code = code_of("pub use self::run::Run;\nimpl Self { fn f() -> Self::Item {} }\n");
    let found: Vec<String> = uses(&["engine".to_owned()], &code, &files)
        .into_iter()
        .map(|m| m.join("/"))
        .collect();
    assert_eq!(found, ["engine/run"]);
}
