//! Route table types: listeners by socket address, virtual hosts, precedence-ordered rules,
//! compiled filters and resolved backend sets. Built once per translation, then shared read-only.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use serde::Serialize;

use super::backend_tls::{BackendIdentity, BackendTlsEntry};
use super::cors::Cors;
use super::filters::{HeaderModifier, Mirror, Redirect, Scheme, Timeouts, UrlRewrite};
use super::host::HostIndex;
use super::l4::{L4Routes, SniRoutes};
use super::matchers::{RequestMatch, RequestView};
use super::path::PathIndex;
use super::policy::{IpAccess, ListenerSettings, RequestPolicy, ServiceLimits};
use super::precedence::sort_by_precedence;
use super::resilience::{Balance, RetryPolicy, SessionPersistence};
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
    pub hostname: String,
    /// The Gateway listener (numbered per socket) whose routes this host serves; a request only
    /// falls back to less specific hosts of the same listener.
    pub listener: u32,
    /// Sorted by precedence, highest first.
    pub rules: Vec<Arc<RouteRule>>,
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
            hostname,
            listener: 0,
            rules,
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
    pub rule_name: Option<String>,
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

/// Filters of a rule (or of one backendRef), compiled at table build time. Every member a
/// plain route leaves unset is boxed: each rule and each backendRef carries one, and most
/// carry none, so the empty value is about a hundred bytes rather than half a kilobyte.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleFilters {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_headers: Option<Box<HeaderModifier>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_headers: Option<Box<HeaderModifier>>,
    /// When set, the rule answers with a redirect and never reaches a backend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect: Option<Box<Redirect>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<Box<UrlRewrite>>,
    /// Resolved `RequestMirror` targets; each gets a copy of the request, fire and forget.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror>,
    /// The `CORS` filter: preflights are answered by the proxy, other responses get headers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cors: Option<Box<Cors>>,
    /// `rules[].timeouts` (set on rule filters only).
    #[serde(skip_serializing_if = "Timeouts::is_empty")]
    pub timeouts: Timeouts,
    /// `rules[].retry` (set on rule filters only; boxed, as every backendRef carries filters
    /// and few rules retry).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<Box<RetryPolicy>>,
    /// `rules[].sessionPersistence` (set on rule filters only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<Box<SessionPersistence>>,
    /// TrafficPolicy settings of the route and rule (set on rule filters only); merged over
    /// the virtual host's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<Arc<RequestPolicy>>,
    /// `ExternalAuth` filters (set on rule filters only), checked in order after the
    /// TrafficPolicy's own `externalAuth`.
    /// Boxed, as the other members most rules leave unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_auth: Option<Box<Vec<Arc<crate::table::ExternalAuth>>>>,
    /// A request that arrived over plain HTTP answers 308 to the same URL on https; over TLS
    /// the rule serves as usual (an Ingress's `ssl-redirect`, set on rule filters only).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub https_redirect: bool,
    /// The rule's requests write no access log line (an Ingress's `enable-access-log:
    /// "false"`, set on rule filters only).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub access_log_off: bool,
    /// The longest a backend may leave the request unread while some of it is left to write,
    /// in milliseconds (an Ingress's `proxy-send-timeout`; 504 when it passes; set on rule
    /// filters only). Counted per write, not over the whole request, and not while the
    /// client's body is awaited; HTTP/1.1 backends only. Not boxed: it fits in the padding
    /// after the flags.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_millis")]
    pub backend_send_idle: Option<NonZeroU32>,
}

/// Milliseconds as `"<n>ms"`, how `/debug/config` shows every duration.
fn ser_millis<S: serde::Serializer>(ms: &Option<NonZeroU32>, s: S) -> Result<S::Ok, S::Error> {
    match ms {
        Some(ms) => s.collect_str(&format_args!("{ms}ms")),
        None => s.serialize_none(),
    }
}

impl RuleFilters {
    /// True when no filter is set: what most rules and backendRefs carry.
    pub fn is_empty(&self) -> bool {
        // Every field named: a new filter cannot be forgotten here (and dropped by `shared`).
        let Self {
            request_headers,
            response_headers,
            redirect,
            rewrite,
            mirrors,
            cors,
            timeouts,
            retry,
            session,
            policy,
            external_auth,
            https_redirect,
            access_log_off,
            backend_send_idle,
        } = self;
        request_headers.is_none()
            && response_headers.is_none()
            && redirect.is_none()
            && rewrite.is_none()
            && mirrors.is_empty()
            && cors.is_none()
            && timeouts.is_empty()
            && retry.is_none()
            && session.is_none()
            && policy.is_none()
            && external_auth.is_none()
            && !https_redirect
            && !access_log_off
            && backend_send_idle.is_none()
    }

    /// `self` behind an `Arc`: empty filters are one allocation shared by every rule and
    /// backendRef that has none.
    pub fn shared(self) -> Arc<Self> {
        static EMPTY: LazyLock<Arc<RuleFilters>> = LazyLock::new(Arc::default);
        if self.is_empty() {
            EMPTY.clone()
        } else {
            Arc::new(self)
        }
    }

    /// [`RuleFilters::backend_send_idle`] as a duration.
    pub fn send_idle(&self) -> Option<Duration> {
        self.backend_send_idle
            .map(|ms| Duration::from_millis(u64::from(ms.get())))
    }

    /// A send idle limit of `limit` (rounded down to milliseconds, at most about 49 days;
    /// none under a millisecond).
    pub fn set_send_idle(&mut self, limit: Option<Duration>) {
        self.backend_send_idle =
            limit.and_then(|d| NonZeroU32::new(u32::try_from(d.as_millis()).unwrap_or(u32::MAX)));
    }

