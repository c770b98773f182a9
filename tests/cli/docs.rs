//! The user documentation holds: every relative link of README.md, CONTRIBUTING.md and docs/
//! reaches an existing file and heading, every YAML example in them passes `edgeplane check`
//! as its marker says, and docs/troubleshooting.md explains exactly the condition and Event
//! reasons the code can write.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::BIN;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, CONTRIBUTING.md and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md"), root().join("CONTRIBUTING.md")];
    let mut docs: Vec<_> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

/// The lines of a page outside fenced code blocks, with their numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, l));
        }
    }
    out
}

/// A heading's anchor as GitHub computes it: lower case, punctuation other than `-` and `_`
/// dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor of a page's headings (repeated headings get `-1`, `-2`, ... as on GitHub).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, l) in prose(text) {
        let hashes = l.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !l[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&l[hashes..]);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of a line's markdown links (`[text](target)`, `![alt](target)`), outside
/// inline code; `in_code` carries an inline code span over to the next line of a paragraph.
fn link_targets(line: &str, in_code: &mut bool) -> Vec<String> {
    if line.trim().is_empty() {
        *in_code = false;
    }
    let mut code_free = String::new();
    for (i, part) in line.split('`').enumerate() {
        if i > 0 {
            *in_code = !*in_code;
        }
        if !*in_code {
            code_free.push_str(part);
            code_free.push(' ');
        }
    }
    let mut out = Vec::new();
    let mut rest = code_free.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        let target = &rest[..end];
        if !target.is_empty() && !target.contains(' ') {
            out.push(target.to_owned());
        }
        rest = &rest[end..];
    }
    out
}

#[test]
fn docs_relative_links_reach_a_file_and_heading() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("read page");
        let dir = page.parent().expect("page dir");
        let name = page
            .strip_prefix(root())
            .unwrap_or(&page)
            .display()
            .to_string();
        let mut in_code = false;
        for (n, line) in prose(&text) {
            for target in link_targets(line, &mut in_code) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
                let file = if path.is_empty() {
                    page.clone()
                } else {
                    dir.join(path)
                };
                if !file.exists() {
                    broken.push(format!("{name}:{n}: {target}: no such file"));
                    continue;
                }
                if anchor.is_empty() || file.extension().is_none_or(|x| x != "md") {
                    continue;
                }
                let there = std::fs::read_to_string(&file).expect("read target");
                if !anchors(&there).contains(anchor) {
                    broken.push(format!("{name}:{n}: {target}: no heading #{anchor}"));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} links found: is the parser broken?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The link parser and the anchors follow GitHub's rules on the cases the pages use.
/// The cluster quickstart between its markers in `text`.
fn cluster_quickstart(text: &str) -> Option<&str> {
    let start = text.find("<!-- cluster-quickstart:start -->")?;
    let end = text.find("<!-- cluster-quickstart:end -->")?;
    text.get(start..end)
}

/// README's cluster quickstart is docs/install.md's, which tests/kube/quickstart.rs runs.
#[test]
fn readme_cluster_quickstart_is_the_install_guide_s() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let install = std::fs::read_to_string(root().join("docs/install.md")).expect("docs/install.md");
    let theirs = cluster_quickstart(&install).expect("docs/install.md has the quickstart markers");
    assert!(theirs.contains("kubectl apply -k deploy/"), "{theirs}");
    assert_eq!(
        cluster_quickstart(&readme),
        Some(theirs),
        "README.md's cluster quickstart differs from docs/install.md's"
    );
}

#[test]
fn docs_link_parser_finds_links_and_anchors() {
    let mut in_code = false;
    assert_eq!(
        link_targets(
            "see [a](x.md#b-c) and `[no](code)` and ![p](docs/p.png) `open",
            &mut in_code
        ),
        ["x.md#b-c", "docs/p.png"]
    );
    assert!(in_code);
    assert_eq!(
        link_targets("[no](code)` closed [yes](y.md)", &mut in_code),
        ["y.md"]
    );
    assert_eq!(slug(" `convert ingress` flags"), "convert-ingress-flags");
    assert_eq!(
        slug(" Policies and proxy settings (edgeplane.dev CRDs)"),
        "policies-and-proxy-settings-edgeplanedev-crds"
    );
    let a = anchors("# A\n```\n# not a heading\n```\n## A\n");
    assert_eq!(a.into_iter().collect::<Vec<_>>(), ["a", "a-1"]);
}

/// A YAML example and what `check` must answer for it: the marker line
/// `<!-- check: exit N[, TEXT] -->` just before the block (default: exit 0).
struct Example {
    place: String,
    yaml: String,
    exit: i32,
    expect: Option<String>,
}

