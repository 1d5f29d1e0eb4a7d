//! Behaviour probes (issue 44): the same requests sent to every system of a run,
//! what came back and what reached the backend compared with a baseline system.
//! The corpus is built in ([`CORPUS`]), each probe one request with the pitfall it
//! covers; the backend answers a probe with what it received
//! ([`backend::probe`]), so a difference says which side of the proxy it is on.
//!
//! This module is pure: it builds each probe's bytes, reads an answer into an
//! [`Observed`], and compares two observations field by field. Sending is the
//! runner's.

pub use kubernetes::corpus::Tally;
pub use results::probes::{CorpusCell, Difference, Observed, Received};
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
    /// A probe of the annotation corpus sent `repeat` times: how its answers are
    /// counted.
    pub tally: Option<Tally>,
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
            tally: None,
        }
    }
}

/// A probe a scenario adds (`probes.add`): one request, and what the backend does
/// with it.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct UserProbe {
    pub id: String,
    /// What it covers, for the report.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub covers: String,
    #[serde(default = "get", skip_serializing_if = "is_get")]
    pub method: String,
    /// The request target, as bytes on the wire (`/old%2Fpath?x=1`).
    pub path: String,
    /// The Host header (default: the load's virtual host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `Name: value` lines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// A body of this many bytes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub body: usize,
    /// Sent chunked instead of with a Content-Length.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub chunked: bool,
    /// `1.1` (default) or `1.0` (then without a Host unless `host` is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    /// What the backend does with it: `503-once`, `reset-once`, `503`,
    /// `delay-ms=N`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub backend: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expect>,
}

