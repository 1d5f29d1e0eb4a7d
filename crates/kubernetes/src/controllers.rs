//! Installed ingress controllers and gateways as systems under test: one table of what
//! differs between them (which API routes them, and how each of study S3's route
//! changes is written for them), and the pure translation of a route into the objects
//! a run creates. S3's changes are expressed once ([`Route`]) and translated here; the
//! driver only applies what this module returns.
//!
//! Every object is plain JSON applied with server-side apply, so CRDs (Gateway API,
//! Traefik's Middleware, OpenShift's Route) need no generated types.

use super::objects::SERVICE_PORT;
use super::{BACKEND, MANAGED_BY, RUN_LABEL};
use serde_json::{json, Value};
use sut::routes::ROUTE_HEADER;
use sut::{Route, RouteSet};

/// The name of every routing object a run creates.
pub const ROUTE_NAME: &str = "ib-route";

/// How a controller is routed to the backends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// An Ingress of this class, route changes as this controller's annotations.
    Ingress { class: &'static str, style: Style },
    /// A Gateway API HTTPRoute attached to a Gateway the user names.
    HttpRoute,
    /// An OpenShift Route.
    OpenShiftRoute,
}

/// Whose Ingress annotations express the route changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Community ingress-nginx (`nginx.ingress.kubernetes.io/*`).
    IngressNginx,
    /// F5 NGINX Ingress Controller (`nginx.org/*`).
    NginxOrg,
    /// HAProxy Technologies' controller (`haproxy.org/*`).
    HaproxyOrg,
    /// Traefik: a Middleware (traefik.io/v1alpha1) referenced from the Ingress.
    Traefik,
    /// Contour: its Ingress annotations set timeouts, retries and TLS, but no response
    /// header and no rewrite (those are HTTPProxy or HTTPRoute features), so only
    /// `base` can be expressed: S1's and S5's scale churn, not S3's route steps.
    Contour,
}

/// One installed controller profile.
#[derive(Debug)]
pub struct Controller {
    pub name: &'static str,
    pub stands_for: &'static str,
    pub routing: Routing,
    /// Where its standard install (Helm chart or manifest) puts its pods, for the
    /// `restart:` steps; `kubernetes.workloads` overrides it. `None`: no standard
    /// place (a Gateway API implementation in general), so it must be given.
    pub install: Option<Install<&'static str>>,
    /// The real controller this profile ran against in ingressbench's own tests
    /// (its version, its proxy's), or `None`: a profile written from the
    /// controller's documentation that has never met it. Users choosing a profile
    /// read it (`validate`, the result's `lab.versions`): an untested profile's
    /// annotations or pod labels may be wrong for their controller.
    pub tested: Option<&'static str>,
}

/// Where a controller's pods are: its namespace, the labels of its controller's
/// pods, and the workload of its data plane (`deployment/NAME` or
/// `daemonset/NAME`, in the same namespace), which may hold the same pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Install<S> {
    pub namespace: S,
    /// A label selector, `key=value,...`.
    pub controller: S,
    /// `deployment/NAME` or `daemonset/NAME`; or `deployment?SELECTOR`, the one
    /// Deployment of the namespace with these labels, `{gateway_namespace}` and
    /// `{gateway_name}` in it standing for the run's Gateway's (an implementation
    /// that makes a data plane per Gateway).
    pub data_plane: Option<S>,
}

impl Install<&'static str> {
    /// As owned strings.
    pub fn owned(&self) -> Install<String> {
        Install {
            namespace: self.namespace.to_string(),
            controller: self.controller.to_string(),
            data_plane: self.data_plane.map(str::to_string),
        }
    }
}

impl Install<String> {
    /// The data plane's workload as (kind, name), the kind `deployment` or
    /// `daemonset`.
    ///
    /// # Errors
    /// A message naming the value and the form it takes.
    pub fn workload(&self) -> Result<Option<(&str, &str)>, String> {
        let Some(w) = self.data_plane.as_deref() else {
            return Ok(None);
        };
        if let Some(sel) = w.strip_prefix("deployment?") {
            if !sel.is_empty() {
                return Ok(Some(("deployment", w)));
            }
        }
        match w.split_once('/') {
            Some((kind @ ("deployment" | "daemonset"), name)) if !name.is_empty() => {
                Ok(Some((kind, name)))
            }
            _ => Err(format!(
                "data_plane: {w}: write it as deployment/NAME or daemonset/NAME"
            )),
        }
    }
}

const fn install(
    namespace: &'static str,
    controller: &'static str,
    data_plane: Option<&'static str>,
) -> Option<Install<&'static str>> {
    Some(Install {
        namespace,
        controller,
        data_plane,
    })
}

