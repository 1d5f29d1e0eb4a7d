//! NGINX Gateway Fabric v1.6.2 installed in a test cluster as its Helm chart installs
//! it: its CRDs (`gateway.nginx.org`), its NginxGateway configuration, a GatewayClass
//! [`CLASS`] whose parameters are an NginxProxy, the LoadBalancer Service whose
//! address it gives the Gateway, and one Deployment whose pod holds both its
//! containers (the control plane, `gateway static-mode`, and nginx), sharing a
//! process namespace so that the control plane reloads nginx with SIGHUP. The harness
//! runs that pod as a kubelet would ([`ProcessPods`]): both processes in one root of
//! the pod's own (`pod-root.sh --pid`), on the cluster's network (a host-network
//! install: nginx listens on each Gateway listener's port of the node's address),
//! with the volumes of the chart (`/etc/nginx/{conf.d,stream-conf.d,main-includes,
//! secrets,includes}`, `/var/run/nginx`) as folders of the pod's.
//!
//! What differs from its images: nginx is Debian's 1.22 with njs 0.7.9
//! (`libnginx-mod-http-js`) and the stream module (`libnginx-mod-stream`), where the
//! image has nginx 1.27.4; 1.22 does not know `http2 on`, so the NginxProxy sets
//! `disableHTTP2`; the image's nginx.conf is used with the two module paths Debian
//! differs in (build-nginx-gateway-fabric.sh). The load balancer is this harness: it
//! writes the node's address into the Service's status.

use super::k8s::TestCluster;
use super::k8s_process_pods::ProcessPods;
use super::proc::Proc;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The controller's namespace, as the chart's.
pub const NS: &str = "nginx-gateway";
/// The GatewayClass it serves.
pub const CLASS: &str = "nginx";
/// Its controller name.
pub const CONTROLLER_NAME: &str = "gateway.nginx.org/nginx-gateway-controller";
/// The Deployment (one pod: control plane and nginx) and its Service; its pods'
/// `app.kubernetes.io/name`, which the `nginx-gateway-fabric` profile selects by.
pub const DEPLOYMENT: &str = "nginx-gateway-fabric";
/// The node address nginx listens on and the Service's status gives the Gateway.
pub const NODE_ADDR: &str = "198.18.0.1";
/// The control plane's health port (its chart's 8081 is Envoy Gateway's too).
const HEALTH_PORT: u16 = 8087;
/// The chart's other label (the harness's Deployment gives the name).
const LABELS: &[(&str, &str)] = &[("app.kubernetes.io/instance", "ngf")];

/// build-nginx-gateway-fabric.sh's folder: `bin/gateway`, `etc-nginx/`, `crds/`.
pub fn ngf_dir() -> PathBuf {
    super::k8s::built_dir("build-nginx-gateway-fabric.sh")
}

/// The controller and its nginx, running; stopped on drop.
pub struct NginxGatewayFabric<'c> {
    cluster: &'c TestCluster,
    pods: Option<ProcessPods>,
    dir: tempfile::TempDir,
    /// From start to the GatewayClass accepted.
    pub took: Duration,
}

