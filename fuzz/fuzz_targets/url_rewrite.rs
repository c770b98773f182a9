//! URL rewrites from request-controlled input: for every request the path policy and Host
//! validation accept, matched by a `PathPrefix` rule, and every `URLRewrite` the translator
//! accepts, the upstream target is a valid path-and-query that starts with `/` and keeps the
//! query as sent, its path is canonical whenever the configured path is, no byte of it or of
//! the upstream `Host` can end a header line, and nothing panics.
#![no_main]

use edgeplane::request::{
    normalize_path, parse_authority, validate_config_path, validate_hostname, PathPolicy,
};
use edgeplane::table::{PathMatch, PathModifier, UrlRewrite};
use http::uri::PathAndQuery;
use http::HeaderValue;
use libfuzzer_sys::fuzz_target;

/// True when `p` is already in the form the path policy produces.
fn canonical(p: &str) -> bool {
    normalize_path(p, &PathPolicy::default()).is_ok_and(|c| c == p)
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // host, path, query, rule prefix, rewrite path (`=/full` replaces the full path, anything
    // else the matched prefix), rewrite hostname (empty: none).
    let mut fields = text.splitn(6, '\n');
    let (Some(host), Some(path), Some(query), Some(prefix), Some(replacement), hostname) = (
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next().unwrap_or(""),
    ) else {
        return;
    };

    // The request as the proxy holds it once its checks passed.
    if parse_authority(host.as_bytes()).is_err() {
        return;
    }
    let Ok(request_host) = HeaderValue::from_str(host) else {
        return;
    };
    let Ok(path) = normalize_path(path, &PathPolicy::default()) else {
        return;
    };
    let target = if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    };
    // A target hyper would not have parsed never reaches a rule.
    let Ok(target) = PathAndQuery::try_from(target) else {
        return;
    };
    let matched = PathMatch::prefix(prefix);
    if !matched.matches(target.path()) {
        return;
    }

    // The rewrite as the translator compiles it (src/translate/filters.rs).
    let (modifier, configured) = match replacement.strip_prefix('=') {
        Some(full) => (PathModifier::ReplaceFullPath(full.to_owned()), full),
        None => (
            PathModifier::ReplacePrefixMatch(replacement.to_owned()),
            replacement,
        ),
    };
    let prefix_mode = matches!(modifier, PathModifier::ReplacePrefixMatch(_));
    if !(prefix_mode && configured.is_empty()) && validate_config_path(configured).is_err() {
        return;
    }
    // A prefix replacement loses its trailing slashes before the rest of the path is added.
    let configured_canonical = if prefix_mode {
        let trimmed = configured.trim_end_matches('/');
        trimmed.is_empty() || canonical(trimmed)
    } else {
        canonical(configured)
    };
    let rewrite_host = if hostname.is_empty() {
        None
    } else if validate_hostname(hostname).is_ok() {
        HeaderValue::from_str(hostname).ok()
    } else {
        return;
    };
    let rewrite = UrlRewrite {
        hostname: rewrite_host.clone(),
        path: Some(modifier),
    };

    let (out, out_host) = rewrite
        .apply(&matched, target.clone(), Some(request_host.clone()))
        .expect("a validated rewrite of an accepted request is a valid target");
    let again = PathAndQuery::try_from(out.as_str()).expect("the target parses again");
    assert_eq!(again.as_str(), out.as_str());
    assert!(out.path().starts_with('/'), "{out}");
    assert_eq!(out.query(), target.query(), "the query is kept as sent");
    assert!(
        !out.as_str()
            .bytes()
            .any(|b| b.is_ascii_control() || b == b' '),
        "{out:?}"
    );
    if configured_canonical {
        assert!(
            canonical(out.path()),
            "{out} from {target} with {configured}"
        );
    }
    let out_host = out_host.expect("a host is always sent");
    assert_eq!(out_host, rewrite_host.unwrap_or(request_host));
    assert!(!out_host
        .as_bytes()
        .iter()
        .any(|b| b.is_ascii_control() || *b == b' '));
});
