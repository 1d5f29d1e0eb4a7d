//! One load split N ways, for N generators that together send what one would.
//!
//! The split is a pure function of the settings, the count and the shared start
//! instant, so every generator computes its own share from the same command line
//! and its index (`--part INDEX/COUNT`: a local child process now, a pod of a
//! Kubernetes indexed Job, whose `JOB_COMPLETION_INDEX` is that index, later) and
//! no plan has to be shipped to it. Connections (and threads, when given) are
//! divided with the remainder spread over the first generators; each generator's
//! rate is its connections' share of the rate, so every connection carries `R / c`
//! exactly as with one generator; all start their schedules at the same wall-clock
//! instant and run the same warm-up and window; each has its own sampling seed.
//! Merging their results is `results::merge`.

use crate::LoadSpec;
use std::time::Duration;

/// Where one generator stands in a split run; the engine uses it to place its
/// schedule ([`crate::Plan::slice`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    /// 0-based index, and the number of generators.
    pub index: usize,
    pub count: usize,
    /// Its first connection's index among the whole run's, the whole run's
    /// connections and rate (`None`: closed loop). With the `connection` schedule its
    /// lanes are then exactly the ones one generator would give these connections,
    /// so N generators send the single generator's schedule, interleaved the same way.
    pub first_connection: usize,
    pub total_connections: usize,
    pub total_rate: Option<f64>,
    /// Seed of its sampling decisions (`--sample`): generators must not all keep the
    /// same requests of their share.
    pub seed: u64,
    /// The shared start of every generator's schedule, Unix nanoseconds.
    pub start_at_unix_ns: u128,
}

/// One generator's settings and its place in the run.
#[derive(Clone, Debug)]
pub struct PartSpec {
    pub slice: Slice,
    /// The settings it runs: the whole run's with its connections, threads and rate.
    pub spec: LoadSpec,
}

/// Why a load cannot be split as asked.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SplitError {
    #[error("--generators must be at least 1")]
    NoGenerator,
    #[error(
        "--generators {count} needs at least {count} connections, not -c {connections}: each generator needs one"
    )]
    Connections { count: usize, connections: usize },
    #[error(
        "--generators {count} needs at least {count} threads, not -t {threads}: each generator runs one"
    )]
    Threads { count: usize, threads: usize },
    #[error("--part {index}/{count}: the index must be below the count (from 0)")]
    Index { index: usize, count: usize },
    #[error("--generators {count} with a load plan: a plan runs on one generator for now; give a constant rate, or drop --generators")]
    Plan { count: usize },
}

/// The whole load before it is split over `n` generators: given threads raised to
/// `n` at least, since each generator runs one (a scenario's `load.threads` is sized
/// for one process, not for a split).
pub fn whole(spec: &LoadSpec, n: usize) -> LoadSpec {
    let mut s = spec.clone();
    s.threads = s.threads.map(|t| t.max(n));
    s
}

/// Splits `spec` `count` ways, every schedule starting at `start_at_unix_ns`.
///
/// # Errors
/// [`SplitError`] when there are no generators, fewer connections (or given threads)
/// than generators: a generator with no connection could send nothing.
pub fn split(
    spec: &LoadSpec,
    count: usize,
    start_at_unix_ns: u128,
) -> Result<Vec<PartSpec>, SplitError> {
    if count == 0 {
        return Err(SplitError::NoGenerator);
    }
    if spec.profile.is_some() {
        return Err(SplitError::Plan { count });
    }
    if spec.connections < count {
        return Err(SplitError::Connections {
            count,
            connections: spec.connections,
        });
    }
    let threads = match spec.threads {
        Some(t) if t < count => return Err(SplitError::Threads { count, threads: t }),
        Some(t) => spread(t, count).into_iter().map(Some).collect(),
        None => vec![None; count],
    };
    let mut first = 0;
    Ok(spread(spec.connections, count)
        .into_iter()
        .zip(threads)
        .enumerate()
        .map(|(index, (connections, threads))| {
            let slice = Slice {
                index,
                count,
                first_connection: first,
                total_connections: spec.connections,
                total_rate: spec.rate,
                seed: seed(index),
                start_at_unix_ns,
            };
            first += connections;
            let part = LoadSpec {
                connections,
                threads,
                rate: spec
                    .rate
                    .map(|r| r * connections as f64 / spec.connections as f64),
                ..spec.clone()
            };
            PartSpec { slice, spec: part }
        })
        .collect())
}

