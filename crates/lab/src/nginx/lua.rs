//! The Lua side of `nginx-lua`: the balancer source nginx loads (`balancer.lua`, kept
//! in its own file so it reads and diffs as Lua), and the driver's client of the admin
//! server that balancer answers on: pushing an endpoint list (`POST /endpoints`) and
//! reading back the list in force (`GET /endpoints`) until it is the one asked for.

use super::Nginx;
use crate::driver::{Endpoint, SutError};
use http1::client;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// lua-resty-core, which the Lua module refuses to start without.
pub(super) const RESTY_CORE: &str = "/usr/share/lua/5.1/resty/core.lua";
/// Name of the Lua module written into `work_dir/lua`.
pub(super) const LUA_MODULE: &str = "ingressbench_balancer";

/// The Lua side of `nginx-lua`: per-worker round robin over the list in the shared
/// dictionary, re-parsed only when its version changes; `POST /endpoints` (one
/// `a.b.c.d:port` a line) replaces the list and answers `ok version=N endpoints=M`;
/// `GET /endpoints` answers `version=N` then the list. An empty list gives 503 in the
/// access phase, as ingress-nginx does (a status set in `balancer_by_lua` reaches the
/// client as 500).
pub(super) const BALANCER_LUA: &str = include_str!("balancer.lua");

impl Nginx {
    /// The admin server's address (Lua mode).
    fn admin_addr(&self) -> Result<SocketAddr, SutError> {
        Ok(SocketAddr::from((
            [127, 0, 0, 1],
            self.settings()?.admin_port,
        )))
    }

    /// Pushes `endpoints` to the Lua balancer; returns the list's new version.
    ///
    /// # Errors
    /// [`SutError::Io`] when the admin server cannot be reached,
    /// [`SutError::Rejected`] when it refuses the list.
    pub(super) fn push(&mut self, endpoints: &[Endpoint]) -> Result<u64, SutError> {
        let addr = self.admin_addr()?;
        let body: String = endpoints.iter().map(|e| format!("{}\n", e.addr)).collect();
        let (status, reply) = http(addr, "POST", "/endpoints", &body).map_err(SutError::io(
            format!("nginx-lua: POST http://{addr}/endpoints"),
        ))?;
        let version = reply
            .trim()
            .strip_prefix("ok version=")
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok());
        match (status, version) {
            (200, Some(v)) => {
                self.lua_version = v;
                self.pushed = true;
                Ok(v)
            }
            _ => Err(SutError::Rejected {
                what: "nginx-lua endpoint list".into(),
                detail: format!("{status} {}", reply.trim()),
            }),
        }
    }

    /// Reads the Lua balancer's list: (version, `ip:port` lines).
    fn fetch_list(&self) -> Result<(u64, Vec<String>), SutError> {
        let addr = self.admin_addr()?;
        let (status, reply) = http(addr, "GET", "/endpoints", "").map_err(SutError::io(
            format!("nginx-lua: GET http://{addr}/endpoints"),
        ))?;
        let mut lines = reply.lines();
        let version = lines
            .next()
            .and_then(|l| l.trim().strip_prefix("version="))
            .and_then(|v| v.parse().ok());
        match (status, version) {
            (200, Some(v)) => Ok((
                v,
                lines
                    .map(|l| l.trim().to_string())
                    .filter(|l| !l.is_empty())
                    .collect(),
            )),
            _ => Err(SutError::ToolFailed {
                tool: "nginx-lua".into(),
                detail: format!(
                    "GET http://{addr}/endpoints answered {status} {}",
                    reply.trim()
                ),
            }),
        }
    }

    /// Lua: makes sure the balancer holds exactly the wanted list, pushing it again
    /// when it does not (after a restart the shared dictionary is empty).
    pub(super) fn confirm_list(&mut self, deadline: Instant) -> Result<(), SutError> {
        let want: Vec<String> = self.endpoints.iter().map(|e| e.addr.to_string()).collect();
        let mut last: String;
        loop {
            match self.fetch_list() {
                Ok((v, list)) if list == want && v >= self.lua_version => return Ok(()),
                Ok((v, list)) => {
                    last = format!("version {v} holds {list:?}");
                    let eps = self.endpoints.clone();
                    if let Err(e) = self.push(&eps) {
                        last = results::with_causes(&e);
                    }
                }
                Err(e) => last = results::with_causes(&e),
            }
            if Instant::now() >= deadline {
                return Err(SutError::NotReady(format!(
                    "nginx-lua endpoint list ({last})"
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// One request to a local server (`http1::client`, 2 s for the whole exchange):
/// (status, decoded body). A body is sent as plain text.
pub(super) fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> std::io::Result<(u16, String)> {
    let headers: &[(&str, &str)] = if body.is_empty() {
        &[]
    } else {
        &[("Content-Type", "text/plain")]
    };
    let r = client::request(
        addr,
        method,
        path,
        headers,
        body.as_bytes(),
        Duration::from_secs(2),
    )?;
    Ok((r.status, r.text()))
}
