//! `server-alias`, ingress-nginx's server-level annotation: more names for a host's server, so
//! every path of the host (of every Ingress of the class) also serves the aliases. As in
//! ingress-nginx the oldest Ingress of a host that sets it gives the host's aliases (later ones
//! are reported), and an alias that is a host of an Ingress of the class is dropped. With
//! `--no-ingress-quirk server-annotations-from-oldest` each Ingress's aliases cover its own
//! paths only. [`apply`] adds the alias rules to the working copy, so the lowering and
//! `convert` see plain Ingress rules. Pure.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::networking::v1::Ingress;

use crate::kinds::ingress::NGINX_PREFIX;
use crate::snapshot::namespace_of;
use crate::translate::common::precedence;
use crate::translate::ingress::canary::is_canary;

/// Per `(class, host)`: the Ingress (`namespace/name`) giving its aliases, and the aliases.
pub type Aliases = BTreeMap<(String, String), (String, Vec<String>)>;

fn key(ingress: &Ingress) -> String {
    format!(
        "{}/{}",
        namespace_of(&ingress.metadata),
        ingress.metadata.name.as_deref().unwrap_or_default()
    )
}

fn hosts_of(ingress: &Ingress) -> Vec<String> {
    let mut out: Vec<String> = ingress
        .spec
        .iter()
        .flat_map(|s| s.rules.iter().flatten())
        .filter_map(|r| r.host.clone().filter(|h| !h.is_empty()))
        .collect();
    out.dedup();
    out
}

/// The valid names of an Ingress's `server-alias` (comma-separated host names, `*.` allowed).
fn own(ingress: &Ingress) -> Vec<String> {
    let Some(value) = ingress
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&format!("{NGINX_PREFIX}server-alias")))
    else {
        return Vec::new();
    };
    // One invalid name refuses the annotation (reported by `annotations`).
    let names: Vec<String> = value
        .split(',')
        .map(|a| a.trim().to_ascii_lowercase())
        .filter(|a| !a.is_empty())
        .collect();
    if names.iter().all(|a| valid(a)) {
        names
    } else {
        Vec::new()
    }
}

/// A host name, or `*.` and a host name.
pub fn valid(alias: &str) -> bool {
    let name = alias.strip_prefix("*.").unwrap_or(alias);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// The aliases of each host: from the oldest Ingress of the class naming the host that sets
/// `server-alias` (canaries never do), without the hosts of the class's Ingresses.
pub fn of<'a>(ingresses: impl Iterator<Item = (&'a str, &'a Ingress)>) -> Aliases {
    let mut all: Vec<(&str, &Ingress)> = ingresses.filter(|(_, i)| !is_canary(i)).collect();
    all.sort_by(|a, b| precedence::of(&a.1.metadata).cmp(&precedence::of(&b.1.metadata)));
    let hosts: BTreeSet<(&str, String)> = all
        .iter()
        .flat_map(|(c, i)| hosts_of(i).into_iter().map(move |h| (*c, h)))
        .collect();
    let mut out = Aliases::new();
    for (class, ingress) in all {
        let names = own(ingress);
        if names.is_empty() {
            continue;
        }
        for host in hosts_of(ingress) {
            let kept: Vec<String> = names
                .iter()
                .filter(|a| **a != host && !hosts.contains(&(class, (*a).clone())))
                .cloned()
                .collect();
            out.entry((class.to_owned(), host))
                .or_insert_with(|| (key(ingress), kept));
        }
    }
    out
}

