//! Behaviour probes (issue 44): the same requests sent to every system of a run,
//! what came back and what reached the backend compared with a baseline system.
//! The corpus is built in ([`CORPUS`]), each probe one request with the pitfall it
//! covers; the backend answers a probe with what it received
//! ([`backend::probe`]), so a difference says which side of the proxy it is on.
//!
//! This module is pure: it builds each probe's bytes, reads an answer into an
//! [`Observed`], and compares two observations field by field. Sending is the
//! runner's.

pub use results::probes::{Difference, Observed, Received};
use std::collections::BTreeMap;

/// One built-in probe.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    pub id: &'static str,
    /// The pitfall it covers, in one line.
    pub covers: &'static str,
    pub method: &'static str,
    /// The request target, as bytes on the wire.
    pub target: &'static str,
    /// `HTTP/1.1` unless the probe is about another version.
    pub version: &'static str,
    /// Extra header lines (`Name: value`).
    pub headers: &'static [&'static str],
    /// A body of this many bytes (`x` repeated), sent with a Content-Length, or
    /// chunked.
    pub body: usize,
    pub chunked: bool,
    /// What the backend does with it (`x-ib-probe-do`).
    pub behaviour: &'static str,
    /// Leave out the Host header (an HTTP/1.0 request).
    pub no_host: bool,
    /// Replace the Host with this one.
    pub host: Option<&'static str>,
    /// Sent this many times in a row, each on a connection of its own: whether the
    /// proxy reached the backends on upstream connections it kept open.
    pub repeat: u32,
    /// Run only when `probes.only` names it: a probe too slow for every round of
    /// every run.
    pub named_only: bool,
}

const fn probe(id: &'static str, covers: &'static str) -> Probe {
    Probe {
        id,
        covers,
        method: "GET",
        target: "/probe",
        version: "HTTP/1.1",
        headers: &[],
        body: 0,
        chunked: false,
        behaviour: "",
        no_host: false,
        host: None,
        repeat: 1,
        named_only: false,
    }
}

/// A mebibyte: ingress-nginx's default body limit (`proxy-body-size: 1m`).
const MIB: usize = 1 << 20;

