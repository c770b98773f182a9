//! Reusing a route's attachment and status across translations. Attachment reads the route,
//! its compiled rules, the Gateways its parentRefs name and the labels of its namespace; this
//! module gives each Gateway and namespace a token that changes whenever what attachment reads
//! of it changes ([`Faces`]), so a route whose compiled rules are the same `Arc` and whose
//! parents and namespace keep their tokens gets its previous [`Attached`] back instead of
//! being attached again. Pure.
//!
//! A reused status keeps the `lastTransitionTime`s of the translation that computed it. Every
//! one of its conditions is unchanged since then, so sealing the report (which carries the
//! previous publication's time over every condition whose status did not change) publishes
//! exactly what it would after a full translation.

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::sync::Arc;

use crate::kinds::httproute::HttpRoute;

use crate::kinds::routes::{RouteKind, RouteKindId};
use crate::snapshot::namespace_of;
use crate::translate::cache::statuses::StatusPool;
use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::gateways::listener::{ListenerModel, NamespacePolicy};
use crate::translate::gateways::listenerset::SetModel;
use crate::translate::routes::attach::Attached;
use crate::translate::routes::httproute::attach_route;
use crate::translate::routes::parents::GatewayIndex;
use crate::translate::routes::rules::CompiledRoute;
use crate::translate::TranslateOptions;

/// The token of a namespace the snapshot does not have: its labels are derived from its name.
const ABSENT_NAMESPACE: u64 = 0;

/// What attachment reads of one listener.
#[derive(Debug, PartialEq)]
struct ListenerFace {
    name: String,
    port: i32,
    hostname: Option<String>,
    /// Whether HTTPRoutes, GRPCRoutes may attach.
    accepts: [bool; 2],
    valid: bool,
    namespaces: NamespacePolicy,
    /// The ListenerSet that contributed it: its index, namespace and name (routes name it).
    origin: Option<(usize, String, String)>,
}

/// What attachment reads of one Gateway: its namespace, whether it is accepted, and its
/// listeners in order.
#[derive(Debug, PartialEq)]
struct GatewayFace {
    namespace: String,
    accepted: bool,
    listeners: Vec<ListenerFace>,
}

impl GatewayFace {
    fn of(g: &GatewayModel<'_>) -> Self {
        let listener = |l: &ListenerModel<'_>| ListenerFace {
            name: l.spec.name.clone(),
            port: l.spec.port,
            hostname: l.hostname.map(str::to_owned),
            accepts: [RouteKindId::HttpRoute, RouteKindId::GrpcRoute]
                .map(|k| l.accepts(k.as_str())),
            valid: l.valid(),
            namespaces: l.namespaces.clone(),
            origin: l
                .origin
                .map(|(i, ns, name)| (i, ns.to_owned(), name.to_owned())),
        };
        Self {
            namespace: g.namespace.to_owned(),
            accepted: g.accepted(),
            listeners: g.listeners.iter().map(listener).collect(),
        }
    }
}

/// Tokens of Gateways and namespaces, carried from one translation to the next. A token is
/// handed out for one face only: equal tokens mean attachment reads the same.
#[derive(Debug, Default)]
pub struct Faces {
    controller: String,
    gateways: HashMap<(String, String), (GatewayFace, u64)>,
    namespaces: HashMap<String, (BTreeMap<String, String>, u64)>,
    counter: u64,
    /// The last translation's Gateway tokens, in Gateway order.
    order: Vec<u64>,
    /// The last translation's ListenerSets: namespace, name, Gateway and index (what
    /// parentRefs resolve through besides the Gateways).
    sets: Vec<(String, String, usize, usize)>,
}

/// This translation's tokens: per Gateway (by its index among the translation's Gateways) and
/// per namespace the snapshot has.
#[derive(Debug)]
pub struct Tokens<'a> {
    pub gateways: Vec<u64>,
    pub namespaces: foldhash::HashMap<&'a str, u64>,
    /// Every Gateway and namespace kept its token and its place, and the ListenerSets are the
    /// same: every parentRef resolves as in the last translation and attachment reads the same
    /// of everything, so a route that is the same object (or compiled to the same rules)
    /// attaches as it did then, without a lookup.
    pub unchanged: bool,
}

