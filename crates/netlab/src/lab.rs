//! A lab: node A (the client's node) and node B joined by a veth "wire", and, for
//! every data path but [`DataPath::Host`], a pod namespace behind B where the server
//! runs, reached the way a Kubernetes CNI of that kind would reach it.
//!
//! Addresses (all in 198.18.0.0/15):
//! - wire: A 198.18.0.1/24, B 198.18.0.2/24;
//! - pod subnet 198.18.10.0/24: B's side (bridge or veth) 198.18.10.1, the pod 198.18.10.2;
//! - VXLAN overlay (id 42, UDP 4789): A 198.18.20.1/24, B 198.18.20.2/24, its tunnel
//!   between second wire addresses A 198.18.1.1/24 and B 198.18.1.2/24; both ways of
//!   a connection from A's wire address to the pod cross the tunnel.

use std::env;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::link::{sysctl, sysctl_if_present, Netlink, Route, Vxlan};
use crate::{NetlabError, Netns};

/// Node A's wire address: the source the server sees on every path (the bridge path
/// only DNATs the destination; masquerade is for the pod's own outgoing traffic).
const NODE_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// Node B's wire address.
const NODE_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const WIRE_PREFIX: u8 = 24;
const POD_SUBNET: Ipv4Addr = Ipv4Addr::new(198, 18, 10, 0);
const POD_GATEWAY: Ipv4Addr = Ipv4Addr::new(198, 18, 10, 1);
const POD: Ipv4Addr = Ipv4Addr::new(198, 18, 10, 2);
const VXLAN_A: Ipv4Addr = Ipv4Addr::new(198, 18, 20, 1);
const VXLAN_B: Ipv4Addr = Ipv4Addr::new(198, 18, 20, 2);
/// The tunnel's endpoints: second addresses on the wire, so that B can route A's wire
/// address (the client's source) back through the tunnel without routing the tunnel's
/// own packets into itself.
const UNDERLAY_A: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
const UNDERLAY_B: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
const VXLAN_ID: u32 = 42;
const VXLAN_PORT: u16 = 4789;
/// The port the server listens on, in B (Host) or in the pod.
const SERVER_PORT: u16 = 80;
/// The port B maps to the pod's port 80 on the bridge path (a NodePort's role).
const MAPPED_PORT: u16 = 8080;

const WIRE: &str = "wire";
const POD_VETH_B: &str = "pod0";
const POD_VETH: &str = "eth0";
const BRIDGE: &str = "br0";
const VXLAN: &str = "vx0";
const SIBLING: &str = "mv0";

/// How node A's traffic reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataPath {
    /// The server runs in node B itself, on its wire address (host networking).
    Host,
    /// The pod sits on a bridge in B; A connects to B's port 8080, DNATed to the
    /// pod's port 80, the pod subnet masqueraded on the way out (needs `nft`).
    Bridge,
    /// A routes the pod subnet through B's wire address; B forwards (flannel host-gw).
    HostGw,
    /// A routes the pod subnet through a VXLAN overlay to B; B forwards.
    Vxlan,
    /// The pod has an IPVLAN or macvlan device on B's wire, on A's L2 segment.
    Macvlan,
}

/// What the pod's device on B's wire turned out to be on [`DataPath::Macvlan`]: IPVLAN
/// (L2) is tried first, macvlan (bridge mode) is the fallback when the kernel lacks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodDevice {
    /// IPVLAN in L2 mode.
    IpVlan,
    /// macvlan in bridge mode.
    MacVlan,
}

/// A built lab; dropping it removes its namespaces (and with them every link).
#[derive(Debug)]
pub struct Lab {
    // Field order is drop order: A first, so its wire (and the VXLAN on it) cascades.
    a: Netns,
    b: Netns,
    pod: Option<Netns>,
    path: DataPath,
    server: SocketAddrV4,
    target: SocketAddrV4,
    pod_device: Option<PodDevice>,
}

