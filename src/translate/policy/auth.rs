//! The credentials TrafficPolicies read from Secrets and ConfigMaps: htpasswd files for basic
//! authentication and JSON Web Key Sets for JWT validation; which objects policies reference
//! (so a cluster provider fetches exactly those); and the deny-all forms an unusable policy
//! compiles to, so a broken reference never opens what the policy protects. Messages name
//! objects, keys and line numbers, never their contents. Pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use crate::kinds::crd::traffic_policy::{BasicAuthPolicy, JwtPolicy, LocalObjectKeyRef};
use crate::kinds::crd::TrafficPolicy;
use crate::snapshot::{namespace_of, Snapshot};
use crate::table::{BasicAuth, JwtAuth, JwtIssuer, PasswordHash};

/// Key of the htpasswd file in a basic-auth Secret when `secretRef.key` is unset.
pub const DEFAULT_HTPASSWD_KEY: &str = ".htpasswd";
/// Key of the JWKS document in a Secret or ConfigMap when `key` is unset.
pub const DEFAULT_JWKS_KEY: &str = "jwks.json";
/// Realm of the basic-auth challenge when `realm` is unset.
pub const DEFAULT_REALM: &str = "edgeplane";

/// Why credentials cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("{kind} {namespace}/{name} not found")]
    NotFound {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("{kind} {namespace}/{name} has no key {key:?}")]
    NoKey {
        kind: &'static str,
        namespace: String,
        name: String,
        key: String,
    },
    #[error("{kind} {namespace}/{name} key {key:?}: {problem}")]
    Content {
        kind: &'static str,
        namespace: String,
        name: String,
        key: String,
        problem: String,
    },
}

/// The bytes under `key` of the Secret or ConfigMap `name` in `namespace`.
fn read(
    snapshot: &Snapshot,
    kind: &'static str,
    namespace: &str,
    r: &LocalObjectKeyRef,
    default_key: &str,
) -> Result<(Vec<u8>, String), AuthError> {
    let key = r.key.clone().unwrap_or_else(|| default_key.to_owned());
    let named = |ns: &str, n: Option<&str>| ns == namespace && n == Some(r.name.as_str());
    let not_found = || AuthError::NotFound {
        kind,
        namespace: namespace.to_owned(),
        name: r.name.clone(),
    };
    let no_key = || AuthError::NoKey {
        kind,
        namespace: namespace.to_owned(),
        name: r.name.clone(),
        key: key.clone(),
    };
    let bytes = if kind == "Secret" {
        let s: &Secret = snapshot
            .secrets
            .iter()
            .rev()
            .find(|s| named(namespace_of(&s.metadata), s.metadata.name.as_deref()))
            .ok_or_else(not_found)?;
        let from_data = s
            .data
            .as_ref()
            .and_then(|d| d.get(&key))
            .map(|b| b.0.clone());
        let from_strings = || {
            s.string_data
                .as_ref()
                .and_then(|d| d.get(&key))
                .map(|v| v.clone().into_bytes())
        };
        from_data.or_else(from_strings).ok_or_else(no_key)?
    } else {
        let c: &ConfigMap = snapshot
            .config_maps
            .iter()
            .rev()
            .find(|c| named(namespace_of(&c.metadata), c.metadata.name.as_deref()))
            .ok_or_else(not_found)?;
        let from_data = c
            .data
            .as_ref()
            .and_then(|d| d.get(&key))
            .map(|v| v.clone().into_bytes());
        let from_binary = || {
            c.binary_data
                .as_ref()
                .and_then(|d| d.get(&key))
                .map(|b| b.0.clone())
        };
        from_data.or_else(from_binary).ok_or_else(no_key)?
    };
    Ok((bytes, key))
}

/// Basic authentication of `spec` for a policy in `namespace`: the users of its htpasswd file.
pub fn basic_auth(
    snapshot: &Snapshot,
    namespace: &str,
    spec: &BasicAuthPolicy,
) -> Result<BasicAuth, AuthError> {
    let r = &spec.secret_ref;
    let (bytes, key) = read(snapshot, "Secret", namespace, r, DEFAULT_HTPASSWD_KEY)?;
    let users = parse_htpasswd(&bytes).map_err(|problem| AuthError::Content {
        kind: "Secret",
        namespace: namespace.to_owned(),
        name: r.name.clone(),
        key,
        problem,
    })?;
    Ok(BasicAuth::new(realm(spec), users))
}

fn realm(spec: &BasicAuthPolicy) -> String {
    spec.realm
        .clone()
        .unwrap_or_else(|| DEFAULT_REALM.to_owned())
}

