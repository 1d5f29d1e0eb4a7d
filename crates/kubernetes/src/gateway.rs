//! A Gateway the run owns: created in the run's namespace for a named GatewayClass,
//! with an HTTP listener and, when the load is TLS, an HTTPS one terminating with the
//! run's own certificate; its routes attach to it; the run loads the address the
//! implementation gives it, and deletes it at the end. For implementations that
//! provision a data plane per Gateway (Envoy Gateway), every run gets one of its own,
//! as each of their users does.
//!
//! The HTTPS listener comes second: the certificate has to name the address, which
//! is known only once the Gateway is Programmed, as a load balancer's is in a cloud.

use crate::error::ClusterError;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::api::{Patch, PatchParams};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The name of the Gateway a run creates in its namespace.
pub const NAME: &str = "ib-gateway";
/// Its listeners' names.
pub const HTTP_LISTENER: &str = "http";
pub const HTTPS_LISTENER: &str = "https";

/// How long the Gateway (and then its HTTPS listener) may take to be Programmed,
/// unless `kubernetes.gateway_timeout` says.
pub const PROGRAMMED_WAIT: Duration = Duration::from_secs(90);

/// `kubernetes.gateway_class` and `gateway_ports`, resolved for one system.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnGateway {
    pub class: String,
    pub http_port: u16,
    pub https_port: u16,
    /// How long it may take to be Programmed.
    pub timeout: Duration,
}

fn api(client: &kube::Client, kind: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "gateway.networking.k8s.io",
        "v1",
        kind,
    ));
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// The Gateway's manifest: the HTTP listener, and the HTTPS one when `tls_secret`
/// names the Secret it terminates with. Routes from the run's namespace only.
pub fn manifest(run: &str, own: &OwnGateway, tls_secret: Option<&str>) -> Value {
    let mut listeners = vec![json!({
        "name": HTTP_LISTENER, "protocol": "HTTP", "port": own.http_port,
        "allowedRoutes": {"namespaces": {"from": "Same"}},
    })];
    if let Some(secret) = tls_secret {
        listeners.push(json!({
            "name": HTTPS_LISTENER, "protocol": "HTTPS", "port": own.https_port,
            "tls": {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": secret}]},
            "allowedRoutes": {"namespaces": {"from": "Same"}},
        }));
    }
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {
            "name": NAME,
            "labels": {crate::MANAGED_BY.0: crate::MANAGED_BY.1, crate::RUN_LABEL: run},
        },
        "spec": {"gatewayClassName": own.class, "listeners": listeners},
    })
}

/// A condition of `conditions` by type, as `Status (Reason: message)`.
fn condition(conditions: &Value, kind: &str) -> Option<(bool, String)> {
    let c = conditions.as_array()?.iter().find(|c| c["type"] == kind)?;
    let status = c["status"].as_str().unwrap_or("Unknown");
    let text = format!(
        "{kind}={status} ({}: {})",
        c["reason"].as_str().unwrap_or("no reason"),
        c["message"].as_str().unwrap_or("").trim()
    );
    Some((status == "True", text))
}

/// What the Gateway's status says of `listener`: Programmed, or why not (its first
/// condition that is not True), or `None` while the implementation has not said.
fn listener_state(gw: &Value, listener: &str) -> Option<Result<(), String>> {
    let l = gw["status"]["listeners"]
        .as_array()?
        .iter()
        .find(|l| l["name"] == listener)?;
    let conds = &l["conditions"];
    for kind in ["Accepted", "ResolvedRefs", "Programmed"] {
        if let Some((false, text)) = condition(conds, kind) {
            return Some(Err(text));
        }
    }
    condition(conds, "Programmed").map(|_| Ok(()))
}

/// The listener of the Gateway's spec on `port` and what its status says of it
/// (as [`listener_state`]); `None` when no listener has that port (the URL may be a
/// load balancer's port in front of another).
fn listener_on_port(gw: &Value, port: u16) -> Option<(String, Option<Result<(), String>>)> {
    let name = gw["spec"]["listeners"]
        .as_array()?
        .iter()
        .find(|l| l["port"].as_u64() == Some(u64::from(port)))?["name"]
        .as_str()?
        .to_string();
    let state = listener_state(gw, &name);
    Some((name, state))
}

