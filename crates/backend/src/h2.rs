//! HTTP/2 and gRPC: a connection whose client chose `h2` by ALPN, or opened with
//! the HTTP/2 preface on a plain port (h2c, prior knowledge), is served by hyper's
//! HTTP/2 server instead of the HTTP/1.1 loop. The backend's precision is not the
//! engine's: a well-kept server library is the right tool here.
//!
//! Every answer behaves as over HTTP/1.1: the same body of `--body-size` bytes
//! (the same lines), `x-backend`, `--delay`, `--stall`, `--flap` and `--status`,
//! `/healthz`. A request with `content-type: application/grpc` is a gRPC call:
//! - `ingressbench.Backend/Echo` answers `EchoReply { string backend = 1; bytes
//!   payload = 2; }`: this backend's id and the request message back;
//! - `ingressbench.Backend/EchoStream` is the same echo on a bidirectional
//!   stream held open (issue 45): each message answered by its `EchoReply` as it
//!   comes, `OK` when the client ends its side, and at the drain `UNAVAILABLE`
//!   (`ingressbench backend draining`) beside the GOAWAY, so a client tells a
//!   graceful end from a cut one; how each stream ended is counted
//!   ([`StreamTally`]);
//! - `grpc.health.v1.Health/Check` answers `SERVING`;
//! - any other method is `UNIMPLEMENTED`;
//! - `--status` (and a failing `--flap` phase in `503` mode) becomes a gRPC
//!   status, sent as a trailers-only response (what servers do for an error
//!   before any message); `--flap` in `reset` mode resets the stream.
//!
//! The drain sends GOAWAY (hyper's graceful shutdown) and lets the streams in
//! flight finish.

use crate::tally::StreamEnd;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body::{Body, Frame};
use hyper::body::Incoming;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::delay::Rng;
use super::flap::FlapMode;
use super::response::{now_date, Answer, HEALTH_PATH};
use super::state::{draining, Shared};

/// The Echo method's path.
pub const ECHO_PATH: &str = "/ingressbench.Backend/Echo";
/// The streaming Echo's path: a bidirectional stream of the same messages.
pub const ECHO_STREAM_PATH: &str = "/ingressbench.Backend/EchoStream";
/// The `grpc-message` of the status a stream ends with at the drain.
pub const DRAIN_MESSAGE: &str = "ingressbench backend draining";
/// Replies a stream may have queued for the client before it reads another message.
const STREAM_QUEUE: usize = 64;
/// The standard health check's path.
pub const HEALTH_CHECK_PATH: &str = "/grpc.health.v1.Health/Check";

/// The first bytes of the HTTP/2 connection preface: a plain connection starting
/// with them is h2c.
pub const PREFACE_START: &[u8] = b"PRI * HTTP/2.0";

/// Serves one HTTP/2 connection until the client closes it or the drain ends it.
pub(crate) async fn serve<S>(
    io: S,
    local: SocketAddr,
    shared: Arc<Shared>,
    mut drain: watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let prefix: Arc<[u8]> = shared.responder.conn_prefix(local).into();
    let stream_drain = drain.clone();
    let svc = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        let prefix = prefix.clone();
        let drain = stream_drain.clone();
        // An error resets the stream (RST_STREAM): `--flap` in reset mode.
        async move { answer(req, &shared, &prefix, drain).await }
    });
    let conn = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .serve_connection(hyper_util::rt::TokioIo::new(io), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = draining(&mut drain) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// A response body of one chunk and, for gRPC, trailers after it; or a stream's
/// replies as its task makes them, then its trailers.
pub struct Reply {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
    streamed: Option<mpsc::Receiver<Frame<Bytes>>>,
}

impl Reply {
    fn empty() -> Reply {
        Reply {
            data: None,
            trailers: None,
            streamed: None,
        }
    }
}

impl Body for Reply {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if let Some(rx) = self.streamed.as_mut() {
            return rx.poll_recv(cx).map(|f| f.map(Ok));
        }
        if let Some(d) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(d))));
        }
        if let Some(t) = self.trailers.take() {
            return Poll::Ready(Some(Ok(Frame::trailers(t))));
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none() && self.streamed.is_none()
    }
}

/// The gRPC status for an HTTP status the backend was told to answer with.
pub fn grpc_status_for(http: u16) -> u32 {
    match http {
        400 => 3,        // INVALID_ARGUMENT
        401 => 16,       // UNAUTHENTICATED
        403 => 7,        // PERMISSION_DENIED
        404 => 12,       // UNIMPLEMENTED
        429 => 8,        // RESOURCE_EXHAUSTED
        500 => 13,       // INTERNAL
        502..=503 => 14, // UNAVAILABLE
        504 => 4,        // DEADLINE_EXCEEDED
        _ => 2,          // UNKNOWN
    }
}

