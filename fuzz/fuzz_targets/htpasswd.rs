//! htpasswd data as a Secret holds it (`edgeplane::translate::parse_htpasswd`, what the basic
//! auth check of the proxy is built from): never panics; every accepted user name is non-empty
//! and has no `:`, and accepted data written back as `user:hash` lines parses to the same users.
#![no_main]

use edgeplane::table::PasswordHash;
use edgeplane::translate::parse_htpasswd;
use libfuzzer_sys::fuzz_target;

fn b64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n =
            chunk.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    while out.len() % 4 != 0 {
        out.push('=');
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Ok(users) = parse_htpasswd(data) else {
        return;
    };
    let mut again = String::new();
    for (user, hash) in &users {
        assert!(!user.is_empty());
        assert!(!user.contains(':'));
        let hash = match hash {
            PasswordHash::Bcrypt(h) => {
                assert!(["$2a$", "$2b$", "$2y$"].iter().any(|p| h.starts_with(p)));
                h.clone()
            }
            PasswordHash::Sha1(d) => format!("{{SHA}}{}", b64(d)),
        };
        again.push_str(&format!("{user}:{hash}\n"));
    }
    let reparsed = parse_htpasswd(again.as_bytes()).expect("written-back data parses");
    assert_eq!(reparsed, users);
});
