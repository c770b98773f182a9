//! Rules every phase of the translator shares: which object wins a conflict (precedence),
//! ReferenceGrants, Gateway API durations, where two lists differ.

pub(super) mod changed;
pub(super) mod duration;
pub mod precedence;
pub(super) mod refgrant;
