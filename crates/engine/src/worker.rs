//! One worker thread: its connections, its event loop, its recorder.
//!
//! The loop is a plain `epoll` loop (edge-triggered, one registration per socket) with
//! `epoll_pwait2`'s nanosecond timeout, so the thread wakes within microseconds of
//! the next due time instead of on a millisecond tick. At a fixed rate it sleeps
//! through responses until its next send and times each by the kernel's receive
//! stamp (`Worker::quiet_until`, [`crate::rx`]): on a virtual machine a wake-up
//! costs more CPU than a request. Per request it makes one
//! `write` and one `read` on a keep-alive connection and allocates nothing; the
//! request bytes are shared, the read buffer is one per worker, and the response
//! parser keeps only its state.
//!
//! A request's life: its lane comes due (see [`crate::schedule`]), an idle
//! connection of the lane takes it (opening the connection first if it is closed),
//! the response completes it or an error fails it, and the connection returns to its
//! lane. Errors close the connection; the next request reopens it.
//!
//! The end of the window stops the schedule, not the measurement: no request is due
//! after it, but every request due in it is still sent (as soon as a connection of
//! its lane is free) and answered, measured from its intended time like any other,
//! for up to `--timeout` after the end (the *drain*). Leaving them out would drop
//! exactly the tail a server that is slow at the end causes. What is still waiting
//! at the drain's deadline is a `timeout`, recorded at its latency so far (a lower
//! bound). Only an interrupt stops sending at once (`not_sent`) and abandons what is
//! in flight after a short wait (`unfinished`).

use crate::failure::{Cause, Failure};
use crate::schedule::{lanes_for_worker, Lane, Model, Share};
use crate::stats::{Interval, RawSample, Recorder, Totals};
use http1::response::Response;
use http1::{ResponseParser, Strictness};
use results::clock::{Clock, Nanos};
use results::ErrorKind;
use rustix::event::epoll;
use rustls::ClientConfig;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Barrier};

mod connection;
mod event_loop;
mod h2;
pub(crate) use connection::{connect, connect_result};
use connection::{enter, version_name, HeadReader, WROTE_NOTHING};
pub use h2::H2Setup;
use h2::{Answer, Ev, Session, NO_SESSION};

/// How often deadlines are checked; timeouts are this much late at most.
const SWEEP_NS: Nanos = 5_000_000;
/// After an interrupt, how long requests in flight may still finish.
const INTERRUPT_DRAIN_NS: Nanos = 1_000_000_000;

/// Where the main loop is in the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Warm-up and measured window: requests are sent as they come due.
    Window,
    /// After a normal end: nothing new comes due, but what was due in the window is
    /// still sent and answered until `deadline` (the window's end plus `--timeout`).
    Drain { deadline: Nanos },
    /// After an interrupt: nothing more is sent; requests in flight may finish until
    /// `until`.
    Interrupted { until: Nanos },
}

