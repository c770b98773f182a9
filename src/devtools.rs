//! Tools shipped in the binary for trying and testing edgeplane, outside the pipeline: the echo
//! backends (`edgeplane echo`: HTTP, TLS, gRPC and UDP) and the quickstart (`edgeplane demo`).
//! Nothing of the controller or the proxy depends on them.

pub mod demo;
pub mod echo;
pub mod echo_tls;
pub mod grpc_echo;