    /// The shared empty filters.
    pub fn none() -> Arc<Self> {
        Self::default().shared()
    }

    /// The redirect a request answers with, if any: over plain HTTP the https redirect (308 to
    /// the same URL on https) when set, else the rule's `RequestRedirect`. The proxy answers by
    /// it and `convert --verify` replays it.
    pub fn redirect_for(&self, https: bool) -> Option<&Redirect> {
        static TO_HTTPS: Redirect = Redirect {
            scheme: Some(Scheme::Https),
            hostname: None,
            port: None,
            path: None,
            status: 308,
        };
        if self.https_redirect && !https {
            return Some(&TO_HTTPS);
        }
        self.redirect.as_deref()
    }
}

/// The weighted backends of a rule. An empty set, or one whose weights are all zero, answers 500.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendSet {
    pub backends: Vec<WeightedBackend>,
    total_weight: u64,
}

impl BackendSet {
    /// Builds a set; backends of weight 0 stay listed (for `/debug/config`) but never receive traffic.
    pub fn new(mut backends: Vec<WeightedBackend>) -> Self {
        // Built by pushing; a table keeps one set per rule for as long as the rule stands.
        backends.shrink_to_fit();
        let total_weight = backends.iter().map(|b| u64::from(b.weight)).sum();
        Self {
            backends,
            total_weight,
        }
    }

    /// Sum of all weights.
    pub fn total_weight(&self) -> u64 {
        self.total_weight
    }

    /// Picks a backend in proportion to its weight, given a uniform random number.
    pub fn pick(&self, random: u64) -> Option<&WeightedBackend> {
        if self.total_weight == 0 {
            return None;
        }
        let mut point = random % self.total_weight;
        for b in &self.backends {
            let w = u64::from(b.weight);
            if point < w {
                return Some(b);
            }
            point -= w;
        }
        None
    }
}

/// One `backendRefs` entry: its weight, where it goes, and its own filters.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WeightedBackend {
    pub weight: u32,
    pub target: BackendTarget,
    /// Shared, like a rule's: most backendRefs have none ([`RuleFilters::none`]).
    pub filters: Arc<RuleFilters>,
}

/// Where a backendRef sends traffic.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum BackendTarget {
    /// A resolved Service port with its ready endpoints (possibly none: 503).
    Service(Arc<ServiceBackend>),
    /// A reference that could not be resolved (missing, not permitted, wrong kind): 500.
    Invalid { reason: String },
}

/// Identifies a Service port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceKey {
    pub namespace: String,
    pub name: String,
    pub port: u16,
}

impl std::fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}:{}", self.namespace, self.name, self.port)
    }
}

/// A Service port resolved to its endpoints.
#[derive(Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceBackend {
    pub service: ServiceKey,
    /// Ready endpoints: the ones that take requests.
    pub endpoints: Vec<SocketAddr>,
    /// Endpoints still serving but terminating: used only while no endpoint is ready (as
    /// kube-proxy does), so a Service whose every pod is rolling keeps answering.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub terminating: Vec<SocketAddr>,
    pub protocol: UpstreamProtocol,
    /// How a request picks an endpoint.
    #[serde(skip_serializing_if = "Balance::is_default")]
    pub balance: Balance,
    /// Circuit-breaker, outlier and retry-budget settings of TrafficPolicies targeting the
    /// Service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<Arc<ServiceLimits>>,
}

/// How the proxy talks to a backend (from the Service port's `appProtocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamProtocol {
    /// HTTP/1.1 (upgrades such as WebSocket included).
    #[default]
    Http1,
    /// HTTP/2 over cleartext with prior knowledge (`kubernetes.io/h2c`).
    H2c,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rule and every backendRef carries a `RuleFilters`, most of them empty: the
    /// members a plain route leaves unset stay boxed (512 bytes when they were inline); the
    /// one flag, `https_redirect`, costs a word.
    #[test]
    fn filters_a_rule_leaves_unset_stay_small() {
        let size = std::mem::size_of::<RuleFilters>();
        assert!(size <= 136, "RuleFilters grew to {size} bytes");
    }

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

    /// Most rules and backendRefs have no filter: they share one empty value.
    #[test]
    fn empty_filters_are_one_shared_allocation() {
        let (a, b) = (RuleFilters::none(), RuleFilters::default().shared());
        assert!(Arc::ptr_eq(&a, &b) && a.is_empty());
        let timed = RuleFilters {
            timeouts: Timeouts {
                request: Some(std::time::Duration::from_secs(1)),
                ..Timeouts::default()
            },
            ..RuleFilters::default()
        };
        assert!(!timed.is_empty());
        let shared = timed.shared();
        assert!(!Arc::ptr_eq(&shared, &a) && !shared.timeouts.is_empty());
    }

    fn backend(weight: u32) -> WeightedBackend {
        WeightedBackend {
            weight,
            target: BackendTarget::Invalid {
                reason: format!("w{weight}"),
            },
            filters: RuleFilters::none(),
        }
    }

    #[test]
    fn pick_follows_weights_and_skips_zero() {
        let set = BackendSet::new(vec![backend(0), backend(1), backend(3)]);
        assert_eq!(set.total_weight(), 4);
        let picks: Vec<u32> = (0..8)
            .map(|r| set.pick(r).map(|b| b.weight).unwrap_or(99))
            .collect();
        assert_eq!(picks, vec![1, 3, 3, 3, 1, 3, 3, 3]);
    }

    #[test]
    fn all_zero_weights_pick_nothing() {
        let set = BackendSet::new(vec![backend(0), backend(0)]);
        assert!(set.pick(7).is_none());
        assert!(BackendSet::default().pick(0).is_none());
    }
}
