//! One listener, validated (`ListenerModel`), and the rules that decide whether a route may
//! attach to it: hostname intersection, `allowedRoutes.namespaces` (Same, All, label Selector)
//! and `allowedRoutes.kinds`. Pure.

use crate::snapshot::Snapshot;
use foldhash::HashMap;
use std::collections::BTreeMap;

use crate::status::conditions::Reason;
use crate::status::GATEWAY_GROUP;
use crate::table::hostname::Pattern;
use crate::table::SocketSource;
use crate::translate::gateways::frontend::ClientAuth;
use crate::translate::gateways::protocol::ListenerProtocol;
use crate::translate::gateways::tls::ListenerTls;

use gateway_api::apis::standard::gateways::{
    GatewayListeners, GatewayListenersAllowedRoutesNamespacesFrom as From,
    GatewayListenersAllowedRoutesNamespacesSelector as Selector,
    GatewayStatusListenersSupportedKinds,
};

/// Label every namespace carries with its own name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// True when hostname `general` matches every host `specific` matches (`*` for no hostname).
pub fn hostname_covers(general: &str, specific: &str) -> bool {
    Pattern::of(Some(general)).covers(specific)
}

/// The hostnames a route serves on a listener (Gateway API, "hostnames"): the intersection of
/// the listener hostname and the route hostnames, the more specific name of each matching pair.
/// A route without hostnames takes the listener's; a listener without one takes the route's;
/// neither gives `*`. An empty result means the route does not attach.
pub fn intersect_hostnames(listener: Option<&str>, route: &[String]) -> Vec<String> {
    let mut out: Vec<String> = match (listener, route.is_empty()) {
        (None, true) => vec!["*".to_owned()],
        (Some(l), true) => vec![l.to_owned()],
        (None, false) => route.to_vec(),
        (Some(l), false) => route
            .iter()
            .filter_map(|r| {
                if hostname_covers(l, r) {
                    Some(r.clone())
                } else if hostname_covers(r, l) {
                    Some(l.to_owned())
                } else {
                    None
                }
            })
            .collect(),
    };
    out.sort();
    out.dedup();
    out
}

/// Which namespaces a listener accepts routes from.
#[derive(Debug, Clone, PartialEq)]
pub enum NamespacePolicy {
    /// Only the Gateway's namespace (the default).
    Same,
    All,
    /// Namespaces whose labels match; `None` when the selector is missing or invalid.
    Selector(Option<Selector>),
}

impl NamespacePolicy {
    /// The policy of `allowedRoutes.namespaces`.
    pub fn from_spec(from: Option<&From>, selector: Option<&Selector>) -> Self {
        match from {
            Some(From::All) => Self::All,
            Some(From::Selector) => Self::Selector(selector.cloned()),
            Some(From::Same) | None => Self::Same,
        }
    }

    /// True when a route in `route_ns` (with `labels`) may attach to a listener of a Gateway in
    /// `gateway_ns`.
    pub fn allows(
        &self,
        gateway_ns: &str,
        route_ns: &str,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        match self {
            Self::Same => gateway_ns == route_ns,
            Self::All => true,
            Self::Selector(None) => false,
            Self::Selector(Some(s)) => selector_matches(s, labels),
        }
    }
}

/// Kubernetes label selector semantics: all `matchLabels` and all `matchExpressions` must hold;
/// an empty selector matches everything; an unknown operator matches nothing.
pub fn selector_matches(selector: &Selector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let value = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// One listener, validated.
#[derive(Debug)]
pub struct ListenerModel<'a> {
    pub spec: &'a GatewayListeners,
    pub port: u16,
    pub hostname: Option<&'a str>,
    pub supported_kinds: Vec<GatewayStatusListenersSupportedKinds>,
    /// Names of `allowedRoutes.kinds` entries we cannot serve.
    pub invalid_kinds: Vec<String>,
    pub protocol: ListenerProtocol,
    /// HTTPS listeners: the certificate, or why there is none.
    pub tls: ListenerTls,
    /// HTTPS listeners: client-certificate validation (Gateway `spec.tls.frontend`).
    pub client_auth: ClientAuth,
    /// `HostnameConflict` or `ProtocolConflict`.
    pub conflict: Option<Reason>,
    pub namespaces: NamespacePolicy,
    /// Every route accepted on this listener, by kind, namespace and name.
    pub attached: super::attached::AttachedRoutes<'a>,
    /// The ListenerSet (its index among the translation's ListenerSets, its namespace and
    /// name) that contributed the listener; `None` for the Gateway's own listeners. Routes
    /// reach a listener only through a parentRef to the object that declares it.
    pub origin: Option<(usize, &'a str, &'a str)>,
}

