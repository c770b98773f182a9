//! The request id: `X-Request-Id` as the client sent it, or one made here when it sent none, so
//! that one id names the request in the access log, at the backend (the header goes upstream)
//! and at the client (the response carries it back).

use bytes::Bytes;
use http::header::{Entry, HeaderName};
use http::{HeaderMap, HeaderValue};

/// `x-request-id`.
pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The longest id taken from a client; a longer one is replaced, so that a client cannot make
/// every log line and upstream request carry kilobytes.
const MAX_LEN: usize = 200;

/// The request's id: its `X-Request-Id` when it has one (of at most 200 bytes), else a new
/// random one (32 hex digits), which `headers` then carries. One lookup in `headers`, however
/// it ends: every request comes through here.
pub(crate) fn ensure(headers: &mut HeaderMap) -> HeaderValue {
    match headers.entry(REQUEST_ID) {
        Entry::Occupied(mut given) => {
            let mut values = given.iter();
            if let (Some(id), None) = (values.next(), values.next()) {
                if !id.is_empty() && id.len() <= MAX_LEN {
                    return id.clone();
                }
            }
            let id = new_id();
            // Replaces every value the client sent.
            given.insert(id.clone());
            id
        }
        Entry::Vacant(slot) => {
            let id = new_id();
            slot.insert(id.clone());
            id
        }
    }
}

/// 128 random bits as 32 lowercase hex digits, in one allocation that the id's clones (the
/// request's, the response's) share: `HeaderValue::from_bytes` would copy them into one, and
/// the first clone would move them into another.
fn new_id() -> HeaderValue {
    let text = crate::proxy::text::hex_u128(fastrand::u128(..));
    HeaderValue::from_maybe_shared(Bytes::from_owner(text))
        .unwrap_or_else(|_| HeaderValue::from_static("0"))
}

/// Adds `id` to a response that carries no `X-Request-Id` of its own. Marked sensitive, which
/// HTTP/2 encodes as a literal never indexed: an id differs on every response, so indexing it
/// would only push the server's other headers (`server`, `content-type`) out of the
/// connection's HPACK table, each to be sent and indexed again later.
pub(crate) fn answer(headers: &mut HeaderMap, id: &HeaderValue) {
    if let Entry::Vacant(slot) = headers.entry(REQUEST_ID) {
        let mut id = id.clone();
        id.set_sensitive(true);
        slot.insert(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_id_is_kept_and_a_missing_one_is_made() {
        let mut h = HeaderMap::new();
        h.insert(REQUEST_ID, HeaderValue::from_static("abc"));
        assert_eq!(ensure(&mut h), "abc");
        let mut h = HeaderMap::new();
        let made = ensure(&mut h);
        assert_eq!(made.len(), 32);
        assert!(made
            .to_str()
            .unwrap()
            .bytes()
            .all(|b| b.is_ascii_hexdigit()));
        assert_eq!(h.get(&REQUEST_ID), Some(&made));
        assert_ne!(ensure(&mut HeaderMap::new()), made);
    }

    #[test]
    fn two_ids_or_an_oversized_one_are_replaced() {
        let mut h = HeaderMap::new();
        h.append(REQUEST_ID, HeaderValue::from_static("a"));
        h.append(REQUEST_ID, HeaderValue::from_static("b"));
        let made = ensure(&mut h);
        assert_eq!(made.len(), 32);
        assert_eq!(h.get_all(&REQUEST_ID).iter().count(), 1);
        let mut h = HeaderMap::new();
        h.insert(REQUEST_ID, HeaderValue::from_str(&"x".repeat(201)).unwrap());
        assert_eq!(ensure(&mut h).len(), 32);
        let mut response = HeaderMap::new();
        answer(&mut response, &made);
        assert_eq!(response.get(&REQUEST_ID), Some(&made));
        // HTTP/2 sends it as a literal never indexed.
        assert!(response
            .get(&REQUEST_ID)
            .is_some_and(HeaderValue::is_sensitive));
        let own = HeaderValue::from_static("upstream-id");
        response.insert(REQUEST_ID, own.clone());
        answer(&mut response, &made);
        assert_eq!(response.get(&REQUEST_ID), Some(&own));
    }
}
