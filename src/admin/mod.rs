//! Admin server.
