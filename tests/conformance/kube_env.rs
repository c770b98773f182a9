//! The Kubernetes-mode side of a scenario environment: an in-process API emulator, the real
//! `edgeplane serve --kubernetes` binary watching it, the fixtures created through the API
//! (HTTP, the kube client) and the statuses read back from the emulator's objects.
//!
//! Traffic goes where a cluster would send it: to the replica's `--bind-address` on the target
//! port the Gateway's Service (in the Gateway's namespace, found by its
//! `gateway.networking.k8s.io/gateway-name` label) maps the listener port to. Scenario bodies
//! keep naming a Gateway by its scenario address (`env.gw(name)`); [`resolve`] turns that and
//! a listener port into the replica's socket. A stand-in load balancer writes each Gateway
//! Service's `status.loadBalancer.ingress` as a cloud controller would: the static addresses
//! it requests that are in the scenario's loopback network (so `{NET}.200` is usable and a
//! TEST-NET address is not), else the Gateway's scenario address.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope};
use serde_json::{json, Value};
use serde_yaml_ng::Value as Yaml;

use crate::harness::{Net, SetupError};
use crate::support::apiserver::{ApiServer, Kind};

/// The controller's namespace, where the binary keeps its Lease and finds its replicas.
const SYSTEM_NS: &str = "edgeplane-system";
/// Attempts at writing one object that keeps meeting conflicts.
const WRITE_ATTEMPTS: u32 = 10;
/// How often the stand-in load balancer looks at the Gateway Services.
const LB_PERIOD: Duration = Duration::from_millis(100);

/// An object by `(apiVersion, kind, namespace, name)`.
type ObjectKey = (String, String, String, String);

/// The emulator and binary of one scenario, killed and stopped when dropped.
pub struct Kube {
    api: Arc<ApiServer>,
    net: Net,
    /// The replica's `--bind-address`.
    bind: IpAddr,
    /// Objects each fixture file created, so rewriting a file deletes what it no longer has.
    files: Mutex<BTreeMap<String, Vec<ObjectKey>>>,
    /// Scenario address -> Gateway `(namespace, name)`.
    gateways: Mutex<BTreeMap<IpAddr, (String, String)>>,
    child: Mutex<Option<Child>>,
    _kubeconfig: tempfile::TempDir,
    lb: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Kube {
    fn drop(&mut self) {
        if let Some(lb) = self.lb.lock().unwrap_or_else(|p| p.into_inner()).take() {
            lb.abort();
        }
        let child = self.child.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut c) = child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Scenario networks (`127.A.B`) running in Kubernetes mode.
type Registry = Mutex<Vec<((u8, u8), Weak<Kube>)>>;

/// Scenario networks running in Kubernetes mode, for [`resolve`].
fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Vec::new()))
}

/// Where a request for listener port `port` of the Gateway at scenario address `ip` goes in
/// Kubernetes mode: the replica's socket for the Gateway Service's target port (a port where
/// nothing listens while the Service does not map it yet). `None` outside Kubernetes mode.
pub fn resolve(ip: IpAddr, port: u16, udp: bool) -> Option<SocketAddr> {
    let IpAddr::V4(v4) = ip else { return None };
    let [_, a, b, _] = v4.octets();
    let kube = registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|(net, _)| *net == (a, b))
        .find_map(|(_, k)| k.upgrade())?;
    let target = kube.target_port(ip, port, udp).unwrap_or(1);
    Some(SocketAddr::new(kube.bind, target))
}

