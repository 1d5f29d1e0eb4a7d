//! A controller installed in the test cluster the way a user installs one: a
//! Deployment in a namespace of its own, whose pods the harness runs as a kubelet
//! would, each as a process of the test on the cluster's network (host network):
//! started when the pod is bound to a node, marked Ready once it serves, sent
//! SIGTERM when the pod is deleted and SIGKILL at the end of its grace period, then
//! the pod removed. So `restart: controller` (pods deleted) and `restart: proxy` (a
//! rolling restart) go through the real API server, ReplicaSet controller and
//! scheduler, and reach real Traefik and Contour processes.
//!
//! Pods carry [`PROCESS_LABEL`], which the backend pod runner ([`super::k8s_pods`])
//! leaves alone.

use super::k8s::TestCluster;
use super::proc::Proc;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use rustix::process::Signal;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The label of pods this harness runs.
pub const PROCESS_LABEL: &str = "ingressbench.io/test-process";

/// Starts the process of a pod, named by the pod.
pub type Start = Box<dyn Fn(&str) -> Proc + Send>;
/// Whether a pod's process serves, by its pid.
pub type Ready = Box<dyn Fn(u32) -> bool + Send>;

/// Whether process `pid` itself holds a socket listening on TCP `port`: its own,
/// not one of another process that shares the port (`SO_REUSEPORT`, or the pod it
/// replaces), which a connection could not tell apart.
pub fn listens(pid: u32, port: u16) -> bool {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let mut inodes = Vec::new();
    for table in ["net/tcp", "net/tcp6"] {
        let text = std::fs::read_to_string(proc_dir.join(table)).unwrap_or_default();
        for l in text.lines().skip(1) {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local_port = f
                .get(1)
                .and_then(|a| a.rsplit_once(':'))
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            // State 0A: LISTEN.
            if local_port == Some(port) && f.get(3) == Some(&"0A") {
                if let Some(inode) = f.get(9) {
                    inodes.push(format!("socket:[{inode}]"));
                }
            }
        }
    }
    std::fs::read_dir(proc_dir.join("fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .any(|l| inodes.iter().any(|i| l.as_os_str() == i.as_str()))
}

struct Running {
    proc: Proc,
    ready: bool,
    /// When SIGTERM was sent, and the pod's grace period.
    stopping: Option<(Instant, Duration)>,
}

/// The pods of one Deployment, run as processes.
pub struct ProcessPods {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    log: Arc<Mutex<Vec<String>>>,
}

impl ProcessPods {
    /// Creates Deployment `name` (`replicas` pods labelled
    /// `app.kubernetes.io/name=<name>`, grace period 5 s) in namespace `ns` and runs
    /// its pods: `start` for each, `ready` to know when it serves.
    pub fn deployment(
        cluster: &TestCluster,
        ns: &str,
        name: &str,
        replicas: u32,
        start: Start,
        ready: Ready,
    ) -> ProcessPods {
        ProcessPods::deployment_labelled(cluster, ns, name, replicas, &[], start, ready)
    }

    /// [`ProcessPods::deployment`], its pods labelled `labels` too (as the
    /// controller's own install labels them, which its profile selects by).
    pub fn deployment_labelled(
        cluster: &TestCluster,
        ns: &str,
        name: &str,
        replicas: u32,
        labels: &[(&str, &str)],
        start: Start,
        ready: Ready,
    ) -> ProcessPods {
        let extra: String = labels
            .iter()
            .map(|(k, v)| format!("        {k}: \"{v}\"\n"))
            .collect();
        let manifest = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n---\n\
             apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
             spec:\n  replicas: {replicas}\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: {name}\n\
             \x20 template:\n    metadata:\n      labels:\n        app.kubernetes.io/name: {name}\n        {PROCESS_LABEL}: \"true\"\n{extra}\
             \x20   spec:\n      hostNetwork: true\n      terminationGracePeriodSeconds: 5\n\
             \x20     containers:\n      - name: {name}\n        image: {name}:test\n"
        );
        let file = cluster.state_dir().join(format!("{ns}-{name}.yaml"));
        std::fs::write(&file, manifest).unwrap();
        let (ok, out) = cluster.kubectl(&["apply", "-f", file.to_str().unwrap()]);
        assert!(ok, "{out}");
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (s, l) = (stop.clone(), log.clone());
        let kubeconfig = cluster.kubeconfig();
        let netns = PathBuf::from("/var/run/netns").join(cluster.netns());
        let (ns, selector) = (ns.to_string(), format!("app.kubernetes.io/name={name}"));
        let thread = std::thread::Builder::new()
            .name(format!("pods-{name}"))
            .spawn(move || {
                let (rt, client) = super::k8s_pods::client_inside(&netns, &kubeconfig);
                let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
                let mut running: BTreeMap<String, Running> = BTreeMap::new();
                let note = |m: String| l.lock().unwrap().push(m);
                while !s.load(Ordering::Relaxed) {
                    let pods = match rt.block_on(api.list(&ListParams::default().labels(&selector)))
                    {
                        Ok(p) => p.items,
                        Err(e) => {
                            note(format!("list: {e}"));
                            std::thread::sleep(Duration::from_millis(100));
                            continue;
                        }
                    };
                    for pod in &pods {
                        let Some(pname) = pod.metadata.name.clone() else {
                            continue;
                        };
                        let bound = pod
                            .spec
                            .as_ref()
                            .and_then(|s| s.node_name.as_ref())
                            .is_some();
                        let deleting = pod.metadata.deletion_timestamp.is_some();
                        let alive = running.get_mut(&pname).map(|r| r.proc.alive());
                        match running.get_mut(&pname) {
                            None if bound && !deleting => {
                                note(format!("{pname}: start"));
                                running.insert(
                                    pname.clone(),
                                    Running {
                                        proc: start(&pname),
                                        ready: false,
                                        stopping: None,
                                    },
                                );
                            }
                            None if deleting => {
                                // Never started, or ended: the kubelet's last word.
                                let _ = rt.block_on(api.delete(
                                    &pname,
                                    &DeleteParams {
                                        grace_period_seconds: Some(0),
                                        ..Default::default()
                                    },
                                ));
                            }
                            Some(r) if deleting && r.stopping.is_none() => {
                                let grace = Duration::from_secs(
                                    pod.metadata
                                        .deletion_grace_period_seconds
                                        .unwrap_or(5)
                                        .max(0) as u64,
                                );
                                note(format!("{pname}: SIGTERM"));
                                r.proc.signal(Signal::TERM);
                                r.stopping = Some((Instant::now(), grace));
                            }
                            // restartPolicy Always: a process that exited runs again
                            // (a port its predecessor still held, for one).
                            Some(r) if !deleting && alive == Some(false) => {
                                let counted =
                                    rt.block_on(super::k8s_pods::count_restart(&client, pod));
                                note(format!("{pname}: exited, started again ({counted:?})"));
                                std::thread::sleep(Duration::from_millis(200));
                                r.proc = start(&pname);
                                r.ready = false;
                            }
                            Some(r) if !deleting && !r.ready && ready(r.proc.id()) => {
                                match rt.block_on(super::k8s_pods::set_ready(&client, pod, true)) {
                                    Ok(_) => {
                                        note(format!("{pname}: ready"));
                                        r.ready = true;
                                    }
                                    Err(e) => note(format!("{pname}: set ready: {e}")),
                                }
                            }
                            _ => {}
                        }
                    }
                    // Processes whose pod is gone, or whose grace period ended.
                    let present: Vec<String> = pods
                        .iter()
                        .filter_map(|p| p.metadata.name.clone())
                        .collect();
                    let mut ended = Vec::new();
                    for (pname, r) in running.iter_mut() {
                        let over = r.stopping.is_some_and(|(t, g)| t.elapsed() >= g);
                        if !present.contains(pname)
                            || over
                            || (r.stopping.is_some() && !r.proc.alive())
                        {
                            ended.push(pname.clone());
                        }
                    }
                    for pname in ended {
                        if let Some(mut r) = running.remove(&pname) {
                            r.proc.kill();
                            note(format!("{pname}: ended"));
                            let _ = rt.block_on(api.delete(
                                &pname,
                                &DeleteParams {
                                    grace_period_seconds: Some(0),
                                    ..Default::default()
                                },
                            ));
                        }
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                for (_, mut r) in running {
                    r.proc.kill();
                }
            })
            .expect("spawn the process pods");
        ProcessPods {
            stop,
            thread: Some(thread),
            log,
        }
    }

    /// What happened to each pod, in order.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Waits until some pod's process serves.
    pub fn wait_ready(&self, limit: Duration) {
        let t = Instant::now();
        while !self.log().iter().any(|l| l.ends_with(": ready")) {
            assert!(t.elapsed() < limit, "no pod ready: {:?}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for ProcessPods {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
