//! The conversion webhook's serving certificate as the leader keeps it in a Secret: a
//! self-signed CA made with each certificate, the serving certificate for the webhook
//! Service's DNS names, what the Secret holds, and the rotation plan. A rotation first stages
//! the new certificate with both CAs in the bundle, and serves it only once every CRD trusts
//! that bundle, so the API server accepts the old and the new certificate throughout. Pure:
//! no I/O; `crd_bundle` reads and writes the Secret and the CRDs.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;

use crate::table::Certificate;

/// Secret keys: the served certificate and key, the CA bundle the CRDs must carry, and a
/// staged certificate and key waiting for the CRDs to trust its CA.
pub const CERT_KEY: &str = "tls.crt";
pub const KEY_KEY: &str = "tls.key";
pub const CA_KEY: &str = "ca.crt";
pub const NEXT_CERT_KEY: &str = "next.crt";
pub const NEXT_KEY_KEY: &str = "next.key";
/// Annotation of the Secret: when (Unix seconds) the staged certificate was staged.
pub const STAGED_ANNOTATION: &str = "edgeplane.dev/webhook-cert-staged-at";
/// Longest wait between staging a certificate and serving it.
const MAX_GRACE: Duration = Duration::from_secs(60);

/// A certificate could not be issued.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("issue webhook certificate: {0}")]
    Issue(#[from] rcgen::Error),
    #[error("webhook certificate validity {0:?} is out of range")]
    Validity(Duration),
}

/// How long certificates live and when they are replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Lifetime of each CA and serving certificate.
    pub validity: Duration,
    /// A new certificate is staged this long before the served one expires.
    pub renew_before: Duration,
}

impl Rotation {
    /// Time between staging a certificate and serving it: the API server and the other
    /// replicas see the new bundle first. A quarter of `renew_before`, at most a minute.
    pub fn grace(&self) -> Duration {
        (self.renew_before / 4).min(MAX_GRACE)
    }
}

/// A PEM certificate and its PEM private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A newly issued CA and the serving certificate it signed (the CA's key is not kept).
#[derive(Debug, Clone)]
pub struct Issued {
    pub ca_pem: String,
    pub serving: Pair,
}

/// The DNS names a client uses for the Service `namespace/name`.
pub fn dns_names(namespace: &str, name: &str) -> Vec<String> {
    vec![
        name.to_owned(),
        format!("{name}.{namespace}"),
        format!("{name}.{namespace}.svc"),
        format!("{name}.{namespace}.svc.cluster.local"),
    ]
}

fn offset(t: SystemTime) -> Result<time::OffsetDateTime, CertError> {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).unwrap_or(i64::MAX))
        .map_err(|_| CertError::Validity(Duration::from_secs(secs)))
}

/// A new CA and a serving certificate for `dns`, both valid from a minute before `now` (clock
/// skew) for `validity`.
pub fn issue(dns: &[String], validity: Duration, now: SystemTime) -> Result<Issued, CertError> {
    let not_before = offset(now - Duration::from_secs(60))?;
    let not_after = offset(
        now.checked_add(validity)
            .ok_or(CertError::Validity(validity))?,
    )?;
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "edgeplane webhook CA");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = not_before;
    ca.not_after = not_after;
    let ca_key = rcgen::KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let mut leaf = rcgen::CertificateParams::new(dns.to_vec())?;
    if let Some(first) = dns.iter().find(|n| n.ends_with(".svc")) {
        leaf.distinguished_name
            .push(rcgen::DnType::CommonName, first.as_str());
    }
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    leaf.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    leaf.not_before = not_before;
    leaf.not_after = not_after;
    let key = rcgen::KeyPair::generate()?;
    let cert = leaf.signed_by(&key, &issuer)?;
    Ok(Issued {
        ca_pem: ca_cert.pem(),
        serving: Pair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        },
    })
}

/// Unix seconds at which the pair's certificate expires; `None` when the certificate or key
/// cannot be read, or do not belong together.
pub fn expiry(pair: &Pair) -> Option<i64> {
    Certificate::from_pem(
        "webhook".to_owned(),
        pair.cert_pem.as_bytes(),
        pair.key_pem.as_bytes(),
    )
    .ok()?
    .not_after
}

/// What the Secret holds (missing keys read as empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    pub serving: Option<Pair>,
    /// PEM CA certificates the CRDs' `caBundle` must carry: the newest first.
    pub bundle: String,
    pub next: Option<Pair>,
    pub staged_at: Option<i64>,
}

