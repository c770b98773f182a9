//! The HTTP/1.1 request reader on arbitrary bytes: never panics; the decision (refused,
//! incomplete, or the request with its body) does not depend on how the bytes are split into
//! reads; an accepted request never carries both `Content-Length` and `Transfer-Encoding`, and a
//! body framed by `Content-Length` has exactly that many bytes.
#![no_main]

use edgeplane::proxy::read_request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u8, &[u8])| {
    let (piece, data) = input;
    let whole = read_request(data, data.len());
    let split = read_request(data, usize::from(piece));
    match (&whole, &split) {
        (Ok(Some((a, body_a, t_a))), Ok(Some((b, body_b, t_b)))) => {
            assert_eq!(a.method(), b.method());
            assert_eq!(a.uri(), b.uri());
            assert_eq!(a.headers(), b.headers());
            assert_eq!(body_a, body_b);
            assert_eq!(t_a, t_b);
        }
        (Ok(None), Ok(None)) | (Err(_), Err(_)) => {}
        _ => panic!("split reads decided otherwise: {whole:?} vs {split:?}"),
    }
    if let Ok(Some((req, body, _))) = whole {
        let headers = req.headers();
        assert!(
            !(headers.contains_key("content-length") && headers.contains_key("transfer-encoding"))
        );
        if !headers.contains_key("transfer-encoding") {
            if let Some(n) = headers.get("content-length") {
                let n: usize = n.to_str().unwrap().trim().parse().unwrap();
                assert_eq!(body.len(), n);
            }
        }
    }
});
