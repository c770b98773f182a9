//! Incremental translation: memoization of the per-route work across translations. The
//! translator stays a pure function; what it remembers is a value the caller owns and hands
//! back with the next snapshot ([`Incremental`]). A cached part is reused only when every
//! input it was computed from is unchanged, so the output always equals a full translation
//! of the same snapshot (`tests/incremental.rs` checks that on random change sequences).
//!
//! Cached today:
//! - each HTTP-like route's compiled rules (matchers, filters, backend sets; a GRPCRoute's
//!   lowered form with them), by the route's kind,
//!   namespace and name, valid while the route is the same object (or an equal one) and each
//!   backendRef it resolved (rules and mirrors) still resolves to the same outcome (an
//!   Ingress whose annotations read Secrets or an authorizer's Service is compiled anew
//!   each time, `HttpLike::reads_objects`); when the
//!   only difference is the endpoints of some Service ports, the rules are relinked to the
//!   new ones (`relink`) rather than compiled; a route whose references name none of the
//!   Services that changed since the last translation is not resolved again (`moved`);
//! - each resolved Service port (its ready endpoints), valid while its Service and its
//!   EndpointSlices are the same objects (or equal ones);
//! - each route's attachment to its listeners and its status, valid while its compiled rules
//!   are the same `Arc` and the Gateways it names and its namespace's labels look the same to
//!   attachment (`reattach`);
//! - each route copied with TrafficPolicy settings, valid while it is copied from the same
//!   compiled route with the same settings;
//! - each socket's virtual hosts and host index, patched where routes changed (`hosts`);
//! - the routes in report order, placed again only where routes changed (`order`).

use std::sync::Arc;

use crate::kinds::httproute::HttpRoute;

use crate::kinds::routes::RouteKindId;
use crate::snapshot::namespace_of;
use crate::table::ServedCertificates;
use crate::translate::backends::resolve::{
    same_outcome, BackendCache, Backends, OwnedRef, Resolved,
};
use crate::translate::backends::ServiceOverlays;
use crate::translate::build::hosts::HostCache;
use crate::translate::cache::moved::{touches, Moved, Resolvable};
use crate::translate::cache::order::RouteOrder;
use crate::translate::cache::parallel::{compile_parts, threads_for};
use crate::translate::cache::reattach::{attach, AttachEntry, AttachInputs, Faces, Tokens};
use crate::translate::cache::relink::{endpoints_only, relink};
use crate::translate::cache::statuses::StatusPool;
use crate::translate::policy::{route_policy, RouteMemo};
use crate::translate::routes::attach::Attached;
use crate::translate::routes::http_like::{self, route_key, same_object, Source};
use crate::translate::routes::kinds_conflict::Losers;
use crate::translate::routes::rules::{compile_route, CompiledRoute};
use crate::translate::{Snapshot, TranslateOptions, Translation};

/// What one translation reused: counts for logs, metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reuse {
    /// Routes whose compiled rules were taken from the previous translation.
    pub reused: usize,
    /// Routes whose compiled rules were copied with new endpoint sets (only endpoints of
    /// their Service ports changed).
    pub relinked: usize,
    /// Routes compiled anew.
    pub compiled: usize,
    /// Routes whose attachment and status were taken from the previous translation.
    pub reattached: usize,
    /// Cached routes whose references were resolved again to check them (those naming a
    /// Service that moved, or every cached route when anything may have moved).
    pub rechecked: usize,
}

/// A hash of a route's kind, namespace and name, to find its previous entry by.
fn name_hash(key: (RouteKindId, &str, &str)) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0).hash_one(key)
}