impl Kube {
    /// Starts the emulator and creates the EndpointSlice of the replicas' Service (as the
    /// cluster would for the replica's pod) through the API; fixtures follow with
    /// [`Kube::apply_file`], then [`Kube::spawn`] starts the binary.
    pub async fn start(net: Net) -> Result<Arc<Kube>, SetupError> {
        let api = Arc::new(ApiServer::start().await);
        // The fixtures' backends are Deployments (the harness runs their pods itself).
        api.register(Kind::new(
            "apps",
            "v1",
            "deployments",
            "Deployment",
            true,
            true,
        ));
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let bind = net.ip(240);
        let kube = Arc::new(Kube {
            api,
            net,
            bind,
            files: Mutex::new(BTreeMap::new()),
            gateways: Mutex::new(BTreeMap::new()),
            child: Mutex::new(None),
            _kubeconfig: dir,
            lb: Mutex::new(None),
        });
        let lb = tokio::spawn(load_balancer(Arc::downgrade(&kube)));
        *kube.lb.lock().unwrap_or_else(|p| p.into_inner()) = Some(lb);
        {
            let mut registry = registry().lock().unwrap_or_else(|p| p.into_inner());
            registry.retain(|(_, k)| k.strong_count() > 0);
            registry.push((net_octets(net), Arc::downgrade(&kube)));
        }
        let replicas = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"namespace": SYSTEM_NS, "name": "edgeplane-webhook-replicas",
                "labels": {"kubernetes.io/service-name": "edgeplane-webhook"}},
            "addressType": "IPv4", "ports": [{"name": "webhook", "port": 9443}],
            "endpoints": [{"addresses": [bind.to_string()], "conditions": {"ready": true}}]});
        kube.apply_file("replicas.yaml", vec![replicas])?;
        Ok(kube)
    }

    /// Spawns `edgeplane serve --kubernetes` against the emulator, its admin server on `admin`.
    pub fn spawn(&self, admin: SocketAddr) -> Result<(), SetupError> {
        let kubeconfig = self._kubeconfig.path().join("kubeconfig");
        self.api
            .write_kubeconfig(&kubeconfig)
            .map_err(|e| format!("kubeconfig: {e}"))?;
        let webhook = SocketAddr::new(self.net.ip(241), 9443);
        let child = Command::new(env!("CARGO_BIN_EXE_edgeplane"))
            .args(["serve", "--kubernetes", "--namespace", SYSTEM_NS])
            .args(["--pod-name", "conformance-0"])
            .args(["--admin-addr", &admin.to_string()])
            .args(["--dashboard-addr", "127.0.0.1:0"])
            .args(["--bind-address", &self.bind.to_string()])
            .args(["--webhook-addr", &webhook.to_string()])
            .args([
                "--leader-lease-duration",
                "2s",
                "--leader-renew-deadline",
                "1s",
            ])
            .args(["--leader-retry-period", "200ms", "--drain-timeout", "1s"])
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "warn")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start edgeplane --kubernetes: {e}"))?;
        *self.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        Ok(())
    }

    /// Records that the Gateway `namespace/name` is reached at scenario address `ip`.
    pub fn place_gateway(&self, ip: IpAddr, namespace: &str, name: &str) {
        self.gateways
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ip, (namespace.to_owned(), name.to_owned()));
    }

    /// Creates or replaces every object of `docs` through the API, and deletes the objects
    /// `file` created before that `docs` no longer has. Runs the kube client on a thread of
    /// its own, so the scenario bodies' synchronous `apply` works from async code (on a
    /// multi-threaded runtime).
    pub fn apply_file(&self, file: &str, docs: Vec<Value>) -> Result<(), SetupError> {
        let keys: Vec<ObjectKey> = docs.iter().map(object_key).collect();
        let gone: Vec<ObjectKey> = self
            .files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(file)
            .into_iter()
            .flatten()
            .filter(|k| !keys.contains(k))
            .cloned()
            .collect();
        let config = self.api.config();
        // The emulator serves from this runtime: the worker waiting here hands its other tasks
        // over (block_in_place), so they go on while the writes are answered.
        tokio::task::block_in_place(|| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| format!("runtime: {e}"))?;
                    rt.block_on(write_objects(config, docs, gone))
                })
                .join()
                .unwrap_or_else(|_| Err("the API writer panicked".to_owned()))
            })
        })?;
        self.files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(file.to_owned(), keys);
        Ok(())
    }

    /// Every object's status as the emulator holds it, in the `/debug/status` shape (kind,
    /// namespace, name, `metadata.generation`, status), for the status assertions.
    pub fn status_json(&self) -> Value {
        let kinds = [
            ("gatewayclasses", "GatewayClass"),
            ("gateways", "Gateway"),
            ("listenersets", "ListenerSet"),
            ("httproutes", "HTTPRoute"),
            ("grpcroutes", "GRPCRoute"),
            ("tlsroutes", "TLSRoute"),
            ("tcproutes", "TCPRoute"),
            ("udproutes", "UDPRoute"),
            ("backendtlspolicies", "BackendTLSPolicy"),
        ];
        let mut out = Vec::new();
        for (plural, kind) in kinds {
            for o in self.api.objects(plural) {
                let status = &o["status"];
                if status.as_object().is_none_or(|s| s.is_empty()) {
                    continue;
                }
                out.push(
                    json!({"kind": kind, "namespace": o["metadata"]["namespace"],
                    "name": o["metadata"]["name"], "generation": o["metadata"]["generation"],
                    "status": status}),
                );
            }
        }
        Value::Array(out)
    }

    /// Services in `namespace` labelled for Gateway `name` (GEP-1762's
    /// `gateway.networking.k8s.io/gateway-name`), as the upstream infrastructure check lists
    /// them.
    pub fn gateway_services(&self, namespace: &str, name: &str) -> Vec<Value> {
        self.api
            .objects("services")
            .into_iter()
            .filter(|s| {
                s["metadata"]["namespace"] == namespace
                    && s["metadata"]["labels"]["gateway.networking.k8s.io/gateway-name"] == name
            })
            .collect()
    }

    /// The target port of listener port `port` (its UDP Service port when `udp`) of the
    /// Gateway at scenario address `ip` (or whose `spec.addresses` name `ip`).
    fn target_port(&self, ip: IpAddr, port: u16, udp: bool) -> Option<u16> {
        let placed = self
            .gateways
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&ip)
            .cloned();
        let (ns, name) = placed.or_else(|| {
            self.api.objects("gateways").into_iter().find_map(|g| {
                let named = g["spec"]["addresses"]
                    .as_array()?
                    .iter()
                    .any(|a| a["value"] == ip.to_string());
                named.then(|| {
                    let m = &g["metadata"];
                    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                    (s(&m["namespace"]), s(&m["name"]))
                })
            })
        })?;
        let svc = self.gateway_services(&ns, &name).into_iter().next()?;
        let entry = svc["spec"]["ports"]
            .as_array()?
            .iter()
            .find(|p| p["port"] == port && (p["protocol"] == "UDP") == udp)?
            .clone();
        entry["targetPort"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
    }
}

