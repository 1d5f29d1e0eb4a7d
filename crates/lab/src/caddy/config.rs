//! Caddy's JSON configuration for `caddy-api`, built by pure functions: the whole
//! document `caddy run` starts with and `/load` receives ([`config()`], with the
//! route set if one is in force, [`route_set`]), and the two pieces the driver
//! PATCHes through their `@id`s, the middleware route's handlers ([`middleware`]) and
//! the proxy's upstreams ([`upstreams`]), so a change and the read-back that confirms
//! it are the same value. The unit tests below check them.

use crate::driver::{DriverContext, Endpoint, Route};
use serde_json::{json, Value};
use sut::RouteSet;

/// `@id` of the reverse-proxy handler (its upstreams are at `/id/proxy/upstreams`).
pub(super) const PROXY_ID: &str = "proxy";
/// `@id` of the middleware route (its handlers are at `/id/mw/handle`).
pub(super) const MW_ID: &str = "mw";
/// Tag that ties our certificate to the TLS connection policy.
const CERT_TAG: &str = "ingressbench";
/// How long the old server may finish in-flight requests after a change or stop.
const GRACE: &str = "10s";

/// The Caddy configuration routing to `endpoints` with `route`, and the route set
/// `set` beside it (`None` or a count of 0: none).
///
/// One server listens on both ports: Caddy serves TLS on every listener of a server
/// with TLS connection policies except the app's `http_port`, which stays plain.
/// No automatic HTTPS (no ACME, no redirects, so the route set's hosts get no
/// certificate management either), no autosave, storage under `ctx.work_dir`; the
/// proxy speaks HTTP/1.1 with keep-alive to the backends.
pub fn config(
    ctx: &DriverContext,
    admin_port: u16,
    endpoints: &[Endpoint],
    route: Route,
    set: Option<&RouteSet>,
) -> Value {
    let mut c = base_config(ctx, admin_port, endpoints, route);
    if let Some(routes) = c["apps"]["http"]["servers"]["srv0"]["routes"].as_array_mut() {
        // First: the middleware route and the catch-all proxy stay last, unchanged.
        if let Some(rs) = route_set(ctx, endpoints, set) {
            routes.insert(0, rs);
        }
        if ctx.probe_fixture {
            routes.insert(0, fixture(ctx));
        }
    }
    if ctx.count_handshakes {
        // Every request's access log entry (its `request.tls.resumed` says how its
        // connection's handshake went) to a file of its own; other logs unchanged.
        c["apps"]["http"]["servers"]["srv0"]["logs"] = json!({"default_logger_name": "tls"});
        c["logging"] = json!({"logs": {
            "default": {"exclude": [ACCESS_LOGGER]},
            "tls": {
                // Not rolled at 100 MB (the default), so no entry leaves the file.
                "writer": {
                    "output": "file",
                    "filename": handshake_log(ctx).to_string_lossy(),
                    "roll": false
                },
                "encoder": {"format": "json"},
                "include": [ACCESS_LOGGER]
            }
        }});
    }
    c
}

/// The logger the server's access log entries go to with `default_logger_name: tls`.
const ACCESS_LOGGER: &str = "http.log.access.tls";

/// Where the access log goes when handshakes are counted.
pub(super) fn handshake_log(ctx: &DriverContext) -> std::path::PathBuf {
    ctx.out_dir.join("tls-handshakes.log")
}

/// Handshakes in Caddy's JSON access log: each request over TLS counts its
/// connection's handshake, full or resumed (`request.tls.resumed`). Exact when each
/// connection carries one request, as the handshake rows send them.
pub(super) fn count_handshakes(log: &str) -> crate::driver::Handshakes {
    let mut h = crate::driver::Handshakes {
        source: "caddy access log (request.tls.resumed)",
        ..Default::default()
    };
    for line in log.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match v["request"]["tls"]["resumed"].as_bool() {
            Some(true) => h.resumed += 1,
            Some(false) => h.full += 1,
            None => {}
        }
    }
    h
}