/// `route` compiled anew, with the outcomes of the references it resolved.
pub(super) fn compile_entry(route: &Source, backends: &mut Backends<'_>) -> RouteEntry {
    let lowered = route.clone().lowered();
    backends.record();
    let policy = route_policy(backends.snapshot(), &**route).map(Arc::new);
    let compiled = Arc::new(compile_route(&lowered, &**route, policy, backends));
    let resolutions = backends.recorded();
    let meta = route.meta();
    RouteEntry {
        route: lowered,
        source: route.clone(),
        resolutions: resolutions.into_boxed_slice(),
        compiled,
        attached: None,
        names: (
            Arc::from(namespace_of(meta)),
            Arc::from(meta.name.as_deref().unwrap_or("")),
        ),
    }
}

/// How a cached route compares with the current inputs.
enum Check {
    /// Compiling it now would give the cached result.
    Same,
    /// Only endpoints of its Service ports changed: these are the current outcomes.
    Endpoints(Vec<Resolved>),
    /// The route or the outcome of one of its references changed.
    Stale,
}

/// The memory of earlier translations. The reconciler owns one and passes it with every
/// snapshot, so a change costs in proportion to what it touches rather than to the whole
/// configuration. Starting from [`Incremental::default`] is a full translation.
#[derive(Debug, Default)]
pub struct Incremental {
    /// By the route's position in the snapshot it was translated from.
    routes: Vec<Option<RouteEntry>>,
    backends: BackendCache,
    hosts: HostCache,
    faces: Faces,
    /// What backend resolution read last time, to tell which Services changed since.
    resolvable: Option<Resolvable>,
    /// The routes that lost a listener to a route of the other kind last time.
    losers: Losers,
    /// Routes copied with TrafficPolicy settings last time.
    policy_routes: RouteMemo,
    /// The routes in report order.
    order: RouteOrder,
    /// The distinct route statuses the routes hold.
    statuses: StatusPool,
    last: Reuse,
    /// How many threads a full translation compiles routes on (`None`: as many as it has
    /// cores for, see `parallel::threads_for`); `hosts` builds hosts on as many.
    threads: Option<usize>,
}

/// A route's compiled rules and the backendRef outcomes they were compiled with.
#[derive(Debug)]
pub(super) struct RouteEntry {
    /// The route's lowered form (made again only when the route changes; an HTTPRoute is its
    /// own).
    route: Arc<HttpRoute>,
    /// The route `route` was lowered from.
    source: Source,
    /// A boxed slice: kept as long as the route, never grown.
    resolutions: Box<[(OwnedRef, Resolved)]>,
    compiled: Arc<CompiledRoute>,
    attached: Option<AttachEntry>,
    /// The route's namespace and name, as its status entries share them.
    names: RouteNames,
}

/// A route's namespace and name.
pub(in crate::translate) type RouteNames = (Arc<str>, Arc<str>);

impl Incremental {
    /// An empty memory whose full translations compile routes on `threads` threads (1: on
    /// the calling thread only), however many routes there are; the output is the same for
    /// every count. [`Incremental::default`] chooses by the cores available and the number of
    /// routes.
    pub fn with_threads(threads: usize) -> Self {
        Self {
            threads: Some(threads),
            hosts: HostCache::with_threads(threads),
            ..Self::default()
        }
    }

    /// Translates `snapshot` like [`crate::translate::translate_with`], reusing what earlier
    /// translations through this value computed from unchanged inputs, and remembering this
    /// one's results for the next call.
    pub fn translate(
        &mut self,
        snapshot: &Snapshot,
        options: &TranslateOptions,
        served: &ServedCertificates,
    ) -> Translation {
        crate::translate::translate_cached(snapshot, options, served, self)
    }

    /// What the last translation reused.
    pub fn last(&self) -> Reuse {
        self.last
    }

    /// The routes that lost a listener to a route of the other kind in the last translation.
    pub(in crate::translate) fn losers(&self) -> &Losers {
        &self.losers
    }

    /// Where this translation leaves its losers for the next one.
    pub(in crate::translate) fn losers_mut(&mut self) -> &mut Losers {
        &mut self.losers
    }

