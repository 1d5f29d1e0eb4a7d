//! Makes kwok's pods real for the tests, as a kubelet would on a real node: every pod
//! bound to a kwok node (`kwok-node-0`, and any a test adds) that has an IP runs the
//! built-in backend
//! (`ingressbench backend --listen <pod IP>:<port> --id <pod name> --workers 1`) in a
//! network namespace of its own holding that IP.
//!
//! Network, all of it inside 198.18.0.0/15 and never reaching the machine's own
//! namespace:
//! - pod namespace `ibpod-<8 hex digits>` (a hash of the cluster's namespace and the
//!   pod's uid): `lo` up, `eth0` with the pod IP /32, a link route to the host address
//!   [`HOST_IP`] and a route to the cluster's [`API_IP`] via it; no default route;
//! - its veth peer `ibh-<same hex>` in the cluster's namespace: [`HOST_IP`]/32 (the same
//!   address on every pod's veth) and a /32 route to the pod IP, more specific than the
//!   cluster namespace's blackhole for the whole range.
//!
//! Life, as a kubelet's:
//! - readiness: with a cluster brought up with [`PodReadiness::Harness`], kwok starts
//!   pods with their containers not ready, and the runner patches the pod's status
//!   (container ready, ContainersReady and Ready True) once both veth ends are up and
//!   the backend answers the pod's readiness probe path (`/healthz` unless the pod says
//!   otherwise) on the pod IP, from the cluster's namespace (polled every 5 ms); Ready
//!   False again if the backend dies by itself (it is not restarted). With
//!   [`PodReadiness::Kwok`] kwok says Ready at once and the runner only measures how
//!   long after that the backend answers ([`PodRecord::answering`]).
//!   The probe is one-off: a backend that hangs later stays Ready.
//! - deletion timestamp: SIGTERM (the backend drains), SIGKILL when the pod's grace
//!   period (`deletionGracePeriodSeconds`, counted from when the runner saw it) ends.
//! - the pod object gone: SIGKILL if still running, then the veth and the namespace
//!   are removed. One pod IP belongs to one live pod at a time: a pod whose IP is still
//!   held by another (kwok reuses IPs as soon as a pod is gone) has the old one torn
//!   down first, and the watch is handled on one thread, in order.
//! - drop: every backend stopped (SIGTERM, SIGKILL after 2 s), every veth and pod
//!   namespace removed, also when the test is unwinding from a panic.
//!
//! Backends are their own process group, recorded in the cluster's `pids/`
//! (`ibpod-<hex>.pid`/`.start`), so that `down.sh` stops them if the runner could not
//! (the test process killed); their output goes to the cluster's `logs/`.
//!
//! Test knob: the pod annotation [`TEST_ARGS_ANNOTATION`] adds flags to the backend's
//! command line (e.g. `--delay 30s --drain-timeout 60s`).
//!
//! Pods of our own image: a pod whose container command starts with `ingressbench` (the
//! generators' indexed Job) runs that command with the test's binary instead of the
//! backend, in the pod namespace, with a kubelet's environment: a clean one holding
//! `HOSTNAME` and the container's `env` (plain values and the downward API's
//! `fieldRef`s, which is how the Job controller gives `JOB_COMPLETION_INDEX` from the
//! annotation `batch.kubernetes.io/job-completion-index`), and `$(VAR)` in its
//! arguments expanded as a kubelet does. When it exits by itself the runner reports
//! it as a kubelet would, through the status subresource: phase Succeeded (exit code
//! 0) or Failed, its container terminated with the code, Ready False. kwok leaves that
//! alone: its stages (kwok-stages.yaml) only act on a pod without an IP or with a
//! deletion timestamp. Pods with `hostNetwork` are not run (they would hold the node's
//! own address): the runner says so among its problems.

use super::k8s::{PodReadiness, TestCluster};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The cluster namespace's side of every pod's veth.
pub const HOST_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The cluster namespace's own address (API server advertise address, node IP), which
/// pods can reach through [`HOST_IP`].
pub const API_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The node's pod range (up.sh): a pod reaches the others through the cluster's
/// namespace, which forwards between their veths, as a node's CNI bridge would.
pub const POD_CIDR: &str = "198.18.64.0/18";
/// Pod annotation: extra flags for the backend (split on whitespace), for tests.
pub const TEST_ARGS_ANNOTATION: &str = "ingressbench.dev/test-backend-args";

/// The longest the runner waits for a new backend to answer.
const ANSWER_LIMIT: Duration = Duration::from_secs(15);

/// What happened to one pod, on the runner's clock. Durations are from
/// [`PodRecord::running`].
#[derive(Clone, Debug)]
pub struct PodRecord {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub ip: Ipv4Addr,
    pub netns: String,
    pub pid: Option<u32>,
    /// When the watch showed the pod Running with its IP (kwok's report), or, for a
    /// pod that ran before the runner started ([`PodRecord::preexisting`]), when the
    /// runner's first list showed it.
    pub running: Instant,
    /// The pod was already running when the runner started.
    pub preexisting: bool,
    /// Pod namespace and veth made.
    pub netns_ready: Option<Duration>,
    /// Backend process started.
    pub spawned: Option<Duration>,
    /// Both ends of the veth operationally up (`state UP`: the kernel's link watch has
    /// run for them; until then their queue drops what is sent).
    pub link_up: Option<Duration>,
    /// The backend answered its probe path with 200 on the pod IP.
    pub answering: Option<Duration>,
    /// The pod's status patched Ready (only with [`PodReadiness::Harness`]).
    pub marked_ready: Option<Duration>,
    pub sigterm: Option<Instant>,
    pub sigkill: Option<Instant>,
    /// When the backend's exit was seen, and how it ended.
    pub exited: Option<(Instant, String)>,
    /// The pod object gone (or missing after the watch relisted).
    pub gone: Option<Instant>,
    /// Its veth and namespace removed.
    pub torn_down: Option<Instant>,
}