fn base_config(
    ctx: &DriverContext,
    admin_port: u16,
    endpoints: &[Endpoint],
    route: Route,
) -> Value {
    json!({
        "admin": {
            "listen": format!("127.0.0.1:{admin_port}"),
            "config": {"persist": false}
        },
        "storage": {
            "module": "file_system",
            "root": ctx.work_dir.join("storage").to_string_lossy()
        },
        "apps": {
            "tls": {"certificates": {"load_files": [{
                "certificate": ctx.cert.to_string_lossy(),
                "key": ctx.key.to_string_lossy(),
                "tags": [CERT_TAG]
            }]}},
            "http": {
                "http_port": ctx.http_port,
                "https_port": ctx.https_port,
                "grace_period": GRACE,
                "servers": {"srv0": {
                    "listen": [
                        format!("127.0.0.1:{}", ctx.http_port),
                        format!("127.0.0.1:{}", ctx.https_port)
                    ],
                    "automatic_https": {"disable": true},
                    "tls_connection_policies": [{
                        "certificate_selection": {"any_tag": [CERT_TAG]},
                        "protocol_min": "tls1.2",
                        "protocol_max": "tls1.3",
                        "alpn": alpn(ctx)
                    }],
                    // The other proxies offer only HTTP/1.1 to clients too, unless
                    // the scenario says `protocol: h2`.
                    "protocols": protocols(ctx),
                    "routes": [
                        // No terminal handler: requests fall through to the proxy.
                        {"@id": MW_ID, "handle": middleware(route)},
                        {"handle": [proxy_handler(ctx, endpoints)]}
                    ]
                }}
            }
        }
    })
}

/// The handlers of the middleware route for `route` (what `PATCH /id/mw/handle` sends).
pub fn middleware(route: Route) -> Value {
    match route {
        Route::Base => json!([]),
        Route::Cors => json!([{"handler": "headers", "response": {"set": {
            "Access-Control-Allow-Origin": ["*"],
            "Access-Control-Allow-Methods": ["GET, POST, OPTIONS"],
            "Access-Control-Allow-Headers": ["Content-Type, Authorization"]
        }}}]),
        Route::Header => json!([{"handler": "headers", "response": {"set": {"x-custom": ["1"]}}}]),
        // Only the path is given, so Caddy keeps the query string.
        Route::Rewrite => {
            json!([{"handler": "rewrite", "uri": "/rewritten{http.request.uri.path}"}])
        }
    }
}

/// A route set ([`sut::routes`]) as Caddy's ingress controller renders Ingress rules:
/// per route a route object matching its host and exact path, whose handlers set
/// [`sut::routes::ROUTE_HEADER`] to the route's name and proxy to the shared
/// backends (a copy of the main [`proxy_handler`] without its `@id`: Caddy refuses a
/// config with an `@id` twice; the upstreams are the same endpoints). Anything else on
/// the set's hosts answers 404.
///
/// The controller lists its routes flat before the default backend; here they sit in
/// the subroute of one terminal route that matches every host of the set, so a
/// request that does not name one of them (the main route's traffic) tests one host
/// matcher, not N, and reaches the middleware and proxy routes as before. A request
/// to a set host tests the route objects in order, as the flat list would, and the
/// last one, with no matcher, answers 404. `None` when there is no set (or it is
/// empty).
pub(super) fn route_set(
    ctx: &DriverContext,
    endpoints: &[Endpoint],
    set: Option<&RouteSet>,
) -> Option<Value> {
    let set = set.filter(|s| s.count > 0)?;
    let proxy = unnamed_proxy(ctx, endpoints);
    let mut routes: Vec<Value> = (0..set.count)
        .map(|i| {
            json!({
                "match": [{"host": [set.host(i)], "path": [set.path(i)]}],
                "handle": [
                    {"handler": "headers", "response": {"set": {
                        sut::routes::ROUTE_HEADER: [set.marker(i)]
                    }}},
                    proxy.clone()
                ],
                "terminal": true
            })
        })
        .collect();
    routes.push(json!({"handle": [{"handler": "static_response", "status_code": 404}]}));
    Some(json!({
        "match": [{"host": set.host_names().collect::<Vec<_>>()}],
        "handle": [{"handler": "subroute", "routes": routes}],
        "terminal": true
    }))
}

/// The behaviour probes' fixture host ([`sut::routes::FIXTURE_HOST`]) as a route
/// of its own: its one prefix to a reverse proxy with no upstream (a Service with
/// no endpoint; Caddy answers 503), any other path 404. The PATCHes of the
/// backends' upstreams address the main proxy by its `@id` and leave this one be.
fn fixture(ctx: &DriverContext) -> Value {
    let empty = unnamed_proxy(ctx, &[]);
    json!({
        "match": [{"host": [sut::routes::FIXTURE_HOST]}],
        "handle": [{"handler": "subroute", "routes": [
            {
                "match": [{"path": [
                    sut::routes::FIXTURE_EMPTY_PATH,
                    format!("{}/*", sut::routes::FIXTURE_EMPTY_PATH)
                ]}],
                "handle": [empty],
                "terminal": true
            },
            {"handle": [{"handler": "static_response", "status_code": 404}]}
        ]}],
        "terminal": true
    })
}

