//! The Gateway API precedence order of one host's rules: the comparator, and the sort a
//! virtual host is built with, which reads each rule's match once into a key of integers
//! instead of following every compared rule's `Arc` into its match and route name. Pure.

use std::cmp::{Ordering, Reverse};
use std::sync::Arc;

use super::matchers::RequestMatch;
use super::model::RouteRule;

/// The part of a rule's precedence read from its match and its route's age: everything
/// [`RouteRule::precedence_cmp`] compares before the route's namespace and name, in the same
/// order and direction (derived `Ord` compares the fields top to bottom).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct PrecedenceKey {
    /// Exact, then regular expression, then prefix.
    path_rank: u8,
    /// More characters first.
    path_len: Reverse<usize>,
    /// GRPCRoute matches by their service and method characters, before HTTPRoute matches.
    grpc: Reverse<Option<(u8, usize, u8, usize)>>,
    /// A method condition first.
    method: Reverse<bool>,
    /// More header conditions first.
    headers: Reverse<usize>,
    /// More query conditions first.
    query: Reverse<usize>,
    /// The oldest route first.
    created: i64,
}

impl PrecedenceKey {
    fn of(rule: &RouteRule) -> Self {
        let m = &rule.matcher;
        Self {
            path_rank: m.path.rank(),
            path_len: Reverse(m.path.len()),
            grpc: Reverse(grpc_rank(m)),
            method: Reverse(m.method.is_some()),
            headers: Reverse(m.headers.len()),
            query: Reverse(m.query.len()),
            created: rule.created,
        }
    }
}

/// The GRPCRoute precedence key of a match (HTTPRoute matches have none and rank lowest).
fn grpc_rank(matcher: &RequestMatch) -> Option<(u8, usize, u8, usize)> {
    matcher.grpc.as_ref().map(|g| g.rank())
}

impl RouteRule {
    /// Gateway API precedence: exact path, then regular expression, then longest prefix; then
    /// (GRPCRoute matches) service and method characters; then method, most header matches,
    /// most query matches; then the oldest route, then `namespace/name` alphabetically, then
    /// rule and match order within the route.
    ///
    /// A GRPCRoute match's path is `/service/method` (exact service and method), `/service`
    /// (exact service) or `/`, so the path criteria already order it as the GRPCRoute spec's
    /// service and method characters do, and [`crate::table::GrpcMatch::rank`] orders the rest.
    pub fn precedence_cmp(&self, other: &Self) -> Ordering {
        PrecedenceKey::of(self)
            .cmp(&PrecedenceKey::of(other))
            .then_with(|| self.tiebreak_cmp(other))
    }

    /// The last criteria of [`RouteRule::precedence_cmp`]: `namespace/name`, then rule and
    /// match order. Rules of one route share its `RouteRef`, so their names are not read.
    fn tiebreak_cmp(&self, other: &Self) -> Ordering {
        let names = || {
            let (a, b) = (&self.route, &other.route);
            a.namespace()
                .cmp(b.namespace())
                .then_with(|| a.name().cmp(b.name()))
        };
        let same_route = Arc::ptr_eq(&self.route, &other.route);
        (if same_route { Ordering::Equal } else { names() })
            .then(self.rule_index.cmp(&other.rule_index))
            .then(self.match_index.cmp(&other.match_index))
    }
}

