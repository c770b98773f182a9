//! Status assertions with the upstream suite's semantics (`conformance/utils/kubernetes/
//! helpers.go`): every check polls `/debug/status` (in Kubernetes mode the API objects) until it
//! holds or time runs out, and, as
//! upstream, first requires the conditions it reads to carry the object's latest generation.
//!
//! - Route parents (`parentsForRouteMatch`): each expected parent is matched by an entry with
//!   our `controllerName`, `parentRef.group` `gateway.networking.k8s.io`, `kind` `Gateway`, the
//!   name, the namespace (required when the route lives elsewhere, else absent or equal) and
//!   the expected conditions (a subset). Stricter than upstream, whose `parentsForRouteMatch`
//!   (v1.6.1) compares neither `sectionName` nor `port`: `sectionName` must be exactly the
//!   expected one (absent when the scenario expects none, present and equal when it expects
//!   one), and an expected `port` must be echoed.
//! - Listeners (`gatewayListenersMatch`): exactly the expected listeners by name, each with its
//!   `attachedRoutes`, its `supportedKinds` as a set, and the expected conditions.
//! - Conditions (`findConditionInList`): an empty status or reason matches any.

use std::time::Instant;

use edgeplane::status::StatusReport;
use edgeplane::translate::DEFAULT_CONTROLLER_NAME;
use serde_json::Value;

use crate::expect::{admin_get, Outcome, CONSISTENCY_TIMEOUT};
use crate::harness::Env;

/// The Gateway API group every expected parentRef and supported kind names.
const GROUP: &str = "gateway.networking.k8s.io";

