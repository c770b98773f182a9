//! The status of an Ingress: `status.loadBalancer.ingress`, the addresses of the Gateway
//! serving it (the one parent of its report entry), as IPs and hostnames (a wildcard bind
//! address left out). The report entry's
//! `parents[]` conditions are shown by `status` and `/debug/status` but not written: an
//! Ingress has no such field. An Ingress that stops being ours loses the value edgeplane
//! wrote ([`written_by_us`]). Pure.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::diff::StatusPatch;
use super::{ObjectKind, ObjectStatus, StatusBody};

/// Each Gateway's `status.addresses` of a report, as `loadBalancer.ingress` entries.
pub type GatewayAddresses = HashMap<(String, String), Vec<Value>>;

/// The `loadBalancer.ingress` entries of every Gateway of `entries`.
pub fn gateway_addresses<'a>(entries: impl Iterator<Item = &'a ObjectStatus>) -> GatewayAddresses {
    let mut out = GatewayAddresses::new();
    for e in entries.filter(|e| e.kind == ObjectKind::Gateway) {
        let Some(StatusBody::Gateway(status)) = e.status.typed(e.kind).as_deref().cloned() else {
            continue;
        };
        // A wildcard bind address (`0.0.0.0`, `::`) is no address a client can use.
        let unspecified = |v: &str| {
            v.parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_unspecified())
        };
        let addresses = status
            .addresses
            .iter()
            .flatten()
            .filter(|a| !unspecified(&a.value))
            .map(|a| match a.r#type.as_deref() {
                Some("Hostname") => json!({"hostname": a.value}),
                _ => json!({"ip": a.value}),
            });
        let key = (
            e.namespace.as_deref().unwrap_or_default().to_owned(),
            e.name.to_string(),
        );
        out.insert(key, addresses.collect());
    }
    out
}

/// The `loadBalancer.ingress` an Ingress's entry asks for: the addresses of the Gateways its
/// parents name, each once, in order.
pub fn load_balancer(entry: &ObjectStatus, gateways: &GatewayAddresses) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let Some(StatusBody::Route(status)) = entry.status.typed(entry.kind).as_deref().cloned() else {
        return out;
    };
    for p in &status.parents {
        let ns = p
            .parent_ref
            .namespace
            .clone()
            .or_else(|| entry.namespace.as_deref().map(str::to_owned))
            .unwrap_or_default();
        for a in gateways
            .get(&(ns, p.parent_ref.name.clone()))
            .into_iter()
            .flatten()
        {
            if !out.contains(a) {
                out.push(a.clone());
            }
        }
    }
    out
}

/// The message of the `Unsupported=True` condition of an Ingress's entry: what it asks for
/// that is not served, for the Event the leader records.
pub fn unsupported(entry: &ObjectStatus) -> Option<String> {
    let Some(StatusBody::Route(status)) = entry.status.typed(entry.kind).as_deref().cloned() else {
        return None;
    };
    let ty = super::conditions::ConditionType::Unsupported;
    let found = status.parents.iter().flat_map(|p| p.conditions.iter());
    found
        .into_iter()
        .find(|c| c.type_ == ty.as_str() && c.status == "True")
        .map(|c| c.message.clone())
}

/// The merge patch that makes an Ingress whose `status.loadBalancer.ingress` is `current`
/// carry `desired`; `None` when it does already (an absent list equals an empty one).
pub fn patch(current: Option<&Value>, desired: Vec<Value>) -> Option<StatusPatch> {
    let current: &[Value] = current.and_then(Value::as_array).map_or(&[], Vec::as_slice);
    if current == desired.as_slice() {
        return None;
    }
    Some(StatusPatch {
        body: json!({"status": {"loadBalancer": {"ingress": desired}}}),
        notable: Vec::new(),
    })
}

/// Whether `current`, the `status.loadBalancer.ingress` of an Ingress that is no longer
/// ours, is what edgeplane wrote there: the value last written for it (`written`, while this
/// replica leads), or the addresses of one of our Gateways (a new leader remembers nothing).
/// Only then is it cleared: another controller's value is left alone.
pub fn written_by_us(
    current: &[Value],
    written: Option<&Vec<Value>>,
    ours: &GatewayAddresses,
) -> bool {
    !current.is_empty()
        && (written.is_some_and(|w| w.as_slice() == current)
            || ours.values().any(|a| a.as_slice() == current))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::routes::RouteKindId;

    fn entry(kind: ObjectKind, ns: &str, name: &str, status: Value) -> ObjectStatus {
        let mut e = ObjectStatus::new(kind, Some(ns), name, Some(1), StatusBody::Json(status));
        if let Some(typed) = e.status.typed(kind).map(|b| b.into_owned()) {
            e.status = typed;
        }
        e
    }

    #[test]
    fn only_the_value_edgeplane_wrote_is_cleared() {
        let ours: GatewayAddresses = [(
            ("edgeplane:ingress".to_owned(), "web".to_owned()),
            vec![json!({"ip": "10.0.0.1"})],
        )]
        .into();
        let gateway = [json!({"ip": "10.0.0.1"})];
        let before = vec![json!({"ip": "10.0.0.9"})];
        assert!(written_by_us(&gateway, None, &ours));
        assert!(written_by_us(&before, Some(&before), &ours));
        assert!(!written_by_us(&before, None, &ours), "another controller's");
        assert!(
            !written_by_us(&[], Some(&before), &ours),
            "nothing to clear"
        );
    }

    #[test]
    fn an_ingress_gets_the_addresses_of_its_gateway_once() {
        let gw = entry(
            ObjectKind::Gateway,
            "edgeplane:ingress",
            "web",
            json!({"addresses": [{"type": "IPAddress", "value": "10.0.0.1"},
                                 {"type": "IPAddress", "value": "0.0.0.0"},
                                 {"type": "Hostname", "value": "lb.example"}]}),
        );
        let ing = entry(
            ObjectKind::Route(RouteKindId::Ingress),
            "apps",
            "shop",
            json!({"parents": [{"controllerName": "x/y", "conditions": [],
                "parentRef": {"namespace": "edgeplane:ingress", "name": "web"}}]}),
        );
        let addresses = gateway_addresses([&gw].into_iter());
        let lb = load_balancer(&ing, &addresses);
        assert_eq!(
            lb,
            vec![json!({"ip": "10.0.0.1"}), json!({"hostname": "lb.example"})]
        );
        let written = patch(None, lb.clone()).expect("a write");
        assert_eq!(written.status()["loadBalancer"]["ingress"], json!(lb));
        assert_eq!(
            patch(Some(&json!(lb.clone())), lb),
            None,
            "no write in a steady state"
        );
        assert_eq!(patch(None, Vec::new()), None);
        assert_eq!(unsupported(&ing), None);
    }
}
