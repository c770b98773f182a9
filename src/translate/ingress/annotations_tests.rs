//! Parsing of each supported ingress-nginx annotation (valid and invalid values) and the
//! HTTPRoute filters, timeouts and policy settings they lower to.

use std::time::Duration;

use serde_json::json;

use super::*;

fn parse(annotations: &[(&str, &str)]) -> Annotations {
    let map: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (format!("{NGINX_PREFIX}{k}"), json!(v)))
        .collect();
    let ingress: Ingress =
        serde_json::from_value(json!({"metadata": {"name": "i", "annotations": map}}))
            .expect("Ingress");
    Annotations::parse(&ingress)
}

fn problem(a: &Annotations, name: &str) -> String {
    a.problems
        .iter()
        .find(|p| p.contains(&format!("{NGINX_PREFIX}{name}")))
        .cloned()
        .unwrap_or_default()
}

#[test]
fn redirects_take_their_codes_and_temporal_wins() {
    let a = parse(&[("permanent-redirect", "https://www.example.com:8443/new")]);
    assert_eq!(
        a.redirect,
        Some(RedirectTo {
            scheme: Some("https".into()),
            hostname: Some("www.example.com".into()),
            port: Some(8443),
            path: "/new".into(),
            code: 301,
        })
    );
    assert!(a.problems.is_empty(), "{:?}", a.problems);
    let a = parse(&[
        ("permanent-redirect", "http://a.example"),
        ("permanent-redirect-code", "308"),
    ]);
    let r = a.redirect.expect("redirect");
    assert_eq!((r.code, r.path.as_str()), (308, "/"));
    let a = parse(&[
        ("permanent-redirect", "http://a.example"),
        ("temporal-redirect", "http://b.example/t"),
    ]);
    let r = a.redirect.expect("redirect");
    assert_eq!((r.code, r.hostname.as_deref()), (302, Some("b.example")));
    let a = parse(&[
        ("temporal-redirect", "http://b.example"),
        ("temporal-redirect-code", "307"),
    ]);
    assert_eq!(a.redirect.map(|r| r.code), Some(307));
}

#[test]
fn bad_redirects_are_reported_and_not_applied() {
    let a = parse(&[("permanent-redirect", "/relative")]);
    assert_eq!(a.redirect, None);
    assert!(problem(&a, "permanent-redirect").contains("not an absolute http or https URL"));
    let a = parse(&[
        ("permanent-redirect", "https://x.example"),
        ("permanent-redirect-code", "200"),
    ]);
    assert_eq!(a.redirect, None);
    assert!(problem(&a, "permanent-redirect").contains("not one of 301"));
    let a = parse(&[("permanent-redirect", "http://[::1]/x")]);
    assert!(problem(&a, "permanent-redirect").contains("not a URL with a host name"));
    let a = parse(&[("temporal-redirect", "ftp://x.example")]);
    assert_eq!(a.redirect, None);
    assert_eq!(a.problems.len(), 1);
}

#[test]
fn app_root_and_rewrite_target() {
    let a = parse(&[("app-root", "/app"), ("rewrite-target", "/v2")]);
    assert_eq!(a.app_root.as_deref(), Some("/app"));
    assert_eq!(a.rewrite_target.as_deref(), Some("/v2"));
    assert!(a.problems.is_empty());
    let bad = parse(&[("app-root", "app")]);
    assert_eq!(bad.app_root, None);
    assert!(problem(&bad, "app-root").contains("not an absolute path"));
    // Captures without regex paths (no host marked by `prepare`) are reported, not applied.
    let a = parse(&[("rewrite-target", "/$1")]);
    assert_eq!(a.rewrite_target, None);
    assert!(problem(&a, "rewrite-target").contains("captures need regex paths"));
    let a = parse(&[("rewrite-target", "/x/$2"), ("use-regex", "true")]);
    assert!(a.use_regex && a.problems.is_empty(), "{:?}", a.problems);
    assert_eq!(a.rewrite_target.as_deref(), Some("/x/$2"));
    for bad in ["/$host$1", "/a$", "x/$1"] {
        let a = parse(&[("rewrite-target", bad), ("use-regex", "true")]);
        assert_eq!(a.rewrite_target, None, "{bad}");
        assert!(!problem(&a, "rewrite-target").is_empty(), "{bad}");
    }
    assert!(!problem(&parse(&[("use-regex", "yes")]), "use-regex").is_empty());
}

