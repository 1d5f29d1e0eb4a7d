//! Envoy Gateway v1.9 installed in a test cluster as its Helm chart installs it, in
//! Kubernetes mode: its CRDs and the Gateway API CRDs of its release, the
//! certificates of `envoy-gateway certgen` as Secrets in [`EG_NS`], the controller
//! as the pod of a Deployment there (run by [`ProcessPods`] on the cluster's network
//! with `/certs` from its Secret, in a root of its own), and a GatewayClass
//! [`CLASS`]. For each Gateway it then makes an Envoy Deployment and a LoadBalancer
//! Service in [`EG_NS`], as in a cluster; the backend pod runner
//! ([`super::k8s_pods`]) runs those Envoy pods (the real Envoy of its release, each
//! in its own network and mount namespace, `/certs` and `/sds` from their volumes),
//! and this harness stands in for what a cluster adds around them:
//!
//! - cluster DNS ([`ClusterDns`]): the Envoy bootstrap names the xDS server
//!   `envoy-gateway.envoy-gateway-system.svc.cluster.local.`, which resolves to the
//!   controller's address, as a Service over a host-network pod would;
//! - a load balancer: each LoadBalancer Service of [`EG_NS`] gets an address from
//!   [`VIP_BASE`] in its status (which Envoy Gateway gives the Gateway), routed to
//!   one ready, not terminating Envoy pod of the Service (the route moves when that
//!   pod starts terminating, as a cloud load balancer follows readiness).
//!
//! What it does not run: the `shutdown-manager` container (no preStop hooks run
//! here, so an Envoy pod ends at SIGTERM without Envoy Gateway's drain).

use super::k8s::TestCluster;
use super::k8s_dns::ClusterDns;
use super::k8s_process_pods::ProcessPods;
use super::proc::Proc;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams, Patch, PatchParams};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The controller's namespace (its Helm chart's default).
pub const EG_NS: &str = "envoy-gateway-system";
/// The GatewayClass the harness makes.
pub const CLASS: &str = "eg";
const CONTROLLER_NAME: &str = "gateway.envoyproxy.io/gatewayclass-controller";
/// The name the Envoy bootstrap gives the xDS server.
const XDS_NAME: &str = "envoy-gateway.envoy-gateway-system.svc.cluster.local";
/// The controller's xDS port.
const XDS_PORT: u16 = 18000;
/// The first load balancer address.
pub const VIP_BASE: Ipv4Addr = Ipv4Addr::new(198, 18, 32, 1);

/// The folder of build-gateways.sh's binaries and CRDs.
pub fn eg_dir() -> PathBuf {
    super::k8s::built_dir("build-gateways.sh")
}

/// The Envoy of Envoy Gateway's release (its default image's version).
pub fn envoy_bin() -> PathBuf {
    eg_dir().join("bin/envoy")
}

/// Envoy Gateway, running; stopped on drop.
pub struct EnvoyGateway<'c> {
    cluster: &'c TestCluster,
    // Field order is drop order.
    lb: LoadBalancer,
    pods: Option<ProcessPods>,
    _dns: ClusterDns,
    dir: tempfile::TempDir,
    /// From start to the GatewayClass accepted.
    pub took: Duration,
}

