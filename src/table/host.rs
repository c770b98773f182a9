//! Hostname index of one listener socket: exact names, then wildcard suffixes (longest first),
//! then the catch-all. Pure: built once per table, read on every request.

use std::collections::HashMap;

use serde::Serialize;

use super::model::VirtualHost;

/// Virtual hosts by hostname. A request is served by exactly one of them and never falls back to
/// a less specific one, which is what keeps listeners with different hostnames isolated.
#[derive(Debug, Default)]
pub struct HostIndex {
    exact: HashMap<String, VirtualHost>,
    /// `(".example.com", host)` for `*.example.com`, longest suffix first.
    wildcard: Vec<(String, VirtualHost)>,
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
                index.wildcard.push((suffix.to_owned(), host));
            } else {
                index.exact.insert(host.hostname.clone(), host);
            }
        }
        index
            .wildcard
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        index
    }

    /// The virtual host serving `host` (already normalized).
    pub fn find(&self, host: &str) -> Option<&VirtualHost> {
        if let Some(v) = self.exact.get(host) {
            return Some(v);
        }
        self.wildcard
            .iter()
            .find(|(suffix, _)| host.len() > suffix.len() && host.ends_with(suffix.as_str()))
            .map(|(_, v)| v)
            .or(self.any.as_ref())
    }

    /// All virtual hosts, in lookup order.
    pub fn iter(&self) -> impl Iterator<Item = &VirtualHost> {
        let mut exact: Vec<&VirtualHost> = self.exact.values().collect();
        exact.sort_by(|a, b| a.hostname.cmp(&b.hostname));
        exact
            .into_iter()
            .chain(self.wildcard.iter().map(|(_, v)| v))
            .chain(self.any.iter())
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
