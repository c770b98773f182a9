//! Reads the crate's sources: which module each file is (`X.rs`, `X/mod.rs`, `#[path]`, inline
//! `mod x { }`), and every path it names (`use` trees, `crate::`/`super::`/`self::` paths in
//! code), each resolved to the crate module it reaches or kept as an external path. Comments,
//! strings and character literals are skipped, so a path in a doc comment is not an import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path from the crate root (`["translate", "gateways", "tls"]`); the root is empty.
pub type ModPath = Vec<String>;

/// One path a module names.
#[derive(Debug, Clone)]
pub struct Import {
    /// The module the path is written in (inline modules included).
    pub from: ModPath,
    /// The file, relative to the crate directory (`src/snapshot.rs`).
    pub file: String,
    pub line: usize,
    /// The source line, trimmed, for messages.
    pub text: String,
    pub target: Target,
}

/// What a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The deepest crate module the path reaches.
    Module(ModPath),
    /// A path that starts outside the crate (`tokio::net::TcpListener`), as written.
    External(String),
}

/// Every module of the crate and every path its sources name.
#[derive(Debug, Default)]
pub struct Sources {
    pub modules: BTreeSet<ModPath>,
    /// Modules that have a folder (`src/X/`).
    pub folders: BTreeSet<ModPath>,
    pub imports: Vec<Import>,
}

/// Reads every `.rs` file under `src` (the library; `main.rs` is its own crate and is left out).
pub fn read(crate_dir: &Path) -> Sources {
    let src = crate_dir.join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files.sort();
    let mut module_of: BTreeMap<PathBuf, ModPath> = BTreeMap::new();
    let mut out = Sources::default();
    for f in &files {
        let rel = f.strip_prefix(&src).expect("walked under src");
        if rel == Path::new("main.rs") {
            continue;
        }
        module_of.insert(f.clone(), file_module(rel));
    }
    for dir in dirs(&src) {
        let rel = dir.strip_prefix(&src).expect("walked under src");
        out.folders.insert(components(rel));
    }
    // `#[path = "x.rs"] mod name;` places a file as a child of the declaring module.
    let texts: BTreeMap<PathBuf, String> = module_of
        .keys()
        .map(|f| {
            (
                f.clone(),
                std::fs::read_to_string(f).expect("source is readable"),
            )
        })
        .collect();
    for (f, text) in &texts {
        let tokens = tokenize(text);
        for w in tokens.windows(9) {
            let t: Vec<&str> = w.iter().map(|t| t.text.as_str()).collect();
            if t[..4] == ["#", "[", "path", "="] && t[4].starts_with('"') {
                let (lit, rest) = (&t[4][1..], &t[5..]);
                if let Some(i) = rest.iter().position(|s| *s == "mod") {
                    let name = rest.get(i + 1).copied().unwrap_or_default();
                    let file = f.parent().expect("file in a folder").join(lit);
                    let mut m = module_of[f].clone();
                    m.push(name.to_owned());
                    module_of.insert(file, m);
                }
            }
        }
    }
    out.modules.extend(module_of.values().cloned());
    let mut parsed = Vec::new();
    for (f, text) in &texts {
        let m = &module_of[f];
        let file = format!("src/{}", f.strip_prefix(&src).expect("under src").display());
        let (inline, paths) = parse(&tokenize(text), m);
        out.modules.extend(inline);
        parsed.push((file, text, paths));
    }
    for (file, text, paths) in parsed {
        let lines: Vec<&str> = text.lines().collect();
        for (from, line, segments) in paths {
            let Some(target) = resolve(&out.modules, &from, &segments) else {
                continue;
            };
            out.imports.push(Import {
                from,
                file: file.clone(),
                line,
                text: lines.get(line - 1).map_or("", |l| l.trim()).to_owned(),
                target,
            });
        }
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("src is readable")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("src is readable") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            out.extend(dirs(&p));
            out.push(p);
        }
    }
    out
}

fn components(rel: &Path) -> ModPath {
    rel.iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect()
}

/// `lib.rs` -> root, `a/b.rs` and `a/b/mod.rs` -> `a::b`.
fn file_module(rel: &Path) -> ModPath {
    let mut m = components(&rel.with_extension(""));
    if m.last().is_some_and(|l| l == "mod") || m == ["lib"] {
        m.pop();
    }
    m
}

#[derive(Debug, Clone)]
struct Token {
    text: String,
    line: usize,
}

