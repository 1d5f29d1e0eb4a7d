//! Behaviour probes (issue 44): a request that carries `x-ib-probe: ID` is answered
//! with what the backend received, so that the same request sent through several
//! proxies can be compared on what reached the backend, not only on what came back:
//! the method and target as bytes, the Host, the forwarding headers, a header with
//! an underscore, the body's length, which of this backend's connections it came on
//! and how many attempts of this probe reached this backend.
//!
//! `x-ib-probe-do` asks for a behaviour: `503-once` and `reset-once` (the first
//! attempt of the probe at this backend fails that way, the next succeeds: a proxy
//! that retries shows two attempts), `503` (every attempt), `delay-ms=N`.
//!
//! Only a head with a line that starts `x-ib-probe:` (in any case: Go proxies send
//! `X-Ib-Probe`) is parsed again: every other request pays one scan of its head.
//! What is remembered per probe id is bounded ([`MAX_PROBES`]).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

/// The header that marks a probe, as sent.
pub const PROBE_HEADER: &str = "x-ib-probe";
/// The header that asks for a behaviour.
pub const DO_HEADER: &str = "x-ib-probe-do";
/// The header of a probe naming headers to record besides [`RECORDED`]
/// (comma-separated): those the user's own routes add (`probes.record`).
pub const RECORD_HEADER: &str = "x-ib-record";
/// The header with an underscore that probes send, to see whether it arrives.
pub const UNDERSCORE_HEADER: &str = "x_ib_underscore";

/// Probe ids remembered for their attempt counts; beyond it the table starts over
/// (a probe run sends a few dozen).
pub const MAX_PROBES: usize = 4096;

/// What the probe asks of the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Behaviour {
    #[default]
    Answer,
    Status503Once,
    ResetOnce,
    Status503,
    Delay(Duration),
}

impl Behaviour {
    /// `x-ib-probe-do`'s value; `None` for one not known.
    pub fn parse(s: &str) -> Option<Behaviour> {
        match s.trim() {
            "" => Some(Behaviour::Answer),
            "503-once" => Some(Behaviour::Status503Once),
            "reset-once" => Some(Behaviour::ResetOnce),
            "503" => Some(Behaviour::Status503),
            other => other
                .strip_prefix("delay-ms=")
                .and_then(|n| n.parse::<u64>().ok())
                .map(|ms| Behaviour::Delay(Duration::from_millis(ms))),
        }
    }
}

/// A probe's request as this backend received it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Received {
    pub id: String,
    pub behaviour: Behaviour,
    pub method: String,
    pub target: String,
    pub version: String,
    /// Headers the probes compare, by lowercase name, as received (several of one
    /// name joined by `, `).
    pub headers: Vec<(String, String)>,
}

/// The headers recorded for a probe.
const RECORDED: &[&str] = &[
    "host",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-forwarded-port",
    "x-real-ip",
    "x-request-id",
    "via",
    "forwarded",
    "connection",
    "te",
    "transfer-encoding",
    "content-length",
    "x-ib-dup",
    UNDERSCORE_HEADER,
];

/// The head `bytes` begins with, if one of its lines is the probe header: line
/// starts only, and never past the head's blank line.
fn marked_head(bytes: &[u8]) -> Option<&[u8]> {
    let marker = b"x-ib-probe:";
    let mut found = false;
    let mut at = 0;
    while let Some(nl) = bytes[at..].iter().position(|&b| b == b'\n') {
        let line = at + nl + 1;
        let rest = &bytes[line..];
        if rest.starts_with(b"\r\n") {
            return found.then_some(&bytes[..line + 2]);
        }
        // Any case: Go proxies (Caddy, Traefik) send it as `X-Ib-Probe`.
        found |= rest.len() >= marker.len() && rest[..marker.len()].eq_ignore_ascii_case(marker);
        at = line;
    }
    None
}

