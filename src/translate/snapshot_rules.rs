//! The translator's answers to [`TranslatorRules`]: which Secrets and ConfigMaps a snapshot's
//! objects reference, and the Service settings of a Gateway. The snapshot declares the
//! questions so that its kind declarations and the providers reach these rules without
//! importing the translator. Pure.

use gateway_api::apis::standard::gateways::Gateway;

use crate::kinds::crd::proxy_config::GatewayServiceConfig;
use crate::kinds::Wanted;
use crate::snapshot::{namespace_of, Snapshot, TranslatorRules};
use crate::translate::gateways::frontend::referenced_ca_objects;
use crate::translate::gateways::parameters::gateway_service_config;
use crate::translate::gateways::tls::{referenced_listener_set_secrets, referenced_secrets};
use crate::translate::ingress::annotations::Annotations;
use crate::translate::ingress::headers;
use crate::translate::policy::referenced_policy_objects;

impl TranslatorRules for Snapshot {
    fn referenced_secrets(&self) -> Wanted {
        let mut wanted = referenced_secrets(&self.gateways, &self.reference_grants);
        wanted.extend(referenced_listener_set_secrets(
            &self.listener_sets,
            &self.reference_grants,
        ));
        wanted.extend(ca_objects(self, "Secret"));
        wanted.extend(policy_objects(self, "Secret"));
        // Ingresses' tls[] Secrets (those of Ingresses that are not ours too: which are is
        // decided with the flags, at translation).
        for ingress in &self.ingresses {
            let ns = namespace_of(&ingress.metadata);
            let tls = ingress.spec.iter().flat_map(|s| s.tls.iter().flatten());
            wanted.extend(tls.filter_map(|t| Some((ns.to_owned(), t.secret_name.clone()?))));
            // The htpasswd Secret of its basic authentication.
            let notes = Annotations::parse(ingress);
            // The CA Secret of its backend TLS (`proxy-ssl-secret`).
            if let Some(s) = notes.upstream.secret.clone() {
                wanted.insert((ns.to_owned(), s));
            }
            if let Some(b) = notes.traffic_policy().and_then(|p| p.basic_auth) {
                wanted.insert((ns.to_owned(), b.secret_ref.name));
            }
        }
        wanted
    }

    fn referenced_config_maps(&self) -> Wanted {
        let mut wanted: Wanted = ca_objects(self, "ConfigMap").collect();
        wanted.extend(policy_objects(self, "ConfigMap"));
        // The ConfigMaps of Ingresses' `custom-headers`.
        let custom = self
            .ingresses
            .iter()
            .filter_map(|i| headers::config_map_of(i)?.ok());
        wanted.extend(custom);
        for p in &self.backend_tls_policies {
            let ns = namespace_of(&p.metadata);
            let refs = p.spec.validation.ca_certificate_refs.iter().flatten();
            for r in refs.filter(|r| r.group.is_empty() && r.kind == "ConfigMap") {
                wanted.insert((ns.to_owned(), r.name.clone()));
            }
        }
        wanted
    }

    fn gateway_service_config(&self, gateway: &Gateway) -> Option<GatewayServiceConfig> {
        gateway_service_config(self, gateway)
    }
}

/// The Secrets or ConfigMaps (`kind`) TrafficPolicies read: htpasswd files and JWKS.
fn policy_objects(snapshot: &Snapshot, kind: &'static str) -> Wanted {
    referenced_policy_objects(&snapshot.traffic_policies)
        .into_iter()
        .filter(|(k, _, _)| *k == kind)
        .map(|(_, ns, name)| (ns, name))
        .collect()
}

/// The Secrets or ConfigMaps (`kind`) Gateways reference as CA bundles.
fn ca_objects<'s>(
    snapshot: &'s Snapshot,
    kind: &'static str,
) -> impl Iterator<Item = (String, String)> + 's {
    referenced_ca_objects(&snapshot.gateways, &snapshot.reference_grants)
        .into_iter()
        .filter(move |(k, _, _)| *k == kind)
        .map(|(_, ns, name)| (ns, name))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::kinds::crd::TrafficPolicy;

    #[test]
    fn secrets_and_config_maps_named_by_traffic_policies_are_wanted() {
        let policy: TrafficPolicy = serde_yaml_ng::from_str(
            "metadata: {name: p, namespace: apps}\nspec:\n  targetRefs: []\n  \
             basicAuth: {secretRef: {name: users}}\n  jwt:\n    providers:\n    \
             - {name: a, issuer: i, jwks: {secretRef: {name: keys}}}\n    \
             - {name: b, issuer: j, jwks: {configMapRef: {name: jwks}}}\n",
        )
        .unwrap();
        let s = Snapshot {
            traffic_policies: vec![Arc::new(policy)],
            ..Snapshot::default()
        };
        let pair = |n: &str| ("apps".to_owned(), n.to_owned());
        assert_eq!(s.referenced_secrets(), [pair("keys"), pair("users")].into());
        assert_eq!(s.referenced_config_maps(), [pair("jwks")].into());
    }
}
