//! Backend resolution: a backendRef -> a Service port -> ready endpoints from the EndpointSlices
//! labelled with the Service's name. Checks kind, ReferenceGrants, ports and `appProtocol`. Pure.

use foldhash::HashMap;
use std::sync::Arc;

use internment::ArcIntern;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::kinds::routes::RouteKindId;
use crate::name::Name;
use crate::snapshot::Snapshot;
use crate::snapshot::{namespace_of, or_default_namespace};
use crate::table::{ServiceBackend, ServiceKey, UpstreamProtocol};
use crate::translate::backends::endpoints::{balance_of, serving_endpoints};
use crate::translate::backends::ServiceOverlays;
use crate::translate::common::refgrant::{Grants, RefSide};

pub use super::error::BackendError;

/// Label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The fields of a backendRef that resolution reads (rule and mirror refs share them).
#[derive(Debug, Clone, Copy)]
pub struct BackendRef<'a> {
    /// Kind of the referring route (`HTTPRoute`, `GRPCRoute`): ReferenceGrants name it.
    pub from_kind: &'static str,
    pub group: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub port: Option<i32>,
}

/// An owned copy of a [`BackendRef`], kept with its outcome so a cached route can check that
/// each of its references still resolves the same way. Interned whole, one pointer: thousands
/// of routes name the same few Service ports the same way, and hold one shared copy of the
/// reference (its strings interned too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRef(ArcIntern<RefParts>);

/// The fields of an [`OwnedRef`].
#[derive(Debug, PartialEq, Eq, Hash)]
struct RefParts {
    from_kind: &'static str,
    group: Option<Name>,
    kind: Option<Name>,
    name: Name,
    namespace: Option<Name>,
    port: Option<i32>,
}

impl OwnedRef {
    /// The shared copy of `r`.
    fn new(r: &BackendRef<'_>) -> Self {
        Self(ArcIntern::new(RefParts {
            from_kind: r.from_kind,
            group: r.group.map(Name::new),
            kind: r.kind.map(Name::new),
            name: Name::new(r.name),
            namespace: r.namespace.map(Name::new),
            port: r.port,
        }))
    }

    /// Borrows it back as the reference resolution reads.
    pub fn as_ref(&self) -> BackendRef<'_> {
        let parts = &*self.0;
        BackendRef {
            from_kind: parts.from_kind,
            group: parts.group.as_deref(),
            kind: parts.kind.as_deref(),
            name: &parts.name,
            namespace: parts.namespace.as_deref(),
            port: parts.port,
        }
    }
}

/// The outcome of resolving one backendRef. The error is boxed: the incremental cache keeps
/// every route's outcomes, nearly all of them Service ports, and an error inline would make
/// each of them as large as its three strings.
pub type Resolved = Result<Arc<ServiceBackend>, Box<BackendError>>;

/// True when two outcomes put the same thing into a table: the same (or an equal) Service
/// port with equal endpoints, or the same error.
pub fn same_outcome(a: &Resolved, b: &Resolved) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => Arc::ptr_eq(a, b) || a == b,
        (Err(a), Err(b)) => a == b,
        _ => false,
    }
}

/// A resolved Service port of an earlier translation with the objects it was computed from:
/// valid again while the Service and its EndpointSlices are the same objects (or equal ones).
#[derive(Debug, Clone)]
pub struct CachedBackend {
    service: Arc<Service>,
    slices: Vec<Arc<EndpointSlice>>,
    backend: Arc<ServiceBackend>,
}

/// Resolved Service ports by key and Service port number, carried from one translation to
/// the next.
pub type BackendCache = HashMap<(ServiceKey, i32), CachedBackend>;

fn same_object<T: PartialEq>(a: &Arc<T>, b: &Arc<T>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// Services and EndpointSlices of the snapshot, found by scanning until a translation has
/// looked up enough of them to be worth indexing: a small change resolves a few references
/// and must not pay for indexing thousands of objects.
#[derive(Debug)]
enum Lookup<'a> {
    Scan(usize),
    /// Shared by the threads that compile the routes of a full translation.
    Index(Arc<Index<'a>>),
}

/// The snapshot's Services and the EndpointSlices of each, by namespace and name.
#[derive(Debug)]
struct Index<'a> {
    services: HashMap<(&'a str, &'a str), &'a Arc<Service>>,
    slices: HashMap<(&'a str, &'a str), Vec<&'a Arc<EndpointSlice>>>,
}

