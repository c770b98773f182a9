//! Adds the TLS, TCP and UDP sockets to a table: one `ListenerTable` per socket with its
//! [`L4Routes`], the Gateway listeners bound there as sources, and for TLS sockets the
//! certificates of their Terminate listeners (chosen by SNI at the handshake). Routes are
//! added in precedence order: on a TCP or UDP socket the oldest route serves; on a TLS
//! socket the oldest route of each hostname. Of the TrafficPolicy settings of a Gateway or
//! listener target only `ipAccess` applies to these sockets: TCP and UDP sockets carry the
//! lists of every listener bound there, TLS sockets each listener's own. A socket takes the
//! ProxyConfig settings of the first Gateway bound there with some (as HTTP sockets do). TLS
//! Passthrough listeners on the socket of HTTPS listeners (`conflicts` lets them share it
//! with other hostnames) become that socket's `passthrough` routes, beside an entry per HTTPS
//! listener, so the SNI decides between terminating and passing through. Pure.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use foldhash::HashMap;

use crate::table::{
    IpAccess, L4Route, L4Routes, ListenerSettings, ListenerTable, RequestPolicy, RouteTable,
    SniListener, SniRoutes, SocketSource, TlsListener, TlsListeners, VirtualHost,
};
use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::gateways::listener::ListenerModel;
use crate::translate::gateways::protocol::ListenerProtocol;
use crate::translate::gateways::tls::ListenerTls;
use crate::translate::routes::l4route::L4Attached;

/// One L4 socket being built.
struct Socket {
    protocol: ListenerProtocol,
    port: u16,
    /// The position of each Gateway listener bound here, by `(gateway, listener)`, in the
    /// order bound; for TLS, the index of its [`SniListener`] is the same.
    members: HashMap<(usize, usize), usize>,
    sources: Vec<SocketSource>,
    route: Option<L4Route>,
    sni: Vec<SniListener>,
    certificates: Vec<TlsListener>,
    /// The `ipAccess` lists of the listeners bound here (TCP and UDP).
    ip_access: Vec<Arc<IpAccess>>,
    settings: Option<Arc<ListenerSettings>>,
    /// TLS Passthrough listeners on an HTTPS socket of the table: added to it, not a socket.
    onto_https: bool,
}