impl Stored {
    /// The state a Secret holds.
    pub fn from_secret(secret: &Secret) -> Self {
        let data = secret.data.clone().unwrap_or_default();
        let text = |k: &str| {
            data.get(k)
                .and_then(|b| String::from_utf8(b.0.clone()).ok())
                .filter(|s| !s.is_empty())
        };
        let pair = |c: &str, k: &str| {
            Some(Pair {
                cert_pem: text(c)?,
                key_pem: text(k)?,
            })
        };
        let staged_at = secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(STAGED_ANNOTATION))
            .and_then(|v| v.parse().ok());
        Self {
            serving: pair(CERT_KEY, KEY_KEY),
            bundle: text(CA_KEY).unwrap_or_default(),
            next: pair(NEXT_CERT_KEY, NEXT_KEY_KEY),
            staged_at,
        }
    }

    /// The Secret's `data`.
    pub fn data(&self) -> BTreeMap<String, ByteString> {
        let mut data = BTreeMap::new();
        let mut put = |k: &str, v: &str| {
            data.insert(k.to_owned(), ByteString(v.as_bytes().to_vec()));
        };
        if let Some(p) = &self.serving {
            put(CERT_KEY, &p.cert_pem);
            put(KEY_KEY, &p.key_pem);
        }
        put(CA_KEY, &self.bundle);
        if let Some(p) = &self.next {
            put(NEXT_CERT_KEY, &p.cert_pem);
            put(NEXT_KEY_KEY, &p.key_pem);
        }
        data
    }
}

/// What a pass must do to the Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Keep,
    /// Write this state (create, rotate, promote or drop an unreadable staged pair).
    Write(Stored),
}

fn unix(t: SystemTime) -> i64 {
    i64::try_from(t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()).unwrap_or(i64::MAX)
}