/// The EndpointSlices of a Service: borrowed from the index, or collected by a scan.
type Slices<'a> = std::borrow::Cow<'a, [&'a Arc<EndpointSlice>]>;

/// Lookups by scanning before the snapshot is indexed.
const SCANS_BEFORE_INDEX: usize = 8;

fn ns_of(m: &Option<String>) -> &str {
    or_default_namespace(m.as_deref())
}

fn service_of(e: &EndpointSlice) -> Option<&str> {
    let labels = e.metadata.labels.as_ref()?;
    labels.get(SERVICE_NAME_LABEL).map(String::as_str)
}

impl<'a> Lookup<'a> {
    /// The Service `namespace/name` and its EndpointSlices (in snapshot order).
    fn find<'l>(
        &'l mut self,
        snapshot: &'a Snapshot,
        namespace: &'l str,
        name: &'l str,
    ) -> Option<(&'a Arc<Service>, Slices<'l>)> {
        if let Self::Scan(n) = self {
            if *n < SCANS_BEFORE_INDEX {
                *n += 1;
                let service = snapshot.services.iter().rev().find(|s| {
                    s.metadata.name.as_deref() == Some(name)
                        && ns_of(&s.metadata.namespace) == namespace
                })?;
                let slices = snapshot
                    .endpoint_slices
                    .iter()
                    .filter(|e| {
                        service_of(e) == Some(name) && ns_of(&e.metadata.namespace) == namespace
                    })
                    .collect();
                return Some((service, Slices::Owned(slices)));
            }
            *self = Self::Index(Arc::new(Index::of(snapshot)));
        }
        let Self::Index(index) = self else {
            return None;
        };
        let service = *index.services.get(&(namespace, name))?;
        let slices = index.slices.get(&(namespace, name));
        Some((service, Slices::Borrowed(slices.map_or(&[], Vec::as_slice))))
    }
}

impl<'a> Index<'a> {
    fn of(snapshot: &'a Snapshot) -> Self {
        let mut services =
            HashMap::with_capacity_and_hasher(snapshot.services.len(), Default::default());
        for s in &snapshot.services {
            if let Some(name) = s.metadata.name.as_deref() {
                services.insert((ns_of(&s.metadata.namespace), name), s);
            }
        }
        let mut slices: HashMap<_, Vec<&Arc<EndpointSlice>>> =
            HashMap::with_capacity_and_hasher(snapshot.endpoint_slices.len(), Default::default());
        for e in &snapshot.endpoint_slices {
            if let Some(svc) = service_of(e) {
                slices
                    .entry((ns_of(&e.metadata.namespace), svc))
                    .or_default()
                    .push(e);
            }
        }
        Self { services, slices }
    }
}

/// Services and EndpointSlices of one translation (looked up as [`Lookup`] says); resolved
/// ports are shared.
#[derive(Debug)]
pub struct Backends<'a> {
    snapshot: &'a Snapshot,
    lookup: Lookup<'a>,
    grants: Grants<'a>,
    /// Resolved Service ports by (namespace, name, port), keyed by the Service's own strings.
    resolved: HashMap<(&'a str, &'a str, i32), Arc<ServiceBackend>>,
    /// Service ports resolved by the previous translation.
    previous: BackendCache,
    /// Service ports resolved by this one, to hand to the next.
    next: BackendCache,
    /// Every resolution since [`Backends::record`], with its reference.
    recording: Option<Vec<(OwnedRef, Resolved)>>,
    /// What Service-targeted TrafficPolicies put on Service ports.
    overlays: Option<&'a ServiceOverlays>,
}

