//! Each proxy error's status code, body and fault class.

use super::*;

#[test]
fn statuses() {
    let key = ServiceKey {
        namespace: "ns".into(),
        name: "svc".into(),
        port: 80,
    };
    assert_eq!(ProxyError::NoRoute.status(), 404);
    assert_eq!(ProxyError::NoBackend.status(), 500);
    assert_eq!(
        ProxyError::InvalidBackend { reason: "x".into() }.status(),
        500
    );
    assert_eq!(ProxyError::NoEndpoints { service: key }.status(), 503);
    let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
    assert_eq!(ProxyError::ConnectTimeout { addr }.status(), 504);
    let timeout = ProxyError::Timeout {
        kind: TimeoutKind::Request,
        after: std::time::Duration::from_millis(500),
    };
    assert_eq!(timeout.status(), 504);
    assert_eq!(timeout.to_string(), "request timeout of 500ms exceeded");
    let backend = ProxyError::Timeout {
        kind: TimeoutKind::BackendRequest,
        after: std::time::Duration::from_secs(1),
    };
    assert_eq!(backend.to_string(), "backendRequest timeout of 1s exceeded");
    let body = ProxyError::BodyTimeout(std::time::Duration::from_secs(1));
    assert_eq!(body.status(), 408);
    assert_eq!(timeout.fault(), Fault::Upstream);
    assert_eq!(ProxyError::NoRoute.fault(), Fault::Route);
    assert_eq!(ProxyError::NoBackend.fault(), Fault::Route);
    assert_eq!(ProxyError::MissingHost.status(), 400);
    assert_eq!(ProxyError::MissingHost.fault(), Fault::Client);
    assert_eq!(ProxyError::ClientBody("x".into()).status(), 400);
    assert_eq!(ProxyError::ClientBody("x".into()).fault(), Fault::Client);
    let te = ProxyError::UnsupportedTransferCoding("gzip".into());
    assert_eq!((te.status().as_u16(), te.fault()), (501, Fault::Client));
    assert_eq!(ProxyError::BadPath(PathError::EmptySegment).status(), 400);
    let limited = ProxyError::RateLimited {
        retry_after: std::time::Duration::from_millis(200),
    };
    let resp = limited.to_response();
    assert_eq!(
        (resp.status().as_u16(), limited.fault()),
        (429, Fault::Client)
    );
    assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
    let big = ProxyError::ResponseBodyTooLarge(10);
    assert_eq!((big.status().as_u16(), big.fault()), (502, Fault::Upstream));
    assert_eq!(ProxyError::RequestBodyTooLarge(10).status(), 413);
    let dup = ProxyError::DuplicateAuthorization;
    assert_eq!((dup.status().as_u16(), dup.fault()), (400, Fault::Client));
    let busy = ProxyError::AuthBusy {
        retry_after: std::time::Duration::from_secs(1),
    };
    let resp = busy.to_response();
    assert_eq!((resp.status().as_u16(), busy.fault()), (503, Fault::Route));
    assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
    assert_eq!(resp.headers()[OVERLOADED], "basic-auth");
}
