//! TLS termination data of one HTTPS socket: the Gateway listeners bound there with their
//! certificates, indexed by SNI hostname (exact, longest wildcard, then the listener without a
//! hostname). Certificates are parsed from PEM once per table build into rustls'
//! `CertifiedKey`; handshakes only look them up. Pure: parsing, no I/O.

use foldhash::HashMap;
use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Serialize;

use super::client_auth::ClientValidation;
use super::hostname::{HostnameMap, Pattern};

/// Why a Secret's `tls.crt` / `tls.key` cannot serve as a certificate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertificateError {
    #[error("tls.crt holds no PEM certificate")]
    NoCertificate,
    #[error("tls.crt does not parse: {0}")]
    BadCertificate(String),
    #[error("tls.key holds no PEM private key: {0}")]
    NoKey(String),
    #[error("tls.key is not a supported private key: {0}")]
    BadKey(String),
    #[error("tls.key does not belong to the certificate in tls.crt")]
    KeyMismatch,
}

/// A certificate chain and its private key, ready for handshakes. `/debug/config` shows where
/// it came from and the names it is valid for, never the key.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Certificate {
    /// `namespace/name` of the Secret it was read from.
    pub secret: String,
    /// DNS names of the leaf certificate's subjectAltName extension.
    pub dns_names: Vec<String>,
    /// Expiry of the leaf certificate (`notAfter`), in seconds since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_after: Option<i64>,
    #[serde(skip)]
    pub key: Arc<CertifiedKey>,
}

impl Certificate {
    /// Parses a PEM chain (leaf first) and a PEM private key (PKCS#8, PKCS#1 or SEC1), and checks
    /// that they belong together.
    pub fn from_pem(
        secret: String,
        cert_pem: &[u8],
        key_pem: &[u8],
    ) -> Result<Self, CertificateError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| CertificateError::BadCertificate(e.to_string()))?;
        let leaf = chain.first().ok_or(CertificateError::NoCertificate)?;
        let dns_names = webpki::EndEntityCert::try_from(leaf)
            .map_err(|e| CertificateError::BadCertificate(e.to_string()))?
            .valid_dns_names()
            .map(str::to_owned)
            .collect();
        let not_after = super::x509::not_after(leaf);
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| CertificateError::NoKey(e.to_string()))?;
        let signer = rustls::crypto::ring::sign::any_supported_type(&key)
            .map_err(|e| CertificateError::BadKey(e.to_string()))?;
        let key = CertifiedKey::new(chain, signer);
        key.keys_match()
            .map_err(|_| CertificateError::KeyMismatch)?;
        Ok(Self {
            secret,
            dns_names,
            not_after,
            key: Arc::new(key),
        })
    }
}

/// One HTTPS Gateway listener bound on the socket, with the rustls configuration its
/// handshakes use: its certificate, its client-certificate validation, ALPN `h2` and
/// `http/1.1`. Built once per table; each listener has its own, so a session established on
/// a listener without client validation is never resumed on one with it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsListener {
    /// The listener's hostname (`None`: any SNI, the default certificate).
    pub hostname: Option<String>,
    /// `namespace/gateway/listener` it comes from.
    pub source: String,
    pub certificate: Arc<Certificate>,
    /// Gateway `spec.tls.frontend` validation for this listener's port, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_validation: Option<Arc<ClientValidation>>,
    #[serde(skip)]
    pub config: Arc<ServerConfig>,
}

impl TlsListener {
    /// The listener and its handshake configuration: ALPN `h2` and `http/1.1` when `http`
    /// (HTTPS listeners), none otherwise (TLS listeners in Terminate mode forward the
    /// plaintext stream as it is). Fails only if the ring provider lacks the default protocol
    /// versions.
    pub fn new(
        hostname: Option<String>,
        source: String,
        certificate: Arc<Certificate>,
        client_validation: Option<Arc<ClientValidation>>,
        http: bool,
    ) -> Result<Self, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder =
            ServerConfig::builder_with_provider(provider).with_safe_default_protocol_versions()?;
        let builder = match &client_validation {
            Some(v) => builder.with_client_cert_verifier(v.verifier.clone()),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(Arc::new(Fixed(certificate.key.clone())));
        if http {
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        }
        Ok(Self {
            hostname,
            source,
            certificate,
            client_validation,
            config: Arc::new(config),
        })
    }
}

/// The certificate of one listener, whatever the client asks for: the listener was chosen
/// from the ClientHello before this configuration was.
#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The HTTPS listeners of one socket by SNI hostname. A handshake takes the listener with the
/// most specific hostname matching the SNI (exact, then the longest `*.` wildcard, which matches
/// any deeper subdomain), else the listener without hostname; without one the handshake fails.
#[derive(Debug, Default)]
pub struct TlsListeners {
    listeners: Vec<TlsListener>,
    owners: HostnameMap<usize>,
}

impl TlsListeners {
    /// Indexes listeners by hostname; the first listener of a hostname wins.
    pub fn new(listeners: Vec<TlsListener>) -> Self {
        let mut owners = HostnameMap::default();
        for (i, l) in listeners.iter().enumerate() {
            let name = l.hostname.as_deref().map(str::to_ascii_lowercase);
            owners.insert(Pattern::of(name.as_deref()), i);
        }
        Self { listeners, owners }
    }