/// The first address in the Gateway's status.
fn address(gw: &Value) -> Option<String> {
    gw["status"]["addresses"]
        .as_array()?
        .iter()
        .find_map(|a| a["value"].as_str())
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// Checks that the GatewayClass exists and was accepted by its controller.
///
/// # Errors
/// [`ClusterError::Condition`] naming the class and what is wrong with it.
pub async fn check_class(client: &kube::Client, class: &str) -> Result<(), ClusterError> {
    let object = format!("GatewayClass {class}");
    let gc = match api(client, "GatewayClass", None).get(class).await {
        // Rules that cannot read GatewayClasses (cluster-scoped): the Gateway's
        // wait says what is wrong.
        Err(kube::Error::Api(s)) if s.code == 403 => return Ok(()),
        Err(e) if crate::error::gone(&e) => {
            return Err(ClusterError::Condition {
                object,
                condition: "does not exist (kubectl get gatewayclass lists those installed; \
                            set kubernetes.gateway_class to one of them)"
                    .into(),
            })
        }
        r => r.map_err(ClusterError::api(format!("get {object}")))?,
    };
    let gc = serde_json::to_value(gc).unwrap_or_default();
    // Refused by its controller; `Unknown` (the API server's "Waiting for
    // controller") is left to the Gateway's wait, which says more.
    let refused = gc["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Accepted" && c["status"] == "False");
    match condition(&gc["status"]["conditions"], "Accepted") {
        Some((false, text)) if refused => Err(ClusterError::Condition {
            object,
            condition: format!("not accepted by its controller: {text}"),
        }),
        _ => Ok(()),
    }
}

/// Checks a Gateway installed beforehand (`kubernetes.gateway`) before the run
/// attaches its routes: that it exists, and that the listener on the URL's `port`
/// is not refused by its implementation (a certificate it cannot read, a port or
/// protocol it does not take), which no route's status says and traffic shows only
/// as failed handshakes. A listener not yet reported, or none on that port, is
/// left to the wait for the route to serve.
///
/// # Errors
/// [`ClusterError::Condition`] naming the Gateway, its listener and the condition.
pub async fn check_named(
    client: &kube::Client,
    ns: &str,
    name: &str,
    port: u16,
) -> Result<(), ClusterError> {
    let object = format!("Gateway {ns}/{name}");
    let gw = match api(client, "Gateway", Some(ns)).get(name).await {
        // Rules that cannot read Gateways: the route's wait says what is wrong.
        Err(kube::Error::Api(s)) if s.code == 403 => return Ok(()),
        Err(e) if crate::error::gone(&e) => {
            return Err(ClusterError::Condition {
                object,
                condition: format!(
                    "does not exist (kubectl get gateways -n {ns} lists those there; \
                     set kubernetes.gateway to one of them as namespace/name)"
                ),
            })
        }
        r => r.map_err(ClusterError::api(format!("get {object}")))?,
    };
    let gw = serde_json::to_value(gw).unwrap_or_default();
    match listener_on_port(&gw, port) {
        Some((listener, Some(Err(why)))) => Err(ClusterError::Condition {
            object: format!("{object} listener {listener} (port {port})"),
            condition: format!(
                "refused by its implementation: {why}; the run's URL is on that port \
                 (kubectl describe gateway -n {ns} {name} says more)"
            ),
        }),
        _ => Ok(()),
    }
}

/// Creates (or replaces the spec of) the run's Gateway.
///
/// # Errors
/// [`ClusterError::Api`] when the API server refuses it.
pub async fn apply(
    client: &kube::Client,
    ns: &str,
    run: &str,
    own: &OwnGateway,
    tls_secret: Option<&str>,
) -> Result<(), ClusterError> {
    let m = manifest(run, own, tls_secret);
    let obj: DynamicObject =
        serde_json::from_value(m.clone()).map_err(|e| ClusterError::Condition {
            object: format!("Gateway {ns}/{NAME}"),
            condition: format!("cannot be written: {e}"),
        })?;
    let gws = api(client, "Gateway", Some(ns));
    match gws.create(&PostParams::default(), &obj).await {
        Err(kube::Error::Api(s)) if s.code == 409 => {
            gws.patch(
                NAME,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": m["spec"]})),
            )
            .await
            .map_err(ClusterError::api(format!("update Gateway {ns}/{NAME}")))?;
        }
        r => {
            r.map_err(ClusterError::api(format!("create Gateway {ns}/{NAME}")))?;
        }
    }
    Ok(())
}

/// Waits until the Gateway is Programmed with an address and each of `listeners`
/// is Programmed; returns the address.
///
/// # Errors
/// [`ClusterError::Condition`] with the Gateway's (or the listener's) condition that
/// held it back, once a listener is refused or after [`PROGRAMMED_WAIT`].
pub async fn wait_programmed(
    client: &kube::Client,
    ns: &str,
    listeners: &[&str],
    limit: Duration,
) -> Result<String, ClusterError> {
    let object = format!("Gateway {ns}/{NAME}");
    let gws = api(client, "Gateway", Some(ns));
    let t = Instant::now();
    let mut last = "no status yet (is the GatewayClass's controller running?)".to_string();
    loop {
        let gw = gws
            .get(NAME)
            .await
            .map_err(ClusterError::api(format!("get {object}")))?;
        let gw = serde_json::to_value(gw).unwrap_or_default();
        let generation = gw["metadata"]["generation"].as_i64();
        let conds = &gw["status"]["conditions"];
        let observed = conds.as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "Programmed" && c["observedGeneration"].as_i64() == generation
            })
        });
        let programmed = condition(conds, "Programmed");
        if let Some((_, text)) = &programmed {
            last = text.clone();
        }
        if observed {
            let mut pending = false;
            for l in listeners {
                match listener_state(&gw, l) {
                    Some(Err(why))
                        if t.elapsed() > Duration::from_secs(5) || why.contains("ResolvedRefs") =>
                    {
                        return Err(ClusterError::Condition {
                            object: format!("{object} listener {l}"),
                            condition: format!("refused: {why}"),
                        });
                    }
                    Some(Ok(())) => {}
                    _ => pending = true,
                }
            }
            if let (Some((true, _)), Some(addr), false) = (&programmed, address(&gw), pending) {
                return Ok(addr);
            }
            if matches!(programmed, Some((true, _))) && address(&gw).is_none() {
                last = "Programmed=True but no address in its status yet".into();
            }
        }
        if t.elapsed() > limit {
            return Err(ClusterError::Condition {
                object,
                condition: format!(
                    "not Programmed after {:.0?}: {last} (kubernetes.gateway_timeout waits longer)",
                    limit
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deletes the run's Gateway; one already gone is no failure.
///
/// # Errors
/// [`ClusterError::Api`] when the API server refuses.
pub async fn delete(client: &kube::Client, ns: &str) -> Result<(), kube::Error> {
    match api(client, "Gateway", Some(ns))
        .delete(NAME, &DeleteParams::default())
        .await
    {
        Err(e) if !crate::error::gone(&e) => Err(e),
        _ => Ok(()),
    }
}

/// Deletes the Gateways labelled `lp` in `ns` (a run's, in a namespace it was
/// given); none, or no Gateway API in the cluster, is no failure.
///
/// # Errors
/// The API server's refusal.
pub async fn delete_labelled(
    client: &kube::Client,
    ns: &str,
    lp: &kube::api::ListParams,
) -> Result<(), kube::Error> {
    match api(client, "Gateway", Some(ns))
        .delete_collection(&DeleteParams::default(), lp)
        .await
    {
        Err(e) if !crate::error::gone(&e) => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own() -> OwnGateway {
        OwnGateway {
            class: "eg".into(),
            http_port: 8080,
            https_port: 8443,
            timeout: PROGRAMMED_WAIT,
        }
    }

    #[test]
    fn the_https_listener_is_there_only_with_a_secret() {
        let m = manifest("r1", &own(), None);
        assert_eq!(m["spec"]["listeners"].as_array().unwrap().len(), 1);
        assert_eq!(m["spec"]["gatewayClassName"], "eg");
        assert_eq!(m["metadata"]["labels"][crate::RUN_LABEL], "r1");
        let m = manifest("r1", &own(), Some("ib-tls"));
        let l = &m["spec"]["listeners"][1];
        assert_eq!(l["port"], 8443);
        assert_eq!(l["tls"]["certificateRefs"][0]["name"], "ib-tls");
        assert_eq!(l["protocol"], "HTTPS");
    }

    #[test]
    fn a_refused_listener_says_which_condition() {
        let gw = json!({"status": {"listeners": [{"name": "https", "conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted"},
            {"type": "ResolvedRefs", "status": "False", "reason": "InvalidCertificateRef",
             "message": "Secret ns/ib-tls does not exist."},
        ]}]}});
        let e = listener_state(&gw, "https").unwrap().unwrap_err();
        assert!(
            e.starts_with("ResolvedRefs=False (InvalidCertificateRef: Secret"),
            "{e}"
        );
        assert!(listener_state(&gw, "http").is_none());
        let ok = json!({"status": {"listeners": [{"name": "http", "conditions": [
            {"type": "Programmed", "status": "True"}]}], "addresses": [{"value": "198.18.64.3"}]}});
        assert_eq!(listener_state(&ok, "http"), Some(Ok(())));
        // A Gateway installed beforehand: its listener found by the URL's port.
        let team = json!({"spec": {"listeners": [
            {"name": "web", "port": 80}, {"name": "https", "port": 443}]},
            "status": gw["status"].clone()});
        let (name, state) = listener_on_port(&team, 443).unwrap();
        assert_eq!(name, "https");
        assert!(state
            .unwrap()
            .unwrap_err()
            .contains("InvalidCertificateRef"));
        assert_eq!(listener_on_port(&team, 80), Some(("web".into(), None)));
        assert_eq!(listener_on_port(&team, 8443), None);
        assert_eq!(address(&ok).as_deref(), Some("198.18.64.3"));
    }
}