impl<'c> NginxGatewayFabric<'c> {
    /// Installs and starts NGINX Gateway Fabric in `cluster` and waits (up to 60 s)
    /// until its GatewayClass is accepted.
    ///
    /// # Panics
    /// When a step fails or times out, with the logs' ends.
    pub fn start(cluster: &'c TestCluster) -> NginxGatewayFabric<'c> {
        let t = Instant::now();
        let built = ngf_dir();
        let dir = tempfile::tempdir().unwrap();
        // The test environment's Gateway API CRDs (v1.4.0, standard channel: NGF
        // v1.6.2 is built against v1.2.1, whose kinds they serve) unless a cluster
        // has them already (Envoy Gateway's v1.5 come with a policy refusing older
        // ones), then its own.
        let mut crds = vec![built.join("crds/crds.yaml")];
        if !cluster
            .kubectl(&["get", "crd", "gatewayclasses.gateway.networking.k8s.io"])
            .0
        {
            crds.insert(
                0,
                super::k8s::testenv_dir().join("crds/gateway-api/standard"),
            );
        }
        for path in crds {
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
                "nginxgateways.gateway.nginx.org",
                "nginxproxies.gateway.nginx.org",
                "gatewayclasses.gateway.networking.k8s.io",
                "httproutes.gateway.networking.k8s.io",
            ],
        );
        let labels = format!(
            "    app.kubernetes.io/name: {DEPLOYMENT}\n    app.kubernetes.io/instance: ngf\n"
        );
        let install = dir.path().join("install.yaml");
        std::fs::write(
            &install,
            format!(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n---\n\
                 apiVersion: gateway.nginx.org/v1alpha1\nkind: NginxGateway\nmetadata:\n  name: ngf-config\n  namespace: {NS}\n\
                 spec:\n  logging:\n    level: info\n---\n\
                 apiVersion: gateway.nginx.org/v1alpha1\nkind: NginxProxy\nmetadata:\n  name: ngf-proxy-config\n\
                 spec:\n  disableHTTP2: true\n  ipFamily: ipv4\n---\n\
                 apiVersion: v1\nkind: Service\nmetadata:\n  name: {DEPLOYMENT}\n  namespace: {NS}\n  labels:\n{labels}\
                 spec:\n  type: LoadBalancer\n  selector:\n{labels}  ports:\n  - {{name: http, port: 80, targetPort: 80}}\n  - {{name: https, port: 443, targetPort: 443}}\n---\n\
                 apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: {CLASS}\n\
                 spec:\n  controllerName: {CONTROLLER_NAME}\n  parametersRef:\n    group: gateway.nginx.org\n    kind: NginxProxy\n    name: ngf-proxy-config\n",
            ),
        )
        .unwrap();
        super::k8s::kubectl_ok(cluster, &["apply", "-f", install.to_str().unwrap()]);
        // The load balancer: the node's address, where nginx listens.
        super::k8s::kubectl_ok(
            cluster,
            &[
                "patch",
                "service",
                "-n",
                NS,
                DEPLOYMENT,
                "--subresource=status",
                "--type=merge",
                "-p",
                &format!(
                    r#"{{"status":{{"loadBalancer":{{"ingress":[{{"ip":"{NODE_ADDR}"}}]}}}}}}"#
                ),
            ],
        );
        let pods = controller_pods(cluster, dir.path());
        // Its pod holds the node's ports (the harness runs it on the cluster's
        // network): a new pod cannot serve before the old one ends, so a rollout
        // replaces it first, as a host-network install is set up.
        super::k8s::kubectl_ok(
            cluster,
            &[
                "-n",
                NS,
                "patch",
                "deployment",
                DEPLOYMENT,
                "-p",
                r#"{"spec":{"strategy":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}}}"#,
            ],
        );
        let mut ngf = NginxGatewayFabric {
            cluster,
            pods: Some(pods),
            dir,
            took: Duration::ZERO,
        };
        let accepted = super::k8s::gateway_class_accepted(cluster, CLASS);
        assert!(
            accepted,
            "GatewayClass {CLASS} not accepted in 60 s:\n{}",
            ngf.logs()
        );
        ngf.took = t.elapsed();
        ngf
    }

    /// The ends of the control plane's and nginx's logs, the servers of the nginx
    /// configuration it wrote last, and the pods' story.
    pub fn logs(&self) -> String {
        let mut servers = String::new();
        for e in std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let conf = e.path().join("etc-nginx/conf.d/http.conf");
            if let Ok(text) = std::fs::read_to_string(&conf) {
                servers += &format!("--- {}:\n", conf.display());
                for l in text.lines().filter(|l| {
                    let t = l.trim_start();
                    ["server_name", "listen", "ssl_", "return", "location"]
                        .iter()
                        .any(|k| t.starts_with(k))
                }) {
                    servers += l.trim();
                    servers.push('\n');
                }
            }
        }
        // What nginx said of its upstreams (a peer marked down, none live), which
        // the tails' reload notices push out.
        let mut upstreams = String::new();
        for e in std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "err"))
        {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            let lines: Vec<&str> = text.lines().filter(|l| l.contains("upstream")).collect();
            upstreams += &format!(
                "--- upstream lines of {}: {}\n",
                e.path().display(),
                lines.len()
            );
            for l in lines.iter().rev().take(15).rev() {
                upstreams += l;
                upstreams.push('\n');
            }
        }
        super::proc::tails_in(self.dir.path(), 40)
            + &upstreams
            + &servers
            + &format!("--- pods: {:?}\n", self.pods.as_ref().map(ProcessPods::log))
    }

    /// `kubernetes.workloads.nginx-gateway-fabric` for this install: the one pod of
    /// control plane and nginx.
    pub fn workloads(&self) -> String {
        format!(
            "{{nginx-gateway-fabric: {{namespace: {NS}, controller: \"app.kubernetes.io/name=nginx-gateway-fabric\", data_plane: deployment/{DEPLOYMENT}}}}}"
        )
    }

    /// The pids of nginx's worker processes now (seen from outside the pod's PID
    /// namespace): a reload replaces them all.
    pub fn nginx_workers(&self) -> Vec<u32> {
        super::k8s::nginx_workers_under(self.dir.path())
    }
}

