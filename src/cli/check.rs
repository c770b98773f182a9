//! `edgeplane check`: manifests (files and directories) admitted and translated once, every
//! owned object's status printed, a summary line on stderr, and an exit code that says what
//! was found, including that nothing of ours was there to check.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};

use super::{AdmissionArgs, TranslateArgs};
use crate::provider::paths::{load_paths, PathsLoad};
use crate::status::StatusReport;
use crate::translate::{translate, TranslateOptions};

/// Every object checked, no problem.
pub const EXIT_OK: u8 = 0;
/// A condition reports a problem.
pub const EXIT_PROBLEMS: u8 = 1;
/// A manifest does not parse, an object is rejected, a kind of our API groups is unknown, or a
/// path cannot be read.
pub const EXIT_INVALID: u8 = 2;
/// Nothing of ours was checked: no manifest, or no GatewayClass with our controllerName
/// (without `--allow-empty`).
pub const EXIT_NOTHING_CHECKED: u8 = 3;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// A manifest file, or a directory of YAML/JSON manifests read recursively; repeatable.
    #[arg(
        short = 'f',
        long = "filename",
        visible_alias = "config-dir",
        value_name = "PATH",
        required = true
    )]
    pub paths: Vec<PathBuf>,
    /// What to print on stdout: every owned object's status as YAML or JSON, or one line per
    /// object (`summary`).
    #[arg(short = 'o', long, value_enum, default_value_t = CheckOutput::Yaml)]
    pub output: CheckOutput,
    /// Exit 0 (not 3) when nothing of ours was checked: no manifest, or no GatewayClass with
    /// our controllerName.
    #[arg(long)]
    pub allow_empty: bool,
    #[command(flatten)]
    pub translate: TranslateArgs,
    #[command(flatten)]
    pub admission: AdmissionArgs,
}

/// What `check` prints on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckOutput {
    /// The status of every owned object, as YAML.
    Yaml,
    /// The same, as JSON.
    Json,
    /// One line per owned object: `ok <object>`, or `problem <object>: <condition>` per problem.
    Summary,
}

/// Runs `check`: exit [`EXIT_OK`], [`EXIT_PROBLEMS`], [`EXIT_INVALID`] or
/// [`EXIT_NOTHING_CHECKED`].
pub fn check(args: &CheckArgs) -> ExitCode {
    let loaded = args
        .admission
        .load()
        .and_then(|crds| load_paths(&args.paths, Arc::new(crds)));
    let loaded = match loaded {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let options = TranslateOptions {
        ingress: args.translate.ingress(),
        controller_name: args.translate.controller_name.clone(),
        bind_address: args.translate.bind_address,
        now: jiff::Timestamp::now(),
        generation: 1,
        port_map: Default::default(),
        capabilities: crate::translate::Capabilities::STANDALONE,
    };
    let status = translate(&loaded.snapshot, &options).status;
    let printed = render(&status, args.output)
        .and_then(|text| super::write_stdout(&text).map_err(|e| e.to_string()));
    if let Err(e) = printed {
        eprintln!("error: cannot print status: {e}");
        return ExitCode::from(EXIT_INVALID);
    }
    for e in &loaded.errors {
        eprintln!("error: {e}");
    }
    let problems = status.problems();
    for p in &problems {
        eprintln!("problem: {p}");
    }
    let with_problems = status.problems_by_object().len();
    eprintln!("{}", summary(&loaded, &status, with_problems, args));
    let nothing = nothing_checked(&loaded, &status, args);
    if let Some(why) = &nothing {
        eprintln!(
            "{}: nothing of ours was checked: {why}{}",
            if args.allow_empty { "note" } else { "warning" },
            if args.allow_empty {
                ""
            } else {
                " (exit 3; --allow-empty accepts this)"
            }
        );
    }
    let code = if !loaded.errors.is_empty() {
        EXIT_INVALID
    } else if !problems.is_empty() {
        EXIT_PROBLEMS
    } else if nothing.is_some() && !args.allow_empty {
        EXIT_NOTHING_CHECKED
    } else {
        EXIT_OK
    };
    ExitCode::from(code)
}

/// The status as `check` prints it on stdout, in the chosen form.
fn render(status: &StatusReport, output: CheckOutput) -> Result<String, String> {
    Ok(match output {
        CheckOutput::Yaml => crate::yaml_out::to_string(status).map_err(|e| e.to_string())?,
        CheckOutput::Json => {
            serde_json::to_string_pretty(status).map_err(|e| e.to_string())? + "\n"
        }
        CheckOutput::Summary => {
            let with_problems = status.problems_by_object();
            let mut text = String::new();
            for e in &status.entries {
                match with_problems.iter().find(|(p, _)| std::ptr::eq(*p, e)) {
                    None => text.push_str(&format!("ok {}\n", e.label())),
                    Some((_, problems)) => {
                        for p in problems {
                            text.push_str(&format!("problem {p}\n"));
                        }
                    }
                }
            }
            text
        }
    })
}

/// The line `check` always ends with on stderr.
fn summary(
    loaded: &PathsLoad,
    status: &StatusReport,
    with_problems: usize,
    args: &CheckArgs,
) -> String {
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "summary: {} read from {}, {} admitted, {} owned by controller {}, {} with problems, {}",
        plural(loaded.documents, "object", "objects"),
        plural(loaded.files, "file", "files"),
        loaded.admitted,
        status.entries.len(),
        args.translate.controller_name,
        with_problems,
        plural(loaded.errors.len(), "error", "errors"),
    )
}

/// Why nothing of ours was checked, if so: no manifest at all, or no GatewayClass with our
/// controllerName (the GatewayClasses found are named, with theirs).
fn nothing_checked(loaded: &PathsLoad, status: &StatusReport, args: &CheckArgs) -> Option<String> {
    if !status.entries.is_empty() {
        return None;
    }
    let ours = &args.translate.controller_name;
    if loaded.documents == 0 {
        let paths: Vec<String> = args.paths.iter().map(|p| p.display().to_string()).collect();
        return Some(format!("no manifest found in {}", paths.join(", ")));
    }
    let classes: Vec<String> = loaded
        .snapshot
        .gateway_classes
        .iter()
        .map(|c| {
            format!(
                "{} ({})",
                c.metadata.name.as_deref().unwrap_or(""),
                c.spec.controller_name
            )
        })
        .collect();
    Some(if classes.is_empty() {
        format!("no GatewayClass with controllerName {ours} (no GatewayClass at all)")
    } else {
        format!(
            "no GatewayClass with controllerName {ours} (found: {})",
            classes.join(", ")
        )
    })
}
