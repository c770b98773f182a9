//! backendRef scenarios: rules without backends answer 500 while the route stays accepted with
//! resolved refs, and a backendRef's own request filter travels with the backend picked by
//! weight.

use std::sync::Arc;

use crate::expect::{check, check_all, Outcome, Req, Want};
use crate::harness::Env;
use crate::status::accepted;
use crate::support::client::{h1_client, send};
use crate::INFRA;

/// Upstream HTTPRouteNoBackendRefs: omitted and empty backendRefs answer 500.
pub async fn no_backend_refs(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "no-backends", &["same-namespace"]).await?;
    let cases = [
        (Req::get("/forward"), Want::ok("infra-backend-v1")),
        (Req::get("/without-backend-refs"), Want::status(500)),
        (Req::get("/with-empty-backend-refs"), Want::status(500)),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

/// Upstream HTTPRouteRequestHeaderModifierBackendWeights: over 100 requests split by weight,
/// each backend receives the `Backend` header its own filter sets, never the other's.
pub async fn header_modifier_backend_weights(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "weighted-backend-edits", &["same-namespace"]).await?;
    let gw = env.gw("same-namespace");
    let req = Req::get("/");
    check(gw, &req, &Want::status(200)).await?;
    let client = h1_client();
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..100 {
        let r = send(&client, req.build(gw))
            .await
            .map_err(|e| format!("request {i}: {e}"))?;
        let pod = r.pod().unwrap_or_default();
        let backend = r.echoed_header("Backend");
        match backend.as_slice() {
            [b] if pod.starts_with(&format!("{b}-")) => {
                seen.insert(b.clone());
            }
            _ => return Err(format!("request {i}: pod {pod:?} saw Backend {backend:?}")),
        }
    }
    if seen.len() != 2 {
        return Err(format!("only {seen:?} answered 100 requests split 10/10"));
    }
    Ok(())
}