/// `rules` in precedence order, as a stable sort by [`RouteRule::precedence_cmp`] leaves them,
/// with where each rule went: `at[i]` is the new position of `rules[i]`.
///
/// Each rule's [`PrecedenceKey`] is computed once. When the rules come in the order of their
/// last criteria (namespace, name, rule, match; how a host's rules are gathered, route by
/// route), a rule's position stands for those criteria: the sort compares integers only, and
/// no two keys are equal. Otherwise ties between keys are broken by the names.
pub(super) fn sort_by_precedence(rules: Vec<Arc<RouteRule>>) -> (Vec<Arc<RouteRule>>, Vec<u32>) {
    let mut keyed: Vec<(PrecedenceKey, u32)> = rules
        .iter()
        .zip(0u32..)
        .map(|(r, i)| (PrecedenceKey::of(r), i))
        .collect();
    let gathered = rules
        .windows(2)
        .all(|w| w[0].tiebreak_cmp(&w[1]) != Ordering::Greater);
    if gathered {
        keyed.sort_unstable();
    } else {
        let rule = |i: u32| &rules[i as usize];
        keyed.sort_by(|(a, i), (b, j)| a.cmp(b).then_with(|| rule(*i).tiebreak_cmp(rule(*j))));
    }
    let mut at = vec![0u32; rules.len()];
    for (&(_, i), to) in keyed.iter().zip(0u32..) {
        if let Some(slot) = at.get_mut(i as usize) {
            *slot = to;
        }
    }
    let mut slots: Vec<Option<Arc<RouteRule>>> = rules.into_iter().map(Some).collect();
    let sorted = keyed
        .iter()
        .filter_map(|&(_, i)| slots.get_mut(i as usize).and_then(Option::take))
        .collect();
    (sorted, at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{
        BackendSet, GrpcMatch, HeaderMatch, PathMatch, QueryMatch, Regex, RouteRef, RuleFilters,
        ValueMatch,
    };
    use proptest::prelude::*;

    /// The comparator as it was written before the key: every criterion in one chain.
    fn reference_cmp(a: &RouteRule, b: &RouteRule) -> Ordering {
        let (x, y) = (&a.matcher, &b.matcher);
        x.path
            .rank()
            .cmp(&y.path.rank())
            .then(y.path.len().cmp(&x.path.len()))
            .then(grpc_rank(y).cmp(&grpc_rank(x)))
            .then(y.method.is_some().cmp(&x.method.is_some()))
            .then(y.headers.len().cmp(&x.headers.len()))
            .then(y.query.len().cmp(&x.query.len()))
            .then(a.created.cmp(&b.created))
            .then(a.route.namespace().cmp(b.route.namespace()))
            .then(a.route.name().cmp(b.route.name()))
            .then(a.rule_index.cmp(&b.rule_index))
            .then(a.match_index.cmp(&b.match_index))
    }

    /// A rule drawn from small ranges, so that most criteria tie often.
    #[derive(Debug, Clone)]
    struct Spec {
        path: (u8, u8),
        grpc: Option<(u8, u8)>,
        method: bool,
        headers: u8,
        query: u8,
        created: i64,
        route: (u8, u8),
        rule: u32,
        matched: u32,
    }

    fn spec() -> impl Strategy<Value = Spec> {
        (
            (0u8..3, 0u8..4),
            proptest::option::of((0u8..3, 0u8..3)),
            any::<bool>(),
            (0u8..3, 0u8..3),
            0i64..3,
            (0u8..2, 0u8..3),
            (0u32..3, 0u32..2),
        )
            .prop_map(
                |(path, grpc, method, (headers, query), created, route, (rule, matched))| Spec {
                    path,
                    grpc,
                    method,
                    headers,
                    query,
                    created,
                    route,
                    rule,
                    matched,
                },
            )
    }

    fn value(kind: u8, len: u8) -> Option<ValueMatch> {
        let text = "s".repeat(usize::from(len) + 1);
        match kind {
            0 => None,
            1 => Some(ValueMatch::RegularExpression(Regex::new(&text).unwrap())),
            _ => Some(ValueMatch::Exact(text)),
        }
    }

    /// Rules of `specs`; specs naming the same route share one `RouteRef`, as a compiled
    /// route's rules do. Route names `a-b` and `a` in namespaces `x` and `x-y` order
    /// differently joined (`a-b/…` before `a/…`) than apart.
    fn rules(specs: &[Spec]) -> Vec<Arc<RouteRule>> {
        let namespaces = ["x", "x-y"];
        let names = ["a", "a-b", "b"];
        let refs: Vec<Vec<Arc<RouteRef>>> = namespaces
            .iter()
            .map(|ns| {
                names
                    .iter()
                    .map(|n| Arc::new(RouteRef::new("HTTPRoute", ns, n)))
                    .collect()
            })
            .collect();
        specs
            .iter()
            .map(|s| {
                let text = format!("/{}", "p".repeat(usize::from(s.path.1)));
                let path = match s.path.0 {
                    0 => PathMatch::Exact(text),
                    1 => PathMatch::RegularExpression(Regex::new(&text).unwrap()),
                    _ => PathMatch::Prefix(text),
                };
                let header = HeaderMatch {
                    name: http::HeaderName::from_static("x-h"),
                    value: ValueMatch::Exact("v".into()),
                };
                let query = QueryMatch {
                    name: "q".into(),
                    value: ValueMatch::Exact("v".into()),
                };
                let matcher = RequestMatch {
                    path,
                    method: s.method.then(|| Box::new(http::Method::GET)),
                    headers: vec![header; usize::from(s.headers)].into(),
                    query: vec![query; usize::from(s.query)].into(),
                    grpc: s.grpc.map(|(k, len)| {
                        Box::new(GrpcMatch {
                            service: value(k, len),
                            method: value(2 - k, len),
                        })
                    }),
                };
                Arc::new(RouteRule {
                    route: refs[usize::from(s.route.0)][usize::from(s.route.1)].clone(),
                    created: s.created,
                    rule_index: s.rule,
                    match_index: s.matched,
                    rule_name: None,
                    matcher,
                    filters: RuleFilters::none(),
                    backends: Arc::new(BackendSet::default()),
                })
            })
            .collect()
    }

    /// The keyed sort leaves exactly what a stable sort by the reference comparator leaves.
    fn same_as_reference(rules: Vec<Arc<RouteRule>>) -> Result<(), TestCaseError> {
        let mut expected = rules.clone();
        expected.sort_by(|a, b| reference_cmp(a, b));
        let (sorted, at) = sort_by_precedence(rules.clone());
        prop_assert_eq!(sorted.len(), expected.len());
        for (rule, &to) in rules.iter().zip(&at) {
            prop_assert!(Arc::ptr_eq(rule, &sorted[to as usize]));
        }
        for (a, b) in sorted.iter().zip(&expected) {
            prop_assert!(Arc::ptr_eq(a, b), "{:?} != {:?}", a, b);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any two rules compare alike by the comparator and by the reference.
        #[test]
        fn the_comparator_is_the_reference(specs in proptest::collection::vec(spec(), 2)) {
            let r = rules(&specs);
            prop_assert_eq!(r[0].precedence_cmp(&r[1]), reference_cmp(&r[0], &r[1]));
            prop_assert_eq!(r[1].precedence_cmp(&r[0]), reference_cmp(&r[1], &r[0]));
        }

        /// Rules in any order, duplicates included (the fallback that reads names).
        #[test]
        fn any_order_sorts_as_the_reference(specs in proptest::collection::vec(spec(), 0..40)) {
            same_as_reference(rules(&specs))?;
        }

        /// Rules gathered route by route, as a host gathers them (the integer-only sort).
        #[test]
        fn gathered_rules_sort_as_the_reference(
            specs in proptest::collection::vec(spec(), 0..40),
        ) {
            let mut specs = specs;
            specs.sort_by_key(|s| (s.route, s.rule, s.matched));
            same_as_reference(rules(&specs))?;
        }
    }
}
