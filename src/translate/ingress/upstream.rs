//! The ingress-nginx annotations about how the backends of an Ingress are spoken to and
//! chosen: `backend-protocol` (HTTP, HTTPS, GRPC, GRPCS, H2C), backend TLS (`proxy-ssl-secret`,
//! `proxy-ssl-verify`, `proxy-ssl-name`, `proxy-ssl-server-name`) and `upstream-hash-by`. They
//! describe the Service ports the Ingress reaches, so [`apply`] writes them where the table
//! keeps them for a Service port: HTTP/2 (GRPC, GRPCS, H2C) as the port's `appProtocol:
//! kubernetes.io/h2c` in the working snapshot, the hash as the Service's `edgeplane.io/
//! load-balancer: consistent-hash` and `edgeplane.io/hash-on`, TLS (HTTPS, GRPCS) as a
//! BackendTLSPolicy made for the Ingress
//! ([`is_made`]: no object, no status) that resolves like any other. As in ingress-nginx, the
//! backend's certificate is checked only with `proxy-ssl-verify: "on"`, against the `ca.crt`
//! of `proxy-ssl-secret`; otherwise any certificate is accepted ([`unverified`]). The Secret's
//! `tls.crt`/`tls.key`, when it has them, are presented to the backend either way
//! ([`presented_secret`]). Pure.

use std::sync::Arc;

use gateway_api::apis::standard::backendtlspolicies::BackendTlsPolicy;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};

use crate::kinds::ingress::NGINX_PREFIX;
use crate::snapshot::{find_named, is_named, namespace_of, Snapshot};
use crate::table::Certificate;
use crate::translate::backends::endpoints::{HASH_ON_ANNOTATION, LOAD_BALANCER_ANNOTATION};
pub use crate::translate::backends::tls::{
    client_certificate as presented_secret, is_made, unverified, MADE_PREFIX,
};
use crate::translate::backends::tls::{CLIENT_CERTIFICATE, UNVERIFIED};

/// The annotations this module reads.
pub const NAMES: &[&str] = &[
    "upstream-hash-by",
    "backend-protocol",
    "proxy-ssl-secret",
    "proxy-ssl-verify",
    "proxy-ssl-name",
    "proxy-ssl-server-name",
];

/// The `edgeplane.io/load-balancer` value of consistent hashing.
const HASH: &str = "consistent-hash";

/// The `appProtocol` the table speaks HTTP/2 without TLS negotiation to (and over TLS with it).
const H2C: &str = "kubernetes.io/h2c";

/// `backend-protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http,
    Https,
    Grpc,
    Grpcs,
    H2c,
}

impl Protocol {
    fn parse(value: &str) -> Option<Self> {
        Some(match value.trim().to_ascii_uppercase().as_str() {
            "HTTP" => Self::Http,
            "HTTPS" => Self::Https,
            "GRPC" => Self::Grpc,
            "GRPCS" => Self::Grpcs,
            "H2C" => Self::H2c,
            _ => return None,
        })
    }

    /// Whether the backend is reached over TLS.
    pub fn tls(self) -> bool {
        matches!(self, Self::Https | Self::Grpcs)
    }

    /// Whether the backend speaks HTTP/2.
    pub fn http2(self) -> bool {
        matches!(self, Self::Grpc | Self::Grpcs | Self::H2c)
    }
}

/// What these annotations of one Ingress ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Upstream {
    pub protocol: Option<Protocol>,
    /// `proxy-ssl-verify: "on"`.
    pub verify: bool,
    /// The Secret of `proxy-ssl-secret` (in the Ingress's namespace), whose `ca.crt` is
    /// trusted and whose `tls.crt`/`tls.key` are presented; `None` when it names none usable.
    pub secret: Option<String>,
    /// `proxy-ssl-name`: the name sent as SNI and checked in the certificate.
    pub name: Option<String>,
    /// `upstream-hash-by` as an `edgeplane.io/hash-on` value (`source-ip`, `header:NAME`,
    /// `cookie:NAME`, `query:NAME`, `path`, `path-and-query`).
    pub hash: Option<String>,
}

