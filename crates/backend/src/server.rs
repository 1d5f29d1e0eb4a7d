//! Listeners, connections and the drain: the running part of the backend.
//!
//! Each accepted connection is one task that owns its read buffer, output buffer,
//! request reader and random generator; nothing is locked per request (the request
//! id is one relaxed atomic add). Pipelined requests are answered in order because
//! a connection handles one request at a time and queues the answers in its output
//! buffer, written once per batch of reads.
//!
//! Shutdown mirrors a Kubernetes pod receiving SIGTERM: listeners close at once (new
//! connects are refused), idle keep-alive connections are closed, requests in flight
//! are answered with `connection: close`, and the server returns when the last
//! connection is gone or the drain timeout ends.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http1::request::{RequestReader, MAX_HEAD};
use http1::Strictness;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::delay::{Delay, Rng};
use super::flap::{Flap, FlapCounter, FlapMode};
use super::response::{now_date, Answer, Responder, CONTINUE, HEALTH_PATH};
use super::stall::Stall;
pub(crate) use super::state::{draining, Shared};
use super::timer::Timer;
use super::Error;

/// Read buffer a connection starts with; grows to [`MAX_HEAD`] only for big heads.
const INITIAL_BUF: usize = 4096;

/// Pending connections the kernel may queue per listener.
const BACKLOG: u32 = 4096;

/// After answering with `connection: close`, how long unread client bytes are
/// still read and dropped so the kernel does not reset the connection (and destroy
/// the answer in flight) because of them.
const LINGER: Duration = Duration::from_millis(500);

/// Longest TLS handshake before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything the backend needs to run, already validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// Addresses to listen on; port 0 picks a free port.
    pub listen: Vec<SocketAddr>,
    /// Name sent in `x-backend` and the body; `None` means `<hostname>-<port>` with
    /// the first listener's bound port. Must be visible ASCII (see [`valid_id`]).
    pub id: Option<String>,
    /// Exact size of every main answer's body, in bytes.
    pub body_size: usize,
    /// Delay before each answer.
    pub delay: Delay,
    /// Periodic stall of all answers, counted from [`Server::bind`].
    pub stall: Option<Stall>,
    /// Healthy and failing phases, counted from [`Server::bind`] (see [`crate::flap`]).
    pub flap: Option<Flap>,
    /// Status of the main answer (`/healthz` is always 200).
    pub status: u16,
    /// Serve HTTPS with this configuration.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Longest drain after the stop signal.
    pub drain_timeout: Duration,
    /// A folder the backends of one run share, where the attempts of each probe
    /// are counted across them ([`crate::probe::Attempts`]).
    pub probe_dir: Option<std::path::PathBuf>,
}

/// Whether `id` can be sent as a header value and printed on one line: 1 to 128
/// visible ASCII characters, no spaces.
pub fn valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic())
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainEnd {
    /// Every connection closed on its own.
    Clean,
    /// The drain timeout passed with connections still open.
    Timeout,
    /// A second stop request cut the drain short.
    Forced,
}

/// What happened during the drain, for the operator's log.
#[derive(Debug, Clone)]
pub struct Drained {
    /// Connections open when the listeners had closed.
    pub open_at_stop: usize,
    /// Connections still open when the drain ended (0 when clean).
    pub still_open: usize,
    /// From the stop request to the end of the drain.
    pub took: Duration,
    /// Why the drain ended.
    pub end: DrainEnd,
    /// WebSocket sessions by how they ended ([`crate::tally::WsTally::summary`]).
    pub websocket: Option<String>,
    /// gRPC streams by how they ended ([`crate::tally::StreamTally::summary`]).
    pub grpc_streams: Option<String>,
}

/// Bound listeners, ready to [`run`](Server::run).
pub struct Server {
    listeners: Vec<TcpListener>,
    addrs: Vec<SocketAddr>,
    shared: Arc<Shared>,
    tls: Option<TlsAcceptor>,
    drain_timeout: Duration,
}