/// Adds to the working copy `ingress` of `class`, after each rule of a host with aliases, the
/// same rule for each alias; returns what is reported (aliases not used).
pub fn apply(
    ingress: &mut Ingress,
    class: &str,
    aliases: &Aliases,
    from_oldest: bool,
) -> Vec<String> {
    let me = key(ingress);
    let names = own(ingress);
    let mut problems = Vec::new();
    let Some(rules) = ingress.spec.as_mut().and_then(|s| s.rules.as_mut()) else {
        return problems;
    };
    let mut out = Vec::with_capacity(rules.len());
    let mut added: Vec<(String, String)> = Vec::new();
    for rule in rules.drain(..) {
        let host = rule.host.clone().filter(|h| !h.is_empty());
        let extra: Vec<String> = match host.as_ref() {
            None => Vec::new(),
            Some(_) if !from_oldest => names.clone(),
            Some(h) => match aliases.get(&(class.to_owned(), h.clone())) {
                Some((owner, list)) => {
                    if *owner != me && !names.is_empty() {
                        problems.push(format!(
                            "annotation {NGINX_PREFIX}server-alias is not applied to host {h}: Ingress {owner}, older, gives its aliases"
                        ));
                    } else if *owner == me && list.len() < names.len() {
                        problems.push(format!(
                            "annotation {NGINX_PREFIX}server-alias: some aliases of host {h} are hosts of Ingresses of the class (dropped)"
                        ));
                    }
                    list.clone()
                }
                None => Vec::new(),
            },
        };
        out.push(rule.clone());
        for alias in extra {
            if let Some(h) = &host {
                added.push((h.clone(), alias.clone()));
            }
            let mut copy = rule.clone();
            copy.host = Some(alias);
            out.push(copy);
        }
    }
    *rules = out;
    add_to_tls(ingress, &added);
    problems.dedup();
    problems
}

/// Adds each alias to the `tls[]` entries listing its host, as ingress-nginx serves a
/// server's certificate for its aliases: the alias gets the host's HTTPS listener and
/// Secret, and `ssl-redirect`, which follow `tls[].hosts`.
fn add_to_tls(ingress: &mut Ingress, added: &[(String, String)]) {
    let entries = ingress.spec.as_mut().and_then(|s| s.tls.as_mut());
    for entry in entries.into_iter().flatten() {
        let Some(hosts) = entry.hosts.as_mut() else {
            continue;
        };
        for (host, alias) in added {
            if hosts.contains(host) && !hosts.contains(alias) {
                hosts.push(alias.clone());
            }
        }
    }
}

/// Working-copy annotation: the `from>to` host pairs of `from-to-www-redirect`.
pub const WWW_REDIRECTS: &str = "edgeplane.dev/ingress-www-redirects";

/// Writes on the working copy its `from-to-www-redirect` pairs: for each host of the copy
/// (not a wildcard) the host with `www.` added or removed, unless `hosts` (every host of the
/// class's Ingresses) has it, as ingress-nginx skips a redirect server that is a server.
pub fn www_redirects(ingress: &mut Ingress, hosts: &BTreeSet<String>) {
    let on = ingress
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&format!("{NGINX_PREFIX}from-to-www-redirect")))
        .is_some_and(|v| v.trim() == "true");
    let pairs: Vec<String> = hosts_of(ingress)
        .into_iter()
        .filter(|h| on && !h.starts_with('*'))
        .filter_map(|to| {
            let from = match to.strip_prefix("www.") {
                Some(bare) => bare.to_owned(),
                None => format!("www.{to}"),
            };
            (!hosts.contains(&from)).then(|| format!("{from}>{to}"))
        })
        .collect();
    let notes = ingress
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    notes.remove(WWW_REDIRECTS);
    if !pairs.is_empty() {
        notes.insert(WWW_REDIRECTS.to_owned(), pairs.join(","));
    }
}

/// The `(from, to)` pairs [`www_redirects`] wrote.
pub fn www_pairs(ingress: &Ingress) -> Vec<(String, String)> {
    let value = ingress
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(WWW_REDIRECTS));
    value
        .into_iter()
        .flat_map(|v| v.split(','))
        .filter_map(|p| p.split_once('>'))
        .map(|(f, t)| (f.to_owned(), t.to_owned()))
        .collect()
}

