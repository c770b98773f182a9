//! `edgeplane trace`: waits for the next requests matching a filter at a running edgeplane
//! (its dashboard's `/api/trace`) and prints the way each one took: the listener, the rules
//! tried and why they did not match, the rule that did with its filters and policies, the
//! backends and the endpoint picked, the timings and the status.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

use super::flags::{duration_text, parse_duration};
use super::write_stdout;
use crate::admin::DEFAULT_DASHBOARD_ADDR;
use crate::proxy::TapRecord;

/// Flags of `edgeplane trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// The dashboard address of the running edgeplane (its --dashboard-addr).
    #[arg(long, default_value = DEFAULT_DASHBOARD_ADDR)]
    pub dashboard_addr: SocketAddr,
    /// Only requests for this host (without port, any case).
    #[arg(long)]
    pub host: Option<String>,
    /// Only requests whose path starts with this.
    #[arg(long, value_name = "PREFIX")]
    pub path: Option<String>,
    /// Only requests carrying this header with this value (`Name=value`; repeatable).
    #[arg(long, value_name = "NAME=VALUE")]
    pub header: Vec<String>,
    /// Requests to wait for (1 to 100); exits after the last.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub count: u16,
    /// How long to wait for them (at most 600s); exit 1 when fewer came.
    #[arg(long, default_value = duration_text(Duration::from_secs(60)), value_parser = parse_duration)]
    pub timeout: Duration,
    /// Print each request's record as one JSON line instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Prints the way of the next `--count` matching requests; exit 1 when fewer came in time or
/// the dashboard cannot be reached.
pub async fn trace(args: TraceArgs) -> anyhow::Result<ExitCode> {
    let query = query(&args)?;
    let addr = args.dashboard_addr;
    let path = format!("/api/trace?{query}");
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| {
            format!(
            "cannot reach edgeplane's dashboard at {addr} (is edgeplane running there? pass its \
             --dashboard-addr; in a cluster, kubectl port-forward first)"
        )
        })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .with_context(|| format!("HTTP to {addr}"))?;
    tokio::spawn(conn);
    let req = http::Request::get(&path)
        .header(http::header::HOST, addr.to_string())
        .body(Empty::<Bytes>::new())?;
    let resp = sender
        .send_request(req)
        .await
        .with_context(|| format!("GET http://{addr}{path}"))?;
    if !resp.status().is_success() {
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        bail!(
            "GET http://{addr}{path}: {status}: {}",
            String::from_utf8_lossy(&body).trim()
        );
    }
    eprintln!(
        "waiting for {} request(s) (at most {}s) ...",
        args.count,
        args.timeout.as_secs()
    );
    let mut body = resp.into_body();
    let mut pending = Vec::new();
    let mut seen = 0u16;
    // The server ends the stream after `count` records or its wait; this bounds a stalled one.
    let deadline = tokio::time::Instant::now() + args.timeout + Duration::from_secs(5);
    while seen < args.count {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(frame)) => frame.with_context(|| format!("reading from {addr}"))?,
            Ok(None) | Err(_) => break,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        pending.extend_from_slice(&data);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let record: TapRecord = serde_json::from_slice(&line)
                .with_context(|| format!("{addr} sent a trace record that does not parse"))?;
            seen += 1;
            let text = if args.json {
                let mut s = String::from_utf8_lossy(&line).into_owned();
                if !s.ends_with('\n') {
                    s.push('\n');
                }
                s
            } else {
                render(&record)
            };
            write_stdout(&text)?;
        }
    }
    if seen < args.count {
        eprintln!(
            "edgeplane trace: {seen} of {} request(s) seen within {}s",
            args.count,
            args.timeout.as_secs()
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The query string of `/api/trace` for these flags.
fn query(args: &TraceArgs) -> anyhow::Result<String> {
    let wait = args
        .timeout
        .as_secs()
        .clamp(1, crate::dashboard::trace::MAX_WAIT_SECS);
    let mut q = form_urlencoded::Serializer::new(String::new());
    if let Some(host) = &args.host {
        q.append_pair("host", host);
    }
    if let Some(path) = &args.path {
        q.append_pair("path", path);
    }
    for h in &args.header {
        let Some((name, value)) = h.split_once('=') else {
            bail!("--header {h:?}: expected NAME=VALUE");
        };
        q.append_pair("header", &format!("{name}:{value}"));
    }
    q.append_pair("count", &args.count.to_string());
    q.append_pair("wait", &wait.to_string());
    Ok(q.finish())
}

/// One record as text: a line for the request, then one per step of its way.
pub fn render(r: &TapRecord) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {}{} {} from {} -> {}",
        r.method, r.host, r.path, r.protocol, r.client, r.status
    );
    let _ = writeln!(
        out,
        "  time       {}  request id {}  trace {}",
        r.time, r.request_id, r.trace_id
    );
    let _ = writeln!(
        out,
        "  listener   {} ({})",
        r.listener,
        r.gateways.join(", ")
    );
    for c in &r.considered {
        let (what, why) = match &c.failed {
            Some(why) => ("tried  ", format!(": {why}")),
            None => ("matched", String::new()),
        };
        let _ = writeln!(
            out,
            "  {what}    {} rule {} (match {}) on host {}{why}",
            c.route, c.rule, c.match_index, c.hostname
        );
    }
    if r.considered.iter().all(|c| c.failed.is_some()) {
        let answer = match &r.route {
            Some(route) => format!("answered by {route}"),
            None => "no rule matched".to_owned(),
        };
        let _ = writeln!(out, "  route      {answer}");
    }
    let set = |v: &serde_json::Value| !v.is_null() && v.as_object().is_none_or(|o| !o.is_empty());
    if set(&r.filters) {
        let _ = writeln!(out, "  filters    {}", r.filters);
    }
    if set(&r.listener_policy) {
        let _ = writeln!(
            out,
            "  policy     {} (Gateway and listener)",
            r.listener_policy
        );
    }
    for b in &r.backends {
        let _ = write!(
            out,
            "  backend    {} weight {}: {} ready, {} terminating endpoint(s), balance {}",
            b.backend, b.weight, b.ready_endpoints, b.terminating_endpoints, b.balance
        );
        if !b.ejected_endpoints.is_empty() {
            let ejected: Vec<String> = b.ejected_endpoints.iter().map(|a| a.to_string()).collect();
            let _ = write!(out, ", ejected {}", ejected.join(" "));
        }
        match &b.picked {
            Some(how) => {
                let _ = writeln!(out, "; picked {how}");
            }
            None => out.push('\n'),
        }
    }
    for (i, a) in r.attempts.iter().enumerate() {
        let _ = write!(
            out,
            "  attempt {}  {} ({}): {} in {} us",
            i + 1,
            a.endpoint,
            a.picked,
            a.ended,
            a.took_us
        );
        match &a.next {
            Some(next) => {
                let _ = writeln!(out, "; {next}");
            }
            None => out.push('\n'),
        }
    }
    if let Some(endpoint) = r.endpoint {
        let _ = writeln!(out, "  endpoint   {endpoint}");
    }
    if let Some(error) = &r.error {
        let _ = writeln!(out, "  error      {error}");
    }
    let _ = writeln!(
        out,
        "  timings    routing {} us, upstream {} us, total {} us",
        r.routing_us, r.upstream_us, r.total_us
    );
    out
}