fn net_octets(net: Net) -> (u8, u8) {
    match net.ip(0) {
        IpAddr::V4(v4) => (v4.octets()[1], v4.octets()[2]),
        IpAddr::V6(_) => (0, 0),
    }
}

fn object_key(doc: &Value) -> ObjectKey {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (
        s(&doc["apiVersion"]),
        s(&doc["kind"]),
        s(&doc["metadata"]["namespace"]),
        s(&doc["metadata"]["name"]),
    )
}

/// Creates or replaces `docs`, then deletes `gone`, through the API.
async fn write_objects(
    config: kube::Config,
    docs: Vec<Value>,
    gone: Vec<ObjectKey>,
) -> Result<(), SetupError> {
    let client = kube::Client::try_from(config).map_err(|e| format!("kube client: {e}"))?;
    let mut kinds: HashMap<(String, String), (kube::api::ApiResource, bool)> = HashMap::new();
    let mut api_for = async |api_version: &str, kind: &str, ns: &str| {
        let key = (api_version.to_owned(), kind.to_owned());
        if !kinds.contains_key(&key) {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let gvk = GroupVersionKind::gvk(group, version, kind);
            let (ar, caps) = discovery::pinned_kind(&client, &gvk)
                .await
                .map_err(|e| format!("discover {api_version} {kind}: {e}"))?;
            kinds.insert(key.clone(), (ar, caps.scope == Scope::Namespaced));
        }
        let (ar, namespaced) = &kinds[&key];
        let ns = if ns.is_empty() { "default" } else { ns };
        Ok::<Api<DynamicObject>, SetupError>(if *namespaced {
            Api::namespaced_with(client.clone(), ns, ar)
        } else {
            Api::all_with(client.clone(), ar)
        })
    };
    for doc in docs {
        let (api_version, kind, ns, name) = object_key(&doc);
        let api = api_for(&api_version, &kind, &ns).await?;
        let obj: DynamicObject =
            serde_json::from_value(doc).map_err(|e| format!("{kind} {name}: {e}"))?;
        // A replace races with the controller's own writes (finalizers): read again and retry
        // on a conflict, as any client does.
        let mut attempts = 0;
        loop {
            attempts += 1;
            let current = api
                .get_opt(&name)
                .await
                .map_err(|e| format!("get {kind} {ns}/{name}: {e}"))?;
            let written = match current {
                Some(c) => {
                    let mut obj = obj.clone();
                    obj.metadata.resource_version = c.metadata.resource_version;
                    api.replace(&name, &PostParams::default(), &obj).await
                }
                None => api.create(&PostParams::default(), &obj).await,
            };
            match written {
                Ok(_) => break,
                Err(kube::Error::Api(s)) if s.code == 409 && attempts < WRITE_ATTEMPTS => {}
                Err(e) => return Err(format!("write {kind} {ns}/{name}: {e}")),
            }
        }
    }
    for (api_version, kind, ns, name) in gone {
        let api = api_for(&api_version, &kind, &ns).await?;
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(format!("delete {kind} {ns}/{name}: {e}")),
        }
    }
    Ok(())
}