/// The built-in probes, in the order they run.
pub const CORPUS: &[Probe] = &[
    probe("plain", "a plain GET: what every other probe is read against"),
    Probe {
        headers: &["x_ib_underscore: yes"],
        ..probe("underscore-header", "a header with an underscore: nginx drops it by default, Envoy passes it")
    },
    Probe {
        method: "POST",
        body: MIB,
        ..probe("body-1mib", "a body of exactly 1 MiB: at ingress-nginx's default limit")
    },
    Probe {
        method: "POST",
        body: MIB + 1,
        ..probe("body-1mib-plus-1", "a body 1 byte over 1 MiB: 413 from ingress-nginx's default, passed by others")
    },
    Probe {
        method: "POST",
        body: 1000,
        chunked: true,
        ..probe("chunked-body", "a chunked request body: passed on chunked, or buffered and given a length")
    },
    Probe {
        method: "POST",
        body: 100,
        headers: &["Expect: 100-continue"],
        ..probe("expect-100", "Expect: 100-continue with a small body")
    },
    Probe {
        behaviour: "503-once",
        ..probe("upstream-503-once", "the backend answers 503 once: passed through, or retried elsewhere")
    },
    Probe {
        behaviour: "reset-once",
        ..probe("upstream-reset-once", "the backend resets the connection once: ingress-nginx retries (error timeout), a plain HTTPRoute answers 502/503")
    },
    Probe {
        target: "/a/../probe",
        ..probe("dot-segments", "`..` in the path: normalised by the proxy, or passed as sent")
    },
    Probe {
        target: "//probe//x",
        ..probe("double-slash", "`//` in the path: merged, or passed as sent")
    },
    Probe {
        target: "/a%2Fprobe",
        ..probe("encoded-slash", "a percent-encoded slash: decoded, rejected or passed")
    },
    Probe {
        target: "/%2e%2e/probe",
        ..probe("encoded-dots", "percent-encoded dots: decoded and normalised, or passed")
    },
    Probe {
        target: "/PROBE",
        ..probe("upper-case-path", "a path in capitals: matched case-insensitively by ingress-nginx's regex paths, exactly by Envoy")
    },
    Probe {
        target: "/probe?q=%2F&empty=&a=1&a=2",
        ..probe("query", "a query with encodings, an empty value and a repeated key")
    },
    Probe {
        version: "HTTP/1.0",
        no_host: true,
        ..probe("http10-no-host", "an HTTP/1.0 request without Host")
    },
    Probe {
        host: Some("unknown.invalid"),
        ..probe("unknown-host", "a host no route names: the default server's status and body")
    },
    Probe {
        host: Some(lab::routes::FIXTURE_HOST),
        target: "/ib-unknown",
        ..probe("unknown-path", "a path no route of a known host names: the default backend's status and body, or a catch-all route of another host")
    },
    Probe {
        host: Some(lab::routes::FIXTURE_HOST),
        target: "/ib-empty/probe",
        ..probe("no-ready-endpoint", "a route whose Service has no ready endpoint: 503, 502, or 404 from a controller that drops such a route")
    },
    Probe {
        headers: &["x-ib-dup: 1", "x-ib-dup: 2"],
        ..probe("duplicate-header", "a header sent twice: both kept, joined or one dropped")
    },
    Probe {
        headers: &["Connection: x-ib-hop", "x-ib-hop: 1", "TE: trailers"],
        ..probe("hop-by-hop", "hop-by-hop headers (Connection-named, TE): removed before the backend")
    },
    Probe {
        headers: &["x-ib-big: {8k}"],
        ..probe("header-8k", "an 8 KB header: within every proxy's default")
    },
    Probe {
        headers: &["x-ib-big: {16k}"],
        ..probe("header-16k", "a 16 KB header: over nginx's default large buffer (8k), 431 or 400")
    },
    Probe {
        headers: &["x-ib-big: {32k}"],
        ..probe("header-32k", "a 32 KB header: over most defaults")
    },
    Probe {
        behaviour: "delay-ms=2000",
        ..probe("slow-backend-2s", "the backend answers after 2 s: within every default timeout")
    },
    Probe {
        behaviour: "delay-ms=16000",
        named_only: true,
        ..probe("slow-backend-16s", "the backend answers after 16 s: past Envoy's 15 s route timeout (504 from Contour's and Envoy Gateway's defaults), within ingress-nginx's 60 s; run only when probes.only names it")
    },
    Probe {
        repeat: 5,
        ..probe("upstream-reuse", "five requests in a row: reach the backends on upstream connections kept open, or each on a new one (ingress-nginx keeps 320 idle)")
    },
];

/// The probe called `id`.
pub fn find(id: &str) -> Option<&'static Probe> {
    CORPUS.iter().find(|p| p.id == id)
}

/// A header line's value with its size placeholder filled (`{8k}`: 8,000 bytes).
fn fill(line: &str) -> String {
    for (tag, n) in [("{8k}", 8_000), ("{16k}", 16_000), ("{32k}", 32_000)] {
        if line.contains(tag) {
            return line.replace(tag, &"h".repeat(n));
        }
    }
    line.to_string()
}

/// A probe as a run sends it: a built-in one of [`CORPUS`], or one a scenario adds
/// (`probes.add`), with what the scenario expects of its answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Spec {
    pub id: String,
    pub covers: String,
    pub method: String,
    pub target: String,
    pub version: String,
    pub headers: Vec<String>,
    pub body: usize,
    pub chunked: bool,
    pub behaviour: String,
    pub no_host: bool,
    pub host: Option<String>,
    /// Sent this many times in a row ([`Probe::repeat`]).
    pub repeat: u32,
    /// What the answer must show (`expect:`); checked on every round.
    pub expect: Option<Expect>,
}

/// What a probe's answer must show (`expect: {status: 308}`): each field given is
/// checked, in every round of probes, on every system.
#[derive(Debug, Clone, PartialEq, Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// `backend` or `proxy`: who answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// The request target the backend received, as bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// How many attempts of the probe reached the backend that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
}

impl Spec {
    /// How long to wait for its answer: [`PROBE_TIMEOUT`] beyond the delay it
    /// asks of the backend.
    pub fn timeout(&self) -> std::time::Duration {
        match backend::probe::Behaviour::parse(&self.behaviour) {
            Some(backend::probe::Behaviour::Delay(d)) => PROBE_TIMEOUT + d,
            _ => PROBE_TIMEOUT,
        }
    }
}