/// The `edgeplane.io/hash-on` form of an nginx variable, when it is one alone that the
/// consistent hash can read.
fn hash_on(value: &str) -> Option<String> {
    let v = value.trim();
    match v {
        "$remote_addr" | "$binary_remote_addr" => return Some("source-ip".to_owned()),
        "$uri" | "$document_uri" => return Some("path".to_owned()),
        "$request_uri" => return Some("path-and-query".to_owned()),
        _ => {}
    }
    let valid = |n: &str| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    if let Some(n) = v.strip_prefix("$http_").filter(|n| valid(n)) {
        // nginx's `$http_x_user` is the header `X-User`.
        return Some(format!(
            "header:{}",
            n.replace('_', "-").to_ascii_lowercase()
        ));
    }
    if let Some(n) = v.strip_prefix("$cookie_").filter(|n| valid(n)) {
        return Some(format!("cookie:{n}"));
    }
    v.strip_prefix("$arg_")
        .filter(|n| valid(n))
        .map(|n| format!("query:{n}"))
}

fn report(problems: &mut Vec<String>, name: &str, value: &str, why: &str) {
    problems.push(format!(
        "annotation {NGINX_PREFIX}{name}: {value:?} is {why}"
    ));
}

fn on_off(value: &str) -> Option<bool> {
    match value.trim() {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    }
}

impl Upstream {
    /// Reads the annotations of [`NAMES`] of an Ingress in `namespace`; what cannot be
    /// honoured goes to `problems`.
    pub fn read<'a>(
        get: &dyn Fn(&str) -> Option<&'a str>,
        namespace: &str,
        problems: &mut Vec<String>,
    ) -> Self {
        let mut out = Self::default();
        if let Some(v) = get("backend-protocol") {
            match Protocol::parse(v) {
                Some(p) => out.protocol = Some(p),
                None => report(
                    problems,
                    "backend-protocol",
                    v,
                    "not one of HTTP, HTTPS, GRPC, GRPCS, H2C (HTTP is used)",
                ),
            }
        }
        let tls = out.protocol.is_some_and(Protocol::tls);
        if let Some(v) = get("upstream-hash-by") {
            match hash_on(v) {
                Some(on) => out.hash = Some(on),
                None => report(
                    problems,
                    "upstream-hash-by",
                    v,
                    "not served: only one of $remote_addr, $http_<name>, $cookie_<name>, \
                     $arg_<name> is ($request_uri and combinations have no hash key here) \
                     (not applied)",
                ),
            }
        }
        for name in &NAMES[2..] {
            let Some(v) = get(name) else { continue };
            if !tls {
                report(
                    problems,
                    name,
                    v,
                    "ignored without backend-protocol HTTPS or GRPCS",
                );
                continue;
            }
            match *name {
                "proxy-ssl-verify" => match on_off(v) {
                    Some(b) => out.verify = b,
                    None => report(problems, name, v, "not on or off (off is used)"),
                },
                "proxy-ssl-server-name" => match on_off(v) {
                    Some(true) => {}
                    Some(false) => report(
                        problems,
                        name,
                        v,
                        "not applied: the name is always sent as SNI over TLS to backends",
                    ),
                    None => report(problems, name, v, "not on or off (ignored)"),
                },
                "proxy-ssl-name" => match super::annotations::hostname(v) {
                    Ok(h) => out.name = Some(h),
                    Err(why) => report(problems, name, v, &format!("{why} (ignored)")),
                },
                _ => {
                    let v = v.trim();
                    match v.split_once('/') {
                        None if !v.is_empty() => out.secret = Some(v.to_owned()),
                        Some((ns, s)) if ns == namespace && !s.is_empty() => {
                            out.secret = Some(s.to_owned());
                        }
                        _ => report(
                            problems,
                            name,
                            v,
                            "not a Secret of the Ingress's namespace (only those are read)",
                        ),
                    }
                }
            }
        }
        if out.verify && out.secret.is_none() {
            problems.push(format!(
                "annotation {NGINX_PREFIX}proxy-ssl-verify: \"on\" needs a usable proxy-ssl-secret: \
                 the backend is answered 502"
            ));
        }
        out
    }
}

