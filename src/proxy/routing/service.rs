//! The HTTP service: one request through its phases, Pingora-style, one function per phase:
//! listener -> gate (host, framing, canonical path: `gate.rs`) -> host (421 when it belongs to
//! another HTTPS listener than the SNI) -> rule -> redirect -> CORS preflight, here
//! ([`Handler::route`] returns what it decided); then policy (TrafficPolicy: IP access, rate
//! limit, basic auth, JWT, body size: `policy/`) -> backend -> request filters -> mirrors ->
//! forward (within the rule's timeouts) -> response filters in `backend.rs`; then metrics and
//! access log here. The table is loaded once per request, so a request finishes on the table
//! it started with however often the table is swapped meanwhile.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderValue};
use http::{HeaderMap, Request, Response, StatusCode};
use tokio::sync::Semaphore;

use crate::metrics::{method_index, BackendSeries, SeriesIndex};
use crate::proxy::access_log::Entry;
use crate::proxy::body::{BodyFlags, ClientBody, MinRate, ProxyBody, RequestBody};
use crate::proxy::decision;
use crate::proxy::error::ProxyError;
use crate::proxy::handshake::tls::TlsInfo;
use crate::proxy::policy;
use crate::proxy::request_id;
use crate::proxy::routing::answers::{empty, grpc_unimplemented, options_asterisk, preflight};
use crate::proxy::routing::gate::{self, Target};
use crate::proxy::routing::headers::client_address;
use crate::proxy::routing::tapped::{Tapped, Way};
use crate::proxy::routing::tracked::{Activity, Held, Tracked, Unanswered};
use crate::proxy::settings::ConnSettings;
use crate::proxy::shared::Shared;
use crate::proxy::trace::{self, RequestTrace};
use crate::proxy::upstream::trail::Trail;
use crate::table::{
    is_grpc, Cors, ListenerTable, RedirectTarget, RequestView, RouteRule, RouteTable, Scheme,
    VirtualHost,
};

/// Serves requests of one accepted connection.
#[derive(Clone)]
pub(crate) struct Handler {
    pub shared: Arc<Shared>,
    /// The table key of the listener whose socket accepted the connection.
    pub listener: SocketAddr,
    /// The client's address.
    pub peer: SocketAddr,
    /// What the forwarded headers say of the client, worked out once per connection.
    pub(crate) client: Client,
    /// Set on connections that arrived over TLS.
    pub tls: Option<TlsInfo>,
    /// Requests in flight on the connection, for its idle timer and the drain.
    pub activity: Arc<Activity>,
    /// The connection's settings (command line, or its listener's ProxyConfig at accept).
    pub settings: Arc<ConnSettings>,
    /// Upstream requests the connection may have in flight (`--max-upstream-per-client`).
    pub(crate) upstream_share: Arc<Semaphore>,
}

/// The peer of a connection as the forwarded headers need it.
#[derive(Clone)]
pub(crate) struct Client {
    /// Its address as an `X-Forwarded-For` value.
    pub address: HeaderValue,
    /// Whether it is a trusted proxy (`--trusted-proxies`, or the listener's ProxyConfig).
    pub trusted: bool,
}

/// What the routing phases decided for a request.
// Returned once per request and taken apart at once: boxing the matched request would cost an
// allocation on every request to save a move.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Routed<'t> {
    /// Answered without a backend; `rule` (with its virtual host's Gateway listener group)
    /// when a rule had matched (a redirect, a preflight).
    Answer {
        rule: Option<(u32, Arc<RouteRule>)>,
        response: Response<ProxyBody>,
    },
    /// A rule with backends accepts the request.
    Matched(Matched<'t>),
}

impl Routed<'_> {
    fn answer(rule: Option<(u32, Arc<RouteRule>)>, response: Response<ProxyBody>) -> Self {
        Self::Answer { rule, response }
    }
}

/// A request a rule accepts, with what the later phases need of its routing.
pub(crate) struct Matched<'t> {
    pub listener: &'t ListenerTable,
    pub vhost: &'t VirtualHost,
    pub rule: Arc<RouteRule>,
    pub req: Request<ClientBody>,
    /// The request's `Host` as it came, for the forwarded headers and rewrites.
    pub raw_host: HeaderValue,
    /// CORS headers the response gets.
    pub cors_headers: HeaderMap,
}

