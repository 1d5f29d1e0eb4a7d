// The scenario bad-input catalogue, in one place: the scenario crate's unit test
// (`Scenario::parse` says exactly this) and the CLI test (`validate`, `run` and
// `run --quick` all print it, with exit 2) both `include!` this file.

/// A small valid scenario; each bad case below edits one line of it.
const BASE: &str = "\
name: t
systems: [caddy-api]
backends:
  replicas: 2
load:
  rate: 200
  duration: 4s
quick:
  rate: 100
";

/// What `validate` (and `run`, before it starts anything) says about each bad file:
/// one line, naming the key as the file writes it and the line it is on.
const BAD: &[(&str, &str, &str)] = &[
    (
        "systems: [caddy-api]\n",
        "systems: [traefik]\nplatform: kubernetes\nprotocol: grpc\n",
        "line 4: protocol: traefik cannot express the route change `base`: gRPC through it needs its own backend-protocol annotations, not written yet: use a Gateway API profile (GRPCRoute) such as `contour` or `gateway-api`",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nprotocol: grpc\nrequests: [{path: /a}]\n",
        "line 3: protocol with a request mix: a gRPC run calls one method; leave out the mix",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [host]\nplatform: network-lab\ntls: {enabled: false}\nprotocol: grpc\n",
        "line 5: protocol: the network lab's server speaks HTTP/1.1 only (study S2): leave protocol out",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nprotocol: h2\ntls: {enabled: false}\n",
        "line 3: protocol: the local profiles offer HTTP/2 by ALPN on their HTTPS port: set tls.enabled: true (on a cluster with tls.enabled: false the load speaks h2c)",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nprotocol: h3\n",
        "line 3: protocol: unknown variant `h3`, expected one of `http/1.1`, `h2`, `grpc`",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [traefik]\n",
        "line 2: systems: traefik is not a local profile (platform: local): use one of nginx-reload, nginx-lua, haproxy-reload, haproxy-runtime, caddy-api, envoy-xds, envoy-hot-restart",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nplatform: kubernetes\n",
        "line 2: systems: caddy-api is not an installed controller (platform: kubernetes): use one of ingress-nginx, nginx-ingress, haproxy-ingress, traefik, traefik-nginx, contour, contour-ingress, envoy-gateway, nginx-gateway-fabric, openshift-router, gateway-api",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [traefik]\nplatform: kubernetes\nkubernetes:\n  gateway: gw\n",
        "line 5: kubernetes.gateway: write it as namespace/name",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [traefik]\nplatform: kubernetes\nkubernetes:\n  urls: {contour: \"https://198.18.0.1/\"}\n",
        "line 5: kubernetes.urls: contour is not among the systems",
    ),
    (
        "  replicas: 2\n",
        "  replicas: 2\n  delay: soon\n",
        "line 5: backends.delay \"soon\": 'soon' is not a duration: use a number with s, ms, us, m or h (e.g. 30s, 500ms, 3m)",
    ),
    (
        "  rate: 200\n",
        "  rate: 200\n  timeout: 0s\n",
        "line 7: load.timeout must be longer than 0s",
    ),
    (
        "  rate: 200\n",
        "  rate: 200\n  connect_timeout: 0s\n",
        "line 7: load.connect_timeout must be longer than 0s",
    ),
    (
        "  rate: 200\n",
        "  rate: 200\n  send_window: 2ms\n",
        "line 7: load.send_window 2ms is too wide: at most 1ms, so that arrivals stay within a millisecond of the schedule",
    ),
    // A request mix: each entry named by its number.
    (
        "  rate: 100\n",
        "  rate: 100\nrequests:\n  - {host: a.test, path: /}\n  - {host: b.test, path: x}\n",
        "line 10: requests entry 2: path 'x' does not start with /: write /x",
    ),
    (
        "  rate: 100\n",
        "  rate: 100\nrequests:\n  - {host: a.test, weight: 0}\n",
        "line 10: requests entry 1: weight 0: give a whole number from 1 up",
    ),
    (
        "  rate: 100\n",
        "  rate: 100\nrequests:\n  - {host: a.test, pth: /}\n",
        "line 11: requests[0]: unknown field `pth`, expected one of `method`, `host`, `path`, `headers`, `body`, `weight`",
    ),
    (
        "  duration: 4s\n",
        "  duration: 4s\n  connections: 1\nrequests:\n  - {host: a.test}\n  - {host: b.test}\n",
        "line 8: load.connections (1) is too few: 2 hosts need at least as many connections: each connection carries one host",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [traefik]\nplatform: kubernetes\nkubernetes:\n  urls: {traefik: \"https://198.18.0.1/\"}\n  generators:\n    count: 2\nrequests:\n  - {host: a.test}\n",
        "line 7: kubernetes.generators.count: 2 with requests: a request mix is not passed to generator pods yet (local generators, platform: local, take one): drop kubernetes.generators.count",
    ),
    // A route set, and a mix made of it.
    (
        "  rate: 100\n",
        "  rate: 100\nroutes: {count: 0}\n",
        "line 10: routes.count: 0 is out of range: use 1 to 100000",
    ),
    (
        "  rate: 100\n",
        "  rate: 100\nroutes:\n  count: 5\n  hosts: 6\n",
        "line 12: routes.hosts: 6 is out of range: use 1 to routes.count (5)",
    ),
    (
        "  rate: 100\n",
        "  rate: 100\nrequests: {from: routes}\n",
        "line 10: requests: {from: routes} needs a routes: section (e.g. routes: {count: 1000, hosts: 10})",
    ),
    (
        "  rate: 100\n",
        "  rate: 100\nroutes: {count: 10}\nrequests: {from: routes, skew: 9}\n",
        "line 11: requests: skew 9 is out of range: use 0 (every route alike) to 5",
    ),
    (
        "  rate: 100\n",
        "  rate: 100\nchanges:\n  - wait: 1s\n  - route_set: add\n",
        "line 10: changes: route_set needs a routes: section to change (e.g. routes: {count: 1000, hosts: 10})",
    ),
    (
        "  rate: 100\n",
        "  rate: 100\nroutes: {count: 10}\nchanges:\n  - route_set: grow\n",
        "line 12: changes[0].route_set: unknown variant `grow`, expected one of `add`, `remove`, `change`",
    ),
    (
        "  rate: 100\n",
        "  rate: 100\nroute_scale: [10, 100]\n",
        "line 10: route_scale needs a routes: section for its hosts and bound (e.g. routes: {count: 10, hosts: 10})",
    ),
    (
        "  rate: 100\n",
        "  rate: 100\nroutes: {count: 10, hosts: 10}\nroute_scale: [10, 5]\n",
        "line 11: route_scale: 5 is out of range: use routes.hosts (10) to 100000",
    ),
    (
        "  rate: 100\n",
        "  rate: 100\nroutes: {count: 10}\nroute_scale: [10, 100, 10]\n",
        "line 11: route_scale: 10 is given twice",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [contour]\nplatform: kubernetes\nkubernetes:\n  urls: {contour: \"https://198.18.0.1/\"}\nroutes: {count: 10}\n",
        "line 6: routes: on a cluster the route probe speaks plain HTTP to the controller: set tls.enabled: false and give its http:// address in kubernetes.urls",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [contour-ingress]\nplatform: kubernetes\ntls: {enabled: false}\nroutes: {count: 10}\n",
        "line 5: routes: contour-ingress cannot render a route set: Contour's Ingress annotations set no response header, and each route of a set must name itself in one: use the profile `contour` (HTTPRoute)",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [contour]\nplatform: kubernetes\nkubernetes:\n  processes: {traefik: \"traefik\"}\n",
        "line 5: kubernetes.processes: traefik is not among the systems",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [contour]\nplatform: kubernetes\nkubernetes:\n  processes: {contour: \"c\"}\n",
        "line 5: kubernetes.processes: contour: `c` would match almost any process: give a part of its command line of 3 characters or more",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [host]\nplatform: network-lab\ntls: {enabled: false}\nroutes: {count: 10}\n",
        "line 5: routes: a data path of the network lab has no proxy to route: drop routes, or use platform: local",
    ),
    (
        "  rate: 100\n",
        "  rate: 100\nrequests: {from: rutes}\n",
        "line 10: requests.from: unknown variant `rutes`, expected `routes`",
    ),
    (
        "  rate: 100\n",
        "  rate: 0\n",
        "line 9: quick.rate 0 is not a rate: give requests per second above 0",
    ),
    (
        "  rate: 100\n",
        "  rate: 100\n  connections: 0\n",
        "line 10: quick.connections must be at least 1",
    ),
    (
        "  duration: 4s\n",
        "  duration: 99999999999s\n",
        "line 7: load.duration: 99999999999s is too long: a scenario's durations are at most 7 days (168h)",
    ),
    (
        "  replicas: 2\n",
        "  replicas: 0\n",
        "line 4: backends.replicas: 0 is out of range: use 1 to 32",
    ),
    (
        "  rate: 200\n",
        "  rate: 200\n  sample: 1.5\n",
        "line 7: load.sample 1.5: give a fraction of requests from 0 to 1",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api\n",
        "line 3: did not find expected ',' or ']', while parsing a flow sequence at line 2 column 10",
    ),
    (
        "name: t\n",
        "name: \"../../etc/x\"\n",
        "line 1: name \"../../etc/x\": use 1 to 64 letters, digits, '.', '_' or '-', not starting with '.' (it names the results folder)",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [host, vxlan]\n",
        "line 2: systems: host is not a local profile (platform: local): use one of nginx-reload, nginx-lua, haproxy-reload, haproxy-runtime, caddy-api, envoy-xds, envoy-hot-restart",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nplatform: network-lab\n",
        "line 2: systems: caddy-api is not a data path (platform: network-lab): use one of host, bridge, host-gw, vxlan, macvlan",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nnetwork_lab:\n  notrack: true\n",
        "line 3: network_lab: only for `platform: network-lab`",
    ),
    (
        "  rate: 200\n",
        "  rates: [0.3, 0.5]\n",
        "line 6: load.rates: needs a search section saying what the maximum must keep, e.g. search: {p99: 5ms}",
    ),
    (
        "  rate: 200\n",
        "  rates: [0.3, 1.5]\n",
        "line 6: load.rates: 1.5 is not a fraction of the maximum: give values above 0 and at most 1, e.g. [0.3, 0.5]",
    ),
    (
        "  rate: 200\n",
        "  rate: 200\n  rates: [0.3]\n",
        "line 7: load.rates: give load.rate (a fixed rate) or load.rates (fractions of each system's maximum), not both",
    ),
    (
        "  rate: 200\n  duration: 4s\n",
        "  rates: [0.3]\n  duration: 4s\nsearch:\n  p99: 5ms\n  errors: lots\n",
        "line 10: search.errors: `lots`: give a share such as 0.1% or 0.001",
    ),
    (
        "quick:\n  rate: 100\n",
        "sizing:\n  cores: [0.5]\n  rps: [1024]\nsearch:\n  p99: 5ms\n",
        "line 6: sizing: a scan searches each row's maximum: remove load.rate and load.rates",
    ),
    (
        "  rate: 200\n  duration: 4s\nquick:\n  rate: 100\n",
        "  duration: 4s\nsizing:\n  cores: [0.001]\n  rps: [1024]\nsearch:\n  p99: 5ms\n",
        "line 8: sizing.cores: 0.001 is not an allocation: give cores from 0.01 (a quota) to 1024",
    ),
    (
        "  rate: 200\n  duration: 4s\nquick:\n  rate: 100\n",
        "  duration: 4s\nsizing:\n  cores: [1]\n  rps: [1024]\n",
        "line 7: sizing: needs a search section saying what each row's maximum must keep, e.g. search: {p99: 10ms}",
    ),
    (
        "  rate: 200\n  duration: 4s\nquick:\n  rate: 100\n",
        "  duration: 4s\nsizing:\n  cores: [1]\n  tps: {keys: [rsa2048]}\nsearch:\n  p99: 5ms\ntls:\n  enabled: false\n",
        "line 9: sizing.tps: measures TLS handshakes, but tls.enabled is false: remove one of them",
    ),
    (
        "  rate: 200\n",
        "  rate: [1000:30s, abc:10s]\n",
        "line 6: load.rate: the plan 'abc:10s' has a rate that is not a number of requests per second",
    ),
    (
        "  rate: 200\n",
        "  rate: [1000, 2000]\n",
        "line 6: load.rate: a plan's steps are RATE:DURATION or FROM..TO:DURATION, not 1000",
    ),
    (
        "  rate: 200\n",
        "  rate: [1000:30s, 2000:30s]\n",
        "line 7: load.duration: the plan in load.rate lasts 60s, not 4s: leave load.duration out (a plan sets the measured window)",
    ),
    (
        "  rate: 200\n",
        "",
        "line 5: load.rate: missing: give the requests per second (or load.rates: [0.3, 0.5] to run at fractions of each system's maximum)",
    ),
    (
        "  replicas: 2\n",
        "  replicas: 2\n  flapping: {healthy: 8s, failing: 50ms}\n",
        "line 5: backends.flapping: healthy 8000ms, failing 50ms: each phase is a whole number of tenths of a second, at least 100ms",
    ),
    (
        "  replicas: 2\n",
        "  replicas: 2\n  flapping:\n    healthy: 8s\n    failing: 4s\n    mode: crash\n",
        "line 8: backends.flapping.mode: unknown variant `crash`, expected one of `reset`, `503`, `stall`",
    ),
    (
        "  replicas: 2\n",
        "  replicas: 2\n  flapping: {count: 31, healthy: 8s, failing: 4s}\n",
        "line 5: backends.flapping.count: 31 is out of range: use 1 to 30 (with backends.replicas, at most 32 backends)",
    ),
    (
        "  replicas: 2\n",
        "  replicas: 2\npassive_health:\n  max_fails: 0\n",
        "line 6: passive_health.max_fails: 0 is out of range: use 1 to 1000",
    ),
    (
        "  replicas: 2\n",
        "  replicas: 2\npassive_health:\n  max_fail: 2\n",
        "line 6: passive_health: unknown field `max_fail`, expected one of `max_fails`, `fail_timeout`, `timeout`",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [nginx-lua]\npassive_health: {fail_timeout: 1s}\n",
        "line 3: passive_health: none of the systems has a tuned variant (those that do: nginx-reload, haproxy-reload, haproxy-runtime, caddy-api, envoy-xds, envoy-hot-restart)",
    ),
    // The plan's refusals of a generator count the file gives (`run` makes them
    // with no flag; `validate` the same).
    (
        "systems: [caddy-api]\n",
        "systems: [traefik]\nplatform: kubernetes\nkubernetes:\n  urls: {traefik: \"https://198.18.0.1/\"}\n  generators:\n    count: 0\n",
        "line 7: kubernetes.generators.count: 0: give at least 1",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [traefik]\nplatform: kubernetes\nkubernetes:\n  urls: {traefik: \"https://198.18.0.1/\"}\n  generators:\n    count: 100\n",
        "line 7: kubernetes.generators.count: 100 needs at least 100 connections, not load.connections: 50: each generator needs one",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [traefik]\nplatform: kubernetes\nkubernetes:\n  urls: {traefik: \"https://198.18.0.1/\"}\n  cacert: /nonexistent/ca.pem\n  generators:\n    count: 2\n",
        "line 8: kubernetes.generators.count: 2 on a cluster: kubernetes.cacert (--cacert) names a file on this machine, which the generator pods cannot read: use generator pods only with a URL whose certificate a public CA signed (or http://), or run the load here (drop kubernetes.generators.count)",
    ),
    (
        "systems: [caddy-api]\nbackends:\n  replicas: 2\nload:\n  rate: 200\n  duration: 4s\nquick:\n  rate: 100\n",
        "systems: [traefik]\nplatform: kubernetes\nkubernetes:\n  urls: {traefik: \"https://198.18.0.1/\"}\n  generators:\n    count: 2\nbackends:\n  replicas: 2\nload:\n  rates: [0.5]\n  duration: 4s\nsearch:\n  p99: 5ms\n",
        "line 7: kubernetes.generators.count: 2 with load.rates: the search for each maximum runs in this process, so the runs at its fractions must too: drop kubernetes.generators.count, or give load.rate",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nprobes:\n  add:\n    - id: ok\n      path: /a\n    - id: spaced\n      path: /a b\n",
        "line 7: probes.add: probe spaced: path \"/a b\" is not a request target: start it with / and percent-encode spaces and non-ASCII bytes (%20)",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nprobes:\n  add:\n    - id: hdr\n      path: /a\n      headers: [\"X Team: a\"]\n",
        "line 5: probes.add: probe hdr: header \"X Team: a\": \"X Team\" is not a header name (no spaces, no quotes)",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nprobes:\n  add:\n    - id: slow\n      path: /a\n      backend: sleep-10\n",
        "line 5: probes.add: probe slow: backend \"sleep-10\": use 503-once, reset-once, 503 or delay-ms=N",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nprobes:\n  add:\n    - id: plain\n      path: /a\n",
        "line 5: probes.add: probe plain: a built-in probe has this id: give yours another",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nprobes:\n  expect:\n    plain: {status: 200}\n    nope: {status: 308}\n",
        "line 6: probes.expect: nope: no probe nope (known: plain, underscore-header, body-1mib, body-1mib-plus-1, chunked-body, expect-100, upstream-503-once, upstream-reset-once, dot-segments, double-slash, encoded-slash, encoded-dots, upper-case-path, query, http10-no-host, unknown-host, unknown-path, no-ready-endpoint, duplicate-header, hop-by-hop, header-8k, header-16k, header-32k, slow-backend-2s, slow-backend-16s, upstream-reuse)",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nprobes:\n  only: [plain, cors]\n",
        "line 4: probes.only: cors is a behaviour of the annotation corpus: add probes.corpus: annotations",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nprobes:\n  corpus: annotation\n",
        "line 4: probes.corpus: unknown variant `annotation`, expected `annotations`",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nprobes:\n  add:\n    - id: x\n      path: /a\n      expect: {stauts: 308}\n",
        "line 7: probes.add[0].expect: unknown field `stauts`, expected one of `status`, `location`, `answered_by`, `target`, `attempts`",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nsessions:\n  websocket: 0\n",
        "line 4: sessions.websocket: 0 is out of range: use 1 to 20000",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nsessions:\n  websocket: 10\n  reopen: later\n",
        "line 5: sessions.reopen: unknown reopen \"later\": use at-once, never or after DURATION (after 1s)",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nsessions:\n  websocket: 10\n  message_size: 4B\n",
        "line 5: sessions.message_size: 4 bytes is out of range: use 8B to 1MiB",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nsessions:\n  websocket: 10\n  sockets: 3\n",
        "line 5: sessions: unknown field `sockets`, expected one of `websocket`, `grpc_streams`, `method`, `rate`, `message_size`, `reopen`, `path`",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nsessions:\n  rate: 10\n",
        "line 3: sessions: give websocket: N (WebSocket sessions) or grpc_streams: N (gRPC streams)",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nsessions:\n  websocket: 10\n  grpc_streams: 10\n",
        "line 5: sessions: websocket and grpc_streams together: a run holds one kind; give one of them",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nsessions:\n  grpc_streams: 10\n",
        "line 4: sessions.grpc_streams: the systems carry gRPC to the backends only with protocol: grpc (and tls.enabled: true); set it",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nprotocol: grpc\nsessions:\n  grpc_streams: 10\n  method: Echo\n",
        "line 6: sessions.method: 'Echo' is not SERVICE/METHOD (ingressbench.Backend/EchoStream)",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [caddy-api]\nsessions:\n  websocket: 10\n  method: a.B/C\n",
        "line 5: sessions.method is the gRPC streams' method: drop it, or give grpc_streams: N",
    ),
    (
        "systems: [caddy-api]\n",
        "systems: [host]\nplatform: network-lab\ntls: {enabled: false}\nsessions:\n  websocket: 10\n",
        "line 5: sessions: the network lab's server answers no WebSocket upgrade: drop sessions, or use platform: local",
    ),
];