/// Runs the pods of a [`TestCluster`]; stops them and removes their namespaces when
/// dropped. Borrows the cluster, so it is always dropped first.
pub struct PodRunner<'c> {
    _cluster: &'c TestCluster,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

struct Cfg {
    bin: PathBuf,
    cluster_ns: String,
    kubeconfig: PathBuf,
    /// The cluster's STATE_DIR/pids and STATE_DIR/logs.
    pids: PathBuf,
    logs: PathBuf,
    /// STATE_DIR/pods: each pod's volumes and root folder.
    pod_dirs: PathBuf,
    /// STATE_DIR/kubectl.
    kubectl: PathBuf,
    gated: bool,
    t0: Instant,
}

struct Shared {
    cfg: Cfg,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    live: HashMap<String, Live>,
    by_ip: HashMap<Ipv4Addr, String>,
    records: Vec<PodRecord>,
    log: Vec<String>,
    problems: Vec<String>,
}

/// A pod the runner has set up and not torn down yet.
struct Live {
    rec: usize,
    namespace: String,
    name: String,
    ip: Ipv4Addr,
    netns: String,
    host_if: String,
    child: Option<Child>,
    term_sent: bool,
    kill_at: Option<Instant>,
    killed: bool,
    /// It runs our own command (a Job's pod), which ends by itself.
    job: bool,
    /// The pod as last seen (its container statuses for the status patches).
    pod: Pod,
}

/// A pod whose process ended by itself, as [`Shared::tick`] saw it.
struct Ended {
    pod: Pod,
    job: bool,
    status: ExitStatus,
    /// It ended after SIGTERM: a kubelet then deletes the pod object at once,
    /// done only for Envoy Gateway's pods (whose grace period is 360 s); the
    /// backends' pods go when kwok's stage says (their grace period).
    deleted: bool,
}

/// A probe's end, sent back to the watch loop.
struct ProbeDone {
    uid: String,
    link_up: Result<Instant, String>,
    answered: Result<(Instant, String), String>,
    marked: Option<Result<Instant, String>>,
}

