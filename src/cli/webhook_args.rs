//! Flags bounding the conversion webhook (`serve --kubernetes`), parsed into
//! [`WebhookLimits`]; the defaults and their reasons live on that type.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use clap::Args;

use super::flags::{duration_text, parse_duration};
use crate::webhook::WebhookLimits;

fn limits() -> WebhookLimits {
    WebhookLimits::default()
}

/// What a client of the conversion webhook may hold.
#[derive(Debug, Args)]
pub struct WebhookArgs {
    /// Open webhook connections; one more is closed as soon as it is accepted.
    #[arg(long, default_value_t = limits().max_connections,
        value_parser = positive_count)]
    pub webhook_max_connections: usize,
    /// Time from accept to the first request head (TLS handshake and protocol detection).
    #[arg(long, default_value = duration_text(limits().handshake_timeout), value_parser = positive_duration)]
    pub webhook_handshake_timeout: Duration,
    /// A webhook connection without a request in progress for this long is closed.
    #[arg(long, default_value = duration_text(limits().idle_timeout), value_parser = positive_duration)]
    pub webhook_idle_timeout: Duration,
    /// Reviews read and converted at the same time; more wait up to 1s, then get 429.
    #[arg(long, default_value_t = limits().max_concurrent_reviews,
        value_parser = positive_count)]
    pub webhook_max_reviews: usize,
    /// Require a client certificate issued by a CA of this PEM bundle (the one the API
    /// server's webhook client certificate chains to). Without it, clients are anonymous.
    #[arg(long, value_name = "PATH")]
    pub webhook_client_ca: Option<PathBuf>,
}

impl WebhookArgs {
    /// The limits these flags describe (the body limit is fixed).
    pub fn limits(&self) -> WebhookLimits {
        WebhookLimits {
            max_connections: self.webhook_max_connections,
            handshake_timeout: self.webhook_handshake_timeout,
            idle_timeout: self.webhook_idle_timeout,
            max_concurrent_reviews: self.webhook_max_reviews,
            ..limits()
        }
    }

    /// The CA bundle of `--webhook-client-ca`, read and checked at start-up.
    pub fn client_ca(&self) -> anyhow::Result<Option<Arc<rustls::RootCertStore>>> {
        let Some(path) = &self.webhook_client_ca else {
            return Ok(None);
        };
        let pem = std::fs::read(path)
            .with_context(|| format!("--webhook-client-ca: cannot read {}", path.display()))?;
        let roots = crate::webhook::client_ca_roots(&pem)
            .with_context(|| format!("--webhook-client-ca {}", path.display()))?;
        Ok(Some(roots))
    }
}

/// A count greater than zero.
fn positive_count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be greater than zero".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A duration greater than zero.
fn positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err("must be greater than zero".to_owned()),
        d => Ok(d),
    }
}

/// Parses a listen address `IP:PORT`, where an IPv6 address may also be written without
/// brackets (`fd00::7:9443`), as `$(POD_IP):9443` expands to from the downward API.
pub fn parse_listen_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let bad = || format!("`{s}` is not IP:PORT");
    let (ip, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let ip: IpAddr = ip.parse().map_err(|_| bad())?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    Ok(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        webhook: WebhookArgs,
    }

    #[test]
    fn defaults_are_the_limits_and_zero_is_refused() {
        let cli = Cli::try_parse_from(["edgeplane"]).unwrap();
        assert_eq!(cli.webhook.limits(), WebhookLimits::default());
        let cli = Cli::try_parse_from([
            "edgeplane",
            "--webhook-max-connections=3",
            "--webhook-handshake-timeout=500ms",
            "--webhook-idle-timeout=2s",
            "--webhook-max-reviews=1",
        ])
        .unwrap();
        let l = cli.webhook.limits();
        assert_eq!(l.max_connections, 3);
        assert_eq!(l.handshake_timeout, Duration::from_millis(500));
        assert_eq!(l.idle_timeout, Duration::from_secs(2));
        assert_eq!(l.max_concurrent_reviews, 1);
        for bad in [
            "--webhook-max-connections=0",
            "--webhook-idle-timeout=0s",
            "--webhook-handshake-timeout=0",
            "--webhook-max-reviews=0",
        ] {
            assert!(Cli::try_parse_from(["edgeplane", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_client_ca_must_hold_a_certificate() {
        let cli = Cli::try_parse_from(["edgeplane"]).unwrap();
        assert!(cli.webhook.client_ca().unwrap().is_none());
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        for path in [empty, dir.path().join("missing.pem")] {
            let flag = format!("--webhook-client-ca={}", path.display());
            let cli = Cli::try_parse_from(["edgeplane", flag.as_str()]).unwrap();
            let e = format!("{:#}", cli.webhook.client_ca().unwrap_err());
            assert!(e.contains("--webhook-client-ca"), "{e}");
        }
    }

    #[test]
    fn listen_addresses_take_bare_ipv6() {
        assert_eq!(
            parse_listen_addr("10.1.2.3:9443"),
            Ok("10.1.2.3:9443".parse().unwrap())
        );
        assert_eq!(
            parse_listen_addr("fd00::7:9443"),
            Ok("[fd00::7]:9443".parse().unwrap())
        );
        assert_eq!(
            parse_listen_addr("[fd00::7]:9443"),
            Ok("[fd00::7]:9443".parse().unwrap())
        );
        for bad in ["", ":9443", "10.1.2.3", "host:9443", "10.1.2.3:x"] {
            assert!(parse_listen_addr(bad).is_err(), "{bad}");
        }
    }
}
