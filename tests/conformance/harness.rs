//! The scenario environment: writes a scenario's manifests (the shared base plus its own) into a
//! temporary directory, starts one echo server per backend pod and one `edgeplane serve
//! --config-dir` process on it, and gives each Gateway its own loopback address.
//!
//! Addresses: every scenario owns a loopback /24 `127.A.B.0`; Gateways get `.1`, `.2`, ... in the
//! order they are first written, pods `.20` and up (ports 3000 and 3001, 3443 for the same
//! echo over TLS with the scenario certificate, UDP 3000 for a datagram echo), the admin server
//! `.250:9901`, and Gateways without an `IPAddress` bind on `.240` (`--bind-address`). Listener
//! ports 80 and 443 are bound as 18080 and 18443 ([`PORT_MAP`]), so no privilege is needed.
//!
//! TLS: each scenario gets its own self-signed certificate (rcgen, made at start) valid for
//! [`CERT_NAMES`]; fixtures write it into Secrets as `{TLS_CRT}` / `{TLS_KEY}` (quoted YAML
//! strings) and HTTPS checks trust exactly that certificate, as upstream's
//! `tls-validity-checks-certificate`.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use edgeplane::devtools::echo::{
    serve_echo_logged, serve_udp_echo, EchoIdentity, LoggedRequest, RequestLog,
};
use edgeplane::devtools::echo_tls::{serve_echo_tls, server_config};

use crate::kube_env::Kube;
use crate::support::tls::{self_signed, TestCa, TestCert};
use serde_yaml_ng::{Mapping, Value};
use tokio::task::JoinHandle;

/// The shared base of every scenario: namespaces, backends, the three shared Gateways.
pub const BASE: &str = include_str!("manifests/base.yaml");
/// Ports every pod's echo servers listen on (Service targetPorts use these).
const POD_PORTS: [u16; 2] = [3000, 3001];
/// Port the TLS echo of `tls-backend*` pods listens on.
const TLS_POD_PORT: u16 = 8443;
/// Port of every pod's echo served over TLS with the scenario certificate (the backend of
/// TLS passthrough routes, which verifies end to end).
const POD_TLS_PORT: u16 = 3443;
/// Requests each pod's log keeps.
const POD_LOG_CAPACITY: usize = 2048;
/// Names the scenario certificate is valid for (the hostnames of the HTTPS scenarios).
pub const CERT_NAMES: &[&str] = &[
    "example.org",
    "second-example.org",
    "unknown-example.org",
    "*.wildcard.org",
    "fourth-example.wildcard.org",
    "https-listener.org",
];
/// Time the proxy gets to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// The loopback network `127.A.B` of one scenario.
#[derive(Debug, Clone, Copy)]
pub struct Net {
    a: u8,
    b: u8,
}

impl Net {
    /// A network no other scenario of this run uses: `A` is random per run, `B` counts up.
    pub fn next() -> Self {
        static A: OnceLock<u8> = OnceLock::new();
        static B: AtomicU8 = AtomicU8::new(1);
        let a = *A.get_or_init(|| fastrand::u8(2..=254));
        let b = B.fetch_add(1, Ordering::Relaxed);
        Self { a, b }
    }

    /// `127.A.B.host`.
    pub fn ip(&self, host: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, self.a, self.b, host))
    }

    /// `127.A.B`, substituted for `{NET}` in fixtures.
    pub fn prefix(&self) -> String {
        format!("127.{}.{}", self.a, self.b)
    }
}

/// One backend pod: an echo server on its own address, logging what it receives.
pub struct Pod {
    pub name: String,
    pub namespace: String,
    pub ip: IpAddr,
    pub log: RequestLog,
    tasks: Vec<JoinHandle<std::io::Result<()>>>,
}