impl Expect {
    /// Each field `got` does not show as expected: (field, expected, got).
    pub fn unmet(&self, got: &Observed) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        let mut want = |field: &str, expected: Option<String>, actual: String| {
            if let Some(e) = expected {
                if e != actual {
                    out.push((field.to_string(), e, actual));
                }
            }
        };
        want(
            "status",
            self.status.map(|s| s.to_string()),
            show(&got.status),
        );
        want("location", self.location.clone(), show(&got.location));
        want(
            "answered by",
            self.answered_by.clone(),
            answered_by(got).into(),
        );
        let r = got.received.as_ref();
        want(
            "received target",
            self.target.clone(),
            r.map_or_else(|| "-".into(), |r| r.target.clone()),
        );
        want(
            "attempts",
            self.attempts.map(|a| a.to_string()),
            r.map_or_else(|| "-".into(), |r| r.attempt.to_string()),
        );
        out
    }
}

impl From<&Probe> for Spec {
    fn from(p: &Probe) -> Spec {
        Spec {
            id: p.id.into(),
            covers: p.covers.into(),
            method: p.method.into(),
            target: p.target.into(),
            version: p.version.into(),
            headers: p.headers.iter().map(|h| fill(h)).collect(),
            body: p.body,
            chunked: p.chunked,
            behaviour: p.behaviour.into(),
            no_host: p.no_host,
            host: p.host.map(str::to_string),
            repeat: p.repeat,
            expect: None,
        }
    }
}

impl From<&crate::schema::UserProbe> for Spec {
    fn from(u: &crate::schema::UserProbe) -> Spec {
        let version = match u.http.as_deref() {
            Some("1.0") => "HTTP/1.0",
            _ => "HTTP/1.1",
        };
        Spec {
            id: u.id.clone(),
            covers: u.covers.clone(),
            method: u.method.clone(),
            target: u.path.clone(),
            version: version.into(),
            headers: u.headers.clone(),
            body: u.body,
            chunked: u.chunked,
            behaviour: u.backend.clone(),
            no_host: version == "HTTP/1.0" && u.host.is_none(),
            host: u.host.clone(),
            repeat: 1,
            expect: u.expect.clone(),
        }
    }
}

impl Probe {
    /// The request's bytes, for `host` (the system's virtual host).
    pub fn bytes(&self, host: &str) -> Vec<u8> {
        Spec::from(self).bytes(host, self.id)
    }
}

impl Spec {
    /// The request's bytes, for `host` (the system's virtual host), marked with
    /// `wire_id` (the probe's id and its round: the backend counts attempts per
    /// id, so a round's `503-once` fails once again); it asks the proxy to close
    /// the connection after answering.
    pub fn bytes(&self, host: &str, wire_id: &str) -> Vec<u8> {
        let mut head = format!("{} {} {}\r\n", self.method, self.target, self.version);
        if !self.no_host {
            head.push_str(&format!(
                "Host: {}\r\n",
                self.host.as_deref().unwrap_or(host)
            ));
        }
        head.push_str(&format!(
            "{}: {}\r\n",
            backend::probe::PROBE_HEADER,
            wire_id
        ));
        if !self.behaviour.is_empty() {
            head.push_str(&format!(
                "{}: {}\r\n",
                backend::probe::DO_HEADER,
                self.behaviour
            ));
        }
        for h in &self.headers {
            head.push_str(h);
            head.push_str("\r\n");
        }
        let body = vec![b'x'; self.body];
        if self.chunked {
            head.push_str("Transfer-Encoding: chunked\r\n");
        } else if self.body > 0 {
            head.push_str(&format!("Content-Length: {}\r\n", self.body));
        }
        head.push_str("Connection: close\r\n\r\n");
        let mut out = head.into_bytes();
        if self.chunked {
            for part in body.chunks(300) {
                out.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                out.extend_from_slice(part);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        } else {
            out.extend_from_slice(&body);
        }
        out
    }
}

/// The largest body a probe of the user's may send.
pub const MAX_BODY: usize = 64 << 20;

/// Headers a probe of the user's may not set: the probe sets them itself from its
/// other keys.
const OWN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    backend::probe::PROBE_HEADER,
    backend::probe::DO_HEADER,
];