    /// The index of the listener that owns `name` (an SNI or a normalized `Host`); `None` for
    /// no name picks the default listener.
    pub fn owner(&self, name: Option<&str>) -> Option<usize> {
        let name = name.map_or_else(
            || "*".to_owned(),
            |n| n.trim_end_matches('.').to_ascii_lowercase(),
        );
        self.owners.find(&name).copied()
    }

    /// The listener serving a handshake with this SNI.
    pub fn resolve(&self, sni: Option<&str>) -> Option<&TlsListener> {
        self.owner(sni).map(|i| &self.listeners[i])
    }

    /// All listeners, in build order.
    pub fn iter(&self) -> impl Iterator<Item = &TlsListener> {
        self.listeners.iter()
    }

    /// True when no listener is indexed.
    pub fn is_empty(&self) -> bool {
        self.listeners.is_empty()
    }
}

/// The certificates a table serves, by the `namespace/name` of their Secret: the input that lets
/// the next translation keep serving a certificate whose Secret was updated to something that
/// does not parse (see [`crate::translate::translate_with`]).
#[derive(Debug, Default, Clone)]
pub struct ServedCertificates(HashMap<String, Arc<Certificate>>);

impl ServedCertificates {
    /// Every certificate of `table`'s HTTPS sockets.
    pub fn of(table: &super::RouteTable) -> Self {
        let map = table
            .listeners
            .values()
            .filter_map(|l| l.tls.as_ref())
            .flat_map(TlsListeners::iter)
            .map(|l| (l.certificate.secret.clone(), l.certificate.clone()))
            .collect();
        Self(map)
    }

    /// The certificate served for Secret `namespace/name`.
    pub fn get(&self, secret: &str) -> Option<&Arc<Certificate>> {
        self.0.get(secret)
    }
}

impl FromIterator<Arc<Certificate>> for ServedCertificates {
    fn from_iter<I: IntoIterator<Item = Arc<Certificate>>>(iter: I) -> Self {
        Self(iter.into_iter().map(|c| (c.secret.clone(), c)).collect())
    }
}

impl Serialize for TlsListeners {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.listeners.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(names: &[&str]) -> (String, String) {
        let c = rcgen::generate_simple_self_signed(
            names.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        (c.cert.pem(), c.signing_key.serialize_pem())
    }

    #[test]
    fn parses_pem_pairs_and_rejects_garbage() {
        let (cert, key) = pair(&["a.example.com", "*.b.example.com"]);
        let c = Certificate::from_pem("ns/s".into(), cert.as_bytes(), key.as_bytes()).unwrap();
        assert_eq!(c.dns_names, ["a.example.com", "*.b.example.com"]);
        let err = |c: &str, k: &str| {
            Certificate::from_pem("x".into(), c.as_bytes(), k.as_bytes()).unwrap_err()
        };
        assert_eq!(
            err("Hello world\n", "Hello world\n"),
            CertificateError::NoCertificate
        );
        assert!(matches!(err(&cert, "Hello"), CertificateError::NoKey(_)));
        let (_, other_key) = pair(&["c"]);
        assert_eq!(err(&cert, &other_key), CertificateError::KeyMismatch);
        let broken = "-----BEGIN CERTIFICATE-----\nSGVsbG8gd29ybGQK\n-----END CERTIFICATE-----\n";
        assert!(matches!(
            err(broken, &key),
            CertificateError::BadCertificate(_)
        ));
    }

    #[test]
    fn sni_picks_exact_then_longest_wildcard_then_default() {
        let (cert, key) = pair(&["x"]);
        let c =
            Arc::new(Certificate::from_pem("s".into(), cert.as_bytes(), key.as_bytes()).unwrap());
        let l = |h: Option<&str>| {
            TlsListener::new(
                h.map(str::to_owned),
                h.unwrap_or("default").to_owned(),
                c.clone(),
                None,
                true,
            )
            .unwrap()
        };
        let index = TlsListeners::new(vec![
            l(None),
            l(Some("*.example.com")),
            l(Some("*.foo.example.com")),
            l(Some("a.foo.example.com")),
        ]);
        let src = |sni: Option<&str>| index.resolve(sni).map(|l| l.source.clone());
        assert_eq!(
            src(Some("A.foo.example.com")).as_deref(),
            Some("a.foo.example.com")
        );
        assert_eq!(
            src(Some("b.foo.example.com")).as_deref(),
            Some("*.foo.example.com")
        );
        assert_eq!(
            src(Some("x.y.example.com")).as_deref(),
            Some("*.example.com")
        );
        assert_eq!(src(Some("example.com")).as_deref(), Some("default"));
        assert_eq!(src(None).as_deref(), Some("default"));
        let no_default = TlsListeners::new(vec![l(Some("*.example.com"))]);
        assert!(no_default.resolve(Some("other.org")).is_none());
        assert!(no_default.resolve(None).is_none());
    }
}