/// An expected condition; `""` as status or reason matches any.
#[derive(Debug, Clone, Copy)]
pub struct Cond(pub &'static str, pub &'static str, pub &'static str);

/// The status of every object: the translator's, from `/debug/status`; in Kubernetes mode
/// what the API objects carry (written by the leader), with their `metadata.generation`.
pub async fn status(env: &Env) -> Result<StatusReport, String> {
    if let Some(kube) = &env.kube {
        return serde_json::from_value(kube.status_json())
            .map_err(|e| format!("status of the API objects: {e}"));
    }
    let r = admin_get(env.dashboard, "/debug/status").await?;
    serde_json::from_slice(&r.body).map_err(|e| format!("/debug/status: {e}"))
}

/// Polls `/debug/status` until `f` accepts it, within [`CONSISTENCY_TIMEOUT`].
pub async fn wait_status<F>(env: &Env, what: &str, f: F) -> Outcome
where
    F: Fn(&Report) -> Outcome,
{
    let deadline = Instant::now() + CONSISTENCY_TIMEOUT;
    loop {
        let last = match status(env).await {
            Ok(s) => f(&Report(s)),
            Err(e) => Err(e),
        };
        match last {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(format!("{what}: {e}")),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
}

/// A status report with lookups that explain what is missing.
pub struct Report(pub StatusReport);

impl Report {
    /// The status of `kind` `ns/name` and its generation.
    pub fn object(
        &self,
        kind: &str,
        ns: Option<&str>,
        name: &str,
    ) -> Result<(&Value, i64), String> {
        let o = self
            .0
            .get(kind.parse().map_err(|e| format!("{e}"))?, ns, name)
            .ok_or_else(|| format!("no status for {kind} {}/{name}", ns.unwrap_or("")))?;
        let status = o
            .status
            .as_json()
            .ok_or_else(|| format!("{kind} {name}: status not JSON"))?;
        Ok((status, o.generation.unwrap_or(0)))
    }

    pub fn class(&self, name: &str) -> Result<&Value, String> {
        self.object("GatewayClass", None, name).map(|o| o.0)
    }

    pub fn gateway(&self, ns: &str, name: &str) -> Result<&Value, String> {
        self.object("Gateway", Some(ns), name).map(|o| o.0)
    }

    /// A BackendTLSPolicy's status and generation.
    pub fn policy(&self, ns: &str, name: &str) -> Result<(&Value, i64), String> {
        self.object("BackendTLSPolicy", Some(ns), name)
    }

    pub fn route(&self, ns: &str, name: &str) -> Result<&Value, String> {
        self.route_object(ns, name).map(|o| o.0)
    }

    /// An HTTPRoute's status and generation, else a GRPCRoute's of that name: upstream checks
    /// route parents the same way for both kinds, and no fixture gives two routes one name.
    fn route_object(&self, ns: &str, name: &str) -> Result<(&Value, i64), String> {
        self.object("HTTPRoute", Some(ns), name)
            .or_else(|e| self.object("GRPCRoute", Some(ns), name).map_err(|_| e))
    }
}

fn items(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// `findConditionInList`: condition `ty` with `status` and `reason` (`""`: any).
pub fn cond(holder: &Value, ty: &str, status: &str, reason: &str) -> Outcome {
    let found: Vec<&Value> = items(&holder["conditions"])
        .filter(|c| c["type"] == ty)
        .collect();
    if found.is_empty() {
        return Err(format!("no {ty} condition in {}", holder["conditions"]));
    }
    if found.iter().any(|c| {
        (status.is_empty() || c["status"] == status) && (reason.is_empty() || c["reason"] == reason)
    }) {
        return Ok(());
    }
    let c = found[0];
    Err(format!(
        "{ty} is {}/{}, want {status}/{reason}: {}",
        c["status"], c["reason"], c["message"]
    ))
}

/// `conditionsMatch`: every expected condition is present.
pub fn conds(holder: &Value, expected: &[Cond]) -> Outcome {
    expected
        .iter()
        .try_for_each(|c| cond(holder, c.0, c.1, c.2))
}

/// `ConditionsHaveLatestObservedGeneration`: every condition in `holder` observed `generation`.
pub fn observed(holder: &Value, generation: i64) -> Outcome {
    for c in items(&holder["conditions"]) {
        if c["observedGeneration"] != generation {
            return Err(format!(
                "{} observedGeneration {}, want {generation}",
                c["type"], c["observedGeneration"]
            ));
        }
    }
    Ok(())
}

/// `GatewayClassMustHaveLatestConditions`, and the class's `Accepted` has `status` (`""`: any).
pub fn class_accepted(r: &Report, name: &str, status: &str) -> Outcome {
    let (c, generation) = r.object("GatewayClass", None, name)?;
    observed(c, generation)?;
    cond(c, "Accepted", status, "")
}

/// `GatewayMustHaveLatestConditions` plus `GatewayMustHaveCondition` for each of `expected`.
pub fn gateway_conditions(r: &Report, ns: &str, name: &str, expected: &[Cond]) -> Outcome {
    let (g, generation) = r.object("Gateway", Some(ns), name)?;
    observed(g, generation).map_err(|e| format!("Gateway {ns}/{name}: {e}"))?;
    conds(g, expected).map_err(|e| format!("Gateway {ns}/{name}: {e}"))
}

/// An expected `status.listeners[]` entry.
#[derive(Debug, Clone)]
pub struct Listener {
    pub name: &'static str,
    /// Supported route kinds (group `gateway.networking.k8s.io`), compared as a set.
    pub kinds: &'static [&'static str],
    pub attached: i64,
    pub conditions: Vec<Cond>,
}

impl Listener {
    /// A listener for HTTPRoutes with `attached` routes and the given conditions.
    pub fn http(name: &'static str, attached: i64, conditions: &[Cond]) -> Self {
        Self {
            name,
            kinds: &["HTTPRoute"],
            attached,
            conditions: conditions.to_vec(),
        }
    }

    /// A listener whose `allowedRoutes` names no kinds: it supports the default kinds of an
    /// HTTP or HTTPS listener, HTTPRoute and GRPCRoute. Upstream accepts any superset of the
    /// kinds it expects; the replay wants exactly the kinds edgeplane serves there.
    pub fn http_default_kinds(name: &'static str, attached: i64, conditions: &[Cond]) -> Self {
        Self {
            kinds: &["HTTPRoute", "GRPCRoute"],
            ..Self::http(name, attached, conditions)
        }
    }

    /// A listener that supports no route kind.
    pub fn no_kinds(name: &'static str, conditions: &[Cond]) -> Self {
        Self {
            name,
            kinds: &[],
            attached: 0,
            conditions: conditions.to_vec(),
        }
    }
}

/// `NamespacesMustBeReady` for one Gateway (Accepted and Programmed True at its latest
/// generation) and every listener accepted, resolved and programmed.
pub fn gateway_ready(r: &Report, ns: &str, gw: &str) -> Outcome {
    let ready = [Cond("Accepted", "True", ""), Cond("Programmed", "True", "")];
    gateway_conditions(r, ns, gw, &ready)?;
    listeners_ready(r, ns, gw)
}

/// `GatewayStatusMustHaveListeners`: latest generation, then exactly `expected` listeners.
pub fn gateway_listeners(r: &Report, ns: &str, gw: &str, expected: &[Listener]) -> Outcome {
    gateway_conditions(r, ns, gw, &[])?;
    listeners_exactly(&format!("Gateway {ns}/{gw}"), r.gateway(ns, gw)?, expected)
}

/// The `listeners[]` of a Gateway or ListenerSet status (`what` names it) are exactly
/// `expected`: names, `supportedKinds` as a set, `attachedRoutes` and conditions.
pub fn listeners_exactly(what: &str, status: &Value, expected: &[Listener]) -> Outcome {
    let owner = what;
    let actual: Vec<&Value> = items(&status["listeners"]).collect();
    if actual.len() != expected.len() {
        return Err(format!(
            "{owner}: {} listeners in status, want {}",
            actual.len(),
            expected.len()
        ));
    }
    for e in expected {
        let what = format!("{owner} listener {}", e.name);
        let l = actual
            .iter()
            .find(|l| l["name"] == e.name)
            .ok_or_else(|| format!("{what}: not in status"))?;
        let mut kinds: Vec<String> = items(&l["supportedKinds"])
            .map(|k| {
                let group = k["group"].as_str().unwrap_or(GROUP);
                format!("{group}/{}", k["kind"].as_str().unwrap_or(""))
            })
            .collect();
        kinds.sort();
        let mut want: Vec<String> = e.kinds.iter().map(|k| format!("{GROUP}/{k}")).collect();
        want.sort();
        if kinds != want {
            return Err(format!("{what}: supportedKinds {kinds:?}, want {want:?}"));
        }
        if l["attachedRoutes"] != e.attached {
            return Err(format!(
                "{what}: attachedRoutes {}, want {}",
                l["attachedRoutes"], e.attached
            ));
        }
        conds(l, &e.conditions).map_err(|err| format!("{what}: {err}"))?;
    }
    Ok(())
}

/// `GatewayListenersMustHaveConditions` as `GatewayAndRoutesMustBeAccepted` asks: every
/// listener `Accepted`, `ResolvedRefs` and `Programmed` True, any reason.
pub fn listeners_ready(r: &Report, ns: &str, gw: &str) -> Outcome {
    let status = r.gateway(ns, gw)?;
    for l in items(&status["listeners"]) {
        for ty in ["ResolvedRefs", "Accepted", "Programmed"] {
            cond(l, ty, "True", "").map_err(|e| format!("Gateway {ns}/{gw} {}: {e}", l["name"]))?;
        }
    }
    Ok(())
}

/// `GatewayMustHaveZeroRoutes`: no listener in status, or one with no attached route.
pub fn gateway_zero_routes(r: &Report, ns: &str, gw: &str) -> Outcome {
    gateway_conditions(r, ns, gw, &[])?;
    let listeners: Vec<&Value> = items(&r.gateway(ns, gw)?["listeners"]).collect();
    match listeners.as_slice() {
        [] => Ok(()),
        [l] if l["attachedRoutes"] == 0 => Ok(()),
        _ => Err(format!(
            "Gateway {ns}/{gw}: listeners {listeners:?}, want none or one with no routes"
        )),
    }
}

/// An expected `status.parents[]` entry of a route.
#[derive(Debug, Clone)]
pub struct Parent {
    /// `Gateway` or `ListenerSet`.
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub section: Option<&'static str>,
    pub port: Option<u16>,
    pub conditions: Vec<Cond>,
}

impl Parent {
    /// Gateway `ns/name` with the expected conditions.
    pub fn gateway(ns: &str, name: &str, conditions: &[Cond]) -> Self {
        Self {
            kind: "Gateway",
            namespace: ns.to_owned(),
            name: name.to_owned(),
            section: None,
            port: None,
            conditions: conditions.to_vec(),
        }
    }

    /// ListenerSet `ns/name` with the expected conditions.
    pub fn listener_set(ns: &str, name: &str, conditions: &[Cond]) -> Self {
        Self {
            kind: "ListenerSet",
            ..Self::gateway(ns, name, conditions)
        }
    }

    pub fn section(mut self, section: &'static str) -> Self {
        self.section = Some(section);
        self
    }

    /// Why `p` is not this parent, if it is not.
    fn mismatch(&self, p: &Value, namespace_required: bool) -> Option<String> {
        let r = &p["parentRef"];
        let field = |f: &str| r[f].as_str();
        if p["controllerName"] != DEFAULT_CONTROLLER_NAME {
            return Some(format!("controllerName {}", p["controllerName"]));
        }
        if field("group") != Some(GROUP) || field("kind") != Some(self.kind) {
            return Some(format!("parentRef group/kind {}/{}", r["group"], r["kind"]));
        }
        if field("name") != Some(self.name.as_str()) {
            return Some(format!("parentRef name {}", r["name"]));
        }
        let ns_ok = match field("namespace") {
            Some(ns) => ns == self.namespace,
            None => !namespace_required,
        };
        if !ns_ok {
            return Some(format!("parentRef namespace {}", r["namespace"]));
        }
        if field("sectionName") != self.section {
            return Some(format!(
                "parentRef sectionName {}, want {}",
                r["sectionName"],
                self.section.unwrap_or("none")
            ));
        }
        if self.port.is_some() && r["port"].as_u64() != self.port.map(u64::from) {
            return Some(format!("parentRef port {}", r["port"]));
        }
        conds(p, &self.conditions).err()
    }
}

/// The route's conditions in every parent carry its latest generation.
fn route_latest<'a>(r: &'a Report, ns: &str, route: &str) -> Result<Vec<&'a Value>, String> {
    let (status, generation) = r.route_object(ns, route)?;
    parents_at(status, generation, "route", ns, route)
}

/// [`route_latest`] for a route of `kind`.
fn route_latest_of<'a>(
    r: &'a Report,
    kind: &str,
    ns: &str,
    route: &str,
) -> Result<Vec<&'a Value>, String> {
    let (status, generation) = r.object(kind, Some(ns), route)?;
    parents_at(status, generation, kind, ns, route)
}

