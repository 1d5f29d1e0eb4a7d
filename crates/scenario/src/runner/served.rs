//! Before a cluster's load: the run's route answers from a backend through the URL
//! the load will use. An Ingress carries no condition that says a controller took
//! it, so without this a controller watching another class, or one that refused the
//! run's TLS Secret, would be measured as a run of 404s or handshake errors; with
//! it the run stops before its load and says what the URL answered.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one probe may take (connect, handshake, answer).
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What one probe got.
#[derive(Debug, PartialEq)]
pub(crate) enum Probe {
    /// An answer from a backend (it carries the backend's header): which one, when
    /// its header says.
    Served(Option<String>),
    /// Something else, in words: another answer, a refused connection, a handshake
    /// that failed.
    Not(String),
}

/// How many answers in a row a backend must give before the route counts as
/// served, and how far apart they are sent: a controller that answered once may
/// still be between two configurations (ingress-nginx answered a probe 404 right
/// after the load's first request had reached a backend), and the probes and the
/// load that follow must not start inside that.
const STEADY: u32 = 3;
const STEADY_GAP: Duration = Duration::from_millis(100);

/// Probes the load's first request (as GET) until a backend has answered it
/// [`STEADY`] times in a row or `bound` has passed; returns how long that took, or,
/// in one line, what the last probe got. An HTTP/1.1 load only: a gRPC call or an
/// h2c connection is not a GET.
///
/// `ours` names the run's backends (empty: any backend will do): on a cluster, a
/// route of an earlier system's, or of another run, whose objects the controller
/// has not dropped yet answers from backends that are not this run's (measured:
/// Traefik's ingress-nginx provider served a previous system's route on the same
/// host for a second after its Ingress was deleted), and counts as not served.
pub(crate) fn wait_served(
    spec: &engine::LoadSpec,
    bound: Duration,
    ours: &[String],
) -> Result<Duration, String> {
    let (url, headers) = match spec.targets.first() {
        Some(t) => (t.url.as_str(), t.headers.as_slice()),
        None => (spec.url.as_str(), spec.headers.as_slice()),
    };
    let target = http1::Target::parse(url)?;
    let msg = http1::target::encode_request("GET", &target, headers, &[], true)?;
    // Every connection goes to the URL's address; a request's own host is its
    // virtual host (Host, and the server name over TLS), as the engine sends it.
    let (addr, tls) = endpoint(spec, &target)?;
    until_steady(bound, || {
        match probe(addr, &msg, tls.as_ref(), &spec.backend_header) {
            Probe::Served(Some(by)) if !ours.is_empty() && !ours.contains(&by) => Probe::Not(
                format!("was answered by {by}, not a backend of this run (a route of an earlier run, or of another system, still in force)"),
            ),
            p => p,
        }
    })
    .map_err(|why| {
        format!(
            "GET {url} got no answer from a backend in {} s: the last probe {why}",
            bound.as_secs()
        )
    })
}

