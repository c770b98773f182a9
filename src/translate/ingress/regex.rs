//! ingress-nginx's regex paths: which hosts of an Ingress have their paths served as regular
//! expressions (`use-regex`, or `rewrite-target`, on one Ingress makes every path of its hosts
//! regex, across Ingresses of the class) and the Gateway API `RegularExpression` each such path
//! lowers to (nginx's `location ~* "^PATH"`: anchored at the start only, case-insensitive).
//! Each of these quirks has a switch ([`Quirks`], `--no-ingress-quirk`). [`mark`] writes the
//! outcome on the working copy (annotations [`REGEX_HOSTS`], [`REGEX_MODE`]) so the lowering,
//! and `convert` through it, read it from the Ingress alone. Pure.

use std::collections::BTreeSet;

use k8s_openapi::api::networking::v1::Ingress;

use crate::kinds::ingress::NGINX_PREFIX;

/// Working-copy annotation: the hosts (`*` for rules without one) whose paths are regex.
pub const REGEX_HOSTS: &str = "edgeplane.dev/ingress-regex-hosts";
/// Working-copy annotation: how those paths match (`prefix`, `nocase`, or `full`).
pub const REGEX_MODE: &str = "edgeplane.dev/ingress-regex-mode";

/// ingress-nginx's path quirks, each on by default; `--no-ingress-quirk` turns one off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quirks {
    /// A regex path matches a path that starts with a match (nginx does not anchor the end).
    pub regex_prefix: bool,
    /// A regex path ignores case (nginx's `~*`).
    pub regex_case_insensitive: bool,
    /// `use-regex`/`rewrite-target` on one Ingress makes every path of the same host regex.
    pub host_wide_regex: bool,
    /// `rewrite-target` makes the Ingress's paths regex and replaces the whole path.
    pub rewrite_enables_regex: bool,
    /// Server-level annotations (`server-alias`, `server-snippet`) of a host come from its
    /// oldest Ingress.
    pub server_annotations_from_oldest: bool,
}

impl Default for Quirks {
    fn default() -> Self {
        Self {
            regex_prefix: true,
            regex_case_insensitive: true,
            host_wide_regex: true,
            rewrite_enables_regex: true,
            server_annotations_from_oldest: true,
        }
    }
}

/// How the regex paths of a working copy match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegexMode {
    pub prefix: bool,
    pub case_insensitive: bool,
}

impl RegexMode {
    /// The mode the quirks give.
    pub fn of(quirks: &Quirks) -> Self {
        Self {
            prefix: quirks.regex_prefix,
            case_insensitive: quirks.regex_case_insensitive,
        }
    }

    fn encode(self) -> String {
        let mut words = Vec::new();
        if self.prefix {
            words.push("prefix");
        }
        if self.case_insensitive {
            words.push("nocase");
        }
        if words.is_empty() {
            "full".to_owned()
        } else {
            words.join(",")
        }
    }

    /// Reads [`REGEX_MODE`]'s value.
    pub fn decode(value: &str) -> Self {
        let has = |w: &str| value.split(',').any(|v| v.trim() == w);
        Self {
            prefix: has("prefix"),
            case_insensitive: has("nocase"),
        }
    }

    /// The `RegularExpression` (a full match in Gateway API) that matches as nginx's
    /// `location ~* "^PATH"`: `PATH` then anything, ignoring case. The wrapper has the same
    /// length for every path, so longer paths still sort first, as ingress-nginx orders them.
    pub fn pattern(self, path: &str) -> String {
        format!(
            "{}(?:{path}){}",
            if self.case_insensitive { "(?i)" } else { "" },
            if self.prefix { ".*" } else { "" }
        )
    }
}

/// The hosts of an Ingress's rules that have paths (`*` for a rule without host).
fn hosts_of(ingress: &Ingress) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for rule in ingress.spec.iter().flat_map(|s| s.rules.iter().flatten()) {
        let host = match rule.host.as_deref() {
            Some(h) if !h.is_empty() => h.to_owned(),
            _ => "*".to_owned(),
        };
        if !out.contains(&host) {
            out.push(host);
        }
    }
    out
}

/// Whether an Ingress asks for regex paths itself: `use-regex: "true"`, or `rewrite-target`
/// (with the `rewrite-enables-regex` quirk), as ingress-nginx's `enforceRegexModifier`.
pub fn wants_regex(ingress: &Ingress, quirks: &Quirks) -> bool {
    let Some(all) = ingress.metadata.annotations.as_ref() else {
        return false;
    };
    let get = |n: &str| all.get(&format!("{NGINX_PREFIX}{n}")).map(|v| v.trim());
    // A canary's paths are not locations of their own.
    if get("canary") == Some("true") {
        return false;
    }
    get("use-regex") == Some("true")
        || (quirks.rewrite_enables_regex && get("rewrite-target").is_some_and(|t| !t.is_empty()))
}

