//! The `kubernetes` platform: a run's backends are the pods of a Deployment behind a
//! Service, in a namespace the run creates (or one it is given), changed only through
//! the Kubernetes API, the way `kubectl scale` does in the studies' shell loops.
//!
//! kube-rs (over rustls) talks to the API server on a tokio runtime owned by the
//! platform; the lab's [`Platform`] trait stays blocking. Two watches (Pods and the
//! Service's EndpointSlices) feed a pure [`book::Book`], which says when each backend
//! is ready (listed ready in an EndpointSlice, what every ingress controller watches)
//! and when it is stopping (its deletion timestamp), so endpoint propagation is timed
//! from the cluster's own record.
//!
//! Everything the run creates carries the labels [`MANAGED_BY`] and [`RUN_LABEL`]; a
//! namespace it created is deleted when it ends (unless kept), and
//! [`cleanup`] removes what a killed run left.

pub mod book;
pub mod controllers;
pub mod corpus;
pub mod driver;
pub mod error;
#[cfg(test)]
mod fake;
pub mod gateway;
pub mod generators;
pub mod installed;
pub mod manifests;
pub mod objects;
pub mod processes;
pub mod restart;

use book::{Book, PodSeen, SliceEndpoint, SliceSeen};
pub use error::ClusterError;
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use std::collections::BTreeSet;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use sut::driver::{DriverContext, Endpoint, SutError};
use sut::platform::{Platform, PlatformEvent, SiteSpec, StopMode, Target};

/// `app.kubernetes.io/managed-by` on everything a run creates.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "ingressbench");
/// The run's id on everything it creates.
pub const RUN_LABEL: &str = "ingressbench.io/run";
/// The Deployment, Service and ConfigMap of the backends.
pub const BACKEND: &str = "ib-backend";

/// The label a drain puts on the node it cordons (the run's id), so that
/// `ingressbench cleanup` can uncordon it after a run that was killed.
pub const CORDONED_BY: &str = "ingressbench.io/cordoned-by";

/// The TLS Secret a run makes for the controller to terminate its TLS with.
pub const TLS_SECRET: &str = "ib-tls";

/// How long a run waits at most, at its end, for an implementation to remove the
/// data plane it made for the run's own Gateway (no longer than its
/// `gateway_timeout`).
const DATA_PLANE_GONE_WAIT: Duration = Duration::from_secs(30);

/// How long a scale step waits for the cluster to report every change.
const SCALE_WAIT: Duration = Duration::from_secs(120);

/// How to reach the cluster and where to work in it.
#[derive(Clone, Debug, Default)]
pub struct ClusterSpec {
    /// A kubeconfig file; `None`: `KUBECONFIG`, then `~/.kube/config`.
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context; `None`: its current context.
    pub context: Option<String>,
    /// Work in this namespace (it must exist, and is not deleted); `None`: create
    /// `ingressbench-<run>` and delete it at the end.
    pub namespace: Option<String>,
    /// Keep the namespace (and what is in it) after the run, for inspection.
    pub keep: bool,
    /// The run's id: names the namespace, labels every object.
    pub run: String,
    /// The URL each system's data plane listens on, by system name.
    pub urls: Vec<(String, String)>,
    /// Text of the command lines of each system's processes on this machine, by
    /// system name (`kubernetes.processes`): what their CPU and memory are read from.
    pub processes: Vec<(String, String)>,
    /// The backend image (default: the stock `nginx` image with our config).
    pub image: Option<String>,
    /// The Gateway HTTPRoutes attach to: (namespace, name).
    pub gateway: Option<(String, String)>,
    /// A Gateway of the run's own, of this class, in its namespace
    /// ([`gateway`]); then `gateway` is not used.
    pub own_gateway: Option<gateway::OwnGateway>,
    /// The host routes match (`None`: every host).
    pub host: Option<String>,
    /// The IngressClass of the run's Ingresses, over the profile's own
    /// (`kubernetes.ingress_class(es)`).
    pub ingress_class: Option<String>,
    /// How long the run's route may take to serve before the load
    /// (`kubernetes.serve_timeout`; the runner's default when `None`).
    pub serve_timeout: Option<std::time::Duration>,
    /// The CA (PEM) of the controllers' serving certificates, for `https://` URLs
    /// that no public CA signed.
    pub cacert: Option<std::path::PathBuf>,
    /// Where each system's controller and data plane run (`kubernetes.workloads`),
    /// by system name, over its profile's standard install.
    pub installs: Vec<(String, controllers::Install<String>)>,
    /// The routes the user brings for this system (`kubernetes.manifests`): the
    /// file as errors name it and its text, applied in place of the generated route
    /// ([`manifests`]).
    pub manifests: Option<(String, String)>,
    /// The load is gRPC (`protocol: grpc`): its route is a GRPCRoute. Known here,
    /// before `prepare`, because the driver is made first and writes the route.
    pub grpc: bool,
}

/// The platform.
pub struct Kubernetes {
    spec: ClusterSpec,
    rt: Arc<tokio::runtime::Runtime>,
    client: Option<kube::Client>,
    namespace: Option<String>,
    created_namespace: bool,
    book: Arc<Mutex<Book>>,
    events: Option<mpsc::Receiver<PlatformEvent>>,
    watches: Vec<tokio::task::JoinHandle<()>>,
    target: Option<Target>,
    work: Option<tempfile::TempDir>,
    /// The load is gRPC: the systems are routed with GRPCRoutes.
    grpc: bool,
    /// Nodes a `drain: node` step cordoned, made schedulable again when the run
    /// ends: the only objects outside its namespace a run changes.
    cordoned: Vec<String>,
    /// The key type of the run's certificates and how many were issued, when the
    /// run made the controller's certificate (its TLS Secret).
    tls: Option<(sut::KeyType, u32)>,
    /// The namespace of the Gateway the run created, until it is deleted, and the
    /// system it is for.
    own_gateway_in: Option<(String, String)>,
}

/// What a run's own Gateway serves: the URL to load, the CA to trust, and the
/// certificate and key files it terminates TLS with (for a TLS load).
type OwnGatewayServes = (
    String,
    Option<std::path::PathBuf>,
    Option<(std::path::PathBuf, std::path::PathBuf)>,
);

