//! Long-lived sessions (issue 45): N WebSocket sessions, or N gRPC streams (each a
//! bidirectional call on an HTTP/2 connection of its own), held open through the
//! run, over plain TCP or TLS, each sending messages on one open-loop schedule (a total
//! message rate spread over the sessions, as a rate is spread over connections) and
//! timing each echo from its intended send, as requests are timed.
//!
//! A proxy's reload, restart or rollout that loses no short request can still cut
//! every session it holds; so the end of a session is what this part measures: when
//! it ended (by the time it happened, into the timeline and the change windows), how
//! (a close frame and its code, an EOF with none, a reset, an echo that never came)
//! and what it cost (messages in flight lost, the time to open again, the latency of
//! the messages due while it was down, which wait for the reopen and are timed from
//! their intended send like any other).
//!
//! The sessions run on a thread of their own, beside the request workers, with their
//! own `epoll` loop: the request engine's hot path is not touched. The loop wakes
//! for the next message due, an event, or a sweep of timeouts every
//! [`SWEEP_NS`]; per message it writes one frame and reads one, into buffers each
//! session keeps for its life.

mod session;
mod tally;

use crate::windows::Marks;
use results::clock::{Clock, Nanos};
use results::sessions::Sessions;
use rustix::event::epoll;
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use session::{Phase, Session};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tally::Tally;

/// How often open timeouts, echo timeouts and reopens are checked: each is late by
/// this much at most, against waits of a second or more.
const SWEEP_NS: Nanos = 10_000_000;
/// A failed open is tried again after this long: often enough to find a proxy back
/// within a few hundredths of a second, rarely enough not to spin on a refused port.
const RETRY_NS: Nanos = 100_000_000;
/// At the end, how long the sessions' close handshakes may take.
const CLOSE_WAIT_NS: Nanos = 1_000_000_000;
/// Messages a session that is down keeps for its reopen; beyond them a message due
/// is counted lost (a client's send buffer is bounded too).
const BACKLOG: usize = 1024;

/// When a session that ended opens again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reopen {
    /// At once (the default): what a client with a reconnect loop does.
    AtOnce,
    /// After a pause, as a client with a back-off does.
    After(Duration),
    /// Never: the run counts how many sessions a change leaves standing.
    Never,
}

impl Reopen {
    /// `at-once`, `never` or `after DURATION` (`after 500ms`).
    pub fn parse(s: &str) -> Result<Reopen, String> {
        let bad =
            || format!("unknown reopen {s:?}: use at-once, never or after DURATION (after 1s)");
        match s.trim() {
            "at-once" => Ok(Reopen::AtOnce),
            "never" => Ok(Reopen::Never),
            other => {
                let d = other.strip_prefix("after").ok_or_else(bad)?.trim();
                results::duration::parse(d)
                    .map(Reopen::After)
                    .map_err(|_| bad())
            }
        }
    }

    pub fn name(&self) -> String {
        match self {
            Reopen::AtOnce => "at-once".into(),
            Reopen::Never => "never".into(),
            Reopen::After(d) => format!("after {}ms", d.as_millis()),
        }
    }
}

/// What a session is on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionKind {
    /// RFC 6455: the upgrade, masked frames, the close handshake.
    WebSocket,
    /// A bidirectional gRPC call ([`SessionSpec::path`] is its method) held open on
    /// an HTTP/2 connection of its own: h2c on `http://`, ALPN `h2` on `https://`.
    Grpc,
}

/// The streaming Echo of ingressbench's backend, the default method of a stream.
pub const ECHO_STREAM: &str = "ingressbench.Backend/EchoStream";

