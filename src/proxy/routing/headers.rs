//! Header hygiene at the proxy boundary: hop-by-hop headers are removed in both directions, and
//! `X-Forwarded-For`, `-Proto` and `-Host` are set on the way upstream (kept from trusted
//! proxies, replaced for everyone else).

use std::net::IpAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// The headers that describe one connection rather than the message (RFC 9110 7.6.1), besides
/// those `Connection` names. `TE` is last: [`strip_hop_by_hop`] may put it back.
static HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::TE,
];

/// Removes the headers that describe one connection rather than the message (RFC 9110 7.6.1):
/// `Connection` and every header it names, `Keep-Alive`, `Proxy-Connection`, `Trailer`,
/// `Transfer-Encoding`, `Upgrade`, and `TE` unless it asks for `trailers` (then it is kept as
/// exactly `trailers`, the only value HTTP/2 allows).
///
/// Runs twice per proxied request, so it first finds in one pass over the names which of them
/// are present (most requests carry none; most responses only `Connection`), and removes only
/// those: a removal costs a hash and a probe whether or not the header is there.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let present = headers
        .keys()
        .fold(0u8, |present, name| present | bit(name));
    if present == 0 {
        return;
    }
    let has = |name: &HeaderName| present & bit(name) != 0;
    let listed: Vec<HeaderName> = if has(&header::CONNECTION) {
        headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            // `keep-alive`, the usual value, is removed below anyway: skipped before parsing,
            // which allocates for a name that is not a standard one.
            .filter(|token| !is_hop_by_hop(token))
            .filter_map(|name| HeaderName::from_bytes(name.as_bytes()).ok())
            .filter(|name| headers.contains_key(name))
            .collect()
    } else {
        Vec::new()
    };
    let wants_trailers = has(&header::TE)
        && headers
            .get_all(header::TE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| {
                t.split(';')
                    .next()
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case("trailers"))
            });
    for name in listed {
        headers.remove(name);
    }
    for (i, name) in HOP_BY_HOP.iter().enumerate() {
        if present & (1 << i) != 0 {
            headers.remove(name);
        }
    }
    if wants_trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
}

/// The bit of `name` in a set of [`HOP_BY_HOP`] (its position there), 0 for any other name.
/// A string match: a name of another length is ruled out before any byte is compared, where
/// comparing `HeaderName`s takes a comparison per entry of [`HOP_BY_HOP`].
fn bit(name: &HeaderName) -> u8 {
    let index = match name.as_str() {
        "connection" => 0,
        "keep-alive" => 1,
        "proxy-connection" => 2,
        "trailer" => 3,
        "transfer-encoding" => 4,
        "upgrade" => 5,
        "te" => 6,
        _ => return 0,
    };
    debug_assert_eq!(HOP_BY_HOP[index], *name);
    1 << index
}

/// Whether a `Connection` token names one of [`HOP_BY_HOP`].
fn is_hop_by_hop(token: &str) -> bool {
    HOP_BY_HOP
        .iter()
        .any(|h| token.eq_ignore_ascii_case(h.as_str()))
}

/// Sets the forwarded headers upstream. From a trusted proxy (`trusted`), the `X-Forwarded-For`
/// it sent is kept (earlier values folded into one line) with `client` appended, and the
/// `X-Forwarded-Proto`, `X-Forwarded-Host` and `Forwarded` it sent are kept (the proxy's own
/// values fill in those it did not send). From any other peer, all four are dropped and
/// replaced by what this proxy knows: `X-Forwarded-For: client`, `proto` and `original_host`,
/// so a client cannot claim another address, scheme or host. `client` is the peer's address
/// as a header value (`client_address`), made once per connection.
pub fn set_forwarded(
    headers: &mut HeaderMap,
    client: &HeaderValue,
    trusted: bool,
    proto: &'static str,
    original_host: Option<&HeaderValue>,
) {
    let chain: Vec<&str> = if trusted {
        headers
            .get_all(&X_FORWARDED_FOR)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect()
    } else {
        headers.remove(header::FORWARDED);
        Vec::new()
    };
    let xff = if chain.is_empty() {
        Some(client.clone())
    } else {
        let mut line = chain.join(", ");
        line.push_str(", ");
        line.push_str(client.to_str().unwrap_or_default());
        HeaderValue::from_str(&line).ok()
    };
    match xff {
        Some(v) => {
            headers.insert(X_FORWARDED_FOR, v);
        }
        None => {
            headers.remove(&X_FORWARDED_FOR);
        }
    }
    if !(trusted && headers.contains_key(&X_FORWARDED_PROTO)) {
        headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static(proto));
    }
    if trusted && headers.contains_key(&X_FORWARDED_HOST) {
        return;
    }
    match original_host {
        Some(h) => {
            headers.insert(X_FORWARDED_HOST, h.clone());
        }
        None => {
            headers.remove(&X_FORWARDED_HOST);
        }
    }
}

