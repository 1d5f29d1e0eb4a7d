//! The annotation corpus (issue 54): ingress-nginx's annotated behaviours, each an
//! Ingress (or two) on a host of its own with the probes that show what the
//! annotation does. A team leaving ingress-nginx carries hundreds of Ingresses whose
//! behaviour lives in annotations; the corpus is applied beside the run's route so
//! that the same requests, sent through ingress-nginx and through each candidate,
//! say which behaviours a candidate keeps, changes or silently ignores.
//!
//! This module is data and a pure translation: the fixtures as ingress-nginx reads
//! them ([`CORPUS`]), rendered for a controller by [`render`] (unchanged for the
//! profiles that read ingress-nginx's annotations, in HAProxy's own annotations where
//! one exists, from the bundled HTTPRoute translation for Gateway API profiles), with
//! every behaviour a controller cannot be given listed with the reason. Sending the
//! probes and judging the answers is the scenario's.

pub mod gateway_api;
pub mod haproxy;

use crate::controllers::{Controller, Place, Routing, Style};
use crate::objects::SERVICE_PORT;
use crate::{BACKEND, MANAGED_BY, RUN_LABEL};
use serde_json::{json, Map, Value};

/// Every fixture's host is `<behaviour>.<CORPUS_DOMAIN>` (a `www.` before it for the
/// www redirect).
pub const CORPUS_DOMAIN: &str = "corpus.test";

/// The corpus's second set of backends and its label, defined with the objects
/// that carry them.
pub use crate::objects::{CANARY, CORPUS_LABEL};

/// The TLS Secret the corpus's TLS Ingresses name: a certificate of the run's own
/// for their hosts, made by the platform.
pub const TLS_SECRET: &str = "ib-corpus-tls";

/// The Origin the CORS fixtures allow.
pub const CORS_ORIGIN: &str = "https://app.corpus.test";

/// Which Service a fixture's path goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum To {
    /// The run's backends ([`BACKEND`]).
    Main,
    /// The one canary pod ([`CANARY`]), through a Service of the behaviour's own.
    Canary,
    /// The run's backends through a Service of the behaviour's own: a canary's
    /// main path. ingress-nginx hangs a canary on the main path's Service, for
    /// every path of every host that names it, and heeds only the first canary of
    /// a Service (measured with two canaries on the run's Service: a header canary
    /// never served, and the weighted one took a share of other hosts' traffic).
    /// Also a behaviour whose setting a controller keeps per Service (balancing,
    /// affinity, the read timeout): HAProxy's controller gives each Service one
    /// backend, and two Ingresses that set it differently on the run's Service
    /// made it rewrite that backend and reload HAProxy on every sync, under the
    /// run's own load (measured: a request refused by a reload's closing worker).
    Own,
}

/// One path of a fixture's Ingress.
#[derive(Clone, Copy, Debug)]
pub struct Path {
    pub path: &'static str,
    /// `Prefix`, `Exact` or `ImplementationSpecific`.
    pub kind: &'static str,
    pub to: To,
}

/// One Ingress of a fixture, as a team writes it for ingress-nginx.
#[derive(Clone, Copy, Debug)]
pub struct Fixture {
    /// Appended to the behaviour's id for the Ingress's name (`""`: none).
    pub suffix: &'static str,
    /// `nginx.ingress.kubernetes.io/` keys without their prefix, and values.
    pub annotations: &'static [(&'static str, &'static str)],
    pub paths: &'static [Path],
    /// Before the behaviour's host (`www.`).
    pub host_prefix: &'static str,
    /// A `tls` section naming the host and [`TLS_SECRET`].
    pub tls: bool,
}

/// How the answers of a probe sent many times are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tally {
    /// Sent once (or `repeat` times, the last answer kept).
    One,
    /// The share answered by the canary pod.
    Canary,
    /// One request without a cookie, then `repeat` with the cookie its answer set:
    /// how many backends answered those.
    Sticky,
    /// How many backends answered `repeat` identical requests.
    Backends,
    /// The share refused (not answered 2xx by a backend) of `repeat` requests sent
    /// back to back.
    Refused,
}

