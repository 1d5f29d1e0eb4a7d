//! What the network lab reports: the data path and the packets on each of its links.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the network lab built for a run (`platform: network-lab`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkInfo {
    /// `host`, `bridge`, `host-gw`, `vxlan` or `macvlan`.
    pub path: String,
    /// On `macvlan`: the device the pod got (`ipvlan` where the kernel has it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_device: Option<String>,
    /// Where the load connected (node A's view) and where the server listened.
    pub target: String,
    pub server: String,
    /// Node A's address: the source the server sees.
    pub client: String,
    /// Conntrack bypassed with NOTRACK rules for the server's port.
    pub notrack: bool,
    /// Each sysctl asked for: `ok`, or why it was not set.
    pub sysctls: BTreeMap<String, String>,
    /// The served file's size (the response body), bytes.
    pub body_size: usize,
    /// Packets received and sent on the links only this path's traffic crosses
    /// (`b/wire`, and `b/br0`, `b/pod0`, `b/vx0` or `pod/mv0`), counted from the
    /// lab's start to the end of the run: which way the load went.
    #[serde(default)]
    pub links: BTreeMap<String, LinkPackets>,
}

/// A link's packet counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkPackets {
    pub rx: u64,
    pub tx: u64,
}
