//! Providers.
