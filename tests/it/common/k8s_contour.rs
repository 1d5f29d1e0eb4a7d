//! Contour v1.33 and Envoy 1.40 installed in a test cluster as a platform team would
//! install them, but as processes inside the cluster's network namespace: the Gateway
//! API (experimental channel) and Contour CRDs, a GatewayClass, a Gateway
//! [`GATEWAY_NS`]/[`GATEWAY_NAME`] that Contour serves (static provisioning: its
//! config file names the Gateway), `contour serve` with the cluster's admin kubeconfig,
//! and one Envoy started from `contour bootstrap`, fed over xDS on 127.0.0.1.
//!
//! Addresses, all inside the cluster's namespace: Contour's xDS, metrics, health and
//! debug listeners and Envoy's stats and admin listeners on 127.0.0.1 ([`XDS_PORT`]
//! and the ports after it, 9001 for the admin listener Contour adds); Envoy's own
//! admin interface on a unix socket in the harness's temporary folder; the data plane
//! on [`DATA_ADDR`]. Contour adds 8000 to a Gateway listener's port to get Envoy's
//! (an unprivileged port, as in its Deployment), so the Gateway listens on port 80
//! and Envoy on 8080.
//!
//! Envoy opens its data listener only once a route is attached to the Gateway: ready
//! here means Contour says the Gateway is Programmed and Envoy says it is live (its
//! first configuration from Contour applied).
//!
//! Drop stops Envoy, then Contour (each its own process group), and deletes the
//! Gateway's namespace and the GatewayClass. If the test process is killed instead,
//! `down.sh` ends every process left in the cluster's namespace, these included.

use super::k8s::{testenv_dir, TestCluster};
use super::k8s_process_pods::ProcessPods;
use super::proc::Proc;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// The Gateway's namespace, created by the harness.
pub const GATEWAY_NS: &str = "infra";
/// The Gateway HTTPRoutes attach to (`kubernetes.gateway: infra/contour-gw`).
pub const GATEWAY_NAME: &str = "contour-gw";
/// The GatewayClass and the controller name Contour answers to.
pub const CLASS: &str = "contour";
const CONTROLLER_NAME: &str = "projectcontour.io/gateway-controller";
/// The Gateway listener's port; Envoy listens on it plus 8000.
pub const LISTENER_PORT: u16 = 80;
/// Where Envoy serves the Gateway's routes, inside the cluster's namespace.
pub const DATA_ADDR: &str = "198.18.0.1:8080";
/// Contour's xDS port on 127.0.0.1; its metrics, health and debug listeners and
/// Envoy's stats listener take the four ports after it.
pub const XDS_PORT: u16 = 8001;

/// Contour and its Envoy, running; stopped on drop.
pub struct Contour<'c> {
    cluster: &'c TestCluster,
    // Field order is drop order: Envoy before Contour, both before the folder.
    envoy: Proc,
    /// Contour itself: a process of the test, or the pods of a Deployment
    /// `contour` in namespace [`CONTOUR_NS`] ([`Contour::start_as_pods`]).
    contour: Option<Proc>,
    pods: Option<ProcessPods>,
    dir: tempfile::TempDir,
    /// How long from start to ready.
    pub took: Duration,
    /// The Gateway listener's port (Envoy's is 8000 above).
    listener: u16,
}

/// The Envoy binary the lab uses (INGRESSBENCH_ENVOY, else the cached 1.40.0).
fn envoy_bin() -> PathBuf {
    ::lab::envoy::binary().unwrap_or_else(|e| panic!("{e}"))
}

/// The GatewayClass, the Gateway's namespace and the Gateway: one HTTP listener
/// accepting HTTPRoutes from every namespace (each run makes its own).
fn gateway_manifest(listener: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: {CLASS}\n\
         spec:\n  controllerName: {CONTROLLER_NAME}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {GATEWAY_NS}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: {GATEWAY_NAME}\n  namespace: {GATEWAY_NS}\n\
         spec:\n  gatewayClassName: {CLASS}\n  listeners:\n  - name: http\n    protocol: HTTP\n    port: {listener}\n\
         \x20   allowedRoutes:\n      namespaces:\n        from: All\n"
    )
}

/// Where [`Contour::start_as_pods`] installs Contour.
pub const CONTOUR_NS: &str = "projectcontour";

