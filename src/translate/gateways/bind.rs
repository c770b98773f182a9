//! The data plane's receipt on Gateway statuses: the translator computes every status as if
//! every socket binds; [`apply_bind_failures`] overlays the sockets the listener manager could
//! not bind, so `Programmed` is True only for what actually listens. Pure: the bind outcome is
//! an input, as the table is.

use std::collections::{BTreeMap, BTreeSet};

use foldhash::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use gateway_api::apis::standard::gateways::GatewayStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::snapshot::or_default_namespace;
use crate::status::{ObjectKind, StatusBody, StatusReport};
use crate::table::{ListenerTable, RouteTable};
use crate::translate::conditions::{bounded_message, ConditionType, Reason};

/// Marks, in `report`, what the sockets of `table` listed in `failures` (socket -> bind error)
/// carry: every Gateway listener placed on a failed socket gets `Programmed=False` (`Pending`:
/// valid, but not online; binds are retried), its Gateway `Programmed=False`
/// (`AddressNotUsable`, naming each socket and its error), and `status.addresses` loses each IP
/// on which none of the Gateway's sockets is bound (the spec lists only addresses bound to the
/// Gateway). Conditions the translator already set False keep their more basic reason; a
/// condition this changes keeps its `lastTransitionTime` and `observedGeneration`, so the usual
/// carry-over decides the time. With no failures the report is unchanged.
pub fn apply_bind_failures(
    report: &mut StatusReport,
    table: &RouteTable,
    failures: &BTreeMap<SocketAddr, String>,
) {
    overlay_failures(report, &table.listeners, failures);
}

/// [`apply_bind_failures`] for the UDP sockets of `table` that could not be bound.
pub fn apply_udp_bind_failures(
    report: &mut StatusReport,
    table: &RouteTable,
    failures: &BTreeMap<SocketAddr, String>,
) {
    overlay_failures(report, &table.udp, failures);
}

/// A socket and the listener of the object whose status is marked that is placed on it
/// (`None`: a ListenerSet listener on a Gateway's socket).
type Placed<'a> = (SocketAddr, Option<&'a str>);

fn overlay_failures(
    report: &mut StatusReport,
    sockets: &BTreeMap<SocketAddr, Arc<ListenerTable>>,
    failures: &BTreeMap<SocketAddr, String>,
) {
    if failures.is_empty() {
        return;
    }
    // Every socket of every Gateway, with the Gateway listener placed on it; and of every
    // ListenerSet, with its listener.
    // A Gateway's list holds the sockets of the ListenerSet listeners attached to it too
    // (named `None`: they are not its own listeners, but its addresses).
    let mut placed: HashMap<(&str, &str), Vec<Placed<'_>>> = HashMap::default();
    let mut placed_sets: HashMap<(&str, &str), Vec<Placed<'_>>> = HashMap::default();
    for (addr, listener) in sockets {
        for source in &listener.sources {
            let own = source
                .listener_set
                .is_none()
                .then_some(source.listener.as_str());
            placed
                .entry((&source.namespace, &source.gateway))
                .or_default()
                .push((*addr, own));
            if let Some((set_ns, set)) = &source.listener_set {
                placed_sets
                    .entry((set_ns, set))
                    .or_default()
                    .push((*addr, Some(&source.listener)));
            }
        }
    }
    for entry in &mut report.entries {
        if entry.kind == ObjectKind::ListenerSet {
            let ns = or_default_namespace(entry.namespace.as_deref());
            if let (Some(sockets), StatusBody::ListenerSet(status)) =
                (placed_sets.get(&(ns, &*entry.name)), &mut entry.status)
            {
                for l in status.listeners.iter_mut().flatten() {
                    mark_listener(&l.name, &mut l.conditions, sockets, failures);
                }
            }
            continue;
        }
        if entry.kind != ObjectKind::Gateway {
            continue;
        }
        let ns = or_default_namespace(entry.namespace.as_deref());
        let Some(sockets) = placed.get(&(ns, &*entry.name)) else {
            continue;
        };
        if !sockets.iter().any(|(a, _)| failures.contains_key(a)) {
            continue;
        }
        // The translator's statuses are typed; a JSON body is someone else's and stays as is.
        if let StatusBody::Gateway(status) = &mut entry.status {
            overlay(status, sockets, failures);
        }
    }
}

