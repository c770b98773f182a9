//! Extended GATEWAY-HTTP scenarios of `RequestRedirect` (port, scheme, path, status codes)
//! and `URLRewrite` (host, path) filters on plain HTTP.

use std::sync::Arc;

use crate::expect::{check_all, Outcome, Req, Want};
use crate::harness::Env;
use crate::status::accepted;
use crate::INFRA;

/// One redirect case on `www.redirect.test`.
fn redirect(path: &str, status: u16, location: &str) -> (Req, Want) {
    (
        Req::get(path).host("www.redirect.test"),
        Want::redirect(status, location),
    )
}

async fn redirects(env: &Env, cases: &[(Req, Want)]) -> Outcome {
    accepted(env, INFRA, "redirects", &["same-namespace"]).await?;
    check_all(env.gw("same-namespace"), cases).await
}

pub async fn port_redirect(env: Arc<Env>) -> Outcome {
    let cases = [
        redirect("/port", 302, "http://www.redirect.test:8083/port"),
        redirect(
            "/port-and-host/x",
            302,
            "http://other.redirect.test:8083/port-and-host/x",
        ),
        redirect(
            "/http-port-80",
            302,
            "http://www.redirect.test/http-port-80",
        ),
    ];
    redirects(&env, &cases).await
}

pub async fn scheme_redirect(env: Arc<Env>) -> Outcome {
    let cases = [
        redirect("/scheme", 302, "https://www.redirect.test/scheme"),
        redirect(
            "/scheme-and-port",
            302,
            "https://www.redirect.test:8443/scheme-and-port",
        ),
        redirect(
            "/scheme-default-port",
            302,
            "https://www.redirect.test/scheme-default-port",
        ),
    ];
    redirects(&env, &cases).await
}

pub async fn path_redirect(env: Arc<Env>) -> Outcome {
    let cases = [
        redirect("/full/x/y", 302, "http://www.redirect.test/replaced"),
        redirect("/old/prefix", 302, "http://www.redirect.test/new"),
        redirect("/old/prefix/rest", 302, "http://www.redirect.test/new/rest"),
        redirect("/strip/rest", 302, "http://www.redirect.test/rest"),
        redirect(
            "/full-and-host/x",
            302,
            "http://other.redirect.test/landing",
        ),
    ];
    redirects(&env, &cases).await
}

pub async fn redirect_303(env: Arc<Env>) -> Outcome {
    redirects(
        &env,
        &[redirect(
            "/see-other",
            303,
            "http://www.redirect.test/see-other",
        )],
    )
    .await
}

pub async fn redirect_307(env: Arc<Env>) -> Outcome {
    redirects(
        &env,
        &[redirect(
            "/temporary",
            307,
            "http://www.redirect.test/temporary",
        )],
    )
    .await
}

pub async fn redirect_308(env: Arc<Env>) -> Outcome {
    redirects(
        &env,
        &[redirect(
            "/permanent",
            308,
            "http://www.redirect.test/permanent",
        )],
    )
    .await
}

fn rewrite(path: &str) -> Req {
    Req::get(path).host("rewrite.test")
}

pub async fn host_rewrite(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "rewrites", &["same-namespace"]).await?;
    let cases = [
        (
            rewrite("/host"),
            Want::ok("infra-backend-v1").host("internal.rewrite.test"),
        ),
        (
            rewrite("/host-and-headers/x"),
            Want::ok("infra-backend-v2")
                .host("internal.rewrite.test")
                .header("X-Rewritten", "yes"),
        ),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

pub async fn path_rewrite(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "rewrites", &["same-namespace"]).await?;
    let ok = || Want::ok("infra-backend-v1");
    let cases = [
        (rewrite("/full/any/thing"), ok().path("/one")),
        (rewrite("/prefix/old"), ok().path("/new")),
        (rewrite("/prefix/old/rest"), ok().path("/new/rest")),
        (rewrite("/prefix/old/rest?q=1"), ok().path("/new/rest?q=1")),
        (rewrite("/strip-prefix/rest"), ok().path("/rest")),
        (rewrite("/strip-prefix"), ok().path("/")),
        (
            rewrite("/both/users"),
            Want::ok("infra-backend-v3")
                .path("/api/users")
                .host("internal.rewrite.test"),
        ),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}
