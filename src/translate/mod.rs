//! The pure translator: `Snapshot -> (RouteTable, StatusReport)`. Every Gateway API rule lives
//! here (class ownership, listeners, attachment, ReferenceGrants, backends, filters, conditions).
//! No I/O, no tokio, no kube client.

use std::net::IpAddr;

use crate::snapshot::Snapshot;
use crate::status::StatusReport;
use crate::table::RouteTable;

/// The controller name a GatewayClass must carry in `spec.controllerName` for us to own it.
pub const DEFAULT_CONTROLLER_NAME: &str = "edgeplane.dev/gateway-controller";

/// Inputs of a translation besides the snapshot.
#[derive(Debug, Clone)]
pub struct TranslateOptions {
    /// GatewayClasses with this `spec.controllerName` are ours.
    pub controller_name: String,
    /// Address listeners bind on when a Gateway has no `IPAddress` in `spec.addresses`.
    pub bind_address: IpAddr,
    /// Stamped as `lastTransitionTime` on new conditions (the caller carries older times over).
    pub now: jiff::Timestamp,
    /// Generation number of the table being built.
    pub generation: u64,
}

/// The output of one translation.
#[derive(Debug)]
pub struct Translation {
    pub table: RouteTable,
    pub status: StatusReport,
}

/// Translates a snapshot into a route table and the status of every owned object.
pub fn translate(snapshot: &Snapshot, options: &TranslateOptions) -> Translation {
    let _ = (snapshot, options);
    todo!("translator")
}
