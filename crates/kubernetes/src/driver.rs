//! The driver of an installed controller: it owns no process, only the routing objects
//! of the run ([`controllers::objects`]), applied with server-side apply. The
//! controller discovers the backends itself (no endpoint pushing), and a route change
//! is one apply. `settle` waits for what the cluster reports: an HTTPRoute's
//! `Accepted` condition for the new generation; an Ingress or an OpenShift Route has no
//! such condition, so for them "applied" is the API's acceptance, and what traffic
//! shows is measured from responses.

use crate::controllers::{self, Controller, Place, Routing};
use crate::error::{self, ClusterError};
use crate::installed;
use futures_util::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use sut::driver::{Capabilities, Driver, DriverContext, Endpoint, Expect, Route, SutError};
use sut::RouteSet;

/// Server-side apply's field manager for everything the run writes.
const MANAGER: &str = "ingressbench";

/// An object the run applied: (apiVersion, kind, name).
type Applied = (String, String, String);

/// Requests to the API server in flight at once when a route set is written: a set
/// of thousands of objects one at a time would take as long as the controller it
/// measures.
const IN_FLIGHT: usize = 8;

/// An installed controller, driven through its routing objects.
pub struct ControllerDriver {
    controller: &'static Controller,
    client: kube::Client,
    rt: Arc<tokio::runtime::Runtime>,
    place: Place,
    route: Route,
    /// Every object applied and not yet deleted.
    applied: Vec<Applied>,
    /// The Gateway API routes (kind, name, generation) `settle()` waits to see
    /// accepted: the run's one route, or each of the user's.
    pending: Vec<(String, String, i64)>,
    /// Objects of an old route that could not be deleted (they stay in `applied`,
    /// and `stop()` tries again), not yet reported.
    warnings: Vec<SutError>,
    /// The namespace is the run's own (it goes whole when the run ends), not one it
    /// was given: what to do about an object left in it differs.
    owned: bool,
    /// The route set's objects in force, each as applied (its JSON), by
    /// (apiVersion, kind, name): a change of one route writes only what differs.
    set_objects: BTreeMap<Applied, String>,
    /// The route set's HTTPRoutes whose generation `settle()` waits to see accepted.
    set_pending: BTreeMap<String, i64>,
    /// Status writes seen on the route set's routing objects, once watched.
    status: Option<(Arc<Mutex<StatusWrites>>, tokio::task::JoinHandle<()>)>,
    /// Text of the command lines of the controller's processes on this machine
    /// (`kubernetes.processes`), whose CPU and memory the runner reads.
    pub processes: Option<String>,
    /// Where the controller's pods and its data plane are, for the `restart:`
    /// steps (`kubernetes.workloads`, or the profile's standard install).
    pub install: Option<crate::controllers::Install<String>>,
    /// The controller's pods' container restarts when its route was first applied
    /// (see [`crate::restart::crashed`]).
    restarts_at_start: Option<BTreeMap<String, i32>>,
    /// The routes the user brings (`kubernetes.manifests`), applied in place of the
    /// generated route: its source until `prepare`, then its objects as applied.
    pub brought: Option<Brought>,
    /// The annotation corpus (`probes.corpus`): asked for by the context, applied
    /// once with the first route (not with each change, whose apply time S3
    /// measures), its objects kept through route changes and deleted at stop.
    corpus: Option<Corpus>,
}

/// The annotation corpus as this driver applied it.
#[derive(Debug, Default)]
struct Corpus {
    applied: bool,
    objects: Vec<Applied>,
    left_out: Vec<crate::corpus::LeftOut>,
}

/// A manifest file of the user's routing objects ([`crate::manifests`]).
#[derive(Clone, Debug)]
pub struct Brought {
    /// The file, as its errors name it.
    pub file: String,
    pub text: String,
    /// Its objects, rendered for this run and labelled as the run's (by `prepare`).
    objects: Vec<Value>,
}

impl Brought {
    pub fn new(file: String, text: String) -> Self {
        Brought {
            file,
            text,
            objects: Vec::new(),
        }
    }
}

/// Counts the status writes a controller makes to routing objects, from a watch:
/// an object seen again with a `status` other than the one it had last is one
/// write (its spec applied again leaves the status as it was, so the run's own
/// writes are not counted; an object seen for the first time is not a write).
#[derive(Debug, Default)]
pub struct StatusWrites {
    last: HashMap<String, Value>,
    pub writes: u64,
    /// The watch listed what there was: from here on it sees every write.
    pub ready: bool,
}

impl StatusWrites {
    /// The status object `name` had when last seen.
    pub fn status_of(&self, name: &str) -> Option<&Value> {
        self.last.get(name)
    }

    /// Notes the object `name` as the watch saw it.
    pub fn saw(&mut self, name: &str, status: &Value) {
        match self.last.get_mut(name) {
            Some(before) if before != status => {
                self.writes += 1;
                *before = status.clone();
            }
            Some(_) => {}
            None => {
                self.last.insert(name.to_string(), status.clone());
            }
        }
    }

    /// Forgets a deleted object (created again, it is new).
    pub fn gone(&mut self, name: &str) {
        self.last.remove(name);
    }
}