impl<'c> PodRunner<'c> {
    /// Starts watching the cluster's pods; returns once the pods that already exist
    /// are set up (their backends started, not necessarily answering yet).
    pub fn start(cluster: &'c TestCluster, bin: &str) -> PodRunner<'c> {
        // Pod to pod through the cluster's namespace (routes to each pod, a
        // blackhole for the rest of the range, no default route).
        let fwd = Command::new("ip")
            .args([
                "netns",
                "exec",
                cluster.netns(),
                "sysctl",
                "-qw",
                "net.ipv4.ip_forward=1",
            ])
            .status();
        assert!(
            fwd.is_ok_and(|s| s.success()),
            "enable forwarding in {}",
            cluster.netns()
        );
        let cfg = Cfg {
            bin: PathBuf::from(bin),
            cluster_ns: cluster.netns().to_string(),
            kubeconfig: cluster.kubeconfig(),
            pids: cluster.state_dir().join("pids"),
            logs: cluster.state_dir().join("logs"),
            pod_dirs: cluster.state_dir().join("pods"),
            kubectl: cluster.state_dir().join("kubectl"),
            gated: cluster.pod_readiness() == PodReadiness::Harness,
            t0: Instant::now(),
        };
        let shared = Arc::new(Shared {
            cfg,
            state: Mutex::new(State::default()),
        });
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let s = shared.clone();
        let netns_path = PathBuf::from("/var/run/netns").join(cluster.netns());
        let thread = thread::Builder::new()
            .name("pod-runner".into())
            .spawn(move || {
                let ns = std::fs::File::open(&netns_path).expect("open the cluster's netns");
                rustix::thread::move_into_link_name_space(
                    std::os::fd::AsFd::as_fd(&ns),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )
                .expect("enter the cluster's netns");
                // Its threads are born in the cluster's namespace too.
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("tokio runtime");
                rt.block_on(watch_loop(s, ready_tx, stop_rx));
            })
            .expect("spawn the pod runner");
        let runner = PodRunner {
            _cluster: cluster,
            shared,
            stop: Some(stop_tx),
            thread: Some(thread),
        };
        match ready_rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(())) => runner,
            Ok(Err(e)) => panic!("pod runner: {e}"),
            Err(_) => panic!(
                "pod runner: no initial list of pods within 60 s; log: {:#?}",
                runner.log()
            ),
        }
    }

    /// Whether the runner marks pods Ready (the cluster's [`PodReadiness::Harness`]).
    pub fn gated(&self) -> bool {
        self.shared.cfg.gated
    }

    /// Every pod's record, in the order the pods were set up.
    pub fn records(&self) -> Vec<PodRecord> {
        self.shared.lock().records.clone()
    }

    /// The latest record of the pod `namespace/name`.
    pub fn record(&self, namespace: &str, name: &str) -> Option<PodRecord> {
        self.shared
            .lock()
            .records
            .iter()
            .rev()
            .find(|r| r.namespace == namespace && r.name == name)
            .cloned()
    }

    /// The pod namespaces that exist now (set up, not torn down).
    pub fn live_netns(&self) -> Vec<String> {
        let st = self.shared.lock();
        let mut v: Vec<String> = st.live.values().map(|l| l.netns.clone()).collect();
        v.sort();
        v
    }

    /// What the runner did, with times since it started.
    pub fn log(&self) -> Vec<String> {
        self.shared.lock().log.clone()
    }

    /// What went wrong (a set-up failing, a backend dying by itself, a watch error).
    pub fn problems(&self) -> Vec<String> {
        self.shared.lock().problems.clone()
    }

    /// Waits until `pred` holds for the latest record of `namespace/name`, up to
    /// `limit`; panics with the runner's log if it does not.
    pub fn wait_for(
        &self,
        namespace: &str,
        name: &str,
        what: &str,
        limit: Duration,
        pred: impl Fn(&PodRecord) -> bool,
    ) -> PodRecord {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(r) = self.record(namespace, name) {
                if pred(&r) {
                    return r;
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "pod {namespace}/{name}: not {what} after {limit:?}; record {:#?}\nlog: {:#?}\nproblems: {:#?}",
                    self.record(namespace, name),
                    self.log(),
                    self.problems()
                );
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for PodRunner<'_> {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                eprintln!("pod runner: its thread panicked; cleaning up anyway");
            }
        }
        // Runs whether the watch loop ended cleanly or not, and while unwinding.
        let shared = self.shared.clone();
        let mut st = shared.lock();
        for l in st.live.values_mut() {
            if l.child.is_some() && !l.term_sent {
                sigterm(l);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline
            && st.live.values_mut().any(|l| {
                l.child
                    .as_mut()
                    .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
            })
        {
            thread::sleep(Duration::from_millis(10));
        }
        let uids: Vec<String> = st.live.keys().cloned().collect();
        for uid in uids {
            shared.remove(&mut st, &uid, "runner dropped");
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere must not stop the clean-up.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn note(&self, st: &mut State, msg: String) {
        let t = self.cfg.t0.elapsed();
        st.log.push(format!("{:>8.3} s  {msg}", t.as_secs_f64()));
    }

    fn problem(&self, st: &mut State, msg: String) {
        self.note(st, format!("PROBLEM: {msg}"));
        st.problems.push(msg);
    }

    /// A pod added or changed.
    fn apply(&self, pod: Pod, probes: &Probes, preexisting: bool) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        // A controller's pod, run as a process by its own harness.
        if pod
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(super::k8s_process_pods::PROCESS_LABEL))
        {
            return;
        }
        let mut st = self.lock();
        if let Some(l) = st.live.get_mut(&uid) {
            l.pod = pod.clone();
            if pod.metadata.deletion_timestamp.is_some() {
                let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
                self.terminate(&mut st, &uid, grace);
            }
            return;
        }
        let ip: Option<Ipv4Addr> = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse().ok());
        let Some(ip) = ip else { return };
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        if pod.metadata.deletion_timestamp.is_some() {
            if !st.records.iter().any(|r| r.uid == uid) {
                self.note(
                    &mut st,
                    format!("{namespace}/{name} ({ip}) was deleted before it was set up: not run"),
                );
                st.records
                    .push(self.new_record(&pod, &uid, ip, Instant::now(), preexisting));
            }
            return;
        }
        if st.records.iter().any(|r| r.uid == uid) {
            return; // set up once already (and torn down since)
        }
        let running = Instant::now();
        if pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false)
        {
            self.problem(
                &mut st,
                format!("{namespace}/{name}: hostNetwork pods are not run by the harness"),
            );
            st.records
                .push(self.new_record(&pod, &uid, ip, running, preexisting));
            return;
        }
        // One live pod per IP: kwok hands a gone pod's IP to the next pod at once.
        // A holder not being deleted means two live pods were given one IP: traffic
        // for both reaches one process, which a test must hear of (it shows as a pod
        // that never served).
        if let Some(old) = st.by_ip.get(&ip).cloned() {
            let msg = format!(
                "{ip} is still held by pod uid {old}: tearing it down before {namespace}/{name}"
            );
            let deleting = st
                .live
                .get(&old)
                .is_some_and(|l| l.pod.metadata.deletion_timestamp.is_some());
            if deleting {
                self.note(&mut st, msg);
            } else {
                self.problem(&mut st, format!("{msg} (the holder was not being deleted)"));
            }
            self.remove(&mut st, &old, "its IP given to a new pod");
        }
        let rec = st.records.len();
        st.records
            .push(self.new_record(&pod, &uid, ip, running, preexisting));
        let netns = st.records[rec].netns.clone();
        let host_if = format!("ibh-{}", &netns["ibpod-".len()..]);
        st.live.insert(
            uid.clone(),
            Live {
                rec,
                namespace: namespace.clone(),
                name: name.clone(),
                ip,
                netns: netns.clone(),
                host_if: host_if.clone(),
                child: None,
                term_sent: false,
                kill_at: None,
                killed: false,
                job: is_ours(&pod),
                pod: pod.clone(),
            },
        );
        st.by_ip.insert(ip, uid.clone());
        if let Err(e) = setup_network(&self.cfg.cluster_ns, &netns, &host_if, ip) {
            self.problem(&mut st, format!("{namespace}/{name}: network: {e}"));
            return; // removed when the pod goes
        }
        st.records[rec].netns_ready = Some(running.elapsed());
        let (port, probe_port, path) = port_and_probe(&pod);
        let child = match self.spawn_backend(&pod, &netns, ip, port) {
            Ok(c) => c,
            Err(e) => {
                self.problem(&mut st, format!("{namespace}/{name}: backend: {e}"));
                return;
            }
        };
        let pid = child.id();
        write_pid_file(&self.cfg.pids, &netns, pid);
        st.records[rec].pid = Some(pid);
        st.records[rec].spawned = Some(running.elapsed());
        st.live.get_mut(&uid).expect("just inserted").child = Some(child);
        self.note(
            &mut st,
            format!(
                "{namespace}/{name}: {ip} in {netns} (veth {host_if}), backend pid {pid} on :{port}, {:.1?} after Running",
                running.elapsed()
            ),
        );
        let links = [
            (self.cfg.cluster_ns.clone(), host_if),
            (netns, "eth0".to_string()),
        ];
        probes.start(uid, links, SocketAddr::from((ip, probe_port)), path, pod);
    }

    fn new_record(
        &self,
        pod: &Pod,
        uid: &str,
        ip: Ipv4Addr,
        running: Instant,
        preexisting: bool,
    ) -> PodRecord {
        PodRecord {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: uid.to_string(),
            ip,
            netns: netns_name(&self.cfg.cluster_ns, uid),
            pid: None,
            running,
            preexisting,
            netns_ready: None,
            spawned: None,
            link_up: None,
            answering: None,
            marked_ready: None,
            sigterm: None,
            sigkill: None,
            exited: None,
            gone: None,
            torn_down: None,
        }
    }

    fn spawn_backend(
        &self,
        pod: &Pod,
        netns: &str,
        ip: Ipv4Addr,
        port: u16,
    ) -> Result<Child, String> {
        let name = pod.metadata.name.as_deref().unwrap_or("pod");
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        let extra: Vec<String> = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(TEST_ARGS_ANNOTATION))
            .map(|s| s.split_whitespace().map(String::from).collect())
            .unwrap_or_default();
        let log_path = self.cfg.logs.join(format!("pod-{ns}-{name}.log"));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("create {}: {e}", log_path.display()))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", netns]);
        if is_envoy_gateway_proxy(pod) {
            // Envoy Gateway's data plane: the real Envoy, with the pod's volumes at
            // their paths and the cluster's DNS, as its container would have them.
            let (args, env) = kubelet_command(pod, ip);
            let root = super::k8s_pod_root::PodRoot::make(
                &self.cfg.pod_dirs.join(netns),
                pod,
                &self.cfg.kubectl,
            )?;
            cmd.args(root.command(&super::k8s_envoy_gateway::envoy_bin()))
                .args(args)
                .env_clear()
                .envs(env);
        } else if is_ours(pod) {
            let (args, env) = kubelet_command(pod, ip);
            cmd.arg(&self.cfg.bin).args(args).env_clear().envs(env);
        } else {
            cmd.arg(&self.cfg.bin)
                .args(["backend", "--listen", &format!("{ip}:{port}")])
                .args(["--id", name, "--workers", "1"])
                .args(&extra);
        }
        cmd.stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            // Its own group (as up.sh's components), for down.sh; `ip netns exec`
            // execs, so the pid is the backend's.
            .process_group(0);
        cmd.spawn().map_err(|e| format!("spawn {cmd:?}: {e}"))
    }

    /// The pod has a deletion timestamp: SIGTERM now, SIGKILL after `grace` seconds.
    fn terminate(&self, st: &mut State, uid: &str, grace: i64) {
        let now = Instant::now();
        let Some(l) = st.live.get_mut(uid) else {
            return;
        };
        let at = now + Duration::from_secs(grace.max(0) as u64);
        let first = !l.term_sent;
        let running = l.child.is_some();
        if first && running {
            sigterm(l);
        }
        l.term_sent = true;
        let earlier = l.kill_at.is_none_or(|k| at < k);
        if earlier {
            l.kill_at = Some(at);
        }
        let (rec, who) = (l.rec, format!("{}/{}", l.namespace, l.name));
        if first {
            if running {
                st.records[rec].sigterm = Some(now);
            }
            self.note(
                st,
                format!(
                    "{who}: deletion timestamp, grace {grace} s: {}",
                    if running { "SIGTERM" } else { "not running" }
                ),
            );
        } else if earlier {
            self.note(st, format!("{who}: deleted again, grace now {grace} s"));
        }
        self.tick(st);
    }

    /// Reaps backends that ended and SIGKILLs those whose grace period is over;
    /// returns the pods whose backend ended by itself.
    fn tick(&self, st: &mut State) -> Vec<Ended> {
        enum Seen {
            Exited(ExitStatus, bool),
            Killed,
            WaitFailed(std::io::Error),
        }
        let now = Instant::now();
        let mut died = Vec::new();
        let mut seen = Vec::new();
        for l in st.live.values_mut() {
            let Some(child) = l.child.as_mut() else {
                continue;
            };
            let who = format!("{}/{}", l.namespace, l.name);
            match child.try_wait() {
                Ok(Some(status)) => {
                    l.child = None;
                    remove_pid_file(&self.cfg.pids, &l.netns);
                    seen.push((l.rec, who, Seen::Exited(status, l.term_sent || l.job)));
                    if !l.term_sent || is_envoy_gateway_proxy(&l.pod) {
                        died.push(Ended {
                            pod: l.pod.clone(),
                            job: l.job,
                            status,
                            deleted: l.term_sent,
                        });
                    }
                }
                Ok(None) => {
                    if !l.killed && l.kill_at.is_some_and(|k| now >= k) {
                        let _ = child.kill();
                        l.killed = true;
                        seen.push((l.rec, who, Seen::Killed));
                    }
                }
                Err(e) => seen.push((l.rec, who, Seen::WaitFailed(e))),
            }
        }
        for (rec, who, what) in seen {
            match what {
                Seen::Killed => {
                    st.records[rec].sigkill = Some(now);
                    self.note(st, format!("{who}: grace period over: SIGKILL"));
                }
                Seen::WaitFailed(e) => self.problem(st, format!("{who}: wait: {e}")),
                Seen::Exited(status, expected) => {
                    let how = describe(status);
                    st.records[rec].exited = Some((now, how.clone()));
                    if expected {
                        self.note(st, format!("{who}: backend exited ({how})"));
                    } else {
                        self.problem(st, format!("{who}: backend exited by itself ({how})"));
                    }
                }
            }
        }
        died
    }

    /// Stops the pod's backend (SIGKILL if still running) and removes its network.
    fn remove(&self, st: &mut State, uid: &str, why: &str) {
        let Some(mut l) = st.live.remove(uid) else {
            return;
        };
        let now = Instant::now();
        let who = format!("{}/{}", l.namespace, l.name);
        if st.records[l.rec].gone.is_none() {
            st.records[l.rec].gone = Some(now);
        }
        if let Some(mut child) = l.child.take() {
            let killed = matches!(child.try_wait(), Ok(None));
            if killed {
                let _ = child.kill();
                if st.records[l.rec].sigkill.is_none() {
                    st.records[l.rec].sigkill = Some(now);
                }
            }
            let status = child.wait();
            remove_pid_file(&self.cfg.pids, &l.netns);
            let how = status
                .map(describe)
                .unwrap_or_else(|e| format!("wait: {e}"));
            st.records[l.rec].exited = Some((Instant::now(), how.clone()));
            self.note(
                st,
                format!(
                    "{who}: {why}: backend {}({how})",
                    if killed { "SIGKILLed " } else { "" }
                ),
            );
        }
        if let Err(e) = teardown_network(&self.cfg.cluster_ns, &l.netns, &l.host_if) {
            self.problem(st, format!("{who}: teardown: {e}"));
        }
        // Its volumes and root folder, if it had them (its mounts went with it).
        let _ = std::fs::remove_dir_all(self.cfg.pod_dirs.join(&l.netns));
        st.records[l.rec].torn_down = Some(Instant::now());
        if st.by_ip.get(&l.ip).is_some_and(|u| u == uid) {
            st.by_ip.remove(&l.ip);
        }
        self.note(
            st,
            format!("{who}: {why}: {} and {} removed", l.netns, l.host_if),
        );
    }
}

