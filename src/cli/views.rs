//! `edgeplane status` and `edgeplane routes`: views of a running edgeplane, read from its
//! dashboard server (`/debug/status`, `/api/routes`) over plain HTTP/1.1 with hyper's client.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::{Args, ValueEnum};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::write_stdout;
use crate::admin::DEFAULT_DASHBOARD_ADDR;
use crate::dashboard::conditions::{summarize, Summary};
use crate::dashboard::tree::{RouteTree, TreeBackend};

/// Time a view has to connect and get its answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Flags of `edgeplane status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The dashboard address of the running edgeplane (its --dashboard-addr).
    #[arg(long, default_value = DEFAULT_DASHBOARD_ADDR)]
    pub dashboard_addr: SocketAddr,
    /// Output: a table (default), `wide` (with messages), or the entries of /debug/status as
    /// `json` or `yaml`.
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<StatusOutput>,
}

/// The formats of `edgeplane status -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusOutput {
    Wide,
    Yaml,
    Json,
}

/// Flags of `edgeplane routes`.
#[derive(Debug, Args)]
pub struct RoutesArgs {
    /// The dashboard address of the running edgeplane (its --dashboard-addr).
    #[arg(long, default_value = DEFAULT_DASHBOARD_ADDR)]
    pub dashboard_addr: SocketAddr,
}

/// Prints every object's conditions; exit 1 when the dashboard cannot be read.
pub async fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let body = get(args.dashboard_addr, "/debug/status").await?;
    let entries: Vec<Value> = serde_json::from_slice(&body).with_context(|| {
        format!(
            "{}/debug/status is not a list of status entries",
            args.dashboard_addr
        )
    })?;
    let text = match args.output {
        Some(StatusOutput::Json) => {
            let mut t = serde_json::to_string_pretty(&entries)?;
            t.push('\n');
            t
        }
        Some(StatusOutput::Yaml) => crate::yaml_out::to_string(&entries)?,
        wide => {
            let now = jiff::Timestamp::now();
            let rows: Vec<Summary> = entries.iter().map(summarize).collect();
            status_table(&rows, wide == Some(StatusOutput::Wide), now)
        }
    };
    write_stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The `kubectl get`-like table of `rows`, ages against `now`.
pub fn status_table(rows: &[Summary], wide: bool, now: jiff::Timestamp) -> String {
    let mut header = vec![
        "KIND",
        "NAMESPACE/NAME",
        "ACCEPTED",
        "PROGRAMMED",
        "RESOLVEDREFS",
        "REASON",
        "AGE",
    ];
    if wide {
        header.push("MESSAGE");
    }
    let dash = |s: &str| {
        if s.is_empty() {
            "-".to_owned()
        } else {
            s.to_owned()
        }
    };
    let mut cells: Vec<Vec<String>> = vec![header.iter().map(|s| (*s).to_owned()).collect()];
    for r in rows {
        let name = if r.namespace.is_empty() {
            r.name.clone()
        } else {
            format!("{}/{}", r.namespace, r.name)
        };
        let age = r
            .since
            .parse::<jiff::Timestamp>()
            .map(|t| age(now.duration_since(t).as_secs()))
            .unwrap_or_else(|_| "-".to_owned());
        let mut row = vec![
            r.kind.clone(),
            name,
            dash(&r.accepted),
            dash(&r.programmed),
            dash(&r.resolved_refs),
            dash(&r.reason),
            age,
        ];
        if wide {
            row.push(dash(&r.message.replace('\n', " ")));
        }
        cells.push(row);
    }
    columns(&cells)
}

