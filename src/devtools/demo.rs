//! The embedded quickstart: built-in echo backends, example manifests that route to them, and the
//! curl commands that show each feature. The CLI runs the proxy, admin and dashboard servers around it.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::devtools::echo::{serve_echo, EchoIdentity};
use crate::provider::manifest::{parse_manifests, ManifestError};
use crate::snapshot::Snapshot;
use crate::translate::DEFAULT_CONTROLLER_NAME;

const GATEWAY_YAML: &str = include_str!("demo/gateway.yaml");
const ROUTES_YAML: &str = include_str!("demo/routes.yaml");

/// Namespace of every demo object.
pub const NAMESPACE: &str = crate::snapshot::DEFAULT_NAMESPACE;

/// Echo pods the demo starts: (service, pod count).
const BACKENDS: &[(&str, usize)] = &[("demo-v1", 2), ("demo-v2", 1)];

/// Why the demo could not start.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("bind echo backend {pod}: {source}")]
    Bind {
        pod: String,
        #[source]
        source: std::io::Error,
    },
    #[error("embedded manifest: {0}")]
    Manifest(#[from] ManifestError),
    #[error("listen address {0} needs a non-zero port")]
    ZeroPort(SocketAddr),
}

/// One running echo pod.
#[derive(Debug, Clone)]
pub struct EchoPod {
    pub service: String,
    pub pod: String,
    pub addr: SocketAddr,
}