/// The `parents[]` of a route status, each checked to have observed `generation`.
fn parents_at<'a>(
    status: &'a Value,
    generation: i64,
    kind: &str,
    ns: &str,
    route: &str,
) -> Result<Vec<&'a Value>, String> {
    let parents: Vec<&Value> = items(&status["parents"]).collect();
    for p in &parents {
        observed(p, generation).map_err(|e| format!("{kind} {ns}/{route}: {e}"))?;
    }
    Ok(parents)
}

/// `HTTPRouteMustHaveParents` (`parentsForRouteMatch`).
pub fn route_parents(
    r: &Report,
    ns: &str,
    route: &str,
    expected: &[Parent],
    namespace_required: bool,
) -> Outcome {
    let parents = route_latest(r, ns, route)?;
    for e in expected {
        let why: Vec<String> = parents
            .iter()
            .map(|p| e.mismatch(p, namespace_required))
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default();
        if parents.is_empty() || !why.is_empty() {
            return Err(format!(
                "HTTPRoute {ns}/{route}: no parent matches {}/{} ({}): {parents:?}",
                e.namespace,
                e.name,
                why.join("; ")
            ));
        }
    }
    Ok(())
}

/// `HTTPRouteMustHaveCondition`: the parent naming Gateway `gw_ns/gw` (namespace absent or
/// equal) has the condition.
pub fn route_condition(
    r: &Report,
    ns: &str,
    route: &str,
    gw_ns: &str,
    gw: &str,
    c: Cond,
) -> Outcome {
    let parents = route_latest(r, ns, route)?;
    parent_condition(&parents, "route", ns, route, gw_ns, gw, c)
}

