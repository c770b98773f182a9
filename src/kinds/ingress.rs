//! Ingress (`networking.k8s.io/v1`) as a route kind: which Ingresses and IngressClasses are
//! ours (the names of the controller, the class annotations), and the [`RouteKind`] view the
//! kind-independent rules read. An Ingress names no Gateway itself: the translator's
//! preparation step (`translate::ingress`) writes the Gateway that serves it into
//! [`SERVING_GATEWAY`] on its working copy, and that is the Ingress's one parentRef. Pure.

use std::borrow::Cow;

use k8s_openapi::api::networking::v1::{Ingress, IngressClass, IngressRule};

use super::routes::{BackendRef, ParentRef, RouteKind, RouteStatus};

/// `spec.controller` of the IngressClasses whose Ingresses edgeplane serves.
pub const INGRESS_CONTROLLER: &str = "edgeplane.dev/ingress-controller";

/// The deprecated annotation naming an Ingress's class (before `spec.ingressClassName`).
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// The IngressClass annotation that makes it the class of Ingresses naming none.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// The prefix of ingress-nginx's annotations (none is supported yet; each is reported).
pub const NGINX_PREFIX: &str = "nginx.ingress.kubernetes.io/";

/// Annotation the translator sets on its working copy of an Ingress: `namespace/name` of the
/// Gateway serving it. A value an Ingress carries itself is replaced.
pub const SERVING_GATEWAY: &str = "edgeplane.dev/serving-gateway";

/// The class an Ingress names: `spec.ingressClassName`, else the deprecated annotation.
pub fn class_of(ingress: &Ingress) -> Option<&str> {
    let spec = ingress.spec.as_ref();
    spec.and_then(|s| s.ingress_class_name.as_deref())
        .or_else(|| {
            ingress
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(CLASS_ANNOTATION))
                .map(String::as_str)
        })
}

/// True when `class` is marked the default class (`is-default-class: "true"`).
pub fn is_default_class(class: &IngressClass) -> bool {
    class
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// The `(namespace, name)` of the Gateway serving `ingress`, from [`SERVING_GATEWAY`].
pub fn serving_gateway(ingress: &Ingress) -> Option<(&str, &str)> {
    let annotations = ingress.metadata.annotations.as_ref()?;
    annotations.get(SERVING_GATEWAY)?.split_once('/')
}

impl RouteKind for Ingress {
    type Rule = IngressRule;

    /// Ingress statuses are `status.loadBalancer`, written apart from `parents[]`.
    const PARENTS_STATUS: bool = false;

    fn parent_refs(&self) -> impl Iterator<Item = ParentRef<'_>> {
        serving_gateway(self)
            .map(|(namespace, name)| ParentRef {
                group: Some("gateway.networking.k8s.io"),
                kind: Some("Gateway"),
                name,
                namespace: Some(namespace),
                port: None,
                section_name: None,
            })
            .into_iter()
    }

    fn hostnames(&self) -> Option<&[String]> {
        // Hosts are per rule; the lowered HTTPRoute carries their union.
        None
    }

    fn rules(&self) -> &[Self::Rule] {
        self.spec
            .as_ref()
            .and_then(|s| s.rules.as_deref())
            .unwrap_or_default()
    }

    fn backend_refs(rule: &Self::Rule) -> impl Iterator<Item = BackendRef<'_>> {
        let paths = rule.http.iter().flat_map(|h| h.paths.iter());
        paths.filter_map(|p| {
            let b = &p.backend;
            if let Some(s) = &b.service {
                return Some(BackendRef {
                    group: None,
                    kind: None,
                    name: &s.name,
                    namespace: None,
                    port: s.port.as_ref().and_then(|p| p.number),
                    weight: None,
                });
            }
            b.resource.as_ref().map(|r| BackendRef {
                group: r.api_group.as_deref(),
                kind: Some(&r.kind),
                name: &r.name,
                namespace: None,
                port: None,
                weight: None,
            })
        })
    }

    fn route_status(&self) -> Option<Cow<'_, RouteStatus>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ingress(yaml: &str) -> Ingress {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn the_class_is_the_field_else_the_annotation() {
        let both = ingress(
            "metadata: {name: a, annotations: {kubernetes.io/ingress.class: old}}\n\
             spec: {ingressClassName: new}",
        );
        assert_eq!(class_of(&both), Some("new"));
        let old = ingress("metadata: {name: a, annotations: {kubernetes.io/ingress.class: old}}");
        assert_eq!(class_of(&old), Some("old"));
        assert_eq!(class_of(&ingress("metadata: {name: a}")), None);
    }

    #[test]
    fn the_serving_gateway_is_the_one_parent() {
        let i = ingress("metadata: {name: a, annotations: {edgeplane.dev/serving-gateway: ns/gw}}");
        let parents: Vec<_> = i.parent_refs().collect();
        assert_eq!(parents.len(), 1);
        assert_eq!((parents[0].namespace, parents[0].name), (Some("ns"), "gw"));
        assert_eq!(ingress("metadata: {name: a}").parent_refs().count(), 0);
    }
}
