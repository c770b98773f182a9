//! The L4 part of the table: what a TLS, TCP or UDP socket forwards to. TCP and UDP sockets
//! forward every connection (or UDP session) to the weighted backends of one route; TLS sockets
//! choose a Gateway listener, then a route, by the SNI of the ClientHello, and either pass the
//! encrypted bytes through or terminate TLS first. An HTTPS socket that also has TLS
//! Passthrough listeners carries the same SNI index ([`super::ListenerTable::passthrough`]):
//! its HTTPS listeners are entries that pass nothing through, so one lookup says whether a
//! ClientHello is terminated as HTTPS or passed through. Pure.

use std::sync::Arc;

use serde::Serialize;

use super::backend_set::BackendSet;
use super::hostname::{HostnameMap, Pattern};
use super::model::RouteRef;
use super::policy::IpAccess;
use super::source::SocketSource;

/// What one L4 socket forwards to.
#[derive(Debug, Serialize)]
#[serde(tag = "protocol", rename_all = "camelCase")]
pub enum L4Routes {
    /// A TCP socket: every connection goes to the route's backends (none: closed at once).
    Tcp { route: Option<L4Route> },
    /// A UDP socket: every client session goes to the route's backends (none: dropped).
    Udp { route: Option<L4Route> },
    /// A TLS socket: routed by SNI.
    Tls(SniRoutes),
}

/// The backends one L4 route forwards to.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct L4Route {
    pub route: Arc<RouteRef>,
    pub backends: Arc<BackendSet>,
}

/// The Gateway listeners of one TLS socket by hostname, each with its mode and routes.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SniRoutes {
    pub listeners: Vec<SniListener>,
    #[serde(skip)]
    owners: HostnameMap<usize>,
}

/// One TLS Gateway listener: its hostname (`None`: any), whether it terminates TLS, and the
/// route of each effective hostname.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SniListener {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// True for `tls.mode: Terminate`: the proxy completes the handshake with the listener's
    /// certificate and forwards the plaintext; false: the encrypted bytes pass through.
    pub terminate: bool,
    /// Effective hostname (`*` for any) -> route, the first route inserted keeping a hostname.
    pub hosts: Vec<(String, L4Route)>,
    /// The TrafficPolicy `ipAccess` lists of this Gateway listener, checked against the peer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_access: Option<Arc<IpAccess>>,
    /// An HTTPS listener of a socket that also passes TLS through: the connections whose SNI
    /// it owns are HTTPS, terminated with the socket's certificates (it has no routes here).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub https: bool,
    /// The Gateway listener, where the socket's `sources` do not list the socket's listeners
    /// in this order (every listener of an HTTPS socket that passes TLS through): the
    /// metrics' labels.
    #[serde(skip)]
    pub source: Option<SocketSource>,
    #[serde(skip)]
    index: HostnameMap<usize>,
}

impl SniListener {
    /// A listener without routes yet.
    pub fn new(hostname: Option<String>, terminate: bool) -> Self {
        Self {
            hostname,
            terminate,
            hosts: Vec::new(),
            ip_access: None,
            https: false,
            source: None,
            index: HostnameMap::default(),
        }
    }

    /// The entry of an HTTPS listener on a socket that also passes TLS through.
    pub fn https(hostname: Option<String>) -> Self {
        Self {
            https: true,
            ..Self::new(hostname, true)
        }
    }

    /// Adds the route of `hostname` unless an earlier route has that hostname (the caller adds
    /// routes in precedence order).
    pub fn add(&mut self, hostname: &str, route: L4Route) {
        let pattern = if hostname == "*" {
            Pattern::Any
        } else {
            Pattern::of(Some(hostname))
        };
        if self.index.insert(pattern, self.hosts.len()) {
            self.hosts.push((hostname.to_owned(), route));
        }
    }

    /// The route for `sni` (lower-cased): the most specific hostname covering it. Without SNI
    /// only a route for any host matches.
    pub fn route(&self, sni: Option<&str>) -> Option<&L4Route> {
        let i = match sni {
            Some(name) => self.index.find(name),
            None => self.index.find(""),
        }?;
        self.hosts.get(*i).map(|(_, r)| r)
    }
}

impl SniRoutes {
    /// Indexes listeners by hostname; the first listener of a hostname owns it.
    pub fn new(listeners: Vec<SniListener>) -> Self {
        let mut owners = HostnameMap::default();
        for (i, l) in listeners.iter().enumerate() {
            owners.insert(Pattern::of(l.hostname.as_deref()), i);
        }
        Self { listeners, owners }
    }

    /// The Gateway listener a ClientHello with `sni` (lower-cased) is for: the most specific
    /// listener hostname covering it, else the listener without hostname.
    pub fn listener(&self, sni: Option<&str>) -> Option<&SniListener> {
        let i = self.owners.find(sni.unwrap_or(""))?;
        self.listeners.get(*i)
    }

    /// The passthrough listener a ClientHello with `sni` (lower-cased) is for, `None` when an
    /// HTTPS listener owns the name (or nothing does): on an HTTPS socket with passthrough
    /// listeners, whether the connection is passed through or terminated as HTTPS.
    pub fn passes_through(&self, sni: Option<&str>) -> Option<&SniListener> {
        self.listener(sni).filter(|l| !l.https && !l.terminate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(name: &str) -> L4Route {
        L4Route {
            route: Arc::new(RouteRef::new("TLSRoute", "ns", name)),
            backends: Arc::default(),
        }
    }

    #[test]
    fn sni_picks_the_most_specific_listener_then_route() {
        let mut wild = SniListener::new(Some("*.example.com".into()), false);
        wild.add("a.example.com", route("a"));
        wild.add("*.example.com", route("any"));
        wild.add("a.example.com", route("later"));
        let mut exact = SniListener::new(Some("t.example.com".into()), true);
        exact.add("t.example.com", route("t"));
        let mut catch_all = SniListener::new(None, false);
        catch_all.add("*", route("default"));
        let routes = SniRoutes::new(vec![wild, exact, catch_all]);
        let pick = |sni: Option<&str>| {
            let l = routes.listener(sni)?;
            Some((l.terminate, l.route(sni)?.route.name().to_owned()))
        };
        assert_eq!(pick(Some("a.example.com")), Some((false, "a".into())));
        assert_eq!(pick(Some("b.example.com")), Some((false, "any".into())));
        assert_eq!(pick(Some("t.example.com")), Some((true, "t".into())));
        assert_eq!(pick(Some("other.org")), Some((false, "default".into())));
        assert_eq!(pick(None), Some((false, "default".into())));
        let only = SniRoutes::new(vec![SniListener::new(Some("x.io".into()), false)]);
        let mixed = SniRoutes::new(vec![
            SniListener::https(Some("*.example.com".into())),
            SniListener::new(Some("pass.example.com".into()), false),
            SniListener::https(None),
        ]);
        assert!(mixed.passes_through(Some("pass.example.com")).is_some());
        assert!(mixed.passes_through(Some("web.example.com")).is_none());
        assert!(mixed.passes_through(Some("other.org")).is_none());
        assert!(mixed.passes_through(None).is_none());
        assert!(only.listener(Some("y.io")).is_none());
        assert!(only
            .listener(Some("x.io"))
            .unwrap()
            .route(Some("x.io"))
            .is_none());
    }
}
