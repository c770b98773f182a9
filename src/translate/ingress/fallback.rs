//! The `default-backend` annotation: the Service (of the Ingress's namespace, its first port)
//! that answers for the Ingress's backends whose own Service port has no serving endpoint, as
//! ingress-nginx swaps a location's upstream for it when that upstream has no endpoints. It
//! is decided when the Ingress is prepared ([`apply`]), from the snapshot's EndpointSlices, so
//! it follows them as every translation does: the working copy names the fallback Service
//! where the endpoints are missing. With `custom-http-errors` the same Service answers the
//! error pages: [`apply`] writes it with its port on the working copy ([`ERROR_BACKEND`]) and
//! [`error_pages`] reads it into the Ingress's TrafficPolicy `errorPages`. ingress-nginx's
//! controller-wide default backend has no counterpart here, so without `default-backend` the
//! annotation is reported and not applied. Pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressServiceBackend, ServiceBackendPort};

use crate::kinds::crd::traffic_policy_auth::{AuthBackendRef, ErrorPagesPolicy};
use crate::kinds::ingress::NGINX_PREFIX;
use crate::snapshot::{find_named, namespace_of, Snapshot};
use crate::translate::backends::endpoints::serving_endpoints;

/// The annotation this module reads.
pub const NAME: &str = "default-backend";

/// The statuses whose backend answers the `default-backend` Service replaces.
pub const ERRORS: &str = "custom-http-errors";

/// `"false"` turns [`ERRORS`] off (ingress-nginx's default is on).
pub const ENABLE_ERRORS: &str = "enable-custom-http-errors";

/// The working copy's error page Service, `name:port` of the Ingress's namespace, written by
/// [`apply`] when [`ERRORS`] is set and the `default-backend` Service resolves.
pub const ERROR_BACKEND: &str = "edgeplane.dev/ingress-error-backend";

/// The label naming an EndpointSlice's Service.
const SERVICE_LABEL: &str = "kubernetes.io/service-name";

/// True when Service `ns/name` has a serving endpoint on port `port` in `snapshot`.
fn has_endpoints(snapshot: &Snapshot, ns: &str, name: &str, port: i32) -> bool {
    let service = find_named(&snapshot.services, ns, name);
    let Some(service_port) = service
        .and_then(|s| s.spec.as_ref()?.ports.as_ref())
        .and_then(|ports| ports.iter().find(|p| p.port == port))
    else {
        return false;
    };
    let slices: Vec<Arc<EndpointSlice>> = snapshot
        .endpoint_slices
        .iter()
        .filter(|e| {
            namespace_of(&e.metadata) == ns
                && e.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(SERVICE_LABEL))
                    .is_some_and(|s| s == name)
        })
        .cloned()
        .collect();
    let (ready, terminating) = serving_endpoints(&slices, service_port);
    !(ready.is_empty() && terminating.is_empty())
}

/// Replaces, in `ingress` (a working copy with port numbers resolved), each Service backend
/// without a serving endpoint by the `default-backend` Service; what cannot be applied goes
/// to `problems`.
pub fn apply(snapshot: &Snapshot, ingress: &mut Ingress, problems: &mut Vec<String>) {
    let annotations = ingress.metadata.annotations.as_ref();
    let get = |name: &str| annotations.and_then(|a| a.get(&format!("{NGINX_PREFIX}{name}")));
    let errors = get(ERRORS).filter(|_| get(ENABLE_ERRORS).is_none_or(|v| v.trim() != "false"));
    let errors = errors.is_some_and(|v| codes(v).is_ok());
    let Some(value) = get(NAME).map(|v| v.trim().to_owned()) else {
        if errors {
            problems.push(format!(
                "annotation {NGINX_PREFIX}{ERRORS} needs {NGINX_PREFIX}{NAME} here (there is \
                 no controller-wide default backend): not applied"
            ));
        }
        return;
    };
    let ns = namespace_of(&ingress.metadata).to_owned();
    let name = match value.split_once('/') {
        None if !value.is_empty() => value.clone(),
        Some((n, s)) if n == ns && !s.is_empty() => s.to_owned(),
        _ => {
            problems.push(format!(
                "annotation {NGINX_PREFIX}{NAME}: {value:?} is not a Service of the Ingress's \
                 namespace (not applied)"
            ));
            return;
        }
    };
    let port = find_named(&snapshot.services, &ns, &name)
        .and_then(|s| s.spec.as_ref()?.ports.as_ref()?.first().map(|p| p.port));
    let Some(port) = port else {
        problems.push(format!(
            "annotation {NGINX_PREFIX}{NAME}: Service {ns}/{name} not found, or it has no port \
             (not applied)"
        ));
        return;
    };
    if errors {
        ingress
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ERROR_BACKEND.to_owned(), format!("{name}:{port}"));
    }
    for service in super::service_backends_mut(ingress) {
        let number = service.port.as_ref().and_then(|p| p.number);
        let down = number.is_none_or(|n| !has_endpoints(snapshot, &ns, &service.name, n));
        if down {
            *service = IngressServiceBackend {
                name: name.clone(),
                port: Some(ServiceBackendPort {
                    number: Some(port),
                    name: None,
                }),
            };
        }
    }
}

