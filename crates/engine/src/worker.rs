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

mod h2;
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
    /// wrk2's way with a keep-alive connection the server closed while it was idle:
    /// write the next request on it anyway and count what that gets (see
    /// [`Worker::idle_event`]). Off: such a connection is closed as soon as its
    /// close is seen and the next request opens a new one.
    pub reuse_closed: bool,
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
fn enter_netns(path: &std::path::Path) -> io::Result<()> {
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
fn epoll_wait(
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
fn timespec(ns: Nanos) -> rustix::time::Timespec {
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

impl Worker {
    fn new(
        id: usize,
        conn_offset: usize,
        conns: usize,
        shared: Arc<Shared>,
        tx: Sender<Msg>,
        recycled: Receiver<Box<Interval>>,
    ) -> io::Result<Worker> {
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        // HTTP/2: `conns` connections of `streams` slots each.
        let (sessions, slots) = match shared.h2.as_deref() {
            Some(setup) => (h2::sessions(setup, conns), conns * setup.streams),
            None => (Vec::new(), conns),
        };
        let streams = shared.h2.as_ref().map_or(1, |h| h.streams);
        let markers = http1::marker::MarkerScan::new(&shared.markers);
        let conn_list = (0..slots)
            .map(|i| Conn {
                session: if sessions.is_empty() {
                    NO_SESSION
                } else {
                    (i / streams) as u32
                },
                stream_open: false,
                answer: Answer::new(markers.clone()),
                sock: None,
                tls: None,
                phase: Phase::Closed,
                generation: 0,
                lane: 0,
                host: 0,
                target: 0,
                busy: false,
                measured: false,
                sampled: false,
                intended: 0,
                dispatched: 0,
                deadline: 0,
                written: 0,
                head: [0; 5],
                head_len: 0,
                peer_closed: false,
                closed_by_server: false,
                reused: false,
                last_status: 0,
                rx_stamp: 0,
                // Lenient: a response curl takes is not a failure of the proxy under
                // test (docs/load.md, "What responses the engine accepts").
                parser: ResponseParser::with_strictness(
                    &shared.backend_header,
                    shared.mix.targets[0].head,
                    Strictness::Lenient,
                )
                .with_markers(&shared.markers),
            })
            .collect();
        Ok(Worker {
            id,
            tx,
            recycled,
            ep,
            events: Vec::with_capacity(1024),
            conns: conn_list,
            lanes: Vec::new(),
            lane_key: Vec::new(),
            lane_host: Vec::new(),
            heap: BinaryHeap::new(),
            blocked: BinaryHeap::new(),
            quiet: false,
            scheduled: false,
            opening: 0,
            rec: Recorder::new(0),
            scratch: vec![0u8; 64 * 1024].into_boxed_slice(),
            busy: 0,
            measure_start: 0,
            end: 0,
            rng: sampling_seed(id, shared.slice.as_ref().map_or(0, |s| s.seed)),
            answered: false,
            tls_version: None,
            sessions,
            h2_events: Vec::with_capacity(64),
            h2_retried: 0,
            h2_opened: 0,
            h2_dirty: Vec::with_capacity(64),
            shared,
        }
        .with_lanes(conn_offset))
    }

    fn with_lanes(mut self, conn_offset: usize) -> Self {
        // Lanes are built with origin 0 and shifted once the start is known.
        let s = &self.shared;
        let (rate, conn_offset, total_conns, origin) = match &s.slice {
            None => (s.rate, conn_offset, s.connections, 0),
            // One generator of several, wrk2's schedule: its connections' lanes are
            // the whole run's lanes for those connections (same interval, same
            // phases), so the generators together send one generator's schedule.
            Some(sl) if s.model == Model::PerConnection => (
                sl.total_rate,
                sl.first_connection + conn_offset,
                sl.total_connections,
                0,
            ),
            // The shared schedule queues per thread at this generator's rate, moved
            // to its first connection's phase so generators do not fire in unison.
            Some(sl) => (
                s.rate,
                conn_offset,
                s.connections,
                sl.total_rate
                    .map_or(0, |r| (sl.first_connection as f64 * 1e9 / r) as Nanos),
            ),
        };
        // The schedule is per connection; with HTTP/2 a connection has several
        // slots, all in its lane.
        let streams = s.h2.as_ref().map_or(1, |h| h.streams);
        let physical = self.conns.len() / streams;
        self.lanes = lanes_for_worker(
            s.model,
            rate,
            s.profile.as_ref(),
            origin,
            Share {
                worker: self.id,
                workers: s.workers,
                conn_offset,
                conns: physical,
                total_conns,
            },
        );
        let per_lane = physical.div_ceil(self.lanes.len().max(1));
        let conn_host = &self.shared.mix.conn_host;
        for (i, c) in self.conns.iter_mut().enumerate() {
            let p = i / streams;
            c.lane = (p / per_lane.max(1)).min(self.lanes.len() - 1) as u32;
            c.host = conn_host.get(conn_offset + p).copied().unwrap_or(0);
        }
        for (k, sess) in self.sessions.iter_mut().enumerate() {
            sess.host = conn_host.get(conn_offset + k).copied().unwrap_or(0);
        }
        self.lane_key = vec![u64::MAX; self.lanes.len()];
        self.lane_host = vec![0; self.lanes.len()];
        for (i, c) in self.conns.iter().enumerate().rev() {
            let l = c.lane as usize;
            self.lane_key[l] = (conn_offset + i / streams) as u64;
            self.lane_host[l] = c.host;
        }
        // Idle slots are taken from the end: the first stream of every connection
        // before the second of any, so that light load spreads over connections.
        let mut order: Vec<usize> = (0..self.conns.len()).collect();
        order.sort_by_key(|&i| (i % streams, i / streams));
        for &i in order.iter().rev() {
            let l = self.conns[i].lane as usize;
            self.lanes[l].idle.push(i as u32);
        }
        self
    }

    /// # Errors
    /// An epoll failure other than an interrupted wait: the worker cannot go on.
    fn run(&mut self, passed: &std::cell::Cell<usize>) -> io::Result<()> {
        if !self.shared.new_connection {
            self.preconnect()?;
        }
        self.rec.totals.wakeup_ns = measure_wakeup(&self.shared.clock);
        // Meet the other workers; the coordinator publishes the start in between.
        self.shared.gate.wait();
        passed.set(1);
        self.shared.gate.wait();
        passed.set(2);
        let start = self.shared.start.load(Ordering::Acquire);
        self.measure_start = start + self.shared.warmup_ns;
        self.end = self.measure_start + self.shared.duration_ns;
        if self.shared.stop.load(Ordering::Relaxed) {
            // Interrupted while opening connections: the window never begins, so
            // nothing was due and nothing is measured.
            self.end = self.measure_start;
        }
        let wakeup = std::mem::take(&mut self.rec.totals.wakeup_ns);
        self.rec = Recorder::new(self.measure_start);
        self.rec.totals.wakeup_ns = wakeup;
        self.rec.totals.mix = crate::mix::MixTally::for_mix(&self.shared.mix);
        self.rec.end_window(self.end);
        if self.shared.sample > 0.0 {
            // Room for the expected sample, so the hot path rarely grows the vector.
            let expect = self.shared.rate.unwrap_or(10_000.0) * self.shared.sample
                / self.shared.workers as f64
                * (self.shared.duration_ns as f64 / 1e9)
                * 1.2;
            self.rec
                .totals
                .samples
                .reserve(expect.min(5e6) as usize + 64);
        }
        let lanes = std::mem::take(&mut self.lanes);
        self.lanes = lanes.into_iter().map(|l| l.shifted(start)).collect();
        for (i, l) in self.lanes.iter().enumerate() {
            self.heap.push(Reverse((l.due(start), i as u32)));
        }
        // A closed loop sends when a response comes: it must wake for each.
        // With several HTTP/2 streams on a connection, one read can hold responses
        // that arrived apart, and one receive stamp cannot tell them apart: such a
        // worker wakes for every response instead.
        let multiplexed = self.shared.h2.as_ref().is_some_and(|h| h.streams > 1);
        self.scheduled = !self.lanes.is_empty() && self.lanes.iter().all(Lane::open_loop);
        self.quiet = !multiplexed && self.scheduled;
        self.main_loop()
    }

    /// Opens every connection (and TLS session) before the schedule starts, as wrk
    /// does, so the first second does not measure a thousand handshakes.
    fn preconnect(&mut self) -> io::Result<()> {
        let clock = self.shared.clock;
        let deadline = clock.now() + self.shared.connect_timeout_ns;
        if !self.sessions.is_empty() {
            return self.preconnect_sessions(deadline);
        }
        for i in 0..self.conns.len() {
            self.open(i, clock.now());
        }
        loop {
            let now = clock.now();
            let pending = self
                .conns
                .iter()
                .filter(|c| matches!(c.phase, Phase::Connecting | Phase::Handshaking))
                .count();
            if pending == 0 || now >= deadline || self.shared.stop.load(Ordering::Relaxed) {
                break;
            }
            self.wait_and_handle(deadline.min(now + SWEEP_NS))?;
        }
        // Whatever did not connect in time is closed; requests will reopen it.
        for i in 0..self.conns.len() {
            if matches!(self.conns[i].phase, Phase::Connecting | Phase::Handshaking) {
                self.close(i);
            }
        }
        Ok(())
    }

    /// [`Self::preconnect`] for HTTP/2: every connection up (its preface sent)
    /// before the schedule starts.
    fn preconnect_sessions(&mut self, deadline: Nanos) -> io::Result<()> {
        let clock = self.shared.clock;
        for si in 0..self.sessions.len() {
            self.session_open(si, clock.now());
        }
        loop {
            let now = clock.now();
            let pending = self
                .sessions
                .iter()
                .filter(|s| matches!(s.phase, Phase::Connecting | Phase::Handshaking))
                .count();
            if pending == 0 || now >= deadline || self.shared.stop.load(Ordering::Relaxed) {
                break;
            }
            self.wait_and_handle(deadline.min(now + SWEEP_NS))?;
        }
        for si in 0..self.sessions.len() {
            if matches!(
                self.sessions[si].phase,
                Phase::Connecting | Phase::Handshaking
            ) {
                self.close_session(si);
            }
        }
        Ok(())
    }

    fn main_loop(&mut self) -> io::Result<()> {
        let clock = self.shared.clock;
        let mut stage = Stage::Window;
        // When the window ended (its planned end, or the interrupt).
        let mut closed_at: Option<Nanos> = None;
        let mut next_sweep = 0;
        // This thread's voluntary context switches when the window began.
        let mut switches: Option<Option<u64>> = None;
        loop {
            let now = clock.now();
            if switches.is_none() && now >= self.measure_start {
                switches = Some(voluntary_switches());
            }
            if let Some(iv) = self.rec.roll(now) {
                let _ = self.tx.send(Msg::Interval(self.id, iv));
                // What the collector cleared since, for the next seconds.
                while let Ok(spare) = self.recycled.try_recv() {
                    self.rec.give_back(spare);
                }
            }
            let stop = self.shared.stop.load(Ordering::Relaxed);
            if stage == Stage::Window && (stop || now >= self.end) {
                let at = now.min(self.end);
                closed_at = Some(at);
                let _ = self.shared.stopped_at.compare_exchange(
                    0,
                    at,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                self.rec.end_window(at);
                self.rec.totals.sleeps = match (switches.flatten(), voluntary_switches()) {
                    (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                    _ => None,
                };
                self.close_window(at, now);
                stage = Stage::Drain {
                    deadline: self.end + self.shared.timeout_ns,
                };
            }
            if matches!(stage, Stage::Drain { .. }) && stop {
                stage = self.stop_sending(now);
            }
            if !matches!(stage, Stage::Interrupted { .. }) {
                self.dispatch_due(now);
                self.flush_dirty();
            }
            match stage {
                Stage::Window => {}
                Stage::Drain { deadline } => {
                    // Done when nothing is in flight and nothing due is left (a lane
                    // with requests left is on the heap, or blocked behind a busy
                    // connection).
                    if self.busy == 0 && self.heap.is_empty() {
                        break;
                    }
                    if now >= deadline {
                        // Requests that reached their own timeout are timeouts as
                        // always; only what remains is cut short by the deadline.
                        self.sweep(now);
                        self.cut_drain(deadline);
                        break;
                    }
                }
                Stage::Interrupted { until } => {
                    if self.busy == 0 {
                        break;
                    }
                    if now >= until {
                        self.abandon_in_flight();
                        break;
                    }
                }
            }
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + SWEEP_NS;
            }
            let limit = match stage {
                Stage::Window => self.end,
                Stage::Drain { deadline } => deadline,
                Stage::Interrupted { until } => until,
            };
            let mut wake = next_sweep.min(self.rec.next_roll()).min(limit);
            // (Empty after an interrupt.)
            if let Some(Reverse((due, _))) = self.heap.peek() {
                wake = wake.min(*due);
            }
            let quiet = match stage {
                Stage::Window => self.quiet_until(now),
                _ => None,
            };
            match quiet {
                Some(until) => self.sleep_and_handle(wake.min(until))?,
                None => self.wait_and_handle(wake)?,
            }
        }
        // The last second of the window, with what completed during the drain; none
        // when the run was stopped before its window began.
        if closed_at.is_some_and(|at| self.rec.window_started(at)) {
            let iv = self.rec.take_interval();
            let _ = self.tx.send(Msg::Interval(self.id, iv));
        }
        for i in 0..self.conns.len() {
            self.close(i);
        }
        for si in 0..self.sessions.len() {
            self.close_session(si);
        }
        self.rec.totals.h2 = self.h2_totals();
        let mut totals = std::mem::take(&mut self.rec.totals);
        totals.tls_version = totals.tls_version.or(self.tls_version);
        let _ = self.tx.send(Msg::Done(self.id, Box::new(totals)));
        Ok(())
    }

    /// Sends every request that is due, or due within the send window, and has an
    /// idle connection.
    fn dispatch_due(&mut self, now: Nanos) {
        let horizon = now + self.shared.send_window_ns;
        while let Some(&Reverse((due, li))) = self.heap.peek() {
            if due > horizon {
                break;
            }
            self.heap.pop();
            let lane = &mut self.lanes[li as usize];
            if lane.finished {
                continue;
            }
            if lane.open_loop() && due >= self.end {
                lane.finished = true;
                continue;
            }
            let Some(ci) = lane.idle.pop() else {
                lane.blocked = true;
                if self.quiet {
                    self.blocked.push(Reverse((due, li)));
                }
                continue;
            };
            let measured = due >= self.measure_start;
            let open_loop = lane.open_loop();
            let target = self.shared.mix.pick(
                self.lane_host[li as usize],
                self.lane_key[li as usize],
                lane.next_index(),
            );
            let lag = if open_loop && measured {
                // Sent early (within the window): not late at all.
                Some(now.saturating_sub(due.max(lane.unblocked_at)))
            } else {
                None
            };
            lane.advance();
            let next = lane.due(now);
            if open_loop && next >= self.end {
                // Nothing more of this lane is due in the window: it is done, and is
                // not kept on the heap to be woken for at a time past the end.
                lane.finished = true;
            } else if lane.idle.is_empty() {
                lane.blocked = true;
                if self.quiet {
                    self.blocked.push(Reverse((next, li)));
                }
            } else {
                self.heap.push(Reverse((next, li)));
            }
            if measured {
                self.rec.sent(lag);
                if let Some(st) = step_of(&self.shared.step_bounds, self.measure_start, due) {
                    self.rec.totals.steps.sent(st, lag);
                }
            }
            // Closed loop has no schedule to be late for: a request is intended when
            // it is sent, so corrected and uncorrected latency are the same figure.
            let intended = if open_loop { due } else { now };
            self.start_request(ci as usize, target, intended, measured, now);
        }
    }

    /// The window ends at `at` (its planned end, or an interrupt), noticed at `now`:
    /// counts what was due in it and what had been started, says why the rest was
    /// behind ([`results::Shortfall`]), and leaves on the heap only the lanes that
    /// still have requests due in the window, for the drain. Once per run.
    fn close_window(&mut self, at: Nanos, now: Nanos) {
        let t = &mut self.rec.totals;
        t.sent_in_window = t.sent;
        if !self.lanes.iter().all(|l| l.open_loop()) {
            // Closed loop: a request is intended when it is sent, and none is after
            // the end; nothing was behind.
            t.intended = t.sent;
            for l in &mut self.lanes {
                l.finished = true;
            }
            self.heap.clear();
            return;
        }
        // Per lane, its busy connections still opening and those awaiting a response.
        let mut busy = vec![(0u64, 0u64); self.lanes.len()];
        for c in self.conns.iter().filter(|c| c.busy) {
            let (opening, answering) = &mut busy[c.lane as usize];
            match c.phase {
                Phase::Active => *answering += 1,
                _ => *opening += 1,
            }
        }
        let mut intended = 0;
        t.steps_intended = vec![0; self.shared.step_bounds.len()];
        for (l, (opening, answering)) in self.lanes.iter().zip(busy) {
            intended += l.due_between(self.measure_start, at);
            for (n, (a, b)) in t.steps_intended.iter_mut().zip(&self.shared.step_bounds) {
                let (a, b) = (self.measure_start + a, (self.measure_start + b).min(at));
                if a < b {
                    *n += l.due_between(a, b);
                }
            }
            let first = l.first_at_or_after(self.measure_start).max(l.next_index());
            let last = l.first_at_or_after(at);
            if first >= last {
                continue;
            }
            if !l.idle.is_empty() {
                // A connection is free: the end fell between their due time (or the
                // moment the connection came free) and this turn of the loop. Within
                // the lag limit that is the loop's ordinary wake-up: they count as
                // started in the window, at its edge (they go out in this turn, or
                // after an interrupt are `not_sent` like any other). Beyond the
                // limit the generator was late.
                for k in first..last {
                    let lag = now.saturating_sub(l.due_at(k).max(l.unblocked_at));
                    if lag <= crate::LAG_LIMIT_NS {
                        t.sent_in_window += 1;
                    } else {
                        t.shortfall.generator_late += 1;
                    }
                }
            } else if opening > answering {
                t.shortfall.connections_failed += last - first;
            } else {
                t.shortfall.connections_busy += last - first;
            }
        }
        t.intended = intended;
        for l in &mut self.lanes {
            if l.due(now) >= at {
                l.finished = true;
            }
        }
        self.heap.retain(|Reverse((due, _))| *due < at);
    }

    /// An interrupt (in the window or during the drain): nothing more is sent, and
    /// what was due but never started is `not_sent`. Returns the stage that waits a
    /// moment for the requests in flight.
    fn stop_sending(&mut self, now: Nanos) -> Stage {
        self.heap.clear();
        for l in &mut self.lanes {
            l.finished = true;
        }
        let t = &mut self.rec.totals;
        t.interrupted = true;
        t.not_sent = t.intended.saturating_sub(t.sent);
        Stage::Interrupted {
            until: now + INTERRUPT_DRAIN_NS,
        }
    }

    /// The drain's deadline has come: every measured request still waiting, for a
    /// connection or for its response, is a `timeout`, recorded at its latency so far
    /// (from its intended time to `deadline`): a lower bound, and the tail stays in
    /// the percentiles instead of vanishing from them.
    fn cut_drain(&mut self, deadline: Nanos) {
        for ci in 0..self.conns.len() {
            let c = &self.conns[ci];
            if !c.busy {
                continue;
            }
            if c.measured {
                let (intended, origin, dispatched, sampled) =
                    (c.intended, c.origin(), c.dispatched, c.sampled);
                let group = self.shared.mix.targets[c.target as usize].group;
                self.censor(
                    group,
                    intended,
                    origin,
                    Some(deadline.saturating_sub(dispatched)),
                    sampled,
                    deadline,
                );
            }
            self.conns[ci].busy = false;
            self.busy -= 1;
            self.close(ci);
        }
        for li in 0..self.lanes.len() {
            let l = &self.lanes[li];
            let first = l.first_at_or_after(self.measure_start).max(l.next_index());
            let last = if l.open_loop() {
                l.first_at_or_after(self.end)
            } else {
                first
            };
            for k in first..last {
                let intended = self.lanes[li].due_at(k);
                let sampled = self.sample_next();
                let target = self
                    .shared
                    .mix
                    .pick(self.lane_host[li], self.lane_key[li], k);
                let group = self.shared.mix.targets[target as usize].group;
                self.censor(group, intended, intended, None, sampled, deadline);
                self.rec.totals.timed_out_unsent += 1;
            }
            self.lanes[li].finished = true;
        }
        self.heap.clear();
    }

    /// One request cut short by the drain's deadline `at` (see [`Worker::cut_drain`]);
    /// `uncorrected_ns`: how long since it was started, if it was; `origin`: what its
    /// latency counts from ([`Conn::origin`]).
    ///
    /// Its latency is recorded only if the run has received a response: a lower
    /// bound on an answer is worth keeping from a server that answers, but from one
    /// that never did it would be the only latency of the run, made of nothing but
    /// the drain's cut-offs. A run that received no response keeps no latency at all
    /// (docs/results.md), and the request is a plain `timeout`.
    fn censor(
        &mut self,
        group: u32,
        intended: Nanos,
        origin: Nanos,
        uncorrected_ns: Option<u64>,
        sampled: bool,
        at: Nanos,
    ) {
        let latency = at.saturating_sub(origin);
        let record = self.answered || self.shared.answered.load(Ordering::Relaxed);
        if record {
            self.rec.censored(latency, uncorrected_ns);
        } else {
            self.rec.error(ErrorKind::Timeout);
        }
        self.rec.totals.mix.censored(group, latency, record);
        let step = step_of(&self.shared.step_bounds, self.measure_start, intended);
        let t = &mut self.rec.totals;
        let windows = self.shared.marks.as_ref().map(|m| m.window_of(intended));
        for (w, tally) in [(windows, &mut t.windows), (step, &mut t.steps)] {
            if let Some(w) = w {
                if record {
                    tally.censored(w, latency);
                } else {
                    tally.error(w, ErrorKind::Timeout);
                }
            }
        }
        t.first_errors.note(
            ErrorKind::Timeout,
            &Cause::DrainDeadline {
                after: self.shared.timeout_ns,
            },
        );
        if sampled {
            t.samples.push(RawSample {
                intended,
                latency_ns: latency,
                status: 0,
                error: 1 + ErrorKind::Timeout.index() as u8,
                backend: -1,
            });
        }
    }

    fn abandon_in_flight(&mut self) {
        for i in 0..self.conns.len() {
            if self.conns[i].busy {
                if self.conns[i].measured {
                    self.rec.totals.unfinished += 1;
                }
                self.conns[i].busy = false;
                self.busy -= 1;
                self.close(i);
            }
        }
    }

    /// Whether the next request goes into the sample.
    #[inline]
    fn sample_next(&mut self) -> bool {
        let f = self.shared.sample;
        if f <= 0.0 {
            return false;
        }
        if f >= 1.0 {
            return true;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        ((self.rng >> 11) as f64 / (1u64 << 53) as f64) < f
    }

    fn start_request(
        &mut self,
        ci: usize,
        target: u32,
        intended: Nanos,
        measured: bool,
        now: Nanos,
    ) {
        let sampled = measured && self.sample_next();
        let mix = &self.shared.mix;
        let c = &mut self.conns[ci];
        if measured {
            self.rec.totals.mix.sent(c.host);
        }
        if mix.targets.len() > 1 {
            c.parser.set_head_request(mix.targets[target as usize].head);
        }
        c.target = target;
        c.sampled = sampled;
        debug_assert!(!c.busy);
        c.busy = true;
        c.measured = measured;
        c.intended = intended;
        c.dispatched = now;
        c.written = 0;
        self.busy += 1;
        if c.session != NO_SESSION {
            self.h2_start(ci, now);
            return;
        }
        match c.phase {
            Phase::Idle => {
                enter(&mut self.opening, &mut c.phase, Phase::Active);
                c.deadline = now + self.shared.timeout_ns;
                let r = self.drive(ci, false);
                self.settle(ci, r);
            }
            Phase::Closed => {
                if std::mem::take(&mut self.conns[ci].closed_by_server) && measured {
                    self.rec.totals.reconnects_after_server_close += 1;
                    if let Some(m) = &self.shared.marks {
                        self.rec.totals.windows.reconnect(m.window_of(intended));
                    }
                }
                self.open(ci, now)
            }
            // A connection still opening (only possible before the run) takes the
            // request along; it is written once the connection is up.
            Phase::Connecting | Phase::Handshaking | Phase::Active => {}
        }
    }

    /// Starts a TCP connection.
    fn open(&mut self, ci: usize, now: Nanos) {
        let s = &self.shared;
        let res = connect(s.addr, s.new_connection);
        let c = &mut self.conns[ci];
        c.deadline = now + s.connect_timeout_ns;
        c.parser.reset();
        c.head_len = 0;
        c.peer_closed = false;
        c.reused = false;
        c.last_status = 0;
        c.rx_stamp = 0;
        match res {
            Ok((sock, connected)) => {
                if s.rate.is_some() {
                    crate::rx::enable(&sock);
                }
                let key = ((c.generation as u64) << 32) | ci as u64;
                let flags = epoll::EventFlags::IN
                    | epoll::EventFlags::OUT
                    | epoll::EventFlags::RDHUP
                    | epoll::EventFlags::ET;
                if let Err(e) = epoll::add(&self.ep, &sock, epoll::EventData::new_u64(key), flags) {
                    self.fail(ci, Failure::io(ErrorKind::Connect, e.into()));
                    return;
                }
                c.sock = Some(sock);
                enter(&mut self.opening, &mut c.phase, Phase::Connecting);
                if connected {
                    self.connected(ci, now);
                }
            }
            Err(e) => self.fail(ci, Failure::io(ErrorKind::Connect, e)),
        }
    }

    /// TCP is up: start TLS, or go straight to the request.
    fn connected(&mut self, ci: usize, now: Nanos) {
        let c = &mut self.conns[ci];
        if let Some(cfg) = &self.shared.tls {
            let name = self.shared.mix.hosts[c.host as usize]
                .server_name
                .clone()
                .expect("an https host has a server name (checked when the mix was built)");
            match rustls::ClientConnection::new(cfg.clone(), name) {
                Ok(t) => c.tls = Some(Box::new(t)),
                Err(e) => {
                    self.fail(ci, Failure::new(ErrorKind::Tls, Cause::Tls(e)));
                    return;
                }
            }
            enter(&mut self.opening, &mut c.phase, Phase::Handshaking);
            let r = self.drive(ci, false);
            self.settle(ci, r);
        } else if c.busy {
            enter(&mut self.opening, &mut c.phase, Phase::Active);
            c.deadline = now + self.shared.timeout_ns;
            let r = self.drive(ci, false);
            self.settle(ci, r);
        } else {
            enter(&mut self.opening, &mut c.phase, Phase::Idle);
        }
    }

    /// Acts on the result of driving a connection.
    fn settle(&mut self, ci: usize, r: Result<Step, Failure>) {
        match r {
            Ok(Step::Pending) => {}
            Ok(Step::Done(resp)) => self.complete(ci, resp),
            Err(f) => self.fail(ci, f),
        }
    }

    fn complete(&mut self, ci: usize, resp: Response) {
        let c = &mut self.conns[ci];
        // Complete when its last bytes arrived, however long the thread slept or
        // worked before reading them.
        let now = crate::rx::arrived(
            c.rx_stamp,
            self.shared.clock.now(),
            crate::rx::wall_now(),
            c.dispatched,
        );
        let latency = now - c.origin();
        if c.measured {
            let group = self.shared.mix.targets[c.target as usize].group;
            self.rec.totals.mix.response(group, latency, resp.status);
            if !self.answered {
                self.answered = true;
                self.shared.answered.store(true, Ordering::Relaxed);
            }
            let backend =
                self.rec
                    .response(now, latency, now - c.dispatched, resp.status, c.backend());
            if let Some(m) = &self.shared.marks {
                let w = m.window_of(c.intended);
                let windows = &mut self.rec.totals.windows;
                windows.response(w, latency, resp.status);
                if resp.status < 400 && !self.shared.markers.is_empty() {
                    windows.marked(w, c.markers(), now);
                }
            }
            if let Some(st) = step_of(&self.shared.step_bounds, self.measure_start, c.intended) {
                self.rec.totals.steps.response(st, latency, resp.status);
            }
            if resp.status >= 400 {
                let t = &mut self.rec.totals;
                t.first_errors
                    .note(ErrorKind::Status, &Cause::Status(resp.status));
            }
            if c.ambiguous() {
                self.rec.totals.framing_warnings.note(resp.status);
            }
            if c.sampled {
                self.rec.totals.samples.push(RawSample {
                    intended: c.intended,
                    latency_ns: latency,
                    status: resp.status,
                    error: if resp.status >= 400 {
                        1 + ErrorKind::Status.index() as u8
                    } else {
                        0
                    },
                    backend,
                });
            }
        }
        let c = &mut self.conns[ci];
        if c.session != NO_SESSION {
            c.phase = Phase::Idle;
            self.finish(ci, now);
            return;
        }
        c.reused = true;
        c.last_status = if c.measured { resp.status } else { 0 };
        // The server closed a connection it had kept alive (no `Connection: close`),
        // and said so with this response: it must not carry another request.
        let server_closed = c.peer_closed && !resp.close && !self.shared.reuse_closed;
        let close = resp.close || self.shared.new_connection || server_closed;
        self.finish(ci, now);
        if close {
            self.close(ci);
            self.conns[ci].closed_by_server = server_closed;
        } else {
            enter(&mut self.opening, &mut self.conns[ci].phase, Phase::Idle);
        }
    }

    /// A request (or a connection opened ahead of the run) failed.
    fn fail(&mut self, ci: usize, f: Failure) {
        let kind = f.kind;
        let c = &self.conns[ci];
        if c.busy && c.measured {
            self.rec.error(kind);
            let group = self.shared.mix.targets[c.target as usize].group;
            self.rec.totals.mix.error(group, kind);
            if let Some(m) = &self.shared.marks {
                self.rec.totals.windows.error(m.window_of(c.intended), kind);
            }
            if let Some(st) = step_of(&self.shared.step_bounds, self.measure_start, c.intended) {
                self.rec.totals.steps.error(st, kind);
            }
            self.rec.totals.first_errors.note(kind, &f.cause);
            if c.sampled {
                let now = self.shared.clock.now();
                self.rec.totals.samples.push(RawSample {
                    intended: c.intended,
                    latency_ns: now.saturating_sub(c.origin()),
                    status: 0,
                    error: 1 + kind.index() as u8,
                    backend: -1,
                });
            }
        }
        self.close(ci);
        if self.conns[ci].busy {
            let now = self.shared.clock.now();
            self.finish(ci, now);
        }
    }

    /// The connection no longer carries a request: give it back to its lane.
    fn finish(&mut self, ci: usize, now: Nanos) {
        let c = &mut self.conns[ci];
        c.busy = false;
        self.busy -= 1;
        let li = c.lane;
        let lane = &mut self.lanes[li as usize];
        lane.idle.push(ci as u32);
        if lane.blocked && !lane.finished {
            lane.blocked = false;
            lane.unblocked_at = now;
            self.heap.push(Reverse((lane.due(now), li)));
        }
    }

    fn close(&mut self, ci: usize) {
        if self.conns[ci].session != NO_SESSION {
            self.h2_release(ci);
            return;
        }
        let c = &mut self.conns[ci];
        if c.sock.is_some() {
            // Closing the descriptor also removes it from the epoll set.
            c.sock = None;
            c.tls = None;
            c.generation = c.generation.wrapping_add(1);
        }
        enter(&mut self.opening, &mut c.phase, Phase::Closed);
        c.parser.reset();
        c.peer_closed = false;
        c.closed_by_server = false;
    }

    /// Fails every request past its deadline.
    fn sweep(&mut self, now: Nanos) {
        self.sweep_sessions(now);
        for ci in 0..self.conns.len() {
            let c = &self.conns[ci];
            if !c.busy || c.deadline > now {
                continue;
            }
            // HTTP/2: a connection late to open fails its requests itself (above).
            if c.session != NO_SESSION && c.phase == Phase::Connecting {
                continue;
            }
            let s = &self.shared;
            let f = match c.phase {
                Phase::Connecting | Phase::Closed => Failure::new(
                    ErrorKind::ConnectTimeout,
                    Cause::ConnectDeadline {
                        after: s.connect_timeout_ns,
                        tls: false,
                    },
                ),
                Phase::Handshaking => Failure::new(
                    ErrorKind::ConnectTimeout,
                    Cause::ConnectDeadline {
                        after: s.connect_timeout_ns,
                        tls: true,
                    },
                ),
                Phase::Active | Phase::Idle => Failure::new(
                    ErrorKind::Timeout,
                    Cause::ResponseDeadline {
                        after: s.timeout_ns,
                    },
                ),
            };
            self.fail(ci, f);
        }
    }

    /// Whether this wait may sleep through responses, and until when at the latest:
    /// the first due time (less the send window) of a lane waiting for a connection,
    /// whose response must be read by then. Not while a connection is opening (a handshake step would wait),
    /// nor once a waiting lane is due (the response it waits for is read as soon as
    /// it comes).
    ///
    /// Why: on a virtual machine a wake-up costs more CPU than a request (an
    /// interrupt across cores, a timer armed, a context switch each way), and at a
    /// fixed rate most wake-ups were for responses, one by one. Sleeping only until
    /// the next send, the thread reads every response that arrived meanwhile in one
    /// pass, each timed by the kernel's receive stamp ([`crate::rx`]), so no latency
    /// grows by the sleep.
    fn quiet_until(&mut self, now: Nanos) -> Option<Nanos> {
        if !self.quiet || self.opening > 0 {
            return None;
        }
        while let Some(&Reverse((due, li))) = self.blocked.peek() {
            let lane = &self.lanes[li as usize];
            if lane.blocked && !lane.finished && lane.due(now) == due {
                // Its request may go as early as the send window allows.
                let by = due.saturating_sub(self.shared.send_window_ns);
                return (by > now).then_some(by);
            }
            self.blocked.pop();
        }
        Some(Nanos::MAX)
    }

    /// Sleeps until `wake` whatever arrives meanwhile, then handles every event
    /// that did (see [`Worker::quiet_until`]).
    fn sleep_and_handle(&mut self, wake: Nanos) -> io::Result<()> {
        let wait = wake.saturating_sub(self.shared.clock.now());
        if wait > 0 {
            let ts = timespec(wait);
            let _ =
                rustix::thread::clock_nanosleep_relative(rustix::thread::ClockId::Monotonic, &ts);
        }
        self.wait_and_handle(0)
    }

    /// Waits for events until `wake` at the latest and handles them.
    fn wait_and_handle(&mut self, wake: Nanos) -> io::Result<()> {
        // The clock is read again here, not taken from the top of the loop: the
        // iteration's own work (dispatching, events, the sweep) would otherwise be
        // added to every sleep, and every request after it would be that much late.
        let wait = wake.saturating_sub(self.shared.clock.now());
        let ts = timespec(wait);
        epoll_wait(&self.ep, &mut self.events, &ts)?;
        let events = std::mem::take(&mut self.events);
        for ev in &events {
            let key = ev.data.u64();
            let ci = (key & 0xffff_ffff) as usize;
            let generation = (key >> 32) as u32;
            if !self.sessions.is_empty() {
                if ci < self.sessions.len() && self.sessions[ci].generation == generation {
                    self.on_session_event(ci, ev.flags);
                }
                continue;
            }
            if ci >= self.conns.len() || self.conns[ci].generation != generation {
                continue;
            }
            self.on_event(ci, ev.flags);
            self.dispatch_if_due();
        }
        self.events = events;
        Ok(())
    }

    /// Sends what came due while a wait's events were being handled, before the
    /// next event. A wait can bring hundreds of responses at once (a quiet wait
    /// sleeps through them; a busy thread finds them queued), and reading and
    /// decrypting them all first held back every send due meanwhile: the late sends'
    /// responses then came back together, the next pass was longer still, and the
    /// lateness fed on itself (issue 40: S1's 1000 TLS connections at 30,000 req/s
    /// on one core swung between a lag p99 of 0.3 ms and 10 ms). Responses keep
    /// their kernel receive stamps ([`crate::rx`]), so reading them a little later
    /// costs them nothing; a send that waits is late for good. One clock read per
    /// event, and only while a lane is waiting on the heap.
    ///
    /// Open loop only: a closed loop has no schedule to be late for. (The 11 %
    /// fewer requests a second seen at `--max` while this ran there too came from
    /// the stall probe, not from this: it stayed with this limited to open loop and
    /// went with the probe, docs/benchmarks.md.)
    #[inline]
    fn dispatch_if_due(&mut self) {
        if !self.scheduled {
            return;
        }
        let Some(&Reverse((due, _))) = self.heap.peek() else {
            return;
        };
        let now = self.shared.clock.now();
        if due <= now + self.shared.send_window_ns {
            self.dispatch_due(now);
            if !self.sessions.is_empty() {
                self.flush_dirty();
            }
        }
    }

    fn on_event(&mut self, ci: usize, flags: epoll::EventFlags) {
        let readable = flags.intersects(
            epoll::EventFlags::IN
                | epoll::EventFlags::RDHUP
                | epoll::EventFlags::HUP
                | epoll::EventFlags::ERR,
        );
        match self.conns[ci].phase {
            Phase::Closed => {}
            Phase::Connecting => {
                let Some(sock) = &self.conns[ci].sock else {
                    return;
                };
                match connect_result(sock) {
                    Ok(true) => {
                        let now = self.shared.clock.now();
                        self.connected(ci, now);
                    }
                    Ok(false) => {}
                    Err(e) => self.fail(ci, Failure::io(ErrorKind::Connect, e)),
                }
            }
            Phase::Idle => {
                if readable {
                    self.idle_event(ci);
                }
            }
            Phase::Handshaking | Phase::Active => {
                if flags.intersects(epoll::EventFlags::RDHUP | epoll::EventFlags::HUP) {
                    self.conns[ci].peer_closed = true;
                }
                let r = self.drive(ci, true);
                self.settle(ci, r);
            }
        }
    }

    /// Something happened on an idle connection. Servers close idle keep-alive
    /// connections as a matter of course (a reload, an idle timeout): that is not an
    /// error, the connection is closed at once and the next request opens a new one
    /// (counted in `reconnects_after_server_close`), unless `reuse_closed` keeps
    /// wrk2's way. Bytes, though, are the rest of the last response: a framing
    /// desync, which turns that response into a `framing` error.
    fn idle_event(&mut self, ci: usize) {
        match self.idle_read(ci) {
            IdleRead::Nothing => {}
            IdleRead::Closed if self.shared.reuse_closed => {}
            IdleRead::Closed => {
                self.close(ci);
                self.conns[ci].closed_by_server = true;
            }
            IdleRead::Bytes => {
                let c = &self.conns[ci];
                if c.last_status != 0 {
                    let (intended, status) = (c.intended, c.last_status);
                    let group = self.shared.mix.targets[c.target as usize].group;
                    self.rec.desync(status);
                    self.rec.totals.mix.desync(group, status);
                    let was_error = status >= 400;
                    if let Some(m) = &self.shared.marks {
                        self.rec
                            .totals
                            .windows
                            .desync(m.window_of(intended), was_error);
                    }
                    if let Some(st) =
                        step_of(&self.shared.step_bounds, self.measure_start, intended)
                    {
                        self.rec.totals.steps.desync(st, was_error);
                    }
                    self.rec.totals.first_errors.note(
                        ErrorKind::Framing,
                        &Cause::Text(
                            "bytes arrived on a kept-alive connection after a complete response",
                        ),
                    );
                }
                self.close(ci);
            }
        }
    }

    /// What an idle connection's readiness was.
    fn idle_read(&mut self, ci: usize) -> IdleRead {
        let c = &mut self.conns[ci];
        let Some(sock) = c.sock.as_mut() else {
            return IdleRead::Closed;
        };
        match c.tls.as_mut() {
            None => match sock.read(&mut self.scratch[..1]) {
                Ok(0) => IdleRead::Closed,
                Ok(_) => IdleRead::Bytes,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => IdleRead::Nothing,
                Err(_) => IdleRead::Closed,
            },
            Some(tls) => loop {
                // TLS 1.3 servers send session tickets after the handshake; those are
                // fine. Application data is a desync; a close is a close.
                match tls.read_tls(sock) {
                    Ok(0) => return IdleRead::Closed,
                    Ok(_) => match tls.process_new_packets() {
                        Ok(st) if st.plaintext_bytes_to_read() > 0 => return IdleRead::Bytes,
                        Ok(st) if st.peer_has_closed() => return IdleRead::Closed,
                        Ok(_) => {}
                        Err(_) => return IdleRead::Closed,
                    },
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return IdleRead::Nothing,
                    Err(_) => return IdleRead::Closed,
                }
            },
        }
    }

    /// Makes all the progress possible on a connection's request without blocking.
    /// `readable`: called from a readiness event (at dispatch nothing can have been
    /// answered yet, so no read is tried, saving a syscall per request).
    fn drive(&mut self, ci: usize, readable: bool) -> Result<Step, Failure> {
        if self.conns[ci].tls.is_some() {
            self.drive_tls(ci, readable)
        } else {
            self.drive_plain(ci, readable)
        }
    }

    fn drive_plain(&mut self, ci: usize, readable: bool) -> Result<Step, Failure> {
        let stamps = self.shared.rate.is_some();
        let c = &mut self.conns[ci];
        let req = &self.shared.mix.targets[c.target as usize].request;
        let Some(sock) = c.sock.as_mut() else {
            return Err(NO_SOCKET);
        };
        if !c.busy {
            return Ok(Step::Pending);
        }
        let mut wrote_now = false;
        while c.written < req.len() {
            match sock.write(&req[c.written..]) {
                Ok(0) => return Err(Failure::new(ErrorKind::Write, Cause::Text(WROTE_NOTHING))),
                Ok(n) => {
                    c.written += n;
                    wrote_now = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Step::Pending),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Failure::io(ErrorKind::Write, e)),
            }
        }
        if wrote_now && !readable {
            return Ok(Step::Pending);
        }
        let mut read = 0;
        let mut sock = crate::rx::Stamped {
            sock,
            stamp: &mut c.rx_stamp,
            on: stamps,
        };
        let step = read_response(
            &mut sock,
            &mut c.parser,
            &mut self.scratch,
            &mut read,
            c.reused,
        );
        if c.measured {
            self.rec.totals.bytes_read += read;
        }
        step
    }

    fn drive_tls(&mut self, ci: usize, readable: bool) -> Result<Step, Failure> {
        let stamps = self.shared.rate.is_some();
        let clock = self.shared.clock;
        let timeout_ns = self.shared.timeout_ns;
        let c = &mut self.conns[ci];
        let req = &self.shared.mix.targets[c.target as usize].request;
        let (Some(sock), Some(tls)) = (c.sock.as_mut(), c.tls.as_mut()) else {
            return Err(NO_SOCKET);
        };
        // A failure during the handshake is a `tls` error; after it, a read or write.
        let during = |handshaking: bool, after: ErrorKind| {
            if handshaking {
                ErrorKind::Tls
            } else {
                after
            }
        };
        loop {
            let handshaking = tls.is_handshaking();
            // rustls buffers a request written during the handshake and sends it as
            // soon as the handshake allows.
            if c.busy && c.written < req.len() {
                match tls.writer().write(&req[c.written..]) {
                    Ok(n) => c.written += n,
                    Err(e) => return Err(Failure::io(ErrorKind::Write, e)),
                }
            }
            while tls.wants_write() {
                match tls.write_tls(sock) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(Failure::io(during(handshaking, ErrorKind::Write), e));
                    }
                }
            }
            if !readable {
                return Ok(Step::Pending);
            }
            let got = if handshaking {
                tls.read_tls(&mut HeadReader {
                    sock,
                    head: &mut c.head,
                    len: &mut c.head_len,
                })
            } else {
                tls.read_tls(&mut crate::rx::Stamped {
                    sock,
                    stamp: &mut c.rx_stamp,
                    on: stamps,
                })
            };
            match got {
                Ok(0) => {
                    if handshaking {
                        return Err(Failure::new(
                            ErrorKind::Tls,
                            Cause::Text(
                                "the server closed the connection during the TLS handshake",
                            ),
                        ));
                    }
                    return eof_step(&mut c.parser);
                }
                Ok(_) => {
                    let st = match tls.process_new_packets() {
                        Ok(st) => st,
                        Err(e) => {
                            // Let the server see our alert, then give up.
                            let _ = tls.write_tls(sock);
                            let cause = if handshaking && c.head[..c.head_len as usize] == *b"HTTP/"
                            {
                                Cause::PlainHttp
                            } else {
                                Cause::Tls(e)
                            };
                            return Err(Failure::new(during(handshaking, ErrorKind::Read), cause));
                        }
                    };
                    if handshaking && !tls.is_handshaking() {
                        if self.tls_version.is_none() {
                            self.tls_version = tls.protocol_version().map(version_name);
                        }
                        // Handshake done: the request timeout starts now.
                        if c.busy {
                            enter(&mut self.opening, &mut c.phase, Phase::Active);
                            c.deadline = clock.now() + timeout_ns;
                            if c.measured {
                                let t = &mut self.rec.totals;
                                t.handshakes += 1;
                                crate::tls::count_certificate(
                                    &mut t.certificates,
                                    tls.peer_certificates(),
                                    clock.now(),
                                );
                                if tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                                    t.resumed += 1;
                                }
                                if t.tls_version.is_none() {
                                    t.tls_version = tls.protocol_version().map(version_name);
                                }
                            }
                        } else {
                            enter(&mut self.opening, &mut c.phase, Phase::Idle);
                        }
                    }
                    if st.plaintext_bytes_to_read() > 0 {
                        loop {
                            match tls.reader().read(&mut self.scratch) {
                                Ok(0) => return eof_step(&mut c.parser),
                                Ok(n) => {
                                    // Response bytes after decryption, as for plain HTTP.
                                    if c.measured {
                                        self.rec.totals.bytes_read += n as u64;
                                    }
                                    match c.parser.feed(&self.scratch[..n]) {
                                        Ok(Some(r)) => return Ok(Step::Done(r)),
                                        Ok(None) => {}
                                        Err(e) => return Err(http_failure(e, c.reused)),
                                    }
                                }
                                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                                Err(e) => return Err(Failure::io(ErrorKind::Read, e)),
                            }
                        }
                    } else if st.peer_has_closed() {
                        return eof_step(&mut c.parser);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Step::Pending),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Failure::io(during(handshaking, ErrorKind::Read), e));
                }
            }
        }
    }
}