impl<'c> EnvoyGateway<'c> {
    /// Installs and starts Envoy Gateway in `cluster` and waits (up to 60 s) until
    /// its GatewayClass is accepted. The cluster's pods must be run by a
    /// [`super::k8s_pods::PodRunner`] (the Envoy pods among them).
    ///
    /// # Panics
    /// When a step fails or times out, with the logs' ends.
    pub fn start(cluster: &'c TestCluster) -> EnvoyGateway<'c> {
        let t = Instant::now();
        let eg = eg_dir();
        let dir = tempfile::tempdir().unwrap();
        for path in [
            eg.join("crds/gateway-api/experimental.yaml"),
            eg.join("crds/envoy-gateway"),
        ] {
            super::k8s::kubectl_ok(
                cluster,
                &["apply", "--server-side", "-f", path.to_str().unwrap()],
            );
        }
        super::k8s::kubectl_ok(
            cluster,
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "crd",
                "--all",
            ],
        );
        super::k8s::kubectl_ok(cluster, &["create", "namespace", EG_NS]);
        let out = Command::new("ip")
            .args(["netns", "exec", cluster.netns()])
            .arg(eg.join("bin/envoy-gateway"))
            .args(["certgen", "--disable-topology-injector"])
            .env("KUBECONFIG", cluster.kubeconfig())
            .env("ENVOY_GATEWAY_NAMESPACE", EG_NS)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "envoy-gateway certgen: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The controller's Secret, as its pod mounts it at /certs.
        let certs = dir.path().join("certs");
        std::fs::create_dir(&certs).unwrap();
        for key in ["ca.crt", "tls.crt", "tls.key"] {
            let jp = format!("jsonpath={{.data.{}}}", key.replace('.', "\\."));
            let b64 = super::k8s::kubectl_ok(
                cluster,
                &["get", "secret", "-n", EG_NS, "envoy-gateway", "-o", &jp],
            );
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .unwrap();
            std::fs::write(certs.join(key), bytes).unwrap();
        }
        let config = dir.path().join("envoy-gateway.yaml");
        std::fs::write(
            &config,
            format!(
                "apiVersion: gateway.envoyproxy.io/v1alpha1\nkind: EnvoyGateway\n\
                 gateway:\n  controllerName: {CONTROLLER_NAME}\n\
                 provider:\n  type: Kubernetes\n  kubernetes:\n    leaderElection: {{disable: true}}\n    proxyTopologyInjector: {{disabled: true}}\n\
                 admin: {{address: {{host: 127.0.0.1, port: 19000}}}}\n\
                 telemetry: {{metrics: {{prometheus: {{disable: true}}}}}}\n\
                 logging: {{level: {{default: info}}}}\n"
            ),
        )
        .unwrap();

        let socket = cluster.inside(|| UdpSocket::bind(super::k8s_dns::DNS_ADDR).unwrap());
        let dns = ClusterDns::serve(
            socket,
            BTreeMap::from([(XDS_NAME.to_string(), Ipv4Addr::new(198, 18, 0, 1))]),
        );

        let pods = controller_pods(cluster, dir.path());
        let class = dir.path().join("class.yaml");
        std::fs::write(
            &class,
            format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: {CLASS}\n\
                 spec:\n  controllerName: {CONTROLLER_NAME}\n"
            ),
        )
        .unwrap();
        super::k8s::kubectl_ok(cluster, &["apply", "-f", class.to_str().unwrap()]);
        let lb = LoadBalancer::start(cluster);
        let mut eg = EnvoyGateway {
            cluster,
            lb,
            pods: Some(pods),
            _dns: dns,
            dir,
            took: Duration::ZERO,
        };
        let accepted = super::k8s::gateway_class_accepted(cluster, CLASS);
        assert!(
            accepted,
            "GatewayClass {CLASS} not accepted in 60 s:\n{}",
            eg.logs()
        );
        eg.took = t.elapsed();
        eg
    }

    /// The ends of the controller's log and the load balancer's notes.
    pub fn logs(&self) -> String {
        let mut out = super::proc::tails_in(self.dir.path(), 20);
        out += &format!(
            "--- controller pods: {:?}\n--- load balancer: {:?}\n",
            self.pods.as_ref().map(ProcessPods::log),
            self.lb.log()
        );
        out
    }

    /// Kills the controller's process and stops running its pod (which stays
    /// Running in the API, as on a node that lost its kubelet): a crash it does
    /// not come back from until [`EnvoyGateway::revive_controller`].
    pub fn kill_controller(&mut self) {
        self.pods = None;
    }

    /// What happened to the controller's pods (`NAME: start`, `NAME: ready`, ...).
    pub fn controller_log(&self) -> Vec<String> {
        self.pods.as_ref().map(ProcessPods::log).unwrap_or_default()
    }

    /// Runs the controller's pod again.
    pub fn revive_controller(&mut self) {
        self.pods = Some(controller_pods(self.cluster, self.dir.path()));
    }

    /// The load balancer's notes (addresses given, routes moved), in order.
    pub fn lb_log(&self) -> Vec<String> {
        self.lb.log()
    }
}

impl Drop for EnvoyGateway<'_> {
    fn drop(&mut self) {
        self.pods = None;
        let _ = self
            .cluster
            .kubectl(&["delete", "--ignore-not-found", "gatewayclass", CLASS]);
    }
}

/// The controller's Deployment, its pod run as a process on the cluster's network
/// with `/certs` from `dir/certs` in a root of its own, ready once it serves xDS.
fn controller_pods(cluster: &TestCluster, dir: &Path) -> ProcessPods {
    let eg = eg_dir();
    let config = dir.join("envoy-gateway.yaml");
    let (netns, kubeconfig, logs) = (
        cluster.netns().to_string(),
        cluster.kubeconfig(),
        dir.to_path_buf(),
    );
    let start = Box::new(move |pod: &str| {
        // A root of the pod's own, so that a replacement never shares /certs.
        let root = logs.join(format!("root-{pod}"));
        let _ = std::fs::create_dir(&root);
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &netns])
            .arg(super::k8s::script("pod-root.sh"))
            .arg(&root)
            .arg("--bind")
            .arg(format!("{}:/certs", logs.join("certs").display()))
            .arg("--")
            .arg(eg.join("bin/envoy-gateway"))
            .arg("server")
            .arg(format!("--config-path={}", config.display()))
            .env("KUBECONFIG", &kubeconfig)
            .env("ENVOY_GATEWAY_NAMESPACE", EG_NS);
        Proc::spawn_group(&format!("envoy-gateway-{pod}"), &mut cmd, &logs)
    });
    let ready = Box::new(|pid| super::k8s_process_pods::listens(pid, XDS_PORT));
    ProcessPods::deployment_labelled(
        cluster,
        EG_NS,
        "envoy-gateway",
        1,
        &[("control-plane", "envoy-gateway")],
        start,
        ready,
    )
}

