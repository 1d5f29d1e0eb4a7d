//! The network lab: named network namespaces and the links between them, so that a
//! client (node A) reaches a server over a chosen data path (plain wire, bridge with
//! DNAT, host-gw routing, VXLAN overlay, macvlan) on this machine alone.
//!
//! Everything is built inside namespaces this crate creates, with addresses from
//! 198.18.0.0/15 (RFC 2544 benchmarking space) only: nothing is ever added to the
//! root namespace, so a lab cannot disturb the machine it runs on. Namespaces are made
//! the way iproute2 makes them (bind mounts under `/run/netns`) so that `ip netns`
//! sees them and a killed run's leftovers can be found and swept by name.

mod error;
mod lab;
mod link;
mod ns;

pub use error::NetlabError;
pub use lab::{DataPath, Lab, PodDevice};
pub use ns::{sweep, Netns, NETNS_DIR};
