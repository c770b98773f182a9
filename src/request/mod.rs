//! Request hygiene applied before routing: the written path policy ([`path`]) and Host /
//! `:authority` validation ([`host`]). Pure: strings in, decisions out; no I/O, no hyper.
//! The proxy calls these once per request; the translator uses the same rules to validate
//! configured hostnames and paths; the fuzz targets exercise them directly.

pub mod host;
pub mod path;

pub use host::{parse_authority, validate_hostname, Authority, HostError};
pub use path::{
    normalize_path, validate_config_path, PathError, PathPolicy, SegmentPolicy, SlashPolicy,
};
