//! The client address a policy judges, and the `ipAccess` allow and deny lists. The address is
//! the peer's, or, when the peer is a trusted proxy, the nearest `X-Forwarded-For` hop that is
//! not itself a trusted proxy: a client cannot spoof its way past a list by sending the header.

use std::net::IpAddr;

use http::HeaderMap;

use crate::proxy::trusted::TrustedProxies;
use crate::table::IpAccess;

/// The address the request comes from, as `ipAccess` and client-IP rate limits see it. From an
/// untrusted peer: the peer. From a trusted one: `X-Forwarded-For` read right to left, the
/// first hop outside the trusted ranges (the leftmost hop when every one is trusted); the peer
/// when the header is absent or unreadable.
pub(crate) fn client_ip(peer: IpAddr, trusted: &TrustedProxies, headers: &HeaderMap) -> IpAddr {
    let peer = peer.to_canonical();
    if !trusted.contains(peer) {
        return peer;
    }
    let mut found = None;
    // Several header lines are one list in order (RFC 9110 5.3); walk them from the end.
    let lines: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    for line in lines.iter().rev() {
        for hop in line.rsplit(',') {
            let Some(ip) = parse_hop(hop) else {
                // An unreadable hop ends what can be believed.
                return found.unwrap_or(peer);
            };
            if !trusted.contains(ip) {
                return ip;
            }
            found = Some(ip);
        }
    }
    found.unwrap_or(peer)
}

/// One `X-Forwarded-For` entry: an address, maybe with a port (`1.2.3.4:80`, `[::1]:80`).
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    if let Ok(sock) = hop.parse::<std::net::SocketAddr>() {
        return Some(sock.ip().to_canonical());
    }
    let bracketed = hop.strip_prefix('[')?.split(']').next()?;
    bracketed.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
}

/// True when `ip` may pass: in no `deny` range, and in an `allow` range when any is listed;
/// never when the lists are those of an invalid policy (`refuse_all`).
pub(crate) fn allowed(access: &IpAccess, ip: IpAddr) -> bool {
    if access.refuse_all.is_some() {
        return false;
    }
    let ip = ip.to_canonical();
    if access.deny.iter().any(|n| n.contains(&ip)) {
        return false;
    }
    access.allow.is_empty() || access.allow.iter().any(|n| n.contains(&ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn xff(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append("x-forwarded-for", v.parse().unwrap());
        }
        h
    }

    #[test]
    fn untrusted_peers_are_the_client_whatever_they_claim() {
        let trusted: TrustedProxies = "10.0.0.0/8".parse().unwrap();
        let h = xff(&["1.2.3.4"]);
        assert_eq!(client_ip(ip("192.0.2.1"), &trusted, &h), ip("192.0.2.1"));
        let nobody = TrustedProxies::default();
        assert_eq!(client_ip(ip("10.0.0.1"), &nobody, &h), ip("10.0.0.1"));
    }

    #[test]
    fn trusted_peers_name_the_first_untrusted_hop_from_the_right() {
        let trusted: TrustedProxies = "10.0.0.0/8".parse().unwrap();
        let h = xff(&["6.6.6.6, 1.2.3.4", "10.0.0.9"]);
        assert_eq!(client_ip(ip("10.0.0.1"), &trusted, &h), ip("1.2.3.4"));
        let all_trusted = xff(&["10.1.1.1, 10.2.2.2"]);
        assert_eq!(
            client_ip(ip("10.0.0.1"), &trusted, &all_trusted),
            ip("10.1.1.1")
        );
        assert_eq!(
            client_ip(ip("10.0.0.1"), &trusted, &HeaderMap::new()),
            ip("10.0.0.1")
        );
        let garbage = xff(&["1.2.3.4, junk, 10.3.3.3"]);
        assert_eq!(
            client_ip(ip("10.0.0.1"), &trusted, &garbage),
            ip("10.3.3.3")
        );
        let ported = xff(&["[2001:db8::1]:443"]);
        assert_eq!(
            client_ip(ip("10.0.0.1"), &trusted, &ported),
            ip("2001:db8::1")
        );
    }

    #[test]
    fn deny_wins_and_a_non_empty_allow_list_excludes_the_rest() {
        let access = IpAccess {
            allow: vec!["10.0.0.0/8".parse().unwrap()],
            deny: vec!["10.9.0.0/16".parse().unwrap()],
            refuse_all: None,
        };
        assert!(allowed(&access, ip("10.1.0.1")));
        assert!(!allowed(&access, ip("10.9.0.1")));
        assert!(!allowed(&access, ip("192.0.2.1")));
        let deny_only = IpAccess {
            allow: vec![],
            deny: vec!["192.0.2.0/24".parse().unwrap()],
            refuse_all: None,
        };
        assert!(allowed(&deny_only, ip("198.51.100.1")));
        assert!(!allowed(&deny_only, ip("192.0.2.1")));
        assert!(allowed(&deny_only, ip("::ffff:198.51.100.1")));
        assert!(!allowed(&deny_only, ip("::ffff:192.0.2.1")));
        let broken = IpAccess::refusing_all("default/p".into());
        assert!(!allowed(&broken, ip("198.51.100.1")));
        assert!(!allowed(&broken, ip("::1")));
    }
}