/// One request of a behaviour.
#[derive(Clone, Copy, Debug)]
pub struct Req {
    /// The probe's id is `<behaviour>.<name>`.
    pub name: &'static str,
    pub method: &'static str,
    pub target: &'static str,
    pub headers: &'static [&'static str],
    pub body: usize,
    /// `x-ib-probe-do`: what the backend does (`503`, `delay-ms=N`, ...).
    pub backend: &'static str,
    /// Before the behaviour's host.
    pub host_prefix: &'static str,
    pub repeat: u32,
    pub tally: Tally,
}

const fn req(name: &'static str, target: &'static str) -> Req {
    Req {
        name,
        method: "GET",
        target,
        headers: &[],
        body: 0,
        backend: "",
        host_prefix: "",
        repeat: 1,
        tally: Tally::One,
    }
}

/// One annotated behaviour of ingress-nginx.
#[derive(Clone, Copy, Debug)]
pub struct Behaviour {
    pub id: &'static str,
    /// What it checks, in one line.
    pub covers: &'static str,
    pub fixtures: &'static [Fixture],
    pub probes: &'static [Req],
    /// Set where the test environment's ingress-nginx (Debian's nginx, our Lua
    /// pieces: docs/kubernetes.md) cannot show the behaviour as its image would;
    /// the matrix marks the baseline's cell so.
    pub image_note: Option<&'static str>,
}

impl Behaviour {
    /// Its host: `<id>.corpus.test`.
    pub fn host(&self) -> String {
        format!("{}.{CORPUS_DOMAIN}", self.id)
    }

    /// Whether it needs the canary pod.
    pub fn needs_canary(&self) -> bool {
        self.fixtures
            .iter()
            .flat_map(|f| f.paths)
            .any(|p| p.to == To::Canary)
            || self
                .fixtures
                .iter()
                .flat_map(|f| f.annotations)
                .any(|(_, v)| *v == CANARY)
    }
}

const fn fx(
    annotations: &'static [(&'static str, &'static str)],
    paths: &'static [Path],
) -> Fixture {
    Fixture {
        suffix: "",
        annotations,
        paths,
        host_prefix: "",
        tls: false,
    }
}

const fn p(path: &'static str, kind: &'static str) -> Path {
    Path {
        path,
        kind,
        to: To::Main,
    }
}

const ROOT: &[Path] = &[p("/", "Prefix")];

/// `/` through a Service of the behaviour's own ([`To::Own`]): for a setting a
/// controller keeps per Service.
const OWN_ROOT: &[Path] = &[Path {
    path: "/",
    kind: "Prefix",
    to: To::Own,
}];

const fn b(
    id: &'static str,
    covers: &'static str,
    fixtures: &'static [Fixture],
    probes: &'static [Req],
) -> Behaviour {
    Behaviour {
        id,
        covers,
        fixtures,
        probes,
        image_note: None,
    }
}

