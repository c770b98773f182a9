//! Ingresses as route input: which Ingresses are ours and which Gateway serves them. Before
//! the stages run, [`prepare`] turns a snapshot holding Ingresses into the snapshot the stages
//! translate: only our Ingresses, each a working copy naming its serving Gateway
//! ([`crate::kinds::ingress::SERVING_GATEWAY`]) with its Service port names resolved; the
//! implicit Gateway of each IngressClass (`gateway`) unless `--ingress-gateway` names one; and
//! what each Ingress asks for that is not served ([`IngressProblems`]), which becomes its
//! `Unsupported` condition; `ssl-passthrough` hosts get TLS Passthrough listeners on the
//! implicit Gateway and TLSRoutes in the L4 pass ([`passthrough`]). Pure.

pub mod alias;
pub mod annotations;
pub mod app_root;
pub mod canary;
pub mod fallback;
mod gateway;
pub mod headers;
pub mod passthrough;
pub mod regex;
pub mod server_snippet;
pub mod upstream;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::kinds::httproute::{HttpRouteStatusParents, HttpRouteStatusParentsParentRef};
use k8s_openapi::api::networking::v1::{
    Ingress, IngressBackend, IngressClass, IngressServiceBackend,
};

use crate::kinds::ingress::{class_of, is_default_class, SERVING_GATEWAY};
use crate::kinds::routes::{RouteKindId, RouteStatus};
use crate::snapshot::{find_named, namespace_of, Snapshot};
use crate::status::conditions::{ConditionType, Reason, Stamp};
use crate::status::{ObjectKind, ObjectStatus, StatusBody, StatusReport};
use crate::translate::TranslateOptions;

pub use gateway::{is_implicit, IMPLICIT_CLASS, IMPLICIT_NAMESPACE, NO_CLASS};

/// The host of Ingress rules without one: the catch-all virtual host.
pub const ANY_HOST: &str = "*";

/// Which Ingresses are ours and which Gateway serves them (the `serve` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressOptions {
    /// `spec.controller` of our IngressClasses.
    pub controller: String,
    /// `--ingress-gateway`: the `(namespace, name)` of the Gateway serving every Ingress of
    /// ours, instead of the implicit Gateway of each class.
    pub gateway: Option<(String, String)>,
    /// `--watch-ingress-without-class`: Ingresses naming no class are ours even without a
    /// default IngressClass of ours.
    pub without_class: bool,
    /// ingress-nginx's path quirks (`--no-ingress-quirk` turns one off).
    pub quirks: regex::Quirks,
}

impl Default for IngressOptions {
    fn default() -> Self {
        Self {
            controller: crate::kinds::ingress::INGRESS_CONTROLLER.to_owned(),
            gateway: None,
            without_class: false,
            quirks: regex::Quirks::default(),
        }
    }
}

/// What each of our Ingresses asks for that is not served, by `(namespace, name)`.
pub type IngressProblems = BTreeMap<(String, String), Vec<String>>;

/// The snapshot the stages translate when the input holds Ingresses.
#[derive(Debug)]
pub struct Prepared {
    pub snapshot: Snapshot,
    pub problems: IngressProblems,
}

/// The class each Ingress of ours belongs to, `None` for the others.
fn our_class<'s>(
    ingress: &'s Ingress,
    ours: &[&'s IngressClass],
    options: &IngressOptions,
) -> Option<&'s str> {
    let name = |c: &&'s IngressClass| c.metadata.name.as_deref().unwrap_or("");
    match class_of(ingress) {
        Some(class) => ours.iter().map(name).find(|n| *n == class),
        None => match ours.iter().find(|c| is_default_class(c)) {
            Some(default) => Some(name(default)),
            None if options.without_class => Some(ours.first().map_or(NO_CLASS, name)),
            None => None,
        },
    }
}

