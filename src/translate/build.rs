//! Assembles the `RouteTable`: one `ListenerTable` per socket (listeners of several Gateways on
//! one address and port merge), one `VirtualHost` per effective hostname, each hostname served
//! only by the most specific listener that matches it (listener isolation). HTTPS listeners
//! bring their certificates; a socket serves one protocol, the first one bound there. A virtual
//! host whose rules are the same `Arc`s as in the previous table is that table's host. Pure.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;

use super::frontend::ClientAuth;
use super::gateway::GatewayModel;
use super::httproute::Attached;
use super::protocol::ListenerProtocol;
use super::rules::CompiledRoute;
use super::tls::ListenerTls;
use crate::table::hostname::{HostnameMap, Pattern};
use crate::table::{
    BackendIdentity, ListenerSettings, ListenerTable, RequestPolicy, RouteRule, RouteTable,
    TlsListener, TlsListeners, VirtualHost,
};

/// Identity of a rule in a virtual host, so a route attached twice is served once.
/// (index of the route in the translation, rule index, match index).
type RuleKey = (usize, u32, u32);

#[derive(Default)]
struct SocketBuild<'r> {
    /// The protocol of the listeners bound here (`conflicts` keeps the first one's).
    protocol: Option<ListenerProtocol>,
    /// The Gateway listener port of the first listener bound here.
    port: u16,
    /// `(gateway, listener)` indexes of the listeners bound here.
    members: Vec<(usize, usize)>,
    tls: Vec<TlsListener>,
    /// The client certificate for TLS backends of the first Gateway bound here with one.
    identity: Option<Arc<BackendIdentity>>,
    /// The ProxyConfig settings of the first Gateway bound here with some.
    settings: Option<Arc<ListenerSettings>>,
    /// The first `(gateway, listener)` bound here with each of `listener_hosts`: its
    /// TrafficPolicy settings are those of the hosts it owns.
    host_owners: Vec<(usize, usize)>,
    sources: BTreeSet<String>,
    /// Hostnames of the listeners bound here (`None`: any host).
    listener_hosts: Vec<Option<String>>,
    /// Which of `listener_hosts` owns a host: the most specific pattern covering it.
    owners: HostnameMap<usize>,
    /// Rules of each host as attached, in route order; sorted by key and deduplicated (a
    /// route attached twice is served once) when the host is built.
    hosts: BTreeMap<String, Vec<(RuleKey, &'r Arc<RouteRule>)>>,
}

/// A virtual host of an earlier table and the rules it was built from, in build order.
#[derive(Debug)]
pub struct CachedHost {
    group: u32,
    rules: Vec<Arc<RouteRule>>,
    policy: Option<Arc<RequestPolicy>>,
    host: Arc<VirtualHost>,
}

/// What the table takes besides Gateways and routes: TrafficPolicy settings of Gateway
/// listeners' virtual hosts, by `(gateway, listener)`, and each Gateway's ProxyConfig settings
/// (by Gateway index).
pub struct Extras<'a> {
    pub hosts: &'a HashMap<(usize, usize), Arc<RequestPolicy>>,
    pub settings: &'a [Option<Arc<ListenerSettings>>],
}

/// Virtual hosts by socket and hostname, carried from one table to the next: sorting and
/// path-indexing a host's rules is skipped when they are the same rules.
pub type HostCache = HashMap<(SocketAddr, String), CachedHost>;

/// The host `name` of socket `addr` serving `rules`: the cached one when built from the same
/// rules for the same listener, else a new one. Either way it is remembered in `next`.
fn virtual_host(
    addr: SocketAddr,
    name: String,
    (group, policy): (u32, Option<Arc<RequestPolicy>>),
    rules: Vec<&Arc<RouteRule>>,
    previous: &mut HostCache,
    next: &mut HostCache,
) -> Arc<VirtualHost> {
    let key = (addr, name);
    let same = |c: &CachedHost| {
        c.group == group
            && c.policy == policy
            && c.rules.len() == rules.len()
            && c.rules.iter().zip(&rules).all(|(a, b)| Arc::ptr_eq(a, b))
    };
    let cached = match previous.remove(&key).filter(same) {
        Some(c) => c,
        None => {
            let rules: Vec<Arc<RouteRule>> = rules.into_iter().cloned().collect();
            let mut host = VirtualHost::new(key.1.clone(), rules.clone()).in_listener(group);
            host.policy = policy.clone();
            CachedHost {
                group,
                host: Arc::new(host),
                rules,
                policy,
            }
        }
    };
    let host = cached.host.clone();
    next.insert(key, cached);
    host
}

