//! docs/configuration.md's flag reference is the command line's own definition: every
//! subcommand and flag clap knows, grouped as `--help` groups them, with defaults, environment
//! variables and help text. `UPDATE_GOLDEN=1` rewrites it from the code.

use std::fmt::Write as _;
use std::path::Path;

use clap::{ArgAction, CommandFactory};
use edgeplane::cli::Cli;

const BEGIN: &str = "<!-- configuration:begin (generated from the flag definitions; \
                     UPDATE_GOLDEN=1 cargo test --test cli configuration_reference) -->";
const END: &str = "<!-- configuration:end -->";

/// One table cell: one line, no column breaks.
fn cell(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The flag and its value, as `--help` spells them.
fn flag(arg: &clap::Arg) -> String {
    let value = match arg.get_action() {
        ArgAction::Set | ArgAction::Append => arg
            .get_value_names()
            .map(|v| v.iter().map(|n| format!(" <{n}>")).collect::<String>())
            .unwrap_or_else(|| format!(" <{}>", arg.get_id().as_str().to_uppercase())),
        _ => String::new(),
    };
    let short = arg
        .get_short()
        .map(|s| format!(", `-{s}`"))
        .unwrap_or_default();
    match arg.get_long() {
        Some(long) => format!("`--{long}{value}`{short}"),
        None => format!("`<{}>`", arg.get_id().as_str().to_uppercase()),
    }
}

/// What an argument does: its help, then its choices and aliases.
fn what(arg: &clap::Arg) -> String {
    let mut out = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let values: Vec<_> = arg
        .get_possible_values()
        .into_iter()
        .filter(|v| !v.is_hide_set())
        .collect();
    let is_flag = matches!(
        arg.get_action(),
        ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count
    );
    if !values.is_empty() && !is_flag {
        let list = values
            .iter()
            .map(|v| match v.get_help() {
                Some(h) => format!("`{}` ({h})", v.get_name()),
                None => format!("`{}`", v.get_name()),
            })
            .collect::<Vec<_>>()
            .join(", ");
        let _ = write!(out, ". Values: {list}");
    }
    if let Some(aliases) = arg.get_visible_aliases() {
        let list = aliases
            .iter()
            .map(|a| format!("`--{a}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = write!(out, ". Alias: {list}");
    }
    cell(&out)
}

fn default(arg: &clap::Arg) -> String {
    let values: Vec<_> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .filter(|v| !v.is_empty())
        .collect();
    let is_flag = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
    if values.is_empty() || is_flag {
        return String::new();
    }
    format!("`{}`", values.join(","))
}

fn env(arg: &clap::Arg) -> String {
    arg.get_env()
        .map(|e| format!("`{}`", e.to_string_lossy()))
        .unwrap_or_default()
}

/// One command's section: its about text and a table per help heading, in `--help`'s order.
fn section(out: &mut String, path: &str, cmd: &clap::Command, globals: bool) {
    let _ = writeln!(out, "### `{path}`\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", cell(&about.to_string()));
    }
    let mut groups: Vec<(String, Vec<&clap::Arg>)> = Vec::new();
    for arg in cmd.get_arguments() {
        let builtin = matches!(arg.get_action(), ArgAction::Help | ArgAction::HelpShort)
            || matches!(arg.get_action(), ArgAction::Version);
        if builtin || arg.is_hide_set() || arg.is_global_set() != globals {
            continue;
        }
        let heading = arg.get_help_heading().unwrap_or("Options").to_owned();
        match groups.iter_mut().find(|(h, _)| *h == heading) {
            Some((_, args)) => args.push(arg),
            None => groups.push((heading, vec![arg])),
        }
    }
    // `--help` lists the arguments without a heading first, then each heading in order.
    groups.sort_by_key(|(h, _)| h != "Options");
    for (heading, args) in groups {
        let _ = writeln!(
            out,
            "**{heading}**\n\n| Flag | Default | Environment | What |\n|---|---|---|---|"
        );
        for arg in args {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                flag(arg),
                default(arg),
                env(arg),
                what(arg)
            );
        }
        out.push('\n');
    }
}

fn walk(out: &mut String, path: &str, cmd: &clap::Command) {
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" || sub.is_hide_set() {
            continue;
        }
        let path = format!("{path} {}", sub.get_name());
        if sub.has_subcommands() {
            walk(out, &path, sub);
        } else {
            section(out, &path, sub, false);
        }
    }
}

/// The reference as the flag definitions describe it.
pub fn generated() -> String {
    let mut cmd = Cli::command();
    cmd.build();
    let mut out = String::new();
    section(&mut out, "edgeplane", &cmd, true);
    walk(&mut out, "edgeplane", &cmd);
    out
}

#[test]
fn configuration_reference_matches_the_flag_definitions() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
    let doc = std::fs::read_to_string(&path).expect("docs/configuration.md");
    let (Some(start), Some(end)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("docs/configuration.md has no reference between {BEGIN:?} and {END:?}");
    };
    let reference = &doc[start + BEGIN.len()..end];
    let want = generated();
    if reference.trim() == want.trim() {
        return;
    }
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let updated = format!("{}{BEGIN}\n\n{want}{}", &doc[..start], &doc[end..]);
        std::fs::write(&path, updated).expect("write docs/configuration.md");
        return;
    }
    panic!(
        "docs/configuration.md's flag reference differs from the flag definitions; run \
         UPDATE_GOLDEN=1 cargo test --test cli configuration_reference, or put this in it:\n{want}"
    );
}