impl Drop for Pod {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The `edgeplane serve` process of one scenario, killed when dropped.
struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running scenario: its directory, addresses, pods and proxy.
pub struct Env {
    pub net: Net,
    dir: tempfile::TempDir,
    pub admin: SocketAddr,
    /// The dashboard server: `/debug/status`, `/debug/config`.
    pub dashboard: SocketAddr,
    gateways: Mutex<BTreeMap<(String, String), IpAddr>>,
    pub pods: Vec<Pod>,
    /// The certificate of the scenario's Secrets, trusted by its HTTPS checks.
    pub cert: TestCert,
    /// The CA of client certificates, written into fixtures as `{CLIENT_CA}`, as upstream's
    /// `tls-validity-checks-ca-certificate`.
    pub client_ca: TestCa,
    /// A second client CA, `{PER_PORT_CA}`, as upstream's per-port CA.
    pub per_port_ca: TestCa,
    /// The CA of TLS backends, `{BACKEND_CA}`, as upstream's `tls-checks-ca-certificate`:
    /// it signs the certificate of every `tls-backend*` pod and the Gateway's client
    /// certificate `{BACKEND_CLIENT_CRT}` / `{BACKEND_CLIENT_KEY}`.
    pub backend_ca: TestCa,
    /// The client certificate and key (PEM) issued by `backend_ca`.
    pub backend_client: (String, String),
    server: Mutex<Option<Server>>,
    /// Kubernetes mode: the API emulator and `serve --kubernetes` instead of a manifest
    /// directory and `serve --config-dir` (see `kube_env`).
    pub kube: Option<Arc<Kube>>,
}

/// Why a scenario environment could not be set up.
pub type SetupError = String;

impl Env {
    /// Writes the base and `manifests` into a fresh directory, starts the pods of every
    /// Deployment and the proxy, and waits until the proxy is ready.
    pub async fn start(manifests: &str) -> Result<Env, SetupError> {
        Self::start_in(manifests, false).await
    }

    /// [`Env::start`], or in Kubernetes mode (`kube`): the objects are created through the API
    /// emulator and `serve --kubernetes` serves them.
    pub async fn start_in(manifests: &str, kube: bool) -> Result<Env, SetupError> {
        let net = Net::next();
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let mut env = Env {
            net,
            dir,
            admin: SocketAddr::new(net.ip(250), 9901),
            dashboard: SocketAddr::new(net.ip(250), 9902),
            gateways: Mutex::new(BTreeMap::new()),
            pods: Vec::new(),
            cert: self_signed(CERT_NAMES),
            client_ca: TestCa::new("client validation"),
            per_port_ca: TestCa::new("per-port client validation"),
            backend_ca: TestCa::new("tls backends"),
            backend_client: (String::new(), String::new()),
            server: Mutex::new(None),
            kube: None,
        };
        if kube {
            env.kube = Some(Kube::start(net).await?);
        }
        env.backend_client = env.backend_ca.issue_pem(&["gateway.example.org"], &[]);
        let mut docs = parse(&env.expand(BASE))?;
        docs.extend(parse(&env.expand(manifests))?);
        env.start_pods(&docs).await?;
        let docs: Vec<Value> = parse(&env.expand(BASE))?
            .into_iter()
            .chain(parse(&env.expand(manifests))?)
            .collect();
        env.write_docs("base.yaml", &parse(&env.expand(BASE))?)?;
        env.write_docs("scenario.yaml", &parse(&env.expand(manifests))?)?;
        env.write_endpoints(&docs)?;
        match &env.kube {
            Some(k) => k.spawn(env.admin)?,
            None => env.spawn_proxy()?,
        }
        env.wait_ready().await?;
        Ok(env)
    }

