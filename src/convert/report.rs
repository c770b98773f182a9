//! The conversion report: per Ingress, what it was written as or why it was not converted,
//! and per ingress-nginx annotation whether it was converted, converted with a difference
//! (which), or not converted (why: the problem serving reports in the Ingress's
//! `Unsupported` condition). As text (`report.txt`, stderr) and JSON (`report.jsonl`). Pure.

use k8s_openapi::api::networking::v1::Ingress;
use serde::Serialize;
use serde_json::Value;

use crate::kinds::ingress::{class_of, NGINX_PREFIX};
use crate::snapshot::{namespace_of, Snapshot};
use crate::translate::ingress::annotations::Annotations;
use crate::translate::ingress::upstream::{Protocol, Upstream};
use crate::translate::ingress::IngressProblems;

use super::gateway::ClientCertificate;
use super::grpc::Choice;

/// What became of one annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    Converted,
    ConvertedWithDifference,
    NotConverted,
}

/// One annotation of one Ingress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnnotationReport {
    pub annotation: String,
    pub outcome: Outcome,
    /// Where it went, what differs from ingress-nginx, or why it was not converted.
    pub detail: String,
}

/// One Ingress of the input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IngressReport {
    /// `namespace/name`.
    pub ingress: String,
    /// `Kind namespace/name` of each object written for it (empty: not converted).
    pub written: Vec<String>,
    /// Why it was not converted at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    pub annotations: Vec<AnnotationReport>,
    /// What else of it is not served, hence not converted (paths, backends, TLS).
    pub problems: Vec<String>,
}

/// The report of one conversion, Ingresses in input order (converted ones first).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub ingresses: Vec<IngressReport>,
}

/// Where a served annotation goes, and whether the result differs from ingress-nginx.
fn served(name: &str, value: &str) -> (Outcome, &'static str) {
    use Outcome::{Converted, ConvertedWithDifference};
    match name {
        "proxy-connect-timeout" | "proxy-read-timeout" => (
            ConvertedWithDifference,
            "HTTPRoute rule timeouts.backendRequest = connect + read timeout (ingress-nginx bounds each phase on its own)",
        ),
        "whitelist-source-range" | "allowlist-source-range" | "denylist-source-range" => {
            (Converted, "TrafficPolicy ipAccess")
        }
        "proxy-body-size" => (Converted, "TrafficPolicy bodyLimits.maxRequestBytes"),
        "limit-connections" => (Converted, "TrafficPolicy concurrencyLimit.perClient"),
        "ssl-redirect" | "force-ssl-redirect" if value.trim() == "false" => {
            (Converted, "no redirect: plain HTTP is routed like HTTPS")
        }
        "ssl-redirect" | "force-ssl-redirect" => (
            Converted,
            "HTTPRoute on listener http answering 308 to https",
        ),
        "permanent-redirect" | "permanent-redirect-code" | "temporal-redirect"
        | "temporal-redirect-code" | "app-root" => (Converted, "HTTPRoute RequestRedirect filter"),
        "rewrite-target" if value.contains('$') => (
            ConvertedWithDifference,
            "not written: regex captures have no Gateway API rewrite, the converted rule forwards the path unchanged",
        ),
        "rewrite-target" | "upstream-vhost" => (Converted, "HTTPRoute URLRewrite filter"),
        "x-forwarded-prefix" => (Converted, "HTTPRoute RequestHeaderModifier filter"),
        "enable-access-log" if value.trim() == "false" => (
            Outcome::NotConverted,
            "not written: Gateway API has no per-route access log switch (the converted routes' requests are logged)",
        ),
        "enable-access-log" => (Converted, "nothing to write: requests are logged"),
        "default-backend" => (
            ConvertedWithDifference,
            "written as chosen at conversion: a backend whose Service had no endpoints routes to the default backend's Service (Gateway API has no fallback, so later endpoint changes are not followed)",
        ),
        "enable-custom-http-errors" if value.trim() == "false" => {
            (Converted, "nothing to write: no error pages")
        }
        "custom-http-errors" | "enable-custom-http-errors" => (
            Converted,
            "TrafficPolicy errorPages answered by the default-backend Service",
        ),
        "custom-headers" => (
            Converted,
            "HTTPRoute ResponseHeaderModifier filter with the ConfigMap's entries (a later change of the ConfigMap is not followed)",
        ),
        "configuration-snippet" | "server-snippet"
            if crate::translate::ingress::headers::snippet(value)
                .is_ok_and(|e| !e.added_on_success().is_empty()) =>
        {
            (
                ConvertedWithDifference,
                "HTTPRoute RequestHeaderModifier and ResponseHeaderModifier filters; the ResponseHeaderModifier adds the headers of add_header without always to every response (nginx: 2xx and 3xx only)",
            )
        }
        "configuration-snippet" | "server-snippet" => (
            Converted,
            "HTTPRoute RequestHeaderModifier and ResponseHeaderModifier filters",
        ),
        "ssl-passthrough" if value.trim() == "true" => (
            Converted,
            "a TLS listener (Passthrough) per host on port 443 and a TLSRoute to the Service of the host's path /",
        ),
        "ssl-passthrough" => (Converted, "nothing to write: TLS is terminated"),
        "proxy-send-timeout" if value.trim() == "0" => {
            (Converted, "nothing to write: no limit")
        }
        "proxy-send-timeout" => (
            Outcome::NotConverted,
            "not written: Gateway API has no timeout between two writes to a backend",
        ),
        "proxy-next-upstream-timeout" if value.trim() == "0" => {
            (Converted, "nothing to write: no limit")
        }
        "proxy-next-upstream-timeout" => (
            Outcome::NotConverted,
            "not written: Gateway API retry has no time budget",
        ),
        "affinity" => (
            ConvertedWithDifference,
            "HTTPRoute rule sessionPersistence; the converted cookie's Path is / (served: the rule's path or session-cookie-path) and it has no SameSite or Secure (Gateway API has no cookie attributes)",
        ),
        "session-cookie-secure" if value.trim() == "false" => {
            (Converted, "nothing to write: the cookie is not Secure")
        }
        "session-cookie-path" | "session-cookie-samesite" | "session-cookie-secure" => (
            Outcome::NotConverted,
            "not written: Gateway API sessionPersistence has no cookie attributes",
        ),
        n if n == "enable-cors" || n.starts_with("cors-") => {
            (Converted, "HTTPRoute CORS filter")
        }
        _ => (Converted, "HTTPRoute rules or TrafficPolicy"),
    }
}

