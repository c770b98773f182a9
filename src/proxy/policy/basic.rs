//! HTTP basic authentication against htpasswd hashes: bcrypt (verified off the async threads,
//! as a hash costs milliseconds by design, with successful checks remembered briefly so a
//! client sending the same credentials on every request pays once) and `{SHA}`. Comparisons of
//! secrets are constant-time. The `Authorization` header is passed on to the backend
//! unchanged: a backend may read the user name from it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use http::header::{self, HeaderMap, HeaderValue};
use sha1::{Digest, Sha1};

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

/// Checks the request's `Authorization: Basic` credentials against `auth`'s users.
pub(crate) async fn check(
    auth: &BasicAuth,
    headers: &HeaderMap,
    verified: &Verified,
) -> Result<(), BasicError> {
    let (user, password) = credentials(headers)?;
    let Some(hash) = auth.users.get(&user) else {
        return Err(BasicError::Wrong);
    };
    let ok = match hash {
        PasswordHash::Sha1(expected) => {
            let got: [u8; 20] = Sha1::digest(password.as_bytes()).into();
            constant_time_eq(&got, expected)
        }
        PasswordHash::Bcrypt(hash) => {
            let key = Verified::key(hash, &user, &password);
            if verified.remembered(&key) {
                true
            } else {
                let hash = hash.clone();
                let ok = tokio::task::spawn_blocking(move || {
                    bcrypt::verify(password.as_bytes(), &hash).unwrap_or(false)
                })
                .await
                .unwrap_or(false);
                if ok {
                    verified.remember(key);
                }
                ok
            }
        }
    };
    if ok {
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
    use std::collections::BTreeMap;

    fn auth_header(user: &str, password: &str) -> HeaderMap {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            format!("Basic {token}").parse().unwrap(),
        );
        h
    }

    #[tokio::test]
    async fn bcrypt_and_sha_users_are_checked() {
        let sha: [u8; 20] = Sha1::digest(b"s3cret").into();
        let bc = bcrypt::hash("hunter2", 4).unwrap();
        let auth = BasicAuth {
            realm: "r".into(),
            users: BTreeMap::from([
                ("alice".into(), PasswordHash::Sha1(sha)),
                ("bob".into(), PasswordHash::Bcrypt(bc)),
            ]),
        };
        let v = Verified::default();
        assert_eq!(
            check(&auth, &auth_header("alice", "s3cret"), &v).await,
            Ok(())
        );
        assert_eq!(
            check(&auth, &auth_header("bob", "hunter2"), &v).await,
            Ok(())
        );
        assert_eq!(
            check(&auth, &auth_header("bob", "hunter2"), &v).await,
            Ok(())
        );
        assert_eq!(
            check(&auth, &auth_header("bob", "hunter3"), &v).await,
            Err(BasicError::Wrong)
        );
        assert_eq!(
            check(&auth, &auth_header("carol", "s3cret"), &v).await,
            Err(BasicError::Wrong)
        );
        assert_eq!(
            check(&auth, &HeaderMap::new(), &v).await,
            Err(BasicError::Missing)
        );
        assert_eq!(challenge(&auth), "Basic realm=\"r\"");
    }
}
