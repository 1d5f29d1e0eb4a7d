//! The small HTTP/1.1 server under the program's own endpoints: a generator pod's
//! `--serve` (the coordinator's `/clock`, `/result`, `/stop`, ...) and the binary's
//! `--metrics-listen`.
//!
//! hyper on a current-thread tokio runtime of its own thread, one task per
//! connection: a client that stalls halfway through its request holds only its own
//! connection, never another client's (a coordinator's `/stop`, a scrape). One thread
//! and a few kilobytes a connection, beside a load generator whose threads do the
//! work; the handlers are synchronous and answer at once from memory.
//!
//! Each connection carries one request and is closed after its answer
//! (`Connection: close`), as the clients here send a handful of requests each.
//! [`Endpoint`] owns the thread: dropping it closes the listener and every
//! connection, and returns once the thread has ended.

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

/// The body of every answer: in memory, whole.
pub type Body = Full<Bytes>;

/// How long a client may take, so a stuck one does not hold a socket forever.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// To send its request head (from the connection's start).
    pub head: Duration,
    /// For the whole exchange, its answer read included.
    pub exchange: Duration,
    /// The longest request head read; a longer one is answered 431 (hyper's floor
    /// is 8 KiB).
    pub max_head: usize,
}

/// How long a dropped endpoint lets the exchanges under way finish (an answer being
/// written, such as the `/done` that ends a part) before it closes them.
const GRACE: Duration = Duration::from_millis(500);
/// How long the listener pauses after a failed accept (out of file descriptors, a
/// connection reset before it was taken) rather than spinning.
const ACCEPT_PAUSE: Duration = Duration::from_millis(20);

/// A running endpoint; dropping it stops it (see the module's documentation).
pub struct Endpoint {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Endpoint {
    /// Serves `listener` (bound by the caller, so a bad address is the caller's
    /// error, worded for its flag) from a thread named `name`, each request answered
    /// by `handler`.
    ///
    /// # Errors
    /// When the runtime, the listener's registration or the thread cannot be had.
    pub fn start<F>(
        listener: std::net::TcpListener,
        name: &str,
        limits: Limits,
        handler: F,
    ) -> std::io::Result<Endpoint>
    where
        F: Fn(&Request<Incoming>) -> Response<Body> + Send + Sync + 'static,
    {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let listener = {
            let _in_runtime = runtime.enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        let (stop, stopped) = oneshot::channel();
        let handler = Arc::new(handler);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || runtime.block_on(serve(listener, limits, handler, stopped)))?;
        Ok(Endpoint {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address bound (the port chosen, when 0 was given).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // Dropping the sender is the signal.
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Accepts until `stopped`, each connection on a task of its own; then closes the
/// listener and, after [`GRACE`], every connection left.
async fn serve<F>(
    listener: tokio::net::TcpListener,
    limits: Limits,
    handler: Arc<F>,
    mut stopped: oneshot::Receiver<()>,
) where
    F: Fn(&Request<Incoming>) -> Response<Body> + Send + Sync + 'static,
{
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.head)
        .keep_alive(false)
        // The header names as the hand-written servers wrote them (`Content-Type`).
        .title_case_headers(true)
        .max_buf_size(limits.max_head);
    let mut exchanges = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    let h = handler.clone();
                    let service = hyper::service::service_fn(move |req| {
                        let answer = h(&req);
                        async move { Ok::<_, Infallible>(answer) }
                    });
                    let exchange = http.serve_connection(TokioIo::new(tcp), service);
                    exchanges.spawn(async move {
                        // A failed exchange concerns only its client.
                        let _ = tokio::time::timeout(limits.exchange, exchange).await;
                    });
                }
                Err(_) => tokio::time::sleep(ACCEPT_PAUSE).await,
            },
            // Finished exchanges, collected as they end.
            Some(_) = exchanges.join_next(), if !exchanges.is_empty() => {}
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(GRACE, async {
        while exchanges.join_next().await.is_some() {}
    })
    .await;
    // `exchanges` dropped here: the connections still open are aborted and closed.
}
