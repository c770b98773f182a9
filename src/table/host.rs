//! Virtual hosts of one listener socket, indexed by [`super::hostname`]'s precedence. Pure:
//! built once per table, read on every request. Hosts are shared: a table built from an
//! unchanged set of rules reuses the previous table's host.

use std::sync::Arc;

use serde::Serialize;

use super::hostname::{HostnameMap, Pattern};
use super::model::VirtualHost;

/// Virtual hosts by hostname. A request is tried against every host pattern that matches it, most
/// specific first (the spec's precedence for routes with intersecting hostnames), but only against
/// hosts of the same Gateway listener as the most specific one: that keeps listeners with
/// different hostnames isolated.
#[derive(Debug, Default, Clone)]
pub struct HostIndex(HostnameMap<Arc<VirtualHost>>);

impl HostIndex {
    /// Indexes virtual hosts by their hostname: `*` is the catch-all, `*.x` a wildcard.
    /// Hostnames must be unique; the translator merges rules of equal hostnames first.
    pub fn build(hosts: impl IntoIterator<Item = impl Into<Arc<VirtualHost>>>) -> Self {
        let mut index = HostnameMap::default();
        for host in hosts {
            let host = host.into();
            let name = host.hostname.clone();
            index.insert(Pattern::of(Some(&name)), host);
        }
        Self(index)
    }

    /// Adds `host`, or replaces the host of the same hostname: the next table patches the
    /// previous one's index where routes changed instead of indexing every host again.
    pub fn put(&mut self, host: Arc<VirtualHost>) {
        let name = host.hostname.clone();
        self.0.put(Pattern::of(Some(&name)), host);
    }

    /// Removes the host named `hostname`, if there is one.
    pub fn remove(&mut self, hostname: &str) -> Option<Arc<VirtualHost>> {
        self.0.remove(Pattern::of(Some(hostname)))
    }

    /// The most specific virtual host for `host` (already normalized).
    pub fn find(&self, host: &str) -> Option<&VirtualHost> {
        self.0.find(host).map(|v| &**v)
    }

    /// The virtual hosts a request for `host` may be served by, in precedence order: the most
    /// specific one, then the less specific ones of the same Gateway listener.
    pub fn candidates<'a, 'h>(
        &'a self,
        host: &'h str,
    ) -> impl Iterator<Item = &'a VirtualHost> + use<'a, 'h> {
        let group = self.find(host).map(|v| v.listener);
        self.0
            .matching(host)
            .map(|v| &**v)
            .filter(move |v| Some(v.listener) == group)
    }

    /// All virtual hosts: exact names, wildcards (longest first), catch-all.
    pub fn iter(&self) -> impl Iterator<Item = &VirtualHost> {
        let mut all: Vec<&VirtualHost> = self.0.values().map(|v| &**v).collect();
        // Exact names by name, wildcards longest first, the catch-all last.
        all.sort_by_cached_key(|v| match Pattern::of(Some(&v.hostname)) {
            Pattern::Exact(_) => (0, 0, &*v.hostname),
            Pattern::Wildcard(_) => (1, usize::MAX - v.hostname.len(), &*v.hostname),
            Pattern::Any => (2, 0, ""),
        });
        all.into_iter()
    }

    /// All virtual hosts in no particular order, without [`HostIndex::iter`]'s sort: for a
    /// caller that visits each host once and needs no precedence order (indexing a table's
    /// metric handles sorted 50,000 hosts on every change).
    pub fn unordered(&self) -> impl Iterator<Item = &VirtualHost> {
        self.0.values().map(|v| &**v)
    }

    /// Number of rules across all hosts.
    pub fn rule_count(&self) -> usize {
        self.0.values().map(|h| h.rules.len()).sum()
    }
}

impl Serialize for HostIndex {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vhost(name: &str) -> Arc<VirtualHost> {
        Arc::new(VirtualHost::new(name.into(), vec![]))
    }

    #[test]
    fn candidates_stay_within_one_listener() {
        let index = HostIndex::build(vec![
            VirtualHost::new("*".into(), vec![]).in_listener(0),
            VirtualHost::new("*.example.com".into(), vec![]).in_listener(1),
            VirtualHost::new("a.example.com".into(), vec![]).in_listener(1),
            VirtualHost::new("b.example.com".into(), vec![]).in_listener(2),
        ]);
        let names = |h: &'static str| -> Vec<String> {
            index
                .candidates(h)
                .map(|v| v.hostname.to_string())
                .collect()
        };
        assert_eq!(names("a.example.com"), ["a.example.com", "*.example.com"]);
        assert_eq!(names("b.example.com"), ["b.example.com"]);
        assert_eq!(names("c.example.com"), ["*.example.com"]);
        assert_eq!(names("other.org"), ["*"]);
    }

    /// `unordered` visits exactly the hosts `iter` lists, each once, after puts and removals.
    #[test]
    fn unordered_visits_every_host_once() {
        let mut index = HostIndex::build(vec![
            vhost("*"),
            vhost("*.example.com"),
            vhost("a.example.com"),
            vhost("b.example.com"),
        ]);
        index.put(vhost("c.example.com"));
        index.put(vhost("a.example.com"));
        index.remove("b.example.com");
        let names = |hosts: Vec<&VirtualHost>| {
            let mut names: Vec<String> = hosts.iter().map(|v| v.hostname.to_string()).collect();
            names.sort();
            names
        };
        let listed = names(index.iter().collect());
        assert_eq!(
            listed,
            ["*", "*.example.com", "a.example.com", "c.example.com"]
        );
        assert_eq!(names(index.unordered().collect()), listed);
    }

    #[test]
    fn exact_beats_wildcard_beats_any() {
        let index = HostIndex::build(vec![
            vhost("*"),
            vhost("*.example.com"),
            vhost("*.foo.example.com"),
            vhost("a.foo.example.com"),
        ]);
        let name = |h: &str| index.find(h).map(|v| v.hostname.clone());
        assert_eq!(
            name("a.foo.example.com").as_deref(),
            Some("a.foo.example.com")
        );
        assert_eq!(
            name("b.foo.example.com").as_deref(),
            Some("*.foo.example.com")
        );
        assert_eq!(name("x.y.example.com").as_deref(), Some("*.example.com"));
        assert_eq!(name("example.com").as_deref(), Some("*"));
        assert_eq!(name("other.org").as_deref(), Some("*"));
    }
}
