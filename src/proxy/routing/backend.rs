//! Phases 5 to 8 of a request a rule accepted: TrafficPolicy, the backendRef (by weight or
//! session), the request filters and upstream request, mirrors, the upstream exchange within
//! the rule's timeouts (`upstream::forward`), the error page replacing an intercepted answer
//! (`upstream::error_pages`), the WebSocket tunnel, and the response filters.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderMap, HeaderValue};
use http::uri::PathAndQuery;
use http::{Request, Response, StatusCode, Uri, Version};
use http_body_util::BodyExt;

use crate::metrics::SeriesIndex;
use crate::proxy::body::UpstreamBody;
use crate::proxy::body::{ClientBody, ProxyBody};
use crate::proxy::decision;
use crate::proxy::error::ProxyError;
use crate::proxy::policy::{self, ext_auth};
use crate::proxy::routing::headers::{set_forwarded, strip_hop_by_hop};
use crate::proxy::routing::service::{Handler, Matched};
use crate::proxy::routing::session::Session;
use crate::proxy::routing::tracked::Held;
use crate::proxy::upstream::error_pages;
use crate::proxy::upstream::forward::{Exchange, Upstream};
use crate::proxy::upstream::mirror::{spawn_mirror, tee};
use crate::proxy::upstream::pool::ResponseBody;
use crate::proxy::upstream::tls::UpstreamTls;
use crate::proxy::upstream::trail::Trail;
use crate::proxy::upstream::upgrade::{
    restore_upgrade_headers, tunnel, websocket_upgrade, ClientUpgrade,
};
use crate::table::{
    BackendTarget, ErrorPages, ListenerTable, Mirror, RouteRule, RouteTable, ServiceBackend,
    UpstreamProtocol, VirtualHost, WeightedBackend,
};

impl Handler {
    /// Phases 5 to 8 of a matched request: policy, backendRef, request filters, mirrors, the
    /// upstream exchange and the response filters. Returns, besides the outcome, what the
    /// response holds while its body streams; `trail` gets what the upstream phase did.
    pub(crate) async fn proxy(
        &self,
        table: &RouteTable,
        matched: Matched<'_>,
        start: Instant,
        trail: &mut Trail,
    ) -> (Result<Response<ProxyBody>, ProxyError>, Held) {
        let Matched {
            listener,
            vhost,
            rule,
            req,
            raw_host,
            cors_headers,
        } = matched;
        let mut held = Held::default();
        // The response holds what `held` gathers (its upstream slot, then its endpoint) also
        // when a later phase fails: the error response keeps them until it is sent.
        let result = async {
            let mut req = req;
            let caller = policy::Caller {
                peer: self.peer.ip(),
                trusted: &self.settings.trusted_proxies,
                max_request_body: self.settings.max_request_body,
            };
            let policies = &self.shared.policies;
            let admitted = policies
                .check_request(caller, &mut req, &rule, vhost, &self.shared.metrics)
                .await?;
            let response_limit = admitted.response_limit;
            held.concurrency = admitted.slot;
            // Boxed, and only made when an authorizer applies: its state would otherwise
            // make every request's future larger.
            if policy::external_auths(&rule, vhost).next().is_some() {
                let checked = Box::pin(self.external_auth(&mut req, &rule, vhost, table, listener));
                if let Some(denied) = checked.await? {
                    trail.answered_by = Some(decision::EXT_AUTH_DENIED);
                    return Ok(denied);
                }
            }
            let session = rule
                .filters
                .session
                .as_ref()
                .map(|spec| Session::read(spec, req.headers()));
            let bound = session.as_ref().and_then(|s| s.bound(&rule));
            let (backend, service) = pick_backend(&rule, bound.map(|(index, _)| index))?;
            held.backend = rule
                .backends
                .backends
                .iter()
                .position(|b| std::ptr::eq(b, backend));
            let series = SeriesIndex::of(table)
                .and_then(|index| index.rule(listener, vhost.listener, &rule))
                .and_then(|s| s.cell(held.backend))
                .and_then(|cell| cell.backend.as_deref());
            let protocol = rule.upstream_protocol(&service);
            let pages = error_pages_of(&rule, vhost);
            let origin = pages.map(|_| error_pages::Origin::of(&req));
            // WebSocket handshakes go through to HTTP/1 backends only.
            let upgrade = websocket_upgrade(req.headers())
                .filter(|_| protocol == UpstreamProtocol::Http1)
                .map(|value| (value, ClientUpgrade::of(&mut req)));
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
                send_idle: rule.filters.send_idle(),
                retry: rule.filters.retry.as_deref(),
                pinned: bound.map(|(_, addr)| addr),
                upgrade: upgrade.is_some(),
                start,
                series,
            };
            // An HTTP/1.1 exchange holds an upstream connection: the client connection's share of
            // them is bounded, its further requests wait (HTTP/2 upstreams multiplex streams).
            if protocol == UpstreamProtocol::Http1 {
                held.share = self.upstream_share.clone().acquire_owned().await.ok();
            }
            let (mut resp, picked) = self.upstream().forward(exchange, req, trail).await?;
            let code = resp.status().as_u16();
            if let (Some(pages), Some(origin)) = (pages, &origin) {
                if pages.intercepts(code) {
                    // The backend's answer is dropped unread: its connection closes.
                    drop((resp, picked));
                    let page = error_pages::request(
                        origin,
                        code,
                        &rule.route,
                        &service.service,
                        pages.backend.protocol,
                    );
                    let tls = upstream_tls(table, listener, &pages.backend);
                    let timeouts = rule.filters.timeouts;
                    // Boxed: the rare path, kept out of every request's future.
                    let upstream = self.upstream();
                    let resp =
                        Box::pin(upstream.error_page(pages, page, tls.as_ref(), timeouts, start))
                            .await?;
                    trail.answered_by = Some(decision::ERROR_PAGE);
                    policy::check_declared_response(&resp, response_limit)?;
                    return Ok(self.respond(
                        resp,
                        None,
                        &rule,
                        backend,
                        response_limit,
                        cors_headers,
                    ));
                }
            }
            policy::check_declared_response(&resp, response_limit)?;
            if let Some(session) = &session {
                session.stamp(resp.headers_mut(), picked.addr);
            }
            held.endpoint = Some(picked);
            Ok(self.respond(resp, upgrade, &rule, backend, response_limit, cors_headers))
        }
        .await;
        (result, held)
    }

    /// Phase 8 and after: the response as the client gets it: a WebSocket tunnel when the
    /// backend switched protocols, the response filters, the policy's body limit and the CORS
    /// headers.
    fn respond(
        &self,
        mut resp: Response<ResponseBody>,
        upgrade: Option<ClientUpgrade>,
        rule: &RouteRule,
        backend: &WeightedBackend,
        response_limit: Option<u64>,
        cors_headers: HeaderMap,
    ) -> Response<ProxyBody> {
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
        let mut resp = response_filters(resp, rule, backend);
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
        resp
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

    /// Phase 5c: the external authorizers the request is under (`policy::ext_auth`); a
    /// denial is the client's answer.
    async fn external_auth(
        &self,
        req: &mut Request<ClientBody>,
        rule: &RouteRule,
        vhost: &VirtualHost,
        table: &RouteTable,
        listener: &ListenerTable,
    ) -> Result<Option<Response<ProxyBody>>, ProxyError> {
        let mut checks = policy::external_auths(rule, vhost).peekable();
        if checks.peek().is_none() {
            return Ok(None);
        }
        let transport = AuthTransport {
            handler: self,
            table,
            listener,
        };
        let authz = ext_auth::Authorizer {
            transport: &transport,
            metrics: &self.shared.metrics,
        };
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| req.uri().authority().map(|a| a.as_str()))
            .unwrap_or_default()
            .to_owned();
        let client = SocketAddr::new(
            policy::client_ip(
                self.peer.ip(),
                &self.settings.trusted_proxies,
                req.headers(),
            ),
            self.peer.port(),
        );
        let origin = ext_auth::Origin {
            client,
            scheme: self.scheme().as_str(),
            host: &host,
        };
        ext_auth::authorize(checks, &authz, &origin, req).await
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
}

