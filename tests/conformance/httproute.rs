//! HTTPRoute core scenarios: attachment, matching, precedence, references, backends, weights,
//! request header modification and host redirects.

use std::sync::Arc;

use crate::expect::{
    accepted, check, check_all, cond, distribution, observed, wait_status, Outcome, Req, Want,
};
use crate::harness::Env;
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
            cond(
                r.parent(INFRA, route, "host-intersect", None)?,
                "Accepted",
                "True",
                "Accepted",
            )?;
        }
        cond(
            r.parent(INFRA, "no-intersection", "host-intersect", None)?,
            "Accepted",
            "False",
            "NoMatchingListenerHostname",
        )?;
        cond(
            r.parent(INFRA, "any-listener", "host-intersect-any", None)?,
            "Accepted",
            "True",
            "",
        )
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
        crate::expect::gateway_ready(r, INFRA, "listener-hosts")?;
        cond(
            r.parent(INFRA, "to-apex", "listener-hosts", Some("apex"))?,
            "Accepted",
            "True",
            "",
        )?;
        cond(
            r.parent(INFRA, "to-www", "listener-hosts", Some("www"))?,
            "Accepted",
            "True",
            "",
        )?;
        cond(
            r.parent(INFRA, "to-wildcards", "listener-hosts", Some("any-blog"))?,
            "Accepted",
            "True",
            "",
        )
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

pub async fn partially_invalid_grant(env: Arc<Env>) -> Outcome {
    wait_status(&env, "route accepted with a refused reference", |r| {
        let p = r.parent(INFRA, "half-granted", "same-namespace", None)?;
        cond(p, "Accepted", "True", "Accepted")?;
        cond(p, "ResolvedRefs", "False", "RefNotPermitted")
    })
    .await?;
    let gw = env.gw("same-namespace");
    check(gw, &Req::get("/"), &Want::ok("app-backend-v1")).await?;
    check(gw, &Req::get("/v2"), &Want::status(500)).await
}

pub async fn reference_grant(env: Arc<Env>) -> Outcome {
    accepted(&env, INFRA, "granted", &["same-namespace"]).await?;
    check(
        env.gw("same-namespace"),
        &Req::get("/"),
        &Want::ok("web-backend"),
    )
    .await
}

/// A route whose only backend is not permitted (or not usable) answers 500.
async fn refused(env: &Env, route: &str, reason: &str) -> Outcome {
    wait_status(env, &format!("{route}: ResolvedRefs {reason}"), |r| {
        let p = r.parent(INFRA, route, "same-namespace", None)?;
        cond(p, "Accepted", "True", "Accepted")?;
        cond(p, "ResolvedRefs", "False", reason)
    })
    .await
}

pub async fn invalid_reference_grant(env: Arc<Env>) -> Outcome {
    refused(&env, "not-granted", "RefNotPermitted").await?;
    check(env.gw("same-namespace"), &Req::get("/"), &Want::status(500)).await
}

pub async fn invalid_cross_namespace_backend(env: Arc<Env>) -> Outcome {
    refused(&env, "foreign-backend", "RefNotPermitted").await?;
    check(env.gw("same-namespace"), &Req::get("/"), &Want::status(500)).await
}

pub async fn invalid_cross_namespace_parent(env: Arc<Env>) -> Outcome {
    wait_status(&env, "route refused by the listener", |r| {
        let p = r.parent(WEB, "foreign-parent", "same-namespace", None)?;
        cond(p, "Accepted", "False", "NotAllowedByListeners")?;
        let l = r.listener(INFRA, "same-namespace", "http")?;
        if l["attachedRoutes"] != 0 {
            return Err(format!("attachedRoutes {}, want 0", l["attachedRoutes"]));
        }
        Ok(())
    })
    .await?;
    check(env.gw("same-namespace"), &Req::get("/"), &Want::status(404)).await
}

pub async fn disallowed_kind(env: Arc<Env>) -> Outcome {
    wait_status(
        &env,
        "HTTPRoute not allowed by a TLSRoute-only listener",
        |r| {
            let p = r.parent(INFRA, "wrong-kind", "tls-routes-only", None)?;
            cond(p, "Accepted", "False", "NotAllowedByListeners")
        },
    )
    .await
}

/// A parentRef that names no listener of its Gateway: the route is not accepted there and
/// serves nothing.
async fn invalid_parent_ref(env: &Env, route: &str) -> Outcome {
    wait_status(
        env,
        &format!("{route}: parentRef matches no listener"),
        |r| {
            let p = r.parent(INFRA, route, "parent-checks", None)?;
            cond(p, "Accepted", "False", "NoMatchingParent")?;
            let l = r.listener(INFRA, "parent-checks", "web")?;
            if l["attachedRoutes"] != 0 {
                return Err(format!("attachedRoutes {}, want 0", l["attachedRoutes"]));
            }
            Ok(())
        },
    )
    .await?;
    check(env.gw("parent-checks"), &Req::get("/"), &Want::status(404)).await
}

pub async fn parent_wrong_port(env: Arc<Env>) -> Outcome {
    invalid_parent_ref(&env, "wrong-port").await
}

pub async fn parent_wrong_section(env: Arc<Env>) -> Outcome {
    invalid_parent_ref(&env, "wrong-section").await
}

pub async fn parent_section_other_port(env: Arc<Env>) -> Outcome {
    invalid_parent_ref(&env, "section-other-port").await
}

pub async fn invalid_backends(env: Arc<Env>) -> Outcome {
    wait_status(&env, "unresolvable backends reported", |r| {
        let p = r.parent(INFRA, "missing-service", "same-namespace", None)?;
        cond(p, "Accepted", "True", "")?;
        cond(p, "ResolvedRefs", "False", "BackendNotFound")?;
        let p = r.parent(INFRA, "unknown-kind", "same-namespace", None)?;
        cond(p, "Accepted", "True", "")?;
        cond(p, "ResolvedRefs", "False", "InvalidKind")
    })
    .await?;
    let gw = env.gw("same-namespace");
    check(gw, &Req::get("/missing"), &Want::status(500)).await?;
    check(gw, &Req::get("/unknown"), &Want::status(500)).await
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
        let p = r.parent(INFRA, "bumped-route", "same-namespace", None)?;
        cond(p, "Accepted", "True", "")?;
        observed(p, 1)
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
        let p = r.parent(INFRA, "bumped-route", "same-namespace", None)?;
        cond(p, "Accepted", "True", "")?;
        observed(p, 2)
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
            cond(
                r.parent(APP, "app-on-all", "all-namespaces", None)?,
                "Accepted",
                "True",
                "",
            )?;
            cond(
                r.parent(APP, "app-on-same", "same-namespace", None)?,
                "Accepted",
                "False",
                "NotAllowedByListeners",
            )?;
            cond(
                r.parent(INFRA, "infra-on-same", "same-namespace", None)?,
                "Accepted",
                "True",
                "",
            )
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
        cond(
            r.parent(APP, "app-selected", "backend-namespaces", None)?,
            "Accepted",
            "True",
            "",
        )?;
        cond(
            r.parent(INFRA, "infra-not-selected", "backend-namespaces", None)?,
            "Accepted",
            "False",
            "NotAllowedByListeners",
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