/// Probes a new backend and, in a gated cluster, marks its pod Ready.
struct Probes {
    client: kube::Client,
    gated: bool,
    done: tokio::sync::mpsc::UnboundedSender<ProbeDone>,
}

impl Probes {
    fn start(
        &self,
        uid: String,
        links: [(String, String); 2],
        addr: SocketAddr,
        path: String,
        pod: Pod,
    ) {
        let client = self.client.clone();
        let gated = self.gated;
        let done = self.done.clone();
        tokio::spawn(async move {
            let link_up = tokio::task::spawn_blocking(move || wait_links_up(&links))
                .await
                .unwrap_or_else(|e| Err(e.to_string()));
            let answered = answering(addr, &path, ANSWER_LIMIT).await;
            let marked = match (&answered, gated) {
                (Ok(_), true) => Some(set_ready(&client, &pod, true).await),
                _ => None,
            };
            let _ = done.send(ProbeDone {
                uid,
                link_up,
                answered,
                marked,
            });
        });
    }
}

async fn watch_loop(
    shared: Arc<Shared>,
    ready: mpsc::Sender<Result<(), String>>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let client = match connect(&shared.cfg.kubeconfig).await {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let probes = Probes {
        client: client.clone(),
        gated: shared.cfg.gated,
        done: done_tx,
    };
    // Every pod bound to a node: kwok-node-0 of scripts/k8s-testenv/up.sh, and the
    // nodes a test adds (each as kwok's, the same pod network).
    let wc = watcher::Config::default().fields("spec.nodeName!=");
    let mut stream = watcher(Api::<Pod>::all(client.clone()), wc)
        .default_backoff()
        .boxed();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut listing: Option<HashSet<String>> = None;
    let mut ready = Some(ready);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            ev = stream.next() => match ev {
                None => break,
                Some(Err(e)) => {
                    let mut st = shared.lock();
                    shared.note(&mut st, format!("watch error (retried): {e}"));
                }
                Some(Ok(Event::Init)) => listing = Some(HashSet::new()),
                Some(Ok(Event::InitApply(p))) => {
                    if let (Some(l), Some(uid)) = (listing.as_mut(), p.metadata.uid.clone()) {
                        l.insert(uid);
                    }
                    shared.apply(p, &probes, ready.is_some());
                }
                Some(Ok(Event::InitDone)) => {
                    if let Some(seen) = listing.take() {
                        let mut st = shared.lock();
                        let missing: Vec<String> =
                            st.live.keys().filter(|u| !seen.contains(*u)).cloned().collect();
                        for uid in missing {
                            shared.remove(&mut st, &uid, "gone (missing from a relist)");
                        }
                    }
                    if let Some(r) = ready.take() {
                        let _ = r.send(Ok(()));
                    }
                }
                Some(Ok(Event::Apply(p))) => shared.apply(p, &probes, false),
                Some(Ok(Event::Delete(p))) => {
                    if let Some(uid) = p.metadata.uid {
                        let mut st = shared.lock();
                        shared.remove(&mut st, &uid, "pod gone");
                    }
                }
            },
            Some(d) = done_rx.recv() => {
                let mut st = shared.lock();
                let Some(rec) = st.records.iter().position(|r| r.uid == d.uid) else { continue };
                let who = format!("{}/{}", st.records[rec].namespace, st.records[rec].name);
                let t0 = st.records[rec].running;
                match d.link_up {
                    Ok(t) => st.records[rec].link_up = Some(t - t0),
                    Err(e) => shared.note(&mut st, format!("{who}: {e}")),
                }
                match d.answered {
                    Ok((t, failed)) => {
                        st.records[rec].answering = Some(t - t0);
                        let before = if failed.is_empty() { String::new() } else { format!(" (before that: {failed})") };
                        shared.note(&mut st, format!("{who}: answering, {:.1?} after Running{before}", t - t0));
                    }
                    Err(e) => {
                        if st.live.get(&d.uid).is_some_and(|l| !l.term_sent) {
                            shared.problem(&mut st, format!("{who}: never answered: {e}"));
                        }
                    }
                }
                match d.marked {
                    Some(Ok(t)) => {
                        st.records[rec].marked_ready = Some(t - t0);
                        shared.note(&mut st, format!("{who}: marked Ready, {:.1?} after Running", t - t0));
                    }
                    Some(Err(e)) => shared.note(&mut st, format!("{who}: marking Ready failed: {e}")),
                    None => {}
                }
            }
            _ = tick.tick() => {
                let died = {
                    let mut st = shared.lock();
                    shared.tick(&mut st)
                };
                for e in died {
                    if e.deleted {
                        let api: Api<Pod> = Api::namespaced(
                            client.clone(),
                            e.pod.metadata.namespace.as_deref().unwrap_or_default(),
                        );
                        let dp = kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
                        let _ = api.delete(e.pod.metadata.name.as_deref().unwrap_or_default(), &dp).await;
                    } else if e.job {
                        let res = set_finished(&client, &e.pod, e.status).await;
                        let mut st = shared.lock();
                        let who = format!(
                            "{}/{}",
                            e.pod.metadata.namespace.as_deref().unwrap_or_default(),
                            e.pod.metadata.name.as_deref().unwrap_or_default()
                        );
                        match res {
                            Ok(phase) => shared.note(&mut st, format!("{who}: reported {phase}")),
                            Err(e) => shared.problem(&mut st, format!("{who}: reporting its end: {e}")),
                        }
                    } else if shared.cfg.gated {
                        let _ = set_ready(&client, &e.pod, false).await;
                    }
                }
            }
        }
    }
}

