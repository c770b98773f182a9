//! The virtual hosts of every socket, carried from one table to the next. A translation that
//! changes a few routes rebuilds only the hosts those routes served or now serve, and patches
//! the previous table's host index with them: its cost follows the change, not the number of
//! hosts. Whenever a socket's [`Layout`] (the listeners bound there, their hostnames and
//! TrafficPolicy host settings) changes, every host is placed again, still reusing each
//! virtual host whose rules are the same. Either way the hosts equal those of a build from
//! nothing (`tests/incremental.rs`). Pure.

use std::collections::{BTreeMap, BTreeSet};

use foldhash::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::table::hostname::HostnameMap;
use crate::table::{HostIndex, RequestPolicy, RouteRule, VirtualHost};
use crate::translate::common::changed::changed_middle;
use crate::translate::common::parts::{map_in_parts, threads_for};
use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::routes::attach::Attached;
use crate::translate::routes::rules::CompiledRoute;

/// What decides, on one socket, which host a route's attachment lands on and how hosts group:
/// the listeners bound there and the TrafficPolicy settings of their hosts.
#[derive(Debug, Default)]
pub struct Layout {
    /// `(gateway, listener)` indexes of the listeners bound here, with their
    /// `namespace/gateway/listener`, so that indexes naming other listeners never compare equal.
    pub members: Vec<((usize, usize), String)>,
    /// Hostnames of the listeners bound here (`None`: any host), each once.
    pub listener_hosts: Vec<Option<String>>,
    /// The `(gateway, listener)` indexes of `members` and the names of `listener_hosts`, for
    /// the lookups made per route and per host: a socket of a Gateway taking in thousands of
    /// ListenerSets has as many listeners, where a scan per lookup would be quadratic.
    member_keys: foldhash::HashSet<(usize, usize)>,
    host_names: foldhash::HashSet<String>,
    /// The TrafficPolicy settings of the hosts each of `listener_hosts` owns.
    pub policies: Vec<Option<Arc<RequestPolicy>>>,
    /// Which of `listener_hosts` owns a host: the most specific pattern covering it.
    pub owners: HostnameMap<usize>,
}

impl PartialEq for Layout {
    /// `owners` is made from `listener_hosts`, so it is not compared.
    fn eq(&self, other: &Self) -> bool {
        self.members == other.members
            && self.listener_hosts == other.listener_hosts
            && self.policies == other.policies
    }
}

impl Layout {
    /// Whether listener `(gateway, listener)` is bound here.
    pub fn serves(&self, member: (usize, usize)) -> bool {
        self.member_keys.contains(&member)
    }

    /// Binds listener `(gateway, listener)` (named `source`) here, once.
    pub fn add_member(&mut self, member: (usize, usize), source: String) {
        if self.member_keys.insert(member) {
            self.members.push((member, source));
        }
    }

    /// Adds a listener's hostname to `listener_hosts` (the caller keeps them unique).
    pub fn add_listener_host(&mut self, host: Option<String>) {
        if let Some(name) = &host {
            self.host_names.insert(name.clone());
        }
        self.listener_hosts.push(host);
    }

    /// The index in `listener_hosts` of the listener owning `host`, and that owner's policy.
    fn owner(&self, host: &str) -> (u32, Option<Arc<RequestPolicy>>) {
        // Hosts of one listener fall back to each other, never to another listener's.
        let owner = self.owners.find(host).copied().unwrap_or(0);
        let policy = self.policies.get(owner).cloned().flatten();
        (u32::try_from(owner).unwrap_or(u32::MAX), policy)
    }

    /// A listener's own hostname: its host exists (empty) even with no route, which keeps
    /// requests for it from reaching a less specific listener's routes.
    fn is_listener_host(&self, host: &str) -> bool {
        self.host_names.contains(host)
    }
}

/// Where one route's rules were placed: `(socket, hostname)` pairs, each once (a boxed
/// slice of boxed names: kept until the route changes, never grown).
#[derive(Debug)]
struct Placed {
    attached: Arc<Attached>,
    compiled: Arc<CompiledRoute>,
    hosts: Box<[(SocketAddr, Box<str>)]>,
}

/// One virtual host and the routes whose rules it serves. Sized to fit: a configuration of
/// thousands of hostnames keeps one per hostname, most with one route.
#[derive(Debug, Default)]
struct HostState {
    routes: Vec<Arc<CompiledRoute>>,
    /// The host as last built, with where each rule it was built from (in the order they
    /// were gathered) went among its rules.
    built: Option<(Box<[u32]>, Arc<VirtualHost>)>,
}

/// Fewer rules to sort and index than this per thread and the hosts are built on the calling
/// thread alone.
const MIN_RULES_PER_THREAD: usize = 1024;

