//! The ingress-nginx annotations that ask for TrafficPolicy settings beyond the access lists
//! and body size: basic authentication (`auth-type`, `auth-secret`, `auth-secret-type`,
//! `auth-realm`). Each is read into the field of a [`TrafficPolicySpec`] it maps onto, so the
//! Ingress's policy compiles with the code a TrafficPolicy object goes through. A setting that
//! cannot be honoured as asked is reported and, when it is an access control, written so that
//! it fails closed (a Secret reference that never resolves refuses every request). Pure.

use crate::kinds::crd::traffic_policy::{BasicAuthPolicy, LocalObjectKeyRef, TrafficPolicySpec};
use crate::kinds::ingress::NGINX_PREFIX;

/// The annotations this module reads (the others are read by `annotations`).
pub const NAMES: &[&str] = &["auth-type", "auth-secret", "auth-secret-type", "auth-realm"];

/// The Secret key of an ingress-nginx `auth-file` htpasswd Secret.
const AUTH_FILE_KEY: &str = "auth";

/// The TrafficPolicy settings these annotations ask for (`targetRefs` empty).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyAnnotations {
    pub spec: TrafficPolicySpec,
}

// The spec holds no floating-point number: equality is reflexive.
impl Eq for PolicyAnnotations {}

/// An annotation's value, by its name without the prefix.
pub type Get<'a, 'b> = &'b dyn Fn(&str) -> Option<&'a str>;

fn report(problems: &mut Vec<String>, name: &str, value: &str, why: &str) {
    problems.push(format!(
        "annotation {NGINX_PREFIX}{name}: {value:?} is {why}"
    ));
}

impl PolicyAnnotations {
    /// Reads the annotations of [`NAMES`] of an Ingress in `namespace`; what cannot be
    /// honoured goes to `problems`.
    pub fn read(get: Get<'_, '_>, namespace: &str, problems: &mut Vec<String>) -> Self {
        let mut out = Self::default();
        out.spec.basic_auth = basic_auth(get, namespace, problems);
        out
    }
}

/// `auth-type: basic` with its Secret. The Secret is `name` or `namespace/name`; a TrafficPolicy
/// reads Secrets of its own namespace only, so one of another namespace is reported and
/// refuses every request, as does an `auth-map` Secret or a `digest` type.
fn basic_auth(
    get: Get<'_, '_>,
    namespace: &str,
    problems: &mut Vec<String>,
) -> Option<BasicAuthPolicy> {
    let Some(kind) = get("auth-type") else {
        for name in ["auth-secret", "auth-secret-type", "auth-realm"] {
            if let Some(v) = get(name) {
                report(problems, name, v, "ignored without auth-type");
            }
        }
        return None;
    };
    let realm = get("auth-realm").map(|r| r.trim().to_owned());
    // Never found (no Secret name holds a '/'): the policy is invalid and refuses everything.
    let closed = |why: &str| {
        Some(BasicAuthPolicy {
            secret_ref: LocalObjectKeyRef {
                name: format!("unservable/{why}"),
                key: None,
            },
            realm: realm.clone(),
        })
    };
    match kind.trim() {
        "basic" => {}
        "digest" => {
            report(
                problems,
                "auth-type",
                kind,
                "not supported (digest): every request is refused",
            );
            return closed("digest");
        }
        _ => {
            report(
                problems,
                "auth-type",
                kind,
                "not basic or digest: every request is refused",
            );
            return closed("auth-type");
        }
    }
    let Some(secret) = get("auth-secret").map(str::trim).filter(|s| !s.is_empty()) else {
        problems.push(format!(
            "annotation {NGINX_PREFIX}auth-type: basic needs auth-secret: every request is refused"
        ));
        return closed("auth-secret");
    };
    let name = match secret.split_once('/') {
        None => secret,
        Some((ns, name)) if ns == namespace => name,
        Some(_) => {
            report(
                problems,
                "auth-secret",
                secret,
                "in another namespace, which is not supported: every request is refused",
            );
            return closed("auth-secret");
        }
    };
    match get("auth-secret-type").map(str::trim) {
        None | Some("auth-file") => {}
        Some("auth-map") => {
            report(
                problems,
                "auth-secret-type",
                "auth-map",
                "not supported (only auth-file, an htpasswd file under key \"auth\"): every request is refused",
            );
            return closed("auth-map");
        }
        Some(other) => {
            report(
                problems,
                "auth-secret-type",
                other,
                "not auth-file or auth-map: every request is refused",
            );
            return closed("auth-secret-type");
        }
    }
    Some(BasicAuthPolicy {
        secret_ref: LocalObjectKeyRef {
            name: name.to_owned(),
            key: Some(AUTH_FILE_KEY.to_owned()),
        },
        realm,
    })
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
