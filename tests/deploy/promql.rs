//! A small PromQL reader for the monitoring overlay's checks: which series names and label
//! names an expression refers to, checked against the registry's families.

use std::collections::{BTreeMap, BTreeSet};

/// The histogram families the expressions read through `_bucket`, `_sum` and `_count` (the
/// registry's catalogue does not say a family's type): reading any other family so fails.
pub(super) const HISTOGRAMS: &[&str] = &[
    "edgeplane_request_duration_seconds",
    "edgeplane_upstream_connect_seconds",
    "edgeplane_upstream_first_byte_seconds",
    "edgeplane_propagation_seconds",
    "edgeplane_rebuild_duration_seconds",
];

/// Labels Prometheus attaches to every series it scrapes through the ServiceMonitor (the
/// target's labels), which the expressions may group by.
const TARGET_LABELS: &[&str] = &[
    "namespace",
    "pod",
    "job",
    "instance",
    "service",
    "container",
    "endpoint",
];

/// What an expression refers to: series names as written, label names in matchers and
/// grouping clauses, and the labels of its `by (...)` clauses.
#[derive(Debug, Default)]
struct Refs {
    names: BTreeSet<String>,
    labels: BTreeSet<String>,
    by: BTreeSet<String>,
}

const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset", "inf", "nan"];
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Scans a PromQL expression (a small lexer: strings, matchers, ranges, identifiers). The
/// only Grafana variable allowed is `$__rate_interval`, as a range.
fn scan(expr: &str) -> Result<Refs, String> {
    let c: Vec<char> = expr.chars().collect();
    let mut refs = Refs::default();
    let mut in_braces = false;
    let mut i = 0;
    let ident_start = |ch: char| ch.is_ascii_alphabetic() || ch == '_' || ch == ':';
    let ident_char = |ch: char| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':';
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '"' || ch == '\'' || ch == '`' {
            i += 1;
            while i < c.len() && c[i] != ch {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            if i >= c.len() {
                return Err(format!("unterminated string in {expr}"));
            }
            i += 1;
        } else if ch == '{' || ch == '}' {
            in_braces = ch == '{';
            i += 1;
        } else if ch == '[' {
            let end = c[i..]
                .iter()
                .position(|&x| x == ']')
                .ok_or_else(|| format!("unclosed range in {expr}"))?;
            let range: String = c[i + 1..i + end].iter().collect();
            let ok = range == "$__rate_interval"
                || range.split(':').all(|part| {
                    part.is_empty()
                        || (part.len() > 1
                            && part[..part.len() - 1].chars().all(|d| d.is_ascii_digit())
                            && part.ends_with(['s', 'm', 'h', 'd', 'w']))
                });
            if !ok {
                return Err(format!("range [{range}] is not a duration in {expr}"));
            }
            i += end + 1;
        } else if ch == '$' {
            return Err(format!("a variable outside a range in {expr}"));
        } else if ch.is_ascii_digit()
            || (ch == '.' && c.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '.') {
                i += 1;
            }
        } else if ident_start(ch) {
            let start = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let mut next = i;
            while next < c.len() && c[next].is_whitespace() {
                next += 1;
            }
            let paren = c.get(next) == Some(&'(');
            if in_braces {
                refs.labels.insert(word);
            } else if LABEL_LISTS.contains(&word.as_str()) && paren {
                let end = c[next..]
                    .iter()
                    .position(|&x| x == ')')
                    .ok_or_else(|| format!("unclosed label list in {expr}"))?;
                let list: String = c[next + 1..next + end].iter().collect();
                for label in list.split(',').map(str::trim).filter(|l| !l.is_empty()) {
                    if !label.chars().all(ident_char) {
                        return Err(format!("label list ({list}) in {expr}"));
                    }
                    refs.labels.insert(label.to_owned());
                    if word == "by" {
                        refs.by.insert(label.to_owned());
                    }
                }
                i = next + end + 1;
            } else if paren
                || AGGREGATIONS.contains(&word.as_str())
                || KEYWORDS.contains(&word.to_ascii_lowercase().as_str())
            {
                // A function, an aggregation or an operator keyword.
            } else {
                refs.names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    if refs.names.is_empty() {
        return Err(format!("no metric in {expr}"));
    }
    Ok(refs)
}

/// Checks every name and label of `expr` against `known`; returns the labels a template may
/// use: the `by` labels when the expression aggregates, else its families' and the target's.
pub(super) fn check_expr(
    expr: &str,
    known: &BTreeMap<String, Vec<String>>,
) -> Result<BTreeSet<String>, String> {
    let refs = scan(expr)?;
    let mut allowed: BTreeSet<String> = TARGET_LABELS.iter().map(|l| (*l).to_owned()).collect();
    for name in &refs.names {
        let family = if known.contains_key(name) {
            name.as_str()
        } else {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|b| HISTOGRAMS.contains(b)))
                .filter(|b| known.contains_key(*b))
                .ok_or_else(|| {
                    format!("{name} is no registered metric family nor a histogram's series (in {expr})")
                })?;
            if name.ends_with("_bucket") {
                allowed.insert("le".to_owned());
            }
            base
        };
        allowed.extend(known[family].iter().cloned());
    }
    if let Some(l) = refs.labels.iter().find(|l| !allowed.contains(*l)) {
        return Err(format!(
            "label {l} is on none of {:?} (in {expr})",
            refs.names
        ));
    }
    Ok(if refs.by.is_empty() { allowed } else { refs.by })
}

/// The label names a `{{ ... }}` template uses: `$labels.x` in alert annotations, `x` in
/// Grafana legends.
pub(super) fn template_labels(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in text.split("{{").skip(1) {
        let inner = part.split("}}").next().unwrap_or_default().trim();
        let name = inner.strip_prefix("$labels.").unwrap_or(inner);
        if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push(name.to_owned());
        } else if let Some(rest) = inner.strip_prefix("$labels.") {
            out.push(rest.to_owned());
        }
    }
    out
}
