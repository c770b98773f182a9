//! Every Kubernetes kind edgeplane reads, in one folder: our own kinds (`crd`: the edgeplane.dev
//! CRDs and their versions; `l4`: the v1 TCP/UDP/TLS route types; `httproute`: the HTTPRoute in
//! the compact form the snapshot keeps) beside what a kind is to edgeplane and the
//! [`kinds!`](crate::kinds!) macro that declares a set of kinds once: the snapshot struct
//! with one field per kind, and the description the providers read (which documents a kind is
//! read from, how it is watched). Pure: data and types only; the file and
//! kube providers interpret a declaration, this module never does I/O.

pub mod crd;
pub mod httproute;
pub mod ingress;
pub mod l4;
pub mod routes;
#[cfg(test)]
pub mod throwaway;

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::Resource;
use serde::de::DeserializeOwned;

/// Whether a kind's objects live in a namespace, from its kube `Resource::Scope`.
pub trait KindScope {
    /// True for namespaced kinds, false for cluster-scoped ones.
    const NAMESPACED: bool;
}

impl KindScope for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl KindScope for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// A Rust type that can be a kind of a snapshot: a Kubernetes object type with static type
/// information (every k8s-openapi type, every gateway-api type, every
/// `#[derive(CustomResource)]` type). Its API group and kind decide which manifest documents
/// the file provider reads into it (any version of the group); its group, version and plural
/// are what the kube provider lists and watches.
pub trait Kind:
    Resource<DynamicType = (), Scope: KindScope>
    + Clone
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Kind for K where
    K: Resource<DynamicType = (), Scope: KindScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// `namespace/name` keys of the objects a [`Declared::referenced`] kind is fetched for. The
/// namespace is ignored for cluster-scoped kinds.
pub type Wanted = BTreeSet<(String, String)>;

/// How the kube provider lists and watches one kind, and what the snapshot gets of it.
pub enum Watch<S, K> {
    /// Whole objects are listed and watched; the snapshot gets them all.
    Objects,
    /// Only metadata is listed and watched (`PartialObjectMetadata`); the snapshot gets
    /// objects that carry nothing but their metadata.
    Metadata {
        /// An object carrying only the watched metadata.
        from_metadata: fn(ObjectMeta) -> K,
    },
    /// Only metadata is listed and watched; the snapshot gets the whole objects that
    /// `wanted` names (computed from the rest of the snapshot), each fetched when first
    /// wanted and again only when its resourceVersion changes.
    Referenced {
        /// An object carrying only the watched metadata (for its resourceVersion).
        from_metadata: fn(ObjectMeta) -> K,
        /// The objects to fetch, read from the snapshot assembled so far.
        wanted: fn(&S) -> Wanted,
    },
}

impl<S, K> Clone for Watch<S, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S, K> Copy for Watch<S, K> {}

/// The watch modes, without their functions: for descriptions and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    Objects,
    Metadata,
    Referenced,
}

/// One kind of a set `S` as [`kinds!`](crate::kinds!) declares it: where its objects land in
/// `S` and how the providers treat it. Built with [`Declared::new`] and the option methods
/// named in the declaration.
pub struct Declared<S, K> {
    pub(crate) field: &'static str,
    pub(crate) slot: fn(&mut S) -> &mut Vec<Arc<K>>,
    pub(crate) on_read: fn(K) -> K,
    pub(crate) watch: Watch<S, K>,
    pub(crate) watched_if: fn(&K) -> bool,
}

impl<S, K> Clone for Declared<S, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S, K> Copy for Declared<S, K> {}

impl<S, K: Kind> Declared<S, K> {
    /// A kind held in `field` of `S` (`slot` reaches it), read from files as it is decoded
    /// and watched whole.
    pub fn new(field: &'static str, slot: fn(&mut S) -> &mut Vec<Arc<K>>) -> Self {
        Self {
            field,
            slot,
            on_read: std::convert::identity,
            watch: Watch::Objects,
            watched_if: |_| true,
        }
    }

    /// Option: watch metadata only; the snapshot's objects carry only their metadata (the
    /// translator reads nothing else of them, for example Namespace labels).
    pub fn metadata_only(mut self) -> Self
    where
        K: Default,
    {
        self.watch = Watch::Metadata {
            from_metadata: from_metadata::<K>,
        };
        self
    }

    /// Option: watch metadata only and fetch the whole objects `wanted` names, so a cluster's
    /// objects of this kind never all cross the wire (Secrets: only those listeners use).
    pub fn referenced(mut self, wanted: fn(&S) -> Wanted) -> Self
    where
        K: Default,
    {
        self.watch = Watch::Referenced {
            from_metadata: from_metadata::<K>,
            wanted,
        };
        self
    }