/// [`proxy_handler`] without its `@id`: a copy the upstreams' PATCH leaves be
/// (a route set's, the probes' fixture's).
fn unnamed_proxy(ctx: &DriverContext, endpoints: &[Endpoint]) -> Value {
    let mut proxy = proxy_handler(ctx, endpoints);
    if let Some(o) = proxy.as_object_mut() {
        o.remove("@id");
    }
    proxy
}

/// The upstream list for `endpoints` (what `PATCH /id/proxy/upstreams` sends).
pub fn upstreams(endpoints: &[Endpoint]) -> Value {
    Value::Array(
        endpoints
            .iter()
            .map(|e| json!({"dial": e.addr.to_string()}))
            .collect(),
    )
}

/// The reverse-proxy handler. Retries on dial errors (like nginx's default
/// `proxy_next_upstream error`) only when there are endpoints: with none, Caddy would
/// spin for the whole try duration before its 503, and the other proxies fail at once.
/// What the TLS policy offers by ALPN.
fn alpn(ctx: &DriverContext) -> Value {
    if ctx.http2 {
        json!(["h2", "http/1.1"])
    } else {
        json!(["http/1.1"])
    }
}

/// The server's protocols (`h2` over TLS only: Caddy's `h2c` is not asked for).
fn protocols(ctx: &DriverContext) -> Value {
    if ctx.http2 {
        json!(["h1", "h2"])
    } else {
        json!(["h1"])
    }
}

