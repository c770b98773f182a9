//! Echo backends on loopback: each one is `edgeplane::echo::serve_echo` on its own random
//! 127.x.y.z address, answering with its pod name so tests can see which backend served them.

use std::net::SocketAddr;

use edgeplane::echo::{serve_echo, EchoIdentity};
use tokio::task::JoinHandle;

use super::net::bind_loopback;

/// A running echo server; dropping it stops the server and closes its connections.
pub struct Echo {
    pub addr: SocketAddr,
    pub pod: String,
    task: JoinHandle<std::io::Result<()>>,
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
