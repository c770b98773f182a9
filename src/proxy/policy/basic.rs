//! HTTP basic authentication against htpasswd hashes: bcrypt (verified on the bounded hashing
//! pool, as a hash costs milliseconds by design, with successful checks remembered briefly so a
//! client sending the same credentials on every request pays once) and `{SHA}`. An unknown
//! user is checked against a dummy hash of the most expensive kind the realm has, so it costs
//! what a wrong password costs and its answer time does not tell which users exist.
//! Comparisons of secrets are constant-time. The `Authorization` header is passed on to the
//! backend unchanged: a backend may read the user name from it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use http::header::{self, HeaderMap, HeaderValue};
use sha1::{Digest, Sha1};

use super::hashing::{Busy, HashPool};
use crate::metrics::Metrics;
use crate::table::{BasicAuth, PasswordHash};

/// How long a successful bcrypt check is remembered.
const REMEMBER: Duration = Duration::from_secs(300);
/// Remembered checks at most; the memory is cleared when full.
const REMEMBER_MAX: usize = 4096;

/// Why credentials were refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum BasicError {
    #[error("no basic credentials")]
    Missing,
    #[error("malformed basic credentials")]
    Malformed,
    #[error("wrong user or password")]
    Wrong,
    #[error("every password check worker and queue place is taken")]
    Busy,
}

impl From<Busy> for BasicError {
    fn from(_: Busy) -> Self {
        Self::Busy
    }
}

/// Successful bcrypt checks by a digest of (hash, user, password): never the password itself.
#[derive(Debug, Default)]
pub(crate) struct Verified {
    seen: Mutex<HashMap<[u8; 20], Instant>>,
}

impl Verified {
    fn key(hash: &str, user: &str, password: &str) -> [u8; 20] {
        let mut d = Sha1::new();
        for part in [hash, user, password] {
            d.update((part.len() as u64).to_be_bytes());
            d.update(part.as_bytes());
        }
        d.finalize().into()
    }

    fn remembered(&self, key: &[u8; 20]) -> bool {
        let Ok(seen) = self.seen.lock() else {
            return false;
        };
        seen.get(key).is_some_and(|at| at.elapsed() < REMEMBER)
    }

    fn remember(&self, key: [u8; 20]) {
        if let Ok(mut seen) = self.seen.lock() {
            if seen.len() >= REMEMBER_MAX {
                seen.clear();
            }
            seen.insert(key, Instant::now());
        }
    }
}

