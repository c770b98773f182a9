//! HTTPRoute core scenarios: attachment, matching, precedence, references, backends, weights,
//! request header modification and host redirects.

use std::sync::Arc;

use crate::expect::{check, check_all, distribution, Outcome, Req, Want};
use crate::harness::Env;
use crate::status::{
    accepted, observed, route_condition, route_parents, wait_status, Cond, Parent,
};
use crate::{APP, INFRA, WEB};

pub async fn simple_same_namespace(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "plain-route", &["same-namespace"]).await?;
    check(
        env.gw("same-namespace"),
        &Req::get("/"),
        &Want::ok("infra-backend-v1"),
    )
    .await
}

pub async fn cross_namespace(env: Arc<Env>) -> Outcome {
    accepted(&env, WEB, "from-web", &["backend-namespaces"]).await?;
    check(
        env.gw("backend-namespaces"),
        &Req::get("/"),
        &Want::ok("web-backend"),
    )
    .await
}

pub async fn exact_path(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "exact-paths", &["same-namespace"]).await?;
    let cases = [
        (Req::get("/alpha"), Want::ok("infra-backend-v1")),
        (Req::get("/beta"), Want::ok("infra-backend-v2")),
        (Req::get("/"), Want::status(404)),
        (Req::get("/alpha/more"), Want::status(404)),
        (Req::get("/beta/"), Want::status(404)),
        (Req::get("/Alpha"), Want::status(404)),
        (Req::get("/gamma"), Want::status(404)),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

pub async fn header_matching(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "by-headers", &["same-namespace"]).await?;
    let h = |pairs: &[(&str, &str)]| pairs.iter().fold(Req::get("/"), |r, (n, v)| r.header(n, v));
    let cases = [
        (h(&[("tier", "gold")]), Want::ok("infra-backend-v1")),
        (h(&[("TIER", "gold")]), Want::ok("infra-backend-v1")),
        (h(&[("tier", "silver")]), Want::ok("infra-backend-v2")),
        (
            h(&[("tier", "silver"), ("region", "north")]),
            Want::ok("infra-backend-v1"),
        ),
        (h(&[("region", "east")]), Want::ok("infra-backend-v1")),
        (h(&[("region", "west")]), Want::ok("infra-backend-v1")),
        (h(&[("region", "south")]), Want::ok("infra-backend-v2")),
        (h(&[("region", "central")]), Want::ok("infra-backend-v2")),
        (
            h(&[("tier", "gold"), ("region", "south")]),
            Want::ok("infra-backend-v1"),
        ),
        (h(&[("region", "north")]), Want::status(404)),
        (h(&[("tier", "Gold")]), Want::status(404)),
        (h(&[]), Want::status(404)),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

pub async fn hostname_intersection(env: Arc<Env>) -> Outcome {
    wait_status(&env, "routes attach by hostname intersection", |r| {
        for route in [
            "exact-on-exact",
            "exact-on-wildcard",
            "wildcard-on-exact",
            "wildcard-on-wildcard",
        ] {
            crate::status::routes_accepted(r, "host-intersect", &[(INFRA, route)])?;
        }
        let refused = Cond("Accepted", "False", "NoMatchingListenerHostname");
        let parent = Parent::gateway(INFRA, "host-intersect", &[refused]);
        route_parents(r, INFRA, "no-intersection", &[parent], true)?;
        crate::status::routes_accepted(r, "host-intersect-any", &[(INFRA, "any-listener")])
    })
    .await?;
    let gw = env.gw("host-intersect");
    let at = |host: &str, path: &str| Req::get(path).host(host);
    let cases = [
        (at("api.shop.test", "/one"), Want::ok("infra-backend-v1")),
        (at("unrelated.test", "/one"), Want::status(404)),
        (at("x.unrelated.test", "/one"), Want::status(404)),
        (at("img.cdn.test", "/two"), Want::ok("infra-backend-v2")),
        (at("js.cdn.test", "/two"), Want::ok("infra-backend-v2")),
        (at("a.b.cdn.test", "/two"), Want::ok("infra-backend-v2")),
        (at("cdn.test", "/two"), Want::status(404)),
        (at("other.cdn.test", "/two"), Want::status(404)),
        (at("api.shop.test", "/three"), Want::ok("infra-backend-v3")),
        (at("www.shop.test", "/three"), Want::status(404)),
        (at("a.static.test", "/four"), Want::ok("infra-backend-v1")),
        (at("a.b.static.test", "/four"), Want::ok("infra-backend-v1")),
        (at("static.test", "/four"), Want::status(404)),
        (at("wrong.shop.example", "/five"), Want::status(404)),
        (at("cdn.test", "/five"), Want::status(404)),
    ];
    check_all(gw, &cases).await?;
    let any = env.gw("host-intersect-any");
    let cases = [
        (at("one.test", "/"), Want::ok("infra-backend-v2")),
        (at("sub.two.test", "/"), Want::ok("infra-backend-v2")),
        (at("three.test", "/"), Want::status(404)),
        (at("deep.sub.one.test", "/"), Want::status(404)),
    ];
    check_all(any, &cases).await
}

pub async fn listener_hostname_matching(env: Arc<Env>) -> Outcome {
    wait_status(&env, "routes attached per listener", |r| {
        crate::status::gateway_ready(r, INFRA, "listener-hosts")?;
        let gw = "listener-hosts";
        crate::status::routes_accepted_at(r, gw, &["apex"], &[(INFRA, "to-apex")])?;
        crate::status::routes_accepted_at(r, gw, &["www"], &[(INFRA, "to-www")])?;
        let wildcards = ["any-shop", "any-blog"];
        crate::status::routes_accepted_at(r, gw, &wildcards, &[(INFRA, "to-wildcards")])
    })
    .await?;
    let at = |host: &str| Req::get("/").host(host);
    let cases = [
        (at("shop.test"), Want::ok("infra-backend-v1")),
        (at("www.shop.test"), Want::ok("infra-backend-v2")),
        (at("cart.shop.test"), Want::ok("infra-backend-v3")),
        (at("a.b.shop.test"), Want::ok("infra-backend-v3")),
        (at("x.y.blog.test"), Want::ok("infra-backend-v3")),
        (at("blog.test"), Want::status(404)),
        (at("unknown.test"), Want::status(404)),
    ];
    check_all(env.gw("listener-hosts"), &cases).await
}

pub async fn matching_across_routes(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "across-first", &["same-namespace"]).await?;
    accepted(&env, INFRA, "across-second", &["same-namespace"]).await?;
    let at = |host: &str, path: &str| Req::get(path).host(host);
    let cases = [
        (at("left.test", "/"), Want::ok("infra-backend-v1")),
        (at("left.test", "/page"), Want::ok("infra-backend-v1")),
        (at("right.test", "/page"), Want::ok("infra-backend-v1")),
        (at("left.test", "/v2"), Want::ok("infra-backend-v2")),
        (at("left.test", "/v2/page"), Want::ok("infra-backend-v2")),
        (at("right.test", "/v2"), Want::ok("infra-backend-v1")),
        (
            at("left.test", "/").header("tier", "gold"),
            Want::ok("infra-backend-v1"),
        ),
        (
            at("left.test", "/").header("tier", "silver"),
            Want::ok("infra-backend-v2"),
        ),
        (
            at("right.test", "/").header("tier", "silver"),
            Want::ok("infra-backend-v1"),
        ),
        (at("left.test", "/v2example"), Want::ok("infra-backend-v1")),
        (at("elsewhere.test", "/"), Want::status(404)),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

pub async fn matching(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "path-or-header", &["same-namespace"]).await?;
    let cases = [
        (Req::get("/"), Want::ok("infra-backend-v1")),
        (Req::get("/page"), Want::ok("infra-backend-v1")),
        (Req::get("/v2"), Want::ok("infra-backend-v2")),
        (Req::get("/v2/page"), Want::ok("infra-backend-v2")),
        (Req::get("/v2example"), Want::ok("infra-backend-v1")),
        (
            Req::get("/").header("tier", "gold"),
            Want::ok("infra-backend-v1"),
        ),
        (
            Req::get("/").header("tier", "silver"),
            Want::ok("infra-backend-v2"),
        ),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

/// Weighted split 70/30/0 over 1,000 requests, each share within 5 points.
pub async fn weight(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "split", &["same-namespace"]).await?;
    let gw = env.gw("same-namespace");
    check(gw, &Req::get("/"), &Want::status(200)).await?;
    let n = 1000;
    let counts = distribution(gw, &Req::get("/"), n).await;
    let share = |svc: &str| counts.get(svc).copied().unwrap_or(0) as f64 / n as f64;
    let others: usize = counts
        .iter()
        .filter(|(k, _)| !k.starts_with("infra-backend-v"))
        .map(|(_, v)| v)
        .sum();
    if others > 0
        || (share("infra-backend-v1") - 0.7).abs() > 0.05
        || (share("infra-backend-v2") - 0.3).abs() > 0.05
        || share("infra-backend-v3") > 0.0
    {
        return Err(format!("distribution {counts:?}, want 70/30/0 within 5%"));
    }
    Ok(())
}

pub async fn request_header_modifier(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "header-edits", &["same-namespace"]).await?;
    let ok = || Want::ok("infra-backend-v1");
    let cases = [
        (Req::get("/set"), ok().header("X-Stage", "edge")),
        (
            Req::get("/set").header("X-Stage", "client"),
            ok().header("X-Stage", "edge"),
        ),
        (Req::get("/add"), ok().header("X-Stage", "edge")),
        (
            Req::get("/add").header("X-Stage", "client"),
            ok().header("X-Stage", "client,edge"),
        ),
        (
            Req::get("/remove").header("X-Drop", "x"),
            ok().absent("X-Drop"),
        ),
        (
            Req::get("/multiple")
                .header("X-Set-Two", "old")
                .header("X-Add-Two", "old")
                .header("X-Drop-One", "x")
                .header("X-Drop-Two", "x")
                .header("X-Kept", "kept"),
            ok().header("X-Set-One", "one")
                .header("X-Set-Two", "two")
                .header("X-Add-One", "one")
                .header("X-Add-Two", "old,two")
                .header("X-Kept", "kept")
                .absent("X-Drop-One")
                .absent("X-Drop-Two"),
        ),
        (
            Req::get("/case")
                .header("x-mixed-case", "client")
                .header("x-added-case", "client")
                .header("x-remove-case", "x"),
            ok().header("X-Mixed-Case", "Set")
                .header("X-Added-Case", "client,Added")
                .absent("X-Remove-Case"),
        ),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

pub async fn redirect_host_and_status(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "host-redirects", &["same-namespace"]).await?;
    let cases = [
        (
            Req::get("/moved-host/page"),
            Want::redirect(302, "http://elsewhere.test/moved-host/page"),
        ),
        (
            Req::get("/moved-permanently"),
            Want::redirect(301, "http://elsewhere.test/moved-permanently"),
        ),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

pub async fn route_generation(env: Arc<Env>) -> Outcome {
    wait_status(&env, "route accepted at generation 1", |r| {
        crate::status::routes_accepted(r, "same-namespace", &[(INFRA, "bumped-route")])?;
        observed(&r.route(INFRA, "bumped-route")?["parents"][0], 1)
    })
    .await?;
    env.apply(
        "scenario.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
         metadata: {name: bumped-route, namespace: gateway-conformance-infra, generation: 2}\n\
         spec:\n  parentRefs: [{name: same-namespace}]\n\
         \x20 rules: [{backendRefs: [{name: infra-backend-v2, port: 8080}]}]\n",
    )?;
    wait_status(&env, "route observes generation 2", |r| {
        crate::status::routes_accepted(r, "same-namespace", &[(INFRA, "bumped-route")])?;
        observed(&r.route(INFRA, "bumped-route")?["parents"][0], 2)
    })
    .await?;
    check(
        env.gw("same-namespace"),
        &Req::get("/"),
        &Want::ok("infra-backend-v2"),
    )
    .await
}

pub async fn service_types(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "service-kinds", &["same-namespace"]).await?;
    let cases = [
        (Req::get("/manual"), Want::ok("infra-backend-v1")),
        (Req::get("/headless"), Want::ok("infra-backend-v1")),
        (Req::get("/headless-manual"), Want::ok("infra-backend-v1")),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}

pub async fn multiple_gateways(env: Arc<Env>) -> Outcome {
    accepted(
        &env,
        INFRA,
        "on-both",
        &["same-namespace", "all-namespaces"],
    )
    .await?;
    accepted(&env, INFRA, "only-same", &["same-namespace"]).await?;
    accepted(&env, INFRA, "only-all", &["all-namespaces"]).await?;
    let (same, all) = (env.gw("same-namespace"), env.gw("all-namespaces"));
    check(same, &Req::get("/both"), &Want::ok("infra-backend-v1")).await?;
    check(all, &Req::get("/both"), &Want::ok("infra-backend-v1")).await?;
    check(same, &Req::get("/"), &Want::ok("infra-backend-v2")).await?;
    check(all, &Req::get("/"), &Want::ok("infra-backend-v3")).await
}

pub async fn namespace_attachment(env: Arc<Env>) -> Outcome {
    wait_status(
        &env,
        "attachment follows allowedRoutes.namespaces.from",
        |r| {
            crate::status::routes_accepted(r, "all-namespaces", &[(APP, "app-on-all")])?;
            route_condition(
                r,
                APP,
                "app-on-same",
                INFRA,
                "same-namespace",
                Cond("Accepted", "False", "NotAllowedByListeners"),
            )?;
            crate::status::routes_accepted(r, "same-namespace", &[(INFRA, "infra-on-same")])
        },
    )
    .await?;
    check(
        env.gw("all-namespaces"),
        &Req::get("/"),
        &Want::ok("app-backend-v1"),
    )
    .await?;
    check(
        env.gw("same-namespace"),
        &Req::get("/"),
        &Want::ok("infra-backend-v2"),
    )
    .await
}

pub async fn label_selector(env: Arc<Env>) -> Outcome {
    wait_status(&env, "attachment follows the namespace selector", |r| {
        crate::status::routes_accepted(r, "backend-namespaces", &[(APP, "app-selected")])?;
        route_condition(
            r,
            INFRA,
            "infra-not-selected",
            INFRA,
            "backend-namespaces",
            Cond("Accepted", "False", "NotAllowedByListeners"),
        )
    })
    .await?;
    let gw = env.gw("backend-namespaces");
    check(gw, &Req::get("/"), &Want::ok("app-backend-v2")).await?;
    check(gw, &Req::get("/infra"), &Want::ok("app-backend-v2")).await
}

pub async fn path_match_order(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "path-order", &["same-namespace"]).await?;
    let cases = [
        (Req::get("/docs"), Want::ok("infra-backend-v1")),
        (Req::get("/docs/api"), Want::ok("infra-backend-v2")),
        (Req::get("/docs/api/v1"), Want::ok("infra-backend-v3")),
        (Req::get("/docs/api/v2"), Want::ok("infra-backend-v3")),
        (Req::get("/docs/"), Want::ok("infra-backend-v3")),
        (
            Req::get("/docs/guide/start/here"),
            Want::ok("infra-backend-v2"),
        ),
        (Req::get("/docs/guide/start"), Want::ok("infra-backend-v2")),
        (Req::get("/docs/guide/other"), Want::ok("infra-backend-v1")),
        (Req::get("/docs/guide/"), Want::ok("infra-backend-v1")),
        (Req::get("/docs/other"), Want::ok("infra-backend-v3")),
        (Req::get("/doc"), Want::status(404)),
    ];
    check_all(env.gw("same-namespace"), &cases).await
}
