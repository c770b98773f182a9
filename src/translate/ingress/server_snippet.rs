//! `server-snippet` at server level, as ingress-nginx places it: in the nginx `server` of a
//! host, so its header directives apply to every path of the host (of every Ingress of the
//! class), taken from the oldest Ingress of the host that sets it (later ones are reported).
//! [`apply`] writes each host's snippet into an annotation of the working copy
//! ([`SERVER_SNIPPETS`]), which the lowering reads per host. With `--no-ingress-quirk
//! server-annotations-from-oldest` nothing is written and each Ingress's snippet covers its own
//! paths only. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::Ingress;

use crate::kinds::ingress::NGINX_PREFIX;
use crate::snapshot::namespace_of;
use crate::translate::common::precedence;
use crate::translate::ingress::canary::is_canary;
use crate::translate::ingress::headers::{snippet, HeaderEdits};
use crate::translate::ingress::ANY_HOST;

/// Annotation [`apply`] sets on its working copy of an Ingress: per host of the Ingress, the
/// text of the host's server-level `server-snippet`, as a JSON object. Its presence means the
/// Ingress's own `server-snippet` applies through it only. A value an Ingress carries itself is
/// replaced.
pub const SERVER_SNIPPETS: &str = "edgeplane.dev/ingress-server-snippets";

/// Per `(class, host)`: the Ingress (`namespace/name`) giving the host's snippet, and its text.
pub type Snippets = BTreeMap<(String, String), (String, String)>;

fn key(ingress: &Ingress) -> String {
    format!(
        "{}/{}",
        namespace_of(&ingress.metadata),
        ingress.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The hosts of an Ingress's rules (`*` for a rule without host) and of its default backend
/// when it has no rule.
fn hosts_of(ingress: &Ingress) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for rule in ingress.spec.iter().flat_map(|s| s.rules.iter().flatten()) {
        let host = match rule.host.as_deref() {
            Some(h) if !h.is_empty() => h.to_owned(),
            _ => ANY_HOST.to_owned(),
        };
        if !out.contains(&host) {
            out.push(host);
        }
    }
    if out.is_empty() && ingress.spec.iter().any(|s| s.default_backend.is_some()) {
        out.push(ANY_HOST.to_owned());
    }
    out
}

fn own(ingress: &Ingress) -> Option<&str> {
    ingress
        .metadata
        .annotations
        .as_ref()?
        .get(&format!("{NGINX_PREFIX}server-snippet"))
        .map(String::as_str)
}

/// The snippet of each host: from the oldest Ingress of the class naming the host that sets
/// `server-snippet` (canaries never give server-level annotations).
pub fn of<'a>(ingresses: impl Iterator<Item = (&'a str, &'a Ingress)>) -> Snippets {
    let mut all: Vec<(&str, &Ingress)> = ingresses.filter(|(_, i)| !is_canary(i)).collect();
    all.sort_by(|a, b| precedence::of(&a.1.metadata).cmp(&precedence::of(&b.1.metadata)));
    let mut out = Snippets::new();
    for (class, ingress) in all {
        let Some(text) = own(ingress) else { continue };
        for host in hosts_of(ingress) {
            out.entry((class.to_owned(), host))
                .or_insert_with(|| (key(ingress), text.to_owned()));
        }
    }
    out
}

/// Writes [`SERVER_SNIPPETS`] on the working copy `ingress` of `class` (when `from_oldest` and
/// one of its hosts has a snippet);
/// returns what is reported: its own snippet not applied to a host an older Ingress gives the
/// snippet of.
pub fn apply(
    ingress: &mut Ingress,
    class: &str,
    snippets: &Snippets,
    from_oldest: bool,
) -> Vec<String> {
    let notes = ingress
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    notes.remove(SERVER_SNIPPETS);
    if !from_oldest {
        return Vec::new();
    }
    let me = key(ingress);
    let mine = own(ingress).is_some();
    let mut problems = Vec::new();
    let mut hosts = BTreeMap::new();
    for host in hosts_of(ingress) {
        let Some((owner, text)) = snippets.get(&(class.to_owned(), host.clone())) else {
            continue;
        };
        if mine && *owner != me {
            problems.push(format!(
                "annotation {NGINX_PREFIX}server-snippet is not applied to host {host}: \
                 Ingress {owner}, older, gives the host's server-snippet"
            ));
        }
        hosts.insert(host, text.clone());
    }
    if hosts.is_empty() {
        return problems;
    }
    let value = serde_json::to_string(&hosts).unwrap_or_default();
    ingress
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(SERVER_SNIPPETS.to_owned(), value);
    problems
}

/// The header edits of each host's server-level snippet, from [`SERVER_SNIPPETS`] of a
/// working copy; `None` without it (each Ingress's own snippet then applies to its rules).
/// A snippet that is refused adds nothing (the Ingress that sets it reports it).
pub fn read(value: Option<&str>) -> Option<BTreeMap<String, HeaderEdits>> {
    let hosts: BTreeMap<String, String> = serde_json::from_str(value?).ok()?;
    Some(
        hosts
            .into_iter()
            .filter_map(|(host, text)| Some((host, snippet(&text).ok()?)))
            .collect(),
    )
}

#[cfg(test)]
#[path = "server_snippet_tests.rs"]
mod tests;
