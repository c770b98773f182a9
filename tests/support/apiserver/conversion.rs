//! Conversion of custom resources between their served versions, as the API server does it for
//! a CRD whose `spec.conversion.strategy` is `Webhook`: objects not at the wanted version go in
//! one `ConversionReview` (apiextensions.k8s.io/v1) POSTed over HTTPS to the CRD's
//! `clientConfig` (a Service, resolved through the test's map of Services to loopback
//! addresses, or a `url`), the server's certificate verified against the CRD's `caBundle`.
//! Resources without a CRD object, or whose CRD says `None`, are only relabelled. A failed
//! conversion is the API server's answer: 500 `InternalError` with the webhook's message.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};

use super::error::ApiError;
use super::kinds::Kind;
use super::object::as_version;
use super::store::Store;
use super::Shared;

/// How long one webhook call may take (the API server's default is 30 s).
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// The CRD object of `resource` (`plural.group`), if one is stored.
fn crd_of(store: &Store, resource: &str) -> Option<Value> {
    let crds = store
        .kinds
        .lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")?;
    store.get(&crds, "", resource).ok()
}

/// The version the objects of `kind` are stored at: the CRD's `storage: true` version when a
/// CRD object exists and that version is served, else `kind` itself.
pub fn storage_kind(store: &Store, kind: &Kind) -> Kind {
    let storage = crd_of(store, &kind.resource()).and_then(|crd| {
        crd.pointer("/spec/versions")?
            .as_array()?
            .iter()
            .find(|v| v["storage"] == true)?["name"]
            .as_str()
            .map(str::to_string)
    });
    storage
        .and_then(|v| store.kinds.lookup(&kind.group, &v, &kind.plural))
        .unwrap_or_else(|| kind.clone())
}

/// Where a CRD's webhook is and what its certificate must chain to.
struct Webhook {
    addr: SocketAddr,
    server_name: String,
    path: String,
    ca_bundle: Vec<u8>,
}

fn internal(kind: &Kind, from: &str, message: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        500,
        "InternalError",
        format!(
            "Internal error occurred: conversion webhook for {from}, Kind={} failed: {message}",
            kind.kind
        ),
    )
}

/// The webhook of `kind`'s CRD; `Ok(None)` when objects are only relabelled.
fn webhook_of(shared: &Shared, kind: &Kind, from: &str) -> Result<Option<Webhook>, ApiError> {
    let Some(crd) = crd_of(&shared.store(), &kind.resource()) else {
        return Ok(None);
    };
    let conversion = &crd["spec"]["conversion"];
    if conversion["strategy"] != "Webhook" {
        return Ok(None);
    }
    let config = &conversion["webhook"]["clientConfig"];
    let ca_bundle = match config.get("caBundle") {
        Some(b) if !b.is_null() => {
            serde_json::from_value::<k8s_openapi::ByteString>(b.clone())
                .map_err(|e| internal(kind, from, format!("caBundle: {e}")))?
                .0
        }
        _ => Vec::new(),
    };
    if let Some(service) = config.get("service").filter(|s| s.is_object()) {
        let ns = service["namespace"].as_str().unwrap_or("");
        let name = service["name"].as_str().unwrap_or("");
        let addr = shared
            .service_address(ns, name)
            .ok_or_else(|| internal(kind, from, format!("service \"{ns}/{name}\" not found")))?;
        return Ok(Some(Webhook {
            addr,
            server_name: format!("{name}.{ns}.svc"),
            path: service["path"].as_str().unwrap_or("/").to_string(),
            ca_bundle,
        }));
    }
    let url = config["url"]
        .as_str()
        .ok_or_else(|| internal(kind, from, "clientConfig has neither service nor url"))?;
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| internal(kind, from, format!("url {url:?}: {e}")))?;
    let host = uri
        .host()
        .unwrap_or("")
        .trim_matches(['[', ']'])
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let ip: std::net::IpAddr = if host == "localhost" {
        std::net::Ipv4Addr::LOCALHOST.into()
    } else {
        host.parse()
            .map_err(|_| internal(kind, from, format!("url host {host:?} is not an address")))?
    };
    Ok(Some(Webhook {
        addr: SocketAddr::new(ip, port),
        server_name: host,
        path: uri
            .path_and_query()
            .map_or_else(|| "/".to_string(), |p| p.to_string()),
        ca_bundle,
    }))
}