/// Moves a connection to `phase`, keeping the count of connections that are opening
/// (connecting or in their TLS handshake) right.
#[inline]
fn enter(opening: &mut u32, at: &mut Phase, phase: Phase) {
    let was = matches!(at, Phase::Connecting | Phase::Handshaking) as u32;
    let is = matches!(phase, Phase::Connecting | Phase::Handshaking) as u32;
    *opening = *opening + is - was;
    *at = phase;
}

/// A connection with no socket was driven: a bug, counted rather than panicking.
const NO_SOCKET: Failure = Failure {
    kind: ErrorKind::Connect,
    cause: Cause::Text("no socket (this is a bug in ingressbench)"),
};
const WROTE_NOTHING: &str = "the socket accepted no bytes of the request";

/// The socket as rustls reads it during a handshake, keeping the first bytes the
/// server sent: `HTTP/` there means a plain-HTTP server answered the ClientHello.
struct HeadReader<'a> {
    sock: &'a mut TcpStream,
    head: &'a mut [u8; 5],
    len: &'a mut u8,
}

impl Read for HeadReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(buf)?;
        let have = *self.len as usize;
        let k = (self.head.len() - have).min(n);
        self.head[have..have + k].copy_from_slice(&buf[..k]);
        *self.len += k as u8;
        Ok(n)
    }
}

