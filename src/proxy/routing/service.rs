//! The HTTP service: one request through its phases, Pingora-style, one function per phase:
//! listener -> gate (host, framing, canonical path: `gate.rs`) -> host (421 when it belongs to another HTTPS listener than the SNI) -> rule -> redirect -> CORS preflight ->
//! policy (TrafficPolicy: IP access, rate limit, basic auth, JWT, body size: `policy/`) -> backend -> request filters ->
//! mirrors -> forward (within the rule's timeouts) -> response filters -> metrics and access log. The table is loaded once per request, so a request finishes on the table it
//! started with however often the table is swapped meanwhile.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderValue};
use http::uri::PathAndQuery;
use http::{HeaderMap, Request, Response, StatusCode, Uri, Version};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::Semaphore;

use crate::proxy::access_log::Entry;
use crate::proxy::body::ProxyBody;
use crate::proxy::body::{BodyFlags, ClientBody, MinRate};
use crate::proxy::error::ProxyError;
use crate::proxy::handshake::tls::TlsInfo;
use crate::proxy::policy;
use crate::proxy::routing::answers::{empty, grpc_unimplemented, options_asterisk, preflight};
use crate::proxy::routing::gate::{self, Target};
use crate::proxy::routing::headers::{client_address, set_forwarded, strip_hop_by_hop};
use crate::proxy::routing::session::Session;
use crate::proxy::routing::tracked::{Activity, Held, Tracked};
use crate::proxy::settings::ConnSettings;
use crate::proxy::shared::Shared;
use crate::proxy::upstream::client::UpstreamBody;
use crate::proxy::upstream::forward::{Exchange, Upstream};
use crate::proxy::upstream::mirror::{spawn_mirror, tee};
use crate::proxy::upstream::pool::ResponseBody;
use crate::proxy::upstream::tls::UpstreamTls;
use crate::proxy::upstream::upgrade::{restore_upgrade_headers, tunnel, websocket_upgrade};
use crate::table::{
    is_grpc, BackendTarget, Cors, ListenerTable, Mirror, RedirectTarget, RequestView, RouteRef,
    RouteRule, RouteTable, Scheme, ServiceBackend, UpstreamProtocol, VirtualHost, WeightedBackend,
};

/// Label of requests that matched no route.
const NO_ROUTE: &str = "none";

/// Serves requests of one accepted connection.
#[derive(Clone)]
pub(crate) struct Handler {
    pub shared: Arc<Shared>,
    /// The table key of the listener whose socket accepted the connection.
    pub listener: SocketAddr,
    /// The client's address.
    pub peer: SocketAddr,
    /// What the forwarded headers say of the client, worked out once per connection.
    client: Client,
    /// Set on connections that arrived over TLS.
    pub tls: Option<TlsInfo>,
    /// Requests in flight on the connection, for its idle timer and the drain.
    pub activity: Arc<Activity>,
    /// The connection's settings (command line, or its listener's ProxyConfig at accept).
    pub settings: Arc<ConnSettings>,
    /// Upstream requests the connection may have in flight (`--max-upstream-per-client`).
    upstream_share: Arc<Semaphore>,
}

/// The peer of a connection as the forwarded headers need it.
#[derive(Clone)]
struct Client {
    /// Its address as an `X-Forwarded-For` value.
    address: HeaderValue,
    /// Whether it is a trusted proxy (`--trusted-proxies`, or the listener's ProxyConfig).
    trusted: bool,
}