/// The corpus, in the order it is probed.
pub const CORPUS: &[Behaviour] = &[
    // --- The five behaviours of the kubernetes.io blog (2026-02-27) ----------------
    b(
        "regex-prefix-case",
        "a regex path (use-regex) matches by prefix and case-insensitively",
        &[fx(&[("use-regex", "true")], &[p("/items/[0-9]+", "ImplementationSpecific")])],
        &[
            req("exact", "/items/42"),
            req("longer", "/items/42/reviews"),
            req("upper", "/ITEMS/42"),
        ],
    ),
    b(
        "use-regex-host-wide",
        "use-regex on one Ingress makes every path of the host a regex, another Ingress's Exact path included",
        &[
            fx(&[("use-regex", "true")], &[p("/re/[a-z]+", "ImplementationSpecific")]),
            Fixture {
                suffix: "-exact",
                ..fx(&[], &[p("/exact", "Exact")])
            },
        ],
        &[req("exact", "/exact"), req("longer", "/exact/more"), req("upper", "/EXACT")],
    ),
    b(
        "rewrite-implies-regex",
        "rewrite-target turns regex on: a `.` in the path matches any character",
        &[fx(&[("rewrite-target", "/")], &[p("/v.1", "Prefix")])],
        &[req("literal", "/v.1"), req("dot-is-any", "/vx1")],
    ),
    b(
        "trailing-slash-redirect",
        "a path `/dir/` (Prefix or Exact) asked without its slash answers 301 to `/dir/`",
        &[fx(&[], &[p("/dir/", "Prefix"), p("/page/", "Exact")])],
        &[req("prefix", "/dir"), req("exact", "/page"), req("with-slash", "/dir/x")],
    ),
    b(
        "path-normalised",
        "the path is normalised (`.`, `..`, `//`) before it is matched; `////x` answers 301",
        &[fx(&[], &[p("/norm", "Prefix")])],
        &[
            req("dot-dot", "/x/../norm/a"),
            req("dot", "/./norm/a"),
            req("double-slash", "//norm//a"),
            req("four-slashes", "////norm"),
        ],
    ),
    // --- Rewrites, redirects and what reaches the backend ------------------------
    b(
        "rewrite-capture",
        "rewrite-target with capture groups: /cap/a/b becomes /a/b",
        &[fx(
            &[("use-regex", "true"), ("rewrite-target", "/$2")],
            &[p("/cap(/|$)(.*)", "ImplementationSpecific")],
        )],
        &[req("nested", "/cap/a/b?q=1"), req("bare", "/cap")],
    ),
    b(
        "app-root",
        "app-root: `/` redirects to the application's root",
        &[fx(&[("app-root", "/app")], ROOT)],
        &[req("root", "/"), req("other", "/other")],
    ),
    b(
        "permanent-redirect",
        "permanent-redirect: 301 to the URL given",
        &[fx(&[("permanent-redirect", "https://moved.corpus.test/new")], ROOT)],
        &[req("any", "/old?x=1")],
    ),
    b(
        "permanent-redirect-code",
        "permanent-redirect with permanent-redirect-code 308",
        &[fx(
            &[
                ("permanent-redirect", "https://moved.corpus.test/new"),
                ("permanent-redirect-code", "308"),
            ],
            ROOT,
        )],
        &[req("any", "/old")],
    ),
    b(
        "temporal-redirect",
        "temporal-redirect: 302 to the URL given",
        &[fx(&[("temporal-redirect", "https://moved.corpus.test/tmp")], ROOT)],
        &[req("any", "/old")],
    ),
    b(
        "ssl-redirect",
        "an Ingress with TLS redirects plain HTTP to HTTPS (ssl-redirect defaults to true)",
        &[Fixture {
            tls: true,
            ..fx(&[], ROOT)
        }],
        &[req("plain-http", "/secure?x=1")],
    ),
    b(
        "ssl-redirect-off",
        "ssl-redirect: false keeps plain HTTP on an Ingress with TLS",
        &[Fixture {
            tls: true,
            ..fx(&[("ssl-redirect", "false")], ROOT)
        }],
        &[req("plain-http", "/secure")],
    ),
    b(
        "force-ssl-redirect",
        "force-ssl-redirect: plain HTTP redirected to HTTPS without TLS on the Ingress",
        &[fx(&[("force-ssl-redirect", "true")], ROOT)],
        &[req("plain-http", "/x")],
    ),
    b(
        "from-to-www-redirect",
        "from-to-www-redirect: the bare host redirects to the www host the Ingress names",
        &[Fixture {
            host_prefix: "www.",
            ..fx(&[("from-to-www-redirect", "true")], ROOT)
        }],
        &[
            req("bare-host", "/page"),
            Req {
                host_prefix: "www.",
                ..req("www-host", "/page")
            },
        ],
    ),
    b(
        "x-forwarded-prefix",
        "x-forwarded-prefix alone (no rewrite-target): whether the backend receives X-Forwarded-Prefix",
        &[fx(&[("x-forwarded-prefix", "/shop")], ROOT)],
        &[Req {
            headers: &["x-ib-record: x-forwarded-prefix"],
            ..req("get", "/x")
        }],
    ),
    b(
        "x-forwarded-prefix-rewrite",
        "x-forwarded-prefix with rewrite-target: /shop/x reaches the backend as /x, told the prefix",
        &[fx(
            &[
                ("use-regex", "true"),
                ("rewrite-target", "/$2"),
                ("x-forwarded-prefix", "/shop"),
            ],
            &[p("/shop(/|$)(.*)", "ImplementationSpecific")],
        )],
        &[Req {
            headers: &["x-ib-record: x-forwarded-prefix"],
            ..req("get", "/shop/x")
        }],
    ),
    b(
        "upstream-vhost",
        "upstream-vhost: the backend receives this Host",
        &[fx(&[("upstream-vhost", "internal.corpus.test")], ROOT)],
        &[req("get", "/x")],
    ),
    // --- CORS ----------------------------------------------------------------------
    b(
        "cors",
        "enable-cors with cors-allow-*: a preflight, a simple request with an Origin, one without",
        &[fx(
            &[
                ("enable-cors", "true"),
                ("cors-allow-origin", CORS_ORIGIN),
                ("cors-allow-methods", "GET, PUT"),
                ("cors-allow-headers", "X-Corpus"),
                ("cors-allow-credentials", "true"),
                ("cors-max-age", "600"),
            ],
            ROOT,
        )],
        &[
            Req {
                method: "OPTIONS",
                headers: &[
                    "Origin: https://app.corpus.test",
                    "Access-Control-Request-Method: PUT",
                    "Access-Control-Request-Headers: X-Corpus",
                ],
                ..req("preflight", "/api")
            },
            Req {
                headers: &["Origin: https://app.corpus.test"],
                ..req("simple", "/api")
            },
            Req {
                headers: &["Origin: https://evil.corpus.test"],
                ..req("other-origin", "/api")
            },
            req("no-origin", "/api"),
        ],
    ),
    // --- Limits, timeouts, retries ---------------------------------------------------
    b(
        "proxy-body-size",
        "proxy-body-size: 8k: a body over it is refused with 413",
        &[fx(&[("proxy-body-size", "8k")], ROOT)],
        &[
            Req {
                method: "POST",
                body: 10_000,
                ..req("over", "/upload")
            },
            Req {
                method: "POST",
                body: 4_000,
                ..req("under", "/upload")
            },
        ],
    ),
    b(
        "proxy-read-timeout",
        "proxy-read-timeout: 1 (s), not retried (proxy-next-upstream: off): a backend answering after 2.5 s gets 504 after 1 s",
        &[fx(
            &[("proxy-read-timeout", "1"), ("proxy-next-upstream", "off")],
            OWN_ROOT,
        )],
        &[Req {
            backend: "delay-ms=2500",
            ..req("slow", "/slow")
        }],
    ),
    b(
        "proxy-next-upstream-off",
        "proxy-next-upstream: off: a reset is not retried on another backend",
        &[fx(&[("proxy-next-upstream", "off")], ROOT)],
        &[Req {
            backend: "reset-once",
            ..req("reset", "/r")
        }],
    ),
    b(
        "proxy-next-upstream-503",
        "proxy-next-upstream: error timeout http_503, tries 2, to one pod: its 503 is retried there (200, attempt 2)",
        &[fx(
            &[
                ("proxy-next-upstream", "error timeout http_503"),
                ("proxy-next-upstream-tries", "2"),
            ],
            // One pod (the canary's), so that a retry meets the pod whose first
            // attempt failed: pods on a cluster count attempts alone.
            &[Path {
                path: "/",
                kind: "Prefix",
                to: To::Canary,
            }],
        )],
        &[Req {
            backend: "503-once",
            ..req("503", "/r")
        }],
    ),
    // --- Canaries, affinity, balancing ------------------------------------------------
    b(
        "canary-by-header",
        "canary-by-header: `always` sends to the canary, `never` and no header to the main backends",
        CANARY_BY_HEADER,
        &[
            Req {
                headers: &["x-canary: always"],
                ..req("always", "/c")
            },
            Req {
                headers: &["x-canary: never"],
                ..req("never", "/c")
            },
            req("none", "/c"),
        ],
    ),
    b(
        "canary-by-header-value",
        "canary-by-header-value: only that value sends to the canary",
        CANARY_BY_HEADER_VALUE,
        &[
            Req {
                headers: &["x-canary: blue"],
                ..req("match", "/c")
            },
            Req {
                headers: &["x-canary: green"],
                ..req("other", "/c")
            },
        ],
    ),
    b(
        "canary-by-cookie",
        "canary-by-cookie: the cookie `always` sends to the canary",
        CANARY_BY_COOKIE,
        &[
            Req {
                headers: &["Cookie: ib_canary=always"],
                ..req("always", "/c")
            },
            req("none", "/c"),
        ],
    ),
    b(
        "canary-weight-10",
        "canary-weight: 10: the canary's share of 600 requests",
        CANARY_WEIGHT_10,
        &[Req {
            repeat: 600,
            tally: Tally::Canary,
            ..req("share", "/c")
        }],
    ),
    b(
        "canary-weight-20",
        "canary-weight: 20: the canary's share of 600 requests (told from 10 %)",
        CANARY_WEIGHT_20,
        &[Req {
            repeat: 600,
            tally: Tally::Canary,
            ..req("share", "/c")
        }],
    ),
    Behaviour {
        image_note: Some(
            "cookie affinity's default mode (balanced) hashes with the test environment's resty.chash, ours (pure Lua, docs/kubernetes.md)",
        ),
        ..b(
        "affinity-cookie",
        "affinity: cookie with session-cookie-*: the cookie set, and 20 requests carrying it answered by one backend",
        &[fx(
            &[
                ("affinity", "cookie"),
                ("session-cookie-name", "IBSTICKY"),
                ("session-cookie-max-age", "3600"),
                ("session-cookie-path", "/"),
            ],
            OWN_ROOT,
        )],
        &[
            req("first", "/s"),
            Req {
                repeat: 20,
                tally: Tally::Sticky,
                ..req("sticky", "/s")
            },
        ],
    )
    },
    Behaviour {
        image_note: Some(
            "the test environment's resty.chash is ours (pure Lua, docs/kubernetes.md), not lua-resty-balancer's",
        ),
        ..b(
            "upstream-hash-by",
            "upstream-hash-by: $request_uri: 20 requests for one URI answered by one backend",
            &[fx(&[("upstream-hash-by", "$request_uri")], OWN_ROOT)],
            &[Req {
                repeat: 20,
                tally: Tally::Backends,
                ..req("same-uri", "/h/1")
            }],
        )
    },
    b(
        "load-balance-round-robin",
        "the default balancing (round robin): 20 requests reach every backend",
        &[fx(&[("load-balance", "round_robin")], OWN_ROOT)],
        &[Req {
            repeat: 20,
            tally: Tally::Backends,
            ..req("spread", "/lb")
        }],
    ),
    // --- Who may connect -----------------------------------------------------------------
    b(
        "allow-list-allows",
        "whitelist-source-range naming the generator's range: answered",
        &[fx(&[("whitelist-source-range", "198.18.0.0/15,127.0.0.0/8")], ROOT)],
        &[req("get", "/x")],
    ),
    b(
        "allow-list-refuses",
        "whitelist-source-range without the generator's address: 403",
        &[fx(&[("whitelist-source-range", "192.0.2.0/24")], ROOT)],
        &[req("get", "/x")],
    ),
    b(
        "deny-list-refuses",
        "denylist-source-range naming the generator's range: 403",
        &[fx(&[("denylist-source-range", "198.18.0.0/15,127.0.0.0/8")], ROOT)],
        &[req("get", "/x")],
    ),
    b(
        "limit-rps",
        "limit-rps: 2: the share refused of 60 requests sent back to back",
        &[fx(&[("limit-rps", "2"), ("limit-burst-multiplier", "1")], ROOT)],
        &[Req {
            repeat: 60,
            tally: Tally::Refused,
            ..req("burst", "/l")
        }],
    ),
    // --- Errors ---------------------------------------------------------------------------
    b(
        "custom-http-errors",
        "custom-http-errors: 503 with default-backend: the backend's 503 answered by the default backend",
        &[fx(
            &[("custom-http-errors", "503"), ("default-backend", CANARY)],
            ROOT,
        )],
        &[
            Req {
                backend: "503",
                ..req("503", "/e")
            },
            req("200", "/e"),
        ],
    ),
    // --- Snippets: refused by default since controller-v1.9 --------------------------------
    b(
        "configuration-snippet",
        "configuration-snippet (a response header): what each controller does with a snippet",
        &[fx(
            &[("configuration-snippet", "more_set_headers \"X-Snippet: location\";")],
            ROOT,
        )],
        &[req("get", "/x")],
    ),
    b(
        "server-snippet",
        "server-snippet (a location of its own): what each controller does with it",
        &[fx(
            &[("server-snippet", "location = /snippet { return 418; }")],
            ROOT,
        )],
        &[req("snippet-location", "/snippet"), req("other", "/x")],
    ),
];