    /// The routes the last translation copied with TrafficPolicy settings.
    pub(in crate::translate) fn policy_routes(&mut self) -> &mut RouteMemo {
        &mut self.policy_routes
    }

    /// The routes of the last translation in report order, for this one to update.
    pub(in crate::translate) fn order(&mut self) -> &mut RouteOrder {
        &mut self.order
    }

    /// The virtual hosts of the last table, for the next one to reuse.
    pub(in crate::translate) fn hosts(&mut self) -> &mut HostCache {
        &mut self.hosts
    }

    /// The tokens of Gateways and namespaces that route attachments are reused by.
    pub(in crate::translate) fn faces(&mut self) -> &mut Faces {
        &mut self.faces
    }

    /// Starts one translation's use of the cache.
    pub(in crate::translate) fn begin<'a>(
        &mut self,
        snapshot: &'a Snapshot,
        overlays: &'a Arc<ServiceOverlays>,
    ) -> RouteCompiler<'a> {
        let now = Resolvable::of(snapshot, overlays.clone());
        let changes = self.resolvable.as_ref().and_then(|r| r.moved(&now));
        self.resolvable = Some(now);
        let mut backends = std::mem::take(&mut self.backends);
        if let Some(removed) = changes.as_ref().map(|c| &c.removed) {
            // Kept from translation to translation while nothing moves everything, the cache
            // must not keep the ports of Services that are gone.
            if !removed.is_empty() {
                backends.retain(|(k, _), _| {
                    !removed
                        .iter()
                        .any(|(ns, name)| *ns == k.namespace && *name == k.name)
                });
            }
        }
        let moved = changes.map(|c| c.moved);
        let routes = http_like::count(snapshot);
        let mut backends =
            Backends::with_cache(snapshot, backends, moved.is_some()).with_overlays(overlays);
        // No route compiled before: every route is compiled now and resolves its references.
        let full = self.routes.is_empty() && routes > 0;
        if full {
            backends = backends.indexed();
        }
        let threads = if full {
            threads_for(routes, self.threads)
        } else {
            1
        };
        RouteCompiler {
            backends,
            moved,
            previous: std::mem::take(&mut self.routes),
            shift: 0,
            by_name: None,
            missed: false,
            next: (0..routes).map(|_| None).collect(),
            statuses: std::mem::take(&mut self.statuses),
            reuse: Reuse::default(),
            threads,
            ready: Vec::new(),
        }
    }

    /// Keeps what the translation that `compiler` served computed, for the next one.
    pub(in crate::translate) fn finish(&mut self, compiler: RouteCompiler<'_>) {
        self.routes = compiler.next;
        self.backends = compiler.backends.into_cache();
        self.statuses = compiler.statuses;
        // Statuses no route of this translation holds (nor the reports still published).
        self.statuses.prune();
        self.last = compiler.reuse;
    }
}

/// One translation's route compilation: the previous entries it may reuse and the ones it
/// keeps for the next translation. Routes that are not compiled again drop out.
pub(in crate::translate) struct RouteCompiler<'a> {
    backends: Backends<'a>,
    /// The Services whose resolution may have changed since the previous translation (`None`:
    /// any): a route referencing none of them is not resolved again.
    moved: Moved,
    /// The previous translation's entries, by position in its snapshot.
    previous: Vec<Option<RouteEntry>>,
    /// Offset from a route's position to its previous entry's, learnt from the last route
    /// found elsewhere: after a route is added or removed, the routes behind it are found at
    /// once.
    shift: isize,
    /// Positions in `previous` by a hash of route kind, namespace and name, sorted by hash; made when a second route is not found at its shifted position.
    by_name: Option<Vec<(u64, usize)>>,
    /// Whether a route was not found at its shifted position yet: the first such route is
    /// most likely new (nothing to find), so only a second one pays for `by_name`.
    missed: bool,
    /// This translation's entries, by position in its snapshot.
    next: Vec<Option<RouteEntry>>,
    statuses: StatusPool,
    reuse: Reuse,
    /// How many threads compile this translation's routes ahead of the route loop (1: none,
    /// each is compiled when the loop reaches it).
    threads: usize,
    /// Routes compiled ahead of the loop, by position.
    ready: Vec<Option<RouteEntry>>,
}