/// What routing decided for a request, kept for the metrics phase.
struct Outcome {
    /// The matched route; `None` when no route matched.
    route: Option<Arc<RouteRef>>,
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
    pub async fn handle(self, req: Request<Incoming>) -> Response<Tracked> {
        let in_flight = self.activity.start();
        let start = Instant::now();
        let table = self.shared.table.load_full();
        let mut route = None;
        let mut held = Held::default();
        let flags = Arc::new(BodyFlags::default());
        // gRPC streams may pause between messages: only the idle limit applies to them.
        let rate = match is_grpc(req.headers()) {
            true => MinRate::OFF,
            false => self.shared.options.min_body_rate,
        };
        let timers = (self.settings.body_idle_timeout, rate);
        let mut log = (!self.settings.access_log.is_off()).then(|| {
            let client = self.client_ip(req.headers());
            let sink = self.shared.options.access_sink.clone();
            Entry::head(self.settings.access_log.clone(), sink, client, &req, start)
        });
        let req = req.map(|b| ClientBody::new(b, timers, flags.clone()));
        let served = self.serve(&table, req, &mut route, &mut held, start).await;
        let served = flags.blame(served, timers, &self.shared.metrics);
        let response = match served {
            Ok(resp) => resp,
            Err(err) => {
                tracing::debug!(listener = %self.listener, route = ?route.as_deref().map(RouteRef::label), error = %err, "request failed");
                self.shared
                    .metrics
                    .request_errors
                    .with_label_values(&[err.fault().label()])
                    .inc();
                err.to_response()
            }
        };
        let outcome = Outcome { route, response };
        self.record(&outcome, start);
        if let Some(entry) = log.as_mut() {
            entry.status = outcome.response.status().as_u16();
            entry.route = outcome.route.clone();
            entry.upstream = held.endpoint.as_ref().map(|p| p.addr);
        }
        let log = log.map(|entry| (Box::new(entry), flags));
        outcome
            .response
            .map(|body| Tracked::new(body, in_flight, held, log))
    }