/// What to open and how to load it.
#[derive(Clone, Debug)]
pub struct SessionSpec {
    pub kind: SessionKind,
    /// The URL as the user gave it, for the result.
    pub url: String,
    pub addr: SocketAddr,
    /// The upgrade request's Host and target (a stream's `:authority` and method
    /// path).
    pub host: String,
    pub path: String,
    /// Extra header lines of the upgrade request.
    pub headers: Vec<(String, String)>,
    /// TLS (`wss://`): the client configuration and the name to verify.
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    pub sessions: usize,
    /// Messages per second over all sessions (0: the sessions are only held open).
    pub message_rate: f64,
    /// Each message's payload (at least 8 bytes: its sequence number).
    pub message_bytes: usize,
    pub duration: Duration,
    /// An echo (and an upgrade's answer) not back within it ends the session.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub reopen: Reopen,
    /// The 101's (a stream's response head's) header that names the backend.
    pub backend_header: String,
    /// A network namespace the sessions' thread enters first (`None`: its own), as
    /// the load's workers do.
    pub netns: Option<std::path::PathBuf>,
}

/// When the message schedule starts.
#[derive(Clone, Copy)]
pub enum Begin<'a> {
    /// As soon as every session is open (or the open's bound has passed).
    WhenOpen,
    /// At the clock time another part publishes here (0 until then): the request
    /// load's measured window, so that both timelines and their change windows line
    /// up. Sessions not yet open by then keep their messages for the open.
    At(&'a AtomicU64),
}

/// The smallest payload: the message's sequence number, checked in its echo.
pub const MIN_MESSAGE_BYTES: usize = 8;

impl SessionSpec {
    /// Checks what the loop relies on; one line naming the setting.
    pub fn check(&self) -> Result<(), String> {
        if self.sessions == 0 {
            return Err("sessions must be at least 1".into());
        }
        if !(self.message_bytes >= MIN_MESSAGE_BYTES
            && self.message_bytes <= http1::ws::MAX_PAYLOAD)
        {
            return Err(format!(
                "a message must be {MIN_MESSAGE_BYTES} bytes to {} (its sequence number \
                 fits in 8; the backend echoes up to 1 MiB), not {}",
                http1::ws::MAX_PAYLOAD,
                self.message_bytes
            ));
        }
        if !self.message_rate.is_finite() || self.message_rate < 0.0 {
            return Err(format!(
                "the message rate must be 0 or more, not {}",
                self.message_rate
            ));
        }
        Ok(())
    }
}

/// What a session run sets beyond a load's URL, headers, timeouts and TLS.
#[derive(Clone, Debug)]
pub struct SessionSettings {
    /// WebSocket sessions, or (`Some(SERVICE/METHOD)`) gRPC streams of that method.
    pub grpc: Option<String>,
    pub sessions: usize,
    pub message_rate: f64,
    pub message_bytes: usize,
    pub reopen: Reopen,
}