/// [`route_condition`] for a route of `kind` (`TLSRouteMustHaveCondition` and the like).
pub fn route_condition_of(
    r: &Report,
    kind: &str,
    ns: &str,
    route: &str,
    gw_ns: &str,
    gw: &str,
    c: Cond,
) -> Outcome {
    let parents = route_latest_of(r, kind, ns, route)?;
    parent_condition(&parents, kind, ns, route, gw_ns, gw, c)
}

/// A parent `gw_ns/gw` among `parents` carries `c`.
fn parent_condition(
    parents: &[&Value],
    kind: &str,
    ns: &str,
    route: &str,
    gw_ns: &str,
    gw: &str,
    c: Cond,
) -> Outcome {
    let mine: Vec<&&Value> = parents
        .iter()
        .filter(|p| {
            let pr = &p["parentRef"];
            pr["name"] == gw && pr["namespace"].as_str().is_none_or(|n| n == gw_ns)
        })
        .collect();
    if mine.iter().any(|p| cond(p, c.0, c.1, c.2).is_ok()) {
        return Ok(());
    }
    Err(format!(
        "{kind} {ns}/{route}: no parent {gw_ns}/{gw} with {c:?}: {parents:?}"
    ))
}

/// `HTTPRouteMustHaveNoAcceptedParents`: no parent, or one that is not accepted.
pub fn route_not_accepted(r: &Report, ns: &str, route: &str) -> Outcome {
    match route_latest(r, ns, route)?.as_slice() {
        [] => Ok(()),
        [p] => cond(p, "Accepted", "False", "").map_err(|e| format!("HTTPRoute {ns}/{route}: {e}")),
        more => Err(format!(
            "HTTPRoute {ns}/{route}: {} parents, want at most one",
            more.len()
        )),
    }
}