/// The hosts an Ingress of `class` makes regex for every Ingress of the class.
pub fn forced_hosts<'a>(
    ingresses: impl Iterator<Item = (&'a str, &'a Ingress)>,
    quirks: &Quirks,
) -> BTreeSet<(String, String)> {
    if !quirks.host_wide_regex {
        return BTreeSet::new();
    }
    ingresses
        .filter(|(_, i)| wants_regex(i, quirks))
        .flat_map(|(class, i)| hosts_of(i).into_iter().map(|h| (class.to_owned(), h)))
        .collect()
}

/// Writes on the working copy `ingress` of `class` which of its hosts have regex paths and
/// how (removing any such annotation the object itself carried).
pub fn mark(
    ingress: &mut Ingress,
    class: &str,
    forced: &BTreeSet<(String, String)>,
    quirks: &Quirks,
) {
    let own = wants_regex(ingress, quirks);
    let hosts: Vec<String> = hosts_of(ingress)
        .into_iter()
        .filter(|h| own || forced.contains(&(class.to_owned(), h.clone())))
        .collect();
    let notes = ingress
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    notes.remove(REGEX_HOSTS);
    notes.remove(REGEX_MODE);
    if !hosts.is_empty() {
        notes.insert(REGEX_HOSTS.to_owned(), hosts.join(","));
        notes.insert(REGEX_MODE.to_owned(), RegexMode::of(quirks).encode());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::table::Regex;

    fn ingress(annotations: serde_json::Value, hosts: &[&str]) -> Ingress {
        let rules: Vec<_> = hosts.iter().map(|h| json!({"host": h})).collect();
        serde_json::from_value(
            json!({"metadata": {"name": "i", "annotations": annotations},
            "spec": {"rules": rules}}),
        )
        .expect("Ingress")
    }

    #[test]
    fn patterns_match_as_nginx_case_insensitive_prefix_locations() {
        let on = RegexMode::of(&Quirks::default());
        let r = Regex::new(&on.pattern("/api/v[0-9]+")).unwrap();
        assert!(r.is_full_match("/api/v1"));
        assert!(r.is_full_match("/API/V12/items"));
        assert!(!r.is_full_match("/x/api/v1"));
        let full = RegexMode::default();
        let r = Regex::new(&full.pattern("/api|/b")).unwrap();
        assert!(r.is_full_match("/b"));
        assert!(!r.is_full_match("/bc"));
        assert!(!r.is_full_match("/API"));
        assert_eq!(
            on.pattern("/a").len() - on.pattern("").len(),
            full.pattern("/a").len() - full.pattern("").len()
        );
        for mode in [
            on,
            full,
            RegexMode {
                prefix: true,
                ..full
            },
        ] {
            assert_eq!(RegexMode::decode(&mode.encode()), mode);
        }
    }

    #[test]
    fn use_regex_or_rewrite_on_one_ingress_marks_the_hosts_of_the_class() {
        let quirks = Quirks::default();
        let regex = ingress(
            json!({"nginx.ingress.kubernetes.io/use-regex": "true"}),
            &["a.test"],
        );
        let rewrite = ingress(
            json!({"nginx.ingress.kubernetes.io/rewrite-target": "/"}),
            &["c.test"],
        );
        let plain = ingress(json!({}), &["a.test", "b.test"]);
        let all = [("k", &regex), ("k", &rewrite), ("k", &plain)];
        let forced = forced_hosts(all.into_iter(), &quirks);
        let mut copy = plain.clone();
        mark(&mut copy, "k", &forced, &quirks);
        let notes = copy.metadata.annotations.as_ref().unwrap();
        assert_eq!(notes[REGEX_HOSTS], "a.test");
        assert_eq!(notes[REGEX_MODE], "prefix,nocase");
        // Another class's hosts are other servers.
        let mut other = plain.clone();
        mark(&mut other, "other", &forced, &quirks);
        assert!(!other
            .metadata
            .annotations
            .unwrap()
            .contains_key(REGEX_HOSTS));
        // Switched off: only the Ingress's own annotations count.
        let off = Quirks {
            host_wide_regex: false,
            rewrite_enables_regex: false,
            ..quirks
        };
        let forced = forced_hosts(all.into_iter(), &off);
        let mut copy = plain.clone();
        mark(&mut copy, "k", &forced, &off);
        assert!(!copy.metadata.annotations.unwrap().contains_key(REGEX_HOSTS));
        let mut copy = rewrite.clone();
        mark(&mut copy, "k", &forced, &off);
        assert!(!copy.metadata.annotations.unwrap().contains_key(REGEX_HOSTS));
        let mut copy = regex.clone();
        mark(&mut copy, "k", &forced, &off);
        assert_eq!(copy.metadata.annotations.unwrap()[REGEX_HOSTS], "a.test");
    }
}