impl Lab {
    /// Builds the lab for `path`, its namespaces named `<prefix>-<pid>-a`, `-b` and
    /// `-pod` (the pid lets [`crate::sweep`] tell a killed run's leftovers from a live
    /// run's namespaces).
    ///
    /// # Errors
    /// [`NetlabError::MissingTool`] for `Bridge` without `nft`; otherwise the first
    /// namespace, link, address, route, sysctl or nft step that failed. Whatever was
    /// built before the failure is removed.
    pub fn build(prefix: &str, path: DataPath) -> Result<Lab, NetlabError> {
        let nft = match path {
            DataPath::Bridge => Some(find_in_path("nft").ok_or_else(|| {
                NetlabError::MissingTool(
                    "nft (the bridge path's DNAT and masquerade): install nftables".to_string(),
                )
            })?),
            _ => None,
        };
        let name = |role: &str| format!("{prefix}-{}-{role}", std::process::id());
        let a = Netns::create(&name("a"))?;
        let b = Netns::create(&name("b"))?;
        let pod = match path {
            DataPath::Host => None,
            _ => Some(Netns::create(&name("pod"))?),
        };

        // The wire, and what every node needs whatever the path.
        a.run(|| -> Result<(), NetlabError> {
            let nl = Netlink::open()?;
            nl.veth(WIRE, WIRE, &b)?;
            nl.up("lo")?;
            nl.address(WIRE, NODE_A, WIRE_PREFIX)?;
            nl.up(WIRE)
        })??;
        b.run(|| -> Result<(), NetlabError> {
            let nl = Netlink::open()?;
            nl.up("lo")?;
            nl.address(WIRE, NODE_B, WIRE_PREFIX)?;
            nl.up(WIRE)
        })??;
        for ns in [Some(&a), Some(&b), pod.as_ref()].into_iter().flatten() {
            ns.run(|| -> Result<(), NetlabError> {
                // 0 already on this kernel, but a strict default would drop the VXLAN
                // path's replies and the macvlan path's on-link traffic.
                sysctl("net/ipv4/conf/all/rp_filter", "0")?;
                sysctl("net/ipv4/conf/default/rp_filter", "0")?;
                // 1 in every new namespace: bridged frames would go through the IP hooks.
                sysctl_if_present("net/bridge/bridge-nf-call-iptables", "0")
            })??;
        }

        let mut pod_device = None;
        let (server, target) = match (&path, &pod) {
            (DataPath::Host, _) | (_, None) => {
                let at = SocketAddrV4::new(NODE_B, SERVER_PORT);
                (at, at)
            }
            (DataPath::Bridge, Some(pod)) => {
                pod_veth(&b, pod)?;
                b.run(|| -> Result<(), NetlabError> {
                    let nl = Netlink::open()?;
                    nl.bridge(BRIDGE)?;
                    nl.set_master(POD_VETH_B, BRIDGE)?;
                    nl.address(BRIDGE, POD_GATEWAY, WIRE_PREFIX)?;
                    nl.up(BRIDGE)?;
                    nl.up(POD_VETH_B)?;
                    sysctl("net/ipv4/ip_forward", "1")
                })??;
                pod_default_route(pod)?;
                if let Some(nft) = nft {
                    nft_batch(&b, &nft, &bridge_nat_rules())?;
                }
                let server = SocketAddrV4::new(POD, SERVER_PORT);
                (server, SocketAddrV4::new(NODE_B, MAPPED_PORT))
            }
            (DataPath::HostGw, Some(pod)) => {
                pod_veth(&b, pod)?;
                b.run(|| -> Result<(), NetlabError> {
                    let nl = Netlink::open()?;
                    nl.address(POD_VETH_B, POD_GATEWAY, WIRE_PREFIX)?;
                    nl.up(POD_VETH_B)?;
                    sysctl("net/ipv4/ip_forward", "1")
                })??;
                pod_default_route(pod)?;
                a.run(|| {
                    Netlink::open()?.route(&Route {
                        dst: POD_SUBNET,
                        prefix_len: 24,
                        via: Some(NODE_B),
                        dev: None,
                        src: None,
                    })
                })??;
                let at = SocketAddrV4::new(POD, SERVER_PORT);
                (at, at)
            }
            (DataPath::Vxlan, Some(pod)) => {
                pod_veth(&b, pod)?;
                for (ns, local, remote, overlay) in [
                    (&a, UNDERLAY_A, UNDERLAY_B, VXLAN_A),
                    (&b, UNDERLAY_B, UNDERLAY_A, VXLAN_B),
                ] {
                    ns.run(|| -> Result<(), NetlabError> {
                        let nl = Netlink::open()?;
                        nl.address(WIRE, local, WIRE_PREFIX)?;
                        nl.vxlan(&Vxlan {
                            name: VXLAN,
                            id: VXLAN_ID,
                            local,
                            remote,
                            port: VXLAN_PORT,
                            dev: WIRE,
                        })?;
                        nl.address(VXLAN, overlay, 24)?;
                        nl.up(VXLAN)
                    })??;
                }
                b.run(|| -> Result<(), NetlabError> {
                    let nl = Netlink::open()?;
                    nl.address(POD_VETH_B, POD_GATEWAY, WIRE_PREFIX)?;
                    nl.up(POD_VETH_B)?;
                    // Replies to A's wire address go back over the overlay too: the
                    // tunnel's own packets go to A's underlay address, which this /32
                    // does not cover (one covering them loops the tunnel: measured).
                    nl.route(&Route {
                        dst: NODE_A,
                        prefix_len: 32,
                        via: Some(VXLAN_A),
                        dev: Some(VXLAN),
                        src: None,
                    })?;
                    sysctl("net/ipv4/ip_forward", "1")
                })??;
                pod_default_route(pod)?;
                a.run(|| {
                    // Source A's wire address, as a node's own traffic to a pod would be.
                    Netlink::open()?.route(&Route {
                        dst: POD_SUBNET,
                        prefix_len: 24,
                        via: Some(VXLAN_B),
                        dev: Some(VXLAN),
                        src: Some(NODE_A),
                    })
                })??;
                let at = SocketAddrV4::new(POD, SERVER_PORT);
                (at, at)
            }
            (DataPath::Macvlan, Some(pod)) => {
                let device = b.run(|| -> Result<PodDevice, NetlabError> {
                    let nl = Netlink::open()?;
                    let device = nl.sibling(SIBLING, WIRE)?;
                    nl.move_to(SIBLING, pod)?;
                    Ok(device)
                })??;
                pod_device = Some(device);
                pod.run(|| -> Result<(), NetlabError> {
                    let nl = Netlink::open()?;
                    nl.up("lo")?;
                    nl.address(SIBLING, POD, 24)?;
                    nl.up(SIBLING)?;
                    nl.route(&Route {
                        dst: Ipv4Addr::new(198, 18, 0, 0),
                        prefix_len: WIRE_PREFIX,
                        via: None,
                        dev: Some(SIBLING),
                        src: None,
                    })
                })??;
                // The pod is on A's segment: A reaches its subnet on-link, no router.
                a.run(|| {
                    Netlink::open()?.route(&Route {
                        dst: POD_SUBNET,
                        prefix_len: 24,
                        via: None,
                        dev: Some(WIRE),
                        src: None,
                    })
                })??;
                let at = SocketAddrV4::new(POD, SERVER_PORT);
                (at, at)
            }
        };
        Ok(Lab {
            a,
            b,
            pod,
            path,
            server,
            target,
            pod_device,
        })
    }

