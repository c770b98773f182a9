//! Compiles the rules of one HTTPRoute into table `RouteRule`s: matchers, filters and backend
//! sets, once per route (shared by every listener the route attaches to). Records which rules are
//! invalid and the first unresolved backend, for the route's conditions. Pure.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::kinds::httproute::{
    HttpRoute, HttpRouteRules, HttpRouteRulesMatches, HttpRouteRulesMatchesHeadersType as HType,
    HttpRouteRulesMatchesMethod as M, HttpRouteRulesMatchesPathType as PType,
    HttpRouteRulesMatchesQueryParamsType as QType,
};
use http::{HeaderName, Method};

use crate::kinds::routes::RouteKindId;
use crate::snapshot::namespace_of;
use crate::table::{
    AuthBackend, BackendSet, BackendTarget, HeaderMatch, Mirror, PathMatch, PathModifier,
    QueryMatch, Regex, RequestMatch, RequestPolicy, RouteRef, RouteRule, RuleFilters, ValueMatch,
    WeightedBackend,
};
use crate::translate::backends::resolve::{BackendError, BackendRef, Backends};
use crate::translate::common::duration::compile_timeouts;
use crate::translate::routes::filters::{
    compile_backend_filters, compile_filters, CompiledFilters,
};
use crate::translate::routes::http_like::HttpLikeRoute;
use crate::translate::routes::resilience::{compile_retry, compile_session};

/// Why a `matches[]` entry cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    #[error("invalid regular expression {value:?}: {error}")]
    Regex { value: String, error: String },
    #[error("invalid header name {0:?}")]
    HeaderName(String),
}

/// The compiled rules of one route and what its conditions must report.
#[derive(Debug, Default)]
pub struct CompiledRoute {
    /// `HTTPRoute` or `GRPCRoute`: the kind listeners must allow.
    pub kind: RouteKindId,
    /// One entry per match of every servable rule (a boxed slice: kept while the route
    /// stays, never grown).
    pub rules: Box<[Arc<RouteRule>]>,
    /// Number of rules in the spec (a `u32`, beside `kind`: the CRD allows 16).
    pub total: u32,
    /// Its invalid rules and first unresolved backendRef; `None` when it has neither. Boxed:
    /// most routes have none, and a compiled route is kept while its route stays.
    pub problems: Option<Box<RouteProblems>>,
    /// Per rule, the one host whose virtual host serves it (an Ingress rule's `host`; `*` for
    /// rules without one); empty when every rule serves every host of the route.
    pub rule_hosts: Box<[String]>,
}

/// What the conditions of a route with invalid rules or unresolved references report.
#[derive(Debug, Default, Clone)]
pub struct RouteProblems {
    /// Messages for rules that are dropped or answer 500 because they are invalid.
    pub invalid: Vec<String>,
    /// Indexes of the invalid rules.
    pub invalid_rules: BTreeSet<usize>,
    /// The first backendRef that could not be resolved.
    pub unresolved: Option<Box<BackendError>>,
}