/// The runtime the platform's and the generator Job's clients run on: one worker
/// thread, as the blocking callers wait on it anyway.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, ClusterError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("kube")
        .enable_all()
        .build()
        .map_err(ClusterError::Runtime)
}

impl Kubernetes {
    /// A platform for `spec`; nothing talks to the cluster until `prepare()`.
    ///
    /// # Errors
    /// [`ClusterError::Runtime`] when the runtime cannot start.
    pub fn new(spec: ClusterSpec) -> Result<Self, ClusterError> {
        let rt = runtime()?;
        let grpc = spec.grpc;
        Ok(Kubernetes {
            spec,
            rt: Arc::new(rt),
            client: None,
            namespace: None,
            created_namespace: false,
            book: Arc::new(Mutex::new(Book::default())),
            events: None,
            watches: Vec::new(),
            target: None,
            work: None,
            grpc,
            cordoned: Vec::new(),
            tls: None,
            own_gateway_in: None,
        })
    }

    /// The namespace the run works in, once prepared.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The namespace the run works in: the one given, or `ingressbench-<run>`.
    fn namespace_name(&self) -> String {
        self.spec
            .namespace
            .clone()
            .unwrap_or_else(|| format!("ingressbench-{}", self.spec.run))
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn client(&mut self) -> Result<kube::Client, ClusterError> {
        if let Some(c) = &self.client {
            return Ok(c.clone());
        }
        let c = self.rt.block_on(connect(&self.spec))?;
        self.client = Some(c.clone());
        Ok(c)
    }

    /// Creates the namespace (or checks the given one) and the backends' objects.
    fn create(&mut self, spec: &SiteSpec) -> Result<String, SutError> {
        let client = self.client()?;
        let run = self.spec.run.clone();
        let (ns, create) = (self.namespace_name(), self.spec.namespace.is_none());
        let image = objects::BackendImage::from_setting(self.spec.image.as_deref());
        let replicas = spec.replicas;
        let body = spec.backends.body_size;
        let grpc = spec.grpc;
        let corpus = spec.probe_corpus;
        if grpc && image == objects::BackendImage::Nginx {
            return Err(SutError::Setting {
                what: "protocol: grpc".into(),
                why: "it needs ingressbench's backend in the pods (its Echo method): set kubernetes.image to an ingressbench image".into(),
            });
        }
        let args = objects::BackendArgs {
            body_size: body,
            delay: spec.backends.delay.clone(),
            drain: spec.backends.drain_timeout,
        };
        self.rt.block_on(async {
            let nss: Api<Namespace> = Api::all(client.clone());
            if create {
                nss.create(&PostParams::default(), &objects::namespace(&ns, &run))
                    .await
                    .map_err(ClusterError::api(format!("create namespace {ns}")))?;
            } else {
                // Rules confined to the namespace (deploy/rbac-namespaced.yaml) cannot
                // read the namespace object: then the first create says if it exists.
                match nss.get(&ns).await {
                    Err(kube::Error::Api(s)) if s.code == 403 => {}
                    r => {
                        r.map_err(ClusterError::api(format!(
                            "namespace {ns} (given with --namespace)"
                        )))?;
                    }
                }
            }
            let pp = PostParams::default();
            Api::<ConfigMap>::namespaced(client.clone(), &ns)
                .create(&pp, &objects::config_map(&run, body))
                .await
                .map_err(ClusterError::api("create the backends' ConfigMap"))?;
            Api::<Service>::namespaced(client.clone(), &ns)
                .create(&pp, &objects::service(&run, grpc))
                .await
                .map_err(ClusterError::api("create the backends' Service"))?;
            Api::<Deployment>::namespaced(client.clone(), &ns)
                .create(&pp, &objects::deployment(&run, replicas, &image, &args))
                .await
                .map_err(ClusterError::api("create the backends' Deployment"))?;
            if corpus {
                let (svc, dep) = objects::canary(&run, &image, &args);
                Api::<Service>::namespaced(client.clone(), &ns)
                    .create(&pp, &svc)
                    .await
                    .map_err(ClusterError::api("create the corpus's canary Service"))?;
                Api::<Deployment>::namespaced(client.clone(), &ns)
                    .create(&pp, &dep)
                    .await
                    .map_err(ClusterError::api("create the corpus's canary Deployment"))?;
            }
            Ok::<_, ClusterError>(())
        })?;
        self.created_namespace = create;
        Ok(ns)
    }

    /// Starts the two watches; their events reach the book and the channel.
    fn watch(&mut self, ns: &str) -> Result<(), SutError> {
        let client = self.client()?;
        let (tx, rx) = mpsc::channel();
        self.events = Some(rx);
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let slices: Api<EndpointSlice> = Api::namespaced(client, ns);
        let pod_cfg = watcher::Config::default().labels(&format!("{RUN_LABEL}={}", self.spec.run));
        let slice_cfg =
            watcher::Config::default().labels(&format!("kubernetes.io/service-name={BACKEND}"));
        let t1 = self.rt.spawn(feed(
            pods,
            pod_cfg,
            self.book.clone(),
            tx.clone(),
            Kind {
                seen: |b, p| b.pod(pod_seen(p)),
                gone: Book::pod_gone,
                relisted: Book::pods_relisted,
            },
        ));
        let t2 = self.rt.spawn(feed(
            slices,
            slice_cfg,
            self.book.clone(),
            tx,
            Kind {
                seen: |b, es| b.slice(slice_seen(es)),
                gone: Book::slice_gone,
                relisted: Book::slices_relisted,
            },
        ));
        self.watches = vec![t1, t2];
        Ok(())
    }

    /// Waits for events until `done` says the cluster reached the state asked for.
    fn follow(
        &mut self,
        since: Instant,
        stop: StopMode,
        on: &mut dyn FnMut(PlatformEvent),
        done: &dyn Fn(&Book) -> bool,
    ) -> Result<(), SutError> {
        let deadline = since + SCALE_WAIT;
        loop {
            if done(&self.book()) {
                // What led there is in the channel (sent under the book's lock): a
                // pod's stopping must reach `on` even when the EndpointSlice's change
                // was read first.
                while let Some(ev) = self.events.as_ref().and_then(|rx| rx.try_recv().ok()) {
                    self.deliver(ev, since, stop, on);
                }
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(SutError::NotReady(format!(
                    "the backends in namespace {} ({} ready of the pods asked for)",
                    self.namespace.as_deref().unwrap_or("?"),
                    self.book().endpoints().len()
                )));
            }
            let Some(rx) = self.events.as_ref() else {
                return Err(SutError::NotRunning("the Kubernetes watches".into()));
            };
            match rx.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(ev) => self.deliver(ev, since, stop, on),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(SutError::NotRunning("the Kubernetes watches".into()))
                }
            }
        }
    }

    /// Hands one watch event to the runner: readiness timed from `since`, a stopping
    /// pod deleted at once when the stop is abrupt.
    fn deliver(
        &mut self,
        ev: PlatformEvent,
        since: Instant,
        stop: StopMode,
        on: &mut dyn FnMut(PlatformEvent),
    ) {
        match ev {
            PlatformEvent::Ready { endpoint, .. } => on(PlatformEvent::Ready {
                endpoint,
                took: since.elapsed(),
            }),
            PlatformEvent::Stopping { id, .. } => {
                let killed = match stop {
                    StopMode::Abrupt => self.kill_now(&id),
                    StopMode::Graceful => Ok(()),
                };
                on(PlatformEvent::Stopping {
                    id: id.clone(),
                    mode: stop,
                });
                if let Err(e) = killed {
                    // The pod stops, but with its grace period: not the abrupt stop
                    // the step asked for.
                    on(PlatformEvent::Failed {
                        detail: format!("stop {id} abruptly: {}", results::Causes(&e)),
                    });
                }
            }
            other => on(other),
        }
    }

    /// An abrupt stop: the terminating pod is deleted with no grace period, as when
    /// its node is lost. A pod already gone is no failure.
    fn kill_now(&mut self, pod: &str) -> Result<(), ClusterError> {
        let client = self.client()?;
        let Some(ns) = self.namespace.clone() else {
            return Ok(());
        };
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        match self
            .rt
            .block_on(Api::<Pod>::namespaced(client, &ns).delete(pod, &dp))
        {
            Err(e) if !error::gone(&e) => Err(ClusterError::Api {
                what: format!("delete pod {pod} with no grace period"),
                source: e,
            }),
            _ => Ok(()),
        }
    }
}

