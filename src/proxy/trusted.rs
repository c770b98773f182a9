//! The trusted proxies: the address ranges whose `X-Forwarded-*` headers the proxy believes,
//! parsed once from `--trusted-proxies` and checked against each connection's peer.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

/// A value of `--trusted-proxies` that is neither an IP address nor a CIDR.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not an IP address or a CIDR range (such as 10.0.0.0/8 or fd00::/8)")]
pub struct TrustedProxiesError(pub String);

/// Peers allowed to tell the proxy who the client is. Only a peer in one of these ranges may
/// pass `X-Forwarded-For`, `-Proto` and `-Host` on; from any other peer those headers are
/// replaced, so a client cannot make a backend believe it comes from another address.
/// Empty by default: nobody is trusted, and checking a peer costs nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    nets: Vec<IpNet>,
}

impl TrustedProxies {
    /// True when `peer` is in one of the ranges. An IPv4 peer seen through a dual-stack socket
    /// (`::ffff:a.b.c.d`) is checked as the IPv4 address it is.
    pub fn contains(&self, peer: IpAddr) -> bool {
        if self.nets.is_empty() {
            return false;
        }
        let peer = peer.to_canonical();
        self.nets.iter().any(|net| net.contains(&peer))
    }

    /// Peers in `nets` (a ProxyConfig's list, already parsed).
    pub fn from_nets(nets: Vec<IpNet>) -> Self {
        Self { nets }
    }

    /// True when no peer is trusted.
    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }
}

impl FromStr for TrustedProxies {
    type Err = TrustedProxiesError;

    /// Reads `CIDR[,CIDR...]`: IPv4 or IPv6 ranges (`10.0.0.0/8`, `fd00::/8`) or single
    /// addresses (`192.0.2.1`, `::1`); spaces around entries and empty entries are ignored.
    /// Host bits below the prefix are cleared (`10.1.2.3/8` is `10.0.0.0/8`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut nets = Vec::new();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let net = match entry.parse::<IpNet>() {
                Ok(net) => net.trunc(),
                Err(_) => entry
                    .parse::<IpAddr>()
                    .map(IpNet::from)
                    .map_err(|_| TrustedProxiesError(entry.to_owned()))?,
            };
            nets.push(net);
        }
        Ok(Self { nets })
    }
}

impl fmt::Display for TrustedProxies {
    /// The ranges as `--trusted-proxies` reads them back, comma-separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, net) in self.nets.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{net}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn parses_ranges_and_single_addresses_of_both_families() {
        let t: TrustedProxies = " 10.1.2.3/8, 192.0.2.7,fd00::/8 ,::1,".parse().unwrap();
        assert_eq!(t.to_string(), "10.0.0.0/8,192.0.2.7/32,fd00::/8,::1/128");
        assert!(t.contains(ip("10.200.0.1")));
        assert!(t.contains(ip("192.0.2.7")));
        assert!(!t.contains(ip("192.0.2.8")));
        assert!(t.contains(ip("fd12::5")));
        assert!(t.contains(ip("::1")));
        assert!(!t.contains(ip("fe80::1")));
        assert!(!t.contains(ip("11.0.0.1")));
    }

    #[test]
    fn mapped_ipv4_peers_match_ipv4_ranges() {
        let t: TrustedProxies = "127.0.0.0/8".parse().unwrap();
        assert!(t.contains(ip("::ffff:127.0.0.5")));
        assert!(!t.contains(ip("::ffff:10.0.0.5")));
    }

    #[test]
    fn empty_trusts_nobody_and_garbage_is_refused() {
        let t: TrustedProxies = "".parse().unwrap();
        assert!(t.is_empty());
        assert!(!t.contains(ip("127.0.0.1")));
        for bad in [
            "10.0.0.0/33",
            "example.com",
            "10.0.0",
            "::1/129",
            "10.0.0.0/8/1",
        ] {
            assert_eq!(
                bad.parse::<TrustedProxies>(),
                Err(TrustedProxiesError(bad.to_owned())),
                "{bad}"
            );
        }
    }
}
