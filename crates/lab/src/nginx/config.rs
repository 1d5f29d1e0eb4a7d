//! `nginx.conf` for both nginx profiles, rendered by pure functions from [`Settings`]
//! (everything `prepare()` fixed) plus the endpoints and route in force. Nothing here
//! touches a file or a process, so every directive the lab relies on (keep-alive, the
//! Lua hooks and their order, each route's headers) is checked by the unit tests below.

use super::lua::LUA_MODULE;
use super::Mode;
use crate::driver::{Endpoint, Route};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use sut::RouteSet;

/// How long old workers may keep busy connections after a reload; bounds a settle.
const WORKER_SHUTDOWN_TIMEOUT: &str = "10s";
/// Client-side keep-alive requests: large, so nginx never closes the load generator's
/// connections on its own (the recipe's value).
const CLIENT_KEEPALIVE_REQUESTS: u64 = 100_000_000;

/// Everything a configuration is rendered from, fixed by `prepare()`; paths absolute.
#[derive(Clone, Debug)]
pub(super) struct Settings {
    pub(super) mode: Mode,
    /// nginx's `-p` prefix: the private work folder (pid, lock, temp paths, Lua).
    pub(super) prefix: PathBuf,
    pub(super) cert: PathBuf,
    pub(super) key: PathBuf,
    pub(super) https_port: u16,
    pub(super) http_port: u16,
    /// The Lua admin server's port (unused in `Mode::Reload`).
    pub(super) admin_port: u16,
    pub(super) upstream_keepalive: u32,
    pub(super) upstream_keepalive_requests: u64,
    pub(super) worker_connections: u32,
    /// `worker_processes`: one per CPU of the proxy's set.
    pub(super) workers: usize,
    /// The CPUs nginx runs on (empty: any).
    pub(super) cpus: Vec<usize>,
    pub(super) worker_rlimit_nofile: u64,
    /// Workers run as root when the master does: the temp folders are 0700.
    pub(super) user_root: bool,
    pub(super) modules_dir: PathBuf,
    /// Where each request's `$connection_requests $ssl_session_reused` is logged, to
    /// count full and resumed handshakes (`None`: no access log, the default).
    pub(super) tls_log: Option<PathBuf>,
    /// The tuned variant's passive health checks (reload mode only).
    pub(super) passive: Option<crate::health::PassiveHealth>,
    /// HTTP/2 on the HTTPS listener (ALPN), besides HTTP/1.1.
    pub(super) http2: bool,
    /// gRPC to the backends over h2c (`grpc_pass`), as ingress-nginx does for a
    /// `backend-protocol: GRPC` Ingress.
    pub(super) grpc: bool,
    /// Route the behaviour probes' fixture host ([`sut::routes::FIXTURE_HOST`]).
    pub(super) fixture: bool,
}

/// The HTTPS `listen` line's parameters.
fn ssl_listen(s: &Settings) -> &'static str {
    if s.http2 {
        "ssl http2"
    } else {
        "ssl"
    }
}