impl<'a> Backends<'a> {
    /// The snapshot references are resolved in.
    pub fn snapshot(&self) -> &'a Snapshot {
        self.snapshot
    }

    /// Looks up the snapshot's Services and EndpointSlices, reusing the Service ports of
    /// `previous` whose Service and EndpointSlices are unchanged (an empty cache resolves
    /// everything). With `keep`, every entry of `previous` is handed on to the next
    /// translation even if this one does not resolve it: the caller skips resolving what it
    /// knows to be unchanged.
    pub fn with_cache(snapshot: &'a Snapshot, previous: BackendCache, keep: bool) -> Self {
        let (previous, next) = if keep {
            (BackendCache::default(), previous)
        } else {
            (previous, BackendCache::default())
        };
        Self {
            snapshot,
            lookup: Lookup::Scan(0),
            grants: Grants::new(&snapshot.reference_grants),
            resolved: HashMap::default(),
            previous,
            next,
            recording: None,
            overlays: None,
        }
    }

    /// Indexes the snapshot's Services and EndpointSlices at once, for a caller that will
    /// resolve most of them (a full translation): scanning first would cost as much as the
    /// index for each of the first few lookups.
    pub fn indexed(mut self) -> Self {
        let index = Index::of(self.snapshot);
        // About one resolved port per Service.
        self.resolved.reserve(index.services.len());
        self.next.reserve(index.services.len());
        self.lookup = Lookup::Index(Arc::new(index));
        self
    }

    /// Resolution for another thread compiling part of the same translation's routes: the
    /// same snapshot, index and overlays, caches of its own (see [`Backends::absorb`]).
    pub fn worker(&mut self) -> Self {
        if matches!(self.lookup, Lookup::Scan(_)) {
            self.lookup = Lookup::Index(Arc::new(Index::of(self.snapshot)));
        }
        let lookup = match &self.lookup {
            Lookup::Index(index) => Lookup::Index(index.clone()),
            Lookup::Scan(n) => Lookup::Scan(*n),
        };
        Self {
            snapshot: self.snapshot,
            lookup,
            grants: self.grants,
            resolved: HashMap::default(),
            previous: BackendCache::default(),
            next: BackendCache::default(),
            recording: None,
            overlays: self.overlays,
        }
    }

    /// Takes over what a [`Backends::worker`] resolved; a Service port both resolved keeps
    /// this one's resolution.
    pub fn absorb(&mut self, worker: Self) {
        for (key, backend) in worker.resolved {
            self.resolved.entry(key).or_insert(backend);
        }
        for (key, cached) in worker.next {
            self.next.entry(key).or_insert(cached);
        }
    }

    /// Resolves Service ports with the balancer and limits TrafficPolicies give them.
    pub fn with_overlays(mut self, overlays: &'a ServiceOverlays) -> Self {
        self.overlays = Some(overlays).filter(|o| !o.is_empty());
        self
    }

    /// Starts recording every resolution (with its reference) until [`Backends::recorded`].
    pub fn record(&mut self) {
        // Most routes resolve one reference: nothing to shrink then.
        self.recording = Some(Vec::with_capacity(1));
    }

    /// The resolutions since [`Backends::record`]; stops recording. Sized to fit: the
    /// incremental cache keeps them as long as the route stands.
    pub fn recorded(&mut self) -> Vec<(OwnedRef, Resolved)> {
        let mut recorded = self.recording.take().unwrap_or_default();
        recorded.shrink_to_fit();
        recorded
    }

    /// The Service ports this translation resolved, for the next one.
    pub fn into_cache(self) -> BackendCache {
        self.next
    }

    /// Resolves a backendRef of a route in `route_ns` to a Service port and its ready endpoints.
    pub fn resolve(&mut self, route_ns: &str, r: &BackendRef<'_>) -> Resolved {
        self.resolve_from(RefSide::route(r.from_kind, route_ns), r)
    }

    /// [`Backends::resolve`] for a backendRef of any route kind: `from` is the route's side
    /// of a ReferenceGrant (its kind and namespace).
    pub fn resolve_from(&mut self, from: RefSide<'_>, r: &BackendRef<'_>) -> Resolved {
        let out = self.resolve_uncached(from, r);
        if let Some(recording) = &mut self.recording {
            recording.push((OwnedRef::new(r), out.clone()));
        }
        out
    }

    fn resolve_uncached(&mut self, from: RefSide<'_>, r: &BackendRef<'_>) -> Resolved {
        let namespace = self.permitted(from, r)?;
        let not_found = || BackendError::NotFound {
            namespace: namespace.to_owned(),
            name: r.name.to_owned(),
        };
        let (service, slices) = self
            .lookup
            .find(self.snapshot, namespace, r.name)
            .ok_or_else(not_found)?;
        // The Service's own strings outlive this call, so the cache borrows them.
        let svc_ns = namespace_of(&service.metadata);
        let svc_name = service.metadata.name.as_deref().unwrap_or("");
        let port = r.port.ok_or_else(|| BackendError::NoPort {
            namespace: namespace.to_owned(),
            name: r.name.to_owned(),
        })?;
        // Every check below depends only on the Service and port, so a port resolved once
        // resolves the same way again.
        if let Some(done) = self.resolved.get(&(svc_ns, svc_name, port)) {
            return Ok(done.clone());
        }
        let spec = service.spec.as_ref();
        let service_port = spec
            .and_then(|s| s.ports.as_ref())
            .and_then(|ports| ports.iter().find(|p| p.port == port))
            .ok_or_else(|| BackendError::NoServicePort {
                namespace: namespace.to_owned(),
                name: r.name.to_owned(),
                port,
            })?;
        let key = ServiceKey {
            namespace: namespace.to_owned(),
            name: r.name.to_owned(),
            port: u16::try_from(port).unwrap_or(0),
        };
        let overlay = self
            .overlays
            .and_then(|o| o.get(&(namespace.to_owned(), r.name.to_owned(), port)));
        let balance = overlay
            .and_then(|o| o.balance.clone())
            .unwrap_or_else(|| balance_of(service));
        let limits = overlay.and_then(|o| o.limits.clone());
        let cache_key = (key, port);
        let cached = self.previous.remove(&cache_key);
        let cached = cached.or_else(|| self.next.remove(&cache_key));
        if let Some(c) = cached.filter(|c| {
            same_object(&c.service, service)
                && c.backend.balance == balance
                && c.backend.limits == limits
                && c.slices.len() == slices.len()
                && c.slices
                    .iter()
                    .zip(slices.iter())
                    .all(|(a, b)| same_object(a, b))
        }) {
            let backend = c.backend.clone();
            self.next.insert(cache_key, c);
            self.resolved
                .insert((svc_ns, svc_name, port), backend.clone());
            return Ok(backend);
        }
        let (key, _) = cache_key;
        let protocol = upstream_protocol(service_port.app_protocol.as_deref(), &key)?;
        let external = spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName");
        if external && slices.is_empty() {
            return Err(Box::new(BackendError::ExternalName {
                namespace: namespace.to_owned(),
                name: r.name.to_owned(),
            }));
        }
        let slices: Vec<Arc<EndpointSlice>> = slices.iter().map(|s| Arc::clone(s)).collect();
        let (endpoints, terminating) = serving_endpoints(&slices, service_port);
        let backend = Arc::new(ServiceBackend {
            service: key.clone(),
            endpoints,
            terminating,
            protocol,
            balance,
            limits,
        });
        self.resolved
            .insert((svc_ns, svc_name, port), backend.clone());
        let cached = CachedBackend {
            service: Arc::clone(service),
            slices,
            backend: backend.clone(),
        };
        self.next.insert((key, port), cached);
        Ok(backend)
    }

    /// The namespace of the Service `r` names, when a route on side `from` may name it: a
    /// core Service (no other kind is a backend), in the route's namespace or one whose
    /// ReferenceGrants allow it (any, for an Ingress: [`needs_grant`]).
    fn permitted<'r>(
        &self,
        from: RefSide<'r>,
        r: &BackendRef<'r>,
    ) -> Result<&'r str, BackendError> {
        let route_ns = from.namespace;
        let group = r.group.unwrap_or("");
        let kind = r.kind.unwrap_or("Service");
        if !group.is_empty() || kind != "Service" {
            return Err(BackendError::InvalidKind {
                group: group.to_owned(),
                kind: kind.to_owned(),
                name: r.name.to_owned(),
            });
        }
        let namespace = r.namespace.unwrap_or(route_ns);
        let target = RefSide {
            group: "",
            kind: "Service",
            namespace,
        };
        if !self.grants.allows(from, target, r.name) && needs_grant(r.from_kind) {
            return Err(BackendError::NotPermitted {
                from: route_ns.to_owned(),
                namespace: namespace.to_owned(),
                name: r.name.to_owned(),
            });
        }
        Ok(namespace)
    }
}

/// Whether a reference of a route of kind `from_kind` to another namespace needs a
/// ReferenceGrant: every kind's but an Ingress's ([`RouteKindId::needs_reference_grant`]);
/// a kind that is no route (a TrafficPolicy's authorizer) needs one.
fn needs_grant(from_kind: &str) -> bool {
    from_kind
        .parse::<RouteKindId>()
        .map_or(true, RouteKindId::needs_reference_grant)
}

/// How the proxy speaks to a Service port, from its `appProtocol`.
fn upstream_protocol(
    app_protocol: Option<&str>,
    service: &ServiceKey,
) -> Result<UpstreamProtocol, BackendError> {
    match app_protocol {
        // `https`: HTTP/1.1 over the TLS a BackendTLSPolicy of the port configures.
        None | Some("http") | Some("https") | Some("HTTPS") | Some("kubernetes.io/ws") => {
            Ok(UpstreamProtocol::Http1)
        }
        Some("kubernetes.io/h2c") => Ok(UpstreamProtocol::H2c),
        Some(other) => Err(BackendError::UnsupportedProtocol {
            service: service.clone(),
            app_protocol: other.to_owned(),
        }),
    }
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
