//! ingress-nginx canaries: an Ingress annotated `canary: "true"` serves nothing itself; each of
//! its paths sends part of the traffic of the same host and path of a main Ingress (of any
//! namespace) to its own backend, the Service of the canary's namespace. [`fold`] (in `prepare`) moves each canary path onto the main working copy
//! (annotation [`CANARIES`]) and empties the canary's rules; the lowering turns each folded
//! canary into HTTPRoute rules ([`Canary::rules`]): header matches, a `cookie` header regex
//! (Gateway API has no cookie match) and weighted backendRefs, in ingress-nginx's order
//! (header, then cookie, then weight). Pure.

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::kinds::ingress::NGINX_PREFIX;
use crate::snapshot::namespace_of;
use crate::translate::common::precedence;

/// Working-copy annotation of a main Ingress: its canaries, a JSON list of [`Canary`].
pub const CANARIES: &str = "edgeplane.dev/ingress-canaries";

/// ingress-nginx's default `canary-weight-total`.
const WEIGHT_TOTAL: u32 = 100;

/// One canary path folded onto the main Ingress's path of the same host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Canary {
    /// `namespace/name` of the canary Ingress.
    pub from: String,
    pub host: String,
    pub path: String,
    pub backend: IngressBackend,
    #[serde(flatten)]
    pub split: Split,
}

/// How a canary takes its requests (the `canary-*` annotations).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Split {
    /// `canary-by-header`: `always` / `never`, or the value or pattern below.
    pub header: Option<String>,
    /// `canary-by-header-value`: this exact value goes to the canary (others fall through).
    pub header_value: Option<String>,
    /// `canary-by-header-pattern` (when no value): a value it finds goes to the canary.
    pub header_pattern: Option<String>,
    /// `canary-by-cookie`: cookie value `always` / `never`.
    pub cookie: Option<String>,
    /// `canary-weight`, out of `total`.
    pub weight: Option<u32>,
    pub total: u32,
}

/// True when the Ingress is a canary (`canary: "true"`).
pub fn is_canary(ingress: &Ingress) -> bool {
    note(ingress, "canary").map(str::trim) == Some("true")
}

fn note<'a>(ingress: &'a Ingress, name: &str) -> Option<&'a str> {
    ingress
        .metadata
        .annotations
        .as_ref()?
        .get(&format!("{NGINX_PREFIX}{name}"))
        .map(String::as_str)
}

fn number(ingress: &Ingress, name: &str, problems: &mut Vec<String>) -> Option<u32> {
    let v = note(ingress, name)?;
    match v.trim().parse::<u32>() {
        Ok(n) => Some(n),
        Err(_) => {
            problems.push(format!(
                "annotation {NGINX_PREFIX}{name}: {v:?} is not a whole number (ignored)"
            ));
            None
        }
    }
}

impl Split {
    /// Reads the `canary-*` annotations of a canary Ingress; what is invalid is reported.
    pub fn parse(ingress: &Ingress, problems: &mut Vec<String>) -> Self {
        let text = |n: &str| note(ingress, n).map(str::trim).filter(|v| !v.is_empty());
        let mut out = Self {
            header: text("canary-by-header").map(str::to_owned),
            header_value: text("canary-by-header-value").map(str::to_owned),
            header_pattern: text("canary-by-header-pattern").map(str::to_owned),
            cookie: text("canary-by-cookie").map(str::to_owned),
            weight: number(ingress, "canary-weight", problems),
            total: number(ingress, "canary-weight-total", problems)
                .unwrap_or(WEIGHT_TOTAL)
                .max(WEIGHT_TOTAL),
        };
        if let Some(h) = out.header.as_deref() {
            if http::HeaderName::try_from(h).is_err() {
                problems.push(format!(
                    "annotation {NGINX_PREFIX}canary-by-header: {h:?} is not a header name (ignored)"
                ));
                out.header = None;
            }
        }
        if let Some(p) = out.header_pattern.as_deref() {
            if let Err(e) = crate::table::Regex::new(p) {
                problems.push(format!(
                    "annotation {NGINX_PREFIX}canary-by-header-pattern: {p:?} is not a regular expression here: {e} (ignored)"
                ));
                out.header_pattern = None;
            }
        }
        if let Some(c) = out.cookie.as_deref() {
            if !c
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            {
                problems.push(format!(
                    "annotation {NGINX_PREFIX}canary-by-cookie: {c:?} is not a cookie name (ignored)"
                ));
                out.cookie = None;
            }
        }
        out
    }
}

/// One working copy in `prepare`: its class, the copy, what it reports.
pub type Copy<'a> = (&'a str, Ingress, Vec<String>);

/// `(host, path)` of every path of an Ingress (`*` for rules without host).
fn paths(ingress: &Ingress) -> Vec<(String, String, IngressBackend)> {
    let mut out = Vec::new();
    for rule in ingress.spec.iter().flat_map(|s| s.rules.iter().flatten()) {
        let host = rule.host.clone().filter(|h| !h.is_empty());
        for p in rule.http.iter().flat_map(|h| h.paths.iter()) {
            out.push((
                host.clone().unwrap_or_else(|| "*".to_owned()),
                p.path.clone().unwrap_or_else(|| "/".to_owned()),
                p.backend.clone(),
            ));
        }
    }
    out
}

