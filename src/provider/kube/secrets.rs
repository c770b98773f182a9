//! Which Secrets a cluster's snapshot fetches: Secrets are watched metadata-only (names,
//! resourceVersions; never the data of every Secret in the cluster), and only those a
//! listener's `tls.certificateRefs` names (through a ReferenceGrant when cross-namespace) are
//! fetched, again only when their resourceVersion changes (see [`super::stores`]). Pure.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::snapshot::namespace_of;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;

const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// True when a ReferenceGrant in `to_ns` lets Gateways of `from_ns` reference Secret `name`.
fn granted(grants: &[Arc<ReferenceGrant>], from_ns: &str, to_ns: &str, name: &str) -> bool {
    grants
        .iter()
        .filter(|g| g.metadata.namespace.as_deref() == Some(to_ns))
        .any(|g| {
            let from =
                g.spec.from.iter().any(|f| {
                    f.group == GATEWAY_GROUP && f.kind == "Gateway" && f.namespace == from_ns
                });
            let to = g.spec.to.iter().any(|t| {
                t.group.is_empty()
                    && t.kind == "Secret"
                    && t.name.as_deref().is_none_or(|n| n == name)
            });
            from && to
        })
}

/// `(namespace, name)` of every Secret a listener may use: core Secrets named in
/// `tls.certificateRefs`, in the Gateway's namespace or granted by a ReferenceGrant.
pub fn referenced_secrets(
    gateways: &[Arc<Gateway>],
    grants: &[Arc<ReferenceGrant>],
) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for gw in gateways {
        let gw_ns = namespace_of(&gw.metadata);
        let refs = gw
            .spec
            .listeners
            .iter()
            .filter_map(|l| l.tls.as_ref()?.certificate_refs.as_ref())
            .flatten();
        for r in refs {
            let core = r.group.as_deref().unwrap_or("").is_empty();
            if !core || r.kind.as_deref().unwrap_or("Secret") != "Secret" {
                continue;
            }
            let ns = r.namespace.as_deref().unwrap_or(gw_ns);
            if ns == gw_ns || granted(grants, gw_ns, ns, &r.name) {
                out.insert((ns.to_owned(), r.name.clone()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_same_namespace_or_granted_secrets_are_referenced() {
        let gw: Gateway = serde_json::from_value(json!({
            "metadata": {"namespace": "web", "name": "gw"},
            "spec": {"gatewayClassName": "c", "listeners": [
                {"name": "a", "port": 443, "protocol": "HTTPS", "tls": {"certificateRefs": [
                    {"name": "local"},
                    {"name": "shared", "namespace": "certs"},
                    {"name": "other", "namespace": "certs"},
                    {"name": "denied", "namespace": "secret-ns"},
                    {"name": "cm", "kind": "ConfigMap"}]}},
                {"name": "b", "port": 80, "protocol": "HTTP"}]}
        }))
        .unwrap();
        let grant: ReferenceGrant = serde_json::from_value(json!({
            "metadata": {"namespace": "certs", "name": "g"},
            "spec": {"from": [{"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": "web"}],
                "to": [{"group": "", "kind": "Secret", "name": "shared"}]}
        }))
        .unwrap();
        let got = referenced_secrets(&[Arc::new(gw)], &[Arc::new(grant)]);
        let want: BTreeSet<(String, String)> = [("certs", "shared"), ("web", "local")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
    }
}
