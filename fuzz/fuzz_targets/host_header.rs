//! Host validation on arbitrary bytes: never panics; an accepted value is a valid header value
//! and URI authority, its host holds only name characters or an IPv6 literal, and its routing
//! name is lower-case without a trailing dot.
#![no_main]

use edgeplane::request::parse_authority;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(a) = parse_authority(data) else {
        return;
    };
    http::HeaderValue::from_bytes(data).expect("accepted host is a header value");
    http::uri::Authority::try_from(data).expect("accepted host is a URI authority");
    assert!(!a.host.is_empty());
    if a.ipv6 {
        a.host
            .parse::<std::net::Ipv6Addr>()
            .expect("bracketed literal is IPv6");
    } else {
        assert!(a
            .host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')));
    }
    let name = a.routing_name();
    assert!(!name.ends_with('.'));
    assert_eq!(name, name.to_ascii_lowercase());
});