/// Reads until the response is complete or the socket has nothing more.
fn read_response(
    sock: &mut impl Read,
    parser: &mut ResponseParser,
    scratch: &mut [u8],
    bytes_read: &mut u64,
    reused: bool,
) -> Result<Step, Failure> {
    loop {
        match sock.read(scratch) {
            Ok(0) => return eof_step(parser),
            Ok(n) => {
                *bytes_read += n as u64;
                match parser.feed(&scratch[..n]) {
                    Ok(Some(r)) => return Ok(Step::Done(r)),
                    Ok(None) => {}
                    Err(e) => return Err(http_failure(e, reused)),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Step::Pending),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Failure::io(ErrorKind::Read, e)),
        }
    }
}

/// What bytes that are not a valid response are: a framing desync when they are
/// bytes after a complete response (in the same read), or bytes that cannot begin a
/// response on a connection that already carried one (the rest of the last, read
/// later); otherwise a bad response, a `read` error.
fn http_failure(e: http1::Error, reused: bool) -> Failure {
    let kind = match e {
        http1::Error::TrailingBytes => ErrorKind::Framing,
        http1::Error::NotAResponse if reused => ErrorKind::Framing,
        _ => ErrorKind::Read,
    };
    Failure::new(kind, Cause::Http(e))
}