/// What routing decided for a request, kept for the metrics phase.
struct Outcome {
    /// The matched rule and its virtual host's Gateway listener group; `None` when no route
    /// matched.
    rule: Option<(u32, Arc<RouteRule>)>,
    /// The index of the backendRef picked, if one was.
    backend: Option<usize>,
    /// The request's `method` label ([`crate::metrics::METHODS`]).
    method: usize,
    response: Response<ProxyBody>,
}

impl Handler {
    /// The handler of a new connection (plain until `tls` is set).
    pub fn new(
        shared: Arc<Shared>,
        listener: SocketAddr,
        peer: SocketAddr,
        settings: Arc<ConnSettings>,
    ) -> Self {
        let client = Client {
            address: client_address(peer.ip()),
            trusted: settings.trusted_proxies.contains(peer.ip()),
        };
        let share = shared.options.max_upstream_per_client.max(1);
        Self {
            client,
            shared,
            listener,
            peer,
            tls: None,
            activity: Activity::new(),
            upstream_share: Arc::new(Semaphore::new(share)),
            settings,
        }
    }

    /// Runs every phase and never fails: errors become their status response. The connection
    /// counts the request as in flight until its response body is dropped.
    pub async fn handle(self, mut req: Request<RequestBody>) -> Response<Tracked> {
        let in_flight = self.activity.start();
        let request_id = request_id::ensure(req.headers_mut());
        let start = Instant::now();
        let table = self.shared.table.load_full();
        let flags = Arc::new(BodyFlags::default());
        // gRPC streams may pause between messages: only the idle limit applies to them.
        let rate = match is_grpc(req.headers()) {
            true => MinRate::OFF,
            false => self.shared.options.min_body_rate,
        };
        let timers = (self.settings.body_idle_timeout, rate);
        let spans = self.shared.spans.as_ref();
        let client = (spans.is_some() || !self.settings.access_log.is_off())
            .then(|| self.client_ip(req.headers()));
        let head = trace::Head {
            tls: self.tls.is_some(),
            client: client.unwrap_or(self.peer.ip()),
            request_id: &request_id,
        };
        let trace = RequestTrace::begin(spans, &mut req, head);
        let mut log = (!self.settings.access_log.is_off()).then(|| {
            let mut entry = Entry::head(
                self.settings.access_log.clone(),
                client.unwrap_or(self.peer.ip()),
                &req,
                start,
            );
            entry.trace_id = Some(trace.ids.trace_id);
            entry.span_id = Some(trace.ids.span_id);
            Unanswered::new(entry, flags.clone(), self.shared.access.clone())
        });
        let tapped = Tapped::begin(&self.shared.tap, &req, start)
            .map(|t| t.client(client.unwrap_or_else(|| self.client_ip(req.headers()))));
        let method = method_index(req.method());
        let req = req.map(|b| ClientBody::new(b, timers, flags.clone()));
        // When routing had chosen: before the upstream exchange, for the tracer's timings.
        let mut routed = None;
        let mut trail = match tapped {
            Some(_) => Trail::recording(),
            None => Trail::default(),
        };
        let (rule, served, mut held) = match self.route(&table, req) {
            Ok(Routed::Matched(matched)) => {
                let rule = Some((matched.vhost.listener, matched.rule.clone()));
                routed = Some(Instant::now());
                // What the line says if the client goes away during the exchange.
                if let Some(off) = log.take_if(|_| matched.rule.filters.access_log_off) {
                    off.discard();
                }
                if let Some(entry) = log.as_mut().and_then(Unanswered::entry) {
                    entry.route = Some(matched.rule.route.clone());
                    entry.rule = Some(matched.rule.clone());
                    entry.listener = table
                        .listener(&self.listener)
                        .map(|l| (l.clone(), Some(matched.vhost.listener)));
                }
                let (served, held) = self.proxy(&table, matched, start, &mut trail).await;
                (rule, served, held)
            }
            Ok(Routed::Answer { rule, response }) => (rule, Ok(response), Held::default()),
            Err(err) => (None, Err(err), Held::default()),
        };
        let served = flags.blame(served, timers, &self.shared.metrics);
        let decision = match &served {
            Err(err) => err.decision(),
            Ok(_) => match (trail.answered_by, &held.endpoint) {
                (Some(by), _) => by,
                (None, Some(_)) => decision::PROXIED,
                (None, None) => decision::ANSWERED,
            },
        };
        let error = match (&served, &tapped) {
            (Err(err), Some(_)) => Some(err.to_string()),
            _ => None,
        };
        let response = served.unwrap_or_else(|err| self.failed(err, rule.as_ref()));
        let mut outcome = Outcome {
            rule,
            backend: held.backend,
            method,
            response,
        };
        request_id::answer(outcome.response.headers_mut(), &request_id);
        held.counted = self
            .record(&table, &outcome, start)
            .map(|backend| (backend, flags.clone()));
        let upstream = held.endpoint.as_ref().map(|p| p.addr);
        let matched = outcome.rule.as_ref().map(|(_, r)| r);
        let trace_id = trace.ids.trace_id;
        if trace.span.is_some() {
            let status = outcome.response.status().as_u16();
            trace.finish(spans, status, matched, upstream);
        }
        if let Some(tapped) = tapped {
            let way = Way {
                table: &table,
                listener: self.listener,
                rule: matched.map(|r| &**r),
                backend: held.backend,
                balancer: &self.shared.backends,
                attempts: trail.attempts.take().unwrap_or_default(),
                endpoint: upstream,
                status: outcome.response.status().as_u16(),
                error,
                request_id: request_id.to_str().unwrap_or_default(),
                trace_id,
                routed: routed.unwrap_or_else(Instant::now),
            };
            tapped.finish(&self.shared.tap, way);
        }
        if let Some(entry) = log.as_mut().and_then(Unanswered::entry) {
            entry.status = Some(outcome.response.status().as_u16());
            entry.route = matched.map(|r| r.route.clone());
            entry.rule = matched.cloned();
            entry.upstream = upstream;
            entry.decision = Some(decision);
            entry.retries = trail.retries;
            entry.upstream_time = trail.upstream_time;
            entry.listener = table
                .listener(&self.listener)
                .map(|l| (l.clone(), outcome.rule.as_ref().map(|(group, _)| *group)));
        }
        // An Ingress's `enable-access-log: "false"`: its requests write no line.
        let log = log.and_then(
            |log| match matched.is_some_and(|r| r.filters.access_log_off) {
                true => {
                    log.discard();
                    None
                }
                false => log.answered(),
            },
        );
        outcome
            .response
            .map(|body| Tracked::new(body, in_flight, held, log))
    }

