//! The order the status report lists routes in (kind, namespace, name), carried from one
//! translation to the next: a snapshot lists routes in the order its provider keeps them (a
//! hash map's, in Kubernetes mode), and sorting thousands of names again on every change cost
//! a third of a translation. Only the routes that changed are placed again. Pure.

use crate::translate::common::changed::changed_middle;
use crate::translate::routes::http_like::{self, route_key, same_object, Source};
use crate::translate::Snapshot;

/// Route positions (those of [`http_like::sources`]) sorted by kind, namespace and name.
#[derive(Debug, Default)]
pub struct RouteOrder {
    /// The routes of the last translation, held so that comparing by pointer is sound.
    routes: Vec<Source>,
    sorted: Vec<usize>,
}

impl RouteOrder {
    /// The positions of `snapshot`'s routes in report order. Routes that are the same
    /// objects as last time keep their places; the others are placed by binary search, or,
    /// when many changed, everything is sorted again.
    pub fn of(&mut self, snapshot: &Snapshot) -> &[usize] {
        let now: Vec<Source> = http_like::sources(snapshot).map(|(_, r)| r).collect();
        let (start, old_end, new_end) = changed_middle(&self.routes, &now, same_object);
        if (new_end - start) * 8 > now.len() {
            let mut sorted: Vec<usize> = (0..now.len()).collect();
            // Stable: routes of one name (in no valid snapshot) stay in position order.
            sorted.sort_by(|&a, &b| route_key(&*now[a]).cmp(&route_key(&*now[b])));
            self.sorted = sorted;
        } else {
            // Positions behind the changed ones move by the difference in their number.
            self.sorted.retain_mut(|p| {
                if *p < start {
                    true
                } else if *p < old_end {
                    false
                } else {
                    *p = *p - old_end + new_end;
                    true
                }
            });
            for p in start..new_end {
                let key = (route_key(&*now[p]), p);
                let at = self
                    .sorted
                    .partition_point(|&q| (route_key(&*now[q]), q) < key);
                self.sorted.insert(at, p);
            }
        }
        self.routes = now;
        &self.sorted
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::kinds::httproute::HttpRoute;
    use gateway_api::apis::standard::grpcroutes::GrpcRoute;

    use super::*;

    fn http(ns: &str, name: &str) -> Arc<HttpRoute> {
        let v = serde_json::json!({"metadata": {"namespace": ns, "name": name},
            "spec": {"parentRefs": [{"name": "gw"}]}});
        Arc::new(serde_json::from_value(v).expect("route"))
    }

    fn grpc(ns: &str, name: &str) -> Arc<GrpcRoute> {
        let v = serde_json::json!({"metadata": {"namespace": ns, "name": name}, "spec": {}});
        Arc::new(serde_json::from_value(v).expect("route"))
    }

    /// After every change, the carried order is the one a fresh sort gives.
    #[test]
    fn carried_order_equals_a_fresh_sort() {
        let mut rng = fastrand::Rng::with_seed(11);
        let mut s = Snapshot::default();
        for i in 0..40 {
            s.http_routes
                .push(http(["a", "b"][i % 2], &format!("r{}", rng.u32(..1000))));
        }
        s.grpc_routes.push(grpc("a", "g1"));
        let mut carried = RouteOrder::default();
        for step in 0..300 {
            let n = s.http_routes.len();
            match rng.u8(..4) {
                0 => s
                    .http_routes
                    .insert(rng.usize(..=n), http("a", &format!("n{step}"))),
                1 if n > 1 => {
                    s.http_routes.remove(rng.usize(..n));
                }
                2 => s.http_routes[rng.usize(..n)] = http("b", &format!("m{}", rng.u32(..50))),
                _ => s.grpc_routes.push(grpc("b", &format!("g{step}"))),
            }
            if step % 50 == 0 {
                rng.shuffle(&mut s.http_routes);
            }
            let fresh = RouteOrder::default().of(&s).to_vec();
            assert_eq!(carried.of(&s), fresh.as_slice(), "step {step}");
        }
    }
}
