//! What a parsed scenario must not say: the checks `Scenario::parse` makes before
//! anything starts, each refusal naming its key ([`crate::keys`] finds its line), and
//! the forms a scenario takes under `run`'s flags (`--quick`, the cluster flags).

use crate::keys::*;
use crate::*;
use std::path::Path;
use std::time::Duration;

impl Scenario {
    /// Reads and checks a scenario file.
    ///
    /// # Errors
    /// [`ScenarioError`] naming the file, the line and the key.
    pub fn load(path: &Path) -> Result<(Scenario, String), ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            file: file.clone(),
            source,
        })?;
        let s = Scenario::parse(&text, &file)?;
        Ok((s, text))
    }

    /// The systems, as a list for a line of text: `nginx-reload, caddy-api`.
    pub fn system_names(&self) -> String {
        self.systems
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Parses and checks scenario text; `file` names it in errors.
    ///
    /// The checks are exactly those `run` makes before it starts anything: the
    /// engine's own check of the load ([`engine::LoadSpec::resolve`]), for the
    /// scenario as written and as `--quick` runs it, and the backend's parse of
    /// `backends.delay`.
    ///
    /// # Errors
    /// [`ScenarioError`] naming the file, the line and the key.
    pub fn parse(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
        let located = |e: serde_yaml_ng::Error| {
            let line = e.location().map(|l| l.line()).unwrap_or(0);
            // The location is reported once, in front; the context of a syntax error
            // (", while parsing a flow sequence at line 2 column 10") is kept.
            let mut msg = e.to_string();
            if let Some(i) = msg.find(" at line ") {
                let end = msg[i..].find(',').map_or(msg.len(), |j| i + j);
                msg.replace_range(i..end, "");
            }
            ScenarioError::Invalid {
                file: file.to_string(),
                line,
                msg,
            }
        };
        // The syntax of the whole file first: a flow sequence left open (`[a, b`)
        // would otherwise be read as items running on into the next keys.
        serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text).map_err(located)?;
        let mut s: Scenario = serde_yaml_ng::from_str(text).map_err(located)?;
        s.plan_sets_duration();
        s.check().map_err(|bad| bad.located(text, file))?;
        if let Some(k) = &mut s.kubernetes {
            let dir = Path::new(file).parent().unwrap_or(Path::new(""));
            for path in k.manifests.values_mut() {
                *path = dir.join(&*path);
            }
        }
        s.read_manifests()?;
        Ok(s)
    }

    /// `kubernetes.manifests`: each file read (a path in the file is taken beside
    /// it, one of `--manifests` as given) and checked with stand-ins for the run's
    /// values: an unknown placeholder, YAML that does not parse, a document that is
    /// no object, another namespace or a cluster's kind is named at the manifest's
    /// line before anything runs. What only the cluster can judge (its rules, its
    /// kinds) is judged by a dry run when the run starts.
    pub(crate) fn read_manifests(&mut self) -> Result<(), ScenarioError> {
        let Some(k) = &mut self.kubernetes else {
            return Ok(());
        };
        let namespace = k
            .namespace
            .clone()
            .unwrap_or_else(|| "ingressbench-run".to_string());
        k.manifest_texts.clear();
        for (system, path) in &k.manifests {
            let shown = path.display().to_string();
            let at = |line: usize, msg: String| ScenarioError::Manifest {
                file: shown.clone(),
                line,
                msg,
            };
            let body = std::fs::read_to_string(path).map_err(|e| {
                at(
                    0,
                    format!("cannot read it (kubernetes.manifests of {system}): {e}"),
                )
            })?;
            let located = |e: kubernetes::manifests::ManifestError| at(e.line, e.msg);
            let stand_ins = kubernetes::manifests::Values::stand_ins(&namespace);
            let rendered = kubernetes::manifests::render(&body, &stand_ins).map_err(located)?;
            kubernetes::manifests::parse(&rendered, &namespace).map_err(located)?;
            k.manifest_texts
                .insert(system.clone(), (shown.clone(), body));
        }
        Ok(())
    }

    /// `probes:`: a baseline among the systems, probes of the corpus, HTTP/1.1 loads
    /// (a probe is an HTTP/1.1 request of its own).
    fn check_probes(&self) -> Result<(), Bad> {
        let Some(p) = &self.probes else {
            return Ok(());
        };
        // The baseline is checked by the plan, once `--system` may have replaced
        // the file's systems and `--only` picked some (`Plan::build`).
        let mut ids: Vec<&str> = crate::probes::CORPUS.iter().map(|p| p.id).collect();
        for u in &p.add {
            let why = crate::probes::check_user(u);
            let why = why.or_else(|| {
                ids.contains(&u.id.as_str()).then(|| {
                    if crate::probes::find(&u.id).is_some() {
                        "a built-in probe has this id: give yours another".to_string()
                    } else {
                        "two probes have this id".to_string()
                    }
                })
            });
            if let Some(why) = why {
                return Err(
                    Bad::new("probes.add", format!("probes.add: probe {}: {why}", u.id))
                        .near(format!("id: {}", u.id)),
                );
            }
            ids.push(&u.id);
        }
        for h in &p.record {
            if !crate::probes::is_token(h) {
                return Err(Bad::new(
                    "probes.record",
                    format!("probes.record: {h:?} is not a header name (letters, digits and -, no spaces)"),
                ));
            }
        }
        let corpus: Vec<String> = if p.corpus.is_some() {
            crate::probes::corpus_ids()
        } else {
            Vec::new()
        };
        for id in &p.only {
            if corpus.contains(id) {
                continue;
            }
            if !ids.contains(&id.as_str()) {
                if p.corpus.is_none() && crate::probes::corpus_ids().contains(id) {
                    return Err(Bad::new(
                        "probes.only",
                        format!("probes.only: {id} is a behaviour of the annotation corpus: add probes.corpus: annotations"),
                    ));
                }
                return Err(Bad::new(
                    "probes.only",
                    format!("probes.only: no probe {id} (known: {})", ids.join(", ")),
                ));
            }
        }
        for (id, e) in &p.expect {
            let why = if ids.contains(&id.as_str()) || corpus.contains(id) {
                crate::probes::check_expect(e)
            } else {
                Some(format!("no probe {id} (known: {})", ids.join(", ")))
            };
            if let Some(why) = why {
                return Err(
                    Bad::new("probes.expect", format!("probes.expect: {id}: {why}"))
                        .near(id.to_string()),
                );
            }
        }
        if self.platform == PlatformKind::NetworkLab {
            return Err(Bad::new(
                "probes",
                "probes: the network lab's server is not the backend that reports what it received: drop probes, or use platform: local",
            ));
        }
        Ok(())
    }

    /// `sessions:`: a count, a rate, a size and a reopen the engine takes, where the
    /// backends answer a WebSocket upgrade.
    fn check_sessions(&self) -> Result<(), Bad> {
        let Some(s) = &self.sessions else {
            return Ok(());
        };
        let (key, n) = match (s.websocket, s.grpc_streams) {
            (None, None) => {
                return Err(Bad::new(
                    "sessions",
                    "sessions: give websocket: N (WebSocket sessions) or grpc_streams: N (gRPC streams)",
                ))
            }
            (Some(w), None) => ("websocket", w),
            (None, Some(g)) => ("grpc_streams", g),
            _ => {
                return Err(Bad::new(
                    "sessions.grpc_streams",
                    "sessions: websocket and grpc_streams together: a run holds one kind; give one of them",
                ))
            }
        };
        if n == 0 || n > MAX_SESSIONS {
            let at = if key == "websocket" {
                "sessions.websocket"
            } else {
                "sessions.grpc_streams"
            };
            return Err(Bad::new(
                at,
                format!("sessions.{key}: {n} is out of range: use 1 to {MAX_SESSIONS}"),
            ));
        }
        if key == "websocket" && s.method.is_some() {
            return Err(Bad::new(
                "sessions.method",
                "sessions.method is the gRPC streams' method: drop it, or give grpc_streams: N",
            ));
        }
        if key == "grpc_streams" {
            if let Some(m) = &s.method {
                let m = m.trim_start_matches('/');
                if !m.contains('/') || m.ends_with('/') {
                    return Err(Bad::new(
                        "sessions.method",
                        format!(
                            "sessions.method: '{m}' is not SERVICE/METHOD ({})",
                            engine::sessions::ECHO_STREAM
                        ),
                    ));
                }
            }
            if self.protocol != Protocol::Grpc {
                return Err(Bad::new(
                    "sessions.grpc_streams",
                    "sessions.grpc_streams: the systems carry gRPC to the backends only with \
                     protocol: grpc (and tls.enabled: true); set it",
                ));
            }
        }
        if !s.rate.is_finite() || s.rate < 0.0 {
            return Err(Bad::new(
                "sessions.rate",
                format!(
                    "sessions.rate: {} is not a rate: give messages per second over all sessions (0: only held open)",
                    s.rate
                ),
            ));
        }
        match results::size::parse(&s.message_size) {
            Ok(n) if (engine::sessions::MIN_MESSAGE_BYTES..=1 << 20).contains(&n) => {}
            Ok(n) => {
                return Err(Bad::new(
                    "sessions.message_size",
                    format!("sessions.message_size: {n} bytes is out of range: use 8B to 1MiB"),
                ))
            }
            Err(e) => {
                return Err(Bad::new(
                    "sessions.message_size",
                    format!("sessions.message_size: '{}' {e}", s.message_size),
                ))
            }
        }
        if let Err(e) = engine::sessions::Reopen::parse(&s.reopen) {
            return Err(Bad::new("sessions.reopen", format!("sessions.reopen: {e}")));
        }
        if let Some(p) = &s.path {
            if !p.starts_with('/') {
                return Err(Bad::new(
                    "sessions.path",
                    format!("sessions.path: '{p}' must start with /"),
                ));
            }
        }
        let image = self.kubernetes.as_ref().and_then(|k| k.image.as_deref());
        match self.platform {
            PlatformKind::NetworkLab => Err(Bad::new(
                "sessions",
                "sessions: the network lab's server answers no WebSocket upgrade: drop sessions, or use platform: local",
            )),
            PlatformKind::Kubernetes
                if !matches!(
                    kubernetes::objects::BackendImage::from_setting(image),
                    kubernetes::objects::BackendImage::Ingressbench(_)
                ) =>
            {
                Err(Bad::new(
                    "sessions",
                    "sessions: only ingressbench's backend image answers WebSocket upgrades on a \
                     cluster: set kubernetes.image: ingressbench (docs/kubernetes.md says how to \
                     build it)",
                ))
            }
            _ => Ok(()),
        }
    }

    /// `routes:` on the local lab, in range; `requests: {from: routes}` with it.
    fn check_routes(&self) -> Result<(), Bad> {
        if let Some(r) = &self.routes {
            if r.count == 0 || r.count > MAX_ROUTES {
                return Err(Bad::new(
                    "routes.count",
                    format!(
                        "routes.count: {} is out of range: use 1 to {MAX_ROUTES}",
                        r.count
                    ),
                ));
            }
            if r.hosts == 0 || r.hosts > r.count {
                return Err(Bad::new(
                    "routes.hosts",
                    format!(
                        "routes.hosts: {} is out of range: use 1 to routes.count ({})",
                        r.hosts, r.count
                    ),
                ));
            }
            match self.platform {
                PlatformKind::Local => {}
                PlatformKind::NetworkLab => {
                    return Err(Bad::new(
                        "routes",
                        "routes: a data path of the network lab has no proxy to route: drop routes, or use platform: local",
                    ));
                }
                PlatformKind::Kubernetes => {
                    // The probe asks each route over plain HTTP (its hosts have no
                    // certificate), through the URL the load uses.
                    if self.tls.enabled {
                        return Err(Bad::new(
                            "routes",
                            "routes: on a cluster the route probe speaks plain HTTP to the controller: set tls.enabled: false and give its http:// address in kubernetes.urls",
                        ));
                    }
                    for p in &self.systems {
                        if let Some(c) = kubernetes::controllers::controller(p.name()) {
                            kubernetes::controllers::check_route_set(c).map_err(|e| {
                                Bad::new(
                                    "routes",
                                    format!(
                                        "routes: {} cannot render a route set: {}",
                                        e.controller, e.why
                                    ),
                                )
                            })?;
                        }
                    }
                }
            }
        }
        if !self.route_scale.is_empty() {
            let Some(r) = &self.routes else {
                return Err(Bad::new(
                    "route_scale",
                    "route_scale needs a routes: section for its hosts and bound (e.g. routes: {count: 10, hosts: 10})",
                ));
            };
            if self.route_scale.len() > MAX_ROUTE_SIZES {
                return Err(Bad::new(
                    "route_scale",
                    format!(
                        "route_scale: {} sizes, at most {MAX_ROUTE_SIZES}",
                        self.route_scale.len()
                    ),
                ));
            }
            for (k, &n) in self.route_scale.iter().enumerate() {
                if n < r.hosts || n > MAX_ROUTES {
                    return Err(Bad::new(
                        "route_scale",
                        format!(
                            "route_scale: {n} is out of range: use routes.hosts ({}) to {MAX_ROUTES}",
                            r.hosts
                        ),
                    ));
                }
                if self.route_scale[..k].contains(&n) {
                    return Err(Bad::new(
                        "route_scale",
                        format!("route_scale: {n} is given twice"),
                    ));
                }
            }
            if !self.load.rates.is_empty() {
                return Err(Bad::new(
                    "route_scale",
                    "route_scale: not with load.rates (each size would need its own search): give load.rate",
                ));
            }
        }
        if self.routes.is_none() && changes_route_set(&self.changes) {
            return Err(Bad::new(
                "changes",
                "changes: route_set needs a routes: section to change (e.g. routes: {count: 1000, hosts: 10})",
            ));
        }
        if let Requests::FromRoutes(f) = &self.requests {
            if self.routes.is_none() {
                return Err(Bad::new(
                    "requests",
                    "requests: {from: routes} needs a routes: section (e.g. routes: {count: 1000, hosts: 10})",
                ));
            }
            if !(f.skew.is_finite() && (0.0..=5.0).contains(&f.skew)) {
                return Err(Bad::new(
                    "requests",
                    format!(
                        "requests: skew {} is out of range: use 0 (every route alike) to 5",
                        f.skew
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The checks that span keys or need another part's rules.
    fn check(&self) -> Result<(), Bad> {
        if self.systems.is_empty() {
            return Err(Bad::new(
                "systems",
                "systems: name at least one system under test",
            ));
        }
        for (i, a) in self.systems.iter().enumerate() {
            if self.systems[..i].contains(a) {
                return Err(Bad::new(
                    "systems",
                    format!("systems: {} is listed twice", a.name()),
                ));
            }
        }
        self.check_platform()?;
        self.check_probes()?;
        self.check_sessions()?;
        if self.protocol != Protocol::Http1 && self.platform == PlatformKind::NetworkLab {
            return Err(Bad::new(
                "protocol",
                "protocol: the network lab's server speaks HTTP/1.1 only (study S2): leave protocol out",
            ));
        }
        if self.protocol != Protocol::Http1
            && self.platform == PlatformKind::Local
            && !self.tls.enabled
        {
            return Err(Bad::new(
                "protocol",
                "protocol: the local profiles offer HTTP/2 by ALPN on their HTTPS port: set tls.enabled: true (on a cluster with tls.enabled: false the load speaks h2c)",
            ));
        }
        if self.protocol == Protocol::Grpc && self.routes.is_some() {
            return Err(Bad::new(
                "protocol",
                "protocol: grpc with routes: a route set is probed and loaded over HTTP, not gRPC; drop one of them",
            ));
        }
        let b = &self.backends;
        if b.replicas == 0 || b.replicas > MAX_REPLICAS {
            return Err(Bad::new(
                "backends.replicas",
                format!(
                    "backends.replicas: {} is out of range: use 1 to {MAX_REPLICAS}",
                    b.replicas
                ),
            ));
        }
        if b.body_size > 1 << 20 {
            return Err(Bad::new(
                "backends.body_size",
                "backends.body_size: at most 1048576 bytes",
            ));
        }
        if let Some(d) = &b.delay {
            backend::Delay::parse(d)
                .map_err(|e| Bad::new("backends.delay", format!("backends.delay {e}")))?;
        }
        self.check_rates()?;
        self.check_routes()?;
        let list: &[RequestEntry] = match &self.requests {
            Requests::List(l) => l,
            _ => &[],
        };
        for (i, r) in list.iter().enumerate() {
            if !r.path.starts_with('/') {
                return Err(Bad::new(
                    "requests",
                    format!(
                        "requests entry {}: path '{}' does not start with /: write /{}",
                        i + 1,
                        r.path,
                        r.path
                    ),
                ));
            }
        }
        failover::check(self).map_err(|(key, msg)| Bad::new(key, msg))?;
        // The load as the runner gives it to the engine.
        plan::load_spec(self)
            .resolve()
            .map_err(|e| Bad::spec(&e, spec_key))?;
        if let Some(q) = &self.quick {
            if !(q.time_scale > 0.0 && q.time_scale <= 1.0) {
                return Err(Bad::new(
                    "quick.time_scale",
                    "quick.time_scale must be above 0 and at most 1",
                ));
            }
            if q.connections == Some(0) {
                return Err(Bad::new(
                    "quick.connections",
                    "quick.connections must be at least 1",
                ));
            }
            // What `--quick` replaced is named by its `quick` key.
            let quick = self.quick();
            plan::load_spec(&quick)
                .resolve()
                .map_err(|e| Bad::spec(&e, quick_key))?;
        }
        check_steps(&self.changes, 0).map_err(|msg| Bad::new("changes", msg))?;
        PlacementSpec::resolve(self.placement.as_ref())
            .check()
            .map_err(|msg| Bad::new("placement", msg))?;
        Ok(())
    }

    /// Applies `run`'s flags for a cluster: the platform, the systems named with
    /// their URLs (they replace the file's systems), and the connection settings;
    /// then checks the result as a file would be.
    ///
    /// # Errors
    /// A one-line message naming the flag or key at fault.
    pub fn override_cluster(&mut self, o: ClusterFlags) -> Result<(), String> {
        if let Some(p) = o.platform {
            self.platform = p;
        }
        let cluster_flags = !o.systems.is_empty()
            || o.kubeconfig.is_some()
            || o.context.is_some()
            || o.namespace.is_some()
            || o.keep
            || !o.gateways.is_empty()
            || o.cacert.is_some()
            || !o.manifests.is_empty();
        if cluster_flags && self.platform != PlatformKind::Kubernetes {
            return Err(
                "--system, --kubeconfig, --context, --namespace, --keep, --gateway, --cacert and --manifests are for --platform kubernetes"
                    .into(),
            );
        }
        if self.platform != PlatformKind::Kubernetes {
            // A platform given on the command line meets the file's checks too.
            return self.check_platform().map_err(|b| b.msg);
        }
        let k = self
            .kubernetes
            .get_or_insert_with(KubernetesSection::default);
        k.kubeconfig = o.kubeconfig.or(k.kubeconfig.take());
        k.context = o.context.or(k.context.take());
        k.namespace = o.namespace.or(k.namespace.take());
        k.keep |= o.keep;
        k.cacert = o.cacert.or(k.cacert.take());
        k.manifests.extend(o.manifests);
        for (system, gw) in o.gateways {
            if split_gateway(&gw).is_none() {
                return Err(format!(
                    "--gateway {gw}: write it as [SYSTEM=]NAMESPACE/NAME, e.g. infra/public-gw"
                ));
            }
            match system {
                Some(sys) => {
                    k.gateways.insert(sys, gw);
                }
                None => k.gateway = Some(gw),
            }
        }
        if !o.systems.is_empty() {
            let mut systems = Vec::new();
            for (name, url) in o.systems {
                let c = kubernetes::controllers::controller(&name).ok_or_else(|| {
                    format!(
                        "--system {name}: not an installed-controller profile: use one of {}",
                        kubernetes::controllers::names().join(", ")
                    )
                })?;
                systems.push(Profile(c.name));
                k.urls.insert(name, url);
            }
            self.systems = systems;
        }
        self.check_platform().map_err(|b| b.msg)?;
        for p in &self.systems {
            // A Gateway of the run's own gives its address once it is Programmed.
            if !self.kubernetes.as_ref().is_some_and(|k| {
                k.urls.contains_key(p.name()) || k.gateway_class_for(p.name()).is_some()
            }) {
                return Err(format!(
                    "{}: no URL: give its data plane's address with --system {}=https://... or kubernetes.urls, or let the run make a Gateway of its own (kubernetes.gateway_class)",
                    p.name(),
                    p.name()
                ));
            }
        }
        // Again: `--manifests` and `--namespace` may have changed what they are.
        self.read_manifests().map_err(|e| e.to_string())
    }

    /// A load plan sets the measured window: `load.duration` may be left out (it is
    /// then the plan's length), or must agree ([`Scenario::check_rates`]).
    fn plan_sets_duration(&mut self) {
        if let (Some(p), true) = (self.load.rate.plan(), self.load.duration.0.is_zero()) {
            self.load.duration = Dur(p.duration());
        }
    }

    /// Systems of the platform's kind, and what a cluster needs to reach them.
    /// `load.rate` or `load.rates` (with its `search` section), not both.
    fn check_rates(&self) -> Result<(), Bad> {
        if self.sizing.is_some() {
            return self.check_sizing();
        }
        let l = &self.load;
        if let Some(p) = l.rate.plan() {
            if l.duration.0 != p.duration() {
                return Err(Bad::new(
                    "load.duration",
                    format!(
                        "load.duration: the plan in load.rate lasts {}s, not {}s: leave load.duration out (a plan sets the measured window)",
                        p.duration().as_secs_f64(),
                        l.duration.0.as_secs_f64()
                    ),
                ));
            }
        }
        if l.duration.0.is_zero() {
            return Err(Bad::new(
                "load.duration",
                "load.duration: missing: give the measured window, e.g. 60s",
            ));
        }
        match (l.rate.given(), l.rates.is_empty()) {
            (true, false) => {
                return Err(Bad::new(
                    "load.rates",
                    "load.rates: give load.rate (a fixed rate) or load.rates (fractions of each system's maximum), not both",
                ))
            }
            (false, true) => {
                return Err(Bad::new(
                    "load.rate",
                    "load.rate: missing: give the requests per second (or load.rates: [0.3, 0.5] to run at fractions of each system's maximum)",
                ))
            }
            _ => {}
        }
        for (i, f) in l.rates.iter().enumerate() {
            if l.rates[..i]
                .iter()
                .any(|g| (g * 100.0).round() == (f * 100.0).round())
            {
                return Err(Bad::new(
                    "load.rates",
                    format!("load.rates: {f} is the same whole percent as another fraction (its runs are named by percent): give distinct ones"),
                ));
            }
        }
        if let Some(f) = l.rates.iter().find(|f| !(**f > 0.0 && **f <= 1.0)) {
            return Err(Bad::new(
                "load.rates",
                format!("load.rates: {f} is not a fraction of the maximum: give values above 0 and at most 1, e.g. [0.3, 0.5]"),
            ));
        }
        match (&self.search, l.rates.is_empty()) {
            (None, false) => Err(Bad::new(
                "load.rates",
                "load.rates: needs a search section saying what the maximum must keep, e.g. search: {p99: 5ms}",
            )),
            (Some(_), true) => Err(Bad::new(
                "search",
                "search: only used with load.rates (fractions of the maximum it finds)",
            )),
            (Some(sr), false) => Self::check_search(sr),
            (None, true) => Ok(()),
        }
    }

    /// A sizing scan: a search section for its bounds, on the local lab, with no
    /// fixed rate and no changes.
    fn check_sizing(&self) -> Result<(), Bad> {
        let Some(z) = &self.sizing else {
            return Ok(());
        };
        let l = &self.load;
        if l.rate.given() || !l.rates.is_empty() {
            return Err(Bad::new(
                if l.rates.is_empty() {
                    "load.rate"
                } else {
                    "load.rates"
                },
                "sizing: a scan searches each row's maximum: remove load.rate and load.rates",
            ));
        }
        if !self.changes.is_empty() {
            return Err(Bad::new(
                "changes",
                "sizing: a scan makes no changes: remove changes (or run them in a scenario of their own)",
            ));
        }
        if self.passive_health.is_some() || self.backends.flapping.is_some() {
            return Err(Bad::new(
                if self.passive_health.is_some() { "passive_health" } else { "backends.flapping" },
                "sizing: a scan measures each proxy as shipped against steady backends: remove passive_health and backends.flapping",
            ));
        }
        if self.platform != PlatformKind::Local {
            return Err(Bad::new(
                "platform",
                format!("sizing: platform {} cannot scan CPU allocations: a scan gives the lab's own proxies CPUs and quotas (platform: local)", self.platform),
            ));
        }
        z.check(self.tls.enabled)
            .map_err(|(key, msg)| Bad::new(key, msg))?;
        let Some(sr) = &self.search else {
            return Err(Bad::new(
                "sizing",
                "sizing: needs a search section saying what each row's maximum must keep, e.g. search: {p99: 10ms}",
            ));
        };
        Self::check_search(sr)
    }

    /// The `search` section's own values.
    fn check_search(sr: &SearchSection) -> Result<(), Bad> {
        if sr.p99.0.is_zero() {
            return Err(Bad::new(
                "search.p99",
                "search.p99: give a bound above zero, e.g. 5ms",
            ));
        }
        if share(&sr.errors).is_none() {
            return Err(Bad::new(
                "search.errors",
                format!(
                    "search.errors: `{}`: give a share such as 0.1% or 0.001",
                    sr.errors
                ),
            ));
        }
        if !share(&sr.precision).is_some_and(|p| (0.001..=0.5).contains(&p)) {
            return Err(Bad::new(
                "search.precision",
                format!("search.precision: `{}`: give 0.1% to 50%", sr.precision),
            ));
        }
        if sr.trials == 0 || sr.trials > 9 {
            return Err(Bad::new(
                "search.trials",
                format!("search.trials: {}: give 1 to 9", sr.trials),
            ));
        }
        if sr.probe.0 < Duration::from_millis(500) {
            return Err(Bad::new(
                "search.probe",
                "search.probe: give at least 500ms, enough for a ceiling to show",
            ));
        }
        if sr.duration.0 < Duration::from_millis(500) {
            return Err(Bad::new(
                "search.duration",
                "search.duration: give at least 500ms per step",
            ));
        }
        Ok(())
    }

    /// The network lab's section, and what a data path cannot do.
    fn check_network_lab(&self) -> Result<(), Bad> {
        let net = self.platform == PlatformKind::NetworkLab;
        if let Some(n) = &self.network_lab {
            if !net {
                return Err(Bad::new(
                    "network_lab",
                    "network_lab: only for `platform: network-lab`",
                ));
            }
            if !["s2", "none"].contains(&n.tuning.as_str()) {
                return Err(Bad::new(
                    "network_lab.tuning",
                    format!("network_lab.tuning: `{}`: use s2 or none", n.tuning),
                ));
            }
            if let Some(k) = n.sysctls.keys().find(|k| !k.starts_with("net.")) {
                return Err(Bad::new(
                    "network_lab.sysctls",
                    format!("network_lab.sysctls: {k} is not a network namespace's own (only net.* keys are; the lab changes nothing outside its namespaces)"),
                ));
            }
            if n.notrack && self.systems.iter().any(|p| p.name() == "bridge") {
                return Err(Bad::new(
                    "network_lab.notrack",
                    "network_lab.notrack: the bridge path's DNAT needs conntrack to translate replies back: set notrack: false or leave bridge out",
                ));
            }
        }
        if net {
            if self.tls.enabled {
                return Err(Bad::new(
                    "tls.enabled",
                    "tls.enabled: the network lab's server speaks plain HTTP (study S2): set tls.enabled: false",
                ));
            }
            if self.backends.delay.is_some() {
                return Err(Bad::new(
                    "backends.delay",
                    "backends.delay: the network lab's server is nginx serving a file, which cannot delay answers: remove backends.delay",
                ));
            }
            if let Some(what) = first_change(&self.changes) {
                return Err(Bad::new(
                    "changes",
                    format!("changes: `{what}` on the network lab: a data path has one server and no proxy, so only `wait` steps apply"),
                ));
            }
        }
        Ok(())
    }

    /// Lifecycle steps each system can make, refused before anything starts.
    fn check_lifecycle(&self) -> Result<(), Bad> {
        let has = |f: &dyn Fn(&Step) -> bool| any_step(&self.changes, f);
        if has(&|s| matches!(s, Step::Rotate(_))) && !self.tls.enabled {
            return Err(Bad::new(
                "changes",
                "changes: rotate: certificate needs TLS between the load and the system: set tls.enabled: true",
            ));
        }
        if has(&|s| matches!(s, Step::Drain(_))) && self.platform != PlatformKind::Kubernetes {
            return Err(Bad::new(
                "changes",
                format!(
                    "changes: drain: node needs platform kubernetes (platform {} has no nodes): remove the step",
                    self.platform
                ),
            ));
        }
        if self.platform == PlatformKind::Kubernetes {
            if has(&|s| matches!(s, Step::Rotate(_)))
                && self.kubernetes.as_ref().is_some_and(|k| k.cacert.is_some())
            {
                return Err(Bad::new(
                    "changes",
                    "changes: rotate: certificate rotates the certificate the run made for the controller, but kubernetes.cacert says the controller serves its own: drop kubernetes.cacert (the run then makes the TLS Secret) or the step",
                ));
            }
            if has(&|s| matches!(s, Step::Rotate(_))) {
                // A Gateway of the run's own names the run's Secret in its listener.
                let own_gateway = |name: &str| {
                    self.kubernetes
                        .as_ref()
                        .is_some_and(|k| k.gateway_class_for(name).is_some())
                };
                if let Some(p) = self.systems.iter().find(|p| {
                    kubernetes::controllers::controller(p.name()).is_some_and(|c| {
                        !matches!(c.routing, kubernetes::controllers::Routing::Ingress { .. })
                            && !own_gateway(p.name())
                    })
                }) {
                    return Err(Bad::new(
                        "changes",
                        format!(
                            "changes: rotate: certificate on a cluster rotates the TLS Secret of the run's Ingress, and {} is not routed by an Ingress and its Gateway is not the run's (that Gateway's listener holds its certificate): let the run make its own Gateway (kubernetes.gateway_class), or remove the step or the system",
                            p.name()
                        ),
                    ));
                }
            }
            let workloads = self.kubernetes.as_ref().map(|k| &k.workloads);
            for (name, w) in workloads.into_iter().flatten() {
                if !self.systems.iter().any(|p| p.name() == name) {
                    return Err(Bad::new(
                        "kubernetes.workloads",
                        format!("kubernetes.workloads: {name} is not among the systems"),
                    ));
                }
                w.clone().install().workload().map_err(|e| {
                    Bad::new(
                        "kubernetes.workloads",
                        format!("kubernetes.workloads.{name}.{e}"),
                    )
                })?;
            }
            let proxy = has(&|s| matches!(s, Step::Restart(RestartWhat::Proxy)));
            let controller = has(&|s| matches!(s, Step::Restart(RestartWhat::Controller)));
            for p in &self.systems {
                if !(proxy || controller) {
                    break;
                }
                let given = workloads
                    .and_then(|w| w.get(p.name()))
                    .cloned()
                    .map(Workloads::install);
                let install = given.or_else(|| {
                    kubernetes::controllers::controller(p.name())
                        .and_then(|c| c.install.as_ref())
                        .map(kubernetes::controllers::Install::owned)
                });
                let missing = match &install {
                    None => Some("where its pods run"),
                    Some(i) if proxy && i.data_plane.is_none() => Some(
                        "its data plane's workload (data_plane: deployment/NAME or daemonset/NAME)",
                    ),
                    Some(_) => None,
                };
                if let Some(what) = missing {
                    return Err(Bad::new(
                        "changes",
                        format!(
                            "changes: restart: nothing says {what} for {}: give it in kubernetes.workloads.{}",
                            p.name(),
                            p.name()
                        ),
                    ));
                }
            }
        }
        if self.platform == PlatformKind::Local
            && has(&|s| matches!(s, Step::Restart(RestartWhat::Controller)))
        {
            let with: Vec<&str> = lab::PROFILES
                .iter()
                .filter(|p| p.driver().capabilities().restart_controller)
                .map(|p| p.name)
                .collect();
            if let Some(p) = self.systems.iter().find(|p| {
                lab::profiles::profile(p.name())
                    .is_some_and(|x| !x.driver().capabilities().restart_controller)
            }) {
                return Err(Bad::new(
                    "changes",
                    format!(
                        "changes: restart: controller: {} has no control plane apart from its proxy (ingressbench plays its controller): of the local profiles only {} {} one",
                        p.name(),
                        with.join(", "),
                        if with.len() == 1 { "has" } else { "have" }
                    ),
                ));
            }
        }
        Ok(())
    }

    fn check_platform(&self) -> Result<(), Bad> {
        let kube = self.platform == PlatformKind::Kubernetes;
        let kind = |name: &str| {
            if lab::profiles::profile(name).is_some() {
                PlatformKind::Local
            } else if lab::network::data_path(name).is_some() {
                PlatformKind::NetworkLab
            } else {
                PlatformKind::Kubernetes
            }
        };
        for p in &self.systems {
            if kind(p.name()) != self.platform {
                let (want, names) = match self.platform {
                    PlatformKind::Kubernetes => {
                        ("an installed controller", kubernetes::controllers::names())
                    }
                    PlatformKind::NetworkLab => ("a data path", lab::network::path_names()),
                    PlatformKind::Local => ("a local profile", lab::profiles::names()),
                };
                return Err(Bad::new(
                    "systems",
                    format!(
                        "systems: {} is not {want} (platform: {}): use one of {}",
                        p.name(),
                        self.platform,
                        names.join(", ")
                    ),
                ));
            }
        }
        self.check_network_lab()?;
        self.check_lifecycle()?;
        let image = self.kubernetes.as_ref().and_then(|k| k.image.as_deref());
        if kube
            && self.backends.delay.is_some()
            && !matches!(
                kubernetes::objects::BackendImage::from_setting(image),
                kubernetes::objects::BackendImage::Ingressbench(_)
            )
        {
            return Err(Bad::new(
                "backends.delay",
                "backends.delay: only ingressbench's backend image can delay answers on a \
                 cluster: set kubernetes.image: ingressbench (docs/kubernetes.md says how to \
                 build it)",
            ));
        }
        if let Some(k) = &self.kubernetes {
            if !kube {
                return Err(Bad::new(
                    "kubernetes",
                    "kubernetes: only for `platform: kubernetes`",
                ));
            }
            if k.gateway.is_some() && k.gateway().is_none() {
                return Err(Bad::new(
                    "kubernetes.gateway",
                    "kubernetes.gateway: write it as namespace/name",
                ));
            }
            self.check_gateway_classes(k)?;
            self.check_ingress_classes(k)?;
            self.check_manifests(k)?;
            for (name, gw) in &k.gateways {
                if !self.systems.iter().any(|p| p.name() == name) {
                    return Err(Bad::new(
                        "kubernetes.gateways",
                        format!("kubernetes.gateways: {name} is not among the systems"),
                    ));
                }
                if split_gateway(gw).is_none() {
                    return Err(Bad::new(
                        "kubernetes.gateways",
                        format!("kubernetes.gateways: {name}: write `{gw}` as namespace/name"),
                    ));
                }
            }
            for (name, text) in &k.processes {
                if !self.systems.iter().any(|p| p.name() == name) {
                    return Err(Bad::new(
                        "kubernetes.processes",
                        format!("kubernetes.processes: {name} is not among the systems"),
                    ));
                }
                if text.trim().len() < 3 {
                    return Err(Bad::new(
                        "kubernetes.processes",
                        format!(
                            "kubernetes.processes: {name}: `{text}` would match almost any process: give a part of its command line of 3 characters or more"
                        ),
                    ));
                }
            }
            for (name, url) in &k.urls {
                if !self.systems.iter().any(|p| p.name() == name) {
                    return Err(Bad::new(
                        "kubernetes.urls",
                        format!("kubernetes.urls: {name} is not among the systems"),
                    ));
                }
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(Bad::new(
                        "kubernetes.urls",
                        format!(
                            "kubernetes.urls: {name}: `{url}` is not an http:// or https:// URL"
                        ),
                    ));
                }
                if self.tls.enabled && url.starts_with("http://") {
                    return Err(Bad::new(
                        "kubernetes.urls",
                        format!(
                            "kubernetes.urls: {name}: `{url}` is plain HTTP but the scenario loads over TLS: \
                             give the controller's https:// address, or set tls.enabled: false"
                        ),
                    ));
                }
            }
        }
        if kube {
            // A change a controller cannot make is refused before anything starts.
            let mut routes = Vec::new();
            routes_in(&self.changes, &mut routes);
            for p in &self.systems {
                let Some(c) = kubernetes::controllers::controller(p.name()) else {
                    continue;
                };
                for r in &routes {
                    kubernetes::controllers::check(c, r.route())
                        .map_err(|e| Bad::new("changes", format!("changes: {e}")))?;
                }
                if self.protocol == Protocol::Grpc {
                    kubernetes::controllers::check_grpc(c, lab::Route::Base)
                        .map_err(|e| Bad::new("protocol", format!("protocol: {e}")))?;
                    for r in &routes {
                        kubernetes::controllers::check_grpc(c, r.route())
                            .map_err(|e| Bad::new("changes", format!("changes: {e}")))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The scenario as `--quick` runs it.
    pub fn quick(&self) -> Scenario {
        let q = self.quick.clone().unwrap_or(Quick {
            time_scale: quarter(),
            duration: None,
            rate: None,
            connections: None,
        });
        let mut s = self.clone();
        let scale = |d: Dur| Dur(d.0.mul_f64(q.time_scale));
        s.load.duration = q.duration.unwrap_or(scale(s.load.duration));
        s.load.warmup = scale(s.load.warmup);
        if let Some(r) = q.rate {
            s.load.rate = Rate::Fixed(r);
        }
        if let Some(p) = s.load.rate.plan() {
            // A plan keeps its rates and shrinks like every other duration.
            let segs = p
                .segments()
                .iter()
                .map(|g| {
                    engine::profile::Segment::new(g.from, g.to, (g.secs * q.time_scale).max(0.001))
                })
                .collect();
            if let Ok(p) = engine::profile::RateProfile::new(segs) {
                s.load.duration = Dur(p.duration());
                s.load.rate = Rate::Plan(p);
            }
        }
        if let Some(c) = q.connections {
            s.load.connections = c.max(s.load.threads);
        }
        fn scale_steps(steps: &mut [Step], k: f64) {
            for st in steps {
                match st {
                    Step::Wait(d) => d.0 = d.0.mul_f64(k),
                    Step::Repeat(r) => scale_steps(&mut r.steps, k),
                    _ => {}
                }
            }
        }
        scale_steps(&mut s.changes, q.time_scale);
        // The search's steps shrink too, but never below what a step needs to mean
        // something.
        if let Some(sr) = &mut s.search {
            let floor =
                |d: Dur, min: u64| Dur(d.0.mul_f64(q.time_scale).max(Duration::from_millis(min)));
            sr.duration = floor(sr.duration, 1000);
            sr.probe = floor(sr.probe, 1000);
            sr.warmup = floor(sr.warmup, 200);
        }
        s
    }
}

/// The first step that changes something (not a wait), by its key.
fn first_change(steps: &[Step]) -> Option<&'static str> {
    steps.iter().find_map(|s| match s {
        Step::Wait(_) => None,
        Step::Repeat(r) => first_change(&r.steps),
        Step::Scale(_) => Some("scale"),
        Step::Route(_) => Some("route"),
        Step::RouteSet(_) => Some("route_set"),
        Step::Reload(_) => Some("reload"),
        Step::Restart(_) => Some("restart"),
        Step::Rotate(_) => Some("rotate"),
        Step::Drain(_) => Some("drain"),
    })
}

/// Whether some step (repeats included) satisfies `f`.
fn any_step(steps: &[Step], f: &dyn Fn(&Step) -> bool) -> bool {
    steps.iter().any(|s| match s {
        Step::Repeat(r) => any_step(&r.steps, f),
        s => f(s),
    })
}

impl Scenario {
    /// `kubernetes.gateway_class(es)`: each for a system of a Gateway API profile,
    /// never beside a Gateway named for the same system, ports apart.
    fn check_gateway_classes(&self, k: &KubernetesSection) -> Result<(), Bad> {
        if k.gateway_class.is_some() && k.gateway.is_some() {
            return Err(Bad::new(
                "kubernetes.gateway_class",
                "kubernetes.gateway_class and kubernetes.gateway both say where the routes attach: \
                 keep gateway_class for a Gateway of the run's own, or gateway for one installed beforehand",
            ));
        }
        for (name, class) in &k.gateway_classes {
            if !self.systems.iter().any(|p| p.name() == name) {
                return Err(Bad::new(
                    "kubernetes.gateway_classes",
                    format!("kubernetes.gateway_classes: {name} is not among the systems"),
                ));
            }
            if k.gateways.contains_key(name) || class.is_empty() {
                return Err(Bad::new(
                    "kubernetes.gateway_classes",
                    format!("kubernetes.gateway_classes: {name} also has a Gateway in kubernetes.gateways (or an empty class): give it one of the two"),
                ));
            }
        }
        if k.gateway_class.as_deref() == Some("") {
            return Err(Bad::new(
                "kubernetes.gateway_class",
                "kubernetes.gateway_class: name a GatewayClass (kubectl get gatewayclass)",
            ));
        }
        let p = k.gateway_ports;
        if p.http == 0 || p.https == 0 || p.http == p.https {
            return Err(Bad::new(
                "kubernetes.gateway_ports",
                format!("kubernetes.gateway_ports: http {} and https {} must be two different ports above 0", p.http, p.https),
            ));
        }
        for sys in &self.systems {
            if k.gateway_class_for(sys.name()).is_none() {
                continue;
            }
            let routing = kubernetes::controllers::controller(sys.name()).map(|c| c.routing);
            if !matches!(routing, Some(kubernetes::controllers::Routing::HttpRoute)) {
                return Err(Bad::new(
                    "kubernetes.gateway_class",
                    format!(
                        "kubernetes.gateway_class: {} is not routed through Gateway API: a Gateway of the run's own is for Gateway API profiles (envoy-gateway, nginx-gateway-fabric, contour, gateway-api); name its GatewayClass in kubernetes.gateway_classes for those systems only",
                        sys.name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `kubernetes.ingress_class(es)`: a class named, and only for systems routed
    /// by an Ingress.
    fn check_ingress_classes(&self, k: &KubernetesSection) -> Result<(), Bad> {
        let by_ingress = |name: &str| {
            kubernetes::controllers::controller(name).is_some_and(|c| {
                matches!(c.routing, kubernetes::controllers::Routing::Ingress { .. })
            })
        };
        for (name, class) in &k.ingress_classes {
            if !self.systems.iter().any(|p| p.name() == name) {
                return Err(Bad::new(
                    "kubernetes.ingress_classes",
                    format!("kubernetes.ingress_classes: {name} is not among the systems"),
                ));
            }
            if !by_ingress(name) || class.is_empty() {
                return Err(Bad::new(
                    "kubernetes.ingress_classes",
                    format!("kubernetes.ingress_classes: {name}: name an IngressClass (kubectl get ingressclass), and only for a system routed by an Ingress (ingress-nginx, nginx-ingress, haproxy-ingress, traefik, contour-ingress)"),
                ));
            }
        }
        if let Some(class) = &k.ingress_class {
            if class.is_empty() || !self.systems.iter().any(|p| by_ingress(p.name())) {
                return Err(Bad::new(
                    "kubernetes.ingress_class",
                    "kubernetes.ingress_class: name an IngressClass (kubectl get ingressclass) for the systems routed by an Ingress (ingress-nginx, nginx-ingress, haproxy-ingress, traefik, contour-ingress); none of this scenario's is",
                ));
            }
        }
        Ok(())
    }

    /// `kubernetes.manifests`: for systems of the run that a controller profile
    /// routes, with no route change (a change rewrites the generated route, which a
    /// system with its own routes does not have).
    fn check_manifests(&self, k: &KubernetesSection) -> Result<(), Bad> {
        let mut routes = Vec::new();
        routes_in(&self.changes, &mut routes);
        for name in k.manifests.keys() {
            let near = format!("{name}:");
            if !self.systems.iter().any(|p| p.name() == name) {
                return Err(Bad::new(
                    "kubernetes.manifests",
                    format!("kubernetes.manifests: {name} is not among the systems"),
                )
                .near(near));
            }
            if kubernetes::controllers::controller(name).is_none() {
                return Err(Bad::new(
                    "kubernetes.manifests",
                    format!("kubernetes.manifests: {name} is not a controller profile"),
                )
                .near(near));
            }
            if let Some(r) = routes.iter().find(|r| r.route() != lab::Route::Base) {
                return Err(Bad::new(
                    "kubernetes.manifests",
                    format!(
                        "kubernetes.manifests: {name} is routed by its own manifests, which the route change `{}` cannot rewrite: drop the route steps, or the system's manifests",
                        r.route().name()
                    ),
                )
                .near(near));
            }
        }
        Ok(())
    }

    /// Whether a step rotates the certificate.
    pub fn changes_certificate(&self) -> bool {
        any_step(&self.changes, &|s| matches!(s, Step::Rotate(_)))
    }
}

/// Whether some step (repeats included) changes the route set.
fn changes_route_set(steps: &[Step]) -> bool {
    steps.iter().any(|s| match s {
        Step::RouteSet(_) => true,
        Step::Repeat(r) => changes_route_set(&r.steps),
        _ => false,
    })
}

/// A repeat must wait somewhere, or it would spin; nesting is kept shallow.
fn check_steps(steps: &[Step], depth: usize) -> Result<(), String> {
    if depth > 3 {
        return Err("changes: repeat blocks nest more than 3 deep".into());
    }
    for st in steps {
        if let Step::Repeat(r) = st {
            if r.steps.is_empty() {
                return Err("changes: a repeat block needs steps".into());
            }
            if !waits(&r.steps) {
                return Err(
                    "changes: a repeat block must contain a wait (it would otherwise change the system as fast as it can)".into(),
                );
            }
            check_steps(&r.steps, depth + 1)?;
        }
    }
    Ok(())
}

fn waits(steps: &[Step]) -> bool {
    steps.iter().any(|s| match s {
        Step::Wait(d) => !d.0.is_zero(),
        Step::Repeat(r) => waits(&r.steps),
        _ => false,
    })
}
