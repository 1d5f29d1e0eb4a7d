//! The corpus for Gateway API implementations: the bundled HTTPRoute translation
//! (`deploy/migration/gateway-api.yaml`, the form a user reads and copies), rendered
//! with the run's values, and the behaviours it has no route for, each with why.

use super::{Behaviour, CORPUS_LABEL};
use crate::controllers::Place;
use crate::manifests;
use serde_json::Value;

/// The translation, as the repository holds it.
pub const YAML: &str = include_str!("../../../../deploy/migration/gateway-api.yaml");

/// The behaviours the standard channel of Gateway API v1.4 cannot say, and why
/// (ingress2gateway 1.1 drops or refuses the same annotations).
pub const NOT_EXPRESSIBLE: &[(&str, &str)] = &[
    (
        "permanent-redirect-code",
        "a redirect's statusCode is 301 or 302 in the standard channel (the API server refuses 308)",
    ),
    (
        "cors",
        "HTTPRoute's CORS filter is in the experimental channel only (v1.4)",
    ),
    ("proxy-body-size", "no body limit in HTTPRoute"),
    (
        "proxy-next-upstream-503",
        "retries (GEP-1731) are in the experimental channel only",
    ),
    (
        "canary-by-cookie",
        "no cookie match in HTTPRoute (ingress2gateway refuses canary-by-cookie)",
    ),
    (
        "affinity-cookie",
        "session persistence (GEP-1619) is in the experimental channel only",
    ),
    (
        "upstream-hash-by",
        "no hashing policy in HTTPRoute (ingress2gateway does not parse upstream-hash-by)",
    ),
    (
        "allow-list-allows",
        "no source-address rule in HTTPRoute (an implementation's policy)",
    ),
    (
        "allow-list-refuses",
        "no source-address rule in HTTPRoute (an implementation's policy)",
    ),
    (
        "deny-list-refuses",
        "no source-address rule in HTTPRoute (an implementation's policy)",
    ),
    (
        "limit-rps",
        "no rate limit in HTTPRoute (ingress2gateway does not parse limit-rps)",
    ),
    (
        "custom-http-errors",
        "no error pages or default backend in HTTPRoute",
    ),
    ("configuration-snippet", "no nginx snippets outside nginx"),
    ("server-snippet", "no nginx snippets outside nginx"),
];

/// The HTTPRoutes of behaviour `b` at `place`, or why it has none (`not
/// expressible: ...`, or `not run: ...` when the run has no Gateway).
///
/// # Errors
/// The line that says why the behaviour is not given.
pub fn translate(b: &Behaviour, place: &Place) -> Result<Vec<Value>, String> {
    if let Some((_, why)) = NOT_EXPRESSIBLE.iter().find(|(id, _)| *id == b.id) {
        return Err(format!("not expressible: {why}"));
    }
    let values = manifests::Values {
        namespace: place.namespace.clone(),
        gateway: place.gateway.clone(),
        ..manifests::Values::default()
    };
    let text = manifests::render(YAML, &values)
        .map_err(|e| format!("not run: deploy/migration/gateway-api.yaml: {e}"))?;
    let docs = manifests::parse(&text, &place.namespace)
        .map_err(|e| format!("not run: deploy/migration/gateway-api.yaml: {e}"))?;
    let mine: Vec<_> = docs
        .into_iter()
        .filter(|d| d.value["metadata"]["labels"][CORPUS_LABEL] == b.id)
        .collect();
    if mine.is_empty() {
        return Err(format!(
            "not run: deploy/migration/gateway-api.yaml has no route for {}",
            b.id
        ));
    }
    Ok(manifests::owned(&mine, &place.namespace, &place.run))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::CORPUS;

    #[test]
    fn every_behaviour_has_routes_or_a_reason_never_both() {
        let place = Place::sample("ns", Some(("gw-ns", "gw")));
        let docs = manifests::parse(
            &manifests::render(YAML, &manifests::Values::stand_ins("ns")).unwrap(),
            "ns",
        )
        .unwrap();
        for b in CORPUS {
            let has = docs
                .iter()
                .any(|d| d.value["metadata"]["labels"][CORPUS_LABEL] == b.id);
            let why = NOT_EXPRESSIBLE.iter().any(|(id, _)| *id == b.id);
            assert!(has != why, "{}: routes {has}, a reason {why}", b.id);
            match translate(b, &place) {
                Ok(objs) => {
                    for o in &objs {
                        assert_eq!(o["metadata"]["namespace"], "ns");
                        assert_eq!(o["spec"]["parentRefs"][0]["name"], "gw");
                        assert_eq!(o["metadata"]["labels"][crate::RUN_LABEL], "r1");
                        let hosts = o["spec"]["hostnames"].to_string();
                        assert!(hosts.contains(&b.host()), "{}: {hosts}", b.id);
                    }
                }
                Err(e) => assert!(e.starts_with("not expressible: "), "{e}"),
            }
        }
        // A canary by header is one match of the path and the header (two matches
        // would be either, and send every request to the canary).
        let canary = docs
            .iter()
            .find(|d| d.value["metadata"]["labels"][CORPUS_LABEL] == "canary-by-header")
            .unwrap();
        let matches = &canary.value["spec"]["rules"][0]["matches"];
        assert_eq!(matches.as_array().unwrap().len(), 1, "{matches}");
        assert_eq!(matches[0]["headers"][0]["value"], "always", "{matches}");
        assert_eq!(matches[0]["path"]["value"], "/c", "{matches}");
        // Every route of the file belongs to a behaviour of the corpus.
        for d in &docs {
            let id = d.value["metadata"]["labels"][CORPUS_LABEL]
                .as_str()
                .unwrap();
            assert!(crate::corpus::find(id).is_some(), "{id}");
        }
    }
}
