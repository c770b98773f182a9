//! The ingress-nginx annotations (`nginx.ingress.kubernetes.io/*`) of one Ingress, parsed into
//! what its lowered rules apply ([`Annotations`]) and what was not understood or not valid
//! (`problems`, which become the Ingress's `Unsupported` condition). Each supported annotation
//! is one match arm of [`Annotations::parse`]; the lowering reads the typed fields. The value
//! syntaxes they share are `values`; CORS is `cors`, the TrafficPolicy settings `policy`. Pure.

use std::time::Duration;

use http::HeaderValue;
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};

use ipnet::IpNet;

use crate::kinds::crd::traffic_policy::{BodyLimitsPolicy, IpAccessPolicy, TrafficPolicySpec};
use crate::kinds::ingress::NGINX_PREFIX;
use crate::table::IpAccess;
use crate::translate::ingress::regex::{RegexMode, REGEX_HOSTS, REGEX_MODE};
use crate::translate::ingress::server_snippet::{self, SERVER_SNIPPETS};
use crate::translate::ingress::{alias, fallback, headers, passthrough, upstream};

mod cors;
mod policy;
mod values;

pub use cors::CorsSettings;
pub use policy::PolicyAnnotations;
pub use values::has_captures;
pub(super) use values::hostname;
use values::{
    absolute_path, boolean, cidrs, list, redirect_code, redirect_url, rewrite_target, seconds, size,
};

/// ingress-nginx's `proxy-connect-timeout` default.
const CONNECT_DEFAULT: u64 = 5;
/// ingress-nginx's `proxy-read-timeout` default.
const READ_DEFAULT: u64 = 60;

/// A redirect every path of the Ingress answers with (`permanent-redirect`, `temporal-redirect`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectTo {
    pub scheme: Option<String>,
    pub hostname: Option<String>,
    pub port: Option<u16>,
    pub path: String,
    pub code: u16,
}

/// The ingress-nginx annotations of one Ingress that its lowered rules apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Annotations {
    /// `temporal-redirect` (it wins, as in ingress-nginx) or `permanent-redirect`.
    pub redirect: Option<RedirectTo>,
    /// `app-root`: `/` of each host answers 302 to this path.
    pub app_root: Option<String>,
    /// `rewrite-target`: on a regex path the whole path becomes it, `$1`..`$9` replaced by
    /// the path's captures; on a plain path the matched prefix is replaced by it.
    pub rewrite_target: Option<String>,
    /// `proxy-connect-timeout` + `proxy-read-timeout`, as the rule's `backendRequest` timeout.
    pub backend_timeout: Option<Duration>,
    /// `proxy-send-timeout`: the longest the backend may leave the request unread (`0`: no
    /// limit), the rules' `backend_send_idle`.
    pub send_timeout: Option<Duration>,
    /// `upstream-vhost`: the Host sent upstream.
    pub upstream_vhost: Option<String>,
    /// `x-forwarded-prefix`: the `X-Forwarded-Prefix` header sent upstream.
    pub forwarded_prefix: Option<String>,
    pub cors: Option<CorsSettings>,
    /// `whitelist-source-range` / `allowlist-source-range` and `denylist-source-range`.
    pub ip_access: Option<IpAccess>,
    /// `proxy-body-size` in bytes (`0`, no limit, leaves it unset).
    pub max_body: Option<u64>,
    /// `ssl-redirect` (`None`: unset, which ingress-nginx takes as true).
    pub ssl_redirect: Option<bool>,
    /// `force-ssl-redirect`: the HTTPS redirect also for hosts without TLS.
    pub force_ssl_redirect: bool,
    /// The TrafficPolicy settings of the authentication, rate-limit, balancing and upstream
    /// annotations (`annotations::policy`).
    pub policy: PolicyAnnotations,
    /// `backend-protocol` and backend TLS (`proxy-ssl-*`), applied to the Service ports the
    /// Ingress reaches ([`upstream::apply`]).
    pub upstream: upstream::Upstream,
    /// `custom-headers` and the header directives of the snippets, as header modifiers.
    pub headers: headers::HeaderEdits,
    /// Per host, the header edits of its server-level `server-snippet`
    /// ([`server_snippet::read`]); `None` when `server-snippet` is in `headers`.
    pub server_headers: Option<std::collections::BTreeMap<String, headers::HeaderEdits>>,
    /// What was not understood, not supported or not valid, one sentence each.
    pub problems: Vec<String>,
    /// `use-regex`.
    pub use_regex: bool,
    /// `enable-access-log: "false"`: the Ingress's requests write no access log line.
    pub access_log_off: bool,
    /// The hosts whose paths are regex, and how they match (set by `prepare`, see
    /// [`crate::translate::ingress::regex`]).
    pub regex_hosts: Vec<String>,
    pub regex_mode: RegexMode,
}

