//! What clap cannot say about the command line by itself: that `serve` needs `--config-dir
//! DIR` or `--kubernetes` (in those words), and which environment variable `echo` reads its
//! namespace from when POD_NAMESPACE is unset.

use clap::{CommandFactory, Parser};

use super::{Cli, Command};

/// What `serve` without `--config-dir` or `--kubernetes` says.
pub(super) const SERVE_NEEDS_A_SOURCE: &str =
    "serve needs --config-dir DIR (standalone: a directory of manifests) or --kubernetes \
     (watch a cluster)";

impl Cli {
    /// Parses the command line, exiting with clap's usage error (code 2) on bad arguments,
    /// `serve` without a source included.
    pub fn parse_checked() -> Cli {
        Self::try_parse_checked(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// [`Parser::try_parse_from`] plus what clap cannot word: `serve` needs `--config-dir DIR`
    /// or `--kubernetes`.
    pub fn try_parse_checked<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let cli = Self::try_parse_from(args)?;
        if let Command::Serve(s) = &cli.command {
            if s.config_dir.is_none() && !s.kubernetes {
                let mut cmd = Self::command();
                cmd.build();
                let serve = cmd
                    .find_subcommand_mut("serve")
                    .expect("serve is a subcommand");
                return Err(serve.error(
                    clap::error::ErrorKind::MissingRequiredArgument,
                    SERVE_NEEDS_A_SOURCE,
                ));
            }
        }
        Ok(cli)
    }
}

/// The namespace `echo` reports: `--namespace` or POD_NAMESPACE, else NAMESPACE, else
/// `default` (empty values count as unset).
pub(super) fn echo_namespace(flag: Option<String>, fallback: Option<String>) -> String {
    [flag, fallback]
        .into_iter()
        .flatten()
        .find(|n| !n.trim().is_empty())
        .unwrap_or_else(|| "default".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_help_groups_flags_by_mode() {
        let mut cmd = Cli::command();
        cmd.build();
        let serve = cmd.find_subcommand_mut("serve").unwrap();
        let heading = |id: &str| {
            serve
                .get_arguments()
                .find(|a| a.get_id() == id)
                .unwrap_or_else(|| panic!("no {id}"))
                .get_help_heading()
                .map(str::to_owned)
        };
        for (id, want) in [
            ("config_dir", Some("Standalone")),
            ("crds", Some("Standalone")),
            ("port_map", Some("Standalone")),
            ("kubernetes", Some("Kubernetes")),
            ("namespace", Some("Kubernetes")),
            ("watch_retry_max", Some("Kubernetes")),
            ("webhook_addr", Some("Kubernetes")),
            ("webhook_max_connections", Some("Kubernetes")),
            ("admin_addr", Some("Admin")),
            ("drain_timeout", Some("Proxy")),
            ("idle_timeout", Some("Proxy")),
            ("path_backslash", Some("Proxy")),
            ("retry_budget_percent", Some("Resilience")),
            ("outlier_consecutive_failures", Some("Resilience")),
            ("max_upstream_requests", Some("Resilience")),
            ("controller_name", None),
        ] {
            assert_eq!(heading(id).as_deref(), want, "{id}");
        }
    }

    #[test]
    fn echo_namespace_prefers_the_flag_then_namespace_then_default() {
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(echo_namespace(some("a"), some("b")), "a");
        assert_eq!(echo_namespace(None, some("b")), "b");
        assert_eq!(echo_namespace(some(""), some("b")), "b");
        assert_eq!(echo_namespace(None, None), "default");
    }
}