    /// The data path this lab was built for.
    pub fn data_path(&self) -> DataPath {
        self.path
    }

    /// Node A, where the client (the load's workers) must run.
    pub fn client_ns(&self) -> &Netns {
        &self.a
    }

    /// Node B.
    pub fn node_b(&self) -> &Netns {
        &self.b
    }

    /// The pod's namespace, for every path but `Host`.
    pub fn pod_ns(&self) -> Option<&Netns> {
        self.pod.as_ref()
    }

    /// Where the server must run: node B for `Host`, else the pod.
    pub fn server_ns(&self) -> &Netns {
        self.pod.as_ref().unwrap_or(&self.b)
    }

    /// The address the server must listen on, inside [`Self::server_ns`].
    pub fn server_addr(&self) -> SocketAddrV4 {
        self.server
    }

    /// The address the client in node A connects to (B's mapped port for `Bridge`).
    pub fn target(&self) -> SocketAddrV4 {
        self.target
    }

    /// The URL the client in node A must use.
    pub fn url(&self) -> String {
        format!("http://{}/", self.target)
    }

    /// Node A's address, the source the server sees on every path built here.
    pub fn client_addr(&self) -> Ipv4Addr {
        NODE_A
    }

    /// On `Macvlan`, which device the pod got (IPVLAN if the kernel has it).
    pub fn pod_device(&self) -> Option<PodDevice> {
        self.pod_device
    }

