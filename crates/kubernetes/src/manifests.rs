//! The routes a user brings (`kubernetes.manifests`): the user's own Ingress
//! objects, HTTPRoutes from ingress2gateway or written by hand, applied in the run's
//! namespace in place of the route the run would generate, so that the load and the
//! behaviour probes go through the routing a team will run in production.
//!
//! A manifest points at the run's backends with placeholders (`${IB_BACKEND}` and
//! `${IB_BACKEND_PORT}`: the run's Service), since the run makes that Service and its
//! namespace. Everything here is checked twice: once when the scenario is parsed,
//! with stand-in values, so that a typo is named at its line before anything runs;
//! and once with the run's values, before the objects are applied.

use serde_json::Value;

/// The placeholders a manifest may hold, each written `${NAME}`, and what it is.
pub const PLACEHOLDERS: &[(&str, &str)] = &[
    ("IB_BACKEND", "the run's backend Service"),
    ("IB_BACKEND_PORT", "its port"),
    ("IB_NAMESPACE", "the run's namespace"),
    (
        "IB_GATEWAY_NAME",
        "the Gateway the system's routes attach to",
    ),
    ("IB_GATEWAY_NAMESPACE", "its namespace"),
    ("IB_TLS_SECRET", "the TLS Secret the run made"),
    ("IB_HOST", "kubernetes.host"),
    ("IB_INGRESS_CLASS", "the system's IngressClass"),
];

/// Kinds a run never writes from a manifest: they are the cluster's, not a
/// namespace's, or the run's own.
const REFUSED_KINDS: &[&str] = &[
    "Namespace",
    "IngressClass",
    "GatewayClass",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "Node",
    "List",
];

/// What is wrong with a manifest, at its line (1-based; 0 when the file as a whole).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct ManifestError {
    pub line: usize,
    pub msg: String,
}

fn bad(line: usize, msg: impl Into<String>) -> ManifestError {
    ManifestError {
        line,
        msg: msg.into(),
    }
}

/// One object of a manifest file, with the line its document starts at.
#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    pub line: usize,
    pub value: Value,
}

impl Doc {
    fn field(&self, k: &str) -> &str {
        self.value[k].as_str().unwrap_or_default()
    }

    pub fn api_version(&self) -> &str {
        self.field("apiVersion")
    }

    pub fn kind(&self) -> &str {
        self.field("kind")
    }

    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or_default()
    }
}

/// The values the placeholders stand for in one run; `None` for one the system has
/// not (a Gateway for an Ingress profile, a TLS Secret for a plain-HTTP run).
#[derive(Debug, Clone, Default)]
pub struct Values {
    pub namespace: String,
    pub gateway: Option<(String, String)>,
    pub tls_secret: Option<String>,
    pub host: Option<String>,
    pub ingress_class: Option<String>,
}

impl Values {
    /// Stand-ins for the check made when a scenario is parsed: every placeholder
    /// has a value of the right shape.
    pub fn stand_ins(namespace: &str) -> Values {
        Values {
            namespace: namespace.into(),
            gateway: Some(("gateway-ns".into(), "gateway".into())),
            tls_secret: Some(crate::TLS_SECRET.into()),
            host: Some("host.example".into()),
            ingress_class: Some("class".into()),
        }
    }

    fn get(&self, name: &str) -> Result<String, &'static str> {
        let need = |v: &Option<String>, why: &'static str| v.clone().ok_or(why);
        match name {
            "IB_BACKEND" => Ok(crate::BACKEND.to_string()),
            "IB_BACKEND_PORT" => Ok(crate::objects::SERVICE_PORT.to_string()),
            "IB_NAMESPACE" => Ok(self.namespace.clone()),
            "IB_GATEWAY_NAME" | "IB_GATEWAY_NAMESPACE" => {
                let (ns, gw) = self
                    .gateway
                    .as_ref()
                    .ok_or("this system's routes attach to no Gateway (kubernetes.gateway, gateways or gateway_class names one)")?;
                Ok(if name == "IB_GATEWAY_NAME" { gw } else { ns }.clone())
            }
            "IB_TLS_SECRET" => need(
                &self.tls_secret,
                "the run made no TLS Secret (a plain-HTTP load, or kubernetes.cacert: the controller's own certificate)",
            ),
            "IB_HOST" => need(&self.host, "kubernetes.host is not set"),
            "IB_INGRESS_CLASS" => need(&self.ingress_class, "this system is not routed by an Ingress"),
            _ => Err("unknown"),
        }
    }
}