    /// The manifest directory (for `edgeplane check`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Replaces `{NET}` with the scenario's `127.A.B`, `{TLS_CRT}` and `{TLS_KEY}` with the
    /// scenario certificate's PEM as quoted strings, `{CLIENT_CA}`, `{PER_PORT_CA}` and
    /// `{BACKEND_CA}` with the CAs' certificates, `{BACKEND_CLIENT_CRT}` and
    /// `{BACKEND_CLIENT_KEY}` with the Gateway's client certificate for TLS backends, and `{PODS:deployment}` with the quoted
    /// addresses of that Deployment's pods (for EndpointSlices written by hand).
    pub fn expand(&self, text: &str) -> String {
        let quoted = |pem: &str| serde_json::to_string(pem).unwrap_or_default();
        let mut out = text
            .replace("{NET}", &self.net.prefix())
            .replace("{TLS_CRT}", &quoted(&self.cert.cert_pem))
            .replace("{TLS_KEY}", &quoted(&self.cert.key_pem))
            .replace("{CLIENT_CA}", &quoted(&self.client_ca.cert_pem))
            .replace("{PER_PORT_CA}", &quoted(&self.per_port_ca.cert_pem))
            .replace("{BACKEND_CA}", &quoted(&self.backend_ca.cert_pem))
            .replace("{BACKEND_CLIENT_CRT}", &quoted(&self.backend_client.0))
            .replace("{BACKEND_CLIENT_KEY}", &quoted(&self.backend_client.1));
        while let Some(start) = out.find("{PODS:") {
            let Some(len) = out[start..].find('}') else {
                break;
            };
            let deployment = &out[start + 6..start + len];
            let ips: Vec<String> = self
                .pods
                .iter()
                .filter(|p| p.name.strip_prefix(deployment).is_some_and(is_replica))
                .map(|p| format!("\"{}\"", p.ip))
                .collect();
            out.replace_range(start..=start + len, &ips.join(", "));
        }
        out
    }

    /// The address of Gateway `namespace/name` (assigned when the harness first wrote it).
    pub fn gateway(&self, namespace: &str, name: &str) -> IpAddr {
        let map = self.gateways.lock().unwrap_or_else(|p| p.into_inner());
        *map.get(&(namespace.to_owned(), name.to_owned()))
            .unwrap_or_else(|| panic!("no Gateway {namespace}/{name} in this scenario"))
    }

    /// Gateway `name` in `gateway-conformance-infra`.
    pub fn gw(&self, name: &str) -> IpAddr {
        self.gateway(crate::INFRA, name)
    }

    /// Writes (or rewrites) `file` in the manifest directory: the proxy reloads it.
    pub fn apply(&self, file: &str, manifests: &str) -> Result<(), SetupError> {
        let docs = parse(&self.expand(manifests))?;
        self.write_docs(file, &docs)
    }

    /// Requests logged by the pods whose names start with `prefix` (a Service name).
    pub fn logged(&self, prefix: &str) -> Vec<LoggedRequest> {
        self.pods
            .iter()
            .filter(|p| p.name.starts_with(prefix))
            .flat_map(|p| p.log.entries())
            .collect()
    }

    fn write_docs(&self, file: &str, docs: &[Value]) -> Result<(), SetupError> {
        if let Some(kube) = &self.kube {
            let mut json = Vec::new();
            for doc in docs {
                if kind(doc) == "Gateway" {
                    let ip = self.gateway_address(doc);
                    kube.place_gateway(ip, &namespace(doc), &name(doc));
                }
                let mut obj = crate::kube_env::to_json(doc)?;
                crate::kube_env::admit(&mut obj)?;
                json.push(obj);
            }
            return kube.apply_file(file, json);
        }
        let mut out = String::new();
        for doc in docs {
            let mut doc = doc.clone();
            if kind(&doc) == "Gateway" {
                self.place_gateway(&mut doc);
            }
            out.push_str("---\n");
            out.push_str(&serde_yaml_ng::to_string(&doc).map_err(|e| format!("yaml: {e}"))?);
        }
        write_atomic(&self.dir.path().join(file), &out)
    }

    /// The Gateway's scenario address `127.A.B.n`, given when the harness first writes it.
    fn gateway_address(&self, doc: &Value) -> IpAddr {
        let key = (namespace(doc), name(doc));
        let mut map = self.gateways.lock().unwrap_or_else(|p| p.into_inner());
        let next = u8::try_from(map.len() + 1).unwrap_or(19).min(19);
        *map.entry(key).or_insert_with(|| self.net.ip(next))
    }

