//! What a resolved Service port carries besides its address: its endpoints by condition (ready,
//! or terminating but still serving) from the EndpointSlices, and the balancer its annotations
//! choose. Pure.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::table::{Balance, HashOn};

/// Annotation choosing a Service's balancer: `least-request` (default), `round-robin` or
/// `consistent-hash`.
pub const LOAD_BALANCER_ANNOTATION: &str = "edgeplane.io/load-balancer";
/// Annotation naming what `consistent-hash` hashes: `header:<name>`, `cookie:<name>`,
/// `query:<name>`, `source-ip`, `path` or `path-and-query`.
pub const HASH_ON_ANNOTATION: &str = "edgeplane.io/hash-on";

/// The balancer the Service's annotations choose. An unknown or incomplete choice (an unknown
/// balancer, `consistent-hash` without a valid `hash-on`) is the default: the translator is
/// pure and Services carry no status to report it in.
pub fn balance_of(service: &Service) -> Balance {
    let annotations = service.metadata.annotations.as_ref();
    let get = |k: &str| annotations.and_then(|a| a.get(k)).map(|v| v.trim());
    match get(LOAD_BALANCER_ANNOTATION) {
        Some("round-robin") => Balance::RoundRobin,
        Some("consistent-hash") => get(HASH_ON_ANNOTATION)
            .and_then(hash_on)
            .map_or(Balance::LeastRequest, |on| Balance::ConsistentHash { on }),
        _ => Balance::LeastRequest,
    }
}

/// Parses an `edgeplane.io/hash-on` value.
fn hash_on(value: &str) -> Option<HashOn> {
    match value {
        "source-ip" => return Some(HashOn::SourceIp),
        "path" => return Some(HashOn::Path),
        "path-and-query" => return Some(HashOn::PathAndQuery),
        _ => {}
    }
    let (kind, name) = value.split_once(':')?;
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    match kind.trim() {
        "header" => http::HeaderName::from_bytes(name.as_bytes())
            .ok()
            .map(|h| HashOn::Header(h.as_str().to_owned())),
        "cookie" => Some(HashOn::Cookie(name.to_owned())),
        "query" => Some(HashOn::Query(name.to_owned())),
        _ => None,
    }
}

