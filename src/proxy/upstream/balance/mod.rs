//! Endpoint choice and the state behind it, shared by every table so it survives table swaps:
//! balancing per Service (least request, round robin, consistent hash), passive outlier
//! detection per endpoint, circuit breaking and the retry budget per Service. Endpoint state is
//! keyed by address, Service state by Service port, never by route: routes sharing a Service
//! share it. The registry itself is `backends`.

mod backends;
mod breaker;
mod endpoints;
mod outlier;
mod overrides;
mod pick;
mod ring;

pub use backends::*;
pub use breaker::BreakerLimits;
pub use endpoints::{ConnGuard, Endpoints};
pub use outlier::OutlierOptions;
pub(crate) use ring::hash_key;
