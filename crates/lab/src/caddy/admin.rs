//! Calls to Caddy's admin API on 127.0.0.1: one request with the retry Caddy's
//! re-bound admin listener needs ([`admin`]), and a change sent through it and timed
//! for `settle()` to confirm.

use super::{Caddy, ChangeTiming, Pending};
use crate::driver::SutError;
use http1::client::{self, Response};
use serde_json::Value;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Longest wait for an admin reply: a change waits for the old server's shutdown,
/// which may take up to the grace period.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(15);

impl Caddy {
    /// Sends one change to the admin API and records it for `settle()`.
    pub(super) fn change(
        &mut self,
        method: &str,
        path: &str,
        body: &Value,
        confirm: Pending,
        headers: &[(&str, &str)],
    ) -> Result<(), SutError> {
        let what = format!("caddy {method} {path}");
        let body = body.to_string();
        let t = Instant::now();
        let reply = admin(self.admin_port, method, path, headers, body.as_bytes())
            .map_err(SutError::io(what.clone()))?;
        let call = t.elapsed();
        if !(200..300).contains(&reply.status) {
            return Err(SutError::Rejected {
                what,
                detail: format!("HTTP {}: {}", reply.status, reply.text().trim()),
            });
        }
        self.pending = Some(confirm);
        self.last = Some(ChangeTiming {
            what,
            call,
            confirm: None,
        });
        Ok(())
    }
}

/// An admin call on 127.0.0.1:`port`, retrying the connection for a moment: Caddy
/// re-binds its admin listener on every config change. A body (and any method but
/// `GET`) is sent as JSON.
pub(super) fn admin(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Response> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut all = Vec::with_capacity(headers.len() + 1);
    if !body.is_empty() || method != "GET" {
        all.push(("Content-Type", "application/json"));
    }
    all.extend_from_slice(headers);
    let t = Instant::now();
    loop {
        match client::request(addr, method, path, &all, body, ADMIN_TIMEOUT) {
            Err(e)
                if e.io_kind() == Some(std::io::ErrorKind::ConnectionRefused)
                    && t.elapsed() < Duration::from_secs(1) =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other.map_err(std::io::Error::from),
        }
    }
}