fn examples() -> Vec<Example> {
    let mut out = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("read page");
        let name = page
            .strip_prefix(root())
            .unwrap_or(&page)
            .display()
            .to_string();
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            if lines[i].trim() != "```yaml" {
                i += 1;
                continue;
            }
            let marker = lines[..i]
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .and_then(|l| l.trim().strip_prefix("<!-- check: exit "))
                .and_then(|l| l.strip_suffix(" -->"));
            let (exit, expect) = match marker {
                Some(m) => {
                    let (code, text) = m.split_once(", ").unwrap_or((m, ""));
                    let code = code.parse().expect("check marker: exit code");
                    (code, (!text.is_empty()).then(|| text.to_owned()))
                }
                None => (0, None),
            };
            let start = i + 1;
            let end = start
                + lines[start..]
                    .iter()
                    .position(|l| l.trim() == "```")
                    .expect("closed yaml block");
            out.push(Example {
                place: format!("{name}:{}", i + 1),
                yaml: lines[start..end].join("\n") + "\n",
                exit,
                expect,
            });
            i = end + 1;
        }
    }
    out
}

/// Every ```yaml block of the documentation is a complete example: `edgeplane check` on it
/// alone exits as its marker says (0 when it has none).
#[test]
fn docs_yaml_examples_pass_check() {
    let examples = examples();
    assert!(examples.len() >= 7, "only {} YAML examples", examples.len());
    let mut failed = Vec::new();
    for ex in &examples {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("example.yaml"), &ex.yaml).expect("write example");
        let out = Command::new(BIN)
            .args(["check", "--output", "summary", "-f"])
            .arg(dir.path())
            .env("RUST_LOG", "warn")
            .output()
            .expect("run edgeplane check");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let text_ok = ex.expect.as_ref().is_none_or(|t| all.contains(t.as_str()));
        if out.status.code() != Some(ex.exit) || !text_ok {
            failed.push(format!(
                "{}: exit {:?}, want {}{}:\n{all}",
                ex.place,
                out.status.code(),
                ex.exit,
                ex.expect
                    .as_ref()
                    .map(|t| format!(" with {t:?}"))
                    .unwrap_or_default()
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The Rust source files of `src/`, without test modules (`#[cfg(test)]` to the end of a file,
/// `tests.rs`, `*_tests.rs`).
fn sources(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
            continue;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.ends_with(".rs") || name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read source");
        let code = match text.find("#[cfg(test)]\nmod") {
            Some(i) => text[..i].to_owned(),
            None => text,
        };
        out.push((path, code));
    }
}

/// Every reason the code can write: the arms of `Reason::as_str` (every condition reason) and
/// the `reason: "..."` literals of Events.
fn written_reasons() -> BTreeSet<String> {
    let conditions = std::fs::read_to_string(root().join("src/status/conditions.rs"))
        .expect("src/status/conditions.rs");
    let start = conditions.find("impl Reason {").expect("impl Reason");
    let body = &conditions[start..];
    let body = &body[..body.find("\n}\n").expect("end of impl Reason")];
    let arm = regex::Regex::new(r#"Self::\w+ => "(\w+)""#).expect("regex");
    let mut out: BTreeSet<String> = arm.captures_iter(body).map(|c| c[1].to_owned()).collect();
    assert!(out.len() > 20, "Reason::as_str not found: {out:?}");
    let literal = regex::Regex::new(r#"reason: "([A-Z]\w+)""#).expect("regex");
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    for (_, code) in &files {
        out.extend(literal.captures_iter(code).map(|c| c[1].to_owned()));
    }
    out
}

/// docs/troubleshooting.md has a `` ### `Reason` `` heading for every reason the code can
/// write, and none for a reason it cannot.
#[test]
fn docs_troubleshooting_explains_every_reason() {
    let page = std::fs::read_to_string(root().join("docs/troubleshooting.md"))
        .expect("docs/troubleshooting.md");
    let listed: BTreeSet<String> = prose(&page)
        .into_iter()
        .filter_map(|(_, l)| l.strip_prefix("### `")?.strip_suffix('`'))
        .map(str::to_owned)
        .collect();
    let written = written_reasons();
    for r in [
        "RouteRejected",
        "ListenerConflict",
        "BackendNotFound",
        "InvalidParameters",
    ] {
        assert!(written.contains(r), "{r} not found in the code");
    }
    let missing: Vec<_> = written.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&written).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/troubleshooting.md: reasons the code writes but the page does not explain: \
         {missing:?}; reasons the page explains but the code cannot write: {stale:?}"
    );
}
