//! Links, addresses, routes and sysctls inside one namespace, over rtnetlink.
//!
//! A [`Netlink`] is opened on a thread that entered the namespace (see
//! [`crate::Netns::run`]): the socket belongs to the namespace it was opened in, so every
//! request made through it acts there. Each one carries its own single-threaded tokio
//! runtime: lab building is a handful of requests, not a hot path.

use std::fs;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;

use futures_util::stream::TryStreamExt;
use rtnetlink::packet_route::link::{InfoData, InfoKind, InfoVeth, IpVlanMode, MacVlanMode};
use rtnetlink::packet_route::route::RouteScope;
use rtnetlink::{
    Handle, LinkBridge, LinkIpVlan, LinkMacVlan, LinkMessageBuilder, LinkUnspec, LinkVeth,
    LinkVxlan, RouteMessageBuilder,
};
use tokio::runtime::Runtime;

use crate::{NetlabError, Netns, PodDevice};

/// An rtnetlink connection in the calling thread's network namespace.
pub(crate) struct Netlink {
    rt: Runtime,
    handle: Handle,
}

/// Settings of a unicast VXLAN device over a parent link.
pub(crate) struct Vxlan<'a> {
    pub name: &'a str,
    pub id: u32,
    pub local: Ipv4Addr,
    pub remote: Ipv4Addr,
    pub port: u16,
    pub dev: &'a str,
}

