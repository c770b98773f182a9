//! Names of written objects: a host as a name part, and the name of a `parentRef`. Pure.

use serde_json::{json, Value};

/// Longest object name Kubernetes takes (DNS subdomain).
const MAX_NAME: usize = 253;

/// `host` as part of an object or listener name: `shop.example.com` as `shop-example-com`,
/// `*.example.com` as `wildcard-example-com`, `*` as `any-host`.
pub fn host_part(host: &str) -> String {
    if host == "*" {
        return "any-host".to_owned();
    }
    host.replace("*.", "wildcard.").replace('.', "-")
}

/// `base-part`, cut to the longest name allowed.
pub fn joined(base: &str, part: &str) -> String {
    let mut name = format!("{base}-{part}");
    name.truncate(MAX_NAME);
    name.trim_end_matches(['-', '.']).to_owned()
}

/// The Gateway (or ListenerSet) a written object attaches to, as a `parentRef`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parent {
    /// `Gateway` or `ListenerSet`.
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
}

impl Parent {
    /// The `parentRef` from an object in `from_namespace`, to one listener (`section`) or all.
    pub fn reference(&self, from_namespace: &str, section: Option<&str>) -> Value {
        let mut r = json!({"group": "gateway.networking.k8s.io", "kind": self.kind,
                           "name": self.name});
        if self.namespace != from_namespace {
            r["namespace"] = json!(self.namespace);
        }
        if let Some(s) = section {
            r["sectionName"] = json!(s);
        }
        r
    }
}

/// True when a listener of `listener_host` (`None`: any) takes routes for `host` (`*`: any).
pub fn covers(listener_host: Option<&str>, host: &str) -> bool {
    let Some(l) = listener_host else {
        return true;
    };
    if host == "*" || l == host {
        return true;
    }
    let suffix = |wild: &str, name: &str| {
        wild.strip_prefix('*')
            .is_some_and(|s| name.ends_with(s) && name.len() > s.len())
    };
    suffix(l, host) || suffix(host, l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_parts_and_coverage() {
        assert_eq!(host_part("a.example.com"), "a-example-com");
        assert_eq!(host_part("*.example.com"), "wildcard-example-com");
        assert_eq!(host_part("*"), "any-host");
        assert_eq!(joined("x", &"a".repeat(300)).len(), MAX_NAME);
        assert!(covers(None, "a.test"));
        assert!(covers(Some("a.test"), "*"));
        assert!(covers(Some("*.test"), "a.test"));
        assert!(covers(Some("a.test"), "*.test"));
        assert!(!covers(Some("a.test"), "b.test"));
        assert!(!covers(Some("*.test"), "test"));
    }
}