    /// The links that only this data path's traffic crosses, as `(node, link)`: node
    /// B's wire on every path, and the device that makes the path what it is (`br0`,
    /// `pod0` for host-gw, `vx0`, the pod's `mv0`). Their packet counters prove which
    /// way the load went.
    pub fn path_links(&self) -> Vec<(&'static str, &'static str)> {
        let mut v = vec![("b", WIRE)];
        match self.path {
            DataPath::Host => {}
            DataPath::Bridge => v.push(("b", BRIDGE)),
            DataPath::HostGw => v.push(("b", POD_VETH_B)),
            DataPath::Vxlan => v.push(("b", VXLAN)),
            DataPath::Macvlan => v.push(("pod", SIBLING)),
        }
        v
    }

    /// Packets received and sent so far on each of [`Self::path_links`], named
    /// `node/link`: `(name, rx, tx)`.
    ///
    /// # Errors
    /// A namespace could not be entered or a link read.
    pub fn path_packets(&self) -> Result<Vec<(String, u64, u64)>, NetlabError> {
        self.path_links()
            .into_iter()
            .map(|(node, link)| {
                let ns = if node == "pod" {
                    self.server_ns()
                } else {
                    &self.b
                };
                let (rx, tx) = ns.run(|| Netlink::open()?.packets(link))??;
                Ok((format!("{node}/{link}"), rx, tx))
            })
            .collect()
    }

    /// S2's conntrack bypass: `notrack` for the server's port, both ways, in every
    /// namespace of the lab (a raw-priority nftables table, removed with the
    /// namespace).
    ///
    /// # Errors
    /// On [`DataPath::Bridge`]: refused, because its DNAT needs conntrack for the
    /// replies (measured: with `notrack` no reply reaches the client). Otherwise
    /// `nft` missing or failing.
    pub fn notrack(&self) -> Result<(), NetlabError> {
        if self.path == DataPath::Bridge {
            return Err(NetlabError::Unsupported(
                "notrack on the bridge path: its DNAT needs conntrack to translate the replies back (use notrack: false for bridge, or leave bridge out)".into(),
            ));
        }
        let nft = find_in_path("nft").ok_or_else(|| {
            NetlabError::MissingTool("nft (the notrack rules): install nftables".to_string())
        })?;
        for ns in self.namespaces() {
            nft_batch(ns, &nft, &notrack_rules())?;
        }
        Ok(())
    }

    /// Sets each `(key, value)` sysctl (dotted, `net.ipv4.tcp_tw_reuse`) in every
    /// namespace of the lab, and says per key what happened: `Ok` when every namespace
    /// took it, else why not. Only `net.*` keys are tried: they are the ones a network
    /// namespace has its own copy of; anything else (`fs.file-max`) would change the
    /// whole machine, so it is refused and left to the user.
    pub fn tune(&self, sysctls: &[(String, String)]) -> Vec<(String, Result<(), String>)> {
        sysctls
            .iter()
            .map(|(key, value)| {
                let outcome = if !key.starts_with("net.") {
                    Err("not per network namespace: the lab changes nothing outside its namespaces (set it on the host yourself)".to_string())
                } else {
                    let slashed = key.replace('.', "/");
                    self.namespaces()
                        .map(|ns| match ns.run(|| sysctl(&slashed, value)) {
                            Ok(Ok(())) => Ok(()),
                            Ok(Err(e)) => Err(e.with_causes()),
                            Err(e) => Err(e.with_causes()),
                        })
                        .find(Result::is_err)
                        .unwrap_or(Ok(()))
                };
                (key.clone(), outcome)
            })
            .collect()
    }

