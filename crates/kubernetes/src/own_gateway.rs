//! The run's own Gateway (`kubernetes.gateway_class`): made, waited for until it
//! serves (its TLS Secret, from the run's certificate, once it has an address), and
//! removed with the data plane an implementation made for it.

use crate::{controllers, gateway, objects, ClusterError, Kubernetes, TLS_SECRET};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams, PostParams};
use std::time::{Duration, Instant};
use sut::driver::SutError;

/// How long a run waits at most, at its end, for an implementation to remove the
/// data plane it made for the run's own Gateway (no longer than its
/// `gateway_timeout`).
pub(crate) const DATA_PLANE_GONE_WAIT: Duration = Duration::from_secs(30);

/// What a run's own Gateway serves: the URL to load, the CA to trust, and the
/// certificate and key files it terminates TLS with (for a TLS load).
pub(crate) type OwnGatewayServes = (
    String,
    Option<std::path::PathBuf>,
    Option<(std::path::PathBuf, std::path::PathBuf)>,
);

impl Kubernetes {
    /// Creates the run's own Gateway and waits until it serves: first its HTTP
    /// listener, whose address the implementation gives; then, for a TLS load, a
    /// certificate from the run's CA naming that address (and `kubernetes.host`),
    /// its Secret, and the HTTPS listener. Returns the URL to load and the CA to
    /// trust.
    pub(crate) fn own_gateway(
        &mut self,
        system: &str,
        own: &gateway::OwnGateway,
        ns: &str,
        key: sut::KeyType,
        tls: bool,
        work: &tempfile::TempDir,
    ) -> Result<OwnGatewayServes, SutError> {
        let client = self.client()?;
        let run = self.spec.run.clone();
        self.rt
            .block_on(gateway::check_class(&client, &own.class))?;
        self.rt
            .block_on(gateway::apply(&client, ns, &run, own, None))?;
        self.own_gateway_in = Some((ns.to_string(), system.to_string()));
        let addr = self.rt.block_on(gateway::wait_programmed(
            &client,
            ns,
            &[gateway::HTTP_LISTENER],
            own.timeout,
        ))?;
        let host = if addr.contains(':') {
            format!("[{addr}]")
        } else {
            addr.clone()
        };
        if !tls {
            return Ok((
                format!("http://{host}:{}/", own.http_port),
                self.spec.cacert.clone(),
                None,
            ));
        }
        let mut names = vec![addr.clone()];
        names.extend(self.spec.host.clone());
        let (cert, pkey) = sut::certs::generate_for(work.path(), key, &names)?;
        self.put_tls_secret(&cert, &pkey)?;
        self.tls = Some((key, 1));
        self.rt
            .block_on(gateway::apply(&client, ns, &run, own, Some(TLS_SECRET)))?;
        self.rt.block_on(gateway::wait_programmed(
            &client,
            ns,
            &[gateway::HTTP_LISTENER, gateway::HTTPS_LISTENER],
            own.timeout,
        ))?;
        Ok((
            format!("https://{host}:{}/", own.https_port),
            Some(sut::certs::trust(work.path())),
            Some((cert, pkey)),
        ))
    }

    /// Creates the run's TLS Secret from PEM files.
    pub(crate) fn put_tls_secret(
        &mut self,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<(), SutError> {
        self.put_secret(TLS_SECRET, cert, key)
    }

    /// Creates the TLS Secret `name` of `cert` and `key` in the run's namespace.
    pub(crate) fn put_secret(
        &mut self,
        name: &str,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<(), SutError> {
        let client = self.client()?;
        let ns = self.namespace_name();
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(SutError::io(format!("reading {}", p.display())))
        };
        let secret = objects::tls_secret(&self.spec.run, name, &read(cert)?, &read(key)?);
        let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client, &ns);
        self.rt
            .block_on(api.create(&PostParams::default(), &secret))
            .map_err(ClusterError::api(format!(
                "create Secret {name} in namespace {ns}"
            )))?;
        Ok(())
    }

    /// Deletes the run's own Gateway.
    pub(crate) fn delete_gateway(&mut self, ns: &str) -> Result<(), ClusterError> {
        let client = self.client()?;
        let (run, owned) = (self.spec.run.clone(), self.created_namespace);
        self.rt.block_on(gateway::delete(&client, ns)).map_err(|e| {
            ClusterError::left_in(format!("Gateway {}", gateway::NAME), ns, &run, owned, e)
        })
    }

    /// For an implementation that makes a data plane per Gateway (its profile's
    /// `deployment?SELECTOR`): waits until it has removed the one it made for the
    /// run's Gateway in `ns`, which a run leaves behind otherwise.
    ///
    /// # Errors
    /// [`ClusterError::Condition`] naming what stays and how to remove it.
    pub(crate) fn wait_data_plane_gone(
        &mut self,
        ns: &str,
        system: &str,
        limit: Duration,
    ) -> Result<(), ClusterError> {
        let install = self
            .spec
            .installs
            .iter()
            .find(|(s, _)| s == system)
            .map(|(_, i)| i.clone())
            .or_else(|| {
                controllers::controller(system)
                    .and_then(|c| c.install.as_ref())
                    .map(controllers::Install::owned)
            });
        let Some(install) = install else {
            return Ok(());
        };
        let Some(sel) = install
            .data_plane
            .as_deref()
            .and_then(|w| w.strip_prefix("deployment?"))
        else {
            return Ok(());
        };
        let sel = sel
            .replace("{gateway_namespace}", ns)
            .replace("{gateway_name}", gateway::NAME);
        let client = self.client()?;
        let api: Api<Deployment> = Api::namespaced(client, &install.namespace);
        let lp = ListParams::default().labels(&sel);
        let t = Instant::now();
        loop {
            let listed = match self.rt.block_on(api.list(&lp)) {
                // Rules that cannot see the controller's namespace: nothing to say.
                Err(kube::Error::Api(s)) if s.code == 403 => return Ok(()),
                r => r,
            };
            let left: Vec<String> = listed
                .map_err(ClusterError::api(format!(
                    "list deployments {sel} in namespace {}",
                    install.namespace
                )))?
                .items
                .into_iter()
                .filter_map(|d| d.metadata.name)
                .collect();
            if left.is_empty() {
                return Ok(());
            }
            if t.elapsed() > limit {
                return Err(ClusterError::Condition {
                    object: format!("Deployment {} in namespace {}", left.join(", "), install.namespace),
                    condition: format!(
                        "{system}'s controller made it for the run's Gateway and has not removed it {} s after the Gateway was deleted (is the controller running?); remove it with kubectl delete deployments,services,configmaps,serviceaccounts -n {} -l {sel}",
                        limit.as_secs(),
                        install.namespace
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