/// What every worker of a run shares, read-only.
pub struct Shared {
    pub clock: Clock,
    pub addr: SocketAddr,
    /// The requests and the host of each connection.
    pub mix: Arc<crate::mix::Mix>,
    pub tls: Option<Arc<ClientConfig>>,
    pub timeout_ns: Nanos,
    pub connect_timeout_ns: Nanos,
    /// See [`crate::LoadSpec::send_window`].
    pub send_window_ns: Nanos,
    pub new_connection: bool,
    pub backend_header: String,
    pub model: Model,
    /// Requests per second over all workers; `None` is closed loop.
    pub rate: Option<f64>,
    pub workers: usize,
    pub connections: usize,
    pub warmup_ns: Nanos,
    pub duration_ns: Nanos,
    /// Set by a signal handler: stop sending, finish what is in flight, report.
    pub stop: Arc<AtomicBool>,
    /// Workers meet here after opening their connections; the run starts together.
    pub gate: Barrier,
    /// Start of the schedule, published by the coordinator between the two gate waits.
    pub start: AtomicU64,
    /// When the first worker stopped sending (0: not yet), to size a partial window.
    pub stopped_at: AtomicU64,
    /// Fraction of requests kept individually (0: none).
    pub sample: f64,
    /// The CPUs the workers run on (empty: any).
    pub cpus: Vec<usize>,
    /// What pinning the workers to `cpus` came to.
    pub pinned: std::sync::Mutex<Pinned>,
    /// The network namespace each worker enters first (`None`: the process's own).
    pub netns: Option<std::path::PathBuf>,
    /// Set by a worker that could raise its scheduling priority.
    pub priority_raised: AtomicBool,
    /// Set when any worker receives its first measured response: the drain's deadline
    /// records censored latencies only in a run that received one (see
    /// [`Worker::censor`]).
    pub answered: AtomicBool,
    /// Why a worker failed, if one did (the run then ends with this error).
    pub failure: std::sync::Mutex<Option<String>>,
    /// Change windows to count requests by, when the run is marked.
    pub marks: Option<Arc<crate::windows::Marks>>,
    /// A load plan (its warm-up in front) in place of a constant rate.
    pub profile: Option<Arc<crate::profile::RateProfile>>,
    /// The plan's report steps' bounds, ns from the measured window's start (empty
    /// without a plan): fixed before the run, so a request's step follows from its
    /// intended time alone.
    pub step_bounds: Vec<(Nanos, Nanos)>,
    /// What each response is scanned for, counted per window (empty: nothing).
    pub markers: Box<[http1::Marker]>,
    /// This generator's place in a split run (`None`: the whole run).
    pub slice: Option<crate::split::Slice>,
    /// HTTP/2 (`None`: HTTP/1.1).
    pub h2: Option<Arc<H2Setup>>,
    /// The settings of the run, for a plain switch the workers only read (see
    /// [`crate::Plan::spec`]); the hot loop's own settings are the fields above, in
    /// the units it uses.
    pub spec: Arc<crate::LoadSpec>,
}

/// The load plan's step (index into `bounds`, ns from the measured window's start
/// `measure_start`) of a request intended at clock time `t`; `None` without a plan.
/// A request intended before the window is in the first.
#[inline]
fn step_of(bounds: &[(Nanos, Nanos)], measure_start: Nanos, t: Nanos) -> Option<usize> {
    if bounds.is_empty() {
        return None;
    }
    let since = t.saturating_sub(measure_start);
    Some(
        bounds
            .partition_point(|(a, _)| *a <= since)
            .saturating_sub(1),
    )
}

/// What a worker tells the collector.
pub enum Msg {
    /// One second of measurements.
    Interval(usize, Box<Interval>),
    /// The worker is done; its totals.
    Done(usize, Box<Totals>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No socket.
    Closed,
    /// TCP connect under way.
    Connecting,
    /// TLS handshake under way.
    Handshaking,
    /// Connected, no request.
    Idle,
    /// A request is being written or its response read.
    Active,
}

/// The outcome of driving a connection.
enum Step {
    Pending,
    Done(Response),
}

struct Conn {
    sock: Option<TcpStream>,
    tls: Option<Box<rustls::ClientConnection>>,
    phase: Phase,
    /// Bumped on every close, so events for an old socket are recognised as stale.
    generation: u32,
    lane: u32,
    /// The host of the mix this connection carries (its `Host`, its server name).
    host: u32,
    /// The target of the mix of its current (or last) request.
    target: u32,
    /// Carries a request (as opposed to connecting ahead of the run).
    busy: bool,
    measured: bool,
    /// This request is kept in the sample.
    sampled: bool,
    intended: Nanos,
    dispatched: Nanos,
    deadline: Nanos,
    written: usize,
    parser: ResponseParser,
    /// The first bytes the server sent during the TLS handshake, to tell a
    /// plain-HTTP answer from a broken handshake.
    head: [u8; 5],
    head_len: u8,
    /// The server's close (`EPOLLRDHUP`/`EPOLLHUP`) came with the readiness that
    /// delivered the current response: edge-triggered epoll says so once, so it is
    /// kept until the response completes, when the connection is closed instead of
    /// going idle.
    peer_closed: bool,
    /// Closed because the server closed it while it was kept alive: the next request
    /// on it is a reconnect counted in `reconnects_after_server_close`.
    closed_by_server: bool,
    /// The connection has carried a full response, so bytes that cannot begin the
    /// next one are the rest of the last (a framing desync, not a bad response).
    reused: bool,
    /// The status of the last response on this connection if it was measured
    /// (intended at `intended`; 0: none): what a framing desync found later (bytes
    /// arriving while the connection is idle) turns into a `framing` error, whether
    /// it was counted a success or a `status` error.
    last_status: u16,
    /// When the bytes of the last read reached the socket, by the kernel's wall
    /// clock (0: not known); see [`crate::rx`].
    rx_stamp: u64,
    /// HTTP/2: the connection (session) this slot's streams go on; [`NO_SESSION`]
    /// for HTTP/1.1, where the slot is the connection.
    session: u32,
    /// HTTP/2: the request is with the connection (a stream open or queued).
    stream_open: bool,
    /// HTTP/2: what the response's fields said.
    answer: Answer,
}

impl Conn {
    /// The backend id the last response carried.
    #[inline]
    fn backend(&self) -> Option<&[u8]> {
        if self.session == NO_SESSION {
            self.parser.backend()
        } else {
            let n = usize::from(self.answer.backend_len);
            (n > 0).then(|| &self.answer.backend[..n])
        }
    }