/// The stand-in load balancer, for every Gateway Service (`app.kubernetes.io/managed-by:
/// edgeplane`) of type `LoadBalancer`: one that requests `externalIPs` gets as ingress those
/// that lie in the scenario's network; one that requests none gets its Gateway's scenario
/// address, as a cloud load balancer gives each Service an address of its own. Bounded by the
/// scenario: it ends when the environment is dropped.
async fn load_balancer(kube: Weak<Kube>) {
    loop {
        tokio::time::sleep(LB_PERIOD).await;
        let Some(kube) = kube.upgrade() else { return };
        let prefix = format!("{}.", kube.net.prefix());
        let placed = kube
            .gateways
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for svc in kube.api.objects("services") {
            let labels = &svc["metadata"]["labels"];
            if labels["app.kubernetes.io/managed-by"] != "edgeplane"
                || svc["spec"]["type"] != "LoadBalancer"
            {
                continue;
            }
            let requested: Vec<&str> = svc["spec"]["externalIPs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let assigned: Vec<String> = if requested.is_empty() {
                let gw = (
                    svc["metadata"]["namespace"].as_str().unwrap_or_default(),
                    labels["gateway.networking.k8s.io/gateway-name"]
                        .as_str()
                        .unwrap_or_default(),
                );
                placed
                    .iter()
                    .filter(|(_, (ns, name))| (ns.as_str(), name.as_str()) == gw)
                    .map(|(ip, _)| ip.to_string())
                    .collect()
            } else {
                requested
                    .into_iter()
                    .filter(|ip| ip.starts_with(&prefix))
                    .map(str::to_owned)
                    .collect()
            };
            let ingress: Vec<Value> = assigned.iter().map(|ip| json!({"ip": ip})).collect();
            let ingress = Value::Array(ingress);
            let current = &svc["status"]["loadBalancer"]["ingress"];
            let same = current == &ingress || (current.is_null() && ingress == json!([]));
            if !same {
                let mut next = svc.clone();
                next["status"] = json!({"loadBalancer": {"ingress": ingress}});
                kube.api.insert(next);
            }
        }
    }
}

/// Defaults and validates `obj` as the API server's CRD admission would (the emulator does
/// not): with the upstream CRDs beside the project, as `--crds` does standalone, else the
/// built-in Gateway API defaults. Route `parentRefs` get their `group` and `kind` this way.
/// A Secret's `stringData` is merged into `data` (base64), as the API server stores it.
pub fn admit(obj: &mut Value) -> Result<(), SetupError> {
    if obj["kind"] == "Secret" && obj["apiVersion"] == "v1" {
        use base64::Engine;
        let strings = obj
            .as_object_mut()
            .and_then(|o| o.remove("stringData"))
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        for (k, v) in strings {
            let text = v.as_str().unwrap_or_default();
            obj["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(text));
        }
    }
    static CRDS: OnceLock<Result<edgeplane::admission::Crds, String>> = OnceLock::new();
    let crds = CRDS.get_or_init(|| {
        let dir = crate::harness::crds_dir();
        let paths = if dir.is_dir() { vec![dir] } else { Vec::new() };
        edgeplane::provider::crds::load_crds(&paths)
            .map(|(crds, _)| crds)
            .map_err(|e| format!("CRDs: {e}"))
    });
    let crds = crds.as_ref().map_err(Clone::clone)?;
    crds.admit(obj, None)
        .map_err(|e| format!("{} {}: {e}", obj["kind"], obj["metadata"]["name"]))
}

/// A YAML document as JSON (the API speaks JSON).
pub fn to_json(doc: &Yaml) -> Result<Value, SetupError> {
    serde_json::to_value(doc).map_err(|e| format!("fixture as JSON: {e}"))
}
