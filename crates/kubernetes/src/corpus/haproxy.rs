//! The corpus in HAProxy Technologies' own annotations (`haproxy.org/*`, controller
//! v1.11): an ingress-nginx annotation with a counterpart is written as that
//! counterpart; a behaviour with an annotation that has none is not expressible, said
//! with the reason. Behaviours without annotations (path matching) are given as
//! they are.

use super::{Behaviour, Fixture};
use serde_json::{Map, Value};

const PREFIX: &str = "haproxy.org/";

/// HAProxy's annotations for one ingress-nginx annotation `(key, value)` of `b`.
fn one(b: &Behaviour, key: &str, value: &str) -> Result<Vec<(String, String)>, String> {
    let a = |k: &str, v: &str| Ok(vec![(format!("{PREFIX}{k}"), v.to_string())]);
    match key {
        "permanent-redirect" => Ok(vec![
            (
                format!("{PREFIX}request-redirect"),
                value.trim_start_matches("https://").to_string(),
            ),
            (format!("{PREFIX}request-redirect-code"), "301".into()),
        ]),
        "permanent-redirect-code" => a("request-redirect-code", value),
        "temporal-redirect" => Ok(vec![
            (
                format!("{PREFIX}request-redirect"),
                value.trim_start_matches("https://").to_string(),
            ),
            (format!("{PREFIX}request-redirect-code"), "302".into()),
        ]),
        "ssl-redirect" => a("ssl-redirect", value),
        "force-ssl-redirect" => a("ssl-redirect", value),
        "x-forwarded-prefix" => a("request-set-header", &format!("X-Forwarded-Prefix {value}")),
        "upstream-vhost" => a("set-host", value),
        "enable-cors" => a("cors-enable", value),
        "cors-allow-origin" => a("cors-allow-origin", value),
        "cors-allow-methods" => a("cors-allow-methods", value),
        "cors-allow-headers" => a("cors-allow-headers", value),
        "cors-allow-credentials" => a("cors-allow-credentials", value),
        "cors-max-age" => a("cors-max-age", &format!("{value}s")),
        "proxy-read-timeout" => a("timeout-server", &format!("{value}s")),
        "affinity" => Ok(Vec::new()),
        "session-cookie-name" => a("cookie-persistence", value),
        "session-cookie-max-age" | "session-cookie-path" => Ok(Vec::new()),
        "load-balance" => a("load-balance", "roundrobin"),
        "upstream-hash-by" => a("load-balance", "uri"),
        "whitelist-source-range" => a("allow-list", value),
        "denylist-source-range" => a("deny-list", value),
        "limit-rps" => Ok(vec![
            (format!("{PREFIX}rate-limit-requests"), value.to_string()),
            (format!("{PREFIX}rate-limit-period"), "1s".into()),
        ]),
        "limit-burst-multiplier" => Ok(Vec::new()),
        // ingress-nginx rewrites the whole path its (regex) path matches to the
        // target, `$N` its groups: HAProxy's path-rewrite is that regex and target.
        "rewrite-target" => {
            let path = b.fixtures[0].paths[0].path;
            a(
                "path-rewrite",
                &format!("^{path}.* {}", value.replace('$', "\\")),
            )
        }
        // HAProxy resends no request a server has received (its retries are for
        // failed connections): what `off` says.
        "proxy-next-upstream" if value == "off" => Ok(Vec::new()),
        "use-regex" => Ok(Vec::new()),
        "proxy-body-size" => {
            Err("no body limit annotation (a backend-config-snippet would be needed)".into())
        }
        "proxy-next-upstream" | "proxy-next-upstream-tries" => Err(
            "no retry-on annotation (HAProxy's retries are the controller's global setting)".into(),
        ),
        "canary"
        | "canary-by-header"
        | "canary-by-header-value"
        | "canary-by-cookie"
        | "canary-weight" => Err("no canary annotations (one Ingress per path and host)".into()),
        "app-root" => Err("no app-root annotation".into()),
        "from-to-www-redirect" => Err("no host redirect annotation".into()),
        "custom-http-errors" | "default-backend" => {
            Err("no per-Ingress error pages or default backend".into())
        }
        "configuration-snippet" | "server-snippet" => Err(
            "nginx snippets mean nothing to HAProxy (its own are backend-config-snippet)".into(),
        ),
        other => Err(format!("no counterpart of {other}")),
    }
}

/// A fixture with the annotations a controller is given for it.
pub type Annotated = (&'static Fixture, Map<String, Value>);

/// `b`'s fixtures with HAProxy's annotations.
///
/// # Errors
/// The first annotation with no counterpart, and why.
pub fn translate(b: &'static Behaviour) -> Result<Vec<Annotated>, String> {
    let mut out = Vec::new();
    for f in b.fixtures {
        let mut m = Map::new();
        for (k, v) in f.annotations {
            for (hk, hv) in one(b, k, v)? {
                m.insert(hk, Value::String(hv));
            }
        }
        out.push((f, m));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::{find, CORPUS};

    #[test]
    fn counterparts_are_written_and_the_rest_refused_with_a_reason() {
        let cors = translate(find("cors").unwrap()).unwrap();
        assert_eq!(cors[0].1["haproxy.org/cors-enable"], "true");
        assert_eq!(cors[0].1["haproxy.org/cors-max-age"], "600s");
        let allow = translate(find("allow-list-refuses").unwrap()).unwrap();
        assert_eq!(allow[0].1["haproxy.org/allow-list"], "192.0.2.0/24");
        let e = translate(find("canary-weight-10").unwrap()).unwrap_err();
        assert!(e.contains("canary"), "{e}");
        // Path matching alone needs no annotation.
        assert!(translate(find("path-normalised").unwrap()).unwrap()[0]
            .1
            .is_empty());
        let n = CORPUS.iter().filter(|b| translate(b).is_ok()).count();
        assert!(n >= 15, "{n} behaviours expressible");
    }
}
