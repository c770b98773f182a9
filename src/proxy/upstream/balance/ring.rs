//! Consistent hashing: the request's key (the hash of a header value, a cookie value, a query
//! parameter, the path (with or without the query) or the client's IP, as the Service's policy
//! says; none when the request lacks it, which then goes
//! by least request) and the ring: many virtual nodes per endpoint on a 64-bit circle, so a key
//! keeps its endpoint while the endpoint stays, and adding or removing one endpoint of N moves
//! about 1/N of the keys. A ring is built once per endpoint set (cached per Service by the
//! registry) and looked up with one binary search per request.

use std::net::{IpAddr, SocketAddr};

use http::{header, HeaderMap, Uri};

use crate::table::{Balance, HashOn};

/// Virtual nodes per endpoint: enough that each endpoint's share of the circle stays within a
/// few percent of 1/N (the spread shrinks with the square root of this).
const VNODES: u64 = 160;

/// A ring over one endpoint set.
#[derive(Debug)]
pub struct Ring {
    /// The endpoint set it was built from, in table order: a ring is reused while the
    /// Service's endpoints are this list.
    endpoints: Vec<SocketAddr>,
    /// Points on the circle, sorted, each with the index of its endpoint in `endpoints`.
    points: Vec<(u64, u32)>,
}

impl Ring {
    /// Builds the ring of `endpoints`. Points depend only on each endpoint's address, so two
    /// rings that share endpoints agree on the keys those endpoints own.
    pub fn new(endpoints: &[SocketAddr]) -> Self {
        let mut points = Vec::with_capacity(endpoints.len() * VNODES as usize);
        for (i, e) in endpoints.iter().enumerate() {
            let base = hash_addr(e);
            for v in 0..VNODES {
                points.push((mix(base ^ mix(v + 1)), i as u32));
            }
        }
        points.sort_unstable();
        Self {
            endpoints: endpoints.to_vec(),
            points,
        }
    }

    /// True when this ring was built from exactly `endpoints`.
    pub fn serves(&self, endpoints: &[SocketAddr]) -> bool {
        self.endpoints == endpoints
    }

    /// The first endpoint clockwise from `key` that `ok` accepts (ejected or already tried
    /// endpoints are skipped, so their keys spread over the others and come back after).
    pub fn lookup(&self, key: u64, ok: impl Fn(SocketAddr) -> bool) -> Option<SocketAddr> {
        let n = self.points.len();
        if n == 0 {
            return None;
        }
        let start = self.points.partition_point(|p| p.0 < key);
        (0..n)
            .map(|step| self.points[(start + step) % n].1 as usize)
            .map(|i| self.endpoints[i])
            .find(|e| ok(*e))
    }
}

/// The request's hash key for `balance`, or None when the Service does not hash or the request
/// lacks the header, cookie or query parameter. Called once per request, before the first pick.
pub(crate) fn hash_key(
    balance: &Balance,
    headers: &HeaderMap,
    uri: &Uri,
    peer: IpAddr,
) -> Option<u64> {
    let Balance::ConsistentHash { on } = balance else {
        return None;
    };
    match on {
        HashOn::Header(name) => headers.get(name.as_str()).map(|v| hash_bytes(v.as_bytes())),
        HashOn::Cookie(name) => cookie(headers, name).map(hash_bytes),
        HashOn::Query(name) => query_parameter(uri.query()?, name).map(hash_bytes),
        HashOn::SourceIp => Some(hash_ip(peer)),
        HashOn::Path => Some(hash_bytes(uri.path().as_bytes())),
        HashOn::PathAndQuery => Some(hash_bytes(
            uri.path_and_query()
                .map_or(uri.path(), |p| p.as_str())
                .as_bytes(),
        )),
    }
}

/// The raw value of the first query parameter `name` (`a=1&name=v`), as sent.
fn query_parameter<'a>(query: &'a str, name: &str) -> Option<&'a [u8]> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then_some(value.as_bytes())
    })
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

/// FNV-1a over `bytes`, finished with [`mix`]: stable across processes and versions, so every
/// replica of the proxy sends a key to the same endpoint.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    mix(h)
}

/// The hash of an IP address (for source-IP hashing and ring points).
pub fn hash_ip(ip: IpAddr) -> u64 {
    match ip {
        IpAddr::V4(v4) => hash_bytes(&v4.octets()),
        IpAddr::V6(v6) => hash_bytes(&v6.octets()),
    }
}

fn hash_addr(addr: &SocketAddr) -> u64 {
    hash_ip(addr.ip()) ^ mix(u64::from(addr.port()).wrapping_add(0x9e37_79b9))
}