/// A header name's characters (RFC 9110's token).
pub(crate) fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// What is wrong with a probe of the user's, in words that say how to fix it.
pub fn check_user(u: &crate::schema::UserProbe) -> Option<String> {
    if u.id.is_empty()
        || u.id.len() > 64
        || !u
            .id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Some("an id is 1 to 64 letters, digits, '.', '_' or '-'".into());
    }
    if !is_token(&u.method) {
        return Some(format!(
            "method {:?} is not a method token (GET, POST, PURGE)",
            u.method
        ));
    }
    let printable = |s: &str| s.bytes().all(|b| (0x21..0x7f).contains(&b));
    if !(u.path.starts_with('/') || u.path == "*") || !printable(&u.path) {
        return Some(format!(
            "path {:?} is not a request target: start it with / and percent-encode spaces and non-ASCII bytes (%20)",
            u.path
        ));
    }
    if let Some(h) = &u.host {
        if h.is_empty() || !printable(h) {
            return Some(format!("host {h:?} is not a host name"));
        }
    }
    for line in &u.headers {
        let Some((name, value)) = line.split_once(':') else {
            return Some(format!("header {line:?} is not `Name: value`"));
        };
        if !is_token(name) {
            return Some(format!(
                "header {line:?}: {name:?} is not a header name (no spaces, no quotes)"
            ));
        }
        if value.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f) {
            return Some(format!(
                "header {name}: its value holds a control character (a line break?)"
            ));
        }
        if OWN_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            return Some(format!(
                "header {name} is the probe's own: use host, body or chunked instead"
            ));
        }
    }
    if u.body > MAX_BODY {
        return Some(format!(
            "body {} is over {MAX_BODY} bytes: a probe is a request, not a load",
            u.body
        ));
    }
    if let Some(v) = &u.http {
        if v != "1.1" && v != "1.0" {
            return Some(format!("http {v:?}: give 1.1 or 1.0"));
        }
    }
    if u.backend != u.backend.trim()
        || u.backend.bytes().any(|b| b < 0x20 || b == 0x7f)
        || backend::probe::Behaviour::parse(&u.backend).is_none()
    {
        return Some(format!(
            "backend {:?}: use 503-once, reset-once, 503 or delay-ms=N",
            u.backend
        ));
    }
    if let Some(backend::probe::Behaviour::Delay(d)) = backend::probe::Behaviour::parse(&u.backend)
    {
        if d > MAX_DELAY {
            return Some(format!(
                "backend delay-ms={}: a probe waits at most {} s for its answer: give at most delay-ms={}",
                d.as_millis(),
                PROBE_TIMEOUT.as_secs(),
                MAX_DELAY.as_millis()
            ));
        }
    }
    u.expect.as_ref().and_then(check_expect)
}

/// How long one probe may take beyond the delay it asks of the backend
/// ([`Spec::timeout`]): a mebibyte goes up through a proxy on a busy machine.
pub const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The longest a probe of the user's may ask the backend to wait: within
/// [`PROBE_TIMEOUT`], with room for the proxy.
pub const MAX_DELAY: std::time::Duration = std::time::Duration::from_secs(8);

/// What is wrong with an expectation.
pub fn check_expect(e: &Expect) -> Option<String> {
    match e.answered_by.as_deref() {
        None | Some("backend" | "proxy") => None,
        Some(x) => Some(format!("expect.answered_by {x:?}: give backend or proxy")),
    }
}

