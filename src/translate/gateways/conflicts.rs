//! Listener conflicts: within one Gateway (shared port, different protocol or same hostname) and
//! across Gateways that bind the same socket. One mix of protocols shares a port: HTTPS and TLS
//! in Passthrough mode with different hostnames (the socket reads the ClientHello and either
//! terminates HTTPS or passes the stream through, by SNI). Pure.

use foldhash::HashMap;
use std::collections::hash_map::Entry;
use std::net::SocketAddr;

use crate::status::conditions::Reason;
use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::gateways::listener::ListenerModel;
use crate::translate::gateways::protocol::ListenerProtocol;
use gateway_api::apis::standard::gateways::GatewayListenersTlsMode;

/// Listeners of different Gateways that bind the same address and port share one socket, so they
/// must speak the same protocol. Gateways are taken in `namespace/name` order (the order the
/// table is built in): the first to bind a socket keeps it, and a later Gateway's listener of
/// another protocol there gets `Conflicted` `ProtocolConflict` and is not programmed. A listener
/// whose port is mapped onto a socket that serves another listener port (a port map target that
/// is also a Gateway's port) gets `PortUnavailable` the same way: one socket answers for one
/// listener port.
pub fn mark_socket_conflicts(gateways: &mut [GatewayModel<'_>]) {
    // Keyed by transport too: a UDP socket and a TCP socket may share a port number. Each
    // socket keeps its owner (the first Gateway bound there), its listener port and every
    // listener bound so far, for the HTTPS and TLS Passthrough mix.
    let mut sockets: HashMap<(bool, SocketAddr), (usize, u16, Vec<&ListenerModel<'_>>)> =
        HashMap::default();
    let mut marks = Vec::new();
    for (gi, g) in gateways.iter().enumerate() {
        if !g.accepted() {
            continue;
        }
        for (li, l) in g.listeners.iter().enumerate() {
            let Some(port) = g.socket_port(l.port).filter(|_| l.valid()) else {
                continue;
            };
            for ip in &g.binds {
                match sockets.entry((l.protocol.is_udp(), SocketAddr::new(*ip, port))) {
                    Entry::Vacant(e) => {
                        e.insert((gi, l.port, vec![l]));
                    }
                    Entry::Occupied(mut e) => {
                        let (owner, listener_port, bound) = e.get_mut();
                        // Within one Gateway `mark_conflicts` already judged every pair.
                        let clashes = (*owner != gi)
                            .then(|| {
                                bound
                                    .iter()
                                    .filter(|b| b.protocol != l.protocol)
                                    .find_map(|b| clash(b, l))
                            })
                            .flatten();
                        if *listener_port != l.port {
                            marks.push((gi, li, Reason::PortUnavailable));
                        } else if let Some(reason) = clashes {
                            marks.push((gi, li, reason));
                        } else {
                            bound.push(l);
                        }
                    }
                }
            }
        }
    }
    for (gi, li, reason) in marks {
        gateways[gi].listeners[li].conflict = Some(reason);
    }
}

/// Listeners of one Gateway conflict when they share a port with different protocols
/// (`ProtocolConflict`) or the same protocol and hostname (`HostnameConflict`). Every listener
/// of a conflicting group is marked: none is picked as the winner. A UDP listener and a TCP
/// based one on the same port number use different sockets and do not conflict.
pub fn mark_conflicts(listeners: &mut [ListenerModel<'_>]) {
    let n = listeners.len();
    let mut marks: Vec<Option<Reason>> = vec![None; n];
    for i in 0..n {
        for j in 0..n {
            if i == j {
                continue;
            }
            match clash(&listeners[j], &listeners[i]) {
                Some(Reason::ProtocolConflict) => marks[i] = Some(Reason::ProtocolConflict),
                Some(reason) if marks[i].is_none() => marks[i] = Some(reason),
                _ => {}
            }
        }
    }
    for (l, m) in listeners.iter_mut().zip(marks) {
        l.conflict = m;
    }
}

/// Why `later` cannot share its port with `earlier`: `ProtocolConflict` when they speak
/// different protocols (but HTTPS beside TLS Passthrough), `HostnameConflict` when they have
/// the same hostname and protocol (or are that mix); `None` when they do not conflict (other
/// port, UDP beside a TCP based protocol, or the mix with different hostnames).
pub fn clash(earlier: &ListenerModel<'_>, later: &ListenerModel<'_>) -> Option<Reason> {
    if earlier.port != later.port || earlier.protocol.is_udp() != later.protocol.is_udp() {
        None
    } else if earlier.protocol != later.protocol && !https_beside_passthrough(earlier, later) {
        Some(Reason::ProtocolConflict)
    } else if earlier.hostname == later.hostname {
        Some(Reason::HostnameConflict)
    } else {
        None
    }
}

/// True for an HTTPS listener and a TLS listener in Passthrough mode, either way round: one
/// socket serves both, choosing by the ClientHello's SNI.
fn https_beside_passthrough(a: &ListenerModel<'_>, b: &ListenerModel<'_>) -> bool {
    let https = |l: &ListenerModel<'_>| l.protocol == ListenerProtocol::Https;
    (https(a) && passes_through(b)) || (passes_through(a) && https(b))
}

/// A TLS listener in Passthrough mode.
fn passes_through(l: &ListenerModel<'_>) -> bool {
    l.protocol == ListenerProtocol::Tls
        && matches!(
            l.spec.tls.as_ref().and_then(|t| t.mode.as_ref()),
            Some(GatewayListenersTlsMode::Passthrough)
        )
}

/// The listeners of a Gateway that are not conflicted, indexed so that the first one a new
/// listener clashes with is found without trying every one: a Gateway taking in thousands of
/// ListenerSets has as many listeners on one port. Per port and transport it keeps the first
/// listener of each protocol (TLS Passthrough apart), which is where a `ProtocolConflict`
/// shows first, and the listeners by hostname, the only ones a `HostnameConflict` can come
/// from. Holds indexes into the Gateway's `listeners`.
#[derive(Debug, Default)]
pub struct Served<'a> {
    ports: HashMap<(u16, bool), ServedPort<'a>>,
}

#[derive(Debug, Default)]
struct ServedPort<'a> {
    /// The first listener of each (protocol, passes through), in order.
    kinds: Vec<((ListenerProtocol, bool), usize)>,
    hostnames: HashMap<Option<&'a str>, Vec<usize>>,
}

impl<'a> Served<'a> {
    /// Indexes `listeners[from..]` that are not conflicted.
    pub fn add(&mut self, listeners: &[ListenerModel<'a>], from: usize) {
        for (i, l) in listeners.iter().enumerate().skip(from) {
            if l.conflict.is_some() {
                continue;
            }
            let port = self.ports.entry((l.port, l.protocol.is_udp())).or_default();
            let kind = (l.protocol.clone(), passes_through(l));
            if !port.kinds.iter().any(|(k, _)| *k == kind) {
                port.kinds.push((kind, i));
            }
            port.hostnames.entry(l.hostname).or_default().push(i);
        }
    }

    /// What `clash` says of the first indexed listener of `listeners` that `later` clashes
    /// with: the answer of trying them in order. Listeners of one protocol clash alike on a
    /// protocol, so the first of each stands for all; a hostname clash needs the same hostname.
    pub fn first_clash(
        &self,
        listeners: &[ListenerModel<'a>],
        later: &ListenerModel<'a>,
    ) -> Option<Reason> {
        let port = self.ports.get(&(later.port, later.protocol.is_udp()))?;
        let same_hostname = port.hostnames.get(&later.hostname).into_iter().flatten();
        port.kinds
            .iter()
            .map(|(_, i)| i)
            .chain(same_hostname)
            .filter_map(|&i| Some((i, clash(listeners.get(i)?, later)?)))
            .min_by_key(|(i, _)| *i)
            .map(|(_, reason)| reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::gateways::listener::listener_model;
    use crate::translate::gateways::tls::ListenerTls;
    use gateway_api::apis::standard::gateways::Gateway;

    fn gateway(yaml: &str) -> Gateway {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn conflicts_mark_every_listener_involved() {
        let gw = gateway(
            "metadata: {name: g}\nspec:\n  gatewayClassName: c\n  listeners:\n  - {name: a, port: 80, protocol: HTTP}\n  - {name: b, port: 80, protocol: HTTP}\n  - {name: c, port: 81, protocol: HTTP, hostname: x.com}\n  - {name: d, port: 81, protocol: HTTP, hostname: y.com}\n  - {name: e, port: 82, protocol: HTTP}\n  - {name: f, port: 82, protocol: TCP}\n  - {name: g, port: 83, protocol: TCP}\n  - {name: h, port: 83, protocol: UDP}\n  - {name: i, port: 84, protocol: TLS, hostname: a.com, tls: {mode: Passthrough}}\n  - {name: j, port: 84, protocol: TLS, hostname: b.com}\n  - {name: k, port: 85, protocol: HTTPS, hostname: a.com}\n  - {name: l, port: 85, protocol: TLS, hostname: b.com, tls: {mode: Passthrough}}\n  - {name: m, port: 85, protocol: TLS, hostname: a.com, tls: {mode: Passthrough}}\n  - {name: n, port: 86, protocol: HTTPS, hostname: a.com}\n  - {name: o, port: 86, protocol: TLS, hostname: b.com}\n",
        );
        let mut ls: Vec<_> = gw
            .spec
            .listeners
            .iter()
            .map(|l| listener_model(l, ListenerTls::Plain))
            .collect();
        mark_conflicts(&mut ls);
        let got: Vec<_> = ls.iter().map(|l| l.conflict).collect();
        let h = Some(Reason::HostnameConflict);
        let p = Some(Reason::ProtocolConflict);
        // HTTPS beside TLS Passthrough shares a port unless a hostname repeats; beside TLS
        // Terminate it does not.
        assert_eq!(
            got,
            vec![h, h, None, None, p, p, None, None, None, None, h, None, h, p, p]
        );
    }

    #[test]
    fn the_index_finds_the_clash_trying_each_listener_in_order_finds() {
        let gw = gateway(
            "metadata: {name: g}\nspec:\n  gatewayClassName: c\n  listeners:\n  - {name: a, port: 80, protocol: HTTP, hostname: a.com}\n  - {name: b, port: 80, protocol: HTTP, hostname: b.com}\n  - {name: c, port: 80, protocol: HTTP}\n  - {name: d, port: 81, protocol: TCP}\n  - {name: e, port: 81, protocol: UDP}\n  - {name: f, port: 85, protocol: HTTPS, hostname: a.com}\n  - {name: g, port: 85, protocol: TLS, hostname: b.com, tls: {mode: Passthrough}}\n  - {name: h, port: 86, protocol: TLS, hostname: a.com}\n  - {name: x, port: 80, protocol: HTTP, hostname: x.com}\n",
        );
        let later = gateway(
            "metadata: {name: g}\nspec:\n  gatewayClassName: c\n  listeners:\n  - {name: l1, port: 80, protocol: HTTP, hostname: b.com}\n  - {name: l2, port: 80, protocol: HTTP, hostname: new.com}\n  - {name: l3, port: 80, protocol: HTTPS, hostname: a.com}\n  - {name: l4, port: 80, protocol: HTTP}\n  - {name: l5, port: 81, protocol: UDP}\n  - {name: l6, port: 81, protocol: HTTP}\n  - {name: l7, port: 85, protocol: TLS, hostname: a.com, tls: {mode: Passthrough}}\n  - {name: l8, port: 85, protocol: TLS, hostname: c.com, tls: {mode: Passthrough}}\n  - {name: l9, port: 85, protocol: HTTPS, hostname: b.com}\n  - {name: l10, port: 85, protocol: TLS, hostname: c.com}\n  - {name: l11, port: 86, protocol: TLS, hostname: a.com}\n  - {name: l12, port: 80, protocol: HTTP, hostname: x.com}\n  - {name: l13, port: 87, protocol: HTTP}\n",
        );
        let mut served: Vec<_> = gw
            .spec
            .listeners
            .iter()
            .map(|l| listener_model(l, ListenerTls::Plain))
            .collect();
        // A conflicted listener is not indexed: nothing clashes with it.
        if let Some(x) = served.last_mut() {
            x.conflict = Some(Reason::HostnameConflict);
        }
        let mut index = Served::default();
        index.add(&served[..4], 0);
        index.add(&served, 4);
        let got: Vec<_> = later
            .spec
            .listeners
            .iter()
            .map(|l| {
                let l = listener_model(l, ListenerTls::Plain);
                let scanned = served
                    .iter()
                    .filter(|e| e.conflict.is_none())
                    .find_map(|e| clash(e, &l));
                let indexed = index.first_clash(&served, &l);
                assert_eq!(indexed, scanned, "{}", l.spec.name);
                indexed
            })
            .collect();
        let h = Some(Reason::HostnameConflict);
        let p = Some(Reason::ProtocolConflict);
        assert_eq!(got, vec![h, None, p, h, h, p, h, None, h, p, h, None, None]);
    }
}