const CANARY_MAIN: Fixture = fx(
    &[],
    &[Path {
        path: "/c",
        kind: "Prefix",
        to: To::Own,
    }],
);
const fn canary(annotations: &'static [(&'static str, &'static str)]) -> Fixture {
    Fixture {
        suffix: "-canary",
        annotations,
        paths: &[Path {
            path: "/c",
            kind: "Prefix",
            to: To::Canary,
        }],
        host_prefix: "",
        tls: false,
    }
}
const CANARY_BY_HEADER: &[Fixture] = &[
    CANARY_MAIN,
    canary(&[("canary", "true"), ("canary-by-header", "x-canary")]),
];
const CANARY_BY_HEADER_VALUE: &[Fixture] = &[
    CANARY_MAIN,
    canary(&[
        ("canary", "true"),
        ("canary-by-header", "x-canary"),
        ("canary-by-header-value", "blue"),
    ]),
];
const CANARY_BY_COOKIE: &[Fixture] = &[
    CANARY_MAIN,
    canary(&[("canary", "true"), ("canary-by-cookie", "ib_canary")]),
];
const CANARY_WEIGHT_10: &[Fixture] = &[
    CANARY_MAIN,
    canary(&[("canary", "true"), ("canary-weight", "10")]),
];
const CANARY_WEIGHT_20: &[Fixture] = &[
    CANARY_MAIN,
    canary(&[("canary", "true"), ("canary-weight", "20")]),
];

