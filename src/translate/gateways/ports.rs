//! Standalone port mapping (`serve --port-map 80=18080`): the local port a Gateway listener
//! port binds, as a per-Gateway Service's `targetPort` does in a cluster. Pure.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// Listener port -> the port its socket binds. Ports without an entry bind themselves. Lets a
/// standalone proxy serve Gateways that listen on 80 and 443 without the privilege to bind
/// those ports; statuses still report the Gateways' own listener ports, and redirects still
/// use them, so clients are expected to reach the mapped sockets through a forward or NAT rule
/// (or, in tests, directly).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortMap(BTreeMap<u16, u16>);

/// Why a `--port-map` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortMapError {
    #[error("`{0}` is not LISTENER=LOCAL (e.g. 80=18080)")]
    Syntax(String),
    #[error("`{0}` is not a port number from 1 to 65535")]
    Port(String),
    #[error("listener port {0} is mapped twice")]
    DuplicateListener(u16),
    #[error("local port {0} is the target of two listener ports")]
    DuplicateLocal(u16),
}

impl PortMap {
    /// The port a listener declared on `listener_port` binds.
    pub fn socket_port(&self, listener_port: u16) -> u16 {
        self.0.get(&listener_port).copied().unwrap_or(listener_port)
    }

    /// True when no port is mapped.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `(listener, local)` pairs, by listener port.
    pub fn iter(&self) -> impl Iterator<Item = (u16, u16)> + '_ {
        self.0.iter().map(|(l, s)| (*l, *s))
    }

    /// Builds a map from pairs; two entries for one listener port or one local port are refused
    /// (the latter would merge two listener ports onto one socket).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (u16, u16)>) -> Result<Self, PortMapError> {
        let mut map = BTreeMap::new();
        for (listener, local) in pairs {
            if map.values().any(|v| *v == local) {
                return Err(PortMapError::DuplicateLocal(local));
            }
            if map.insert(listener, local).is_some() {
                return Err(PortMapError::DuplicateListener(listener));
            }
        }
        Ok(Self(map))
    }
}

fn port(s: &str) -> Result<u16, PortMapError> {
    s.trim()
        .parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| PortMapError::Port(s.trim().to_owned()))
}

/// `80=18080,443=18443` (empty: no mapping).
impl FromStr for PortMap {
    type Err = PortMapError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let pairs = s
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|pair| {
                let (l, r) = pair
                    .split_once('=')
                    .ok_or_else(|| PortMapError::Syntax(pair.to_owned()))?;
                Ok((port(l)?, port(r)?))
            })
            .collect::<Result<Vec<_>, PortMapError>>()?;
        Self::from_pairs(pairs)
    }
}

impl fmt::Display for PortMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pairs: Vec<String> = self.iter().map(|(l, s)| format!("{l}={s}")).collect();
        f.write_str(&pairs.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_maps() {
        let m: PortMap = "80=18080, 443=18443".parse().unwrap();
        assert_eq!(m.socket_port(80), 18080);
        assert_eq!(m.socket_port(443), 18443);
        assert_eq!(m.socket_port(8080), 8080);
        assert_eq!(m.to_string(), "80=18080,443=18443");
        assert!("".parse::<PortMap>().unwrap().is_empty());
        // A chain is two distinct sockets, not a collision.
        let chain: PortMap = "80=8080,8080=9090".parse().unwrap();
        assert_eq!(
            (chain.socket_port(80), chain.socket_port(8080)),
            (8080, 9090)
        );
    }

    /// Mapped listeners bind the local ports on the Gateway's own addresses; their status is
    /// the unmapped one, and the table remembers the listener port for redirects. A local port
    /// that is also a listener port of the same address cannot serve both.
    #[test]
    fn translation_binds_mapped_ports_and_reports_listener_ports() {
        use crate::translate::{testing, translate};
        let gw = |name: &str, ip: &str, port: u16| {
            format!(
                "metadata: {{name: {name}, namespace: ns, generation: 1}}\nspec:\n  \
                 gatewayClassName: c\n  addresses: [{{value: {ip}}}]\n  listeners:\n  \
                 - {{name: http, port: {port}, protocol: HTTP}}\n  \
                 - {{name: alt, port: 8080, protocol: HTTP}}\n"
            )
        };
        let snapshot = testing::snapshot(&[gw("a", "127.0.0.2", 80), gw("b", "127.0.0.3", 18080)]);
        let options = testing::options("80=18080,18080=28080".parse().unwrap());
        let t = translate(&snapshot, &options);
        let sockets: Vec<(String, u16)> = t
            .table
            .listeners
            .iter()
            .map(|(a, l)| (a.to_string(), l.listener_port()))
            .collect();
        assert_eq!(
            sockets,
            [
                ("127.0.0.2:8080".to_owned(), 8080),
                ("127.0.0.2:18080".to_owned(), 80),
                ("127.0.0.3:8080".to_owned(), 8080),
                ("127.0.0.3:28080".to_owned(), 18080),
            ]
        );
        let a = t
            .status
            .get(crate::status::ObjectKind::Gateway, Some("ns"), "a")
            .unwrap()
            .status
            .to_json();
        assert_eq!(a["addresses"][0]["value"], "127.0.0.2");
        assert_eq!(a["conditions"][1]["status"], "True");
        assert_eq!(a["listeners"][0]["conditions"][1]["status"], "True");

        // Without the chain, `b`'s 18080 listener meets `a`'s mapped 80 on one socket.
        let shared = testing::snapshot(&[gw("a", "127.0.0.2", 80), gw("b", "127.0.0.2", 18080)]);
        let t = translate(&shared, &testing::options("80=18080".parse().unwrap()));
        let b = t
            .status
            .get(crate::status::ObjectKind::Gateway, Some("ns"), "b")
            .unwrap()
            .status
            .to_json();
        let http = &b["listeners"][0]["conditions"];
        assert_eq!(http[0]["reason"], "PortUnavailable");
        assert_eq!(http[3]["status"], "True");
        assert_eq!(t.table.listeners.len(), 2);
        let socket = &t.table.listeners[&"127.0.0.2:18080".parse().unwrap()];
        assert_eq!((socket.listener_port(), socket.sources.len()), (80, 1));
    }

    #[test]
    fn refuses_bad_values() {
        let err = |s: &str| s.parse::<PortMap>().unwrap_err();
        assert_eq!(err("80"), PortMapError::Syntax("80".into()));
        assert_eq!(err("80=x"), PortMapError::Port("x".into()));
        assert_eq!(err("0=80"), PortMapError::Port("0".into()));
        assert_eq!(err("80=70000"), PortMapError::Port("70000".into()));
        assert_eq!(err("80=1,80=2"), PortMapError::DuplicateListener(80));
        assert_eq!(err("80=1,81=1"), PortMapError::DuplicateLocal(1));
    }
}
