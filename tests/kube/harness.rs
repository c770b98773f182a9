//! A controller replica run in-process against the API emulator (the production kube client,
//! reflectors, election and status writer, plus the real reconcile loop and proxy), and builders
//! of the objects the tests apply.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgeplane::metrics::Metrics;
use edgeplane::provider::kube::{KubeOptions, KubeProvider};
use edgeplane::proxy::Proxy;
use edgeplane::reconcile::{Published, ReconcileOptions, Reconciler};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::support::apiserver::ApiServer;
use crate::support::client::{get, h1_client, send, Reply};
use crate::support::net::loopback_ip;
use crate::support::proxy::test_options;

pub const CONTROLLER: &str = "edgeplane.dev/gateway-controller";
pub const SYSTEM_NS: &str = "edgeplane-system";

/// One running replica.
pub struct Replica {
    pub bind: IpAddr,
    pub provider: Option<KubeProvider>,
    pub published: Arc<Published>,
    pub proxy: Arc<Proxy>,
    reconcile: JoinHandle<()>,
}

/// Options with short lease and retry times so failover and retries happen within seconds.
pub fn options(name: &str, port_base: u16) -> KubeOptions {
    let mut o = KubeOptions::new(CONTROLLER, SYSTEM_NS, name);
    o.lease_duration = Duration::from_secs(2);
    o.lease_renew_deadline = Duration::from_secs(1);
    o.lease_retry_period = Duration::from_millis(200);
    o.status_retry = Duration::from_millis(200);
    o.port_base = port_base;
    o.port_count = 50;
    o
}

/// A port range of its own for each test, so tests running in parallel never share one.
pub fn port_base() -> u16 {
    fastrand::u16(20_000..60_000)
}

impl Replica {
    /// Starts a replica binding on a random loopback IP; the reconcile loop starts with the
    /// first full snapshot, as `serve --kubernetes` does.
    pub async fn start(api: &ApiServer, name: &str, port_base: u16) -> Replica {
        Self::start_on(api, name, port_base, loopback_ip()).await
    }

    /// [`Replica::start`] binding on `bind`.
    pub async fn start_on(api: &ApiServer, name: &str, port_base: u16, bind: IpAddr) -> Replica {
        Self::start_with(api, options(name, port_base), bind).await
    }

    /// [`Replica::start_on`] with the given provider options (lease timing, say).
    pub async fn start_with(api: &ApiServer, options: KubeOptions, bind: IpAddr) -> Replica {
        Self::start_reconciling(api, options, bind, |_| {}).await
    }

    /// [`Replica::start_with`], its reconcile options changed by `tweak` (Ingress flags, a
    /// port map).
    pub async fn start_reconciling(
        api: &ApiServer,
        options: KubeOptions,
        bind: IpAddr,
        tweak: impl FnOnce(&mut ReconcileOptions),
    ) -> Replica {
        let metrics = Metrics::new();
        let published = Published::new(metrics.clone());
        let proxy = Proxy::new(published.shared_table(), metrics.clone(), test_options());
        let provider = KubeProvider::start(api.client(), options, published.clone(), metrics);
        let mut snapshots = provider.snapshots.clone();
        let mut reconcile = ReconcileOptions {
            ingress: Default::default(),
            controller_name: CONTROLLER.to_owned(),
            bind_address: bind,
            port_map: Default::default(),
            sources: Default::default(),
            capabilities: edgeplane::translate::Capabilities::KUBERNETES,
        };
        tweak(&mut reconcile);
        let reconciler = Reconciler::new(published.clone(), Some(proxy.clone()), reconcile);
        let reconcile = tokio::spawn(async move {
            if snapshots.changed().await.is_ok() {
                reconciler.run(snapshots).await;
            }
        });
        Replica {
            bind,
            provider: Some(provider),
            published,
            proxy,
            reconcile,
        }
    }

    pub fn is_leader(&self) -> bool {
        self.provider.as_ref().is_some_and(KubeProvider::is_leader)
    }

    /// Stops watching and writing (releasing the lease) but keeps serving the last table.
    pub async fn stop_controller(&mut self) {
        self.reconcile.abort();
        if let Some(p) = self.provider.take() {
            p.stop().await;
        }
    }

    /// Stops watching and writing as a crash would: every controller task is aborted and the
    /// lease is not released. The last table keeps serving.
    pub fn crash_controller(&mut self) {
        self.reconcile.abort();
        drop(self.provider.take());
    }

    /// Stops everything, listeners included.
    pub async fn stop(mut self) {
        self.stop_controller().await;
        self.proxy.shutdown().await;
    }

    /// Sends GET `path` with `host` to this replica's socket for `port`.
    pub async fn get(&self, port: u16, host: &str, path: &str) -> Result<Reply, String> {
        send(
            &h1_client(),
            get(SocketAddr::new(self.bind, port), host, path),
        )
        .await
        .map_err(|e| e.to_string())
    }

