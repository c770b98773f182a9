//! JWT validation with keys from a JWKS: the signature (RS256/384/512, PS256/384/512, ES256,
//! ES384, verified with ring), the issuer (one of the policy's providers), the audience (when
//! the provider lists any) and the validity window (`exp`, `nbf`, with a small leeway). The
//! token comes from `Authorization: Bearer`, which is passed on unchanged.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::Value;

use crate::table::{JwtAuth, JwtIssuer};

/// Clock skew tolerated on `exp` and `nbf`.
pub(crate) const LEEWAY: Duration = Duration::from_secs(60);

/// Why a token was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum JwtError {
    #[error("no bearer token")]
    Missing,
    #[error("malformed token")]
    Malformed,
    #[error("algorithm {0:?} is not accepted")]
    Algorithm(String),
    #[error("issuer is not accepted")]
    Issuer,
    #[error("no key verifies the signature")]
    Signature,
    #[error("audience is not accepted")]
    Audience,
    #[error("token expired")]
    Expired,
    #[error("token not yet valid")]
    NotYetValid,
}

/// The `WWW-Authenticate` value for a refused request: bare for a missing token, with
/// `error="invalid_token"` for a bad one (RFC 6750 3).
pub(crate) fn challenge(error: &JwtError) -> HeaderValue {
    match error {
        JwtError::Missing => HeaderValue::from_static("Bearer"),
        _ => HeaderValue::from_static("Bearer error=\"invalid_token\""),
    }
}

/// Validates the request's bearer token against `auth`. On success the claims named by the
/// provider's `claims_to_headers` are set as request headers; the header names of every
/// provider are removed first, whatever the outcome, so a client cannot send them itself.
/// `Ok` without a token when the policy is optional.
pub(crate) fn check(auth: &JwtAuth, headers: &mut HeaderMap) -> Result<(), JwtError> {
    for provider in &auth.providers {
        for (_, name) in &provider.claims_to_headers {
            headers.remove(name.as_str());
        }
    }
    let token = match bearer(headers) {
        Some(token) => token,
        None if auth.optional => return Ok(()),
        None => return Err(JwtError::Missing),
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let (provider, claims) = validate(auth, &token, now)?;
    for (claim, name) in &provider.claims_to_headers {
        let value = match claims.get(claim) {
            Some(Value::String(s)) => HeaderValue::from_str(s).ok(),
            Some(Value::Number(n)) => HeaderValue::from_str(&n.to_string()).ok(),
            Some(Value::Bool(b)) => {
                Some(HeaderValue::from_static(if *b { "true" } else { "false" }))
            }
            _ => None,
        };
        if let (Some(value), Ok(name)) = (value, HeaderName::from_bytes(name.as_bytes())) {
            headers.insert(name, value);
        }
    }
    Ok(())
}

/// The token of `Authorization: Bearer <token>`.
fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_owned())
}

fn b64(part: &str) -> Result<Vec<u8>, JwtError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .map_err(|_| JwtError::Malformed)
}

/// The provider that issued `token` and its claims, when every check passes at `now`.
pub(crate) fn validate<'a>(
    auth: &'a JwtAuth,
    token: &str,
    now: u64,
) -> Result<(&'a JwtIssuer, serde_json::Map<String, Value>), JwtError> {
    let mut parts = token.split('.');
    let (Some(head), Some(body), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwtError::Malformed);
    };
    let header: Value = serde_json::from_slice(&b64(head)?).map_err(|_| JwtError::Malformed)?;
    let claims: Value = serde_json::from_slice(&b64(body)?).map_err(|_| JwtError::Malformed)?;
    let Value::Object(claims) = claims else {
        return Err(JwtError::Malformed);
    };
    let signature = b64(sig)?;
    let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
    let kid = header.get("kid").and_then(Value::as_str);
    let iss = claims.get("iss").and_then(Value::as_str);
    let provider = auth
        .providers
        .iter()
        .find(|p| Some(p.issuer.as_str()) == iss)
        .ok_or(JwtError::Issuer)?;
    let signed = &token.as_bytes()[..head.len() + 1 + body.len()];
    verify_signature(&provider.jwks, alg, kid, signed, &signature)?;
    check_audience(provider, &claims)?;
    let leeway = LEEWAY.as_secs();
    if let Some(exp) = claims.get("exp").map(numeric) {
        match exp {
            Some(exp) if now <= exp.saturating_add(leeway) => {}
            _ => return Err(JwtError::Expired),
        }
    }
    if let Some(nbf) = claims.get("nbf").map(numeric) {
        match nbf {
            Some(nbf) if now.saturating_add(leeway) >= nbf => {}
            _ => return Err(JwtError::NotYetValid),
        }
    }
    Ok((provider, claims))
}

