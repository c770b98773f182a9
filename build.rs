//! Records the git commit being built as `EDGEPLANE_COMMIT` (for `edgeplane_build_info` and
//! `--version`): the environment's `EDGEPLANE_COMMIT` when it is set (an image build, where
//! `.git` is not copied in), else git's; `unknown` when neither gives one.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=EDGEPLANE_COMMIT");
    let commit = std::env::var("EDGEPLANE_COMMIT")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| git(&["rev-parse", "--short", "HEAD"]))
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=EDGEPLANE_COMMIT={commit}");
    // Run again when HEAD moves (a checkout, or a commit on the current branch: its ref, or
    // the reflog when refs are packed), not on every build; worktrees keep these files
    // outside `.git/`, so git names them. Files that do not exist are not named (cargo would
    // run the script on every build).
    let head_ref = git(&["symbolic-ref", "-q", "HEAD"]);
    for name in ["HEAD", "logs/HEAD"].into_iter().chain(head_ref.as_deref()) {
        if let Some(path) = git(&["rev-parse", "--git-path", name]) {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    relative_relocations();
}

/// Linux glibc binaries are position-independent, so the loader rewrites every pointer held in
/// static data at start, reading one 24-byte `.rela.dyn` entry per pointer: about 2 MiB of the
/// binary's pages resident for the process's whole life. `-z pack-relative-relocs` (GNU ld 2.38,
/// glibc 2.36 at run time) packs them into a bitmap (`.relr.dyn`) of a few dozen KiB.
fn relative_relocations() {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// The trimmed output of `git args`, when git runs and succeeds.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then_some(())?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}