async fn answer(
    req: Request<Incoming>,
    shared: &Arc<Shared>,
    prefix: &[u8],
    drain: watch::Receiver<bool>,
) -> Result<Response<Reply>, std::io::Error> {
    let grpc = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    let path = req.uri().path().to_string();
    if grpc && path == ECHO_STREAM_PATH {
        return Ok(echo_stream(req.into_body(), shared.clone(), drain));
    }
    if grpc && path != ECHO_PATH && path != HEALTH_CHECK_PATH && shared.responder.status() < 400 {
        // UNIMPLEMENTED before the request's end: a client streaming to an unknown
        // method hears at once, as from a gRPC server.
        let mut resp = Response::new(Reply::empty());
        resp.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        resp.headers_mut()
            .insert("grpc-status", HeaderValue::from_static("12"));
        return Ok(resp);
    }
    let uri = req
        .uri()
        .path_and_query()
        .map_or_else(|| path.clone(), |p| p.as_str().to_string());
    let head_method = req.method() == http::Method::HEAD;
    let health = path.as_bytes() == HEALTH_PATH || path == HEALTH_CHECK_PATH;
    let body = http_body_util::BodyExt::collect(req.into_body())
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut failing_503 = false;
    let mut held_until = None;
    let mut reset = false;
    if let Some(flap) = &shared.flap {
        let phase = flap.arrive(Instant::now(), health);
        if phase.failing {
            match flap.flap().mode {
                FlapMode::Reset => reset = true,
                FlapMode::Status503 => failing_503 = true,
                FlapMode::Stall => held_until = Some(shared.start + phase.end),
            }
        }
    }
    // A failing phase in reset mode resets the stream at once, as HTTP/1.1
    // resets the connection: no delay, no answer.
    if reset {
        return Err(std::io::Error::other("flap: stream reset"));
    }
    let release = shared.release_at(&mut Rng::new(), health);
    let release = match (release, held_until) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    if let Some(at) = release {
        tokio::time::sleep_until(at).await;
    }
    let id = shared.responder.id();
    let mut resp = Response::new(Reply::empty());
    if let Ok(v) = HeaderValue::from_str(id) {
        resp.headers_mut().insert("x-backend", v);
    }
    let status = if failing_503 {
        503
    } else if health {
        200
    } else {
        shared.responder.status()
    };
    if grpc {
        resp.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        let code = if status >= 400 {
            grpc_status_for(status)
        } else if path == ECHO_PATH || path == HEALTH_CHECK_PATH {
            0
        } else {
            12
        };
        if code != 0 {
            // Trailers-only: the status in the one HEADERS frame.
            resp.headers_mut()
                .insert("grpc-status", HeaderValue::from(code));
            return Ok(resp);
        }
        let message = if path == HEALTH_CHECK_PATH {
            vec![0x08, 0x01]
        } else {
            echo_reply(id, message_of(&body))
        };
        let r = resp.body_mut();
        r.data = Some(framed(&message).into());
        r.trailers = Some(status_trailers(0, None));
        return Ok(resp);
    }
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let request_id = shared.next_request.fetch_add(1, Ordering::Relaxed);
    let a = Answer {
        uri: uri.as_bytes(),
        head_method,
        close: false,
        confirm_keep_alive: false,
        request_id,
    };
    // The same bytes as over HTTP/1.1; the head is dropped, the body kept.
    let mut out = Vec::with_capacity(shared.responder.body_size() + 256);
    if failing_503 {
        if let Some(r) = &shared.failing_responder {
            r.write_main(&mut out, prefix, &now_date(), &a);
        }
    } else {
        shared.responder.write(&mut out, prefix, &now_date(), &a);
    }
    let body_at = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(out.len(), |i| i + 4);
    if !head_method {
        resp.body_mut().data = Some(Bytes::copy_from_slice(&out[body_at..]));
    }
    Ok(resp)
}