/// Compiles every rule of `source`, an HTTP-like route whose lowered form is `route` (an
/// HTTPRoute is its own): matches are the source's own where its kind has them, and `policy`
/// (its own TrafficPolicy's request settings, compiled) is on every rule.
pub fn compile_route(
    route: &HttpRoute,
    source: &dyn HttpLikeRoute,
    policy: Option<Arc<RequestPolicy>>,
    backends: &mut Backends<'_>,
) -> CompiledRoute {
    let namespace = namespace_of(&route.metadata);
    let kind = source.kind();
    let route_ref = Arc::new(RouteRef::new(
        kind.as_str(),
        namespace,
        route.metadata.name.as_deref().unwrap_or_default(),
    ));
    let created = crate::translate::common::precedence::created(&route.metadata);
    // The CRD defaults absent rules to one rule matching every request (with no backend: 500).
    let default_rules = [HttpRouteRules::default()];
    let spec_rules = route.spec.rules.as_deref().unwrap_or(&default_rules);
    // One compiled rule per match (a rule without matches has one): sized at once, as the
    // route keeps them until it changes.
    let matches: usize = spec_rules
        .iter()
        .map(|r| r.matches.as_ref().map_or(1, |m| m.len().max(1)))
        .sum();
    let mut out = CompiledRoute {
        kind,
        total: u32::try_from(spec_rules.len()).unwrap_or(u32::MAX),
        rule_hosts: source.rule_hosts().into_boxed_slice(),
        ..Default::default()
    };
    let mut rules = Vec::with_capacity(matches);
    let https_redirects = source.https_redirects();
    let capture_rewrites = source.capture_rewrites();
    let added_on_success = source.added_on_success();
    let access_log_off = source.access_log_off();
    let session_cookies = source.session_cookies();
    let send_idle = source.backend_send_idle();
    let retry_within = source.retry_within();
    for (index, rule) in spec_rules.iter().enumerate() {
        let default_match = [HttpRouteRulesMatches::default()];
        let spec_matches = match rule.matches.as_deref() {
            Some(m) if !m.is_empty() => m,
            _ => &default_match,
        };
        let matchers: Result<Vec<RequestMatch>, MatchError> = source
            .own_matches(index)
            .unwrap_or_else(|| spec_matches.iter().map(compile_match).collect());
        let matchers = match matchers {
            Ok(m) => m,
            Err(e) => {
                out.invalid_rule(index, format!("Dropped Rule {index}: {e}"));
                continue;
            }
        };
        let all_prefix = matchers
            .iter()
            .all(|m| matches!(m.path, PathMatch::Prefix(_)));
        let (mut filters, backend_set) =
            compile_actions(rule, all_prefix, &route_ref, backends, &mut out, index);
        if policy.is_some() {
            filters.policy.clone_from(&policy);
        }
        filters.https_redirect = https_redirects.get(index).copied().unwrap_or(false);
        filters.access_log_off = access_log_off;
        if capture_rewrites.get(index).copied().unwrap_or(false) {
            captures_in_rewrite(&mut filters);
        }
        if send_idle.is_some() {
            filters.set_send_idle(send_idle);
        }
        if let (Some(retry), Some(_)) = (filters.retry.as_deref_mut(), retry_within) {
            retry.within = retry_within;
        }
        if let (Some(session), Some(cookie)) =
            (filters.session.as_deref_mut(), session_cookies.get(index))
        {
            session.cookie.clone_from(cookie);
        }
        if let Some(m) = filters.response_headers.as_deref_mut() {
            if !added_on_success.is_empty() {
                m.add_on_success_only(&added_on_success);
            }
        }
        let filters = filters.shared();
        let backend_set = Arc::new(backend_set);
        for (match_index, matcher) in matchers.into_iter().enumerate() {
            rules.push(Arc::new(RouteRule {
                route: route_ref.clone(),
                created,
                rule_index: index as u32,
                match_index: match_index as u32,
                rule_name: rule.name.as_deref().map(Box::from),
                matcher,
                filters: filters.clone(),
                backends: backend_set.clone(),
            }));
        }
    }
    // Kept per route until it changes: no spare capacity (dropped rules leave some).
    out.rules = rules.into_boxed_slice();
    out
}

/// Makes the rule's `ReplaceFullPath` rewrite a template of its regex path's captures.
fn captures_in_rewrite(filters: &mut RuleFilters) {
    if let Some(rewrite) = filters.rewrite.as_deref_mut() {
        if let Some(PathModifier::ReplaceFullPath(t)) = &rewrite.path {
            rewrite.path = Some(PathModifier::ReplaceCaptures(t.clone()));
        }
    }
}

impl CompiledRoute {
    /// True when the route has rules and none of them is valid.
    pub fn all_invalid(&self) -> bool {
        let invalid = self.problems.as_ref().map_or(0, |p| p.invalid_rules.len());
        self.total > 0 && invalid == self.total as usize
    }

    /// Messages for rules that are dropped or answer 500 because they are invalid.
    pub fn invalid(&self) -> &[String] {
        self.problems.as_ref().map_or(&[], |p| &p.invalid)
    }

    /// The first backendRef that could not be resolved.
    pub fn unresolved(&self) -> Option<&BackendError> {
        self.problems.as_ref()?.unresolved.as_deref()
    }

    /// Records rule `index` as invalid, with the message its conditions give.
    fn invalid_rule(&mut self, index: usize, message: String) {
        let problems = self.problems.get_or_insert_with(Box::default);
        problems.invalid.push(message);
        problems.invalid_rules.insert(index);
    }

    /// Records `error` when it is the first unresolved backendRef.
    fn record_unresolved(&mut self, error: Box<BackendError>) {
        let problems = self.problems.get_or_insert_with(Box::default);
        problems.unresolved.get_or_insert(error);
    }

    /// Whether `rule` goes into the virtual host `host` (see [`CompiledRoute::rule_hosts`]):
    /// its own host, or a host its wildcard covers that no rule names (a listener's hostname
    /// narrowed it).
    pub fn serves(&self, rule: &RouteRule, host: &str) -> bool {
        let Some(own) = self.rule_hosts.get(rule.rule_index as usize) else {
            return true;
        };
        match own.strip_prefix('*') {
            _ if own == host => true,
            Some(suffix) if !suffix.is_empty() && host != "*" => {
                host.len() > suffix.len()
                    && host.ends_with(suffix)
                    && !self.rule_hosts.iter().any(|h| h == host)
            }
            _ => false,
        }
    }
}