fn get() -> String {
    "GET".into()
}
fn is_get(m: &String) -> bool {
    m == "GET"
}
fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl From<&UserProbe> for Spec {
    fn from(u: &UserProbe) -> Spec {
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
            tally: None,
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

/// The annotation corpus's behaviour ids and probe ids (`<behaviour>.<request>`),
/// what `probes.only` and `probes.expect` may name once `probes.corpus` is set.
pub fn corpus_ids() -> Vec<String> {
    kubernetes::corpus::CORPUS
        .iter()
        .flat_map(|b| {
            std::iter::once(b.id.to_string())
                .chain(b.probes.iter().map(move |r| format!("{}.{}", b.id, r.name)))
        })
        .collect()
}

/// The corpus's probes as a run sends them, those of the behaviours (or probe
/// ids) `only` names, or all when it names none of them: each to its behaviour's
/// host, id `<behaviour>.<request>`.
pub fn corpus_specs(only: &[String]) -> Vec<Spec> {
    let ids = corpus_ids();
    let named = only.iter().any(|o| ids.contains(o));
    let mut out = Vec::new();
    for b in kubernetes::corpus::CORPUS {
        for r in b.probes {
            let id = format!("{}.{}", b.id, r.name);
            if named && !only.iter().any(|o| *o == b.id || *o == id) {
                continue;
            }
            out.push(Spec {
                covers: b.covers.to_string(),
                method: r.method.into(),
                target: r.target.into(),
                version: "HTTP/1.1".into(),
                headers: r.headers.iter().map(|h| (*h).to_string()).collect(),
                body: r.body,
                chunked: false,
                behaviour: r.backend.into(),
                no_host: false,
                host: Some(format!("{}{}", r.host_prefix, b.host())),
                repeat: r.repeat,
                expect: None,
                tally: (r.tally != Tally::One).then_some(r.tally),
                id,
            });
        }
    }
    out
}

/// The behaviour a probe of the corpus belongs to (`cors` of `cors.preflight`).
pub fn behaviour_of(probe: &str) -> Option<&'static kubernetes::corpus::Behaviour> {
    let (b, _) = probe.split_once('.')?;
    kubernetes::corpus::find(b)
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
pub fn check_user(u: &UserProbe) -> Option<String> {
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

/// The cookies an answer set, as a request sends them back (`name=value`).
pub fn cookies_set(raw: &[u8]) -> Vec<String> {
    http1::client::parse(raw, false)
        .map(|r| {
            r.headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
                .filter_map(|(_, v)| v.split(';').next().map(|c| c.trim().to_string()))
                .filter(|c| c.contains('='))
                .collect()
        })
        .unwrap_or_default()
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
            o.headers = behaviour_headers(&r.headers);
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

/// The response headers that carry a behaviour, as [`Observed::headers`] keeps
/// them: a cookie's value (random by nature) left out, its name and attributes
/// kept; the rest as they came.
fn behaviour_headers(headers: &[(String, String)]) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let n = name.to_ascii_lowercase();
        let kept = n.starts_with("access-control-")
            || matches!(
                n.as_str(),
                "set-cookie" | "strict-transport-security" | "vary" | "content-type" | "x-snippet"
            );
        if !kept {
            continue;
        }
        let v = if n == "set-cookie" {
            let mut parts = value.split(';').map(str::trim);
            let name = parts.next().unwrap_or("").split('=').next().unwrap_or("");
            let mut attrs: Vec<String> = parts
                .map(|a| {
                    // An expiry is a date that moves with the clock: its name only.
                    let key = a.split('=').next().unwrap_or("").to_ascii_lowercase();
                    if key == "expires" {
                        key
                    } else {
                        a.to_ascii_lowercase()
                    }
                })
                .collect();
            attrs.sort();
            std::iter::once(format!("{name}=…"))
                .chain(attrs)
                .collect::<Vec<_>>()
                .join("; ")
        } else {
            value.clone()
        };
        out.entry(n)
            .and_modify(|e| {
                e.push_str(", ");
                e.push_str(&v);
            })
            .or_insert(v);
    }
    out
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
    // The behaviour's response headers (a proxy's own page says its content type
    // in its own words: only compared when a backend answered on both sides, or
    // the header is not the content type).
    // Only for the corpus's probes: the built-in ones compare what they always did.
    let corpus = behaviour_of(&base.probe).is_some();
    let names: std::collections::BTreeSet<&String> = base
        .headers
        .keys()
        .chain(got.headers.keys())
        .filter(|_| corpus)
        .collect();
    for n in names {
        if n == "content-type" && (base.received.is_none() || got.received.is_none()) {
            continue;
        }
        put(
            &format!("answer {n}"),
            show(&base.headers.get(n)),
            show(&got.headers.get(n)),
        );
    }
    if let (Some(b), Some(s)) = (&base.tally, &got.tally) {
        if !b.same(s) {
            put("tally", b.describe(), s.describe());
        }
    }
    // A tallied probe's last answer came from whichever backend its turn met: its
    // tally says which set answered, not that answer.
    let tallied = base.tally.is_some() || got.tally.is_some();
    if let (true, false, Some(b), Some(s)) = (corpus, tallied, &base.received, &got.received) {
        // Which set of backends answered: a canary's, or the main ones.
        let canary = |r: &Received| {
            if r.backend.starts_with(kubernetes::corpus::CANARY) {
                "the canary"
            } else {
                "the main backends"
            }
        };
        put("backends", canary(b).into(), canary(s).into());
    }
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
            } else if (n != "host" || corpus) && n != "content-length" {
                put(&format!("received {n}"), show(&bv), show(&sv));
            }
        }
    } else if base.received.is_none() && got.received.is_none() {
        put("proxy body", show(&base.body_hash), show(&got.body_hash));
    }
    d
}

/// Whether `o` is what a plain route (no annotation) answers `spec`: a backend's
/// 200 with the target as sent, no CORS header, no cookie, and a tally that shows
/// no canary, no refusal and no stickiness.
fn plain(o: &Observed, spec: &Spec) -> bool {
    let Some(r) = &o.received else { return false };
    let tally_plain = o.tally.as_ref().is_none_or(|t| match t.kind.as_str() {
        "backends" | "sticky" => t.count > 1,
        _ => t.count == 0,
    });
    // The Host as the probe sent it, and no prefix told: what upstream-vhost and
    // x-forwarded-prefix change.
    let host_plain = spec
        .host
        .as_ref()
        .is_none_or(|h| r.headers.get("host").is_none_or(|got| got == h));
    o.status == Some(200)
        && r.target == spec.target
        && host_plain
        && !r.headers.contains_key("x-forwarded-prefix")
        && !r.backend.starts_with(kubernetes::corpus::CANARY)
        && !o
            .headers
            .keys()
            .any(|k| k.starts_with("access-control-") || k == "set-cookie")
        && tally_plain
}