/// What an idle connection's readiness turned out to be.
enum IdleRead {
    /// Nothing to read (a TLS session ticket, or a spurious wake-up).
    Nothing,
    /// The server closed it (or reset it).
    Closed,
    /// Bytes where none belong: the rest of the last response.
    Bytes,
}

/// The server closed the connection: that completes a read-until-close response;
/// anything else (nothing or half a response) is a read error.
fn eof_step(parser: &mut ResponseParser) -> Result<Step, Failure> {
    match parser.eof() {
        Ok(Some(r)) => Ok(Step::Done(r)),
        Ok(None) => Err(Failure::new(
            ErrorKind::Read,
            Cause::Text("the server closed the connection without answering"),
        )),
        Err(e) => Err(Failure::new(ErrorKind::Read, Cause::Http(e))),
    }
}

fn version_name(v: rustls::ProtocolVersion) -> &'static str {
    match v {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
        _ => "other",
    }
}

/// Starts a non-blocking connect; `true` when it completed at once.
fn connect(addr: SocketAddr, new_connection: bool) -> io::Result<(TcpStream, bool)> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_nonblocking(true)?;
    s.set_nodelay(true)?;
    if new_connection {
        // One connection per request would leave a TIME_WAIT socket per request on
        // this side and run out of local ports within a minute; an abortive close
        // leaves none. The server has already answered in full by then.
        s.set_linger(Some(std::time::Duration::ZERO))?;
    }
    let connected = match s.connect(&addr.into()) {
        Ok(()) => true,
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => false,
        Err(e) => return Err(e),
    };
    Ok((s.into(), connected))
}

/// The state of a non-blocking connect: `Ok(true)` connected, `Ok(false)` pending,
/// or why it failed.
fn connect_result(sock: &TcpStream) -> io::Result<bool> {
    match sock.take_error() {
        Ok(None) => {}
        Ok(Some(e)) | Err(e) => return Err(e),
    }
    match sock.peer_addr() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
        Err(e) => Err(e),
    }
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