/// PEM text with `\n` line ends, as rcgen writes it.
fn pem_lf(p: &pem::Pem) -> String {
    pem::encode_config(
        p,
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

/// The newest CA of a bundle (its first PEM certificate).
fn newest_ca(bundle: &str) -> Option<String> {
    pem::parse_many(bundle)
        .ok()?
        .into_iter()
        .find(|p| p.tag() == "CERTIFICATE")
        .map(|p| pem_lf(&p))
}

/// The next state of the Secret at `now`. `trusted`: every installed CRD carries
/// `stored.bundle` already. No usable certificate: a new one at once. Due for renewal: a new
/// one staged, its CA put in front of the current one. Staged, trusted and past the grace
/// time: the staged certificate is served.
pub fn plan(
    stored: &Stored,
    trusted: bool,
    rotation: Rotation,
    dns: &[String],
    now: SystemTime,
) -> Result<Step, CertError> {
    let now_s = unix(now);
    let serving = stored.serving.as_ref().and_then(expiry);
    let Some(expires) = serving.filter(|&e| e > now_s) else {
        let issued = issue(dns, rotation.validity, now)?;
        return Ok(Step::Write(Stored {
            serving: Some(issued.serving),
            bundle: issued.ca_pem,
            next: None,
            staged_at: None,
        }));
    };
    if let Some(next) = &stored.next {
        if expiry(next).is_none_or(|e| e <= now_s) {
            return Ok(Step::Write(Stored {
                next: None,
                staged_at: None,
                ..stored.clone()
            }));
        }
        let grace = i64::try_from(rotation.grace().as_secs()).unwrap_or(0);
        let since = stored.staged_at.unwrap_or(0);
        if trusted && now_s >= since.saturating_add(grace) {
            return Ok(Step::Write(Stored {
                serving: Some(next.clone()),
                bundle: stored.bundle.clone(),
                next: None,
                staged_at: None,
            }));
        }
        return Ok(Step::Keep);
    }
    let renew_before = i64::try_from(rotation.renew_before.as_secs()).unwrap_or(i64::MAX);
    if now_s.saturating_add(renew_before) < expires {
        return Ok(Step::Keep);
    }
    let issued = issue(dns, rotation.validity, now)?;
    let mut bundle = issued.ca_pem;
    if let Some(current) = newest_ca(&stored.bundle) {
        bundle.push_str(&current);
    }
    Ok(Step::Write(Stored {
        serving: stored.serving.clone(),
        bundle,
        next: Some(issued.serving),
        staged_at: Some(now_s),
    }))
}

/// How long until the plan may change without anything else changing: the end of a staged
/// certificate's grace time, or the start of the served one's renewal window.
pub fn next_check(stored: &Stored, rotation: Rotation, now: SystemTime) -> Duration {
    let now_s = unix(now);
    let at = match (&stored.next, stored.serving.as_ref().and_then(expiry)) {
        (Some(_), _) => stored
            .staged_at
            .unwrap_or(now_s)
            .saturating_add(i64::try_from(rotation.grace().as_secs()).unwrap_or(0)),
        (None, Some(expires)) => {
            expires.saturating_sub(i64::try_from(rotation.renew_before.as_secs()).unwrap_or(0))
        }
        (None, None) => now_s,
    };
    let secs = u64::try_from(at.saturating_sub(now_s)).unwrap_or(0);
    // Whole seconds: certificates carry no finer times. Woken a little late, never early.
    Duration::from_secs(secs).max(Duration::from_millis(200)) + Duration::from_millis(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROT: Rotation = Rotation {
        validity: Duration::from_secs(3600),
        renew_before: Duration::from_secs(600),
    };

    fn names() -> Vec<String> {
        dns_names("sys", "hook")
    }

    fn written(step: Step) -> Stored {
        match step {
            Step::Write(s) => s,
            Step::Keep => panic!("expected a write"),
        }
    }

    #[test]
    fn a_missing_certificate_is_issued_and_a_fresh_one_kept() {
        let now = SystemTime::now();
        let s = written(plan(&Stored::default(), false, ROT, &names(), now).unwrap());
        let pair = s.serving.clone().unwrap();
        let exp = expiry(&pair).unwrap();
        assert!((exp - unix(now) - 3600).abs() <= 1, "{exp}");
        assert_eq!(newest_ca(&s.bundle).as_deref(), Some(s.bundle.as_str()));
        assert_eq!(plan(&s, true, ROT, &names(), now).unwrap(), Step::Keep);
        let secret = Secret {
            data: Some(s.data()),
            ..Default::default()
        };
        assert_eq!(Stored::from_secret(&secret), s);
    }

    #[test]
    fn rotation_stages_with_both_cas_then_serves_once_trusted_after_the_grace() {
        let t0 = SystemTime::now();
        let s = written(plan(&Stored::default(), false, ROT, &names(), t0).unwrap());
        let due = t0 + Duration::from_secs(3000 + 5);
        assert!(next_check(&s, ROT, t0) >= Duration::from_secs(2999));
        let staged = written(plan(&s, true, ROT, &names(), due).unwrap());
        assert_eq!(
            staged.serving, s.serving,
            "the old certificate is still served"
        );
        let cas = pem::parse_many(&staged.bundle).unwrap();
        assert_eq!(cas.len(), 2, "new and old CA");
        assert_eq!(pem_lf(&cas[1]), s.bundle);
        assert!(staged.next.is_some());
        // Not trusted yet, or within the grace time: nothing moves.
        let later = due + ROT.grace();
        assert_eq!(
            plan(&staged, false, ROT, &names(), later).unwrap(),
            Step::Keep
        );
        assert_eq!(plan(&staged, true, ROT, &names(), due).unwrap(), Step::Keep);
        assert!(next_check(&staged, ROT, due) >= ROT.grace());
        let promoted = written(plan(&staged, true, ROT, &names(), later).unwrap());
        assert_eq!(promoted.serving, staged.next);
        assert_eq!(
            promoted.bundle, staged.bundle,
            "the old CA stays until the next rotation"
        );
        assert_eq!(promoted.next, None);
    }

    #[test]
    fn an_expired_or_unreadable_certificate_is_replaced_at_once() {
        let t0 = SystemTime::now();
        let s = written(plan(&Stored::default(), false, ROT, &names(), t0).unwrap());
        let after = t0 + Duration::from_secs(4000);
        let fresh = written(plan(&s, false, ROT, &names(), after).unwrap());
        assert_ne!(fresh.serving, s.serving);
        let mut broken = s.clone();
        broken.serving.as_mut().unwrap().key_pem = "nope".into();
        assert!(written(plan(&broken, false, ROT, &names(), t0).unwrap())
            .serving
            .is_some_and(|p| expiry(&p).is_some()));
    }
}