    /// The lab's namespaces, node A first.
    pub fn namespaces(&self) -> impl Iterator<Item = &Netns> {
        [Some(&self.a), Some(&self.b), self.pod.as_ref()]
            .into_iter()
            .flatten()
    }
}

/// The veth between B (`pod0`) and the pod (`eth0`, 198.18.10.2/24, up, with `lo`).
fn pod_veth(b: &Netns, pod: &Netns) -> Result<(), NetlabError> {
    b.run(|| Netlink::open()?.veth(POD_VETH_B, POD_VETH, pod))??;
    pod.run(|| -> Result<(), NetlabError> {
        let nl = Netlink::open()?;
        nl.up("lo")?;
        nl.address(POD_VETH, POD, 24)?;
        nl.up(POD_VETH)
    })?
}

/// The pod's default route, through B's side of the pod subnet.
fn pod_default_route(pod: &Netns) -> Result<(), NetlabError> {
    pod.run(|| {
        Netlink::open()?.route(&Route {
            dst: Ipv4Addr::UNSPECIFIED,
            prefix_len: 0,
            via: Some(POD_GATEWAY),
            dev: None,
            src: None,
        })
    })?
}

/// B's NAT for the bridge path: port 8080 on any of B's addresses to the pod's port 80,
/// and the pod subnet masqueraded when it leaves through anything but the bridge.
///
/// No `notrack` here: the reply's reverse NAT needs conntrack (measured, see the design).
fn bridge_nat_rules() -> String {
    format!(
        "table ip netlab {{\n\
         \tchain prerouting {{\n\
         \t\ttype nat hook prerouting priority dstnat; policy accept;\n\
         \t\ttcp dport {MAPPED_PORT} dnat to {POD}:{SERVER_PORT}\n\
         \t}}\n\
         \tchain postrouting {{\n\
         \t\ttype nat hook postrouting priority srcnat; policy accept;\n\
         \t\tip saddr {POD_SUBNET}/24 oifname != \"{BRIDGE}\" masquerade\n\
         \t}}\n\
         }}\n"
    )
}

/// Conntrack bypass for the server's port (S2's NOTRACK rules), for one namespace.
fn notrack_rules() -> String {
    format!(
        "table inet netlab_notrack {{\n\
         \tchain prerouting {{\n\
         \t\ttype filter hook prerouting priority raw; policy accept;\n\
         \t\ttcp dport {SERVER_PORT} notrack\n\
         \t\ttcp sport {SERVER_PORT} notrack\n\
         \t}}\n\
         \tchain output {{\n\
         \t\ttype filter hook output priority raw; policy accept;\n\
         \t\ttcp dport {SERVER_PORT} notrack\n\
         \t\ttcp sport {SERVER_PORT} notrack\n\
         \t}}\n\
         }}\n"
    )
}

/// Runs one `nft -f -` batch inside `ns` (spawned from a thread that entered it).
fn nft_batch(ns: &Netns, nft: &Path, batch: &str) -> Result<(), NetlabError> {
    let mut child = ns.spawn(
        Command::new(nft)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    )?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(batch.as_bytes())
            .map_err(|e| NetlabError::io(format!("write the nft batch in {}", ns.name()), e))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| NetlabError::io(format!("wait for nft in {}", ns.name()), e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetlabError::ToolFailed {
            tool: "nft",
            ns: ns.name().to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The first executable file named `program` in `$PATH`.
fn find_in_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nat_rules_map_the_port_to_the_pod() {
        let rules = bridge_nat_rules();
        assert!(
            rules.contains("tcp dport 8080 dnat to 198.18.10.2:80"),
            "{rules}"
        );
        assert!(rules.contains("ip saddr 198.18.10.0/24 oifname != \"br0\" masquerade"));
    }
}
