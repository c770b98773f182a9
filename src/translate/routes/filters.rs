//! HTTPRoute filters compiled to `table` types: header modifiers, RequestRedirect, URLRewrite,
//! CORS, and RequestMirror targets and ExternalAuth authorizers (left for `rules` to resolve). Invalid or unsupported filters
//! are errors that make their rule invalid. Pure.

use crate::kinds::httproute::{
    HttpRouteRulesBackendRefsFilters, HttpRouteRulesFilters as Filter, HttpRouteRulesFiltersCors,
    HttpRouteRulesFiltersRequestMirror,
    HttpRouteRulesFiltersRequestRedirectPathType as RedirectPathType,
    HttpRouteRulesFiltersRequestRedirectScheme as SpecScheme, HttpRouteRulesFiltersType as Type,
    HttpRouteRulesFiltersUrlRewritePathType as RewritePathType,
};
use http::{HeaderName, HeaderValue};

use crate::request::{validate_config_path, validate_hostname};
use crate::table::{
    Cors, CorsList, Fraction, HeaderModifier, OriginPattern, PathModifier, Redirect, RuleFilters,
    Scheme, UrlRewrite,
};
use crate::translate::routes::ext_auth::{compile_filter, AuthSpec};

/// Why a rule's filters cannot be served as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("filter {0} is not supported")]
    Unsupported(&'static str),
    #[error("filter {0} is specified more than once")]
    Repeated(&'static str),
    #[error("filter {0} lacks its configuration")]
    Missing(&'static str),
    #[error("invalid header name {0:?}")]
    HeaderName(String),
    #[error("invalid value for header {0:?}")]
    HeaderValue(String),
    #[error("RequestRedirect and URLRewrite cannot be combined")]
    RedirectWithRewrite,
    #[error("ReplacePrefixMatch requires every match of the rule to be a PathPrefix match")]
    PrefixWithoutPathPrefix,
    #[error("path modifier {0} has no value")]
    PathValue(&'static str),
    #[error("hostname {0:?} is not a valid host name")]
    Hostname(String),
    #[error("path {0:?} is not a valid absolute path (visible ASCII, valid escapes)")]
    PathChars(String),
    #[error("redirect status code {0} is not supported")]
    StatusCode(i64),
    #[error("redirect port {0} is out of range")]
    Port(i32),
    #[error("backendRef filter is not valid: {0}")]
    Backend(String),
    #[error("CORS allowOrigins entry {0:?} is not a valid origin")]
    CorsOrigin(String),
    #[error("CORS {0} entry is not a valid header value")]
    CorsList(&'static str),
    #[error("RequestMirror share is invalid: {0}")]
    MirrorShare(String),
    #[error("ExternalAuth is invalid: {0}")]
    ExternalAuth(String),
}

/// A `RequestMirror` backendRef, not yet resolved, and the share of requests it gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorSpec {
    pub group: Option<String>,
    pub kind: Option<String>,
    pub name: String,
    pub namespace: Option<String>,
    pub port: Option<i32>,
    pub fraction: Option<Fraction>,
}

/// A rule's (or backendRef's) compiled filters and the mirrors still to resolve.
#[derive(Debug, Default)]
pub struct CompiledFilters {
    pub filters: RuleFilters,
    pub mirrors: Vec<MirrorSpec>,
    /// `ExternalAuth` filters, their authorizers still to resolve.
    pub auths: Vec<AuthSpec>,
}

/// Compiles a `RequestHeaderModifier` or `ResponseHeaderModifier` spec: two generated types of
/// the same shape, so a macro rather than a function.
macro_rules! modifier_of {
    ($spec:expr) => {{
        let spec = $spec;
        header_modifier(
            spec.set
                .iter()
                .flatten()
                .map(|p| (p.name.as_str(), p.value.as_str())),
            spec.add
                .iter()
                .flatten()
                .map(|p| (p.name.as_str(), p.value.as_str())),
            spec.remove.iter().flatten(),
        )
    }};
}

fn type_name(t: &Type) -> &'static str {
    match t {
        Type::RequestHeaderModifier => "RequestHeaderModifier",
        Type::ResponseHeaderModifier => "ResponseHeaderModifier",
        Type::RequestMirror => "RequestMirror",
        Type::RequestRedirect => "RequestRedirect",
        Type::UrlRewrite => "URLRewrite",
        Type::ExtensionRef => "ExtensionRef",
        Type::Cors => "CORS",
        Type::ExternalAuth => "ExternalAuth",
    }
}

/// Compiles a rule's filters. `all_prefix` says whether every match of the rule is a
/// `PathPrefix` match (required by `ReplacePrefixMatch`).
pub fn compile_filters(
    filters: &[Filter],
    all_prefix: bool,
) -> Result<CompiledFilters, FilterError> {
    let mut out = RuleFilters::default();
    let mut mirrors = Vec::new();
    let mut auths = Vec::new();
    for f in filters {
        let name = type_name(&f.r#type);
        match f.r#type {
            Type::RequestHeaderModifier => {
                let spec = f
                    .request_header_modifier
                    .as_ref()
                    .ok_or(FilterError::Missing(name))?;
                let m = modifier_of!(spec)?;
                set_once(&mut out.request_headers, m, name)?;
            }
            Type::ResponseHeaderModifier => {
                let spec = f
                    .response_header_modifier
                    .as_ref()
                    .ok_or(FilterError::Missing(name))?;
                let m = modifier_of!(spec)?;
                set_once(&mut out.response_headers, m, name)?;
            }
            Type::RequestRedirect => {
                let spec = f
                    .request_redirect
                    .as_ref()
                    .ok_or(FilterError::Missing(name))?;
                let path = match &spec.path {
                    Some(p) => Some(path_modifier(
                        matches!(p.r#type, RedirectPathType::ReplaceFullPath),
                        p.replace_full_path.as_deref(),
                        p.replace_prefix_match.as_deref(),
                        all_prefix,
                    )?),
                    None => None,
                };
                let status = match spec.status_code.unwrap_or(302) {
                    c @ (301 | 302 | 303 | 307 | 308) => c as u16,
                    other => return Err(FilterError::StatusCode(other)),
                };
                let port = match spec.port {
                    Some(p) => Some(u16::try_from(p).map_err(|_| FilterError::Port(p))?),
                    None => None,
                };
                let redirect = Redirect {
                    scheme: spec.scheme.as_ref().map(|s| match s {
                        SpecScheme::Http => Scheme::Http,
                        SpecScheme::Https => Scheme::Https,
                    }),
                    hostname: hostname(spec.hostname.as_deref())?,
                    port,
                    path,
                    status,
                };
                set_once(&mut out.redirect, redirect, name)?;
            }
            Type::UrlRewrite => {
                let spec = f.url_rewrite.as_ref().ok_or(FilterError::Missing(name))?;
                let path = match &spec.path {
                    Some(p) => Some(path_modifier(
                        matches!(p.r#type, RewritePathType::ReplaceFullPath),
                        p.replace_full_path.as_deref(),
                        p.replace_prefix_match.as_deref(),
                        all_prefix,
                    )?),
                    None => None,
                };
                let rewrite = UrlRewrite {
                    hostname: hostname(spec.hostname.as_deref())?
                        .map(|h| host_header(&h))
                        .transpose()?,
                    path,
                };
                set_once(&mut out.rewrite, rewrite, name)?;
            }
            Type::RequestMirror => {
                let spec = f
                    .request_mirror
                    .as_ref()
                    .ok_or(FilterError::Missing(name))?;
                mirrors.push(mirror(spec)?);
            }
            Type::Cors => {
                let spec = f.cors.as_ref().ok_or(FilterError::Missing(name))?;
                set_once(&mut out.cors, cors(spec)?, name)?;
            }
            Type::ExternalAuth => {
                let spec = f.external_auth.as_ref().ok_or(FilterError::Missing(name))?;
                auths.push(compile_filter(spec).map_err(FilterError::ExternalAuth)?);
            }
            Type::ExtensionRef => return Err(FilterError::Unsupported(name)),
        }
    }
    if out.redirect.is_some() && out.rewrite.is_some() {
        return Err(FilterError::RedirectWithRewrite);
    }
    Ok(CompiledFilters {
        filters: out,
        mirrors,
        auths,
    })
}

/// `RequestMirror`: the backendRef as written and its share (`percent` or `fraction`, not both).
fn mirror(spec: &HttpRouteRulesFiltersRequestMirror) -> Result<MirrorSpec, FilterError> {
    let share = |m: String| FilterError::MirrorShare(m);
    let fraction = match (spec.percent, &spec.fraction) {
        (Some(_), Some(_)) => return Err(share("both percent and fraction are set".into())),
        (Some(p), None) => {
            let numerator = u32::try_from(p)
                .ok()
                .filter(|p| *p <= 100)
                .ok_or_else(|| share(format!("percent {p} is not within 0..100")))?;
            Some(Fraction {
                numerator,
                denominator: 100,
            })
        }
        (None, Some(f)) => {
            let denominator = f.denominator.unwrap_or(100);
            match (u32::try_from(f.numerator), u32::try_from(denominator)) {
                (Ok(numerator), Ok(denominator)) if denominator > 0 && numerator <= denominator => {
                    Some(Fraction {
                        numerator,
                        denominator,
                    })
                }
                _ => {
                    return Err(share(format!(
                        "fraction {}/{denominator} is not within 0..1",
                        f.numerator
                    )))
                }
            }
        }
        (None, None) => None,
    };
    let r = &spec.backend_ref;
    Ok(MirrorSpec {
        group: r.group.clone(),
        kind: r.kind.clone(),
        name: r.name.clone(),
        namespace: r.namespace.clone(),
        port: r.port,
        fraction,
    })
}

/// `CORS`: origins parsed, lists joined, `maxAge` defaulted to 5 seconds as the spec says.
fn cors(spec: &HttpRouteRulesFiltersCors) -> Result<Cors, FilterError> {
    let allow_origins = spec
        .allow_origins
        .iter()
        .flatten()
        .map(|o| OriginPattern::parse(o).ok_or_else(|| FilterError::CorsOrigin(o.clone())))
        .collect::<Result<_, _>>()?;
    let list = |items: &Option<Vec<String>>, field| {
        CorsList::new(items.as_deref().unwrap_or_default())
            .map_err(|_| FilterError::CorsList(field))
    };
    Ok(Cors {
        allow_origins,
        allow_methods: list(&spec.allow_methods, "allowMethods")?,
        allow_headers: list(&spec.allow_headers, "allowHeaders")?,
        expose_headers: list(&spec.expose_headers, "exposeHeaders")?,
        max_age: spec
            .max_age
            .and_then(|a| u32::try_from(a).ok())
            .unwrap_or(5),
        allow_credentials: spec.allow_credentials.unwrap_or(false),
    })
}

/// Compiles the filters of one backendRef. Header modifiers and mirrors apply per backend.
pub fn compile_backend_filters(
    filters: &[HttpRouteRulesBackendRefsFilters],
) -> Result<CompiledFilters, FilterError> {
    if filters.is_empty() {
        return Ok(CompiledFilters::default());
    }
    // The crate generates a separate but identical type for backend filters: convert through
    // their shared JSON shape rather than duplicating every conversion.
    let value = serde_json::to_value(filters).map_err(|e| FilterError::Backend(e.to_string()))?;
    let rule: Vec<Filter> =
        serde_json::from_value(value).map_err(|e| FilterError::Backend(e.to_string()))?;
    for f in &rule {
        if !matches!(
            f.r#type,
            Type::RequestHeaderModifier | Type::ResponseHeaderModifier | Type::RequestMirror
        ) {
            return Err(FilterError::Unsupported(type_name(&f.r#type)));
        }
    }
    compile_filters(&rule, false)
}

/// Sets a filter that a rule may name once (boxed: see [`RuleFilters`]).
fn set_once<T>(slot: &mut Option<Box<T>>, value: T, name: &'static str) -> Result<(), FilterError> {
    if slot.is_some() {
        return Err(FilterError::Repeated(name));
    }
    *slot = Some(Box::new(value));
    Ok(())
}

fn header_name(name: &str) -> Result<HeaderName, FilterError> {
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| FilterError::HeaderName(name.to_owned()))
}

fn header_pair(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), FilterError> {
    let value =
        HeaderValue::from_str(value).map_err(|_| FilterError::HeaderValue(name.to_owned()))?;
    Ok((header_name(name)?, value))
}

/// Compiles a header modifier; names are case-insensitive and pre-parsed here.
fn header_modifier<'s>(
    set: impl Iterator<Item = (&'s str, &'s str)>,
    add: impl Iterator<Item = (&'s str, &'s str)>,
    remove: impl Iterator<Item = &'s String>,
) -> Result<HeaderModifier, FilterError> {
    Ok(HeaderModifier {
        set: set
            .map(|(n, v)| header_pair(n, v))
            .collect::<Result<_, _>>()?,
        add: add
            .map(|(n, v)| header_pair(n, v))
            .collect::<Result<_, _>>()?,
        remove: remove.map(|n| header_name(n)).collect::<Result<_, _>>()?,
        add_on_success: Vec::new(),
    })
}

/// A configured redirect or rewrite hostname, checked with the rules a request host obeys: it
/// ends up in `Location` or `Host`, so it may not carry anything but a name.
fn hostname(name: Option<&str>) -> Result<Option<String>, FilterError> {
    match name {
        Some(n) => match validate_hostname(n) {
            Ok(()) => Ok(Some(n.to_owned())),
            Err(_) => Err(FilterError::Hostname(n.to_owned())),
        },
        None => Ok(None),
    }
}

/// A validated hostname in the form the proxy sends as `Host`.
fn host_header(name: &str) -> Result<HeaderValue, FilterError> {
    HeaderValue::from_str(name).map_err(|_| FilterError::Hostname(name.to_owned()))
}

/// A configured path value: visible ASCII with valid escapes (empty for `ReplacePrefixMatch`
/// means "strip the prefix").
fn config_path(p: &str, may_be_empty: bool) -> Result<String, FilterError> {
    if (p.is_empty() && may_be_empty) || validate_config_path(p).is_ok() {
        Ok(p.to_owned())
    } else {
        Err(FilterError::PathChars(p.to_owned()))
    }
}

fn path_modifier(
    full: bool,
    full_path: Option<&str>,
    prefix: Option<&str>,
    all_prefix: bool,
) -> Result<PathModifier, FilterError> {
    if full {
        let p = full_path.ok_or(FilterError::PathValue("ReplaceFullPath"))?;
        return Ok(PathModifier::ReplaceFullPath(config_path(p, false)?));
    }
    let p = prefix.ok_or(FilterError::PathValue("ReplacePrefixMatch"))?;
    if !all_prefix {
        return Err(FilterError::PrefixWithoutPathPrefix);
    }
    Ok(PathModifier::ReplacePrefixMatch(config_path(p, true)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filters(yaml: &str) -> Vec<Filter> {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn header_modifier_names_are_lowercased() {
        let f = filters("- type: RequestHeaderModifier\n  requestHeaderModifier:\n    set: [{name: X-Up, value: a}]\n    remove: [X-Gone]\n");
        let out = compile_filters(&f, true).unwrap().filters;
        let h = out.request_headers.unwrap();
        assert_eq!(h.set[0].0.as_str(), "x-up");
        assert_eq!(h.remove[0].as_str(), "x-gone");
    }

    #[test]
    fn invalid_combinations_are_rejected() {
        let both = filters("- type: RequestRedirect\n  requestRedirect: {scheme: https}\n- type: URLRewrite\n  urlRewrite: {hostname: x}\n");
        assert_eq!(
            compile_filters(&both, true).unwrap_err(),
            FilterError::RedirectWithRewrite
        );
        let prefix = filters("- type: URLRewrite\n  urlRewrite:\n    path: {type: ReplacePrefixMatch, replacePrefixMatch: /x}\n");
        assert!(compile_filters(&prefix, true).is_ok());
        assert_eq!(
            compile_filters(&prefix, false).unwrap_err(),
            FilterError::PrefixWithoutPathPrefix
        );
        let ext = filters("- type: ExtensionRef\n  extensionRef: {group: g, kind: K, name: n}\n");
        assert_eq!(
            compile_filters(&ext, true).unwrap_err(),
            FilterError::Unsupported("ExtensionRef")
        );
        let twice = filters("- type: RequestRedirect\n  requestRedirect: {}\n- type: RequestRedirect\n  requestRedirect: {}\n");
        assert_eq!(
            compile_filters(&twice, true).unwrap_err(),
            FilterError::Repeated("RequestRedirect")
        );
    }

    #[test]
    fn injected_values_are_refused_at_build_time() {
        let cases = [
            ("- type: RequestRedirect\n  requestRedirect: {hostname: \"a.example\\r\\nSet-Cookie: x\"}\n", "Hostname"),
            ("- type: URLRewrite\n  urlRewrite: {hostname: \"evil.com/x\"}\n", "Hostname"),
            ("- type: URLRewrite\n  urlRewrite:\n    path: {type: ReplaceFullPath, replaceFullPath: \"/a\\nb\"}\n", "PathChars"),
            ("- type: RequestRedirect\n  requestRedirect:\n    path: {type: ReplacePrefixMatch, replacePrefixMatch: \"/a b\"}\n", "PathChars"),
            ("- type: RequestHeaderModifier\n  requestHeaderModifier:\n    set: [{name: x, value: \"a\\r\\nb: c\"}]\n", "HeaderValue"),
        ];
        for (yaml, want) in cases {
            let err = compile_filters(&filters(yaml), true).expect_err(yaml);
            assert!(format!("{err:?}").starts_with(want), "{yaml}: {err:?}");
        }
        let ok = filters("- type: URLRewrite\n  urlRewrite:\n    hostname: b.example\n    path: {type: ReplacePrefixMatch, replacePrefixMatch: \"\"}\n");
        assert!(compile_filters(&ok, true).is_ok());
    }

    #[test]
    fn redirect_defaults_to_302() {
        let f = filters("- type: RequestRedirect\n  requestRedirect: {hostname: h, port: 8443}\n");
        let r = compile_filters(&f, true).unwrap().filters.redirect.unwrap();
        assert_eq!(
            (r.status, r.port, r.hostname.as_deref()),
            (302, Some(8443), Some("h"))
        );
    }

    #[test]
    fn mirrors_keep_their_share() {
        let f = filters("- type: RequestMirror\n  requestMirror: {backendRef: {name: a, port: 80}}\n- type: RequestMirror\n  requestMirror: {backendRef: {name: b, namespace: o, port: 81}, percent: 20}\n- type: RequestMirror\n  requestMirror: {backendRef: {name: c, port: 80}, fraction: {numerator: 25, denominator: 50}}\n");
        let m = compile_filters(&f, true).unwrap().mirrors;
        let shares: Vec<_> = m
            .iter()
            .map(|m| m.fraction.map(|f| (f.numerator, f.denominator)))
            .collect();
        assert_eq!(shares, vec![None, Some((20, 100)), Some((25, 50))]);
        assert_eq!(m[1].namespace.as_deref(), Some("o"));
        let bad = filters("- type: RequestMirror\n  requestMirror: {backendRef: {name: a, port: 80}, fraction: {numerator: 3, denominator: 2}}\n");
        assert!(matches!(
            compile_filters(&bad, true).unwrap_err(),
            FilterError::MirrorShare(_)
        ));
    }

    #[test]
    fn cors_defaults_and_validation() {
        let f = filters("- type: CORS\n  cors: {allowOrigins: ['https://*.bar.com'], allowMethods: [GET, OPTIONS]}\n");
        let c = compile_filters(&f, true).unwrap().filters.cors.unwrap();
        assert_eq!(c.max_age, 5);
        assert!(!c.allow_credentials);
        assert!(c.allow_headers.is_none());
        let bad = filters("- type: CORS\n  cors: {allowOrigins: ['ftp://x']}\n");
        assert!(matches!(
            compile_filters(&bad, true).unwrap_err(),
            FilterError::CorsOrigin(_)
        ));
    }
}