/// What becomes of `backend-protocol` and `proxy-ssl-*` (`None` for other annotations):
/// verified TLS is a BackendTLSPolicy; TLS without verification has no Gateway API form, nor
/// has HTTP/2 to a backend other than a Service port's `appProtocol`, which convert does not
/// rewrite (the Service is not its to write).
fn upstream_outcome(name: &str, up: &Upstream) -> Option<(Outcome, &'static str)> {
    use Outcome::{Converted, ConvertedWithDifference, NotConverted};
    let protocol = up.protocol.unwrap_or(Protocol::Http);
    Some(match name {
        "backend-protocol" => match (protocol, up.verify) {
            (Protocol::Http, _) => (Converted, "nothing to write: HTTP/1.1 is spoken to backends"),
            (Protocol::Grpc | Protocol::H2c, _) => (
                NotConverted,
                "not written: HTTP/2 to the backend: set appProtocol: kubernetes.io/h2c on the Service port (convert writes no Service)",
            ),
            (Protocol::Https, true) => (Converted, "BackendTLSPolicy"),
            (Protocol::Grpcs, true) => (
                ConvertedWithDifference,
                "BackendTLSPolicy; HTTP/2 is not written: set appProtocol: kubernetes.io/h2c on the Service port (convert writes no Service)",
            ),
            (Protocol::Https | Protocol::Grpcs, false) => (
                NotConverted,
                "not written: TLS without proxy-ssl-verify accepts any certificate, and a BackendTLSPolicy always verifies one (give proxy-ssl-secret a ca.crt and proxy-ssl-verify: \"on\")",
            ),
        },
        "proxy-ssl-secret" | "proxy-ssl-verify" | "proxy-ssl-name" | "proxy-ssl-server-name" => {
            if up.verify {
                (Converted, "BackendTLSPolicy validation (hostname, caCertificateRefs)")
            } else {
                (
                    NotConverted,
                    "not written: no BackendTLSPolicy without proxy-ssl-verify: \"on\"",
                )
            }
        }
        "upstream-hash-by" => (
            Converted,
            "TrafficPolicy loadBalancer ConsistentHash targeting the Ingress's Services",
        ),
        _ => return None,
    })
}