/// Builds the table from validated Gateways and each route's attachments and compiled rules,
/// reusing the hosts of `hosts` that serve the same rules and leaving this table's there.
pub fn build_table(
    gateways: &[GatewayModel<'_>],
    routes: &[(Arc<Attached>, Arc<CompiledRoute>)],
    extras: &Extras<'_>,
    generation: u64,
    hosts: &mut HostCache,
) -> RouteTable {
    let mut previous = std::mem::take(hosts);
    let mut sockets: BTreeMap<SocketAddr, SocketBuild> = BTreeMap::new();
    for (gi, g) in gateways.iter().enumerate().filter(|(_, g)| g.accepted()) {
        // TLS, TCP and UDP sockets are built by `l4build`.
        let http = |l: &&super::listener::ListenerModel<'_>| l.valid() && !l.protocol.is_l4();
        for (li, l) in g.listeners.iter().enumerate().filter(|(_, l)| http(l)) {
            let Some(port) = g.socket_port(l.port) else {
                continue;
            };
            for ip in &g.binds {
                let s = sockets.entry(SocketAddr::new(*ip, port)).or_default();
                // `conflicts` marked every listener that would take a socket from the first
                // protocol and listener port bound there; valid ones agree with the first.
                let first = s.protocol.get_or_insert_with(|| l.protocol.clone());
                debug_assert!(*first == l.protocol && (s.members.is_empty() || s.port == l.port));
                s.port = l.port;
                if s.identity.is_none() {
                    if let Some(Ok(id)) = &g.backend_identity {
                        s.identity = Some(id.clone());
                    }
                }
                if s.settings.is_none() {
                    s.settings = extras.settings.get(gi).cloned().flatten();
                }
                if !s.members.contains(&(gi, li)) {
                    s.members.push((gi, li));
                }
                let source = l.source(g.namespace, g.name);
                if let ListenerTls::Ready(certificate) | ListenerTls::Stale { certificate, .. } =
                    &l.tls
                {
                    let validation = match &l.client_auth {
                        ClientAuth::Ready { validation, .. } => Some(validation.clone()),
                        _ => None,
                    };
                    // Fails only if the crypto provider lacks TLS 1.2 and 1.3; handshakes for
                    // the listener then fail as for an unknown SNI.
                    if let Ok(t) = TlsListener::new(
                        l.hostname.map(str::to_owned),
                        source.clone(),
                        certificate.clone(),
                        validation,
                        true,
                    ) {
                        s.tls.push(t);
                    }
                }
                s.sources.insert(source);
                let host = l.hostname.map(str::to_owned);
                if let Some(h) = &host {
                    // An empty host keeps requests for this listener from reaching a less
                    // specific listener's routes.
                    s.hosts.entry(h.clone()).or_default();
                }
                if s.owners
                    .insert(Pattern::of(host.as_deref()), s.listener_hosts.len())
                {
                    s.listener_hosts.push(host);
                    s.host_owners.push((gi, li));
                }
            }
        }
    }
    for (route_index, (attached, compiled)) in routes.iter().enumerate() {
        for a in &attached.attachments {
            let g = &gateways[a.gateway];
            let l = &g.listeners[a.listener];
            let Some(port) = g.socket_port(l.port) else {
                continue;
            };
            for ip in &g.binds {
                let Some(s) = sockets.get_mut(&SocketAddr::new(*ip, port)) else {
                    continue;
                };
                if !s.members.contains(&(a.gateway, a.listener)) {
                    continue;
                }
                for host in &a.hostnames {
                    let owner = s.owners.find(host).map(|&i| s.listener_hosts[i].as_deref());
                    if owner != Some(l.hostname) {
                        continue;
                    }
                    if !s.hosts.contains_key(host) {
                        s.hosts.insert(host.clone(), Vec::new());
                    }
                    let Some(rules) = s.hosts.get_mut(host) else {
                        continue;
                    };
                    for r in &compiled.rules {
                        let key = (route_index, r.rule_index, r.match_index);
                        rules.push((key, r));
                    }
                }
            }
        }
    }
    let listeners = sockets
        .into_iter()
        .map(|(addr, s)| {
            let owners = s.owners;
            let host_owners = s.host_owners;
            let hosts = s
                .hosts
                .into_iter()
                .map(|(name, rules)| {
                    // Hosts of one listener fall back to each other, never to another listener's.
                    let owner = owners.find(&name).copied().unwrap_or(0);
                    let policy = host_owners
                        .get(owner)
                        .and_then(|o| extras.hosts.get(o))
                        .cloned();
                    let group = (owner as u32, policy);
                    let mut rules = rules;
                    // Already in key order unless a route attached to the host twice.
                    rules.sort_by_key(|(key, _)| *key);
                    rules.dedup_by_key(|(key, _)| *key);
                    let rules = rules.into_iter().map(|(_, rule)| rule).collect();
                    virtual_host(addr, name, group, rules, &mut previous, hosts)
                })
                .collect::<Vec<_>>();
            let mut table =
                ListenerTable::new(addr, s.sources.into_iter().collect(), hosts).with_port(s.port);
            table.backend_identity = s.identity;
            table.settings = s.settings;
            if s.protocol
                .as_ref()
                .is_some_and(ListenerProtocol::terminates_tls)
            {
                table = table.with_tls(TlsListeners::new(s.tls));
            }
            (addr, Arc::new(table))
        })
        .collect();
    RouteTable {
        generation,
        listeners,
        backend_tls: BTreeMap::new(),
        udp: BTreeMap::new(),
    }
}
