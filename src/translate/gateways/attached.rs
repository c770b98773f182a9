//! The routes counted on one listener for its `attachedRoutes`: each route once, however many
//! of its parentRefs reach the listener. Pure.

/// A route as counted: its kind, namespace and name.
pub type RouteKey<'a> = (&'static str, &'a str, &'a str);

/// The routes counted on one listener. HTTP-like routes are counted in report order (kind,
/// namespace, name), where a route listed twice comes twice in a row, so they need only a
/// count and the last key, without hashing or a list: one hash or one list entry per route and
/// translation was a share of every small change at tens of thousands of routes. L4 routes
/// come in any order and go into a set. The two never share a key: a key names its kind, and
/// only L4 kinds are [`AttachedRoutes::insert`]ed.
#[derive(Debug, Default)]
pub struct AttachedRoutes<'a> {
    /// Distinct HTTP-like routes counted.
    in_order: usize,
    /// The last HTTP-like route counted.
    last: Option<RouteKey<'a>>,
    /// L4 routes.
    others: foldhash::HashSet<RouteKey<'a>>,
}

impl<'a> AttachedRoutes<'a> {
    /// Counts an HTTP-like route of a sequence in which equal keys are adjacent (report order).
    pub fn count_in_order(&mut self, key: RouteKey<'a>) {
        if self.last != Some(key) {
            self.in_order += 1;
            self.last = Some(key);
        }
    }

    /// Counts an L4 route, in any order.
    pub fn insert(&mut self, key: RouteKey<'a>) {
        self.others.insert(key);
    }

    /// How many distinct routes were counted.
    pub(in crate::translate) fn len(&self) -> usize {
        self.in_order + self.others.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_counts_once() {
        let mut a = AttachedRoutes::default();
        assert_eq!(a.len(), 0);
        for key in [
            ("HTTPRoute", "a", "r"),
            ("HTTPRoute", "a", "r"),
            ("HTTPRoute", "b", "r"),
        ] {
            a.count_in_order(key);
        }
        assert_eq!(a.len(), 2);
        a.insert(("TLSRoute", "a", "r"));
        a.insert(("TCPRoute", "a", "r"));
        a.insert(("TLSRoute", "a", "r"));
        assert_eq!(a.len(), 4);
        // The same route again, next to itself as report order puts it: counted once.
        a.count_in_order(("HTTPRoute", "b", "r"));
        assert_eq!(a.len(), 4);
        a.count_in_order(("GRPCRoute", "b", "r"));
        assert_eq!(a.len(), 5);
    }
}