/// The load balancer of [`EG_NS`]'s LoadBalancer Services.
struct LoadBalancer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    log: Arc<Mutex<Vec<String>>>,
}

/// `ip ARGS`, its error text on failure.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl LoadBalancer {
    fn start(cluster: &TestCluster) -> LoadBalancer {
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (s, l) = (stop.clone(), log.clone());
        let kubeconfig = cluster.kubeconfig();
        let cluster_ns = cluster.netns().to_string();
        let netns = PathBuf::from("/var/run/netns").join(&cluster_ns);
        let thread = std::thread::Builder::new()
            .name("load-balancer".into())
            .spawn(move || {
                let (rt, client) = super::k8s_pods::client_inside(&netns, &kubeconfig);
                let svcs: Api<Service> = Api::namespaced(client.clone(), EG_NS);
                let pods: Api<Pod> = Api::namespaced(client, EG_NS);
                let note = |m: String| l.lock().unwrap().push(m);
                // Service name -> (its address, the pod uid it routes to).
                let mut vips: BTreeMap<String, (Ipv4Addr, Option<String>)> = BTreeMap::new();
                while !s.load(Ordering::Relaxed) {
                    let lp = ListParams::default().labels("app.kubernetes.io/managed-by=envoy-gateway");
                    let Ok(list) = rt.block_on(svcs.list(&lp)) else {
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    };
                    let present: Vec<String> =
                        list.items.iter().filter_map(|s| s.metadata.name.clone()).collect();
                    for svc in &list.items {
                        let Some(name) = svc.metadata.name.clone() else { continue };
                        let spec = svc.spec.clone().unwrap_or_default();
                        if spec.type_.as_deref() != Some("LoadBalancer") {
                            continue;
                        }
                        let next = u32::from(VIP_BASE) + vips.len() as u32;
                        let (vip, holder) = vips
                            .entry(name.clone())
                            .or_insert((Ipv4Addr::from(next), None))
                            .clone();
                        let has_ingress = svc
                            .status
                            .as_ref()
                            .and_then(|s| s.load_balancer.as_ref())
                            .and_then(|lb| lb.ingress.as_ref())
                            .is_some_and(|i| !i.is_empty());
                        if !has_ingress {
                            let patch = serde_json::json!({"status": {"loadBalancer": {"ingress": [{"ip": vip.to_string()}]}}});
                            match rt.block_on(svcs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))) {
                                Ok(_) => note(format!("{name}: address {vip}")),
                                Err(e) => note(format!("{name}: status: {e}")),
                            }
                        }
                        let selector: Vec<String> = spec
                            .selector
                            .unwrap_or_default()
                            .iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect();
                        let Ok(ps) = rt.block_on(pods.list(&ListParams::default().labels(&selector.join(",")))) else {
                            continue;
                        };
                        let serving: Vec<&Pod> = ps
                            .items
                            .iter()
                            .filter(|p| p.metadata.deletion_timestamp.is_none())
                            .filter(|p| {
                                p.status
                                    .as_ref()
                                    .and_then(|s| s.conditions.as_ref())
                                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                            })
                            .collect();
                        let uid_of = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
                        let keep = holder.as_ref().is_some_and(|h| serving.iter().any(|p| uid_of(p) == *h));
                        if keep {
                            continue;
                        }
                        let entry = vips.get_mut(&name).expect("inserted above");
                        match serving.first() {
                            Some(p) => {
                                let uid = uid_of(p);
                                let pod_ns = super::k8s_pods::netns_name(&cluster_ns, &uid);
                                let host_if = format!("ibh-{}", &pod_ns["ibpod-".len()..]);
                                let vip_s = format!("{vip}/32");
                                let r = ip(&["-n", &pod_ns, "addr", "replace", &vip_s, "dev", "lo"])
                                    .and_then(|()| ip(&["-n", &cluster_ns, "route", "replace", &vip_s, "dev", &host_if, "src", "198.18.0.2"]));
                                match r {
                                    Ok(()) => {
                                        note(format!("{name}: {vip} -> {}", p.metadata.name.clone().unwrap_or_default()));
                                        entry.1 = Some(uid);
                                    }
                                    // The pod's network not set up yet: next round.
                                    Err(e) => note(format!("{name}: route: {e}")),
                                }
                            }
                            None if holder.is_some() => {
                                let _ = ip(&["-n", &cluster_ns, "route", "del", &format!("{vip}/32")]);
                                note(format!("{name}: {vip} -> no ready pod"));
                                entry.1 = None;
                            }
                            None => {}
                        }
                    }
                    for (name, (vip, holder)) in vips.iter_mut() {
                        if !present.contains(name) && holder.is_some() {
                            let _ = ip(&["-n", &cluster_ns, "route", "del", &format!("{vip}/32")]);
                            note(format!("{name}: gone, {vip} unrouted"));
                            *holder = None;
                        }
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
            .expect("spawn the load balancer");
        LoadBalancer {
            stop,
            thread: Some(thread),
            log,
        }
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for LoadBalancer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
