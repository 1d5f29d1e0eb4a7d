//! Each data path end to end, as root: build the lab, serve one HTTP/1.1 response from
//! the server namespace, fetch it from node A, check the source address the server saw,
//! drop the lab and check nothing of it is left in `/run/netns`. Also `sweep`.
//!
//! Every namespace is named after a prefix unique to its test, so the tests can run in
//! parallel; every socket has a timeout, so a broken path fails in seconds.

use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

use netlab::{sweep, DataPath, Lab, NetlabError, Netns, PodDevice, NETNS_DIR};

const TIMEOUT: Duration = Duration::from_secs(5);

/// The names in `/run/netns` that start with `prefix`.
fn leftovers(prefix: &str) -> Vec<String> {
    std::fs::read_dir(NETNS_DIR)
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Starts a server in `ns` on `at` that answers one request with the peer it saw, and
/// returns what it saw (or its error) through the handle.
fn serve_once(ns: &Netns, at: SocketAddrV4) -> thread::JoinHandle<Result<SocketAddr, String>> {
    let listener = ns
        .run(|| TcpListener::bind(at))
        .expect("enter the server namespace")
        .unwrap_or_else(|e| panic!("bind {at}: {e}"));
    // The listener stays in the namespace it was opened in, whatever thread uses it.
    thread::spawn(move || {
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + TIMEOUT * 2;
        let (mut conn, peer) = loop {
            match listener.accept() {
                Ok(c) => break c,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() > deadline {
                        return Err("no connection within the timeout".to_string());
                    }
                    thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(e.to_string()),
            }
        };
        conn.set_nonblocking(false).map_err(|e| e.to_string())?;
        conn.set_read_timeout(Some(TIMEOUT))
            .map_err(|e| e.to_string())?;
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut buf).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("request cut short".to_string());
            }
            request.extend_from_slice(&buf[..n]);
        }
        let body = format!("peer={peer}\n");
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(response.as_bytes())
            .map_err(|e| e.to_string())?;
        Ok(peer)
    })
}

/// GETs `/` at `target` from a thread inside `ns`; returns the whole response.
fn get_from(ns: &Netns, target: SocketAddrV4) -> Result<String, String> {
    ns.run(|| -> Result<String, String> {
        let mut conn = TcpStream::connect_timeout(&target.into(), TIMEOUT)
            .map_err(|e| format!("connect {target}: {e}"))?;
        conn.set_read_timeout(Some(TIMEOUT))
            .map_err(|e| e.to_string())?;
        conn.set_write_timeout(Some(TIMEOUT))
            .map_err(|e| e.to_string())?;
        write!(
            conn,
            "GET / HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n"
        )
        .map_err(|e| e.to_string())?;
        let mut response = String::new();
        conn.read_to_string(&mut response)
            .map_err(|e| format!("read from {target}: {e}"))?;
        Ok(response)
    })
    .map_err(|e| e.to_string())?
}

/// Builds the lab, checks one request across it, drops it and checks it is gone.
fn round_trip(prefix: &str, path: DataPath) -> Lab {
    let lab = Lab::build(prefix, path).unwrap_or_else(|e| panic!("build {path:?}: {e:?}"));
    let server = serve_once(lab.server_ns(), lab.server_addr());
    let response = get_from(lab.client_ns(), lab.target());
    let peer = server.join().expect("server thread");
    let response = response.unwrap_or_else(|e| panic!("{path:?}: GET {}: {e}", lab.url()));
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    let peer = peer.unwrap_or_else(|e| panic!("{path:?}: server: {e}"));
    assert_eq!(
        peer.ip(),
        lab.client_addr(),
        "{path:?}: source seen by the server"
    );
    assert!(response.ends_with(&format!("peer={peer}\n")), "{response}");
    println!(
        "{path:?}: GET {} from {} answered by {} in {}, which saw {peer}",
        lab.url(),
        lab.client_ns().name(),
        lab.server_addr(),
        lab.server_ns().name()
    );
    lab
}

/// Runs `round_trip`, then `more` on the lab, then checks that dropping the lab left
/// nothing under the prefix.
fn check_path_and(prefix: &str, path: DataPath, more: impl FnOnce(&Lab)) -> Option<PodDevice> {
    let device = {
        let lab = round_trip(prefix, path);
        assert_eq!(leftovers(prefix).len(), lab.namespaces().count());
        more(&lab);
        lab.pod_device()
    };
    assert_eq!(
        leftovers(prefix),
        Vec::<String>::new(),
        "{path:?}: left behind"
    );
    device
}

fn check_path(prefix: &str, path: DataPath) -> Option<PodDevice> {
    check_path_and(prefix, path, |_| ())
}

