//! Rules every phase of the translator shares: which object wins a conflict (precedence),
//! ReferenceGrants, Gateway API durations, where two lists differ, work split over threads.

pub(super) mod changed;
pub(super) mod duration;
pub(super) mod parts;
pub mod precedence;
pub(super) mod refgrant;
