//! The consistent-hash key of a request: the hash of a header value, a cookie value or the
//! client's IP, as the Service's balancing policy says. A request without the key gets none
//! and is balanced by least request instead.

use std::net::IpAddr;

use http::{header, HeaderMap};

use super::ring::{hash_bytes, hash_ip};
use crate::table::{Balance, HashOn};

/// The request's hash key for `balance`, or None when the Service does not hash or the request
/// lacks the header or cookie. Called once per request, before the first pick.
pub(crate) fn hash_key(balance: &Balance, headers: &HeaderMap, peer: IpAddr) -> Option<u64> {
    let Balance::ConsistentHash { on } = balance else {
        return None;
    };
    match on {
        HashOn::Header(name) => headers.get(name.as_str()).map(|v| hash_bytes(v.as_bytes())),
        HashOn::Cookie(name) => cookie(headers, name).map(hash_bytes),
        HashOn::SourceIp => Some(hash_ip(peer)),
    }
}

/// The value of cookie `name` in the request's `Cookie` headers (HTTP/2 may split them).
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a [u8]> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b';'))
        .find_map(|pair| {
            let pair = pair.trim_ascii();
            let eq = pair.iter().position(|b| *b == b'=')?;
            (&pair[..eq] == name.as_bytes()).then(|| &pair[eq + 1..])
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn hashing(on: HashOn) -> Balance {
        Balance::ConsistentHash { on }
    }

    #[test]
    fn keys_come_from_the_configured_source() {
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-user", HeaderValue::from_static("alice"));
        h.append(header::COOKIE, HeaderValue::from_static("a=1; sid=abc"));
        h.append(header::COOKIE, HeaderValue::from_static("other=2"));
        let by_header = hash_key(&hashing(HashOn::Header("x-user".into())), &h, ip);
        assert_eq!(by_header, Some(hash_bytes(b"alice")));
        let by_cookie = hash_key(&hashing(HashOn::Cookie("sid".into())), &h, ip);
        assert_eq!(by_cookie, Some(hash_bytes(b"abc")));
        let other = hash_key(&hashing(HashOn::Cookie("other".into())), &h, ip);
        assert_eq!(other, Some(hash_bytes(b"2")));
        let by_ip = hash_key(&hashing(HashOn::SourceIp), &h, ip);
        assert_eq!(by_ip, Some(hash_ip(ip)));
        // Missing key, or a Service that does not hash: no key.
        assert_eq!(
            hash_key(&hashing(HashOn::Header("x-none".into())), &h, ip),
            None
        );
        assert_eq!(hash_key(&hashing(HashOn::Cookie("s".into())), &h, ip), None);
        assert_eq!(hash_key(&Balance::LeastRequest, &h, ip), None);
        assert_eq!(hash_key(&Balance::RoundRobin, &h, ip), None);
    }
}
