//! A pod's filesystem, as a kubelet and a container runtime lay it out: each
//! `secret` and `configMap` volume its first container mounts written into a folder
//! of the pod's (keys as files, or the `items` it names), an `emptyDir` as an empty
//! one, and the container's command run through `scripts/k8s-testenv/pod-root.sh`,
//! which mounts them at their paths in a root of the pod's own, with the cluster's
//! DNS in `/etc/resolv.conf` ([`super::k8s_dns`]). So two pods of one Deployment
//! (a rolling restart) never share `/certs`, and nothing appears on the machine at
//! those paths.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct PodRoot {
    dir: PathBuf,
    binds: Vec<(PathBuf, String)>,
}

/// `kubectl get KIND NAME -n NS -o json`, through the cluster's wrapper.
fn get(kubectl: &Path, kind: &str, name: &str, ns: &str) -> Result<Value, String> {
    let out = Command::new(kubectl)
        .args(["get", kind, name, "-n", ns, "-o", "json"])
        .output()
        .map_err(|e| format!("{}: {e}", kubectl.display()))?;
    if !out.status.success() {
        return Err(format!(
            "kubectl get {kind} {name} -n {ns}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// Writes `data` (key to bytes) as files into `dir`, only the `items` named if any.
fn write_keys(dir: &Path, data: Vec<(String, Vec<u8>)>, items: &Value) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let wanted: Vec<(String, String)> = items
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| {
                    Some((
                        i["key"].as_str()?.to_string(),
                        i["path"].as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    for (key, bytes) in data {
        let path = if wanted.is_empty() {
            Some(key.clone())
        } else {
            wanted
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, p)| p.clone())
        };
        if let Some(p) = path {
            std::fs::write(dir.join(p), bytes).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

impl PodRoot {
    /// Lays out `pod`'s volumes under `dir` (created; removed by the caller when the
    /// pod goes).
    pub fn make(dir: &Path, pod: &Pod, kubectl: &Path) -> Result<PodRoot, String> {
        use base64::Engine;
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let spec = pod.spec.as_ref().ok_or("no pod spec")?;
        let c = spec.containers.first().ok_or("no container")?;
        std::fs::create_dir_all(dir.join("root")).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("resolv.conf"), super::k8s_dns::RESOLV_CONF)
            .map_err(|e| e.to_string())?;
        let mut binds = Vec::new();
        for m in c.volume_mounts.iter().flatten() {
            let v = spec
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == m.name)
                .ok_or_else(|| format!("volume {} is not in the pod", m.name))?;
            let vdir = dir.join(format!("vol-{}", v.name));
            if let Some(sv) = &v.secret {
                let name = sv.secret_name.clone().unwrap_or_default();
                let o = get(kubectl, "secret", &name, &ns)?;
                let data = o["data"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, b64)| {
                        let bytes = base64::engine::general_purpose::STANDARD
                            .decode(b64.as_str().unwrap_or_default())
                            .unwrap_or_default();
                        (k.clone(), bytes)
                    })
                    .collect();
                write_keys(&vdir, data, &serde_json::to_value(&sv.items).unwrap())?;
            } else if let Some(cv) = &v.config_map {
                let o = get(kubectl, "configmap", &cv.name, &ns)?;
                let data = o["data"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, t)| {
                        (
                            k.clone(),
                            t.as_str().unwrap_or_default().as_bytes().to_vec(),
                        )
                    })
                    .collect();
                write_keys(&vdir, data, &serde_json::to_value(&cv.items).unwrap())?;
            } else if v.empty_dir.is_some() {
                std::fs::create_dir_all(&vdir).map_err(|e| e.to_string())?;
            } else {
                return Err(format!(
                    "volume {}: only secret, configMap and emptyDir volumes are laid out",
                    v.name
                ));
            }
            binds.push((vdir, m.mount_path.clone()));
        }
        Ok(PodRoot {
            dir: dir.to_path_buf(),
            binds,
        })
    }

    /// The command line that runs `bin` (its arguments follow) in the pod's root.
    pub fn command(&self, bin: &Path) -> Vec<OsString> {
        let script = super::k8s::script("pod-root.sh");
        let mut v: Vec<OsString> = vec![script.into(), self.dir.join("root").into()];
        for (src, dst) in &self.binds {
            v.push("--bind".into());
            v.push(format!("{}:{dst}", src.display()).into());
        }
        v.push("--file".into());
        v.push(
            format!(
                "{}:/etc/resolv.conf",
                self.dir.join("resolv.conf").display()
            )
            .into(),
        );
        v.push("--".into());
        v.push(bin.into());
        v
    }
}