impl ControllerDriver {
    fn restarter(&self) -> Result<crate::restart::Restarter<'_>, SutError> {
        let install = self.install.as_ref().ok_or_else(|| SutError::Unsupported {
            system: self.controller.name.into(),
            what: format!(
                "be restarted: it has no standard install; say where its pods are in kubernetes.workloads.{}",
                self.controller.name
            ),
        })?;
        Ok(crate::restart::Restarter {
            rt: &self.rt,
            client: self.client.clone(),
            install,
            system: self.controller.name,
            gateway: self.place.gateway.clone(),
        })
    }

    pub(crate) fn new(
        controller: &'static Controller,
        client: kube::Client,
        rt: Arc<tokio::runtime::Runtime>,
        place: Place,
        owned: bool,
    ) -> Self {
        ControllerDriver {
            controller,
            client,
            rt,
            place,
            route: Route::Base,
            applied: Vec::new(),
            pending: Vec::new(),
            warnings: Vec::new(),
            owned,
            set_objects: BTreeMap::new(),
            set_pending: BTreeMap::new(),
            status: None,
            processes: None,
            install: None,
            restarts_at_start: None,
            brought: None,
            corpus: None,
        }
    }

    /// The kind of the run's Gateway API route: a GRPCRoute for a gRPC load.
    fn gateway_route(&self) -> &'static str {
        if self.place.grpc {
            "GRPCRoute"
        } else {
            "HTTPRoute"
        }
    }

    /// The kind of the route set's routing objects, (apiVersion, kind).
    fn route_kind(&self) -> (&'static str, &'static str) {
        match self.controller.routing {
            Routing::HttpRoute => ("gateway.networking.k8s.io/v1", "HTTPRoute"),
            Routing::Ingress { .. } => ("networking.k8s.io/v1", "Ingress"),
            Routing::OpenShiftRoute => ("route.openshift.io/v1", "Route"),
        }
    }

    /// The label selector of the route set's objects.
    fn set_selector(&self) -> String {
        format!(
            "{}={},{}",
            crate::RUN_LABEL,
            self.place.run,
            controllers::ROUTE_SET_LABEL
        )
    }

    /// Starts counting the status writes to the route set's routing objects (once).
    fn watch_status(&mut self) {
        if self.status.is_some() {
            return;
        }
        let (av, kind) = self.route_kind();
        let api = self.api(av, kind);
        let cfg = watcher::Config::default().labels(&self.set_selector());
        let count = Arc::new(Mutex::new(StatusWrites::default()));
        let c = count.clone();
        let task = self.rt.spawn(async move {
            // Backed off: a watch the API refuses (RBAC) must not hammer it.
            let mut s = watcher(api, cfg).default_backoff().boxed();
            while let Some(ev) = s.next().await {
                let mut w = c.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                match ev {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                        let name = o.metadata.name.as_deref().unwrap_or_default();
                        w.saw(name, &o.data["status"]);
                    }
                    Ok(watcher::Event::Delete(o)) => {
                        w.gone(o.metadata.name.as_deref().unwrap_or_default());
                    }
                    Ok(watcher::Event::InitDone) => w.ready = true,
                    _ => {}
                }
            }
        });
        // The writes start once the watch has listed: a status write made before
        // it would be a first sighting, not counted. A watch refused (RBAC without
        // `watch`) never lists: the count stays unknown, and settling LISTs.
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if count
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .ready
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.status = Some((count, task));
    }

    /// Applies `objs` with server-side apply, [`IN_FLIGHT`] at a time; returns the
    /// generation of each HTTPRoute among them.
    fn apply_many(&self, objs: &[&Value]) -> Result<Vec<(String, i64)>, SutError> {
        let pp = PatchParams::apply(MANAGER).force();
        let writes = objs.iter().map(|o| {
            let kind = o["kind"].as_str().unwrap_or_default().to_string();
            let name = o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let api = self.api(o["apiVersion"].as_str().unwrap_or_default(), &kind);
            let pp = &pp;
            async move {
                let res = api
                    .patch(&name, pp, &Patch::Apply(o))
                    .await
                    .map_err(ClusterError::api(format!("apply {kind} {name}")))?;
                Ok::<_, ClusterError>((kind, name, res.metadata.generation))
            }
        });
        let done: Vec<_> = self.rt.block_on(
            futures_util::stream::iter(writes)
                .buffer_unordered(IN_FLIGHT)
                .try_collect(),
        )?;
        Ok(done
            .into_iter()
            .filter(|(kind, _, _)| kind == "HTTPRoute")
            .filter_map(|(_, name, g)| Some((name, g?)))
            .collect())
    }

    /// Deletes `objects`, [`IN_FLIGHT`] at a time; returns those that could not be
    /// deleted, each with why.
    fn delete_many(&self, objects: Vec<Applied>) -> Vec<(Applied, kube::Error)> {
        let deletes = objects.into_iter().map(|o| {
            let api = self.api(&o.0, &o.1);
            async move {
                let res = api.delete(&o.2, &DeleteParams::default()).await;
                (o, res)
            }
        });
        let done: Vec<_> = self.rt.block_on(
            futures_util::stream::iter(deletes)
                .buffer_unordered(IN_FLIGHT)
                .collect(),
        );
        done.into_iter()
            .filter_map(|(o, res)| match res {
                Err(e) if !error::gone(&e) => Some((o, e)),
                _ => None,
            })
            .collect()
    }

    /// Deletes objects of the route set, its routing objects before what they name
    /// (a Middleware); returns those that could not be deleted, each with why.
    fn delete_set(&self, objects: Vec<Applied>) -> Vec<(Applied, kube::Error)> {
        let (route_av, route_kind) = self.route_kind();
        let (routes, named): (Vec<Applied>, Vec<Applied>) = objects
            .into_iter()
            .partition(|(av, kind, _)| av == route_av && kind == route_kind);
        let mut left = self.delete_many(routes);
        left.extend(self.delete_many(named));
        left
    }

    /// Waits until every HTTPRoute of the route set is accepted in the generation
    /// written last. A failure is reported once: what was pending is forgotten, so
    /// a later change waits only for what it wrote.
    fn settle_set(&mut self, deadline: Instant) -> Result<(), SutError> {
        let waited = self.wait_set_accepted(deadline);
        if waited.is_err() {
            self.set_pending.clear();
        }
        waited
    }

    /// The route set's pending HTTPRoutes as the status watch last saw them, each
    /// as `{"status": ...}`; `None` when the watch does not run (no RBAC to watch).
    fn watched_statuses(&self) -> Option<Vec<(String, Value)>> {
        let (w, _) = self.status.as_ref()?;
        let w = w.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !w.ready {
            return None;
        }
        Some(
            self.set_pending
                .keys()
                .filter_map(|n| Some((n.clone(), json!({"status": w.status_of(n)?}))))
                .collect(),
        )
    }

    /// Polls the watch's copy of the routes' statuses every 10 ms (no load on the
    /// API server, which the controller under test shares), or LISTs them every
    /// 250 ms without a watch.
    fn wait_set_accepted(&mut self, deadline: Instant) -> Result<(), SutError> {
        let api = self.api("gateway.networking.k8s.io/v1", "HTTPRoute");
        let lp = ListParams::default().labels(&self.set_selector());
        while !self.set_pending.is_empty() {
            let (seen, pause) = match self.watched_statuses() {
                Some(seen) => (seen, Duration::from_millis(10)),
                None => {
                    let list = self
                        .rt
                        .block_on(api.list(&lp))
                        .map_err(ClusterError::api("list the route set's HTTPRoutes"))?;
                    let seen = list
                        .items
                        .into_iter()
                        .map(|r| (r.metadata.name.unwrap_or_default(), r.data))
                        .collect();
                    (seen, Duration::from_millis(250))
                }
            };
            for (name, data) in &seen {
                let Some(&g) = self.set_pending.get(name) else {
                    continue;
                };
                match route_verdict(data, g) {
                    Some(reason) if reason.is_empty() => {
                        self.set_pending.remove(name);
                    }
                    Some(reason) => {
                        return Err(SutError::Rejected {
                            what: format!("HTTPRoute {name}"),
                            detail: reason,
                        })
                    }
                    None => {}
                }
            }
            if self.set_pending.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                let first = self.set_pending.keys().next().cloned().unwrap_or_default();
                return Err(SutError::NotReady(format!(
                    "{} HTTPRoutes of the route set (first {first}; no Accepted condition for their generation from the Gateway's controller)",
                    self.set_pending.len()
                )));
            }
            std::thread::sleep(pause);
        }
        Ok(())
    }

    fn api(&self, api_version: &str, kind: &str) -> Api<DynamicObject> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
        Api::namespaced_with(self.client.clone(), &self.place.namespace, &ar)
    }

    /// Applies the objects for `route` and deletes the run's objects no longer among
    /// them (Traefik's Middleware when going back to `base`). One that cannot be
    /// deleted does not undo the route, which is in force: it is reported
    /// ([`Driver::take_warnings`]) and kept, for `stop()` to try again.
    fn apply(&mut self, route: Route) -> Result<(), SutError> {
        // The probes' fixture first: applied before the route the run waits for,
        // it is most likely in force once that one serves.
        let mut objs = if self.place.fixture {
            controllers::fixture_objects(self.controller, &self.place)
        } else {
            Vec::new()
        };
        // Its HTTPRoute is not waited for: it names a Service made a moment before,
        // which a controller may not have seen yet (Contour then reports
        // BackendNotFound until it does), and the run's own route is what it needs.
        let fixture = objs.len();
        self.apply_corpus();
        objs.extend(match &self.brought {
            Some(b) if route == Route::Base => b.objects.clone(),
            _ => controllers::objects(self.controller, &self.place, route)
                .map_err(ClusterError::from)?,
        });
        let mut now = Vec::new();
        let mut pending = Vec::new();
        for (i, o) in objs.iter().enumerate() {
            let ((av, kind, name), res) = self.apply_object(o);
            let res = res.map_err(ClusterError::api(format!("apply {kind} {name}")))?;
            let gateway_api = av.starts_with("gateway.networking.k8s.io/")
                && (kind == "HTTPRoute" || kind == "GRPCRoute");
            if gateway_api && i >= fixture {
                if let Some(g) = res.metadata.generation {
                    pending.push((kind.clone(), name.clone(), g));
                }
            }
            now.push((av, kind, name));
        }
        if let Some(c) = &self.corpus {
            now.extend(c.objects.iter().cloned());
        }
        let stale: Vec<_> = self
            .applied
            .iter()
            .filter(|o| !now.contains(o))
            .cloned()
            .collect();
        self.applied = now;
        for (o, e) in self.delete(stale) {
            let left = self.left(&o, e);
            self.warnings.push(left.into());
            self.applied.push(o);
        }
        self.route = route;
        self.pending = pending;
        Ok(())
    }

    /// Applies `o` (server-side, as the run's field manager): what it is, and
    /// what the API server answered.
    fn apply_object(&self, o: &Value) -> (Applied, Result<DynamicObject, kube::Error>) {
        let field = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let (av, kind, name) = (
            field(&o["apiVersion"]),
            field(&o["kind"]),
            field(&o["metadata"]["name"]),
        );
        let pp = PatchParams::apply(MANAGER).force();
        let res = self
            .rt
            .block_on(self.api(&av, &kind).patch(&name, &pp, &Patch::Apply(o)));
        ((av, kind, name), res)
    }

    /// Applies the annotation corpus once, before the run's first route (so that
    /// it is most likely in force once that route serves). An object the API
    /// refuses is one line of the corpus's left-out list, naming the object and
    /// what the API said; the rest is applied all the same.
    fn apply_corpus(&mut self) {
        let Some(c) = &self.corpus else { return };
        if c.applied {
            return;
        }
        let rendered = crate::corpus::render(self.controller, &self.place);
        let mut left_out = rendered.left_out;
        let mut objects = Vec::new();
        for o in &rendered.objects {
            let ((av, kind, name), res) = self.apply_object(o);
            let behaviour = o["metadata"]["labels"][crate::corpus::CORPUS_LABEL]
                .as_str()
                .and_then(crate::corpus::find)
                .map_or("", |b| b.id);
            match res {
                Ok(_) => objects.push((av, kind, name)),
                Err(e) => {
                    let said = match &e {
                        kube::Error::Api(s) => s.message.clone(),
                        e => e.to_string(),
                    };
                    left_out.retain(|l| l.behaviour != behaviour);
                    left_out.push(crate::corpus::LeftOut {
                        behaviour,
                        why: format!("refused: {kind} {name}: the API server said: {said}"),
                    });
                }
            }
        }
        self.applied.extend(objects.iter().cloned());
        self.corpus = Some(Corpus {
            applied: true,
            objects,
            left_out,
        });
    }

    /// The user's manifest rendered for this run, checked by the API server with a
    /// dry run of each object before the run writes any (a kind the run's rules
    /// cannot write, one the cluster does not serve, an object the API refuses: one
    /// line each, naming the file and the object's line).
    fn prepare_brought(&mut self) -> Result<(), SutError> {
        let Some(b) = &self.brought else {
            return Ok(());
        };
        let class = match self.controller.routing {
            Routing::Ingress { class, .. } => Some(self.place.class(class).to_string()),
            _ => None,
        };
        let values = crate::manifests::Values {
            namespace: self.place.namespace.clone(),
            gateway: self.place.gateway.clone(),
            tls_secret: self.place.tls_secret.clone(),
            host: self.place.host.clone(),
            ingress_class: class,
        };
        let at = |e: crate::manifests::ManifestError| {
            SutError::from(ClusterError::Manifest {
                file: b.file.clone(),
                line: e.line,
                msg: e.msg,
            })
        };
        let text = crate::manifests::render(&b.text, &values).map_err(at)?;
        let docs = crate::manifests::parse(&text, &self.place.namespace).map_err(at)?;
        for class in crate::manifests::ingress_classes(&docs) {
            self.check_class(&class)?;
        }
        let objects = crate::manifests::owned(&docs, &self.place.namespace, &self.place.run);
        let pp = PatchParams::apply(MANAGER).force().dry_run();
        for (d, o) in docs.iter().zip(&objects) {
            let api = self.api(d.api_version(), d.kind());
            if let Err(e) = self.rt.block_on(api.patch(d.name(), &pp, &Patch::Apply(o))) {
                return Err(at(crate::manifests::ManifestError {
                    line: d.line,
                    msg: crate::manifests::refused(d, &self.place.namespace, &e),
                }));
            }
        }
        if let Some(b) = &mut self.brought {
            b.objects = objects;
        }
        Ok(())
    }

    /// Deletes `objects`; returns those that could not be deleted, each with why (one
    /// already gone is deleted).
    fn delete(&self, objects: Vec<Applied>) -> Vec<(Applied, kube::Error)> {
        let mut left = Vec::new();
        for o in objects {
            let api = self.api(&o.0, &o.1);
            let res = self.rt.block_on(api.delete(&o.2, &DeleteParams::default()));
            match res {
                Err(e) if !error::gone(&e) => left.push((o, e)),
                _ => {}
            }
        }
        left
    }

    /// The error of an object of the run that could not be deleted.
    fn left(&self, (_, kind, name): &Applied, source: kube::Error) -> ClusterError {
        ClusterError::left_in(
            format!("{kind} {name}"),
            &self.place.namespace,
            &self.place.run,
            self.owned,
            source,
        )
    }

    /// Refuses an IngressClass `class` that does not exist ([`check_ingress_class`]),
    /// except for Contour, which serves an Ingress of its class with no IngressClass
    /// object.
    fn check_class(&self, class: &str) -> Result<(), SutError> {
        if let Routing::Ingress {
            style: controllers::Style::Contour,
            ..
        } = self.controller.routing
        {
            return Ok(());
        }
        self.rt.block_on(check_ingress_class(&self.client, class))?;
        Ok(())
    }

    /// Whether route `kind` `name`'s every parent reports `Accepted` for
    /// `generation`.
    fn accepted(
        &self,
        kind: &str,
        name: &str,
        generation: i64,
    ) -> Result<Option<String>, SutError> {
        let api = self.api("gateway.networking.k8s.io/v1", kind);
        let r = self
            .rt
            .block_on(api.get(name))
            .map_err(ClusterError::api(format!("read {kind} {name}")))?;
        Ok(route_verdict(&r.data, generation))
    }
}

