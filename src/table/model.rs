//! Route table types: listeners by socket address, virtual hosts, precedence-ordered rules,
//! compiled filters and resolved backend sets. Built once per translation, then shared read-only.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use serde::Serialize;

use super::backend_set::{BackendSet, ServiceBackend, ServiceKey, UpstreamProtocol};
use super::backend_tls::{BackendIdentity, BackendTlsEntry};
use super::host::HostIndex;
use super::l4::{L4Routes, SniRoutes};
use super::matchers::{RequestMatch, RequestView};
use super::path::PathIndex;
use super::policy::{IpAccess, ListenerSettings, RequestPolicy};
use super::precedence::sort_by_precedence;
use super::rule_filters::RuleFilters;
use super::source::SocketSource;
use super::tls::TlsListeners;

/// The whole data-plane configuration at one point in time. The proxy loads it once per request,
/// so a request always finishes on the table it started with.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteTable {
    /// Increases by one with every published table; shown in `/metrics` and `/debug/config`.
    pub generation: u64,
    /// One entry per socket the proxy must listen on.
    #[serde(serialize_with = "serialize_listeners")]
    pub listeners: BTreeMap<SocketAddr, Arc<ListenerTable>>,
    /// One entry per UDP socket (a UDP socket may share its address with a TCP one).
    #[serde(
        serialize_with = "serialize_listeners",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub udp: BTreeMap<SocketAddr, Arc<ListenerTable>>,
    /// TLS to backends (BackendTLSPolicy), by Service port; ports without an entry are plain.
    #[serde(
        skip_serializing_if = "BTreeMap::is_empty",
        serialize_with = "serialize_backend_tls"
    )]
    pub backend_tls: BTreeMap<ServiceKey, Arc<BackendTlsEntry>>,
    /// What the publishing layer attaches once the table is built (the metrics' label
    /// handles); opaque here, so the table stays free of it.
    #[serde(skip)]
    pub attached: Attached,
}

/// One value of any type, set at most once after the table is built and read by type: the
/// layer that publishes a table hangs what it derives from it here (the proxy finds it with
/// the table it loaded, never a newer or older one).
#[derive(Default)]
pub struct Attached(std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>);

impl Attached {
    /// Attaches `value`; false when something already is.
    pub fn set<T: std::any::Any + Send + Sync>(&self, value: T) -> bool {
        self.0.set(Box::new(value)).is_ok()
    }

    /// The attached value, when one of type `T` is.
    pub fn get<T: std::any::Any>(&self) -> Option<&T> {
        self.0.get().and_then(|v| v.downcast_ref())
    }
}

impl std::fmt::Debug for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "Attached(..)"
        } else {
            "Attached(none)"
        })
    }
}

/// `backendTls` as a list of `{service, policy...}` (JSON keys must be strings).
fn serialize_backend_tls<S: serde::Serializer>(
    map: &BTreeMap<ServiceKey, Arc<BackendTlsEntry>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Entry<'a> {
        service: &'a ServiceKey,
        #[serde(flatten)]
        tls: &'a BackendTlsEntry,
    }
    s.collect_seq(map.iter().map(|(service, tls)| Entry { service, tls }))
}

fn serialize_listeners<S: serde::Serializer>(
    map: &BTreeMap<SocketAddr, Arc<ListenerTable>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(map.values())
}

impl RouteTable {
    /// The listener bound at `addr`, if the table still has one.
    pub fn listener(&self, addr: &SocketAddr) -> Option<&Arc<ListenerTable>> {
        self.listeners.get(addr)
    }

    /// TLS to the Service port `key`, when a BackendTLSPolicy applies to it.
    pub fn backend_tls(&self, key: &ServiceKey) -> Option<&Arc<BackendTlsEntry>> {
        if self.backend_tls.is_empty() {
            return None;
        }
        self.backend_tls.get(key)
    }

    /// Number of route rules (one per rule match) across all listeners and hosts.
    pub fn rule_count(&self) -> usize {
        self.listeners.values().map(|l| l.hosts.rule_count()).sum()
    }
}