#[test]
fn timeouts_sum_connect_and_read_with_nginx_defaults() {
    let a = parse(&[("proxy-read-timeout", "10")]);
    assert_eq!(a.backend_timeout, Some(Duration::from_secs(15)));
    assert_eq!(a.timeouts(), Some(json!({"backendRequest": "15s"})));
    let a = parse(&[("proxy-connect-timeout", "1"), ("proxy-read-timeout", "2")]);
    assert_eq!(a.backend_timeout, Some(Duration::from_secs(3)));
    let a = parse(&[("proxy-connect-timeout", "2s")]);
    assert_eq!(a.backend_timeout, None);
    assert!(problem(&a, "proxy-connect-timeout").contains("not a whole number of seconds"));
    let a = parse(&[("proxy-send-timeout", "30")]);
    assert!(a.problems.is_empty(), "{:?}", a.problems);
    assert_eq!(a.send_timeout, Some(Duration::from_secs(30)));
    assert_eq!(a.timeouts(), None, "not a Gateway API timeout");
    assert_eq!(parse(&[("proxy-send-timeout", "0")]).send_timeout, None);
    let a = parse(&[("proxy-send-timeout", "x")]);
    assert!(problem(&a, "proxy-send-timeout").contains("not a whole number"));
    assert_eq!(parse(&[]).timeouts(), None);
}

#[test]
fn upstream_vhost_and_forwarded_prefix() {
    let a = parse(&[
        ("upstream-vhost", "Internal.Example"),
        ("x-forwarded-prefix", "/shop"),
    ]);
    assert_eq!(a.upstream_vhost.as_deref(), Some("internal.example"));
    assert_eq!(a.forwarded_prefix.as_deref(), Some("/shop"));
    let f = a.filters(Some(false));
    assert_eq!(
        f[0],
        json!({"type": "URLRewrite", "urlRewrite": {"hostname": "internal.example"}})
    );
    assert_eq!(
        f[1]["requestHeaderModifier"]["set"][0],
        json!({"name": "X-Forwarded-Prefix", "value": "/shop"})
    );
    let bad = parse(&[
        ("upstream-vhost", "a.example:8080"),
        ("x-forwarded-prefix", "a\u{1}b"),
    ]);
    assert_eq!((bad.upstream_vhost, bad.forwarded_prefix), (None, None));
    assert_eq!(bad.problems.len(), 2, "{:?}", bad.problems);
}

#[test]
fn cors_takes_nginx_defaults_and_overrides() {
    let a = parse(&[("enable-cors", "true")]);
    let c = a.cors.clone().expect("cors");
    assert_eq!(c.origins, ["*"]);
    assert_eq!(
        c.methods,
        ["GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"]
    );
    assert!(c.headers.contains(&"Authorization".to_owned()));
    assert!(c.credentials);
    assert_eq!(c.max_age, 1_728_000);
    let a = parse(&[
        ("enable-cors", "true"),
        (
            "cors-allow-origin",
            "https://a.example, https://*.b.example",
        ),
        ("cors-allow-methods", "get, post"),
        ("cors-allow-headers", "X-One"),
        ("cors-expose-headers", "X-Two, X-Three"),
        ("cors-allow-credentials", "false"),
        ("cors-max-age", "60"),
    ]);
    assert!(a.problems.is_empty(), "{:?}", a.problems);
    let f = a.filters(Some(false));
    assert_eq!(
        f[0],
        json!({"type": "CORS", "cors": {
            "allowOrigins": ["https://a.example", "https://*.b.example"],
            "allowMethods": ["GET", "POST"], "allowHeaders": ["X-One"],
            "exposeHeaders": ["X-Two", "X-Three"], "allowCredentials": false, "maxAge": 60}})
    );
    let bad = parse(&[
        ("enable-cors", "true"),
        ("cors-allow-origin", "not an origin"),
        ("cors-max-age", "-1"),
        ("cors-allow-credentials", "yes"),
        ("cors-allow-headers", "bad header"),
    ]);
    assert_eq!(
        bad.cors.as_ref().map(|c| c.origins.clone()),
        Some(vec!["*".to_owned()])
    );
    assert_eq!(bad.problems.len(), 4, "{:?}", bad.problems);
    // Without enable-cors the settings do nothing, as in ingress-nginx.
    let off = parse(&[
        ("enable-cors", "false"),
        ("cors-allow-origin", "https://a.example"),
    ]);
    assert_eq!((off.cors, off.problems.len()), (None, 0));
    assert!(!problem(&parse(&[("enable-cors", "on")]), "enable-cors").is_empty());
}

#[test]
fn unknown_annotations_stay_unsupported() {
    let a = parse(&[("mirror-target", "true"), ("enable-opentelemetry", "true")]);
    assert_eq!(a.problems.len(), 2);
    assert!(problem(&a, "mirror-target").contains("is not supported yet (ignored)"));
}