    /// Polls until a GET answers with `status` (and, when given, from `pod`); bounded.
    pub async fn wait_for(
        &self,
        port: u16,
        host: &str,
        path: &str,
        status: u16,
        pod: Option<&str>,
        timeout: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        while Instant::now() < deadline {
            match self.get(port, host, path).await {
                Ok(r)
                    if r.status.as_u16() == status
                        && (pod.is_none() || r.pod().as_deref() == pod) =>
                {
                    return Ok(())
                }
                Ok(r) => last = format!("{} from {:?}", r.status, r.pod()),
                Err(e) => last = e,
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(format!(
            "{host}{path} on {}:{port}: last answer {last}",
            self.bind
        ))
    }
}

/// The Service the leader made for a Gateway (in the Gateway's namespace, labelled with its
/// name), and the target port of listener port `port`.
pub fn gateway_port(api: &ApiServer, gw_ns: &str, gw: &str, port: u16) -> Option<u16> {
    gateway_service(api, gw_ns, gw)?["spec"]["ports"]
        .as_array()?
        .iter()
        .find(|p| p["port"] == port)?["targetPort"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
}

/// The Service the leader made for Gateway `gw_ns/gw`: found as Gateway API tools find it, by
/// the `gateway.networking.k8s.io/gateway-name` label in the Gateway's namespace.
pub fn gateway_service(api: &ApiServer, gw_ns: &str, gw: &str) -> Option<Value> {
    api.objects("services").into_iter().find(|s| {
        s["metadata"]["namespace"] == gw_ns
            && s["metadata"]["labels"]["gateway.networking.k8s.io/gateway-name"] == gw
    })
}

/// The EndpointSlice of the replicas' Service (`edgeplane-webhook` in the controller's
/// namespace, as the cluster's EndpointSlice controller would write it), listing `ready` and
/// `unready` pod addresses.
pub fn replicas_slice(ready: &[IpAddr], unready: &[IpAddr]) -> Value {
    let endpoint = |ip: &IpAddr, ready: bool| json!({"addresses": [ip.to_string()], "conditions": {"ready": ready}});
    let endpoints: Vec<Value> = ready
        .iter()
        .map(|ip| endpoint(ip, true))
        .chain(unready.iter().map(|ip| endpoint(ip, false)))
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": SYSTEM_NS, "name": "edgeplane-webhook-abcde",
            "labels": {"kubernetes.io/service-name": "edgeplane-webhook"}},
        "addressType": "IPv4",
        "ports": [{"name": "webhook", "port": 9443}],
        "endpoints": endpoints})
}

/// Waits until the Gateway's Service maps `port`, and returns the target port.
pub async fn wait_gateway_port(api: &ApiServer, gw_ns: &str, gw: &str, port: u16) -> u16 {
    let mut found = None;
    api.wait_until(Duration::from_secs(10), |a| {
        found = gateway_port(a, gw_ns, gw, port);
        found.is_some()
    })
    .await;
    found.unwrap_or_else(|| panic!("no Service for Gateway {gw_ns}/{gw} port {port}"))
}

/// The status of condition `ty` in a `conditions` array.
pub fn cond<'a>(conditions: &'a Value, ty: &str) -> Option<&'a Value> {
    conditions.as_array()?.iter().find(|c| c["type"] == ty)
}

pub fn class(name: &str) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": name}, "spec": {"controllerName": CONTROLLER}})
}

pub fn gateway(ns: &str, name: &str, class: &str, port: u16) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"namespace": ns, "name": name},
        "spec": {"gatewayClassName": class, "listeners": [
            {"name": "http", "port": port, "protocol": "HTTP"}]}})
}

pub fn route(ns: &str, name: &str, gw: &str, host: &str, path: &str, service: &str) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"namespace": ns, "name": name},
        "spec": {"parentRefs": [{"name": gw}], "hostnames": [host], "rules": [{
            "matches": [{"path": {"type": "PathPrefix", "value": path}}],
            "backendRefs": [{"name": service, "port": 80}]}]}})
}

/// A Service on port 80 and its EndpointSlice pointing at `backend` (an echo server).
pub fn backend(ns: &str, name: &str, backend: SocketAddr) -> [Value; 2] {
    [
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": ns, "name": name},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": backend.port()}]}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"namespace": ns, "name": format!("{name}-1"),
                "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": backend.port()}],
            "endpoints": [{"addresses": [backend.ip().to_string()], "conditions": {"ready": true}}]}),
    ]
}

/// The usual starting point: class `ep`, the given Gateways in namespace `web` listening on
/// port 80, and one Service (with its EndpointSlice) per `(name, address)` in `web`.
pub fn seed(api: &ApiServer, gateways: &[&str], services: &[(&str, SocketAddr)]) {
    api.insert(class("ep"));
    for gw in gateways {
        api.insert(gateway("web", gw, "ep", 80));
    }
    for (name, addr) in services {
        for o in backend("web", name, *addr) {
            api.insert(o);
        }
    }
}

/// Sum of status writes to every Gateway API kind plus side-object writes (Services, main
/// resources for finalizers): what "steady state writes nothing" is about.
pub fn controller_writes(api: &ApiServer) -> u64 {
    ["gatewayclasses", "gateways", "httproutes"]
        .iter()
        .map(|r| api.write_count(r, None, "status") + api.write_count(r, None, ""))
        .sum::<u64>()
        + api.write_count("services", None, "")
}

/// Steady-state load: changes unrelated objects so every replica rebuilds several times, then
/// waits a little longer for any write those rebuilds would cause.
pub async fn churn(api: &ApiServer, replicas: &[&Replica]) {
    for i in 0..5 {
        let start: Vec<u64> = replicas
            .iter()
            .map(|r| r.published.table().generation)
            .collect();
        api.insert(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"namespace": "unrelated", "name": format!("churn-{i}")},
            "spec": {"ports": [{"port": 80}]}}));
        let deadline = Instant::now() + Duration::from_secs(5);
        for (r, g) in replicas.iter().zip(start) {
            while r.published.table().generation == g && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(
                r.published.table().generation > g,
                "no rebuild after a change"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
}
