//! The test cluster's DNS, as a pod sees cluster DNS: a UDP responder on
//! [`DNS_ADDR`] inside the cluster's network namespace that answers A queries for
//! the names it was given (`<service>.<namespace>.svc.cluster.local`, with or
//! without the final dot) and says "no such name" for everything else, at once. A
//! pod's `/etc/resolv.conf` names it. AAAA queries for a known name get an empty
//! answer (the name exists, with no IPv6 address), so a resolver asking for IPv6
//! first (Envoy's default) goes on to IPv4 without waiting for a timeout.
//!
//! Nothing is forwarded: a name it does not know never leaves the machine.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where it listens (the cluster's node address, which every pod has a route to).
pub const DNS_ADDR: &str = "198.18.0.1:53";

/// A pod's `/etc/resolv.conf` for the test cluster.
pub const RESOLV_CONF: &str = "nameserver 198.18.0.1\n\
    search svc.cluster.local cluster.local\noptions ndots:5 timeout:1 attempts:2\n";

/// The responder; stops on drop.
pub struct ClusterDns {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ClusterDns {
    /// Listens on `socket` (bound in the cluster's namespace) and answers `names`.
    pub fn serve(socket: UdpSocket, names: BTreeMap<String, Ipv4Addr>) -> ClusterDns {
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let names: BTreeMap<String, Ipv4Addr> = names
            .into_iter()
            .map(|(k, v)| (k.trim_end_matches('.').to_ascii_lowercase(), v))
            .collect();
        let thread = std::thread::Builder::new()
            .name("cluster-dns".into())
            .spawn(move || {
                let mut buf = [0u8; 512];
                while !s.load(Ordering::Relaxed) {
                    let Ok((n, from)) = socket.recv_from(&mut buf) else {
                        continue;
                    };
                    if let Some(reply) = answer(&buf[..n], &names) {
                        let _ = socket.send_to(&reply, from);
                    }
                }
            })
            .unwrap();
        ClusterDns {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for ClusterDns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reply to one query (RFC 1035 §4.1): its header and question echoed, an A
/// record for a known name, nothing for another type of a known name, NXDOMAIN for
/// an unknown one. `None` for what is not a one-question query.
fn answer(q: &[u8], names: &BTreeMap<String, Ipv4Addr>) -> Option<Vec<u8>> {
    if q.len() < 12 || q[2] & 0x80 != 0 || u16::from_be_bytes([q[4], q[5]]) != 1 {
        return None;
    }
    // The question's name, label by label (no compression in a question).
    let mut i = 12;
    let mut labels = Vec::new();
    loop {
        let len = *q.get(i)? as usize;
        i += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            return None;
        }
        labels.push(String::from_utf8_lossy(q.get(i..i + len)?).to_ascii_lowercase());
        i += len;
    }
    let qtype = u16::from_be_bytes([*q.get(i)?, *q.get(i + 1)?]);
    let end = i + 4;
    let question = q.get(12..end)?;
    let name = labels.join(".");
    let found = names.get(&name);
    let mut r = Vec::with_capacity(end + 16);
    r.extend_from_slice(&q[0..2]);
    // QR, the opcode and RD echoed, AA; RCODE 3 (NXDOMAIN) for an unknown name.
    r.push(0x84 | (q[2] & 0x79));
    r.push(if found.is_some() { 0x00 } else { 0x03 });
    let a = found.filter(|_| qtype == 1);
    r.extend_from_slice(&[0, 1, 0, u8::from(a.is_some()), 0, 0, 0, 0]);
    r.extend_from_slice(question);
    if let Some(ip) = a {
        // A pointer to the question's name, type A, class IN, TTL 5 s.
        r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4]);
        r.extend_from_slice(&ip.octets());
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for l in name.trim_end_matches('.').split('.') {
            q.push(l.len() as u8);
            q.extend_from_slice(l.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&[0, 1]);
        q
    }

    #[test]
    fn answers_a_known_name_and_refuses_the_rest() {
        let names = BTreeMap::from([(
            "eg.system.svc.cluster.local.".to_string(),
            Ipv4Addr::new(198, 18, 0, 1),
        )]);
        let names: BTreeMap<String, Ipv4Addr> = names
            .into_iter()
            .map(|(k, v)| (k.trim_end_matches('.').to_string(), v))
            .collect();
        let q = query("EG.system.svc.cluster.local", 1);
        let r = answer(&q, &names).unwrap();
        assert_eq!(&r[0..2], &[0x12, 0x34]);
        assert_eq!(r[3] & 0x0f, 0, "NOERROR");
        assert_eq!(u16::from_be_bytes([r[6], r[7]]), 1, "one answer");
        assert_eq!(&r[r.len() - 4..], &[198, 18, 0, 1]);
        let r = answer(&query("eg.system.svc.cluster.local", 28), &names).unwrap();
        assert_eq!((r[3] & 0x0f, r[7]), (0, 0), "AAAA: the name, no address");
        let r = answer(&query("example.com", 1), &names).unwrap();
        assert_eq!((r[3] & 0x0f, r[7]), (3, 0), "NXDOMAIN");
    }
}