/// Cells padded into columns three spaces apart, as `kubectl get` prints them.
fn columns(cells: &[Vec<String>]) -> String {
    let mut widths = Vec::new();
    for row in cells {
        for (i, c) in row.iter().enumerate() {
            if widths.len() <= i {
                widths.push(0);
            }
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in cells {
        let mut line = String::new();
        for (i, c) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}   ", w = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `kubectl`'s short ages: `45s`, `12m`, `5h`, `3d`.
fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// Prints the live table as a tree; exit 1 when the dashboard cannot be read.
pub async fn routes(args: RoutesArgs) -> anyhow::Result<ExitCode> {
    let body = get(args.dashboard_addr, "/api/routes").await?;
    let tree: RouteTree = serde_json::from_slice(&body)
        .with_context(|| format!("{}/api/routes is not a route tree", args.dashboard_addr))?;
    write_stdout(&render_tree(&tree))?;
    Ok(ExitCode::SUCCESS)
}

/// The tree as indented text, one node per line.
pub fn render_tree(tree: &RouteTree) -> String {
    let mut out = format!("route table generation {}\n", tree.generation);
    if tree.gateways.is_empty() {
        out.push_str("(no Gateway listener is served)\n");
    }
    for g in &tree.gateways {
        let _ = writeln!(out, "Gateway {}", g.name);
        for l in &g.listeners {
            let _ = writeln!(out, "  listener {} ({} on {})", l.name, l.protocol, l.bind);
            if l.hosts.is_empty() {
                out.push_str("    (no routes)\n");
            }
            for h in &l.hosts {
                let _ = writeln!(out, "    host {}", h.hostname);
                for r in &h.rules {
                    let _ = writeln!(out, "      {} rule {}", r.route, r.rule);
                    for m in &r.matches {
                        let _ = writeln!(out, "        match {m}");
                    }
                    if let Some(a) = &r.answers {
                        let _ = writeln!(out, "        answers {a}");
                    }
                    for b in &r.backends {
                        backend_lines(&mut out, b);
                    }
                }
            }
        }
    }
    out
}

fn backend_lines(out: &mut String, b: &TreeBackend) {
    if let Some(reason) = &b.invalid {
        let _ = writeln!(
            out,
            "        -> invalid backend weight {}: {reason}",
            b.weight
        );
        return;
    }
    let _ = writeln!(out, "        -> {} weight {}", b.target, b.weight);
    if b.endpoints.is_empty() {
        out.push_str("             (no endpoints)\n");
    }
    for e in &b.endpoints {
        let _ = writeln!(out, "             {} {}", e.address, e.state);
    }
}

/// One GET to the dashboard server; the body of a 200 answer, else an error that says what
/// went wrong and which address was tried.
async fn get(addr: SocketAddr, path: &str) -> anyhow::Result<Bytes> {
    let fetched = tokio::time::timeout(TIMEOUT, async {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .with_context(|| {
                format!(
                    "cannot reach edgeplane's dashboard at {addr} (is edgeplane running there? \
                 pass its --dashboard-addr; in a cluster, kubectl port-forward first)"
                )
            })?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .with_context(|| format!("HTTP to {addr}"))?;
        tokio::spawn(conn);
        let req = http::Request::get(path)
            .header(http::header::HOST, addr.to_string())
            .body(Empty::<Bytes>::new())?;
        let resp = sender
            .send_request(req)
            .await
            .with_context(|| format!("GET http://{addr}{path}"))?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        anyhow::Ok((status, body))
    })
    .await
    .with_context(|| format!("no answer from {addr} within {}s", TIMEOUT.as_secs()))??;
    let (status, body) = fetched;
    if !status.is_success() {
        bail!(
            "GET http://{addr}{path}: {status}: {}",
            String::from_utf8_lossy(&body).trim()
        );
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lines_up_like_kubectl() {
        let rows = [Summary {
            kind: "HTTPRoute".into(),
            namespace: "default".into(),
            name: "shop".into(),
            accepted: "True".into(),
            resolved_refs: "False".into(),
            reason: "BackendNotFound".into(),
            message: "no Service".into(),
            since: "2026-01-01T00:00:00Z".into(),
            ..Summary::default()
        }];
        let now: jiff::Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        let t = status_table(&rows, true, now);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("KIND        NAMESPACE/NAME   ACCEPTED"),
            "{t}"
        );
        assert!(lines[1].contains("default/shop") && lines[1].contains("BackendNotFound"));
        assert!(
            lines[1].contains(" 5m ") && lines[1].ends_with("no Service"),
            "{t}"
        );
        assert_eq!(age(59), "59s");
        assert_eq!(age(3 * 86400), "3d");
    }
}