impl Annotations {
    /// Reads every `nginx.ingress.kubernetes.io/*` annotation of `ingress`.
    pub fn parse(ingress: &Ingress) -> Self {
        let mut out = Self::default();
        let Some(all) = ingress.metadata.annotations.as_ref() else {
            return out;
        };
        let get = |name: &str| {
            all.get(&format!("{NGINX_PREFIX}{name}"))
                .map(String::as_str)
        };
        let mut timeouts = (None, None);
        for (key, value) in all {
            let Some(name) = key.strip_prefix(NGINX_PREFIX) else {
                continue;
            };
            let result: Result<(), String> = match name {
                "permanent-redirect" => {
                    if get("temporal-redirect").is_none() {
                        redirect_code(get("permanent-redirect-code"), 301)
                            .and_then(|c| redirect_url(value, c))
                            .map(|r| out.redirect = Some(r))
                    } else {
                        Ok(())
                    }
                }
                "temporal-redirect" => redirect_code(get("temporal-redirect-code"), 302)
                    .and_then(|c| redirect_url(value, c))
                    .map(|r| out.redirect = Some(r)),
                // Read with their redirect (a bad code is reported there).
                "permanent-redirect-code" | "temporal-redirect-code" => Ok(()),
                "ssl-redirect" => boolean(value).map(|b| out.ssl_redirect = Some(b)),
                "force-ssl-redirect" => boolean(value).map(|b| out.force_ssl_redirect = b),
                "app-root" => absolute_path(value).map(|p| out.app_root = Some(p)),
                "rewrite-target" => rewrite_target(value).map(|p| out.rewrite_target = Some(p)),
                "proxy-connect-timeout" => seconds(value).map(|s| timeouts.0 = Some(s)),
                "proxy-read-timeout" => seconds(value).map(|s| timeouts.1 = Some(s)),
                "proxy-send-timeout" => seconds(value).map(|s| {
                    out.send_timeout = Some(Duration::from_secs(s)).filter(|d| !d.is_zero());
                }),
                "upstream-vhost" => hostname(value).map(|h| out.upstream_vhost = Some(h)),
                "x-forwarded-prefix" => HeaderValue::from_str(value.trim())
                    .map_err(|_| "not a valid header value".to_owned())
                    .map(|_| out.forwarded_prefix = Some(value.trim().to_owned())),
                "whitelist-source-range" | "allowlist-source-range" => cidrs(value).map(|c| {
                    out.ip_access
                        .get_or_insert_with(IpAccess::default)
                        .allow
                        .extend(c);
                }),
                "denylist-source-range" => cidrs(value).map(|c| {
                    out.ip_access
                        .get_or_insert_with(IpAccess::default)
                        .deny
                        .extend(c);
                }),
                "proxy-body-size" => size(value).map(|n| out.max_body = Some(n).filter(|n| *n > 0)),
                "enable-cors" => boolean(value).map(|on| {
                    if on {
                        out.cors = Some(CorsSettings::default_nginx());
                    }
                }),
                // Read below, once `enable-cors` is known.
                "cors-allow-origin"
                | "cors-allow-methods"
                | "cors-allow-headers"
                | "cors-allow-credentials"
                | "cors-expose-headers"
                | "cors-max-age" => Ok(()),
                "use-regex" => boolean(value).map(|b| out.use_regex = b),
                "enable-access-log" => boolean(value).map(|b| out.access_log_off = !b),
                // Applied by `alias` to the working copies of the host.
                "from-to-www-redirect" => boolean(value).map(|_| ()),
                "server-alias" => match list(value).into_iter().find(|a| !alias::valid(a)) {
                    Some(bad) => Err(format!("not a list of host names: {bad:?} is not one")),
                    None => Ok(()),
                },
                // Read by `canary` when the Ingress is folded into its main Ingress.
                "canary" => boolean(value).map(|_| ()),
                "canary-weight"
                | "canary-weight-total"
                | "canary-by-header"
                | "canary-by-header-value"
                | "canary-by-header-pattern"
                | "canary-by-cookie" => Ok(()),
                // Read below by `policy`, several together.
                name if policy::reads(name) => Ok(()),
                // Applied by `fallback` when the Ingress is prepared.
                fallback::NAME => Ok(()),
                // Read below by `fallback`, with the Service it resolved.
                fallback::ERRORS => fallback::codes(value).map(|_| ()),
                fallback::ENABLE_ERRORS => boolean(value).map(|_| ()),
                // Served as TLSRoutes of the passed-through hosts (`passthrough`).
                passthrough::NAME => boolean(value).map(|_| ()),
                // Read below by `headers`, with the ConfigMap `prepare` read.
                name if headers::NAMES.contains(&name) => Ok(()),
                // Read below by `upstream`, several together.
                name if upstream::NAMES.contains(&name) => Ok(()),
                _ => {
                    out.problems
                        .push(format!("annotation {key} is not supported yet (ignored)"));
                    continue;
                }
            };
            if let Err(why) = result {
                if name.ends_with("-source-range") {
                    // Access lists fail closed, as ingress-nginx denies such a location.
                    let access = out.ip_access.get_or_insert_with(IpAccess::default);
                    access.refuse_all = Some(format!("{key} is invalid"));
                }
                out.problems
                    .push(format!("annotation {key}: {value:?} is {why} (ignored)"));
            }
        }
        if timeouts != (None, None) {
            let total = timeouts.0.unwrap_or(CONNECT_DEFAULT) + timeouts.1.unwrap_or(READ_DEFAULT);
            out.backend_timeout = Some(Duration::from_secs(total)).filter(|d| !d.is_zero());
        }
        if let Some(cors) = out.cors.as_mut() {
            cors.read(&get, &mut out.problems);
        }
        if let Some(hosts) = all.get(REGEX_HOSTS) {
            out.regex_hosts = list(hosts);
            out.regex_mode = RegexMode::decode(all.get(REGEX_MODE).map_or("", String::as_str));
        }
        let regex = out.use_regex || !out.regex_hosts.is_empty();
        if !regex && out.rewrite_target.as_deref().is_some_and(has_captures) {
            out.problems.push(format!(
                "annotation {NGINX_PREFIX}rewrite-target: captures need regex paths \
                 (use-regex: \"true\", or the rewrite-enables-regex quirk) (ignored)"
            ));
            out.rewrite_target = None;
        }
        let namespace = crate::snapshot::namespace_of(&ingress.metadata);
        out.policy = PolicyAnnotations::read(&get, namespace, &mut out.problems);
        out.policy.spec.error_pages = fallback::error_pages(all);
        out.upstream = upstream::Upstream::read(&get, namespace, &mut out.problems);
        let custom = all.get(headers::CUSTOM_HEADERS).map(String::as_str);
        out.server_headers = server_snippet::read(all.get(SERVER_SNIPPETS).map(String::as_str));
        let server_level = out.server_headers.is_some();
        out.headers = headers::HeaderEdits::read(&get, custom, server_level, &mut out.problems);
        out
    }