    /// The answer to a request the proxy could not serve, counted by fault.
    fn failed(&self, err: ProxyError, rule: Option<&(u32, Arc<RouteRule>)>) -> Response<ProxyBody> {
        tracing::debug!(listener = %self.listener, route = ?rule.map(|(_, r)| r.route.label()), error = %err, "request failed");
        self.shared
            .metrics
            .request_errors
            .with_label_values(&[err.fault().label()])
            .inc();
        err.to_response()
    }

    /// Phases 1 to 4b: the listener, the gate, the host, the rule, and the answers given
    /// without a backend (`OPTIONS *`, gRPC without a route, redirects, CORS preflights).
    fn route<'t>(
        &self,
        table: &'t RouteTable,
        req: Request<ClientBody>,
    ) -> Result<Routed<'t>, ProxyError> {
        let listener = self.find_listener(table)?;
        let mut req = req;
        gate::check_target_length(req.uri(), self.shared.options.max_request_target)?;
        if let Some(max) = self.settings.max_request_header_bytes {
            gate::check_head_size(&req, max)?;
        }
        gate::check_framing(req.version(), req.headers())?;
        let gate::RequestHost {
            header: raw_host,
            name: host,
        } = gate::authority(&req)?;
        if gate::normalize_target(&mut req, &self.shared.options.path_policy)? == Target::Asterisk {
            return Ok(Routed::answer(None, options_asterisk()));
        }
        self.check_misdirected(listener, &host)?;
        let (vhost, rule) = match find_rule(listener, &req, &host) {
            Err(ProxyError::NoRoute) if is_grpc(req.headers()) => {
                return Ok(Routed::answer(None, grpc_unimplemented()));
            }
            found => found?,
        };
        let route = Some((vhost.listener, rule.clone()));
        if let Some(resp) = self.redirect(&rule, &req, &host, listener.listener_port())? {
            return Ok(Routed::answer(route, resp));
        }
        let cors_headers = match &rule.filters.cors {
            Some(cors) if Cors::is_preflight(req.method(), req.headers()) => {
                return Ok(Routed::answer(
                    route,
                    preflight(cors.preflight_headers(req.headers())),
                ));
            }
            Some(cors) => cors.response_headers(req.headers()),
            None => HeaderMap::new(),
        };
        Ok(Routed::Matched(Matched {
            listener,
            vhost,
            rule,
            req,
            raw_host,
            cors_headers,
        }))
    }

    /// Phase 1: the listener that owns the accepting socket, in the live table.
    fn find_listener<'t>(&self, table: &'t RouteTable) -> Result<&'t ListenerTable, ProxyError> {
        table
            .listener(&self.listener)
            .map(|l| l.as_ref())
            .ok_or(ProxyError::NoListener(self.listener))
    }

    /// The client's address as the trusted forwarded headers name it (the peer's otherwise).
    fn client_ip(&self, headers: &HeaderMap) -> std::net::IpAddr {
        policy::client_ip(self.peer.ip(), &self.settings.trusted_proxies, headers)
    }

    /// The scheme the client used: `https` on TLS connections.
    pub(crate) fn scheme(&self) -> Scheme {
        if self.tls.is_some() {
            Scheme::Https
        } else {
            Scheme::Http
        }
    }

    /// Phase 2b: on an HTTPS socket, the request's host must belong to the listener that the
    /// handshake's SNI selected; otherwise the connection was meant for another site (421).
    fn check_misdirected(&self, listener: &ListenerTable, host: &str) -> Result<(), ProxyError> {
        let (Some(info), Some(tls)) = (&self.tls, &listener.tls) else {
            return Ok(());
        };
        let by_sni = tls.owner(info.sni.as_deref());
        let by_host = tls.owner((!host.is_empty()).then_some(host));
        if by_sni == by_host {
            Ok(())
        } else {
            Err(ProxyError::Misdirected)
        }
    }

    /// Phase 4: a rule with a redirect filter (or an HTTPS redirect, on a plain socket) answers
    /// at once with its `Location`, built from the canonical path; without a port of its own it
    /// keeps the Gateway listener's port, not a mapped socket's. A location that is not a valid
    /// header value is refused (400).
    fn redirect(
        &self,
        rule: &RouteRule,
        req: &Request<ClientBody>,
        host: &str,
        listener_port: u16,
    ) -> Result<Option<Response<ProxyBody>>, ProxyError> {
        let Some(redirect) = rule.filters.redirect_for(self.scheme() == Scheme::Https) else {
            return Ok(None);
        };
        let target = RedirectTarget {
            scheme: self.scheme(),
            host,
            listener_port,
            path: req.uri().path(),
            query: req.uri().query(),
        };
        let location = redirect.location(&target, &rule.matcher.path);
        let status = StatusCode::from_u16(redirect.status)
            .ok()
            .filter(StatusCode::is_redirection)
            .unwrap_or(StatusCode::FOUND);
        let location = HeaderValue::from_str(&location).map_err(|_| ProxyError::BadRedirect)?;
        let mut resp = Response::new(empty());
        *resp.status_mut() = status;
        resp.headers_mut().insert(header::LOCATION, location);
        Ok(Some(resp))
    }

    /// Phase 9: the request's count and time to response head, through the label handles
    /// the table was published with (atomic increments; a table without them, as tests
    /// build, records nothing here). Returns the backend's series, whose byte counters the
    /// response body adds to as it ends.
    fn record(
        &self,
        table: &RouteTable,
        outcome: &Outcome,
        start: Instant,
    ) -> Option<Arc<BackendSeries>> {
        let index = SeriesIndex::of(table)?;
        let listener = table.listener(&self.listener)?;
        let cells = match &outcome.rule {
            Some((group, rule)) => index.rule(listener, *group, rule)?.cell(outcome.backend)?,
            None => index.unmatched(listener)?,
        };
        let families = &self.shared.metrics.http;
        let status = outcome.response.status();
        cells.record(families, outcome.method, status, start.elapsed());
        cells.backend.clone()
    }
}

/// Phase 3: the highest-precedence rule of the host that accepts the request, with that
/// virtual host (its TrafficPolicy applies under the rule's).
fn find_rule<'t>(
    listener: &'t ListenerTable,
    req: &Request<ClientBody>,
    host: &str,
) -> Result<(&'t VirtualHost, Arc<RouteRule>), ProxyError> {
    let view = RequestView {
        host,
        path: req.uri().path(),
        query: req.uri().query(),
        method: req.method(),
        headers: req.headers(),
    };
    listener
        .hosts
        .candidates(host)
        .find_map(|vhost| vhost.route(&view).map(|rule| (vhost, rule.clone())))
        .ok_or(ProxyError::NoRoute)
}
