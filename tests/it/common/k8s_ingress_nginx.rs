//! The community ingress-nginx controller (controller-v1.11.0) installed in a test
//! cluster: an IngressClass `nginx` (`k8s.io/ingress-nginx`), its ConfigMap, and the
//! controller as the pod of a Deployment [`DEPLOYMENT`] in [`NS`] (labelled
//! `app.kubernetes.io/component=controller`), run by [`ProcessPods`] on the cluster's
//! network: `nginx-ingress-controller` with its kubeconfig by flag, which runs
//! Debian's nginx 1.22 (`NGINX_BINARY`) with lua-nginx-module, its own Lua and its
//! template as build-ingress-nginx.sh prepared them (docs/kubernetes.md lists what
//! differs from its image). It pushes endpoints to its Lua balancer over
//! 127.0.0.1:10246 without reloading nginx, and reloads for the rest.
//!
//! Each pod has a root of its own (`pod-root.sh`): its own `/etc/nginx` (a copy: the
//! controller writes `nginx.conf` there), `/etc/ingress-controller`, `/var/log/nginx`,
//! `/tmp` and PID namespace, so nginx ends with its pod, as in a container.
//!
//! nginx listens on 198.18.0.1:8080 and [`HTTPS_ADDR`] (every address of the
//! cluster's namespace); the controller's status server on 10246, its stream port
//! on 10247, its health check on 10254, nginx's default server on 8181.

use super::k8s::TestCluster;
use super::k8s_process_pods::ProcessPods;
use super::proc::Proc;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The controller's namespace and Deployment.
pub const NS: &str = "ingress-nginx";
pub const DEPLOYMENT: &str = "ingress-nginx-controller";
/// Where nginx serves the Ingresses over TLS, inside the cluster's namespace (plain
/// HTTP on 8080).
pub const HTTPS_ADDR: &str = "198.18.0.1:8443";

/// The folder of build-ingress-nginx.sh's binary and /etc/nginx.
pub fn in_dir() -> PathBuf {
    super::k8s::built_dir("build-ingress-nginx.sh")
}

/// The controller, running; stopped on drop.
pub struct IngressNginx<'c> {
    cluster: &'c TestCluster,
    pods: Option<ProcessPods>,
    dir: tempfile::TempDir,
    /// From start to nginx serving its first configuration.
    pub took: Duration,
}

impl<'c> IngressNginx<'c> {
    /// Installs and starts the controller in `cluster`, its ConfigMap holding
    /// `config` (YAML `key: "value"` lines, beside the ones Debian's nginx needs);
    /// waits (90 s) until nginx serves.
    ///
    /// # Panics
    /// When a step fails or times out, with the logs' ends.
    pub fn start(cluster: &'c TestCluster, config: &[(&str, &str)]) -> IngressNginx<'c> {
        IngressNginx::start_on(cluster, config, 8080)
    }

    /// [`IngressNginx::start`] with nginx's plain HTTP on `http_port`: beside a
    /// controller that holds 8080. Envoy Gateway v1.9's controller listens on
    /// every address's 8080 (its controller-runtime metrics; its config file sets
    /// only its Prometheus endpoint): beside ingress-nginx on 8080 it exited with
    /// "bind: address already in use".
    pub fn start_on(
        cluster: &'c TestCluster,
        config: &[(&str, &str)],
        http_port: u16,
    ) -> IngressNginx<'c> {
        let t = Instant::now();
        let dir = tempfile::tempdir().unwrap();
        // nginx 1.22 does not know `http2 on;`, which the template writes when
        // use-http2 is true (its default).
        let mut data = String::from("  use-http2: \"false\"\n");
        for (k, v) in config {
            data.push_str(&format!("  {k}: \"{v}\"\n"));
        }
        let objects = dir.path().join("install.yaml");
        std::fs::write(
            &objects,
            format!(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n---\n\
                 apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: nginx\n\
                 spec:\n  controller: k8s.io/ingress-nginx\n---\n\
                 apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {DEPLOYMENT}\n  namespace: {NS}\n\
                 data:\n{data}"
            ),
        )
        .unwrap();
        let (ok, out) = cluster.kubectl(&["apply", "-f", objects.to_str().unwrap()]);
        assert!(ok, "{out}");
        let pods = controller_pods(cluster, dir.path(), http_port);
        // Its pods share the node's ports (the harness runs them on the cluster's
        // network, as a hostNetwork install): a new pod cannot serve before the old
        // one ends, so a rollout replaces it first, as such installs are set up.
        let (ok, out) = cluster.kubectl(&[
            "-n",
            NS,
            "patch",
            "deployment",
            DEPLOYMENT,
            "-p",
            r#"{"spec":{"strategy":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}}}"#,
        ]);
        assert!(ok, "{out}");
        let mut h = IngressNginx {
            cluster,
            pods: Some(pods),
            dir,
            took: Duration::ZERO,
        };
        while !h
            .pods
            .as_ref()
            .unwrap()
            .log()
            .iter()
            .any(|l| l.ends_with(": ready"))
        {
            assert!(
                t.elapsed() < Duration::from_secs(90),
                "no controller pod ready:\n{}",
                h.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        h.took = t.elapsed();
        h
    }

    /// The controller's and nginx's logs' ends and the pods' story.
    pub fn logs(&self) -> String {
        let mut s = super::proc::tails_in(self.dir.path(), 400);
        for e in std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let log = e.path().join("log/error.log");
            if let Ok(text) = std::fs::read_to_string(&log) {
                s += &format!("--- {}\n{}", log.display(), super::proc::tail(&text, 20));
            }
        }
        s + &format!("--- pods: {:?}\n", self.pods.as_ref().map(ProcessPods::log))
    }

    /// `kubernetes.workloads.ingress-nginx` for this install.
    pub fn workloads(&self) -> String {
        format!(
            "{{ingress-nginx: {{namespace: {NS}, controller: \"app.kubernetes.io/component=controller\", data_plane: deployment/{DEPLOYMENT}}}}}"
        )
    }

    /// Text of the controller's command line (for `kubernetes.processes`): nginx
    /// runs in its process group.
    pub fn processes(&self) -> String {
        in_dir().join("bin").display().to_string()
    }

    /// The pids of nginx's worker processes now (the pods' PID namespaces seen from
    /// outside): a reload replaces them all, an endpoint change through the Lua
    /// balancer none.
    pub fn nginx_workers(&self) -> Vec<u32> {
        super::k8s::nginx_workers_under(self.dir.path())
    }

    /// Kills the controller's process as a crash would: its pod's PID namespace,
    /// nginx with it, ends; the pod's process is started again and counted. Only
    /// this cluster's controller: its command line names the cluster's kubeconfig
    /// (another test's controller may run beside it).
    pub fn crash_controller(&self) {
        let pattern = format!(
            "{} --kubeconfig={}",
            in_dir().join("bin/nginx-ingress-controller").display(),
            self.cluster.kubeconfig().display()
        );
        let killed = super::processes_with(&pattern)
            .into_iter()
            .filter(|(pid, _)| super::kill("-KILL", pid))
            .count();
        assert!(killed > 0, "no controller process to kill");
    }
}

impl Drop for IngressNginx<'_> {
    fn drop(&mut self) {
        self.pods = None;
        let _ = self
            .cluster
            .kubectl(&["delete", "--ignore-not-found", "ingressclass", "nginx"]);
    }
}