impl Server {
    /// Binds every listen address (with `SO_REUSEADDR`), so that
    /// [`local_addrs`](Self::local_addrs) can be announced before serving.
    ///
    /// Must be called inside a Tokio runtime. The stall schedule starts now.
    ///
    /// # Errors
    /// [`Error::Bind`] naming the address that could not be bound.
    pub async fn bind(config: Config) -> Result<Server, Error> {
        let mut listeners = Vec::with_capacity(config.listen.len());
        let mut addrs = Vec::with_capacity(config.listen.len());
        for &addr in &config.listen {
            let bind = || -> io::Result<TcpListener> {
                let socket = if addr.is_ipv4() {
                    TcpSocket::new_v4()?
                } else {
                    TcpSocket::new_v6()?
                };
                socket.set_reuseaddr(true)?;
                socket.bind(addr)?;
                socket.listen(BACKLOG)
            };
            let listener = bind().map_err(|source| Error::Bind { addr, source })?;
            let local = listener
                .local_addr()
                .map_err(|source| Error::Bind { addr, source })?;
            listeners.push(listener);
            addrs.push(local);
        }
        let id = match config.id {
            Some(id) => id,
            None => default_id(addrs.first().map_or(0, SocketAddr::port)),
        };
        let start = Instant::now();
        let unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let flap = config
            .flap
            .map(|f| Arc::new(FlapCounter::new(f, &id, start, unix_ns)));
        let failing_responder = config
            .flap
            .filter(|f| f.mode == FlapMode::Status503)
            .map(|_| Responder::new(&id, 503, config.body_size));
        Ok(Server {
            listeners,
            addrs,
            shared: Arc::new(Shared {
                responder: Responder::new(&id, config.status, config.body_size),
                delay: config.delay,
                stall: config.stall,
                flap,
                failing_responder,
                start,
                next_request: AtomicU64::new(1),
                next_conn: AtomicU64::new(1),
                probe_attempts: crate::probe::Attempts::new(config.probe_dir.clone()),
                open: AtomicUsize::new(0),
                all_closed: Notify::new(),
                ws: Default::default(),
                streams: Default::default(),
            }),
            tls: config.tls.map(TlsAcceptor::from),
            drain_timeout: config.drain_timeout,
        })
    }

    /// The bound addresses, in the order of [`Config::listen`], with real ports.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The server's id (given, or the default resolved at bind time).
    pub fn id(&self) -> &str {
        self.shared.responder.id()
    }

    /// The flap schedule's record, to be written while the server runs (`None`
    /// without `--flap`).
    pub fn flap_counter(&self) -> Option<Arc<FlapCounter>> {
        self.shared.flap.clone()
    }

    /// `https` when serving TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Serves until the first message on `stop`, then drains (see the module docs)
    /// until all connections are closed, the drain timeout passes, or a second
    /// message on `stop` arrives.
    ///
    /// A `stop` channel whose senders are all gone never stops the server.
    pub async fn run(self, mut stop: mpsc::Receiver<()>) -> Drained {
        let (drain_tx, drain_rx) = watch::channel(false);
        let accepts: Vec<_> = self
            .listeners
            .into_iter()
            .map(|l| {
                tokio::spawn(accept_loop(
                    l,
                    self.shared.clone(),
                    self.tls.clone(),
                    drain_rx.clone(),
                ))
            })
            .collect();
        drop(drain_rx);
        next_stop(&mut stop).await;
        let began = Instant::now();
        drain_tx.send_replace(true);
        // The listeners are dropped when their loops return: new connects are refused.
        for a in accepts {
            let _ = a.await;
        }
        let open_at_stop = self.shared.open.load(Ordering::Acquire);
        let end = tokio::select! {
            _ = self.shared.wait_all_closed() => DrainEnd::Clean,
            _ = tokio::time::sleep_until(began + self.drain_timeout) => DrainEnd::Timeout,
            _ = next_stop(&mut stop) => DrainEnd::Forced,
        };
        Drained {
            open_at_stop,
            still_open: self.shared.open.load(Ordering::Acquire),
            took: began.elapsed(),
            end,
            websocket: self.shared.ws.summary(),
            grpc_streams: self.shared.streams.summary(),
        }
    }
}

