//! Session persistence (`rules[].sessionPersistence`): the token that binds a client to the
//! endpoint that served it, carried in a cookie or a header. The token is stateless, so it
//! works on every replica and survives table swaps and restarts: it names the endpoint by a
//! hash of its address (the address itself is not revealed) and carries the session's start
//! and last use for the absolute and idle timeouts.

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use http::header::{self, HeaderMap, HeaderValue};

#[cfg(test)]
use crate::table::CookieAttributes;
use crate::table::{BackendTarget, RouteRule, SessionKind, SessionPersistence};

/// A session token as read from a request or written on a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// [`endpoint_id`] of the endpoint the session is bound to.
    endpoint: u64,
    /// Unix seconds the session started.
    started: u64,
    /// Unix seconds of the session's last request.
    seen: u64,
}

impl Token {
    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.');
        let mut next = || u64::from_str_radix(parts.next()?, 16).ok();
        let token = Self {
            endpoint: next()?,
            started: next()?,
            seen: next()?,
        };
        parts.next().is_none().then_some(token)
    }

    fn encode(&self) -> String {
        format!("{:016x}.{:x}.{:x}", self.endpoint, self.started, self.seen)
    }

    /// Still valid at `now` under the rule's timeouts.
    fn live(&self, spec: &SessionPersistence, now: u64) -> bool {
        let within = |since: u64, limit: Option<std::time::Duration>| {
            limit.is_none_or(|l| now.saturating_sub(since) < l.as_secs().max(1))
        };
        within(self.started, spec.absolute_timeout) && within(self.seen, spec.idle_timeout)
    }
}

/// The session of one request: the token it brought, if still valid.
#[derive(Debug)]
pub struct Session<'r> {
    spec: &'r SessionPersistence,
    token: Option<Token>,
    now: u64,
}

impl<'r> Session<'r> {
    /// Reads the rule's session token from the request's cookies or header.
    pub fn read(spec: &'r SessionPersistence, headers: &HeaderMap) -> Self {
        let now = unix_now();
        let value = match spec.kind {
            SessionKind::Cookie => cookie(headers, &spec.name),
            SessionKind::Header => headers
                .get(spec.name.as_str())
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        };
        let token = value
            .as_deref()
            .and_then(Token::parse)
            .filter(|t| t.live(spec, now));
        Self { spec, token, now }
    }

    /// The ready endpoint the session is bound to, with the index of the rule's backendRef that
    /// has it; `None` when the session is new, expired, or its endpoint is no longer ready.
    pub fn bound(&self, rule: &RouteRule) -> Option<(usize, SocketAddr)> {
        let token = self.token?;
        rule.backends
            .backends
            .iter()
            .enumerate()
            .filter(|(_, b)| b.weight > 0)
            .find_map(|(i, b)| match &b.target {
                BackendTarget::Service(s) => s
                    .endpoints
                    .iter()
                    .find(|e| endpoint_id(e) == token.endpoint)
                    .map(|e| (i, *e)),
                BackendTarget::Invalid { .. } => None,
            })
    }

    /// Writes the token for `served` on a response: always for a new or moved session, and on
    /// every response when an idle timeout needs the last use refreshed.
    pub fn stamp(&self, headers: &mut HeaderMap, served: SocketAddr) {
        let id = endpoint_id(&served);
        let token = match self.token {
            Some(t) if t.endpoint == id && self.spec.idle_timeout.is_none() => return,
            Some(t) if t.endpoint == id => Token {
                seen: self.now,
                ..t
            },
            _ => Token {
                endpoint: id,
                started: self.now,
                seen: self.now,
            },
        };
        let value = match self.spec.kind {
            SessionKind::Header => token.encode(),
            SessionKind::Cookie => {
                let attributes = &self.spec.cookie;
                let path = attributes.path.as_deref().unwrap_or("/");
                let mut c = format!(
                    "{}={}; Path={path}; HttpOnly",
                    self.spec.name,
                    token.encode()
                );
                if let (true, Some(max_age)) = (self.spec.permanent, self.spec.absolute_timeout) {
                    let left = max_age.as_secs().saturating_sub(self.now - token.started);
                    c.push_str(&format!("; Max-Age={left}"));
                }
                if let Some(same_site) = attributes.same_site {
                    c.push_str("; SameSite=");
                    c.push_str(same_site.as_str());
                }
                if attributes.secure {
                    c.push_str("; Secure");
                }
                c
            }
        };
        let Ok(value) = HeaderValue::from_str(&value) else {
            return;
        };
        match self.spec.kind {
            SessionKind::Header => {
                if let Ok(name) = header::HeaderName::from_bytes(self.spec.name.as_bytes()) {
                    headers.insert(name, value);
                }
            }
            SessionKind::Cookie => {
                headers.append(header::SET_COOKIE, value);
            }
        }
    }
}

