//! Hostname patterns and their precedence, the one place the rule is written: an exact name,
//! then `*.suffix` wildcards from the longest suffix (a wildcard matches any deeper subdomain,
//! never the bare suffix), then the catch-all. Listener ownership in `translate`, virtual-host
//! lookup and SNI certificate selection all use it, so a request's Host and its TLS handshake
//! can never disagree about which listener owns a name. Pure.

use super::shards::Shards;

/// One hostname pattern, as listeners and routes spell them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern<'a> {
    /// No hostname, or `*`: every host.
    Any,
    /// `*.example.com`, kept as its suffix `.example.com`.
    Wildcard(&'a str),
    /// `www.example.com`.
    Exact(&'a str),
}

impl<'a> Pattern<'a> {
    /// Classifies `hostname` (`None`: a listener or route without hostname).
    pub fn of(hostname: Option<&'a str>) -> Self {
        match hostname {
            None | Some("*") => Self::Any,
            Some(h) => match h.strip_prefix('*') {
                Some(suffix) => Self::Wildcard(suffix),
                None => Self::Exact(h),
            },
        }
    }

    /// True when this pattern matches every host `specific` matches (a route hostname, itself
    /// possibly a wildcard). `*.a.example.com` is within `*.example.com`; `example.com` is not.
    pub fn covers(self, specific: &str) -> bool {
        match (self, Pattern::of(Some(specific))) {
            (Pattern::Any, _) => true,
            (_, Pattern::Any) => false,
            (Pattern::Exact(g), Pattern::Exact(s)) => g == s,
            (Pattern::Exact(_), Pattern::Wildcard(_)) => false,
            (Pattern::Wildcard(g), Pattern::Wildcard(s)) => s == g || is_subdomain(s, g),
            (Pattern::Wildcard(g), Pattern::Exact(s)) => is_subdomain(s, g),
        }
    }
}

/// Whether two hostnames (exact, `*.suffix` or `*`) can both match one request host: one
/// covers the other.
pub fn overlap(a: &str, b: &str) -> bool {
    Pattern::of(Some(a)).covers(b) || Pattern::of(Some(b)).covers(a)
}

/// True when `name` ends with `suffix` (`.example.com`) and has at least one more character.
fn is_subdomain(name: &str, suffix: &str) -> bool {
    name.len() > suffix.len() && name.ends_with(suffix)
}

/// Values keyed by hostname pattern, looked up by host in precedence order with one hash probe
/// per label. The first value inserted for a pattern wins. Names are kept in `Shards`: a
/// table patches a copy of the previous table's map, and the two share what did not change.
#[derive(Debug, Clone)]
pub struct HostnameMap<T> {
    exact: Shards<T>,
    /// Keyed by suffix: `.example.com` for `*.example.com`.
    wildcard: Shards<T>,
    any: Option<T>,
}

impl<T> Default for HostnameMap<T> {
    fn default() -> Self {
        Self {
            exact: Shards::default(),
            wildcard: Shards::default(),
            any: None,
        }
    }
}

impl<T: Clone> HostnameMap<T> {
    /// Adds `value` for `pattern` unless the pattern has one already; true when added.
    pub fn insert(&mut self, pattern: Pattern<'_>, value: T) -> bool {
        match pattern {
            Pattern::Any => {
                if self.any.is_some() {
                    return false;
                }
                self.any = Some(value);
                true
            }
            Pattern::Wildcard(suffix) => self.wildcard.insert_new(suffix, value),
            Pattern::Exact(name) => self.exact.insert_new(name, value),
        }
    }

    /// Sets the value of `pattern`, replacing any it had: a table built from an earlier one
    /// replaces the hosts that changed.
    pub fn put(&mut self, pattern: Pattern<'_>, value: T) -> Option<T> {
        match pattern {
            Pattern::Any => self.any.replace(value),
            Pattern::Wildcard(suffix) => self.wildcard.put(suffix, value),
            Pattern::Exact(name) => self.exact.put(name, value),
        }
    }

    /// Removes the value of `pattern`, if it has one.
    pub fn remove(&mut self, pattern: Pattern<'_>) -> Option<T> {
        match pattern {
            Pattern::Any => self.any.take(),
            Pattern::Wildcard(suffix) => self.wildcard.remove(suffix),
            Pattern::Exact(name) => self.exact.remove(name),
        }
    }
}

impl<T> HostnameMap<T> {
    /// Every value whose pattern covers `host`, most specific first: the exact name, wildcards
    /// from the longest suffix, then the catch-all. `host` is compared as given (callers
    /// normalize case); a wildcard `host` is matched by wildcards that cover it.
    pub fn matching<'a, 'h>(
        &'a self,
        host: &'h str,
    ) -> impl Iterator<Item = &'a T> + use<'a, 'h, T> {
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

    /// The value of the most specific pattern covering `host`.
    pub fn find(&self, host: &str) -> Option<&T> {
        self.matching(host).next()
    }

    /// Every value: exact names, wildcards, then the catch-all (map order within a group).
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.exact
            .values()
            .chain(self.wildcard.values())
            .chain(self.any.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_specific_pattern_wins() {
        let mut m = HostnameMap::default();
        for (i, p) in [
            None,
            Some("*.example.com"),
            Some("*.foo.example.com"),
            Some("a.foo.example.com"),
        ]
        .into_iter()
        .enumerate()
        {
            assert!(m.insert(Pattern::of(p), i));
        }
        assert!(
            !m.insert(Pattern::of(Some("*")), 9),
            "first value of a pattern wins"
        );
        let f = |h: &str| m.find(h).copied();
        assert_eq!(f("a.foo.example.com"), Some(3));
        assert_eq!(f("b.foo.example.com"), Some(2));
        assert_eq!(f("*.bar.foo.example.com"), Some(2));
        assert_eq!(f("*.foo.example.com"), Some(2));
        assert_eq!(f("x.example.com"), Some(1));
        assert_eq!(f("example.com"), Some(0));
        assert_eq!(f("*"), Some(0));
        let all: Vec<_> = m.matching("a.foo.example.com").copied().collect();
        assert_eq!(all, vec![3, 2, 1, 0]);
    }

    #[test]
    fn put_replaces_and_remove_falls_back() {
        let mut m = HostnameMap::default();
        for (i, p) in [None, Some("*.example.com"), Some("a.example.com")]
            .into_iter()
            .enumerate()
        {
            assert!(m.insert(Pattern::of(p), i));
        }
        assert_eq!(m.put(Pattern::of(Some("*.example.com")), 7), Some(1));
        assert_eq!(m.find("b.example.com"), Some(&7));
        assert_eq!(m.remove(Pattern::of(Some("a.example.com"))), Some(2));
        assert_eq!(m.find("a.example.com"), Some(&7));
        assert_eq!(m.remove(Pattern::of(Some("*.example.com"))), Some(7));
        assert_eq!(m.find("a.example.com"), Some(&0));
        assert_eq!(m.put(Pattern::Any, 8), Some(0));
        assert_eq!(m.remove(Pattern::Any), Some(8));
        assert_eq!(m.find("example.com"), None);
        assert_eq!(m.put(Pattern::of(Some("new.example.com")), 9), None);
        assert_eq!(m.find("new.example.com"), Some(&9));
    }

    /// The index and `covers` are two forms of one rule: for every pair they agree.
    #[test]
    fn index_agrees_with_covers() {
        let names = [
            "*",
            "example.com",
            "a.example.com",
            "b.a.example.com",
            "*.example.com",
            "*.a.example.com",
            "*.b.a.example.com",
            "other.com",
            "*.com",
            "xexample.com",
        ];
        for general in names {
            let mut m = HostnameMap::default();
            m.insert(Pattern::of(Some(general)), ());
            for specific in names {
                assert_eq!(
                    m.find(specific).is_some(),
                    Pattern::of(Some(general)).covers(specific),
                    "{general} covering {specific}"
                );
            }
        }
    }
}
