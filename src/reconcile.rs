//! Reconcile loop.
