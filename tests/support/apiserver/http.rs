//! HTTP routing of the emulator: parses API paths into (kind, namespace, name, subresource),
//! maps methods to verbs, counts writes, applies injected failures and answers errors as
//! `Status` objects.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use super::conversion::{convert, convert_one, storage_kind};
use super::object;
use super::patch::{self, Patch, PatchType};
use super::selectors::{parse_query, Selectors};
use super::store::{ApiError, Store, Target};
use super::table;
use super::validation::{self, Mode};
use super::{discovery, watch, Kind, RequestRecord, Shared};

/// Response body: a full JSON document or a watch stream.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Serves one HTTP/1.1 connection until the client closes it.
pub async fn serve_connection(stream: tokio::net::TcpStream, shared: Arc<Shared>) {
    let io = hyper_util::rt::TokioIo::new(stream);
    let service = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(handle(shared, req).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(io, service)
        .await;
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let path_and_query = req
        .uri()
        .path_and_query()
        .map_or_else(|| path.clone(), |p| p.to_string());
    let response = match shared.fault(&method, &path) {
        Some(code) => error(&ApiError::new(code, reason_of(code), "injected failure")),
        None => route(&shared, req).await.unwrap_or_else(|e| error(&e)),
    };
    shared.log_request(RequestRecord {
        method,
        path_and_query,
        status: response.status().as_u16(),
    });
    response
}

fn reason_of(code: u16) -> &'static str {
    match code {
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

/// A JSON response.
pub fn json_response(code: u16, value: &Value) -> Response<Body> {
    let body = Full::new(Bytes::from(value.to_string())).boxed_unsync();
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn error(e: &ApiError) -> Response<Body> {
    json_response(e.code, &e.to_status())
}

fn not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

async fn route(shared: &Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let path = req.uri().path().to_string();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    if req.method() == Method::GET {
        let store = shared.store();
        let doc = match segs.as_slice() {
            ["version"] => Some(discovery::version()),
            ["healthz" | "readyz" | "livez"] => return Ok(json_response(200, &json!("ok"))),
            ["api"] => Some(discovery::core_versions(&store, &accept)),
            ["apis"] => Some(discovery::groups(&store, &accept)),
            ["api", "v1"] => discovery::resources(&store, "", "v1"),
            ["apis", group] => discovery::group(&store, group),
            ["apis", group, version] => discovery::resources(&store, group, version),
            _ => None,
        };
        match doc {
            Some((content_type, doc)) => {
                let mut resp = json_response(200, &doc);
                if let Ok(ct) = hyper::header::HeaderValue::from_str(&content_type) {
                    resp.headers_mut().insert(hyper::header::CONTENT_TYPE, ct);
                }
                return Ok(resp);
            }
            None if segs.len() <= 3 && !matches!(segs.as_slice(), ["api", "v1", _]) => {
                return Err(not_found())
            }
            None => {}
        }
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(not_found()),
    };
    let addr = parse_resource(shared, group, version, rest)?;
    resource(shared, addr, req).await
}

/// An API path resolved against the kind table.
struct Address {
    kind: Kind,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn parse_resource(
    shared: &Shared,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Address, ApiError> {
    let store = shared.store();
    let mut rest = rest;
    let mut namespace = None;
    if rest.len() >= 3 && rest[0] == "namespaces" {
        if let Some(k) = store.kinds.lookup(group, version, rest[2]) {
            if k.namespaced {
                namespace = Some(rest[1].to_string());
                rest = &rest[2..];
            }
        }
    }
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(name.to_string()), None),
        [plural, name, sub] => (*plural, Some(name.to_string()), Some(sub.to_string())),
        _ => return Err(not_found()),
    };
    let kind = store
        .kinds
        .lookup(group, version, plural)
        .ok_or_else(not_found)?;
    let misplaced = if kind.namespaced {
        namespace.is_none() && name.is_some()
    } else {
        namespace.is_some()
    };
    let bad_sub = subresource
        .as_deref()
        .is_some_and(|s| s != "status" || !kind.status);
    if misplaced || bad_sub {
        return Err(not_found());
    }
    Ok(Address {
        kind,
        namespace,
        name,
        subresource,
    })
}

async fn resource(
    shared: &Arc<Shared>,
    addr: Address,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let query = parse_query(req.uri().query().unwrap_or(""));
    let param = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let field_validation = || Mode::from_query(param("fieldValidation"));
    let method = req.method().clone();
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let partial = accept.contains("as=PartialObjectMetadata");
    let as_table = method == Method::GET && table::wanted(&accept);
    let respond = |code: u16, v: &Value| {
        if partial {
            json_response(code, &object::metadata_only(v))
        } else {
            json_response(code, v)
        }
    };
    let content_type = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(format!("reading body: {e}")))?
        .to_bytes();
    let kind = addr.kind;
    let ns = addr.namespace.clone().unwrap_or_default();
    let sub = addr.subresource.clone().unwrap_or_default();
    let target = if sub == "status" {
        Target::Status
    } else {
        Target::Main
    };
    let Some(name) = addr.name else {
        let selectors = Selectors::parse(
            param("labelSelector").unwrap_or(""),
            param("fieldSelector").unwrap_or(""),
        )?;
        return match method {
            Method::GET if matches!(param("watch"), Some("1" | "true")) => {
                if as_table {
                    return Err(not_acceptable());
                }
                let params = watch::Params::from_query(&param)?;
                Ok(watch::serve(
                    shared.clone(),
                    kind,
                    addr.namespace,
                    selectors,
                    params,
                    partial,
                ))
            }
            Method::GET => {
                let (rv, items) = list(shared, &kind, addr.namespace.as_deref(), &selectors);
                let items = if partial {
                    items
                } else {
                    convert(shared, items, &kind).await?
                };
                if as_table {
                    let doc = table::render(&shared.store(), &kind, &items, Some(rv));
                    return Ok(json_response(200, &doc));
                }
                Ok(respond(200, &list_doc(&kind, rv, items)))
            }
            Method::POST if kind.namespaced && addr.namespace.is_none() => {
                Err(method_not_allowed())
            }
            Method::POST => {
                shared.count_write(&kind, "create", "");
                let mut obj = at_version(parse_json(&body)?, &kind);
                let warnings = validation::check(&mut obj, &kind, field_validation()?, None)?;
                let stored = storage_kind(&shared.store(), &kind);
                let obj = convert_one(shared, obj, &stored).await?;
                let created = shared.write(|s| s.create(&stored, &ns, obj))?;
                let created = convert_one(shared, created, &kind).await?;
                Ok(with_warnings(respond(201, &created), &warnings))
            }
            Method::DELETE => {
                shared.count_write(&kind, "deletecollection", "");
                let stored = storage_kind(&shared.store(), &kind);
                let items = shared.write(|s| {
                    let victims: Vec<Value> = s
                        .list(&stored, addr.namespace.as_deref())
                        .into_iter()
                        .filter(|o| selectors.matches(o))
                        .collect();
                    victims
                        .iter()
                        .filter_map(|o| {
                            let o_ns = o
                                .pointer("/metadata/namespace")
                                .and_then(Value::as_str)
                                .unwrap_or("");
                            let o_name = o
                                .pointer("/metadata/name")
                                .and_then(Value::as_str)
                                .unwrap_or("");
                            s.delete(&stored, o_ns, o_name, &Value::Null).ok()
                        })
                        .collect::<Vec<_>>()
                });
                let items = convert(shared, items, &kind).await?;
                let rv = shared.store().current_rv();
                Ok(respond(200, &list_doc(&kind, rv, items)))
            }
            _ => Err(method_not_allowed()),
        };
    };
    let stored = storage_kind(&shared.store(), &kind);
    match method {
        Method::GET => {
            let obj = shared.store().get(&stored, &ns, &name)?;
            let obj = if partial {
                obj
            } else {
                convert_one(shared, obj, &kind).await?
            };
            if as_table {
                let doc = table::render(&shared.store(), &kind, &[obj], None);
                return Ok(json_response(200, &doc));
            }
            Ok(respond(200, &obj))
        }
        Method::PUT => {
            shared.count_write(&kind, "update", &sub);
            let mut obj = at_version(parse_json(&body)?, &kind);
            let warnings = validation::check(&mut obj, &kind, field_validation()?, None)?;
            let obj = convert_one(shared, obj, &stored).await?;
            let updated = shared.write(|s| s.update(&stored, &ns, &name, obj, target))?;
            let updated = convert_one(shared, updated, &kind).await?;
            Ok(with_warnings(respond(200, &updated), &warnings))
        }
        Method::PATCH => {
            let ptype = PatchType::from_content_type(&content_type).ok_or_else(|| {
                ApiError::new(
                    415,
                    "UnsupportedMediaType",
                    format!("unsupported patch type {content_type:?}"),
                )
            })?;
            shared.count_write(&kind, ptype.verb(), &sub);
            if ptype == PatchType::Apply && param("fieldManager").is_none_or(str::is_empty) {
                let msg =
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: \
                           is required for apply patch";
                return Err(ApiError::invalid(msg));
            }
            let mut body = patch::parse(ptype, &body)?;
            let warnings = match ptype {
                PatchType::Json => Vec::new(),
                PatchType::Apply => {
                    let who = Some((ns.as_str(), name.as_str()));
                    validation::check(&mut body, &kind, field_validation()?, who)?
                }
                PatchType::Merge | PatchType::Strategic => {
                    validation::check(&mut body, &kind, field_validation()?, None)?
                }
            };
            let patch = Patch {
                ptype,
                body,
                manager: param("fieldManager").unwrap_or("").to_string(),
            };
            let (patched, created) = if stored == kind {
                shared.write(|s| {
                    let existed = s.get(&kind, &ns, &name).is_ok();
                    s.patch(&kind, &ns, &name, patch, target)
                        .map(|o| (o, !existed))
                })?
            } else {
                patch_converted(shared, &kind, &stored, (&ns, &name), patch, target).await?
            };
            let patched = convert_one(shared, patched, &kind).await?;
            let code = if created { 201 } else { 200 };
            Ok(with_warnings(respond(code, &patched), &warnings))
        }
        Method::DELETE if sub.is_empty() => {
            shared.count_write(&kind, "delete", "");
            let options = if body.is_empty() {
                Value::Null
            } else {
                parse_json(&body)?
            };
            let deleted = shared.write(|s| s.delete(&stored, &ns, &name, &options))?;
            Ok(respond(200, &convert_one(shared, deleted, &kind).await?))
        }
        _ => Err(method_not_allowed()),
    }
}

/// `resp` with one `Warning` header per warning (`299 - "<text>"`), as the API server answers
/// dropped unknown fields under `fieldValidation=Warn`.
fn with_warnings(mut resp: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        let value = format!("299 - {}", serde_json::Value::String(w.clone()));
        if let Ok(v) = hyper::header::HeaderValue::from_str(&value) {
            resp.headers_mut().append(hyper::header::WARNING, v);
        }
    }
    resp
}

/// A body without `apiVersion` is read as the version of the URL.
fn at_version(mut obj: Value, kind: &Kind) -> Value {
    if let Some(o) = obj.as_object_mut() {
        o.entry("apiVersion")
            .or_insert_with(|| Value::String(kind.api_version()));
    }
    obj
}

/// A PATCH at a version other than the storage one, as the API server does it: the stored
/// object converted to the request's version, patched there, converted back and written if
/// nobody wrote in between (else again, a few times). Server-side apply converts the applied
/// object instead and applies it at the storage version.
async fn patch_converted(
    shared: &Arc<Shared>,
    kind: &Kind,
    stored: &Kind,
    (ns, name): (&str, &str),
    patch: Patch,
    target: Target,
) -> Result<(Value, bool), ApiError> {
    if patch.ptype == PatchType::Apply {
        let body = convert_one(shared, at_version(patch.body, kind), stored).await?;
        let patch = Patch { body, ..patch };
        return shared.write(|s| {
            let existed = s.get(stored, ns, name).is_ok();
            s.patch(stored, ns, name, patch, target)
                .map(|o| (o, !existed))
        });
    }
    let mut attempts = 0;
    loop {
        attempts += 1;
        let current = shared.store().get(stored, ns, name)?;
        let old_rv = object::rv_of(&current).map(str::to_string);
        let mut doc = convert_one(shared, current, kind).await?;
        patch::apply(&mut doc, patch.ptype, &patch.body)?;
        if object::rv_of(&doc).map(str::to_string) != old_rv {
            return Err(ApiError::conflict(kind, name));
        }
        let new = convert_one(shared, doc, stored).await?;
        match shared.write(|s| s.update(stored, ns, name, new, target)) {
            Err(e) if e.code == 409 && attempts < 5 => continue,
            other => return other.map(|o| (o, false)),
        }
    }
}

/// The stored objects of `kind` (at the storage version) the selectors match, and the
/// resourceVersion of the list.
fn list(
    shared: &Shared,
    kind: &Kind,
    ns: Option<&str>,
    selectors: &Selectors,
) -> (u64, Vec<Value>) {
    let store: std::sync::MutexGuard<'_, Store> = shared.store();
    let stored = storage_kind(&store, kind);
    let items: Vec<Value> = store
        .list(&stored, ns)
        .into_iter()
        .filter(|o| selectors.matches(o))
        .collect();
    (store.current_rv(), items)
}

fn list_doc(kind: &Kind, rv: u64, items: Vec<Value>) -> Value {
    json!({
        "kind": format!("{}List", kind.kind),
        "apiVersion": kind.api_version(),
        "metadata": {"resourceVersion": rv.to_string()},
        "items": items,
    })
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

/// A Table rendering of a watch stream, which the emulator does not produce.
fn not_acceptable() -> ApiError {
    ApiError::new(
        406,
        "NotAcceptable",
        "the emulator renders gets and lists as Table, not watches",
    )
}

fn method_not_allowed() -> ApiError {
    ApiError::new(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
}
