//! The GATEWAY-GRPC scenarios, listed and run: GRPCRoutes to the gRPC echo backends, checked
//! with the upstream suite's semantics. A call's expectation holds after [`CONSECUTIVE`]
//! matching answers in a row: the gRPC code, and for `OK` the fully qualified method the
//! backend saw, its namespace and a pod name starting with the expected backend.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request};
use tonic_prost::ProstCodec;

use crate::expect::{Outcome, CONSECUTIVE, CONSISTENCY_TIMEOUT};
use crate::harness::Env;
use crate::report::GATEWAY_GRPC;
use crate::scenarios::Scenario;
use crate::status::{routes_accepted, routes_accepted_at, wait_status};
use crate::INFRA;

/// The echo service of the conformance backends.
const SERVICE: &str = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho";
/// Pause between attempts that did not match.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// Bound on one call.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A GATEWAY-GRPC scenario: its fixture is added to the gRPC echo backends'
/// (`grpc-backends.yaml`); `$feature` is `None` for core.
macro_rules! grpc {
    ($name:literal, $feature:expr, $file:literal, $run:path) => {
        Scenario {
            name: $name,
            profile: GATEWAY_GRPC,
            feature: $feature,
            manifests: concat!(
                include_str!("manifests/grpc-backends.yaml"),
                include_str!(concat!("manifests/", $file))
            ),
            skip: None,
            run: Some(|env| Box::pin($run(env))),
        }
    };
}

/// The GATEWAY-GRPC scenarios, in upstream order.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        grpc!(
            "GRPCExactMethodMatching",
            None,
            "grpc-exact-method.yaml",
            exact_method_matching
        ),
        grpc!(
            "GRPCRouteHeaderMatching",
            None,
            "grpc-header-matching.yaml",
            header_matching
        ),
        grpc!(
            "GRPCRouteListenerHostnameMatching",
            None,
            "grpc-listener-hostname.yaml",
            listener_hostname_matching
        ),
        grpc!(
            "GRPCRouteNamedRule",
            Some("GRPCRouteNamedRouteRule"),
            "grpc-named-rule.yaml",
            named_rule
        ),
        grpc!("GRPCRouteWeight", None, "grpc-weight.yaml", weight),
    ]
}

/// `EchoRequest` (no fields).
#[derive(Clone, PartialEq, prost::Message)]
struct EchoRequest {}

/// `EchoResponse`: only `assertions` is read.
#[derive(Clone, PartialEq, prost::Message)]
struct EchoResponse {
    #[prost(message, optional, tag = "1")]
    assertions: Option<Assertions>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Assertions {
    #[prost(string, tag = "1")]
    fully_qualified_method: String,
    #[prost(string, tag = "3")]
    authority: String,
    #[prost(message, optional, tag = "4")]
    context: Option<Context>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Context {
    #[prost(string, tag = "1")]
    namespace: String,
    #[prost(string, tag = "4")]
    pod: String,
}

/// One call and what must answer it.
#[derive(Debug, Clone)]
struct Call {
    /// `Echo`, `EchoTwo` or `EchoThree`.
    method: &'static str,
    authority: Option<&'static str>,
    metadata: Vec<(&'static str, &'static str)>,
    /// `Ok(backend)`: answered `OK` by a pod of `backend` in the infra namespace; `Err(code)`:
    /// that code.
    want: Result<&'static str, Code>,
}

impl Call {
    fn echo(method: &'static str, want: Result<&'static str, Code>) -> Self {
        Self {
            method,
            authority: None,
            metadata: Vec::new(),
            want,
        }
    }

    fn authority(mut self, authority: &'static str) -> Self {
        self.authority = Some(authority);
        self
    }

    fn meta(mut self, pairs: &[(&'static str, &'static str)]) -> Self {
        self.metadata = pairs.to_vec();
        self
    }

    fn path(&self) -> String {
        format!("/{SERVICE}/{}", self.method)
    }
}

/// A channel to the Gateway at `ip` (listener port 80) with `authority` as `:authority`.
async fn channel(ip: IpAddr, authority: Option<&str>) -> Result<Channel, String> {
    let addr = crate::harness::socket_addr(ip, 80);
    let mut endpoint = Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| e.to_string())?
        .timeout(CALL_TIMEOUT);
    if let Some(a) = authority {
        let origin = format!("http://{a}").parse().map_err(|e| format!("{e}"))?;
        endpoint = endpoint.origin(origin);
    }
    endpoint
        .connect()
        .await
        .map_err(|e| format!("connect {addr}: {e}"))
}

/// One call: the backend's assertions, or the call's status code.
async fn send(channel: &Channel, call: &Call) -> Result<Result<Assertions, Code>, String> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.map_err(|e| e.to_string())?;
    let mut req = Request::new(EchoRequest {});
    for (name, value) in &call.metadata {
        let key = tonic::metadata::MetadataKey::from_bytes(name.to_ascii_lowercase().as_bytes())
            .map_err(|e| e.to_string())?;
        req.metadata_mut()
            .insert(key, value.parse().map_err(|_| "metadata value")?);
    }
    let path = call.path().parse().map_err(|_| "gRPC path")?;
    let codec = ProstCodec::<EchoRequest, EchoResponse>::default();
    Ok(match grpc.unary(req, path, codec).await {
        Ok(resp) => Ok(resp.into_inner().assertions.unwrap_or_default()),
        Err(status) => Err(status.code()),
    })
}