    /// The markers the last response carried.
    #[inline]
    fn markers(&self) -> u8 {
        if self.session == NO_SESSION {
            self.parser.markers()
        } else {
            self.answer.markers.seen()
        }
    }

    /// The last response was framed two ways (HTTP/1.1 only).
    #[inline]
    fn ambiguous(&self) -> bool {
        self.session == NO_SESSION && self.parser.ambiguous()
    }

    /// What the request's latency counts from: its intended time, or its send when
    /// the send window sent it before that (see [`crate::LoadSpec::send_window`]),
    /// so that a request sent early never shows less latency than it took.
    #[inline]
    fn origin(&self) -> Nanos {
        self.intended.min(self.dispatched)
    }
}

/// Runs one worker to the end of the run and sends its results to `tx`; the
/// collector sends its spent intervals back on `recycled`, cleared.
///
/// A worker that fails (or panics: a bug) must not leave the others waiting at the
/// start gate forever: it still passes the gate, stops the run, records why, and
/// reports empty totals, so the run ends with an error instead of hanging.
pub fn run(
    id: usize,
    conn_offset: usize,
    conns: usize,
    shared: Arc<Shared>,
    tx: Sender<Msg>,
    recycled: Receiver<Box<Interval>>,
) {
    // Sleep precisely: the kernel's default timer slack (50 µs) would otherwise be
    // added to every wake-up.
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
    place_this_thread(&shared);
    let passed = std::cell::Cell::new(0);
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Some(ns) = &shared.netns {
            enter_netns(ns)
                .map_err(|e| format!("enter network namespace {}: {e}", ns.display()))?;
        }
        let mut w = Worker::new(id, conn_offset, conns, shared.clone(), tx.clone(), recycled)
            .map_err(|e| e.to_string())?;
        w.run(&passed).map_err(|e| format!("epoll_wait: {e}"))?;
        Ok::<(), String>(())
    }));
    let failure = match res {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e,
        Err(p) => p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panicked".into()),
    };
    if let Ok(mut f) = shared.failure.lock() {
        f.get_or_insert(format!("worker {id} failed: {failure}"));
    }
    shared.stop.store(true, Ordering::Relaxed);
    for _ in passed.get()..2 {
        shared.gate.wait();
    }
    let _ = tx.send(Msg::Done(id, Box::default()));
}

/// Moves the calling thread (only it: namespaces are per thread) into the network
/// namespace at `path`, so the sockets it opens leave from there.
pub(crate) fn enter_netns(path: &std::path::Path) -> io::Result<()> {
    let f = std::fs::File::open(path)?;
    rustix::thread::move_into_link_name_space(
        std::os::fd::AsFd::as_fd(&f),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )?;
    Ok(())
}

/// The nice value a worker thread asks for.
const RAISED_NICE: i32 = -10;

/// What pinning the workers to the generator's CPUs came to, over every worker: the
/// CPUs they could run on afterwards, as the kernel reports them, and why it refused
/// the pin, if it did. A refused pin does not stop the run (the workers run where
/// they were allowed before), but the result says so: its figures were measured
/// elsewhere than planned.
#[derive(Debug, Default)]
pub struct Pinned {
    pub applied: std::collections::BTreeSet<usize>,
    pub refused: Option<String>,
}

