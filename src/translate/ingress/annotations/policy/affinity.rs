//! Cookie affinity (`affinity`, `session-cookie-*`): the Gateway API `sessionPersistence` the
//! lowered rules get, and the cookie's path, SameSite and Secure beside it. Apart from the
//! TrafficPolicy settings because it goes into the rules, not the policy. Pure.

use serde_json::{json, Value};

use super::{count, report, Get};
use crate::table::{CookieAttributes, SameSite};

/// ingress-nginx's `session-cookie-name` default.
const COOKIE_NAME: &str = "INGRESSCOOKIE";

/// The settings of `affinity: cookie`, ignored (and reported) without it.
pub(super) const SETTINGS: &[&str] = &[
    "affinity-mode",
    "session-cookie-name",
    "session-cookie-path",
    "session-cookie-max-age",
    "session-cookie-expires",
    "session-cookie-samesite",
    "session-cookie-secure",
    "session-cookie-conditional-samesite-none",
];

/// `affinity: cookie` and its `session-cookie-*` settings as a rule's `sessionPersistence`:
/// the cookie's name, and with `session-cookie-max-age` (else `-expires`) a permanent cookie
/// of that lifetime. The cookie's other attributes are [`cookie_attributes`].
pub(super) fn affinity(get: Get<'_, '_>, problems: &mut Vec<String>) -> Option<Value> {
    match get("affinity").map(str::trim) {
        Some("cookie") => {}
        Some(other) => {
            report(problems, "affinity", other, "not cookie (not applied)");
            return None;
        }
        None => {
            for &name in SETTINGS {
                if let Some(v) = get(name) {
                    report(problems, name, v, "ignored without affinity: cookie");
                }
            }
            return None;
        }
    }
    let name = get("session-cookie-name").map_or(COOKIE_NAME, str::trim);
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !valid {
        report(
            problems,
            "session-cookie-name",
            name,
            "not a cookie name (not applied)",
        );
        return None;
    }
    let mut session = json!({"type": "Cookie", "sessionName": name});
    let lifetime = ["session-cookie-max-age", "session-cookie-expires"]
        .into_iter()
        .find_map(|n| get(n).map(|v| (n, v)));
    if let Some((n, v)) = lifetime {
        match count(v) {
            Ok(seconds) => {
                session["absoluteTimeout"] = json!(format!("{seconds}s"));
                session["cookieConfig"] = json!({"lifetimeType": "Permanent"});
            }
            Err(why) => report(problems, n, v, &format!("{why} (a session cookie is used)")),
        }
    }
    if let Some(v) = get("affinity-mode").filter(|m| m.trim() != "balanced") {
        report(
            problems,
            "affinity-mode",
            v,
            "not supported: sessions move when endpoints change, as with balanced",
        );
    }
    Some(session)
}

/// `session-cookie-path` (an absolute path), `session-cookie-samesite` (`None`, `Lax`,
/// `Strict`, any case) and `session-cookie-secure` (`true`/`false`): the attributes of the
/// affinity cookie. A bad value is reported and the attribute left as nginx's default.
pub(super) fn cookie_attributes(get: Get<'_, '_>, problems: &mut Vec<String>) -> CookieAttributes {
    let mut out = CookieAttributes::default();
    if let Some(v) = get("session-cookie-path") {
        let p = v.trim();
        let valid =
            p.starts_with('/') && p.bytes().all(|b| (0x21..=0x7E).contains(&b) && b != b';');
        if valid {
            out.path = Some(p.to_owned());
        } else {
            report(
                problems,
                "session-cookie-path",
                v,
                "not an absolute path without ';' (the rule's path is used)",
            );
        }
    }
    if let Some(v) = get("session-cookie-samesite") {
        out.same_site = match v.trim().to_ascii_lowercase().as_str() {
            "none" => Some(SameSite::None),
            "lax" => Some(SameSite::Lax),
            "strict" => Some(SameSite::Strict),
            _ => {
                report(
                    problems,
                    "session-cookie-samesite",
                    v,
                    "not None, Lax or Strict (no SameSite is sent)",
                );
                None
            }
        };
    }
    if let Some(v) = get("session-cookie-secure") {
        match v.trim() {
            "true" => out.secure = true,
            "false" => {}
            _ => report(
                problems,
                "session-cookie-secure",
                v,
                "not true or false (Secure is not sent)",
            ),
        }
    }
    if let Some(v) = get("session-cookie-conditional-samesite-none") {
        if v.trim() == "true" && out.same_site == Some(SameSite::None) {
            report(
                problems,
                "session-cookie-conditional-samesite-none",
                v,
                "not supported: SameSite=None is sent to every client, whatever its User-Agent (not applied)",
            );
        }
    }
    out
}
