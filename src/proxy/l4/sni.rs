//! Reads the server name (SNI) of a TLS ClientHello without terminating TLS: the bytes stay
//! with the caller, who replays them to the backend (passthrough) or to the TLS acceptor
//! (terminate). Bounded: a ClientHello longer than [`MAX_HELLO`] is refused. Never panics on
//! any input (fuzzed by `fuzz/fuzz_targets/client_hello.rs`).

/// Largest ClientHello read (handshake message bytes, records excluded). Real ones are a few
/// hundred bytes; post-quantum key shares bring them near 2 KiB.
pub const MAX_HELLO: usize = 16 * 1024;

/// Record content type of handshake messages.
const HANDSHAKE: u8 = 22;
/// Handshake message type of a ClientHello.
const CLIENT_HELLO: u8 = 1;
/// Extension type of `server_name` (RFC 6066).
const SERVER_NAME: u16 = 0;
/// `host_name`, the only name type of `server_name`.
const HOST_NAME: u8 = 0;

/// What the bytes read so far show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// A ClientHello that is not complete yet: read more.
    Partial,
    /// A complete ClientHello, with its server name (lower-cased) if it sent one.
    Complete(Option<String>),
    /// Not a TLS ClientHello, or one this parser refuses (too long, malformed).
    Invalid(&'static str),
}

/// Parses the ClientHello at the start of `buf` (TLS records as received).
pub fn parse(buf: &[u8]) -> Hello {
    // Reassemble the handshake message from as many records as it spans.
    let mut message = Vec::new();
    let mut rest = buf;
    loop {
        let Some(header) = rest.get(..5) else {
            return Hello::Partial;
        };
        if header[0] != HANDSHAKE || header[1] != 3 {
            return Hello::Invalid("not a TLS handshake record");
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len == 0 {
            return Hello::Invalid("empty handshake record");
        }
        let Some(fragment) = rest.get(5..5 + len) else {
            return Hello::Partial;
        };
        message.extend_from_slice(fragment);
        rest = &rest[5 + len..];
        if message.len() < 4 {
            continue;
        }
        if message[0] != CLIENT_HELLO {
            return Hello::Invalid("first handshake message is not a ClientHello");
        }
        let body_len =
            usize::from(message[1]) << 16 | usize::from(message[2]) << 8 | usize::from(message[3]);
        if body_len > MAX_HELLO {
            return Hello::Invalid("ClientHello too long");
        }
        if message.len() >= 4 + body_len {
            return match server_name(&message[4..4 + body_len]) {
                Some(name) => Hello::Complete(name),
                None => Hello::Invalid("malformed ClientHello"),
            };
        }
    }
}

/// A cursor over a byte slice that never reads past its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = tail;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u16(&mut self) -> Option<u16> {
        let b = self.take(2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A vector with a one-byte length.
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }

    /// A vector with a two-byte length.
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

/// The server name in a ClientHello body: `Some(None)` when it has no `server_name`; `None`
/// when it is malformed.
fn server_name(body: &[u8]) -> Option<Option<String>> {
    let mut r = Reader(body);
    r.take(2 + 32)?; // legacy_version, random
    r.vec8()?; // legacy_session_id
    r.vec16()?; // cipher_suites
    r.vec8()?; // legacy_compression_methods
    if r.0.is_empty() {
        return Some(None); // no extensions at all
    }
    let mut extensions = Reader(r.vec16()?);
    while !extensions.0.is_empty() {
        let kind = extensions.u16()?;
        let data = extensions.vec16()?;
        if kind != SERVER_NAME {
            continue;
        }
        let mut list = Reader(Reader(data).vec16()?);
        while !list.0.is_empty() {
            let name_type = list.u8()?;
            let name = list.vec16()?;
            if name_type == HOST_NAME {
                let name = std::str::from_utf8(name).ok()?;
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
                    return None;
                }
                return Some(Some(name.to_ascii_lowercase()));
            }
        }
        return Some(None);
    }
    Some(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello as rustls writes it for `name`.
    fn hello(name: Option<&str>) -> Vec<u8> {
        use std::sync::Arc;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        config.enable_sni = name.is_some();
        let server =
            rustls_pki_types::ServerName::try_from(name.unwrap_or("x.invalid").to_owned()).unwrap();
        let mut conn = rustls::ClientConnection::new(Arc::new(config), server).unwrap();
        let mut out = Vec::new();
        conn.write_tls(&mut out).unwrap();
        out
    }

    #[test]
    fn reads_the_server_name_of_a_real_client_hello() {
        let bytes = hello(Some("Api.Example.com"));
        assert_eq!(
            parse(&bytes),
            Hello::Complete(Some("api.example.com".into()))
        );
        assert_eq!(parse(&hello(None)), Hello::Complete(None));
        for cut in [0, 3, 5, 40, bytes.len() - 1] {
            assert_eq!(parse(&bytes[..cut]), Hello::Partial, "cut at {cut}");
        }
    }

    #[test]
    fn a_hello_split_across_records_is_reassembled() {
        let bytes = hello(Some("split.example.com"));
        let message = &bytes[5..];
        let (a, b) = message.split_at(50);
        let mut split = Vec::new();
        for part in [a, b] {
            split.extend_from_slice(&[HANDSHAKE, 3, 1]);
            split.extend_from_slice(&u16::try_from(part.len()).unwrap().to_be_bytes());
            split.extend_from_slice(part);
        }
        assert_eq!(
            parse(&split),
            Hello::Complete(Some("split.example.com".into()))
        );
    }

    #[test]
    fn other_protocols_and_garbage_are_refused() {
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\n\r\n"),
            Hello::Invalid(_)
        ));
        assert!(matches!(
            parse(&[22, 3, 1, 0, 4, 2, 0, 0, 0]),
            Hello::Invalid(_)
        ));
        assert!(matches!(
            parse(&[22, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff]),
            Hello::Invalid(_)
        ));
        // A complete but truncated body.
        assert!(matches!(
            parse(&[22, 3, 1, 0, 6, 1, 0, 0, 2, 3, 3]),
            Hello::Invalid(_)
        ));
    }
}
