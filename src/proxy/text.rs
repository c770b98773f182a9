//! Numbers, addresses and ids written as text without the formatting machinery: every request
//! writes a trace id, and with the access log or span export on, addresses and several numbers
//! more. Pure.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `id` as 32 lowercase hex digits, as trace ids and request ids are written: two table
/// lookups per byte, not the formatting machinery (every request writes at least one).
pub(crate) fn hex_u128(id: u128) -> [u8; 32] {
    let mut out = [0; 32];
    hex_into(&id.to_be_bytes(), &mut out);
    out
}

/// `id` as 16 lowercase hex digits (span ids).
pub(crate) fn hex_u64(id: u64) -> [u8; 16] {
    let mut out = [0; 16];
    hex_into(&id.to_be_bytes(), &mut out);
    out
}

fn hex_into(bytes: &[u8], out: &mut [u8]) {
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX[usize::from(byte >> 4)];
        pair[1] = HEX[usize::from(byte & 0xf)];
    }
}

/// An IPv4 address octet by octet (IPv6 through its `Display`, which compresses zeros).
pub(crate) fn push_ip(out: &mut String, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                push_octet(out, octet);
            }
        }
        v6 => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// An IPv4 octet in decimal.
fn push_octet(out: &mut String, octet: u8) {
    if octet >= 100 {
        out.push(char::from(b'0' + octet / 100));
    }
    if octet >= 10 {
        out.push(char::from(b'0' + octet / 10 % 10));
    }
    out.push(char::from(b'0' + octet % 10));
}

/// `ip:port` as `SocketAddr`'s `Display` writes it (IPv6 through it).
pub(crate) fn push_socket_addr(out: &mut String, addr: SocketAddr) {
    match addr {
        SocketAddr::V4(v4) => {
            push_ip(out, IpAddr::V4(*v4.ip()));
            out.push(':');
            out.push_str(itoa::Buffer::new().format(v4.port()));
        }
        v6 => {
            let _ = write!(out, "{v6}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_digits_match_the_formatting_machinery() {
        for id in [
            0u128,
            1,
            0xf0,
            u128::MAX,
            0x4bf92f3577b34da6a3ce929d0e0e4736,
        ] {
            assert_eq!(hex_u128(id).as_slice(), format!("{id:032x}").as_bytes());
        }
        for id in [0u64, 1, u64::MAX, 0x00f067aa0ba902b7] {
            assert_eq!(hex_u64(id).as_slice(), format!("{id:016x}").as_bytes());
        }
    }

    #[test]
    fn addresses_match_their_display() {
        for ip in [
            "0.0.0.0",
            "10.0.0.1",
            "192.168.100.255",
            "255.255.255.255",
            "2001:db8::1",
            "::1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            let mut out = String::new();
            push_ip(&mut out, ip);
            assert_eq!(out, ip.to_string());
            for port in [0, 80, 65535] {
                let addr = SocketAddr::new(ip, port);
                out.clear();
                push_socket_addr(&mut out, addr);
                assert_eq!(out, addr.to_string());
            }
        }
        let scoped: SocketAddr = "[fe80::1%2]:8080".parse().unwrap();
        let mut out = String::new();
        push_socket_addr(&mut out, scoped);
        assert_eq!(out, scoped.to_string());
    }
}
