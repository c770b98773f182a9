//! What happens on an accepted stream before it is served: TLS termination with the
//! certificate chosen by SNI (`tls`) and the HTTP/1 or HTTP/2 preface (`detect`). Shared by the
//! HTTP connections (`inbound`) and the L4 streams (`l4`).

pub(crate) mod detect;
pub(crate) mod tls;
