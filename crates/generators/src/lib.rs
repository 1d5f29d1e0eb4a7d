//! The load split over several generators, and their results merged into the one
//! result a single generator writes: `load --generators N` and `run --generators N`,
//! as processes of this program on this machine ([`run_local`], [`LocalGenerators`])
//! or as the pods of an indexed Job ([`run_pods`], [`KubernetesGenerators`]).
//!
//! The coordinator only wires: the split is `engine::split` and the merge is
//! `results::merge`, both pure. Every generator gets the whole load as data (an
//! [`engine::LoadSpec`] in JSON), splits it the same way and runs its part
//! ([`run_part`]): it answers the coordinator's clock probes, starts its schedule at
//! the shared instant, counts requests by the change windows a scenario run marks,
//! and hands its full result back (a file the coordinator owns, or an endpoint the
//! coordinator reaches through the API server's pod proxy). The coordinator waits for
//! all of them, bounded in time: a generator that fails or hangs is stopped and named
//! in the merged result.

pub mod endpoint;
mod local;
mod local_runner;
mod part;
mod pods;
mod serve;

pub use local::{run_local, LocalOptions};
pub use local_runner::LocalGenerators;
pub use part::{run_part, PartOptions, PartOutcome};
pub use pods::{job_args, run_pods, KubernetesGenerators, Pods};
pub use serve::COLLECT_LIMIT;

use results::merge::Part;
use results::RunResult;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Clock probes per generator: the shortest round trip of these is kept.
const PROBES: usize = 8;

/// Why the generators could not run, or their results could not be merged. A
/// generator that fails while the others run is not an error: it is named in the
/// merged result.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The load cannot be split this way, or cannot travel to a generator: bad input.
    #[error("{0}")]
    Input(String),
    /// A file, a folder or a socket of the coordinator or of a generator.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A generator could not be started, or its part of the run could not be read.
    #[error("{0}")]
    Generator(String),
    /// The cluster refused the generators' Job or could not be reached.
    #[error("generator pods")]
    Cluster(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("merging the generators' results")]
    Merge(#[source] results::merge::MergeError),
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    #[error("the result as JSON")]
    Json(#[from] serde_json::Error),
}

impl Error {
    fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}

/// The scenario runner's view of an error: the generators' own, typed, with its
/// causes. The one place where the generators' errors meet
/// [`scenario::runner::LoadRunner`]'s.
fn for_runner(e: Error) -> scenario::runner::LoadError {
    scenario::runner::LoadError::Elsewhere(Box::new(e))
}

/// The generators' results merged into one.
pub struct Merged {
    pub result: RunResult,
    /// Each second's corrected histogram (V2 deflate), for an interval log.
    pub seconds: Vec<(u64, Vec<u8>)>,
    /// Unix time of the start of the measured window, ns.
    pub started_unix_ns: u128,
    /// The run was interrupted.
    pub interrupted: bool,
    /// A generator produced no result.
    pub failed: bool,
}

/// Merges the parts' results (`results::merge`, the same for every platform) of a
/// load started at `start_at` (Unix ns) with `warmup` before its window.
///
/// # Errors
/// [`Error::Merge`] when nothing can be merged.
fn merge(
    parts: Vec<Part>,
    start_at: u128,
    warmup: Duration,
    interrupted: bool,
    warnings: Vec<String>,
) -> Result<Merged, Error> {
    let failed = parts.iter().any(|p| p.result.is_none());
    let mut result = results::merge::merge(parts, start_at).map_err(Error::Merge)?;
    result.warnings.extend(warnings);
    let seconds = result.take_second_histograms();
    Ok(Merged {
        result,
        seconds,
        started_unix_ns: start_at + warmup.as_nanos(),
        interrupted,
        failed,
    })
}

fn now_unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
