//! The table of resource kinds the emulator serves: group, version, plural, kind, scope and
//! whether a `/status` subresource exists. Storage is shared by all versions of one
//! (group, plural), as in a real API server.

use edgeplane::kinds::KindSet;
use edgeplane::snapshot::Snapshot;
use serde_json::Value;

/// One served resource at one version. Tests register more with `ApiServer::register`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    /// API group; empty for the core group.
    pub group: String,
    pub version: String,
    /// Lower-case plural, the path segment (`httproutes`).
    pub plural: String,
    pub kind: String,
    /// `true` when objects live in a namespace.
    pub namespaced: bool,
    /// `true` when the kind has a `/status` subresource: main-resource writes then keep
    /// `.status`, and status writes change nothing else.
    pub status: bool,
}

impl Kind {
    /// A kind from its parts; `group` is empty for the core group.
    pub fn new(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        status: bool,
    ) -> Kind {
        Kind {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            kind: kind.to_string(),
            namespaced,
            status,
        }
    }

    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The storage key shared by every version: `plural` for core, `plural.group` otherwise
    /// (the spelling `kubectl` uses).
    pub fn resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The singular name discovery reports (lower-case kind).
    pub fn singular(&self) -> String {
        self.kind.to_lowercase()
    }
}

/// The kinds one server serves, with the look-ups the HTTP layer and tests need.
#[derive(Debug, Clone)]
pub struct Table(pub Vec<Kind>);

impl Table {
    pub fn iter(&self) -> impl Iterator<Item = &Kind> {
        self.0.iter()
    }

    /// Adds a kind, replacing one with the same group, version and plural.
    pub fn register(&mut self, kind: Kind) {
        self.0.retain(|k| {
            !(k.group == kind.group && k.version == kind.version && k.plural == kind.plural)
        });
        self.0.push(kind);
    }

    /// Stops serving every version of `resource` (`plural.group`): a CRD not installed.
    pub fn unregister(&mut self, resource: &str) {
        self.0.retain(|k| k.resource() != resource);
    }

    /// Serves the versions a CustomResourceDefinition marks `served`, as the API server does
    /// once the CRD is established (a `/status` subresource where the version declares one).
    pub fn register_crd(&mut self, crd: &Value) {
        let spec = &crd["spec"];
        let (Some(group), Some(plural), Some(kind)) = (
            spec["group"].as_str(),
            spec["names"]["plural"].as_str(),
            spec["names"]["kind"].as_str(),
        ) else {
            return;
        };
        let namespaced = spec["scope"] == "Namespaced";
        for v in spec["versions"].as_array().into_iter().flatten() {
            let Some(version) = v["name"].as_str() else {
                continue;
            };
            if v["served"] == true {
                let status = v.pointer("/subresources/status").is_some();
                self.register(Kind::new(group, version, plural, kind, namespaced, status));
            } else {
                self.0
                    .retain(|k| !(k.group == group && k.version == version && k.plural == plural));
            }
        }
    }

    /// Stops serving what a deleted CustomResourceDefinition served.
    pub fn unregister_crd(&mut self, crd: &Value) {
        let spec = &crd["spec"];
        if let (Some(group), Some(plural)) =
            (spec["group"].as_str(), spec["names"]["plural"].as_str())
        {
            self.unregister(&format!("{plural}.{group}"));
        }
    }

    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Kind> {
        self.0
            .iter()
            .find(|k| k.group == group && k.version == version && k.plural == plural)
            .cloned()
    }

    /// A kind by `plural` (core preferred when several groups share it) or `plural.group`.
    pub fn find_resource(&self, resource: &str) -> Option<Kind> {
        let exact = self.0.iter().filter(|k| k.resource() == resource);
        let by_plural = self.0.iter().filter(|k| k.plural == resource);
        let mut found: Vec<&Kind> = exact.chain(by_plural).collect();
        found.sort_by_key(|k| {
            let exact = k.resource() == resource;
            let prio = version_priority(&k.version);
            (!exact, !k.group.is_empty(), std::cmp::Reverse(prio))
        });
        found.first().map(|k| (*k).clone())
    }

    /// The kind of an object from its `apiVersion` and `kind`.
    pub fn kind_of(&self, obj: &Value) -> Option<Kind> {
        let api_version = obj.get("apiVersion")?.as_str()?;
        let kind = obj.get("kind")?.as_str()?;
        self.0
            .iter()
            .find(|k| k.api_version() == api_version && k.kind == kind)
            .cloned()
    }
}