/// A virtual host to build: where, from which rules (in the order they were gathered), for
/// which listener and with which TrafficPolicy settings.
struct Build {
    addr: SocketAddr,
    name: String,
    rules: Vec<Arc<RouteRule>>,
    group: u32,
    policy: Option<Arc<RequestPolicy>>,
}

/// A built host, with where each of its build's rules went.
struct Built {
    addr: SocketAddr,
    name: String,
    at: Vec<u32>,
    host: VirtualHost,
}

impl Build {
    fn run(self) -> Built {
        let (host, at) = VirtualHost::with_order(self.name.clone(), self.rules);
        let mut host = host.in_listener(self.group);
        host.policy = self.policy;
        Built {
            addr: self.addr,
            name: self.name,
            at,
            host,
        }
    }
}

/// One socket's hosts and the index the last table served them from.
#[derive(Debug, Default)]
struct SocketHosts {
    layout: Layout,
    hosts: HashMap<Box<str>, HostState>,
    index: HostIndex,
}

/// The hosts of the previous table and where every route's rules went, for the next table.
#[derive(Debug, Default)]
pub struct HostCache {
    /// By the route's position in the last build's route list.
    routes: Vec<Placed>,
    sockets: HashMap<SocketAddr, SocketHosts>,
    /// How many threads build hosts (`None`: as many as there are cores and rules for).
    threads: Option<usize>,
}

impl HostCache {
    /// An empty cache whose builds sort and index hosts on `threads` threads (1: on the
    /// calling thread only); the hosts are the same for every count.
    pub fn with_threads(threads: usize) -> Self {
        Self {
            threads: Some(threads),
            ..Self::default()
        }
    }