/// The streaming Echo: the response's head at once (the client's stream is open
/// when it comes), then a task that answers each message as it arrives.
fn echo_stream(
    body: Incoming,
    shared: Arc<Shared>,
    drain: watch::Receiver<bool>,
) -> Response<Reply> {
    let (tx, rx) = mpsc::channel(STREAM_QUEUE);
    let id = shared.responder.id().to_string();
    let mut resp = Response::new(Reply {
        streamed: Some(rx),
        ..Reply::empty()
    });
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-backend", v);
    }
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    shared.streams.opened.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        let end = echo_messages(body, &tx, &id, drain).await;
        let trailers = match end {
            StreamEnd::Peer => Some(status_trailers(0, None)),
            StreamEnd::Drained => Some(status_trailers(14, Some(DRAIN_MESSAGE))),
            StreamEnd::Gone => None,
        };
        if let Some(t) = trailers {
            let _ = tx.send(Frame::trailers(t)).await;
        }
        shared.streams.count(end);
    });
    resp
}

/// Echoes each whole message of `body` into `tx` until the client ends its side,
/// the stream or its connection breaks, or the drain begins.
async fn echo_messages(
    mut body: Incoming,
    tx: &mpsc::Sender<Frame<Bytes>>,
    id: &str,
    mut drain: watch::Receiver<bool>,
) -> StreamEnd {
    if *drain.borrow() {
        return StreamEnd::Drained;
    }
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let frame = tokio::select! {
            f = http_body_util::BodyExt::frame(&mut body) => f,
            _ = draining(&mut drain) => return StreamEnd::Drained,
        };
        let data = match frame {
            None => return StreamEnd::Peer,
            Some(Err(_)) => return StreamEnd::Gone,
            Some(Ok(f)) => match f.into_data() {
                Ok(d) => d,
                // Trailers from the client: its side is over.
                Err(_) => continue,
            },
        };
        buf.extend_from_slice(&data);
        let mut at = 0;
        while let Some((message, next)) = next_message(&buf[at..]) {
            let reply = echo_reply(id, message);
            at += next;
            if tx.send(Frame::data(framed(&reply).into())).await.is_err() {
                return StreamEnd::Gone;
            }
        }
        buf.drain(..at);
    }
}

/// The first whole length-prefixed message of `b` and the bytes it took.
fn next_message(b: &[u8]) -> Option<(&[u8], usize)> {
    if b.len() < 5 {
        return None;
    }
    let n = u32::from_be_bytes([b[1], b[2], b[3], b[4]]) as usize;
    (b.len() >= 5 + n).then(|| (&b[5..5 + n], 5 + n))
}

/// A message with its gRPC prefix (not compressed, its length).
fn framed(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

fn status_trailers(code: u32, message: Option<&'static str>) -> HeaderMap {
    let mut t = HeaderMap::new();
    t.insert("grpc-status", HeaderValue::from(code));
    if let Some(m) = message {
        t.insert("grpc-message", HeaderValue::from_static(m));
    }
    t
}

/// The message of a gRPC request body (its first length-prefixed message).
fn message_of(body: &[u8]) -> &[u8] {
    if body.len() < 5 {
        return &[];
    }
    let n = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    &body[5..body.len().min(5 + n)]
}

/// `EchoReply { backend = 1: id, payload = 2: message }`.
fn echo_reply(id: &str, message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(id.len() + message.len() + 12);
    field(&mut out, 0x0a, id.as_bytes());
    field(&mut out, 0x12, message);
    out
}

fn field(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    let mut v = bytes.len();
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_replies_carry_the_id_and_the_message() {
        let r = echo_reply("b1", b"xyz");
        assert_eq!(r, [0x0a, 2, b'b', b'1', 0x12, 3, b'x', b'y', b'z']);
        let long = vec![7u8; 300];
        let r = echo_reply("b", &long);
        assert_eq!(&r[3..6], &[0x12, 0xac, 0x02], "300 as a varint");
        assert_eq!(message_of(&[0, 0, 0, 0, 2, 9, 9, 1]), &[9, 9]);
        assert_eq!(message_of(&[0, 0]), &[] as &[u8]);
        // A stream's messages one by one, a partial one left for the next read.
        let mut two = framed(b"ab");
        two.extend_from_slice(&framed(b"cde"));
        two.extend_from_slice(&[0, 0, 0, 0, 9, 1]);
        let (m, n) = next_message(&two).unwrap();
        assert_eq!((m, n), (&b"ab"[..], 7));
        let (m, k) = next_message(&two[n..]).unwrap();
        assert_eq!((m, k), (&b"cde"[..], 8));
        assert_eq!(next_message(&two[n + k..]), None);
    }

    #[test]
    fn http_statuses_map_to_grpc_codes() {
        assert_eq!(grpc_status_for(503), 14);
        assert_eq!(grpc_status_for(500), 13);
        assert_eq!(grpc_status_for(404), 12);
        assert_eq!(grpc_status_for(418), 2);
    }
}
