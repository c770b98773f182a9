//! Table building: the compiled routes and listeners assembled into the `RouteTable`, one
//! `ListenerTable` per socket.

pub(super) mod hosts;
pub(super) mod l4;
pub(super) mod table;
