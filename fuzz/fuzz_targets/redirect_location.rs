//! Redirect locations from request-controlled input: whatever path and query a client sends,
//! once the host passed validation the `Location` is a valid header value (no CR, LF or other
//! control byte) and never panics.
#![no_main]

use edgeplane::request::{normalize_path, parse_authority, PathPolicy};
use edgeplane::table::{PathMatch, PathModifier, Redirect, RedirectTarget, Scheme};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\n');
    let (Some(host), Some(path), query) = (parts.next(), parts.next(), parts.next()) else {
        return;
    };
    let Ok(authority) = parse_authority(host.as_bytes()) else {
        return;
    };
    // Raw path as well as canonical path: the location must be safe either way.
    let canonical = normalize_path(path, &PathPolicy::default()).ok();
    let prefix = PathMatch::prefix("/");
    for (i, path) in [Some(path), canonical.as_deref()]
        .into_iter()
        .flatten()
        .enumerate()
    {
        let target = RedirectTarget {
            scheme: if i == 0 { Scheme::Http } else { Scheme::Https },
            host: authority.host,
            listener_port: authority.port.unwrap_or(8080),
            path,
            query,
        };
        for modifier in [
            None,
            Some(PathModifier::ReplacePrefixMatch("/new".into())),
            Some(PathModifier::ReplaceFullPath("/full".into())),
        ] {
            let redirect = Redirect {
                scheme: None,
                hostname: None,
                port: None,
                path: modifier,
                status: 302,
            };
            let location = redirect.location(&target, &prefix);
            http::HeaderValue::from_str(&location).expect("Location is a valid header value");
            assert!(!location.contains(['\r', '\n', '\0']));
        }
    }
});