/// The splitmix64 finalizer: spreads nearby inputs over the whole circle.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn endpoints(n: u8) -> Vec<SocketAddr> {
        (1..=n)
            .map(|i| SocketAddr::from(([10, 0, 0, i], 8080)))
            .collect()
    }

    #[test]
    fn a_key_keeps_its_endpoint() {
        let ring = Ring::new(&endpoints(4));
        for k in 0..100u64 {
            let key = hash_bytes(&k.to_le_bytes());
            let first = ring.lookup(key, |_| true);
            assert!(first.is_some());
            assert_eq!(ring.lookup(key, |_| true), first);
            // Another ring of the same endpoints agrees.
            assert_eq!(Ring::new(&endpoints(4)).lookup(key, |_| true), first);
        }
    }

    #[test]
    fn adding_a_fifth_endpoint_moves_about_a_fifth_of_the_keys() {
        let four = Ring::new(&endpoints(4));
        let five = Ring::new(&endpoints(5));
        let fifth = endpoints(5)[4];
        let mut moved = 0;
        for k in 0..1000u64 {
            let key = hash_bytes(format!("user-{k}").as_bytes());
            let (a, b) = (four.lookup(key, |_| true), five.lookup(key, |_| true));
            if a != b {
                moved += 1;
                // Keys move only to the new endpoint.
                assert_eq!(b, Some(fifth));
            }
        }
        // Ideal: 200 of 1000.
        assert!((120..=300).contains(&moved), "{moved} keys moved");
    }

    #[test]
    fn skipped_endpoints_hand_their_keys_to_the_next_ones_only() {
        let eps = endpoints(3);
        let ring = Ring::new(&eps);
        for k in 0..200u64 {
            let key = hash_bytes(&k.to_le_bytes());
            let all = ring.lookup(key, |_| true);
            let without = ring.lookup(key, |e| e != eps[0]);
            assert_ne!(without, Some(eps[0]));
            if all != Some(eps[0]) {
                assert_eq!(all, without, "a key not on the skipped endpoint stays");
            }
        }
        assert_eq!(ring.lookup(1, |_| false), None);
        assert!(Ring::new(&[]).lookup(1, |_| true).is_none());
    }

    fn hashing(on: HashOn) -> Balance {
        Balance::ConsistentHash { on }
    }

    #[test]
    fn keys_come_from_the_configured_source() {
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let root = Uri::from_static("/");
        let mut h = HeaderMap::new();
        h.insert("x-user", HeaderValue::from_static("alice"));
        h.append(header::COOKIE, HeaderValue::from_static("a=1; sid=abc"));
        h.append(header::COOKIE, HeaderValue::from_static("other=2"));
        let by_header = hash_key(&hashing(HashOn::Header("x-user".into())), &h, &root, ip);
        assert_eq!(by_header, Some(hash_bytes(b"alice")));
        let by_cookie = hash_key(&hashing(HashOn::Cookie("sid".into())), &h, &root, ip);
        assert_eq!(by_cookie, Some(hash_bytes(b"abc")));
        let other = hash_key(&hashing(HashOn::Cookie("other".into())), &h, &root, ip);
        assert_eq!(other, Some(hash_bytes(b"2")));
        let by_ip = hash_key(&hashing(HashOn::SourceIp), &h, &root, ip);
        assert_eq!(by_ip, Some(hash_ip(ip)));
        // Missing key, or a Service that does not hash: no key.
        assert_eq!(
            hash_key(&hashing(HashOn::Header("x-none".into())), &h, &root, ip),
            None
        );
        assert_eq!(
            hash_key(&hashing(HashOn::Cookie("s".into())), &h, &root, ip),
            None
        );
        assert_eq!(hash_key(&Balance::LeastRequest, &h, &root, ip), None);
        assert_eq!(hash_key(&Balance::RoundRobin, &h, &root, ip), None);
    }

    #[test]
    fn query_keys_are_the_raw_value_of_the_named_parameter() {
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let h = HeaderMap::new();
        let on = hashing(HashOn::Query("user".into()));
        let key = |u: &'static str| hash_key(&on, &h, &Uri::from_static(u), ip);
        assert_eq!(
            key("/p?a=1&user=bob%20x&user=z"),
            Some(hash_bytes(b"bob%20x"))
        );
        assert_eq!(key("/p?user"), Some(hash_bytes(b"")));
        assert_eq!(key("/p?username=bob"), None);
        assert_eq!(key("/p"), None);
    }

    #[test]
    fn path_keys_are_the_path_as_sent_with_or_without_the_query() {
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let h = HeaderMap::new();
        let key =
            |on: HashOn, u: &'static str| hash_key(&hashing(on), &h, &Uri::from_static(u), ip);
        assert_eq!(key(HashOn::Path, "/a%20b?x=1"), Some(hash_bytes(b"/a%20b")));
        assert_eq!(key(HashOn::Path, "/a%20b"), key(HashOn::Path, "/a%20b?y=2"));
        assert_eq!(
            key(HashOn::PathAndQuery, "/a%20b?x=1"),
            Some(hash_bytes(b"/a%20b?x=1"))
        );
        assert_ne!(
            key(HashOn::PathAndQuery, "/a?x=1"),
            key(HashOn::PathAndQuery, "/a?x=2")
        );
        // An absolute-form URI (HTTP/2) hashes as its origin form.
        assert_eq!(
            key(HashOn::PathAndQuery, "https://h.test/a?x=1"),
            key(HashOn::PathAndQuery, "/a?x=1")
        );
        assert_eq!(key(HashOn::Path, "https://h.test"), Some(hash_bytes(b"/")));
    }
}
