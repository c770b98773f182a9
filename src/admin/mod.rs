//! The admin server: health, readiness, Prometheus metrics and debug views of what is published.
//! HTTP/1.1 on its own address; never on a request path of the proxy.

mod routes;

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::reconcile::Published;

pub use routes::handle;

/// Default address of the admin server.
pub const DEFAULT_ADMIN_ADDR: &str = "127.0.0.1:9901";

/// Time a client has to send a request head.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the admin endpoints on `listener` until the task is dropped or the listener fails.
pub async fn serve_admin(listener: TcpListener, published: Arc<Published>) -> std::io::Result<()> {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and similar: back off instead of spinning.
                tracing::warn!(error = %e, "admin accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let published = published.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let published = published.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(&req, &published)) }
            });
            let conn = http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "admin connection ended");
            }
        });
    }
}