/// FNV-1a, 64 bits: enough to tell two error pages apart.
fn hash(b: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for x in b {
        h ^= u64::from(*x);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Reads a whole answer (`raw`, the connection read to its end) to the probe
/// `probe`, sent marked `wire_id`.
pub fn observe(probe: &str, wire_id: &str, raw: &[u8], ms: f64) -> Observed {
    let mut o = Observed {
        probe: probe.to_string(),
        ms,
        ..Observed::default()
    };
    match http1::client::parse(raw, false) {
        Ok(r) => {
            o.status = Some(r.status);
            o.location = r.header("location").map(str::to_string);
            let echoed = serde_json::from_slice::<serde_json::Value>(&r.body)
                .ok()
                .filter(|v| v["probe"] == wire_id);
            match echoed {
                Some(v) => {
                    o.received = Some(Received {
                        method: v["method"].as_str().unwrap_or_default().to_string(),
                        target: v["target"].as_str().unwrap_or_default().to_string(),
                        version: v["version"].as_str().unwrap_or_default().to_string(),
                        headers: v["headers"]
                            .as_object()
                            .into_iter()
                            .flatten()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                            .collect(),
                        body_len: v["body_len"].as_u64().unwrap_or(0),
                        attempt: v["attempt"].as_u64().unwrap_or(0) as u32,
                        backend: v["backend"].as_str().unwrap_or_default().to_string(),
                        conn: v["conn"].as_u64().unwrap_or(0),
                    })
                }
                None => o.body_hash = Some(hash(&r.body)),
            }
        }
        Err(e) => o.error = Some(e.to_string()),
    }
    o
}

/// Headers whose values differ between any two systems by nature (an address, a
/// request id), compared only on whether they are there.
const PRESENCE_ONLY: &[&str] = &[
    "x-forwarded-for",
    "x-real-ip",
    "x-request-id",
    "forwarded",
    "via",
    "x-forwarded-port",
    // The Host as the proxy saw it: with a local proxy's own port, or the probe's.
    "x-forwarded-host",
];

fn show(o: &Option<impl ToString>) -> String {
    o.as_ref()
        .map_or_else(|| "-".to_string(), ToString::to_string)
}

/// `backend` when a backend answered, else `proxy` (or `-` when nothing came).
fn answered_by(o: &Observed) -> &'static str {
    if o.received.is_some() {
        "backend"
    } else if o.status.is_some() {
        "proxy"
    } else {
        "-"
    }
}

/// The fields where `got` differs from `base` (the same probe).
pub fn compare(base: &Observed, got: &Observed) -> Vec<Difference> {
    let mut d = Vec::new();
    let mut put = |field: &str, b: String, s: String| {
        if b != s {
            d.push(Difference {
                probe: base.probe.clone(),
                field: field.to_string(),
                baseline: b,
                system: s,
            });
        }
    };
    put("status", show(&base.status), show(&got.status));
    put("location", show(&base.location), show(&got.location));
    put(
        "answered by",
        answered_by(base).into(),
        answered_by(got).into(),
    );
    if let (Some(b), Some(s)) = (&base.received, &got.received) {
        put("received method", b.method.clone(), s.method.clone());
        put("received target", b.target.clone(), s.target.clone());
        put(
            "received body length",
            b.body_len.to_string(),
            s.body_len.to_string(),
        );
        put("attempts", b.attempt.to_string(), s.attempt.to_string());
        put(
            "upstream connection reused",
            show(&base.reused),
            show(&got.reused),
        );
        let names: std::collections::BTreeSet<&String> =
            b.headers.keys().chain(s.headers.keys()).collect();
        for n in names {
            let (bv, sv) = (b.headers.get(n), s.headers.get(n));
            if PRESENCE_ONLY.contains(&n.as_str()) {
                let p =
                    |v: Option<&String>| if v.is_some() { "present" } else { "absent" }.to_string();
                put(&format!("received {n}"), p(bv), p(sv));
            } else if n != "host" && n != "content-length" {
                put(&format!("received {n}"), show(&bv), show(&sv));
            }
        }
    } else if base.received.is_none() && got.received.is_none() {
        put("proxy body", show(&base.body_hash), show(&got.body_hash));
    }
    d
}

/// What [`collapse`] names a difference found on every probe that reached a
/// backend on both sides.
pub const EVERY_PROBE: &str = "(every probe that reached a backend)";

/// One row for a difference (nearly) every probe that reached a backend on both
/// sides shows alike (a header one proxy adds to every request), instead of one per
/// probe; `both` is how many such probes there were. Nearly: 4 in 5 or more, at
/// least 3, since a header made of the Host is not added to a request without one.
pub fn collapse(d: Vec<Difference>, both: usize) -> Vec<Difference> {
    if both < 2 {
        return d;
    }
    let key = |x: &Difference| (x.field.clone(), x.baseline.clone(), x.system.clone());
    let mut count: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for x in d.iter().filter(|x| x.field.starts_with("received ")) {
        *count.entry(key(x)).or_default() += 1;
    }
    let common: Vec<_> = count
        .into_iter()
        .filter(|(_, n)| *n == both || (*n >= 3 && *n * 5 >= both * 4))
        .collect();
    let mut out: Vec<Difference> = common
        .iter()
        .map(|((f, b, s), n)| Difference {
            probe: if *n == both {
                EVERY_PROBE.to_string()
            } else {
                format!("({n} of the {both} probes that reached a backend)")
            },
            field: f.clone(),
            baseline: b.clone(),
            system: s.clone(),
        })
        .collect();
    out.extend(
        d.into_iter()
            .filter(|x| !common.iter().any(|(k, _)| *k == key(x))),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_probe_has_an_id_of_its_own_and_says_what_it_covers() {
        let mut ids: Vec<&str> = CORPUS.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), CORPUS.len());
        assert!(CORPUS.iter().all(|p| !p.covers.is_empty()));
    }

    #[test]
    fn a_probes_bytes_are_what_it_says() {
        let b = find("chunked-body").unwrap().bytes("svc.test");
        let text = String::from_utf8_lossy(&b);
        assert!(
            text.starts_with(
                "POST /probe HTTP/1.1\r\nHost: svc.test\r\nx-ib-probe: chunked-body\r\n"
            ),
            "{text}"
        );
        assert!(text.contains("Transfer-Encoding: chunked\r\n") && text.ends_with("0\r\n\r\n"));
        let b = find("http10-no-host").unwrap().bytes("svc.test");
        assert!(!String::from_utf8_lossy(&b).contains("Host:"));
        let b = find("header-16k").unwrap().bytes("h");
        assert!(b.len() > 16_000 && b.len() < 17_000);
        assert_eq!(
            find("body-1mib-plus-1").unwrap().bytes("h").len()
                - find("body-1mib").unwrap().bytes("h").len(),
            1 + "body-1mib-plus-1".len() - "body-1mib".len()
        );
    }

    #[test]
    fn answers_are_read_and_compared_field_by_field() {
        let backend = |target: &str, under: bool| {
            let body = format!(
                "{{\"probe\":\"p\",\"backend\":\"b\",\"method\":\"GET\",\"target\":\"{target}\",\"version\":\"HTTP/1.1\",\"headers\":{{\"host\":\"h\",\"x-forwarded-for\":\"1.2.3.4\"{}}},\"body_len\":0,\"attempt\":1,\"conn\":1,\"conn_request\":1}}",
                if under { ",\"x_ib_underscore\":\"yes\"" } else { "" }
            );
            format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        let a = observe("p", "p", backend("/a/../probe", true).as_bytes(), 1.0);
        let b = observe("p", "p", backend("/probe", false).as_bytes(), 1.0);
        assert_eq!(compare(&a, &a), []);
        let d = compare(&a, &b);
        let fields: Vec<&str> = d.iter().map(|x| x.field.as_str()).collect();
        assert_eq!(
            fields,
            ["received target", "received x_ib_underscore"],
            "{d:?}"
        );
        assert_eq!((d[1].baseline.as_str(), d[1].system.as_str()), ("yes", "-"));
        let page = observe(
            "p",
            "p",
            b"HTTP/1.1 413 Request Entity Too Large\r\ncontent-length: 4\r\n\r\nbig!",
            1.0,
        );
        let d = compare(&a, &page);
        assert_eq!(d[0].field, "status");
        assert_eq!(
            (d[0].baseline.as_str(), d[0].system.as_str()),
            ("200", "413")
        );
        assert!(d.iter().any(|x| x.field == "answered by"));
        // A header added to every request is said once.
        let diff = |probe: &str, field: &str| Difference {
            probe: probe.into(),
            field: field.into(),
            baseline: "-".into(),
            system: "https".into(),
        };
        let c = collapse(
            vec![
                diff("a", "received x-forwarded-proto"),
                diff("b", "received x-forwarded-proto"),
                diff("b", "status"),
            ],
            2,
        );
        let probes: Vec<&str> = c.iter().map(|x| x.probe.as_str()).collect();
        assert_eq!(probes, [EVERY_PROBE, "b"]);
        assert_eq!(c[1].field, "status");
    }
}
