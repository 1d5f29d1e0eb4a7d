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
    /// An answer from a backend (it carries the backend's header).
    Served,
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
pub(crate) fn wait_served(spec: &engine::LoadSpec, bound: Duration) -> Result<Duration, String> {
    let t0 = Instant::now();
    let (url, headers) = match spec.targets.first() {
        Some(t) => (t.url.as_str(), t.headers.as_slice()),
        None => (spec.url.as_str(), spec.headers.as_slice()),
    };
    let target = http1::Target::parse(url)?;
    let msg = http1::target::encode_request("GET", &target, headers, &[], true)?;
    // Every connection goes to the URL's address; a request's own host is its
    // virtual host (Host, and the server name over TLS), as the engine sends it.
    let (addr, tls) = endpoint(spec, &target)?;
    let mut in_a_row = 0;
    loop {
        match probe(addr, &msg, tls.as_ref(), &spec.backend_header) {
            Probe::Served => {
                in_a_row += 1;
                if in_a_row >= STEADY {
                    return Ok(t0.elapsed());
                }
                std::thread::sleep(STEADY_GAP);
            }
            Probe::Not(why) if t0.elapsed() >= bound => {
                return Err(format!(
                    "GET {url} got no answer from a backend in {} s: the last probe {why}",
                    bound.as_secs()
                ))
            }
            Probe::Not(_) => {
                in_a_row = 0;
                std::thread::sleep(Duration::from_millis(200));
            }
        }
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
        Ok(r) if r.header(backend_header).is_some() => Probe::Served,
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
        let took = wait_served(&spec(flapping), Duration::from_secs(5)).unwrap();
        // One 404's pause and the gaps between the answers in a row.
        assert!(
            took >= Duration::from_millis(200) + STEADY_GAP * (STEADY - 1),
            "{took:?}"
        );

        // Never served twice running: never ready, and the last answer is said.
        let never = in_turn(vec![
            SERVED, NOT_FOUND, SERVED, NOT_FOUND, SERVED, NOT_FOUND, SERVED, NOT_FOUND,
        ]);
        let e = wait_served(&spec(never), Duration::from_millis(700)).unwrap_err();
        assert!(e.contains("was answered 404 without x-backend"), "{e}");
    }

    fn spec(addr: SocketAddr) -> engine::LoadSpec {
        engine::LoadSpec {
            url: format!("http://{addr}/"),
            backend_header: "x-backend".into(),
            ..engine::LoadSpec::default()
        }
    }

    #[test]
    fn only_an_answer_from_a_backend_is_served() {
        let backend = answering(SERVED);
        let took = wait_served(&spec(backend), Duration::from_secs(5)).unwrap();
        assert!(took < Duration::from_secs(2), "{took:?}");

        let catch_all = answering(NOT_FOUND);
        let t = Instant::now();
        let e = wait_served(&spec(catch_all), Duration::from_millis(500)).unwrap_err();
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
        let e = wait_served(&spec(gone), Duration::ZERO).unwrap_err();
        assert!(e.contains("could not connect"), "{e}");
    }
}
