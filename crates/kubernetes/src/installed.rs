//! Which controller a run measured, as the cluster says: the version of an installed
//! controller is read from its pods' images, and the implementation behind a Gateway
//! from its GatewayClass. A result without this cannot be compared with next month's
//! run after an upgrade.
//!
//! The lookups are best effort and say why they found nothing (no pod with the
//! profile's labels, or RBAC forbids listing pods cluster-wide): a run is never
//! refused for them.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};

/// The labels the usual installations (Helm charts and the projects' own manifests)
/// put on each profile's controller pods, tried in order, and a word its container's
/// image contains (to pick the controller among sidecars).
fn labels(profile: &str) -> (&'static [&'static str], &'static str) {
    match profile {
        "ingress-nginx" => (
            &["app.kubernetes.io/name=ingress-nginx,app.kubernetes.io/component=controller"],
            "controller",
        ),
        "nginx-ingress" => (&["app.kubernetes.io/name=nginx-ingress"], "nginx"),
        "haproxy-ingress" => (
            &[
                "app.kubernetes.io/name=kubernetes-ingress",
                "run=haproxy-ingress",
            ],
            "ingress",
        ),
        "traefik" | "traefik-nginx" => (&["app.kubernetes.io/name=traefik"], "traefik"),
        "contour" | "contour-ingress" => (
            &["app.kubernetes.io/name=contour", "app=contour"],
            "contour",
        ),
        "envoy-gateway" => (
            &[
                "app.kubernetes.io/name=gateway-helm",
                "control-plane=envoy-gateway",
            ],
            "gateway",
        ),
        "nginx-gateway-fabric" => (
            &[
                "app.kubernetes.io/name=nginx-gateway-fabric",
                "app.kubernetes.io/name=nginx-gateway",
            ],
            "nginx-gateway",
        ),
        "openshift-router" => (
            &["ingresscontroller.operator.openshift.io/deployment-ingresscontroller=default"],
            "router",
        ),
        _ => (&[], ""),
    }
}

/// The version an image reference carries: its tag (`v3.6.12` of
/// `docker.io/traefik:v3.6.12@sha256:...`), else its digest, else `latest` as the
/// runtime reads a reference without either.
pub fn image_version(image: &str) -> String {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    // A ':' after the last '/' is a tag; one before it is a registry's port.
    let last = name.rsplit('/').next().unwrap_or(name);
    match (last.split_once(':'), digest) {
        (Some((_, tag)), _) if !tag.is_empty() => tag.to_string(),
        (_, Some(d)) => d.to_string(),
        _ => "latest".to_string(),
    }
}

/// Picks the controller's container image among a pod's: the first whose image
/// contains `hint`, else the first.
pub fn pick_image<'a>(images: &[&'a str], hint: &str) -> Option<&'a str> {
    images
        .iter()
        .find(|i| !hint.is_empty() && i.contains(hint))
        .or_else(|| images.first())
        .copied()
}

/// What the cluster says of `profile`'s installation, as entries for the result's
/// `versions`: `profile-tested` (whether the profile ever ran against its real
/// controller in this project's tests), `<profile>` (the version and where it was
/// read, or why nothing was) and, for a Gateway, `gateway-controller` (its GatewayClass's controller name).
pub async fn describe(
    client: &kube::Client,
    profile: &str,
    gateway: Option<&(String, String)>,
) -> Vec<(String, String)> {
    let mut out = vec![(
        "profile-tested".to_string(),
        crate::controllers::tested(profile),
    )];
    let (selectors, hint) = labels(profile);
    if !selectors.is_empty() {
        out.push((
            profile.to_string(),
            controller_version(client, selectors, hint).await,
        ));
    }
    if let Some((ns, name)) = gateway {
        out.push((
            "gateway-controller".to_string(),
            gateway_controller(client, ns, name).await,
        ));
    }
    out
}

async fn controller_version(client: &kube::Client, selectors: &[&str], hint: &str) -> String {
    let pods: Api<Pod> = Api::all(client.clone());
    for sel in selectors {
        let list = match pods.list(&ListParams::default().labels(sel)).await {
            Ok(l) => l,
            Err(kube::Error::Api(s)) if s.code == 403 => {
                return "unknown: listing pods cluster-wide is forbidden (see deploy/rbac.yaml)"
                    .to_string()
            }
            Err(e) => return format!("unknown: {}", results::Causes(&e)),
        };
        let Some(pod) = list.items.first() else {
            continue;
        };
        let images: Vec<&str> = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .filter_map(|c| c.image.as_deref())
            .collect();
        let Some(image) = pick_image(&images, hint) else {
            continue;
        };
        return format!(
            "{} (image {image}, pod {}/{}{})",
            image_version(image),
            pod.metadata.namespace.as_deref().unwrap_or("?"),
            pod.metadata.name.as_deref().unwrap_or("?"),
            if list.items.len() > 1 {
                format!(", 1 of {} pods", list.items.len())
            } else {
                String::new()
            }
        );
    }
    format!(
        "unknown: no pod in the cluster is labelled {}",
        selectors.join(" or ")
    )
}

async fn gateway_controller(client: &kube::Client, ns: &str, name: &str) -> String {
    let res = |kind: &str| {
        ApiResource::from_gvk(&GroupVersionKind::gvk(
            "gateway.networking.k8s.io",
            "v1",
            kind,
        ))
    };
    let gw = match Api::<DynamicObject>::namespaced_with(client.clone(), ns, &res("Gateway"))
        .get(name)
        .await
    {
        Ok(g) => g,
        Err(e) => return format!("unknown: Gateway {ns}/{name}: {}", results::Causes(&e)),
    };
    let Some(class) = gw.data["spec"]["gatewayClassName"].as_str() else {
        return format!("unknown: Gateway {ns}/{name} names no class");
    };
    match Api::<DynamicObject>::all_with(client.clone(), &res("GatewayClass"))
        .get(class)
        .await
    {
        Ok(c) => format!(
            "{} (GatewayClass {class})",
            c.data["spec"]["controllerName"].as_str().unwrap_or("?")
        ),
        Err(e) => format!("unknown: GatewayClass {class}: {}", results::Causes(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_tag_else_the_digest() {
        assert_eq!(image_version("docker.io/traefik:v3.6.12"), "v3.6.12");
        assert_eq!(
            image_version("registry.k8s.io/ingress-nginx/controller:v1.12.1@sha256:abc"),
            "v1.12.1"
        );
        assert_eq!(
            image_version("localhost:5000/contour@sha256:abc"),
            "sha256:abc"
        );
        assert_eq!(image_version("localhost:5000/contour"), "latest");
        assert_eq!(image_version("nginx"), "latest");
    }

    #[test]
    fn the_controller_container_is_picked_by_its_image() {
        let imgs = [
            "docker.io/envoyproxy/envoy:v1.40.0",
            "ghcr.io/projectcontour/contour:v1.33.8",
        ];
        assert_eq!(pick_image(&imgs, "contour"), Some(imgs[1]));
        assert_eq!(pick_image(&imgs, "nothing"), Some(imgs[0]));
        assert_eq!(pick_image(&[], "contour"), None);
    }

    #[test]
    fn every_installed_controller_profile_has_labels_to_look_for() {
        for c in crate::controllers::CONTROLLERS {
            let (sel, _) = labels(c.name);
            // gateway-api stands for any implementation: its GatewayClass names it.
            assert_eq!(sel.is_empty(), c.name == "gateway-api", "{}", c.name);
        }
    }
}
