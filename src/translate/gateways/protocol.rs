//! The protocol of a Gateway listener, parsed once when the listener is modelled, so that
//! conflicts, attachment and the table compare a type instead of the spec's strings. Pure.

/// `spec.listeners[].protocol`. The core protocols are variants; anything else (an
/// implementation-specific `domain/name`, or a typo) is kept as written, so that two different
/// unknown protocols on one port still conflict with each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenerProtocol {
    Http,
    Https,
    Tls,
    Tcp,
    Udp,
    Other(String),
}

use std::sync::LazyLock;

use crate::kinds::routes::RouteKindId;

impl ListenerProtocol {
    /// Parses the spec's spelling (case-sensitive, as the CRD defines the values).
    pub fn parse(protocol: &str) -> Self {
        match protocol {
            "HTTP" => Self::Http,
            "HTTPS" => Self::Https,
            "TLS" => Self::Tls,
            "TCP" => Self::Tcp,
            "UDP" => Self::Udp,
            other => Self::Other(other.to_owned()),
        }
    }

    /// True for the protocols this data plane serves routes on.
    pub fn is_supported(&self) -> bool {
        !matches!(self, Self::Other(_))
    }

    /// True when the socket terminates TLS before HTTP (certificates come from the listener).
    pub fn terminates_tls(&self) -> bool {
        matches!(self, Self::Https)
    }

    /// True when the listener's `tls` block is read: HTTPS, and TLS (Terminate or Passthrough).
    pub fn carries_tls(&self) -> bool {
        matches!(self, Self::Https | Self::Tls)
    }

    /// True for the protocols served as streams or datagrams rather than HTTP requests.
    pub fn is_l4(&self) -> bool {
        matches!(self, Self::Tls | Self::Tcp | Self::Udp)
    }

    /// True when the listener's socket is a UDP one: it shares a port number with TCP
    /// listeners without conflicting with them.
    pub fn is_udp(&self) -> bool {
        matches!(self, Self::Udp)
    }

    /// The route kinds a listener of this protocol carries (none: unsupported protocol), in
    /// the order `route_kinds!` declares them: its default `allowedRoutes.kinds`.
    pub fn route_kinds(&self) -> &'static [&'static str] {
        static BY_PROTOCOL: LazyLock<[Vec<&'static str>; 5]> = LazyLock::new(|| {
            ["HTTP", "HTTPS", "TLS", "TCP", "UDP"].map(|protocol| {
                let kinds = RouteKindId::ALL.iter();
                let carried = kinds.filter(|k| k.protocols().contains(&protocol));
                carried.map(|k| k.as_str()).collect()
            })
        });
        match self {
            Self::Http => &BY_PROTOCOL[0],
            Self::Https => &BY_PROTOCOL[1],
            Self::Tls => &BY_PROTOCOL[2],
            Self::Tcp => &BY_PROTOCOL[3],
            Self::Udp => &BY_PROTOCOL[4],
            Self::Other(_) => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_protocols_parse_and_others_stay_distinct() {
        assert_eq!(ListenerProtocol::parse("HTTPS"), ListenerProtocol::Https);
        assert!(ListenerProtocol::parse("HTTP").is_supported());
        assert!(ListenerProtocol::parse("TCP").is_supported());
        assert!(!ListenerProtocol::parse("SCTP").is_supported());
        assert_eq!(ListenerProtocol::parse("TLS").route_kinds(), ["TLSRoute"]);
        assert_eq!(ListenerProtocol::parse("UDP").route_kinds(), ["UDPRoute"]);
        assert_eq!(
            ListenerProtocol::parse("HTTPS").route_kinds(),
            ["HTTPRoute", "GRPCRoute"]
        );
        assert!(ListenerProtocol::parse("SCTP").route_kinds().is_empty());
        assert!(ListenerProtocol::parse("UDP").is_udp() && ListenerProtocol::parse("TCP").is_l4());
        assert!(
            !ListenerProtocol::parse("http").is_supported(),
            "values are case-sensitive"
        );
        assert_ne!(
            ListenerProtocol::parse("example.com/a"),
            ListenerProtocol::parse("example.com/b")
        );
    }
}
