//! A case's load: the engine's settings resolved from the scenario once, but for the
//! target, which only the deployed system knows ([`CaseLoad::at`]).

use crate::{Protocol, Requests, Scenario};
use engine::{tls::TlsOptions, LoadSpec};
use std::path::PathBuf;
use std::time::Duration;

/// What a `protocol: grpc` scenario calls: the built-in backend's Echo.
pub const GRPC_METHOD: &str = "ingressbench.Backend/Echo";
/// The size of each call's message, bytes.
pub const GRPC_PAYLOAD: usize = 100;

/// The engine's settings for one case, resolved from the scenario when the plan is
/// built. Only the URL, the request mix built on it and the CA to trust wait for the
/// deployed system: [`CaseLoad::at`] fills them in.
#[derive(Clone, Debug)]
pub struct CaseLoad {
    /// Every setting but the target's (`url` is a placeholder, `targets` empty).
    pub spec: LoadSpec,
    /// The request mix, built on the target's URL.
    pub requests: RequestsPlan,
}

/// A case's request mix, before the URL it is sent to is known.
#[derive(Clone, Debug, PartialEq)]
pub enum RequestsPlan {
    /// The one request of the studies: `GET /`.
    One,
    /// `requests:` as a list.
    List(Vec<crate::RequestEntry>),
    /// `requests: {from: routes}`: one request per route of `set`, route `i`
    /// weighted `1 / (i + 1)^skew`.
    FromRoutes { set: lab::RouteSet, skew: f64 },
}

impl CaseLoad {
    /// The load of `scn` as written (a sizing row or a fraction adjusts its copy).
    pub fn of(scn: &Scenario) -> CaseLoad {
        CaseLoad {
            spec: load_spec(scn),
            requests: RequestsPlan::of(scn),
        }
    }

    /// The engine's settings against `url`, trusting `cacert`.
    pub fn at(&self, url: &str, cacert: Option<PathBuf>) -> LoadSpec {
        let mut spec = self.spec.clone();
        spec.url = url.to_string();
        spec.targets = self.requests.targets(url);
        spec.tls.cacert = cacert;
        spec
    }
}

/// A stand-in for the address a platform gives the load, so the engine can check
/// the settings before anything is started: the checks do not depend on it.
pub(crate) fn placeholder_url(tls: bool) -> &'static str {
    if tls {
        "https://127.0.0.1:1/"
    } else {
        "http://127.0.0.1:1/"
    }
}

impl RequestsPlan {
    /// `scn`'s `requests:` (with its `routes:` for `{from: routes}`).
    pub fn of(scn: &Scenario) -> RequestsPlan {
        match (&scn.requests, &scn.routes) {
            (Requests::List(l), _) => RequestsPlan::List(l.clone()),
            (Requests::FromRoutes(f), Some(r)) => RequestsPlan::FromRoutes {
                set: lab::RouteSet::new(r.count, r.hosts),
                skew: f.skew,
            },
            _ => RequestsPlan::One,
        }
    }

    /// The engine's request mix against `url`: an entry's host (default: the URL's)
    /// names its virtual host; the URL's scheme is kept. An entry whose path does not
    /// start with `/` keeps it as given, for the engine to refuse by its number.
    pub fn targets(&self, url: &str) -> Vec<engine::targets::TargetSpec> {
        let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
        let authority = rest.split('/').next().unwrap_or(rest);
        let list = match self {
            RequestsPlan::List(l) => l,
            RequestsPlan::FromRoutes { set, skew } => return from_routes(scheme, *set, *skew),
            RequestsPlan::One => return Vec::new(),
        };
        list.iter()
            .enumerate()
            .map(|(i, r)| {
                let host = r.host.as_deref().unwrap_or(authority);
                let mut headers = r.headers.clone();
                if r.host.is_some() {
                    headers.push(format!("Host: {host}"));
                }
                engine::targets::TargetSpec {
                    method: r.method.clone(),
                    url: if r.path.starts_with('/') {
                        format!("{scheme}://{host}{}", r.path)
                    } else {
                        format!("{scheme}://{host}/{}", r.path)
                    },
                    headers,
                    body: r.body.clone().into_bytes(),
                    weight: r.weight,
                    line: i + 1,
                }
            })
            .collect()
    }
}