/// What makes a node a drain cordoned schedulable again, its label gone.
fn uncordon_patch() -> serde_json::Value {
    serde_json::json!({"metadata": {"labels": {CORDONED_BY: null}}, "spec": {"unschedulable": null}})
}

/// The host of a URL (`https://198.18.0.1:8000/` gives `198.18.0.1`).
/// The port a URL reaches: its own, or its scheme's (80, 443).
fn url_port(url: &str) -> Option<u16> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let after_host = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.1,
        None => authority.rsplit_once(':').map_or("", |(_, p)| p),
    };
    let port = after_host.strip_prefix(':').unwrap_or(after_host);
    if port.is_empty() {
        return match scheme {
            "https" => Some(443),
            "http" => Some(80),
            _ => None,
        };
    }
    port.parse().ok()
}

fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    (!host.is_empty()).then(|| host.to_string())
}

/// How one watched kind updates the book.
struct Kind<K> {
    seen: fn(&mut Book, &K) -> Vec<PlatformEvent>,
    gone: fn(&mut Book, &str) -> Vec<PlatformEvent>,
    relisted: fn(&mut Book, &BTreeSet<String>) -> Vec<PlatformEvent>,
}

/// Follows one watch until it ends: each object seen or gone, and after a (re-)list
/// what it no longer shows, into the book; what the book makes of it into `tx`.
async fn feed<K>(
    api: Api<K>,
    cfg: watcher::Config,
    book: Arc<Mutex<Book>>,
    tx: mpsc::Sender<PlatformEvent>,
    kind: Kind<K>,
) where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let mut s = watcher(api, cfg).boxed();
    let mut listed = Relist::default();
    while let Some(ev) = s.next().await {
        // The events go out while the book is still locked: whoever sees the book in
        // a state finds every event that led there already in the channel
        // ([`Kubernetes::follow`] drains it once done).
        let mut b = lock(&book);
        let out = match ev {
            Ok(watcher::Event::Apply(o)) => (kind.seen)(&mut b, &o),
            Ok(watcher::Event::InitApply(o)) => {
                listed.saw(&o.meta().name);
                (kind.seen)(&mut b, &o)
            }
            Ok(watcher::Event::Delete(o)) => {
                (kind.gone)(&mut b, o.meta().name.as_deref().unwrap_or(""))
            }
            Ok(watcher::Event::Init) => listed.start(),
            Ok(watcher::Event::InitDone) => (kind.relisted)(&mut b, &listed.done()),
            Err(_) => Vec::new(),
        };
        for e in out {
            let _ = tx.send(e);
        }
        drop(b);
    }
}

/// The names a watcher's (re-)list shows between its `Init` and `InitDone`: a watch
/// that reconnects lists everything again instead of replaying the deletions it
/// missed, so what the list lacks is gone ([`Book::pods_relisted`]).
#[derive(Default)]
struct Relist(BTreeSet<String>);

impl Relist {
    fn start(&mut self) -> Vec<PlatformEvent> {
        self.0.clear();
        Vec::new()
    }

    fn saw(&mut self, name: &Option<String>) {
        if let Some(n) = name {
            self.0.insert(n.clone());
        }
    }

    fn done(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.0)
    }
}

fn lock(b: &Arc<Mutex<Book>>) -> std::sync::MutexGuard<'_, Book> {
    b.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn pod_seen(p: &Pod) -> PodSeen {
    let status = p.status.as_ref();
    PodSeen {
        name: p.metadata.name.clone().unwrap_or_default(),
        created: p
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        ip: status
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse().ok()),
        node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
        terminating: p.metadata.deletion_timestamp.is_some(),
    }
}