/// The registry of controller profiles on the `kubernetes` platform.
pub const CONTROLLERS: &[Controller] = &[
    Controller {
        name: "ingress-nginx",
        stands_for: "community ingress-nginx (Ingress, nginx.ingress.kubernetes.io annotations)",
        routing: Routing::Ingress {
            class: "nginx",
            style: Style::IngressNginx,
        },
        install: install(
            "ingress-nginx",
            "app.kubernetes.io/name=ingress-nginx,app.kubernetes.io/component=controller",
            Some("deployment/ingress-nginx-controller"),
        ),
        tested: Some(
            "ingress-nginx controller-v1.11.0 on Debian's nginx 1.22 with lua-nginx-module 0.10.23 (docs/kubernetes.md lists what differs from its image)",
        ),
    },
    Controller {
        name: "nginx-ingress",
        stands_for: "F5 NGINX Ingress Controller (Ingress, nginx.org annotations)",
        routing: Routing::Ingress {
            class: "nginx",
            style: Style::NginxOrg,
        },
        install: install(
            "nginx-ingress",
            "app.kubernetes.io/name=nginx-ingress",
            Some("deployment/nginx-ingress-controller"),
        ),
        tested: None,
    },
    Controller {
        name: "haproxy-ingress",
        stands_for: "HAProxy Technologies' Kubernetes ingress (Ingress, haproxy.org annotations)",
        routing: Routing::Ingress {
            class: "haproxy",
            style: Style::HaproxyOrg,
        },
        install: install(
            "haproxy-controller",
            "app.kubernetes.io/name=kubernetes-ingress",
            Some("deployment/haproxy-kubernetes-ingress"),
        ),
        tested: Some("HAProxy Kubernetes Ingress v1.11.12 with HAProxy 2.8.25"),
    },
    Controller {
        name: "traefik",
        stands_for: "Traefik's Kubernetes Ingress provider (Ingress, a Middleware per change)",
        routing: Routing::Ingress {
            class: "traefik",
            style: Style::Traefik,
        },
        install: install(
            "traefik",
            "app.kubernetes.io/name=traefik",
            Some("deployment/traefik"),
        ),
        tested: Some("Traefik v3.6.12"),
    },
    Controller {
        name: "traefik-nginx",
        stands_for: "Traefik's ingress-nginx provider (experimental kubernetesIngressNGINX: Ingresses of class nginx, nginx.ingress.kubernetes.io annotations read unchanged)",
        routing: Routing::Ingress {
            class: "nginx",
            style: Style::IngressNginx,
        },
        install: install(
            "traefik",
            "app.kubernetes.io/name=traefik",
            Some("deployment/traefik"),
        ),
        tested: Some("Traefik v3.6.12 with --experimental.kubernetesingressnginx"),
    },
    Controller {
        name: "contour",
        stands_for: "Contour (Envoy) through Gateway API",
        routing: Routing::HttpRoute,
        install: install("projectcontour", "app=contour", Some("daemonset/envoy")),
        tested: Some("Contour v1.33.8 with Envoy 1.40.0"),
    },
    Controller {
        name: "contour-ingress",
        stands_for: "Contour (Envoy) through Ingress (class contour): scale churn only",
        routing: Routing::Ingress {
            class: "contour",
            style: Style::Contour,
        },
        install: install("projectcontour", "app=contour", Some("daemonset/envoy")),
        tested: Some("Contour v1.33.8 with Envoy 1.40.0"),
    },
    Controller {
        name: "envoy-gateway",
        stands_for: "Envoy Gateway through Gateway API",
        routing: Routing::HttpRoute,
        install: install(
            "envoy-gateway-system",
            "control-plane=envoy-gateway",
            Some(
                "deployment?gateway.envoyproxy.io/owning-gateway-namespace={gateway_namespace},\
                 gateway.envoyproxy.io/owning-gateway-name={gateway_name}",
            ),
        ),
        tested: Some("Envoy Gateway v1.9.1 with Envoy 1.39.1"),
    },
    Controller {
        name: "nginx-gateway-fabric",
        stands_for: "NGINX Gateway Fabric through Gateway API",
        routing: Routing::HttpRoute,
        install: install(
            "nginx-gateway",
            "app.kubernetes.io/name=nginx-gateway-fabric",
            None,
        ),
        tested: Some("NGINX Gateway Fabric v1.6.2 on Debian's nginx 1.22 with njs 0.7.9"),
    },
    Controller {
        name: "openshift-router",
        stands_for: "OpenShift's HAProxy router (Route, spec.httpHeaders and rewrite-target)",
        routing: Routing::OpenShiftRoute,
        install: install(
            "openshift-ingress",
            "ingresscontroller.operator.openshift.io/deployment-ingresscontroller=default",
            Some("deployment/router-default"),
        ),
        tested: None,
    },
    Controller {
        name: "gateway-api",
        stands_for: "any conformant Gateway API implementation (HTTPRoute filters)",
        routing: Routing::HttpRoute,
        install: None,
        tested: Some("Traefik v3.6.12's Gateway API provider (Gateway API v1.4.0)"),
    },
];

/// The controller profile called `name`.
pub fn controller(name: &str) -> Option<&'static Controller> {
    CONTROLLERS.iter().find(|c| c.name == name)
}

/// What `route` needs of `c`'s controller beyond the objects the run writes, as
/// found against the real controllers: said when the change never shows.
pub fn route_needs(c: &Controller, route: Route) -> Option<&'static str> {
    let Routing::Ingress { style, .. } = c.routing else {
        return None;
    };
    if c.name == "traefik-nginx" {
        // The same annotations, another reader: Traefik v3.6's provider reads a
        // subset of them (its annotations.go), and neither of these.
        return match route {
            Route::Header => Some(
                "Traefik's ingress-nginx provider (v3.6) reads no configuration-snippet: the header is not added, and nothing says so",
            ),
            Route::Rewrite => Some(
                "Traefik's ingress-nginx provider (v3.6) reads no rewrite-target: the path goes through unchanged, and nothing says so",
            ),
            Route::Cors => Some(
                "its CORS headers answer only a request that carries an Origin header, which the load does not send",
            ),
            Route::Base => None,
        };
    }
    match (style, route) {
        (Style::IngressNginx, Route::Header) => Some(
            "ingress-nginx takes nginx.ingress.kubernetes.io/configuration-snippet only when its ConfigMap sets allow-snippet-annotations: \"true\" (off by default since v1.9), and drops it without a word otherwise",
        ),
        (Style::NginxOrg, Route::Cors | Route::Header) => Some(
            "F5's controller takes nginx.org/location-snippets only with -enable-snippets",
        ),
        (Style::HaproxyOrg, Route::Cors) => Some(
            "HAProxy's ingress answers CORS only to a request that carries an Origin header, which the load does not send",
        ),
        _ => None,
    }
}

/// Whether profile `name` ran against its real controller in ingressbench's own
/// tests, in words for a user choosing it.
pub fn tested(name: &str) -> String {
    match controller(name).and_then(|c| c.tested) {
        Some(v) => format!("ran against {v} in ingressbench's tests"),
        None => "never run against its controller in ingressbench's tests: written from the controller's documentation".to_string(),
    }
}

/// Every controller profile name.
pub fn names() -> Vec<&'static str> {
    CONTROLLERS.iter().map(|c| c.name).collect()
}