/// Packets received and sent by `dev` in `ns`, from `/proc/thread-self/net/dev` (the
/// table of the reading thread's namespace).
fn packets(ns: &Netns, dev: &str) -> (u64, u64) {
    let table = ns
        .run(|| std::fs::read_to_string("/proc/thread-self/net/dev"))
        .expect("enter namespace")
        .expect("read /proc/thread-self/net/dev");
    let line = table
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{dev}:")))
        .unwrap_or_else(|| panic!("no {dev} in {}: {table}", ns.name()));
    let fields: Vec<u64> = line
        .split_once(':')
        .map(|(_, f)| {
            f.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    (fields[1], fields[9])
}

#[test]
fn host_path() {
    check_path("nlt-host", DataPath::Host);
}

#[test]
fn host_gw_path() {
    check_path("nlt-hgw", DataPath::HostGw);
}

#[test]
fn vxlan_path() {
    check_path_and("nlt-vx", DataPath::Vxlan, |lab| {
        // Both ways crossed the tunnel: A sent and received on vx0, and so did B.
        for ns in [lab.client_ns(), lab.node_b()] {
            let (rx, tx) = packets(ns, "vx0");
            println!("Vxlan: vx0 in {}: {rx} packets in, {tx} out", ns.name());
            assert!(rx > 0 && tx > 0, "{}: vx0 rx {rx} tx {tx}", ns.name());
        }
    });
}

#[test]
fn macvlan_path() {
    let device = check_path("nlt-mv", DataPath::Macvlan);
    // IPVLAN if the kernel has it, else macvlan (this machine's kernel has no IPVLAN:
    // docs/design/network-lab.md); either way the lab says which one the pod got.
    println!("Macvlan: pod device {device:?}");
    assert!(device.is_some());
}

#[test]
fn bridge_path_or_missing_nft() {
    let nft = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("nft").is_file()))
        .unwrap_or(false);
    if nft {
        check_path("nlt-br", DataPath::Bridge);
    } else {
        match Lab::build("nlt-br", DataPath::Bridge) {
            Err(NetlabError::MissingTool(what)) => {
                assert!(what.starts_with("nft"), "{what}");
                assert!(what.ends_with("install nftables"), "{what}");
                println!("Bridge: {}", NetlabError::MissingTool(what));
            }
            other => panic!("expected MissingTool, got {other:?}"),
        }
        assert_eq!(leftovers("nlt-br"), Vec::<String>::new());
    }
}

/// Kills and reaps a child when the test ends, whatever happened.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sweep_removes_only_dead_creators_namespaces() {
    // pid_max is at most 2^22: this pid never exists.
    let dead = Netns::create("nlt-sweep-999999999-a").expect("create the dead run's namespace");
    let live_name = format!("nlt-sweep-{}-a", std::process::id());
    let live = Netns::create(&live_name).expect("create the live run's namespace");
    let mut sleeper = Reap(
        dead.spawn(Command::new("sleep").arg("30"))
            .expect("spawn sleep in the dead run's namespace"),
    );
    // Sweep finds the namespace by name and pid; our handle stays open meanwhile, as a
    // killed run's namespace stays alive through the processes left inside it.
    let removed = sweep("nlt-sweep-").expect("sweep");
    assert_eq!(removed, vec!["nlt-sweep-999999999-a".to_string()]);
    assert_eq!(leftovers("nlt-sweep-"), vec![live_name.clone()]);
    // The process inside the swept namespace was killed.
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = sleeper.0.try_wait().expect("wait for sleep") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "sleep in the swept namespace still runs"
        );
        thread::sleep(Duration::from_millis(10));
    };
    assert!(!status.success(), "{status:?}");
    println!("sweep removed {removed:?}, killed the sleep inside ({status}), kept {live_name}");
    drop(dead); // its file is gone already: nothing to do, no error surfaced
    drop(live);
    assert_eq!(leftovers("nlt-sweep-"), Vec::<String>::new());
}

#[test]
fn a_failed_build_removes_what_it_built() {
    // B's name is taken: A is built first, then B fails, and A must go.
    let taken_name = format!("nlt-clash-{}-b", std::process::id());
    let taken = Netns::create(&taken_name).expect("create the clashing namespace");
    match Lab::build("nlt-clash", DataPath::HostGw) {
        Err(NetlabError::Io { what, source }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists, "{what}");
            println!("clash: {what}: {source}");
        }
        other => panic!("expected the clash, got {other:?}"),
    }
    assert_eq!(leftovers("nlt-clash"), vec![taken_name]);
    drop(taken);
    assert_eq!(leftovers("nlt-clash"), Vec::<String>::new());

    match Lab::build("nlt/bad", DataPath::Host) {
        Err(NetlabError::InvalidName { name, why }) => println!("bad prefix: {name:?}: {why}"),
        other => panic!("expected InvalidName, got {other:?}"),
    }
}