/// Moves the calling thread into the network namespace at `netns` (a
/// `/var/run/netns` path) and gives it a runtime of its own and a client of the
/// cluster there: for a harness thread that lives as long as the test.
pub(crate) fn client_inside(
    netns: &Path,
    kubeconfig: &Path,
) -> (tokio::runtime::Runtime, kube::Client) {
    let f = std::fs::File::open(netns).expect("open the cluster's netns");
    rustix::thread::move_into_link_name_space(
        std::os::fd::AsFd::as_fd(&f),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .expect("enter the cluster's netns");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let client = rt.block_on(connect(kubeconfig)).expect("a client");
    (rt, client)
}

pub(crate) async fn connect(kubeconfig: &Path) -> Result<kube::Client, String> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .map_err(|e| format!("read {}: {e}", kubeconfig.display()))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| format!("kubeconfig: {e}"))?;
    kube::Client::try_from(cfg).map_err(|e| format!("client: {e}"))
}

/// Polls `GET path` on `addr` every 5 ms until it answers 200: when it did, and how
/// the attempts before failed (`Connection refused (os error 111) x3`).
async fn answering(
    addr: SocketAddr,
    path: &str,
    limit: Duration,
) -> Result<(Instant, String), String> {
    let deadline = Instant::now() + limit;
    let mut failures: Vec<(String, u32)> = Vec::new();
    loop {
        let err = match get_status(addr, path).await {
            Ok(200) => {
                let how = failures
                    .iter()
                    .map(|(e, n)| format!("{e} x{n}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Ok((Instant::now(), how));
            }
            Ok(s) => format!("status {s}"),
            Err(e) => e,
        };
        match failures.iter_mut().find(|(e, _)| *e == err) {
            Some((_, n)) => *n += 1,
            None => failures.push((err.clone(), 1)),
        }
        if Instant::now() > deadline {
            return Err(format!("GET http://{addr}{path}: {err} (for {limit:?})"));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn get_status(addr: SocketAddr, path: &str) -> Result<u16, String> {
    // A connection is made in well under a millisecond here: one that hangs (its SYN
    // lost) is given up soon for another. Once connected, the answer is waited for.
    let mut s = tokio::time::timeout(
        Duration::from_millis(100),
        tokio::net::TcpStream::connect(addr),
    )
    .await
    .map_err(|_| "connect timed out".to_string())?
    .map_err(|e| e.to_string())?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf))
        .await
        .map_err(|_| "read timed out".to_string())?
        .map_err(|e| e.to_string())?;
    let head = String::from_utf8_lossy(&buf[..buf.len().min(32)]).into_owned();
    head.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not HTTP: {head:?}"))
}

/// Patches the pod's status as a kubelet does when its container turns (not) ready:
/// the containers' `ready`, ContainersReady, and Ready unless readiness gates hold it.
pub(crate) async fn set_ready(
    client: &kube::Client,
    pod: &Pod,
    ready: bool,
) -> Result<Instant, String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Strategic(ready_patch(pod, ready)),
    )
    .await
    .map(|_| Instant::now())
    .map_err(|e| e.to_string())
}

/// The pod's container counted restarted once more and not ready, as the kubelet
/// writes it when a container exits and is started again (restartPolicy Always).
pub(crate) async fn count_restart(client: &kube::Client, pod: &Pod) -> Result<i32, String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let now = api.get_status(name).await.map_err(|e| e.to_string())?;
    let container = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .cloned()
        .unwrap_or_default();
    let count = now
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|cs| cs.first().map(|c| c.restart_count))
        .unwrap_or(0)
        + 1;
    let at = k8s_openapi::jiff::Timestamp::now().to_string();
    let patch = json!({"status": {"containerStatuses": [{
        "name": container.name,
        "image": container.image.unwrap_or_default(),
        "imageID": "",
        "ready": false,
        "started": true,
        "restartCount": count,
        "state": {"running": {"startedAt": at}},
        "lastState": {"terminated": {"exitCode": 137, "reason": "Error", "startedAt": at, "finishedAt": at}},
    }]}});
    // The pod as patched: a readiness patch sends its container statuses whole.
    let fresh = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| e.to_string())?;
    set_ready(client, &fresh, false).await?;
    Ok(count)
}

