//! TLS for tests: self-signed certificates made with rcgen at test time, table certificates
//! from them, and a rustls client that trusts only the given certificates, sends a chosen SNI
//! and ALPN, and speaks HTTP/1.1 or HTTP/2 over the session. Every wait is bounded.

use std::net::SocketAddr;
use std::sync::Arc;

use edgeplane::table::{Certificate, TlsListener, TlsListeners};
use http::Request;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::client::{BoxError, Reply, TestBody, REQUEST_TIMEOUT};

/// A self-signed certificate and its key, as PEM and DER.
pub struct TestCert {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

/// A self-signed certificate valid for `names` (DNS names, `*.` wildcards allowed).
pub fn self_signed(names: &[&str]) -> TestCert {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let c = rcgen::generate_simple_self_signed(names).expect("rcgen makes a certificate");
    TestCert {
        cert_pem: c.cert.pem(),
        key_pem: c.signing_key.serialize_pem(),
        der: c.cert.der().clone(),
    }
}

impl TestCert {
    /// The certificate as the translator puts it in a table.
    pub fn certificate(&self, secret: &str) -> Arc<Certificate> {
        Arc::new(
            Certificate::from_pem(
                secret.to_owned(),
                self.cert_pem.as_bytes(),
                self.key_pem.as_bytes(),
            )
            .expect("generated certificate parses"),
        )
    }
}

/// The TLS listeners of a socket: `(hostname, certificate)` pairs, `None` for the default.
pub fn tls_listeners(entries: &[(Option<&str>, &TestCert)]) -> TlsListeners {
    TlsListeners::new(
        entries
            .iter()
            .enumerate()
            .map(|(i, (host, cert))| {
                TlsListener::new(
                    host.map(str::to_owned),
                    format!("default/gw/https-{i}"),
                    cert.certificate(&format!("default/cert-{i}")),
                    None,
                    true,
                )
                .expect("TLS configuration")
            })
            .collect(),
    )
}

/// A certificate authority that issues client certificates.
pub struct TestCa {
    pub cert_pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

/// A client certificate (leaf only) and its private key.
pub struct ClientIdentity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: rustls::pki_types::PrivateKeyDer<'static>,
}

impl TestCa {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        Self {
            cert_pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A certificate and key (PEM) for the DNS names `dns` and URIs `uris`, issued by this CA.
    pub fn issue_pem(&self, dns: &[&str], uris: &[&str]) -> (String, String) {
        let names: Vec<String> = dns.iter().map(|s| s.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names).expect("params");
        for u in uris {
            params
                .subject_alt_names
                .push(rcgen::SanType::URI((*u).try_into().expect("URI SAN")));
        }
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        (cert.pem(), key.serialize_pem())
    }

    /// A client certificate for `name`, issued by this CA.
    pub fn issue(&self, name: &str) -> ClientIdentity {
        let mut params =
            rcgen::CertificateParams::new(vec![name.to_owned()]).expect("client params");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate().expect("client key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("client certificate");
        ClientIdentity {
            chain: vec![cert.der().clone()],
            key: rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        }
    }
}

/// A client configuration trusting exactly `roots`, offering `alpn`, presenting `identity`
/// when the server asks for a certificate.
pub fn client_config_with_identity(
    roots: &[&TestCert],
    alpn: &[&[u8]],
    identity: &ClientIdentity,
) -> Arc<ClientConfig> {
    let mut store = RootCertStore::empty();
    for r in roots {
        store.add(r.der.clone()).expect("root certificate is valid");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("default TLS versions")
        .with_root_certificates(store)
        .with_client_auth_cert(identity.chain.clone(), identity.key.clone_key())
        .expect("client identity");
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A client configuration trusting exactly `roots`, offering `alpn`.
pub fn client_config(roots: &[&TestCert], alpn: &[&[u8]]) -> Arc<ClientConfig> {
    let mut store = RootCertStore::empty();
    for r in roots {
        store.add(r.der.clone()).expect("root certificate is valid");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("default TLS versions")
        .with_root_certificates(store)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// Connects to `addr` and completes a TLS handshake for `sni`.
pub async fn connect(
    addr: SocketAddr,
    sni: &str,
    config: Arc<ClientConfig>,
) -> Result<TlsStream<TcpStream>, BoxError> {
    let fut = async {
        let tcp = TcpStream::connect(addr).await?;
        let name = ServerName::try_from(sni.to_owned())?;
        Ok::<_, BoxError>(TlsConnector::from(config).connect(name, tcp).await?)
    };
    tokio::time::timeout(REQUEST_TIMEOUT, fut).await?
}

/// The leaf certificate the server presented.
pub fn peer_leaf(stream: &TlsStream<TcpStream>) -> Option<CertificateDer<'static>> {
    stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.clone().into_owned())
}

/// The ALPN protocol the server chose.
pub fn alpn(stream: &TlsStream<TcpStream>) -> Option<Vec<u8>> {
    stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec)
}

/// An HTTP connection over an established TLS session: HTTP/2 when ALPN chose `h2`, else
/// HTTP/1.1 with keep-alive.
pub enum Session {
    H1(hyper::client::conn::http1::SendRequest<TestBody>),
    H2(hyper::client::conn::http2::SendRequest<TestBody>),
}

impl Session {
    /// Starts HTTP on `stream`, picking the version from ALPN.
    pub async fn start(stream: TlsStream<TcpStream>) -> Result<Self, BoxError> {
        let h2 = alpn(&stream).as_deref() == Some(b"h2");
        let io = TokioIo::new(stream);
        if h2 {
            let (sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
            tokio::spawn(conn);
            Ok(Self::H2(sender))
        } else {
            let (sender, conn) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(conn);
            Ok(Self::H1(sender))
        }
    }

    /// `GET path` for `host` (as `Host`, or `:authority` on HTTP/2).
    pub async fn get(&mut self, host: &str, path: &str) -> Result<Reply, BoxError> {
        let req = match self {
            Self::H1(_) => Request::get(path).header(http::header::HOST, host),
            Self::H2(_) => Request::get(format!("https://{host}{path}")),
        }
        .body(super::client::empty())?;
        let fut = async {
            let resp = match self {
                Self::H1(s) => {
                    s.ready().await?;
                    s.send_request(req).await?
                }
                Self::H2(s) => {
                    s.ready().await?;
                    s.send_request(req).await?
                }
            };
            let (parts, body) = resp.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok::<_, BoxError>(Reply {
                status: parts.status,
                version: parts.version,
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut).await?
    }
}

/// One request on a fresh TLS connection with `sni`, trusting `roots`, over HTTP/1.1.
pub async fn get_tls(
    addr: SocketAddr,
    sni: &str,
    roots: &[&TestCert],
    host: &str,
    path: &str,
) -> Result<Reply, BoxError> {
    let stream = connect(addr, sni, client_config(roots, &[b"http/1.1"])).await?;
    Session::start(stream).await?.get(host, path).await
}

/// `Ok` when `GET /` to `host` over TLS (SNI `host`, trusting only `trusted`) answers 2xx: the
/// handshake verified a certificate `trusted` signs. Otherwise why not.
pub async fn served_over_tls(
    addr: SocketAddr,
    host: &str,
    trusted: &TestCert,
) -> Result<(), String> {
    let r = get_tls(addr, host, &[trusted], host, "/")
        .await
        .map_err(|e| e.to_string())?;
    if r.status.is_success() {
        Ok(())
    } else {
        Err(format!("status {}", r.status))
    }
}