/// Filters, timeouts and backends of one rule. An invalid filter or timeout makes the whole
/// rule answer 500.
fn compile_actions(
    rule: &HttpRouteRules,
    all_prefix: bool,
    route: &RouteRef,
    backends: &mut Backends<'_>,
    out: &mut CompiledRoute,
    index: usize,
) -> (RuleFilters, BackendSet) {
    let namespace = route.namespace();
    let compiled = compile_filters(rule.filters.as_deref().unwrap_or_default(), all_prefix)
        .map_err(|e| e.to_string())
        .and_then(|c| {
            let timeouts = compile_timeouts(rule.timeouts.as_deref()).map_err(|e| e.to_string())?;
            let retry = compile_retry(rule.retry.as_deref()).map_err(|e| e.to_string())?;
            let session = compile_session(
                rule.session_persistence.as_deref(),
                namespace,
                route.name(),
                index,
            )
            .map_err(|e| e.to_string())?;
            Ok((c, timeouts, retry, session))
        });
    let filters = match compiled {
        Ok((c, timeouts, retry, session)) => {
            let mut filters = resolve_mirrors(c, route, backends, out);
            filters.timeouts = timeouts;
            filters.retry = retry.map(Box::new);
            filters.session = session.map(Box::new);
            filters
        }
        Err(reason) => {
            out.invalid_rule(index, format!("Rule {index} answers 500: {reason}"));
            let invalid = WeightedBackend {
                weight: 1,
                target: BackendTarget::Invalid { reason },
                filters: RuleFilters::none(),
            };
            return (RuleFilters::default(), BackendSet::new(vec![invalid]));
        }
    };
    let mut set = Vec::with_capacity(rule.backend_refs.as_deref().map_or(0, <[_]>::len));
    for b in rule.backend_refs.iter().flatten() {
        let weight = u32::try_from(b.weight.unwrap_or(1)).unwrap_or(0);
        let r = BackendRef {
            from_kind: out.kind.as_str(),
            group: b.group.as_deref(),
            kind: b.kind.as_deref(),
            name: &b.name,
            namespace: b.namespace.as_deref(),
            port: b.port,
        };
        let backend_filters =
            match compile_backend_filters(b.filters.as_deref().unwrap_or_default()) {
                Ok(f) => resolve_mirrors(f, route, backends, out),
                Err(e) => {
                    let message = format!("Rule {index} backendRef {} answers 500: {e}", b.name);
                    out.invalid_rule(index, message);
                    set.push(WeightedBackend {
                        weight,
                        target: BackendTarget::Invalid {
                            reason: e.to_string(),
                        },
                        filters: RuleFilters::none(),
                    });
                    continue;
                }
            };
        let target = match backends.resolve(namespace, &r) {
            Ok(s) => BackendTarget::Service(s),
            Err(e) => {
                let reason = e.to_string();
                out.record_unresolved(e);
                BackendTarget::Invalid { reason }
            }
        };
        set.push(WeightedBackend {
            weight,
            target,
            filters: backend_filters.shared(),
        });
    }
    (filters, BackendSet::new(set))
}

/// Resolves `RequestMirror` backendRefs like any backendRef (kind, ReferenceGrant, port); an
/// unresolvable mirror is dropped and reported through `ResolvedRefs`, the rule keeps serving.
/// `ExternalAuth` authorizers resolve the same way, but one that does not resolve stays (its
/// requests are refused, 403) and is reported the same way.
fn resolve_mirrors(
    compiled: CompiledFilters,
    route: &RouteRef,
    backends: &mut Backends<'_>,
    out: &mut CompiledRoute,
) -> RuleFilters {
    let namespace = route.namespace();
    let mut filters = compiled.filters;
    for m in compiled.mirrors {
        let r = BackendRef {
            from_kind: out.kind.as_str(),
            group: m.group.as_deref(),
            kind: m.kind.as_deref(),
            name: &m.name,
            namespace: m.namespace.as_deref(),
            port: m.port,
        };
        match backends.resolve(namespace, &r) {
            Ok(backend) => filters.mirrors.push(Mirror {
                backend,
                fraction: m.fraction,
            }),
            Err(e) => {
                out.record_unresolved(e);
            }
        }
    }
    if compiled.auths.is_empty() {
        filters.external_auth = None;
        return filters;
    }
    let source = source_of(route);
    let mut auths = Vec::with_capacity(compiled.auths.len());
    for a in compiled.auths {
        let r = BackendRef {
            from_kind: out.kind.as_str(),
            group: a.backend_ref.group.as_deref(),
            kind: a.backend_ref.kind.as_deref(),
            name: &a.backend_ref.name,
            namespace: a.backend_ref.namespace.as_deref(),
            port: a.backend_ref.port,
        };
        let mut auth = a.auth;
        auth.source.clone_from(&source);
        // An authorizer that does not resolve stays, failing its requests closed.
        auth.backend = match backends.resolve(namespace, &r) {
            Ok(backend) => AuthBackend::Service(backend),
            Err(e) => {
                let reason = e.to_string();
                out.record_unresolved(e);
                AuthBackend::Invalid { reason }
            }
        };
        auths.push(Arc::new(auth));
    }
    filters.external_auth = Some(Box::new(auths));
    filters
}