fn slice_seen(es: &EndpointSlice) -> SliceSeen {
    let port = es
        .ports
        .as_ref()
        .and_then(|ps| ps.first())
        .and_then(|p| p.port)
        .unwrap_or(objects::BACKEND_PORT);
    let endpoints = es
        .endpoints
        .iter()
        .filter_map(|e| {
            let pod = e.target_ref.as_ref()?.name.clone()?;
            let ip: std::net::IpAddr = e.addresses.first()?.parse().ok()?;
            let port = u16::try_from(port).ok()?;
            Some(SliceEndpoint {
                pod,
                addr: std::net::SocketAddr::new(ip, port),
                ready: e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true),
            })
        })
        .collect();
    SliceSeen {
        name: es.metadata.name.clone().unwrap_or_default(),
        endpoints,
    }
}

/// A client for the kubeconfig, context and cluster `spec` names.
async fn connect(spec: &ClusterSpec) -> Result<kube::Client, ClusterError> {
    let options = kube::config::KubeConfigOptions {
        context: spec.context.clone(),
        ..Default::default()
    };
    let config = match &spec.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|source| {
                ClusterError::Kubeconfig {
                    path: path.clone(),
                    source,
                }
            })?;
            kube::Config::from_custom_kubeconfig(kc, &options).await
        }
        None => kube::Config::from_kubeconfig(&options).await,
    }
    .map_err(|source| ClusterError::NoConfig { source })?;
    kube::Client::try_from(config).map_err(ClusterError::api("connect to the API server"))
}