/// Adds a socket for every valid TLS, TCP and UDP listener of the accepted Gateways, with the
/// routes attached to it, the `ipAccess` lists of the policies of each listener (`policies`:
/// what Gateway and listener targets decide, by `(gateway, listener)` index) and the
/// ProxyConfig settings of each Gateway (`settings`).
pub fn add_l4_sockets(
    table: &mut RouteTable,
    gateways: &[GatewayModel<'_>],
    routes: &[L4Attached],
    policies: &HashMap<(usize, usize), Arc<RequestPolicy>>,
    settings: &[Option<Arc<ListenerSettings>>],
) {
    let mut sockets = sockets_of(table, gateways, policies, settings);
    attach_routes(&mut sockets, gateways, routes);
    for ((udp, addr), s) in sockets {
        if s.onto_https {
            add_passthrough(table, gateways, addr, s);
            continue;
        }
        let mut listener =
            ListenerTable::new(addr, s.sources, Vec::<VirtualHost>::new()).with_port(s.port);
        listener.ip_access = s.ip_access;
        listener.settings = s.settings;
        listener = match s.protocol {
            ListenerProtocol::Tls => {
                if !s.certificates.is_empty() {
                    listener = listener.with_tls(TlsListeners::new(s.certificates));
                }
                listener.with_l4(L4Routes::Tls(SniRoutes::new(s.sni)))
            }
            ListenerProtocol::Udp => listener.with_l4(L4Routes::Udp { route: s.route }),
            _ => listener.with_l4(L4Routes::Tcp { route: s.route }),
        };
        let map = if udp {
            &mut table.udp
        } else {
            &mut table.listeners
        };
        map.insert(addr, Arc::new(listener));
    }
}

/// The L4 sockets of the accepted Gateways' valid TLS, TCP and UDP listeners, by transport
/// and address, each with its listeners' certificates, SNI entries, `ipAccess` lists and the
/// first Gateway's settings; no routes yet. An address an HTTP socket of `table` holds is left
/// to it.
fn sockets_of(
    table: &RouteTable,
    gateways: &[GatewayModel<'_>],
    policies: &HashMap<(usize, usize), Arc<RequestPolicy>>,
    settings: &[Option<Arc<ListenerSettings>>],
) -> BTreeMap<(bool, SocketAddr), Socket> {
    let mut sockets: BTreeMap<(bool, SocketAddr), Socket> = BTreeMap::new();
    for (gi, g) in gateways.iter().enumerate().filter(|(_, g)| g.accepted()) {
        for (li, l) in g.listeners.iter().enumerate() {
            if !l.valid() || !l.protocol.is_l4() {
                continue;
            }
            let Some(port) = g.socket_port(l.port) else {
                continue;
            };
            for ip in &g.binds {
                let key = (l.protocol.is_udp(), SocketAddr::new(*ip, port));
                let held = table.listeners.get(&key.1).filter(|_| !key.0);
                let onto_https = held.is_some_and(|h| h.tls.is_some())
                    && matches!(l.tls, ListenerTls::Passthrough);
                if held.is_some() && !onto_https {
                    // An HTTP socket took the address first (`conflicts` marks the rest).
                    continue;
                }
                let s = sockets.entry(key).or_insert_with(|| Socket {
                    protocol: l.protocol.clone(),
                    port: l.port,
                    members: HashMap::default(),
                    sources: Vec::new(),
                    route: None,
                    sni: Vec::new(),
                    certificates: Vec::new(),
                    ip_access: Vec::new(),
                    settings: None,
                    onto_https,
                });
                if s.protocol != l.protocol || s.members.contains_key(&(gi, li)) {
                    continue;
                }
                let source = l.source(g.namespace, g.name);
                let certificate = match &l.tls {
                    ListenerTls::Ready(c) | ListenerTls::Stale { certificate: c, .. } => Some(c),
                    _ => None,
                };
                // Fails only if the crypto provider lacks TLS 1.2 and 1.3; handshakes for the
                // listener then fail as for an unknown SNI.
                let listener = certificate.and_then(|c| {
                    let hostname = l.hostname.map(str::to_owned);
                    TlsListener::new(hostname, source.to_string(), c.clone(), None, false).ok()
                });
                if let Some(t) = listener {
                    s.certificates.push(t);
                }
                let access = policies.get(&(gi, li)).and_then(|p| p.ip_access.clone());
                let mut sni =
                    SniListener::new(l.hostname.map(str::to_owned), certificate.is_some());
                sni.ip_access = access.clone();
                if s.onto_https {
                    sni.source = Some(source.clone());
                }
                s.sni.push(sni);
                if s.protocol != ListenerProtocol::Tls {
                    s.ip_access.extend(access);
                }
                if s.settings.is_none() {
                    s.settings = settings.get(gi).cloned().flatten();
                }
                let position = s.members.len();
                s.members.insert((gi, li), position);
                s.sources.push(source);
            }
        }
    }
    sockets
}

/// Adds the TLS Passthrough listeners of `s` (with their routes) to the HTTPS socket at
/// `addr`: its `passthrough` routes hold them and an entry per HTTPS listener bound there.
fn add_passthrough(
    table: &mut RouteTable,
    gateways: &[GatewayModel<'_>],
    addr: SocketAddr,
    s: Socket,
) {
    let Some(https) = table.listeners.get_mut(&addr).and_then(Arc::get_mut) else {
        return;
    };
    let mut listeners = Vec::new();
    for g in gateways.iter().filter(|g| g.accepted()) {
        let bound = |l: &&ListenerModel<'_>| {
            l.valid()
                && l.protocol == ListenerProtocol::Https
                && g.socket_port(l.port) == Some(addr.port())
                && g.binds.contains(&addr.ip())
        };
        for l in g.listeners.iter().filter(bound) {
            let mut entry = SniListener::https(l.hostname.map(str::to_owned));
            entry.source = Some(l.source(g.namespace, g.name));
            listeners.push(entry);
        }
    }
    listeners.extend(s.sni);
    https.sources.extend(s.sources);
    https.sources.sort();
    https.sources.dedup();
    https.passthrough = Some(SniRoutes::new(listeners));
}

/// Puts each route on the sockets of the listeners it is attached to: by hostname on a TLS
/// socket's SNI entries, else as the socket's route (the first one attached).
fn attach_routes(
    sockets: &mut BTreeMap<(bool, SocketAddr), Socket>,
    gateways: &[GatewayModel<'_>],
    routes: &[L4Attached],
) {
    for r in routes {
        for a in &r.attachments {
            let g = &gateways[a.gateway];
            let l = &g.listeners[a.listener];
            let Some(port) = g.socket_port(l.port) else {
                continue;
            };
            for ip in &g.binds {
                let key = (l.protocol.is_udp(), SocketAddr::new(*ip, port));
                let Some(s) = sockets.get_mut(&key) else {
                    continue;
                };
                let Some(&member) = s.members.get(&(a.gateway, a.listener)) else {
                    continue;
                };
                if s.protocol == ListenerProtocol::Tls {
                    for host in &a.hostnames {
                        s.sni[member].add(host, r.route.clone());
                    }
                } else if s.route.is_none() {
                    s.route = Some(r.route.clone());
                }
            }
        }
    }
}
