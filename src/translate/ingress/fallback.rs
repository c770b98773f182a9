//! The `default-backend` annotation: the Service (of the Ingress's namespace, its first port)
//! that answers for the Ingress's backends whose own Service port has no serving endpoint, as
//! ingress-nginx swaps a location's upstream for it when that upstream has no endpoints. It
//! is decided when the Ingress is prepared ([`apply`]), from the snapshot's EndpointSlices, so
//! it follows them as every translation does: the working copy names the fallback Service
//! where the endpoints are missing. Pure.

use std::sync::Arc;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressServiceBackend, ServiceBackendPort};

use crate::kinds::ingress::NGINX_PREFIX;
use crate::snapshot::{namespace_of, Snapshot};
use crate::translate::backends::endpoints::serving_endpoints;

/// The annotation this module reads.
pub const NAME: &str = "default-backend";

/// The label naming an EndpointSlice's Service.
const SERVICE_LABEL: &str = "kubernetes.io/service-name";

/// True when Service `ns/name` has a serving endpoint on port `port` in `snapshot`.
fn has_endpoints(snapshot: &Snapshot, ns: &str, name: &str, port: i32) -> bool {
    let service = snapshot
        .services
        .iter()
        .find(|s| namespace_of(&s.metadata) == ns && s.metadata.name.as_deref() == Some(name));
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
    let Some(value) = ingress
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&format!("{NGINX_PREFIX}{NAME}")))
        .map(|v| v.trim().to_owned())
    else {
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
    let port = snapshot
        .services
        .iter()
        .find(|s| namespace_of(&s.metadata) == ns && s.metadata.name.as_deref() == Some(&name))
        .and_then(|s| s.spec.as_ref()?.ports.as_ref()?.first().map(|p| p.port));
    let Some(port) = port else {
        problems.push(format!(
            "annotation {NGINX_PREFIX}{NAME}: Service {ns}/{name} not found, or it has no port \
             (not applied)"
        ));
        return;
    };
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
