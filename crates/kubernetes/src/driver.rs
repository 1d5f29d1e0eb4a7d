//! The driver of an installed controller: it owns no process, only the routing objects
//! of the run ([`controllers::objects`]), applied with server-side apply. The
//! controller discovers the backends itself (no endpoint pushing), and a route change
//! is one apply. `settle` waits for what the cluster reports: an HTTPRoute's
//! `Accepted` condition for the new generation; an Ingress or an OpenShift Route has no
//! such condition, so for them "applied" is the API's acceptance, and what traffic
//! shows is measured from responses.

use crate::controllers::{self, Controller, Place};
use crate::error::{self, ClusterError};
use crate::installed;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use sut::driver::{Capabilities, Driver, DriverContext, Endpoint, Expect, LabError, Route};

/// Server-side apply's field manager for everything the run writes.
const MANAGER: &str = "ingressbench";

/// An object the run applied: (apiVersion, kind, name).
type Applied = (String, String, String);

/// An installed controller, driven through its routing objects.
pub struct ControllerDriver {
    controller: &'static Controller,
    client: kube::Client,
    rt: Arc<tokio::runtime::Runtime>,
    place: Place,
    route: Route,
    /// Every object applied and not yet deleted.
    applied: Vec<Applied>,
    /// The HTTPRoute generation `settle()` waits to see accepted.
    pending_generation: Option<i64>,
    /// Objects of an old route that could not be deleted (they stay in `applied`,
    /// and `stop()` tries again), not yet reported.
    warnings: Vec<LabError>,
    /// The namespace is the run's own (it goes whole when the run ends), not one it
    /// was given: what to do about an object left in it differs.
    owned: bool,
}

impl ControllerDriver {
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
            pending_generation: None,
            warnings: Vec::new(),
            owned,
        }
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
    fn apply(&mut self, route: Route) -> Result<(), LabError> {
        let objs = controllers::objects(self.controller, &self.place, route)
            .map_err(ClusterError::from)?;
        let mut now = Vec::new();
        let mut generation = None;
        for o in &objs {
            let av = o["apiVersion"].as_str().unwrap_or_default().to_string();
            let kind = o["kind"].as_str().unwrap_or_default().to_string();
            let name = o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let api = self.api(&av, &kind);
            let pp = PatchParams::apply(MANAGER).force();
            let res = self
                .rt
                .block_on(api.patch(&name, &pp, &Patch::Apply(o)))
                .map_err(ClusterError::api(format!("apply {kind} {name}")))?;
            if kind == "HTTPRoute" {
                generation = res.metadata.generation;
            }
            now.push((av, kind, name));
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
        self.pending_generation = generation;
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

    /// Whether the HTTPRoute's every parent reports `Accepted` for `generation`.
    fn accepted(&self, generation: i64) -> Result<Option<String>, LabError> {
        let api = self.api("gateway.networking.k8s.io/v1", "HTTPRoute");
        let r = self
            .rt
            .block_on(api.get(controllers::ROUTE_NAME))
            .map_err(ClusterError::api(format!(
                "read HTTPRoute {}",
                controllers::ROUTE_NAME
            )))?;
        Ok(route_verdict(&r.data, generation))
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
            restart: false,
        }
    }

    fn prepare(&mut self, _ctx: &DriverContext, _endpoints: &[Endpoint]) -> Result<(), LabError> {
        // Refuse what cannot be expressed before anything is created.
        controllers::objects(self.controller, &self.place, Route::Base)
            .map(|_| ())
            .map_err(|e| LabError::from(ClusterError::from(e)))
    }

    fn start(&mut self) -> Result<(), LabError> {
        self.apply(Route::Base)
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), LabError> {
        self.settle(&Expect::Route(Route::Base), timeout)
    }

    fn apply_route(&mut self, route: Route) -> Result<(), LabError> {
        self.apply(route)
    }

    fn reload(&mut self) -> Result<(), LabError> {
        Err(LabError::Unsupported {
            system: self.controller.name.into(),
            what: "reload (an installed controller is not ingressbench's to reload)".into(),
        })
    }

    /// Endpoints: the controller discovers them itself and reports nothing, so there
    /// is nothing to wait for here (the platform's watches and the responses time
    /// it). Routes: an HTTPRoute's acceptance of the new generation.
    fn settle(&mut self, expect: &Expect, timeout: Duration) -> Result<(), LabError> {
        if matches!(expect, Expect::Endpoints(_)) {
            return Ok(());
        }
        let Some(generation) = self.pending_generation else {
            return Ok(());
        };
        let deadline = Instant::now() + timeout;
        loop {
            match self.accepted(generation)? {
                Some(r) if r.is_empty() => {
                    self.pending_generation = None;
                    return Ok(());
                }
                Some(reason) => {
                    return Err(LabError::Rejected {
                        what: format!("HTTPRoute {}", controllers::ROUTE_NAME),
                        detail: reason,
                    })
                }
                None if Instant::now() >= deadline => {
                    return Err(LabError::NotReady(format!(
                        "HTTPRoute {} generation {generation} (no Accepted condition from the Gateway's controller)",
                        controllers::ROUTE_NAME
                    )))
                }
                // Often: the settle time is reported beside what traffic shows, which
                // for Contour is tens of ms, so the poll must not blur it.
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    fn alive(&mut self) -> bool {
        true
    }

    /// Deletes every object the run applied; those that cannot be deleted are the
    /// error (the first one's cause; the rest are named), and are not tried again.
    fn stop(&mut self) -> Result<(), LabError> {
        let objects = std::mem::take(&mut self.applied);
        let left = self.delete(objects);
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

    fn take_warnings(&mut self) -> Vec<LabError> {
        std::mem::take(&mut self.warnings)
    }

    fn versions(&self) -> Vec<(String, String)> {
        self.rt.block_on(async {
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
        })
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
        let rt = Arc::new(crate::runtime().unwrap());
        let (client, seen) = fake::client(&rt, move |method, path| {
            if method == http::Method::DELETE {
                delete(path)
            } else {
                (
                    200,
                    json!({"metadata": {"name": "ib-route", "generation": 1}}),
                )
            }
        });
        let place = Place {
            run: "r1".into(),
            namespace: "team-a".into(),
            gateway: None,
            host: None,
        };
        let c = controllers::controller("traefik").unwrap();
        (ControllerDriver::new(c, client, rt, place, false), seen)
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
        let deletes: Vec<String> = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.starts_with("DELETE"))
            .cloned()
            .collect();
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
}
