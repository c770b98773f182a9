//! The rules of the Gateway API that a schema derived from Rust types cannot carry, stated by
//! this project in its own words: value bounds (ports, weights, percentages, redirect status
//! codes, the number of parentRefs) and cross-field rules as CEL (`x-kubernetes-validations`), the ones users run into:
//! path matches, redirects and rewrites, filter types and repetition, Service backends without
//! a port, listener protocols and TLS. Each is added to the built-in schema of the kinds it
//! concerns, at a field path of that schema, and is never stricter than the Gateway API
//! specification. Data only.

use serde_json::{json, Value};

/// One addition: a field path (`spec.rules[].matches[].path`, `[]` stepping into list items)
/// and the schema keywords merged into the node there.
pub(crate) type Addition = (String, Value);

/// HTTP filter types and the field that configures each.
const HTTP_FILTERS: &[(&str, &str)] = &[
    ("RequestHeaderModifier", "requestHeaderModifier"),
    ("ResponseHeaderModifier", "responseHeaderModifier"),
    ("RequestMirror", "requestMirror"),
    ("RequestRedirect", "requestRedirect"),
    ("URLRewrite", "urlRewrite"),
    ("ExtensionRef", "extensionRef"),
    ("CORS", "cors"),
    ("ExternalAuth", "externalAuth"),
];

/// gRPC filter types and the field that configures each.
const GRPC_FILTERS: &[(&str, &str)] = &[
    ("RequestHeaderModifier", "requestHeaderModifier"),
    ("ResponseHeaderModifier", "responseHeaderModifier"),
    ("RequestMirror", "requestMirror"),
    ("ExtensionRef", "extensionRef"),
];

/// HTTP filter types a filter list may hold once (mirrors, external auth and extension
/// filters may repeat).
const HTTP_ONCE: &[&str] = &[
    "RequestHeaderModifier",
    "ResponseHeaderModifier",
    "RequestRedirect",
    "URLRewrite",
    "CORS",
];

/// gRPC filter types a filter list may hold once.
const GRPC_ONCE: &[&str] = &["RequestHeaderModifier", "ResponseHeaderModifier"];

/// The most `parentRefs` a route takes (the Gateway API CRDs' `maxItems`).
pub(crate) const MAX_PARENT_REFS: usize = 32;

/// A rule with a fixed message.
fn rule(rule: &str, message: &str) -> Value {
    json!({"rule": rule, "message": message})
}

/// A rule whose error is about the field `field_path` (`.port`) of the node, so the error
/// names that field and its line.
fn rule_at(rule: &str, message: &str, field_path: &str) -> Value {
    json!({"rule": rule, "message": message, "fieldPath": field_path})
}

/// A rule whose failure means a value is missing (`Required value: ...`).
fn required(rule: &str, message: &str) -> Value {
    json!({"rule": rule, "message": message, "reason": "FieldValueRequired"})
}

fn rules(list: Vec<Value>) -> Value {
    json!({ "x-kubernetes-validations": list })
}

fn bounds(min: i64, max: i64) -> Value {
    json!({"minimum": min, "maximum": max})
}

/// CEL: the backend reference `self` is a core Service (group `""`, kind `Service`; both are
/// defaulted before rules run).
const IS_SERVICE: &str =
    "(!has(self.group) || self.group == '') && (!has(self.kind) || self.kind == 'Service')";

/// A backend reference (`path` names it): a Service needs a port, and the port is a port.
fn backend_ref(path: &str, out: &mut Vec<Addition>) {
    let service = required(
        &format!("!({IS_SERVICE}) || has(self.port)"),
        "port is required when the backend is a Service",
    );
    out.push((path.to_owned(), rules(vec![service])));
    out.push((format!("{path}.port"), bounds(1, 65535)));
}

/// What every route kind shares: at most 32 parentRefs, parent and backend ports, backend
/// weights, Service ports.
fn route(out: &mut Vec<Addition>) {
    out.push((
        "spec.parentRefs".to_owned(),
        json!({"maxItems": MAX_PARENT_REFS}),
    ));
    out.push(("spec.parentRefs[].port".to_owned(), bounds(1, 65535)));
    backend_ref("spec.rules[].backendRefs[]", out);
    out.push((
        "spec.rules[].backendRefs[].weight".to_owned(),
        bounds(0, 1_000_000),
    ));
}

/// Rule names, when given, are unique within a route (HTTP and gRPC rules have names that
/// policies and status refer to).
fn rule_names(out: &mut Vec<Addition>) {
    out.push((
        "spec.rules".to_owned(),
        rules(vec![rule(
            "self.all(r, !has(r.name) || self.exists_one(s, has(s.name) && s.name == r.name))",
            "rule names must be unique within the route",
        )]),
    ));
}

