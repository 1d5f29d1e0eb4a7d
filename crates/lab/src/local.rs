//! The `local` platform: backends are `ingressbench backend` processes on this
//! machine, the proxy listens on loopback, and the TLS material is made per system in
//! a scratch folder that goes when the system is torn down.

use crate::backends::{Pool, StopMode};
use crate::certs;
use crate::driver::{DriverContext, Endpoint, LabError};
use crate::platform::{Platform, PlatformEvent, SiteSpec, Target};
use crate::ports;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Processes on this machine, started and stopped like pods of a Deployment.
pub struct LocalProcesses {
    exe: PathBuf,
    /// Scratch space of the current system (pid files, sockets, certificates).
    work: Option<tempfile::TempDir>,
    pool: Option<Pool>,
    target: Option<Target>,
}

/// Where everything listens: loopback only, so a mistake never leaves the machine.
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

impl LocalProcesses {
    /// A platform whose backends run `exe backend ...` (the built-in backend).
    pub fn new(exe: &Path) -> Self {
        LocalProcesses {
            exe: exe.to_path_buf(),
            work: None,
            pool: None,
            target: None,
        }
    }
}

impl Platform for LocalProcesses {
    fn name(&self) -> &'static str {
        "local"
    }

    fn prepare(&mut self, spec: &SiteSpec) -> Result<DriverContext, LabError> {
        self.teardown();
        std::fs::create_dir_all(&spec.out_dir)
            .map_err(LabError::io(format!("create {}", spec.out_dir.display())))?;
        let work = tempfile::Builder::new()
            .prefix("ingressbench-run-")
            .tempdir()
            .map_err(LabError::io("create a temp folder"))?;
        let (cert, key) = certs::generate(work.path(), spec.tls.key)?;
        let p = ports::free_ports(2).map_err(LabError::io("choose free ports"))?;
        let ctx = DriverContext {
            work_dir: work.path().to_path_buf(),
            out_dir: spec.out_dir.clone(),
            cert: cert.clone(),
            key,
            https_port: p[0],
            http_port: p[1],
            upstream_keepalive: 100,
            upstream_keepalive_requests: 100_000_000,
            worker_connections: 10_000,
        };
        let (scheme, port) = if spec.tls.enabled {
            ("https", ctx.https_port)
        } else {
            ("http", ctx.http_port)
        };
        self.target = Some(Target {
            url: format!("{scheme}://{LOOPBACK}:{port}/"),
            cacert: spec.tls.enabled.then_some(cert),
            reachable: vec![LOOPBACK],
        });
        let mut pool = Pool::new(&self.exe, spec.backends.clone(), work.path(), &spec.out_dir);
        self.work = Some(work);
        for _ in 0..spec.replicas {
            pool.start_one()?;
        }
        self.pool = Some(pool);
        Ok(ctx)
    }

    fn target(&self) -> Target {
        self.target.clone().unwrap_or(Target {
            url: String::new(),
            cacert: None,
            reachable: Vec::new(),
        })
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        self.pool.as_ref().map(Pool::endpoints).unwrap_or_default()
    }

    fn replicas(&self) -> u32 {
        self.pool.as_ref().map_or(0, |p| p.len() as u32)
    }

    fn scale(&mut self, to: u32, stop: StopMode, on: &mut dyn FnMut(PlatformEvent)) {
        let Some(pool) = self.pool.as_mut() else {
            return;
        };
        let have = pool.len() as u32;
        if to > have {
            for _ in have..to {
                let t = Instant::now();
                match pool.start_one() {
                    Ok(endpoint) => on(PlatformEvent::Ready {
                        endpoint,
                        took: t.elapsed(),
                    }),
                    Err(e) => on(PlatformEvent::Failed {
                        detail: format!("start backend: {e}"),
                    }),
                }
            }
        } else {
            // As in Kubernetes, the pod is told to stop and leaves the endpoint set at
            // the same moment; the proxy learns of it when it learns of it.
            for _ in to..have {
                let Some(victim) = pool.victim() else {
                    break;
                };
                pool.stop(&victim.id, stop);
                on(PlatformEvent::Stopping {
                    id: victim.id,
                    mode: stop,
                });
            }
        }
    }

    fn tick(&mut self) {
        if let Some(p) = self.pool.as_mut() {
            p.reap();
        }
    }

    fn teardown(&mut self) {
        if let Some(mut p) = self.pool.take() {
            p.stop_all();
        }
        self.target = None;
        self.work = None;
    }
}

impl Drop for LocalProcesses {
    fn drop(&mut self) {
        self.teardown();
    }
}