impl Netlink {
    /// Opens a connection in the calling thread's namespace.
    pub(crate) fn open() -> Result<Netlink, NetlabError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(|e| NetlabError::io("start a tokio runtime for netlink", e))?;
        let handle = rt
            .block_on(async {
                let (connection, handle, _) = rtnetlink::new_connection()?;
                tokio::spawn(connection);
                Ok::<_, io::Error>(handle)
            })
            .map_err(|e| NetlabError::io("open a netlink socket", e))?;
        Ok(Netlink { rt, handle })
    }

    /// The link `name`, as the kernel describes it.
    fn link(&self, name: &str) -> Result<rtnetlink::packet_route::link::LinkMessage, NetlabError> {
        let h = self.handle.clone();
        let found = self.rt.block_on(async move {
            h.link()
                .get()
                .match_name(name.to_string())
                .execute()
                .try_next()
                .await
        });
        match found {
            Ok(Some(link)) => Ok(link),
            Ok(None) => Err(NetlabError::NoSuchLink(name.to_string())),
            // The kernel answers ENODEV for a name it does not know.
            Err(e) if is_errno(&e, rustix::io::Errno::NODEV) => {
                Err(NetlabError::NoSuchLink(name.to_string()))
            }
            Err(e) => Err(NetlabError::netlink(format!("get link {name}"), e)),
        }
    }

    /// The index of the link `name`.
    pub(crate) fn index(&self, name: &str) -> Result<u32, NetlabError> {
        Ok(self.link(name)?.header.index)
    }

    /// The packets link `name` has received and sent: `(rx, tx)`.
    pub(crate) fn packets(&self, name: &str) -> Result<(u64, u64), NetlabError> {
        use rtnetlink::packet_route::link::LinkAttribute;
        Ok(self
            .link(name)?
            .attributes
            .iter()
            .find_map(|a| match a {
                LinkAttribute::Stats64(s) => Some((s.rx_packets, s.tx_packets)),
                _ => None,
            })
            .unwrap_or((0, 0)))
    }

    fn add(
        &self,
        what: String,
        msg: rtnetlink::packet_route::link::LinkMessage,
    ) -> Result<(), NetlabError> {
        self.link_request(what, msg, true)
    }

    fn set(
        &self,
        what: String,
        msg: rtnetlink::packet_route::link::LinkMessage,
    ) -> Result<(), NetlabError> {
        self.link_request(what, msg, false)
    }

    /// Creates a link (`add`) or changes one, and waits for the kernel's answer.
    fn link_request(
        &self,
        what: String,
        msg: rtnetlink::packet_route::link::LinkMessage,
        add: bool,
    ) -> Result<(), NetlabError> {
        let h = self.handle.clone();
        self.rt
            .block_on(async move {
                if add {
                    h.link().add(msg).execute().await
                } else {
                    h.link().set(msg).execute().await
                }
            })
            .map_err(|e| NetlabError::netlink(what, e))
    }

    /// Creates the veth pair `name` (here) ↔ `peer` (created directly in `peer_ns`).
    ///
    /// `peer_ns` is borrowed for the whole request, so its fd cannot be closed and its
    /// number reused by another namespace before the kernel has read it.
    pub(crate) fn veth(&self, name: &str, peer: &str, peer_ns: &Netns) -> Result<(), NetlabError> {
        check_ifname(name)?;
        check_ifname(peer)?;
        let peer_msg = LinkUnspec::new_with_name(peer)
            .setns_by_fd(peer_ns.as_fd().as_raw_fd())
            .build();
        let msg = LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
            .name(name.to_string())
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer_msg)))
            .build();
        self.add(
            format!("add veth {name} <-> {peer} in {}", peer_ns.name()),
            msg,
        )
    }

    /// Creates the bridge `name`, with bridge netfilter off (its frames then skip the
    /// IP hooks, as on a node without `br_netfilter` rules).
    pub(crate) fn bridge(&self, name: &str) -> Result<(), NetlabError> {
        check_ifname(name)?;
        let msg = LinkBridge::new(name).nf_call_iptables(false).build();
        self.add(format!("add bridge {name}"), msg)
    }

    /// Creates a unicast VXLAN device.
    pub(crate) fn vxlan(&self, v: &Vxlan<'_>) -> Result<(), NetlabError> {
        check_ifname(v.name)?;
        let dev = self.index(v.dev)?;
        let msg = LinkVxlan::new(v.name, v.id)
            .local(v.local)
            .remote(v.remote)
            .port(v.port)
            .dev(dev)
            .build();
        self.add(
            format!("add vxlan {} id {} on {}", v.name, v.id, v.dev),
            msg,
        )
    }

    /// Creates `name` on `parent`: IPVLAN (L2) if the kernel has it, else macvlan in
    /// bridge mode (EOPNOTSUPP: IPVLAN not built in); returns which one it made.
    pub(crate) fn sibling(&self, name: &str, parent: &str) -> Result<PodDevice, NetlabError> {
        check_ifname(name)?;
        let parent_index = self.index(parent)?;
        let ipvlan = LinkIpVlan::new(name, parent_index, IpVlanMode::L2).build();
        match self.add(format!("add ipvlan {name} on {parent}"), ipvlan) {
            Ok(()) => Ok(PodDevice::IpVlan),
            Err(e) if e.netlink_errno() == Some(rustix::io::Errno::OPNOTSUPP.raw_os_error()) => {
                let macvlan = LinkMacVlan::new(name, parent_index, MacVlanMode::Bridge).build();
                self.add(format!("add macvlan {name} on {parent}"), macvlan)?;
                Ok(PodDevice::MacVlan)
            }
            Err(e) => Err(e),
        }
    }

    /// Sets link `name` up.
    pub(crate) fn up(&self, name: &str) -> Result<(), NetlabError> {
        let index = self.index(name)?;
        self.set(
            format!("set {name} up"),
            LinkUnspec::new_with_index(index).up().build(),
        )
    }

    /// Enslaves link `name` to the bridge `bridge`.
    pub(crate) fn set_master(&self, name: &str, bridge: &str) -> Result<(), NetlabError> {
        let index = self.index(name)?;
        let master = self.index(bridge)?;
        let msg = LinkUnspec::new_with_index(index).controller(master).build();
        self.set(format!("set {name} master {bridge}"), msg)
    }

    /// Moves link `name` into `ns` (borrowed for the whole request, as for [`Self::veth`]).
    pub(crate) fn move_to(&self, name: &str, ns: &Netns) -> Result<(), NetlabError> {
        let index = self.index(name)?;
        let msg = LinkUnspec::new_with_index(index)
            .setns_by_fd(ns.as_fd().as_raw_fd())
            .build();
        self.set(format!("move {name} to {}", ns.name()), msg)
    }

    /// Adds `addr/prefix_len` on link `name`.
    pub(crate) fn address(
        &self,
        name: &str,
        addr: Ipv4Addr,
        prefix_len: u8,
    ) -> Result<(), NetlabError> {
        let index = self.index(name)?;
        let h = self.handle.clone();
        self.rt
            .block_on(async move {
                h.address()
                    .add(index, addr.into(), prefix_len)
                    .execute()
                    .await
            })
            .map_err(|e| NetlabError::netlink(format!("add {addr}/{prefix_len} on {name}"), e))
    }

    /// Adds a route to `dst/prefix_len`: through gateway `via` if given, else directly
    /// on link `dev` (scope link); `src` is the preferred source address, if given.
    pub(crate) fn route(&self, r: &Route<'_>) -> Result<(), NetlabError> {
        let mut b = RouteMessageBuilder::<Ipv4Addr>::new().destination_prefix(r.dst, r.prefix_len);
        if let Some(gw) = r.via {
            b = b.gateway(gw);
        }
        if let Some(dev) = r.dev {
            b = b.output_interface(self.index(dev)?);
            if r.via.is_none() {
                b = b.scope(RouteScope::Link);
            }
        }
        if let Some(src) = r.src {
            b = b.pref_source(src);
        }
        let msg = b.build();
        let h = self.handle.clone();
        self.rt
            .block_on(async move { h.route().add(msg).execute().await })
            .map_err(|e| NetlabError::netlink(format!("add route {r}"), e))
    }
}

