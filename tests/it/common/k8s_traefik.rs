//! Real Traefik v3.6 (built by `scripts/k8s-testenv/build.sh`) watching a
//! [`TestCluster`] from outside it, as a user's installed controller would: its
//! Kubernetes Ingress provider (with its CRD provider, so an Ingress can name a
//! Middleware) and/or its Gateway API provider, pointed at the API server with the
//! admin token, no phoning home. It runs inside the cluster's network namespace (no
//! default route), its one entry point on the cluster's lab address, and is killed
//! (with its process group) when dropped.

use super::k8s::{testenv_dir, TestCluster};
use super::k8s_process_pods::ProcessPods;
use super::proc::Proc;
use super::wait_accepting;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Traefik's one entry point, on the lab address of the cluster's namespace.
pub const ENTRY_POINT: &str = "198.18.0.1:8000";

/// With the ingress-nginx provider, a TLS entry point too (`websecure`, TLS on every
/// router of it), as Traefik's Helm chart installs it: where an Ingress's `tls`
/// Secret is served, and what its ssl-redirect sends plain HTTP to.
pub const TLS_ENTRY_POINT: &str = "198.18.0.1:8444";

/// The GatewayClass controller name Traefik's Gateway API provider answers to.
pub const GATEWAY_CONTROLLER: &str = "traefik.io/gateway-controller";

/// Which of Traefik's Kubernetes providers to run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Providers {
    /// Ingresses of class `traefik`, plus the CRD provider so that the
    /// `router.middlewares` annotation resolves Middlewares (traefik.io/v1alpha1).
    pub ingress: bool,
    /// Gateway API: Gateways of a GatewayClass naming [`GATEWAY_CONTROLLER`].
    pub gateway: bool,
    /// The experimental ingress-nginx provider (`kubernetesIngressNGINX`, v3.5+):
    /// Ingresses of class `nginx` (controller `k8s.io/ingress-nginx`, the
    /// IngressClass ingress-nginx's install makes) with ingress-nginx's
    /// annotations read unchanged: the `traefik-nginx` profile.
    pub ingress_nginx: bool,
}

/// A running Traefik; dropping it kills it.
pub struct Traefik {
    proc: Proc,
    dir: tempfile::TempDir,
}

/// The admin token of the cluster's kubeconfig.
fn token(cluster: &TestCluster) -> String {
    let kubeconfig = std::fs::read_to_string(cluster.kubeconfig()).unwrap();
    kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("a token in the kubeconfig")
        .trim_matches('"')
        .to_string()
}

/// Applies a folder or file of CRDs (server-side: Traefik's are too large for the
/// last-applied annotation) and waits until the API serves them.
fn install_crds(cluster: &TestCluster, path: &Path) {
    let p = path.to_str().unwrap();
    let (ok, out) = cluster.kubectl(&["apply", "--server-side", "-f", p]);
    assert!(ok, "apply {p}: {out}");
    let (ok, out) = cluster.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "-f",
        p,
    ]);
    assert!(ok, "CRDs of {p} not established: {out}");
}

/// Traefik's command line inside the cluster's namespace `netns`, talking to its API
/// server with `token`.
fn command(netns: &str, token: &str, ca: &Path, providers: Providers) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", netns])
        .arg(testenv_dir().join("bin/traefik"));
    let mut provider = |name: &str| {
        cmd.arg(format!("--providers.{name}=true"))
            .arg(format!(
                "--providers.{name}.endpoint=https://127.0.0.1:6443"
            ))
            .arg(format!("--providers.{name}.token={token}"))
            .arg(format!(
                "--providers.{name}.certauthfilepath={}",
                ca.display()
            ));
    };
    if providers.ingress {
        provider("kubernetesingress");
        provider("kubernetescrd");
    }
    if providers.ingress_nginx {
        provider("kubernetesingressnginx");
    }
    if providers.gateway {
        provider("kubernetesgateway");
        cmd.arg("--providers.kubernetesgateway.statusaddress.ip=198.18.0.1");
    }
    if providers.ingress_nginx {
        cmd.arg("--experimental.kubernetesingressnginx=true")
            .arg(format!("--entrypoints.websecure.address={TLS_ENTRY_POINT}"))
            .arg("--entrypoints.websecure.http.tls=true");
    }
    cmd.arg(format!("--entrypoints.web.address={ENTRY_POINT}"))
        .args([
            "--global.checknewversion=false",
            "--global.sendanonymoususage=false",
            "--log.level=INFO",
        ]);
    cmd
}

impl Traefik {
    /// Installs what `providers` need (the IngressClass `traefik` and Traefik's CRDs;
    /// the Gateway API's standard CRDs) and starts Traefik, returning once its entry
    /// point accepts connections.
    pub fn start(cluster: &TestCluster, providers: Providers) -> Traefik {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Traefik::prepare(cluster, providers, &dir);
        let mut proc = Proc::spawn_group("traefik", &mut cmd, dir.path());
        let addr = ENTRY_POINT.parse().unwrap();
        let up = cluster.inside(|| wait_accepting(addr, Duration::from_secs(30)));
        assert!(
            up && proc.alive(),
            "Traefik did not listen on {ENTRY_POINT}:\n{}",
            proc.stderr_so_far()
        );
        Traefik { proc, dir }
    }