fn ready_patch(pod: &Pod, ready: bool) -> Value {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = if ready { "True" } else { "False" };
    let cond = |t: &str| {
        if ready {
            json!({"type": t, "status": status, "lastTransitionTime": now, "reason": null, "message": null})
        } else {
            json!({"type": t, "status": status, "lastTransitionTime": now,
                   "reason": "ContainersNotReady", "message": "the test harness's process exited"})
        }
    };
    let conditions_now = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    let gates_hold = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|gates| {
            gates.iter().any(|g| {
                !conditions_now.is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == g.condition_type && c.status == "True")
                })
            })
        });
    let mut conditions = vec![cond("ContainersReady")];
    if !ready || !gates_hold {
        conditions.push(cond("Ready"));
    }
    // containerStatuses is replaced whole by a patch: send every entry, as it is.
    let statuses = container_statuses(pod, |_, v| v["ready"] = json!(ready));
    json!({"status": {"conditions": conditions, "containerStatuses": statuses}})
}

/// Every container status of `pod` as JSON, each changed by `edit` (given the status
/// as the pod has it): a patch replaces `containerStatuses` whole.
fn container_statuses(pod: &Pod, mut edit: impl FnMut(&ContainerStatus, &mut Value)) -> Vec<Value> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            let mut v = serde_json::to_value(c).expect("container status as JSON");
            edit(c, &mut v);
            v
        })
        .collect()
}