/// `objects` at `to`'s version: those already there are kept, the others converted (by the
/// CRD's webhook when it has one). Order is kept.
pub async fn convert(
    shared: &Shared,
    objects: Vec<Value>,
    to: &Kind,
) -> Result<Vec<Value>, ApiError> {
    let desired = to.api_version();
    let pending: Vec<usize> = (0..objects.len())
        .filter(|&i| objects[i]["apiVersion"].as_str() != Some(desired.as_str()))
        .collect();
    if pending.is_empty() {
        return Ok(objects.iter().map(|o| as_version(o, to)).collect());
    }
    let from = objects[pending[0]]["apiVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let Some(hook) = webhook_of(shared, to, &from)? else {
        return Ok(objects.iter().map(|o| as_version(o, to)).collect());
    };
    let uid = format!(
        "{:08x}-{:04x}-4000-8000-{:012x}",
        fastrand::u32(..),
        fastrand::u16(..),
        fastrand::u64(..) & 0xffff_ffff_ffff
    );
    let sent: Vec<Value> = pending.iter().map(|&i| objects[i].clone()).collect();
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": sent},
    });
    shared.count_conversion();
    let answer = tokio::time::timeout(WEBHOOK_TIMEOUT, post(&hook, &review))
        .await
        .map_err(|_| internal(to, &from, "the webhook did not answer in time"))?
        .map_err(|e| internal(to, &from, e))?;
    let response = &answer["response"];
    if response["uid"].as_str() != Some(uid.as_str()) {
        return Err(internal(
            to,
            &from,
            "expected response.uid to match the request",
        ));
    }
    if response["result"]["status"] != "Success" {
        let message = response["result"]["message"].as_str().unwrap_or("");
        return Err(internal(to, &from, message));
    }
    let converted = response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if converted.len() != sent.len() {
        let msg = format!(
            "returned {} objects, expected {}",
            converted.len(),
            sent.len()
        );
        return Err(internal(to, &from, msg));
    }
    let mut out = objects;
    for (&i, new) in pending.iter().zip(converted) {
        if new["apiVersion"].as_str() != Some(desired.as_str()) {
            let msg = format!(
                "invalid apiVersion {} in converted object",
                new["apiVersion"]
            );
            return Err(internal(to, &from, msg));
        }
        for field in ["name", "namespace", "uid"] {
            if new["metadata"][field] != out[i]["metadata"][field] {
                let msg = format!("metadata.{field} changed in the converted object");
                return Err(internal(to, &from, msg));
            }
        }
        out[i] = as_version(&new, to);
    }
    Ok(out)
}

/// [`convert`] of one object.
pub async fn convert_one(shared: &Shared, object: Value, to: &Kind) -> Result<Value, ApiError> {
    let mut out = convert(shared, vec![object], to).await?;
    Ok(out.pop().unwrap_or(Value::Null))
}

/// One ConversionReview POSTed to the webhook over TLS; the parsed answer.
async fn post(hook: &Webhook, review: &Value) -> Result<Value, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&hook.ca_bundle) {
        let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
        roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(hook.server_name.clone()).map_err(|e| e.to_string())?;
    let tcp = tokio::net::TcpStream::connect(hook.addr)
        .await
        .map_err(|e| format!("Post \"https://{}{}\": {e}", hook.server_name, hook.path))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| {
            format!(
                "Post \"https://{}{}\": tls: {e}",
                hook.server_name, hook.path
            )
        })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let request = hyper::Request::post(hook.path.as_str())
        .header(hyper::header::HOST, hook.server_name.as_str())
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(review.to_string())))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if !status.is_success() {
        return Err(format!(
            "the server answered {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    serde_json::from_slice(&body).map_err(|e| format!("invalid ConversionReview: {e}"))
}
