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
pub mod driver;
pub mod generators;
pub mod installed;
pub mod objects;

use book::{Book, PodSeen, SliceEndpoint, SliceSeen};
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
use sut::driver::{DriverContext, Endpoint, LabError};
use sut::platform::{Platform, PlatformEvent, SiteSpec, StopMode, Target};

/// `app.kubernetes.io/managed-by` on everything a run creates.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "ingressbench");
/// The run's id on everything it creates.
pub const RUN_LABEL: &str = "ingressbench.io/run";
/// The Deployment, Service and ConfigMap of the backends.
pub const BACKEND: &str = "ib-backend";

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
    /// The backend image (default: the stock `nginx` image with our config).
    pub image: Option<String>,
    /// The Gateway HTTPRoutes attach to: (namespace, name).
    pub gateway: Option<(String, String)>,
    /// The host routes match (`None`: every host).
    pub host: Option<String>,
    /// The CA (PEM) of the controllers' serving certificates, for `https://` URLs
    /// that no public CA signed.
    pub cacert: Option<std::path::PathBuf>,
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
}

/// The runtime the platform's and the generator Job's clients run on: one worker
/// thread, as the blocking callers wait on it anyway.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, LabError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("kube")
        .enable_all()
        .build()
        .map_err(LabError::io("start the Kubernetes client's runtime"))
}

fn err(what: impl std::fmt::Display) -> impl FnOnce(kube::Error) -> LabError {
    let what = what.to_string();
    move |e| LabError::Other(format!("kubernetes: {what}: {}", describe(&e)))
}

/// A kube error as one line a person can act on.
fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.reason),
        other => other.to_string(),
    }
}

impl Kubernetes {
    /// A platform for `spec`; nothing talks to the cluster until `prepare()`.
    ///
    /// # Errors
    /// [`LabError::Io`] when the runtime cannot start.
    pub fn new(spec: ClusterSpec) -> Result<Self, LabError> {
        let rt = runtime()?;
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

    fn client(&mut self) -> Result<kube::Client, LabError> {
        if let Some(c) = &self.client {
            return Ok(c.clone());
        }
        let c = self.rt.block_on(connect(&self.spec))?;
        self.client = Some(c.clone());
        Ok(c)
    }

    /// Creates the namespace (or checks the given one) and the backends' objects.
    fn create(&mut self, spec: &SiteSpec) -> Result<String, LabError> {
        let client = self.client()?;
        let run = self.spec.run.clone();
        let (ns, create) = (self.namespace_name(), self.spec.namespace.is_none());
        let image = objects::BackendImage::from_setting(self.spec.image.as_deref());
        let replicas = spec.replicas;
        let body = spec.backends.body_size;
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
                    .map_err(err(format!("create namespace {ns}")))?;
            } else {
                // Rules confined to the namespace (deploy/rbac-namespaced.yaml) cannot
                // read the namespace object: then the first create says if it exists.
                match nss.get(&ns).await {
                    Err(kube::Error::Api(s)) if s.code == 403 => {}
                    r => {
                        r.map_err(err(format!("namespace {ns} (given with --namespace)")))?;
                    }
                }
            }
            let pp = PostParams::default();
            Api::<ConfigMap>::namespaced(client.clone(), &ns)
                .create(&pp, &objects::config_map(&run, body))
                .await
                .map_err(err("create the backends' ConfigMap"))?;
            Api::<Service>::namespaced(client.clone(), &ns)
                .create(&pp, &objects::service(&run))
                .await
                .map_err(err("create the backends' Service"))?;
            Api::<Deployment>::namespaced(client.clone(), &ns)
                .create(&pp, &objects::deployment(&run, replicas, &image, &args))
                .await
                .map_err(err("create the backends' Deployment"))?;
            Ok::<_, LabError>(())
        })?;
        self.created_namespace = create;
        Ok(ns)
    }

    /// Starts the two watches; their events reach the book and the channel.
    fn watch(&mut self, ns: &str) -> Result<(), LabError> {
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
    ) -> Result<(), LabError> {
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
                return Err(LabError::NotReady(format!(
                    "the backends in namespace {} ({} ready of the pods asked for)",
                    self.namespace.as_deref().unwrap_or("?"),
                    self.book().endpoints().len()
                )));
            }
            let Some(rx) = self.events.as_ref() else {
                return Err(LabError::NotRunning("the Kubernetes watches".into()));
            };
            match rx.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(ev) => self.deliver(ev, since, stop, on),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(LabError::NotRunning("the Kubernetes watches".into()))
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
                if stop == StopMode::Abrupt {
                    self.kill_now(&id);
                }
                on(PlatformEvent::Stopping { id, mode: stop })
            }
            other => on(other),
        }
    }

    /// An abrupt stop: the terminating pod is deleted with no grace period, as when
    /// its node is lost.
    fn kill_now(&mut self, pod: &str) {
        let (Ok(client), Some(ns)) = (self.client(), self.namespace.clone()) else {
            return;
        };
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        let _ = self
            .rt
            .block_on(Api::<Pod>::namespaced(client, &ns).delete(pod, &dp));
    }
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
async fn connect(spec: &ClusterSpec) -> Result<kube::Client, LabError> {
    let options = kube::config::KubeConfigOptions {
        context: spec.context.clone(),
        ..Default::default()
    };
    let config = match &spec.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| {
                LabError::Other(format!("kubernetes: kubeconfig {}: {e}", path.display()))
            })?;
            kube::Config::from_custom_kubeconfig(kc, &options).await
        }
        None => kube::Config::from_kubeconfig(&options).await,
    }
    .map_err(|e| {
        LabError::Other(format!(
            "kubernetes: no usable kubeconfig ({e}): set KUBECONFIG or --kubeconfig, and --context"
        ))
    })?;
    kube::Client::try_from(config).map_err(err("connect to the API server"))
}