/// A NumericDate (seconds; fractions are cut).
fn numeric(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_f64().map(|f| f.max(0.0) as u64))
}

fn check_audience(
    provider: &JwtIssuer,
    claims: &serde_json::Map<String, Value>,
) -> Result<(), JwtError> {
    if provider.audiences.is_empty() {
        return Ok(());
    }
    let accepted = |a: &str| provider.audiences.iter().any(|x| x == a);
    let ok = match claims.get("aud") {
        Some(Value::String(a)) => accepted(a),
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).any(accepted),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(JwtError::Audience)
    }
}

/// Verifies with the JWKS key named by `kid` (or keys without a `kid`), or with every key that
/// fits `alg` when the token names none.
fn verify_signature(
    jwks: &Value,
    alg: &str,
    kid: Option<&str>,
    signed: &[u8],
    sig: &[u8],
) -> Result<(), JwtError> {
    let keys = jwks
        .get("keys")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let kty = match alg {
        "RS256" | "RS384" | "RS512" | "PS256" | "PS384" | "PS512" => "RSA",
        "ES256" | "ES384" => "EC",
        other => return Err(JwtError::Algorithm(other.to_owned())),
    };
    let candidates = keys.iter().filter(|k| {
        k.get("kty").and_then(Value::as_str) == Some(kty)
            && k.get("alg")
                .and_then(Value::as_str)
                .is_none_or(|a| a == alg)
            && k.get("use")
                .and_then(Value::as_str)
                .is_none_or(|u| u == "sig")
            // A token's `kid` must name the key, unless the key has none.
            && kid.is_none_or(|kid| {
                k.get("kid")
                    .and_then(Value::as_str)
                    .is_none_or(|own| own == kid)
            })
    });
    for key in candidates {
        if verify_with(key, alg, signed, sig).is_some() {
            return Ok(());
        }
    }
    Err(JwtError::Signature)
}

/// `Some` when `key` verifies `sig` over `signed` with `alg`.
fn verify_with(key: &Value, alg: &str, signed: &[u8], sig: &[u8]) -> Option<()> {
    let field = |name: &str| {
        key.get(name)
            .and_then(Value::as_str)
            .and_then(|v| b64(v).ok())
    };
    match alg {
        "ES256" | "ES384" => {
            let (crv, algorithm) = match alg {
                "ES256" => ("P-256", &signature::ECDSA_P256_SHA256_FIXED),
                _ => ("P-384", &signature::ECDSA_P384_SHA384_FIXED),
            };
            if key.get("crv").and_then(Value::as_str) != Some(crv) {
                return None;
            }
            let mut point = vec![0x04];
            point.extend(field("x")?);
            point.extend(field("y")?);
            UnparsedPublicKey::new(algorithm, point)
                .verify(signed, sig)
                .ok()
        }
        _ => {
            let params: &signature::RsaParameters = match alg {
                "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
                "RS384" => &signature::RSA_PKCS1_2048_8192_SHA384,
                "RS512" => &signature::RSA_PKCS1_2048_8192_SHA512,
                "PS256" => &signature::RSA_PSS_2048_8192_SHA256,
                "PS384" => &signature::RSA_PSS_2048_8192_SHA384,
                "PS512" => &signature::RSA_PSS_2048_8192_SHA512,
                _ => return None,
            };
            let components = RsaPublicKeyComponents {
                n: field("n")?,
                e: field("e")?,
            };
            components.verify(params, signed, sig).ok()
        }
    }
}