/// Basic authentication that lets nobody in: what an unusable `basicAuth` compiles to.
pub fn deny_basic_auth(spec: &BasicAuthPolicy) -> BasicAuth {
    BasicAuth::new(realm(spec), BTreeMap::new())
}

/// Parses htpasswd lines `user:hash` (blank lines and `#` comments skipped): bcrypt hashes
/// (`$2a$`, `$2b$`, `$2y$`) are kept as they are, `{SHA}` ones decoded to their 20 bytes. A
/// line in another format is an error naming its number and nothing of its content.
pub fn parse_htpasswd(bytes: &[u8]) -> Result<BTreeMap<String, PasswordHash>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
    let mut users = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((user, hash)) = line.split_once(':') else {
            return Err(format!("line {number}: not in the form user:hash"));
        };
        if user.is_empty() {
            return Err(format!("line {number}: empty user name"));
        }
        let hash = if ["$2a$", "$2b$", "$2y$"].iter().any(|p| hash.starts_with(p)) {
            // A malformed hash would be refused at once, unlike a real one that costs a
            // verification: that difference tells a client which users exist.
            let cost = hash.parse::<bcrypt::HashParts>().map(|p| p.get_cost());
            if !cost.is_ok_and(|c| (4..=31).contains(&c)) {
                return Err(format!(
                    "line {number}: malformed bcrypt hash (expected $2y$NN$ and 53 characters)"
                ));
            }
            PasswordHash::Bcrypt(hash.to_owned())
        } else if let Some(b64) = hash.strip_prefix("{SHA}") {
            let digest = decode_base64(b64)
                .and_then(|d| <[u8; 20]>::try_from(d).ok())
                .ok_or_else(|| format!("line {number}: {{SHA}} hash is not base64 of 20 bytes"))?;
            PasswordHash::Sha1(digest)
        } else {
            return Err(format!(
                "line {number}: unsupported hash format (use bcrypt $2y$ or {{SHA}})"
            ));
        };
        users.insert(user.to_owned(), hash);
    }
    Ok(users)
}

/// Standard base64 with optional `=` padding; `None` on anything else.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine;
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    LENIENT.decode(text).ok()
}

/// Which JWKS source a provider names: exactly one of a Secret and a ConfigMap.
fn jwks_source(
    p: &crate::kinds::crd::traffic_policy::JwtProvider,
) -> Option<(&'static str, &LocalObjectKeyRef)> {
    match (&p.jwks.secret_ref, &p.jwks.config_map_ref) {
        (Some(s), None) => Some(("Secret", s)),
        (None, Some(c)) => Some(("ConfigMap", c)),
        _ => None,
    }
}

/// JWT validation of `spec` for a policy in `namespace`, each provider with its parsed JWKS.
/// The error names the provider's field.
pub fn jwt(snapshot: &Snapshot, namespace: &str, spec: &JwtPolicy) -> Result<JwtAuth, String> {
    if spec.providers.is_empty() {
        return Err("spec.jwt.providers: at least one provider is required".into());
    }
    let mut providers = Vec::with_capacity(spec.providers.len());
    for (i, p) in spec.providers.iter().enumerate() {
        let field = format!("spec.jwt.providers[{i}]");
        if p.issuer.is_empty() {
            return Err(format!("{field}.issuer: must not be empty"));
        }
        if spec.providers[..i].iter().any(|q| q.name == p.name) {
            return Err(format!("{field}.name: {:?} is used twice", p.name));
        }
        let mut claims = Vec::with_capacity(p.claims_to_headers.len());
        for (j, c) in p.claims_to_headers.iter().enumerate() {
            let header = http::HeaderName::from_bytes(c.header.as_bytes()).map_err(|_| {
                format!(
                    "{field}.claimsToHeaders[{j}].header: invalid header name {:?}",
                    c.header
                )
            })?;
            claims.push((c.claim.clone(), header.as_str().to_owned()));
        }
        let (kind, r) = jwks_source(p).ok_or_else(|| {
            format!("{field}.jwks: set exactly one of secretRef and configMapRef")
        })?;
        let (bytes, key) = read(snapshot, kind, namespace, r, DEFAULT_JWKS_KEY)
            .map_err(|e| format!("{field}.jwks: {e}"))?;
        let jwks = parse_jwks(&bytes).map_err(|problem| {
            format!(
                "{field}.jwks: {kind} {namespace}/{} key {key:?}: {problem}",
                r.name
            )
        })?;
        providers.push(JwtIssuer {
            name: p.name.clone(),
            issuer: p.issuer.clone(),
            audiences: p.audiences.clone(),
            jwks,
            claims_to_headers: claims,
        });
    }
    Ok(JwtAuth {
        providers,
        optional: spec.optional.unwrap_or(false),
    })
}

