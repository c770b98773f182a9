//! TCP sockets of the listener manager (`sockets`): one socket per worker for each address
//! (SO_REUSEPORT: the kernel spreads new connections over the workers' sockets, and a new
//! process can take over a port during a rollout), each with its accept loop on its worker's
//! runtime, and one cap on open connections across them. Asked to stop, every loop closes its
//! socket at once and drains its open connections (idle ones closed at once, busy ones after
//! their request, bounded by the drain timeout, then the rest are cut). Connections are served
//! by `conn`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use crate::proxy::inbound::conn::{builder, handle, Accepted, OpenConns};
use crate::proxy::shared::Shared;
use crate::proxy::sockets::Running;
use crate::proxy::workers::{self, Workers};

/// Pending connections the kernel queues per listener.
const BACKLOG: u32 = 1024;
/// Pause after an accept error (such as too many open files) before accepting again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// Binds `addr` once per worker and starts an accept loop on each worker's runtime; the loops
/// share one count of open connections, so the listener's limit and drain cover them all. Bound
/// means every worker's socket is bound: if one cannot be, none is kept.
pub(crate) fn start(
    shared: &Arc<Shared>,
    workers: &Workers,
    addr: SocketAddr,
) -> std::io::Result<Running> {
    let label = addr.to_string();
    let open = OpenConns::new(
        shared
            .metrics
            .connections_open
            .with_label_values(&[label.as_str()]),
    );
    let mut bound = Vec::with_capacity(workers.len());
    for index in 0..workers.len() {
        // The socket registers with the reactor of the worker that will accept on it.
        let _runtime = workers.handle(index).map(tokio::runtime::Handle::enter);
        bound.push(bind(addr)?);
    }
    let mut parts = Vec::with_capacity(bound.len());
    for (index, listener) in bound.into_iter().enumerate() {
        let (stop, stop_rx) = oneshot::channel();
        let serve = accept_loop(listener, addr, shared.clone(), open.clone(), stop_rx);
        let task = match workers.handle(index) {
            Some(runtime) => runtime.spawn(serve),
            None => tokio::spawn(serve),
        };
        parts.push(Running { stop, task });
    }
    Ok(Running::all(parts))
}

/// Binds `addr` with SO_REUSEADDR (rebind at once after a restart) and, on Linux, SO_REUSEPORT:
/// a second process of the same user can bind the same port during a rollout and serve new
/// connections while this one drains. The kernel only lets processes of the same effective user
/// share the port, and a socket bound without SO_REUSEPORT still makes the bind fail.
fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    #[cfg(target_os = "linux")]
    socket.set_reuse_port(true)?;
    socket.set_tcp_nodelay(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG as i32)?;
    TcpListener::from_std(socket.into())
}

/// Accepts until asked to stop, serving each connection on its own task of this worker; a
/// connection over the listener's limit (counted across workers in `open`) is closed at once.
/// On stop: accepts what the kernel already queued, closes the socket, acknowledges, and drains.
async fn accept_loop(
    listener: TcpListener,
    key: SocketAddr,
    shared: Arc<Shared>,
    open: Arc<OpenConns>,
    mut stop: oneshot::Receiver<oneshot::Sender<()>>,
) {
    let builder = builder(&shared.conn_defaults);
    let label = key.to_string();
    let refused = shared
        .metrics
        .connections_refused
        .with_label_values(&[label.as_str()]);
    let worker = workers::current().to_string();
    let accepted = shared
        .metrics
        .worker_connections
        .with_label_values(&[worker.as_str()]);
    let (drain, drain_rx) = watch::channel(false);
    let mut conns: JoinSet<()> = JoinSet::new();
    let spawn = |conns: &mut JoinSet<()>, stream, peer| {
        let Some(counted) = open.try_add(shared.options.max_connections) else {
            refused.inc();
            drop(stream);
            return;
        };
        accepted.inc();
        conns.spawn(handle(Accepted {
            stream,
            peer,
            listener: key,
            shared: shared.clone(),
            builder: builder.clone(),
            drain: drain_rx.clone(),
            open: counted,
        }));
    };
    // The drain window of the listener's ProxyConfig as last seen: when the listener leaves
    // the table its settings are gone with it.
    let drain_of = || {
        shared
            .table
            .load()
            .listener(&key)
            .and_then(|l| l.settings.as_ref().and_then(|s| s.drain))
    };
    let mut drain_timeout = drain_of().unwrap_or(shared.options.drain_timeout);
    let ack = loop {
        tokio::select! {
            ack = &mut stop => break ack.ok(),
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    drain_timeout = drain_of().unwrap_or(shared.options.drain_timeout);
                    spawn(&mut conns, stream, peer)
                }
                Err(error) => {
                    tracing::warn!(addr = %key, %error, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
        }
    };
    // Connections the kernel completed before the socket closes would be reset with it: serve
    // them (they are told to close after their request, as the drain has begun).
    drain.send_replace(true);
    while let Some(Ok((stream, peer))) = listener.accept().now_or_never() {
        spawn(&mut conns, stream, peer);
    }
    drop(listener);
    if let Some(ack) = ack {
        let _ = ack.send(());
    }
    // This worker's connections; the others drain theirs.
    while conns.try_join_next().is_some() {}
    let remaining = conns.len();
    if remaining > 0 {
        tracing::info!(addr = %key, open = remaining, "draining connections");
    }
    let reap = async { while conns.join_next().await.is_some() {} };
    let timed_out = tokio::select! {
        _ = open.all_closed() => false,
        _ = reap => false,
        _ = tokio::time::sleep(drain_timeout) => true,
    };
    if timed_out {
        while conns.try_join_next().is_some() {}
        let cut = conns.len();
        shared
            .metrics
            .connections_closed
            .with_label_values(&["drain_timeout"])
            .inc_by(cut as u64);
        tracing::warn!(addr = %key, cut, timeout = ?drain_timeout, "drain timeout: closing the connections still open");
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}
