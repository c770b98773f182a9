//! The ingress-nginx annotations (listed in `policy::NAMES`) about talking to the upstream that Gateway API can say or
//! that have no effect here: `proxy-next-upstream` and `proxy-next-upstream-tries` as the
//! lowered rules' `retry`, `proxy-next-upstream-timeout` as that retry's time budget, and
//! `client-body-buffer-size`, accepted with no effect (bodies stream to the backend, nothing
//! is buffered to a size). Pure.

use std::time::Duration;

use serde_json::{json, Value};

use super::{count, report, Get};

/// ingress-nginx's `proxy-next-upstream-tries` default (the first try included).
const TRIES: u32 = 3;

/// Reads the annotations of [`NAMES`]: the lowered rules' `retry`, when they ask for one,
/// and its time budget (`proxy-next-upstream-timeout`; `0`: none).
pub fn read(get: Get<'_, '_>, problems: &mut Vec<String>) -> (Option<Value>, Option<Duration>) {
    let retry = retry(get, problems);
    let Some(v) = get("proxy-next-upstream-timeout") else {
        return (retry, None);
    };
    let within = match v.trim().parse::<u64>() {
        Ok(s) => Some(Duration::from_secs(s)).filter(|d| !d.is_zero()),
        Err(_) => {
            report(
                problems,
                "proxy-next-upstream-timeout",
                v,
                "not a whole number of seconds (not applied)",
            );
            None
        }
    };
    if within.is_some() && retry.is_none() {
        report(
            problems,
            "proxy-next-upstream-timeout",
            v,
            "not applied: nothing is retried without proxy-next-upstream or proxy-next-upstream-tries",
        );
        return (None, None);
    }
    (retry, within)
}

/// The lowered rules' `retry` of `proxy-next-upstream` and `proxy-next-upstream-tries`.
fn retry(get: Get<'_, '_>, problems: &mut Vec<String>) -> Option<Value> {
    if let Some(v) = get("client-body-buffer-size") {
        report(
            problems,
            "client-body-buffer-size",
            v,
            "accepted, no effect: request bodies stream to the backend",
        );
    }
    let when = get("proxy-next-upstream");
    let tries = get("proxy-next-upstream-tries");
    if when.is_none() && tries.is_none() {
        return None;
    }
    let tries = match tries {
        None => TRIES,
        Some(v) => match count(v) {
            Ok(n) => n,
            Err(why) => {
                report(
                    problems,
                    "proxy-next-upstream-tries",
                    v,
                    &format!("{why} (not applied)"),
                );
                return None;
            }
        },
    };
    let mut codes: Vec<u16> = Vec::new();
    for item in when.unwrap_or("error timeout").split_whitespace() {
        match item {
            // No retries, which is also the default without these annotations.
            "off" => return None,
            "error" | "timeout" | "invalid_header" | "non_idempotent" => {}
            code => match code
                .strip_prefix("http_")
                .and_then(|c| c.parse::<u16>().ok())
            {
                Some(c @ (403 | 404 | 429 | 500 | 502 | 503 | 504)) => codes.push(c),
                _ => {
                    report(
                        problems,
                        "proxy-next-upstream",
                        item,
                        "not one of error, timeout, invalid_header, http_500, http_502, http_503, http_504, http_403, http_404, http_429, non_idempotent, off (not applied)",
                    );
                    return None;
                }
            },
        }
    }
    if tries <= 1 {
        return None;
    }
    let mut retry = json!({"attempts": tries - 1});
    if !codes.is_empty() {
        retry["codes"] = json!(codes);
    }
    Some(retry)
}