/// The demo's running echo backends; dropping it stops them.
pub struct Backends {
    pub pods: Vec<EchoPod>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Backends {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Starts every demo echo pod on an ephemeral port of 127.0.0.1.
pub async fn start_backends() -> Result<Backends, DemoError> {
    let mut pods = Vec::new();
    let mut tasks = Vec::new();
    for (service, count) in BACKENDS {
        for i in 0..*count {
            let pod = format!("{service}-{i}");
            let listener = TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(|source| DemoError::Bind {
                    pod: pod.clone(),
                    source,
                })?;
            let addr = listener.local_addr().map_err(|source| DemoError::Bind {
                pod: pod.clone(),
                source,
            })?;
            let identity = EchoIdentity {
                pod: pod.clone(),
                namespace: NAMESPACE.to_owned(),
            };
            let name = pod.clone();
            tasks.push(tokio::spawn(async move {
                if let Err(e) = serve_echo(listener, identity).await {
                    tracing::error!(pod = %name, error = %e, "echo backend stopped");
                }
            }));
            pods.push(EchoPod {
                service: (*service).to_owned(),
                pod,
                addr,
            });
        }
    }
    Ok(Backends { pods, tasks })
}

/// The demo configuration: the embedded Gateway (listening on `listen`'s port) and routes, plus
/// a Service per backend and an EndpointSlice per echo pod.
pub fn snapshot(listen: SocketAddr, pods: &[EchoPod]) -> Result<Snapshot, DemoError> {
    if listen.port() == 0 {
        return Err(DemoError::ZeroPort(listen));
    }
    let gateway = GATEWAY_YAML
        .replace("{CONTROLLER_NAME}", DEFAULT_CONTROLLER_NAME)
        .replace("{LISTEN_PORT}", &listen.port().to_string());
    let mut objects = parse_manifests(Path::new("demo/gateway.yaml"), &gateway)?;
    objects.extend(parse_manifests(Path::new("demo/routes.yaml"), ROUTES_YAML)?);
    objects.extend(parse_manifests(
        Path::new("demo/backends.yaml"),
        &backend_manifests(pods),
    )?);
    Ok(Snapshot::from_objects(objects))
}

/// Services on port 8080 named after each backend, and one EndpointSlice per pod (pods listen on
/// different ports, and a slice holds one port list).
fn backend_manifests(pods: &[EchoPod]) -> String {
    let mut out = String::new();
    for (service, _) in BACKENDS {
        let _ = write!(
            out,
            "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {service}\n  namespace: {NAMESPACE}\n\
             spec:\n  ports:\n  - name: http\n    port: 8080\n    protocol: TCP\n    targetPort: http\n"
        );
    }
    for p in pods {
        let family = if p.addr.is_ipv4() { "IPv4" } else { "IPv6" };
        let _ = write!(
            out,
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {pod}\n  \
             namespace: {NAMESPACE}\n  labels:\n    kubernetes.io/service-name: {service}\n\
             addressType: {family}\nendpoints:\n- addresses: [\"{ip}\"]\n  conditions:\n    ready: true\n  \
             targetRef:\n    kind: Pod\n    name: {pod}\n    namespace: {NAMESPACE}\n\
             ports:\n- name: http\n  port: {port}\n  protocol: TCP\n",
            pod = p.pod,
            service = p.service,
            ip = p.addr.ip(),
            port = p.addr.port(),
        );
    }
    out
}

/// A command to try, with what it shows.
#[derive(Debug, Clone)]
pub struct Hint {
    pub what: &'static str,
    pub command: String,
}

/// What each hint shows, and its command with `{base}` (the demo listener's URL), `{admin}`
/// (the admin server's URL) and `{dashboard}` (the dashboard server's URL) to fill in.
const HINTS: &[(&str, &str)] = &[
    (
        "path routing: /v1 goes to demo-v1 (two pods, balanced)",
        "curl -s {base}/v1/hello",
    ),
    (
        "path routing: /v2 goes to demo-v2",
        "curl -s {base}/v2/hello",
    ),
    (
        "header match: x-version: v2 goes to demo-v2 on any path",
        "curl -s -H 'x-version: v2' {base}/",
    ),
    (
        "weighted split: /split sends 90% to demo-v1 and 10% to demo-v2",
        "for i in $(seq 20); do curl -s {base}/split | grep -o '\"pod\": *\"[^\"]*\"'; done | sort | uniq -c",
    ),
    (
        "redirect: /old/... answers 301 to /v2/...",
        "curl -si {base}/old/page",
    ),
    (
        "header modifiers: request gets x-demo, response gets x-served-by",
        "curl -si {base}/headers",
    ),
    (
        "computed status of every object",
        "curl -s {dashboard}/debug/status",
    ),
    (
        "the live route table and metrics",
        "curl -s {dashboard}/debug/config; curl -s {admin}/metrics",
    ),
];

/// The curl commands printed at start; each works against the running demo.
pub fn hints(listen: SocketAddr, admin: SocketAddr, dashboard: SocketAddr) -> Vec<Hint> {
    let base = format!("http://{listen}");
    let admin = format!("http://{admin}");
    let dashboard = format!("http://{dashboard}");
    HINTS
        .iter()
        .map(|(what, command)| Hint {
            what,
            command: command
                .replace("{base}", &base)
                .replace("{admin}", &admin)
                .replace("{dashboard}", &dashboard),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_holds_gateway_routes_and_backends() {
        let pods: Vec<EchoPod> = [("demo-v1", 1000), ("demo-v1", 1001), ("demo-v2", 1002)]
            .iter()
            .enumerate()
            .map(|(i, (s, port))| EchoPod {
                service: (*s).into(),
                pod: format!("{s}-{i}"),
                addr: SocketAddr::from(([127, 0, 0, 1], *port)),
            })
            .collect();
        let s = snapshot(SocketAddr::from(([127, 0, 0, 1], 8080)), &pods).unwrap();
        assert_eq!(s.gateway_classes.len(), 1);
        assert_eq!(
            s.gateway_classes[0].spec.controller_name,
            DEFAULT_CONTROLLER_NAME
        );
        assert_eq!(s.gateways[0].spec.listeners[0].port, 8080);
        assert_eq!(s.http_routes.len(), 4);
        assert_eq!(s.services.len(), 2);
        assert_eq!(s.endpoint_slices.len(), 3);
        let slice = &s.endpoint_slices[1];
        assert_eq!(slice.ports.as_ref().unwrap()[0].port, Some(1001));
        assert!(snapshot(SocketAddr::from(([127, 0, 0, 1], 0)), &pods).is_err());
    }
}