/// A route for [`Netlink::route`].
pub(crate) struct Route<'a> {
    pub dst: Ipv4Addr,
    pub prefix_len: u8,
    pub via: Option<Ipv4Addr>,
    pub dev: Option<&'a str>,
    pub src: Option<Ipv4Addr>,
}

impl std::fmt::Display for Route<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.dst, self.prefix_len)?;
        if let Some(via) = self.via {
            write!(f, " via {via}")?;
        }
        if let Some(dev) = self.dev {
            write!(f, " dev {dev}")?;
        }
        if let Some(src) = self.src {
            write!(f, " src {src}")?;
        }
        Ok(())
    }
}

fn is_errno(e: &rtnetlink::Error, errno: rustix::io::Errno) -> bool {
    matches!(e, rtnetlink::Error::NetlinkError(m) if m.to_io().raw_os_error() == Some(errno.raw_os_error()))
}

/// Interface names are at most 15 bytes (IFNAMSIZ - 1) and cannot contain `/`, `:` or
/// whitespace; checked here so the error names the culprit rather than saying EINVAL.
pub(crate) fn check_ifname(name: &str) -> Result<(), NetlabError> {
    let why = if name.is_empty() {
        Some("empty interface name")
    } else if name.len() > 15 {
        Some("interface names are at most 15 bytes")
    } else if name
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace() || c == '\0')
    {
        Some("interface names cannot contain '/', ':' or whitespace")
    } else {
        None
    };
    NetlabError::check_name(name, why)
}

/// Writes a sysctl of the calling thread's network namespace (`key` relative to
/// `/proc/sys`, e.g. `net/ipv4/ip_forward`): `/proc/sys/net` shows the namespace of
/// the thread that opens it. Must run on a thread inside the namespace.
pub(crate) fn sysctl(key: &str, value: &str) -> Result<(), NetlabError> {
    let path = Path::new("/proc/sys").join(key);
    fs::write(&path, value)
        .map_err(|e| NetlabError::io(format!("write {value} to {}", path.display()), e))
}

/// Like [`sysctl`], for a key that exists only if the kernel has the feature
/// (`net/bridge/*` needs bridge netfilter): a missing key is not an error.
pub(crate) fn sysctl_if_present(key: &str, value: &str) -> Result<(), NetlabError> {
    if Path::new("/proc/sys").join(key).exists() {
        sysctl(key, value)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_checked() {
        assert!(check_ifname("wire").is_ok());
        assert!(check_ifname("abcdefghijklmno").is_ok());
        assert!(check_ifname("abcdefghijklmnop").is_err());
        assert!(check_ifname("").is_err());
        assert!(check_ifname("a/b").is_err());
        assert!(check_ifname("a b").is_err());
    }
}