/// A path as an nginx quoted string.
fn q(p: &Path) -> String {
    let s = p.display().to_string();
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// ingress-nginx's defaults where a behaviour probe sees them (its `nginx.tmpl`
/// and ConfigMap defaults: `proxy-body-size: 1m`, `large-client-header-buffers:
/// 4 8k`, `proxy-next-upstream-tries: 3`, `proxy-connect-timeout: 5`,
/// `proxy-read-timeout`/`proxy-send-timeout: 60`; underscores in header names
/// dropped), so that the lab's nginx answers a probe as the controller's would.
const INGRESS_NGINX_HTTP: &str = concat!(
    "    client_max_body_size 1m;\n",
    "    client_header_buffer_size 1k;\n",
    "    large_client_header_buffers 4 8k;\n",
    "    underscores_in_headers off;\n",
    "    proxy_next_upstream_tries 3;\n",
    "    proxy_connect_timeout 5s;\n",
    "    proxy_read_timeout 60s;\n",
    "    proxy_send_timeout 60s;\n",
);

/// The request headers ingress-nginx sets on every proxied request (its template's
/// `proxy_set_header` lines, with `use-forwarded-headers: false`).
const INGRESS_NGINX_HEADERS: &str = concat!(
    "            proxy_set_header X-Request-ID $request_id;\n",
    "            proxy_set_header X-Real-IP $remote_addr;\n",
    "            proxy_set_header X-Forwarded-For $remote_addr;\n",
    "            proxy_set_header X-Forwarded-Host $host;\n",
    "            proxy_set_header X-Forwarded-Port $server_port;\n",
    "            proxy_set_header X-Forwarded-Proto $scheme;\n",
    "            proxy_set_header X-Forwarded-Scheme $scheme;\n",
    "            proxy_set_header X-Scheme $scheme;\n",
);

/// The directives a route adds inside `location /` (lab notes section 8).
fn route_snippet(route: Route) -> &'static str {
    match route {
        Route::Base => "",
        Route::Cors => concat!(
            "            add_header Access-Control-Allow-Origin \"*\" always;\n",
            "            add_header Access-Control-Allow-Methods \"GET, POST, OPTIONS\" always;\n",
            "            add_header Access-Control-Allow-Headers \"Content-Type, Authorization\" always;\n",
        ),
        Route::Header => "            add_header x-custom 1 always;\n",
        Route::Rewrite => "            rewrite ^/(.*)$ /rewritten/$1 break;\n",
    }
}