const GATEWAY: &str = "gateway.networking.k8s.io";
const EDGEPLANE: &str = "edgeplane.dev";

/// Resources a real API server serves without a `/status` subresource.
const WITHOUT_STATUS: &[&str] = &[
    "secrets",
    "configmaps",
    "events",
    "endpointslices",
    "leases",
    "referencegrants",
    "proxyconfigs",
    "ingressclasses",
];

/// Every kind the declaration `S` reads (see `edgeplane::kinds!`), at the version its reflector
/// watches; with a `/status` subresource unless the API server serves none for it.
pub fn declared<S: KindSet>() -> Vec<Kind> {
    S::describe()
        .into_iter()
        .map(|k| {
            let status = !WITHOUT_STATUS.contains(&k.plural.as_str());
            Kind::new(
                &k.group,
                &k.version,
                &k.plural,
                &k.kind,
                k.namespaced,
                status,
            )
        })
        .collect()
}

/// The kinds every emulator serves from the start: every kind edgeplane reads (its
/// `Snapshot` declaration), then the rest of a cluster the tests use.
pub fn builtin() -> Vec<Kind> {
    let mut table = Table(declared::<Snapshot>());
    for kind in cluster() {
        if table
            .lookup(&kind.group, &kind.version, &kind.plural)
            .is_none()
        {
            table.0.push(kind);
        }
    }
    table.0
}

/// What a cluster serves besides the kinds edgeplane reads: other core and API kinds, other
/// versions, other route kinds.
fn cluster() -> Vec<Kind> {
    let mut kinds = vec![
        Kind::new("", "v1", "configmaps", "ConfigMap", true, false),
        Kind::new("", "v1", "events", "Event", true, false),
        Kind::new("", "v1", "pods", "Pod", true, true),
        Kind::new("coordination.k8s.io", "v1", "leases", "Lease", true, false),
        Kind::new("events.k8s.io", "v1", "events", "Event", true, false),
        Kind::new(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            true,
        ),
        // edgeplane's own kinds are served at v1alpha1 too (v1beta1, the storage version,
        // comes from the `Snapshot` declaration).
        Kind::new(
            EDGEPLANE,
            "v1alpha1",
            "proxyconfigs",
            "ProxyConfig",
            true,
            false,
        ),
        Kind::new(
            EDGEPLANE,
            "v1alpha1",
            "trafficpolicies",
            "TrafficPolicy",
            true,
            true,
        ),
    ];
    kinds.push(Kind::new(
        GATEWAY,
        "v1beta1",
        "gatewayclasses",
        "GatewayClass",
        false,
        true,
    ));
    kinds.push(Kind::new(
        GATEWAY, "v1beta1", "gateways", "Gateway", true, true,
    ));
    kinds.push(Kind::new(
        GATEWAY,
        "v1beta1",
        "httproutes",
        "HTTPRoute",
        true,
        true,
    ));
    kinds.push(Kind::new(
        GATEWAY,
        "v1beta1",
        "referencegrants",
        "ReferenceGrant",
        true,
        false,
    ));
    kinds.push(Kind::new(
        GATEWAY,
        "v1",
        "grpcroutes",
        "GRPCRoute",
        true,
        true,
    ));
    kinds.push(Kind::new(
        GATEWAY,
        "v1",
        "backendtlspolicies",
        "BackendTLSPolicy",
        true,
        true,
    ));
    kinds.push(Kind::new(
        GATEWAY,
        "v1",
        "listenersets",
        "ListenerSet",
        true,
        true,
    ));
    for version in ["v1", "v1alpha3", "v1alpha2"] {
        kinds.push(Kind::new(
            GATEWAY,
            version,
            "tlsroutes",
            "TLSRoute",
            true,
            true,
        ));
    }
    for (plural, kind) in [("tcproutes", "TCPRoute"), ("udproutes", "UDPRoute")] {
        kinds.push(Kind::new(GATEWAY, "v1alpha2", plural, kind, true, true));
    }
    kinds
}

/// Orders versions as Kubernetes prefers them: GA before beta before alpha, higher first.
pub fn version_priority(version: &str) -> (u8, u32, u32) {
    let rest = version.strip_prefix('v').unwrap_or(version);
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (level, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (level, major, minor)
}