/// What becomes of `backend-protocol: GRPC`/`GRPCS` given the Ingress's [`Choice`]: its
/// routes as GRPCRoutes (HTTP/2 to the backends; only gRPC calls routed), or kept as
/// HTTPRoutes, and why.
fn grpc_outcome(up: &Upstream, grpc: Option<&Choice>) -> (Outcome, String) {
    let tls = match (up.protocol, up.verify) {
        (Some(Protocol::Grpcs), true) => " and BackendTLSPolicy",
        (Some(Protocol::Grpcs), false) => {
            return (
                Outcome::NotConverted,
                "written as GRPCRoutes, but TLS without proxy-ssl-verify accepts any certificate, and a BackendTLSPolicy always verifies one (give proxy-ssl-secret a ca.crt and proxy-ssl-verify: \"on\")".to_owned(),
            )
        }
        _ => "",
    };
    match grpc {
        Some(Err(why)) => (
            Outcome::NotConverted,
            format!(
                "not written: HTTP/2 to the backend: kept as HTTPRoutes ({why}): set appProtocol: kubernetes.io/h2c on the Service port (convert writes no Service)"
            ),
        ),
        _ => (
            Outcome::ConvertedWithDifference,
            format!(
                "GRPCRoute{tls} (HTTP/2 to the backend): only gRPC calls (content-type application/grpc) are routed, other requests answer 404 where ingress-nginx passes them to the backend"
            ),
        ),
    }
}

/// `proxy-ssl-secret` with a client certificate: the Gateway's `clientCertificateRef` is
/// presented to every TLS backend of the Gateway, where serving presents it to the Ingress's
/// own backends only.
fn client_outcome(c: &ClientCertificate, detail: String) -> (Outcome, String) {
    let detail = match c {
        ClientCertificate::Written(secret) => format!(
            "{detail}; the client certificate as the Gateway's spec.tls.backend.clientCertificateRef \
             (Secret {secret}), presented to every TLS backend of the Gateway, not only this Ingress's"
        ),
        ClientCertificate::NotWritten(why) => {
            format!("{detail}; the client certificate is not written: {why}")
        }
    };
    (Outcome::ConvertedWithDifference, detail)
}

/// The problem that names annotation `key`, if one does.
fn problem_of<'p>(key: &str, problems: &'p [String]) -> Option<&'p String> {
    problems
        .iter()
        .find(|p| p.contains(&format!("{key}:")) || p.contains(&format!("{key} ")))
}

fn key_of(ingress: &Ingress) -> (String, String) {
    (
        namespace_of(&ingress.metadata).to_owned(),
        ingress.metadata.name.clone().unwrap_or_default(),
    )
}

impl Report {
    /// Adds a converted Ingress (a prepared copy) with what it was written as.
    pub fn add_converted(
        &mut self,
        ingress: &Ingress,
        written: &[String],
        problems: &IngressProblems,
        grpc: Option<&Choice>,
        client: Option<&ClientCertificate>,
    ) {
        let key = key_of(ingress);
        let found: &[String] = problems.get(&key).map_or(&[], Vec::as_slice);
        let mut annotations = Vec::new();
        let mut claimed = Vec::new();
        let upstream = Annotations::parse(ingress).upstream;
        for (key, value) in ingress.metadata.annotations.iter().flatten() {
            let Some(name) = key.strip_prefix(NGINX_PREFIX) else {
                continue;
            };
            let (outcome, detail) = match problem_of(key, found) {
                Some(p) => {
                    claimed.push(p.clone());
                    let mut why = p.clone();
                    if name.ends_with("-source-range") {
                        // Served fail-closed: the TrafficPolicy says so too.
                        why.push_str(
                            "; written as a TrafficPolicy denying every address, as served",
                        );
                    }
                    (Outcome::NotConverted, why)
                }
                None => match upstream_outcome(name, &upstream) {
                    Some(_) if name == "backend-protocol" && grpc.is_some() => {
                        grpc_outcome(&upstream, grpc)
                    }
                    Some((o, d)) => (o, d.to_owned()),
                    // Filters of an Ingress written as GRPCRoutes are theirs.
                    None if matches!(grpc, Some(Ok(()))) => {
                        let (o, d) = served(name, value);
                        (o, d.replace("HTTPRoute ", "GRPCRoute "))
                    }
                    None => {
                        let (o, d) = served(name, value);
                        (o, d.to_owned())
                    }
                },
            };
            let (outcome, detail) = match client {
                Some(c) if name == "proxy-ssl-secret" && outcome == Outcome::Converted => {
                    client_outcome(c, detail)
                }
                _ => (outcome, detail),
            };
            annotations.push(AnnotationReport {
                annotation: key.clone(),
                outcome,
                detail,
            });
        }
        self.ingresses.push(IngressReport {
            ingress: format!("{}/{}", key.0, key.1),
            written: written.to_vec(),
            skipped: None,
            annotations,
            problems: found
                .iter()
                .filter(|p| !claimed.contains(p))
                .cloned()
                .collect(),
        });
    }

