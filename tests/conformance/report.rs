//! Scenario results: the printed table, the upstream `ConformanceReport` YAML (one entry per
//! profile: GATEWAY-HTTP, GATEWAY-GRPC) and the comparison of passing extended features with
//! the features the GatewayClass claims.

use std::collections::BTreeMap;

/// Scenarios of our own that the upstream suite has no test of that name for (it checks the same
/// behaviour inside other tests, or not at all). They run and fail the suite like any other, but
/// are counted apart and left out of the `ConformanceReport`, which lists upstream tests only.
pub const ADDITIONAL: &[&str] = &[
    "HTTPRouteNamespaceAttachment",
    "HTTPRouteAllowedRoutesLabelSelector",
    "GatewayHTTPListenerIsolationWithHostnameIntersection",
    "HTTPRouteRetryConnectionError",
    "HTTPRouteRetryWithTimeouts",
    "HTTPRouteSessionPersistence",
];

/// The verdict of one scenario.
#[derive(Debug, Clone)]
pub enum Result {
    Passed,
    Failed(String),
    Skipped(String),
}

/// Profile of the HTTPRoute scenarios.
pub const GATEWAY_HTTP: &str = "GATEWAY-HTTP";
/// Profile of the GRPCRoute scenarios.
pub const GATEWAY_GRPC: &str = "GATEWAY-GRPC";
/// Profile of the TLSRoute scenarios.
pub const GATEWAY_TLS: &str = "GATEWAY-TLS";
/// Profile of the TCPRoute scenarios.
pub const GATEWAY_TCP: &str = "GATEWAY-TCP";
/// Profile of the UDPRoute scenarios.
pub const GATEWAY_UDP: &str = "GATEWAY-UDP";
/// Every profile the replay runs, in report order.
pub const PROFILES: [&str; 5] = [
    GATEWAY_HTTP,
    GATEWAY_GRPC,
    GATEWAY_TLS,
    GATEWAY_TCP,
    GATEWAY_UDP,
];

/// One scenario's name, profile, extended feature (`None`: core) and verdict.
#[derive(Debug, Clone)]
pub struct ScenarioResult {
    pub name: &'static str,
    pub profile: &'static str,
    pub feature: Option<&'static str>,
    pub verdict: Result,
}

/// Passed/Failed/Skipped counts.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    passed: usize,
    failed: usize,
    skipped: usize,
}

impl Stats {
    fn add(&mut self, r: &Result) {
        match r {
            Result::Passed => self.passed += 1,
            Result::Failed(_) => self.failed += 1,
            Result::Skipped(_) => self.skipped += 1,
        }
    }

    /// Upstream wording: `failure` with any failure, `partial` with skips, else `success`.
    fn result(&self) -> &'static str {
        if self.failed > 0 {
            "failure"
        } else if self.skipped > 0 {
            "partial"
        } else {
            "success"
        }
    }
}

/// The results of one profile, summarised by part and by extended feature.
struct Profile {
    name: &'static str,
    /// Scenarios of [`ADDITIONAL`].
    additional: Stats,
    core: Stats,
    extended: Stats,
    /// Extended feature -> stats of its scenarios.
    features: BTreeMap<&'static str, Stats>,
}

/// All results, summarised per profile.
pub struct Summary<'a> {
    results: &'a [ScenarioResult],
    profiles: Vec<Profile>,
    /// What the replay's GatewayClass claims (`harness::claimed`).
    claimed: Vec<&'static str>,
}

impl<'a> Summary<'a> {
    pub fn new(results: &'a [ScenarioResult], claimed: Vec<&'static str>) -> Self {
        let profiles = PROFILES
            .iter()
            .map(|&name| {
                let mut p = Profile {
                    name,
                    additional: Stats::default(),
                    core: Stats::default(),
                    extended: Stats::default(),
                    features: BTreeMap::new(),
                };
                for r in results.iter().filter(|r| r.profile == name) {
                    if ADDITIONAL.contains(&r.name) {
                        p.additional.add(&r.verdict);
                        continue;
                    }
                    match r.feature {
                        None => p.core.add(&r.verdict),
                        Some(f) => {
                            p.extended.add(&r.verdict);
                            p.features.entry(f).or_default().add(&r.verdict);
                        }
                    }
                }
                p
            })
            .collect();
        Self {
            results,
            profiles,
            claimed,
        }
    }

