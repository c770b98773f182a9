//! What the binary tells a person or a log collector: plain text logs when stderr is not a
//! terminal.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use super::BIN;

#[test]
fn text_logs_to_a_pipe_carry_no_escape_codes() {
    let mut child = Command::new(BIN)
        .args(["echo", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run edgeplane echo");
    let mut line = String::new();
    let read = child
        .stderr
        .take()
        .map(|e| BufReader::new(e).read_line(&mut line));
    let _ = child.kill();
    let _ = child.wait();
    assert!(matches!(read, Some(Ok(n)) if n > 0), "no log line");
    assert!(line.contains("echo backend listening"), "{line:?}");
    assert!(
        !line.contains('\u{1b}'),
        "escape codes in a piped log: {line:?}"
    );
}
