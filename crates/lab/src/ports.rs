//! Free ports on loopback for the lab's proxies, chosen at run time, never fixed.
//!
//! A port found by binding `:0` and closing the socket is an *ephemeral* port: until the
//! proxy binds it, any other socket in the machine that binds `:0` (a backend started by
//! a test running beside this one, an outgoing connection) may be handed the same
//! number, and the proxy then fails with "address already in use". So the lab picks its
//! ports *below* the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), where
//! the kernel never hands out a port by itself, checks each one can be bound, and never
//! hands the same port twice in one process.

use std::collections::HashSet;
use std::net::TcpListener;
use std::sync::Mutex;

/// Lowest port the lab uses: clear of the well-known and most registered services.
const LOWEST: u16 = 20_000;

/// Ports this process has handed out; a lab in the same process never gets them again.
static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A TCP port on 127.0.0.1 that is free and outside the ephemeral range.
///
/// # Errors
/// The I/O error when no port can be bound.
pub fn free_port() -> std::io::Result<u16> {
    Ok(free_ports(1)?[0])
}

/// `n` distinct free ports, outside the kernel's ephemeral range.
///
/// # Errors
/// An I/O error when fewer than `n` ports in the range can be bound.
pub fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let (lo, hi) = range();
    let mut given = GIVEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Start at a random place so two processes (two test binaries, two runs) rarely
    // probe the same ports in the same order.
    pick(
        lo,
        hi,
        random_u32(),
        n,
        given.get_or_insert_with(HashSet::new),
    )
}

/// `n` ports of `[lo, hi)` that bind and are not in `given`, probing from `start`.
fn pick(
    lo: u16,
    hi: u16,
    start: u32,
    n: usize,
    given: &mut HashSet<u16>,
) -> std::io::Result<Vec<u16>> {
    let span = u32::from(hi - lo).max(1);
    let mut out = Vec::with_capacity(n);
    for i in 0..span {
        let port = lo + (start.wrapping_add(i) % span) as u16;
        if given.contains(&port) || TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        given.insert(port);
        out.push(port);
        if out.len() == n {
            return Ok(out);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!("no {n} free ports on 127.0.0.1 between {lo} and {hi}"),
    ))
}

/// `[LOWEST, start of the ephemeral range)`, or a fixed range when the kernel's setting
/// cannot be read or leaves too little room below it.
fn range() -> (u16, u16) {
    let start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok());
    match start {
        Some(s) if s > LOWEST + 1000 => (LOWEST, s),
        _ => (LOWEST, 30_000),
    }
}

fn random_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_below_the_ephemeral_range_distinct_and_bindable() {
        let (lo, hi) = range();
        let ports = free_ports(20).unwrap();
        let unique: HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(unique.len(), 20, "{ports:?}");
        for p in &ports {
            assert!((lo..hi).contains(p), "{p} outside {lo}..{hi}");
            TcpListener::bind(("127.0.0.1", *p)).unwrap();
        }
        // Never handed out twice in one process, even once released.
        let more = free_ports(20).unwrap();
        assert!(more.iter().all(|p| !unique.contains(p)), "{more:?}");
    }

    #[test]
    fn a_port_taken_by_someone_else_is_skipped() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let h = held.local_addr().unwrap().port();
        let mut given = HashSet::new();
        // The only port of the range is taken: no answer, and a clear error.
        let err = pick(h, h + 1, 0, 1, &mut given).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
        assert!(err.to_string().contains(&h.to_string()), "{err}");
        drop(held);
        // Released, it is handed out once, then never again.
        assert_eq!(pick(h, h + 1, 0, 1, &mut given).unwrap(), vec![h]);
        assert!(pick(h, h + 1, 0, 1, &mut given).is_err());
    }
}