/// The `WWW-Authenticate` challenge of `auth`'s realm.
pub(crate) fn challenge(auth: &BasicAuth) -> HeaderValue {
    let realm = auth.realm.replace(['"', '\\'], "");
    HeaderValue::from_str(&format!("Basic realm=\"{realm}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("Basic"))
}

/// Checks the request's `Authorization: Basic` credentials against `auth`'s users. Every
/// well-formed attempt verifies one hash: the user's, or for an unknown user the realm's
/// dummy hash; each verification is counted in `edgeplane_basic_auth_verifications_total`.
pub(crate) async fn check(
    auth: &BasicAuth,
    headers: &HeaderMap,
    verified: &Verified,
    pool: &HashPool,
    metrics: &Metrics,
) -> Result<(), BasicError> {
    let (user, password) = credentials(headers)?;
    let (hash, known) = match auth.users.get(&user) {
        Some(hash) => (hash, true),
        None => (auth.dummy(), false),
    };
    let ok = match hash {
        PasswordHash::Sha1(expected) => {
            metrics
                .basic_auth_verifications
                .with_label_values(&["sha1"])
                .inc();
            let got: [u8; 20] = Sha1::digest(password.as_bytes()).into();
            constant_time_eq(&got, expected)
        }
        PasswordHash::Bcrypt(hash) => {
            let key = Verified::key(hash, &user, &password);
            if verified.remembered(&key) {
                true
            } else {
                let ok = pool.verify_bcrypt(password, hash.clone()).await?;
                if ok {
                    verified.remember(key);
                }
                ok
            }
        }
    };
    if ok && known {
        Ok(())
    } else {
        Err(BasicError::Wrong)
    }
}

/// User and password of an `Authorization: Basic` header.
fn credentials(headers: &HeaderMap) -> Result<(String, String), BasicError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or(BasicError::Missing)?;
    let value = value.to_str().map_err(|_| BasicError::Malformed)?.trim();
    let (scheme, token) = value.split_once(' ').ok_or(BasicError::Missing)?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(BasicError::Missing);
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .map_err(|_| BasicError::Malformed)?;
    let decoded = String::from_utf8(decoded).map_err(|_| BasicError::Malformed)?;
    let (user, password) = decoded.split_once(':').ok_or(BasicError::Malformed)?;
    Ok((user.to_owned(), password.to_owned()))
}

/// Equality whose time does not depend on where the inputs differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::policy::hashing::HashLimits;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn auth_header(user: &str, password: &str) -> HeaderMap {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            format!("Basic {token}").parse().unwrap(),
        );
        h
    }

    fn checker() -> (Verified, HashPool, Arc<Metrics>) {
        let metrics = Metrics::new();
        let pool = HashPool::new(HashLimits::default(), metrics.clone());
        (Verified::default(), pool, metrics)
    }

    fn verifications(metrics: &Metrics, kind: &str) -> u64 {
        metrics
            .basic_auth_verifications
            .with_label_values(&[kind])
            .get()
    }

    #[tokio::test]
    async fn bcrypt_and_sha_users_are_checked() {
        let sha: [u8; 20] = Sha1::digest(b"s3cret").into();
        let bc = bcrypt::hash("hunter2", 4).unwrap();
        let auth = BasicAuth::new(
            "r".into(),
            BTreeMap::from([
                ("alice".into(), PasswordHash::Sha1(sha)),
                ("bob".into(), PasswordHash::Bcrypt(bc)),
            ]),
        );
        let (v, pool, m) = checker();
        let check = |h: HeaderMap| {
            let (auth, v, pool, m) = (&auth, &v, &pool, &m);
            async move { check(auth, &h, v, pool, m).await }
        };
        assert_eq!(check(auth_header("alice", "s3cret")).await, Ok(()));
        assert_eq!(check(auth_header("bob", "hunter2")).await, Ok(()));
        assert_eq!(check(auth_header("bob", "hunter2")).await, Ok(()));
        assert_eq!(
            check(auth_header("bob", "hunter3")).await,
            Err(BasicError::Wrong)
        );
        assert_eq!(
            check(auth_header("carol", "s3cret")).await,
            Err(BasicError::Wrong)
        );
        assert_eq!(check(HeaderMap::new()).await, Err(BasicError::Missing));
        assert_eq!(challenge(&auth), "Basic realm=\"r\"");
        // bob once (then remembered), bob wrong, carol against the dummy bcrypt hash.
        assert_eq!(verifications(&m, "bcrypt"), 3);
        assert_eq!(verifications(&m, "sha1"), 1);
    }

    #[test]
    fn the_dummy_is_the_costliest_kind_and_a_valid_hash_nothing_matches() {
        let auth = |users: Vec<(&str, PasswordHash)>| {
            BasicAuth::new(
                "r".into(),
                users.into_iter().map(|(u, h)| (u.to_owned(), h)).collect(),
            )
        };
        let sha = PasswordHash::Sha1([1; 20]);
        let cheap = PasswordHash::Bcrypt(bcrypt::hash("a", 4).unwrap());
        let dearer = PasswordHash::Bcrypt(bcrypt::hash("b", 5).unwrap());
        let malformed = PasswordHash::Bcrypt("$2y$31$short".into());
        let mixed = auth(vec![
            ("s", sha.clone()),
            ("c", cheap),
            ("d", dearer),
            ("m", malformed),
        ]);
        let PasswordHash::Bcrypt(dummy) = mixed.dummy().clone() else {
            panic!("bcrypt users make a bcrypt dummy");
        };
        assert!(dummy.starts_with("$2b$05$"), "{dummy}");
        // Ok(false), not an error: the whole cost was paid.
        assert_eq!(bcrypt::verify("", &dummy).ok(), Some(false));
        assert_eq!(bcrypt::verify("x", &dummy).ok(), Some(false));
        let sha_only = auth(vec![("s", sha)]);
        assert_eq!(sha_only.dummy(), &PasswordHash::Sha1([0; 20]));
    }

    #[tokio::test]
    async fn an_unknown_user_verifies_what_a_wrong_password_verifies() {
        let auth = BasicAuth::new(
            "r".into(),
            BTreeMap::from([(
                "bob".into(),
                PasswordHash::Bcrypt(bcrypt::hash("hunter2", 4).unwrap()),
            )]),
        );
        let (v, pool, m) = checker();
        let wrong = check(&auth, &auth_header("bob", "nope"), &v, &pool, &m).await;
        assert_eq!(wrong, Err(BasicError::Wrong));
        assert_eq!(verifications(&m, "bcrypt"), 1);
        let unknown = check(&auth, &auth_header("eve", "nope"), &v, &pool, &m).await;
        assert_eq!(unknown, Err(BasicError::Wrong));
        assert_eq!(verifications(&m, "bcrypt"), 2);
    }
}