    /// The host index of every socket of `layouts` serving `routes` (each route's attachments
    /// and rules, in translation order). Routes whose `Arc`s are the ones placed last time
    /// keep their places; the rest are placed now, and only the hosts they leave or enter are
    /// built again.
    pub fn index(
        &mut self,
        gateways: &[GatewayModel<'_>],
        routes: &[(Arc<Attached>, Arc<CompiledRoute>)],
        layouts: BTreeMap<SocketAddr, Layout>,
    ) -> BTreeMap<SocketAddr, HostIndex> {
        let same_layouts = layouts.len() == self.sockets.len()
            && layouts
                .iter()
                .all(|(addr, layout)| self.sockets.get(addr).is_some_and(|s| s.layout == *layout));
        let mut touched: BTreeSet<(SocketAddr, String)> = BTreeSet::new();
        let (start, old_end, new_end) = if same_layouts {
            changed_middle(&self.routes, routes, |p, (a, c)| {
                Arc::ptr_eq(&p.attached, a) && Arc::ptr_eq(&p.compiled, c)
            })
        } else {
            touched.extend(self.relayout(layouts));
            (0, 0, routes.len())
        };
        for gone in &self.routes[start..old_end] {
            for (addr, name) in &gone.hosts {
                let Some(host) = self
                    .sockets
                    .get_mut(addr)
                    .and_then(|s| s.hosts.get_mut(&**name))
                else {
                    continue;
                };
                if let Some(at) = host
                    .routes
                    .iter()
                    .position(|r| Arc::ptr_eq(r, &gone.compiled))
                {
                    host.routes.remove(at);
                }
                touched.insert((*addr, name.to_string()));
            }
        }
        let placed: Vec<Placed> = routes[start..new_end]
            .iter()
            .map(|(attached, compiled)| {
                let hosts = self.place(gateways, attached);
                for (addr, name) in &hosts {
                    if let Some(s) = self.sockets.get_mut(addr) {
                        let host = s.hosts.entry(name.clone()).or_default();
                        host.routes.push(compiled.clone());
                    }
                    touched.insert((*addr, name.to_string()));
                }
                Placed {
                    attached: attached.clone(),
                    compiled: compiled.clone(),
                    hosts,
                }
            })
            .collect();
        self.routes.splice(start..old_end, placed);
        let mut builds = Vec::new();
        for (addr, name) in touched {
            if let Some(s) = self.sockets.get_mut(&addr) {
                builds.extend(s.rebuild(addr, name));
            }
        }
        // Sorting and indexing the hosts reads only their rules: on several threads when
        // there are many (a full translation), each host put in place after.
        let rules = builds.iter().map(|b| b.rules.len()).sum();
        let threads = threads_for(rules, MIN_RULES_PER_THREAD, self.threads);
        for built in map_in_parts(builds, threads, Build::run) {
            if let Some(s) = self.sockets.get_mut(&built.addr) {
                s.put(built);
            }
        }
        self.sockets
            .iter()
            .map(|(addr, s)| (*addr, s.index.clone()))
            .collect()
    }

    /// Takes new layouts: every route is placed again. The hosts stay as candidates for
    /// reuse (a host built from the same rules for the same listener is kept), except on
    /// sockets that are gone. Returns every host kept, to be built again (or dropped) once
    /// the routes are placed.
    fn relayout(&mut self, layouts: BTreeMap<SocketAddr, Layout>) -> Vec<(SocketAddr, String)> {
        let mut previous = std::mem::take(&mut self.sockets);
        let mut kept = Vec::new();
        for (addr, layout) in layouts {
            let old = previous.remove(&addr).map(|s| s.hosts).unwrap_or_default();
            let mut hosts: HashMap<Box<str>, HostState> = old
                .into_iter()
                .map(|(name, h)| {
                    let host = HostState {
                        routes: Vec::new(),
                        built: h.built,
                    };
                    (name, host)
                })
                .collect();
            for name in layout.listener_hosts.iter().flatten() {
                hosts.entry(name.as_str().into()).or_default();
            }
            kept.extend(hosts.keys().map(|name| (addr, name.to_string())));
            let socket = SocketHosts {
                layout,
                hosts,
                index: HostIndex::default(),
            };
            self.sockets.insert(addr, socket);
        }
        self.routes.clear();
        kept
    }

    /// The `(socket, hostname)` pairs the rules of a route with `attached` go to.
    fn place(
        &self,
        gateways: &[GatewayModel<'_>],
        attached: &Attached,
    ) -> Box<[(SocketAddr, Box<str>)]> {
        let mut out: Vec<(SocketAddr, Box<str>)> = Vec::new();
        for a in &attached.attachments {
            let g = &gateways[a.gateway];
            let l = &g.listeners[a.listener];
            let Some(port) = g.socket_port(l.port) else {
                continue;
            };
            for ip in &g.binds {
                let addr = SocketAddr::new(*ip, port);
                let Some(s) = self.sockets.get(&addr) else {
                    continue;
                };
                if !s.layout.serves((a.gateway, a.listener)) {
                    continue;
                }
                for host in &a.hostnames {
                    let owner = s.layout.owners.find(host);
                    let owner = owner.map(|&i| s.layout.listener_hosts[i].as_deref());
                    if owner != Some(l.hostname) {
                        continue;
                    }
                    if !out.iter().any(|(x, h)| *x == addr && **h == **host) {
                        out.push((addr, host.as_str().into()));
                    }
                }
            }
        }
        // Kept until the route changes: no spare capacity.
        out.into_boxed_slice()
    }
}

impl SocketHosts {
    /// Gathers the rules host `name` serves now; reuses the last build when it served the
    /// same rules for the same listener, else returns what to build; drops the host when no
    /// route is left and it is not a listener's hostname.
    fn rebuild(&mut self, addr: SocketAddr, name: String) -> Option<Build> {
        let host = self.hosts.get_mut(name.as_str())?;
        if host.routes.is_empty() && !self.layout.is_listener_host(&name) {
            self.hosts.remove(name.as_str());
            self.index.remove(&name);
            return None;
        }
        // Translation order between routes (HTTPRoutes before GRPCRoutes), which only decides
        // between rules that are otherwise equal in precedence.
        host.routes
            .sort_by(|a, b| route_order(a).cmp(&route_order(b)));
        host.routes.shrink_to_fit();
        let mut rules: Vec<Arc<RouteRule>> =
            Vec::with_capacity(host.routes.iter().map(|r| r.rules.len()).sum());
        for r in &host.routes {
            rules.extend(r.rules.iter().filter(|x| r.serves(x, &name)).cloned());
        }
        let (group, policy) = self.layout.owner(&name);
        let reuse = host.built.as_ref().filter(|(at, h)| {
            h.listener == group
                && h.policy == policy
                && at.len() == rules.len()
                && rules.iter().zip(at).all(|(rule, &i)| {
                    h.rules
                        .get(i as usize)
                        .is_some_and(|built| Arc::ptr_eq(built, rule))
                })
        });
        if let Some((_, built)) = reuse {
            self.index.put(built.clone());
            return None;
        }
        Some(Build {
            addr,
            name,
            rules,
            group,
            policy,
        })
    }

    /// Puts a host built by [`SocketHosts::rebuild`]'s [`Build`] in place.
    fn put(&mut self, built: Built) {
        let host = Arc::new(built.host);
        if let Some(state) = self.hosts.get_mut(built.name.as_str()) {
            state.built = Some((built.at.into_boxed_slice(), host.clone()));
        }
        self.index.put(host);
    }
}

/// `(is a GRPCRoute, namespace, name)` of a compiled route, from its rules (a route without
/// rules adds nothing to a host, so its place among the others does not matter).
fn route_order(route: &CompiledRoute) -> (bool, &str, &str) {
    let grpc = route.kind == crate::kinds::routes::RouteKindId::GrpcRoute;
    match route.rules.first() {
        Some(r) => (grpc, r.route.namespace(), r.route.name()),
        None => (grpc, "", ""),
    }
}
