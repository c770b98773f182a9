//! Error pages ([`crate::table::ErrorPages`]): when the backend answered one of the rule's
//! error statuses, that answer is dropped (its body unread, so its connection is closed rather
//! than given back half read) and the error page Service is asked instead, as ingress-nginx's
//! `error_page N = @custom_...` does: a `GET /` (a `HEAD` stays `HEAD`) with `X-Code`,
//! `X-Format`, `X-Original-URI`, `X-Namespace`, `X-Ingress-Name`, `X-Service-Name`,
//! `X-Service-Port`, `X-Request-ID` and the client's `Host`. Its answer, status included, is
//! the client's; when it cannot answer, the client gets that failure's 502, 503 or 504 (the
//! page is asked once, never retried, and its own answer is never intercepted again).

use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response, Uri, Version};

use crate::proxy::body::{empty_upstream_body, UpstreamBody};
use crate::proxy::error::ProxyError;
use crate::proxy::request_id::REQUEST_ID;
use crate::proxy::upstream::forward::{within_timeouts, Upstream};
use crate::proxy::upstream::pool::ResponseBody;
use crate::proxy::upstream::tls::UpstreamTls;
use crate::table::{ErrorPages, RouteRef, ServiceKey, Timeouts, UpstreamProtocol};

const X_CODE: HeaderName = HeaderName::from_static("x-code");
const X_FORMAT: HeaderName = HeaderName::from_static("x-format");
const X_ORIGINAL_URI: HeaderName = HeaderName::from_static("x-original-uri");
const X_NAMESPACE: HeaderName = HeaderName::from_static("x-namespace");
const X_INGRESS_NAME: HeaderName = HeaderName::from_static("x-ingress-name");
const X_SERVICE_NAME: HeaderName = HeaderName::from_static("x-service-name");
const X_SERVICE_PORT: HeaderName = HeaderName::from_static("x-service-port");

/// What the error request needs of the client's request, taken before it goes upstream (the
/// upstream request is rewritten and consumed).
pub(crate) struct Origin {
    /// A `HEAD` stays `HEAD`; every other method becomes `GET`.
    head: bool,
    accept: Option<HeaderValue>,
    /// The path and query as the client sent them (nginx's `$request_uri`).
    uri: Option<HeaderValue>,
    host: Option<HeaderValue>,
    request_id: Option<HeaderValue>,
}

impl Origin {
    /// The parts of `req` (as the client sent it) the error request carries.
    pub(crate) fn of<B>(req: &Request<B>) -> Self {
        let headers = req.headers();
        let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
        Self {
            head: req.method() == Method::HEAD,
            accept: headers.get(header::ACCEPT).cloned(),
            uri: HeaderValue::from_str(path).ok(),
            host: headers.get(header::HOST).cloned().or_else(|| {
                let authority = req.uri().authority()?;
                HeaderValue::from_str(authority.as_str()).ok()
            }),
            request_id: headers.get(&REQUEST_ID).cloned(),
        }
    }
}

/// The request to the error page Service for a backend answer of `code` to a request of
/// `route` that went to Service port `served`.
pub(crate) fn request(
    origin: &Origin,
    code: u16,
    route: &RouteRef,
    served: &ServiceKey,
    protocol: UpstreamProtocol,
) -> Request<UpstreamBody> {
    let mut req = Request::new(empty_upstream_body());
    *req.method_mut() = if origin.head {
        Method::HEAD
    } else {
        Method::GET
    };
    *req.uri_mut() = Uri::from_static("/");
    *req.version_mut() = match protocol {
        UpstreamProtocol::Http1 => Version::HTTP_11,
        UpstreamProtocol::H2c => Version::HTTP_2,
    };
    let headers = req.headers_mut();
    headers.insert(X_CODE, HeaderValue::from(code));
    let text = |s: &str| HeaderValue::from_str(s).ok();
    let values = [
        (X_FORMAT, origin.accept.clone()),
        (X_ORIGINAL_URI, origin.uri.clone()),
        (X_NAMESPACE, text(route.namespace())),
        (X_INGRESS_NAME, text(route.name())),
        (X_SERVICE_NAME, text(&served.name)),
        (X_SERVICE_PORT, Some(HeaderValue::from(served.port))),
        (REQUEST_ID, origin.request_id.clone()),
        (header::HOST, origin.host.clone()),
    ];
    for (name, value) in values {
        if let Some(value) = value {
            headers.insert(name, value);
        }
    }
    req
}

impl Upstream<'_> {
    /// Asks the error page Service of `pages` once (an endpoint outside the balancer's counts,
    /// as an authorizer is asked), within the rule's timeouts; a failure is
    /// [`ProxyError::ErrorPage`].
    pub(crate) async fn error_page(
        &self,
        pages: &ErrorPages,
        req: Request<UpstreamBody>,
        tls: Option<&UpstreamTls>,
        timeouts: Timeouts,
        start: std::time::Instant,
    ) -> Result<Response<ResponseBody>, ProxyError> {
        let service = &pages.backend;
        let failed = |source: ProxyError| ProxyError::ErrorPage {
            service: service.service.clone(),
            source: Box::new(source),
        };
        let endpoint = self.backends.spare_endpoint(service, &[]).map_err(failed)?;
        let send = async {
            self.clients
                .send(service.protocol, endpoint, tls, req)
                .await
                .map_err(|e| e.error)
        };
        within_timeouts(send, timeouts, self.response_timeout, start)
            .await
            .map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_request_is_a_get_of_slash_with_the_nginx_headers() {
        let client = Request::post("/shop/cart?id=7")
            .header(header::HOST, "shop.example")
            .header(header::ACCEPT, "application/json")
            .header(&REQUEST_ID, "r-1")
            .body(())
            .expect("request");
        let origin = Origin::of(&client);
        let route = RouteRef::new("Ingress", "web", "shop");
        let served = ServiceKey {
            namespace: "web".into(),
            name: "cart".into(),
            port: 8080,
        };
        let req = request(&origin, 503, &route, &served, UpstreamProtocol::Http1);
        assert_eq!(req.method(), Method::GET);
        assert_eq!(req.uri(), "/");
        let h = req.headers();
        let get = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
        assert_eq!(get("x-code").as_deref(), Some("503"));
        assert_eq!(get("x-format").as_deref(), Some("application/json"));
        assert_eq!(get("x-original-uri").as_deref(), Some("/shop/cart?id=7"));
        assert_eq!(get("x-namespace").as_deref(), Some("web"));
        assert_eq!(get("x-ingress-name").as_deref(), Some("shop"));
        assert_eq!(get("x-service-name").as_deref(), Some("cart"));
        assert_eq!(get("x-service-port").as_deref(), Some("8080"));
        assert_eq!(get("x-request-id").as_deref(), Some("r-1"));
        assert_eq!(get("host").as_deref(), Some("shop.example"));
        let head = Request::head("/").body(()).expect("request");
        let req = request(
            &Origin::of(&head),
            404,
            &route,
            &served,
            UpstreamProtocol::H2c,
        );
        assert_eq!(req.method(), Method::HEAD);
        assert_eq!(req.version(), Version::HTTP_2);
        assert!(req.headers().get("x-format").is_none());
    }
}
