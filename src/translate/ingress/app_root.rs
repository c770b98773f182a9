//! `app-root` across the Ingresses of a host. ingress-nginx writes each location's `app-root`
//! as a server-level `if ($uri = /) { return 302 ...; }` (its template, before the location),
//! so an Ingress's `app-root` redirects `/` of a host where the Ingress holds a location:
//! one of its paths there that no older Ingress of the class already holds (locations merge
//! by host, path and path type, oldest Ingress first), or the host's default `/` location,
//! which the oldest Ingress with a `Prefix` `/` path there holds, else the oldest Ingress
//! of the host. [`mark`] (in `prepare`) writes on each working copy with `app-root` the hosts
//! where it applies ([`HOSTS`]) and reports the others; the lowering adds the redirect on
//! those hosts only. Pure.

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::json;

use super::annotations::Annotations;
use super::canary::{is_canary, Copy};
use super::ANY_HOST;
use crate::kinds::ingress::NGINX_PREFIX;
use crate::snapshot::namespace_of;
use crate::translate::common::precedence;

/// Working-copy annotation of an Ingress with `app-root`: the hosts where it applies, a JSON
/// list (absent: every host of the Ingress's rules, as for an Ingress alone on its hosts).
pub const HOSTS: &str = "edgeplane.dev/ingress-app-root-hosts";

/// One path of an Ingress: `(host, path, pathType)`.
type Location = (String, String, String);

/// `(host, path, pathType)` of every path of an Ingress (`*` for rules without host, `/`
/// for a path without one), and the hosts of its rules.
fn locations(ingress: &Ingress) -> (Vec<Location>, Vec<String>) {
    let mut paths = Vec::new();
    let mut hosts = Vec::new();
    for rule in ingress.spec.iter().flat_map(|s| s.rules.iter().flatten()) {
        let host = match rule.host.as_deref() {
            Some(h) if !h.is_empty() => h.to_owned(),
            _ => ANY_HOST.to_owned(),
        };
        for p in rule.http.iter().flat_map(|h| h.paths.iter()) {
            let path = p.path.clone().filter(|p| !p.is_empty());
            let path = path.unwrap_or_else(|| "/".to_owned());
            paths.push((host.clone(), path, p.path_type.clone()));
        }
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    (paths, hosts)
}

/// `namespace/name` of an Ingress.
fn label(ingress: &Ingress) -> String {
    format!(
        "{}/{}",
        namespace_of(&ingress.metadata),
        ingress.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Writes [`HOSTS`] on every working copy with `app-root` (the hosts where it holds a
/// location) and reports each host where it does not, naming the older Ingresses holding its
/// paths there. A value of [`HOSTS`] written on an Ingress itself is dropped.
pub fn mark(copies: &mut [Copy<'_>]) {
    for (_, copy, _) in copies.iter_mut() {
        if let Some(notes) = copy.metadata.annotations.as_mut() {
            notes.remove(HOSTS);
        }
    }
    let all: Vec<(&str, Vec<Location>, Vec<String>)> = copies
        .iter()
        .map(|(class, copy, _)| {
            let (paths, hosts) = if is_canary(copy) {
                Default::default()
            } else {
                locations(copy)
            };
            (*class, paths, hosts)
        })
        .collect();
    let older = |i: usize, j: usize| {
        precedence::of(&copies[j].1.metadata) < precedence::of(&copies[i].1.metadata)
    };
    // The oldest of the candidates (indices), by the Ingresses' precedence.
    let oldest = |candidates: Vec<usize>| {
        candidates.into_iter().min_by(|&a, &b| {
            precedence::of(&copies[a].1.metadata).cmp(&precedence::of(&copies[b].1.metadata))
        })
    };
    let mut marks: Vec<(usize, Vec<String>, Vec<String>)> = Vec::new();
    for (i, (class, paths, hosts)) in all.iter().enumerate() {
        let asked = copies[i].1.metadata.annotations.as_ref();
        if !asked.is_some_and(|a| a.contains_key(&format!("{NGINX_PREFIX}app-root"))) {
            continue;
        }
        let notes = Annotations::parse(&copies[i].1);
        if notes.app_root.is_none() || notes.redirects() {
            continue;
        }
        let same_class = |j: usize| all[j].0 == *class;
        let mut applied = Vec::new();
        let mut problems = Vec::new();
        if hosts.is_empty() {
            problems.push(format!(
                "annotation {NGINX_PREFIX}app-root: not applied: the Ingress has no rules \
                 (ingress-nginx keeps no app-root on the catch-all location of a defaultBackend alone)"
            ));
        }
        for host in hosts {
            let root_prefix = |j: usize| {
                all[j]
                    .1
                    .iter()
                    .any(|(h, p, t)| h == host && p == "/" && t == "Prefix")
            };
            let of_host = |j: usize| all[j].2.contains(host);
            let with_root: Vec<usize> = (0..all.len())
                .filter(|&j| same_class(j) && root_prefix(j))
                .collect();
            let root = if with_root.is_empty() {
                oldest(
                    (0..all.len())
                        .filter(|&j| same_class(j) && of_host(j))
                        .collect(),
                )
            } else {
                oldest(with_root)
            };
            let mut held_by = Vec::new();
            let mut holds = root == Some(i);
            for (h, p, t) in paths.iter().filter(|(h, _, _)| h == host) {
                let holder = (0..all.len()).filter(|&j| {
                    same_class(j)
                        && older(i, j)
                        && all[j]
                            .1
                            .iter()
                            .any(|(h2, p2, t2)| h2 == h && p2 == p && t2 == t)
                });
                match oldest(holder.collect()) {
                    Some(j) => held_by.push(format!("{p} by Ingress {}", label(&copies[j].1))),
                    None => holds = true,
                }
            }
            if holds {
                applied.push(host.clone());
                continue;
            }
            if held_by.is_empty() {
                if let Some(j) = root {
                    held_by.push(format!("/ by Ingress {}", label(&copies[j].1)));
                }
            }
            problems.push(format!(
                "annotation {NGINX_PREFIX}app-root: not applied on host {host}: its paths there \
                 are served by older Ingresses ({}), and ingress-nginx redirects `/` only from \
                 the locations an Ingress holds",
                held_by.join(", ")
            ));
        }
        marks.push((i, applied, problems));
    }
    for (i, applied, problems) in marks {
        let copy = &mut copies[i];
        copy.1
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(HOSTS.to_owned(), json!(applied).to_string());
        copy.2.extend(problems);
    }
}

/// The hosts of a prepared Ingress where its `app-root` applies; `None` for an Ingress that
/// was not prepared (every host of its rules then).
pub fn hosts(ingress: &Ingress) -> Option<Vec<String>> {
    let notes = ingress.metadata.annotations.as_ref()?;
    serde_json::from_str(notes.get(HOSTS)?).ok()
}

#[cfg(test)]
#[path = "app_root_tests.rs"]
mod tests;