    /// Records the Gateway's address; gives it `127.A.B.n` unless it sets `spec.addresses`.
    fn place_gateway(&self, doc: &mut Value) {
        let ip = self.gateway_address(doc);
        let spec = doc
            .get_mut("spec")
            .and_then(Value::as_mapping_mut)
            .expect("a Gateway fixture has a spec");
        if spec.contains_key("addresses") {
            return;
        }
        let mut addr = Mapping::new();
        addr.insert("type".into(), "IPAddress".into());
        addr.insert("value".into(), ip.to_string().into());
        spec.insert(
            "addresses".into(),
            Value::Sequence(vec![Value::Mapping(addr)]),
        );
    }

    /// One pod per replica of every Deployment, named `<deployment>-<n>`.
    async fn start_pods(&mut self, docs: &[Value]) -> Result<(), SetupError> {
        let mut host = 20u8;
        for d in docs.iter().filter(|d| kind(d) == "Deployment") {
            let replicas = d["spec"]["replicas"].as_u64().unwrap_or(1);
            for i in 0..replicas {
                let ip = self.net.ip(host);
                host = host.checked_add(1).ok_or("too many pods")?;
                let log = RequestLog::new(POD_LOG_CAPACITY);
                let identity = EchoIdentity {
                    pod: format!("{}-{i}", name(d)),
                    namespace: namespace(d),
                };
                let mut tasks = Vec::new();
                if let Some(config) = self.tls_pod_config(&name(d))? {
                    let addr = SocketAddr::new(ip, TLS_POD_PORT);
                    let listener = tokio::net::TcpListener::bind(addr)
                        .await
                        .map_err(|e| format!("bind TLS echo pod on {addr}: {e}"))?;
                    tasks.push(tokio::spawn(serve_echo_tls(
                        listener,
                        identity.clone(),
                        Some(log.clone()),
                        config,
                    )));
                }
                for port in POD_PORTS {
                    let addr = SocketAddr::new(ip, port);
                    let listener = tokio::net::TcpListener::bind(addr)
                        .await
                        .map_err(|e| format!("bind echo pod on {addr}: {e}"))?;
                    tasks.push(tokio::spawn(serve_echo_logged(
                        listener,
                        identity.clone(),
                        Some(log.clone()),
                    )));
                }
                let addr = SocketAddr::new(ip, POD_PORTS[0]);
                let udp = tokio::net::UdpSocket::bind(addr)
                    .await
                    .map_err(|e| format!("bind UDP echo pod on {addr}: {e}"))?;
                tasks.push(tokio::spawn(serve_udp_echo(udp, identity.clone())));
                let addr = SocketAddr::new(ip, POD_TLS_PORT);
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| format!("bind TLS echo pod on {addr}: {e}"))?;
                let tls = server_config(
                    self.cert.cert_pem.as_bytes(),
                    self.cert.key_pem.as_bytes(),
                    None,
                )
                .map_err(|e| format!("TLS echo certificate: {e}"))?;
                tasks.push(tokio::spawn(serve_echo_tls(
                    listener,
                    identity.clone(),
                    Some(log.clone()),
                    tls,
                )));
                self.pods.push(Pod {
                    name: identity.pod,
                    namespace: identity.namespace,
                    ip,
                    log,
                    tasks,
                });
            }
        }
        Ok(())
    }

