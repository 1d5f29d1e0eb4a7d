//! Free ports on loopback, chosen at run time, never fixed.

use std::net::TcpListener;

/// A TCP port on 127.0.0.1 that was free a moment ago. The kernel picks it; there is a
/// small window before the caller binds it, which is why callers retry on conflict.
///
/// # Errors
/// The I/O error when no port can be bound.
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `n` distinct free ports.
///
/// # Errors
/// The I/O error when ports cannot be bound.
pub fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    // Hold them all open while choosing so the kernel cannot hand out one twice.
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}