pub(super) fn proxy_handler(ctx: &DriverContext, endpoints: &[Endpoint]) -> Value {
    let mut load_balancing = json!({"selection_policy": {"policy": "round_robin"}});
    if !endpoints.is_empty() {
        load_balancing["try_duration"] = json!("1s");
        load_balancing["try_interval"] = json!("50ms");
    }
    let mut h = json!({
        "@id": PROXY_ID,
        "handler": "reverse_proxy",
        "upstreams": upstreams(endpoints),
        "load_balancing": load_balancing,
        "transport": {
            "protocol": "http",
            // gRPC goes to the backends over h2c.
            "versions": if ctx.upstream_h2c { json!(["h2c"]) } else { json!(["1.1"]) },
            "keep_alive": {
                "enabled": true,
                "max_idle_conns_per_host": ctx.upstream_keepalive,
                "idle_timeout": "60s"
            }
        }
    });
    // The tuned variant (`caddy-api+passive`): Caddy's passive health checks take
    // an upstream out for `fail_duration` once `max_fails` requests failed (an error,
    // or one of the statuses) within it.
    if let Some(p) = &ctx.passive_health {
        let mut passive = json!({
            "fail_duration": crate::health::ms(p.fail_timeout),
            "max_fails": p.max_fails.max(1),
            "unhealthy_status": [502, 503, 504]
        });
        if let Some(t) = p.timeout {
            passive["unhealthy_latency"] = json!(crate::health::ms(t));
            h["transport"]["response_header_timeout"] = json!(crate::health::ms(t));
        }
        h["health_checks"] = json!({ "passive": passive });
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::net::SocketAddr;

    fn ctx() -> DriverContext {
        DriverContext {
            upstream_keepalive: 32,
            upstream_keepalive_requests: 1000,
            ..DriverContext::with_s1_tuning(
                "/w".into(),
                "/o".into(),
                ("/c/cert.pem".into(), "/c/key.pem".into()),
                (8443, 8080),
            )
        }
    }

    #[test]
    fn http2_is_offered_by_alpn_only_when_asked_for() {
        let srv = |c: &Value| c["apps"]["http"]["servers"]["srv0"].clone();
        let plain = srv(&config(&ctx(), 2019, &[], Route::Base, None));
        assert_eq!(plain["protocols"], json!(["h1"]));
        assert_eq!(
            plain["tls_connection_policies"][0]["alpn"],
            json!(["http/1.1"])
        );
        let mut c = ctx();
        c.http2 = true;
        let h2 = srv(&config(&c, 2019, &[], Route::Base, None));
        assert_eq!(h2["protocols"], json!(["h1", "h2"]));
        assert_eq!(
            h2["tls_connection_policies"][0]["alpn"],
            json!(["h2", "http/1.1"])
        );
    }

    #[test]
    fn handshakes_are_logged_only_when_counted_and_counted_from_the_log() {
        let plain = config(&ctx(), 2019, &[], Route::Base, None);
        assert!(plain.get("logging").is_none(), "{plain}");
        let mut c = ctx();
        c.count_handshakes = true;
        let logged = config(&c, 2019, &[], Route::Base, None);
        assert_eq!(
            logged["apps"]["http"]["servers"]["srv0"]["logs"]["default_logger_name"],
            "tls"
        );
        assert_eq!(
            logged["logging"]["logs"]["tls"]["writer"]["filename"],
            "/o/tls-handshakes.log"
        );
        let log = concat!(
            r#"{"logger":"http.log.access.tls","request":{"tls":{"resumed":false,"version":772}}}"#,
            "\n",
            r#"{"logger":"http.log.access.tls","request":{"tls":{"resumed":true,"version":772}}}"#,
            "\n",
            r#"{"logger":"http.log.access.tls","request":{"proto":"HTTP/1.1"}}"#,
            "\nnot json\n",
            r#"{"request":{"tls":{"resumed":false}}}"#,
            "\n"
        );
        let h = count_handshakes(log);
        assert_eq!((h.full, h.resumed), (2, 1));
    }

    fn ep(id: &str, port: u16) -> Endpoint {
        Endpoint {
            id: id.into(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    fn routes(c: &Value) -> &Vec<Value> {
        c["apps"]["http"]["servers"]["srv0"]["routes"]
            .as_array()
            .unwrap()
    }

    #[test]
    fn config_listens_locally_with_our_certificate_and_no_automation() {
        let c = config(&ctx(), 2019, &[ep("b1", 9001)], Route::Base, None);
        assert_eq!(c["admin"]["listen"], "127.0.0.1:2019");
        assert_eq!(c["admin"]["config"]["persist"], false);
        assert_eq!(c["storage"]["root"], "/w/storage");
        let http = &c["apps"]["http"];
        assert_eq!(http["http_port"], 8080);
        assert_eq!(http["https_port"], 8443);
        let srv = &http["servers"]["srv0"];
        assert_eq!(srv["listen"], json!(["127.0.0.1:8080", "127.0.0.1:8443"]));
        assert_eq!(srv["automatic_https"]["disable"], true);
        let policy = &srv["tls_connection_policies"][0];
        assert_eq!(policy["protocol_min"], "tls1.2");
        assert_eq!(policy["protocol_max"], "tls1.3");
        assert_eq!(
            policy["certificate_selection"]["any_tag"],
            json!([CERT_TAG])
        );
        let file = &c["apps"]["tls"]["certificates"]["load_files"][0];
        assert_eq!(file["certificate"], "/c/cert.pem");
        assert_eq!(file["key"], "/c/key.pem");
        assert_eq!(file["tags"], json!([CERT_TAG]));
    }

    #[test]
    fn proxy_route_keeps_its_id_and_upstream_keepalive() {
        let c = config(
            &ctx(),
            2019,
            &[ep("b1", 9001), ep("b2", 9002)],
            Route::Header,
            None,
        );
        let r = routes(&c);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0]["@id"], MW_ID);
        assert_eq!(r[0]["handle"], middleware(Route::Header));
        let p = &r[1]["handle"][0];
        assert_eq!(p["@id"], PROXY_ID);
        assert_eq!(p["handler"], "reverse_proxy");
        assert_eq!(
            p["upstreams"],
            json!([{"dial": "127.0.0.1:9001"}, {"dial": "127.0.0.1:9002"}])
        );
        assert_eq!(p["transport"]["versions"], json!(["1.1"]));
        assert_eq!(p["transport"]["keep_alive"]["enabled"], true);
        assert_eq!(p["transport"]["keep_alive"]["max_idle_conns_per_host"], 32);
        assert_eq!(p["load_balancing"]["try_duration"], "1s");
    }

    #[test]
    fn no_endpoints_means_an_empty_list_and_no_retry_wait() {
        let c = config(&ctx(), 2019, &[], Route::Base, None);
        let p = &routes(&c)[1]["handle"][0];
        assert_eq!(p["upstreams"], json!([]));
        assert!(p["load_balancing"].get("try_duration").is_none());
    }

    #[test]
    fn each_route_has_its_middleware() {
        assert_eq!(middleware(Route::Base), json!([]));
        let cors = &middleware(Route::Cors)[0]["response"]["set"];
        assert_eq!(cors["Access-Control-Allow-Origin"], json!(["*"]));
        assert_eq!(
            cors["Access-Control-Allow-Methods"],
            json!(["GET, POST, OPTIONS"])
        );
        assert_eq!(
            cors["Access-Control-Allow-Headers"],
            json!(["Content-Type, Authorization"])
        );
        assert_eq!(
            middleware(Route::Header)[0]["response"]["set"]["x-custom"],
            json!(["1"])
        );
        let rw = &middleware(Route::Rewrite)[0];
        assert_eq!(rw["handler"], "rewrite");
        assert_eq!(rw["uri"], "/rewritten{http.request.uri.path}");
    }

    #[test]
    fn the_probes_fixture_is_a_host_route_first_with_a_proxy_of_no_upstream() {
        let mut c = ctx();
        let off = config(&c, 2019, &[ep("b1", 5001)], Route::Base, None);
        assert!(!off.to_string().contains("fixture.probes.test"));
        c.probe_fixture = true;
        let on = config(&c, 2019, &[ep("b1", 5001)], Route::Base, None);
        let r = routes(&on);
        assert_eq!(
            r.len(),
            3,
            "the fixture, then the middleware and the proxy: {on}"
        );
        assert_eq!(r[0]["match"], json!([{"host": ["fixture.probes.test"]}]));
        let inner = r[0]["handle"][0]["routes"].as_array().unwrap();
        assert_eq!(
            inner[0]["match"],
            json!([{"path": ["/ib-empty", "/ib-empty/*"]}])
        );
        let empty = &inner[0]["handle"][0];
        assert_eq!(empty["handler"], "reverse_proxy");
        assert_eq!(empty["upstreams"], json!([]));
        assert!(
            empty.get("@id").is_none(),
            "the upstreams' PATCH leaves it be"
        );
        assert_eq!(inner[1]["handle"][0]["status_code"], 404);
        assert_eq!(r[2]["handle"][0]["@id"], PROXY_ID);
        assert_eq!(
            r[2]["handle"][0]["upstreams"],
            json!([{"dial": "127.0.0.1:5001"}])
        );
    }

    #[test]
    fn a_route_set_is_a_route_per_route_before_the_catch_all() {
        let eps = [ep("b1", 9001), ep("b2", 9002)];
        let set = RouteSet::new(5, 2);
        let c = config(&ctx(), 2019, &eps, Route::Header, Some(&set));
        let r = routes(&c);
        assert_eq!(r.len(), 3, "the set's route, then the two of today");
        // The main route's two routes are last and unchanged.
        let none = config(&ctx(), 2019, &eps, Route::Header, None);
        assert_eq!(r[1..], routes(&none)[..]);
        assert_eq!(r[2]["handle"][0]["@id"], PROXY_ID);
        assert!(r[2].get("match").is_none(), "the catch-all stays last");
        // One terminal route for every host of the set, no certificate automation.
        let outer = &r[0];
        assert_eq!(
            outer["match"],
            json!([{"host": ["h0.routes.test", "h1.routes.test"]}])
        );
        assert_eq!(outer["terminal"], true);
        assert_eq!(
            c["apps"]["http"]["servers"]["srv0"]["automatic_https"]["disable"],
            true
        );
        assert!(c["apps"]["tls"].get("automation").is_none(), "{c}");
        assert_eq!(outer["handle"][0]["handler"], "subroute");
        let inner = outer["handle"][0]["routes"].as_array().unwrap();
        assert_eq!(inner.len(), 5 + 1, "a route per route, then the 404");
        for (i, route) in inner[..5].iter().enumerate() {
            let h = i % 2;
            assert_eq!(
                route["match"],
                json!([{"host": [format!("h{h}.routes.test")], "path": [format!("/r{i}")]}]),
                "{route}"
            );
            let handle = route["handle"].as_array().unwrap();
            assert_eq!(handle.len(), 2, "{route}");
            assert_eq!(handle[0]["handler"], "headers");
            assert_eq!(
                handle[0]["response"]["set"],
                json!({ "x-route": [format!("r{i}")] })
            );
            // The main proxy's handler, upstreams and all, without its `@id`.
            let mut proxy = proxy_handler(&ctx(), &eps);
            proxy.as_object_mut().unwrap().remove("@id");
            assert_eq!(handle[1], proxy);
            assert!(handle[1].get("@id").is_none());
        }
        // Another path on a set host: no matcher, 404.
        let last = &inner[5];
        assert!(last.get("match").is_none(), "{last}");
        assert_eq!(
            last["handle"],
            json!([{"handler": "static_response", "status_code": 404}])
        );
        // Only one `@id` of each in the whole document (Caddy refuses duplicates).
        let text = c.to_string();
        assert_eq!(text.matches(&format!("\"@id\":\"{PROXY_ID}\"")).count(), 1);
        assert_eq!(text.matches(&format!("\"@id\":\"{MW_ID}\"")).count(), 1);
        // No set, or an empty one: the config of today.
        let empty = config(
            &ctx(),
            2019,
            &eps,
            Route::Header,
            Some(&RouteSet::new(0, 10)),
        );
        assert_eq!(empty, none);
        assert!(!none.to_string().contains("routes.test"));
    }
}