    /// Extended features (of every profile) all of whose scenarios ran and passed.
    pub fn supported(&self) -> Vec<&'static str> {
        self.profiles.iter().flat_map(Profile::supported).collect()
    }

    /// Whether some profile has scenarios of extended feature `f`.
    fn has_feature(&self, f: &str) -> bool {
        self.profiles.iter().any(|p| p.features.contains_key(f))
    }

    /// Extended features the GatewayClass lists in `supportedFeatures` whose scenarios do not
    /// all pass: the list must not claim them.
    pub fn overclaimed(&self) -> Vec<String> {
        let passing = self.supported();
        self.claimed
            .iter()
            .filter(|f| self.has_feature(f) && !passing.contains(*f))
            .map(|f| format!("{f}: listed in supportedFeatures but its scenarios do not all pass"))
            .collect()
    }

    /// Extended features whose scenarios all pass but that `supportedFeatures` does not list.
    pub fn unclaimed(&self) -> Vec<&'static str> {
        self.supported()
            .into_iter()
            .filter(|f| !self.claimed.contains(f))
            .collect()
    }

    /// A plain-text table of every scenario and a Markdown table of features x result.
    pub fn table(&self) -> String {
        let mut out = String::from("scenario                                                  feature                                   result\n");
        for r in self.results {
            let (verdict, why) = match &r.verdict {
                Result::Passed => ("passed", String::new()),
                Result::Failed(e) => ("FAILED", format!(" ({e})")),
                Result::Skipped(e) => ("skipped", format!(" ({e})")),
            };
            out.push_str(&format!(
                "{:<57} {:<41} {verdict}{why}\n",
                r.name,
                r.feature.unwrap_or("core")
            ));
        }
        out.push_str("\n| Feature | Scenarios | Result |\n|---|---|---|\n");
        for p in &self.profiles {
            p.table_rows(&mut out);
        }
        out
    }

    /// The report in the upstream `ConformanceReport` shape.
    pub fn yaml(&self) -> String {
        let mut y = String::new();
        for l in [
            "apiVersion: gateway.networking.k8s.io/v1",
            "kind: ConformanceReport",
            "implementation:",
            "  organization: edgeplane",
            "  project: edgeplane",
            "  url: https://edgeplane.dev",
        ] {
            line(&mut y, 0, l);
        }
        line(
            &mut y,
            2,
            &format!("version: v{}", env!("CARGO_PKG_VERSION")),
        );
        list(&mut y, 2, "contact", &["https://edgeplane.dev"]);
        let date = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ");
        line(&mut y, 0, &format!("date: \"{date}\""));
        line(&mut y, 0, "gatewayAPIVersion: v1.6.1");
        line(&mut y, 0, "gatewayAPIChannel: standard");
        line(&mut y, 0, "mode: default");
        line(&mut y, 0, "profiles:");
        for p in self.profiles.iter().filter(|p| p.ran()) {
            p.yaml(&mut y, self.results);
        }
        y
    }
}

impl Profile {
    /// Whether any scenario of the profile ran (a filtered run may have none).
    fn ran(&self) -> bool {
        let n = |s: &Stats| s.passed + s.failed + s.skipped;
        n(&self.core) + n(&self.extended) + n(&self.additional) > 0
    }

    fn supported(&self) -> Vec<&'static str> {
        self.features
            .iter()
            .filter(|(_, s)| s.passed > 0 && s.failed == 0 && s.skipped == 0)
            .map(|(f, _)| *f)
            .collect()
    }

    fn unsupported(&self) -> Vec<&'static str> {
        let ok = self.supported();
        self.features
            .keys()
            .filter(|f| !ok.contains(f))
            .copied()
            .collect()
    }

    /// The profile's rows of the Markdown table.
    fn table_rows(&self, out: &mut String) {
        if !self.ran() {
            return;
        }
        out.push_str(&format!(
            "| core ({}) | {} | {} |\n",
            self.name,
            self.core.passed + self.core.failed + self.core.skipped,
            self.core.result()
        ));
        let extra = &self.additional;
        if extra.passed + extra.failed + extra.skipped > 0 {
            out.push_str(&format!(
                "| additional (edgeplane's own, no upstream test of that name) | {} | {} |\n",
                extra.passed + extra.failed + extra.skipped,
                extra.result()
            ));
        }
        for (f, s) in &self.features {
            let result = if s.failed > 0 {
                "failed"
            } else if s.skipped > 0 && s.passed > 0 {
                "partial (skips listed above)"
            } else if s.skipped > 0 {
                "skipped (not supported)"
            } else {
                "passed"
            };
            out.push_str(&format!(
                "| {f} | {} | {result} |\n",
                s.passed + s.failed + s.skipped
            ));
        }
    }

    /// The profile's entry of the report's `profiles`.
    fn yaml(&self, y: &mut String, results: &[ScenarioResult]) {
        let names = |pick: fn(&Result) -> bool, core: bool| -> Vec<&str> {
            results
                .iter()
                .filter(|r| r.profile == self.name)
                .filter(|r| r.feature.is_none() == core && pick(&r.verdict))
                .filter(|r| !ADDITIONAL.contains(&r.name))
                .map(|r| r.name)
                .collect()
        };
        let skipped = |r: &Result| matches!(r, Result::Skipped(_));
        let failed = |r: &Result| matches!(r, Result::Failed(_));
        line(y, 0, &format!("- name: {}", self.name));
        line(y, 2, "core:");
        stats(y, &self.core);
        list(y, 4, "failedTests", &names(failed, true));
        list(y, 4, "skippedTests", &names(skipped, true));
        line(y, 2, "extended:");
        stats(y, &self.extended);
        list(y, 4, "failedTests", &names(failed, false));
        list(y, 4, "skippedTests", &names(skipped, false));
        list(y, 4, "supportedFeatures", &self.supported());
        list(y, 4, "unsupportedFeatures", &self.unsupported());
    }
}

