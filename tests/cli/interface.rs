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

/// The flags named in docs/configuration.md's flag tables (rows that start with a flag in
/// backticks), per command section (`` ### `edgeplane serve` ``), in the order of the page.
fn documented_flags() -> Vec<(Vec<String>, std::collections::BTreeSet<String>)> {
    let doc = include_str!("../../docs/configuration.md");
    let mut out: Vec<(Vec<String>, std::collections::BTreeSet<String>)> = Vec::new();
    for l in doc.lines() {
        if let Some(title) = l.strip_prefix("### `edgeplane") {
            let words = title.trim_end_matches('`').split_whitespace();
            out.push((words.map(str::to_owned).collect(), Default::default()));
            continue;
        }
        let Some((_, flags)) = out.last_mut() else {
            continue;
        };
        if !l.starts_with("| `--") {
            continue;
        }
        let cell = l.split('|').nth(1).unwrap_or_default();
        flags.extend(
            cell.split('`')
                .filter(|s| s.starts_with("--"))
                .map(|s| s.split([' ', '=']).next().unwrap_or(s).to_owned()),
        );
    }
    out
}

/// The subcommands `edgeplane --help` (or `edgeplane <group> --help`) lists, without `help`.
fn help_commands(command: &[&str]) -> Vec<String> {
    let out = Command::new(BIN)
        .args(command)
        .arg("--help")
        .output()
        .expect("run --help");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

/// docs/configuration.md documents every command the binary has, each with exactly the flags
/// its `--help` lists: a flag removed from the code is gone from the page, a flag added is
/// documented there. The global `--log-format` is documented once, under `edgeplane`.
#[test]
fn configuration_doc_flag_tables_match_every_help() {
    let documented = documented_flags();
    let mut commands: Vec<Vec<String>> = vec![vec![]];
    for top in help_commands(&[]) {
        let nested = help_commands(&[top.as_str()]);
        if nested.is_empty() {
            commands.push(vec![top]);
        } else {
            commands.extend(nested.into_iter().map(|n| vec![top.clone(), n]));
        }
    }
    assert!(commands.contains(&vec!["serve".to_owned()]), "{commands:?}");
    assert!(commands.contains(&vec!["convert".to_owned(), "ingress".to_owned()]));
    let sections: Vec<_> = documented.iter().map(|(c, _)| c.clone()).collect();
    assert_eq!(
        sections, commands,
        "docs/configuration.md's command sections differ from the binary's commands"
    );
    for (command, doc) in &documented {
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        let help = help_flags(&args);
        let skip: &[&str] = if args.is_empty() {
            &["--help", "--version"]
        } else {
            &["--help", "--version", "--log-format"]
        };
        let undocumented: Vec<_> = help
            .difference(doc)
            .filter(|f| !skip.contains(&f.as_str()))
            .collect();
        let unknown: Vec<_> = doc.difference(&help).collect();
        assert!(
            unknown.is_empty() && undocumented.is_empty(),
            "docs/configuration.md, `edgeplane {}`: flags the command does not have: \
             {unknown:?}; flags missing from the page: {undocumented:?}",
            args.join(" ")
        );
    }
    let serve = &documented[sections.iter().position(|c| c == &["serve"]).unwrap_or(0)].1;
    assert!(serve.contains("--config-dir") && serve.contains("--drain-timeout"));
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