/// The `(Service, port)` of each Service backend of `ingress` (ports given by number).
fn backends(ingress: &Ingress) -> Vec<(String, i32)> {
    let Some(spec) = ingress.spec.as_ref() else {
        return Vec::new();
    };
    let paths = spec
        .rules
        .iter()
        .flatten()
        .flat_map(|r| r.http.iter().flat_map(|h| h.paths.iter()))
        .map(|p| &p.backend);
    let mut out: Vec<(String, i32)> = spec
        .default_backend
        .iter()
        .chain(paths)
        .filter_map(|b| {
            let s = b.service.as_ref()?;
            Some((s.name.clone(), s.port.as_ref()?.number?))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Applies `wanted`, what the annotations of `ingress` (a prepared copy) ask for, as
/// [`Upstream::read`] read them, to `out`, the snapshot being prepared: its HTTP/2 backends'
/// Service ports get `appProtocol: kubernetes.io/h2c`, and its TLS backends a made
/// BackendTLSPolicy. What cannot be applied goes to `problems`.
pub fn apply(out: &mut Snapshot, ingress: &Ingress, wanted: &Upstream, problems: &mut Vec<String>) {
    if wanted.protocol.is_none() && wanted.hash.is_none() {
        return;
    }
    let protocol = wanted.protocol.unwrap_or(Protocol::Http);
    let ns = namespace_of(&ingress.metadata).to_owned();
    let mut targets: Vec<Value> = Vec::new();
    for (service, port) in backends(ingress) {
        let Some(svc) = out
            .services
            .iter_mut()
            .find(|s| is_named(&s.metadata, &ns, &service))
        else {
            continue;
        };
        if let Some(hash) = &wanted.hash {
            set_hash(svc, hash, problems);
        }
        let Some(index) = svc
            .spec
            .iter()
            .flat_map(|s| s.ports.iter().flatten())
            .position(|p| p.port == port)
        else {
            continue;
        };
        let current = svc
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_ref()?.get(index)?.app_protocol.clone());
        if protocol.http2() && current.as_deref() != Some(H2C) {
            let plain = matches!(current.as_deref(), None | Some("http" | "https" | "HTTPS"));
            if plain {
                let port_spec = Arc::make_mut(svc)
                    .spec
                    .as_mut()
                    .and_then(|s| s.ports.as_mut()?.get_mut(index));
                if let Some(p) = port_spec {
                    p.app_protocol = Some(H2C.to_owned());
                }
            } else {
                problems.push(format!(
                    "annotation {NGINX_PREFIX}backend-protocol: Service {ns}/{service} port {port} \
                     has appProtocol {:?}, which is kept (HTTP/2 is not spoken to it)",
                    current.unwrap_or_default()
                ));
            }
        }
        if protocol.tls() {
            let section = svc
                .spec
                .as_ref()
                .and_then(|s| s.ports.as_ref()?.get(index)?.name.clone());
            let mut target = json!({"group": "", "kind": "Service", "name": service});
            if let Some(s) = section {
                target["sectionName"] = json!(s);
            }
            if !targets.contains(&target) {
                targets.push(target);
            }
        }
    }
    if targets.is_empty() {
        return;
    }
    let client_cert = wanted
        .secret
        .as_deref()
        .and_then(|secret| client_certificate(out, &ns, secret, wanted.verify, problems));
    let name = ingress.metadata.name.clone().unwrap_or_default();
    if let Some(policy) = made_policy(&ns, &name, wanted, client_cert, targets) {
        out.backend_tls_policies.push(Arc::new(policy));
    }
}

/// The Secret `ns/secret` when its client certificate (`tls.crt`, `tls.key`) is to be
/// presented to the backends: it holds either key. One that cannot be used (a key missing, PEM
/// that does not parse, a key of another certificate) is reported here, and the made policy
/// then answers 502 (the translator parses the Secret once for the table). A Secret that is
/// not there is reported too: with `verify` its backends answer 502 (no CA to check against),
/// without it they are reached presenting no certificate.
fn client_certificate(
    out: &Snapshot,
    ns: &str,
    secret: &str,
    verify: bool,
    problems: &mut Vec<String>,
) -> Option<String> {
    let found = find_named(&out.secrets, ns, secret);
    let Some(found) = found else {
        let outcome = match verify {
            true => "the backend is answered 502",
            false => "no client certificate is presented to the backend",
        };
        problems.push(format!(
            "annotation {NGINX_PREFIX}proxy-ssl-secret: Secret {ns}/{secret} not found: {outcome}"
        ));
        return None;
    };
    let data = found.data.as_ref()?;
    let field = |k: &str| {
        data.get(k)
            .map(|b| b.0.as_slice())
            .filter(|b| !b.is_empty())
    };
    let (crt, key) = (field("tls.crt"), field("tls.key"));
    if crt.is_none() && key.is_none() {
        return None;
    }
    let why = match (crt, key) {
        (Some(crt), Some(key)) => Certificate::from_pem(String::new(), crt, key)
            .err()
            .map(|e| e.to_string()),
        (None, _) => Some("it has tls.key but no tls.crt".to_owned()),
        (_, None) => Some("it has tls.crt but no tls.key".to_owned()),
    };
    if let Some(why) = why {
        problems.push(format!(
            "annotation {NGINX_PREFIX}proxy-ssl-secret: Secret {ns}/{secret} has no usable client \
             certificate ({why}): the backend is answered 502"
        ));
    }
    Some(secret.to_owned())
}

/// Makes `svc` balance by the consistent hash of `hash` (an `edgeplane.io/hash-on` value),
/// unless it already balances otherwise (kept, reported).
fn set_hash(svc: &mut Arc<Service>, hash: &str, problems: &mut Vec<String>) {
    let notes = svc.metadata.annotations.as_ref();
    let get = |k: &str| notes.and_then(|a| a.get(k)).map(|v| v.trim().to_owned());
    let algorithm = get(LOAD_BALANCER_ANNOTATION);
    let on = get(HASH_ON_ANNOTATION);
    if algorithm.as_deref() == Some(HASH) && on.as_deref() == Some(hash) {
        return;
    }
    if algorithm.is_some() {
        problems.push(format!(
            "annotation {NGINX_PREFIX}upstream-hash-by: Service {}/{} balances by its own \
             {LOAD_BALANCER_ANNOTATION} annotation, which is kept",
            namespace_of(&svc.metadata),
            svc.metadata.name.as_deref().unwrap_or("")
        ));
        return;
    }
    let notes = Arc::make_mut(svc)
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    notes.insert(LOAD_BALANCER_ANNOTATION.to_owned(), HASH.to_owned());
    notes.insert(HASH_ON_ANNOTATION.to_owned(), hash.to_owned());
}

/// The TrafficPolicy `loadBalancer` of an `edgeplane.io/hash-on` value, for `convert`.
pub fn load_balancer(hash: &str) -> Value {
    let key = match hash.split_once(':') {
        Some(("header", n)) => json!({"header": n}),
        Some(("cookie", n)) => json!({"cookie": n}),
        Some(("query", n)) => json!({"queryParameter": n}),
        _ if hash == "path" => json!({"path": true}),
        _ if hash == "path-and-query" => json!({"pathAndQuery": true}),
        _ => json!({"sourceIp": true}),
    };
    json!({"algorithm": "ConsistentHash", "hash": key})
}

/// The Services (names, in the Ingress's namespace) of `ingress`'s backends.
pub fn services(ingress: &Ingress) -> Vec<String> {
    let mut out: Vec<String> = backends(ingress).into_iter().map(|(s, _)| s).collect();
    out.dedup();
    out
}

/// The BackendTLSPolicy of an Ingress `ns/name` with these annotations, for `targets`.
fn made_policy(
    ns: &str,
    name: &str,
    wanted: &Upstream,
    client_cert: Option<String>,
    targets: Vec<Value>,
) -> Option<BackendTlsPolicy> {
    let mut validation = json!({"hostname": hostname(ns, wanted, &targets)});
    let mut metadata = json!({"name": format!("{MADE_PREFIX}{name}"), "namespace": ns});
    if let Some(secret) = client_cert {
        metadata["annotations"] = json!({CLIENT_CERTIFICATE: secret});
    }
    if wanted.verify {
        // A Secret no name can be: the policy is unusable and its backends answer 502.
        let secret = wanted
            .secret
            .as_deref()
            .unwrap_or("unservable/proxy-ssl-secret");
        validation["caCertificateRefs"] = json!([{"group": "", "kind": "Secret", "name": secret}]);
    } else {
        metadata["annotations"][UNVERIFIED] = json!("true");
    }
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
        "metadata": metadata,
        "spec": {"targetRefs": targets, "validation": validation},
    }))
    .ok()
}

/// `proxy-ssl-name`, else the first Service's cluster name `<service>.<namespace>.svc`.
fn hostname(ns: &str, wanted: &Upstream, targets: &[Value]) -> String {
    wanted.name.clone().unwrap_or_else(|| {
        let service = targets
            .first()
            .and_then(|t| t["name"].as_str())
            .unwrap_or("backend");
        format!("{service}.{ns}.svc")
    })
}

/// The spec of the BackendTLSPolicy `convert` writes for a made policy: the same, when
/// Gateway API can say it (the certificate is verified); `None` otherwise.
pub fn convertible(policy: &BackendTlsPolicy) -> Option<Value> {
    if unverified(policy) {
        return None;
    }
    serde_json::to_value(&policy.spec).ok()
}

#[cfg(test)]
#[path = "upstream_tests.rs"]
mod tests;
