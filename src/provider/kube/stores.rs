//! The caches of a kind set in a cluster: one store per declared kind (whole objects or
//! metadata only, as the declaration says), typed access for the controller's own code, and a
//! snapshot assembled from them, with referenced objects fetched one by one. Owns no Gateway
//! API rule; where stores come from (reflectors) is the caller's.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use gateway_api::apis::standard::gateways::Gateway;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::GetParams;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::store::WriterDropped;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use super::changes::{self, Changed, KindKey};
use crate::kinds::{Declared, Holds, Kind, KindScope, KindSet, Visitor, Wanted, Watch};
use crate::snapshot::Snapshot;

/// A referenced object could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("fetch {kind} {namespace}/{name}: {source}")]
    Fetch {
        kind: String,
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// The cache of one kind: whole objects, or metadata read back as objects carrying only it.
pub struct KindStore<K: Kind> {
    inner: Inner<K>,
}

enum Inner<K: Kind> {
    Objects(Store<K>),
    Metadata {
        store: Store<PartialObjectMeta<K>>,
        from_metadata: fn(ObjectMeta) -> K,
    },
}

impl<K: Kind> Clone for KindStore<K> {
    fn clone(&self) -> Self {
        let inner = match &self.inner {
            Inner::Objects(s) => Inner::Objects(s.clone()),
            Inner::Metadata {
                store,
                from_metadata,
            } => Inner::Metadata {
                store: store.clone(),
                from_metadata: *from_metadata,
            },
        };
        Self { inner }
    }
}

impl<K: Kind> KindStore<K> {
    /// A store of whole objects.
    pub fn objects(store: Store<K>) -> Self {
        Self {
            inner: Inner::Objects(store),
        }
    }

    /// A store of metadata; its objects carry nothing else.
    pub fn metadata(
        store: Store<PartialObjectMeta<K>>,
        from_metadata: fn(ObjectMeta) -> K,
    ) -> Self {
        Self {
            inner: Inner::Metadata {
                store,
                from_metadata,
            },
        }
    }

    /// Every cached object.
    pub fn state(&self) -> Vec<Arc<K>> {
        match &self.inner {
            Inner::Objects(s) => s.state(),
            Inner::Metadata {
                store,
                from_metadata,
            } => store
                .state()
                .iter()
                .map(|m| Arc::new(from_metadata(m.metadata.clone())))
                .collect(),
        }
    }

    /// One cached object (the namespace is ignored for cluster-scoped kinds).
    pub fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        match &self.inner {
            Inner::Objects(s) => s.get(key),
            Inner::Metadata {
                store,
                from_metadata,
            } => {
                let mut meta_key = ObjectRef::new(&key.name);
                meta_key.namespace.clone_from(&key.namespace);
                let m = store.get(&meta_key)?;
                Some(Arc::new(from_metadata(m.metadata.clone())))
            }
        }
    }

    /// Resolves once the store has completed its first list.
    pub async fn wait_until_ready(&self) -> Result<(), WriterDropped> {
        match &self.inner {
            Inner::Objects(s) => s.wait_until_ready().await,
            Inner::Metadata { store, .. } => store.wait_until_ready().await,
        }
    }
}

/// Whole objects fetched for a referenced kind, by `(namespace, name)`.
struct Fetched<K> {
    client: Option<Client>,
    objects: Mutex<HashMap<(String, String), Arc<K>>>,
}

impl<K: Kind> Fetched<K> {
    /// The wanted objects that exist. An object is fetched when first wanted and again when
    /// the metadata store shows a new resourceVersion; if a fetch fails, the copy fetched
    /// before is kept (a transient API error must not unbind a certificate).
    async fn referenced(&self, store: &KindStore<K>, wanted: &Wanted) -> Vec<Arc<K>> {
        let Some(client) = &self.client else {
            return Vec::new();
        };
        // Taken out for the duration: only the snapshot loop fetches, and never concurrently.
        let mut fetched =
            std::mem::take(&mut *self.objects.lock().unwrap_or_else(|e| e.into_inner()));
        fetched.retain(|k, _| wanted.contains(k));
        let mut out = Vec::new();
        for key @ (ns, name) in wanted {
            let Some(meta) = store.get(&ObjectRef::new(name).within(ns)) else {
                fetched.remove(key);
                continue;
            };
            let cached = fetched.get(key);
            if cached.is_some_and(|o| o.resource_version() == meta.resource_version()) {
                out.extend(cached.cloned());
                continue;
            }
            match fetch::<K>(client, ns, name).await {
                Ok(Some(object)) => {
                    let object = Arc::new(object);
                    fetched.insert(key.clone(), object.clone());
                    out.push(object);
                }
                Ok(None) => {
                    fetched.remove(key);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "keeping the object fetched before");
                    out.extend(fetched.get(key).cloned());
                }
            }
        }
        *self.objects.lock().unwrap_or_else(|e| e.into_inner()) = fetched;
        out
    }
}

