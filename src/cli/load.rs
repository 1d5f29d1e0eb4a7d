//! `ingressbench load`: wrk2's flags (same names, same meaning) plus what the studies need.

use clap::Args;

/// Flags of `ingressbench load`.
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// Target URL, http:// or https://.
    pub url: String,
    /// Worker threads (default: number of cores).
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Connections to keep open, over all threads.
    #[arg(short = 'c', long, default_value_t = 10)]
    pub connections: usize,
    /// Test duration (30s, 3m, ...), not counting --warmup.
    #[arg(short = 'd', long, default_value = "10s")]
    pub duration: String,
    /// Requests per second over all connections (required unless --max).
    #[arg(short = 'R', long)]
    pub rate: Option<f64>,
    /// Print the full latency percentile spectrum.
    #[arg(short = 'L', long)]
    pub latency: bool,
    /// Request header "Name: value" (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Per-request timeout, from the moment the request is written.
    #[arg(long, default_value = "10s")]
    pub timeout: String,
    /// Time allowed to establish a connection (TCP, and TLS handshake included).
    #[arg(long, default_value = "2s")]
    pub connect_timeout: String,
    /// HTTP method.
    #[arg(long, default_value = "GET")]
    pub method: String,
    /// Request body.
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body read from a file.
    #[arg(long)]
    pub body_file: Option<std::path::PathBuf>,
    /// Closed loop: each connection sends its next request as soon as the previous
    /// answer arrives (throughput); latency is then not corrected.
    #[arg(long, conflicts_with = "rate")]
    pub max: bool,
    /// Load sent before measuring starts, not recorded.
    #[arg(long, default_value = "0s")]
    pub warmup: String,
    /// How the rate is spread: `connection` (wrk2: each connection has a fixed share)
    /// or `shared` (one queue per thread served by any idle connection).
    #[arg(long, default_value = "connection")]
    pub schedule: String,
    /// Do not verify the server's certificate.
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// Trust this PEM CA certificate (in addition to the public roots).
    #[arg(long)]
    pub cacert: Option<std::path::PathBuf>,
    /// Only use this TLS version: 1.2 or 1.3.
    #[arg(long)]
    pub tls_version: Option<String>,
    /// Open a new connection (and TLS handshake) for every request.
    #[arg(long)]
    pub new_connection: bool,
    /// With --new-connection over TLS: allow session resumption (off: a full
    /// handshake each time).
    #[arg(long)]
    pub tls_resume: bool,
    /// Response header whose value names the backend that answered.
    #[arg(long, default_value = "x-backend")]
    pub backend_header: String,
    /// Write the result as JSON (schema ingressbench/result/v1) to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Write an HdrHistogram interval log (one interval per second) to this file.
    #[arg(long)]
    pub hdr_log: Option<std::path::PathBuf>,
    /// Never draw the live progress line, even on a terminal.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs a load and prints the summary.
pub fn run(_args: LoadArgs) -> anyhow::Result<i32> {
    Err(super::usage("load: not built yet"))
}
