//! The backend side of a request: the exchange and its retries (`forward`; the pure retry
//! decision, `decide`; budgets, kept bodies and backoff, `retry`), endpoint choice and health
//! (`balance`), error pages replacing a backend's error answer (`error_pages`), pooled clients (`client`, `pool`, `h1`), TLS to backends (`tls`), request
//! mirroring (`mirror`), WebSocket tunnels (`upgrade`), and the account of what the phase did
//! (`trail`).

pub(crate) mod balance;
pub(crate) mod client;
pub(crate) mod decide;
pub(crate) mod error_pages;
pub(crate) mod forward;
pub(crate) mod h1;
pub(crate) mod mirror;
pub(crate) mod pool;
pub(crate) mod retry;
pub(crate) mod tls;
pub(crate) mod trail;
pub(crate) mod upgrade;