/// The snapshot with our Ingresses prepared and their Gateways added; `None` when the
/// snapshot holds no Ingress (nothing to do, nothing copied).
pub fn prepare(snapshot: &Snapshot, options: &TranslateOptions) -> Option<Prepared> {
    if snapshot.ingresses.is_empty() {
        return None;
    }
    let io = &options.ingress;
    let mut ours: Vec<&IngressClass> = snapshot
        .ingress_classes
        .iter()
        .filter(|c| c.spec.as_ref().and_then(|s| s.controller.as_deref()) == Some(&io.controller))
        .map(|c| &**c)
        .collect();
    ours.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut out = snapshot.clone();
    let mut problems = IngressProblems::new();
    let mut by_class: BTreeMap<&str, Vec<Arc<Ingress>>> = BTreeMap::new();
    out.ingresses.clear();
    let classes = snapshot
        .ingresses
        .iter()
        .filter_map(|i| Some((our_class(i, &ours, io)?, &**i)));
    let aliases = alias::of(classes.clone());
    let server_snippets = server_snippet::of(classes.clone());
    let class_hosts: BTreeMap<&str, std::collections::BTreeSet<String>> =
        classes.clone().fold(BTreeMap::new(), |mut m, (c, i)| {
            let hosts = i.spec.iter().flat_map(|s| s.rules.iter().flatten());
            let e: &mut std::collections::BTreeSet<String> = m.entry(c).or_default();
            e.extend(hosts.filter_map(|r| r.host.clone()));
            m
        });
    let mut forced = regex::forced_hosts(classes, &io.quirks);
    if io.quirks.server_annotations_from_oldest {
        alias::force_aliases(&mut forced, &aliases);
    }
    let unserved = io
        .gateway
        .as_ref()
        .and_then(|(ns, name)| gateway_not_ours(snapshot, ns, name, &options.controller_name));
    let mut copies: Vec<canary::Copy<'_>> = Vec::new();
    // What each copy's backend annotations ask for, by the index of its copy.
    let mut upstreams: Vec<upstream::Upstream> = Vec::new();
    for ingress in &snapshot.ingresses {
        let Some(class) = our_class(ingress, &ours, io) else {
            continue;
        };
        let (gw_ns, gw_name) = match &io.gateway {
            Some((ns, name)) => (ns.clone(), name.clone()),
            None => (IMPLICIT_NAMESPACE.to_owned(), class.to_owned()),
        };
        let mut copy = (**ingress).clone();
        copy.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(SERVING_GATEWAY.to_owned(), format!("{gw_ns}/{gw_name}"));
        let from_oldest = io.quirks.server_annotations_from_oldest;
        let mut found = alias::apply(&mut copy, class, &aliases, from_oldest);
        found.extend(server_snippet::apply(
            &mut copy,
            class,
            &server_snippets,
            from_oldest,
        ));
        regex::mark(&mut copy, class, &forced, &io.quirks);
        if let Some(hosts) = class_hosts.get(class) {
            alias::www_redirects(&mut copy, hosts);
        }
        headers::resolve(snapshot, &mut copy, &mut found);
        // Read once: the problems now, the backend settings for `upstream::apply` below.
        let parsed = annotations::Annotations::parse(&copy);
        found.extend(parsed.problems);
        upstreams.push(parsed.upstream);
        found.extend(unsupported(&copy));
        found.extend(unserved.clone());
        resolve_port_names(snapshot, &mut copy, &mut found);
        fallback::apply(snapshot, &mut copy, &mut found);
        found.extend(passthrough::targets(&copy).1);
        found.extend(passthrough::http_only(&copy));
        copies.push((class, copy, found));
    }
    canary::fold(&mut copies);
    app_root::mark(&mut copies);
    for ((class, copy, mut found), wanted) in copies.into_iter().zip(upstreams) {
        upstream::apply(&mut out, &copy, &wanted, &mut found);
        let copy = Arc::new(copy);
        let key = (
            namespace_of(&copy.metadata).to_owned(),
            copy.metadata.name.clone().unwrap_or_default(),
        );
        if !found.is_empty() {
            problems.entry(key).or_default().extend(found);
        }
        out.ingresses.push(copy.clone());
        by_class.entry(class).or_default().push(copy);
    }
    if io.gateway.is_none() {
        gateway::add_implicit(&mut out, &by_class, options, &mut problems);
    }
    Some(Prepared {
        snapshot: out,
        problems,
    })
}