/// How external authorization reaches its authorizers: the proxy's pools, one spare endpoint
/// of the Service, TLS by the table's BackendTLSPolicies.
struct AuthTransport<'a> {
    handler: &'a Handler,
    table: &'a RouteTable,
    listener: &'a ListenerTable,
}

impl ext_auth::Transport for AuthTransport<'_> {
    fn send<'a>(
        &'a self,
        service: &'a ServiceBackend,
        protocol: UpstreamProtocol,
        req: Request<UpstreamBody>,
    ) -> ext_auth::Exchange<'a> {
        Box::pin(async move {
            let shared = &self.handler.shared;
            let endpoint = shared.backends.spare_endpoint(service, &[])?;
            let tls = upstream_tls(self.table, self.listener, service);
            let resp = shared
                .upstreams
                .send(protocol, endpoint, tls.as_ref(), req)
                .await
                .map_err(|e| e.error)?;
            Ok(resp.map(|body| body.map_err(Into::into).boxed_unsync()))
        })
    }
}

/// The error pages of the rule's TrafficPolicy, else of its virtual host's.
fn error_pages_of<'a>(rule: &'a RouteRule, vhost: &'a VirtualHost) -> Option<&'a ErrorPages> {
    let own = rule
        .filters
        .policy
        .as_ref()
        .and_then(|p| p.error_pages.as_deref());
    own.or_else(|| vhost.policy.as_ref()?.error_pages.as_deref())
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
        m.apply_to_response(parts.status, &mut parts.headers);
    }
    if let Some(m) = &backend.filters.response_headers {
        m.apply_to_response(parts.status, &mut parts.headers);
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

/// TLS to `service` when a BackendTLSPolicy applies to its port, with the port's own client
/// certificate (an Ingress's `proxy-ssl-secret`), else the listener's Gateway's.
fn upstream_tls(
    table: &RouteTable,
    listener: &ListenerTable,
    service: &ServiceBackend,
) -> Option<UpstreamTls> {
    let policy = table.backend_tls(&service.service)?;
    let gateway = listener.backend_identity.as_ref();
    let identity = match &**policy {
        crate::table::BackendTlsEntry::Ready(tls) => tls.identity(gateway),
        crate::table::BackendTlsEntry::Unusable { .. } => gateway,
    };
    Some(UpstreamTls {
        policy: policy.clone(),
        identity: identity.cloned(),
    })
}
