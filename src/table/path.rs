//! Path index of one virtual host. Exact paths and segment prefixes are hash keys, so a lookup costs
//! one probe per path segment however many routes the host has; only regex rules are scanned.
//! A host with a few rules is scanned whole instead: most hosts have a rule or two, and for
//! those the maps cost more memory than the scan costs time.

use foldhash::HashMap;
use std::sync::Arc;

use super::matchers::PathMatch;
use super::model::RouteRule;

/// Hosts with at most this many rules are scanned rather than indexed.
const SCAN_AT_MOST: usize = 4;

/// Candidate rules by path, as indices into the host's precedence-sorted rule list.
#[derive(Debug)]
pub enum PathIndex {
    /// Every rule of the host (this many) is a candidate, in order.
    Scan(u32),
    /// The maps of a host with more rules than are scanned. Boxed: every virtual host carries
    /// an index, and most are scanned (sixteen bytes rather than the maps' hundred).
    Indexed(Box<Maps>),
}

/// The candidates of an indexed host by exact path and by prefix, and its regex rules.
#[derive(Debug, Default)]
pub struct Maps {
    exact: HashMap<Box<str>, Vec<u32>>,
    prefix: HashMap<Box<str>, Vec<u32>>,
    regex: Vec<u32>,
}

impl Default for PathIndex {
    /// A host without rules.
    fn default() -> Self {
        Self::Scan(0)
    }
}

impl PathIndex {
    /// Indexes rules that are already sorted by precedence; each list keeps that order.
    pub fn build(rules: &[Arc<RouteRule>]) -> Self {
        Self::build_scanning(rules, SCAN_AT_MOST)
    }

    /// [`PathIndex::build`], scanning hosts of up to `scan_at_most` rules.
    fn build_scanning(rules: &[Arc<RouteRule>], scan_at_most: usize) -> Self {
        if rules.len() <= scan_at_most {
            return Self::Scan(rules.len() as u32);
        }
        let mut index = Maps::default();
        for (i, rule) in rules.iter().enumerate() {
            let i = i as u32;
            match &rule.matcher.path {
                PathMatch::Exact(p) => index.exact.entry(p.as_str().into()).or_default().push(i),
                PathMatch::Prefix(p) => index.prefix.entry(p.as_str().into()).or_default().push(i),
                PathMatch::RegularExpression(_) => index.regex.push(i),
            }
        }
        Self::Indexed(Box::new(index))
    }

