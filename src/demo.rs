//! Embedded quickstart.