/// A client's address as the `X-Forwarded-For` value it contributes.
pub fn client_address(client: IpAddr) -> HeaderValue {
    HeaderValue::from_str(&client.to_string())
        .unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn removes_hop_by_hop_and_listed_headers() {
        let mut h = map(&[
            ("connection", "keep-alive, X-Secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("trailer", "x-t"),
            ("te", "gzip"),
            ("x-kept", "yes"),
        ]);
        strip_hop_by_hop(&mut h);
        let names: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, vec!["x-kept"]);
    }

    #[test]
    fn a_message_without_hop_by_hop_headers_is_left_as_it_is() {
        let pairs = [
            ("host", "a.example"),
            ("x-one", "1"),
            ("x-one", "2"),
            ("accept", "*/*"),
        ];
        let mut h = map(&pairs);
        strip_hop_by_hop(&mut h);
        assert_eq!(h, map(&pairs));
    }

    #[test]
    fn connection_naming_absent_or_hop_by_hop_headers_removes_only_what_is_there() {
        let mut h = map(&[
            ("connection", "close, keep-alive, x-absent"),
            ("content-length", "13"),
        ]);
        strip_hop_by_hop(&mut h);
        let names: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, vec!["content-length"]);
    }

    #[test]
    fn te_trailers_survives_alone() {
        let mut h = map(&[("te", "gzip, trailers;q=1")]);
        strip_hop_by_hop(&mut h);
        assert_eq!(h["te"], "trailers");
    }

    #[test]
    fn forwarded_headers_from_a_trusted_proxy_are_kept_and_appended() {
        let mut h = map(&[
            ("x-forwarded-for", "10.0.0.1"),
            ("x-forwarded-for", "10.0.0.2"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "public.example"),
            ("forwarded", "for=10.0.0.1"),
        ]);
        let host = HeaderValue::from_static("a.example:8080");
        set_forwarded(
            &mut h,
            &client_address("127.0.0.9".parse().unwrap()),
            true,
            "http",
            Some(&host),
        );
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, 10.0.0.2, 127.0.0.9");
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["x-forwarded-host"], "public.example");
        assert_eq!(h["forwarded"], "for=10.0.0.1");

        let mut h = HeaderMap::new();
        set_forwarded(
            &mut h,
            &client_address("127.0.0.9".parse().unwrap()),
            true,
            "http",
            Some(&host),
        );
        assert_eq!(h["x-forwarded-for"], "127.0.0.9");
        assert_eq!(h["x-forwarded-proto"], "http");
        assert_eq!(h["x-forwarded-host"], "a.example:8080");
    }

    #[test]
    fn forwarded_headers_from_anyone_else_are_replaced() {
        let mut h = map(&[
            ("x-forwarded-for", "10.0.0.1"),
            ("x-forwarded-for", "10.0.0.2"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "spoofed.example"),
            ("forwarded", "for=10.0.0.1"),
        ]);
        let host = HeaderValue::from_static("a.example:8080");
        set_forwarded(
            &mut h,
            &client_address("127.0.0.9".parse().unwrap()),
            false,
            "http",
            Some(&host),
        );
        assert_eq!(h.get_all("x-forwarded-for").iter().count(), 1);
        assert_eq!(h["x-forwarded-for"], "127.0.0.9");
        assert_eq!(h["x-forwarded-proto"], "http");
        assert_eq!(h["x-forwarded-host"], "a.example:8080");
        assert!(h.get("forwarded").is_none());

        set_forwarded(
            &mut h,
            &client_address("127.0.0.9".parse().unwrap()),
            false,
            "http",
            None,
        );
        assert!(h.get("x-forwarded-host").is_none());
    }
}