/// Generator `index`'s part of `spec` split `count` ways.
///
/// # Errors
/// [`SplitError::Index`] for an index not below the count, else as [`split`].
pub fn part(
    spec: &LoadSpec,
    index: usize,
    count: usize,
    start_at_unix_ns: u128,
) -> Result<PartSpec, SplitError> {
    if index >= count {
        return Err(SplitError::Index { index, count });
    }
    let mut parts = split(spec, count, start_at_unix_ns)?;
    Ok(parts.swap_remove(index))
}

/// `total` in `n` shares as equal as can be, the first ones one larger.
pub fn spread(total: usize, n: usize) -> Vec<usize> {
    (0..n)
        .map(|i| total / n + usize::from(i < total % n))
        .collect()
}

/// Generator `index`'s sampling seed: 0 for the first, so a single generator samples
/// as it always did.
pub fn seed(index: usize) -> u64 {
    index as u64
}

/// Worker threads of a generator given no `-t`: one per CPU it is pinned to; when
/// not pinned, its share of the machine's cores (the generators share them), at least
/// one, and never more than its connections.
pub fn default_threads(
    pinned_cpus: usize,
    cores: usize,
    count: usize,
    connections: usize,
) -> usize {
    let t = if pinned_cpus > 0 {
        pinned_cpus
    } else {
        cores / count.max(1)
    };
    t.clamp(1, connections.max(1))
}

