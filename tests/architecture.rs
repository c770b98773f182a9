//! The import graph of `src/` keeps its layers: no two sibling folders import each other
//! (directly or around a loop) at any folder level, and the layering rules of
//! `docs/architecture.md` hold (pure `translate` and `table`, `proxy` without kube, the snapshot
//! and kinds at the bottom, providers without the translator). Reads the sources; no tool
//! besides the test itself. Run alone with `cargo test --test architecture`.

#[path = "architecture/graph.rs"]
mod graph;
#[path = "architecture/scan.rs"]
mod scan;

use std::collections::BTreeMap;
use std::path::Path;

use graph::{loops, Graph};
use scan::{Import, ModPath, Sources, Target};

/// Folders whose loops are known and may stay for now, as the check names them
/// (`src/proxy`), each with why. Empty: no folder has a loop. An entry whose folder has no
/// loop any more fails the check, so the list never outlives its reason.
const ALLOWED_LOOPS: &[(&str, &str)] = &[];

/// Modules (top-level names under `src/`) and what they must not import: `crate` modules by
/// name, external paths by prefix (`tokio`, `std::fs`).
const RULES: &[(&str, &[&str], &str)] = &[
    (
        "translate",
        IMPURE,
        "the translator is pure: no I/O, no tokio, no kube client",
    ),
    (
        "table",
        IMPURE,
        "the route table is pure: no I/O, no tokio, no kube client",
    ),
    ("proxy", &["kube"], "the proxy never imports kube"),
    (
        "snapshot",
        &["crate::translate", "crate::provider", "crate::proxy"],
        "the snapshot is below the translator, the providers and the proxy",
    ),
    (
        "kinds",
        &["crate::translate", "crate::provider", "crate::proxy"],
        "the kinds are below the translator, the providers and the proxy",
    ),
    (
        "provider",
        &["crate::translate"],
        "providers fill the snapshot; the translator's rules reach them through \
         `snapshot::TranslatorRules`",
    ),
];

/// What a pure module may not name: runtimes, the kube client and I/O (plain types such as
/// `std::net::IpAddr` are fine).
const IMPURE: &[&str] = &[
    "tokio",
    "kube::Client",
    "kube::client",
    "kube::Api",
    "kube::api::Api",
    "kube::runtime",
    "kube::Config",
    "kube::config",
    "kube::discovery",
    "std::fs",
    "std::net::TcpListener",
    "std::net::TcpStream",
    "std::net::UdpSocket",
    "std::net::ToSocketAddrs",
];

fn sources() -> Sources {
    scan::read(Path::new(env!("CARGO_MANIFEST_DIR")))
}

/// A node's name in messages: `proxy/` for a folder, `metrics.rs` for a file module.
fn node_name(sources: &Sources, parent: &ModPath, child: &str) -> String {
    let mut m = parent.clone();
    m.push(child.to_owned());
    if sources.folders.contains(&m) {
        format!("{child}/")
    } else {
        format!("{child}.rs")
    }
}

fn folder_name(folder: &ModPath) -> String {
    std::iter::once("src")
        .chain(folder.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("/")
}

/// For one folder: arrows between its children, each with the imports behind it.
type Arrows<'a> = BTreeMap<(String, String), Vec<&'a Import>>;

fn arrows_in<'a>(sources: &'a Sources, folder: &ModPath) -> Arrows<'a> {
    let mut out = Arrows::new();
    let child = |m: &ModPath| {
        (m.len() > folder.len() && m.starts_with(folder))
            .then(|| node_name(sources, folder, &m[folder.len()]))
    };
    for i in &sources.imports {
        let Target::Module(to) = &i.target else {
            continue;
        };
        if let (Some(a), Some(b)) = (child(&i.from), child(to)) {
            if a != b {
                out.entry((a, b)).or_default().push(i);
            }
        }
    }
    out
}