/// Counts a connection as open for as long as it lives.
struct OpenGuard(Arc<Shared>);

impl OpenGuard {
    fn new(shared: Arc<Shared>) -> OpenGuard {
        shared.open.fetch_add(1, Ordering::AcqRel);
        OpenGuard(shared)
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.all_closed.notify_one();
        }
    }
}

/// Resolves on the next stop request; never, once no one can send one.
async fn next_stop(stop: &mut mpsc::Receiver<()>) {
    if stop.recv().await.is_none() {
        std::future::pending::<()>().await;
    }
}

/// Accepts until the drain begins, then returns, dropping (closing) the listener.
async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<TlsAcceptor>,
    mut drain: watch::Receiver<bool>,
) {
    loop {
        let (sock, _peer) = tokio::select! {
            biased;
            _ = draining(&mut drain) => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    if !matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset) {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    continue;
                }
            },
        };
        // Answers are written whole; Nagle would only hold back the last segment.
        let _ = sock.set_nodelay(true);
        let Ok(local) = sock.local_addr() else {
            continue;
        };
        let guard = OpenGuard::new(shared.clone());
        let shared = shared.clone();
        let tls = tls.clone();
        let mut drain = drain.clone();
        tokio::spawn(async move {
            let _guard = guard;
            match tls {
                None => {
                    // An idle connection that never sends is closed by the drain
                    // here as it would be in `serve`.
                    let h2c = tokio::select! {
                        h2c = starts_h2c(&sock) => h2c,
                        _ = draining(&mut drain) => return,
                    };
                    if h2c {
                        crate::h2::serve(sock, local, shared, drain).await;
                        return;
                    }
                    let _ = serve(sock, local, &shared, drain).await;
                }
                Some(acceptor) => {
                    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(sock));
                    let stream = tokio::select! {
                        r = handshake => match r {
                            Ok(Ok(s)) => s,
                            _ => return,
                        },
                        _ = draining(&mut drain) => return,
                    };
                    if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
                        crate::h2::serve(stream, local, shared, drain).await;
                        return;
                    }
                    let _ = serve(stream, local, &shared, drain).await;
                }
            }
        });
    }
}

/// Whether a plain connection opens with the HTTP/2 preface (h2c with prior
/// knowledge): its first bytes are looked at without being read. An HTTP/1.1
/// request cannot begin with `PRI * HTTP/2.0`.
async fn starts_h2c(sock: &TcpStream) -> bool {
    let want = crate::h2::PREFACE_START;
    let mut buf = [0u8; 14];
    for _ in 0..50 {
        match sock.peek(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) if buf[..n] != want[..n] => return false,
            Ok(n) if n >= want.len() => return true,
            // A prefix of the preface so far: wait for more.
            Ok(_) => tokio::time::sleep(Duration::from_millis(2)).await,
        }
    }
    false
}