    /// Option: the kube provider leaves out watched objects for which `keep` is false (for
    /// example Gateways being deleted, so every replica closes their listeners).
    pub fn watched_if(mut self, keep: fn(&K) -> bool) -> Self {
        self.watched_if = keep;
        self
    }

    /// Option: applied to every object the file provider decodes, for what the API server
    /// would have done on write (a Secret's `stringData` merged into `data`).
    pub fn on_read(mut self, read: fn(K) -> K) -> Self {
        self.on_read = read;
        self
    }

    /// The snapshot field the kind lands in.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// API group, `""` for the core group. Documents of any version of this group with
    /// [`Self::kind`] are read into the field.
    pub fn group(&self) -> String {
        K::group(&()).into_owned()
    }

    /// The version the kube provider lists and watches.
    pub fn version(&self) -> String {
        K::version(&()).into_owned()
    }

    /// `kind` as manifests spell it (`HTTPRoute`).
    pub fn kind(&self) -> String {
        K::kind(&()).into_owned()
    }

    /// The resource name in API paths (`httproutes`).
    pub fn plural(&self) -> String {
        K::plural(&()).into_owned()
    }

    /// True when objects live in a namespace (a file object without one is in `default`).
    pub fn namespaced(&self) -> bool {
        <K::Scope as KindScope>::NAMESPACED
    }

    /// How the kube provider watches the kind.
    pub fn watch_mode(&self) -> WatchMode {
        match self.watch {
            Watch::Objects => WatchMode::Objects,
            Watch::Metadata { .. } => WatchMode::Metadata,
            Watch::Referenced { .. } => WatchMode::Referenced,
        }
    }

    /// The same kind as plain data.
    pub fn info(&self) -> KindInfo {
        KindInfo {
            field: self.field,
            group: self.group(),
            version: self.version(),
            kind: self.kind(),
            plural: self.plural(),
            namespaced: self.namespaced(),
            watch: self.watch_mode(),
        }
    }
}

/// An object of kind `K` that carries only `meta`.
fn from_metadata<K: Kind + Default>(meta: ObjectMeta) -> K {
    let mut object = K::default();
    *object.meta_mut() = meta;
    object
}

/// For [`Declared::watched_if`]: objects not being deleted.
pub fn not_being_deleted<K: Resource>(object: &K) -> bool {
    object.meta().deletion_timestamp.is_none()
}

/// One declared kind as plain data: for tests, logs and tools that list a set's kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindInfo {
    /// The snapshot field.
    pub field: &'static str,
    /// API group, `""` for the core group.
    pub group: String,
    /// The version watched in a cluster (files may use any version of the group).
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    pub watch: WatchMode,
}

/// Receives every kind of a set, typed: what the providers implement to act on a declaration.
pub trait Visitor<S> {
    /// Called once per declared kind, with its Rust type and declaration.
    fn kind<K: Kind>(&mut self, declared: Declared<S, K>);
}

/// A set of kinds and the snapshot struct that holds their objects; implemented by
/// [`kinds!`](crate::kinds!). The file provider (`provider::file::ConfigDir`) and the kube
/// provider (`provider::kube::watch::reflectors`) are generic over it.
pub trait KindSet: Default + Clone + Send + Sync + 'static {
    /// Calls `visitor` once per declared kind, in declaration order.
    fn visit<V: Visitor<Self>>(visitor: &mut V);

    /// Number of objects of every declared kind.
    fn count(&self) -> usize;

    /// The objects of kind `K`; empty when the set does not declare `K`. For code generic
    /// over a kind named at run time (route kinds); code that names its kind reads the field.
    fn objects<K: Kind>(&self) -> &[Arc<K>];

    /// Every declared kind as plain data, in declaration order.
    fn describe() -> Vec<KindInfo> {
        struct Describe(Vec<KindInfo>);
        impl<S> Visitor<S> for Describe {
            fn kind<K: Kind>(&mut self, declared: Declared<S, K>) {
                self.0.push(declared.info());
            }
        }
        let mut d = Describe(Vec::new());
        Self::visit(&mut d);
        d.0
    }
}

/// Marks that a set declares kind `K`, so code that needs that kind's objects or store (the
/// status writer needs Gateways) states it in its bounds and is checked at compile time.
/// Implemented by [`kinds!`](crate::kinds!) only: a set declares each Rust type once.
pub trait Holds<K: Kind>: KindSet {}