/// Folds every canary working copy into the main copy serving the same host and path (of the
/// same class, in any namespace; the oldest when several do) and leaves the canary without
/// rules.
pub fn fold(copies: &mut [Copy<'_>]) {
    for (_, copy, _) in copies.iter_mut() {
        if let Some(notes) = copy.metadata.annotations.as_mut() {
            notes.remove(CANARIES);
        }
    }
    let mut folded: Vec<(usize, Canary)> = Vec::new();
    for i in 0..copies.len() {
        if !is_canary(&copies[i].1) {
            continue;
        }
        let mut problems = Vec::new();
        let split = Split::parse(&copies[i].1, &mut problems);
        let others = copies[i].1.metadata.annotations.iter().flatten();
        for (key, _) in others.filter(|(k, _)| {
            k.strip_prefix(NGINX_PREFIX)
                .is_some_and(|n| n != "canary" && !n.starts_with("canary-"))
        }) {
            problems.push(format!(
                "annotation {key} is not applied on a canary Ingress (the main Ingress's annotations apply)"
            ));
        }
        let (class, canary, _) = &copies[i];
        let ns = namespace_of(&canary.metadata).to_owned();
        let from = format!(
            "{ns}/{}",
            canary.metadata.name.as_deref().unwrap_or_default()
        );
        for (host, path, backend) in paths(canary) {
            // ingress-nginx merges a canary into the location of its host and path, whichever
            // namespace holds it: the oldest Ingress's (its Ingresses are sorted by age).
            let main = (0..copies.len())
                .filter(|&j| {
                    let (c, m, _) = &copies[j];
                    c == class
                        && !is_canary(m)
                        && paths(m).iter().any(|(h, p, _)| *h == host && *p == path)
                })
                .min_by_key(|&j| precedence::of(&copies[j].1.metadata));
            match main {
                Some(j) if !folded.iter().any(|(k, c)| *k == j && c.host == host && c.path == path) => {
                    folded.push((
                        j,
                        Canary {
                            from: from.clone(),
                            host,
                            path,
                            backend,
                            split: split.clone(),
                        },
                    ));
                }
                Some(_) => problems.push(format!(
                    "canary path {host}{path}: another canary already serves it (ignored; one canary per path, as ingress-nginx)"
                )),
                None => problems.push(format!(
                    "canary path {host}{path}: no Ingress of the class serves it (ignored)"
                )),
            }
        }
        let copy = &mut copies[i];
        if let Some(spec) = copy.1.spec.as_mut() {
            if spec.default_backend.take().is_some() {
                problems.push("the defaultBackend of a canary Ingress is not served".to_owned());
            }
            spec.rules = None;
        }
        copy.2.extend(problems);
    }
    for (j, canary) in folded {
        let notes = copies[j]
            .1
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        let mut list: Vec<Canary> = notes
            .get(CANARIES)
            .and_then(|v| serde_json::from_str(v).ok())
            .unwrap_or_default();
        list.push(canary);
        notes.insert(CANARIES.to_owned(), json!(list).to_string());
    }
}

/// The canaries folded onto a main working copy.
pub fn of(ingress: &Ingress) -> Vec<Canary> {
    ingress
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CANARIES))
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// A regex matching a `Cookie` header value that holds `name=value`.
fn cookie_pattern(name: &str, value: &str) -> String {
    format!("(?:.*;\\s*)?{}={value}(?:\\s*;.*)?", ::regex::escape(name))
}

impl Canary {
    /// The namespace of the canary Ingress, where its Service is.
    pub fn namespace(&self) -> &str {
        self.from.split_once('/').map_or("", |(ns, _)| ns)
    }

    /// The rules before the main path's own rule, each as `(header match, to canary)`: the
    /// header's, then the cookie's, as ingress-nginx decides (a header `never` or cookie
    /// `never` keeps the main backend; a header value that is not the configured one falls
    /// through to the cookie and the weight).
    pub fn rules(&self) -> Vec<(Value, bool)> {
        let s = &self.split;
        let mut out = Vec::new();
        if let Some(h) = &s.header {
            let exact = |v: &str| json!({"name": h, "type": "Exact", "value": v});
            if let Some(v) = &s.header_value {
                out.push((exact(v), true));
            } else if let Some(p) = &s.header_pattern {
                // ngx.re.match finds the pattern anywhere in the value.
                let value = format!(".*(?:{p}).*");
                out.push((
                    json!({"name": h, "type": "RegularExpression", "value": value}),
                    true,
                ));
            } else {
                out.push((exact("always"), true));
                out.push((exact("never"), false));
            }
        }
        if let Some(c) = &s.cookie {
            for (value, to_canary) in [("always", true), ("never", false)] {
                let m = json!({"name": "cookie", "type": "RegularExpression",
                               "value": cookie_pattern(c, value)});
                out.push((m, to_canary));
            }
        }
        out
    }

    /// `(main, canary)` weights of the main path's rule; `None` without `canary-weight`.
    pub fn weights(&self) -> Option<(u32, u32)> {
        let w = self.split.weight?.min(self.split.total);
        Some((self.split.total - w, w))
    }
}

#[cfg(test)]
#[path = "canary_tests.rs"]
mod tests;