/// The statuses of `custom-http-errors`: a comma-separated list of 400 to 599, as
/// ingress-nginx accepts.
pub fn codes(value: &str) -> Result<Vec<u16>, String> {
    let mut out = Vec::new();
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item.parse::<u16>() {
            Ok(code) if (400..=599).contains(&code) => out.push(code),
            _ => {
                return Err(format!(
                    "not a list of statuses 400 to 599: {item:?} is not one"
                ))
            }
        }
    }
    if out.is_empty() {
        return Err("an empty list of statuses".to_owned());
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The `errorPages` of the Ingress's TrafficPolicy: `custom-http-errors` answered by the
/// Service [`apply`] resolved (`None` when it did not, or the annotation is off or invalid).
pub fn error_pages(annotations: &BTreeMap<String, String>) -> Option<ErrorPagesPolicy> {
    let get = |name: &str| annotations.get(&format!("{NGINX_PREFIX}{name}"));
    if get(ENABLE_ERRORS).is_some_and(|v| v.trim() == "false") {
        return None;
    }
    let status_codes = codes(get(ERRORS)?).ok()?;
    let (name, port) = annotations.get(ERROR_BACKEND)?.rsplit_once(':')?;
    Some(ErrorPagesPolicy {
        status_codes,
        backend_ref: AuthBackendRef {
            name: name.to_owned(),
            port: port.parse().ok(),
            ..AuthBackendRef::default()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::ingress::policy_tests::with;

    fn ingress(fallback: &str) -> String {
        format!(
            "metadata: {{name: a, namespace: ns, annotations: \
             {{nginx.ingress.kubernetes.io/default-backend: {fallback}}}}}\nspec:\n  \
             rules: [{{http: {{paths: [{{path: /, pathType: Prefix, \
             backend: {{service: {{name: svc, port: {{number: 8080}}}}}}}}]}}}}]"
        )
    }

    fn slice(service: &str, port: i32) -> Arc<EndpointSlice> {
        Arc::new(
            serde_yaml_ng::from_str(&format!(
                "metadata: {{name: {service}-1, namespace: ns, \
                 labels: {{kubernetes.io/service-name: {service}}}}}\naddressType: IPv4\n\
                 ports: [{{port: {port}}}]\n\
                 endpoints: [{{addresses: [10.0.0.1], conditions: {{ready: true}}}}]"
            ))
            .expect("slice"),
        )
    }

    fn backend_of(i: &Ingress) -> (String, Option<i32>) {
        let spec = i.spec.as_ref().expect("spec");
        let rules = spec.rules.as_ref().expect("rules");
        let http = rules[0].http.as_ref().expect("http");
        let s = http.paths[0].backend.service.clone().expect("service");
        (s.name, s.port.and_then(|p| p.number))
    }

    #[test]
    fn a_backend_without_endpoints_is_replaced_by_the_default_backend() {
        // `authz` (port 9000) is the fallback; `svc` has no endpoints.
        let mut s = with(&ingress("authz"), &[]);
        let mut i = (*s.ingresses[0]).clone();
        let mut problems = Vec::new();
        apply(&s, &mut i, &mut problems);
        assert_eq!(backend_of(&i), ("authz".to_owned(), Some(9000)));
        assert!(problems.is_empty(), "{problems:?}");
        // With endpoints, the Ingress's own backend serves.
        s.endpoint_slices = vec![slice("svc", 8080)];
        let mut i = (*s.ingresses[0]).clone();
        apply(&s, &mut i, &mut problems);
        assert_eq!(backend_of(&i), ("svc".to_owned(), Some(8080)));
    }

    #[test]
    fn a_missing_or_foreign_default_backend_is_reported() {
        for (value, why) in [("nothing", "not found"), ("other/authz", "not a Service")] {
            let s = with(&ingress(value), &[]);
            let mut i = (*s.ingresses[0]).clone();
            let mut problems = Vec::new();
            apply(&s, &mut i, &mut problems);
            assert_eq!(backend_of(&i), ("svc".to_owned(), Some(8080)), "{value}");
            assert!(problems.iter().any(|p| p.contains(why)), "{problems:?}");
        }
    }
}
