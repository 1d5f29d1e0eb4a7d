//! The gRPC transport: tonic's ADS service on a Unix socket, run by a tokio runtime on
//! a thread of its own, with a blocking API for the lab.

use crate::protocol::{Snapshot, Stream, Verdict};
use crate::{short_name, XdsError};
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::Any;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::{ReceiverStream, UnixListenerStream};
use tonic::{Request, Response, Status, Streaming};

pub const TYPE_LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const TYPE_ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
pub const TYPE_SECRET: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
pub const TYPE_CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const TYPE_ENDPOINTS: &str =
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

/// What the controller set and what Envoy said of it.
#[derive(Default)]
struct State {
    current: BTreeMap<String, Snapshot>,
    /// Highest version acknowledged per type.
    acked: BTreeMap<String, u64>,
    /// Last refusal per type: its version and Envoy's reason.
    nacked: BTreeMap<String, (u64, String)>,
    /// ADS streams open now.
    streams: usize,
}

struct Shared {
    state: Mutex<State>,
    verdicts: Condvar,
    /// Bumped on every `set`, so each stream pushes what is new.
    changed: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn record(&self, verdict: Verdict) {
        let mut st = self.lock();
        match verdict {
            Verdict::Acked { type_url, version } => {
                let a = st.acked.entry(type_url).or_default();
                *a = (*a).max(version);
            }
            Verdict::Nacked {
                type_url,
                version,
                detail,
            } => {
                st.nacked.insert(type_url, (version, detail));
            }
        }
        drop(st);
        self.verdicts.notify_all();
    }
}

/// A running ADS server. Dropping it stops it and removes its socket.
pub struct Server {
    shared: Arc<Shared>,
    socket: PathBuf,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Listens on the Unix socket `path` (it must not exist) and serves ADS.
    ///
    /// # Errors
    /// [`XdsError::Bind`] when the socket cannot be created, [`XdsError::Runtime`]
    /// when the runtime cannot start.
    pub fn start(path: &Path) -> Result<Server, XdsError> {
        let bind_err = |source| XdsError::Bind {
            path: path.display().to_string(),
            source,
        };
        let std_listener = std::os::unix::net::UnixListener::bind(path).map_err(bind_err)?;
        std_listener.set_nonblocking(true).map_err(bind_err)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(XdsError::Runtime)?;
        let (changed, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            verdicts: Condvar::new(),
            changed,
        });
        let (shutdown, stop) = oneshot::channel::<()>();
        let service = Ads {
            shared: shared.clone(),
        };
        let listener = {
            let _enter = runtime.enter();
            tokio::net::UnixListener::from_std(std_listener).map_err(bind_err)?
        };
        let thread = std::thread::Builder::new()
            .name("xds".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let serve = tonic::transport::Server::builder()
                        .add_service(AggregatedDiscoveryServiceServer::new(service))
                        .serve_with_incoming(UnixListenerStream::new(listener));
                    tokio::select! {
                        _ = serve => {}
                        _ = stop => {}
                    }
                });
                // Open streams never end by themselves: drop them with the runtime.
                runtime.shutdown_background();
            })
            .map_err(XdsError::Runtime)?;
        Ok(Server {
            shared,
            socket: path.to_path_buf(),
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The socket it listens on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Makes `resources` the whole set of `type_url` from now on and pushes it to
    /// every connected Envoy. Returns its version, for [`Server::wait_ack`].
    pub fn set(&self, type_url: &str, resources: Vec<Any>) -> u64 {
        let mut st = self.shared.lock();
        let snap = st.current.entry(type_url.to_string()).or_default();
        snap.version += 1;
        snap.resources = resources;
        let version = snap.version;
        drop(st);
        self.shared.changed.send_modify(|g| *g += 1);
        version
    }

    /// Waits until Envoy acknowledged `version` of `type_url` (or a later one).
    ///
    /// # Errors
    /// [`XdsError::Nacked`] with Envoy's reason when it refused that version or a
    /// later one; [`XdsError::NotAcked`] after `timeout`.
    pub fn wait_ack(
        &self,
        type_url: &str,
        version: u64,
        timeout: Duration,
    ) -> Result<(), XdsError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            let acked = st.acked.get(type_url).copied().unwrap_or(0);
            if acked >= version {
                return Ok(());
            }
            if let Some((v, detail)) = st.nacked.get(type_url) {
                if *v >= version {
                    return Err(XdsError::Nacked {
                        what: short_name(type_url),
                        version: *v,
                        detail: detail.clone(),
                    });
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(XdsError::NotAcked {
                    what: short_name(type_url),
                    version,
                    acked,
                    waited: timeout,
                });
            }
            st = self
                .shared
                .verdicts
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// The highest version of `type_url` Envoy acknowledged (0: none).
    pub fn acked(&self, type_url: &str) -> u64 {
        self.shared.lock().acked.get(type_url).copied().unwrap_or(0)
    }

    /// ADS streams open now (one per connected Envoy).
    pub fn streams(&self) -> usize {
        self.shared.lock().streams
    }

    /// Forgets what Envoy acknowledged, for a new Envoy process that starts from
    /// nothing: its first ACK of each type counts again.
    pub fn forget_verdicts(&self) {
        let mut st = self.shared.lock();
        st.acked.clear();
        st.nacked.clear();
    }

    /// Stops serving and removes the socket.
    pub fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The tonic service: one task per ADS stream.
struct Ads {
    shared: Arc<Shared>,
}

type Out<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = Out<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = Out<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let mut inbound = request.into_inner();
        let shared = self.shared.clone();
        let (tx, rx) = mpsc::channel::<Result<DiscoveryResponse, Status>>(16);
        tokio::spawn(async move {
            let mut changes = shared.changed.subscribe();
            let mut stream = Stream::default();
            shared.lock().streams += 1;
            'serve: loop {
                let out = tokio::select! {
                    msg = inbound.message() => match msg {
                        Ok(Some(req)) => {
                            let current = shared.lock().current.clone();
                            let (out, verdict) = stream.on_request(&req, &current);
                            if let Some(v) = verdict {
                                shared.record(v);
                            }
                            out
                        }
                        // Envoy closed the stream or the connection broke.
                        _ => break 'serve,
                    },
                    changed = changes.changed() => {
                        if changed.is_err() {
                            break 'serve;
                        }
                        let current = shared.lock().current.clone();
                        stream.on_change(&current)
                    }
                };
                for resp in out {
                    if tx.send(Ok(resp)).await.is_err() {
                        break 'serve;
                    }
                }
            }
            shared.lock().streams -= 1;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented(
            "this control plane serves state-of-the-world ADS only",
        ))
    }
}