/// Endpoint addresses of the Service port, from the slice port with the same name (which is
/// how a named `targetPort` resolves), sorted and deduplicated: the ready ones, and the
/// terminating ones still serving (`serving: true, terminating: true`), which take requests
/// only while none is ready so a rolling update drains instead of failing.
pub fn serving_endpoints(
    slices: &[Arc<EndpointSlice>],
    port: &ServicePort,
) -> (Vec<SocketAddr>, Vec<SocketAddr>) {
    let want = port.name.as_deref().unwrap_or("");
    let mut out = Vec::new();
    let mut draining = Vec::new();
    for slice in slices {
        let slice_port = slice
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref().unwrap_or("") == want)
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok());
        let Some(target) = slice_port else { continue };
        for ep in &slice.endpoints {
            let cond = ep.conditions.as_ref();
            let ready = cond.and_then(|c| c.ready).unwrap_or(true);
            let terminating = cond.and_then(|c| c.terminating).unwrap_or(false);
            // `serving` unset: as old API servers do, it follows `ready`.
            let serving = cond.and_then(|c| c.serving).unwrap_or(ready);
            let into = match (ready && !terminating, terminating && serving) {
                (true, _) => &mut out,
                (false, true) => &mut draining,
                (false, false) => continue,
            };
            into.extend(
                ep.addresses
                    .iter()
                    .filter_map(|a| a.parse::<IpAddr>().ok())
                    .map(|ip| SocketAddr::new(ip, target)),
            );
        }
    }
    out.sort();
    out.dedup();
    draining.sort();
    draining.dedup();
    // An address both ready (in one slice) and draining (in another) is ready.
    draining.retain(|a| out.binary_search(a).is_err());
    (out, draining)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};

    fn endpoint(ip: &str, ready: Option<bool>, terminating: Option<bool>) -> Endpoint {
        serving(ip, ready, None, terminating)
    }

    fn serving(
        ip: &str,
        ready: Option<bool>,
        serving: Option<bool>,
        terminating: Option<bool>,
    ) -> Endpoint {
        Endpoint {
            addresses: vec![ip.into()],
            conditions: Some(EndpointConditions {
                ready,
                terminating,
                serving,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn terminating_endpoints_that_still_serve_are_kept_apart() {
        let slice = Arc::new(EndpointSlice {
            address_type: "IPv4".into(),
            endpoints: vec![
                serving("10.0.0.1", Some(true), Some(true), Some(false)),
                serving("10.0.0.2", Some(false), Some(true), Some(true)),
                serving("10.0.0.3", Some(false), Some(false), Some(true)),
                serving("10.0.0.4", Some(false), Some(false), Some(false)),
                serving("10.0.0.5", Some(false), None, Some(true)),
            ],
            ports: Some(vec![EndpointPort {
                port: Some(8080),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let port = ServicePort {
            port: 80,
            ..Default::default()
        };
        let (ready, draining) = serving_endpoints(&[slice], &port);
        let addr = |s: &str| -> SocketAddr { s.parse().unwrap() };
        assert_eq!(ready, vec![addr("10.0.0.1:8080")]);
        assert_eq!(draining, vec![addr("10.0.0.2:8080")]);
    }

    #[test]
    fn annotations_choose_the_balancer() {
        let svc = |pairs: &[(&str, &str)]| {
            let mut s = Service::default();
            s.metadata.annotations = Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
            s
        };
        let lb = LOAD_BALANCER_ANNOTATION;
        let on = HASH_ON_ANNOTATION;
        assert_eq!(balance_of(&Service::default()), Balance::LeastRequest);
        assert_eq!(
            balance_of(&svc(&[(lb, "round-robin")])),
            Balance::RoundRobin
        );
        assert_eq!(
            balance_of(&svc(&[(lb, "consistent-hash"), (on, "header:X-User")])),
            Balance::ConsistentHash {
                on: HashOn::Header("x-user".into())
            }
        );
        assert_eq!(
            balance_of(&svc(&[(lb, "consistent-hash"), (on, "cookie:sid")])),
            Balance::ConsistentHash {
                on: HashOn::Cookie("sid".into())
            }
        );
        assert_eq!(
            balance_of(&svc(&[(lb, "consistent-hash"), (on, "query:user")])),
            Balance::ConsistentHash {
                on: HashOn::Query("user".into())
            }
        );
        assert_eq!(
            balance_of(&svc(&[(lb, "consistent-hash"), (on, "source-ip")])),
            Balance::ConsistentHash {
                on: HashOn::SourceIp
            }
        );
        for (value, want) in [
            ("path", HashOn::Path),
            ("path-and-query", HashOn::PathAndQuery),
        ] {
            assert_eq!(
                balance_of(&svc(&[(lb, "consistent-hash"), (on, value)])),
                Balance::ConsistentHash { on: want },
                "{value}"
            );
        }
        // Invalid choices fall back to the default.
        for bad in [
            vec![(lb, "fastest")],
            vec![(lb, "consistent-hash")],
            vec![(lb, "consistent-hash"), (on, "header:")],
            vec![(lb, "consistent-hash"), (on, "query:")],
            vec![(lb, "consistent-hash"), (on, "header:bad name")],
            vec![(lb, "consistent-hash"), (on, "path:x")],
        ] {
            assert_eq!(balance_of(&svc(&bad)), Balance::LeastRequest, "{bad:?}");
        }
    }

    #[test]
    fn endpoints_follow_port_names_and_readiness() {
        let slice = EndpointSlice {
            address_type: "IPv4".into(),
            endpoints: vec![
                endpoint("10.0.0.2", Some(true), None),
                endpoint("10.0.0.1", None, None),
                endpoint("10.0.0.3", Some(false), None),
                endpoint("10.0.0.4", Some(true), Some(true)),
                endpoint("not-an-ip", Some(true), None),
            ],
            ports: Some(vec![
                EndpointPort {
                    name: Some("http".into()),
                    port: Some(8080),
                    ..Default::default()
                },
                EndpointPort {
                    name: Some("admin".into()),
                    port: Some(9000),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        };
        let port = ServicePort {
            name: Some("http".into()),
            port: 80,
            ..Default::default()
        };
        let slice = Arc::new(slice);
        let got = serving_endpoints(std::slice::from_ref(&slice), &port).0;
        let want: Vec<SocketAddr> = vec![
            "10.0.0.1:8080".parse().unwrap(),
            "10.0.0.2:8080".parse().unwrap(),
        ];
        assert_eq!(got, want);
        let unnamed = ServicePort {
            port: 80,
            ..Default::default()
        };
        assert!(serving_endpoints(&[slice], &unnamed).0.is_empty());
    }
}