/// `Kind/namespace/name` of a route, as an authorizer's log lines name where it comes from.
fn source_of(route: &RouteRef) -> String {
    [route.kind(), "/", route.label()].concat()
}

fn regex(value: &str) -> Result<Regex, MatchError> {
    Regex::new(value).map_err(|e| MatchError::Regex {
        value: value.to_owned(),
        error: e.to_string(),
    })
}

/// Compiles one `matches[]` entry; absent fields take the spec defaults (`PathPrefix /`).
pub fn compile_match(m: &HttpRouteRulesMatches) -> Result<RequestMatch, MatchError> {
    let path = match &m.path {
        None => PathMatch::prefix("/"),
        Some(p) => {
            let value = p.value.as_deref().unwrap_or("/");
            match p.r#type.as_ref().unwrap_or(&PType::PathPrefix) {
                PType::Exact => PathMatch::Exact(value.to_owned()),
                PType::PathPrefix => PathMatch::prefix(value),
                PType::RegularExpression => PathMatch::RegularExpression(regex(value)?),
            }
        }
    };
    let mut headers: Vec<HeaderMatch> = Vec::new();
    for h in m.headers.iter().flatten() {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| MatchError::HeaderName(h.name.clone()))?;
        // Only the first of several matches with the same (case-insensitive) name counts.
        if headers.iter().any(|x| x.name == name) {
            continue;
        }
        let value = match h.r#type.as_ref().unwrap_or(&HType::Exact) {
            HType::Exact => ValueMatch::Exact(h.value.clone()),
            HType::RegularExpression => ValueMatch::RegularExpression(regex(&h.value)?),
        };
        headers.push(HeaderMatch { name, value });
    }
    let mut query: Vec<QueryMatch> = Vec::new();
    for q in m.query_params.iter().flatten() {
        if query.iter().any(|x| x.name == q.name) {
            continue;
        }
        let value = match q.r#type.as_ref().unwrap_or(&QType::Exact) {
            QType::Exact => ValueMatch::Exact(q.value.clone()),
            QType::RegularExpression => ValueMatch::RegularExpression(regex(&q.value)?),
        };
        query.push(QueryMatch {
            name: q.name.clone(),
            value,
        });
    }
    let method = m.method.as_ref().map(|m| match m {
        M::Get => Method::GET,
        M::Head => Method::HEAD,
        M::Post => Method::POST,
        M::Put => Method::PUT,
        M::Delete => Method::DELETE,
        M::Connect => Method::CONNECT,
        M::Options => Method::OPTIONS,
        M::Trace => Method::TRACE,
        M::Patch => Method::PATCH,
    });
    Ok(RequestMatch {
        path,
        method: method.map(Box::new),
        headers: headers.into_boxed_slice(),
        query: query.into_boxed_slice(),
        grpc: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(yaml: &str) -> HttpRouteRulesMatches {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn match_defaults_and_duplicates() {
        let m = compile_match(&matches("{}")).unwrap();
        assert!(matches!(&m.path, PathMatch::Prefix(p) if p == "/"));
        let m = compile_match(&matches(
            "{path: {type: Exact, value: /a}, method: POST, headers: [{name: X-A, value: '1'}, {name: x-a, value: '2'}], queryParams: [{name: q, value: v, type: RegularExpression}]}",
        ))
        .unwrap();
        assert!(matches!(&m.path, PathMatch::Exact(p) if p == "/a"));
        assert_eq!(m.method.as_deref(), Some(&Method::POST));
        assert_eq!(m.headers.len(), 1);
        assert!(matches!(&m.headers[0].value, ValueMatch::Exact(v) if v == "1"));
        assert!(matches!(
            &m.query[0].value,
            ValueMatch::RegularExpression(_)
        ));
    }

    #[test]
    fn invalid_regex_is_an_error() {
        let e =
            compile_match(&matches("{path: {type: RegularExpression, value: '/(['}}")).unwrap_err();
        assert!(matches!(e, MatchError::Regex { .. }));
    }

    /// The incremental cache keeps one per route: what most routes leave unset takes a
    /// pointer, not the space of a list or a set.
    #[test]
    fn a_compiled_route_is_six_words() {
        assert_eq!(std::mem::size_of::<CompiledRoute>(), 48);
    }
}
