//! Free ports on 127.0.0.1 for tests that start the binary with fixed addresses.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::Mutex;

/// A port that was free a moment ago, and not handed out before in this process: the kernel
/// may give a released ephemeral port again at once, and two of a test's ports (a proxy's and
/// its admin server's), or two tests' running in parallel, must not be the same.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    for _ in 0..1000 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("ephemeral port");
        if GIVEN.lock().unwrap_or_else(|p| p.into_inner()).insert(port) {
            return port;
        }
    }
    panic!("no ephemeral port not handed out before in 1000 tries");
}