    /// These annotations on the paths of `host`, when its server-level snippet changes them:
    /// the snippet's header edits, then the Ingress's own (which win for a name in both).
    pub fn for_host(&self, host: &str) -> Option<Annotations> {
        let hosts = self.server_headers.as_ref()?;
        let mut headers = hosts.get(host).cloned().unwrap_or_default();
        headers.extend(self.headers.clone());
        Some(Annotations {
            headers,
            ..self.clone()
        })
    }

    /// How the paths of `host` match when they are regex ([`RegexMode`]), `None` when they
    /// are plain paths.
    pub fn regex_for(&self, host: &str) -> Option<RegexMode> {
        self.regex_hosts
            .iter()
            .any(|h| h == host)
            .then_some(self.regex_mode)
    }

    /// Whether plain HTTP requests for `host` are redirected to https: `force-ssl-redirect`,
    /// or `ssl-redirect` (true unless set false) when the Ingress has TLS for the host.
    pub fn https_redirect(&self, host_has_tls: bool) -> bool {
        self.force_ssl_redirect || (host_has_tls && self.ssl_redirect != Some(false))
    }

    /// True when a path of the Ingress answers a redirect rather than reaching its backend.
    pub fn redirects(&self) -> bool {
        self.redirect.is_some()
    }

    /// The HTTPRoute filters of one lowered rule; `exact` when its path match is `Exact`,
    /// `None` when the rule has no path (the default backend, left as it is).
    pub fn filters(&self, exact: Option<bool>) -> Vec<Value> {
        let mut out = Vec::new();
        if let Some(r) = &self.redirect {
            let mut redirect = json!({"statusCode": r.code,
                "path": {"type": "ReplaceFullPath", "replaceFullPath": r.path}});
            if let Some(s) = &r.scheme {
                redirect["scheme"] = json!(s);
            }
            if let Some(h) = &r.hostname {
                redirect["hostname"] = json!(h);
            }
            if let Some(p) = r.port {
                redirect["port"] = json!(p);
            }
            out.push(json!({"type": "RequestRedirect", "requestRedirect": redirect}));
            return out;
        }
        let mut rewrite = serde_json::Map::new();
        if let (Some(target), Some(exact)) = (&self.rewrite_target, exact) {
            rewrite.insert(
                "path".into(),
                if exact {
                    json!({"type": "ReplaceFullPath", "replaceFullPath": target})
                } else {
                    json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": target})
                },
            );
        }
        if let Some(h) = &self.upstream_vhost {
            rewrite.insert("hostname".into(), json!(h));
        }
        if !rewrite.is_empty() {
            out.push(json!({"type": "URLRewrite", "urlRewrite": rewrite}));
        }
        // One modifier per direction: a snippet's edit of X-Forwarded-Prefix wins.
        let mut edits = self.headers.clone();
        if let Some(p) = &self.forwarded_prefix {
            edits.set_request_default("X-Forwarded-Prefix", p);
        }
        out.extend(edits.filters());
        if let Some(c) = &self.cors {
            out.push(json!({"type": "CORS", "cors": {
                "allowOrigins": c.origins, "allowMethods": c.methods, "allowHeaders": c.headers,
                "exposeHeaders": c.expose, "allowCredentials": c.credentials, "maxAge": c.max_age}}));
        }
        out
    }