    /// The TLS configuration of a pod of Deployment `deployment`: `tls-backend*` pods also
    /// serve TLS on [`TLS_POD_PORT`] with a certificate of `backend_ca` (for `abc.example.com`,
    /// `other.example.com` and `spiffe://abc.example.com/test-identity`), those whose name
    /// says `client-cert-validation` requiring a client certificate of `backend_ca`.
    fn tls_pod_config(
        &self,
        deployment: &str,
    ) -> Result<Option<std::sync::Arc<rustls::ServerConfig>>, SetupError> {
        if !deployment.starts_with("tls-backend") {
            return Ok(None);
        }
        let (cert, key) = self.backend_ca.issue_pem(
            &["abc.example.com", "other.example.com"],
            &["spiffe://abc.example.com/test-identity"],
        );
        let client_ca = deployment
            .contains("client-cert-validation")
            .then(|| self.backend_ca.cert_pem.clone());
        server_config(
            cert.as_bytes(),
            key.as_bytes(),
            client_ca.as_deref().map(str::as_bytes),
        )
        .map(Some)
        .map_err(|e| format!("TLS pod {deployment}: {e}"))
    }

    /// An EndpointSlice per Service listing the pods its selector picks (through the
    /// Deployments' template labels); ports named as the Service's, numbered as its targetPorts.
    fn write_endpoints(&self, docs: &[Value]) -> Result<(), SetupError> {
        let out = self.endpoints(docs);
        if self.kube.is_some() {
            return self.write_docs("endpoints.yaml", &parse(&out)?);
        }
        write_atomic(&self.dir.path().join("endpoints.yaml"), &out)
    }

    /// The EndpointSlices [`Env::write_endpoints`] writes, as YAML.
    fn endpoints(&self, docs: &[Value]) -> String {
        let mut out = String::new();
        for svc in docs.iter().filter(|d| kind(d) == "Service") {
            let ns = namespace(svc);
            let selector = svc["spec"]["selector"].as_mapping();
            let Some(selector) = selector.filter(|s| !s.is_empty()) else {
                continue;
            };
            let deployments: Vec<String> = docs
                .iter()
                .filter(|d| kind(d) == "Deployment" && namespace(d) == ns)
                .filter(|d| {
                    let labels = &d["spec"]["template"]["metadata"]["labels"];
                    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
                })
                .map(name)
                .collect();
            let ips: Vec<String> = self
                .pods
                .iter()
                .filter(|p| {
                    p.namespace == ns
                        && deployments
                            .iter()
                            .any(|d| p.name.strip_prefix(d.as_str()).is_some_and(is_replica))
                })
                .map(|p| format!("\"{}\"", p.ip))
                .collect();
            let ports: Vec<String> = svc["spec"]["ports"]
                .as_sequence()
                .into_iter()
                .flatten()
                .map(|p| {
                    let target = p["targetPort"].as_u64().or(p["port"].as_u64()).unwrap_or(0);
                    match p["name"].as_str() {
                        Some(n) => format!("{{name: {n}, port: {target}}}"),
                        None => format!("{{port: {target}}}"),
                    }
                })
                .collect();
            let endpoints = if ips.is_empty() {
                "[]".to_owned()
            } else {
                format!(
                    "[{{addresses: [{}], conditions: {{ready: true}}}}]",
                    ips.join(", ")
                )
            };
            let svc_name = name(svc);
            out.push_str(&format!(
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
                 metadata: {{name: {svc_name}-pods, namespace: {ns}, \
                 labels: {{kubernetes.io/service-name: {svc_name}}}}}\n\
                 addressType: IPv4\nports: [{}]\nendpoints: {endpoints}\n",
                ports.join(", ")
            ));
        }
        out
    }

    fn spawn_proxy(&self) -> Result<(), SetupError> {
        let child = Command::new(env!("CARGO_BIN_EXE_edgeplane"))
            .args(["serve", "--config-dir"])
            .arg(self.dir.path())
            .args(crds_args())
            .args(["--bind-address", &self.net.ip(240).to_string()])
            .args(["--admin-addr", &self.admin.to_string()])
            .args(["--dashboard-addr", &self.dashboard.to_string()])
            .args(["--drain-timeout", "1s"])
            .args(["--port-map", &port_map_arg()])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start edgeplane: {e}"))?;
        *self.server.lock().unwrap_or_else(|p| p.into_inner()) = Some(Server { child });
        Ok(())
    }

