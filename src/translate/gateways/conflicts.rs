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
                        let clashes = bound
                            .iter()
                            .filter(|b| *owner != gi && b.protocol != l.protocol)
                            .find_map(|b| clash(b, l));
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
    let passes = |l: &ListenerModel<'_>| {
        l.protocol == ListenerProtocol::Tls
            && matches!(
                l.spec.tls.as_ref().and_then(|t| t.mode.as_ref()),
                Some(GatewayListenersTlsMode::Passthrough)
            )
    };
    let https = |l: &ListenerModel<'_>| l.protocol == ListenerProtocol::Https;
    (https(a) && passes(b)) || (passes(a) && https(b))
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
}