impl<'c> Contour<'c> {
    /// Installs the CRDs and the Gateway, starts Contour and Envoy inside `cluster`'s
    /// namespace and waits (up to 60 s) until both are ready.
    ///
    /// # Panics
    /// When a step fails or times out, with the logs' ends.
    pub fn start(cluster: &'c TestCluster) -> Contour<'c> {
        Contour::start_with(cluster, false, LISTENER_PORT)
    }

    /// [`Contour::start`] with the Gateway's listener on port `listener` (Envoy's
    /// data port 8000 above it): beside another controller that holds 8080.
    pub fn start_on(cluster: &'c TestCluster, listener: u16) -> Contour<'c> {
        Contour::start_with(cluster, false, listener)
    }

    /// [`Contour::start`], with Contour's controller the pod of a Deployment
    /// `contour` (labelled `app.kubernetes.io/name=contour`) in namespace
    /// [`CONTOUR_NS`], run by the harness, so that a run can restart it by deleting
    /// its pod; Envoy, the data plane, stays a process of the test.
    pub fn start_as_pods(cluster: &'c TestCluster) -> Contour<'c> {
        Contour::start_with(cluster, true, LISTENER_PORT)
    }

    fn start_with(cluster: &'c TestCluster, as_pods: bool, listener: u16) -> Contour<'c> {
        let t = Instant::now();
        let env = testenv_dir();
        let dir = tempfile::tempdir().unwrap();
        let crds = env.join("crds");
        for path in [
            crds.join("gateway-api/experimental"),
            crds.join("contour/01-crds.yaml"),
        ] {
            // Server-side: the HTTPRoute CRD is too big for the last-applied annotation.
            let (ok, out) =
                cluster.kubectl(&["apply", "--server-side", "-f", path.to_str().unwrap()]);
            assert!(ok, "apply {}: {out}", path.display());
        }
        let (ok, out) = cluster.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd",
            "--all",
        ]);
        assert!(ok, "CRDs not established: {out}");
        let manifest = dir.path().join("gateway.yaml");
        std::fs::write(&manifest, gateway_manifest(listener)).unwrap();
        let (ok, out) = cluster.kubectl(&["apply", "-f", manifest.to_str().unwrap()]);
        assert!(ok, "{out}");

        // Static provisioning: Contour serves the one Gateway its config names.
        let config = dir.path().join("contour.yaml");
        std::fs::write(
            &config,
            format!(
                "gateway:\n  gatewayRef:\n    namespace: {GATEWAY_NS}\n    name: {GATEWAY_NAME}\n"
            ),
        )
        .unwrap();
        let contour_bin = env.join("bin/contour");
        let admin = dir.path().join("admin.sock");
        let bootstrap = dir.path().join("bootstrap.json");
        let xds = XDS_PORT.to_string();
        let out = Command::new(&contour_bin)
            .arg("bootstrap")
            .arg(&bootstrap)
            .args(["--xds-address=127.0.0.1", "--xds-resource-version=v3"])
            .arg(format!("--xds-port={xds}"))
            .arg(format!("--admin-address={}", admin.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "contour bootstrap: {}",
            String::from_utf8_lossy(&out.stderr)
        );

        let (netns, kubeconfig) = (cluster.netns().to_string(), cluster.kubeconfig());
        let serve = move || -> Command {
            let port = |n: u16| (XDS_PORT + n).to_string();
            let data_port = listener + 8000;
            let data_ip = DATA_ADDR.split_once(':').unwrap().0;
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &netns])
                .arg(&contour_bin)
                .arg("serve")
                .arg(format!("--kubeconfig={}", kubeconfig.display()))
                .arg(format!("--config-path={}", config.display()))
                .args(["--insecure", "--disable-leader-election"])
                .args([
                    "--kubernetes-client-qps=100",
                    "--kubernetes-client-burst=200",
                ])
                .args(["--xds-address=127.0.0.1", &format!("--xds-port={xds}")])
                .args([
                    "--http-address=127.0.0.1",
                    &format!("--http-port={}", port(1)),
                ])
                .args([
                    "--health-address=127.0.0.1",
                    &format!("--health-port={}", port(2)),
                ])
                .args([
                    "--debug-http-address=127.0.0.1",
                    &format!("--debug-http-port={}", port(3)),
                ])
                .args([
                    "--stats-address=127.0.0.1",
                    &format!("--stats-port={}", port(4)),
                ])
                .arg(format!("--envoy-service-http-address={data_ip}"))
                .arg(format!("--envoy-service-http-port={data_port}"));
            cmd
        };
        let (contour, pods) = if as_pods {
            let logs = dir.path().to_path_buf();
            let start = Box::new(move |pod: &str| {
                Proc::spawn_group(&format!("contour-{pod}"), &mut serve(), &logs)
            });
            // Serving xDS: what Envoy needs of it.
            // Serving xDS, its own socket: what Envoy needs of it.
            let ready = Box::new(|pid| super::k8s_process_pods::listens(pid, XDS_PORT));
            let p = ProcessPods::deployment(cluster, CONTOUR_NS, "contour", 1, start, ready);
            (None, Some(p))
        } else {
            (
                Some(Proc::spawn_group("contour", &mut serve(), dir.path())),
                None,
            )
        };

        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", cluster.netns()])
            .arg(envoy_bin())
            .arg("-c")
            .arg(&bootstrap)
            // No shared memory: several Envoys on this machine never meet.
            .arg("--disable-hot-restart")
            .args(["--service-node", "envoy-0", "--service-cluster", CLASS])
            .args(["--log-level", "info"]);
        let envoy = Proc::spawn_group("envoy", &mut cmd, dir.path());

        let mut c = Contour {
            listener,
            cluster,
            envoy,
            contour,
            pods,
            dir,
            took: Duration::ZERO,
        };
        c.wait_ready(Duration::from_secs(60));
        c.took = t.elapsed();
        c
    }

    fn wait_ready(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let admin = self.dir.path().join("admin.sock");
        loop {
            if let Some(c) = self.contour.as_mut() {
                assert!(c.alive(), "contour exited:\n{}", self.logs());
            }
            assert!(self.envoy.alive(), "envoy exited:\n{}", self.logs());
            let live = Command::new("curl")
                .args(["-s", "--max-time", "2", "--unix-socket"])
                .arg(&admin)
                .arg("http://envoy/ready")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "LIVE")
                .unwrap_or(false);
            let (_, programmed) = self.cluster.kubectl(&[
                "get",
                "gateway",
                "-n",
                GATEWAY_NS,
                GATEWAY_NAME,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Programmed\")].status}",
            ]);
            if live && programmed.trim() == "True" {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Contour/Envoy not ready after {limit:?} (envoy live: {live}, gateway programmed: {programmed}):\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The ends of Contour's and Envoy's logs, for failure messages.
    pub fn logs(&self) -> String {
        format!(
            "--- contour:\n{}\n--- envoy:\n{}",
            match (&self.contour, &self.pods) {
                (Some(c), _) => super::proc::tail(&c.stderr_so_far(), 20),
                (None, Some(p)) => format!("(pods) {:?}", p.log()),
                (None, None) => String::new(),
            },
            super::proc::tail(&self.envoy.stderr_so_far(), 20)
        )
    }

    /// The `kubernetes.gateway` value naming the Gateway.
    pub fn gateway(&self) -> String {
        format!("{GATEWAY_NS}/{GATEWAY_NAME}")
    }

    /// The data plane's URL, as a scenario's `kubernetes.urls` names it.
    pub fn url(&self) -> String {
        format!(
            "http://{}:{}/",
            DATA_ADDR.split_once(':').unwrap().0,
            self.listener + 8000
        )
    }

    /// The harness's folder, which Contour's and Envoy's command lines name (for
    /// checking that nothing is left).
    pub fn dir_text(&self) -> String {
        self.dir.path().display().to_string()
    }
}

impl Drop for Contour<'_> {
    fn drop(&mut self) {
        self.envoy.kill();
        if let Some(c) = self.contour.as_mut() {
            c.kill();
        }
        self.pods = None;
        let _ = self.cluster.kubectl(&[
            "delete",
            "--wait=false",
            "--ignore-not-found",
            "namespace",
            GATEWAY_NS,
        ]);
        let _ = self
            .cluster
            .kubectl(&["delete", "--ignore-not-found", "gatewayclass", CLASS]);
    }
}
