//! Hostname index of one listener socket: exact names, then wildcard suffixes (longest first),
//! then the catch-all, each probed by hash. Pure: built once per table, read on every request.

use std::collections::HashMap;

use serde::Serialize;

use super::model::VirtualHost;

/// Virtual hosts by hostname. A request is tried against every host pattern that matches it, most
/// specific first (the spec's precedence for routes with intersecting hostnames), but only against
/// hosts of the same Gateway listener as the most specific one: that keeps listeners with
/// different hostnames isolated.
#[derive(Debug, Default)]
pub struct HostIndex {
    exact: HashMap<String, VirtualHost>,
    /// `".example.com"` for `*.example.com`.
    wildcard: HashMap<String, VirtualHost>,
    any: Option<VirtualHost>,
}

impl HostIndex {
    /// Indexes virtual hosts by their hostname: `*` is the catch-all, `*.x` a wildcard.
    /// Hostnames must be unique; the translator merges rules of equal hostnames first.
    pub fn build(hosts: Vec<VirtualHost>) -> Self {
        let mut index = Self::default();
        for host in hosts {
            if host.hostname == "*" {
                index.any = Some(host);
            } else if let Some(suffix) = host.hostname.strip_prefix('*') {
                index.wildcard.insert(suffix.to_owned(), host);
            } else {
                index.exact.insert(host.hostname.clone(), host);
            }
        }
        index
    }

    /// Every virtual host whose pattern matches `host` (already normalized), most specific
    /// first: the exact name, then wildcards from the longest suffix (one probe per label), then
    /// the catch-all.
    fn matching<'a, 'h>(
        &'a self,
        host: &'h str,
    ) -> impl Iterator<Item = &'a VirtualHost> + use<'a, 'h> {
        let wildcards = host
            .char_indices()
            .filter(|&(i, c)| c == '.' && i > 0)
            .filter_map(move |(i, _)| self.wildcard.get(&host[i..]));
        self.exact
            .get(host)
            .into_iter()
            .chain(wildcards)
            .chain(self.any.iter())
    }

    /// The most specific virtual host for `host`.
    pub fn find(&self, host: &str) -> Option<&VirtualHost> {
        self.matching(host).next()
    }

    /// The virtual hosts a request for `host` may be served by, in precedence order: the most
    /// specific one, then the less specific ones of the same Gateway listener.
    pub fn candidates<'a, 'h>(
        &'a self,
        host: &'h str,
    ) -> impl Iterator<Item = &'a VirtualHost> + use<'a, 'h> {
        let group = self.find(host).map(|v| v.listener);
        self.matching(host)
            .filter(move |v| Some(v.listener) == group)
    }

    /// All virtual hosts: exact names, wildcards (longest first), catch-all.
    pub fn iter(&self) -> impl Iterator<Item = &VirtualHost> {
        let mut exact: Vec<&VirtualHost> = self.exact.values().collect();
        exact.sort_by(|a, b| a.hostname.cmp(&b.hostname));
        let mut wild: Vec<&VirtualHost> = self.wildcard.values().collect();
        wild.sort_by(|a, b| {
            b.hostname
                .len()
                .cmp(&a.hostname.len())
                .then(a.hostname.cmp(&b.hostname))
        });
        exact.into_iter().chain(wild).chain(self.any.iter())
    }

    /// Number of rules across all hosts.
    pub fn rule_count(&self) -> usize {
        self.iter().map(|h| h.rules.len()).sum()
    }
}

impl Serialize for HostIndex {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// Lower-cases a Host header or `:authority`, dropping the port and a trailing dot, so it can be
/// compared with listener and route hostnames. Handles bracketed IPv6 literals.
pub fn normalize_host(authority: &str) -> String {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                h
            } else {
                authority
            }
        })
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vhost(name: &str) -> VirtualHost {
        VirtualHost::new(name.into(), vec![])
    }

    #[test]
    fn candidates_stay_within_one_listener() {
        let index = HostIndex::build(vec![
            vhost("*").in_listener(0),
            vhost("*.example.com").in_listener(1),
            vhost("a.example.com").in_listener(1),
            vhost("b.example.com").in_listener(2),
        ]);
        let names = |h: &'static str| -> Vec<String> {
            index.candidates(h).map(|v| v.hostname.clone()).collect()
        };
        assert_eq!(names("a.example.com"), ["a.example.com", "*.example.com"]);
        assert_eq!(names("b.example.com"), ["b.example.com"]);
        assert_eq!(names("c.example.com"), ["*.example.com"]);
        assert_eq!(names("other.org"), ["*"]);
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

    #[test]
    fn normalizes_authorities() {
        assert_eq!(normalize_host("Example.COM:8080"), "example.com");
        assert_eq!(normalize_host("example.com."), "example.com");
        assert_eq!(normalize_host("[::1]:80"), "::1");
        assert_eq!(normalize_host("host"), "host");
    }
}