/// Upstream `compareResponse`.
fn compare(call: &Call, got: &Result<Assertions, Code>) -> Outcome {
    match (&call.want, got) {
        (Ok(backend), Ok(a)) => {
            if a.fully_qualified_method != call.path() {
                return Err(format!("backend saw method {}", a.fully_qualified_method));
            }
            let ctx = a.context.clone().unwrap_or_default();
            if ctx.namespace != INFRA {
                return Err(format!("answered from namespace {:?}", ctx.namespace));
            }
            if !ctx.pod.starts_with(backend) {
                return Err(format!("answered by pod {:?}, want {backend}", ctx.pod));
            }
            Ok(())
        }
        (Ok(_), Err(code)) => Err(format!("status {code:?}, want OK")),
        (Err(want), Ok(a)) => Err(format!(
            "answered OK by {:?}, want {want:?}",
            a.context.as_ref().map(|c| c.pod.as_str())
        )),
        (Err(want), Err(code)) if want == code => Ok(()),
        (Err(want), Err(code)) => Err(format!("status {code:?}, want {want:?}")),
    }
}

/// Calls until [`CONSECUTIVE`] answers in a row match, within [`CONSISTENCY_TIMEOUT`].
async fn check(ip: IpAddr, call: &Call) -> Outcome {
    let deadline = Instant::now() + CONSISTENCY_TIMEOUT;
    let mut streak = 0;
    let mut attempts = 0;
    let mut conn: Option<Channel> = None;
    loop {
        attempts += 1;
        let last = async {
            let ch = match &conn {
                Some(c) => c.clone(),
                None => {
                    let c = channel(ip, call.authority).await?;
                    conn = Some(c.clone());
                    c
                }
            };
            let got = send(&ch, call).await?;
            if got == Err(Code::Internal) {
                conn = None;
            }
            compare(call, &got)
        }
        .await;
        match last {
            Ok(()) => {
                streak += 1;
                if streak == CONSECUTIVE {
                    return Ok(());
                }
                continue;
            }
            Err(e) if Instant::now() > deadline => {
                return Err(format!(
                    "{} on {ip} (authority {:?}, metadata {:?}): {e} (after {attempts} attempts)",
                    call.path(),
                    call.authority,
                    call.metadata
                ));
            }
            Err(_) => streak = 0,
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

async fn check_all(ip: IpAddr, calls: &[Call]) -> Outcome {
    for call in calls {
        check(ip, call).await?;
    }
    Ok(())
}

/// `GatewayAndRoutesMustBeAccepted` for GRPCRoute `route` on Gateway `same-namespace`.
async fn accepted(env: &Env, route: &str) -> Outcome {
    wait_status(env, &format!("GRPCRoute {INFRA}/{route} accepted"), |r| {
        routes_accepted(r, "same-namespace", &[(INFRA, route)])
    })
    .await
}

pub async fn exact_method_matching(env: Arc<Env>) -> Outcome {
    accepted(&env, "by-method").await?;
    let calls = [
        Call::echo("Echo", Ok("grpc-infra-backend-v1")),
        Call::echo("EchoTwo", Ok("grpc-infra-backend-v2")),
        Call::echo("EchoThree", Err(Code::Unimplemented)),
    ];
    check_all(env.gw("same-namespace"), &calls).await
}

pub async fn header_matching(env: Arc<Env>) -> Outcome {
    accepted(&env, "by-header").await?;
    let echo = |want| Call::echo("Echo", want);
    let v1 = Ok("grpc-infra-backend-v1");
    let v2 = Ok("grpc-infra-backend-v2");
    let none = Err(Code::Unimplemented);
    let calls = [
        echo(v1).meta(&[("Version", "one")]),
        echo(v2).meta(&[("Version", "two")]),
        echo(v1).meta(&[("Version", "two"), ("Color", "orange")]),
        echo(v2).meta(&[("Version", "two"), ("Color", "blue")]),
        echo(none).meta(&[("Color", "orange")]),
        echo(none).meta(&[("Some-Other-Header", "one")]),
        echo(v1).meta(&[("Color", "blue")]),
        echo(v1).meta(&[("Color", "green")]),
        echo(v2).meta(&[("Color", "red")]),
        echo(v2).meta(&[("Color", "yellow")]),
        echo(none).meta(&[("Color", "purple")]),
    ];
    check_all(env.gw("same-namespace"), &calls).await
}

pub async fn listener_hostname_matching(env: Arc<Env>) -> Outcome {
    let gw = "grpc-hostnames";
    wait_status(&env, "GRPCRoutes of grpc-hostnames accepted", |r| {
        routes_accepted_at(r, gw, &["listener-1"], &[(INFRA, "on-listener-1")])?;
        routes_accepted_at(r, gw, &["listener-2"], &[(INFRA, "on-listener-2")])?;
        routes_accepted_at(
            r,
            gw,
            &["listener-3", "listener-4"],
            &[(INFRA, "on-wildcards")],
        )
    })
    .await?;
    let at = |authority, want| Call::echo("Echo", want).authority(authority);
    let v3 = Ok("grpc-infra-backend-v3");
    let calls = [
        at("bar.com", Ok("grpc-infra-backend-v1")),
        at("foo.bar.com", Ok("grpc-infra-backend-v2")),
        at("baz.bar.com", v3),
        at("boo.bar.com", v3),
        at("multiple.prefixes.bar.com", v3),
        at("multiple.prefixes.foo.com", v3),
        at("foo.com", Err(Code::Unimplemented)),
        at("no.matching.host", Err(Code::Unimplemented)),
    ];
    check_all(env.gw(gw), &calls).await
}

pub async fn named_rule(env: Arc<Env>) -> Outcome {
    accepted(&env, "named").await?;
    let calls = [
        Call::echo("Echo", Ok("grpc-infra-backend-v1")),
        Call::echo("EchoTwo", Ok("grpc-infra-backend-v2")),
    ];
    check_all(env.gw("same-namespace"), &calls).await
}

/// Upstream: 500 calls, 10 at a time, each backend's share within 5 points of 70/30/0; up to
/// 10 rounds before failing.
pub async fn weight(env: Arc<Env>) -> Outcome {
    accepted(&env, "grpc-split").await?;
    let ip = env.gw("same-namespace");
    let call = Call::echo("Echo", Ok("grpc-infra-backend-"));
    check(ip, &call).await?;
    let ch = channel(ip, None).await?;
    let mut last = String::new();
    for _ in 0..10 {
        match distribution(&ch, &call).await {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
    }
    Err(format!(
        "weighted distribution failed 10 times; last: {last}"
    ))
}

async fn distribution(ch: &Channel, call: &Call) -> Outcome {
    const TOTAL: usize = 500;
    const CONCURRENT: usize = 10;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..TOTAL / CONCURRENT {
        let batch = (0..CONCURRENT).map(|_| send(ch, call));
        for got in futures_util::future::join_all(batch).await {
            let pod = match got? {
                Ok(a) => a.context.unwrap_or_default().pod,
                Err(code) => return Err(format!("status {code:?}, want OK")),
            };
            let backend = ["v1", "v2", "v3"]
                .into_iter()
                .map(|v| format!("grpc-infra-backend-{v}"))
                .find(|b| pod.starts_with(b.as_str()))
                .ok_or_else(|| format!("answered by unexpected pod {pod:?}"))?;
            *seen.entry(backend).or_default() += 1;
        }
    }
    let share = |b: &str| seen.get(b).copied().unwrap_or(0) as f64 / TOTAL as f64;
    let ok = seen.len() == 2
        && (share("grpc-infra-backend-v1") - 0.7).abs() <= 0.05
        && (share("grpc-infra-backend-v2") - 0.3).abs() <= 0.05
        && share("grpc-infra-backend-v3") == 0.0;
    if ok {
        Ok(())
    } else {
        Err(format!("distribution {seen:?}, want 70/30/0 within 5%"))
    }
}
