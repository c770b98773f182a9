//! The incremental cache: what one translation keeps for the next (attachments, compiled
//! routes, statuses, order) and how it learns what moved.

pub(super) mod incremental;
pub(super) mod moved;
pub(super) mod order;
pub(super) mod parallel;
pub(super) mod reattach;
pub(super) mod relink;
pub(super) mod statuses;