impl Platform for Kubernetes {
    fn name(&self) -> &'static str {
        "kubernetes"
    }

    fn prepare(&mut self, spec: &SiteSpec) -> Result<DriverContext, SutError> {
        self.teardown()?;
        self.grpc = spec.grpc;
        std::fs::create_dir_all(&spec.out_dir)
            .map_err(SutError::io(format!("create {}", spec.out_dir.display())))?;
        let work = sut::scratch::scratch_dir()?;
        let ns = self.create(spec)?;
        self.namespace = Some(ns.clone());
        self.watch(&ns)?;
        let want = spec.replicas as usize;
        let t = Instant::now();
        self.follow(t, StopMode::Graceful, &mut |_| {}, &|b: &Book| {
            b.endpoints().len() >= want
        })?;
        let mut url = self
            .spec
            .urls
            .iter()
            .find(|(s, _)| *s == spec.system)
            .map(|(_, u)| u.clone())
            .unwrap_or_default();
        let mut cacert = self.spec.cacert.clone();
        let (mut cert, mut key) = (work.path().join("cert.pem"), work.path().join("key.pem"));
        self.tls = None;
        if let Some(own) = self.spec.own_gateway.clone() {
            // The run's own Gateway: TLS at it with the run's certificate, its
            // address the URL unless one is given.
            let tls = spec.tls.enabled && self.spec.cacert.is_none();
            let (gw_url, gw_cacert, files) =
                self.own_gateway(&spec.system, &own, &ns, spec.tls.key, tls, &work)?;
            if url.is_empty() {
                url = gw_url;
            }
            cacert = gw_cacert;
            if let Some(files) = files {
                (cert, key) = files;
            }
        } else {
            // A Gateway installed beforehand: the listener the URL reaches, refused
            // (its certificate, say), fails here in one line rather than as the
            // load's failed handshakes.
            let named = controllers::controller(&spec.system)
                .is_some_and(|c| !matches!(c.routing, controllers::Routing::Ingress { .. }));
            if let (true, Some((gw_ns, gw_name)), Some(port)) =
                (named, self.spec.gateway.clone(), url_port(&url))
            {
                let client = self.client()?;
                self.rt
                    .block_on(gateway::check_named(&client, &gw_ns, &gw_name, port))?;
            }
            // TLS at the controller with the run's own certificate, as the studies
            // had it: for an https:// URL, unless the controller's own is given
            // (cacert). Ingress profiles only: an Ingress names its Secret; a
            // Gateway installed beforehand holds its own in its HTTPS listener.
            let ingress = controllers::controller(&spec.system)
                .is_some_and(|c| matches!(c.routing, controllers::Routing::Ingress { .. }));
            let own_tls = spec.tls.enabled
                && ingress
                && url.starts_with("https://")
                && self.spec.cacert.is_none();
            if own_tls {
                let mut names: Vec<String> = url_host(&url).into_iter().collect();
                names.extend(self.spec.host.clone());
                (cert, key) = sut::certs::generate_for(work.path(), spec.tls.key, &names)?;
                self.put_tls_secret(&cert, &key)?;
                cacert = Some(sut::certs::trust(work.path()));
                self.tls = Some((spec.tls.key, 1));
            }
        }
        self.target = Some(Target {
            url,
            cacert,
            reachable: Vec::new(),
            netns: None,
        });
        let mut ctx = DriverContext::with_s1_tuning(
            work.path().to_path_buf(),
            spec.out_dir.clone(),
            (cert, key),
            (0, 0),
        );
        ctx.probe_fixture = spec.probe_fixture;
        ctx.probe_corpus = spec.probe_corpus;
        if spec.probe_corpus {
            // The corpus's TLS Ingresses name a certificate of the run's own for
            // their hosts, as a team's do: a controller may refuse or drop an
            // Ingress whose Secret is missing.
            let dir = work.path().join("corpus-tls");
            std::fs::create_dir_all(&dir)
                .map_err(SutError::io(format!("create {}", dir.display())))?;
            let names: Vec<String> = corpus::CORPUS
                .iter()
                .filter(|b| b.fixtures.iter().any(|f| f.tls))
                .map(corpus::Behaviour::host)
                .collect();
            let (c, k) = sut::certs::generate_for(&dir, spec.tls.key, &names)?;
            self.put_secret(corpus::TLS_SECRET, &c, &k)?;
            self.wait_canary(&ns)?;
        }
        self.work = Some(work);
        Ok(ctx)
    }

    fn target(&self) -> Target {
        self.target.clone().unwrap_or_default()
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        self.book().endpoints()
    }

    fn replicas(&self) -> u32 {
        self.book().running()
    }

    fn scale(&mut self, to: u32, stop: StopMode, on: &mut dyn FnMut(PlatformEvent)) {
        let client = match self.client() {
            Ok(c) => c,
            Err(e) => {
                on(PlatformEvent::Failed {
                    detail: format!("scale to {to}: {}", results::Causes(&e)),
                });
                return;
            }
        };
        let Some(ns) = self.namespace.clone() else {
            on(PlatformEvent::Failed {
                detail: "scale: the platform was not prepared".into(),
            });
            return;
        };
        // What the watches reported before this request (the first pods' readiness
        // during prepare) is not this scale's doing.
        if let Some(rx) = &self.events {
            while rx.try_recv().is_ok() {}
        }
        let t = Instant::now();
        let patch = serde_json::json!({"spec": {"replicas": to}});
        let asked = self
            .rt
            .block_on(Api::<Deployment>::namespaced(client, &ns).patch_scale(
                BACKEND,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            ));
        if let Err(e) = asked {
            on(PlatformEvent::Failed {
                detail: format!("scale to {to}: {}", results::Causes(&e)),
            });
            return;
        }
        let want = to as usize;
        let done = move |b: &Book| b.running() as usize == want && b.endpoints().len() == want;
        if let Err(e) = self.follow(t, stop, on, &done) {
            on(PlatformEvent::Failed {
                detail: format!("scale to {to}: {}", results::Causes(&e)),
            });
        }
    }

    fn tick(&mut self) {}

    /// A new leaf from the run's CA for the controller's TLS Secret (which the
    /// driver then updates: `rotate: certificate`).
    fn new_certificate(&mut self) -> Result<(std::path::PathBuf, std::path::PathBuf), SutError> {
        let (Some((key, n)), Some(work)) = (self.tls.as_mut(), self.work.as_ref()) else {
            return Err(SutError::Unsupported {
                system: "kubernetes".into(),
                what: "issue a certificate: the controller terminates TLS with its own (kubernetes.cacert), or the URL is http://".into(),
            });
        };
        *n += 1;
        sut::certs::issue(work.path(), *key, *n)
    }

    /// Cordons the node (`spec.unschedulable`, as `kubectl cordon`), then evicts
    /// each of the run's backend pods on it through the Eviction API, which honours
    /// PodDisruptionBudgets (a refused eviction, 429, is asked again every 500 ms, as
    /// `kubectl drain` does); the Deployment puts the replacements on other nodes.
    /// Done when as many backends as before are ready and none is on the node. The
    /// node is made schedulable again when the run ends. Only the run's own pods
    /// are evicted.
    fn drain(
        &mut self,
        node: Option<&str>,
        on: &mut dyn FnMut(PlatformEvent),
    ) -> Result<String, SutError> {
        let client = self.client()?;
        let Some(ns) = self.namespace.clone() else {
            return Err(SutError::NotPrepared("kubernetes: drain".into()));
        };
        if let Some(rx) = &self.events {
            while rx.try_recv().is_ok() {}
        }
        let t = Instant::now();
        let want = self.book().running() as usize;
        let node = match node {
            Some(n) => n.to_string(),
            None => {
                let book = self.book();
                let mut pods: Vec<&PodSeen> = book.pods().filter(|p| !p.terminating).collect();
                pods.sort_by(|a, b| a.created.cmp(&b.created));
                pods.iter()
                    .find_map(|p| p.node.clone())
                    .ok_or_else(|| SutError::Unsupported {
                        system: "kubernetes".into(),
                        what: "drain a node yet: no backend pod is on a node".into(),
                    })?
            }
        };
        let victims: Vec<String> = self
            .book()
            .pods()
            .filter(|p| !p.terminating && p.node.as_deref() == Some(node.as_str()))
            .map(|p| p.name.clone())
            .collect();
        let api_err = |what: String| move |source| ClusterError::Api { what, source };
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        // A node cordoned before the run stays cordoned after it.
        let was_cordoned = self
            .rt
            .block_on(nodes.get(&node))
            .map_err(api_err(format!("get node {node}")))?
            .spec
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        let cordon = if was_cordoned {
            serde_json::json!({"spec": {"unschedulable": true}})
        } else {
            serde_json::json!({"metadata": {"labels": {CORDONED_BY: self.spec.run}},
                               "spec": {"unschedulable": true}})
        };
        self.rt
            .block_on(nodes.patch(&node, &PatchParams::default(), &Patch::Merge(&cordon)))
            .map_err(api_err(format!("cordon node {node}")))?;
        if !was_cordoned && !self.cordoned.contains(&node) {
            self.cordoned.push(node.clone());
        }
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        for pod in &victims {
            let deadline = Instant::now() + SCALE_WAIT;
            loop {
                match self
                    .rt
                    .block_on(pods.evict(pod, &kube::api::EvictParams::default()))
                {
                    Ok(_) => break,
                    Err(e) if error::gone(&e) => break,
                    Err(kube::Error::Api(s)) if s.code == 429 && Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(500));
                    }
                    Err(e) => return Err(api_err(format!("evict pod {pod}"))(e).into()),
                }
            }
        }
        let gone = victims.clone();
        let done = move |b: &Book| {
            b.running() as usize == want
                && b.endpoints().len() == want
                && !b.endpoints().iter().any(|e| gone.contains(&e.id))
        };
        self.follow(t, StopMode::Graceful, on, &done)?;
        Ok(format!("{node} ({} evicted)", victims.len()))
    }

    fn driver_for(&mut self, system: &str) -> Option<Result<Box<dyn sut::Driver>, SutError>> {
        let c = controllers::controller(system)?;
        let place = controllers::Place {
            run: self.spec.run.clone(),
            namespace: self.namespace_name(),
            gateway: match &self.spec.own_gateway {
                Some(_) => Some((self.namespace_name(), gateway::NAME.to_string())),
                None => self.spec.gateway.clone(),
            },
            host: self.spec.host.clone(),
            grpc: self.grpc,
            // Known once the platform is prepared: see the driver's `prepare`.
            tls_secret: None,
            url_host: self
                .spec
                .urls
                .iter()
                .find(|(s, _)| s == system)
                .and_then(|(_, u)| url_host(u)),
            ingress_class: self.spec.ingress_class.clone(),
            // Known once the platform is prepared: see the driver's `prepare`.
            fixture: false,
        };
        Some(
            self.client()
                .map(|client| {
                    let mut d = driver::ControllerDriver::new(
                        c,
                        client,
                        self.rt.clone(),
                        place,
                        self.spec.namespace.is_none(),
                    );
                    d.install = self
                        .spec
                        .installs
                        .iter()
                        .find(|(s, _)| s == system)
                        .map(|(_, i)| i.clone())
                        .or_else(|| c.install.as_ref().map(controllers::Install::owned));
                    d.processes = self
                        .spec
                        .processes
                        .iter()
                        .find(|(s, _)| s == system)
                        .map(|(_, text)| text.clone());
                    d.brought = self
                        .spec
                        .manifests
                        .clone()
                        .map(|(file, text)| driver::Brought::new(file, text));
                    Box::new(d) as Box<dyn sut::Driver>
                })
                .map_err(SutError::from),
        )
    }

    fn cluster_info(&self) -> Option<results::ClusterInfo> {
        Some(results::ClusterInfo {
            context: self.spec.context.clone(),
            namespace: self
                .namespace
                .clone()
                .unwrap_or_else(|| self.namespace_name()),
            pods: self
                .book()
                .history()
                .into_iter()
                .map(|p| results::ClusterPod {
                    name: p.name,
                    node: p.node,
                    ip: p.ip.map(|ip| ip.to_string()),
                })
                .collect(),
        })
    }

    /// Deletes the namespace the run created, or the run's objects in the one it was
    /// given (unless kept). Once done, nothing is left to tear down: a second call,
    /// and the drop, do nothing.
    ///
    /// # Errors
    /// [`ClusterError::Left`] naming what is still in the cluster and how to remove
    /// it.
    fn teardown(&mut self) -> Result<(), SutError> {
        for w in self.watches.drain(..) {
            w.abort();
        }
        let uncordoned = self.uncordon();
        self.events = None;
        // The Gateway first, whatever happens to its namespace: its implementation
        // then removes the data plane it made for it, in its own namespace.
        let mut res = match self.own_gateway_in.take() {
            Some((ns, system)) if !self.spec.keep => {
                // As long as the Gateway was given to be Programmed, 30 s at most.
                let limit = self
                    .spec
                    .own_gateway
                    .as_ref()
                    .map_or(DATA_PLANE_GONE_WAIT, |o| {
                        o.timeout.min(DATA_PLANE_GONE_WAIT)
                    });
                self.delete_gateway(&ns)
                    .and_then(|()| self.wait_data_plane_gone(&ns, &system, limit))
            }
            _ => Ok(()),
        };
        if let Some(ns) = self.namespace.take() {
            if !self.spec.keep {
                res = res.and(self.delete(&ns));
            }
        }
        *self.book() = Book::default();
        if let Some(w) = self.work.take() {
            sut::scratch::remove_scratch(w);
        }
        res.and(uncordoned).map_err(SutError::from)
    }
}

