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

/// Every long flag a command's `--help` lists.
fn help_flags(command: &[&str]) -> std::collections::BTreeSet<String> {
    let out = Command::new(BIN)
        .args(command)
        .arg("--help")
        .output()
        .expect("run --help");
    assert!(out.status.success(), "{command:?} --help failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            // `-h, --help`: the long form after the short one.
            let l = match l.as_bytes() {
                [b'-', short, b',', b' ', ..] if *short != b'-' => &l[4..],
                _ => l,
            };
            let flag = l.strip_prefix("--")?.split([' ', '=', '<']).next()?;
            Some(format!("--{flag}"))
        })
        .collect()
}

/// The flags named in the README's flag tables (rows that start with a flag in backticks):
/// those under a heading naming `` `convert ingress` flags `` when `convert` is true, the
/// others (the `serve` tables) when it is false.
fn readme_flags(convert: bool) -> std::collections::BTreeSet<String> {
    let readme = include_str!("../../README.md");
    let mut in_convert = false;
    let mut out = std::collections::BTreeSet::new();
    for l in readme.lines() {
        if l.starts_with('#') {
            in_convert = l.contains("`convert ingress` flags");
        }
        if !l.starts_with("| `--") || in_convert != convert {
            continue;
        }
        let cell = l.split('|').nth(1).unwrap_or_default();
        out.extend(
            cell.split('`')
                .filter(|s| s.starts_with("--"))
                .map(|s| s.split([' ', '=']).next().unwrap_or(s).to_owned()),
        );
    }
    out
}

/// The README's flag tables and `serve --help` name the same flags: a flag removed from the
/// code is gone from the README, a flag added is documented there.
#[test]
fn readme_flag_tables_match_serve_help() {
    let help = help_flags(&["serve"]);
    assert!(help.contains("--config-dir") && help.contains("--drain-timeout"));
    let readme = readme_flags(false);
    let undocumented: Vec<_> = help
        .difference(&readme)
        .filter(|f| !["--help", "--version", "--log-format"].contains(&f.as_str()))
        .collect();
    let unknown: Vec<_> = readme.difference(&help).collect();
    assert!(
        unknown.is_empty(),
        "README flag tables name flags `serve` does not have: {unknown:?}"
    );
    assert!(
        undocumented.is_empty(),
        "`serve` flags missing from the README flag tables: {undocumented:?}"
    );
}

/// The README's `convert ingress` flag table and `convert ingress --help` name the same flags.
#[test]
fn readme_flag_table_matches_convert_ingress_help() {
    let help = help_flags(&["convert", "ingress"]);
    assert!(help.contains("--verify") && help.contains("--filename"));
    let readme = readme_flags(true);
    let undocumented: Vec<_> = help
        .difference(&readme)
        .filter(|f| !["--help", "--log-format"].contains(&f.as_str()))
        .collect();
    let unknown: Vec<_> = readme.difference(&help).collect();
    assert!(
        unknown.is_empty() && undocumented.is_empty(),
        "README `convert ingress` flags unknown to the command: {unknown:?}; flags missing \
         from the README: {undocumented:?}"
    );
}

/// `edgeplane crds | head -1`: a reader that stops early ends the command quietly with 0,
/// no panic.
#[test]
fn printing_commands_stop_quietly_when_the_reader_goes() {
    let mut child = Command::new(BIN)
        .arg("crds")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run edgeplane crds");
    let mut first = String::new();
    if let Some(out) = child.stdout.take() {
        BufReader::new(out)
            .read_line(&mut first)
            .expect("first line");
    }
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        first.starts_with("# edgeplane CustomResourceDefinitions"),
        "{first}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
}

/// `--version` names the version and the commit the binary was built from: the checkout's
/// HEAD here (the test runs in the repository), so a running image can be traced to its source.
#[test]
fn version_prints_the_version_and_the_commit() {
    let out = Command::new(BIN)
        .arg("--version")
        .output()
        .expect("run edgeplane --version");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let commit = match head {
        Some(head) => head,
        // Not a git checkout (a source tarball): the build says so.
        None => "unknown".to_owned(),
    };
    assert_eq!(
        text.trim(),
        format!("edgeplane {} (commit {commit})", env!("CARGO_PKG_VERSION")),
    );
}