/// Fetches one whole object; `Ok(None)` when it no longer exists.
pub async fn fetch<K: Kind>(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<K>, FetchError> {
    let error = |source| FetchError::Fetch {
        kind: K::kind(&()).into_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source: Box::new(source),
    };
    let ns = <K::Scope as KindScope>::NAMESPACED.then_some(namespace);
    let mut request = kube::core::Request::new(K::url_path(&(), ns))
        .get(name, &GetParams::default())
        .map_err(|e| error(kube::Error::BuildRequest(e)))?;
    request.extensions_mut().insert("get");
    match client.request::<K>(request).await {
        Ok(object) => Ok(Some(object)),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
        Err(e) => Err(error(e)),
    }
}

/// One declared kind with its store, type-erased so a set's stores can be held together.
trait Slot<S>: Send + Sync {
    fn ready(&self) -> BoxFuture<'_, Result<(), WriterDropped>>;
    /// Puts the cached objects into the snapshot (referenced kinds: nothing).
    fn fill(&self, snapshot: &mut S);
    /// Puts the referenced objects into the snapshot (other kinds: nothing).
    fn fetch<'a>(&'a self, snapshot: &'a mut S) -> BoxFuture<'a, ()>;
    /// Brings the kind's objects in a snapshot taken earlier in line with the store, where
    /// `changed` says (`None`: nothing changed; referenced kinds: nothing). True when any
    /// object changed.
    fn patch(&self, snapshot: &mut S, changed: Option<&Changed>) -> bool;
    /// Fetches the referenced objects of a snapshot taken earlier again (other kinds:
    /// nothing). True when any of them changed.
    fn refetch<'a>(&'a self, snapshot: &'a mut S) -> BoxFuture<'a, bool>;
    /// The kind, as changes are noted for it.
    fn kind(&self) -> &KindKey;
    fn store(&self) -> &dyn Any;
}

struct KindSlot<S, K: Kind> {
    declared: Declared<S, K>,
    kind: KindKey,
    store: KindStore<K>,
    fetched: Option<Fetched<K>>,
}

impl<S: KindSet, K: Kind> Slot<S> for KindSlot<S, K> {
    fn ready(&self) -> BoxFuture<'_, Result<(), WriterDropped>> {
        self.store.wait_until_ready().boxed()
    }

    fn fill(&self, snapshot: &mut S) {
        if matches!(self.declared.watch, Watch::Referenced { .. }) {
            return;
        }
        let keep = self.declared.watched_if;
        let objects = self.store.state().into_iter().filter(|o| keep(o));
        (self.declared.slot)(snapshot).extend(objects);
    }

    fn fetch<'a>(&'a self, snapshot: &'a mut S) -> BoxFuture<'a, ()> {
        async move {
            let (Watch::Referenced { wanted, .. }, Some(fetched)) =
                (self.declared.watch, &self.fetched)
            else {
                return;
            };
            let keep = self.declared.watched_if;
            let objects = fetched.referenced(&self.store, &wanted(snapshot)).await;
            (self.declared.slot)(snapshot).extend(objects.into_iter().filter(|o| keep(o)));
        }
        .boxed()
    }

    fn patch(&self, snapshot: &mut S, changed: Option<&Changed>) -> bool {
        if matches!(self.declared.watch, Watch::Referenced { .. }) {
            return false;
        }
        let keep = self.declared.watched_if;
        let objects = (self.declared.slot)(snapshot);
        match changed {
            None => false,
            Some(Changed::All) => {
                let before = changes::digest(objects);
                objects.clear();
                objects.extend(self.store.state().into_iter().filter(|o| keep(o)));
                changes::digest(objects) != before
            }
            Some(Changed::Keys(keys)) => changes::patch(objects, keys, |(ns, name)| {
                let mut key = ObjectRef::new(name);
                key.namespace.clone_from(ns);
                self.store.get(&key).filter(|o| keep(o))
            }),
        }
    }

    fn refetch<'a>(&'a self, snapshot: &'a mut S) -> BoxFuture<'a, bool> {
        async move {
            if !matches!(self.declared.watch, Watch::Referenced { .. }) {
                return false;
            }
            let objects = (self.declared.slot)(snapshot);
            let before = changes::digest(objects);
            objects.clear();
            self.fetch(snapshot).await;
            changes::digest((self.declared.slot)(snapshot)) != before
        }
        .boxed()
    }

    fn kind(&self) -> &KindKey {
        &self.kind
    }

    fn store(&self) -> &dyn Any {
        &self.store
    }
}