/// Where the objects go and what they route to.
#[derive(Clone, Debug)]
pub struct Place {
    pub run: String,
    pub namespace: String,
    /// The Gateway an HTTPRoute attaches to: (namespace, name).
    pub gateway: Option<(String, String)>,
    /// The host the route matches (`None`: every host).
    pub host: Option<String>,
    /// The load is gRPC (`protocol: grpc`): a GRPCRoute in place of the HTTPRoute.
    pub grpc: bool,
    /// The TLS Secret the run made for the controller to terminate TLS with
    /// (`None`: the controller's own certificate, or plain HTTP): an Ingress names
    /// it in its `tls`, and for Traefik a TLSStore `default` makes it the
    /// certificate of connections that send no server name (a load to an IP).
    pub tls_secret: Option<String>,
    /// The host of the URL the load is sent to (an address, often): HAProxy
    /// Technologies' controller loads an Ingress's TLS Secret only for the hosts its
    /// `tls` names, so without `host` the Ingress names this one.
    pub url_host: Option<String>,
    /// The IngressClass the run's Ingresses name, when the controller was installed
    /// with another than its profile's (`kubernetes.ingress_class`).
    pub ingress_class: Option<String>,
    /// The run has behaviour probes that ask their fixture host
    /// ([`sut::routes::FIXTURE_HOST`]): [`fixture_objects`] are applied beside the
    /// route.
    pub fixture: bool,
}

impl Place {
    /// A place for unit tests: run `r1` in `namespace`, routes attached to
    /// `gateway`, nothing else set.
    #[cfg(test)]
    pub(crate) fn sample(namespace: &str, gateway: Option<(&str, &str)>) -> Place {
        Place {
            run: "r1".into(),
            namespace: namespace.into(),
            gateway: gateway.map(|(ns, name)| (ns.into(), name.into())),
            host: None,
            grpc: false,
            tls_secret: None,
            url_host: None,
            ingress_class: None,
            fixture: false,
        }
    }

    /// The IngressClass an Ingress of a controller of `profile_class` names here.
    pub fn class<'a>(&'a self, profile_class: &'a str) -> &'a str {
        self.ingress_class.as_deref().unwrap_or(profile_class)
    }
}

/// The CORS response headers of S3's `cors` change, as the lab's proxies add them.
const CORS: [(&str, &str); 3] = [
    ("Access-Control-Allow-Origin", "*"),
    ("Access-Control-Allow-Methods", "GET, POST, OPTIONS"),
    (
        "Access-Control-Allow-Headers",
        "Content-Type, Authorization",
    ),
];

fn headers_for(route: Route) -> Vec<(&'static str, &'static str)> {
    match route {
        Route::Cors => CORS.to_vec(),
        Route::Header => vec![("x-custom", "1")],
        Route::Base | Route::Rewrite => Vec::new(),
    }
}

fn metadata(name: &str, place: &Place, annotations: Value) -> Value {
    json!({
        "name": name,
        "namespace": place.namespace,
        "labels": {MANAGED_BY.0: MANAGED_BY.1, RUN_LABEL: place.run},
        "annotations": annotations,
    })
}

/// Why a change cannot be made for a controller.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{controller} cannot express the route change `{route}`: {why}")]
pub struct Unsupported {
    pub controller: &'static str,
    pub route: &'static str,
    pub why: String,
}

/// Whether `c` can express `route` at all, whatever the place: the scenario asks
/// this of every route step before a run starts, so a change a controller cannot make
/// is refused up front instead of failing minutes into a run.
///
/// # Errors
/// [`Unsupported`] naming the controller, the change and what to use instead.
pub fn check(c: &Controller, route: Route) -> Result<(), Unsupported> {
    match (c.routing, route) {
        (_, Route::Base) => Ok(()),
        (
            Routing::Ingress {
                style: Style::Contour,
                ..
            },
            _,
        ) => Err(Unsupported {
            controller: c.name,
            route: route.name(),
            why: "Contour's Ingress annotations set no response header and no rewrite: \
                  use the profile `contour` (HTTPRoute) for route changes"
                .into(),
        }),
        _ => Ok(()),
    }
}

/// Whether `c` can carry gRPC (`protocol: grpc`) with `route` in force: a Gateway
/// API profile routes it with a GRPCRoute, whose filters set and remove headers but
/// rewrite no path. Ingress and OpenShift profiles are refused for now: each
/// controller marks a gRPC backend with annotations of its own.
///
/// # Errors
/// [`Unsupported`] naming the controller, the change and what to use instead.
pub fn check_grpc(c: &Controller, route: Route) -> Result<(), Unsupported> {
    match (c.routing, route) {
        (Routing::HttpRoute, Route::Rewrite) => Err(Unsupported {
            controller: c.name,
            route: route.name(),
            why: "a GRPCRoute rewrites no path (gRPC methods are its paths)".into(),
        }),
        (Routing::HttpRoute, _) => Ok(()),
        _ => Err(Unsupported {
            controller: c.name,
            route: route.name(),
            why: "gRPC through it needs its own backend-protocol annotations, not written \
                  yet: use a Gateway API profile (GRPCRoute) such as `contour` or `gateway-api`"
                .into(),
        }),
    }
}

/// The objects that route the backends' Service through `c` with `route` in force.
/// Applying them (and deleting any earlier object of the run not among them) is the
/// whole change.
///
/// # Errors
/// [`Unsupported`] when [`check`] refuses the change, or an HTTPRoute has no Gateway
/// to attach to.
pub fn objects(c: &Controller, place: &Place, route: Route) -> Result<Vec<Value>, Unsupported> {
    check(c, route)?;
    if place.grpc {
        check_grpc(c, route)?;
    }
    match c.routing {
        Routing::Ingress { class, style } => Ok(ingress(place.class(class), style, place, route)),
        Routing::HttpRoute => {
            let Some((gw_ns, gw)) = &place.gateway else {
                return Err(Unsupported {
                    controller: c.name,
                    route: route.name(),
                    why: "an HTTPRoute needs a Gateway: set kubernetes.gateway (namespace/name)"
                        .into(),
                });
            };
            Ok(vec![gateway_route(place, gw_ns, gw, route)])
        }
        Routing::OpenShiftRoute => Ok(vec![openshift_route(place, route)]),
    }
}

