//! Loopback addresses for tests. Each test picks random addresses in 127.0.0.0/8, so tests that
//! run in parallel (and other test binaries) practically never collide on an address.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// A random address in 127.0.0.0/8 (never 127.0.0.0 or a .255 broadcast-looking address).
pub fn loopback_ip() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(
        127,
        fastrand::u8(1..=254),
        fastrand::u8(0..=255),
        fastrand::u8(1..=254),
    ))
}

/// An address on a random loopback IP whose port was free a moment ago: bind port 0, read the
/// port, close. Use it for listeners the code under test binds itself, and as a closed port.
pub fn free_addr() -> SocketAddr {
    for _ in 0..50 {
        let ip = loopback_ip();
        if let Ok(l) = std::net::TcpListener::bind((ip, 0)) {
            if let Ok(addr) = l.local_addr() {
                return addr;
            }
        }
    }
    panic!("no free loopback address after 50 tries");
}

/// A Tokio listener bound on a random loopback IP and a kernel-chosen port.
pub async fn bind_loopback() -> tokio::net::TcpListener {
    for _ in 0..50 {
        if let Ok(l) = tokio::net::TcpListener::bind((loopback_ip(), 0)).await {
            return l;
        }
    }
    panic!("cannot bind a loopback listener after 50 tries");
}