/// Serves one connection until the client closes it, asks to close, sends a bad
/// request, or the drain closes it.
///
/// I/O errors end the connection; they are the client's doing, not the server's.
async fn serve<S>(
    mut io: S,
    local: SocketAddr,
    shared: &Shared,
    mut drain: watch::Receiver<bool>,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin + Abort,
{
    let prefix = shared.responder.conn_prefix(local);
    // Strict: a request two careful parsers could frame differently is a 400.
    let mut reader = RequestReader::with_strictness(Strictness::Strict);
    let mut rng = Rng::new();
    let mut buf = vec![0u8; INITIAL_BUF];
    let mut out = Vec::with_capacity(INITIAL_BUF);
    // Unread bytes are buf[start..end].
    let (mut start, mut end) = (0usize, 0usize);
    let mut is_draining = *drain.borrow();
    let mut peer_done = false;
    // Made at the first held answer: a connection never delayed pays for none.
    let mut timer: Option<Timer> = None;
    // A behaviour probe being read, and its body's length so far.
    let conn = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    let mut conn_requests = 0u64;
    let mut probe: Option<crate::probe::Received> = None;
    // A WebSocket upgrade being read: the client's key.
    let mut ws_key: Option<Vec<u8>> = None;
    let mut body_len = 0u64;
    loop {
        // Answer every request complete in the buffer, in order.
        loop {
            let head_next = reader.between_requests();
            let feed = match reader.feed_with(&buf[start..end], |d| body_len += d.len() as u64) {
                Ok(f) => f,
                Err(_) => {
                    out.extend_from_slice(shared.responder.bad_request());
                    return close(&mut io, &out, &mut buf).await;
                }
            };
            if head_next && feed.consumed > 0 {
                // The head was read in this call, from here (a body may follow).
                probe = crate::probe::parse(&buf[start..start + feed.consumed]);
                ws_key = crate::ws::upgrade_key(&buf[start..start + feed.consumed]);
                conn_requests += 1;
            }
            start += feed.consumed;
            if reader.take_continue() {
                out.extend_from_slice(CONTINUE);
            }
            if !feed.complete {
                break;
            }
            if let Some(key) = ws_key.take() {
                // The connection is the session's from here; what followed the
                // request in the buffer is its first frames.
                out.extend_from_slice(&crate::ws::switching(&key, shared.responder.id()));
                write_out(&mut io, &mut out).await?;
                return crate::ws::session(&mut io, buf, start, end, &mut drain, &shared.ws).await;
            }
            if let Some(p) = probe.take() {
                let n = std::mem::take(&mut body_len);
                let attempt = shared.probe_attempts.arrive(&p.id);
                use crate::probe::Behaviour;
                let status = match p.behaviour {
                    Behaviour::ResetOnce if attempt == 1 => {
                        io.abort();
                        return Ok(());
                    }
                    Behaviour::Status503Once if attempt == 1 => 503,
                    Behaviour::Status503 => 503,
                    _ => 200,
                };
                if let Behaviour::Delay(d) = p.behaviour {
                    write_out(&mut io, &mut out).await?;
                    let timer = match &mut timer {
                        Some(t) => t,
                        None => timer.insert(Timer::new()?),
                    };
                    hold(
                        &mut io,
                        &mut buf,
                        &mut end,
                        timer,
                        Instant::now() + d,
                        &mut peer_done,
                    )
                    .await?;
                }
                is_draining = is_draining || *drain.borrow();
                let closing = is_draining || !reader.keep_alive();
                let answer = Answer {
                    uri: reader.uri(),
                    head_method: reader.head_method(),
                    close: closing,
                    confirm_keep_alive: reader.http10() && !closing,
                    request_id: shared.next_request.fetch_add(1, Ordering::Relaxed),
                };
                let body = crate::probe::body(
                    &p,
                    crate::probe::At {
                        backend: shared.responder.id(),
                        conn,
                        conn_request: conn_requests,
                        attempt,
                        body_len: n,
                    },
                );
                shared
                    .responder
                    .write_probe(&mut out, &now_date(), status, &body, &answer);
                if closing {
                    return close(&mut io, &out, &mut buf).await;
                }
                continue;
            }
            body_len = 0;
            let health = reader.path() == HEALTH_PATH;
            // A failing phase of a flapping backend decides the answer first.
            let mut answer_503 = false;
            let mut held_until = None;
            if let Some(flap) = &shared.flap {
                let phase = flap.arrive(Instant::now(), health);
                if phase.failing {
                    match flap.flap().mode {
                        FlapMode::Reset => {
                            // Dropped with SO_LINGER 0: the peer gets a reset.
                            io.abort();
                            return Ok(());
                        }
                        FlapMode::Status503 => answer_503 = true,
                        FlapMode::Stall => held_until = Some(shared.start + phase.end),
                    }
                }
            }
            let release = shared.release_at(&mut rng, health);
            let release = match (release, held_until) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            if let Some(at) = release {
                // Earlier answers must not wait for this one's delay.
                write_out(&mut io, &mut out).await?;
                let timer = match &mut timer {
                    Some(t) => t,
                    None => timer.insert(Timer::new()?),
                };
                hold(&mut io, &mut buf, &mut end, timer, at, &mut peer_done).await?;
            }
            is_draining = is_draining || *drain.borrow();
            let closing = is_draining || !reader.keep_alive();
            let answer = Answer {
                uri: reader.uri(),
                head_method: reader.head_method(),
                close: closing,
                confirm_keep_alive: reader.http10() && !closing,
                request_id: shared.next_request.fetch_add(1, Ordering::Relaxed),
            };
            match (&shared.failing_responder, answer_503) {
                (Some(r), true) => r.write_main(&mut out, &prefix, &now_date(), &answer),
                _ => shared
                    .responder
                    .write(&mut out, &prefix, &now_date(), &answer),
            }
            if closing {
                return close(&mut io, &out, &mut buf).await;
            }
        }
        if start == end {
            (start, end) = (0, 0);
        } else if end == buf.len() {
            if start > 0 {
                buf.copy_within(start..end, 0);
                (start, end) = (0, end - start);
            } else if buf.len() < MAX_HEAD {
                buf.resize(MAX_HEAD, 0);
            }
        }
        write_out(&mut io, &mut out).await?;
        if peer_done {
            return io.shutdown().await;
        }
        if is_draining && start == end && reader.between_requests() {
            // Idle keep-alive connection: nothing is lost by closing it now.
            return io.shutdown().await;
        }
        let n = if is_draining {
            io.read(&mut buf[end..]).await?
        } else {
            tokio::select! {
                biased;
                r = io.read(&mut buf[end..]) => r?,
                _ = draining(&mut drain) => {
                    is_draining = true;
                    continue;
                }
            }
        };
        if n == 0 {
            return Ok(());
        }
        end += n;
    }
}

/// A connection that can end with a reset instead of a FIN.
trait Abort {
    /// Sets `SO_LINGER` to 0, so that dropping the connection resets it.
    fn abort(&self);
}

impl Abort for TcpStream {
    fn abort(&self) {
        let _ = self.set_zero_linger();
    }
}

impl Abort for tokio_rustls::server::TlsStream<TcpStream> {
    fn abort(&self) {
        let _ = self.get_ref().0.set_zero_linger();
    }
}

/// Waits until `at` (on `timer`, to the microsecond: [`Timer`]), reading what the
/// client sends meanwhile into `buf[*end..]` (requests are still read during a delay
/// or stall; only answers are held).
async fn hold<S>(
    io: &mut S,
    buf: &mut [u8],
    end: &mut usize,
    timer: &Timer,
    at: Instant,
    peer_done: &mut bool,
) -> io::Result<()>
where
    S: AsyncRead + Unpin,
{
    timer.arm(at)?;
    loop {
        if *peer_done || *end == buf.len() {
            return timer.fired().await;
        }
        tokio::select! {
            r = timer.fired() => return r,
            r = io.read(&mut buf[*end..]) => match r? {
                0 => *peer_done = true,
                n => *end += n,
            },
        }
    }
}

/// Writes and clears the queued answers.
async fn write_out<S: AsyncWrite + Unpin>(io: &mut S, out: &mut Vec<u8>) -> io::Result<()> {
    if !out.is_empty() {
        io.write_all(out).await?;
        io.flush().await?;
        out.clear();
    }
    Ok(())
}

/// Sends the last answers, closes our side, and reads what the client still sends
/// for up to [`LINGER`], so unread bytes do not turn our close into a reset.
async fn close<S>(io: &mut S, out: &[u8], scratch: &mut [u8]) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    io.write_all(out).await?;
    io.flush().await?;
    io.shutdown().await?;
    let _ = tokio::time::timeout(LINGER, async {
        while io.read(scratch).await.is_ok_and(|n| n > 0) {}
    })
    .await;
    Ok(())
}

/// `<hostname>-<port>`, the id when none is given (like a pod name plus port).
fn default_id(port: u16) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '-' })
        .take(100)
        .collect();
    let host = if host.is_empty() { "backend" } else { &host };
    format!("{host}-{port}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert!(valid_id("web-1"));
        assert!(valid_id("a.b_c:8080"));
        for bad in ["", "two words", "tab\t", "é", &"x".repeat(129)] {
            assert!(!valid_id(bad), "{bad:?}");
        }
        let d = default_id(8080);
        assert!(d.ends_with("-8080") && valid_id(&d), "{d}");
    }
}