/// An Ingress rule: `path` of `path_type` on `host` (`None`: every host) to port
/// [`SERVICE_PORT`] of the Service `service`.
fn ingress_rule(host: Option<&str>, path: &str, path_type: &str, service: &str) -> Value {
    let mut rule = json!({
        "http": {"paths": [{
            "path": path,
            "pathType": path_type,
            "backend": {"service": {"name": service, "port": {"number": SERVICE_PORT}}},
        }]}
    });
    if let Some(h) = host {
        rule["host"] = Value::String(h.to_string());
    }
    rule
}

/// The name of the behaviour probes' fixture objects: the Service with no
/// endpoint and the route to it.
pub const FIXTURE_NAME: &str = "ib-empty";

/// The behaviour probes' fixture ([`sut::routes::FIXTURE_HOST`]) as a team would
/// write it for `c`: a Service whose selector matches no pod (so no endpoint, ever),
/// then an Ingress or HTTPRoute routing the prefix [`sut::routes::FIXTURE_EMPTY_PATH`]
/// of the fixture host to it, nothing else on that host. What the controller answers
/// there, and on another path of the host, is what the probes `no-ready-endpoint`
/// and `unknown-path` read. The Service first: the route names it. None for an
/// OpenShift Route (not rendered), or an HTTPRoute with no Gateway.
pub fn fixture_objects(c: &Controller, place: &Place) -> Vec<Value> {
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(FIXTURE_NAME, place, json!({})),
        "spec": {
            "selector": {"ingressbench.io/no-pod": "none"},
            "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": SERVICE_PORT}],
        },
    });
    let path = sut::routes::FIXTURE_EMPTY_PATH;
    let host = sut::routes::FIXTURE_HOST;
    let route = match (c.routing, &place.gateway) {
        (Routing::Ingress { class, style }, _) => {
            let mut annotations = serde_json::Map::new();
            if place.tls_secret.is_some() && style == Style::Traefik {
                // As the run's own Ingress: Traefik serves it over TLS only when told.
                annotations.insert(
                    "traefik.ingress.kubernetes.io/router.tls".into(),
                    Value::String("true".into()),
                );
            }
            json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": metadata(FIXTURE_NAME, place, Value::Object(annotations)),
                "spec": {"ingressClassName": place.class(class),
                    "rules": [ingress_rule(Some(host), path, "Prefix", FIXTURE_NAME)]},
            })
        }
        (Routing::HttpRoute, Some((gw_ns, gw))) => json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": metadata(FIXTURE_NAME, place, json!({})),
            "spec": {
                "parentRefs": [{"name": gw, "namespace": gw_ns}],
                "hostnames": [host],
                "rules": [{
                    "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                    "backendRefs": [{"name": FIXTURE_NAME, "port": SERVICE_PORT}],
                }],
            },
        }),
        (Routing::HttpRoute, None) | (Routing::OpenShiftRoute, _) => return Vec::new(),
    };
    vec![service, route]
}

/// The label naming the route of a route set an object belongs to (`r<i>`), so a
/// watch or a list can tell the set's objects from the run's one route.
pub const ROUTE_SET_LABEL: &str = "ingressbench.io/route";

/// The name of route `i`'s objects: `ib-r<i>`.
pub fn route_set_name(set: &RouteSet, i: u32) -> String {
    format!("ib-{}", set.name(i))
}

/// Whether `c` can render a route set: every route must answer with its own
/// [`ROUTE_HEADER`], so a controller that sets no response header cannot.
///
/// # Errors
/// [`Unsupported`] naming the controller and what to use instead.
pub fn check_route_set(c: &Controller) -> Result<(), Unsupported> {
    match c.routing {
        Routing::Ingress {
            style: Style::Contour,
            ..
        } => Err(Unsupported {
            controller: c.name,
            route: "routes",
            why: "Contour's Ingress annotations set no response header, and each route of a \
                  set must name itself in one: use the profile `contour` (HTTPRoute)"
                .into(),
        }),
        _ => Ok(()),
    }
}

/// The objects of route set `set` for `c`, route by route: route `i` is one routing
/// object `ib-r<i>` (an HTTPRoute, an Ingress or an OpenShift Route) matching the
/// path prefix `/r<i>` on its host and adding `x-route: r<i>` to its responses, to the
/// same backends' Service as the run's own route. One object per route, as users
/// write them and as gateway benchmarks count them (an Ingress's annotations apply to
/// all its rules, so a header per route needs an Ingress per route); Traefik's has a
/// Middleware of the same name beside it, listed first.
///
/// # Errors
/// [`Unsupported`] when [`check_route_set`] refuses, or an HTTPRoute has no Gateway.
pub fn route_set_objects(
    c: &Controller,
    place: &Place,
    set: &RouteSet,
) -> Result<Vec<Vec<Value>>, Unsupported> {
    check_route_set(c)?;
    let gateway = match (c.routing, &place.gateway) {
        (Routing::HttpRoute, None) => {
            return Err(Unsupported {
                controller: c.name,
                route: "routes",
                why: "an HTTPRoute needs a Gateway: set kubernetes.gateway (namespace/name)".into(),
            })
        }
        (_, gw) => gw.clone(),
    };
    Ok((0..set.count)
        .map(|i| {
            let name = route_set_name(set, i);
            let (host, path, marker) = (set.host(i), set.path(i), set.marker(i));
            let meta = |annotations: Value| {
                let mut m = metadata(&name, place, annotations);
                m["labels"][ROUTE_SET_LABEL] = Value::String(set.name(i));
                m
            };
            match (c.routing, &gateway) {
                (Routing::HttpRoute, Some((gw_ns, gw))) => vec![json!({
                    "apiVersion": "gateway.networking.k8s.io/v1",
                    "kind": "HTTPRoute",
                    "metadata": meta(json!({})),
                    "spec": {
                        "parentRefs": [{"name": gw, "namespace": gw_ns}],
                        "hostnames": [host],
                        "rules": [{
                            "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                            "filters": [{
                                "type": "ResponseHeaderModifier",
                                "responseHeaderModifier": {"set": [{"name": ROUTE_HEADER, "value": marker}]},
                            }],
                            "backendRefs": [{"name": BACKEND, "port": SERVICE_PORT}],
                        }],
                    },
                })],
                (Routing::OpenShiftRoute, _) => vec![json!({
                    "apiVersion": "route.openshift.io/v1",
                    "kind": "Route",
                    "metadata": meta(json!({})),
                    "spec": {
                        "host": host,
                        "path": path,
                        "to": {"kind": "Service", "name": BACKEND},
                        "port": {"targetPort": "http"},
                        "httpHeaders": {"actions": {"response": [{
                            "name": ROUTE_HEADER, "action": {"type": "Set", "set": {"value": marker}}
                        }]}},
                    },
                })],
                (Routing::Ingress { class, style }, _) => {
                    let mut out = Vec::new();
                    let header = match style {
                        Style::IngressNginx => Some((
                            "nginx.ingress.kubernetes.io/configuration-snippet",
                            format!("more_set_headers \"{ROUTE_HEADER}: {marker}\";"),
                        )),
                        Style::NginxOrg => Some((
                            "nginx.org/location-snippets",
                            format!("add_header {ROUTE_HEADER} \"{marker}\" always;"),
                        )),
                        Style::HaproxyOrg => Some((
                            "haproxy.org/response-set-header",
                            format!("{ROUTE_HEADER} {marker}"),
                        )),
                        Style::Traefik => {
                            out.push(json!({
                                "apiVersion": "traefik.io/v1alpha1",
                                "kind": "Middleware",
                                "metadata": meta(json!({})),
                                "spec": {"headers": {"customResponseHeaders": {ROUTE_HEADER: marker}}},
                            }));
                            Some((
                                "traefik.ingress.kubernetes.io/router.middlewares",
                                format!("{}-{name}@kubernetescrd", place.namespace),
                            ))
                        }
                        // `check_route_set` let none through.
                        Style::Contour => None,
                    };
                    let annotations: serde_json::Map<String, Value> = header
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), Value::String(v)))
                        .collect();
                    out.push(json!({
                        "apiVersion": "networking.k8s.io/v1",
                        "kind": "Ingress",
                        "metadata": meta(Value::Object(annotations)),
                        "spec": {"ingressClassName": place.class(class),
                            "rules": [ingress_rule(Some(&host), &path, "Prefix", BACKEND)]},
                    }));
                    out
                }
                (Routing::HttpRoute, None) => Vec::new(),
            }
        })
        .collect())
}