/// Why the `--ingress-gateway` Gateway `ns/name` cannot serve Ingresses (it does not exist,
/// or its GatewayClass is not of `controller`), `None` when it can.
fn gateway_not_ours(snapshot: &Snapshot, ns: &str, name: &str, controller: &str) -> Option<String> {
    let gateway = find_named(&snapshot.gateways, ns, name);
    let Some(gateway) = gateway else {
        return Some(format!(
            "--ingress-gateway {ns}/{name}: no such Gateway, so the Ingress is not served"
        ));
    };
    let class = gateway.spec.gateway_class_name.as_str();
    let ours = snapshot
        .gateway_classes
        .iter()
        .any(|c| c.metadata.name.as_deref() == Some(class) && c.spec.controller_name == controller);
    (!ours).then(|| {
        format!(
            "--ingress-gateway {ns}/{name}: its GatewayClass {class:?} is not one of ours \
             (controllerName {controller}), so the Ingress is not served"
        )
    })
}

/// What an Ingress asks for that is never served beside its annotations (whose problems
/// [`annotations::Annotations::parse`] gives): resource backends, path types other than the
/// three.
fn unsupported(ingress: &Ingress) -> Vec<String> {
    let mut out = Vec::new();
    let Some(spec) = ingress.spec.as_ref() else {
        return out;
    };
    let mut backends: Vec<&IngressBackend> = spec.default_backend.iter().collect();
    for rule in spec.rules.iter().flatten() {
        for path in rule.http.iter().flat_map(|h| h.paths.iter()) {
            backends.push(&path.backend);
            let t = path.path_type.as_str();
            if !matches!(t, "Exact" | "Prefix" | "ImplementationSpecific") {
                out.push(format!("pathType {t:?} is not one of Exact, Prefix, ImplementationSpecific (taken as Prefix)"));
            }
        }
    }
    for b in backends {
        if let Some(r) = &b.resource {
            out.push(format!(
                "resource backend {} {} is refused: only Service backends are served",
                r.kind, r.name
            ));
        }
    }
    out
}

/// Every Service backend of `ingress`, its default backend first, then its rules' paths in
/// order: what preparing an Ingress rewrites in its working copy.
fn service_backends_mut(ingress: &mut Ingress) -> impl Iterator<Item = &mut IngressServiceBackend> {
    let spec = ingress.spec.as_mut();
    let (default, rules) = match spec {
        Some(spec) => (spec.default_backend.as_mut(), spec.rules.as_mut()),
        None => (None, None),
    };
    let paths = rules
        .into_iter()
        .flatten()
        .flat_map(|r| r.http.iter_mut().flat_map(|h| h.paths.iter_mut()))
        .map(|p| &mut p.backend);
    default
        .into_iter()
        .chain(paths)
        .filter_map(|backend| backend.service.as_mut())
}

/// Replaces each Service port given by name with its number, read from the Service; a name
/// the Service does not have (or a missing Service) is left, and reported.
fn resolve_port_names(snapshot: &Snapshot, ingress: &mut Ingress, found: &mut Vec<String>) {
    let ns = namespace_of(&ingress.metadata).to_owned();
    for service in service_backends_mut(ingress) {
        let Some(port) = service.port.as_mut().filter(|p| p.number.is_none()) else {
            continue;
        };
        let Some(name) = port.name.as_deref() else {
            continue;
        };
        let number = find_named(&snapshot.services, &ns, &service.name)
            .and_then(|s| {
                s.spec
                    .as_ref()?
                    .ports
                    .as_ref()?
                    .iter()
                    .find(|p| p.name.as_deref() == Some(name))
            })
            .map(|p| p.port);
        match number {
            Some(n) => port.number = Some(n),
            None => found.push(format!(
                "Service {ns}/{} has no port named {name:?}",
                service.name
            )),
        }
    }
}