/// The probe whose request begins `bytes` (its head, maybe some of its body), if
/// it is one. One scan for the marker is all a request that is not pays.
pub fn parse(bytes: &[u8]) -> Option<Received> {
    let head = marked_head(bytes)?;
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let request_line = lines.next()?;
    let mut parts = request_line.splitn(3, ' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let mut r = Received {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        ..Received::default()
    };
    let lines: Vec<&str> = lines.collect();
    // The headers the probe asks to be recorded too, wherever its list stands.
    let also: Vec<String> = lines
        .iter()
        .filter_map(|l| l.split_once(':'))
        .filter(|(n, _)| n.trim().eq_ignore_ascii_case(RECORD_HEADER))
        .flat_map(|(_, v)| v.split(','))
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .collect();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim();
        let recorded = RECORDED.contains(&name.as_str()) || also.contains(&name);
        if name == PROBE_HEADER {
            r.id = value.to_string();
        } else if name == DO_HEADER {
            r.behaviour = Behaviour::parse(value).unwrap_or_default();
        } else if recorded {
            match r.headers.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => {
                    v.push_str(", ");
                    v.push_str(value);
                }
                None => r.headers.push((name, value.to_string())),
            }
        }
    }
    (!r.id.is_empty()).then_some(r)
}

/// The attempts of each probe: at this backend, or, given a folder shared with the
/// other backends of a run (`--probe-dir`), at any of them. Shared, a `*-once`
/// behaviour fails the probe's first attempt at whichever backend it reaches, and a
/// proxy that retries on another backend then gets an answer: the attempt count is
/// the retries a user wants to see. Each probe id is a file of one byte per attempt.
#[derive(Debug, Default)]
pub struct Attempts {
    here: Mutex<HashMap<String, u32>>,
    shared: Option<std::path::PathBuf>,
}

impl Attempts {
    /// Counted in `dir` with the other backends given it, or here alone.
    pub fn new(dir: Option<std::path::PathBuf>) -> Attempts {
        Attempts {
            here: Mutex::default(),
            shared: dir,
        }
    }

    /// Counts one more attempt of probe `id`; returns its number (1 for the first).
    pub fn arrive(&self, id: &str) -> u32 {
        if let Some(n) = self.shared.as_deref().and_then(|d| arrive_in(d, id)) {
            return n;
        }
        let mut m = self
            .here
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if m.len() >= MAX_PROBES && !m.contains_key(id) {
            m.clear();
        }
        let n = m.entry(id.to_string()).or_insert(0);
        *n += 1;
        *n
    }
}

/// One more byte on `dir`'s file for `id` (appended: one write, whole, whichever
/// backend makes it); the file's length after it. `None` when the folder cannot be
/// written (then this backend counts alone).
fn arrive_in(dir: &std::path::Path, id: &str) -> Option<u32> {
    use std::io::Write as _;
    let name: String = id
        .chars()
        .take(120)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("probe-{name}"));
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .ok()?;
    f.write_all(b".").ok()?;
    u32::try_from(f.metadata().ok()?.len()).ok()
}

/// Where a probe's request was received: this backend, the connection (numbered
/// from 1 in the backend's life) and the request's number on it.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    pub backend: &'a str,
    pub conn: u64,
    pub conn_request: u64,
    pub attempt: u32,
    pub body_len: u64,
}

fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The answer's body: what was received, as one JSON object.
pub fn body(r: &Received, at: At<'_>) -> String {
    let mut s = String::with_capacity(512);
    s.push_str("{\"probe\":");
    json_str(&mut s, &r.id);
    s.push_str(",\"backend\":");
    json_str(&mut s, at.backend);
    for (k, v) in [
        ("method", &r.method),
        ("target", &r.target),
        ("version", &r.version),
    ] {
        let _ = write!(s, ",\"{k}\":");
        json_str(&mut s, v);
    }
    s.push_str(",\"headers\":{");
    for (i, (k, v)) in r.headers.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        json_str(&mut s, k);
        s.push(':');
        json_str(&mut s, v);
    }
    let _ = writeln!(
        s,
        "}},\"body_len\":{},\"attempt\":{},\"conn\":{},\"conn_request\":{}}}",
        at.body_len, at.attempt, at.conn, at.conn_request
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_marked_head_is_a_probe_and_its_headers_are_kept_as_received() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n"), None);
        // As a Go proxy forwards it.
        let go = parse(b"GET / HTTP/1.1\r\nHost: a\r\nX-Ib-Probe: g\r\nX-Ib-Probe-Do: 503\r\n\r\n");
        assert_eq!(
            go.map(|r| (r.id, r.behaviour)),
            Some(("g".to_string(), Behaviour::Status503))
        );
        // The marker in a body is not a probe.
        assert_eq!(
            parse(b"POST / HTTP/1.1\r\ncontent-length: 15\r\n\r\n\nx-ib-probe: x\r\n"),
            None
        );
        let head = b"POST /a//b/../c?q=%2F HTTP/1.1\r\nHost: svc.test\r\nx-ib-probe: p7\r\n\
            x-ib-probe-do: 503-once\r\nX-Forwarded-For: 10.0.0.1\r\nx-forwarded-for: 10.0.0.2\r\n\
            x_ib_underscore: yes\r\nx-other: no\r\n\r\n";
        let r = parse(head).unwrap();
        assert_eq!(r.id, "p7");
        assert_eq!(r.behaviour, Behaviour::Status503Once);
        assert_eq!(
            (r.method.as_str(), r.target.as_str()),
            ("POST", "/a//b/../c?q=%2F")
        );
        assert_eq!(
            r.headers,
            [
                ("host".to_string(), "svc.test".to_string()),
                ("x-forwarded-for".into(), "10.0.0.1, 10.0.0.2".into()),
                (UNDERSCORE_HEADER.into(), "yes".into()),
            ]
        );
        // Headers the probe names in x-ib-record are recorded too, wherever the
        // list stands; the others still are not.
        let asked = b"GET / HTTP/1.1\r\nX-Team: shop\r\nx-ib-probe: p8\r\nx-other: no\r\n\
            X-Ib-Record: x-team, X-Zone\r\nx-zone: a\r\n\r\n";
        assert_eq!(
            parse(asked).unwrap().headers,
            [
                ("x-team".to_string(), "shop".to_string()),
                ("x-zone".into(), "a".into()),
            ]
        );
        let b = body(
            &r,
            At {
                backend: "web-1",
                conn: 3,
                conn_request: 2,
                attempt: 1,
                body_len: 10,
            },
        );
        let v: serde_json::Value = serde_json::from_str(&b).unwrap();
        assert_eq!(v["target"], "/a//b/../c?q=%2F");
        assert_eq!(v["headers"]["x-forwarded-for"], "10.0.0.1, 10.0.0.2");
        assert_eq!(
            (v["conn"].as_u64(), v["body_len"].as_u64()),
            (Some(3), Some(10))
        );
    }

    #[test]
    fn behaviours_and_attempts() {
        assert_eq!(
            Behaviour::parse("delay-ms=250"),
            Some(Behaviour::Delay(Duration::from_millis(250)))
        );
        assert_eq!(Behaviour::parse("explode"), None);
        let a = Attempts::default();
        assert_eq!((a.arrive("x"), a.arrive("x"), a.arrive("y")), (1, 2, 1));
        // Two backends sharing a folder count one probe's attempts together.
        let dir = tempfile::tempdir().unwrap();
        let (b1, b2) = (
            Attempts::new(Some(dir.path().into())),
            Attempts::new(Some(dir.path().into())),
        );
        assert_eq!(
            (b1.arrive("p~s/0"), b2.arrive("p~s/0"), b1.arrive("q")),
            (1, 2, 1)
        );
    }
}