impl Kubernetes {
    /// Waits (60 s at most) until the corpus's canary pod is ready, as the run's
    /// backends are before the run's route is applied.
    fn wait_canary(&mut self, ns: &str) -> Result<(), SutError> {
        let client = self.client()?;
        let api: Api<Deployment> = Api::namespaced(client, ns);
        let t = Instant::now();
        loop {
            let d = self
                .rt
                .block_on(api.get(corpus::CANARY))
                .map_err(ClusterError::api("read the corpus's canary Deployment"))?;
            let ready = d.status.and_then(|s| s.ready_replicas).unwrap_or_default();
            if ready >= 1 {
                return Ok(());
            }
            if t.elapsed() > Duration::from_secs(60) {
                return Err(SutError::NotReady(
                    "the corpus's canary pod (Deployment ib-canary) after 60 s".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Creates the run's own Gateway and waits until it serves: first its HTTP
    /// listener, whose address the implementation gives; then, for a TLS load, a
    /// certificate from the run's CA naming that address (and `kubernetes.host`),
    /// its Secret, and the HTTPS listener. Returns the URL to load and the CA to
    /// trust.
    fn own_gateway(
        &mut self,
        system: &str,
        own: &gateway::OwnGateway,
        ns: &str,
        key: sut::KeyType,
        tls: bool,
        work: &tempfile::TempDir,
    ) -> Result<OwnGatewayServes, SutError> {
        let client = self.client()?;
        let run = self.spec.run.clone();
        self.rt
            .block_on(gateway::check_class(&client, &own.class))?;
        self.rt
            .block_on(gateway::apply(&client, ns, &run, own, None))?;
        self.own_gateway_in = Some((ns.to_string(), system.to_string()));
        let addr = self.rt.block_on(gateway::wait_programmed(
            &client,
            ns,
            &[gateway::HTTP_LISTENER],
            own.timeout,
        ))?;
        let host = if addr.contains(':') {
            format!("[{addr}]")
        } else {
            addr.clone()
        };
        if !tls {
            return Ok((
                format!("http://{host}:{}/", own.http_port),
                self.spec.cacert.clone(),
                None,
            ));
        }
        let mut names = vec![addr.clone()];
        names.extend(self.spec.host.clone());
        let (cert, pkey) = sut::certs::generate_for(work.path(), key, &names)?;
        self.put_tls_secret(&cert, &pkey)?;
        self.tls = Some((key, 1));
        self.rt
            .block_on(gateway::apply(&client, ns, &run, own, Some(TLS_SECRET)))?;
        self.rt.block_on(gateway::wait_programmed(
            &client,
            ns,
            &[gateway::HTTP_LISTENER, gateway::HTTPS_LISTENER],
            own.timeout,
        ))?;
        Ok((
            format!("https://{host}:{}/", own.https_port),
            Some(sut::certs::trust(work.path())),
            Some((cert, pkey)),
        ))
    }

    /// Creates the run's TLS Secret from PEM files.
    fn put_tls_secret(
        &mut self,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<(), SutError> {
        self.put_secret(TLS_SECRET, cert, key)
    }

    /// Creates the TLS Secret `name` of `cert` and `key` in the run's namespace.
    fn put_secret(
        &mut self,
        name: &str,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<(), SutError> {
        let client = self.client()?;
        let ns = self.namespace_name();
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(SutError::io(format!("reading {}", p.display())))
        };
        let secret = objects::tls_secret(&self.spec.run, name, &read(cert)?, &read(key)?);
        let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client, &ns);
        self.rt
            .block_on(api.create(&PostParams::default(), &secret))
            .map_err(ClusterError::api(format!(
                "create Secret {name} in namespace {ns}"
            )))?;
        Ok(())
    }

    /// Deletes the run's own Gateway.
    fn delete_gateway(&mut self, ns: &str) -> Result<(), ClusterError> {
        let client = self.client()?;
        let (run, owned) = (self.spec.run.clone(), self.created_namespace);
        self.rt.block_on(gateway::delete(&client, ns)).map_err(|e| {
            ClusterError::left_in(format!("Gateway {}", gateway::NAME), ns, &run, owned, e)
        })
    }

    /// For an implementation that makes a data plane per Gateway (its profile's
    /// `deployment?SELECTOR`): waits until it has removed the one it made for the
    /// run's Gateway in `ns`, which a run leaves behind otherwise.
    ///
    /// # Errors
    /// [`ClusterError::Condition`] naming what stays and how to remove it.
    fn wait_data_plane_gone(
        &mut self,
        ns: &str,
        system: &str,
        limit: Duration,
    ) -> Result<(), ClusterError> {
        let install = self
            .spec
            .installs
            .iter()
            .find(|(s, _)| s == system)
            .map(|(_, i)| i.clone())
            .or_else(|| {
                controllers::controller(system)
                    .and_then(|c| c.install.as_ref())
                    .map(controllers::Install::owned)
            });
        let Some(install) = install else {
            return Ok(());
        };
        let Some(sel) = install
            .data_plane
            .as_deref()
            .and_then(|w| w.strip_prefix("deployment?"))
        else {
            return Ok(());
        };
        let sel = sel
            .replace("{gateway_namespace}", ns)
            .replace("{gateway_name}", gateway::NAME);
        let client = self.client()?;
        let api: Api<Deployment> = Api::namespaced(client, &install.namespace);
        let lp = ListParams::default().labels(&sel);
        let t = Instant::now();
        loop {
            let listed = match self.rt.block_on(api.list(&lp)) {
                // Rules that cannot see the controller's namespace: nothing to say.
                Err(kube::Error::Api(s)) if s.code == 403 => return Ok(()),
                r => r,
            };
            let left: Vec<String> = listed
                .map_err(ClusterError::api(format!(
                    "list deployments {sel} in namespace {}",
                    install.namespace
                )))?
                .items
                .into_iter()
                .filter_map(|d| d.metadata.name)
                .collect();
            if left.is_empty() {
                return Ok(());
            }
            if t.elapsed() > limit {
                return Err(ClusterError::Condition {
                    object: format!("Deployment {} in namespace {}", left.join(", "), install.namespace),
                    condition: format!(
                        "{system}'s controller made it for the run's Gateway and has not removed it {} s after the Gateway was deleted (is the controller running?); remove it with kubectl delete deployments,services,configmaps,serviceaccounts -n {} -l {sel}",
                        limit.as_secs(),
                        install.namespace
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Makes the nodes a drain cordoned schedulable again.
    fn uncordon(&mut self) -> Result<(), ClusterError> {
        if self.cordoned.is_empty() {
            return Ok(());
        }
        let client = self.client()?;
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
        let patch = uncordon_patch();
        let mut res = Ok(());
        for node in std::mem::take(&mut self.cordoned) {
            match self.rt.block_on(nodes.patch(
                &node,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )) {
                Err(e) if !error::gone(&e) => {
                    res = Err(ClusterError::Api {
                        what: format!("uncordon node {node} (kubectl uncordon {node})"),
                        source: e,
                    });
                }
                _ => {}
            }
        }
        res
    }

    /// Deletes what the run made in `ns`: the namespace itself if the run created
    /// it, else the run's objects in it.
    fn delete(&mut self, ns: &str) -> Result<(), ClusterError> {
        let left = |source| ClusterError::Left {
            what: format!("namespace {ns}"),
            remedy: error::CLEANUP.into(),
            source,
        };
        // Connected since `prepare` made the namespace: the client is at hand.
        let client = self.client()?;
        let (run, created) = (self.spec.run.clone(), self.created_namespace);
        self.rt.block_on(async {
            if created {
                match Api::<Namespace>::all(client)
                    .delete(ns, &DeleteParams::default())
                    .await
                {
                    Err(e) if !error::gone(&e) => Err(left(e)),
                    _ => Ok(()),
                }
            } else {
                delete_run_objects(&client, ns, &run)
                    .await
                    .map_err(|(what, e)| ClusterError::left_in(what.into(), ns, &run, false, e))
            }
        })
    }
}

impl Drop for Kubernetes {
    /// A run tears the platform down itself and reports what failed; this is for
    /// a run that ended in a panic, with no one left to tell.
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// Deletes the objects of `run` in a namespace the run did not create.
///
/// # Errors
/// The kind of the objects that could not be deleted, and why.
async fn delete_run_objects(
    client: &kube::Client,
    ns: &str,
    run: &str,
) -> Result<(), (&'static str, kube::Error)> {
    let lp = ListParams::default().labels(&format!("{RUN_LABEL}={run}"));
    let dp = DeleteParams::default();
    Api::<Deployment>::namespaced(client.clone(), ns)
        .delete_collection(&dp, &lp)
        .await
        .map_err(|e| ("the backends' Deployment", e))?;
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .delete_collection(&dp, &lp)
        .await
        .map_err(|e| ("the backends' ConfigMap", e))?;
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), ns)
        .delete_collection(&dp, &lp)
        .await
        .map_err(|e| ("the run's TLS Secret", e))?;
    crate::gateway::delete_labelled(client, ns, &lp)
        .await
        .map_err(|e| ("the run's Gateway", e))?;
    // Services have no delete-collection verb: one by one.
    let svcs = Api::<Service>::namespaced(client.clone(), ns);
    let listed = svcs
        .list(&lp)
        .await
        .map_err(|e| ("the backends' Service", e))?;
    for s in listed {
        if let Some(name) = s.metadata.name {
            match svcs.delete(&name, &dp).await {
                Err(e) if !error::gone(&e) => return Err(("the backends' Service", e)),
                _ => {}
            }
        }
    }
    Ok(())
}

/// Removes what runs left in the cluster: every namespace labelled as created by
/// ingressbench. Returns their names.
///
/// # Errors
/// [`ClusterError`] when the cluster cannot be reached or refuses.
pub fn cleanup(spec: &ClusterSpec) -> Result<Vec<String>, ClusterError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ClusterError::Runtime)?;
    rt.block_on(async {
        let client = connect(spec).await?;
        let nss: Api<Namespace> = Api::all(client.clone());
        let lp = ListParams::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
        let mut gone = Vec::new();
        for ns in nss
            .list(&lp)
            .await
            .map_err(ClusterError::api("list namespaces"))?
        {
            let Some(name) = ns.metadata.name else {
                continue;
            };
            if ns.metadata.deletion_timestamp.is_none() {
                nss.delete(&name, &DeleteParams::default())
                    .await
                    .map_err(ClusterError::api(format!("delete namespace {name}")))?;
            }
            gone.push(name);
        }
        // Generator Jobs of runs that worked in a namespace they were given.
        for job in generators::cleanup_jobs(&client, &gone).await? {
            gone.push(format!("job {job}"));
        }
        // Nodes a killed run's drain left cordoned.
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
        for node in nodes
            .list(&ListParams::default().labels(CORDONED_BY))
            .await
            .map_err(ClusterError::api(format!(
                "list nodes labelled {CORDONED_BY}"
            )))?
        {
            let Some(name) = node.metadata.name else {
                continue;
            };
            nodes
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&uncordon_patch()),
                )
                .await
                .map_err(ClusterError::api(format!("uncordon node {name}")))?;
            gone.push(format!("node {name}"));
        }
        Ok(gone)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A platform that prepared namespace `ns` (created by the run, or given) and
    /// talks to a fake API that answers every request with `answer`.
    fn prepared(
        ns: &str,
        created: bool,
        answer: impl Fn(&str) -> (u16, serde_json::Value) + Send + Sync + 'static,
    ) -> (Kubernetes, fake::Seen) {
        let mut k = Kubernetes::new(ClusterSpec {
            run: "t1".into(),
            namespace: (!created).then(|| ns.to_string()),
            ..ClusterSpec::default()
        })
        .unwrap();
        let (client, seen) = fake::client(&k.rt, move |_, path| answer(path));
        k.client = Some(client);
        k.namespace = Some(ns.into());
        k.created_namespace = created;
        (k, seen)
    }

    #[test]
    fn a_namespace_left_behind_is_named_with_the_cleanup_that_removes_it() {
        let (mut k, seen) = prepared("ingressbench-t1", true, |_| {
            fake::refused(
                403,
                "Forbidden",
                "namespaces \"ingressbench-t1\" is forbidden: User \"ci\" cannot delete resource \"namespaces\"",
            )
        });
        let e = k.teardown().expect_err("the namespace is left");
        assert_eq!(
            results::with_causes(&e),
            "kubernetes: namespace ingressbench-t1 not deleted (run `ingressbench cleanup --platform kubernetes`): namespaces \"ingressbench-t1\" is forbidden: User \"ci\" cannot delete resource \"namespaces\": Forbidden"
        );
        // The kube-rs error is the cause, whole: a caller can read its status.
        let SutError::Part(part) = &e else {
            panic!("{e:?}")
        };
        let kube_err = std::error::Error::source(&**part)
            .and_then(|s| s.downcast_ref::<kube::Error>())
            .expect("the kube-rs error as the source");
        assert!(matches!(kube_err, kube::Error::Api(s) if s.code == 403));
        // Torn down once: a second teardown (the drop's) asks nothing more.
        k.teardown().unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            ["DELETE /api/v1/namespaces/ingressbench-t1"]
        );
    }

    #[test]
    fn uncordoning_removes_the_drains_label_and_the_flag() {
        assert_eq!(
            uncordon_patch(),
            serde_json::json!({"metadata": {"labels": {"ingressbench.io/cordoned-by": null}},
                               "spec": {"unschedulable": null}})
        );
    }

    #[test]
    fn a_urls_host_is_what_the_certificate_names() {
        assert_eq!(
            url_host("https://198.18.0.1:8000/").as_deref(),
            Some("198.18.0.1")
        );
        assert_eq!(
            url_host("https://bench.example/x").as_deref(),
            Some("bench.example")
        );
        assert_eq!(
            url_host("https://[fd00::1]:443/").as_deref(),
            Some("fd00::1")
        );
        assert_eq!(url_host("no-scheme"), None);
    }

    #[test]
    fn a_urls_port_is_its_own_or_its_schemes() {
        assert_eq!(url_port("https://198.18.0.1:8456/"), Some(8456));
        assert_eq!(url_port("https://bench.example/x"), Some(443));
        assert_eq!(url_port("http://bench.example"), Some(80));
        assert_eq!(url_port("https://[fd00::1]:8443/"), Some(8443));
        assert_eq!(url_port("https://[fd00::1]/"), Some(443));
        assert_eq!(url_port("ftp://x/"), None);
        assert_eq!(url_port("no-scheme"), None);
    }

    #[test]
    fn a_namespace_already_gone_is_torn_down() {
        let (mut k, _) = prepared("ingressbench-t1", true, |_| {
            fake::refused(404, "NotFound", "namespaces \"ingressbench-t1\" not found")
        });
        k.teardown().expect("nothing is left");
    }

    #[test]
    fn objects_left_in_a_given_namespace_are_named_by_the_runs_label() {
        let (mut k, _) = prepared("team-a", false, |path| {
            if path.ends_with("/configmaps") {
                fake::refused(403, "Forbidden", "configmaps is forbidden")
            } else {
                fake::deleted()
            }
        });
        let e = results::with_causes(&k.teardown().unwrap_err());
        assert_eq!(
            e,
            "kubernetes: the backends' ConfigMap in namespace team-a not deleted (delete what is labelled ingressbench.io/run=t1 there): configmaps is forbidden: Forbidden"
        );
    }
}