/// The shared start instant: `lead` after `now_unix_ns`, time enough for every
/// generator to start, measure its clock against the coordinator's and open its
/// connections before its first request is due.
pub fn start_instant(now_unix_ns: u128, lead: Duration) -> u128 {
    now_unix_ns + lead.as_nanos()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(connections: usize, threads: Option<usize>, rate: Option<f64>) -> LoadSpec {
        LoadSpec {
            url: "http://127.0.0.1:1/".into(),
            threads,
            connections,
            rate,
            duration: Duration::from_secs(7),
            warmup: Duration::from_secs(2),
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            sample: 0.1,
            ..LoadSpec::default()
        }
    }

    #[test]
    fn connections_threads_and_rate_are_divided_with_remainders_spread() {
        let parts = split(&spec(1001, Some(7), Some(30_000.0)), 4, 42).unwrap();
        let conns: Vec<usize> = parts.iter().map(|p| p.spec.connections).collect();
        assert_eq!(conns, vec![251, 250, 250, 250]);
        let threads: Vec<Option<usize>> = parts.iter().map(|p| p.spec.threads).collect();
        assert_eq!(threads, vec![Some(2), Some(2), Some(2), Some(1)]);
        // Every connection carries R / c, as with one generator.
        for p in &parts {
            let per_conn = p.spec.rate.unwrap() / p.spec.connections as f64;
            assert!((per_conn - 30_000.0 / 1001.0).abs() < 1e-9, "{per_conn}");
        }
        let total: f64 = parts.iter().map(|p| p.spec.rate.unwrap()).sum();
        assert!((total - 30_000.0).abs() < 1e-6, "{total}");
        // Consecutive connection ranges, covering the run once.
        let firsts: Vec<usize> = parts.iter().map(|p| p.slice.first_connection).collect();
        assert_eq!(firsts, vec![0, 251, 501, 751]);
        // One start, one window, a seed each.
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(p.slice.index, i);
            assert_eq!(p.slice.count, 4);
            assert_eq!(p.slice.start_at_unix_ns, 42);
            assert_eq!(p.slice.total_connections, 1001);
            assert_eq!(p.slice.total_rate, Some(30_000.0));
            assert_eq!(p.spec.duration, Duration::from_secs(7));
            assert_eq!(p.spec.warmup, Duration::from_secs(2));
            assert_eq!(p.spec.sample, 0.1);
        }
        let mut seeds: Vec<u64> = parts.iter().map(|p| p.slice.seed).collect();
        seeds.dedup();
        assert_eq!(seeds.len(), 4, "a seed each");
        assert_eq!(seeds[0], 0, "the first samples as a single generator does");
    }

    #[test]
    fn every_generator_gets_a_connection_or_the_split_is_refused() {
        let parts = split(&spec(3, None, Some(90.0)), 3, 0).unwrap();
        assert!(parts.iter().all(|p| p.spec.connections == 1));
        assert!(parts.iter().all(|p| p.spec.threads.is_none()));
        assert_eq!(
            split(&spec(2, None, Some(1.0)), 3, 0)
                .unwrap_err()
                .to_string(),
            "--generators 3 needs at least 3 connections, not -c 2: each generator needs one"
        );
        assert_eq!(
            split(&spec(8, Some(2), Some(1.0)), 3, 0)
                .unwrap_err()
                .to_string(),
            "--generators 3 needs at least 3 threads, not -t 2: each generator runs one"
        );
        assert_eq!(
            split(&spec(8, None, Some(1.0)), 0, 0).unwrap_err(),
            SplitError::NoGenerator
        );
        assert_eq!(
            part(&spec(8, None, Some(1.0)), 2, 2, 0)
                .unwrap_err()
                .to_string(),
            "--part 2/2: the index must be below the count (from 0)"
        );
        let p = part(&spec(5, None, None), 1, 2, 9).unwrap();
        assert_eq!((p.spec.connections, p.spec.rate), (2, None), "closed loop");
        assert_eq!(p.slice.first_connection, 3);
        // One generator is the run itself.
        let one = part(&spec(5, Some(2), Some(10.0)), 0, 1, 0).unwrap();
        assert_eq!(
            (one.spec.connections, one.spec.threads, one.spec.rate),
            (5, Some(2), Some(10.0))
        );
    }

    /// With wrk2's schedule, the generators' lanes are the single generator's lanes,
    /// split by connection: together they send exactly its requests at its due times.
    #[test]
    fn the_parts_send_the_single_generators_schedule() {
        use crate::schedule::{lanes_for_worker, Model, Share};
        let due_times = |rate: f64, first: usize, conns: usize, total: usize| {
            let lanes = lanes_for_worker(
                Model::PerConnection,
                Some(rate),
                None,
                0,
                Share {
                    worker: 0,
                    workers: 1,
                    conn_offset: first,
                    conns,
                    total_conns: total,
                },
            );
            let mut v: Vec<u64> = lanes
                .iter()
                .flat_map(|l| (0..50).map(|k| l.due_at(k)))
                .collect();
            v.sort_unstable();
            v
        };
        let whole = due_times(700.0, 0, 7, 7);
        let mut parts: Vec<u64> = split(&spec(7, None, Some(700.0)), 3, 0)
            .unwrap()
            .iter()
            .flat_map(|p| {
                due_times(
                    p.slice.total_rate.unwrap(),
                    p.slice.first_connection,
                    p.spec.connections,
                    p.slice.total_connections,
                )
            })
            .collect();
        parts.sort_unstable();
        assert_eq!(parts, whole);
    }

    #[test]
    fn default_threads_follow_the_generators_cpus() {
        assert_eq!(default_threads(1, 8, 4, 100), 1, "pinned to one CPU");
        assert_eq!(default_threads(0, 8, 4, 100), 2, "unpinned: its share");
        assert_eq!(default_threads(0, 2, 3, 100), 1, "at least one");
        assert_eq!(
            default_threads(4, 8, 2, 3),
            3,
            "no more than its connections"
        );
    }

    #[test]
    fn the_start_is_in_the_future() {
        assert_eq!(start_instant(1_000, Duration::from_secs(2)), 2_000_001_000);
    }
}