impl Faces {
    fn fresh(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// The tokens of `gateways` and of the namespaces in `labels`; a Gateway or namespace
    /// keeps its token from the previous translation when it looks the same to attachment.
    /// Another controller name changes every route's status, so it renews every token.
    pub fn tokens<'a>(
        &mut self,
        gateways: &[GatewayModel<'_>],
        sets: &[SetModel<'_>],
        labels: &HashMap<&'a str, BTreeMap<String, String>>,
        options: &TranslateOptions,
    ) -> Tokens<'a> {
        let mut unchanged = self.controller == options.controller_name;
        if !unchanged {
            self.controller.clone_from(&options.controller_name);
            self.gateways.clear();
            self.namespaces.clear();
        }
        let mut previous = std::mem::take(&mut self.gateways);
        let mut tokens = Vec::with_capacity(gateways.len());
        for g in gateways {
            let key = (g.namespace.to_owned(), g.name.to_owned());
            let face = GatewayFace::of(g);
            let token = match previous.remove(&key) {
                Some((f, t)) if f == face => t,
                _ => self.fresh(),
            };
            self.gateways.insert(key, (face, token));
            tokens.push(token);
        }
        // Fresh tokens, a Gateway gone or moved in the list all show here.
        unchanged &= tokens == self.order;
        self.order.clone_from(&tokens);
        let sets: Vec<_> = sets
            .iter()
            .map(|s| {
                (
                    s.namespace.to_owned(),
                    s.name.to_owned(),
                    s.gateway,
                    s.index,
                )
            })
            .collect();
        unchanged &= sets == self.sets;
        self.sets = sets;
        let mut previous = std::mem::take(&mut self.namespaces);
        let mut namespaces = foldhash::HashMap::default();
        namespaces.reserve(labels.len());
        for (&ns, l) in labels {
            let (l, token) = match previous.remove_entry(ns) {
                Some((key, (old, t))) if old == *l => (key, (old, t)),
                _ => {
                    unchanged = false;
                    let t = self.fresh();
                    (ns.to_owned(), (l.clone(), t))
                }
            };
            namespaces.insert(ns, token.1);
            self.namespaces.insert(l, token);
        }
        // A namespace gone: its routes now read default labels.
        unchanged &= previous.is_empty();
        Tokens {
            gateways: tokens,
            namespaces,
            unchanged,
        }
    }
}

/// A route's attachment and status with the inputs they were computed from.
#[derive(Debug)]
pub struct AttachEntry {
    compiled: Arc<CompiledRoute>,
    /// Index and token of each Gateway a parentRef names, in parentRef order (a boxed slice:
    /// kept as long as the route, never grown).
    parents: Box<[(usize, u64)]>,
    namespace: u64,
    attached: Arc<Attached>,
}

/// What attaching a route reads besides the route and its compiled rules.
pub struct AttachInputs<'t, 'a> {
    pub gateways: &'t [GatewayModel<'a>],
    pub by_name: &'t GatewayIndex<'a>,
    pub labels: &'t HashMap<&'a str, BTreeMap<String, String>>,
    pub tokens: &'t Tokens<'a>,
    pub options: &'t TranslateOptions,
}

/// Index and token of each of our Gateways a parentRef of `route` names, in the order attachment
/// visits them.
fn parents<'r>(
    route: &'r HttpRoute,
    inputs: &'r AttachInputs<'_, '_>,
) -> impl Iterator<Item = (usize, u64)> + 'r {
    let ns = namespace_of(&route.metadata);
    route.parent_refs().filter_map(move |p| {
        let gi = inputs
            .by_name
            .parent(p.group, p.kind, p.namespace.unwrap_or(ns), p.name)?
            .gateway;
        Some((gi, inputs.tokens.gateways[gi]))
    })
}

/// The attachment of `route` with `compiled`: `cached`'s when it was computed from the same
/// compiled rules, parents and namespace labels, else computed now. `cached` is left holding
/// the result.
pub fn attach(
    route: &HttpRoute,
    compiled: &Arc<CompiledRoute>,
    inputs: &AttachInputs<'_, '_>,
    cached: &mut Option<AttachEntry>,
    statuses: &mut StatusPool,
) -> (Arc<Attached>, bool) {
    let ns = namespace_of(&route.metadata);
    let namespace = || {
        inputs
            .tokens
            .namespaces
            .get(ns)
            .copied()
            .unwrap_or(ABSENT_NAMESPACE)
    };
    // The same compiled rules come from the same route (or an equal one); with every token
    // and parent unchanged since the last translation, the cached tokens are still current
    // (they were checked, or carried the same way, then).
    if let Some(c) = cached.as_ref().filter(|c| {
        Arc::ptr_eq(&c.compiled, compiled)
            && (inputs.tokens.unchanged
                || (c.namespace == namespace()
                    && parents(route, inputs).eq(c.parents.iter().copied())))
    }) {
        return (c.attached.clone(), true);
    }
    let namespace = namespace();
    let fallback;
    let labels = match inputs.labels.get(ns) {
        Some(l) => l,
        None => {
            fallback = crate::translate::gateways::listener::default_labels(ns);
            &fallback
        }
    };
    let mut attached = attach_route(
        route,
        compiled,
        inputs.gateways,
        inputs.by_name,
        labels,
        inputs.options,
    );
    attached.status = attached.status.map(|s| statuses.share(s));
    let attached = Arc::new(attached);
    *cached = Some(AttachEntry {
        compiled: compiled.clone(),
        parents: parents(route, inputs).collect(),
        namespace,
        attached: attached.clone(),
    });
    (attached, false)
}
