//! `ssl-passthrough`: the TLS connections for an Ingress's hosts are not terminated but passed
//! to a backend as they are, chosen by the ClientHello's SNI. As ingress-nginx does, the
//! backend of a host is its root location: the Service port of the Ingress's `/` path for the
//! host, else the Ingress's `defaultBackend`; a host with neither is not passed through. Each
//! host becomes a TLSRoute to that backend ([`routes`]), attached to the serving Gateway's TLS
//! Passthrough listeners: the implicit Gateway gets one per host on port 443 beside its HTTPS
//! listeners (`gateway`), `convert` writes the same listener and TLSRoute. Plain HTTP requests
//! for the hosts keep their rules and annotations, as nginx's server block for the host keeps
//! them; the annotations that act on HTTP are reported as not applied to the passed-through
//! connections. Pure.

use std::collections::BTreeMap;

use gateway_api::apis::standard::tlsroutes::TlsRoute;
use k8s_openapi::api::networking::v1::{Ingress, IngressServiceBackend};
use serde_json::json;

use crate::kinds::ingress::{serving_gateway, NGINX_PREFIX};
use crate::snapshot::namespace_of;

/// The annotation, without its prefix.
pub const NAME: &str = "ssl-passthrough";

/// Annotations that say nothing of HTTP requests: not reported on a passthrough Ingress.
const NOT_HTTP: &[&str] = &[
    NAME,
    "ssl-redirect",
    "force-ssl-redirect",
    "canary",
    "server-alias",
    "from-to-www-redirect",
];

/// One host passed through: the Service port its connections go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub service: String,
    pub port: i32,
}

/// True when the Ingress sets `ssl-passthrough: "true"`.
pub fn enabled(ingress: &Ingress) -> bool {
    ingress
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&format!("{NGINX_PREFIX}{NAME}")))
        .is_some_and(|v| v.trim() == "true")
}

/// The hosts of a passthrough Ingress with their backends, in rule order (a host once), and
/// what cannot be passed through. Nothing for an Ingress without the annotation.
pub fn targets(ingress: &Ingress) -> (Vec<Target>, Vec<String>) {
    let (mut out, mut problems) = (Vec::new(), Vec::new());
    let Some(spec) = ingress.spec.as_ref().filter(|_| enabled(ingress)) else {
        return (out, problems);
    };
    let default = spec
        .default_backend
        .as_ref()
        .and_then(|b| b.service.as_ref());
    let mut hosts: BTreeMap<&str, Option<&IngressServiceBackend>> = BTreeMap::new();
    let mut order = Vec::new();
    for rule in spec.rules.iter().flatten() {
        let Some(host) = rule.host.as_deref().filter(|h| !h.is_empty()) else {
            problems.push(format!(
                "annotation {NGINX_PREFIX}{NAME}: rules without host are not passed through (the SNI names a host)"
            ));
            continue;
        };
        let root = rule
            .http
            .iter()
            .flat_map(|h| h.paths.iter())
            .find(|p| p.path.as_deref() == Some("/"))
            .and_then(|p| p.backend.service.as_ref());
        let slot = hosts.entry(host).or_insert_with(|| {
            order.push(host);
            None
        });
        if slot.is_none() {
            *slot = root;
        }
    }
    for host in order {
        let backend = hosts.get(host).copied().flatten().or(default);
        let port = backend.and_then(|b| b.port.as_ref()).and_then(|p| p.number);
        match (backend, port) {
            (Some(b), Some(port)) => out.push(Target {
                host: host.to_owned(),
                service: b.name.clone(),
                port,
            }),
            _ => problems.push(format!(
                "annotation {NGINX_PREFIX}{NAME}: host {host} has no Service backend for path / nor a defaultBackend: its TLS is not passed through"
            )),
        }
    }
    (out, problems)
}

/// The annotations of a passthrough Ingress that act on HTTP requests: reported, since the
/// connections passed through are never read as HTTP (plain HTTP requests still get them).
pub fn http_only(ingress: &Ingress) -> Vec<String> {
    if !enabled(ingress) {
        return Vec::new();
    }
    let all = ingress.metadata.annotations.iter().flatten();
    all.filter_map(|(key, _)| key.strip_prefix(NGINX_PREFIX).map(|n| (key, n)))
        .filter(|(_, name)| !NOT_HTTP.contains(name))
        .map(|(key, _)| {
            format!("annotation {key} is not applied to TLS connections passed through ({NAME}); plain HTTP requests get it")
        })
        .collect()
}