/// The first container's first port (8080 if none), its readiness probe's port (a
/// number; else that first port) and HTTP path (`/healthz` if none).
fn port_and_probe(pod: &Pod) -> (u16, u16, String) {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let c = pod.spec.as_ref().and_then(|s| s.containers.first());
    let port = c
        .and_then(|c| c.ports.as_ref())
        .and_then(|p| p.first())
        .and_then(|p| u16::try_from(p.container_port).ok())
        .unwrap_or(8080);
    let get = c
        .and_then(|c| c.readiness_probe.as_ref())
        .and_then(|p| p.http_get.as_ref());
    let probe_port = match get.map(|h| &h.port) {
        Some(IntOrString::Int(n)) => u16::try_from(*n).unwrap_or(port),
        _ => port,
    };
    let path = get
        .and_then(|h| h.path.clone())
        .unwrap_or_else(|| "/healthz".into());
    (port, probe_port, path)
}

/// Whether the pod is a data plane pod Envoy Gateway made (its container `envoy`).
fn is_envoy_gateway_proxy(pod: &Pod) -> bool {
    let managed = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app.kubernetes.io/managed-by"))
        .is_some_and(|v| v == "envoy-gateway");
    let envoy = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .is_some_and(|c| c.name == "envoy");
    managed && envoy
}

/// Whether the pod runs our own program as its command (a generator Job's pod).
fn is_ours(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.command.as_ref())
        .and_then(|c| c.first())
        .is_some_and(|c| c == "ingressbench" || c.ends_with("/ingressbench"))
}

/// The first container's arguments (after `ingressbench`) and environment, as a
/// kubelet makes them: `env` values and `fieldRef`s resolved, `$(VAR)` expanded.
fn kubelet_command(pod: &Pod, ip: Ipv4Addr) -> (Vec<String>, Vec<(String, String)>) {
    let c = pod.spec.as_ref().and_then(|s| s.containers.first());
    let mut env: Vec<(String, String)> = vec![
        (
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ),
        (
            "HOSTNAME".into(),
            pod.metadata.name.clone().unwrap_or_default(),
        ),
    ];
    let field = |path: &str| -> Option<String> {
        let m = &pod.metadata;
        if let Some(key) = path
            .strip_prefix("metadata.annotations['")
            .and_then(|k| k.strip_suffix("']"))
        {
            return m.annotations.as_ref()?.get(key).cloned();
        }
        if let Some(key) = path
            .strip_prefix("metadata.labels['")
            .and_then(|k| k.strip_suffix("']"))
        {
            return m.labels.as_ref()?.get(key).cloned();
        }
        match path {
            "metadata.name" => m.name.clone(),
            "metadata.namespace" => m.namespace.clone(),
            "metadata.uid" => m.uid.clone(),
            "status.podIP" => Some(ip.to_string()),
            "spec.nodeName" => pod.spec.as_ref()?.node_name.clone(),
            _ => None,
        }
    };
    for e in c.and_then(|c| c.env.as_ref()).into_iter().flatten() {
        let value = match (&e.value, &e.value_from) {
            (Some(v), _) => Some(expand(v, &env)),
            // A label or annotation the pod lacks is an empty value, as a kubelet
            // gives it.
            (None, Some(from)) => from
                .field_ref
                .as_ref()
                .map(|f| field(&f.field_path).unwrap_or_default()),
            (None, None) => Some(String::new()),
        };
        if let Some(v) = value {
            env.push((e.name.clone(), v));
        }
    }
    let args = c
        .into_iter()
        .flat_map(|c| {
            let cmd = c.command.iter().flatten().skip(1);
            cmd.chain(c.args.iter().flatten())
        })
        .map(|a| expand(a, &env))
        .collect();
    (args, env)
}

