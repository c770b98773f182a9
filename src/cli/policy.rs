//! Flags of the path policy (docs/security.md): each ambiguous path construct is rejected with
//! 400 unless a flag allows it.

use clap::{Args, ValueEnum};

use crate::request::{PathPolicy, SegmentPolicy, SlashPolicy};

/// `reject` or `allow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Choice {
    Reject,
    Allow,
}

/// `reject`, `allow` or `merge`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SlashChoice {
    Reject,
    Allow,
    Merge,
}

/// The path policy flags of `serve`.
#[derive(Debug, Clone, Args)]
pub struct PathPolicyArgs {
    /// `%2F` in a request path: reject (400) or allow (forwarded as sent).
    #[arg(long, value_enum, default_value = "reject")]
    pub path_encoded_slash: Choice,
    /// `\` and `%5C` in a request path: reject (400) or allow (forwarded as sent).
    #[arg(long, value_enum, default_value = "reject")]
    pub path_backslash: Choice,
    /// `;` (path parameters) in a request path: reject (400) or allow (forwarded as sent).
    #[arg(long, value_enum, default_value = "reject")]
    pub path_parameters: Choice,
    /// `//` (empty segments) in a request path: reject (400), allow (forwarded as sent) or
    /// merge (`//` becomes `/` before matching and forwarding).
    #[arg(long, value_enum, default_value = "reject")]
    pub path_empty_segments: SlashChoice,
}

impl PathPolicyArgs {
    /// The policy these flags describe.
    pub fn policy(&self) -> PathPolicy {
        let segment = |c: Choice| match c {
            Choice::Reject => SegmentPolicy::Reject,
            Choice::Allow => SegmentPolicy::Allow,
        };
        PathPolicy {
            encoded_slash: segment(self.path_encoded_slash),
            backslash: segment(self.path_backslash),
            path_parameters: segment(self.path_parameters),
            empty_segments: match self.path_empty_segments {
                SlashChoice::Reject => SlashPolicy::Reject,
                SlashChoice::Allow => SlashPolicy::Allow,
                SlashChoice::Merge => SlashPolicy::Merge,
            },
        }
    }
}