impl Platform for Kubernetes {
    fn name(&self) -> &'static str {
        "kubernetes"
    }

    fn prepare(&mut self, spec: &SiteSpec) -> Result<DriverContext, LabError> {
        self.teardown();
        std::fs::create_dir_all(&spec.out_dir)
            .map_err(LabError::io(format!("create {}", spec.out_dir.display())))?;
        let work = sut::scratch::scratch_dir()?;
        let ns = self.create(spec)?;
        self.namespace = Some(ns.clone());
        self.watch(&ns)?;
        let want = spec.replicas as usize;
        let t = Instant::now();
        self.follow(t, StopMode::Graceful, &mut |_| {}, &|b: &Book| {
            b.endpoints().len() >= want
        })?;
        let url = self
            .spec
            .urls
            .iter()
            .find(|(s, _)| *s == spec.system)
            .map(|(_, u)| u.clone())
            .unwrap_or_default();
        self.target = Some(Target {
            url,
            cacert: self.spec.cacert.clone(),
            reachable: Vec::new(),
            netns: None,
        });
        let ctx = DriverContext::with_s1_tuning(
            work.path().to_path_buf(),
            spec.out_dir.clone(),
            (work.path().join("cert.pem"), work.path().join("key.pem")),
            (0, 0),
        );
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
        let (Ok(client), Some(ns)) = (self.client(), self.namespace.clone()) else {
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
                detail: format!("scale to {to}: {}", describe(&e)),
            });
            return;
        }
        let want = to as usize;
        let done = move |b: &Book| b.running() as usize == want && b.endpoints().len() == want;
        if let Err(e) = self.follow(t, stop, on, &done) {
            on(PlatformEvent::Failed {
                detail: format!("scale to {to}: {e}"),
            });
        }
    }

    fn tick(&mut self) {}

    fn driver_for(&mut self, system: &str) -> Option<Result<Box<dyn sut::Driver>, LabError>> {
        let c = controllers::controller(system)?;
        let place = controllers::Place {
            run: self.spec.run.clone(),
            namespace: self.namespace_name(),
            gateway: self.spec.gateway.clone(),
            host: self.spec.host.clone(),
        };
        Some(self.client().map(|client| {
            Box::new(driver::ControllerDriver::new(
                c,
                client,
                self.rt.clone(),
                place,
            )) as Box<dyn sut::Driver>
        }))
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

    fn teardown(&mut self) {
        for w in self.watches.drain(..) {
            w.abort();
        }
        self.events = None;
        if let (Some(ns), Ok(client)) = (self.namespace.take(), self.client()) {
            let run = self.spec.run.clone();
            let keep = self.spec.keep;
            let created = self.created_namespace;
            let _ = self.rt.block_on(async move {
                if keep {
                    return Ok(());
                }
                if created {
                    Api::<Namespace>::all(client)
                        .delete(&ns, &DeleteParams::default())
                        .await
                        .map(|_| ())
                } else {
                    delete_run_objects(&client, &ns, &run).await
                }
            });
        }
        *self.book() = Book::default();
        if let Some(w) = self.work.take() {
            sut::scratch::remove_scratch(w);
        }
    }
}

impl Drop for Kubernetes {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Deletes the objects of `run` in a namespace the run did not create.
async fn delete_run_objects(client: &kube::Client, ns: &str, run: &str) -> Result<(), kube::Error> {
    let lp = ListParams::default().labels(&format!("{RUN_LABEL}={run}"));
    let dp = DeleteParams::default();
    Api::<Deployment>::namespaced(client.clone(), ns)
        .delete_collection(&dp, &lp)
        .await?;
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .delete_collection(&dp, &lp)
        .await?;
    // Services have no delete-collection verb: one by one.
    let svcs = Api::<Service>::namespaced(client.clone(), ns);
    for s in svcs.list(&lp).await? {
        if let Some(name) = s.metadata.name {
            svcs.delete(&name, &dp).await?;
        }
    }
    Ok(())
}

/// Removes what runs left in the cluster: every namespace labelled as created by
/// ingressbench. Returns their names.
///
/// # Errors
/// [`LabError::Other`] when the cluster cannot be reached or refuses.
pub fn cleanup(spec: &ClusterSpec) -> Result<Vec<String>, LabError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(LabError::io("start the Kubernetes client's runtime"))?;
    rt.block_on(async {
        let client = connect(spec).await?;
        let nss: Api<Namespace> = Api::all(client.clone());
        let lp = ListParams::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
        let mut gone = Vec::new();
        for ns in nss.list(&lp).await.map_err(err("list namespaces"))? {
            let Some(name) = ns.metadata.name else {
                continue;
            };
            if ns.metadata.deletion_timestamp.is_none() {
                nss.delete(&name, &DeleteParams::default())
                    .await
                    .map_err(err(format!("delete namespace {name}")))?;
            }
            gone.push(name);
        }
        // Generator Jobs of runs that worked in a namespace they were given.
        for job in generators::cleanup_jobs(&client, &gone).await? {
            gone.push(format!("job {job}"));
        }
        Ok(gone)
    })
}