/// One TLSRoute per passed-through host of a prepared Ingress: named after the Ingress, in
/// its namespace, for that host, to its backend, with the Ingress's metadata times (its
/// precedence), attached to the Gateway serving the Ingress.
pub fn routes(ingress: &Ingress) -> Vec<(Target, TlsRoute)> {
    let (targets, _) = targets(ingress);
    let ns = namespace_of(&ingress.metadata);
    let parent = serving_gateway(ingress).map(|(gw_ns, gw)| {
        json!({"group": "gateway.networking.k8s.io", "kind": "Gateway",
               "namespace": gw_ns, "name": gw})
    });
    targets
        .into_iter()
        .filter_map(|t| {
            let mut meta = json!({"name": ingress.metadata.name, "namespace": ns});
            if let Some(created) = &ingress.metadata.creation_timestamp {
                meta["creationTimestamp"] = json!(created);
            }
            let route = json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "TLSRoute",
                "metadata": meta,
                "spec": {
                    "parentRefs": parent.iter().collect::<Vec<_>>(),
                    "hostnames": [t.host],
                    "rules": [{"backendRefs": [{"name": t.service, "port": t.port}]}],
                },
            });
            let route = serde_json::from_value::<TlsRoute>(route).ok()?;
            Some((t, route))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ingress(yaml: &str) -> Ingress {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    const PASS: &str = "metadata:\n  name: pass\n  namespace: web\n  annotations:\n    nginx.ingress.kubernetes.io/ssl-passthrough: \"true\"\n    nginx.ingress.kubernetes.io/rewrite-target: /x\n    nginx.ingress.kubernetes.io/ssl-redirect: \"false\"\n    edgeplane.dev/serving-gateway: edgeplane:ingress/nginx\n";

    #[test]
    fn the_root_path_or_the_default_backend_is_passed_to() {
        let spec = "spec:\n  defaultBackend: {service: {name: fallback, port: {number: 8443}}}\n  rules:\n  - host: a.example.com\n    http:\n      paths:\n      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 443}}}}\n      - {path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 443}}}}\n  - host: b.example.com\n    http:\n      paths:\n      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 443}}}}\n  - http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 443}}}}\n";
        let i = ingress(&format!("{PASS}{spec}"));
        let (targets, problems) = targets(&i);
        let got: Vec<_> = targets
            .iter()
            .map(|t| format!("{} {}:{}", t.host, t.service, t.port))
            .collect();
        assert_eq!(
            got,
            ["a.example.com app:443", "b.example.com fallback:8443"]
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("rules without host"));
        let routes = routes(&i);
        assert_eq!(routes.len(), 2);
        let r = &routes[0].1;
        assert_eq!(r.spec.hostnames, ["a.example.com"]);
        assert_eq!(r.metadata.namespace.as_deref(), Some("web"));
        let parent = &r.spec.parent_refs.as_ref().unwrap()[0];
        assert_eq!(
            (parent.namespace.as_deref(), parent.name.as_str()),
            (Some("edgeplane:ingress"), "nginx")
        );
        let backend = &r.spec.rules[0].backend_refs[0];
        assert_eq!((backend.name.as_str(), backend.port), ("app", Some(443)));
        let reported = http_only(&i);
        assert_eq!(reported.len(), 1, "{reported:?}");
        assert!(reported[0].contains("rewrite-target"));
    }

    #[test]
    fn a_host_without_root_backend_and_an_ingress_without_the_annotation() {
        let spec = "spec:\n  rules:\n  - host: a.example.com\n    http:\n      paths:\n      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 443}}}}\n";
        let (targets, problems) = targets(&ingress(&format!("{PASS}{spec}")));
        assert!(targets.is_empty());
        assert!(problems[0].contains("host a.example.com has no Service backend for path /"));
        let off = PASS.replace("\"true\"", "\"false\"");
        let off = ingress(&format!("{off}{spec}"));
        assert!(!enabled(&off));
        assert_eq!(targets_of(&off), 0);
        assert!(http_only(&off).is_empty());
    }

    fn targets_of(i: &Ingress) -> usize {
        targets(i).0.len()
    }
}
