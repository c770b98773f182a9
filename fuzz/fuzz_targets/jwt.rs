//! JWT validation as the proxy does it (`edgeplane::proxy::validate_jwt`): arbitrary bytes as
//! a bearer token against fixed RSA and EC keys, or (input starting with `{`) as a JWKS
//! document, accepted as the translator accepts one, against fixed signed tokens. Never panics;
//! an accepted token names the provider's issuer and has exactly three parts.
#![no_main]

use edgeplane::proxy::validate_jwt;
use edgeplane::table::{JwtAuth, JwtIssuer};
use edgeplane::translate::parse_jwks;
use libfuzzer_sys::fuzz_target;

const ISSUER: &str = "https://issuer.example";
/// Public keys only: RSA (kid `rsa`) and P-256 (kid `ec`).
const JWKS: &str = r#"{"keys": [{"kty": "RSA", "kid": "rsa", "alg": "RS256", "n": "ge27mQxXHaFRhlDqgamRlXsDfmX6muJkIdEhuOQLWtmqwDbISestrYgXP_NSB5KtwM7J-V-Kk36OETIRUy08ZZAVJxaMxNzWab2RELwvkeMydACU3ilyrcPRMiwG4iscIuFjJ2iH2SVwTO5653s1LBbETIRtC0UYxy8NMKMkMhSfzYT4Y5EsngdqqA6gpV8DeJbrX6fWc3wM00vX1o275n0EV3zcRQzf5bVCO5ZZvQuf7zKzEaQcbath6XpX865zvRuH8K9VcW1j2l26rNoN2MK_1AT31BEuklpyFU032aVQ3moS11vb-4XnZ9gcUrqdV4vtqLq5K8XRcU-sefdL5w", "e": "AQAB"}, {"kty": "EC", "kid": "ec", "crv": "P-256", "x": "lfmlHuFnXHl4GfLw-sKwsa_kPB8FydoHBpZW59IXtSA", "y": "FvxSrWlfKZJOZ0P2mcRy-cJQwvI6bDmhma_pd_uWZPk"}]}"#;
/// Tokens these keys signed (RS256, ES256), valid at [`NOW`].
const TOKENS: [&str; 2] = [
    "eyJhbGciOiAiUlMyNTYiLCAia2lkIjogInJzYSIsICJ0eXAiOiAiSldUIn0.eyJpc3MiOiAiaHR0cHM6Ly9pc3N1ZXIuZXhhbXBsZSIsICJhdWQiOiAiZWRnZSIsICJzdWIiOiAiYWxpY2UiLCAiZXhwIjogNDEwMjQ0NDgwMCwgIm5iZiI6IDE3MDAwMDAwMDB9.ftMQOdNtyZQ9K_vX7CABiGQyYSd0MwhM3CC2ufbMdK-mpu9ISB_ezdun_e-AWbCqzpKMITj4w5mDo3Caz_CFL6nVU94hC3pGtiJ2R_w5qblh7qCjJIb6uKBEf6TfJR5inWTFnqfScCYI4xgjToaxks6OIH7Hw4NosTt2sACJrkBoGmoUAb-JXqW7XvgcXeePF6-himqZLD6XlJbFs0WXeCeOOMmlGr8Gywj8u-fSNzGISs0PkSfVv_5hD8qWQsRSOLBehQHtQBMcCEOT7OPXFLNGSkTHSdx6OcvAKiQStayAN6sMlwcl3_pGsTerCG66tM56mj8xTDOsWkPYIDsbNQ",
    "eyJhbGciOiAiRVMyNTYiLCAia2lkIjogImVjIiwgInR5cCI6ICJKV1QifQ.eyJpc3MiOiAiaHR0cHM6Ly9pc3N1ZXIuZXhhbXBsZSIsICJhdWQiOiAiZWRnZSIsICJzdWIiOiAiYWxpY2UiLCAiZXhwIjogNDEwMjQ0NDgwMCwgIm5iZiI6IDE3MDAwMDAwMDB9.BCJx3f3YTgnQ3E1pDg5igGGqCGxKcbHlQQpdI4AN2sddw32Af901pDhw21xTnhhxyvXjXVzUzxuRALABmphXJA",
];
const NOW: u64 = 1_800_000_000;

fn auth(jwks: serde_json::Value) -> JwtAuth {
    JwtAuth {
        providers: vec![JwtIssuer {
            name: "fixed".into(),
            issuer: ISSUER.into(),
            audiences: vec!["edge".into()],
            jwks,
            claims_to_headers: vec![("sub".into(), "x-user".into())],
        }],
        optional: false,
    }
}

fn check(auth: &JwtAuth, token: &str) {
    if let Ok((name, claims)) = validate_jwt(auth, token, NOW) {
        assert_eq!(name, "fixed");
        assert_eq!(claims.get("iss").and_then(|v| v.as_str()), Some(ISSUER));
        assert_eq!(token.split('.').count(), 3);
    }
}

fuzz_target!(|data: &[u8]| {
    if data.first() == Some(&b'{') {
        if let Ok(jwks) = parse_jwks(data) {
            let auth = auth(jwks);
            for token in TOKENS {
                check(&auth, token);
            }
        }
        return;
    }
    let Ok(token) = std::str::from_utf8(data) else {
        return;
    };
    let fixed = parse_jwks(JWKS.as_bytes()).expect("the fixed JWKS parses");
    check(&auth(fixed), token);
});
