//! [`Annotations::traffic_policy`]: what the annotations of one Ingress ask of a TrafficPolicy,
//! as the spec of one (targetRefs left empty, the caller fills them), so `convert` writes the
//! same settings serving applies. Pure.

use crate::kinds::crd::traffic_policy::{BodyLimitsPolicy, IpAccessPolicy, TrafficPolicySpec};

use super::annotations::Annotations;

/// Every IPv4 and IPv6 address: an invalid access list denies them all (fails closed).
const EVERY_ADDRESS: [&str; 2] = ["0.0.0.0/0", "::/0"];

impl Annotations {
    /// The TrafficPolicy settings the annotations ask for (`ipAccess` from the source-range
    /// annotations, `bodyLimits` from `proxy-body-size`); `None` when there are none.
    pub fn traffic_policy(&self) -> Option<TrafficPolicySpec> {
        let mut spec = TrafficPolicySpec::default();
        if let Some(access) = &self.ip_access {
            spec.ip_access = if access.refuse_all.is_some() {
                Some(IpAccessPolicy {
                    allow: Vec::new(),
                    deny: EVERY_ADDRESS.iter().map(|s| (*s).to_owned()).collect(),
                })
            } else if access.allow.is_empty() && access.deny.is_empty() {
                None
            } else {
                Some(IpAccessPolicy {
                    allow: access.allow.iter().map(ToString::to_string).collect(),
                    deny: access.deny.iter().map(ToString::to_string).collect(),
                })
            };
        }
        if let Some(max) = self.max_body {
            spec.body_limits = Some(BodyLimitsPolicy {
                max_request_bytes: Some(max),
                max_response_bytes: None,
            });
        }
        (spec != TrafficPolicySpec::default()).then_some(spec)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::networking::v1::Ingress;
    use serde_json::json;

    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> Annotations {
        let notes: serde_json::Map<String, serde_json::Value> = pairs
            .iter()
            .map(|(k, v)| (format!("nginx.ingress.kubernetes.io/{k}"), json!(v)))
            .collect();
        let ingress: Ingress =
            serde_json::from_value(json!({"metadata": {"name": "i", "annotations": notes}}))
                .expect("Ingress");
        Annotations::parse(&ingress)
    }

    #[test]
    fn access_lists_and_body_size_become_policy_settings() {
        let spec = annotations(&[
            ("whitelist-source-range", "10.0.0.0/8, 192.0.2.7"),
            ("denylist-source-range", "10.1.0.0/16"),
            ("proxy-body-size", "1k"),
        ])
        .traffic_policy()
        .expect("a policy");
        let access = spec.ip_access.expect("ipAccess");
        assert_eq!(access.allow, ["10.0.0.0/8", "192.0.2.7/32"]);
        assert_eq!(access.deny, ["10.1.0.0/16"]);
        assert_eq!(
            spec.body_limits.and_then(|b| b.max_request_bytes),
            Some(1024)
        );
        assert!(spec.target_refs.is_empty());
    }

    #[test]
    fn an_invalid_list_denies_every_address_and_no_setting_is_no_policy() {
        let spec = annotations(&[("whitelist-source-range", "nonsense")])
            .traffic_policy()
            .expect("a policy");
        assert_eq!(spec.ip_access.expect("ipAccess").deny, EVERY_ADDRESS);
        assert!(annotations(&[("proxy-body-size", "0")])
            .traffic_policy()
            .is_none());
        assert!(annotations(&[("ssl-redirect", "false")])
            .traffic_policy()
            .is_none());
    }
}