fn ingress(class: &str, style: Style, place: &Place, route: Route) -> Vec<Value> {
    let mut annotations = serde_json::Map::new();
    let mut path = "/".to_string();
    let mut path_type = "Prefix";
    let mut extra = Vec::new();
    let mut put = |k: &str, v: String| {
        annotations.insert(k.to_string(), Value::String(v));
    };
    let headers = headers_for(route);
    match style {
        Style::IngressNginx => match route {
            Route::Base => {}
            Route::Cors => {
                put("nginx.ingress.kubernetes.io/enable-cors", "true".into());
                put(
                    "nginx.ingress.kubernetes.io/cors-allow-origin",
                    CORS[0].1.into(),
                );
                put(
                    "nginx.ingress.kubernetes.io/cors-allow-methods",
                    CORS[1].1.into(),
                );
                put(
                    "nginx.ingress.kubernetes.io/cors-allow-headers",
                    CORS[2].1.into(),
                );
            }
            Route::Header => put(
                "nginx.ingress.kubernetes.io/configuration-snippet",
                "more_set_headers \"x-custom: 1\";".into(),
            ),
            Route::Rewrite => {
                put("nginx.ingress.kubernetes.io/use-regex", "true".into());
                put(
                    "nginx.ingress.kubernetes.io/rewrite-target",
                    "/rewritten/$1".into(),
                );
                path = "/(.*)".into();
                path_type = "ImplementationSpecific";
            }
        },
        Style::NginxOrg => match route {
            Route::Base => {}
            Route::Cors | Route::Header => put(
                "nginx.org/location-snippets",
                headers
                    .iter()
                    .map(|(k, v)| format!("add_header {k} \"{v}\" always;"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            Route::Rewrite => put(
                "nginx.org/rewrites",
                format!("serviceName={BACKEND} rewrite=/rewritten/"),
            ),
        },
        Style::HaproxyOrg => match route {
            Route::Base => {}
            Route::Cors => {
                put("haproxy.org/cors-enable", "true".into());
                put("haproxy.org/cors-allow-origin", CORS[0].1.into());
                put("haproxy.org/cors-allow-methods", CORS[1].1.into());
                put("haproxy.org/cors-allow-headers", CORS[2].1.into());
            }
            Route::Header => put("haproxy.org/response-set-header", "x-custom 1".into()),
            Route::Rewrite => put("haproxy.org/path-rewrite", "(.*) /rewritten\\1".into()),
        },
        // `check` let only `base` through.
        Style::Contour => {}
        Style::Traefik => {
            let middleware = match route {
                Route::Base => None,
                Route::Cors | Route::Header => Some(json!({
                    "headers": {"customResponseHeaders":
                        headers.iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
                            .collect::<serde_json::Map<_, _>>()}
                })),
                Route::Rewrite => Some(json!({
                    "replacePathRegex": {"regex": "^/(.*)", "replacement": "/rewritten/$1"}
                })),
            };
            if let Some(spec) = middleware {
                put(
                    "traefik.ingress.kubernetes.io/router.middlewares",
                    format!("{}-{ROUTE_NAME}@kubernetescrd", place.namespace),
                );
                extra.push(json!({
                    "apiVersion": "traefik.io/v1alpha1",
                    "kind": "Middleware",
                    "metadata": metadata(ROUTE_NAME, place, json!({})),
                    "spec": spec,
                }));
            }
        }
    }
    let rule = ingress_rule(place.host.as_deref(), &path, path_type, BACKEND);
    if place.tls_secret.is_some() && style == Style::Traefik {
        // Traefik's Ingress provider loads the certificate of `tls`, but serves the
        // router over TLS only when told (measured: 404 to every TLS request
        // without it).
        annotations.insert(
            "traefik.ingress.kubernetes.io/router.tls".into(),
            Value::String("true".into()),
        );
    }
    let mut spec = json!({"ingressClassName": class, "rules": [rule]});
    if let Some(secret) = &place.tls_secret {
        let mut tls = json!({"secretName": secret});
        if let Some(h) = &place.host {
            tls["hosts"] = json!([h]);
        } else if let (Style::HaproxyOrg, Some(h)) = (style, &place.url_host) {
            // Its certificate then serves clients that send no server name too:
            // the only one in its frontend's folder.
            tls["hosts"] = json!([h]);
        }
        spec["tls"] = json!([tls]);
        if style == Style::Traefik {
            extra.push(json!({
                "apiVersion": "traefik.io/v1alpha1",
                "kind": "TLSStore",
                "metadata": metadata("default", place, json!({})),
                "spec": {"defaultCertificate": {"secretName": secret}},
            }));
        }
    }
    let mut out = vec![json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata(ROUTE_NAME, place, Value::Object(annotations)),
        "spec": spec,
    })];
    // The Middleware first: the Ingress names it.
    extra.append(&mut out);
    extra
}

/// The run's Gateway API route: an HTTPRoute (every path, with `PathPrefix /`), or
/// for a gRPC load (`place.grpc`) a GRPCRoute (every method of every service, which
/// the controller then reaches over h2c). Both set the route's response headers;
/// only the HTTPRoute rewrites (`check_grpc` refuses a rewrite for gRPC).
fn gateway_route(place: &Place, gw_ns: &str, gw: &str, route: Route) -> Value {
    let mut filters = Vec::new();
    let headers = headers_for(route);
    if !headers.is_empty() {
        filters.push(json!({
            "type": "ResponseHeaderModifier",
            "responseHeaderModifier": {"set": headers.iter()
                .map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>()},
        }));
    }
    if route == Route::Rewrite && !place.grpc {
        // The match is the prefix `/`. Gateway API says replacing it with `/rewritten`
        // turns `/x` into `/rewritten/x`, but Contour 1.33 replaces the characters
        // (`/rewrittenx`, measured); with the trailing slash both readings agree.
        filters.push(json!({
            "type": "URLRewrite",
            "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/rewritten/"}},
        }));
    }
    let mut rule = json!({
        "filters": filters,
        "backendRefs": [{"name": BACKEND, "port": SERVICE_PORT}],
    });
    if !place.grpc {
        rule["matches"] = json!([{"path": {"type": "PathPrefix", "value": "/"}}]);
    }
    let mut spec = json!({
        "parentRefs": [{"name": gw, "namespace": gw_ns}],
        "rules": [rule],
    });
    if let Some(h) = &place.host {
        spec["hostnames"] = json!([h]);
    }
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": if place.grpc { "GRPCRoute" } else { "HTTPRoute" },
        "metadata": metadata(ROUTE_NAME, place, json!({})),
        "spec": spec,
    })
}