/// Identifiers, `::` and single punctuation characters, with their lines; comments, strings
/// and character literals left out (a string leaves a lone `"` token).
fn tokenize(text: &str) -> Vec<Token> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let push = |out: &mut Vec<Token>, s: String, line| out.push(Token { text: s, line });
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            i += 2;
            while i + 1 < c.len() && !(c[i] == '*' && c[i + 1] == '/') {
                line += usize::from(c[i] == '\n');
                i += 1;
            }
            i += 2;
        } else if ch == '"' {
            let (start, at) = (i, line);
            i += 1;
            while i < c.len() && c[i] != '"' {
                line += usize::from(c[i] == '\n');
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            // One token starting with `"`, never an identifier; its text serves `#[path]`.
            push(&mut out, c[start..i.min(c.len())].iter().collect(), at);
            i += 1;
        } else if ch == '\'' {
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1; // a lifetime: its name follows as an identifier
            }
        } else if ch.is_alphanumeric() || ch == '_' || ch == '$' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_' || c[i] == '$') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // Raw strings: r"..", r#".."#, br#".."#.
            let hashes = c[i..].iter().take_while(|&&h| h == '#').count();
            if (word == "r" || word == "br") && c.get(i + hashes) == Some(&'"') {
                i += hashes + 1;
                let close: String = std::iter::once('"')
                    .chain("#".repeat(hashes).chars())
                    .collect();
                let close: Vec<char> = close.chars().collect();
                while i < c.len() && !c[i..].starts_with(&close) {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
                i += close.len();
                continue;
            }
            push(&mut out, word.replace("$crate", "crate"), line);
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            push(&mut out, "::".into(), line);
            i += 2;
        } else {
            push(&mut out, ch.to_string(), line);
            i += 1;
        }
    }
    out
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Inline modules declared, and every path named as `(module, line, segments)`.
#[allow(clippy::type_complexity)]
fn parse(
    tokens: &[Token],
    file_module: &ModPath,
) -> (Vec<ModPath>, Vec<(ModPath, usize, Vec<String>)>) {
    let mut inline = Vec::new();
    let mut paths = Vec::new();
    let mut stack: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let current = |stack: &[(String, usize)]| {
        let mut m = file_module.clone();
        m.extend(stack.iter().map(|(n, _)| n.clone()));
        m
    };
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].text.as_str();
        let next = |k: usize| tokens.get(i + k).map(|t| t.text.as_str());
        let prev = i.checked_sub(1).map(|k| tokens[k].text.as_str());
        match t {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                while stack.last().is_some_and(|(_, d)| *d > depth) {
                    stack.pop();
                }
            }
            "mod" if next(2) == Some("{") && next(1).is_some_and(is_ident) => {
                stack.push((tokens[i + 1].text.clone(), depth + 1));
                inline.push(current(&stack));
                i += 2;
                continue;
            }
            "use" if prev != Some("::") => {
                let end = tokens[i..]
                    .iter()
                    .position(|t| t.text == ";")
                    .map_or(tokens.len(), |e| i + e);
                let mut trees = Vec::new();
                use_tree(&tokens[i + 1..end], &[], &mut trees);
                let from = current(&stack);
                for p in trees {
                    paths.push((from.clone(), tokens[i].line, p));
                }
                i = end + 1;
                continue;
            }
            _ if is_ident(t) && next(1) == Some("::") && prev != Some("::") => {
                let mut segments = vec![t.to_owned()];
                let mut k = i + 1;
                while tokens.get(k).is_some_and(|t| t.text == "::")
                    && tokens.get(k + 1).is_some_and(|t| is_ident(&t.text))
                {
                    segments.push(tokens[k + 1].text.clone());
                    k += 2;
                }
                paths.push((current(&stack), tokens[i].line, segments));
                i = k;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    (inline, paths)
}

/// Expands a `use` tree (`a::{b, c::d as e, f::*, self}`) into full paths.
fn use_tree(tokens: &[Token], prefix: &[String], out: &mut Vec<Vec<String>>) {
    if tokens.is_empty() {
        return;
    }
    let mut path = prefix.to_vec();
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].text.as_str() {
            "as" => i += 1,
            "{" => {
                // Each tree between top-level commas, under the path so far.
                let (mut d, mut start) = (0, i + 1);
                for k in i + 1..tokens.len() {
                    match tokens[k].text.as_str() {
                        "{" => d += 1,
                        "}" if d > 0 => d -= 1,
                        "," | "}" if d == 0 => {
                            use_tree(&tokens[start..k], &path, out);
                            start = k + 1;
                        }
                        _ => {}
                    }
                }
                return;
            }
            "self" if !path.is_empty() => {}
            s if is_ident(s) => path.push(s.to_owned()),
            _ => {}
        }
        i += 1;
    }
    if !path.is_empty() {
        out.push(path);
    }
}

/// The crate module `segments` reaches from `from`, or the external path; `None` for a path
/// that starts at a name in scope that is not a module (an imported item, a type).
fn resolve(modules: &BTreeSet<ModPath>, from: &ModPath, segments: &[String]) -> Option<Target> {
    let mut base: ModPath;
    let mut rest = segments;
    match segments.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &segments[1..];
        }
        Some("super") | Some("self") => {
            base = from.clone();
            while let Some(s) = rest.first() {
                match s.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        Some(first) => {
            let mut child = from.clone();
            child.push(first.to_owned());
            if !modules.contains(&child) {
                let std_like = first.chars().next().is_some_and(char::is_lowercase);
                return std_like.then(|| Target::External(segments.join("::")));
            }
            base = from.clone();
        }
        None => return None,
    }
    for s in rest {
        let mut next = base.clone();
        next.push(s.clone());
        if !modules.contains(&next) {
            break;
        }
        base = next;
    }
    Some(Target::Module(base))
}