/// Confines the calling worker thread to the generator's CPUs and raises its own
/// scheduling priority where permitted (nice -10, this thread only: the proxies and
/// backends a run starts keep theirs), so that on a busy machine the generator is not
/// the one that waits. Neither is required: without them the run goes on, and a
/// refused pin is recorded ([`Pinned`]).
fn place_this_thread(shared: &Shared) {
    if !shared.cpus.is_empty() {
        use rustix::thread::CpuSet;
        let mut set = CpuSet::new();
        // A CPU beyond what a set can name cannot be pinned to: left out, the pin is
        // refused (an empty set) or holds the others.
        for &c in shared.cpus.iter().filter(|&&c| c < CpuSet::MAX_CPU) {
            set.set(c);
        }
        let refused = rustix::thread::sched_setaffinity(None, &set).err();
        let now = rustix::thread::sched_getaffinity(None).ok();
        if let Ok(mut p) = shared.pinned.lock() {
            if let Some(e) = refused {
                p.refused
                    .get_or_insert_with(|| io::Error::from(e).to_string());
            }
            if let Some(now) = now {
                p.applied
                    .extend((0..CpuSet::MAX_CPU).filter(|&c| now.is_set(c)));
            }
        }
    }
    // setpriority sets an absolute nice value: never lower a priority someone already
    // raised further (`nice -n -20 ingressbench ...`).
    let me = Some(rustix::thread::gettid());
    match rustix::process::getpriority_process(me) {
        Ok(now) if now <= RAISED_NICE => shared.priority_raised.store(true, Ordering::Relaxed),
        _ => {
            if rustix::process::setpriority_process(me, RAISED_NICE).is_ok() {
                shared.priority_raised.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// The xorshift state of worker `id`'s sampling decisions: distinct per worker and,
/// through `seed`, per generator of a split run (seed 0 is a single generator's).
fn sampling_seed(id: usize, seed: u64) -> u64 {
    let s = 0x9E37_79B9_7F4A_7C15
        ^ (id as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9)
        ^ seed.wrapping_mul(0x94D0_49BB_1331_11EB);
    // xorshift never leaves 0.
    if s == 0 {
        0x9E37_79B9_7F4A_7C15
    } else {
        s
    }
}

/// One epoll wait into `events` (cleared first). An interrupted wait (EINTR: a
/// signal arrived) is an empty wait; any other error is returned, because a loop that
/// ignored it would spin to the end of the run recording nothing.
pub(crate) fn epoll_wait(
    ep: &std::os::fd::OwnedFd,
    events: &mut Vec<epoll::Event>,
    ts: &rustix::time::Timespec,
) -> io::Result<()> {
    events.clear();
    match epoll::wait(ep, rustix::buffer::spare_capacity(events), Some(ts)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// How many times this thread has gone to sleep (its voluntary context switches,
/// from `/proc/thread-self/status`); `None` where the kernel does not say.
fn voluntary_switches() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
}

/// A wait of `ns` as the kernel's calls take it.
#[inline]
pub(crate) fn timespec(ns: Nanos) -> rustix::time::Timespec {
    rustix::time::Timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    }
}

/// Timed waits of [`measure_wakeup`], and how long each asks for.
const WAKEUP_WAITS: usize = 100;
const WAKEUP_ASK_NS: Nanos = 100_000;

/// How late this thread, where it runs (its CPU, its priority), wakes from a timed
/// wait on this machine: [`WAKEUP_WAITS`] epoll waits of 100 µs on an empty epoll set,
/// the way the loop waits, each one's overshoot in ns. About 15 ms before the run.
/// The result shows it beside the lag, so a user sees the floor of the machine they
/// measured on, and a lag over the limit with CPU to spare is told apart from a
/// generator short of CPU.
pub(crate) fn measure_wakeup(clock: &Clock) -> Vec<u32> {
    let Ok(ep) = epoll::create(epoll::CreateFlags::CLOEXEC) else {
        return Vec::new();
    };
    let mut events = Vec::with_capacity(1);
    let ts = timespec(WAKEUP_ASK_NS);
    (0..WAKEUP_WAITS)
        .filter_map(|_| {
            let t0 = clock.now();
            epoll_wait(&ep, &mut events, &ts).ok()?;
            let late = (clock.now() - t0).saturating_sub(WAKEUP_ASK_NS);
            Some(late.min(u64::from(u32::MAX)) as u32)
        })
        .collect()
}

struct Worker {
    id: usize,
    shared: Arc<Shared>,
    tx: Sender<Msg>,
    /// Intervals the collector cleared, to reuse ([`Recorder::give_back`]).
    recycled: Receiver<Box<Interval>>,
    ep: std::os::fd::OwnedFd,
    events: Vec<epoll::Event>,
    conns: Vec<Conn>,
    lanes: Vec<Lane>,
    /// Per lane: the key its requests' targets are drawn with (its first
    /// connection's index among all of the run's), and the host its connections
    /// carry (see [`crate::mix::Mix::pick`]).
    lane_key: Vec<u64>,
    lane_host: Vec<u32>,
    /// Lanes with an idle connection, by due time.
    heap: BinaryHeap<Reverse<(Nanos, u32)>>,
    /// Lanes waiting for a connection, by the due time they wait with (entries of
    /// lanes no longer waiting are dropped when they come to the top): what a quiet
    /// wait must wake for. Kept only when `quiet` is.
    blocked: BinaryHeap<Reverse<(Nanos, u32)>>,
    /// Waits may sleep through responses (open loop; see [`Worker::quiet_until`]).
    quiet: bool,
    /// Every lane follows a schedule (open loop): sends due while events are handled
    /// go out between them ([`Worker::dispatch_if_due`]).
    scheduled: bool,
    /// Connections connecting or in their TLS handshake: while there are any, every
    /// wait wakes for readiness, so no handshake step waits for a due time.
    opening: u32,
    rec: Recorder,
    scratch: Box<[u8]>,
    busy: usize,
    measure_start: Nanos,
    end: Nanos,
    /// xorshift state for sampling decisions.
    rng: u64,
    /// This worker has received a measured response (and said so in `Shared`).
    answered: bool,
    /// Negotiated TLS version, also when connections were opened before the window.
    tls_version: Option<&'static str>,
    /// HTTP/2 connections (empty for HTTP/1.1), each carrying its `streams` slots.
    sessions: Vec<Session>,
    /// What the HTTP/2 state said about streams during a read, acted on after it.
    h2_events: Vec<(u32, Ev)>,
    /// Measured requests sent again after a GOAWAY or REFUSED_STREAM.
    h2_retried: u64,
    /// HTTP/2 connections opened.
    h2_opened: u64,
    /// HTTP/2 connections with requests not yet written (see `flush_dirty`).
    h2_dirty: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoll_failure_is_an_error_not_an_empty_wait() {
        let ts = timespec(0);
        let mut events = Vec::with_capacity(4);
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC).unwrap();
        epoll_wait(&ep, &mut events, &ts).expect("an empty wait on an epoll fd");
        // Not an epoll descriptor: epoll_wait fails with EINVAL on every call.
        let not_epoll: std::os::fd::OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        let e = epoll_wait(&not_epoll, &mut events, &ts).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
    }
}

#[cfg(test)]
mod timespec_tests {
    #[test]
    fn a_wait_in_ns_is_whole_seconds_and_the_rest() {
        let t = super::timespec(2_500_000_123);
        assert_eq!((t.tv_sec, t.tv_nsec), (2, 500_000_123));
        let t = super::timespec(999_999_999);
        assert_eq!((t.tv_sec, t.tv_nsec), (0, 999_999_999));
    }
}

#[cfg(test)]
mod step_tests {
    use super::step_of;

    /// A request's step follows from its intended time: the last step starting at or
    /// before it, counted from the measured window's start.
    #[test]
    fn a_request_is_in_the_step_of_its_intended_time() {
        let bounds = [(0, 1_000), (1_000, 3_000), (3_000, 4_000)];
        let at = |t| step_of(&bounds, 10_000, t);
        assert_eq!(at(9_000), Some(0), "before the window: the first");
        assert_eq!(at(10_000), Some(0));
        assert_eq!(at(10_999), Some(0));
        assert_eq!(at(11_000), Some(1));
        assert_eq!(at(13_000), Some(2));
        assert_eq!(at(99_000), Some(2), "the drain counts for the last");
        assert_eq!(step_of(&[], 10_000, 11_000), None, "no plan");
    }
}