/// Everything served on one socket: the virtual hosts of every Gateway listener bound there.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerTable {
    pub bind: SocketAddr,
    /// The Gateway listener port clients address when it is not `bind.port()` (the port is
    /// mapped: a Service's `targetPort`, `--port-map`); see [`ListenerTable::listener_port`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Every Gateway listener merged onto this socket.
    pub sources: Vec<SocketSource>,
    /// The Gateway listener owning each listener-host group of the socket
    /// ([`VirtualHost::listener`] indexes it): the `gateway` and `listener` of its requests.
    #[serde(skip)]
    pub groups: Vec<SocketSource>,
    pub hosts: HostIndex,
    /// Set on HTTPS sockets: connections are TLS, certificates chosen by SNI.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsListeners>,
    /// The client certificate presented to TLS backends (Gateway
    /// `spec.tls.backend.clientCertificateRef` of the first Gateway bound here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_identity: Option<Arc<BackendIdentity>>,
    /// Set on TLS, TCP and UDP sockets: connections (or datagrams) are forwarded, not served
    /// as HTTP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l4: Option<L4Routes>,
    /// HTTPS sockets that also have TLS Passthrough listeners (Gateway listeners of protocol
    /// TLS on the same port, other hostnames): every Gateway listener of the socket by
    /// hostname. A ClientHello is read first only on such a socket; its SNI either names a
    /// passthrough listener ([`SniRoutes::passes_through`]) or is terminated as HTTPS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passthrough: Option<SniRoutes>,
    /// The ProxyConfig of the first Gateway bound here; `None` keeps the command line's values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<Arc<ListenerSettings>>,
    /// TCP and UDP sockets: the TrafficPolicy `ipAccess` lists of the Gateway listeners bound
    /// here (one per listener whose policies set one); a connection or datagram must pass every
    /// one. TLS sockets keep theirs per listener ([`super::SniListener::ip_access`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ip_access: Vec<Arc<IpAccess>>,
}

impl ListenerTable {
    /// Builds a listener from its virtual hosts (new ones, or shared with an earlier table).
    pub fn new(
        bind: SocketAddr,
        sources: Vec<SocketSource>,
        hosts: impl IntoIterator<Item = impl Into<Arc<VirtualHost>>>,
    ) -> Self {
        Self::indexed(bind, sources, HostIndex::build(hosts))
    }

    /// Builds a listener around an index of its virtual hosts (one patched from an earlier
    /// table's).
    pub fn indexed(bind: SocketAddr, sources: Vec<SocketSource>, hosts: HostIndex) -> Self {
        Self {
            bind,
            port: None,
            sources,
            groups: Vec::new(),
            hosts,
            tls: None,
            backend_identity: None,
            l4: None,
            passthrough: None,
            settings: None,
            ip_access: Vec::new(),
        }
    }

    /// Sets the Gateway listener port served here (recorded only when it is not the socket's).
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = (port != self.bind.port()).then_some(port);
        self
    }

    /// The Gateway listener port the requests on this socket were sent to: redirects without a
    /// port keep it, so clients see the Gateway's port, never a mapped local one.
    pub fn listener_port(&self) -> u16 {
        self.port.unwrap_or(self.bind.port())
    }

    /// Makes the socket terminate TLS with these listeners' certificates.
    pub fn with_tls(mut self, tls: TlsListeners) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The SNI routes of the socket: a TLS socket's, or an HTTPS socket's passthrough ones.
    pub fn sni_routes(&self) -> Option<&SniRoutes> {
        match &self.l4 {
            Some(L4Routes::Tls(routes)) => Some(routes),
            _ => self.passthrough.as_ref(),
        }
    }

    /// True when a ClientHello with `sni` on this HTTPS socket is passed through to a TLS
    /// Passthrough listener's route rather than terminated.
    pub fn passes_through(&self, sni: Option<&str>) -> bool {
        self.passthrough
            .as_ref()
            .is_some_and(|p| p.passes_through(sni).is_some())
    }

    /// Makes the socket forward streams or datagrams instead of serving HTTP.
    pub fn with_l4(mut self, routes: L4Routes) -> Self {
        self.l4 = Some(routes);
        self
    }

    /// The highest-precedence rule matching the request, per the Gateway API: most specific
    /// hostname first, then path, method, headers, query parameters, age and name.
    pub fn route(&self, req: &RequestView<'_>) -> Option<&Arc<RouteRule>> {
        self.hosts
            .candidates(req.host)
            .find_map(|host| host.route(req))
    }
}

/// The rules that serve one hostname (exact, `*.suffix` wildcard, or `*` for any host).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualHost {
    /// A boxed str, and `rules` a boxed slice: a table keeps one host per hostname, never
    /// grown once built.
    pub hostname: Box<str>,
    /// The Gateway listener (numbered per socket) whose routes this host serves; a request only
    /// falls back to less specific hosts of the same listener.
    pub listener: u32,
    /// Sorted by precedence, highest first.
    pub rules: Box<[Arc<RouteRule>]>,
    /// TrafficPolicy settings of the Gateway and listener this host is served for; a rule's
    /// own (`RuleFilters::policy`) are merged over them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<Arc<RequestPolicy>>,
    #[serde(skip)]
    index: PathIndex,
}

impl VirtualHost {
    /// Sorts `rules` by Gateway API precedence and indexes them by path.
    pub fn new(hostname: String, rules: Vec<Arc<RouteRule>>) -> Self {
        Self::with_order(hostname, rules).0
    }

    /// [`VirtualHost::new`], with where each of `rules` went among the host's rules
    /// (`at[i]` for `rules[i]`): a caller keeping the order it gathered the rules in holds
    /// positions rather than a second list of the rules.
    pub fn with_order(hostname: String, rules: Vec<Arc<RouteRule>>) -> (Self, Vec<u32>) {
        let (rules, at) = sort_by_precedence(rules);
        let index = PathIndex::build(&rules);
        let host = Self {
            hostname: hostname.into_boxed_str(),
            listener: 0,
            rules: rules.into_boxed_slice(),
            policy: None,
            index,
        };
        (host, at)
    }