    /// Everything the annotations ask of a TrafficPolicy, as the spec of one (`targetRefs`
    /// left empty for the caller: serving targets the lowered route, `convert` the converted
    /// HTTPRoute), so that both go through the one compilation a TrafficPolicy object does;
    /// `None` when they ask nothing. Invalid access lists deny every address (fail closed).
    pub fn traffic_policy(&self) -> Option<TrafficPolicySpec> {
        let mut spec = self.policy.spec.clone();
        if let Some(access) = &self.ip_access {
            let text = |list: &[IpNet]| list.iter().map(ToString::to_string).collect();
            if access.refuse_all.is_some() {
                spec.ip_access = Some(IpAccessPolicy {
                    allow: Vec::new(),
                    deny: vec!["0.0.0.0/0".to_owned(), "::/0".to_owned()],
                });
            } else if !(access.allow.is_empty() && access.deny.is_empty()) {
                spec.ip_access = Some(IpAccessPolicy {
                    allow: text(&access.allow),
                    deny: text(&access.deny),
                });
            }
        }
        if let Some(bytes) = self.max_body {
            spec.body_limits = Some(BodyLimitsPolicy {
                max_request_bytes: Some(bytes),
                max_response_bytes: None,
            });
        }
        Some(spec).filter(|s| *s != TrafficPolicySpec::default())
    }

    /// The rule's `timeouts`, when a timeout annotation is set.
    pub fn timeouts(&self) -> Option<Value> {
        self.backend_timeout
            .map(|d| json!({"backendRequest": format!("{}s", d.as_secs())}))
    }
}

#[cfg(test)]
#[path = "annotations_tests.rs"]
mod tests;