/// Every loop between sibling folders (or top-level modules) as `(key, message)`.
fn folder_loops(sources: &Sources) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let levels = std::iter::once(Vec::new()).chain(sources.folders.iter().cloned());
    for folder in levels {
        let arrows = arrows_in(sources, &folder);
        let mut g = Graph::new();
        for (a, b) in arrows.keys() {
            g.entry(a.clone()).or_default().insert(b.clone());
        }
        for group in loops(&g) {
            // Below the top level only folders are layers; files of one folder may use each
            // other freely.
            if !folder.is_empty() && group.iter().filter(|n| n.ends_with('/')).count() < 2 {
                continue;
            }
            let key = format!("{}: {{{}}}", folder_name(&folder), group.join(", "));
            let mut msg = format!("{key} import each other:\n");
            for ((a, b), imports) in &arrows {
                if group.contains(a) && group.contains(b) {
                    let i = imports[0];
                    let more = match imports.len() {
                        1 => String::new(),
                        n => format!(" (and {} more)", n - 1),
                    };
                    msg += &format!("    {a} -> {b}: {}:{}: {}{more}\n", i.file, i.line, i.text);
                }
            }
            out.push((key, msg));
        }
    }
    out
}

/// Whether `path` (`a::b::c`) starts with `prefix` at a segment boundary.
fn starts_with_path(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

/// Each import line that breaks a rule, once.
fn rule_breaches(sources: &Sources) -> Vec<String> {
    let mut out = Vec::new();
    for i in &sources.imports {
        let Some(top) = i.from.first() else { continue };
        let named = match &i.target {
            Target::Module(m) => format!("crate::{}", m.join("::")),
            Target::External(p) => p.clone(),
        };
        for (module, forbidden, why) in RULES {
            let breach = format!("{}:{}: {} ({why})", i.file, i.line, i.text);
            if top == module
                && forbidden.iter().any(|f| starts_with_path(&named, f))
                && !out.contains(&breach)
            {
                out.push(breach);
            }
        }
    }
    out
}

#[test]
fn no_two_sibling_folders_import_each_other() {
    let sources = sources();
    assert!(
        sources.imports.len() > 1000,
        "the scan found only {} imports: is it reading src/?",
        sources.imports.len()
    );
    let found = folder_loops(&sources);
    let allowed = |key: &str, folder: &str| {
        key.strip_prefix(folder)
            .is_some_and(|rest| rest.starts_with(": "))
    };
    let mut failures: Vec<String> = found
        .iter()
        .filter(|(key, _)| !ALLOWED_LOOPS.iter().any(|(f, _)| allowed(key, f)))
        .map(|(_, msg)| msg.clone())
        .collect();
    for (folder, _) in ALLOWED_LOOPS {
        if !found.iter().any(|(key, _)| allowed(key, folder)) {
            failures.push(format!(
                "{folder}: allowed, but has no loop any more: remove it from ALLOWED_LOOPS\n"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "folder import loops:\n{}",
        failures.concat()
    );
}

#[test]
fn layering_rules_hold() {
    let sources = sources();
    // Each rule's module must have been read, or the rule checked nothing.
    for (module, _, _) in RULES {
        assert!(
            sources
                .imports
                .iter()
                .any(|i| i.from.first().is_some_and(|m| m == module)),
            "no import read from `{module}`: is the scan reading src/?"
        );
    }
    let breaches = rule_breaches(&sources);
    assert!(
        breaches.is_empty(),
        "layering rules broken:\n{}",
        breaches.join("\n")
    );
}

/// The check sees what it must: a loop written into a made-up crate is reported with its
/// folders and one import line per arrow, and a rule breach with its line.
#[test]
fn a_made_up_loop_and_breach_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let write = |p: &str, text: &str| {
        let p = src.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("lib.rs", "pub mod a;\npub mod b;\npub mod translate;\n");
    write("a/mod.rs", "pub mod x;\n");
    write(
        "a/x.rs",
        "// use crate::b; (a comment)\nuse crate::b::y::f;\n",
    );
    write("b.rs", "pub mod y;\n");
    write(
        "b/y.rs",
        "pub fn f() { let s = \"crate::a\"; }\nfn g() { super::super::a::x::h() }\n",
    );
    write(
        "translate/mod.rs",
        "mod inner {\n    use std::{fs, net::{IpAddr, TcpStream}};\n}\n",
    );
    let sources = scan::read(dir.path());
    let found = folder_loops(&sources);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "src: {a/, b/}");
    assert_eq!(
        found[0].1,
        "src: {a/, b/} import each other:\n    \
         a/ -> b/: src/a/x.rs:2: use crate::b::y::f;\n    \
         b/ -> a/: src/b/y.rs:2: fn g() { super::super::a::x::h() }\n"
    );
    let breaches = rule_breaches(&sources);
    assert_eq!(
        breaches,
        [
            "src/translate/mod.rs:2: use std::{fs, net::{IpAddr, TcpStream}}; \
             (the translator is pure: no I/O, no tokio, no kube client)"
        ]
    );
}
