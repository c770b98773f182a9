//! One HTTP request through its routing phases: the checks before routing (`gate`), the
//! per-request phases (`service`), answers without a backend (`answers`), hop-by-hop and
//! forwarded headers (`headers`), session persistence tokens (`session`), what a
//! request holds until its response body is done (`tracked`).

pub(crate) mod answers;
pub(crate) mod gate;
pub(crate) mod headers;
pub(crate) mod service;
pub(crate) mod session;
pub(crate) mod tracked;