#[test]
fn filters_redirect_alone_and_rewrite_by_path_kind() {
    let a = parse(&[
        ("permanent-redirect", "https://x.example/p"),
        ("rewrite-target", "/r"),
        ("enable-cors", "true"),
    ]);
    let f = a.filters(Some(false));
    assert_eq!(f.len(), 1);
    assert_eq!(
        f[0]["requestRedirect"],
        json!({"statusCode": 301, "scheme": "https", "hostname": "x.example",
               "path": {"type": "ReplaceFullPath", "replaceFullPath": "/p"}})
    );
    let a = parse(&[("rewrite-target", "/r")]);
    assert_eq!(
        a.filters(Some(false))[0]["urlRewrite"]["path"],
        json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": "/r"})
    );
    assert_eq!(
        a.filters(Some(true))[0]["urlRewrite"]["path"],
        json!({"type": "ReplaceFullPath", "replaceFullPath": "/r"})
    );
    // The default backend (no path) is not rewritten.
    assert!(a.filters(None).is_empty());
}

#[test]
fn source_ranges_become_ip_access_and_fail_closed_when_invalid() {
    let a = parse(&[
        ("whitelist-source-range", "10.0.0.0/8, 192.168.1.1"),
        ("allowlist-source-range", "2001:db8::/32"),
        ("denylist-source-range", "10.1.0.0/16"),
    ]);
    assert!(a.problems.is_empty(), "{:?}", a.problems);
    let access = a.ip_access.clone().expect("ip access");
    let shown: Vec<String> = access.allow.iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 3);
    assert!(shown.contains(&"192.168.1.1/32".to_owned()), "{shown:?}");
    assert_eq!(access.deny[0].to_string(), "10.1.0.0/16");
    assert_eq!(access.refuse_all, None);
    let policy = a.traffic_policy().expect("policy");
    let access_spec = policy.ip_access.expect("ipAccess");
    assert_eq!(access_spec.allow.len(), 3);
    assert!(access_spec.allow.contains(&"192.168.1.1/32".to_owned()));
    assert_eq!(access_spec.deny, ["10.1.0.0/16"]);
    let bad = parse(&[("allowlist-source-range", "10.0.0.0/33")]);
    assert!(problem(&bad, "allowlist-source-range").contains("not a list of CIDRs"));
    let refused = bad.ip_access.clone().expect("refusing access");
    assert!(refused.refuse_all.is_some());
    let spec = bad
        .traffic_policy()
        .and_then(|p| p.ip_access)
        .expect("ipAccess");
    assert_eq!(spec.deny, ["0.0.0.0/0", "::/0"], "every address denied");
    assert!(spec.allow.is_empty());
}

#[test]
fn body_size_in_nginx_units() {
    for (value, want) in [
        ("8m", Some(8 << 20)),
        ("1g", Some(1 << 30)),
        ("512K", Some(512 << 10)),
        ("100", Some(100)),
        ("0", None),
    ] {
        let a = parse(&[("proxy-body-size", value)]);
        assert!(a.problems.is_empty(), "{value}: {:?}", a.problems);
        assert_eq!(a.max_body, want, "{value}");
        let limits = a.traffic_policy().and_then(|p| p.body_limits);
        assert_eq!(limits.and_then(|b| b.max_request_bytes), want);
    }
    for value in ["8mb", "m", "-1", "1t"] {
        let a = parse(&[("proxy-body-size", value)]);
        assert_eq!(a.max_body, None);
        assert!(
            problem(&a, "proxy-body-size").contains("not an nginx size"),
            "{value}"
        );
    }
    assert_eq!(parse(&[]).traffic_policy(), None);
}

#[test]
fn ssl_redirect_defaults_to_hosts_with_tls_and_force_covers_all() {
    let unset = parse(&[]);
    assert!(unset.https_redirect(true));
    assert!(!unset.https_redirect(false));
    let off = parse(&[("ssl-redirect", "false")]);
    assert!(!off.https_redirect(true));
    let forced = parse(&[("force-ssl-redirect", "true"), ("ssl-redirect", "false")]);
    assert!(forced.https_redirect(false));
    assert!(forced.problems.is_empty());
    let bad = parse(&[("ssl-redirect", "no")]);
    assert!(
        bad.https_redirect(true),
        "an invalid value keeps the default"
    );
    assert!(problem(&bad, "ssl-redirect").contains("not true or false"));
}

#[test]
fn passthrough_and_error_pages_are_read() {
    let a = parse(&[
        ("default-backend", "fallback"),
        ("ssl-passthrough", "true"),
        ("custom-http-errors", "404,503"),
        ("enable-custom-http-errors", "true"),
    ]);
    for name in [
        "default-backend",
        "ssl-passthrough",
        "custom-http-errors",
        "enable-custom-http-errors",
    ] {
        assert!(problem(&a, name).is_empty(), "{name}: {:?}", a.problems);
    }
    for value in ["404,abc", "302", ""] {
        let bad = parse(&[("custom-http-errors", value)]);
        assert!(
            problem(&bad, "custom-http-errors").contains("(ignored)"),
            "{value}: {:?}",
            bad.problems
        );
    }
    let bad = parse(&[("ssl-passthrough", "yes")]);
    assert!(problem(&bad, "ssl-passthrough").contains("not true or false"));
}
