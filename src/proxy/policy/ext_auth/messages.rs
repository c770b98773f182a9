//! The protobuf messages of Envoy's `envoy.service.auth.v3.Authorization/Check` that external
//! authorization sends and reads, derived with `prost` (no protoc, no generated files): only
//! the fields the proxy fills or reads, under their upstream field numbers, so any authorizer
//! speaking the Envoy API (OPA-Envoy, Authorino, ...) reads and answers them. Unknown fields
//! of an answer are skipped by the decoder, as protobuf requires.

use std::collections::HashMap;

/// `envoy.service.auth.v3.CheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CheckRequest {
    #[prost(message, optional, tag = "1")]
    pub attributes: Option<AttributeContext>,
}

/// `envoy.service.auth.v3.AttributeContext`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeContext {
    #[prost(message, optional, tag = "1")]
    pub source: Option<Peer>,
    #[prost(message, optional, tag = "2")]
    pub destination: Option<Peer>,
    #[prost(message, optional, tag = "4")]
    pub request: Option<AttributeRequest>,
    #[prost(map = "string, string", tag = "10")]
    pub context_extensions: HashMap<String, String>,
}

/// `AttributeContext.Peer`: only its address.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Peer {
    #[prost(message, optional, tag = "1")]
    pub address: Option<Address>,
}

/// `envoy.config.core.v3.Address`: only its socket address.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Address {
    #[prost(message, optional, tag = "1")]
    pub socket_address: Option<SocketAddress>,
}

/// `envoy.config.core.v3.SocketAddress` (protocol TCP, the default 0).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SocketAddress {
    #[prost(string, tag = "2")]
    pub address: String,
    #[prost(uint32, tag = "3")]
    pub port_value: u32,
}

/// `AttributeContext.Request`: the HTTP request (its time is left out).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeRequest {
    #[prost(message, optional, tag = "2")]
    pub http: Option<HttpRequest>,
}

/// `AttributeContext.HttpRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HttpRequest {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub method: String,
    /// Lower-case names; repeated headers joined with `,`.
    #[prost(map = "string, string", tag = "3")]
    pub headers: HashMap<String, String>,
    /// Path and query, as Envoy sends it.
    #[prost(string, tag = "4")]
    pub path: String,
    #[prost(string, tag = "5")]
    pub host: String,
    #[prost(string, tag = "6")]
    pub scheme: String,
    #[prost(string, tag = "7")]
    pub query: String,
    /// The request body's length when known, else -1.
    #[prost(int64, tag = "9")]
    pub size: i64,
    /// `HTTP/1.1`, `HTTP/2`.
    #[prost(string, tag = "10")]
    pub protocol: String,
    /// The forwarded body when it is UTF-8 (Envoy's `body`).
    #[prost(string, tag = "11")]
    pub body: String,
    /// The forwarded body as bytes (Envoy's `raw_body`, with `pack_as_bytes`).
    #[prost(bytes = "vec", tag = "12")]
    pub raw_body: Vec<u8>,
}

/// `envoy.service.auth.v3.CheckResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CheckResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<RpcStatus>,
    #[prost(message, optional, tag = "2")]
    pub denied_response: Option<DeniedHttpResponse>,
    #[prost(message, optional, tag = "3")]
    pub ok_response: Option<OkHttpResponse>,
}

/// `google.rpc.Status`: code 0 (`OK`) allows the request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

/// `DeniedHttpResponse`: what the client gets.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeniedHttpResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<HttpStatus>,
    #[prost(message, repeated, tag = "2")]
    pub headers: Vec<HeaderValueOption>,
    #[prost(string, tag = "3")]
    pub body: String,
}

/// `envoy.type.v3.HttpStatus` (its enum read as the number it is).
#[derive(Clone, PartialEq, prost::Message)]
pub struct HttpStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
}

/// `OkHttpResponse`: headers set on (or removed from) the upstream request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OkHttpResponse {
    #[prost(message, repeated, tag = "2")]
    pub headers: Vec<HeaderValueOption>,
    #[prost(string, repeated, tag = "5")]
    pub headers_to_remove: Vec<String>,
}

/// `envoy.config.core.v3.HeaderValueOption`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HeaderValueOption {
    #[prost(message, optional, tag = "1")]
    pub header: Option<HeaderValue>,
    /// `google.protobuf.BoolValue`: in an `OkHttpResponse`, unset means overwrite.
    #[prost(message, optional, tag = "2")]
    pub append: Option<BoolValue>,
}

/// `envoy.config.core.v3.HeaderValue`: `raw_value` wins over `value` when set.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HeaderValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
    #[prost(bytes = "vec", tag = "3")]
    pub raw_value: Vec<u8>,
}

/// `google.protobuf.BoolValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BoolValue {
    #[prost(bool, tag = "1")]
    pub value: bool,
}

impl HeaderValue {
    /// The value's bytes: `raw_value` when set, else `value`.
    pub fn bytes(&self) -> &[u8] {
        if self.raw_value.is_empty() {
            self.value.as_bytes()
        } else {
            &self.raw_value
        }
    }
}
