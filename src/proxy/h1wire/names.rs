//! Header names read off the wire: the names most heads carry recognised among the names of
//! their length, so that they become `http`'s constants without `HeaderName::from_bytes` (which
//! first copies every name, lowercased, into a scratch buffer, and a name that is not one of its
//! standard ones into an allocation of its own).

use http::header::{self, HeaderName, InvalidHeaderName};

use crate::proxy::request_id::REQUEST_ID;
use crate::proxy::trace::context::TRACEPARENT;

/// `x-forwarded-for`.
pub(crate) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
/// `x-forwarded-proto`.
pub(crate) const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
/// `x-forwarded-host`.
pub(crate) const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
/// `keep-alive`.
pub(crate) const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");

/// The names recognised, one list per length, the more common first within a list.
static LENGTH_2: [HeaderName; 1] = [header::TE];
static LENGTH_3: [HeaderName; 2] = [header::VIA, header::AGE];
static LENGTH_4: [HeaderName; 5] = [
    header::HOST,
    header::DATE,
    header::ETAG,
    header::VARY,
    header::LINK,
];
static LENGTH_5: [HeaderName; 2] = [header::RANGE, header::ALLOW];
static LENGTH_6: [HeaderName; 6] = [
    header::SERVER,
    header::ACCEPT,
    header::COOKIE,
    header::ORIGIN,
    header::EXPECT,
    header::PRAGMA,
];
static LENGTH_7: [HeaderName; 4] = [
    header::EXPIRES,
    header::REFERER,
    header::UPGRADE,
    header::TRAILER,
];
static LENGTH_8: [HeaderName; 2] = [header::LOCATION, header::IF_MATCH];
static LENGTH_10: [HeaderName; 4] = [
    header::CONNECTION,
    header::USER_AGENT,
    header::SET_COOKIE,
    KEEP_ALIVE,
];
static LENGTH_11: [HeaderName; 1] = [TRACEPARENT];
static LENGTH_12: [HeaderName; 2] = [header::CONTENT_TYPE, REQUEST_ID];
static LENGTH_13: [HeaderName; 5] = [
    header::CACHE_CONTROL,
    header::LAST_MODIFIED,
    header::ACCEPT_RANGES,
    header::AUTHORIZATION,
    header::IF_NONE_MATCH,
];
static LENGTH_14: [HeaderName; 1] = [header::CONTENT_LENGTH];
static LENGTH_15: [HeaderName; 3] = [
    header::ACCEPT_ENCODING,
    header::ACCEPT_LANGUAGE,
    X_FORWARDED_FOR,
];
static LENGTH_16: [HeaderName; 2] = [header::CONTENT_ENCODING, X_FORWARDED_HOST];
static LENGTH_17: [HeaderName; 3] = [
    header::TRANSFER_ENCODING,
    header::IF_MODIFIED_SINCE,
    X_FORWARDED_PROTO,
];
static LENGTH_25: [HeaderName; 1] = [header::STRICT_TRANSPORT_SECURITY];
static LENGTH_27: [HeaderName; 1] = [header::ACCESS_CONTROL_ALLOW_ORIGIN];

/// The names of [`known`]'s lists of `length`.
fn known(length: usize) -> &'static [HeaderName] {
    match length {
        2 => &LENGTH_2,
        3 => &LENGTH_3,
        4 => &LENGTH_4,
        5 => &LENGTH_5,
        6 => &LENGTH_6,
        7 => &LENGTH_7,
        8 => &LENGTH_8,
        10 => &LENGTH_10,
        11 => &LENGTH_11,
        12 => &LENGTH_12,
        13 => &LENGTH_13,
        14 => &LENGTH_14,
        15 => &LENGTH_15,
        16 => &LENGTH_16,
        17 => &LENGTH_17,
        25 => &LENGTH_25,
        27 => &LENGTH_27,
        _ => &[],
    }
}

/// The `HeaderName` of a field name as it came (any case): one of the [`known`] names when it is one,
/// compared only with the names of its length, else what `HeaderName::from_bytes` makes of it,
/// which also refuses what is not a token.
pub(crate) fn header_name(bytes: &[u8]) -> Result<HeaderName, InvalidHeaderName> {
    match known(bytes.len())
        .iter()
        .find(|known| bytes.eq_ignore_ascii_case(known.as_str().as_bytes()))
    {
        Some(known) => Ok(known.clone()),
        None => HeaderName::from_bytes(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_are_those_of_from_bytes_in_any_case() {
        for length in 0..64 {
            for name in known(length) {
                assert_eq!(name.as_str().len(), length, "{name} under length {length}");
                let upper = name.as_str().to_ascii_uppercase();
                for spelled in [name.as_str(), upper.as_str()] {
                    let read = header_name(spelled.as_bytes()).expect("a token");
                    assert_eq!(read, *name);
                    assert_eq!(
                        read,
                        HeaderName::from_bytes(spelled.as_bytes()).expect("valid")
                    );
                }
            }
        }
    }

    #[test]
    fn other_names_are_parsed_and_invalid_ones_refused() {
        assert_eq!(header_name(b"X-Custom").expect("a token"), "x-custom");
        assert_eq!(
            header_name(b"Content-Lengtx").expect("a token"),
            "content-lengtx"
        );
        assert!(header_name(b"").is_err());
        assert!(header_name(b"bad name").is_err());
        assert!(header_name(b"c\xf6ntent-type").is_err());
        assert!(header_name(&[b'x'; 40]).is_ok());
    }
}