impl ListenerModel<'_> {
    /// True when a route in `route_ns` (with `labels`) passes `allowedRoutes.namespaces`:
    /// `Same` is the namespace of the object declaring the listener (the Gateway in
    /// `gateway_ns`, or the ListenerSet).
    pub fn allows_namespace(
        &self,
        gateway_ns: &str,
        route_ns: &str,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        let home = self.origin.map_or(gateway_ns, |(_, ns, _)| ns);
        self.namespaces.allows(home, route_ns, labels)
    }

    /// How the table names the listener among a socket's sources:
    /// `namespace/gateway/listener` for a Gateway's own, and
    /// `namespace/gateway/ListenerSet/set-namespace/set-name/listener` for a ListenerSet's, so
    /// that a ListenerSet listener is never taken for a Gateway listener of the same name.
    pub fn source(&self, gateway_ns: &str, gateway: &str) -> SocketSource {
        SocketSource {
            listener_set: self
                .origin
                .map(|(_, ns, name)| (ns.to_owned(), name.to_owned())),
            ..SocketSource::gateway(gateway_ns, gateway, &self.spec.name)
        }
    }

    /// The ListenerSet index of the listener, `None` for a Gateway's own.
    pub fn set(&self) -> Option<usize> {
        self.origin.map(|(i, _, _)| i)
    }

    /// True when routes of `kind` may attach: the kind the listener's protocol carries (HTTPS
    /// only in Terminate mode), and among the allowed kinds. Routes attach (and are counted)
    /// even while the listener's certificates do not resolve.
    pub fn accepts(&self, kind: &str) -> bool {
        // An Ingress is served wherever an HTTPRoute is (it is not a Gateway API kind, so
        // `supportedKinds` and `allowedRoutes.kinds` do not name it).
        let kind = if kind == "Ingress" { "HTTPRoute" } else { kind };
        self.accepts_routes() && self.supported_kinds.iter().any(|k| k.kind == kind)
    }

    /// True when the listener carries routes of some kind.
    fn accepts_routes(&self) -> bool {
        self.protocol.is_supported()
            && !self.passthrough_on_https()
            && !self.supported_kinds.is_empty()
    }

    /// `tls.mode: Passthrough` on an HTTPS listener, which cannot be served (TLS listeners
    /// carry passthrough).
    pub fn passthrough_on_https(&self) -> bool {
        self.protocol == ListenerProtocol::Https && matches!(self.tls, ListenerTls::Passthrough)
    }

    /// True when the listener is accepted: it can serve once its references resolve.
    pub fn usable(&self) -> bool {
        self.accepts_routes()
            && self.conflict.is_none()
            && !matches!(self.client_auth, ClientAuth::Invalid(_))
    }

    /// True when the listener is valid, its certificates resolved, and it goes into the table.
    pub fn valid(&self) -> bool {
        self.usable() && !matches!(self.tls, ListenerTls::Unresolved(_))
    }
}

/// Validates one listener's protocol and `allowedRoutes`; TLS is resolved by the caller. A
/// listener supports the one route kind its protocol carries; any other allowed kind is an
/// invalid one.
pub(in crate::translate) fn listener_model(
    spec: &GatewayListeners,
    tls: ListenerTls,
) -> ListenerModel<'_> {
    let allowed = spec.allowed_routes.as_ref();
    let namespaces = allowed.and_then(|a| a.namespaces.as_ref());
    let namespaces = NamespacePolicy::from_spec(
        namespaces.and_then(|n| n.from.as_ref()),
        namespaces.and_then(|n| n.selector.as_ref()),
    );
    let protocol = ListenerProtocol::parse(&spec.protocol);
    let route_kinds = protocol.route_kinds();
    let supported = |kind: &str| GatewayStatusListenersSupportedKinds {
        group: Some(GATEWAY_GROUP.into()),
        kind: kind.into(),
    };
    let mut supported_kinds = Vec::new();
    let mut invalid_kinds = Vec::new();
    match allowed.and_then(|a| a.kinds.as_deref()) {
        Some(kinds) if !kinds.is_empty() => {
            for k in kinds {
                let group = k.group.as_deref().unwrap_or(GATEWAY_GROUP);
                let known = route_kinds.contains(&k.kind.as_str());
                if group == GATEWAY_GROUP && known {
                    if !supported_kinds
                        .iter()
                        .any(|s: &GatewayStatusListenersSupportedKinds| s.kind == k.kind)
                    {
                        supported_kinds.push(supported(&k.kind));
                    }
                } else {
                    invalid_kinds.push(format!("{group}/{}", k.kind));
                }
            }
        }
        _ => supported_kinds.extend(route_kinds.iter().map(|k| supported(k))),
    }
    ListenerModel {
        spec,
        port: u16::try_from(spec.port).unwrap_or(0),
        hostname: spec.hostname.as_deref().filter(|h| !h.is_empty()),
        supported_kinds,
        invalid_kinds,
        protocol,
        tls,
        client_auth: ClientAuth::Off,
        conflict: None,
        namespaces,
        attached: Default::default(),
        origin: None,
    }
}

