//! Keeps the runtime's timer from waking its own driver on every request. tokio's time driver
//! writes to the I/O driver's eventfd whenever a timer is registered with a deadline earlier
//! than the one the driver promised to wake at when it last parked. A keep-alive connection
//! registers a new header-read timer (the HTTP/1.1 server's header read timeout, 10 s by
//! default) after every response; with no earlier timer in the wheel, each of those cost a
//! `write(2)` to the eventfd plus a spurious `epoll_wait` wake-up: one system call per proxied
//! request. A tick every [`HORIZON`] keeps the driver's promised wake-up at most that far
//! away, so timers set further out than it (every request timeout) are added without waking
//! anything.

use std::sync::Weak;
use std::time::Duration;

/// How far ahead the driver always has a wake-up: shorter than every request-scoped timeout
/// (the shortest default, the header read timeout, is 10 s), long enough to cost nothing.
pub const HORIZON: Duration = Duration::from_millis(500);

/// Ticks every [`HORIZON`] on `runtime` (else the current one) while `owner` is alive; does
/// nothing outside a runtime. Each worker's runtime has a timer of its own and needs its tick.
pub fn start<T: Send + Sync + 'static>(runtime: Option<tokio::runtime::Handle>, owner: Weak<T>) {
    let Some(runtime) = runtime.or_else(|| tokio::runtime::Handle::try_current().ok()) else {
        return;
    };
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(HORIZON);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while owner.strong_count() > 0 {
            tick.tick().await;
        }
    });
}