    /// Traefik installed as a Deployment `traefik` in namespace `traefik` of one
    /// pod, each pod a Traefik process run by the harness
    /// ([`super::k8s_process_pods`]), its entry point opened with `SO_REUSEPORT`
    /// so that a rolling restart's new pod binds beside the old one, as pods on
    /// one node with a hostPort-less Service would not need to.
    pub fn as_pods(
        cluster: &TestCluster,
        providers: Providers,
    ) -> (ProcessPods, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        // The CRDs, the IngressClass, what the command needs: once.
        let _ = Traefik::prepare(cluster, providers, &dir);
        let (netns, token, ca, logs) = (
            cluster.netns().to_string(),
            token(cluster),
            cluster.state_dir().join("pki/ca.crt"),
            dir.path().to_path_buf(),
        );
        let start = Box::new(move |pod: &str| {
            let mut cmd = command(&netns, &token, &ca, providers);
            cmd.arg("--entrypoints.web.reuseport=true");
            if providers.ingress_nginx {
                cmd.arg("--entrypoints.websecure.reuseport=true");
            }
            Proc::spawn_group(&format!("traefik-{pod}"), &mut cmd, &logs)
        });
        // Its own listener on the entry point: the pod's, not the one it replaces.
        let port: u16 = ENTRY_POINT.rsplit_once(':').unwrap().1.parse().unwrap();
        let ready = Box::new(move |pid| super::k8s_process_pods::listens(pid, port));
        let pods = ProcessPods::deployment(cluster, "traefik", "traefik", 1, start, ready);
        pods.wait_ready(Duration::from_secs(60));
        (pods, dir)
    }

    /// Installs what Traefik needs in the cluster (the IngressClass, its CRDs and
    /// Gateway API's) and returns its command line.
    fn prepare(cluster: &TestCluster, providers: Providers, dir: &tempfile::TempDir) -> Command {
        assert!(
            providers.ingress || providers.gateway || providers.ingress_nginx,
            "no provider asked for"
        );
        if providers.ingress_nginx {
            // The IngressClass ingress-nginx's install makes, if it is not there yet.
            let class = dir.path().join("nginx-class.yaml");
            std::fs::write(
                &class,
                "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: nginx\n\
                 spec:\n  controller: k8s.io/ingress-nginx\n",
            )
            .unwrap();
            let (ok, out) = cluster.kubectl(&["apply", "-f", class.to_str().unwrap()]);
            assert!(ok, "{out}");
        }
        let crds = testenv_dir().join("crds");
        if providers.ingress {
            let class = dir.path().join("class.yaml");
            std::fs::write(
                &class,
                "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: traefik\n\
                 spec:\n  controller: traefik.io/ingress-controller\n",
            )
            .unwrap();
            let (ok, out) = cluster.kubectl(&["apply", "-f", class.to_str().unwrap()]);
            assert!(ok, "{out}");
            install_crds(
                cluster,
                &crds.join("traefik/kubernetes-crd-definition-v1.yml"),
            );
        }
        if providers.gateway {
            install_crds(cluster, &crds.join("gateway-api/standard"));
        }
        command(
            cluster.netns(),
            &token(cluster),
            &cluster.state_dir().join("pki/ca.crt"),
            providers,
        )
    }

    pub fn url(&self) -> String {
        format!("http://{ENTRY_POINT}/")
    }

    /// Traefik's log so far (it logs to stdout).
    pub fn log(&self) -> String {
        self.proc.stdout_so_far() + &self.proc.stderr_so_far()
    }

    /// Whether the process still runs.
    pub fn alive(&mut self) -> bool {
        self.proc.alive()
    }

    /// Creates namespace `ns` holding a GatewayClass of Traefik's and a Gateway `name`
    /// with one HTTP listener on the entry point's port that takes routes from every
    /// namespace (a run's HTTPRoute lives in the run's namespace), and waits until
    /// Traefik reports the Gateway Accepted.
    pub fn gateway(&self, cluster: &TestCluster, ns: &str, name: &str) {
        let port = ENTRY_POINT.rsplit_once(':').unwrap().1;
        let file = self.dir.path().join("gateway.yaml");
        std::fs::write(
            &file,
            format!(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n---\n\
                 apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\n\
                 metadata:\n  name: traefik\nspec:\n  controllerName: {GATEWAY_CONTROLLER}\n---\n\
                 apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n\
                 metadata:\n  name: {name}\n  namespace: {ns}\n\
                 spec:\n  gatewayClassName: traefik\n  listeners:\n\
                 \x20 - name: web\n    protocol: HTTP\n    port: {port}\n\
                 \x20   allowedRoutes:\n      namespaces:\n        from: All\n"
            ),
        )
        .unwrap();
        let (ok, out) = cluster.kubectl(&["apply", "-f", file.to_str().unwrap()]);
        assert!(ok, "{out}");
        let t = Instant::now();
        let accepted = cluster.wait_for(
            &[
                "get",
                "gateway",
                "-n",
                ns,
                name,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Accepted\")].status}",
            ],
            "True",
            Duration::from_secs(30),
        );
        assert!(
            accepted,
            "Traefik did not accept Gateway {ns}/{name}: {}\n{}",
            cluster
                .kubectl(&["get", "gateway", "-n", ns, name, "-o", "yaml"])
                .1,
            self.log()
        );
        eprintln!(
            "traefik: Gateway {ns}/{name} accepted after {:.1?}",
            t.elapsed()
        );
    }
}
