//! Records the git commit being built as `EDGEPLANE_COMMIT` (for `edgeplane_build_info` and
//! `--version`): the environment's `EDGEPLANE_COMMIT` when it is set (an image build, where
//! `.git` is not copied in), else git's; `unknown` when neither gives one.

use std::process::Command;

#[path = "build/link_order.rs"]
mod link_order;

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
    link_order();
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

/// Release builds on Linux glibc place the functions of `build/link-order.txt` (the code that a
/// start, a first load, requests and the admin endpoints ran, hottest first) together at the
/// start of the code: the kernel maps a binary's code 64 KiB at a time around each page a
/// process touches, so code that runs spread over the whole `.text` leaves nearly all of it
/// resident. A name the build does not have (another rustc, another profile, code changed
/// since the list was made) costs only its placement. `EDGEPLANE_LINK_ORDER=0` links without
/// the order; `EDGEPLANE_LINK_MAP=FILE` writes the linker's map, from which
/// `scripts/link-order.sh` names the code a run executed. Debug, test, `profiling` and `bench`
/// builds are unchanged.
fn link_order() {
    println!("cargo:rerun-if-env-changed=EDGEPLANE_LINK_ORDER");
    println!("cargo:rerun-if-env-changed=EDGEPLANE_LINK_MAP");
    println!("cargo:rerun-if-changed=build/link-order.txt");
    println!("cargo:rerun-if-changed=build/link_order.rs");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    // Release builds only: not `profiling` or `bench` (optimized, with line tables), whose
    // callgrind profiles name functions by object, and valgrind counts code outside `.text`
    // as no object's.
    if var("PROFILE") != "release"
        || var("DEBUG") != "false"
        || var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
    {
        return;
    }
    let map = var("EDGEPLANE_LINK_MAP");
    if !map.is_empty() {
        println!("cargo:rustc-link-arg-bins=-Xlinker");
        println!("cargo:rustc-link-arg-bins=-Map={map}");
    }
    if var("EDGEPLANE_LINK_ORDER") == "0" {
        return;
    }
    let Ok(list) = std::fs::read_to_string("build/link-order.txt") else {
        return;
    };
    let sections = link_order::sections(&list);
    if sections.is_empty() {
        return;
    }
    let script = std::path::Path::new(&var("OUT_DIR")).join("link-order.ld");
    if std::fs::write(&script, link_order::linker_script(&sections)).is_ok() {
        // The driver's `-T FILE` (two arguments): a path may hold the commas `-Wl,` splits on.
        println!("cargo:rustc-link-arg-bins=-T");
        println!("cargo:rustc-link-arg-bins={}", script.display());
    }
}

/// The trimmed output of `git args`, when git runs and succeeds.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then_some(())?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}
