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
mod cleanup;
pub mod controllers;
pub mod corpus;
mod drain;
pub mod driver;
pub mod error;
#[cfg(test)]
mod fake;
pub mod gateway;
pub mod generators;
pub mod installed;
pub mod manifests;
pub mod objects;
mod own_gateway;
pub mod processes;
pub mod restart;
mod watch;

pub use cleanup::cleanup;
use own_gateway::DATA_PLANE_GONE_WAIT;

use book::Book;
pub use error::ClusterError;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
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

/// How long a scale step waits for the cluster to report every change.
pub(crate) const SCALE_WAIT: Duration = Duration::from_secs(120);

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

/// A client for the kubeconfig, context and cluster `spec` names.
pub(crate) async fn connect(spec: &ClusterSpec) -> Result<kube::Client, ClusterError> {
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

    /// Cordons the node and evicts the run's pods on it, as `kubectl drain` does
    /// (drain.rs says how).
    fn drain(
        &mut self,
        node: Option<&str>,
        on: &mut dyn FnMut(PlatformEvent),
    ) -> Result<String, SutError> {
        self.drain_node(node, on)
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