/// Renders the whole `nginx.conf`. In `Mode::Lua` `endpoints` is ignored (the list
/// lives in the shared dictionary); in `Mode::Reload` an empty list gives an upstream
/// whose only server is marked down, so requests fail at once with 502.
pub(super) fn render(
    s: &Settings,
    endpoints: &[Endpoint],
    route: Route,
    set: Option<&RouteSet>,
) -> String {
    let mut c = String::with_capacity(4096);
    let p = &s.prefix;
    let profile = match s.mode {
        Mode::Reload => "nginx-reload",
        Mode::Lua => "nginx-lua",
    };
    // `write!` to a String cannot fail.
    let _ = writeln!(
        c,
        "# ingressbench {profile}: generated, rewritten on every change"
    );
    if s.mode == Mode::Lua {
        // ndk first: the Lua module needs its symbols (lab notes section 4).
        let _ = writeln!(
            c,
            "load_module {};",
            q(&s.modules_dir.join("ndk_http_module.so"))
        );
        let _ = writeln!(
            c,
            "load_module {};",
            q(&s.modules_dir.join("ngx_http_lua_module.so"))
        );
    }
    if s.user_root {
        c.push_str("user root;\n");
    }
    c.push_str("daemon off;\nmaster_process on;\n");
    // One worker: the load generator needs the other core of the lab machine.
    let _ = writeln!(c, "worker_processes {};", s.workers);
    let _ = writeln!(c, "worker_rlimit_nofile {};", s.worker_rlimit_nofile);
    let _ = writeln!(c, "worker_shutdown_timeout {WORKER_SHUTDOWN_TIMEOUT};");
    let _ = writeln!(c, "pid {};", q(&p.join("nginx.pid")));
    let _ = writeln!(c, "lock_file {};", q(&p.join("nginx.lock")));
    // The driver sends stderr to the results folder (nginx.log).
    c.push_str("error_log stderr notice;\n");
    let _ = writeln!(
        c,
        "events {{ worker_connections {}; }}",
        s.worker_connections
    );
    c.push_str("http {\n    access_log off;\n");
    if s.tls_log.is_some() {
        // Unbuffered, so the count is complete as soon as the responses are: one
        // write per request, measured as noise beside a handshake's cost.
        c.push_str("    log_format tls '$connection_requests $ssl_session_reused';\n");
    }
    temp_paths(&mut c, &p.join("tmp"));
    c.push_str(INGRESS_NGINX_HTTP);
    // ingress-nginx's: a WebSocket upgrade passed on as one; any other request with
    // no Connection header at all when upstream keep-alive is on, so the upstream
    // connection stays open (its template's `$connection_upgrade`).
    let plain = if s.upstream_keepalive > 0 {
        "''"
    } else {
        "close"
    };
    let _ = writeln!(
        c,
        "    map $http_upgrade $connection_upgrade {{\n        default upgrade;\n        '' {plain};\n    }}"
    );
    if s.mode == Mode::Lua {
        let lua_path = format!("{}/lua/?.lua;;", p.display());
        let _ = writeln!(c, "    lua_package_path {};", q(Path::new(&lua_path)));
        c.push_str("    lua_shared_dict endpoints 1m;\n");
    }
    c.push_str("    upstream backends {\n");
    match s.mode {
        Mode::Reload if endpoints.is_empty() => {
            c.push_str("        server 127.0.0.1:1 down;\n");
        }
        Mode::Reload => {
            for e in endpoints {
                let _ = writeln!(
                    c,
                    "        server {}{};",
                    e.addr,
                    crate::health::nginx_server(s.passive.as_ref())
                );
            }
        }
        Mode::Lua => {
            c.push_str("        server 0.0.0.1;  # placeholder, the balancer picks the peer\n");
            let _ = writeln!(
                c,
                "        balancer_by_lua_block {{ require(\"{LUA_MODULE}\").balance() }}"
            );
        }
    }
    // In Lua mode keepalive must come after balancer_by_lua_block, or it is silently
    // dropped ("load balancing method redefined").
    if s.upstream_keepalive > 0 {
        let _ = writeln!(c, "        keepalive {};", s.upstream_keepalive);
        let _ = writeln!(
            c,
            "        keepalive_requests {};",
            s.upstream_keepalive_requests
        );
        c.push_str("        keepalive_timeout 60s;\n");
    }
    c.push_str("    }\n");
    if s.mode == Mode::Lua {
        let _ = writeln!(
            c,
            concat!(
                "    server {{\n",
                "        listen 127.0.0.1:{};\n",
                "        client_body_buffer_size 1m;  # = max size: the body stays in memory\n",
                "        client_max_body_size 1m;\n",
                "        location = /endpoints {{ content_by_lua_block {{ require(\"{}\").admin() }} }}\n",
                "        location / {{ return 404; }}\n",
                "    }}"
            ),
            s.admin_port, LUA_MODULE
        );
    }
    server_head(&mut c, s, None);
    c.push_str("        ssl_protocols TLSv1.2 TLSv1.3;\n");
    let _ = writeln!(c, "        keepalive_requests {CLIENT_KEEPALIVE_REQUESTS};");
    if let Some(log) = &s.tls_log {
        let _ = writeln!(c, "        access_log {} tls;", q(log));
    }
    c.push_str("        location / {\n");
    c.push_str(route_snippet(route));
    if s.mode == Mode::Lua {
        let _ = writeln!(
            c,
            "            access_by_lua_block {{ require(\"{LUA_MODULE}\").access() }}"
        );
    }
    if s.grpc {
        c.push_str("            grpc_pass grpc://backends;\n");
    } else {
        c.push_str(concat!(
            "            proxy_pass http://backends;\n",
            "            proxy_http_version 1.1;\n",
            "            proxy_set_header Upgrade $http_upgrade;\n",
            "            proxy_set_header Connection $connection_upgrade;\n",
            "            proxy_set_header Host $host;\n",
        ));
        c.push_str(INGRESS_NGINX_HEADERS);
    }
    c.push_str(&crate::health::nginx_location(s.passive.as_ref()));
    c.push_str("        }\n    }\n");
    if let Some(set) = set.filter(|r| r.count > 0) {
        route_set(&mut c, s, set);
    }
    if s.fixture {
        fixture(&mut c, s);
    }
    c.push_str("}\n");
    c
}