/// Copies `from` into `to`, folders and files.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// Every process descended from `pid`.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parent = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // After the command's closing parenthesis: state, then the parent's pid.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok());
        if let Some(pp) = ppid {
            parent.push((p, pp));
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let of = out[i];
        out.extend(parent.iter().filter(|(_, pp)| *pp == of).map(|(p, _)| *p));
        i += 1;
    }
    out
}

/// The controller's Deployment, its pod a process on the cluster's network with a
/// root of its own; ready once nginx listens on its HTTPS port (its first
/// configuration is in).
fn controller_pods(cluster: &TestCluster, dir: &Path, http_port: u16) -> ProcessPods {
    let built = in_dir();
    let (netns, kubeconfig, state, logs) = (
        cluster.netns().to_string(),
        cluster.kubeconfig(),
        cluster.state_dir().to_path_buf(),
        dir.to_path_buf(),
    );
    let start = Box::new(move |pod: &str| {
        let base = logs.join(format!("pod-{pod}"));
        let (root, etc, ic, log) = (
            base.join("root"),
            base.join("etc-nginx"),
            base.join("etc-ingress-controller"),
            base.join("log"),
        );
        if !etc.exists() {
            copy_tree(&built.join("etc-nginx"), &etc);
        }
        for d in [&root, &ic.join("telemetry"), &log] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &netns])
            .arg(super::k8s::script("pod-root.sh"))
            .arg(&root)
            .arg("--tmp")
            .arg("--keep")
            .arg(&state)
            .arg("--private")
            .arg("/etc")
            .arg("--bind")
            .arg(format!("{}:/etc/nginx", etc.display()))
            .arg("--bind")
            .arg(format!("{}:/etc/ingress-controller", ic.display()))
            .arg("--bind")
            .arg(format!("{}:/var/log/nginx", log.display()))
            .arg("--pid")
            .arg("--")
            // The image makes /tmp/nginx; the controller does not.
            .args(["/bin/sh", "-c", "mkdir -p /tmp/nginx && exec \"$0\" \"$@\""])
            .arg(built.join("bin/nginx-ingress-controller"))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args([
                "--controller-class=k8s.io/ingress-nginx",
                "--ingress-class=nginx",
                &format!("--configmap={NS}/{DEPLOYMENT}"),
                &format!("--http-port={http_port}"),
                "--https-port=8443",
                "--default-server-port=8181",
                "--status-port=10246",
                "--stream-port=10247",
                "--healthz-port=10254",
                "--enable-metrics=false",
                "--profiling=false",
                "--disable-leader-election",
                "--update-status=false",
                "--v=2",
            ])
            .env("POD_NAME", pod)
            .env("POD_NAMESPACE", NS)
            .env("NGINX_BINARY", "/usr/sbin/nginx");
        Proc::spawn_group(&format!("ingress-nginx-{pod}"), &mut cmd, &logs)
    });
    // This pod's nginx, not its predecessor's, which shares the node's ports until
    // it ends.
    let ready = Box::new(|pid| {
        descendants(pid)
            .into_iter()
            .any(|p| super::k8s_process_pods::listens(p, 8443))
    });
    ProcessPods::deployment_labelled(
        cluster,
        NS,
        DEPLOYMENT,
        1,
        &[("app.kubernetes.io/component", "controller")],
        start,
        ready,
    )
}
