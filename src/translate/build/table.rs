//! Assembles the `RouteTable`: one `ListenerTable` per socket (listeners of several Gateways on
//! one address and port merge), one `VirtualHost` per effective hostname, each hostname served
//! only by the most specific listener that matches it (listener isolation). HTTPS listeners
//! bring their certificates; a socket serves one protocol, the first one bound there. A virtual
//! host whose rules are the same `Arc`s as in the previous table is that table's host. Pure.

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::table::hostname::Pattern;
use crate::table::{
    BackendIdentity, ListenerSettings, ListenerTable, RequestPolicy, RouteTable, SocketSource,
    TlsListener, TlsListeners,
};
use crate::translate::build::hosts::{HostCache, Layout};
use crate::translate::gateways::frontend::ClientAuth;
use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::gateways::protocol::ListenerProtocol;
use crate::translate::gateways::tls::ListenerTls;
use crate::translate::routes::attach::Attached;
use crate::translate::routes::rules::CompiledRoute;

#[derive(Default)]
struct SocketBuild {
    /// The protocol of the listeners bound here (`conflicts` keeps the first one's).
    protocol: Option<ListenerProtocol>,
    /// The Gateway listener port of the first listener bound here.
    port: u16,
    tls: Vec<TlsListener>,
    /// The client certificate for TLS backends of the first Gateway bound here with one.
    identity: Option<Arc<BackendIdentity>>,
    /// The ProxyConfig settings of the first Gateway bound here with some.
    settings: Option<Arc<ListenerSettings>>,
    /// The first `(gateway, listener)` bound here with each of the layout's listener hosts:
    /// its TrafficPolicy settings are those of the hosts it owns.
    host_owners: Vec<(usize, usize)>,
    /// The source of each of `host_owners`.
    groups: Vec<SocketSource>,
    /// Every listener bound here with its text form, sorted and made unique by that text
    /// (`SocketSource`'s order) once the socket is complete: one sort of strings instead of a
    /// sorted set kept while thousands of ListenerSets' listeners arrive.
    sources: Vec<(String, SocketSource)>,
    layout: Layout,
}

/// What the table takes besides Gateways and routes: TrafficPolicy settings of Gateway
/// listeners' virtual hosts, by `(gateway, listener)`, and each Gateway's ProxyConfig settings
/// (by Gateway index).
pub struct Extras<'a> {
    pub hosts: &'a HashMap<(usize, usize), Arc<RequestPolicy>>,
    pub settings: &'a [Option<Arc<ListenerSettings>>],
}

/// Builds the table from validated Gateways and each route's attachments and compiled rules,
/// rebuilding only the hosts of `hosts` whose routes changed and leaving this table's there.
pub fn build_table(
    gateways: &[GatewayModel<'_>],
    routes: &[(Arc<Attached>, Arc<CompiledRoute>)],
    extras: &Extras<'_>,
    generation: u64,
    hosts: &mut HostCache,
) -> RouteTable {
    let mut sockets = http_sockets(gateways, extras);
    let layouts = sockets
        .iter_mut()
        .map(|(addr, s)| {
            let mut layout = std::mem::take(&mut s.layout);
            layout.policies = s
                .host_owners
                .iter()
                .map(|o| extras.hosts.get(o).cloned())
                .collect();
            (*addr, layout)
        })
        .collect();
    let mut indexes = hosts.index(gateways, routes, layouts);
    let listeners = sockets
        .into_iter()
        .map(|(addr, s)| {
            let index = indexes.remove(&addr).unwrap_or_default();
            let mut sources = s.sources;
            sources.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            sources.dedup_by(|a, b| a.0 == b.0);
            let sources = sources.into_iter().map(|(_, source)| source).collect();
            let mut table = ListenerTable::indexed(addr, sources, index).with_port(s.port);
            table.groups = s.groups;
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
        attached: Default::default(),
    }
}

/// The HTTP and HTTPS sockets of the accepted Gateways' valid listeners, each with its
/// listeners' sources, certificates, host layout and the first Gateway's identity and
/// settings; routes are indexed onto them afterwards.
fn http_sockets(
    gateways: &[GatewayModel<'_>],
    extras: &Extras<'_>,
) -> BTreeMap<SocketAddr, SocketBuild> {
    let mut sockets: BTreeMap<SocketAddr, SocketBuild> = BTreeMap::new();
    for (gi, g) in gateways.iter().enumerate().filter(|(_, g)| g.accepted()) {
        // TLS, TCP and UDP sockets are built by `l4build`.
        let http = |l: &&crate::translate::gateways::listener::ListenerModel<'_>| {
            l.valid() && !l.protocol.is_l4()
        };
        for (li, l) in g.listeners.iter().enumerate().filter(|(_, l)| http(l)) {
            let Some(port) = g.socket_port(l.port) else {
                continue;
            };
            for ip in &g.binds {
                let s = sockets.entry(SocketAddr::new(*ip, port)).or_default();
                // `conflicts` marked every listener that would take a socket from the first
                // protocol and listener port bound there; valid ones agree with the first.
                let first = s.protocol.get_or_insert_with(|| l.protocol.clone());
                debug_assert!(
                    *first == l.protocol && (s.layout.members.is_empty() || s.port == l.port)
                );
                s.port = l.port;
                if s.identity.is_none() {
                    if let Some(Ok(id)) = &g.backend_identity {
                        s.identity = Some(id.clone());
                    }
                }
                if s.settings.is_none() {
                    s.settings = extras.settings.get(gi).cloned().flatten();
                }
                let source = l.source(g.namespace, g.name);
                let text = source.to_string();
                if !s.layout.serves((gi, li)) {
                    s.layout.add_member((gi, li), text.clone());
                }
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
                        text.clone(),
                        certificate.clone(),
                        validation,
                        true,
                    ) {
                        s.tls.push(t);
                    }
                }
                s.sources.push((text, source.clone()));
                let host = l.hostname.map(str::to_owned);
                let layout = &mut s.layout;
                if layout
                    .owners
                    .insert(Pattern::of(host.as_deref()), layout.listener_hosts.len())
                {
                    layout.add_listener_host(host);
                    s.host_owners.push((gi, li));
                    s.groups.push(source);
                }
            }
        }
    }
    sockets
}
