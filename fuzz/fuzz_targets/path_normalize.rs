//! The path policy on arbitrary input, under every policy: never panics; a canonical path is
//! accepted again unchanged (idempotence) and holds no `/./`, `/../` or decodable escape of an
//! unreserved character.
#![no_main]

use edgeplane::request::{normalize_path, PathPolicy, SegmentPolicy, SlashPolicy};
use libfuzzer_sys::fuzz_target;

fn policy(bits: u8) -> PathPolicy {
    let seg = |b: u8| {
        if bits & b == 0 {
            SegmentPolicy::Reject
        } else {
            SegmentPolicy::Allow
        }
    };
    PathPolicy {
        encoded_slash: seg(1),
        backslash: seg(2),
        path_parameters: seg(4),
        empty_segments: match (bits >> 3) % 3 {
            0 => SlashPolicy::Reject,
            1 => SlashPolicy::Allow,
            _ => SlashPolicy::Merge,
        },
    }
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fuzz_target!(|data: &[u8]| {
    let Some((&bits, rest)) = data.split_first() else {
        return;
    };
    let Ok(path) = std::str::from_utf8(rest) else {
        return;
    };
    let policy = policy(bits);
    let Ok(once) = normalize_path(path, &policy) else {
        return;
    };
    let twice = normalize_path(&once, &policy).expect("a canonical path is accepted");
    assert_eq!(twice, once, "not idempotent for {path:?}");
    let b = once.as_bytes();
    assert!(!once.contains("/./") && !once.contains("/../"), "{once:?}");
    assert!(!once.ends_with("/.") && !once.ends_with("/.."), "{once:?}");
    for (i, _) in once.match_indices('%') {
        let hex = std::str::from_utf8(&b[i + 1..i + 3]).expect("escape digits");
        let v = u8::from_str_radix(hex, 16).expect("hex escape");
        assert!(!unreserved(v), "decodable escape in {once:?}");
        assert_eq!(
            hex,
            hex.to_ascii_uppercase(),
            "lowercase escape in {once:?}"
        );
    }
    if policy.empty_segments != SlashPolicy::Allow {
        assert!(!once.contains("//"), "{once:?}");
    }
    // The canonical path is always a valid request target.
    http::uri::PathAndQuery::try_from(once.as_ref()).expect("valid path");
});
