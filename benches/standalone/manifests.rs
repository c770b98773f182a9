//! The manifests the standalone benchmark writes into its directory, in its two shapes: N
//! HTTPRoutes with one hostname each on one Gateway listener, or N ListenerSets with one
//! listener (and hostname) each, attached to a Gateway that allows them, with one HTTPRoute
//! attached to each ListenerSet. One file per route (its ListenerSet beside it).

use std::net::SocketAddr;
use std::path::Path;

/// The HTTP listener port of the benchmark's Gateway (above 1024: no privilege needed).
pub const HTTP_PORT: u16 = 8080;

/// What each route file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One HTTPRoute with hostname `<name>.example`, attached to the Gateway.
    Routes,
    /// ListenerSet `<name>` with one HTTP listener for `<name>.example` on the Gateway's port,
    /// and HTTPRoute `<name>` attached to it (no hostnames of its own).
    ListenerSets,
}

impl Shape {
    /// `STANDALONE_SHAPE=listenersets` selects the ListenerSet shape; anything else routes.
    pub fn from_env() -> Self {
        match std::env::var("STANDALONE_SHAPE").as_deref() {
            Ok("listenersets") => Self::ListenerSets,
            _ => Self::Routes,
        }
    }

    /// How the shape is named in the results.
    pub fn label(self) -> &'static str {
        match self {
            Self::Routes => "HTTPRoutes",
            Self::ListenerSets => "ListenerSets",
        }
    }
}

/// GatewayClass `edge`, Gateway `gw` with one HTTP listener (allowing ListenerSets of its
/// namespace in the ListenerSet shape), and Services `base` and `fresh`, each with one
/// EndpointSlice pointing at its echo backend.
pub fn infrastructure(shape: Shape, base: SocketAddr, fresh: SocketAddr) -> String {
    let allowed = match shape {
        Shape::Routes => "",
        Shape::ListenerSets => "  allowedListeners: {namespaces: {from: Same}}\n",
    };
    let mut out = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: edge}}\nspec: {{controllerName: edgeplane.dev/gateway-controller}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw}}\nspec:\n  gatewayClassName: edge\n{allowed}  listeners:\n  - {{name: http, port: {HTTP_PORT}, protocol: HTTP}}\n"
    );
    for (name, e) in [("base", base), ("fresh", fresh)] {
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\nspec: {{ports: [{{name: http, port: 80}}]}}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports: [{{name: http, port: {port}}}]\nendpoints: [{{addresses: ['{ip}'], conditions: {{ready: true}}}}]\n",
            port = e.port(),
            ip = e.ip(),
        ));
    }
    out
}

/// The file of route `name` for host `<name>.example`: `/` to Service `backend`, and when
/// `extra` is given, PathPrefix `/<extra>` to Service `fresh`.
pub fn route(shape: Shape, name: &str, backend: &str, extra: Option<&str>) -> String {
    let (listener_set, parent, hostnames) = match shape {
        Shape::Routes => (
            String::new(),
            "{name: gw}".to_owned(),
            format!("  hostnames: ['{name}.example']\n"),
        ),
        Shape::ListenerSets => (
            format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: ListenerSet\nmetadata: {{name: {name}}}\nspec:\n  parentRef: {{name: gw}}\n  listeners:\n  - {{name: http, port: {HTTP_PORT}, protocol: HTTP, hostname: '{name}.example'}}\n---\n"
            ),
            format!("{{kind: ListenerSet, name: {name}}}"),
            String::new(),
        ),
    };
    let mut out = format!(
        "{listener_set}apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}}}\nspec:\n  parentRefs: [{parent}]\n{hostnames}  rules:\n  - backendRefs: [{{name: {backend}, port: 80}}]\n"
    );
    if let Some(path) = extra {
        out.push_str(&format!(
            "  - matches: [{{path: {{type: PathPrefix, value: '/{path}'}}}}]\n    backendRefs: [{{name: fresh, port: 80}}]\n"
        ));
    }
    out
}

/// Writes one file in place (create or truncate, write, close), as an editor does.
pub fn write(dir: &Path, file: &str, text: &str) -> std::io::Result<()> {
    std::fs::write(dir.join(file), text)
}
