//! The expiry (`notAfter`) and the URI subject alternative names of a DER certificate, read
//! with a minimal DER walk of `TBSCertificate` (RFC 5280, 4.1). rustls and webpki check
//! validity and DNS names during handshakes but expose neither field: the expiry metric
//! reports the first, BackendTLSPolicy `subjectAltNames` of type URI compare the second. Pure.

/// Seconds since the Unix epoch at which the DER certificate `der` expires; `None` when the
/// encoding is not the expected X.509 shape.
pub fn not_after(der: &[u8]) -> Option<i64> {
    let (tag, certificate, _) = element(der)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, mut tbs, _) = element(certificate)?;
    if tag != SEQUENCE {
        return None;
    }
    // version [0] EXPLICIT (optional), serialNumber, signature, issuer, then validity.
    let (tag, _, rest) = element(tbs)?;
    if tag == VERSION {
        tbs = rest;
    }
    for _ in 0..3 {
        tbs = element(tbs)?.2;
    }
    let (tag, validity, _) = element(tbs)?;
    if tag != SEQUENCE {
        return None;
    }
    let (_, _, rest) = element(validity)?;
    let (tag, time, _) = element(rest)?;
    let text = std::str::from_utf8(time).ok()?;
    match tag {
        UTC_TIME => {
            let yy: i16 = text.get(0..2)?.parse().ok()?;
            let year = if yy >= 50 { 1900 + yy } else { 2000 + yy };
            timestamp(year, text.get(2..)?)
        }
        GENERALIZED_TIME => timestamp(text.get(0..4)?.parse().ok()?, text.get(4..)?),
        _ => None,
    }
}

/// The URIs (`uniformResourceIdentifier`, RFC 5280 4.2.1.6) in the certificate's
/// subjectAltName extension; empty when it has none or does not parse.
pub fn uri_sans(der: &[u8]) -> Vec<String> {
    san_uris(der).unwrap_or_default()
}

fn san_uris(der: &[u8]) -> Option<Vec<String>> {
    let (_, certificate, _) = element(der)?;
    let (_, mut tbs, _) = element(certificate)?;
    if element(tbs)?.0 == VERSION {
        tbs = element(tbs)?.2;
    }
    // serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo.
    for _ in 0..6 {
        tbs = element(tbs)?.2;
    }
    // issuerUniqueID [1], subjectUniqueID [2], then extensions [3].
    let extensions = loop {
        let (tag, contents, rest) = element(tbs)?;
        if tag == EXTENSIONS {
            break element(contents)?.1;
        }
        tbs = rest;
    };
    let mut list = extensions;
    while !list.is_empty() {
        let (_, extension, rest) = element(list)?;
        list = rest;
        let (_, oid, mut fields) = element(extension)?;
        if oid != SUBJECT_ALT_NAME {
            continue;
        }
        if element(fields)?.0 == BOOLEAN {
            fields = element(fields)?.2;
        }
        let (_, value, _) = element(fields)?;
        let (_, mut names, _) = element(value)?;
        let mut uris = Vec::new();
        while !names.is_empty() {
            let (tag, name, rest) = element(names)?;
            names = rest;
            if tag == URI_NAME {
                uris.push(String::from_utf8_lossy(name).into_owned());
            }
        }
        return Some(uris);
    }
    Some(Vec::new())
}

const EXTENSIONS: u8 = 0xa3;
const BOOLEAN: u8 = 0x01;
const URI_NAME: u8 = 0x86;
/// OID 2.5.29.17.
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
const SEQUENCE: u8 = 0x30;
const VERSION: u8 = 0xa0;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// `MMDDHHMMSSZ` of `year` as Unix seconds.
fn timestamp(year: i16, rest: &str) -> Option<i64> {
    if rest.len() != 11 || !rest.ends_with('Z') {
        return None;
    }
    let n = |i: usize| -> Option<i8> { rest.get(i..i + 2)?.parse().ok() };
    let t = jiff::civil::DateTime::new(year, n(0)?, n(2)?, n(4)?, n(6)?, n(8)?, 0).ok()?;
    Some(
        t.to_zoned(jiff::tz::TimeZone::UTC)
            .ok()?
            .timestamp()
            .as_second(),
    )
}

/// One DER element of `input`: its tag, its contents and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_not_after_of_generated_certificates() {
        let mut params = rcgen::CertificateParams::new(vec!["a.example".to_owned()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2031, 7, 9);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        // 2031-07-09T00:00:00Z
        assert_eq!(not_after(cert.der()), Some(1_941_321_600));
        params.not_after = rcgen::date_time_ymd(2051, 1, 1);
        let cert = params.self_signed(&key).unwrap();
        // GeneralizedTime from 2050 on.
        assert_eq!(not_after(cert.der()), Some(2_556_144_000));
        assert_eq!(not_after(b"\x30\x03\x02\x01"), None);
        assert_eq!(not_after(b""), None);
    }

    #[test]
    fn reads_uri_subject_alt_names() {
        let mut params = rcgen::CertificateParams::new(vec!["a.example".to_owned()]).unwrap();
        params.subject_alt_names.push(rcgen::SanType::URI(
            "spiffe://a.example/workload".try_into().unwrap(),
        ));
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(uri_sans(cert.der()), ["spiffe://a.example/workload"]);
        let plain = rcgen::generate_simple_self_signed(vec!["b.example".to_owned()]).unwrap();
        assert!(uri_sans(plain.cert.der()).is_empty());
        assert!(uri_sans(b"\x30\x03\x02\x01").is_empty());
    }
}
