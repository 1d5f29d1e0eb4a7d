//! The load engine: a constant, open-loop request rate over many connections, with
//! latency measured from each request's intended send time.
//!
//! [`run`] takes a validated [`Plan`], starts one [`worker`] per thread (each owns its
//! connections, its epoll loop and its histograms), merges what they report once a
//! second into a timeline, and returns the merged [`Outcome`]. The engine knows
//! nothing of scenarios, proxies or reports; [`Outcome::to_result`] turns its figures
//! into the shared result document.

pub mod failure;
pub mod machine;
pub mod mix;
mod outcome;
pub mod profile;
mod resolve;
mod run;
pub mod rx;
pub mod schedule;
pub mod search;
pub mod sessions;
mod setting;
pub mod spec;
pub mod split;
pub mod stats;
pub mod sysinfo;
pub mod targets;
pub mod tls;
pub mod windows;
pub mod worker;

/// What a response may carry that tells which configuration served it (see
/// [`LoadSpec::markers`]).
pub use http1::Marker;
pub use outcome::{Outcome, SecondSummary};
pub use resolve::{Plan, OPEN_FILES_MARGIN};
pub use run::{process_cpu_s, run, run_marked, run_with};
pub use spec::{GrpcCall, Http2Spec, LoadSpec, Protocol, DEFAULT_SEND_WINDOW, MAX_SEND_WINDOW};

/// Lag p99 above which the generator counts as overloaded: it was not sending when
/// it meant to, so the latencies it measured are not the server's alone.
pub const LAG_LIMIT_NS: u64 = 2_000_000;

/// How busy (CPU time over wall time, per worker thread) a generator whose lag is
/// over the limit must have been to be called overloaded, short of CPU. Below it the
/// threads had time to spare and woke late instead: more threads would not help.
/// A generator short of CPU runs its threads nearly flat out; 0.85 leaves room for
/// the seconds of warm-up and drain in which it was not.
pub const BUSY_OVERLOADED: f64 = 0.85;

/// Why the engine could not run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("could not start worker threads: {0}")]
    Spawn(std::io::Error),
    #[error("{0}")]
    Worker(String),
}

#[cfg(test)]
mod drain_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A plain load of `url`: one thread, one connection, 10 requests/s for 1 s.
    pub(crate) fn spec(url: &str) -> LoadSpec {
        LoadSpec {
            url: url.into(),
            threads: Some(1),
            connections: 1,
            rate: Some(10.0),
            duration: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            ..LoadSpec::default()
        }
    }
}