/// One request per route of `set`, route `i` weighted `1 / (i + 1)^skew` in
/// millionths (at least 1).
fn from_routes(scheme: &str, set: lab::RouteSet, skew: f64) -> Vec<engine::targets::TargetSpec> {
    (0..set.count)
        .map(|i| {
            let host = set.host(i);
            let weight = if skew == 0.0 {
                1
            } else {
                (1e6 / f64::from(i + 1).powf(skew)).round().max(1.0) as u32
            };
            engine::targets::TargetSpec {
                method: "GET".into(),
                url: format!("{scheme}://{host}{}", set.path(i)),
                headers: vec![format!("Host: {host}")],
                body: Vec::new(),
                weight,
                line: i as usize + 1,
            }
        })
        .collect()
}

/// The engine's settings for a scenario's load, against a placeholder URL (its
/// request mix built on it): what [`Scenario::parse`] checks, and what each case's
/// [`CaseLoad::spec`] starts from.
pub fn load_spec(scn: &Scenario) -> LoadSpec {
    let mut routes = Vec::new();
    crate::routes_in(&scn.changes, &mut routes);
    let changes_routes = !routes.is_empty();
    let load = &scn.load;
    let url = placeholder_url(scn.tls.enabled);
    LoadSpec {
        url: url.to_string(),
        method: "GET".into(),
        headers: Vec::new(),
        body: Vec::new(),
        targets: RequestsPlan::of(scn).targets(url),
        targets_from: String::new(),
        threads: Some(load.threads),
        connections: load.connections,
        // With `rates` there is no fixed rate: each run's is set from the search's
        // maximum, and this stands in for it so the rest can be checked.
        rate: Some(if load.rates.is_empty() && scn.sizing.is_none() {
            load.rate.fixed()
        } else {
            1.0
        }),
        profile: load.rate.plan().cloned(),
        schedule: load.schedule,
        // A sizing scan's steps have the search's window; this stands in for it.
        duration: match (&scn.sizing, &scn.search) {
            (Some(_), Some(sr)) => sr.duration.0,
            (Some(_), None) => Duration::from_secs(1),
            _ => load.duration.0,
        },
        warmup: load.warmup.0,
        timeout: load.timeout.0,
        connect_timeout: load.connect_timeout.0,
        send_window: load.send_window.0,
        new_connection: load.new_connection,
        reuse_closed: load.reuse_closed,
        tls: TlsOptions {
            insecure: false,
            cacert: None,
            version: scn
                .tls
                .enabled
                .then_some(crate::sizing::version_name(scn.tls.version)),
            resume: false,
        },
        backend_header: "x-backend".into(),
        // Only a scenario that changes routes pays for looking at every response.
        markers: if changes_routes {
            lab::Route::markers()
        } else {
            Vec::new()
        },
        sample: load.sample,
        cpus: Vec::new(),
        http2: engine::Http2Spec {
            // HTTP/2 over TLS by ALPN; on a cluster without TLS, h2c to the
            // controller's plain port (the scenario refuses that locally).
            protocol: match scn.protocol {
                Protocol::Http1 => engine::Protocol::Http1,
                _ if scn.tls.enabled => engine::Protocol::H2,
                _ => engine::Protocol::H2c,
            },
            streams: load.streams,
            grpc: (scn.protocol == Protocol::Grpc).then(|| engine::GrpcCall {
                method: GRPC_METHOD.into(),
                message: engine::GrpcCall::payload(GRPC_PAYLOAD),
            }),
            window: None,
        },
    }
}
