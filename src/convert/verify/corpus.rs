//! The request corpus `convert ingress --verify` replays: generated from the Ingresses alone
//! (each host, and a sample of what a wildcard TLS host covers, x path x method, plus the
//! variants a path's match type is tested by: a trailing slash, upper case, a segment deeper,
//! a run past a segment boundary, regex characters dropped; canary headers and cookies; gRPC
//! calls for gRPC backends). Apart from the replay because what is asked is chosen without
//! looking at either table, so neither side can shape the questions. Pure.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::Ingress;
use serde::Serialize;

use crate::kinds::ingress::NGINX_PREFIX;
use crate::translate::ingress::passthrough;

/// The host sent for Ingress rules without one.
const ANY_HOST_SAMPLE: &str = "any-host.invalid";

/// One replayed request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Request {
    pub scheme: &'static str,
    pub method: String,
    pub host: String,
    pub path: String,
    /// `(name, value)` pairs, names in lower case.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}://{}{}",
            self.method, self.scheme, self.host, self.path
        )?;
        for (n, v) in &self.headers {
            write!(f, " [{n}: {v}]")?;
        }
        Ok(())
    }
}

/// The requests generated from `ingresses` (prepared copies), sorted, each once.
pub fn corpus(ingresses: &[Arc<Ingress>]) -> Vec<Request> {
    // TLS hosts, and the hosts passed through (`ssl-passthrough`): HTTPS requests too.
    let tls: BTreeSet<String> = ingresses
        .iter()
        .flat_map(|i| i.spec.iter().flat_map(|s| s.tls.iter().flatten()))
        .flat_map(|t| t.hosts.iter().flatten().cloned())
        .chain(
            ingresses
                .iter()
                .flat_map(|i| passthrough::targets(i).0)
                .map(|t| t.host),
        )
        .collect();
    let mut out = BTreeSet::new();
    for ingress in ingresses {
        let notes = ingress.metadata.annotations.clone().unwrap_or_default();
        let note = |n: &str| notes.get(&format!("{NGINX_PREFIX}{n}")).cloned();
        let mut extra: Vec<(String, String)> = Vec::new();
        if let Some(h) = note("canary-by-header") {
            let v = note("canary-by-header-value").unwrap_or_else(|| "always".to_owned());
            extra.push((h.to_ascii_lowercase(), v));
        }
        if let Some(c) = note("canary-by-cookie") {
            extra.push(("cookie".to_owned(), format!("{c}=always")));
        }
        // A gRPC backend answers gRPC calls: those are replayed for it.
        let grpc = crate::convert::grpc::asks_grpc(ingress);
        let Some(spec) = ingress.spec.as_ref() else {
            continue;
        };
        let mut pairs: Vec<(String, String)> = Vec::new();
        for rule in spec.rules.iter().flatten() {
            let host = rule.host.clone().unwrap_or_else(|| "*".to_owned());
            pairs.push((host.clone(), "/".to_owned()));
            for p in rule.http.iter().flat_map(|h| h.paths.iter()) {
                pairs.push((
                    host.clone(),
                    p.path.clone().unwrap_or_else(|| "/".to_owned()),
                ));
            }
        }
        if spec.default_backend.is_some() && pairs.is_empty() {
            pairs.push(("*".to_owned(), "/".to_owned()));
        }
        for (rule_host, path) in pairs {
            // A wildcard's TLS hosts are served through their own listeners.
            let mut hosts = vec![sample_host(&rule_host)];
            if rule_host.starts_with("*.") {
                hosts.extend(
                    tls.iter()
                        .filter(|t| !t.starts_with('*'))
                        .filter(|t| crate::convert::names::covers(Some(&rule_host), t))
                        .cloned(),
                );
            }
            for host in hosts {
                let https = tls
                    .iter()
                    .any(|t| crate::convert::names::covers(Some(t), &host));
                let schemes: &[&'static str] = if https { &["http", "https"] } else { &["http"] };
                for scheme in schemes {
                    if grpc {
                        for call in grpc_calls(&path) {
                            out.insert(request(scheme, "POST", &host, &call, vec![grpc_type()]));
                            for header in &extra {
                                let headers = vec![grpc_type(), header.clone()];
                                out.insert(request(scheme, "POST", &host, &call, headers));
                            }
                        }
                        continue;
                    }
                    for variant in variants(&path) {
                        for method in ["GET", "POST"] {
                            out.insert(request(scheme, method, &host, &variant, Vec::new()));
                        }
                    }
                    for header in &extra {
                        out.insert(request(scheme, "GET", &host, &path, vec![header.clone()]));
                    }
                }
            }
        }
    }
    out.into_iter().collect()
}

fn request(
    scheme: &'static str,
    method: &str,
    host: &str,
    path: &str,
    headers: Vec<(String, String)>,
) -> Request {
    Request {
        scheme,
        method: method.to_owned(),
        host: host.to_owned(),
        path: path.to_owned(),
        headers,
    }
}

/// A host name a request can carry for an Ingress host (`*` and wildcards filled in).
fn sample_host(host: &str) -> String {
    match host {
        "*" => ANY_HOST_SAMPLE.to_owned(),
        h => match h.strip_prefix("*.") {
            Some(rest) => format!("sample.{rest}"),
            None => h.to_owned(),
        },
    }
}

/// The `content-type` header of a gRPC call.
fn grpc_type() -> (String, String) {
    ("content-type".to_owned(), "application/grpc".to_owned())
}

/// The gRPC calls replayed for one path of a gRPC Ingress: the call it names
/// (`/pkg.Service/Method`), a method of the service it names (`/pkg.Service/Call`), a call
/// of another service, and its literal form for a path that is neither.
fn grpc_calls(path: &str) -> Vec<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let mut out = vec!["/sample.Other/Call".to_owned()];
    match parts.as_slice() {
        [] => {}
        [service] => out.push(format!("/{service}/Call")),
        [service, method] => {
            out.push(format!("/{service}/{method}"));
            out.push(format!("/{service}/Call"));
        }
        _ => out.push(path.to_owned()),
    }
    out
}

/// The edge cases of one Ingress path.
fn variants(path: &str) -> Vec<String> {
    let mut out = vec![path.to_owned()];
    let literal: String = path
        .chars()
        .filter(|c| !"^$()[]{}*+?|\\".contains(*c))
        .collect();
    let base = if literal.starts_with('/') {
        literal
    } else {
        format!("/{literal}")
    };
    if base != path {
        out.push(base.clone());
    }
    if base.len() > 1 && base.ends_with('/') {
        out.push(base.trim_end_matches('/').to_owned());
    } else {
        out.push(format!("{base}/"));
    }
    out.push(base.to_ascii_uppercase());
    out.push(format!("{}/deeper", base.trim_end_matches('/')));
    if base != "/" {
        out.push(format!("{}x", base.trim_end_matches('/')));
    }
    out.sort();
    out.dedup();
    out
}