/// The behaviour probes' fixture host ([`sut::routes::FIXTURE_HOST`]) as
/// ingress-nginx renders an Ingress of its own: a server block, the prefix
/// [`sut::routes::FIXTURE_EMPTY_PATH`] to a Service with no endpoint, any other path
/// 404 (its default backend's answer). ingress-nginx answers a backend with no
/// endpoint from its Lua balancer's rewrite phase, 503, before any upstream is
/// tried; both profiles answer so (nginx-reload would otherwise give 502 from a
/// server marked down, a lab artefact no controller shows).
fn fixture(c: &mut String, s: &Settings) {
    server_head(c, s, Some(sut::routes::FIXTURE_HOST));
    let _ = writeln!(
        c,
        "        location {} {{ return 503; }}",
        sut::routes::FIXTURE_EMPTY_PATH
    );
    c.push_str("        location / { return 404; }\n    }\n");
}

/// Opens a server block: its listeners (TLS and plain), its name when it has one,
/// and the certificate.
fn server_head(c: &mut String, s: &Settings, name: Option<&str>) {
    c.push_str("    server {\n");
    let _ = writeln!(
        c,
        "        listen 127.0.0.1:{} {};",
        s.https_port,
        ssl_listen(s)
    );
    let _ = writeln!(c, "        listen 127.0.0.1:{};", s.http_port);
    if let Some(name) = name {
        let _ = writeln!(c, "        server_name {name};");
    }
    let _ = writeln!(c, "        ssl_certificate {};", q(&s.cert));
    let _ = writeln!(c, "        ssl_certificate_key {};", q(&s.key));
}

/// A route set as an Ingress controller renders it for nginx: a server block per
/// host, an exact location per route, each naming itself in a response header and
/// proxying to the shared backends; anything else on those hosts is a 404.
fn route_set(c: &mut String, s: &Settings, set: &RouteSet) {
    // Thousands of names: the defaults (512 entries) would refuse to start.
    let _ = writeln!(
        c,
        "    server_names_hash_max_size {};\n    server_names_hash_bucket_size 128;",
        (set.hosts * 2).max(512)
    );
    for (h, name) in set.host_names().enumerate() {
        server_head(c, s, Some(&name));
        // The Lua balancer picks its peer from what the access phase set up.
        let lua = if s.mode == Mode::Lua {
            format!(" access_by_lua_block {{ require(\"{LUA_MODULE}\").access() }}")
        } else {
            String::new()
        };
        for i in set.routes_of(h as u32) {
            let _ = writeln!(
                c,
                "        location = {} {{ add_header {} {} always;{lua} proxy_pass http://backends; proxy_http_version 1.1; proxy_set_header Connection \"\"; }}",
                set.path(i),
                sut::routes::ROUTE_HEADER,
                set.marker(i)
            );
        }
        c.push_str("        location / { return 404; }\n    }\n");
    }
}

