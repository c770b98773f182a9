//! One HTTP request through its phases after the connection: the checks before routing
//! (`gate`), the routing phases (`service`), the phases of a matched request from policy to
//! response filters (`backend`), answers without a backend (`answers`), hop-by-hop and
//! forwarded headers (`headers`), session persistence tokens (`session`), and what a request
//! holds until its response body is done (`tracked`), and the request tracer's record
//! (`tapped`).

pub(crate) mod answers;
pub(crate) mod backend;
pub(crate) mod gate;
pub(crate) mod headers;
pub(crate) mod service;
pub(crate) mod session;
pub(crate) mod tapped;
pub(crate) mod tracked;