/// Calls `probe` until it says [`Probe::Served`] [`STEADY`] times in a row,
/// [`STEADY_GAP`] apart (200 ms after any other answer), or `bound` has passed:
/// how long that took, or the last answer.
fn until_steady(bound: Duration, mut probe: impl FnMut() -> Probe) -> Result<Duration, String> {
    let t0 = Instant::now();
    let mut in_a_row = 0;
    loop {
        match probe() {
            Probe::Served(_) => {
                in_a_row += 1;
                if in_a_row >= STEADY {
                    return Ok(t0.elapsed());
                }
                std::thread::sleep(STEADY_GAP);
            }
            Probe::Not(why) if t0.elapsed() >= bound => return Err(why),
            Probe::Not(_) => {
                in_a_row = 0;
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

/// [`wait_served`] for a load of gRPC calls: its call, once on a connection of its
/// own, until a backend has answered it OK [`STEADY`] times in a row or `bound` has
/// passed. A GRPCRoute has a condition, but a controller may take the route before
/// its proxy serves it (Traefik answered the streams opened then 502, 5 s later).
pub(crate) fn wait_served_grpc(
    spec: &engine::LoadSpec,
    call: &engine::GrpcCall,
    bound: Duration,
) -> Result<Duration, String> {
    let target = http1::Target::parse(&spec.url)?;
    let (addr, tls) = endpoint(spec, &target)?;
    // HTTP/2 by ALPN, as the load's connections ask for it.
    let tls = tls.map(|(cfg, name)| {
        let mut c = (*cfg).clone();
        c.alpn_protocols = vec![b"h2".to_vec()];
        (Arc::new(c), name)
    });
    let (path, authority) = (format!("/{}", call.method), target.host_header());
    until_steady(bound, || {
        grpc_probe(
            addr,
            tls.as_ref(),
            &authority,
            &path,
            &call.message,
            &spec.backend_header,
        )
    })
    .map_err(|why| {
        format!(
            "the gRPC call {} got no OK from a backend in {} s: the last call {why}",
            call.method,
            bound.as_secs()
        )
    })
}

/// One gRPC call on an HTTP/2 connection of its own: served when the response head
/// names a backend and the trailers say OK.
fn grpc_probe(
    addr: SocketAddr,
    tls: Option<&Tls>,
    authority: &str,
    path: &str,
    message: &[u8],
    backend_header: &str,
) -> Probe {
    let s = match TcpStream::connect_timeout(&addr, PROBE_TIMEOUT) {
        Ok(s) => s,
        Err(e) => return Probe::Not(format!("could not connect: {e}")),
    };
    if let Err(e) = s.set_read_timeout(Some(PROBE_TIMEOUT)) {
        return Probe::Not(e.to_string());
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    let call = |io: &mut dyn ReadWrite| {
        grpc_exchange(io, scheme, authority, path, message, backend_header)
    };
    match tls {
        None => call(&mut { s }),
        Some((cfg, name)) => match rustls::ClientConnection::new(cfg.clone(), name.clone()) {
            Ok(conn) => call(&mut rustls::StreamOwned::new(conn, s)),
            Err(e) => Probe::Not(format!("TLS: {e}")),
        },
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// The call's frames out, then the answer's read until its trailers (or an end).
fn grpc_exchange(
    io: &mut dyn ReadWrite,
    scheme: &str,
    authority: &str,
    path: &str,
    message: &[u8],
    backend_header: &str,
) -> Probe {
    use http2::stream::{Event, StreamClient};
    let mut c = StreamClient::new(backend_header);
    let mut out = Vec::new();
    c.start(&mut out, scheme, authority, path, &[]);
    c.send(&mut out, message);
    c.finish(&mut out);
    let (mut buf, mut n) = (vec![0u8; 64 * 1024], 0);
    let (mut head, mut status) = (None::<(u16, bool)>, None::<Option<u32>>);
    let deadline = Instant::now() + PROBE_TIMEOUT;
    while status.is_none() && Instant::now() < deadline {
        if !out.is_empty() {
            if let Err(e) = io.write_all(&out).and_then(|()| io.flush()) {
                return Probe::Not(format!("could not send the call: {e}"));
            }
            out.clear();
        }
        if n == buf.len() {
            return Probe::Not("an answer larger than 64 KiB before its trailers".into());
        }
        match io.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Probe::Not(format!("got no whole answer: {e}")),
        }
        let used = c.read(&buf[..n], &mut out, &mut |e| match e {
            Event::Response {
                status: code,
                backend,
                grpc_status,
                ..
            } => {
                head = Some((code, backend.is_some()));
                if grpc_status.is_some() {
                    status = Some(grpc_status);
                }
            }
            Event::Trailers { grpc_status, .. } => status = Some(grpc_status),
            Event::Reset(code) => status = Some(Some(1000 + code)),
            _ => {}
        });
        match used {
            Ok(k) => {
                buf.copy_within(k..n, 0);
                n -= k;
            }
            Err(e) => return Probe::Not(format!("got no HTTP/2 answer: {e}")),
        }
    }
    match (head, status) {
        (Some((200, true)), Some(Some(0))) => Probe::Served(None),
        (Some((200, false)), Some(Some(0))) => Probe::Not(format!(
            "was answered OK without {backend_header}: not by a backend"
        )),
        (Some((code, _)), _) if code != 200 => Probe::Not(format!("was answered :status {code}")),
        (_, Some(Some(s))) if s >= 1000 => Probe::Not(format!(
            "was reset ({})",
            http2::frame::error_name(s - 1000)
        )),
        (_, Some(Some(s))) => Probe::Not(format!(
            "ended with grpc-status {s} {}",
            http2::stream::status_name(s)
        )),
        (_, Some(None)) => Probe::Not("ended without a grpc-status".into()),
        (_, None) => Probe::Not("got no whole answer".into()),
    }
}

/// Where every connection of `spec`'s load goes (its URL's address), and its TLS
/// for `host`'s virtual host (the server name), when `host` speaks TLS.
pub(crate) fn endpoint(
    spec: &engine::LoadSpec,
    host: &http1::Target,
) -> Result<(SocketAddr, Option<Tls>), String> {
    let to = http1::Target::parse(&spec.url)?;
    let addr = (to.host.as_str(), to.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("{}: no address for {}", spec.url, to.host))?;
    let tls = if host.tls {
        let cfg = engine::tls::client_config(&spec.tls).map_err(|e| e.to_string())?;
        let name = engine::tls::server_name(&host.host).map_err(|e| e.to_string())?;
        Some((cfg, name))
    } else {
        None
    };
    Ok((addr, tls))
}

pub(crate) type Tls = (
    Arc<rustls::ClientConfig>,
    rustls::pki_types::ServerName<'static>,
);

/// One request on a connection of its own, read until the server closes it.
pub(crate) fn probe(
    addr: SocketAddr,
    msg: &[u8],
    tls: Option<&Tls>,
    backend_header: &str,
) -> Probe {
    let raw = match fetch(addr, msg, tls, PROBE_TIMEOUT) {
        Ok(raw) => raw,
        Err(why) => return Probe::Not(why),
    };
    match http1::client::parse(&raw, false) {
        Ok(r) if r.header(backend_header).is_some() => {
            Probe::Served(r.header(backend_header).map(str::to_string))
        }
        Ok(r) => Probe::Not(format!(
            "was answered {} without {backend_header}: not by a backend{}",
            r.status,
            if r.status == 404 {
                " (a controller's 404 for a request no route of its matches)"
            } else {
                ""
            }
        )),
        Err(e) => Probe::Not(format!("got no HTTP answer: {e}")),
    }
}

/// Sends `msg` on a connection of its own (over TLS with `tls`) and reads until the
/// server closes it, each step within `timeout`; the bytes read, or what failed.
pub(crate) fn fetch(
    addr: SocketAddr,
    msg: &[u8],
    tls: Option<&Tls>,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let mut raw = Vec::new();
    let s = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("could not connect: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .map_err(|e| e.to_string())?;
    match tls {
        None => exchange(s, msg, &mut raw)?,
        Some((cfg, name)) => {
            let conn = rustls::ClientConnection::new(cfg.clone(), name.clone())
                .map_err(|e| format!("TLS: {e}"))?;
            // rustls says what was wrong with the certificate.
            exchange(rustls::StreamOwned::new(conn, s), msg, &mut raw)
                .map_err(|e| format!("failed in TLS: {e}"))?;
        }
    }
    Ok(raw)
}

/// Writes `msg`, reads until the other side closes (or a read times out with an
/// answer in hand).
fn exchange(mut s: impl Read + Write, msg: &[u8], raw: &mut Vec<u8>) -> Result<(), String> {
    // A proxy may answer (413, 431) and close before the request is all sent: its
    // answer is still read.
    let sent = s.write_all(msg).and_then(|()| s.flush());
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if !raw.is_empty() && is_end(&e) => break,
            Err(e) => {
                return Err(match sent {
                    Err(w) => w.to_string(),
                    Ok(()) => e.to_string(),
                })
            }
        }
    }
    match sent {
        Err(w) if raw.is_empty() => Err(w.to_string()),
        _ => Ok(()),
    }
}

/// A read that ended an answer already in hand: a timeout, or a TLS peer that
/// closed without its close_notify.
fn is_end(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    const SERVED: &str = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-backend: web-1\r\n\r\nok";
    const NOT_FOUND: &str = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";

    /// A server that answers each connection with `answer` and closes.
    fn answering(answer: &'static str) -> SocketAddr {
        in_turn(vec![answer])
    }

    /// A server that answers its connections with `answers` in turn (the last one
    /// for the rest), each then closed.
    fn in_turn(answers: Vec<&'static str>) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for (k, s) in l.incoming().take(50).enumerate() {
                let Ok(mut s) = s else { continue };
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let answer = answers.get(k).or(answers.last()).unwrap();
                let _ = s.write_all(answer.as_bytes());
            }
        });
        addr
    }

    #[test]
    fn a_route_is_served_once_it_has_answered_from_a_backend_in_a_row() {
        // Served once, then the controller's 404 (between two configurations), then
        // served from then on: ready only after the answers in a row.
        let flapping = in_turn(vec![SERVED, NOT_FOUND, SERVED]);
        let took = wait_served(&spec(flapping), Duration::from_secs(5), &[]).unwrap();
        // One 404's pause and the gaps between the answers in a row.
        assert!(
            took >= Duration::from_millis(200) + STEADY_GAP * (STEADY - 1),
            "{took:?}"
        );

        // Never served twice running: never ready, and the last answer is said.
        let never = in_turn(vec![
            SERVED, NOT_FOUND, SERVED, NOT_FOUND, SERVED, NOT_FOUND, SERVED, NOT_FOUND,
        ]);
        let e = wait_served(&spec(never), Duration::from_millis(700), &[]).unwrap_err();
        assert!(e.contains("was answered 404 without x-backend"), "{e}");
    }

    fn spec(addr: SocketAddr) -> engine::LoadSpec {
        engine::LoadSpec {
            url: format!("http://{addr}/"),
            backend_header: "x-backend".into(),
            ..engine::LoadSpec::default()
        }
    }

    /// A literal HPACK field without indexing, by name.
    fn field(b: &mut Vec<u8>, n: &str, v: &str) {
        b.push(0);
        b.push(n.len() as u8);
        b.extend_from_slice(n.as_bytes());
        b.push(v.len() as u8);
        b.extend_from_slice(v.as_bytes());
    }

    /// An HTTP/2 server that answers each connection's call with `head`'s fields,
    /// one message, and `trailers`' (none: no trailers, the stream left open).
    fn grpc_server(head: &'static [(&str, &str)], trailers: &'static [(&str, &str)]) -> SocketAddr {
        use http2::frame;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming().take(50) {
                let Ok(mut s) = s else { continue };
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let mut out = Vec::new();
                frame::write_frame(&mut out, frame::SETTINGS, 0, 0, &[]);
                let mut b = Vec::new();
                for (n, v) in head {
                    field(&mut b, n, v);
                }
                frame::write_frame(&mut out, frame::HEADERS, frame::END_HEADERS, 1, &b);
                frame::write_frame(&mut out, frame::DATA, 0, 1, &[0, 0, 0, 0, 2, 8, 1]);
                if !trailers.is_empty() {
                    let mut t = Vec::new();
                    for (n, v) in trailers {
                        field(&mut t, n, v);
                    }
                    let flags = frame::END_HEADERS | frame::END_STREAM;
                    frame::write_frame(&mut out, frame::HEADERS, flags, 1, &t);
                }
                let _ = s.write_all(&out);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        addr
    }

    fn grpc_spec(addr: SocketAddr) -> (engine::LoadSpec, engine::GrpcCall) {
        let call = engine::GrpcCall {
            method: "ingressbench.Backend/Echo".into(),
            message: vec![1, 2, 3],
        };
        (spec(addr), call)
    }

    #[test]
    fn a_grpc_route_is_served_once_a_backend_answers_the_call_ok() {
        let ok: &[(&str, &str)] = &[("grpc-status", "0")];
        let backend = grpc_server(&[(":status", "200"), ("x-backend", "web-1")], ok);
        let (s, call) = grpc_spec(backend);
        let took = wait_served_grpc(&s, &call, Duration::from_secs(5)).unwrap();
        assert!(took < Duration::from_secs(2), "{took:?}");

        for (server, says) in [
            (
                grpc_server(&[(":status", "404")], ok),
                "the last call was answered :status 404",
            ),
            (
                grpc_server(&[(":status", "200")], ok),
                "was answered OK without x-backend",
            ),
            (
                grpc_server(
                    &[(":status", "200"), ("x-backend", "web-1")],
                    &[("grpc-status", "14")],
                ),
                "ended with grpc-status 14 UNAVAILABLE",
            ),
            (answering(NOT_FOUND), "got no HTTP/2 answer"),
        ] {
            let (s, call) = grpc_spec(server);
            let e = wait_served_grpc(&s, &call, Duration::ZERO).unwrap_err();
            assert!(
                e.contains(says) && e.contains("ingressbench.Backend/Echo") && !e.contains('\n'),
                "{says}: {e}"
            );
        }
    }

    #[test]
    fn only_an_answer_from_a_backend_is_served() {
        let backend = answering(SERVED);
        let took = wait_served(&spec(backend), Duration::from_secs(5), &[]).unwrap();
        // A backend that is not the run's does not serve its route.
        let ours = ["web-2".to_string()];
        let e = wait_served(&spec(backend), Duration::from_millis(300), &ours).unwrap_err();
        assert!(
            e.contains("was answered by web-1, not a backend of this run"),
            "{e}"
        );
        let ours = ["web-1".to_string()];
        wait_served(&spec(backend), Duration::from_secs(5), &ours).unwrap();
        assert!(took < Duration::from_secs(2), "{took:?}");

        let catch_all = answering(NOT_FOUND);
        let t = Instant::now();
        let e = wait_served(&spec(catch_all), Duration::from_millis(500), &[]).unwrap_err();
        assert!(t.elapsed() >= Duration::from_millis(500));
        assert!(
            e.contains("was answered 404 without x-backend")
                && e.contains("no route of its matches")
                && !e.contains('\n'),
            "{e}"
        );

        // Nothing listens there any more.
        let gone = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let e = wait_served(&spec(gone), Duration::ZERO, &[]).unwrap_err();
        assert!(e.contains("could not connect"), "{e}");
    }
}