/// nginx's temporary folders, all under `dir` (its defaults are the package's, which a
/// run must not write to), as `http` directives.
pub(crate) fn temp_paths(c: &mut String, dir: &Path) {
    for (directive, sub) in [
        ("client_body_temp_path", "body"),
        ("proxy_temp_path", "proxy"),
        ("fastcgi_temp_path", "fastcgi"),
        ("uwsgi_temp_path", "uwsgi"),
        ("scgi_temp_path", "scgi"),
    ] {
        let _ = writeln!(c, "    {directive} {};", q(&dir.join(sub)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nginx::DEFAULT_MODULES_DIR;
    use std::net::SocketAddr;

    fn settings(mode: Mode) -> Settings {
        Settings {
            mode,
            prefix: PathBuf::from("/tmp/ib-work"),
            cert: PathBuf::from("/tmp/ib/cert.pem"),
            key: PathBuf::from("/tmp/ib/key.pem"),
            https_port: 8443,
            http_port: 8080,
            admin_port: 9901,
            upstream_keepalive: 100,
            upstream_keepalive_requests: 100_000_000,
            worker_connections: 10_000,
            workers: 1,
            cpus: Vec::new(),
            worker_rlimit_nofile: 20_000,
            user_root: false,
            modules_dir: PathBuf::from(DEFAULT_MODULES_DIR),
            tls_log: None,
            passive: None,
            http2: false,
            grpc: false,
            fixture: false,
        }
    }

    #[test]
    fn handshakes_are_logged_only_when_counted() {
        let c = render(
            &settings(Mode::Reload),
            &[ep("b1", 5001)],
            Route::Base,
            None,
        );
        assert!(!c.contains("log_format"), "{c}");
        let mut s = settings(Mode::Reload);
        s.tls_log = Some(PathBuf::from("/o/tls.log"));
        let c = render(&s, &[ep("b1", 5001)], Route::Base, None);
        assert!(
            c.contains("log_format tls '$connection_requests $ssl_session_reused';"),
            "{c}"
        );
        assert!(c.contains("access_log \"/o/tls.log\" tls;"), "{c}");
    }

    fn ep(id: &str, port: u16) -> Endpoint {
        Endpoint {
            id: id.into(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    #[test]
    fn reload_config_lists_the_endpoints_and_keepalive() {
        let c = render(
            &settings(Mode::Reload),
            &[ep("b1", 5001), ep("b2", 5002)],
            Route::Base,
            None,
        );
        assert!(c.contains("server 127.0.0.1:5001 max_fails=0;"), "{c}");
        assert!(c.contains("server 127.0.0.1:5002 max_fails=0;"), "{c}");
        assert!(c.contains("keepalive 100;"), "{c}");
        assert!(c.contains("keepalive_requests 100000000;"), "{c}");
        assert!(c.contains("proxy_http_version 1.1;"), "{c}");
        // ingress-nginx's upgrade map: keep-alive intact for every other request.
        assert!(c.contains("proxy_set_header Upgrade $http_upgrade;"), "{c}");
        assert!(
            c.contains("proxy_set_header Connection $connection_upgrade;"),
            "{c}"
        );
        assert!(
            c.contains("    map $http_upgrade $connection_upgrade {\n        default upgrade;\n        '' '';\n    }\n"),
            "{c}"
        );
        let mut no_keepalive = settings(Mode::Reload);
        no_keepalive.upstream_keepalive = 0;
        let c0 = render(&no_keepalive, &[ep("b1", 5001)], Route::Base, None);
        assert!(c0.contains("        '' close;\n"), "{c0}");
        assert!(c.contains("worker_processes 1;"), "{c}");
        assert!(c.contains("events { worker_connections 10000; }"), "{c}");
        assert!(c.contains("listen 127.0.0.1:8443 ssl;"), "{c}");
        assert!(c.contains("listen 127.0.0.1:8080;"), "{c}");
        assert!(c.contains("ssl_protocols TLSv1.2 TLSv1.3;"), "{c}");
        assert!(c.contains("pid \"/tmp/ib-work/nginx.pid\";"), "{c}");
        assert!(!c.contains("lua"), "{c}");
        assert!(!c.contains("user root"), "{c}");
    }

    #[test]
    fn reload_config_without_endpoints_fails_fast() {
        let c = render(&settings(Mode::Reload), &[], Route::Base, None);
        assert!(c.contains("server 127.0.0.1:1 down;"), "{c}");
    }

    #[test]
    fn lua_config_loads_ndk_first_and_keepalive_after_the_balancer() {
        let c = render(&settings(Mode::Lua), &[ep("b1", 5001)], Route::Base, None);
        let ndk = c.find("ndk_http_module.so").unwrap();
        let lua = c.find("ngx_http_lua_module.so").unwrap();
        assert!(ndk < lua);
        let balancer = c.find("balancer_by_lua_block").unwrap();
        let keepalive = c.find("keepalive 100;").unwrap();
        assert!(balancer < keepalive);
        assert!(c.contains("listen 127.0.0.1:9901;"));
        assert!(
            !c.contains("5001"),
            "the list lives in the shared dict: {c}"
        );
    }

    #[test]
    fn routes_add_their_directives() {
        let s = settings(Mode::Reload);
        let cors = render(&s, &[], Route::Cors, None);
        assert!(cors.contains("add_header Access-Control-Allow-Origin \"*\" always;"));
        assert!(
            cors.contains("add_header Access-Control-Allow-Methods \"GET, POST, OPTIONS\" always;")
        );
        assert!(cors.contains(
            "add_header Access-Control-Allow-Headers \"Content-Type, Authorization\" always;"
        ));
        assert!(render(&s, &[], Route::Header, None).contains("add_header x-custom 1 always;"));
        assert!(
            render(&s, &[], Route::Rewrite, None).contains("rewrite ^/(.*)$ /rewritten/$1 break;")
        );
        let base = render(&s, &[], Route::Base, None);
        assert!(!base.contains("add_header") && !base.contains("rewrite "));
    }

    #[test]
    fn the_probes_fixture_is_a_server_of_its_own_answering_503_and_404() {
        for mode in [Mode::Reload, Mode::Lua] {
            let mut s = settings(mode);
            let off = render(&s, &[ep("b1", 5001)], Route::Base, None);
            assert!(!off.contains("fixture.probes.test"), "{off}");
            s.fixture = true;
            let c = render(&s, &[ep("b1", 5001)], Route::Base, None);
            let at = c
                .find("        server_name fixture.probes.test;\n")
                .expect(&c);
            let server = &c[at..];
            let server = &server[..server.find("\n    }\n").unwrap()];
            assert!(
                server.contains("        location /ib-empty { return 503; }\n"),
                "{c}"
            );
            assert!(
                server.ends_with("        location / { return 404; }"),
                "{server}"
            );
            assert!(
                !server.contains("proxy_pass"),
                "never the backends: {server}"
            );
            // The run's own server stays the default (first) one.
            assert!(c.find("location / {\n").unwrap() < at, "{c}");
        }
    }

    #[test]
    fn a_route_set_is_a_server_per_host_and_a_location_per_route() {
        let set = RouteSet::new(5, 2);
        let c = render(
            &settings(Mode::Reload),
            &[ep("b1", 5001)],
            Route::Base,
            Some(&set),
        );
        assert_eq!(c.matches("server_name h").count(), 2, "{c}");
        assert!(c.contains("server_name h1.routes.test;"), "{c}");
        for i in 0..5 {
            assert!(
                c.contains(&format!(
                    "location = /r{i} {{ add_header x-route r{i} always;"
                )),
                "{c}"
            );
        }
        // Route 3 is on host 1: after its server_name, before the next server.
        let h1 = c.find("server_name h1.routes.test;").unwrap();
        assert!(c[h1..].contains("location = /r3 "), "{c}");
        assert!(!c[h1..].contains("location = /r2 "), "{c}");
        assert!(c.contains("server_names_hash_max_size 512;"), "{c}");
        let none = render(
            &settings(Mode::Reload),
            &[ep("b1", 5001)],
            Route::Base,
            None,
        );
        assert!(!none.contains("routes.test"), "{none}");
        assert_eq!(
            c.matches('{').count(),
            c.matches('}').count(),
            "balanced braces"
        );
    }

    #[test]
    fn keepalive_zero_leaves_the_directive_out() {
        let mut s = settings(Mode::Reload);
        s.upstream_keepalive = 0;
        assert!(!render(&s, &[ep("b1", 5001)], Route::Base, None).contains("keepalive "));
    }

    #[test]
    fn http2_is_on_every_https_listener_only_when_asked_for() {
        let mut s = settings(Mode::Reload);
        let set = RouteSet::new(4, 2);
        let c = render(&s, &[], Route::Base, Some(&set));
        assert!(!c.contains("http2"), "{c}");
        s.http2 = true;
        let c = render(&s, &[], Route::Base, Some(&set));
        let ssl: Vec<_> = c.lines().filter(|l| l.contains(":8443")).collect();
        assert_eq!(ssl.len(), 3, "the main server and two hosts: {c}");
        assert!(ssl.iter().all(|l| l.ends_with(" ssl http2;")), "{ssl:?}");
        assert!(
            c.contains("listen 127.0.0.1:8080;"),
            "plain HTTP stays HTTP/1.1: {c}"
        );
    }
}