/// Adds each alias of a host in `forced` (hosts whose paths are regex) to `forced`.
pub fn force_aliases(forced: &mut BTreeSet<(String, String)>, aliases: &Aliases) {
    for ((class, host), (_, list)) in aliases {
        if forced.contains(&(class.clone(), host.clone())) {
            for a in list {
                forced.insert((class.clone(), a.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ingress(name: &str, created: &str, alias: Option<&str>, hosts: &[&str]) -> Ingress {
        let notes = alias.map_or(
            json!({}),
            |a| json!({"nginx.ingress.kubernetes.io/server-alias": a}),
        );
        let rules: Vec<_> = hosts
            .iter()
            .map(|h| {
                json!({"host": h, "http": {"paths": [{"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": name, "port": {"number": 80}}}}]}})
            })
            .collect();
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns",
            "creationTimestamp": created, "annotations": notes}, "spec": {"rules": rules}}))
        .expect("Ingress")
    }

    fn hosts(i: &Ingress) -> Vec<String> {
        i.spec
            .iter()
            .flat_map(|s| s.rules.iter().flatten())
            .filter_map(|r| r.host.clone())
            .collect()
    }

    #[test]
    fn the_oldest_ingress_of_a_host_gives_its_aliases_to_every_ingress_of_the_host() {
        let old = ingress(
            "old",
            "2024-01-01T00:00:00Z",
            Some("a2.test, *.a3.test, b.test"),
            &["a.test"],
        );
        let new = ingress("new", "2025-01-01T00:00:00Z", Some("zz.test"), &["a.test"]);
        let other = ingress("other", "2025-01-01T00:00:00Z", None, &["b.test"]);
        assert!(own(&ingress(
            "bad",
            "2024-01-01T00:00:00Z",
            Some("a.test, bad_name"),
            &[]
        ))
        .is_empty());
        let all = [("k", &new), ("k", &old), ("k", &other)];
        let map = of(all.into_iter());
        assert_eq!(
            map.get(&("k".to_owned(), "a.test".to_owned())),
            Some(&(
                "ns/old".to_owned(),
                vec!["a2.test".to_owned(), "*.a3.test".to_owned()]
            ))
        );
        let mut copy = new.clone();
        let problems = apply(&mut copy, "k", &map, true);
        assert_eq!(hosts(&copy), ["a.test", "a2.test", "*.a3.test"]);
        assert!(
            problems[0].contains("Ingress ns/old, older"),
            "{problems:?}"
        );
        let mut copy = old.clone();
        let problems = apply(&mut copy, "k", &map, true);
        assert_eq!(hosts(&copy), ["a.test", "a2.test", "*.a3.test"]);
        assert!(
            problems[0].contains("are hosts of Ingresses"),
            "{problems:?}"
        );
        let mut copy = other.clone();
        assert!(apply(&mut copy, "k", &map, true).is_empty());
        assert_eq!(hosts(&copy), ["b.test"]);
        // Switched off: each Ingress's own aliases, for its own paths.
        let mut copy = new.clone();
        assert!(apply(&mut copy, "k", &map, false).is_empty());
        assert_eq!(hosts(&copy), ["a.test", "zz.test"]);
        let mut forced = BTreeSet::from([("k".to_owned(), "a.test".to_owned())]);
        force_aliases(&mut forced, &map);
        assert!(forced.contains(&("k".to_owned(), "*.a3.test".to_owned())));
    }

    #[test]
    fn www_redirects_go_both_ways_unless_the_other_name_is_served() {
        let mut i = ingress(
            "w",
            "2024-01-01T00:00:00Z",
            None,
            &["www.a.test", "b.test", "c.test", "*.d.test"],
        );
        i.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(
                format!("{NGINX_PREFIX}from-to-www-redirect"),
                "true".to_owned(),
            );
        let hosts = BTreeSet::from(["www.c.test".to_owned()]);
        www_redirects(&mut i, &hosts);
        let pairs = www_pairs(&i);
        let want = [("a.test", "www.a.test"), ("www.b.test", "b.test")];
        assert_eq!(pairs.len(), 2);
        for (p, (f, t)) in pairs.iter().zip(want) {
            assert_eq!((p.0.as_str(), p.1.as_str()), (f, t));
        }
    }
}