impl SessionSpec {
    /// The sessions of `load`'s URL (`ws://`, `wss://`, or `http(s)://` for the same
    /// upgrade; `http(s)://` for gRPC streams), its headers, timeouts, TLS and
    /// backend header, with `settings`.
    ///
    /// # Errors
    /// One line naming what is wrong: the URL, its address, TLS, a header.
    pub fn resolve(load: &crate::LoadSpec, settings: SessionSettings) -> Result<Self, String> {
        let url = &load.url;
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| format!("url '{url}': expected ws://host[:port]/path or wss://..."))?;
        let grpc = settings.grpc.is_some();
        let http = match scheme.to_ascii_lowercase().as_str() {
            "ws" | "wss" if grpc => {
                return Err(format!(
                    "url '{url}': gRPC streams speak HTTP/2: use http:// (h2c) or https://"
                ))
            }
            "ws" | "http" => format!("http://{rest}"),
            "wss" | "https" => format!("https://{rest}"),
            other => {
                return Err(format!(
                    "url '{url}': the scheme {other}:// is not a WebSocket's: use ws:// or wss://"
                ))
            }
        };
        let target = http1::Target::parse(&http)?;
        let addr = crate::resolve::address(&target).map_err(|e| e.to_string())?;
        let tls = if target.tls {
            let mut config =
                crate::tls::client_config(&load.tls).map_err(|e| results::with_causes(&e))?;
            if grpc {
                // A stream is HTTP/2: offered by ALPN, as gRPC clients do.
                let mut c = (*config).clone();
                c.alpn_protocols = vec![b"h2".to_vec()];
                config = Arc::new(c);
            }
            let name = crate::tls::server_name(&target.host).map_err(|e| e.to_string())?;
            Some((config, name))
        } else {
            None
        };
        let headers = load
            .headers
            .iter()
            .map(|h| {
                h.split_once(':')
                    .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
                    .filter(|(n, _)| !n.is_empty())
                    .ok_or_else(|| format!("header '{h}': expected \"Name: value\""))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let path = match &settings.grpc {
            Some(m) => {
                let m = m.trim_start_matches('/');
                if !m.contains('/') || m.ends_with('/') {
                    return Err(format!(
                        "the gRPC method '{m}' is not SERVICE/METHOD ({ECHO_STREAM})"
                    ));
                }
                format!("/{m}")
            }
            None => target.path.clone(),
        };
        let spec = SessionSpec {
            kind: if grpc {
                SessionKind::Grpc
            } else {
                SessionKind::WebSocket
            },
            url: url.clone(),
            addr,
            host: target.host_header(),
            path,
            headers,
            tls,
            sessions: settings.sessions,
            message_rate: settings.message_rate,
            message_bytes: settings.message_bytes,
            duration: load.duration,
            timeout: load.timeout,
            connect_timeout: load.connect_timeout,
            reopen: settings.reopen,
            backend_header: load.backend_header.clone(),
            netns: None,
        };
        spec.check()?;
        Ok(spec)
    }
}

/// Why the sessions could not run.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    #[error("sessions: {0}")]
    Spec(String),
    /// The loop's epoll, or the network namespace it enters; the cause is the
    /// source, not repeated in the message (results::Causes joins them).
    #[error("sessions: epoll")]
    Epoll(#[from] io::Error),
}

/// Where the loop is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The sessions open; no message is due yet.
    Opening { until: Nanos },
    /// Messages are due on the schedule.
    Window,
    /// After the window: echoes in flight may still come until `until`.
    Drain { until: Nanos },
    /// The client's close handshakes, until `until`.
    Closing { until: Nanos },
}

/// Opens the sessions, starts the message schedule as `begin` says (`on_start` gets
/// that clock time), runs it for the duration, and closes them. `stop` ends the run
/// early: the result then covers what was measured. `marks` counts ends and echoes
/// by change window.
///
/// # Errors
/// A bad spec, a network namespace that cannot be entered, or an `epoll` that
/// cannot be made or waited on.
pub fn run(
    spec: &SessionSpec,
    clock: &Clock,
    stop: &AtomicBool,
    marks: Option<&Marks>,
    begin: Begin<'_>,
    on_start: impl FnOnce(Nanos),
) -> Result<Sessions, SessionsError> {
    spec.check().map_err(SessionsError::Spec)?;
    if let Some(ns) = &spec.netns {
        crate::worker::enter_netns(ns)?;
    }
    let mut l = Loop::new(spec, clock, marks)?;
    l.begin = match begin {
        Begin::WhenOpen => None,
        Begin::At(t) => Some(t),
    };
    let t0 = clock.now();
    // Opens before the window are in its first second.
    l.tally.start = Nanos::MAX;
    for i in 0..l.sessions.len() {
        l.open(i, t0);
    }
    l.stage = Stage::Opening {
        until: t0 + (spec.connect_timeout + spec.timeout).as_nanos() as Nanos,
    };
    l.spin(stop, Some(on_start))?;
    Ok(l.finish())
}