    async fn serve(
        &self,
        table: &RouteTable,
        req: Request<ClientBody>,
        route_label: &mut Option<Arc<RouteRef>>,
        held: &mut Held,
        start: Instant,
    ) -> Result<Response<ProxyBody>, ProxyError> {
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
            return Ok(options_asterisk());
        }
        self.check_misdirected(listener, &host)?;
        let (vhost, rule) = match find_rule(listener, &req, &host) {
            Err(ProxyError::NoRoute) if is_grpc(req.headers()) => return Ok(grpc_unimplemented()),
            found => found?,
        };
        *route_label = Some(rule.route.clone());
        if let Some(resp) = self.redirect(&rule, &req, &host, listener.listener_port())? {
            return Ok(resp);
        }
        let cors_headers = match &rule.filters.cors {
            Some(cors) if Cors::is_preflight(req.method(), req.headers()) => {
                return Ok(preflight(cors.preflight_headers(req.headers())));
            }
            Some(cors) => cors.response_headers(req.headers()),
            None => HeaderMap::new(),
        };
        let caller = policy::Caller {
            peer: self.peer.ip(),
            trusted: &self.settings.trusted_proxies,
            max_request_body: self.settings.max_request_body,
        };
        let policies = &self.shared.policies;
        let response_limit = policies
            .check_request(caller, &mut req, &rule, vhost, &self.shared.metrics)
            .await?;
        let session = rule
            .filters
            .session
            .as_ref()
            .map(|spec| Session::read(spec, req.headers()));
        let bound = session.as_ref().and_then(|s| s.bound(&rule));
        let (backend, service) = pick_backend(&rule, bound.map(|(index, _)| index))?;
        let protocol = rule.upstream_protocol(&service);
        // WebSocket handshakes go through to HTTP/1 backends only.
        let upgrade = websocket_upgrade(req.headers())
            .filter(|_| protocol == UpstreamProtocol::Http1)
            .map(|value| (value, hyper::upgrade::on(&mut req)));
        let req = self.upstream_request(req, &rule, backend, &service, Some(raw_host))?;
        let tls = upstream_tls(table, listener, &service);
        let mut req = if upgrade.is_some() {
            req.map(BodyExt::boxed_unsync)
        } else {
            self.mirror(req, &rule, backend, table, listener)
        };
        let upgrade = upgrade.map(|(value, client)| {
            restore_upgrade_headers(req.headers_mut(), value);
            client
        });
        let exchange = Exchange {
            client: self.peer.ip(),
            service: &service,
            protocol,
            tls: tls.as_ref(),
            timeouts: rule.filters.timeouts,
            retry: rule.filters.retry.as_deref(),
            pinned: bound.map(|(_, addr)| addr),
            upgrade: upgrade.is_some(),
            start,
        };
        // An HTTP/1.1 exchange holds an upstream connection: the client connection's share of
        // them is bounded, its further requests wait (HTTP/2 upstreams multiplex streams).
        if protocol == UpstreamProtocol::Http1 {
            held.share = self.upstream_share.clone().acquire_owned().await.ok();
        }
        let (mut resp, picked) = self.upstream().forward(exchange, req).await?;
        policy::check_declared_response(&resp, response_limit)?;
        if let Some(session) = &session {
            session.stamp(resp.headers_mut(), picked.addr);
        }
        held.endpoint = Some(picked);
        let switched = match upgrade {
            Some(client) if resp.status() == StatusCode::SWITCHING_PROTOCOLS => {
                let upgrade_value = resp.headers().get(header::UPGRADE).cloned();
                tunnel(
                    client,
                    hyper::upgrade::on(&mut resp),
                    self.shared.tunnels.clone(),
                );
                upgrade_value
            }
            _ => None,
        };
        let mut resp = response_filters(resp, &rule, backend);
        if let Some(max) = response_limit.filter(|_| switched.is_none()) {
            resp = resp.map(|body| policy::limit_response(body, max));
        }
        if let Some(value) = switched {
            restore_upgrade_headers(resp.headers_mut(), value);
        }
        for (name, value) in cors_headers {
            if let Some(name) = name {
                resp.headers_mut().insert(name, value);
            }
        }
        Ok(resp)
    }

    /// Phase 7: a copy of the request as it goes upstream to every mirror of the rule and of
    /// the picked backendRef whose share includes this request; the body is teed as it streams.
    fn mirror(
        &self,
        req: Request<ClientBody>,
        rule: &RouteRule,
        backend: &WeightedBackend,
        table: &RouteTable,
        listener: &ListenerTable,
    ) -> Request<UpstreamBody> {
        let targets: Vec<(&Mirror, SocketAddr)> = rule
            .filters
            .mirrors
            .iter()
            .chain(&backend.filters.mirrors)
            .filter(|m| m.sampled(fastrand::u64(..)))
            .filter_map(|m| {
                let endpoint = self.shared.backends.spare_endpoint(&m.backend, &[]);
                endpoint.ok().map(|e| (m, e))
            })
            .collect();
        let (parts, body) = req.into_parts();
        let (body, copies) = tee(body, targets.len());
        for ((mirror, endpoint), copy) in targets.into_iter().zip(copies) {
            let mut m = Request::new(copy);
            *m.method_mut() = parts.method.clone();
            *m.uri_mut() = parts.uri.clone();
            *m.headers_mut() = parts.headers.clone();
            let protocol = rule.upstream_protocol(&mirror.backend);
            *m.version_mut() = http_version(protocol);
            spawn_mirror(
                self.shared.upstreams.clone(),
                protocol,
                endpoint,
                upstream_tls(table, listener, &mirror.backend),
                m,
            );
        }
        Request::from_parts(parts, body)
    }

    /// Phase 1: the listener that owns the accepting socket, in the live table.
    fn find_listener<'t>(&self, table: &'t RouteTable) -> Result<&'t ListenerTable, ProxyError> {
        table
            .listener(&self.listener)
            .map(|l| l.as_ref())
            .ok_or(ProxyError::NoListener(self.listener))
    }

    /// The upstream phase's share of the proxy's state.
    fn upstream(&self) -> Upstream<'_> {
        Upstream {
            backends: &self.shared.backends,
            clients: &self.shared.upstreams,
            metrics: &self.shared.metrics,
            response_timeout: self.shared.options.upstream_response_timeout,
        }
    }

    /// The client's address as the trusted forwarded headers name it (the peer's otherwise).
    fn client_ip(&self, headers: &HeaderMap) -> std::net::IpAddr {
        policy::client_ip(self.peer.ip(), &self.settings.trusted_proxies, headers)
    }

    /// The scheme the client used: `https` on TLS connections.
    fn scheme(&self) -> Scheme {
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

    /// Phase 4: a rule with a redirect filter answers at once with its `Location`, built from
    /// the canonical path; without a port of its own it keeps the Gateway listener's port, not a
    /// mapped socket's. A location that is not a valid header value is refused (400).
    fn redirect(
        &self,
        rule: &RouteRule,
        req: &Request<ClientBody>,
        host: &str,
        listener_port: u16,
    ) -> Result<Option<Response<ProxyBody>>, ProxyError> {
        let Some(redirect) = rule.filters.redirect.as_ref() else {
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

    /// Phase 6: hop-by-hop headers out, forwarded headers in, then the rule's and the backend's
    /// request filters, the URL rewrite, and the upstream path, version and `Host`.
    fn upstream_request(
        &self,
        req: Request<ClientBody>,
        rule: &RouteRule,
        backend: &WeightedBackend,
        service: &ServiceBackend,
        raw_host: Option<HeaderValue>,
    ) -> Result<Request<ClientBody>, ProxyError> {
        let (mut parts, body) = req.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        set_forwarded(
            &mut parts.headers,
            &self.client.address,
            self.client.trusted,
            self.scheme().as_str(),
            raw_host.as_ref(),
        );
        if let Some(m) = &rule.filters.request_headers {
            m.apply(&mut parts.headers);
        }
        if let Some(m) = &backend.filters.request_headers {
            m.apply(&mut parts.headers);
        }
        let rewrite = backend
            .filters
            .rewrite
            .as_ref()
            .or(rule.filters.rewrite.as_ref());
        let mut host = raw_host;
        let mut path_and_query = parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        if let Some(rewrite) = rewrite {
            (path_and_query, host) = rewrite
                .apply(&rule.matcher.path, path_and_query, host)
                .map_err(|e| ProxyError::BadUpstreamRequest(e.to_string()))?;
        }
        // Origin form here; the upstream pool adds the authority it connects with.
        parts.uri = Uri::from(path_and_query);
        parts.version = http_version(rule.upstream_protocol(service));
        match host {
            Some(h) => {
                parts.headers.insert(header::HOST, h);
            }
            None => {
                parts.headers.remove(header::HOST);
            }
        }
        Ok(Request::from_parts(parts, body))
    }

    /// Phase 9: request count by route and code, and time to response head.
    fn record(&self, outcome: &Outcome, start: Instant) {
        let metrics = &self.shared.metrics;
        let route = outcome.route.as_deref().map_or(NO_ROUTE, RouteRef::label);
        metrics.record_request(route, outcome.response.status());
        metrics
            .request_seconds
            .with_label_values(&[route])
            .observe(start.elapsed().as_secs_f64());
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

/// Phase 5: a backendRef by weight (or the one whose endpoint the request's session is bound
/// to), which must be a resolved Service.
fn pick_backend(
    rule: &RouteRule,
    bound: Option<usize>,
) -> Result<(&WeightedBackend, Arc<ServiceBackend>), ProxyError> {
    let backend = bound
        .and_then(|i| rule.backends.backends.get(i))
        .or_else(|| rule.backends.pick(fastrand::u64(..)))
        .ok_or(ProxyError::NoBackend)?;
    match &backend.target {
        BackendTarget::Service(service) => Ok((backend, service.clone())),
        BackendTarget::Invalid { reason } => Err(ProxyError::InvalidBackend {
            reason: reason.clone(),
        }),
    }
}

/// Phase 8: hop-by-hop headers out of the response, then the rule's and the backend's response
/// header filters. The body streams through untouched.
fn response_filters(
    resp: Response<ResponseBody>,
    rule: &RouteRule,
    backend: &WeightedBackend,
) -> Response<ProxyBody> {
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    if let Some(m) = &rule.filters.response_headers {
        m.apply(&mut parts.headers);
    }
    if let Some(m) = &backend.filters.response_headers {
        m.apply(&mut parts.headers);
    }
    Response::from_parts(parts, body.map_err(Into::into).boxed_unsync())
}

/// The HTTP version spoken to a backend.
fn http_version(protocol: UpstreamProtocol) -> Version {
    match protocol {
        UpstreamProtocol::Http1 => Version::HTTP_11,
        UpstreamProtocol::H2c => Version::HTTP_2,
    }
}

/// TLS to `service` when a BackendTLSPolicy applies to its port, with the client certificate
/// of the listener's Gateway.
fn upstream_tls(
    table: &RouteTable,
    listener: &ListenerTable,
    service: &ServiceBackend,
) -> Option<UpstreamTls> {
    let policy = table.backend_tls(&service.service)?;
    Some(UpstreamTls {
        policy: policy.clone(),
        identity: listener.backend_identity.clone(),
    })
}
