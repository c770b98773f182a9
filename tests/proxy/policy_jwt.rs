//! JWT validation through the proxy: ES256 keys made at test time and an RS256 fixture key,
//! published as the provider's JWKS; accepted tokens have their claims copied into request
//! headers the echo backend shows; expired, foreign, wrongly addressed, tampered and missing
//! tokens get 401 with a Bearer challenge; an optional policy lets requests without a token by.

use std::net::SocketAddr;
use std::sync::Arc;

use edgeplane::table::{JwtAuth, JwtIssuer, RequestPolicy};
use http::Method;
use serde_json::{json, Value};

use crate::policy_access::policy_table;
use crate::support::client::{empty, h1_client, request, send, Reply, TestClient};
use crate::support::echo::start_echo;
use crate::support::jwt::{now, Issuer};
use crate::support::net::free_addr;
use crate::support::proxy::start;

const ISSUER: &str = "https://issuer.example";

pub fn jwt_policy(keys: &[&Issuer], optional: bool) -> RequestPolicy {
    let jwks = json!({ "keys": keys.iter().map(|k| k.jwk()).collect::<Vec<Value>>() });
    RequestPolicy {
        jwt: Some(Arc::new(JwtAuth {
            providers: vec![JwtIssuer {
                name: "main".into(),
                issuer: ISSUER.into(),
                audiences: vec!["api".into(), "web".into()],
                jwks,
                claims_to_headers: vec![
                    ("sub".into(), "x-user".into()),
                    ("tier".into(), "x-tier".into()),
                ],
            }],
            optional,
        })),
        ..RequestPolicy::default()
    }
}

pub fn claims(overrides: Value) -> Value {
    let mut c = json!({
        "iss": ISSUER,
        "aud": ["other", "api"],
        "sub": "user-7",
        "tier": 3,
        "exp": now() + 600,
        "nbf": now() - 10,
    });
    if let (Some(c), Some(o)) = (c.as_object_mut(), overrides.as_object()) {
        for (k, v) in o {
            c.insert(k.clone(), v.clone());
        }
    }
    c
}

async fn call(client: &TestClient, addr: SocketAddr, token: Option<&str>) -> Reply {
    let mut req = request(Method::GET, addr, "example.com", "/")
        // A client cannot set the claim headers itself.
        .header("x-user", "forged");
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    send(client, req.body(empty()).unwrap())
        .await
        .expect("request completes")
}

#[tokio::test]
async fn valid_tokens_pass_with_their_claims_as_headers() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let ec = Issuer::es256("ec-1");
    let rsa = Issuer::rs256("rsa-1");
    let _proxy = start(policy_table(
        addr,
        echo.addr,
        Some(jwt_policy(&[&ec, &rsa], false)),
        None,
    ))
    .await;
    let client = h1_client();
    for issuer in [&ec, &rsa] {
        let ok = call(&client, addr, Some(&issuer.token(&claims(json!({}))))).await;
        assert_eq!(ok.status, 200, "{}: {:?}", issuer.kid, ok.body);
        assert_eq!(ok.echoed_header("x-user"), vec!["user-7".to_owned()]);
        assert_eq!(ok.echoed_header("x-tier"), vec!["3".to_owned()]);
    }
}

#[tokio::test]
async fn bad_or_missing_tokens_get_401_with_a_bearer_challenge() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let ec = Issuer::es256("ec-1");
    let stranger = Issuer::es256("ec-1");
    let proxy = start(policy_table(
        addr,
        echo.addr,
        Some(jwt_policy(&[&ec], false)),
        None,
    ))
    .await;
    let client = h1_client();
    // One signature byte changed (a character in the middle: every bit of it counts).
    let valid = ec.token(&claims(json!({})));
    let at = valid.len() - 20;
    let swapped = if &valid[at..at + 1] == "A" { "B" } else { "A" };
    let tampered = format!("{}{swapped}{}", &valid[..at], &valid[at + 1..]);
    let cases = [
        ("expired", ec.token(&claims(json!({"exp": now() - 3600})))),
        (
            "not yet valid",
            ec.token(&claims(json!({"nbf": now() + 3600}))),
        ),
        (
            "wrong issuer",
            ec.token(&claims(json!({"iss": "https://evil.example"}))),
        ),
        (
            "wrong audience",
            ec.token(&claims(json!({"aud": "billing"}))),
        ),
        ("other key", stranger.token(&claims(json!({})))),
        ("tampered", tampered),
        ("garbage", "not.a.jwt".to_owned()),
    ];
    for (what, token) in &cases {
        let r = call(&client, addr, Some(token)).await;
        assert_eq!(r.status, 401, "{what}");
        assert_eq!(
            r.header("www-authenticate").as_deref(),
            Some("Bearer error=\"invalid_token\""),
            "{what}"
        );
    }
    let missing = call(&client, addr, None).await;
    assert_eq!(missing.status, 401);
    assert_eq!(
        missing.header("www-authenticate").as_deref(),
        Some("Bearer")
    );
    let metrics = proxy.metrics.encode();
    assert!(
        metrics.contains("edgeplane_policy_denied_total{reason=\"jwt\"} 8"),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_optional_policy_passes_requests_without_a_token_but_not_bad_ones() {
    let echo = start_echo("a").await;
    let addr = free_addr();
    let ec = Issuer::es256("ec-1");
    let _proxy = start(policy_table(
        addr,
        echo.addr,
        Some(jwt_policy(&[&ec], true)),
        None,
    ))
    .await;
    let client = h1_client();
    let anonymous = call(&client, addr, None).await;
    assert_eq!(anonymous.status, 200);
    assert!(
        anonymous.echoed_header("x-user").is_empty(),
        "forged claim header removed"
    );
    let expired = ec.token(&claims(json!({"exp": now() - 3600})));
    assert_eq!(call(&client, addr, Some(&expired)).await.status, 401);
    let ok = call(&client, addr, Some(&ec.token(&claims(json!({}))))).await;
    assert_eq!(ok.echoed_header("x-user"), vec!["user-7".to_owned()]);
}