    /// Adds an object written for the converted Ingress `ingress` (`namespace/name`) after its
    /// block: a canary's ReferenceGrant, written with the routes of its main Ingress.
    pub fn add_written(&mut self, ingress: &str, object: &Value) {
        let name = format!(
            "{} {}/{}",
            object["kind"].as_str().unwrap_or_default(),
            object["metadata"]["namespace"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap_or_default()
        );
        if let Some(r) = self.ingresses.iter_mut().find(|r| r.ingress == ingress) {
            r.written.push(name);
        }
    }

    /// Adds every Ingress of `input` that `prepared` does not hold (not of a converted class).
    pub fn add_skipped(&mut self, input: &Snapshot, prepared: Option<&Snapshot>) {
        for ingress in &input.ingresses {
            let key = key_of(ingress);
            let converted = prepared.is_some_and(|p| p.ingresses.iter().any(|i| key_of(i) == key));
            if converted {
                continue;
            }
            let why = match class_of(ingress) {
                Some(c) => format!(
                    "IngressClass {c:?} is not one of ingress-nginx (k8s.io/ingress-nginx) or edgeplane, or is not in the input"
                ),
                None => "it names no IngressClass and no IngressClass of ingress-nginx or edgeplane in the input is the default".to_owned(),
            };
            self.ingresses.push(IngressReport {
                ingress: format!("{}/{}", key.0, key.1),
                written: Vec::new(),
                skipped: Some(why),
                annotations: Vec::new(),
                problems: Vec::new(),
            });
        }
    }

    /// Ingresses converted.
    pub fn converted(&self) -> usize {
        self.ingresses
            .iter()
            .filter(|i| i.skipped.is_none())
            .count()
    }

    /// Annotations not converted, plus other problems, across every converted Ingress.
    pub fn not_converted(&self) -> usize {
        self.ingresses
            .iter()
            .map(|i| {
                i.problems.len()
                    + i.annotations
                        .iter()
                        .filter(|a| a.outcome == Outcome::NotConverted)
                        .count()
            })
            .sum()
    }

    /// The report as text, one block per Ingress.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for i in &self.ingresses {
            match &i.skipped {
                Some(why) => {
                    out.push_str(&format!("Ingress {}: not converted: {why}\n", i.ingress))
                }
                None => out.push_str(&format!(
                    "Ingress {}: written as {}\n",
                    i.ingress,
                    if i.written.is_empty() {
                        "nothing".to_owned()
                    } else {
                        i.written.join(", ")
                    }
                )),
            }
            for a in &i.annotations {
                let outcome = match a.outcome {
                    Outcome::Converted => "converted",
                    Outcome::ConvertedWithDifference => "converted with a difference",
                    Outcome::NotConverted => "not converted",
                };
                out.push_str(&format!("  {}: {outcome}: {}\n", a.annotation, a.detail));
            }
            for p in &i.problems {
                out.push_str(&format!("  not converted: {p}\n"));
            }
        }
        out.push_str(&format!(
            "summary: {} of {} Ingresses converted, {} not converted item(s)\n",
            self.converted(),
            self.ingresses.len(),
            self.not_converted()
        ));
        out
    }
}