/// `text` with every `${IB_...}` replaced by its value.
///
/// # Errors
/// An unknown placeholder, one without a value in this run, a `${` left open, or a
/// manifest that never names `${IB_BACKEND}` (its routes would reach no backend of
/// the run's).
pub fn render(text: &str, values: &Values) -> Result<String, ManifestError> {
    let mut out = String::with_capacity(text.len());
    let mut backend = false;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if line.trim_start().starts_with('#') {
            // A comment may speak of the placeholders without being filled in.
            out.push_str(line);
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("${") {
            out.push_str(&rest[..at]);
            let after = &rest[at + 2..];
            let Some(end) = after.find('}') else {
                return Err(bad(i + 1, "a placeholder `${` is not closed with `}`"));
            };
            let name = &after[..end];
            let known = || {
                PLACEHOLDERS
                    .iter()
                    .map(|(n, _)| format!("${{{n}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            match values.get(name) {
                Ok(v) => out.push_str(&v),
                Err("unknown") => {
                    return Err(bad(
                        i + 1,
                        format!("unknown placeholder ${{{name}}} (known: {})", known()),
                    ))
                }
                Err(why) => return Err(bad(i + 1, format!("${{{name}}}: {why}"))),
            }
            backend |= name == "IB_BACKEND";
            rest = &after[end + 1..];
        }
        out.push_str(rest);
    }
    if !backend {
        return Err(bad(
            0,
            "no object names ${IB_BACKEND}, the run's backend Service: point the routes' \
             backends at it (service name ${IB_BACKEND}, port ${IB_BACKEND_PORT})",
        ));
    }
    Ok(out)
}

/// Whether a line separates two YAML documents.
fn separator(line: &str) -> bool {
    let l = line.trim_end();
    l == "---" || l.starts_with("--- ") || l == "..."
}

/// The objects of a (rendered) manifest file, one per YAML document, each checked
/// to be a Kubernetes object a run may apply in its namespace `namespace`.
///
/// # Errors
/// Text that does not parse (at its line), a document that is not an object with
/// `apiVersion`, `kind` and `metadata.name`, a kind a run never writes, an object
/// in another namespace, two objects of one kind and name, or no object at all.
pub fn parse(text: &str, namespace: &str) -> Result<Vec<Doc>, ManifestError> {
    let mut docs = Vec::new();
    let mut start = 1;
    let mut chunk = String::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if separator(line) {
            if let Some(d) = document(&chunk, start)? {
                docs.push(d);
            }
            chunk.clear();
            start = i + 2;
        } else {
            chunk.push_str(line);
            chunk.push('\n');
        }
    }
    if let Some(d) = document(&chunk, start)? {
        docs.push(d);
    }
    if docs.is_empty() {
        return Err(bad(
            0,
            "no object in it: give Ingress or HTTPRoute objects, one YAML document each",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for d in &docs {
        let what = format!("{} {}", d.kind(), d.name());
        if REFUSED_KINDS.contains(&d.kind()) {
            return Err(bad(
                d.line,
                format!(
                    "{what}: a run does not write {} objects (the cluster's, or the run's own): give only the routing objects (Ingress, HTTPRoute, GRPCRoute and the controller's own kinds, such as Traefik's Middleware)",
                    d.kind()
                ),
            ));
        }
        if let Some(ns) = d.value["metadata"]["namespace"].as_str() {
            if ns != namespace {
                return Err(bad(
                    d.line,
                    format!(
                        "{what} names namespace {ns}: a run applies objects in its own namespace only: drop metadata.namespace, or write ${{IB_NAMESPACE}}"
                    ),
                ));
            }
        }
        if !seen.insert((d.kind().to_string(), d.name().to_string())) {
            return Err(bad(d.line, format!("{what} is given twice")));
        }
    }
    Ok(docs)
}

/// One document's object, or `None` for a document of comments only.
fn document(chunk: &str, start: usize) -> Result<Option<Doc>, ManifestError> {
    if chunk
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Ok(None);
    }
    let value: Value = serde_yaml_ng::from_str(chunk).map_err(|e| {
        let line = e.location().map_or(0, |l| l.line().saturating_sub(1)) + start;
        let mut msg = e.to_string();
        if let Some(i) = msg.find(" at line ") {
            let end = msg[i..].find(',').map_or(msg.len(), |j| i + j);
            msg.replace_range(i..end, "");
        }
        bad(line, in_file(&msg, start))
    })?;
    let d = Doc { line: start, value };
    let ok = d.value.is_object()
        && !d.api_version().is_empty()
        && !d.kind().is_empty()
        && !d.name().is_empty();
    if !ok {
        return Err(bad(
            start,
            "not a Kubernetes object: a document needs apiVersion, kind and metadata.name",
        ));
    }
    Ok(Some(d))
}

/// `msg` of the YAML parser with the lines it names ("while parsing a flow sequence
/// at line 5") counted from the file's start, not from the document's.
fn in_file(msg: &str, start: usize) -> String {
    let mut out = String::new();
    let mut rest = msg;
    while let Some(i) = rest.find("at line ") {
        out.push_str(&rest[..i + 8]);
        rest = &rest[i + 8..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&(n + start - 1).to_string()),
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

/// The user's objects as the run applies them: in its namespace, labelled as the
/// run's own (so that `ingressbench cleanup` and the run's end find them).
pub fn owned(docs: &[Doc], namespace: &str, run: &str) -> Vec<Value> {
    docs.iter()
        .map(|d| {
            let mut v = d.value.clone();
            let m = &mut v["metadata"];
            m["namespace"] = Value::String(namespace.into());
            if !m["labels"].is_object() {
                m["labels"] = Value::Object(serde_json::Map::new());
            }
            m["labels"][crate::MANAGED_BY.0] = Value::String(crate::MANAGED_BY.1.into());
            m["labels"][crate::RUN_LABEL] = Value::String(run.into());
            v
        })
        .collect()
}

/// Why the API server refused the dry run of `d` in `namespace`, in one line that
/// says what to do: rules that cannot write the kind, a kind the cluster does not
/// serve, or the API's own reason (an invalid object).
pub fn refused(d: &Doc, namespace: &str, e: &kube::Error) -> String {
    let what = format!("{} {}", d.kind(), d.name());
    match e {
        kube::Error::Api(s) if s.code == 403 => format!(
            "{what}: the run's rules cannot write {} ({}) in namespace {namespace}: grant them, as deploy/rbac.yaml does for the kinds ingressbench writes ({})",
            d.kind(),
            d.api_version(),
            s.message
        ),
        kube::Error::Api(s) if s.code == 404 => format!(
            "{what}: the cluster serves no {} of {} (is its CustomResourceDefinition installed, or is the apiVersion right?)",
            d.kind(),
            d.api_version()
        ),
        kube::Error::Api(s) => format!("{what}: refused by the API server: {} ({})", s.message, s.reason),
        other => format!("{what}: the dry run failed: {other}"),
    }
}

/// The IngressClasses the manifest's Ingresses name.
pub fn ingress_classes(docs: &[Doc]) -> Vec<String> {
    let mut v: Vec<String> = docs
        .iter()
        .filter(|d| d.kind() == "Ingress")
        .filter_map(|d| d.value["spec"]["ingressClassName"].as_str())
        .map(str::to_string)
        .collect();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const INGRESS: &str = "# the team's own\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: shop\n  annotations:\n    traefik.ingress.kubernetes.io/router.middlewares: ${IB_NAMESPACE}-team@kubernetescrd\nspec:\n  ingressClassName: ${IB_INGRESS_CLASS}\n  rules:\n  - http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend:\n          service: {name: \"${IB_BACKEND}\", port: {number: ${IB_BACKEND_PORT}}}\n---\napiVersion: traefik.io/v1alpha1\nkind: Middleware\nmetadata:\n  name: team\nspec:\n  headers:\n    customRequestHeaders: {x-team: a}\n";

    fn values() -> Values {
        Values {
            ingress_class: Some("traefik".into()),
            ..Values::stand_ins("ingressbench-r1")
        }
    }

    #[test]
    fn placeholders_are_filled_and_each_document_is_an_object_at_its_line() {
        let text = render(INGRESS, &values()).unwrap();
        assert!(
            text.contains("name: \"ib-backend\", port: {number: 80}"),
            "{text}"
        );
        assert!(
            text.contains("ingressbench-r1-team@kubernetescrd"),
            "{text}"
        );
        let docs = parse(&text, "ingressbench-r1").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(
            (docs[0].kind(), docs[0].name(), docs[0].line),
            ("Ingress", "shop", 1)
        );
        assert_eq!(
            (docs[1].kind(), docs[1].name(), docs[1].line),
            ("Middleware", "team", 18)
        );
        assert_eq!(ingress_classes(&docs), vec!["traefik".to_string()]);
        let owned = owned(&docs, "ingressbench-r1", "r1");
        assert_eq!(owned[1]["metadata"]["namespace"], "ingressbench-r1");
        assert_eq!(owned[1]["metadata"]["labels"]["ingressbench.io/run"], "r1");
        assert_eq!(
            owned[1]["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "ingressbench"
        );
        assert_eq!(
            owned[0]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["port"]
                ["number"],
            80
        );
    }

    #[test]
    fn a_placeholder_unknown_without_value_or_open_is_named_at_its_line() {
        let e = render(
            &INGRESS.replace("${IB_INGRESS_CLASS}", "${IB_CLASS}"),
            &values(),
        )
        .unwrap_err();
        assert_eq!(e.line, 9);
        assert!(
            e.msg
                .starts_with("unknown placeholder ${IB_CLASS} (known: ${IB_BACKEND}, "),
            "{e}"
        );
        let none = Values {
            ingress_class: None,
            ..values()
        };
        let e = render(INGRESS, &none).unwrap_err();
        assert_eq!(e.line, 9);
        assert!(
            e.msg
                .contains("${IB_INGRESS_CLASS}: this system is not routed by an Ingress"),
            "{e}"
        );
        let e = render("a: ${IB_BACKEND\n", &values()).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.msg.contains("not closed"), "{e}");
        let e = render(&INGRESS.replace("\"${IB_BACKEND}\"", "shop"), &values()).unwrap_err();
        assert!(e.msg.starts_with("no object names ${IB_BACKEND}"), "{e}");
    }

    #[test]
    fn a_manifest_that_does_not_parse_or_is_no_object_is_named_at_its_line() {
        let text = render(INGRESS, &values()).unwrap();
        // A tab in an indentation, in the second document.
        let broken = text.replace("  headers:\n", "  headers:\n\t x: [\n");
        let e = parse(&broken, "ingressbench-r1").unwrap_err();
        assert!((23..=24).contains(&e.line), "{e}");
        let e = parse(&text.replace("kind: Middleware\n", ""), "ingressbench-r1").unwrap_err();
        assert_eq!(e.line, 18);
        assert!(e.msg.contains("apiVersion, kind and metadata.name"), "{e}");
        let e = parse("# nothing\n---\n", "ns").unwrap_err();
        assert!(e.msg.starts_with("no object in it"), "{e}");
    }

    #[test]
    fn the_bundled_manifests_render_and_parse() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/manifests");
        let mut kinds = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let text = std::fs::read_to_string(e.path()).unwrap();
            let docs = parse(&render(&text, &values()).unwrap(), "ingressbench-r1")
                .unwrap_or_else(|err| panic!("{}: {err}", e.path().display()));
            kinds.extend(docs.iter().map(|d| d.kind().to_string()));
        }
        kinds.sort();
        assert_eq!(kinds, ["HTTPRoute", "Ingress", "Ingress", "Middleware"]);
    }

    #[test]
    fn another_namespace_a_cluster_kind_and_a_twice_given_object_are_refused() {
        let text = render(INGRESS, &values()).unwrap();
        let other = text.replace("  name: team\n", "  name: team\n  namespace: kube-system\n");
        let e = parse(&other, "ingressbench-r1").unwrap_err();
        assert_eq!(e.line, 18);
        assert!(
            e.msg.contains("Middleware team names namespace kube-system: a run applies objects in its own namespace only"),
            "{e}"
        );
        let ours = text.replace(
            "  name: team\n",
            "  name: team\n  namespace: ingressbench-r1\n",
        );
        assert!(parse(&ours, "ingressbench-r1").is_ok());
        let class = format!("{text}---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {{name: x}}\n");
        let e = parse(&class, "ingressbench-r1").unwrap_err();
        assert!(
            e.msg.contains("a run does not write IngressClass objects"),
            "{e}"
        );
        let twice = format!("{text}---\n{}", text.split("---\n").nth(1).unwrap());
        let e = parse(&twice, "ingressbench-r1").unwrap_err();
        assert_eq!(e.msg, "Middleware team is given twice");
    }
}
