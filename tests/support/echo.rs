//! Echo backends on loopback: each one is `edgeplane::devtools::echo::serve_echo` on its own random
//! 127.x.y.z address, answering with its pod name so tests can see which backend served them.

use std::net::SocketAddr;

use edgeplane::devtools::echo::{serve_echo, EchoIdentity};
use tokio::task::JoinHandle;

use super::net::bind_loopback;

/// A running echo server; dropping it stops the server and closes its connections.
pub struct Echo {
    pub addr: SocketAddr,
    pub pod: String,
    task: JoinHandle<std::io::Result<()>>,
}

impl Echo {
    /// Wraps a server task serving `addr`; dropping the result aborts the task.
    pub fn from_task(addr: SocketAddr, pod: &str, task: JoinHandle<std::io::Result<()>>) -> Self {
        Self {
            addr,
            pod: pod.to_owned(),
            task,
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts an echo server in namespace `default` answering as `pod`.
pub async fn start_echo(pod: &str) -> Echo {
    let listener = bind_loopback().await;
    let addr = listener
        .local_addr()
        .expect("bound listener has an address");
    let identity = EchoIdentity {
        pod: pod.to_owned(),
        namespace: "default".to_owned(),
    };
    let task = tokio::spawn(serve_echo(listener, identity));
    Echo {
        addr,
        pod: pod.to_owned(),
        task,
    }
}

/// Starts one echo server per pod name.
pub async fn start_fleet(pods: &[&str]) -> Vec<Echo> {
    let mut fleet = Vec::with_capacity(pods.len());
    for pod in pods {
        fleet.push(start_echo(pod).await);
    }
    fleet
}

/// A backend that accepts any HTTP/1.1 upgrade (`101 Switching Protocols`, echoing the
/// requested `Upgrade`) and then sends back every byte it receives; plain requests get 400.
pub async fn start_upgrade_echo() -> Echo {
    use std::convert::Infallible;

    use http::{header, Request, Response, StatusCode};
    use http_body_util::Empty;
    use hyper::body::Incoming;
    use hyper_util::rt::TokioIo;

    async fn answer(
        mut req: Request<Incoming>,
    ) -> Result<Response<Empty<bytes::Bytes>>, Infallible> {
        let mut resp = Response::new(Empty::new());
        let Some(protocol) = req.headers().get(header::UPGRADE).cloned() else {
            *resp.status_mut() = StatusCode::BAD_REQUEST;
            return Ok(resp);
        };
        let on = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            if let Ok(upgraded) = on.await {
                let (mut r, mut w) = tokio::io::split(TokioIo::new(upgraded));
                let _ = tokio::io::copy(&mut r, &mut w).await;
            }
        });
        *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        resp.headers_mut().insert(header::UPGRADE, protocol);
        resp.headers_mut().insert(
            header::CONNECTION,
            http::HeaderValue::from_static("upgrade"),
        );
        Ok(resp)
    }

    let listener = bind_loopback().await;
    let addr = listener
        .local_addr()
        .expect("bound listener has an address");
    let task = tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await?;
            tokio::spawn(async move {
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), hyper::service::service_fn(answer))
                    .with_upgrades();
                let _ = conn.await;
            });
        }
    });
    Echo {
        addr,
        pod: "upgrade".to_owned(),
        task,
    }
}