/// Labels of a namespace the snapshot does not have: only its name.
pub(in crate::translate) fn default_labels(ns: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(NAMESPACE_NAME_LABEL.to_owned(), ns.to_owned())])
}

/// Labels of every known namespace, with the `kubernetes.io/metadata.name` label always set.
pub(in crate::translate) fn namespace_labels(
    snapshot: &Snapshot,
) -> HashMap<&str, BTreeMap<String, String>> {
    snapshot
        .namespaces
        .iter()
        .filter_map(|n| {
            let name = n.metadata.name.as_deref()?;
            let mut labels = n.metadata.labels.clone().unwrap_or_default();
            labels.insert(NAMESPACE_NAME_LABEL.to_owned(), name.to_owned());
            Some((name, labels))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gateway_api::apis::standard::gateways::GatewayListenersAllowedRoutesNamespacesSelectorMatchExpressions as Expr;

    fn v(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn intersection_follows_the_spec_table() {
        assert_eq!(intersect_hostnames(None, &[]), v(&["*"]));
        assert_eq!(intersect_hostnames(Some("a.com"), &[]), v(&["a.com"]));
        assert_eq!(intersect_hostnames(None, &v(&["x.io"])), v(&["x.io"]));
        assert_eq!(
            intersect_hostnames(
                Some("*.example.com"),
                &v(&[
                    "foo.example.com",
                    "a.b.example.com",
                    "example.com",
                    "other.org"
                ])
            ),
            v(&["a.b.example.com", "foo.example.com"])
        );
        assert_eq!(
            intersect_hostnames(Some("foo.example.com"), &v(&["*.example.com"])),
            v(&["foo.example.com"])
        );
        assert_eq!(
            intersect_hostnames(Some("*.example.com"), &v(&["*.foo.example.com"])),
            v(&["*.foo.example.com"])
        );
        assert_eq!(
            intersect_hostnames(Some("*.foo.example.com"), &v(&["*.example.com"])),
            v(&["*.foo.example.com"])
        );
        assert!(intersect_hostnames(Some("example.com"), &v(&["*.example.com"])).is_empty());
        assert!(intersect_hostnames(Some("a.com"), &v(&["b.com"])).is_empty());
    }

    #[test]
    fn selectors_use_labels_and_expressions() {
        let labels: BTreeMap<String, String> = [
            ("env".to_string(), "prod".to_string()),
            (NAMESPACE_NAME_LABEL.into(), "web".into()),
        ]
        .into();
        let mut s = Selector {
            match_labels: Some([("env".to_string(), "prod".to_string())].into()),
            match_expressions: None,
        };
        assert!(selector_matches(&s, &labels));
        s.match_expressions = Some(vec![Expr {
            key: NAMESPACE_NAME_LABEL.into(),
            operator: "NotIn".into(),
            values: Some(vec!["web".into()]),
        }]);
        assert!(!selector_matches(&s, &labels));
        let exists = Selector {
            match_labels: None,
            match_expressions: Some(vec![Expr {
                key: "env".into(),
                operator: "Exists".into(),
                values: None,
            }]),
        };
        assert!(selector_matches(&exists, &labels));
        assert!(selector_matches(&Selector::default(), &BTreeMap::new()));
        let policy = NamespacePolicy::Selector(None);
        assert!(!policy.allows("a", "a", &labels));
        assert!(NamespacePolicy::Same.allows("a", "a", &labels));
        assert!(!NamespacePolicy::Same.allows("a", "b", &labels));
        assert!(NamespacePolicy::All.allows("a", "b", &labels));
    }
}