/// JWT validation that accepts no token and requires one: what an unusable `jwt` compiles to.
pub fn deny_jwt(spec: &JwtPolicy) -> JwtAuth {
    JwtAuth {
        providers: spec
            .providers
            .iter()
            .map(|p| JwtIssuer {
                name: p.name.clone(),
                issuer: p.issuer.clone(),
                audiences: p.audiences.clone(),
                jwks: serde_json::json!({"keys": []}),
                claims_to_headers: Vec::new(),
            })
            .collect(),
        optional: false,
    }
}

/// Parses a JWKS document: a JSON object whose `keys` is an array of objects with a `kty`.
pub fn parse_jwks(bytes: &[u8]) -> Result<serde_json::Value, String> {
    let v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not JSON (line {})", e.line()))?;
    let keys = v
        .get("keys")
        .and_then(|k| k.as_array())
        .ok_or("not a JSON Web Key Set: no \"keys\" array")?;
    if let Some(i) = keys
        .iter()
        .position(|k| k.get("kty").and_then(|t| t.as_str()).is_none())
    {
        return Err(format!("keys[{i}] has no \"kty\""));
    }
    Ok(v)
}

/// Every Secret and ConfigMap TrafficPolicies reference, as `(kind, namespace, name)`: the
/// htpasswd Secrets of `basicAuth` and the JWKS Secrets and ConfigMaps of `jwt`.
pub fn referenced_policy_objects(
    policies: &[Arc<TrafficPolicy>],
) -> Vec<(&'static str, String, String)> {
    let mut out = Vec::new();
    for p in policies {
        let ns = namespace_of(&p.metadata);
        if let Some(b) = &p.spec.basic_auth {
            out.push(("Secret", ns.to_owned(), b.secret_ref.name.clone()));
        }
        for provider in p.spec.jwt.iter().flat_map(|j| &j.providers) {
            if let Some(s) = &provider.jwks.secret_ref {
                out.push(("Secret", ns.to_owned(), s.name.clone()));
            }
            if let Some(c) = &provider.jwks.config_map_ref {
                out.push(("ConfigMap", ns.to_owned(), c.name.clone()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn htpasswd_keeps_bcrypt_and_decodes_sha() {
        let text = "# users\nalice:$2y$05$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234\n\nbob:{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M=\n";
        let users = parse_htpasswd(text.as_bytes()).unwrap();
        assert_eq!(
            users["alice"],
            PasswordHash::Bcrypt(
                "$2y$05$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234".into()
            )
        );
        // SHA-1 of "test".
        let PasswordHash::Sha1(d) = &users["bob"] else {
            panic!("not sha")
        };
        assert_eq!(d[..4], [0xa9, 0x4a, 0x8f, 0xe5]);
    }

    #[test]
    fn htpasswd_errors_name_the_line_not_the_content() {
        let e = parse_htpasswd(b"alice:$2y$ok\n").unwrap_err();
        assert!(e.starts_with("line 1: malformed bcrypt hash"), "{e}");
        let text = "alice:GOOD\ncarol:secretplain\n".replace(
            "GOOD",
            "$2y$05$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234",
        );
        let e = parse_htpasswd(text.as_bytes()).unwrap_err();
        assert!(e.starts_with("line 2: unsupported hash format"), "{e}");
        assert!(!e.contains("secretplain"));
        // A cost bcrypt cannot verify is as malformed as a short hash.
        let e = parse_htpasswd(b"a:$2y$99$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234")
            .unwrap_err();
        assert!(e.contains("malformed bcrypt"), "{e}");
        let e = parse_htpasswd(b"nocolon").unwrap_err();
        assert_eq!(e, "line 1: not in the form user:hash");
        let e = parse_htpasswd(b"u:{SHA}AAAA").unwrap_err();
        assert!(e.contains("20 bytes"), "{e}");
    }

    #[test]
    fn jwks_needs_a_keys_array_of_typed_keys() {
        assert!(parse_jwks(br#"{"keys":[{"kty":"RSA","n":"x","e":"AQAB"}]}"#).is_ok());
        assert!(parse_jwks(br#"{"keys":{}}"#).unwrap_err().contains("keys"));
        assert!(parse_jwks(br#"{"keys":[{"n":"x"}]}"#)
            .unwrap_err()
            .contains("keys[0]"));
        assert!(parse_jwks(b"{oops").unwrap_err().starts_with("not JSON"));
    }
}
