//! The routes counted on one listener for its `attachedRoutes`: each route once, however many
//! of its parentRefs reach the listener. Pure.

/// A route as counted: its kind, namespace and name.
pub type RouteKey<'a> = (&'static str, &'a str, &'a str);

/// The routes counted on one listener. HTTP-like routes are counted in report order (kind,
/// namespace, name), where a route listed twice comes twice in a row, so they are kept in a
/// list without hashing: one hash per route and translation was a share of every small change
/// at tens of thousands of routes. L4 routes come in any order and go into a set.
#[derive(Debug, Default)]
pub struct AttachedRoutes<'a> {
    /// HTTP-like routes, distinct, in the order they were counted.
    ordered: Vec<RouteKey<'a>>,
    /// Every other route.
    others: foldhash::HashSet<RouteKey<'a>>,
}

impl<'a> AttachedRoutes<'a> {
    /// Counts a route of a sequence in which equal keys are adjacent (report order).
    pub fn count_in_order(&mut self, key: RouteKey<'a>) {
        if self.ordered.last() == Some(&key) || self.others.contains(&key) {
            return;
        }
        self.ordered.push(key);
    }

    /// Counts a route, in any order.
    pub fn insert(&mut self, key: RouteKey<'a>) {
        // A listener of L4 routes counts no HTTP-like ones: the scan is over an empty list.
        if !self.ordered.contains(&key) {
            self.others.insert(key);
        }
    }

    /// How many distinct routes were counted.
    pub(in crate::translate) fn len(&self) -> usize {
        self.ordered.len() + self.others.len()
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
        a.insert(("TLSRoute", "a", "r"));
        a.insert(("TLSRoute", "a", "r"));
        a.insert(("HTTPRoute", "b", "r"));
        assert_eq!(a.len(), 3);
        a.count_in_order(("TLSRoute", "a", "r"));
        assert_eq!(a.len(), 3);
    }
}