    /// The first candidate, in precedence order, accepted by `accept`, which checks the whole
    /// match, path included: the index only narrows the candidates (to the rules whose path
    /// condition can hold, or to all rules of a scanned host), so with either the first
    /// accepted rule is the first rule in precedence order that matches.
    ///
    /// Order: exact rules for `path`, then regex rules, then prefix rules from the longest prefix of
    /// `path` at a segment boundary down to `/`. That is the spec's order, because within each list
    /// the rules are already sorted by the remaining criteria.
    pub fn find(&self, path: &str, mut accept: impl FnMut(usize) -> bool) -> Option<usize> {
        let index = match self {
            Self::Scan(rules) => return (0..*rules as usize).find(|&i| accept(i)),
            Self::Indexed(index) => index,
        };
        let mut first = |list: &[u32]| list.iter().map(|&i| i as usize).find(|&i| accept(i));
        if let Some(list) = index.exact.get(path) {
            if let Some(i) = first(list) {
                return Some(i);
            }
        }
        if let Some(i) = first(&index.regex) {
            return Some(i);
        }
        if !path.starts_with('/') {
            return None;
        }
        let mut key = path.trim_end_matches('/');
        loop {
            let probe = if key.is_empty() { "/" } else { key };
            if let Some(i) = index.prefix.get(probe).and_then(|list| first(list)) {
                return Some(i);
            }
            if key.is_empty() {
                return None;
            }
            key = match key.rfind('/') {
                Some(pos) => &key[..pos],
                None => "",
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::backend_set::BackendSet;
    use super::super::matchers::{Regex, RequestMatch};
    use super::super::model::RouteRef;
    use super::super::rule_filters::RuleFilters;
    use super::*;

    fn rule(name: &str, path: PathMatch) -> Arc<RouteRule> {
        Arc::new(RouteRule {
            route: Arc::new(RouteRef::new("HTTPRoute", "ns", name)),
            created: 0,
            rule_index: 0,
            match_index: 0,
            rule_name: None,
            matcher: RequestMatch {
                path,
                ..RequestMatch::any()
            },
            filters: Arc::new(RuleFilters::default()),
            backends: Arc::new(BackendSet::default()),
        })
    }

    /// The rule an index of `rules` finds for `path`: the same whether the host is indexed or
    /// scanned (checked on every lookup).
    fn lookup(rules: &[Arc<RouteRule>], path: &str) -> Option<String> {
        let find = |index: PathIndex| {
            index
                .find(path, |i| rules[i].matcher.path.matches(path))
                .map(|i| rules[i].route.name().to_owned())
        };
        let indexed = find(PathIndex::build_scanning(rules, 0));
        let scanned = find(PathIndex::build_scanning(rules, usize::MAX));
        assert_eq!(indexed, scanned, "indexed and scanned lookups of {path}");
        indexed
    }

    #[test]
    fn exact_then_regex_then_longest_prefix() {
        let mut rules = vec![
            rule("root", PathMatch::prefix("/")),
            rule("api", PathMatch::prefix("/api")),
            rule("apiv1", PathMatch::prefix("/api/v1/")),
            rule("exact", PathMatch::Exact("/api/v1/x".into())),
            rule(
                "re",
                PathMatch::RegularExpression(Regex::new("/api/v[0-9]/y").unwrap()),
            ),
        ];
        rules.sort_by(|a, b| a.precedence_cmp(b));
        assert_eq!(lookup(&rules, "/api/v1/x").as_deref(), Some("exact"));
        assert_eq!(lookup(&rules, "/api/v1/y").as_deref(), Some("re"));
        assert_eq!(lookup(&rules, "/api/v1/z").as_deref(), Some("apiv1"));
        assert_eq!(lookup(&rules, "/api/v1").as_deref(), Some("apiv1"));
        assert_eq!(lookup(&rules, "/api/v1/").as_deref(), Some("apiv1"));
        assert_eq!(lookup(&rules, "/api/v10").as_deref(), Some("api"));
        assert_eq!(lookup(&rules, "/apix").as_deref(), Some("root"));
        assert_eq!(lookup(&rules, "/").as_deref(), Some("root"));
        assert_eq!(lookup(&rules, "*"), None);
    }

    #[test]
    fn no_root_prefix_means_no_match() {
        let rules = vec![rule("api", PathMatch::prefix("/api"))];
        assert_eq!(lookup(&rules, "/other"), None);
        assert_eq!(lookup(&rules, "/api//x").as_deref(), Some("api"));
    }

    /// Indexed and scanned lookups agree on every path of a grid, for a host whose rules
    /// share prefixes and mix all three kinds of path condition.
    #[test]
    fn scanning_finds_what_the_index_finds() {
        let specs = [
            PathMatch::prefix("/"),
            PathMatch::prefix("/a"),
            PathMatch::prefix("/a/b/"),
            PathMatch::prefix("/ab"),
            PathMatch::Exact("/a/b".into()),
            PathMatch::Exact("/a/".into()),
            PathMatch::RegularExpression(Regex::new("/a/[bc]+").unwrap()),
        ];
        let paths = [
            "/", "//", "/a", "/a/", "/a//", "/a/b", "/a/b/", "/a/bc", "/a/b/c", "/ab", "/ab/",
            "/abc", "/b", "*", "", "a", "/a/c",
        ];
        // Every subset of the rules, as hosts of up to seven rules.
        for mask in 1u32..(1 << specs.len()) {
            let mut rules: Vec<Arc<RouteRule>> = specs
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(i, p)| rule(&format!("r{i}"), p.clone()))
                .collect();
            rules.sort_by(|a, b| a.precedence_cmp(b));
            for path in paths {
                lookup(&rules, path);
            }
        }
    }
}