/// The behaviour called `id`.
pub fn find(id: &str) -> Option<&'static Behaviour> {
    CORPUS.iter().find(|b| b.id == id)
}

/// The prefix of ingress-nginx's annotations.
pub const NGINX_PREFIX: &str = "nginx.ingress.kubernetes.io/";

/// A behaviour a controller is not given, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    pub behaviour: &'static str,
    /// `not expressible: ...` (the controller has no way to say it) or `not run:
    /// ...` (it could, but this run does not render it).
    pub why: String,
}

/// The corpus for one controller: the objects to apply (the canary's Service is the
/// platform's), and what it is not given.
#[derive(Clone, Debug, Default)]
pub struct Rendered {
    pub objects: Vec<Value>,
    pub left_out: Vec<LeftOut>,
}

fn metadata(name: &str, place: &Place, behaviour: &str, annotations: Map<String, Value>) -> Value {
    json!({
        "name": name,
        "namespace": place.namespace,
        "labels": {MANAGED_BY.0: MANAGED_BY.1, RUN_LABEL: place.run, CORPUS_LABEL: behaviour},
        "annotations": Value::Object(annotations),
    })
}

/// The Service a path of `b` goes to: the run's backends, or a canary Service of
/// the behaviour's own. ingress-nginx keeps a canary's settings (its weight, its
/// header) on the canary's Service, so two canary Ingresses naming one Service
/// share the settings of one of them (measured: a weight of 20 served as 10).
fn service_of(b: &Behaviour, to: To) -> String {
    match to {
        To::Main => BACKEND.to_string(),
        To::Canary => format!("ibc-{}", b.id),
        To::Own => format!("ibc-{}-main", b.id),
    }
}