/// The loop's state: the sessions, the schedule, the counts.
pub(super) struct Loop<'a> {
    spec: &'a SessionSpec,
    /// Where the schedule's start is published ([`Begin::At`]).
    begin: Option<&'a AtomicU64>,
    clock: &'a Clock,
    marks: Option<&'a Marks>,
    ep: std::os::fd::OwnedFd,
    events: Vec<epoll::Event>,
    sessions: Vec<Session>,
    stage: Stage,
    /// Start and end of the message schedule.
    start: Nanos,
    end: Nanos,
    /// The next message's number; it is due at `start + next / rate` on session
    /// `next % sessions`.
    next: u64,
    period_ns: f64,
    /// One message's payload, its first 8 bytes rewritten per message.
    payload: Vec<u8>,
    rng: u64,
    tally: Tally,
    /// Sessions open now (phase `Open`).
    open_now: u64,
    /// The timeline's seconds closed so far.
    seconds: u64,
    /// Whether anything of a message's window was measured (the stop came after
    /// the sessions opened).
    started: bool,
}

impl<'a> Loop<'a> {
    fn new(
        spec: &'a SessionSpec,
        clock: &'a Clock,
        marks: Option<&'a Marks>,
    ) -> Result<Loop<'a>, SessionsError> {
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(io::Error::from)?;
        let mut rng = clock.now() | 1;
        let sessions = (0..spec.sessions).map(|_| Session::new(&mut rng)).collect();
        Ok(Loop {
            spec,
            begin: None,
            clock,
            marks,
            ep,
            events: Vec::with_capacity(256),
            sessions,
            stage: Stage::Window,
            start: 0,
            end: 0,
            next: 0,
            period_ns: if spec.message_rate > 0.0 {
                1e9 / spec.message_rate
            } else {
                f64::INFINITY
            },
            payload: vec![0u8; spec.message_bytes],
            rng,
            tally: Tally::new(),
            open_now: 0,
            seconds: 0,
            started: false,
        })
    }

    fn window_of(&self, t: Nanos) -> usize {
        self.marks.map_or(0, |m| m.window_of(t))
    }

    /// Due time of message `n`.
    #[inline]
    fn due(&self, n: u64) -> Nanos {
        if self.period_ns.is_infinite() {
            return Nanos::MAX;
        }
        self.start + (n as f64 * self.period_ns) as Nanos
    }

    /// Runs the stages until the close handshakes are done.
    fn spin(
        &mut self,
        stop: &AtomicBool,
        mut on_start: Option<impl FnOnce(Nanos)>,
    ) -> io::Result<()> {
        let mut next_sweep = self.clock.now() + SWEEP_NS;
        loop {
            let now = self.clock.now();
            let stopping = stop.load(Ordering::Relaxed);
            match self.stage {
                Stage::Opening { until } => {
                    let start = match self.begin {
                        Some(at) => match at.load(Ordering::Acquire) {
                            t if t != 0 && now >= t => Some(t),
                            _ => None,
                        },
                        None => {
                            let all_open = self.open_now == self.sessions.len() as u64
                                || (self.spec.kind == SessionKind::Grpc
                                    && self.sessions.iter().all(Session::writable));
                            (all_open || now >= until).then_some(now)
                        }
                    };
                    if let Some(start) = start.or(stopping.then_some(now)) {
                        self.start = start;
                        self.end = start + self.spec.duration.as_nanos() as Nanos;
                        self.tally.start = start;
                        self.tally.last_second = (self.spec.duration.as_nanos().saturating_sub(1)
                            / 1_000_000_000)
                            as usize;
                        self.started = !stopping;
                        if let Some(f) = on_start.take() {
                            f(start);
                        }
                        self.stage = if stopping {
                            self.begin_close(now)
                        } else {
                            Stage::Window
                        };
                        continue;
                    }
                }
                Stage::Window => {
                    if stopping || now >= self.end {
                        if stopping {
                            self.end = self.end.min(now);
                        }
                        self.stage = Stage::Drain {
                            until: if stopping {
                                now
                            } else {
                                now + self.spec.timeout.as_nanos() as Nanos
                            },
                        };
                        continue;
                    }
                    self.send_due(now);
                }
                Stage::Drain { until } => {
                    let waiting = self.sessions.iter().any(|s| !s.inflight.is_empty());
                    if !waiting || now >= until || stopping {
                        self.stage = self.begin_close(now);
                        continue;
                    }
                }
                Stage::Closing { until } => {
                    let closing = self
                        .sessions
                        .iter()
                        .any(|s| matches!(s.phase, Phase::Closing));
                    if !closing || now >= until {
                        return Ok(());
                    }
                }
            }
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + SWEEP_NS;
            }
            while self.stage == Stage::Window
                && now >= self.start + (self.seconds + 1) * 1_000_000_000
            {
                self.seconds += 1;
                let t = self.start + self.seconds * 1_000_000_000 - 1;
                self.tally.open_now(t, self.open_now);
            }
            let mut wake = next_sweep;
            if self.stage == Stage::Window {
                wake = wake.min(self.due(self.next)).min(self.end);
            }
            self.wait(wake)?;
        }
    }

    /// Sends every message due by `now`, each on its session, or keeps it for the
    /// session's reopen.
    fn send_due(&mut self, now: Nanos) {
        loop {
            let t = self.due(self.next);
            if t > now || t >= self.end {
                return;
            }
            let i = (self.next % self.sessions.len() as u64) as usize;
            let seq = self.next;
            self.next += 1;
            self.tally.messages.intended += 1;
            match self.sessions[i].phase {
                _ if self.sessions[i].writable() => self.send(i, t, seq, now),
                Phase::Done => self.tally.messages.not_sent += 1,
                _ if self.sessions[i].backlog.len() >= BACKLOG => {
                    self.tally.messages.lost += 1;
                }
                _ => self.sessions[i].backlog.push_back((t, seq)),
            }
        }
    }

    /// Writes message `seq` (intended at `t`) on open session `i`.
    fn send(&mut self, i: usize, t: Nanos, seq: u64, now: Nanos) {
        self.payload[..8].copy_from_slice(&seq.to_be_bytes());
        let s = &mut self.sessions[i];
        s.send_message(&self.payload, &mut self.rng);
        s.inflight.push_back((t, now, seq));
        self.tally.messages.sent += 1;
        if let Err(end) = s.flush() {
            self.end_session(i, end, now);
        }
    }

    /// Starts the client's close handshake on every open session; the rest are
    /// dropped. Messages still in flight or waiting are counted.
    fn begin_close(&mut self, now: Nanos) -> Stage {
        if self.started {
            // The last (maybe partial) second's open sessions.
            let last = self.end.min(now).saturating_sub(1).max(self.start);
            self.tally.open_now(last, self.open_now);
        }
        for i in 0..self.sessions.len() {
            let s = &mut self.sessions[i];
            let timed_out = s.inflight.len() as u64;
            let waiting = s.backlog.len() as u64;
            s.inflight.clear();
            s.backlog.clear();
            self.tally.messages.timed_out += timed_out;
            self.tally.messages.not_sent += waiting;
            match s.phase {
                Phase::Open => {
                    self.open_now -= 1;
                    s.start_close(&mut self.rng);
                }
                _ => s.drop_socket(),
            }
        }
        // What was due after the end was never due.
        Stage::Closing {
            until: now + CLOSE_WAIT_NS,
        }
    }

    /// Timeouts and reopens.
    fn sweep(&mut self, now: Nanos) {
        let connect_ns = self.spec.connect_timeout.as_nanos() as Nanos;
        let timeout_ns = self.spec.timeout.as_nanos() as Nanos;
        let closing = matches!(self.stage, Stage::Closing { .. });
        for i in 0..self.sessions.len() {
            let s = &self.sessions[i];
            match s.phase {
                Phase::Connecting if now.saturating_sub(s.attempt_at) > connect_ns => {
                    self.open_failed(i, "timeout", now, || {
                        format!("no connection within {}", secs(connect_ns))
                    });
                }
                Phase::Upgrading if now.saturating_sub(s.attempt_at) > connect_ns + timeout_ns => {
                    self.open_failed(i, "timeout", now, || {
                        format!("no answer to the upgrade within {}", secs(timeout_ns))
                    });
                }
                Phase::Open
                    if s.inflight
                        .front()
                        .is_some_and(|&(_, sent, _)| now.saturating_sub(sent) > timeout_ns) =>
                {
                    self.tally.messages.timed_out += 1;
                    self.sessions[i].inflight.pop_front();
                    self.end_session(i, results::sessions::SessionEnd::Timeout, now);
                }
                Phase::Waiting { until } if now >= until && !closing => self.open(i, now),
                _ => {}
            }
        }
    }

    /// Opens session `i` (again); `now` is when it was meant to.
    fn open(&mut self, i: usize, now: Nanos) {
        let spec = self.spec;
        let key = (i as u64) | (u64::from(self.sessions[i].generation.wrapping_add(1)) << 32);
        let s = &mut self.sessions[i];
        if s.planned.is_none() {
            s.planned = Some(now);
        }
        match s.connect(spec, &self.ep, key, now) {
            Ok(()) => {}
            Err((kind, msg)) => self.open_failed(i, kind, now, || msg),
        }
    }

    fn open_failed(
        &mut self,
        i: usize,
        kind: &'static str,
        now: Nanos,
        message: impl FnOnce() -> String,
    ) {
        self.tally.open_failed(kind, message);
        let s = &mut self.sessions[i];
        // A stream's messages sent before its refusal.
        self.tally.messages.lost += s.inflight.len() as u64;
        s.inflight.clear();
        s.drop_socket();
        s.phase = Phase::Waiting {
            until: now + RETRY_NS,
        };
    }

    /// Session `i` ended at `now`, as `end`: counted, its messages in flight lost,
    /// and opened again as the spec says.
    fn end_session(&mut self, i: usize, end: results::sessions::SessionEnd, now: Nanos) {
        let w = self.window_of(now);
        let s = &mut self.sessions[i];
        if !matches!(s.phase, Phase::Open) {
            // Ended already (a close frame read before the EOF that came with it):
            // the socket now is its reopen's.
            return;
        }
        self.open_now -= 1;
        let lost = s.inflight.len() as u64;
        s.inflight.clear();
        s.drop_socket();
        s.ended_at = Some(now);
        s.planned = None;
        self.tally.ended(now, end, lost, w);
        let in_window = matches!(self.stage, Stage::Window | Stage::Opening { .. });
        match self.spec.reopen {
            _ if !in_window => self.sessions[i].phase = Phase::Done,
            Reopen::Never => {
                let s = &mut self.sessions[i];
                self.tally.messages.not_sent += s.backlog.len() as u64;
                s.backlog.clear();
                s.phase = Phase::Done;
            }
            Reopen::AtOnce => self.open(i, now),
            Reopen::After(d) => {
                self.sessions[i].phase = Phase::Waiting {
                    until: now + d.as_nanos() as Nanos,
                }
            }
        }
    }

    /// Waits for events until `wake` and handles them.
    fn wait(&mut self, wake: Nanos) -> io::Result<()> {
        let wait = wake.saturating_sub(self.clock.now());
        crate::worker::epoll_wait(&self.ep, &mut self.events, &crate::worker::timespec(wait))?;
        let events = std::mem::take(&mut self.events);
        for ev in &events {
            let key = ev.data.u64();
            let i = (key & 0xffff_ffff) as usize;
            if i < self.sessions.len() && self.sessions[i].generation == (key >> 32) as u32 {
                self.on_event(i);
            }
        }
        self.events = events;
        Ok(())
    }

    /// Session `i`'s socket is ready: the connect, the upgrade's answer, frames.
    fn on_event(&mut self, i: usize) {
        let now = self.clock.now();
        let spec = self.spec;
        let step = self.sessions[i].step(spec, &mut self.rng);
        match step {
            session::Step::Nothing => {}
            session::Step::OpenFailed(kind, msg) => self.open_failed(i, kind, now, || msg),
            session::Step::Opened(backend) => {
                if let Some(b) = backend {
                    *self.tally.backends.entry(b).or_default() += 1;
                }
                let w = self.window_of(now);
                let s = &self.sessions[i];
                let (ended, planned) = (s.ended_at, s.planned.unwrap_or(now));
                self.tally.opened(now, ended, planned, w);
                self.open_now += 1;
                self.flush_backlog(i, now);
                // Frames that came with the 101.
                self.on_frames(i, now);
            }
            session::Step::Frames => self.on_frames(i, now),
            session::Step::Ended(end) => {
                let goaway = self.sessions[i].goaway;
                // The frames that came before the end first: a close frame among
                // them ends the session by its code (and may reopen it already, in
                // which case `end_session` leaves the reopen alone).
                self.on_frames(i, now);
                if let Some(code) = goaway.filter(|_| self.sessions[i].phase == Phase::Open) {
                    // A stream cut after its connection's GOAWAY: said beside the cut.
                    self.tally.reasons.entry(end).or_insert_with(|| {
                        format!("after a GOAWAY ({})", http2::frame::error_name(code))
                    });
                }
                self.end_session(i, end, now);
            }
            session::Step::Closed => {}
        }
        // A stream's call head is out (its connect just completed): what waited
        // for it goes now.
        let s = &self.sessions[i];
        if !s.backlog.is_empty() && s.writable() {
            self.flush_backlog(i, now);
        }
    }

    /// Sends what session `i` kept while it was down, each timed from its own
    /// intended send.
    fn flush_backlog(&mut self, i: usize, now: Nanos) {
        while let Some((t, seq)) = self.sessions[i].backlog.pop_front() {
            if !self.sessions[i].writable() {
                self.sessions[i].backlog.push_front((t, seq));
                return;
            }
            self.send(i, t, seq, now);
        }
    }

    /// Every whole frame session `i` has read; an echo is timed by when its bytes
    /// arrived (the last read's receive stamp), between its send and `now`.
    fn on_frames(&mut self, i: usize, now: Nanos) {
        let wall = crate::rx::wall_now();
        loop {
            let s = &mut self.sessions[i];
            match s.next_frame(&mut self.rng) {
                session::Frame::None => return,
                session::Frame::Echo(seq) => {
                    let Some(&(t, _, want)) = s.inflight.front() else {
                        self.end_session(i, results::sessions::SessionEnd::Protocol, now);
                        self.tally.note("protocol", || {
                            format!("an echo of message {seq} came with none in flight")
                        });
                        return;
                    };
                    if want != seq {
                        self.end_session(i, results::sessions::SessionEnd::Protocol, now);
                        self.tally.note("protocol", || {
                            format!("the echo of message {seq} came where {want} was due")
                        });
                        return;
                    }
                    let (_, sent, _) = s.inflight.pop_front().expect("checked");
                    let at = crate::rx::arrived(s.stamp, now, wall, sent);
                    let w = self.window_of(t);
                    self.tally.echoed(t, at, w);
                }
                session::Frame::End(end) => {
                    self.end_session(i, end, now);
                    return;
                }
                session::Frame::Reason(end, reason) => {
                    self.tally.reasons.entry(end).or_insert(reason);
                }
            }
        }
    }

    fn finish(self) -> Sessions {
        let spec = self.spec;
        let head = Sessions {
            protocol: match spec.kind {
                SessionKind::WebSocket => "websocket".into(),
                SessionKind::Grpc => "grpc".into(),
            },
            url: spec.url.clone(),
            sessions: spec.sessions as u64,
            message_rate: spec.message_rate,
            message_bytes: spec.message_bytes as u64,
            reopen: spec.reopen.name(),
            ..Sessions::default()
        };
        let held = self.sessions.iter().filter(|s| s.held_to_end).count() as u64;
        self.tally.finish(head, held)
    }
}

fn secs(ns: Nanos) -> String {
    format!("{:.1} s", ns as f64 / 1e9)
}

#[cfg(test)]
mod tests;
