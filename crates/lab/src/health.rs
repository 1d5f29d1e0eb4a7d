//! Passive health checks, the tuned variant of a profile (`passive_health:` in a
//! scenario, run as `<profile>+passive`): one intent — take a backend out after
//! `max_fails` failed requests, keep it out for `fail_timeout`, count a response
//! slower than `timeout` as failed — and its translation into each proxy's terms, in
//! one place so the four translations can be read side by side.
//!
//! Each profile's default stays as its controller ships it: nginx-reload with
//! `max_fails=0` (ingress-nginx's `upstream-max-fails` default), HAProxy without
//! `check`, Caddy without passive checks, Envoy without outlier detection.
//! `nginx-lua` has no tuned variant: its Lua balancer picks the peer itself, and
//! nginx's `max_fails` bookkeeping never sees it (ingress-nginx has no passive
//! health check either).

use std::fmt::Write as _;
use std::time::Duration;

pub use sut::PassiveHealth;

/// The suffix of a tuned variant's system name.
pub const VARIANT: &str = "+passive";

/// Profiles with a tuned variant.
pub const SUPPORTED: &[&str] = &[
    "nginx-reload",
    "haproxy-reload",
    "haproxy-runtime",
    "caddy-api",
    "envoy-xds",
    "envoy-hot-restart",
];

/// Whether `profile` has a tuned variant.
pub fn supports(profile: &str) -> bool {
    SUPPORTED.contains(&profile)
}

/// A duration in milliseconds, as nginx and HAProxy both read it (`2500ms`).
pub fn ms(d: Duration) -> String {
    format!("{}ms", d.as_millis().max(1))
}

/// Parameters of each nginx `server` line. nginx reads `fail_timeout` in whole
/// seconds (`1000ms` is refused), so it is rounded up to the next second.
pub fn nginx_server(p: Option<&PassiveHealth>) -> String {
    match p {
        None => " max_fails=0".into(),
        Some(p) => format!(
            " max_fails={} fail_timeout={}s",
            p.max_fails.max(1),
            p.fail_timeout.as_millis().div_ceil(1000).max(1)
        ),
    }
}

/// nginx's retry rules inside `location /`: with passive checks a 503 is a failed
/// attempt too (nginx counts towards `max_fails` only what `proxy_next_upstream`
/// names), and a timeout bounds a stalled backend.
pub fn nginx_location(p: Option<&PassiveHealth>) -> String {
    match p {
        None => "            proxy_next_upstream error timeout;\n".into(),
        Some(p) => {
            let mut c = String::from(
                "            proxy_next_upstream error timeout http_502 http_503 http_504;\n",
            );
            if let Some(t) = p.timeout {
                let _ = writeln!(c, "            proxy_read_timeout {};", ms(t));
            }
            c
        }
    }
}

/// Lines of HAProxy's backend section: an HTTP check of `/healthz` (HAProxy observes
/// traffic only on servers with `check`, and the check is what brings a server
/// marked down back). No `retry-on`: with it (`retry-on conn-failure empty-response
/// 503`), a flapping server was never marked down in this lab (HAProxy 2.6), its
/// errors retried away before `observe` saw them.
pub fn haproxy_backend(p: Option<&PassiveHealth>) -> Vec<String> {
    let Some(p) = p else {
        return Vec::new();
    };
    let mut v = vec!["    option httpchk GET /healthz".to_string()];
    if let Some(t) = p.timeout {
        v.push(format!("    timeout server {}", ms(t)));
    }
    v
}

/// Parameters added to HAProxy's `default-server`: traffic is observed at layer 7,
/// `max_fails` errors mark the server down, and
/// while down it is checked every `fail_timeout`, one good check bringing it back.
/// While up it is checked at HAProxy's default interval (2 s) and needs 3 failed
/// checks to go down, so that traffic, not the check, finds a failure first.
pub fn haproxy_server(p: Option<&PassiveHealth>) -> String {
    match p {
        None => String::new(),
        Some(p) => format!(
            " check inter 2s downinter {} rise 1 fall 3 observe layer7 error-limit {} on-error mark-down",
            ms(p.fail_timeout),
            p.max_fails.max(1)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuned() -> PassiveHealth {
        PassiveHealth {
            max_fails: 2,
            fail_timeout: Duration::from_millis(2500),
            timeout: Some(Duration::from_secs(1)),
        }
    }

    #[test]
    fn defaults_are_the_profiles_own() {
        assert_eq!(nginx_server(None), " max_fails=0");
        assert_eq!(
            nginx_location(None),
            "            proxy_next_upstream error timeout;\n"
        );
        assert!(haproxy_backend(None).is_empty());
        assert_eq!(haproxy_server(None), "");
    }

    #[test]
    fn tuned_translations() {
        let p = tuned();
        assert_eq!(nginx_server(Some(&p)), " max_fails=2 fail_timeout=3s");
        let loc = nginx_location(Some(&p));
        assert!(loc.contains("http_503") && loc.contains("proxy_read_timeout 1000ms;"));
        let be = haproxy_backend(Some(&p));
        assert_eq!(be[0], "    option httpchk GET /healthz");
        assert!(be.iter().any(|l| l == "    timeout server 1000ms"));
        let s = haproxy_server(Some(&p));
        assert!(
            s.contains(" check ") && s.contains("observe layer7 error-limit 2 on-error mark-down")
        );
        assert!(s.contains("downinter 2500ms"));
        assert!(supports("caddy-api") && !supports("nginx-lua"));
    }
}
