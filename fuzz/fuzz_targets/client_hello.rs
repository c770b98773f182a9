//! The ClientHello reader on arbitrary bytes: never panics; a server name it returns is
//! lower-case printable ASCII; a complete hello stays complete with more bytes after it, and
//! any prefix of the input is partial or decided the same way.
#![no_main]

use edgeplane::proxy::{parse_client_hello, Hello};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = parse_client_hello(data);
    if let Hello::Complete(Some(name)) = &whole {
        assert!(!name.is_empty());
        assert!(name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b.is_ascii_uppercase()));
        let mut longer = data.to_vec();
        longer.extend_from_slice(b"trailing");
        assert_eq!(parse_client_hello(&longer), whole);
    }
    if let Some(cut) = data.len().checked_sub(1) {
        let prefix = parse_client_hello(&data[..cut]);
        assert!(prefix == Hello::Partial || prefix == whole || matches!(prefix, Hello::Invalid(_)));
    }
});