/// How a system's answers to a behaviour read in a line: each probe's status, its
/// `Location` and its tally.
fn summary(obs: &[&Observed]) -> String {
    obs.iter()
        .map(|o| {
            let name = o.probe.split_once('.').map_or(o.probe.as_str(), |(_, n)| n);
            let mut s = format!("{name} {}", show(&o.status));
            if o.received.is_none() && o.status.is_some() {
                s.push_str(" (proxy)");
            }
            if let Some(l) = &o.location {
                s.push_str(&format!(" -> {l}"));
            }
            if let Some(t) = &o.tally {
                s.push_str(&format!(", {}", t.describe()));
            }
            s
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The compatibility matrix's cells of one system: one per behaviour of the corpus
/// among `specs`. `base` is the baseline's probes (`None` for the baseline itself),
/// `got` this system's answers before the load, `left_out` what its driver was not
/// given and why (`None`: it renders no corpus at all).
pub fn corpus_cells(
    base: Option<&results::probes::ProbeRun>,
    got: &[Observed],
    specs: &[Spec],
    left_out: Option<&[(String, String)]>,
) -> Vec<CorpusCell> {
    let mut cells = Vec::new();
    let common = match base {
        Some(base) => common_differences(
            &got.iter()
                .filter(|o| behaviour_of(&o.probe).is_some())
                .filter_map(|o| Some((base.observed.iter().find(|b| b.probe == o.probe)?, o)))
                .collect::<Vec<_>>(),
        ),
        None => Vec::new(),
    };
    for b in kubernetes::corpus::CORPUS {
        let mine: Vec<&Spec> = specs
            .iter()
            .filter(|s| behaviour_of(&s.id).is_some_and(|x| x.id == b.id))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let caveat = b.image_note.map(str::to_string);
        let cell = |verdict: &str, detail: String| CorpusCell {
            behaviour: b.id.to_string(),
            verdict: verdict.to_string(),
            detail,
            caveat: caveat.clone(),
        };
        let Some(left_out) = left_out else {
            cells.push(cell(
                "not run",
                "this profile renders no corpus (a cluster's controllers do)".into(),
            ));
            continue;
        };
        if let Some((_, why)) = left_out.iter().find(|(id, _)| id == b.id) {
            let (verdict, detail) = why.split_once(": ").unwrap_or(("not run", why));
            cells.push(cell(verdict, detail.to_string()));
            continue;
        }
        let answers: Vec<&Observed> = mine
            .iter()
            .filter_map(|s| got.iter().find(|o| o.probe == s.id))
            .collect();
        let Some(base) = base else {
            cells.push(cell("baseline", summary(&answers)));
            continue;
        };
        if let Some(c) = base.corpus.iter().find(|c| c.behaviour == b.id) {
            if c.verdict != "baseline" {
                cells.push(cell(
                    "not run",
                    format!("the baseline was not given it ({})", c.verdict),
                ));
                continue;
            }
        }
        let pairs: Vec<(&Spec, &Observed, &Observed)> = mine
            .iter()
            .filter_map(|s| {
                let o = got.iter().find(|o| o.probe == s.id)?;
                let bo = base.observed.iter().find(|o| o.probe == s.id)?;
                Some((*s, bo, o))
            })
            .collect();
        let (verdict, detail) = judge(&pairs, &common);
        cells.push(cell(verdict, detail));
    }
    if !common.is_empty() {
        cells.push(CorpusCell {
            behaviour: EVERY_ANSWER.to_string(),
            verdict: "differs".to_string(),
            detail: common
                .iter()
                .map(|(f, b, s)| format!("{f} {b} -> {s}"))
                .collect::<Vec<_>>()
                .join("; "),
            caveat: None,
        });
    }
    // The scenario's own probes (`probes.add`: a team's routes), a row each.
    for spec in specs
        .iter()
        .filter(|s| behaviour_of(&s.id).is_none() && find(&s.id).is_none())
    {
        let Some(o) = got.iter().find(|o| o.probe == spec.id) else {
            continue;
        };
        let row = |verdict: &str, detail: String| CorpusCell {
            behaviour: format!("own: {}", spec.id),
            verdict: verdict.to_string(),
            detail,
            caveat: None,
        };
        match base.and_then(|b| b.observed.iter().find(|x| x.probe == spec.id)) {
            None if base.is_none() => cells.push(row("baseline", summary(&[o]))),
            None => cells.push(row("not run", "the baseline did not answer it".into())),
            Some(bo) => {
                let (verdict, detail) = judge(&[(spec, bo, o)], &common);
                cells.push(row(verdict, detail));
            }
        }
    }
    cells
}

/// What the matrix calls a difference every answer shows alike.
pub const EVERY_ANSWER: &str = "(every answer)";

/// A difference without its probe: (field, baseline, system).
type Key = (String, String, String);

fn key(d: &Difference) -> Key {
    (d.field.clone(), d.baseline.clone(), d.system.clone())
}

/// Where a corpus probe's answer differs from the baseline's in what a behaviour
/// is about: not the forwarding headers (they differ between any two controllers,
/// and the built-in probes say so once), not the hop-by-hop `Connection` a proxy
/// sends its upstream (NGINX Gateway Fabric's `close` on every request, where
/// ingress-nginx keeps its upstream connections), not a proxy's own page's wording.
fn behaviour_diffs(base: &Observed, got: &Observed) -> Vec<Difference> {
    compare(base, got)
        .into_iter()
        .filter(|d| d.field != "received connection")
        .filter(|d| {
            !d.field
                .strip_prefix("received ")
                .is_some_and(|h| PRESENCE_ONLY.contains(&h) || h.starts_with("x-forwarded-"))
                || d.field == "received x-forwarded-prefix"
        })
        .filter(|d| d.field != "proxy body")
        .collect()
}

/// The response-header differences (nearly) every pair of answers from a backend
/// shows alike (a proxy that adds `Vary: Accept-Encoding` to everything): said once
/// as their own row, not in every behaviour's cell. Nearly: 4 in 5 or more, at
/// least 3.
fn common_differences(pairs: &[(&Observed, &Observed)]) -> Vec<Key> {
    let both: Vec<_> = pairs
        .iter()
        .filter(|(b, o)| b.received.is_some() && o.received.is_some())
        .collect();
    let mut count: BTreeMap<Key, usize> = BTreeMap::new();
    for (b, o) in &both {
        for d in behaviour_diffs(b, o)
            .iter()
            .filter(|d| d.field.starts_with("answer "))
        {
            *count.entry(key(d)).or_default() += 1;
        }
    }
    count
        .into_iter()
        .filter(|(_, n)| *n >= 3 && *n * 5 >= both.len() * 4)
        .map(|(k, _)| k)
        .collect()
}

/// A behaviour's verdict from its probes' answers (spec, baseline's, this
/// system's): `same`, `differs` with the first difference, or `ignored` when every
/// answer is a plain route's and the baseline's were not.
fn judge(pairs: &[(&Spec, &Observed, &Observed)], common: &[Key]) -> (&'static str, String) {
    let diffs: Vec<Difference> = pairs
        .iter()
        .flat_map(|(_, bo, o)| behaviour_diffs(bo, o))
        .filter(|d| !common.contains(&key(d)))
        .collect();
    let Some(first) = diffs.first() else {
        return ("same", String::new());
    };
    let name = first
        .probe
        .split_once('.')
        .map_or(first.probe.as_str(), |(_, n)| n);
    let mut line = format!(
        "{name}: {} {} -> {}",
        first.field, first.baseline, first.system
    );
    if diffs.len() > 1 {
        line.push_str(&format!(" (+{} more)", diffs.len() - 1));
    }
    let ignored =
        pairs.iter().all(|(s, _, o)| plain(o, s)) && !pairs.iter().all(|(s, bo, _)| plain(bo, s));
    if ignored {
        (
            "ignored",
            format!("answered as a plain route would: {line}"),
        )
    } else {
        ("differs", line)
    }
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

    /// A backend's answer to probe `id`: status 200, the target it received,
    /// from backend `by`.
    fn from_backend(id: &str, target: &str, by: &str) -> Observed {
        Observed {
            probe: id.into(),
            status: Some(200),
            received: Some(Received {
                method: "GET".into(),
                target: target.into(),
                version: "HTTP/1.1".into(),
                backend: by.into(),
                attempt: 1,
                ..Received::default()
            }),
            ..Observed::default()
        }
    }

    fn proxy(id: &str, status: u16, location: Option<&str>) -> Observed {
        Observed {
            probe: id.into(),
            status: Some(status),
            location: location.map(str::to_string),
            body_hash: Some("0".into()),
            ..Observed::default()
        }
    }

    #[test]
    fn the_corpus_cells_say_same_differs_ignored_and_why_a_behaviour_was_not_given() {
        let only: Vec<String> = [
            "permanent-redirect",
            "regex-prefix-case",
            "canary-weight-10",
            "cors",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let specs = corpus_specs(&only);
        assert!(specs.iter().all(|s| behaviour_of(&s.id).is_some()));
        assert_eq!(
            specs
                .iter()
                .filter(|s| s.id.starts_with("regex-prefix-case."))
                .count(),
            3
        );
        let weight = specs
            .iter()
            .find(|s| s.id == "canary-weight-10.share")
            .unwrap();
        assert_eq!((weight.repeat, weight.tally), (600, Some(Tally::Canary)));
        assert_eq!(weight.host.as_deref(), Some("canary-weight-10.corpus.test"));
        let canary = |count| Observed {
            tally: Some(results::probes::Tally {
                kind: "canary".into(),
                of: 200,
                count,
            }),
            ..from_backend("canary-weight-10.share", "/c", "ib-backend-1")
        };
        let base_obs = vec![
            proxy(
                "permanent-redirect.any",
                301,
                Some("https://moved.corpus.test/new"),
            ),
            from_backend("regex-prefix-case.exact", "/items/42", "b"),
            from_backend("regex-prefix-case.longer", "/items/42/reviews", "b"),
            from_backend("regex-prefix-case.upper", "/ITEMS/42", "b"),
            canary(19),
        ];
        let left: Vec<(String, String)> = vec![(
            "cors".into(),
            "not expressible: no CORS filter in the standard channel".into(),
        )];
        let base_cells = corpus_cells(None, &base_obs, &specs, Some(&[]));
        assert!(
            base_cells.iter().all(|c| c.verdict == "baseline"),
            "{base_cells:?}"
        );
        let redirect = base_cells
            .iter()
            .find(|c| c.behaviour == "permanent-redirect")
            .unwrap();
        assert_eq!(
            redirect.detail,
            "any 301 (proxy) -> https://moved.corpus.test/new"
        );
        let base = results::probes::ProbeRun {
            baseline: "ingress-nginx".into(),
            observed: base_obs.clone(),
            corpus: base_cells,
            ..Default::default()
        };
        // A candidate that passes the redirect through to a backend (ignored), turns
        // the regex case-sensitive (differs), keeps the canary's share within chance
        // (same) and cannot say CORS.
        let got = vec![
            from_backend("permanent-redirect.any", "/old?x=1", "b"),
            from_backend("regex-prefix-case.exact", "/items/42", "b"),
            from_backend("regex-prefix-case.longer", "/items/42/reviews", "b"),
            proxy("regex-prefix-case.upper", 404, None),
            canary(23),
        ];
        let cells = corpus_cells(Some(&base), &got, &specs, Some(&left));
        let v: Vec<(&str, &str)> = cells
            .iter()
            .map(|c| (c.behaviour.as_str(), c.verdict.as_str()))
            .collect();
        assert_eq!(
            v,
            [
                ("regex-prefix-case", "differs"),
                ("permanent-redirect", "ignored"),
                ("cors", "not expressible"),
                ("canary-weight-10", "same"),
            ]
        );
        assert_eq!(cells[0].detail, "upper: status 200 -> 404 (+1 more)");
        assert_eq!(cells[2].detail, "no CORS filter in the standard channel");
        // 10 % against 20 % over 200 requests is a difference; a canary never hit is
        // the annotation ignored.
        let twenty = vec![canary(41)];
        let c = corpus_cells(Some(&base), &twenty, &specs, Some(&[]));
        let w = c
            .iter()
            .find(|c| c.behaviour == "canary-weight-10")
            .unwrap();
        assert_eq!(w.verdict, "differs", "{w:?}");
        assert!(
            w.detail
                .contains("canary 19 of 200 (9.5 %) -> canary 41 of 200 (20.5 %)"),
            "{}",
            w.detail
        );
        let never = vec![canary(0)];
        let c = corpus_cells(Some(&base), &never, &specs, Some(&[]));
        let w = c
            .iter()
            .find(|c| c.behaviour == "canary-weight-10")
            .unwrap();
        assert_eq!(w.verdict, "ignored", "{w:?}");
        // A profile that renders no corpus: every behaviour not run, said why.
        let c = corpus_cells(Some(&base), &[], &specs, None);
        assert!(c.iter().all(|c| c.verdict == "not run"), "{c:?}");
        // A probe of the team's own is a row of its own.
        let mut own = specs.clone();
        own.push(Spec {
            id: "shop-api".into(),
            target: "/api/v1".into(),
            ..Spec::default()
        });
        let mut base = base;
        base.observed.push(from_backend("shop-api", "/v1", "b"));
        let c = corpus_cells(
            Some(&base),
            &[from_backend("shop-api", "/api/v1", "b")],
            &own,
            Some(&[]),
        );
        let row = c.iter().find(|c| c.behaviour == "own: shop-api").unwrap();
        assert_eq!(row.verdict, "ignored", "{row:?}");
        assert!(
            row.detail.ends_with("received target /v1 -> /api/v1"),
            "{row:?}"
        );
    }

    #[test]
    fn behaviour_headers_keep_cors_and_cookies_without_their_values() {
        let h = behaviour_headers(&[
            ("Access-Control-Allow-Origin".into(), "https://a".into()),
            (
                "Set-Cookie".into(),
                "IBSTICKY=abc123; Path=/; Expires=Tue, 01 Jan 2030 00:00:00 GMT; HttpOnly".into(),
            ),
            ("Server".into(), "nginx".into()),
            ("Vary".into(), "Origin".into()),
            ("Vary".into(), "Accept-Encoding".into()),
        ]);
        assert_eq!(h["access-control-allow-origin"], "https://a");
        assert_eq!(h["set-cookie"], "IBSTICKY=…; expires; httponly; path=/");
        assert_eq!(h["vary"], "Origin, Accept-Encoding");
        assert!(!h.contains_key("server"));
        let raw = b"HTTP/1.1 200 OK\r\nSet-Cookie: IBSTICKY=abc; Path=/\r\nSet-Cookie: x=1\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(cookies_set(raw), ["IBSTICKY=abc", "x=1"]);
    }

    #[test]
    fn a_behaviours_differences_leave_out_the_upstream_connection_header() {
        let backend = |target: &str, connection: &str| {
            let body = format!(
                "{{\"probe\":\"p\",\"backend\":\"b\",\"method\":\"GET\",\"target\":\"{target}\",\"version\":\"HTTP/1.1\",\"headers\":{{\"host\":\"h\"{connection}}},\"body_len\":0,\"attempt\":1,\"conn\":1,\"conn_request\":1}}"
            );
            format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        let kept = observe("p", "p", backend("/x", "").as_bytes(), 1.0);
        let closed = observe(
            "p",
            "p",
            backend("/x", ",\"connection\":\"close\"").as_bytes(),
            1.0,
        );
        // The probe table says it; a behaviour's cell does not.
        assert!(compare(&kept, &closed)
            .iter()
            .any(|d| d.field == "received connection"));
        assert_eq!(behaviour_diffs(&kept, &closed), []);
        // What a behaviour is about still counts beside it.
        let moved = observe(
            "p",
            "p",
            backend("/y", ",\"connection\":\"close\"").as_bytes(),
            1.0,
        );
        let d = behaviour_diffs(&kept, &moved);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].field, "received target");
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