impl RouteCompiler<'_> {
    /// Whether this translation compiles its routes ahead of the route loop, on several
    /// threads ([`RouteCompiler::compile_ahead`]).
    pub fn parallel(&self) -> bool {
        self.threads > 1
    }

    /// Compiles `routes` (each with its position among [`http_like::sources`]) on this
    /// translation's threads, for [`RouteCompiler::compile`] to take.
    pub fn compile_ahead(&mut self, routes: &[(usize, Source)]) {
        if !self.parallel() {
            return;
        }
        self.ready = (0..self.next.len()).map(|_| None).collect();
        for (at, entry) in compile_parts(routes, self.threads, &mut self.backends) {
            if let Some(slot) = self.ready.get_mut(at) {
                *slot = Some(entry);
            }
        }
    }

    /// The compiled rules of `route` and its attachment: the previous ones when the route and
    /// every outcome of its backendRefs are unchanged (and, for the attachment, what
    /// [`attach`] checks), else computed now.
    ///
    /// Positions are those of [`http_like::sources`].
    pub fn compile(
        &mut self,
        position: usize,
        route: &Source,
        inputs: &AttachInputs<'_, '_>,
    ) -> (Arc<CompiledRoute>, Arc<Attached>) {
        let mut statuses = std::mem::take(&mut self.statuses);
        let entry = self.entry(position, route);
        let lowered = entry.route.clone();
        let (attached, reused) = attach(
            &lowered,
            &entry.compiled,
            inputs,
            &mut entry.attached,
            &mut statuses,
        );
        let compiled = entry.compiled.clone();
        self.statuses = statuses;
        if reused {
            self.reuse.reattached += 1;
        }
        (compiled, attached)
    }

    /// The namespace and name of the route at `position`, once [`RouteCompiler::compile`]
    /// gave it.
    pub fn names(&self, position: usize) -> Option<&RouteNames> {
        Some(&self.next.get(position)?.as_ref()?.names)
    }

    /// Whether `route` names one of our Gateways, known without resolving its parentRefs:
    /// it is the same object as the previous translation's route at its place, which named
    /// one then, and every parentRef resolves as it did then (`tokens.unchanged`). `false`
    /// means not known.
    pub fn known_ours(&self, position: usize, route: &Source, tokens: &Tokens<'_>) -> bool {
        tokens.unchanged
            && position
                .checked_add_signed(self.shift)
                .and_then(|at| self.previous.get(at))
                .and_then(Option::as_ref)
                .is_some_and(|e| same_object(&e.source, route))
    }

    /// The previous entry of the route at `position`: the one at the same position, shifted
    /// by as many routes as were added or removed before it, when it is the same route (the
    /// usual case: snapshots list objects in a stable order), else the one of the same kind,
    /// namespace and name wherever it was.
    fn previous(&mut self, position: usize, route: &Source) -> Option<RouteEntry> {
        let key = route_key(&**route);
        let named = |e: &Option<RouteEntry>| {
            e.as_ref()
                .is_some_and(|e| same_object(&e.source, route) || route_key(&*e.source) == key)
        };
        let guess = position.checked_add_signed(self.shift);
        if let Some(at) = guess.filter(|&at| self.previous.get(at).is_some_and(named)) {
            return self.previous[at].take();
        }
        // A route added (or removed) just before this one: its previous entry is one behind
        // (or ahead of) the guess.
        for step in [-1, 1] {
            let near = position.checked_add_signed(self.shift + step);
            if let Some(at) = near.filter(|&at| self.previous.get(at).is_some_and(named)) {
                self.shift += step;
                return self.previous[at].take();
            }
        }
        if self.by_name.is_none() && !std::mem::replace(&mut self.missed, true) {
            // Compiling a route anew gives what reusing its entry would, only slower; a
            // route moved further is found from the second miss on.
            return None;
        }
        let previous = &self.previous;
        let by_name = self.by_name.get_or_insert_with(|| {
            let mut index: Vec<(u64, usize)> = previous
                .iter()
                .enumerate()
                .filter_map(|(i, e)| {
                    let e = e.as_ref()?;
                    Some((name_hash(route_key(&*e.source)), i))
                })
                .collect();
            index.sort_unstable();
            index
        });
        let hash = name_hash(key);
        let from = by_name.partition_point(|&(h, _)| h < hash);
        let at = by_name[from..]
            .iter()
            .take_while(|&&(h, _)| h == hash)
            .map(|&(_, i)| i)
            .find(|&i| previous.get(i).is_some_and(named))?;
        self.shift = at as isize - position as isize;
        self.previous.get_mut(at)?.take()
    }

    /// The entry of `route` in `next`: compiled ahead, taken from `previous` (reused or
    /// relinked), or new.
    fn entry(&mut self, position: usize, route: &Source) -> &mut RouteEntry {
        let ahead = self.ready.get_mut(position).and_then(Option::take);
        let ahead = ahead.filter(|e| same_object(&e.source, route));
        let entry = if let Some(entry) = ahead {
            self.reuse.compiled += 1;
            entry
        } else {
            self.entry_of(position, route)
        };
        let slot = &mut self.next[position];
        slot.insert(entry)
    }

    /// The entry of `route` from `previous` (reused or relinked) or compiled now.
    fn entry_of(&mut self, position: usize, route: &Source) -> RouteEntry {
        match self.previous(position, route) {
            Some(mut entry) => match self.check(&entry, route) {
                Check::Same => {
                    self.reuse.reused += 1;
                    entry
                }
                Check::Endpoints(current) => {
                    entry.compiled = Arc::new(relink(&entry.compiled, &current));
                    for ((_, before), now) in entry.resolutions.iter_mut().zip(current) {
                        *before = now;
                    }
                    // Hold the current object, not an older equal one.
                    if let Some(itself) = route.clone().itself() {
                        entry.route = itself;
                    }
                    entry.source = route.clone();
                    self.reuse.relinked += 1;
                    entry
                }
                Check::Stale => self.compile_new(route),
            },
            None => self.compile_new(route),
        }
    }

    fn compile_new(&mut self, route: &Source) -> RouteEntry {
        self.reuse.compiled += 1;
        compile_entry(route, &mut self.backends)
    }

    /// Whether compiling `route` now would give `entry`'s result: compilation reads only the
    /// route and the outcomes of its backendRefs, resolved in the same order, so replaying
    /// them tells.
    fn check(&mut self, entry: &RouteEntry, route: &Source) -> Check {
        if !(same_object(&entry.source, route) || entry.source.equals(&**route))
            || route.reads_objects()
        {
            return Check::Stale;
        }
        let ns = namespace_of(route.meta());
        if let Some(moved) = &self.moved {
            if !entry
                .resolutions
                .iter()
                .any(|(r, _)| touches(moved, ns, &r.as_ref()))
            {
                return Check::Same;
            }
        }
        self.reuse.rechecked += 1;
        let mut current = Vec::with_capacity(entry.resolutions.len());
        let mut relink = false;
        for (r, before) in &entry.resolutions {
            let now = self.backends.resolve(ns, &r.as_ref());
            if !same_outcome(&now, before) {
                if !endpoints_only(before, &now) {
                    return Check::Stale;
                }
                relink = true;
            }
            current.push(now);
        }
        if relink {
            Check::Endpoints(current)
        } else {
            Check::Same
        }
    }
}