/// "ADDR (error), ADDR (error)" for the failed sockets among `addrs`.
fn describe<'a>(
    addrs: impl IntoIterator<Item = &'a SocketAddr>,
    failures: &BTreeMap<SocketAddr, String>,
) -> String {
    let mut seen = BTreeSet::new();
    addrs
        .into_iter()
        .filter(|a| seen.insert(**a))
        .filter_map(|a| failures.get(a).map(|e| format!("{a} ({e})")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `Programmed` condition, if it is True.
fn programmed_true(conditions: &mut [Condition]) -> Option<&mut Condition> {
    conditions
        .iter_mut()
        .find(|c| c.type_ == ConditionType::Programmed && c.status == "True")
}

fn set_false(c: &mut Condition, reason: Reason, message: String) {
    "False".clone_into(&mut c.status);
    reason.as_str().clone_into(&mut c.reason);
    c.message = bounded_message(message);
}

/// `Programmed=False` (`Pending`) on listener `name` when one of its sockets failed.
fn mark_listener(
    name: &str,
    conditions: &mut [Condition],
    sockets: &[Placed<'_>],
    failures: &BTreeMap<SocketAddr, String>,
) {
    let mine = sockets
        .iter()
        .filter(|(a, n)| *n == Some(name) && failures.contains_key(a))
        .map(|(a, _)| a);
    let what = describe(mine, failures);
    if what.is_empty() {
        return;
    }
    if let Some(c) = programmed_true(conditions) {
        set_false(
            c,
            Reason::Pending,
            format!("not listening on {what}; retrying"),
        );
    }
}

fn overlay(
    status: &mut GatewayStatus,
    sockets: &[Placed<'_>],
    failures: &BTreeMap<SocketAddr, String>,
) {
    let mut failed: Vec<&SocketAddr> = sockets
        .iter()
        .map(|(a, _)| a)
        .filter(|a| failures.contains_key(a))
        .collect();
    failed.sort();
    for l in status.listeners.iter_mut().flatten() {
        mark_listener(&l.name, &mut l.conditions, sockets, failures);
    }
    if let Some(c) = status.conditions.as_deref_mut().and_then(programmed_true) {
        set_false(
            c,
            Reason::AddressNotUsable,
            format!(
                "cannot listen on {}; binds are retried, so this clears once the address is \
                 assigned to this host and the port is free, or the address leaves spec.addresses",
                describe(failed.iter().copied(), failures)
            ),
        );
    }
    let bound_ips: BTreeSet<IpAddr> = sockets
        .iter()
        .filter(|(a, _)| !failures.contains_key(a))
        .map(|(a, _)| a.ip())
        .collect();
    let unusable: BTreeSet<IpAddr> = failed
        .iter()
        .map(|a| a.ip())
        .filter(|ip| !bound_ips.contains(ip))
        .collect();
    if let Some(addresses) = &mut status.addresses {
        addresses.retain(|a| {
            let is_ip = a.r#type.as_deref().unwrap_or("IPAddress") == "IPAddress";
            !(is_ip
                && a.value
                    .parse()
                    .is_ok_and(|ip: IpAddr| unusable.contains(&ip)))
        });
        if addresses.is_empty() {
            status.addresses = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::{testing, translate};

    fn translated(addresses: &str) -> crate::translate::Translation {
        let gw = |name: &str, port: u16| {
            format!(
                "metadata: {{name: {name}, namespace: ns, generation: 2}}\nspec:\n  \
                 gatewayClassName: c\n  addresses: {addresses}\n  listeners:\n  \
                 - {{name: http, port: {port}, protocol: HTTP}}\n  \
                 - {{name: alt, port: 81, protocol: HTTP}}\n"
            )
        };
        let snapshot = testing::snapshot(&[gw("a", 80), gw("b", 82)]);
        translate(&snapshot, &testing::options(Default::default()))
    }

    fn gateway(report: &StatusReport, name: &str) -> serde_json::Value {
        report
            .get(ObjectKind::Gateway, Some("ns"), name)
            .unwrap()
            .status
            .to_json()
            .into_owned()
    }

    #[test]
    fn a_failed_udp_socket_unprograms_only_the_udp_listener() {
        let gw =
            "metadata: {name: g, namespace: ns, generation: 1}\nspec:\n  gatewayClassName: c\n  \
                  addresses: [{value: 127.0.0.7}]\n  listeners:\n  \
                  - {name: tcp, port: 53, protocol: TCP}\n  \
                  - {name: udp, port: 53, protocol: UDP}\n";
        let t = translate(
            &testing::snapshot(&[gw.to_owned()]),
            &testing::options(Default::default()),
        );
        let failures: BTreeMap<SocketAddr, String> =
            [("127.0.0.7:53".parse().unwrap(), "in use".to_owned())].into();
        let mut report = t.status.clone();
        // The TCP socket of the same address and port bound: its failures are another map.
        apply_bind_failures(&mut report, &t.table, &BTreeMap::new());
        apply_udp_bind_failures(&mut report, &t.table, &failures);
        let g = gateway(&report, "g");
        let programmed = |l: usize| g["listeners"][l]["conditions"][1].clone();
        assert_eq!(
            programmed(0)["status"],
            "True",
            "TCP listener still programmed"
        );
        assert_eq!(
            (&programmed(1)["status"], &programmed(1)["reason"]),
            (&"False".into(), &"Pending".into())
        );
        assert_eq!(g["conditions"][1]["reason"], "AddressNotUsable");
    }

    #[test]
    fn failed_sockets_unprogram_their_listeners_gateway_and_address() {
        let t = translated("[{value: 192.0.2.10}, {value: 127.0.0.7}]");
        let untouched = t.status.clone();
        let mut report = t.status.clone();
        apply_bind_failures(&mut report, &t.table, &BTreeMap::new());
        assert_eq!(report, untouched, "no failures, no change");

        let failures: BTreeMap<SocketAddr, String> = [
            ("192.0.2.10:80".parse().unwrap(), "os error 99".to_owned()),
            ("192.0.2.10:81".parse().unwrap(), "os error 99".to_owned()),
        ]
        .into();
        apply_bind_failures(&mut report, &t.table, &failures);
        let a = gateway(&report, "a");
        let programmed = &a["conditions"][1];
        assert_eq!(programmed["type"], "Programmed");
        assert_eq!(programmed["status"], "False");
        assert_eq!(programmed["reason"], "AddressNotUsable");
        let message = programmed["message"].as_str().unwrap();
        assert!(
            message.contains("192.0.2.10:80 (os error 99)")
                && message.contains("192.0.2.10:81 (os error 99)"),
            "{message}"
        );
        assert_eq!(programmed["observedGeneration"], 2);
        assert_eq!(programmed["lastTransitionTime"], "2026-01-01T00:00:00Z");
        for l in 0..2 {
            let c = &a["listeners"][l]["conditions"][1];
            assert_eq!(
                (&c["type"], &c["status"]),
                (&"Programmed".into(), &"False".into())
            );
            assert_eq!(c["reason"], "Pending");
        }
        assert_eq!(
            a["addresses"],
            serde_json::json!([{"type": "IPAddress", "value": "127.0.0.7"}]),
            "only bound addresses are listed"
        );
        assert_eq!(a["conditions"][0]["status"], "True", "Accepted unchanged");
        // Gateway b shares 192.0.2.10:81 (listener alt) but its port 82 is fine there.
        let b = gateway(&report, "b");
        assert_eq!(b["conditions"][1]["reason"], "AddressNotUsable");
        assert_eq!(b["listeners"][0]["conditions"][1]["status"], "True");
        assert_eq!(b["listeners"][1]["conditions"][1]["reason"], "Pending");
        assert_eq!(b["addresses"].as_array().unwrap().len(), 2);
        let problems: Vec<String> = report.problems().iter().map(|p| p.object.clone()).collect();
        assert!(
            problems.contains(&"Gateway ns/a".to_owned()),
            "{problems:?}"
        );
        assert!(problems.contains(&"Gateway ns/b listener alt".to_owned()));
    }

    #[test]
    fn gateways_without_failed_sockets_are_untouched() {
        let t = translated("[{type: Hostname, value: a.example}]");
        let mut report = t.status.clone();
        let failures = [("127.0.0.9:80".parse().unwrap(), "in use".to_owned())].into();
        apply_bind_failures(&mut report, &t.table, &failures);
        assert_eq!(report, t.status, "a Gateway without sockets is not touched");
    }
}
