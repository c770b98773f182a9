//! JWT issuers for tests: an ES256 key made at test time with ring, and an RS256 key from a
//! test-only fixture (ring cannot generate RSA keys); each signs tokens and publishes its JWKS.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING, RSA_PKCS1_SHA256,
};
use serde_json::{json, Value};

/// A test-only RSA key (PKCS#8), used for nothing but these tests.
const RSA_TEST_KEY: &str = include_str!("keys/jwt-rsa-test.pem");

/// A key that signs tokens.
pub enum Signer {
    Es256(EcdsaKeyPair),
    Rs256(RsaKeyPair),
}

/// A signing key with its `kid`.
pub struct Issuer {
    pub kid: String,
    key: Signer,
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

impl Issuer {
    /// A fresh ES256 (P-256) key.
    pub fn es256(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("generate P-256 key");
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .expect("parse P-256 key");
        Self {
            kid: kid.into(),
            key: Signer::Es256(key),
        }
    }

    /// The fixture RS256 key.
    pub fn rs256(kid: &str) -> Self {
        let der = pem::parse(RSA_TEST_KEY).expect("fixture PEM");
        let key = RsaKeyPair::from_pkcs8(der.contents()).expect("fixture RSA key");
        Self {
            kid: kid.into(),
            key: Signer::Rs256(key),
        }
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> Value {
        match &self.key {
            Signer::Es256(k) => {
                let point = k.public_key().as_ref();
                json!({
                    "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": self.kid,
                    "x": b64(&point[1..33]), "y": b64(&point[33..65]),
                })
            }
            Signer::Rs256(k) => {
                let public = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(k.public());
                json!({
                    "kty": "RSA", "alg": "RS256", "kid": self.kid,
                    "n": b64(&public.n),
                    "e": b64(&public.e),
                })
            }
        }
    }

    /// A JWKS with this key.
    pub fn jwks(&self) -> Value {
        json!({ "keys": [self.jwk()] })
    }

    /// A signed token carrying `claims`.
    pub fn token(&self, claims: &Value) -> String {
        let alg = match self.key {
            Signer::Es256(_) => "ES256",
            Signer::Rs256(_) => "RS256",
        };
        let header = json!({ "alg": alg, "typ": "JWT", "kid": self.kid });
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let rng = SystemRandom::new();
        let sig = match &self.key {
            Signer::Es256(k) => k
                .sign(&rng, input.as_bytes())
                .expect("sign")
                .as_ref()
                .to_vec(),
            Signer::Rs256(k) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut sig)
                    .expect("sign");
                sig
            }
        };
        format!("{input}.{}", b64(&sig))
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}
