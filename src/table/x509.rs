//! The expiry (`notAfter`) of a DER certificate, read with a minimal DER walk down to the
//! `validity` field of `TBSCertificate` (RFC 5280, 4.1). rustls and webpki check validity
//! during handshakes but do not expose it; this is what the expiry metric reports. Pure.

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
}