    /// Marks the host as belonging to Gateway listener `listener` of its socket.
    pub fn in_listener(mut self, listener: u32) -> Self {
        self.listener = listener;
        self
    }

    /// The first rule, in precedence order, whose match accepts the request.
    pub fn route(&self, req: &RequestView<'_>) -> Option<&Arc<RouteRule>> {
        self.index
            .find(req.path, |i| self.rules[i].matcher.matches(req))
            .map(|i| &self.rules[i])
    }
}

/// Names a route object, for metrics labels, logs and `/debug/config`.
///
/// Held once per route and shared by its rules. The namespace and name live in one string,
/// `namespace/name`, which is also the label every request's metrics carry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RouteRef {
    kind: &'static str,
    label: Box<str>,
    /// Where the name starts in `label`.
    name_at: u32,
}

impl RouteRef {
    /// The route `namespace/name` of `kind`.
    pub fn new(kind: &'static str, namespace: &str, name: &str) -> Self {
        // Sized at once: `format!` grows the string piece by piece, a reallocation each.
        let mut label = String::with_capacity(namespace.len() + 1 + name.len());
        label.push_str(namespace);
        label.push('/');
        label.push_str(name);
        let label = label.into_boxed_str();
        Self {
            kind,
            label,
            name_at: u32::try_from(namespace.len() + 1).unwrap_or(u32::MAX),
        }
    }

    /// `HTTPRoute`, `GRPCRoute`, `TLSRoute`, ...
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The route's namespace.
    pub fn namespace(&self) -> &str {
        let at = self.name_at as usize;
        self.label.get(..at.saturating_sub(1)).unwrap_or_default()
    }

    /// The route's name.
    pub fn name(&self) -> &str {
        self.label.get(self.name_at as usize..).unwrap_or_default()
    }

    /// `namespace/name`, as metrics and logs name the route.
    pub fn label(&self) -> &str {
        &self.label
    }
}

/// Kind, then namespace, then name.
impl Ord for RouteRef {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.kind, self.namespace(), self.name()).cmp(&(
            other.kind,
            other.namespace(),
            other.name(),
        ))
    }
}

impl PartialOrd for RouteRef {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for RouteRef {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("RouteRef", 3)?;
        s.serialize_field("kind", self.kind)?;
        s.serialize_field("namespace", self.namespace())?;
        s.serialize_field("name", self.name())?;
        s.end()
    }
}

impl std::fmt::Display for RouteRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

/// One match of one rule of one route, with everything needed to serve it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteRule {
    pub route: Arc<RouteRef>,
    /// Creation time of the route in seconds since the epoch (older wins ties).
    pub created: i64,
    pub rule_index: u32,
    pub match_index: u32,
    /// `spec.rules[].name`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<Box<str>>,
    pub matcher: RequestMatch,
    /// Shared by every match of the same rule.
    pub filters: Arc<RuleFilters>,
    pub backends: Arc<BackendSet>,
}

impl RouteRule {
    /// How to reach `service` for this rule: gRPC is HTTP/2, so a GRPCRoute's backends are
    /// spoken to with h2c whatever the Service port's `appProtocol` says.
    pub fn upstream_protocol(&self, service: &ServiceBackend) -> UpstreamProtocol {
        if self.matcher.grpc.is_some() {
            UpstreamProtocol::H2c
        } else {
            service.protocol
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Namespace and name share the label's one string; each reads back whole, and routes
    /// sort by namespace then name, not by the joined label (`a-b/c` would sort before `a/z`).
    #[test]
    fn a_route_ref_is_one_string_read_back_in_parts() {
        let r = RouteRef::new("HTTPRoute", "infra", "web");
        assert_eq!(
            (r.kind(), r.namespace(), r.name()),
            ("HTTPRoute", "infra", "web")
        );
        assert_eq!(
            (r.label(), r.to_string()),
            ("infra/web", "infra/web".to_owned())
        );
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({"kind": "HTTPRoute", "namespace": "infra", "name": "web"})
        );
        let empty = RouteRef::new("TLSRoute", "", "");
        assert_eq!(
            (empty.namespace(), empty.name(), empty.label()),
            ("", "", "/")
        );

        let mut refs = [
            RouteRef::new("HTTPRoute", "a-b", "c"),
            RouteRef::new("HTTPRoute", "a", "z"),
            RouteRef::new("GRPCRoute", "z", "z"),
        ];
        refs.sort();
        let labels: Vec<String> = refs.iter().map(|r| format!("{} {r}", r.kind())).collect();
        assert_eq!(
            labels,
            ["GRPCRoute z/z", "HTTPRoute a/z", "HTTPRoute a-b/c"]
        );
    }
}
