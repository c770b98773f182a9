//! HTTPRoute filters compiled to `table` types: header modifiers, RequestRedirect, URLRewrite.
//! Invalid or unsupported filters are errors that make their rule invalid. Pure.

use gateway_api::apis::standard::httproutes::{
    HttpRouteRulesBackendRefsFilters, HttpRouteRulesFilters as Filter,
    HttpRouteRulesFiltersRequestRedirectPathType as RedirectPathType,
    HttpRouteRulesFiltersRequestRedirectScheme as Scheme, HttpRouteRulesFiltersType as Type,
    HttpRouteRulesFiltersUrlRewritePathType as RewritePathType,
};
use http::{HeaderName, HeaderValue};

use crate::table::{HeaderModifier, PathModifier, Redirect, RuleFilters, UrlRewrite};

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
    #[error("redirect status code {0} is not supported")]
    StatusCode(i64),
    #[error("redirect port {0} is out of range")]
    Port(i32),
    #[error("backendRef filter is not valid: {0}")]
    Backend(String),
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
    }
}

/// Compiles a rule's filters. `all_prefix` says whether every match of the rule is a
/// `PathPrefix` match (required by `ReplacePrefixMatch`).
pub fn compile_filters(filters: &[Filter], all_prefix: bool) -> Result<RuleFilters, FilterError> {
    let mut out = RuleFilters::default();
    for f in filters {
        let name = type_name(&f.r#type);
        match f.r#type {
            Type::RequestHeaderModifier => {
                let spec = f
                    .request_header_modifier
                    .as_ref()
                    .ok_or(FilterError::Missing(name))?;
                let m = header_modifier(
                    spec.set
                        .iter()
                        .flatten()
                        .map(|p| (p.name.as_str(), p.value.as_str())),
                    spec.add
                        .iter()
                        .flatten()
                        .map(|p| (p.name.as_str(), p.value.as_str())),
                    spec.remove.iter().flatten(),
                )?;
                set_once(&mut out.request_headers, m, name)?;
            }
            Type::ResponseHeaderModifier => {
                let spec = f
                    .response_header_modifier
                    .as_ref()
                    .ok_or(FilterError::Missing(name))?;
                let m = header_modifier(
                    spec.set
                        .iter()
                        .flatten()
                        .map(|p| (p.name.as_str(), p.value.as_str())),
                    spec.add
                        .iter()
                        .flatten()
                        .map(|p| (p.name.as_str(), p.value.as_str())),
                    spec.remove.iter().flatten(),
                )?;
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
                        Scheme::Http => "http".to_owned(),
                        Scheme::Https => "https".to_owned(),
                    }),
                    hostname: spec.hostname.clone(),
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
                    hostname: spec.hostname.clone(),
                    path,
                };
                set_once(&mut out.rewrite, rewrite, name)?;
            }
            Type::RequestMirror | Type::ExtensionRef | Type::Cors => {
                return Err(FilterError::Unsupported(name))
            }
        }
    }
    if out.redirect.is_some() && out.rewrite.is_some() {
        return Err(FilterError::RedirectWithRewrite);
    }
    Ok(out)
}

/// Compiles the filters of one backendRef. Only header modifiers apply per backend.
pub fn compile_backend_filters(
    filters: &[HttpRouteRulesBackendRefsFilters],
) -> Result<RuleFilters, FilterError> {
    if filters.is_empty() {
        return Ok(RuleFilters::default());
    }
    // The crate generates a separate but identical type for backend filters: convert through
    // their shared JSON shape rather than duplicating every conversion.
    let value = serde_json::to_value(filters).map_err(|e| FilterError::Backend(e.to_string()))?;
    let rule: Vec<Filter> =
        serde_json::from_value(value).map_err(|e| FilterError::Backend(e.to_string()))?;
    for f in &rule {
        if !matches!(
            f.r#type,
            Type::RequestHeaderModifier | Type::ResponseHeaderModifier
        ) {
            return Err(FilterError::Unsupported(type_name(&f.r#type)));
        }
    }
    compile_filters(&rule, false)
}

fn set_once<T>(slot: &mut Option<T>, value: T, name: &'static str) -> Result<(), FilterError> {
    if slot.is_some() {
        return Err(FilterError::Repeated(name));
    }
    *slot = Some(value);
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
    })
}

fn path_modifier(
    full: bool,
    full_path: Option<&str>,
    prefix: Option<&str>,
    all_prefix: bool,
) -> Result<PathModifier, FilterError> {
    if full {
        let p = full_path.ok_or(FilterError::PathValue("ReplaceFullPath"))?;
        return Ok(PathModifier::ReplaceFullPath(p.to_owned()));
    }
    let p = prefix.ok_or(FilterError::PathValue("ReplacePrefixMatch"))?;
    if !all_prefix {
        return Err(FilterError::PrefixWithoutPathPrefix);
    }
    Ok(PathModifier::ReplacePrefixMatch(p.to_owned()))
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
        let out = compile_filters(&f, true).unwrap();
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
        let mirror =
            filters("- type: RequestMirror\n  requestMirror: {backendRef: {name: m, port: 80}}\n");
        assert_eq!(
            compile_filters(&mirror, true).unwrap_err(),
            FilterError::Unsupported("RequestMirror")
        );
        let twice = filters("- type: RequestRedirect\n  requestRedirect: {}\n- type: RequestRedirect\n  requestRedirect: {}\n");
        assert_eq!(
            compile_filters(&twice, true).unwrap_err(),
            FilterError::Repeated("RequestRedirect")
        );
    }

    #[test]
    fn redirect_defaults_to_302() {
        let f = filters("- type: RequestRedirect\n  requestRedirect: {hostname: h, port: 8443}\n");
        let r = compile_filters(&f, true).unwrap().redirect.unwrap();
        assert_eq!(
            (r.status, r.port, r.hostname.as_deref()),
            (302, Some(8443), Some("h"))
        );
    }
}