/// Declares a set of kinds once, and with it the snapshot struct that holds their objects.
///
/// ```
/// use k8s_openapi::api::core::v1::{Namespace, Service};
///
/// edgeplane::kinds! {
///     /// What my translator reads.
///     #[derive(Debug, Clone, Default)]
///     pub struct MySnapshot {
///         kinds {
///             services: Service,
///             /// Only labels are read.
///             namespaces: Namespace { metadata_only },
///         }
///         /// Fields that are not kinds are declared after the kinds; providers leave them at
///         /// their default.
///         pub note: Option<String>,
///     }
/// }
///
/// let s = MySnapshot::default();
/// assert_eq!(s.len(), 0);
/// assert!(s.services.is_empty() && s.note.is_none());
/// ```
///
/// Each `field: Type` in `kinds { }` becomes `pub field: Vec<Arc<Type>>`. `Type` says which
/// documents are read into it (its API group and kind, any version) and what is watched (its
/// group, version and plural; see [`Kind`]). Options in braces after the type are the
/// [`Declared`] methods of the same name: `metadata_only`, `referenced(wanted)`,
/// `watched_if(keep)`, `on_read(read)`. Each Rust type may appear once. Attributes on a kind
/// (its doc, a `#[cfg(...)]`) apply to everything generated for it.
///
/// The expansion is the struct (with its attributes; it must derive `Clone` and `Default`),
/// `len` and `is_empty`, and the [`KindSet`] and [`Holds`] implementations the providers
/// use: nothing else needs to learn about a new kind.
#[macro_export]
macro_rules! kinds {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident {
            kinds {
                $(
                    $(#[$kattr:meta])*
                    $field:ident : $kind:ty
                    $( { $( $opt:ident $( ( $( $arg:expr ),* $(,)? ) )? ),* $(,)? } )?
                ),* $(,)?
            }
            $(
                $(#[$eattr:meta])*
                $evis:vis $efield:ident : $ety:ty
            ),* $(,)?
        }
    ) => {
        $(#[$attr])*
        $vis struct $name {
            $(
                $(#[$kattr])*
                pub $field: ::std::vec::Vec<::std::sync::Arc<$kind>>,
            )*
            $(
                $(#[$eattr])*
                $evis $efield: $ety,
            )*
        }

        impl $name {
            /// Number of objects of every declared kind, for logs and metrics.
            #[allow(unused_doc_comments)]
            pub fn len(&self) -> usize {
                let mut count = 0;
                $(
                    $(#[$kattr])*
                    {
                        count += self.$field.len();
                    }
                )*
                count
            }

            /// True when no object of any declared kind is held.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }
        }

        impl $crate::kinds::KindSet for $name {
            #[allow(unused_doc_comments)]
            fn visit<V: $crate::kinds::Visitor<Self>>(visitor: &mut V) {
                $(
                    $(#[$kattr])*
                    visitor.kind(
                        $crate::kinds::Declared::<Self, $kind>::new(
                            ::std::stringify!($field),
                            |s| &mut s.$field,
                        )
                        $( $( .$opt( $( $( $arg ),* )? ) )* )?
                    );
                )*
            }

            fn count(&self) -> usize {
                self.len()
            }

            #[allow(unused_doc_comments)]
            fn objects<K: $crate::kinds::Kind>(&self) -> &[::std::sync::Arc<K>] {
                $(
                    $(#[$kattr])*
                    {
                        let any: &dyn ::std::any::Any = &self.$field;
                        if let Some(objects) = any.downcast_ref::<::std::vec::Vec<::std::sync::Arc<K>>>() {
                            return objects;
                        }
                    }
                )*
                &[]
            }
        }

        $( $(#[$kattr])* impl $crate::kinds::Holds<$kind> for $name {} )*
    };
}

/// The IPs a Gateway names in `spec.addresses` (`IPAddress` entries, or untyped entries whose
/// value is an IP), each once: what standalone listeners bind and what a cluster's Gateway
/// Service must be assigned before the Gateway is programmed. Other entries are the
/// translator's to refuse.
pub fn gateway_static_ips(
    gateway: &gateway_api::apis::standard::gateways::Gateway,
) -> Vec<std::net::IpAddr> {
    let mut out = Vec::new();
    for a in gateway.spec.addresses.iter().flatten() {
        if a.r#type.as_deref().unwrap_or("IPAddress") != "IPAddress" {
            continue;
        }
        let ip = a
            .value
            .as_deref()
            .and_then(|v| v.parse::<std::net::IpAddr>().ok());
        if let Some(ip) = ip.filter(|ip| !out.contains(ip)) {
            out.push(ip);
        }
    }
    out
}