/// Adds each Ingress's problems to its status as an `Unsupported=True` condition on each of
/// its parents, so `status`, `/debug/status`, the problem log and the Events name them. An
/// Ingress of ours with problems and no entry (its `--ingress-gateway` Gateway is missing or
/// not ours, so nothing attached it) gets one, its parent that Gateway, not `Accepted`.
pub fn report_problems(
    problems: &IngressProblems,
    ingresses: &[Arc<Ingress>],
    options: &TranslateOptions,
    report: &mut StatusReport,
) {
    if problems.is_empty() {
        return;
    }
    let reported: std::collections::BTreeSet<(String, String)> = report
        .entries
        .iter()
        .filter(|e| e.kind == ObjectKind::Route(RouteKindId::Ingress))
        .map(|e| {
            let ns = e.namespace.as_deref().unwrap_or_default();
            (ns.to_owned(), e.name.to_string())
        })
        .collect();
    let missing: Vec<&Arc<Ingress>> = ingresses
        .iter()
        .filter(|i| {
            let key = (
                namespace_of(&i.metadata).to_owned(),
                i.metadata.name.clone().unwrap_or_default(),
            );
            problems.contains_key(&key) && !reported.contains(&key)
        })
        .collect();
    for i in missing {
        let Some((gw_ns, gw_name)) = i
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SERVING_GATEWAY))
            .and_then(|g| g.split_once('/'))
        else {
            continue;
        };
        let stamp = Stamp {
            generation: i.metadata.generation,
            now: options.now,
        };
        let parent = HttpRouteStatusParents {
            conditions: vec![stamp.fail(
                ConditionType::Accepted,
                Reason::NoMatchingParent,
                format!("Gateway {gw_ns}/{gw_name} is not a Gateway of ours"),
            )],
            controller_name: options.controller_name.clone(),
            parent_ref: HttpRouteStatusParentsParentRef {
                group: Some("gateway.networking.k8s.io".to_owned()),
                kind: Some("Gateway".to_owned()),
                name: gw_name.to_owned(),
                namespace: Some(gw_ns.to_owned()),
                port: None,
                section_name: None,
            },
        };
        report.entries.push(ObjectStatus::new(
            ObjectKind::Route(RouteKindId::Ingress),
            Some(namespace_of(&i.metadata)),
            i.metadata.name.as_deref().unwrap_or(""),
            i.metadata.generation,
            StatusBody::Route(Arc::new(RouteStatus {
                parents: vec![parent],
            })),
        ));
    }
    for entry in &mut report.entries {
        if entry.kind != ObjectKind::Route(RouteKindId::Ingress) {
            continue;
        }
        let key = (
            entry.namespace.as_deref().unwrap_or_default().to_owned(),
            entry.name.to_string(),
        );
        let Some(found) = problems.get(&key) else {
            continue;
        };
        let StatusBody::Route(status) = &mut entry.status else {
            continue;
        };
        let stamp = Stamp {
            generation: entry.generation,
            now: options.now,
        };
        let condition = stamp.condition(
            ConditionType::Unsupported,
            true,
            Reason::UnsupportedValue,
            found.join("; "),
        );
        for parent in &mut Arc::make_mut(status).parents {
            parent.conditions.retain(|c| c.type_ != condition.type_);
            parent.conditions.push(condition.clone());
        }
    }
}

#[cfg(test)]
#[path = "passthrough_tests.rs"]
mod passthrough_tests;
#[cfg(test)]
#[path = "policy_tests.rs"]
mod policy_tests;
#[cfg(test)]
#[path = "tests.rs"]
mod tests;