/// `GatewayAndHTTPRoutesMustBeAccepted` for Gateway `gw` (in the infra namespace) and each
/// route: the Gateway at its latest generation with an address, each route's parent accepted
/// (reason Accepted), every listener accepted, resolved and programmed.
pub fn routes_attached(r: &Report, gw: &str, routes: &[(&str, &str)]) -> Outcome {
    routes_attached_at(r, gw, &[], routes)
}

/// [`routes_attached`] with the Gateway named by listener, as upstream's
/// `NewGatewayRef(gw, sections...)`: one expected parent per section (one without
/// `sectionName` when `sections` is empty).
pub fn routes_attached_at(
    r: &Report,
    gw: &str,
    sections: &[&'static str],
    routes: &[(&str, &str)],
) -> Outcome {
    let infra = crate::INFRA;
    gateway_conditions(r, infra, gw, &[])?;
    if !items(&r.gateway(infra, gw)?["addresses"]).any(|a| a["type"].is_string()) {
        return Err(format!("Gateway {infra}/{gw} has no address"));
    }
    let accepted = Parent::gateway(infra, gw, &[Cond("Accepted", "True", "Accepted")]);
    let expected: Vec<Parent> = if sections.is_empty() {
        vec![accepted]
    } else {
        sections
            .iter()
            .map(|s| accepted.clone().section(s))
            .collect()
    };
    for (ns, route) in routes {
        route_parents(r, ns, route, &expected, *ns != infra)?;
    }
    listeners_ready(r, infra, gw)
}

/// [`routes_attached`], then `HTTPRouteMustHaveResolvedRefsConditionsTrue` for each route.
pub fn routes_accepted(r: &Report, gw: &str, routes: &[(&str, &str)]) -> Outcome {
    routes_accepted_at(r, gw, &[], routes)
}

/// [`routes_attached_at`], then `HTTPRouteMustHaveResolvedRefsConditionsTrue` for each route.
pub fn routes_accepted_at(
    r: &Report,
    gw: &str,
    sections: &[&'static str],
    routes: &[(&str, &str)],
) -> Outcome {
    let infra = crate::INFRA;
    routes_attached_at(r, gw, sections, routes)?;
    for (ns, route) in routes {
        route_condition(
            r,
            ns,
            route,
            infra,
            gw,
            Cond("ResolvedRefs", "True", "ResolvedRefs"),
        )?;
    }
    Ok(())
}

/// Waits for [`routes_accepted`] of route `ns/route` on each of `gateways`.
pub async fn accepted(env: &Env, ns: &str, route: &str, gateways: &[&str]) -> Outcome {
    wait_status(env, &format!("HTTPRoute {ns}/{route} accepted"), |r| {
        gateways
            .iter()
            .try_for_each(|gw| routes_accepted(r, gw, &[(ns, route)]))
    })
    .await
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