/// The IngressClass the run's Ingresses name exists: a controller installed with
/// another class never serves them, and a run that went on would measure its 404s.
/// Rules that cannot read IngressClasses (cluster-scoped) leave it to the wait for
/// the route to serve.
async fn check_ingress_class(client: &kube::Client, class: &str) -> Result<(), ClusterError> {
    let api: Api<k8s_openapi::api::networking::v1::IngressClass> = Api::all(client.clone());
    match api.get(class).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(()),
        Err(e) if error::gone(&e) => {
            let here: Vec<String> = api
                .list(&ListParams::default())
                .await
                .map(|l| {
                    l.items
                        .into_iter()
                        .map(|c| {
                            let name = c.metadata.name.unwrap_or_default();
                            match c.spec.and_then(|s| s.controller) {
                                Some(ctl) => format!("{name} ({ctl})"),
                                None => name,
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            let here = if here.is_empty() {
                "none is installed".to_string()
            } else {
                format!("installed: {}", here.join(", "))
            };
            Err(ClusterError::Condition {
                object: format!("IngressClass {class}"),
                condition: format!(
                    "does not exist ({here}): name your controller's in kubernetes.ingress_class"
                ),
            })
        }
        Err(e) => Err(ClusterError::api(format!("get IngressClass {class}"))(e)),
    }
}

impl Drop for ControllerDriver {
    /// The status watch runs on the platform's runtime, which outlives the driver.
    fn drop(&mut self) {
        if let Some((_, task)) = self.status.take() {
            task.abort();
        }
    }
}

/// What an HTTPRoute's status says of `generation`: `Some("")` accepted by every
/// parent, `Some(reason)` refused, `None` not decided yet.
///
/// Gateway API has a parent accept a route whose backend it cannot resolve
/// (`Accepted: True` beside `ResolvedRefs: False`, and 500 answers for that backend):
/// a `ResolvedRefs` condition of this generation that is not true refuses the change
/// too.
fn route_verdict(data: &Value, generation: i64) -> Option<String> {
    let parents = data["status"]["parents"].as_array()?;
    if parents.is_empty() {
        return None;
    }
    let refused = |c: &Value, default: &str| {
        format!(
            "{}: {}",
            c["reason"].as_str().unwrap_or(default),
            c["message"].as_str().unwrap_or("")
        )
    };
    let current = |c: &&Value| c["observedGeneration"].as_i64().unwrap_or(0) >= generation;
    for p in parents {
        let conditions = p["conditions"].as_array()?;
        let accepted = conditions.iter().find(|c| c["type"] == "Accepted")?;
        if !current(&accepted) {
            return None;
        }
        if accepted["status"] != "True" {
            return Some(refused(accepted, "NotAccepted"));
        }
        if let Some(refs) = conditions
            .iter()
            .find(|c| c["type"] == "ResolvedRefs")
            .filter(current)
        {
            if refs["status"] != "True" {
                return Some(refused(refs, "RefNotResolved"));
            }
        }
    }
    Some(String::new())
}

impl Driver for ControllerDriver {
    fn name(&self) -> &'static str {
        self.controller.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            push_endpoints: false,
            routes: true,
            reload: false,
            restart: self.install.is_some(),
            restart_controller: self.install.is_some(),
            rotate_certificate: self.place.tls_secret.is_some(),
        }
    }

    /// The platform made the controller's certificate (its TLS Secret) when the
    /// context's certificate file exists: then the Ingress terminates TLS with it.
    fn prepare(&mut self, ctx: &DriverContext, _endpoints: &[Endpoint]) -> Result<(), SutError> {
        self.place.tls_secret = ctx.cert.is_file().then(|| crate::TLS_SECRET.to_string());
        self.place.fixture = ctx.probe_fixture;
        self.corpus = ctx.probe_corpus.then(Corpus::default);
        if self.brought.is_some() {
            // The user's objects name their classes and Gateways themselves.
            return self.prepare_brought();
        }
        // Refuse what cannot be expressed before anything is created.
        controllers::objects(self.controller, &self.place, Route::Base)
            .map_err(|e| SutError::from(ClusterError::from(e)))?;
        if let Routing::Ingress { class, .. } = self.controller.routing {
            self.check_class(self.place.class(class))?;
        }
        Ok(())
    }

    fn start(&mut self) -> Result<(), SutError> {
        // Best effort: rules that cannot list the controller's pods leave the crash
        // unsaid, and the run goes on.
        self.restarts_at_start = self.restarter().ok().and_then(|r| r.restarts().ok());
        self.apply(Route::Base)
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), SutError> {
        self.settle(&Expect::Route(Route::Base), timeout)
    }

    fn apply_route(&mut self, route: Route) -> Result<(), SutError> {
        self.apply(route)
    }

    fn route_needs(&self, route: Route) -> Option<String> {
        controllers::route_needs(self.controller, route).map(str::to_string)
    }

    fn routed_by(&self) -> String {
        if let Some(b) = &self.brought {
            let objects: Vec<String> = b
                .objects
                .iter()
                .map(|o| {
                    format!(
                        "{} {}",
                        o["kind"].as_str().unwrap_or_default(),
                        o["metadata"]["name"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            return format!("{} ({})", b.file, objects.join(", "));
        }
        let name = controllers::ROUTE_NAME;
        match self.controller.routing {
            Routing::Ingress { class, .. } => {
                format!("Ingress {name} of class {}", self.place.class(class))
            }
            Routing::HttpRoute => format!("{} {name}", self.gateway_route()),
            Routing::OpenShiftRoute => format!("Route {name}"),
        }
    }

    /// The run's TLS Secret updated with the new files, as cert-manager renews one:
    /// the controller watching it gives its proxy the new certificate. Applied when
    /// the API server took it; the load's handshakes say when it served.
    fn rotate_certificate(
        &mut self,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<(), SutError> {
        if self.place.tls_secret.is_none() {
            return Err(SutError::Unsupported {
                system: self.controller.name.into(),
                what: "rotate its certificate: it terminates TLS with its own (kubernetes.cacert)"
                    .into(),
            });
        }
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(SutError::io(format!("reading {}", p.display())))
        };
        let secret = crate::objects::tls_secret(
            &self.place.run,
            crate::TLS_SECRET,
            &read(cert)?,
            &read(key)?,
        );
        let patch = serde_json::json!({"data": serde_json::to_value(&secret.data)
            .map_err(SutError::render("the Secret as JSON"))?});
        let api: kube::Api<k8s_openapi::api::core::v1::Secret> =
            kube::Api::namespaced(self.client.clone(), &self.place.namespace);
        self.rt
            .block_on(api.patch(
                crate::TLS_SECRET,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            ))
            .map_err(ClusterError::api(format!(
                "update Secret {} in namespace {}",
                crate::TLS_SECRET,
                self.place.namespace
            )))?;
        Ok(())
    }

    /// A rolling restart of the data plane's workload, as `kubectl rollout
    /// restart` makes one: whatever the workload's update strategy promises.
    fn restart_kind(&self) -> sut::RestartKind {
        let how = match self.install.as_ref().and_then(|i| i.data_plane.as_deref()) {
            Some(w) if w.starts_with("daemonset/") => "rolling restart of its DaemonSet",
            _ => "rolling restart of its Deployment",
        };
        sut::RestartKind {
            how,
            seamless: false,
        }
    }

    fn restart_proxy(&mut self, replaced: &mut dyn FnMut(String)) -> Result<(), SutError> {
        self.restarter()?.restart_data_plane(replaced)
    }

    /// The controller's pods deleted, as after a crash: done once as many new ones
    /// are ready; the routes the run applies next are made while it resyncs.
    fn restart_controller(&mut self, replaced: &mut dyn FnMut(String)) -> Result<(), SutError> {
        self.restarter()?.restart_controller(replaced)
    }

    /// Writes the objects of the routes that are new or differ and deletes those of
    /// routes no longer in the set (route by route: a Middleware before the Ingress
    /// naming it, after it when deleted); the HTTPRoutes written are what `settle`
    /// waits for. Returns the size of the set's objects as JSON: what the controller
    /// is given to render.
    fn apply_route_set(&mut self, set: &RouteSet) -> Result<Option<u64>, SutError> {
        let routes = controllers::route_set_objects(self.controller, &self.place, set)
            .map_err(ClusterError::from)?;
        self.watch_status();
        let key = |o: &Value| -> Applied {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                s(&o["apiVersion"]),
                s(&o["kind"]),
                s(&o["metadata"]["name"]),
            )
        };
        let mut now = BTreeMap::new();
        let (mut first, mut then) = (Vec::new(), Vec::new());
        let mut bytes = 0u64;
        for objs in &routes {
            for (k, o) in objs.iter().enumerate() {
                let text = o.to_string();
                bytes += text.len() as u64;
                let id = key(o);
                if self.set_objects.get(&id) != Some(&text) {
                    if k + 1 < objs.len() {
                        &mut first
                    } else {
                        &mut then
                    }
                    .push(o);
                }
                now.insert(id, text);
            }
        }
        // Known before they are written: a write that fails part way leaves objects
        // created (the requests in flight too), which `stop` must delete. One not
        // yet in force has no text, so a later set writes it again.
        for k in now.keys() {
            self.set_objects.entry(k.clone()).or_default();
        }
        let mut generations = self.apply_many(&first)?;
        generations.extend(self.apply_many(&then)?);
        let stale = self
            .set_objects
            .keys()
            .filter(|k| !now.contains_key(*k))
            .cloned()
            .collect();
        for (o, e) in self.delete_set(stale) {
            let text = self.set_objects.get(&o).cloned().unwrap_or_default();
            self.warnings.push(self.left(&o, e).into());
            now.insert(o, text);
        }
        for (name, _) in self.set_pending.clone() {
            if !now.keys().any(|(_, _, n)| *n == name) {
                self.set_pending.remove(&name);
            }
        }
        self.set_pending.extend(generations);
        self.set_objects = now;
        Ok(Some(bytes))
    }

    fn route_status_writes(&self) -> Option<u64> {
        let (w, _) = self.status.as_ref()?;
        Some(
            w.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .writes,
        )
    }

    fn reload(&mut self) -> Result<(), SutError> {
        Err(SutError::Unsupported {
            system: self.controller.name.into(),
            what: "reload (an installed controller is not ingressbench's to reload)".into(),
        })
    }

    /// Endpoints: the controller discovers them itself and reports nothing, so there
    /// is nothing to wait for here (the platform's watches and the responses time
    /// it). Routes: an HTTPRoute's acceptance of the new generation.
    fn settle(&mut self, expect: &Expect, timeout: Duration) -> Result<(), SutError> {
        if matches!(expect, Expect::Endpoints(_)) {
            return Ok(());
        }
        let deadline = Instant::now() + timeout;
        while let Some((kind, name, generation)) = self.pending.first().cloned() {
            match self.accepted(&kind, &name, generation)? {
                Some(r) if r.is_empty() => {
                    self.pending.remove(0);
                }
                Some(reason) => {
                    return Err(SutError::Rejected {
                        what: format!("{kind} {name}"),
                        detail: reason,
                    })
                }
                None if Instant::now() >= deadline => {
                    return Err(SutError::NotReady(format!(
                        "{kind} {name} generation {generation} (no Accepted condition from the Gateway's controller)"
                    )))
                }
                // Often: the settle time is reported beside what traffic shows, which
                // for Contour is tens of ms, so the poll must not blur it.
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        self.settle_set(deadline)
    }

    fn alive(&mut self) -> bool {
        true
    }

    /// Deletes every object the run applied; those that cannot be deleted are the
    /// error (the first one's cause; the rest are named), and are not tried again.
    fn stop(&mut self) -> Result<(), SutError> {
        if let Some((_, task)) = self.status.take() {
            task.abort();
        }
        if let Some(before) = self.restarts_at_start.take() {
            let after = self.restarter().ok().and_then(|r| r.restarts().ok());
            if let (Some(after), Some(i)) = (after, self.install.as_ref()) {
                if let Some(line) = crate::restart::crashed(&i.namespace, &before, &after) {
                    self.warnings.push(SutError::Setting {
                        what: self.controller.name.to_string(),
                        why: line,
                    });
                }
            }
        }
        let set: Vec<Applied> = std::mem::take(&mut self.set_objects).into_keys().collect();
        let mut left = self.delete_set(set);
        let objects = std::mem::take(&mut self.applied);
        left.extend(self.delete(objects));
        let names: Vec<String> = left
            .iter()
            .map(|((_, kind, name), _)| format!("{kind} {name}"))
            .collect();
        let Some((_, source)) = left.into_iter().next() else {
            return Ok(());
        };
        Err(ClusterError::left_in(
            names.join(", "),
            &self.place.namespace,
            &self.place.run,
            self.owned,
            source,
        )
        .into())
    }

    fn take_warnings(&mut self) -> Vec<SutError> {
        std::mem::take(&mut self.warnings)
    }

    fn corpus_left_out(&self) -> Option<Vec<(String, String)>> {
        let c = self.corpus.as_ref()?;
        Some(
            c.left_out
                .iter()
                .map(|l| (l.behaviour.to_string(), l.why.clone()))
                .collect(),
        )
    }

    /// The process groups of every process on this machine whose command line holds
    /// `kubernetes.processes`' text, looked up at each reading (a controller that
    /// restarts is found again); never this process's own group.
    fn process_groups(&self) -> Vec<u32> {
        self.processes
            .as_deref()
            .map(crate::processes::groups_matching)
            .unwrap_or_default()
    }

    fn versions(&self) -> Vec<(String, String)> {
        let mut versions = self.rt.block_on(async {
            let mut v: Vec<(String, String)> = match self.client.apiserver_version().await {
                Ok(info) => vec![("kubernetes".to_string(), info.git_version)],
                Err(_) => Vec::new(),
            };
            v.extend(
                installed::describe(
                    &self.client,
                    self.controller.name,
                    self.place.gateway.as_ref(),
                )
                .await,
            );
            v
        });
        // What routed the traffic, when the user brought it (a comparison with a
        // generated route must say so) or when it is gRPC (a GRPCRoute, which
        // each implementation serves its own way, or an Ingress).
        if self.brought.is_some() || self.place.grpc {
            versions.push(("routes".to_string(), self.routed_by()));
        }
        versions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake;
    use serde_json::json;

    /// Traefik's driver (a Middleware beside the Ingress for a change) in namespace
    /// `team-a`, given to the run, over a fake API that accepts every apply and
    /// answers each delete with `delete(path)`.
    fn traefik(
        delete: impl Fn(&str) -> (u16, Value) + Send + Sync + 'static,
    ) -> (ControllerDriver, fake::Seen) {
        traefik_answering(move |method, path| {
            if method == http::Method::DELETE {
                delete(path)
            } else {
                (
                    200,
                    json!({"metadata": {"name": "ib-route", "generation": 1}}),
                )
            }
        })
    }

    /// Traefik's driver in namespace `team-a` over a fake API whose every answer is
    /// `answer(method, path)`.
    fn traefik_answering(
        answer: impl Fn(&http::Method, &str) -> (u16, Value) + Send + Sync + 'static,
    ) -> (ControllerDriver, fake::Seen) {
        let rt = Arc::new(crate::runtime().unwrap());
        let (client, seen) = fake::client(&rt, answer);
        let place = Place::sample("team-a", None);
        let c = controllers::controller("traefik").unwrap();
        (ControllerDriver::new(c, client, rt, place, false), seen)
    }

    /// The DELETE requests the fake API has seen, in order.
    fn deletes_in(seen: &fake::Seen) -> Vec<String> {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|r| r.starts_with("DELETE"))
            .cloned()
            .collect()
    }

    /// The user's routes for Traefik: an Ingress whose annotation names a
    /// Middleware beside it.
    const SHOP: &str = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: shop\n  annotations: {traefik.ingress.kubernetes.io/router.middlewares: ${IB_NAMESPACE}-team@kubernetescrd}\nspec:\n  ingressClassName: ${IB_INGRESS_CLASS}\n  defaultBackend: {service: {name: \"${IB_BACKEND}\", port: {number: ${IB_BACKEND_PORT}}}}\n---\napiVersion: traefik.io/v1alpha1\nkind: Middleware\nmetadata: {name: team}\nspec: {headers: {customRequestHeaders: {x-team: a}}}\n";

    #[test]
    fn the_routes_a_user_brings_are_dry_run_then_applied_in_place_of_the_generated_ones_and_deleted(
    ) {
        // Rules that cannot write Middlewares: refused at the object's line before
        // anything is written.
        let (mut d, seen) = traefik_answering(|method, path| {
            match (method, path) {
            (&http::Method::GET, p) if p.contains("ingressclasses") => {
                fake::refused(403, "Forbidden", "ingressclasses is forbidden")
            }
            (&http::Method::PATCH, p) if p.contains("middlewares") => fake::refused(
                403,
                "Forbidden",
                "middlewares.traefik.io \"team\" is forbidden: User \"ci\" cannot patch resource \"middlewares\"",
            ),
            _ => (200, json!({"metadata": {"name": "shop", "generation": 1}})),
        }
        });
        d.brought = Some(Brought::new("shop.yaml".into(), SHOP.into()));
        let e = d.prepare_brought().unwrap_err().to_string();
        assert!(
            e.starts_with("kubernetes: shop.yaml:10: Middleware team: the run's rules cannot write Middleware (traefik.io/v1alpha1) in namespace team-a: grant them"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");

        // Taken: the user's two objects, labelled as the run's, are what the run
        // applies (no ib-route), the route it reports, and what it deletes.
        let (mut d, seen2) = traefik_answering(|method, path| match (method, path) {
            (&http::Method::GET, p) if p.contains("ingressclasses") => {
                fake::refused(403, "Forbidden", "ingressclasses is forbidden")
            }
            (&http::Method::DELETE, _) => fake::deleted(),
            _ => (200, json!({"metadata": {"name": "shop", "generation": 1}})),
        });
        d.brought = Some(Brought::new("shop.yaml".into(), SHOP.into()));
        d.prepare_brought().unwrap();
        let objects = &d.brought.as_ref().unwrap().objects;
        assert_eq!(objects[0]["metadata"]["labels"][crate::RUN_LABEL], "r1");
        assert_eq!(
            objects[0]["metadata"]["annotations"]
                ["traefik.ingress.kubernetes.io/router.middlewares"],
            "team-a-team@kubernetescrd"
        );
        assert_eq!(objects[0]["spec"]["ingressClassName"], "traefik");
        d.apply(Route::Base).unwrap();
        assert_eq!(d.routed_by(), "shop.yaml (Ingress shop, Middleware team)");
        d.stop().unwrap();
        let ingress = "/apis/networking.k8s.io/v1/namespaces/team-a/ingresses/shop";
        let middleware = "/apis/traefik.io/v1alpha1/namespaces/team-a/middlewares/team";
        let all = seen2.lock().unwrap().clone();
        let count = |r: String| all.iter().filter(|x| **x == r).count();
        // A dry run and the apply of each; one delete of each; nothing of ib-route.
        assert_eq!(count(format!("PATCH {ingress}")), 2, "{all:?}");
        assert_eq!(count(format!("PATCH {middleware}")), 2, "{all:?}");
        assert_eq!(
            deletes_in(&seen2),
            [format!("DELETE {ingress}"), format!("DELETE {middleware}")]
        );
        assert!(!all.iter().any(|r| r.contains("ib-route")), "{all:?}");
        // The refused run wrote nothing: the Ingress's only PATCH was its dry run.
        let refused = seen.lock().unwrap().clone();
        assert_eq!(
            refused
                .iter()
                .filter(|r| **r == format!("PATCH {ingress}"))
                .count(),
            1,
            "{refused:?}"
        );
    }

    const MIDDLEWARE: &str = "/apis/traefik.io/v1alpha1/namespaces/team-a/middlewares/ib-route";
    const INGRESS: &str = "/apis/networking.k8s.io/v1/namespaces/team-a/ingresses/ib-route";

    #[test]
    fn an_old_routes_object_left_undeleted_is_reported_and_tried_again_at_stop() {
        let (mut d, seen) = traefik(|_| {
            fake::refused(
                403,
                "Forbidden",
                "middlewares.traefik.io \"ib-route\" is forbidden",
            )
        });
        d.apply_route(Route::Cors).unwrap();
        assert!(d.take_warnings().is_empty());
        // Back to base: the Middleware is no longer wanted, and cannot be deleted.
        d.apply_route(Route::Base)
            .expect("the new route is in force all the same");
        let w: Vec<String> = d
            .take_warnings()
            .iter()
            .map(|e| results::with_causes(e))
            .collect();
        assert_eq!(
            w,
            ["kubernetes: Middleware ib-route in namespace team-a not deleted (delete what is labelled ingressbench.io/run=r1 there): middlewares.traefik.io \"ib-route\" is forbidden: Forbidden"]
        );
        assert!(d.take_warnings().is_empty(), "each is reported once");
        // `stop()` tries it again, with the Ingress, and fails naming both.
        let e = results::with_causes(&d.stop().unwrap_err());
        assert!(
            e.starts_with(
                "kubernetes: Ingress ib-route, Middleware ib-route in namespace team-a not deleted"
            ),
            "{e}"
        );
        let deletes = deletes_in(&seen);
        let del = |p: &str| format!("DELETE {p}");
        assert_eq!(deletes, [del(MIDDLEWARE), del(INGRESS), del(MIDDLEWARE)]);
        assert!(d.stop().is_ok(), "nothing is tried twice at stop");
    }

    #[test]
    fn stop_fails_on_what_it_could_not_delete_and_not_on_what_is_gone() {
        let (mut d, _) = traefik(|path| match path {
            INGRESS => fake::refused(404, "NotFound", "ingresses \"ib-route\" not found"),
            _ => fake::refused(500, "InternalError", "etcdserver: request timed out"),
        });
        d.apply_route(Route::Cors).unwrap();
        let e = d.stop().expect_err("a Middleware left behind is an error");
        assert_eq!(
            results::with_causes(&e),
            "kubernetes: Middleware ib-route in namespace team-a not deleted (delete what is labelled ingressbench.io/run=r1 there): etcdserver: request timed out: InternalError"
        );
        let (mut d, _) = traefik(|_| fake::deleted());
        d.apply_route(Route::Cors).unwrap();
        d.stop().expect("everything deleted");
        // In the run's own namespace, `ingressbench cleanup` removes what stays.
        let (mut d, _) = traefik(|_| fake::refused(500, "InternalError", "etcd"));
        d.owned = true;
        d.apply_route(Route::Base).unwrap();
        let e = results::with_causes(&d.stop().unwrap_err());
        assert!(
            e.ends_with("in namespace team-a not deleted (run `ingressbench cleanup --platform kubernetes`): etcd: InternalError"),
            "{e}"
        );
    }

    #[test]
    fn an_http_route_is_settled_only_when_every_parent_accepted_this_generation() {
        let status = |gen: i64, ok: &str| {
            json!({"status": {"parents": [{"conditions": [
                {"type": "Accepted", "status": ok, "observedGeneration": gen,
                 "reason": "NotAllowedByListeners", "message": "no listener"},
            ]}]}})
        };
        assert_eq!(route_verdict(&json!({}), 2), None, "no status yet");
        assert_eq!(
            route_verdict(&status(1, "True"), 2),
            None,
            "an older generation"
        );
        assert_eq!(route_verdict(&status(2, "True"), 2).as_deref(), Some(""));
        let refused = route_verdict(&status(2, "False"), 2).unwrap();
        assert_eq!(refused, "NotAllowedByListeners: no listener");
    }

    #[test]
    fn an_accepted_http_route_whose_backend_is_unresolved_is_refused() {
        let status = |gen: i64, refs: &str| {
            json!({"status": {"parents": [{"conditions": [
                {"type": "ResolvedRefs", "status": refs, "observedGeneration": gen,
                 "reason": "BackendNotFound", "message": "service \"ib-backend\" not found"},
                {"type": "Accepted", "status": "True", "observedGeneration": 3},
            ]}]}})
        };
        assert_eq!(
            route_verdict(&status(3, "False"), 3).as_deref(),
            Some("BackendNotFound: service \"ib-backend\" not found")
        );
        assert_eq!(route_verdict(&status(3, "True"), 3).as_deref(), Some(""));
        // A verdict on refs of an older generation says nothing of this one.
        assert_eq!(route_verdict(&status(2, "False"), 3).as_deref(), Some(""));
    }

    #[test]
    fn status_writes_are_the_controllers_changes_of_status_not_the_runs_applies() {
        let mut w = StatusWrites::default();
        w.saw("ib-r0", &Value::Null);
        w.saw("ib-r1", &Value::Null);
        assert_eq!(w.writes, 0, "first sight is no write");
        w.saw(
            "ib-r0",
            &json!({"parents": [{"conditions": [{"type": "Accepted"}]}]}),
        );
        assert_eq!(w.writes, 1);
        // The run applies its spec again: the status is as it was.
        w.saw(
            "ib-r0",
            &json!({"parents": [{"conditions": [{"type": "Accepted"}]}]}),
        );
        assert_eq!(w.writes, 1);
        w.saw(
            "ib-r0",
            &json!({"parents": [{"conditions": [{"type": "ResolvedRefs"}]}]}),
        );
        assert_eq!(w.writes, 2);
        w.gone("ib-r1");
        w.saw("ib-r1", &json!({"parents": []}));
        assert_eq!(w.writes, 2, "created again, it is new");
    }

    #[test]
    fn a_route_set_change_writes_only_what_differs_and_deletes_routes_before_what_they_name() {
        let (mut d, seen) = traefik(|_| fake::deleted());
        let writes = |seen: &fake::Seen| -> Vec<String> {
            let mut s = seen.lock().unwrap();
            let out = s
                .iter()
                .filter(|r| r.starts_with("PATCH") || r.starts_with("DELETE"))
                .cloned()
                .collect();
            s.clear();
            out
        };
        let bytes = d.apply_route_set(&RouteSet::new(3, 2)).unwrap().unwrap();
        let w = writes(&seen);
        assert_eq!(w.len(), 6, "a Middleware and an Ingress per route: {w:?}");
        assert!(
            w[..3].iter().all(|r| r.contains("/middlewares/ib-r")),
            "Middlewares before the Ingresses naming them: {w:?}"
        );
        let bigger = d.apply_route_set(&RouteSet::new(4, 2)).unwrap().unwrap();
        assert!(bigger > bytes, "{bigger} > {bytes}");
        let w = writes(&seen);
        assert_eq!(
            w,
            [
                "PATCH /apis/traefik.io/v1alpha1/namespaces/team-a/middlewares/ib-r3",
                "PATCH /apis/networking.k8s.io/v1/namespaces/team-a/ingresses/ib-r3",
            ],
            "one route added: its objects only"
        );
        d.apply_route_set(&RouteSet::new(2, 2)).unwrap();
        let w = writes(&seen);
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(
            w[..2]
                .iter()
                .all(|r| r.starts_with("DELETE") && r.contains("/ingresses/")),
            "the Ingresses first: {w:?}"
        );
        assert!(w.iter().any(|r| r.ends_with("/middlewares/ib-r2")), "{w:?}");
        assert!(w.iter().any(|r| r.ends_with("/ingresses/ib-r3")), "{w:?}");
        d.stop().unwrap();
        let mut w = writes(&seen);
        w.sort();
        assert_eq!(
            w,
            [
                "DELETE /apis/networking.k8s.io/v1/namespaces/team-a/ingresses/ib-r0",
                "DELETE /apis/networking.k8s.io/v1/namespaces/team-a/ingresses/ib-r1",
                "DELETE /apis/traefik.io/v1alpha1/namespaces/team-a/middlewares/ib-r0",
                "DELETE /apis/traefik.io/v1alpha1/namespaces/team-a/middlewares/ib-r1",
            ],
            "stop deletes what is left of the set (and nothing else was applied)"
        );
    }

    #[test]
    fn a_route_set_refused_part_way_is_deleted_whole_at_stop() {
        let (mut d, seen) = traefik_answering(|method, path| {
            if method == http::Method::PATCH && path.contains("/ingresses/") {
                fake::refused(403, "Forbidden", "ingresses is forbidden")
            } else if method == http::Method::DELETE {
                fake::deleted()
            } else {
                (200, json!({"metadata": {"name": "x", "generation": 1}}))
            }
        });
        let e = d.apply_route_set(&RouteSet::new(3, 1)).unwrap_err();
        assert!(results::with_causes(&e).contains("forbidden"), "{e}");
        seen.lock().unwrap().clear();
        let _ = d.stop();
        let deleted = deletes_in(&seen);
        for i in 0..3 {
            for kind in ["middlewares", "ingresses"] {
                assert!(
                    deleted
                        .iter()
                        .any(|r| r.ends_with(&format!("/{kind}/ib-r{i}"))),
                    "{kind} ib-r{i} not deleted: {deleted:?}"
                );
            }
        }
    }
}