/// Where the stores of a set come from: reflectors in a cluster, bare stores in tests.
pub trait Open {
    /// A store of whole objects of `K`.
    fn objects<K: Kind>(&mut self) -> Store<K>;
    /// A store of the metadata of `K`.
    fn metadata<K: Kind>(&mut self) -> Store<PartialObjectMeta<K>>;
    /// The client referenced objects are fetched with; `None` fetches nothing.
    fn client(&self) -> Option<Client>;
}

/// The stores of every kind `S` declares. Cheap to clone; shared by the snapshot loop, the
/// status writer and the side-object keeper.
pub struct Stores<S = Snapshot> {
    slots: Arc<[Box<dyn Slot<S>>]>,
}

impl<S> Clone for Stores<S> {
    fn clone(&self) -> Self {
        Self {
            slots: self.slots.clone(),
        }
    }
}

impl<S: KindSet> Stores<S> {
    /// One store per declared kind, each opened as its declaration says.
    pub fn open(opener: &mut impl Open) -> Self {
        struct Each<'a, O, S> {
            opener: &'a mut O,
            slots: Vec<Box<dyn Slot<S>>>,
        }
        impl<O: Open, S: KindSet> Visitor<S> for Each<'_, O, S> {
            fn kind<K: Kind>(&mut self, declared: Declared<S, K>) {
                let (store, fetched) = match declared.watch {
                    Watch::Objects => (KindStore::objects(self.opener.objects()), None),
                    Watch::Metadata { from_metadata } => (
                        KindStore::metadata(self.opener.metadata(), from_metadata),
                        None,
                    ),
                    Watch::Referenced { from_metadata, .. } => (
                        KindStore::metadata(self.opener.metadata(), from_metadata),
                        Some(Fetched {
                            client: self.opener.client(),
                            objects: Mutex::default(),
                        }),
                    ),
                };
                self.slots.push(Box::new(KindSlot {
                    declared,
                    kind: changes::kind_of::<K>(),
                    store,
                    fetched,
                }));
            }
        }
        let mut each = Each {
            opener,
            slots: Vec::new(),
        };
        S::visit(&mut each);
        Self {
            slots: each.slots.into(),
        }
    }

    /// The store of kind `K`.
    pub fn of<K: Kind>(&self) -> &KindStore<K>
    where
        S: Holds<K>,
    {
        self.find()
            .expect("kinds! opens a store for every kind it marks as held")
    }

    /// The store of kind `K`, if the declaration `S` has one: for code generic over a kind
    /// named at run time (the status writer over route kinds).
    pub fn find<K: Kind>(&self) -> Option<&KindStore<K>> {
        self.slots.iter().find_map(|s| s.store().downcast_ref())
    }

    /// Resolves once every store has completed its first list.
    pub async fn wait_until_ready(&self) -> Result<(), WriterDropped> {
        for slot in self.slots.iter() {
            slot.ready().await?;
        }
        Ok(())
    }

    /// Every cached object, as the declaration says (objects a `watched_if` refuses left out;
    /// referenced kinds empty until [`Self::fetch_referenced`]).
    pub fn snapshot(&self) -> S {
        let mut snapshot = S::default();
        for slot in self.slots.iter() {
            slot.fill(&mut snapshot);
        }
        snapshot
    }

    /// Brings `snapshot`, taken from these stores earlier (with its referenced objects), in
    /// line with them, given what changed since ([`changes::Changes::take`]): only the objects
    /// named are looked up, a kind relisted is read again whole, and the referenced objects
    /// are fetched again (only those whose resourceVersion changed cost an API call). The
    /// result equals [`Self::snapshot`] followed by [`Self::fetch_referenced`], up to the order
    /// of objects; true when any object changed.
    pub async fn patch(&self, snapshot: &mut S, changed: &HashMap<KindKey, Changed>) -> bool {
        let mut any = false;
        for slot in self.slots.iter() {
            any |= slot.patch(snapshot, changed.get(slot.kind()));
        }
        for slot in self.slots.iter() {
            any |= slot.refetch(snapshot).await;
        }
        any
    }

    /// Fetches what the referenced kinds' `wanted` names in `snapshot` into it; only objects
    /// whose resourceVersion changed since they were last fetched cost an API call.
    pub async fn fetch_referenced(&self, snapshot: &mut S) {
        for slot in self.slots.iter() {
            slot.fetch(snapshot).await;
        }
    }
}

impl<S: Holds<Gateway>> Stores<S> {
    /// The current Gateway `namespace/name`, if cached.
    pub fn gateway(&self, namespace: &str, name: &str) -> Option<Arc<Gateway>> {
        self.of::<Gateway>()
            .get(&ObjectRef::new(name).within(namespace))
    }
}