/// A filter list at `list` (`spec.rules[].filters`) whose types are `types`, of which `once`
/// may appear once each.
fn filter_list(list: &str, types: &[(&str, &str)], once: &[&str], out: &mut Vec<Addition>) {
    let once_list = once
        .iter()
        .map(|t| format!("'{t}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let repeatable: Vec<&str> = types
        .iter()
        .map(|(t, _)| *t)
        .filter(|t| !once.contains(t))
        .collect();
    let repeated = format!(
        "self.filter(f, f.type in [{once_list}] && self.filter(g, g.type == f.type).size() > 1)"
    );
    let mut list_rules = vec![json!({
        "rule": format!("{repeated}.size() == 0"),
        "messageExpression": format!(
            "'a filter list may hold one ' + {repeated}[0].type + ' filter only (of the filter \
             types, only {} may be repeated)'",
            repeatable.join(", ")
        ),
    })];
    if types.iter().any(|(t, _)| *t == "URLRewrite") {
        list_rules.push(rule(
            "!(self.exists(f, f.type == 'RequestRedirect') && self.exists(f, f.type == 'URLRewrite'))",
            "a RequestRedirect filter and a URLRewrite filter cannot be used together",
        ));
    }
    out.push((list.to_owned(), rules(list_rules)));
    let mut each = Vec::new();
    for (ty, field) in types {
        let article = if ty.starts_with('E') { "an" } else { "a" };
        each.push(rule_at(
            &format!("self.type != '{ty}' || has(self.{field})"),
            &format!("{article} {ty} filter needs {field}"),
            ".type",
        ));
        each.push(rule_at(
            &format!("!has(self.{field}) || self.type == '{ty}'"),
            &format!("{field} is set, but the filter's type is not {ty}"),
            &format!(".{field}"),
        ));
    }
    out.push((format!("{list}[]"), rules(each)));
    let mirror = format!("{list}[].requestMirror");
    out.push((
        mirror.clone(),
        rules(vec![rule(
            "!(has(self.percent) && has(self.fraction))",
            "a mirror takes percent or fraction, not both",
        )]),
    ));
    out.push((format!("{mirror}.percent"), bounds(0, 100)));
    out.push((
        format!("{mirror}.fraction"),
        rules(vec![rule(
            "!has(self.denominator) || (self.numerator >= 0 && self.denominator >= 1 && self.numerator <= self.denominator)",
            "a mirror fraction is numerator/denominator with 0 <= numerator <= denominator and denominator >= 1",
        )]),
    ));
    backend_ref(&format!("{mirror}.backendRef"), out);
}

/// The HTTP-only parts of a filter list: redirects, rewrites, external auth.
fn http_filters(list: &str, out: &mut Vec<Addition>) {
    for filter in ["requestRedirect", "urlRewrite"] {
        out.push((
            format!("{list}[].{filter}.path"),
            rules(vec![
                rule_at(
                    "has(self.replaceFullPath) == (self.type == 'ReplaceFullPath')",
                    "replaceFullPath is set exactly when the path type is ReplaceFullPath",
                    ".type",
                ),
                rule_at(
                    "has(self.replacePrefixMatch) == (self.type == 'ReplacePrefixMatch')",
                    "replacePrefixMatch is set exactly when the path type is ReplacePrefixMatch",
                    ".type",
                ),
            ]),
        ));
    }
    let redirect = format!("{list}[].requestRedirect");
    out.push((
        format!("{redirect}.statusCode"),
        json!({"enum": [301, 302, 303, 307, 308]}),
    ));
    out.push((format!("{redirect}.port"), bounds(1, 65535)));
    backend_ref(&format!("{list}[].externalAuth.backendRef"), out);
}

/// CEL: filter `f` rewrites or redirects with `ReplacePrefixMatch`.
const REPLACES_PREFIX: &str = "(has(f.requestRedirect) && has(f.requestRedirect.path) && \
    f.requestRedirect.path.type == 'ReplacePrefixMatch') || (has(f.urlRewrite) && \
    has(f.urlRewrite.path) && f.urlRewrite.path.type == 'ReplacePrefixMatch')";

/// HTTPRoute: paths, redirects, rewrites and filters.
fn http_route(out: &mut Vec<Addition>) {
    route(out);
    rule_names(out);
    let path_kinds = "self.type in ['Exact', 'PathPrefix']";
    out.push((
        "spec.rules[].matches[].path".to_owned(),
        rules(vec![
            rule_at(
                &format!("!has(self.type) || !has(self.value) || !({path_kinds}) || self.value.startsWith('/')"),
                "an Exact or PathPrefix path must start with '/'",
                ".value",
            ),
            rule_at(
                &format!(
                    "!has(self.type) || !has(self.value) || !({path_kinds}) || !(self.value.contains('//') || \
                     self.value.contains('/./') || self.value.contains('/../') || self.value.contains('#') || \
                     self.value.lowerAscii().contains('%2f') || self.value.endsWith('/.') || \
                     self.value.endsWith('/..'))"
                ),
                "an Exact or PathPrefix path must be normalized: no '//', '/./', '/../', '%2F' or '#' \
                 in it, and no '/.' or '/..' at its end",
                ".value",
            ),
        ]),
    ));
    out.push((
        "spec.rules[]".to_owned(),
        rules(vec![
            rule(
                "!(has(self.backendRefs) && size(self.backendRefs) > 0 && has(self.filters) && \
                 self.filters.exists(f, f.type == 'RequestRedirect'))",
                "a rule with a RequestRedirect filter answers with the redirect itself: it \
                 cannot also have backendRefs",
            ),
            rule(
                &format!(
                    "!((has(self.filters) && self.filters.exists(f, {REPLACES_PREFIX})) || \
                     (has(self.backendRefs) && self.backendRefs.exists(b, has(b.filters) && \
                     b.filters.exists(f, {REPLACES_PREFIX})))) || (has(self.matches) && \
                     size(self.matches) == 1 && has(self.matches[0].path) && \
                     self.matches[0].path.type == 'PathPrefix')"
                ),
                "a ReplacePrefixMatch redirect or rewrite needs its rule to have exactly one \
                 match, with a PathPrefix path",
            ),
        ]),
    ));
    for list in ["spec.rules[].filters", "spec.rules[].backendRefs[].filters"] {
        filter_list(list, HTTP_FILTERS, HTTP_ONCE, out);
        http_filters(list, out);
    }
}

/// GRPCRoute: filters.
fn grpc_route(out: &mut Vec<Addition>) {
    route(out);
    rule_names(out);
    for list in ["spec.rules[].filters", "spec.rules[].backendRefs[].filters"] {
        filter_list(list, GRPC_FILTERS, GRPC_ONCE, out);
    }
}

/// A listener list (Gateway and ListenerSet): ports, unique names, protocols and TLS.
fn listeners(list: &str, out: &mut Vec<Addition>) {
    out.push((format!("{list}[].port"), bounds(1, 65535)));
    out.push((
        list.to_owned(),
        rules(vec![
            rule(
                "self.all(l, self.exists_one(m, m.name == l.name))",
                "listener names must be unique",
            ),
            rule(
                "self.all(l, !(l.protocol in ['HTTP', 'TCP', 'UDP']) || !has(l.tls))",
                "an HTTP, TCP or UDP listener takes no tls",
            ),
            rule(
                "self.all(l, l.protocol != 'TLS' || (has(l.tls) && has(l.tls.mode)))",
                "a TLS listener needs tls with a mode (Passthrough or Terminate)",
            ),
            rule(
                "self.all(l, l.protocol != 'HTTPS' || !has(l.tls) || !has(l.tls.mode) || \
                 l.tls.mode == 'Terminate')",
                "an HTTPS listener terminates TLS: its tls.mode is Terminate",
            ),
            rule(
                "self.all(l, !(l.protocol in ['TCP', 'UDP']) || !has(l.hostname) || l.hostname == '')",
                "a TCP or UDP listener takes no hostname",
            ),
        ]),
    ));
    out.push((
        format!("{list}[].tls"),
        rules(vec![rule(
            "!has(self.mode) || self.mode != 'Terminate' || \
             (has(self.certificateRefs) && size(self.certificateRefs) > 0) || \
             (has(self.options) && size(self.options) > 0)",
            "a listener that terminates TLS needs certificateRefs (or options that provide \
             its certificates)",
        )]),
    ));
}

/// Every addition for `kind`, in the order they are applied.
pub(crate) fn additions(kind: &str) -> Vec<Addition> {
    let mut out = Vec::new();
    match kind {
        "HTTPRoute" => http_route(&mut out),
        "GRPCRoute" => grpc_route(&mut out),
        "TLSRoute" | "TCPRoute" | "UDPRoute" => route(&mut out),
        "Gateway" | "ListenerSet" => listeners("spec.listeners", &mut out),
        "BackendTLSPolicy" => out.push((
            "spec.validation".to_owned(),
            rules(vec![rule(
                "(has(self.caCertificateRefs) && size(self.caCertificateRefs) > 0) != \
                 (has(self.wellKnownCACertificates) && self.wellKnownCACertificates != '')",
                "validation takes caCertificateRefs or wellKnownCACertificates: exactly one \
                 of them",
            )]),
        )),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_kind_bounds_weights_and_needs_service_ports() {
        for kind in ["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute"] {
            let paths: Vec<String> = additions(kind).into_iter().map(|(p, _)| p).collect();
            for p in [
                "spec.rules[].backendRefs[]",
                "spec.rules[].backendRefs[].weight",
                "spec.parentRefs[].port",
            ] {
                assert!(paths.iter().any(|x| x == p), "{kind}: no rule at {p}");
            }
        }
    }
}