/// A kubelet's `$(VAR)` expansion: a defined variable is replaced, `$$` is `$`, and
/// anything else stays as written.
fn expand(s: &str, env: &[(String, String)]) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some((name, tail)) = after
            .strip_prefix('(')
            .and_then(|a| a.split_once(')'))
            .filter(|(n, _)| !n.is_empty())
        {
            match env.iter().rev().find(|(k, _)| k == name) {
                Some((_, v)) => out.push_str(v),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = tail;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Reports a pod's process ended, as a kubelet does for a `restartPolicy: Never` pod:
/// phase Succeeded or Failed, its container terminated with the exit code, not Ready.
async fn set_finished(
    client: &kube::Client,
    pod: &Pod,
    status: ExitStatus,
) -> Result<&'static str, String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    let phase = if code == 0 { "Succeeded" } else { "Failed" };
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let cond = |t: &str| json!({"type": t, "status": "False", "lastTransitionTime": now, "reason": "PodCompleted", "message": null});
    let statuses = container_statuses(pod, |c, v| {
        let started = c
            .state
            .as_ref()
            .and_then(|s| s.running.as_ref())
            .and_then(|r| r.started_at.as_ref())
            .map_or_else(|| now.clone(), |t| t.0.to_string());
        v["ready"] = json!(false);
        v["started"] = json!(false);
        v["state"] = json!({"running": null, "terminated": {
            "exitCode": code,
            "reason": if code == 0 { "Completed" } else { "Error" },
            "startedAt": started,
            "finishedAt": now,
        }});
    });
    let patch = json!({"status": {
        "phase": phase,
        "conditions": [cond("ContainersReady"), cond("Ready")],
        "containerStatuses": statuses,
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map(|_| phase)
        .map_err(|e| e.to_string())
}

/// `ibpod-<8 hex digits>`, from the cluster's namespace and the pod's uid.
pub(crate) fn netns_name(cluster_ns: &str, uid: &str) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (cluster_ns, uid).hash(&mut h);
    format!("ibpod-{:08x}", h.finish() as u32)
}

fn sigterm(l: &mut Live) {
    if let Some(pid) = l
        .child
        .as_ref()
        .and_then(|c| rustix::process::Pid::from_raw(c.id() as i32))
    {
        // Not reaped yet (only this runner waits for it): the pid is still ours.
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    l.term_sent = true;
}

fn describe(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => s.to_string(),
    }
}

fn ip(args: &[&str], stdin: Option<&str>) -> Result<(), String> {
    let mut cmd = Command::new("ip");
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("ip: {e}"))?;
    if let Some(text) = stdin {
        let mut i = child.stdin.take().expect("piped");
        i.write_all(text.as_bytes())
            .map_err(|e| format!("ip: {e}"))?;
    }
    let out = child.wait_with_output().map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {} {}: {}",
            args.join(" "),
            stdin.map(|s| s.replace('\n', "; ")).unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The pod's namespace and its veth: see the module's documentation.
fn setup_network(
    cluster_ns: &str,
    netns: &str,
    host_if: &str,
    pod_ip: Ipv4Addr,
) -> Result<(), String> {
    let made = (|| {
        ip(&["netns", "add", netns], None)?;
        ip(
            &[
                "-n", cluster_ns, "link", "add", host_if, "type", "veth", "peer", "name", "eth0",
                "netns", netns,
            ],
            None,
        )?;
        ip(
            &["-n", netns, "-batch", "-"],
            Some(&format!(
                "link set lo up\n\
                 addr add {pod_ip}/32 dev eth0\n\
                 link set eth0 up\n\
                 route add {HOST_IP}/32 dev eth0 scope link src {pod_ip}\n\
                 route add {API_IP}/32 via {HOST_IP} dev eth0 src {pod_ip}\n\
                 route add {POD_CIDR} via {HOST_IP} dev eth0 src {pod_ip}\n"
            )),
        )?;
        ip(
            &["-n", cluster_ns, "-batch", "-"],
            Some(&format!(
                "addr add {HOST_IP}/32 dev {host_if}\n\
                 link set {host_if} up\n\
                 route add {pod_ip}/32 dev {host_if} src {HOST_IP}\n"
            )),
        )
    })();
    if made.is_err() {
        let _ = teardown_network(cluster_ns, netns, host_if);
    }
    made
}

/// Waits (up to 3 s) until each `(netns, device)` is operationally up: when they were.
fn wait_links_up(links: &[(String, String)]) -> Result<Instant, String> {
    let deadline = Instant::now() + Duration::from_secs(3);
    for (ns, dev) in links {
        loop {
            let out = Command::new("ip")
                .args(["-n", ns, "-o", "link", "show", "dev", dev])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("ip: {e}"))?;
            let text = String::from_utf8_lossy(&out.stdout);
            if text.contains(" state UP ") {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("{dev} in {ns} not up after 3 s: {}", text.trim()));
            }
            thread::sleep(Duration::from_millis(2));
        }
    }
    Ok(Instant::now())
}

/// Removes the veth (both ends, and the route through it) and the pod's namespace; a
/// part already gone is fine.
fn teardown_network(cluster_ns: &str, netns: &str, host_if: &str) -> Result<(), String> {
    if let Err(e) = ip(&["-n", cluster_ns, "link", "del", host_if], None) {
        let cluster_gone = !Path::new("/run/netns").join(cluster_ns).exists();
        if !e.contains("Cannot find device") && !e.contains("does not exist") && !cluster_gone {
            return Err(e);
        }
    }
    if Path::new("/run/netns").join(netns).exists() {
        ip(&["netns", "delete", netns], None)?;
    }
    Ok(())
}

fn write_pid_file(dir: &Path, netns: &str, pid: u32) {
    let _ = std::fs::write(dir.join(format!("{netns}.pid")), format!("{pid}\n"));
    // Field 22 of /proc/PID/stat, as up.sh records it (down.sh compares it).
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        if let Some(start) = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split(' ').nth(19))
        {
            let _ = std::fs::write(dir.join(format!("{netns}.start")), format!("{start}\n"));
        }
    }
}

fn remove_pid_file(dir: &Path, netns: &str) {
    let _ = std::fs::remove_file(dir.join(format!("{netns}.pid")));
    let _ = std::fs::remove_file(dir.join(format!("{netns}.start")));
}

/// Pod namespaces (`ibpod-*`) that exist on the machine now.
pub fn pod_netns_on_machine() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("ibpod-"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_pod_gets_a_kubelets_command_line() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "ib-generators-1-x", "namespace": "ns",
                "annotations": {"batch.kubernetes.io/job-completion-index": "1"}},
            "spec": {"containers": [{"name": "g", "image": "ingressbench",
                "command": ["ingressbench"],
                "args": ["load", "--part", "$(JOB_COMPLETION_INDEX)/2", "-H", "a: $$(X) $(NOPE)"],
                "env": [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef":
                    {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}]}]}
        }))
        .unwrap();
        assert!(is_ours(&pod));
        let (args, env) = kubelet_command(&pod, Ipv4Addr::new(198, 18, 64, 9));
        assert_eq!(args, ["load", "--part", "1/2", "-H", "a: $(X) $(NOPE)"]);
        assert!(env.contains(&("JOB_COMPLETION_INDEX".into(), "1".into())));
        assert!(env.contains(&("HOSTNAME".into(), "ib-generators-1-x".into())));
        assert_eq!(expand("$a$(", &env), "$a$(");
    }

    #[test]
    fn pod_namespace_and_veth_names_fit_the_kernel_limits() {
        let n = netns_name("ibk8s-abc123", "0b5c7a5e-1111-2222-3333-444455556666");
        assert!(n.starts_with("ibpod-") && n.len() == 14, "{n}");
        assert_ne!(
            n,
            netns_name("ibk8s-abc124", "0b5c7a5e-1111-2222-3333-444455556666")
        );
        // Interface names are at most 15 bytes.
        assert!(format!("ibh-{}", &n[6..]).len() <= 15);
    }
}
