//! htpasswd data as a Secret holds it (`edgeplane::translate::parse_htpasswd`, what the basic
//! auth check of the proxy is built from): never panics; every accepted user name is non-empty
//! and has no `:`, and accepted data written back as `user:hash` lines parses to the same users.
#![no_main]

use edgeplane::table::PasswordHash;
use edgeplane::translate::parse_htpasswd;
use libfuzzer_sys::fuzz_target;

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
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