fn openshift_route(place: &Place, route: Route) -> Value {
    let mut annotations = serde_json::Map::new();
    if route == Route::Rewrite {
        annotations.insert(
            "haproxy.router.openshift.io/rewrite-target".into(),
            Value::String("/rewritten/".into()),
        );
    }
    let mut spec = json!({
        "to": {"kind": "Service", "name": BACKEND},
        "port": {"targetPort": "http"},
        "tls": {"termination": "edge"},
    });
    let headers = headers_for(route);
    if !headers.is_empty() {
        spec["httpHeaders"] = json!({"actions": {"response": headers.iter().map(|(k, v)| json!({
            "name": k, "action": {"type": "Set", "set": {"value": v}}
        })).collect::<Vec<_>>()}});
    }
    if let Some(h) = &place.host {
        spec["host"] = Value::String(h.clone());
    }
    json!({
        "apiVersion": "route.openshift.io/v1",
        "kind": "Route",
        "metadata": metadata(ROUTE_NAME, place, Value::Object(annotations)),
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probes_fixture_is_a_service_with_no_pod_and_a_route_of_its_own_host() {
        for name in names() {
            let c = controller(name).unwrap();
            let tls = Place {
                tls_secret: Some("ib-tls".into()),
                ..place()
            };
            let objs = fixture_objects(c, &tls);
            if c.routing == Routing::OpenShiftRoute {
                assert!(objs.is_empty(), "{name}");
                continue;
            }
            assert_eq!(objs.len(), 2, "{name}");
            let (svc, route) = (&objs[0], &objs[1]);
            assert_eq!(svc["kind"], "Service");
            assert_eq!(svc["metadata"]["name"], FIXTURE_NAME);
            // Its selector is a label no pod of the run has: the backends' is not it.
            assert_eq!(
                svc["spec"]["selector"],
                json!({"ingressbench.io/no-pod": "none"})
            );
            assert_eq!(
                svc["metadata"]["labels"][RUN_LABEL], "r1",
                "{name}: the run's own"
            );
            assert_eq!(route["metadata"]["labels"][RUN_LABEL], "r1");
            let text = route.to_string();
            assert!(text.contains(sut::routes::FIXTURE_HOST), "{name}: {text}");
            assert!(
                text.contains(sut::routes::FIXTURE_EMPTY_PATH),
                "{name}: {text}"
            );
            assert!(
                !text.contains(BACKEND),
                "{name}: the fixture never reaches the backends: {text}"
            );
            match c.routing {
                Routing::HttpRoute => {
                    assert_eq!(route["kind"], "HTTPRoute");
                    assert_eq!(route["spec"]["parentRefs"][0]["name"], "gw");
                    assert_eq!(
                        route["spec"]["rules"][0]["backendRefs"][0]["name"],
                        FIXTURE_NAME
                    );
                }
                _ => {
                    assert_eq!(route["kind"], "Ingress");
                    let rule = &route["spec"]["rules"][0];
                    assert_eq!(rule["host"], sut::routes::FIXTURE_HOST);
                    assert_eq!(rule["http"]["paths"][0]["pathType"], "Prefix");
                    let traefik = route["metadata"]["annotations"]
                        ["traefik.ingress.kubernetes.io/router.tls"]
                        == "true";
                    assert_eq!(traefik, name == "traefik", "{name}");
                }
            }
        }
        // An HTTPRoute with no Gateway has nothing to attach to: no fixture.
        let gw = controller("contour").unwrap();
        let none = Place {
            gateway: None,
            ..place()
        };
        assert!(fixture_objects(gw, &none).is_empty());
    }

    #[test]
    fn haproxy_org_names_the_urls_host_in_tls_when_the_routes_have_none() {
        let c = controller("haproxy-ingress").unwrap();
        let mut p = Place {
            run: "r".into(),
            namespace: "ns".into(),
            gateway: None,
            host: None,
            grpc: false,
            tls_secret: Some("ib-tls".into()),
            url_host: Some("198.18.0.1".into()),
            ingress_class: None,
            fixture: false,
        };
        let objs = objects(c, &p, Route::Base).unwrap();
        assert_eq!(objs[0]["spec"]["tls"][0]["hosts"], json!(["198.18.0.1"]));
        assert!(objs[0]["spec"]["rules"][0]["host"].is_null());
        p.host = Some("bench.example".into());
        let objs = objects(c, &p, Route::Base).unwrap();
        assert_eq!(objs[0]["spec"]["tls"][0]["hosts"], json!(["bench.example"]));
        // Other controllers load the Secret without hosts: none added.
        p.host = None;
        let objs = objects(controller("traefik").unwrap(), &p, Route::Base).unwrap();
        assert!(
            objs.iter().all(|o| o["spec"]["tls"][0]["hosts"].is_null()),
            "{objs:?}"
        );
    }

    fn place() -> Place {
        Place::sample("ingressbench-r1", Some(("infra", "gw")))
    }

    #[test]
    fn grpc_is_a_grpcroute_for_gateway_api_profiles_and_refused_by_the_others() {
        let grpc = Place {
            grpc: true,
            ..place()
        };
        let contour = controller("contour").unwrap();
        let o = &objects(contour, &grpc, Route::Header).unwrap()[0];
        assert_eq!(o["kind"], "GRPCRoute");
        assert_eq!(o["spec"]["rules"][0]["backendRefs"][0]["name"], BACKEND);
        assert_eq!(
            o["spec"]["rules"][0]["filters"][0]["responseHeaderModifier"]["set"][0]["name"],
            "x-custom"
        );
        assert!(
            o["spec"]["rules"][0].get("matches").is_none(),
            "every method"
        );
        assert!(objects(contour, &grpc, Route::Rewrite).is_err());
        for name in ["traefik", "ingress-nginx", "openshift-router"] {
            let e = objects(controller(name).unwrap(), &grpc, Route::Base).unwrap_err();
            assert!(e.why.contains("Gateway API"), "{e}");
        }
    }

    const ROUTES: [Route; 4] = [Route::Base, Route::Cors, Route::Header, Route::Rewrite];

    #[test]
    fn every_profile_expresses_every_route_it_accepts_with_labelled_objects_to_the_backends() {
        for c in CONTROLLERS {
            for r in ROUTES {
                if check(c, r).is_err() {
                    assert!(objects(c, &place(), r).is_err(), "{} {r:?}", c.name);
                    continue;
                }
                let objs = objects(c, &place(), r).unwrap_or_else(|e| panic!("{e}"));
                assert!(!objs.is_empty(), "{} {r:?}", c.name);
                for o in &objs {
                    assert_eq!(o["metadata"]["labels"][RUN_LABEL], "r1", "{o}");
                    assert_eq!(o["metadata"]["namespace"], "ingressbench-r1");
                }
                let text = objs.last().unwrap().to_string();
                assert!(text.contains(BACKEND), "{}: {text}", c.name);
            }
        }
        let mut n = names();
        n.sort_unstable();
        n.dedup();
        assert_eq!(n.len(), CONTROLLERS.len(), "unique names");
    }

    #[test]
    fn base_adds_nothing_and_each_change_adds_its_own() {
        let ingress_nginx = controller("ingress-nginx").unwrap();
        let base = &objects(ingress_nginx, &place(), Route::Base).unwrap()[0];
        assert_eq!(base["metadata"]["annotations"], json!({}));
        assert_eq!(base["spec"]["ingressClassName"], "nginx");
        let cors = &objects(ingress_nginx, &place(), Route::Cors).unwrap()[0];
        assert_eq!(
            cors["metadata"]["annotations"]["nginx.ingress.kubernetes.io/cors-allow-origin"],
            "*"
        );
        let rw = &objects(ingress_nginx, &place(), Route::Rewrite).unwrap()[0];
        assert_eq!(rw["spec"]["rules"][0]["http"]["paths"][0]["path"], "/(.*)");

        let gw = controller("gateway-api").unwrap();
        let base = &objects(gw, &place(), Route::Base).unwrap()[0];
        assert_eq!(base["spec"]["rules"][0]["filters"], json!([]));
        assert_eq!(base["spec"]["parentRefs"][0]["name"], "gw");
        let h = &objects(gw, &place(), Route::Header).unwrap()[0];
        assert_eq!(
            h["spec"]["rules"][0]["filters"][0]["responseHeaderModifier"]["set"][0],
            json!({"name": "x-custom", "value": "1"})
        );
        let rw = &objects(gw, &place(), Route::Rewrite).unwrap()[0];
        assert_eq!(
            rw["spec"]["rules"][0]["filters"][0]["urlRewrite"]["path"]["replacePrefixMatch"],
            "/rewritten/",
            "`/x` must reach the backend as `/rewritten/x` whether the prefix `/` is replaced \
             as a path segment or as characters"
        );
    }

    #[test]
    fn with_the_runs_secret_an_ingress_terminates_tls_and_traefik_serves_it_to_every_client() {
        let tls = Place {
            tls_secret: Some("ib-tls".into()),
            url_host: None,
            host: Some("bench.example".into()),
            ..place()
        };
        let t = controller("traefik").unwrap();
        let objs = objects(t, &tls, Route::Header).unwrap();
        let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["Middleware", "TLSStore", "Ingress"]);
        assert_eq!(objs[1]["metadata"]["name"], "default");
        assert_eq!(
            objs[1]["spec"]["defaultCertificate"]["secretName"],
            "ib-tls"
        );
        let ing = &objs[2];
        assert_eq!(
            ing["spec"]["tls"],
            json!([{"secretName": "ib-tls", "hosts": ["bench.example"]}])
        );
        assert_eq!(
            ing["metadata"]["annotations"]["traefik.ingress.kubernetes.io/router.tls"],
            "true"
        );
        // Another controller's Ingress names the Secret, nothing more.
        let n = controller("ingress-nginx").unwrap();
        let objs = objects(n, &tls, Route::Base).unwrap();
        assert_eq!(objs.len(), 1);
        assert_eq!(objs[0]["spec"]["tls"][0]["secretName"], "ib-tls");
        // Without it, no TLS at all.
        let plain = objects(t, &place(), Route::Base).unwrap();
        assert!(plain[0]["spec"].get("tls").is_none());
        assert_eq!(plain.len(), 1);
    }

    #[test]
    fn traefik_changes_are_a_middleware_the_ingress_names() {
        let t = controller("traefik").unwrap();
        let base = objects(t, &place(), Route::Base).unwrap();
        assert_eq!(base.len(), 1, "no middleware at base");
        let cors = objects(t, &place(), Route::Cors).unwrap();
        assert_eq!(cors.len(), 2);
        assert_eq!(cors[0]["kind"], "Middleware");
        assert_eq!(
            cors[0]["spec"]["headers"]["customResponseHeaders"]["Access-Control-Allow-Origin"],
            "*"
        );
        assert_eq!(
            cors[1]["metadata"]["annotations"]["traefik.ingress.kubernetes.io/router.middlewares"],
            "ingressbench-r1-ib-route@kubernetescrd"
        );
    }

    #[test]
    fn contour_through_ingress_routes_base_and_refuses_the_rest_by_name() {
        let c = controller("contour-ingress").unwrap();
        let base = objects(c, &place(), Route::Base).unwrap();
        assert_eq!(base.len(), 1);
        assert_eq!(base[0]["spec"]["ingressClassName"], "contour");
        assert_eq!(base[0]["metadata"]["annotations"], json!({}));
        for r in [Route::Cors, Route::Header, Route::Rewrite] {
            let e = check(c, r).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!(
                    "contour-ingress cannot express the route change `{}`",
                    r.name()
                )),
                "{e}"
            );
            assert!(e.contains("use the profile `contour`"), "{e}");
        }
        // Every other profile expresses all four.
        for c in CONTROLLERS.iter().filter(|c| c.name != "contour-ingress") {
            for r in ROUTES {
                assert!(check(c, r).is_ok(), "{} {r:?}", c.name);
            }
        }
    }

    #[test]
    fn a_route_set_is_one_object_per_route_on_its_host_and_path_naming_itself() {
        let set = RouteSet::new(5, 2);
        for c in CONTROLLERS {
            let Ok(routes) = route_set_objects(c, &place(), &set) else {
                assert_eq!(c.name, "contour-ingress", "only Contour's Ingress refuses");
                let e = check_route_set(c).unwrap_err().to_string();
                assert!(e.contains("use the profile `contour`"), "{e}");
                continue;
            };
            assert_eq!(routes.len(), 5, "{}", c.name);
            for (i, objs) in routes.iter().enumerate() {
                let route = objs.last().unwrap();
                let text = route.to_string();
                let i = i as u32;
                assert_eq!(route["metadata"]["name"], format!("ib-r{i}"), "{}", c.name);
                assert_eq!(route["metadata"]["labels"][RUN_LABEL], "r1");
                assert_eq!(
                    route["metadata"]["labels"][ROUTE_SET_LABEL],
                    format!("r{i}")
                );
                // Its own host and path, to the shared backends, and its marker in
                // the object (an annotation, a filter or a Middleware before it).
                assert!(
                    text.contains(&format!("\"h{}.routes.test\"", i % 2)),
                    "{text}"
                );
                assert!(text.contains(&format!("\"/r{i}\"")), "{text}");
                assert!(text.contains(BACKEND), "{text}");
                // The marker is in what the controller renders (spec, annotations),
                // not only in names and labels.
                let rendered: Vec<Value> = objs
                    .iter()
                    .map(|o| json!([o["spec"], o["metadata"]["annotations"]]))
                    .collect();
                let all = serde_json::to_string(&rendered).unwrap();
                assert!(all.contains(ROUTE_HEADER), "{}: {all}", c.name);
                assert!(
                    all.contains(&format!("\"r{i}\""))
                        || all.contains(&format!("r{i}\\\""))
                        || all.contains(&format!(" r{i}\"")),
                    "{}: {all}",
                    c.name
                );
            }
        }
        let gw = route_set_objects(controller("contour").unwrap(), &place(), &set).unwrap();
        let r3 = &gw[3][0];
        assert_eq!(r3["spec"]["hostnames"], json!(["h1.routes.test"]));
        assert_eq!(
            r3["spec"]["rules"][0]["matches"][0]["path"],
            json!({"type": "PathPrefix", "value": "/r3"})
        );
        assert_eq!(
            r3["spec"]["rules"][0]["filters"][0]["responseHeaderModifier"]["set"][0],
            json!({"name": "x-route", "value": "r3"})
        );
        let t = route_set_objects(controller("traefik").unwrap(), &place(), &set).unwrap();
        assert_eq!(t[2][0]["kind"], "Middleware");
        assert_eq!(
            t[2][0]["spec"]["headers"]["customResponseHeaders"]["x-route"],
            "r2"
        );
        assert_eq!(
            t[2][1]["metadata"]["annotations"]["traefik.ingress.kubernetes.io/router.middlewares"],
            "ingressbench-r1-ib-r2@kubernetescrd"
        );
        let mut p = place();
        p.gateway = None;
        let e = route_set_objects(controller("contour").unwrap(), &p, &set).unwrap_err();
        assert!(e.to_string().contains("kubernetes.gateway"), "{e}");
    }

    #[test]
    fn an_http_route_without_a_gateway_is_refused_with_the_fix() {
        let mut p = place();
        p.gateway = None;
        let e = objects(controller("contour").unwrap(), &p, Route::Base).unwrap_err();
        assert!(e.to_string().contains("kubernetes.gateway"), "{e}");
        assert!(e.to_string().starts_with("contour cannot express"), "{e}");
    }
}