    async fn wait_ready(&self) -> Result<(), SetupError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(r) = crate::expect::admin_get(self.admin, "/readyz").await {
                if r.status == 200 {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(format!("edgeplane not ready within {READY_TIMEOUT:?}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// `-0`, `-1`, ...: the rest of a pod name after its Deployment's name.
fn is_replica(rest: &str) -> bool {
    rest.strip_prefix('-')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn parse(text: &str) -> Result<Vec<Value>, SetupError> {
    let mut out = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let v = <Value as serde::Deserialize>::deserialize(doc)
            .map_err(|e| format!("fixture does not parse: {e}"))?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or("")
}

fn name(doc: &Value) -> String {
    doc["metadata"]["name"].as_str().unwrap_or("").to_owned()
}

fn namespace(doc: &Value) -> String {
    doc["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned()
}

fn write_atomic(path: &Path, text: &str) -> Result<(), SetupError> {
    let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("x");
    let tmp: PathBuf = path.with_file_name(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).map_err(|e| format!("write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("rename {}: {e}", path.display()))
}

/// The privileged listener ports of the fixtures and the local ports the proxy binds for them
/// (`serve --port-map`), as a Gateway's Service maps its ports to targetPorts in a cluster: the
/// replay needs no privilege, and statuses, `Host` headers and redirects still carry the
/// Gateways' own ports. No fixture listens on a local port of this list.
pub const PORT_MAP: [(u16, u16); 2] = [(80, 18080), (443, 18443)];

/// Where a request for listener port `port` of the Gateway at address `ip` goes: in Kubernetes
/// mode the replica's socket for the target port the Gateway's Service maps it to, else `ip`
/// and [`socket_port`].
pub fn socket_addr(ip: IpAddr, port: u16) -> SocketAddr {
    crate::kube_env::resolve(ip, port, false)
        .unwrap_or_else(|| SocketAddr::new(ip, socket_port(port)))
}

/// [`socket_addr`] for a UDP listener (its Service's UDP port in Kubernetes mode).
pub fn udp_socket_addr(ip: IpAddr, port: u16) -> SocketAddr {
    crate::kube_env::resolve(ip, port, true)
        .unwrap_or_else(|| SocketAddr::new(ip, socket_port(port)))
}

/// The local port the proxy binds for Gateway listener port `port`.
pub fn socket_port(port: u16) -> u16 {
    PORT_MAP
        .iter()
        .find(|(listener, _)| *listener == port)
        .map_or(port, |(_, local)| *local)
}

/// `--port-map` for [`PORT_MAP`].
fn port_map_arg() -> String {
    PORT_MAP
        .iter()
        .map(|(listener, local)| format!("{listener}={local}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The upstream Gateway API CRDs (experimental channel, a superset of standard) beside the
/// project, where a copy is.
pub fn crds_dir() -> PathBuf {
    crate::support::upstream::release_dir().join("config/crd/experimental")
}

/// `--crds` with the upstream Gateway API CRDs (experimental channel, a superset of standard)
/// when a copy is beside the project, so fixtures are defaulted and validated exactly as a
/// cluster would; without it the built-in defaults apply.
pub fn crds_args() -> Vec<std::ffi::OsString> {
    match crate::support::upstream::upstream("config/crd/experimental", "conformance --crds") {
        Some(dir) => vec!["--crds".into(), dir.into_os_string()],
        None => Vec::new(),
    }
}

/// The features the GatewayClass claims in the replay's mode (Kubernetes mode when `kube`):
/// what scenarios, the report and the claimed-feature checks compare against.
pub fn claimed(kube: bool) -> Vec<&'static str> {
    use edgeplane::translate::{supported_features, Capabilities};
    let mode = if kube {
        Capabilities::KUBERNETES
    } else {
        Capabilities::STANDALONE
    };
    supported_features(&mode)
}

impl Env {
    /// The features the GatewayClass claims in this environment's mode.
    pub fn claimed(&self) -> Vec<&'static str> {
        claimed(self.kube.is_some())
    }
}