fn line(out: &mut String, indent: usize, text: &str) {
    out.push_str(&" ".repeat(indent));
    out.push_str(text);
    out.push('\n');
}

fn list(out: &mut String, indent: usize, key: &str, items: &[&str]) {
    if items.is_empty() {
        line(out, indent, &format!("{key}: []"));
        return;
    }
    line(out, indent, &format!("{key}:"));
    for i in items {
        line(out, indent, &format!("- {i}"));
    }
}

fn stats(out: &mut String, s: &Stats) {
    line(out, 4, &format!("result: {}", s.result()));
    line(out, 4, "statistics:");
    line(out, 6, &format!("Failed: {}", s.failed));
    line(out, 6, &format!("Passed: {}", s.passed));
    line(out, 6, &format!("Skipped: {}", s.skipped));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_is_yaml_in_the_upstream_shape() {
        let results = [
            ScenarioResult {
                name: "CoreOne",
                profile: GATEWAY_HTTP,
                feature: None,
                verdict: Result::Passed,
            },
            ScenarioResult {
                name: "CoreTwo",
                profile: GATEWAY_HTTP,
                feature: None,
                verdict: Result::Skipped("needs TLS".into()),
            },
            ScenarioResult {
                name: "ExtOne",
                profile: GATEWAY_HTTP,
                feature: Some("HTTPRouteMethodMatching"),
                verdict: Result::Passed,
            },
            ScenarioResult {
                name: "ExtTwo",
                profile: GATEWAY_HTTP,
                feature: Some("HTTPRouteCORS"),
                verdict: Result::Skipped("not supported".into()),
            },
            ScenarioResult {
                name: "GrpcOne",
                profile: GATEWAY_GRPC,
                feature: None,
                verdict: Result::Passed,
            },
        ];
        let summary = Summary::new(&results, crate::harness::claimed(false));
        let y: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&summary.yaml()).expect("report parses as YAML");
        assert_eq!(y["kind"].as_str(), Some("ConformanceReport"));
        assert_eq!(y["gatewayAPIVersion"].as_str(), Some("v1.6.1"));
        let p = &y["profiles"][0];
        assert_eq!(p["name"].as_str(), Some("GATEWAY-HTTP"));
        assert_eq!(p["core"]["result"].as_str(), Some("partial"));
        assert_eq!(p["core"]["statistics"]["Passed"].as_u64(), Some(1));
        assert_eq!(p["core"]["statistics"]["Skipped"].as_u64(), Some(1));
        assert_eq!(p["core"]["skippedTests"][0].as_str(), Some("CoreTwo"));
        let ext = &p["extended"];
        assert_eq!(
            ext["supportedFeatures"][0].as_str(),
            Some("HTTPRouteMethodMatching")
        );
        assert_eq!(
            ext["unsupportedFeatures"][0].as_str(),
            Some("HTTPRouteCORS")
        );
        let grpc = &y["profiles"][1];
        assert_eq!(grpc["name"].as_str(), Some("GATEWAY-GRPC"));
        assert_eq!(grpc["core"]["result"].as_str(), Some("success"));
        assert_eq!(grpc["core"]["statistics"]["Passed"].as_u64(), Some(1));
        assert!(y["profiles"][2].is_null());
        assert!(
            summary
                .overclaimed()
                .iter()
                .any(|m| m.starts_with("HTTPRouteCORS"))
                == crate::harness::claimed(false).contains(&"HTTPRouteCORS")
        );
    }
}