/// `b`'s own Services (a canary's and its main path's): the canary pod, or the
/// run's backends, under names of the behaviour's.
fn own_services(b: &Behaviour, place: &Place) -> Vec<Value> {
    let service = |to: To, selector| {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(&service_of(b, to), place, b.id, Map::new()),
            "spec": {
                "selector": selector,
                "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": crate::objects::BACKEND_PORT}],
            },
        })
    };
    let uses = |to: To| b.fixtures.iter().flat_map(|f| f.paths).any(|p| p.to == to);
    let mut out = Vec::new();
    if uses(To::Own) {
        out.push(service(To::Own, crate::objects::pod_labels(&place.run)));
    }
    if uses(To::Canary) {
        out.push(service(
            To::Canary,
            crate::objects::canary_pod_labels(&place.run),
        ));
    }
    out
}

/// One fixture as an Ingress of `class` with `annotations` (already translated).
fn ingress(
    b: &Behaviour,
    f: &Fixture,
    place: &Place,
    class: &str,
    annotations: Map<String, Value>,
) -> Value {
    let host = format!("{}{}", f.host_prefix, b.host());
    let paths: Vec<Value> = f
        .paths
        .iter()
        .map(|p| {
            json!({
                "path": p.path,
                "pathType": p.kind,
                "backend": {"service": {"name": service_of(b, p.to), "port": {"number": SERVICE_PORT}}},
            })
        })
        .collect();
    let mut spec = json!({
        "ingressClassName": class,
        "rules": [{"host": host, "http": {"paths": paths}}],
    });
    if f.tls {
        spec["tls"] = json!([{"hosts": [host], "secretName": TLS_SECRET}]);
    }
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata(&format!("ibc-{}{}", b.id, f.suffix), place, b.id, annotations),
        "spec": spec,
    })
}