impl NginxGatewayFabric<'_> {
    /// Kills the control plane (SIGKILL), as its container crashing would; nginx
    /// serves on with the configuration it was given last. Returns how many were
    /// killed.
    pub fn kill_control_plane(&self) -> usize {
        let controller = ngf_dir().join("bin/gateway").display().to_string();
        let pids = super::k8s::processes_under(self.dir.path(), &controller);
        for pid in &pids {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        pids.len()
    }

    /// The resident memory now of the control plane and of nginx (master and
    /// workers), MiB, apart.
    pub fn memory_mib(&self) -> (f64, f64) {
        let controller = ngf_dir().join("bin/gateway").display().to_string();
        let under = |prefix: &str| {
            super::k8s::rss_mib_of(&super::k8s::processes_under(self.dir.path(), prefix))
        };
        (under(&controller), under("nginx: "))
    }
}

impl Drop for NginxGatewayFabric<'_> {
    fn drop(&mut self) {
        self.pods = None;
        let _ = self
            .cluster
            .kubectl(&["delete", "--ignore-not-found", "gatewayclass", CLASS]);
        let _ = self.cluster.kubectl(&[
            "delete",
            "--ignore-not-found",
            "nginxproxy",
            "ngf-proxy-config",
        ]);
    }
}

/// The Deployment, its pod the control plane and nginx in one root of its own on
/// the cluster's network; ready once the control plane answers its readiness
/// probe's port and nginx runs.
fn controller_pods(cluster: &TestCluster, dir: &Path) -> ProcessPods {
    let built = ngf_dir();
    let (netns, kubeconfig, state, logs) = (
        cluster.netns().to_string(),
        cluster.kubeconfig(),
        cluster.state_dir().to_path_buf(),
        dir.to_path_buf(),
    );
    let start = Box::new(move |pod: &str| {
        let base = logs.join(format!("pod-{pod}"));
        let (root, etc, run) = (base.join("root"), base.join("etc-nginx"), base.join("run"));
        if !etc.exists() {
            super::k8s_ingress_nginx::copy_tree(&built.join("etc-nginx"), &etc);
        }
        for d in [
            "conf.d",
            "stream-conf.d",
            "main-includes",
            "secrets",
            "includes",
        ] {
            std::fs::create_dir_all(etc.join(d)).unwrap();
        }
        // What the chart's init container copies from its bootstrap ConfigMap.
        std::fs::write(
            etc.join("main-includes/main.conf"),
            "error_log stderr info;\n",
        )
        .unwrap();
        for d in [&root, &run] {
            std::fs::create_dir_all(d).unwrap();
        }
        let uid = Command::new(state.join("kubectl"))
            .args([
                "get",
                "pod",
                "-n",
                NS,
                pod,
                "-o",
                "jsonpath={.metadata.uid}",
            ])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &netns])
            .arg(super::k8s::script("pod-root.sh"))
            .arg(&root)
            .arg("--private")
            .arg("/run")
            .arg("--bind")
            .arg(format!("{}:/etc/nginx", etc.display()))
            .arg("--bind")
            .arg(format!("{}:/run/nginx", run.display()))
            .arg("--pid")
            .arg("--")
            // The two containers: nginx as its image starts it, and the control
            // plane, both children of the pod's first process, so that one can
            // end (a killed control plane) while the other serves on.
            .args([
                "/bin/sh",
                "-c",
                "rm -f /var/run/nginx/*.sock; nginx -g 'daemon off;' & \"$0\" \"$@\" & wait",
            ])
            .arg(built.join("bin/gateway"))
            .args([
                "static-mode",
                &format!("--gateway-ctlr-name={CONTROLLER_NAME}"),
                &format!("--gatewayclass={CLASS}"),
                "--config=ngf-config",
                &format!("--service={DEPLOYMENT}"),
                "--metrics-disable",
                &format!("--health-port={HEALTH_PORT}"),
                "--leader-election-disable",
                "--product-telemetry-disable",
            ])
            .env("KUBECONFIG", &kubeconfig)
            .env("POD_IP", NODE_ADDR)
            .env("POD_NAMESPACE", NS)
            .env("POD_NAME", pod)
            .env("POD_UID", uid);
        Proc::spawn_group(&format!("ngf-{pod}"), &mut cmd, &logs)
    });
    let ready = Box::new(|pid| {
        super::k8s_ingress_nginx::descendants(pid)
            .into_iter()
            .any(|p| super::k8s_process_pods::listens(p, HEALTH_PORT))
    });
    ProcessPods::deployment_labelled(cluster, NS, DEPLOYMENT, 1, LABELS, start, ready)
}
