//! The request and its connections, as `load` and `search` both take them: one set of
//! flags (wrk2's names where wrk2 has them), flattened into each command, and turned
//! into the [`LoadSpec`] fields they set in one place.

use super::{duration, usage};
use clap::Args;
use engine::{tls, LoadSpec};
use std::path::PathBuf;

/// The flags `load` and `search` share.
#[derive(Args, Debug, Clone)]
pub struct RequestArgs {
    /// Target URL, http:// or https://.
    pub url: String,
    /// Worker threads (default: number of cores, at most one per connection).
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Connections to keep open, over all threads.
    #[arg(short = 'c', long, default_value_t = 10)]
    pub connections: usize,
    /// Request header "Name: value" (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Per-request timeout, from the moment the request is written.
    #[arg(long, default_value = "10s")]
    pub timeout: String,
    /// Time allowed to establish a connection (TCP, and TLS handshake included).
    #[arg(long, default_value = "2s")]
    pub connect_timeout: String,
    /// Send requests due within this long after a wake-up in that wake-up, early,
    /// instead of sleeping again for each: less CPU per request at high rates. An
    /// early request's latency counts from its send. 0 sends each at its due time;
    /// at most 1ms.
    #[arg(long, default_value = "50us", value_name = "DUR")]
    pub send_window: String,
    /// Do not verify the server's certificate.
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// Trust this PEM CA certificate (in addition to the public roots).
    #[arg(long)]
    pub cacert: Option<PathBuf>,
    /// Only use this TLS version: 1.2 or 1.3.
    #[arg(long)]
    pub tls_version: Option<String>,
    /// Open a new connection (and TLS handshake) for every request.
    #[arg(long)]
    pub new_connection: bool,
    /// Write requests on kept-alive connections the server closed while idle, as
    /// wrk2 does, and count what they get as errors (to compare with wrk2 and the
    /// studies). By default the engine sees the close and reconnects
    /// (`connections.reconnects_after_server_close`).
    #[arg(long)]
    pub reuse_closed: bool,
}

impl RequestArgs {
    /// The load these flags describe, every other setting at its default
    /// ([`LoadSpec::default`]): each command sets the rest.
    ///
    /// # Errors
    /// A usage error naming the flag whose value cannot be read.
    pub fn spec(&self) -> anyhow::Result<LoadSpec> {
        let dur =
            |flag: &str, v: &str| duration::parse(v).map_err(|e| usage(format!("--{flag}: {e}")));
        let version = match &self.tls_version {
            None => None,
            Some(v) => Some(tls::parse_version(v).map_err(|e| usage(e.to_string()))?),
        };
        Ok(LoadSpec {
            url: self.url.clone(),
            headers: self.headers.clone(),
            threads: self.threads,
            connections: self.connections,
            timeout: dur("timeout", &self.timeout)?,
            connect_timeout: dur("connect-timeout", &self.connect_timeout)?,
            send_window: dur("send-window", &self.send_window)?,
            new_connection: self.new_connection,
            reuse_closed: self.reuse_closed,
            tls: tls::TlsOptions {
                insecure: self.insecure,
                cacert: self.cacert.clone(),
                version,
                resume: false,
            },
            ..LoadSpec::default()
        })
    }
}