/// The corpus as `c` is given it at `place`: ingress-nginx's annotations unchanged
/// for the profiles that read them (ingress-nginx, Traefik's ingress-nginx
/// provider), HAProxy's own where it has one, the bundled HTTPRoute translation for
/// Gateway API profiles; every other behaviour listed with the reason.
pub fn render(c: &Controller, place: &Place) -> Rendered {
    let mut out = Rendered::default();
    for b in CORPUS {
        match c.routing {
            Routing::Ingress {
                class,
                style: Style::IngressNginx,
            } => {
                out.objects.extend(own_services(b, place));
                for f in b.fixtures {
                    let annotations = f
                        .annotations
                        .iter()
                        .map(|(k, v)| (format!("{NGINX_PREFIX}{k}"), Value::String((*v).into())))
                        .collect();
                    out.objects
                        .push(ingress(b, f, place, place.class(class), annotations));
                }
            }
            Routing::Ingress {
                class,
                style: Style::HaproxyOrg,
            } => match haproxy::translate(b) {
                Ok(fixtures) => {
                    out.objects.extend(own_services(b, place));
                    for (f, annotations) in fixtures {
                        out.objects
                            .push(ingress(b, f, place, place.class(class), annotations));
                    }
                }
                Err(why) => out.left_out.push(LeftOut {
                    behaviour: b.id,
                    why: format!("not expressible: {why}"),
                }),
            },
            Routing::HttpRoute => match gateway_api::translate(b, place) {
                Ok(objs) => out.objects.extend(objs),
                Err(why) => out.left_out.push(LeftOut {
                    behaviour: b.id,
                    why,
                }),
            },
            _ => out.left_out.push(LeftOut {
                behaviour: b.id,
                why: format!(
                    "not run: the corpus is not rendered for {} yet (ingress-nginx's annotations, HAProxy's and Gateway API's are)",
                    c.name
                ),
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::controller;

    fn place() -> Place {
        Place::sample("ns", Some(("gw-ns", "gw")))
    }

    #[test]
    fn every_behaviour_has_a_host_of_its_own_and_probes_with_distinct_names() {
        assert!(CORPUS.len() >= 30, "{}", CORPUS.len());
        let mut ids: Vec<_> = CORPUS.iter().map(|b| b.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), CORPUS.len(), "a behaviour id twice");
        for b in CORPUS {
            assert!(!b.probes.is_empty(), "{}", b.id);
            assert!(!b.fixtures.is_empty(), "{}", b.id);
            let mut names: Vec<_> = b.probes.iter().map(|r| r.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), b.probes.len(), "{}", b.id);
            assert!(
                b.id.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{}",
                b.id
            );
        }
    }

    #[test]
    fn ingress_nginx_profiles_get_the_annotations_unchanged_on_each_behaviours_host() {
        for name in ["ingress-nginx", "traefik-nginx"] {
            let c = controller(name).unwrap();
            let r = render(c, &place());
            assert!(r.left_out.is_empty(), "{name}: {:?}", r.left_out);
            let n: usize = CORPUS.iter().map(|b| b.fixtures.len()).sum();
            let own: usize = CORPUS.iter().map(|b| own_services(b, &place()).len()).sum();
            assert_eq!(
                own, 15,
                "{name}: a canary and a main Service for each of 5, one pod for the retry, \
                 a Service for each of 4 per-Service settings"
            );
            // A setting a controller keeps per Service is on a Service of its own,
            // never the run's, which the load's route and the other fixtures share.
            for id in [
                "proxy-read-timeout",
                "affinity-cookie",
                "upstream-hash-by",
                "load-balance-round-robin",
            ] {
                let i = r
                    .objects
                    .iter()
                    .find(|o| {
                        o["kind"] == "Ingress" && o["metadata"]["name"] == format!("ibc-{id}")
                    })
                    .unwrap_or_else(|| panic!("{name}: no Ingress {id}"));
                let to = &i["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"];
                assert_eq!(to, &format!("ibc-{id}-main"), "{name}: {i}");
            }
            assert_eq!(r.objects.len(), n + own, "{name}");
            let cors = r
                .objects
                .iter()
                .find(|o| o["metadata"]["name"] == "ibc-cors")
                .unwrap();
            assert_eq!(cors["spec"]["ingressClassName"], "nginx");
            assert_eq!(cors["spec"]["rules"][0]["host"], "cors.corpus.test");
            assert_eq!(
                cors["metadata"]["annotations"]["nginx.ingress.kubernetes.io/cors-allow-origin"],
                CORS_ORIGIN
            );
            assert_eq!(cors["metadata"]["labels"][RUN_LABEL], "r1");
            assert_eq!(cors["metadata"]["labels"][CORPUS_LABEL], "cors");
            // The canary's second Ingress goes to the canary Service, the main one to
            // the run's backends.
            let main = r
                .objects
                .iter()
                .find(|o| o["kind"] == "Ingress" && o["metadata"]["name"] == "ibc-canary-weight-10")
                .unwrap();
            let can = r
                .objects
                .iter()
                .find(|o| o["metadata"]["name"] == "ibc-canary-weight-10-canary")
                .unwrap();
            let svc = |o: &Value| {
                o["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"].clone()
            };
            assert_eq!(svc(main), "ibc-canary-weight-10-main");
            // Each canary its own Service, selecting the canary pod.
            assert_eq!(svc(can), "ibc-canary-weight-10");
            let service = r
                .objects
                .iter()
                .find(|o| o["kind"] == "Service" && o["metadata"]["name"] == "ibc-canary-weight-10")
                .unwrap();
            assert_eq!(
                service["spec"]["selector"]["app.kubernetes.io/name"],
                CANARY
            );
            let www = r
                .objects
                .iter()
                .find(|o| o["metadata"]["name"] == "ibc-from-to-www-redirect")
                .unwrap();
            assert_eq!(
                www["spec"]["rules"][0]["host"],
                "www.from-to-www-redirect.corpus.test"
            );
        }
    }

    #[test]
    fn every_service_an_ingress_names_is_the_runs_or_rendered_beside_it() {
        for name in ["ingress-nginx", "traefik-nginx", "haproxy-ingress"] {
            let r = render(controller(name).unwrap(), &place());
            let services: Vec<&Value> = r
                .objects
                .iter()
                .filter(|o| o["kind"] == "Service")
                .map(|o| &o["metadata"]["name"])
                .collect();
            let mut named = 0;
            for i in r.objects.iter().filter(|o| o["kind"] == "Ingress") {
                for p in i["spec"]["rules"][0]["http"]["paths"].as_array().unwrap() {
                    let to = &p["backend"]["service"]["name"];
                    assert!(
                        to == BACKEND || services.contains(&to),
                        "{name}: {} names {to}, which nothing makes",
                        i["metadata"]["name"]
                    );
                    named += usize::from(to != BACKEND);
                }
            }
            assert!(
                named >= 4,
                "{name}: {named} paths to a Service of their own"
            );
        }
    }

    #[test]
    fn a_controller_without_a_rendering_lists_every_behaviour_with_the_reason() {
        let c = controller("nginx-ingress").unwrap();
        let r = render(c, &place());
        assert!(r.objects.is_empty());
        assert_eq!(r.left_out.len(), CORPUS.len());
        assert!(
            r.left_out[0].why.starts_with("not run: "),
            "{:?}",
            r.left_out[0]
        );
    }

    #[test]
    fn the_canary_pod_is_needed_by_the_canaries_the_one_pod_retry_and_the_default_backend() {
        let need: Vec<_> = CORPUS
            .iter()
            .filter(|b| b.needs_canary())
            .map(|b| b.id)
            .collect();
        assert_eq!(
            need,
            [
                "proxy-next-upstream-503",
                "canary-by-header",
                "canary-by-header-value",
                "canary-by-cookie",
                "canary-weight-10",
                "canary-weight-20",
                "custom-http-errors"
            ]
        );
    }
}