/// A stable 64-bit name of an endpoint (FNV-1a of its address): the same on every replica.
fn endpoint_id(addr: &SocketAddr) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in addr.to_string().bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k == name).then(|| v.trim_matches('"').to_owned())
        })
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn spec(kind: SessionKind, idle: Option<u64>, absolute: Option<u64>) -> SessionPersistence {
        SessionPersistence {
            name: "sid".into(),
            kind,
            permanent: absolute.is_some(),
            absolute_timeout: absolute.map(Duration::from_secs),
            idle_timeout: idle.map(Duration::from_secs),
            cookie: CookieAttributes::default(),
        }
    }

    #[test]
    fn tokens_round_trip_and_expire() {
        let t = Token {
            endpoint: 7,
            started: 100,
            seen: 150,
        };
        assert_eq!(Token::parse(&t.encode()), Some(t));
        assert_eq!(Token::parse("garbage"), None);
        assert_eq!(Token::parse("1.2.3.4"), None);
        let idle = spec(SessionKind::Cookie, Some(60), None);
        assert!(t.live(&idle, 200));
        assert!(!t.live(&idle, 210), "idle for 60 s");
        let absolute = spec(SessionKind::Cookie, None, Some(100));
        assert!(t.live(&absolute, 199));
        assert!(!t.live(&absolute, 200), "100 s since the start");
    }

    #[test]
    fn a_new_session_gets_a_cookie_and_a_known_one_is_not_rewritten() {
        let s = spec(SessionKind::Cookie, None, None);
        let served: SocketAddr = "10.0.0.1:80".parse().expect("address");
        let mut headers = HeaderMap::new();
        Session::read(&s, &HeaderMap::new()).stamp(&mut headers, served);
        let set = headers[header::SET_COOKIE]
            .to_str()
            .expect("ascii")
            .to_owned();
        assert!(set.starts_with("sid=") && !set.contains("Max-Age") && !set.contains("Expires"));
        let value = set
            .trim_start_matches("sid=")
            .split(';')
            .next()
            .expect("value");
        let mut request = HeaderMap::new();
        request.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("a=b; sid={value}")).expect("header"),
        );
        let known = Session::read(&s, &request);
        assert!(known.token.is_some());
        let mut again = HeaderMap::new();
        known.stamp(&mut again, served);
        assert!(
            again.is_empty(),
            "same endpoint, no idle timeout: no new cookie"
        );
        let mut moved = HeaderMap::new();
        known.stamp(&mut moved, "10.0.0.2:80".parse().expect("address"));
        assert!(moved.contains_key(header::SET_COOKIE));
    }

    #[test]
    fn a_cookie_carries_its_path_same_site_and_secure_attributes() {
        let served: SocketAddr = "10.0.0.1:80".parse().expect("address");
        let mut s = spec(SessionKind::Cookie, None, Some(60));
        s.cookie = CookieAttributes {
            path: Some("/api".into()),
            same_site: Some(crate::table::SameSite::Strict),
            secure: true,
        };
        let mut headers = HeaderMap::new();
        Session::read(&s, &HeaderMap::new()).stamp(&mut headers, served);
        let set = headers[header::SET_COOKIE].to_str().expect("ascii");
        let attributes: Vec<&str> = set.split("; ").skip(1).collect();
        assert_eq!(
            attributes,
            [
                "Path=/api",
                "HttpOnly",
                "Max-Age=60",
                "SameSite=Strict",
                "Secure"
            ]
        );
    }

    #[test]
    fn a_permanent_cookie_carries_max_age_and_a_header_session_a_header() {
        let served: SocketAddr = "10.0.0.1:80".parse().expect("address");
        let mut headers = HeaderMap::new();
        let permanent = spec(SessionKind::Cookie, None, Some(3600));
        Session::read(&permanent, &HeaderMap::new()).stamp(&mut headers, served);
        assert!(headers[header::SET_COOKIE]
            .to_str()
            .expect("ascii")
            .ends_with("Max-Age=3600"));
        let mut headers = HeaderMap::new();
        let by_header = spec(SessionKind::Header, None, None);
        Session::read(&by_header, &HeaderMap::new()).stamp(&mut headers, served);
        let token = headers["sid"].to_str().expect("ascii");
        assert!(Token::parse(token).is_some());
    }
}
