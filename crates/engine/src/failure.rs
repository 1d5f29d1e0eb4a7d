//! Why a request failed: the kind it is counted under, and the cause it came from.
//!
//! Counting stays an array indexed by [`ErrorKind`]; the cause rides along without
//! allocating (an OS error code, a rustls or framing error, a fixed reason) and is
//! turned into a message only for the first failure of each kind a worker sees
//! ([`FirstErrors`]), so 3000 handshake failures cost one string that says why.

use results::clock::Nanos;
use results::ErrorKind;
use std::io;

/// A failed request: counted under `kind`, explained by `cause`.
#[derive(Debug)]
pub struct Failure {
    pub kind: ErrorKind,
    pub cause: Cause,
}

impl Failure {
    pub fn new(kind: ErrorKind, cause: Cause) -> Self {
        Failure { kind, cause }
    }

    /// A failure whose cause is what the OS said.
    pub fn io(kind: ErrorKind, e: io::Error) -> Self {
        Failure::new(kind, Cause::Io(e))
    }
}

/// What a failure came from, kept cheap: nothing here is formatted until
/// [`Cause::message`] is called.
#[derive(Debug)]
pub enum Cause {
    /// What the OS said (refused, reset, too many open files).
    Io(io::Error),
    /// What rustls said (an unknown issuer, a protocol error, an alert).
    Tls(rustls::Error),
    /// The server answered a TLS handshake with plain HTTP.
    PlainHttp,
    /// The response broke HTTP/1.1 framing.
    Http(http1::Error),
    /// A fixed reason.
    Text(&'static str),
    /// No connection within the connect timeout (ns); `tls`: TCP was up, the
    /// handshake was not done.
    ConnectDeadline { after: Nanos, tls: bool },
    /// No full response within the request timeout (ns).
    ResponseDeadline { after: Nanos },
    /// Still waiting (for a connection or a response) when the drain after the
    /// window ended, the request timeout (ns) after the window's end.
    DrainDeadline { after: Nanos },
    /// A response with this status (>= 400).
    Status(u16),
    /// The HTTP/2 connection broke the protocol (or was not HTTP/2).
    H2(http2::H2Error),
    /// The server reset the stream with this HTTP/2 error code.
    H2Reset(u32),
    /// A gRPC call ended with this `grpc-status` (`u32::MAX`: none).
    Grpc(u32),
}

impl Cause {
    /// The cause as one line for a user.
    pub fn message(&self) -> String {
        match self {
            Cause::Io(e) => io_message(e),
            Cause::Tls(e @ rustls::Error::InvalidCertificate(_)) => {
                format!("{e} (a private CA? give it with --cacert FILE, or skip the check with -k)")
            }
            Cause::Tls(e) => e.to_string(),
            Cause::PlainHttp => {
                "the server answered plain HTTP to a TLS handshake: use http://".into()
            }
            Cause::Http(e) => format!("not a valid HTTP/1.1 response: {e}"),
            Cause::Text(t) => (*t).into(),
            Cause::ConnectDeadline { after, tls } => format!(
                "{} within the connect timeout ({})",
                if *tls {
                    "TLS handshake not done"
                } else {
                    "no TCP connection"
                },
                secs(*after)
            ),
            Cause::ResponseDeadline { after } => {
                format!("no full response within the timeout ({})", secs(*after))
            }
            Cause::DrainDeadline { after } => format!(
                "no full response by the end of the drain, the timeout ({}) after the window: recorded at its latency so far",
                secs(*after)
            ),
            Cause::Status(code) => format!("HTTP status {code}"),
            Cause::H2(e) => e.to_string(),
            Cause::H2Reset(code) => format!(
                "the server reset the stream (RST_STREAM {})",
                http2::frame::error_name(*code)
            ),
            Cause::Grpc(u32::MAX) => "the call ended without a grpc-status".into(),
            Cause::Grpc(code) => format!(
                "gRPC status {} ({code})",
                results::errors::grpc_code_name(*code)
            ),
        }
    }
}

/// OS errors as the OS says them, except those that are this machine's limits and
/// would otherwise read as the server's fault.
fn io_message(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EMFILE) => format!(
            "{e}: this process reached its open-files limit (ulimit -n), not a fault of the server"
        ),
        Some(libc::ENFILE) => {
            format!("{e}: the system-wide open-files limit was reached, not a fault of the server")
        }
        Some(libc::EADDRNOTAVAIL) => {
            format!("{e}: no free local port to connect from (too many connections in TIME_WAIT?)")
        }
        _ => e.to_string(),
    }
}

fn secs(ns: Nanos) -> String {
    let s = ns as f64 / 1e9;
    if s < 1.0 {
        format!("{}ms", (s * 1000.0).round())
    } else {
        format!("{}s", (s * 1000.0).round() / 1000.0)
    }
}

/// The message of the first failure of each kind, filled once per kind.
#[derive(Debug, Clone, Default)]
pub struct FirstErrors(pub [Option<String>; results::ErrorKind::COUNT]);

impl FirstErrors {
    /// Keeps the message of `f` if its kind has none yet. Formats only then: the
    /// thousandth failure of a kind costs a comparison.
    #[inline]
    pub fn note(&mut self, kind: ErrorKind, cause: &Cause) {
        let slot = &mut self.0[kind.index()];
        if slot.is_none() {
            *slot = Some(cause.message());
        }
    }

    /// Fills the kinds this one lacks from another worker's.
    pub fn merge(&mut self, o: &FirstErrors) {
        for (a, b) in self.0.iter_mut().zip(o.0.iter()) {
            if a.is_none() {
                a.clone_from(b);
            }
        }
    }

    /// Kind name to message, as stored in results (`errors.first`).
    pub fn to_map(&self) -> std::collections::BTreeMap<String, String> {
        ErrorKind::ALL
            .iter()
            .filter_map(|k| Some((k.name().to_string(), self.0[k.index()].clone()?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_message_per_kind_is_kept() {
        let mut f = FirstErrors::default();
        f.note(ErrorKind::Tls, &Cause::PlainHttp);
        f.note(ErrorKind::Tls, &Cause::Text("later"));
        f.note(
            ErrorKind::Connect,
            &Cause::Io(io::Error::from_raw_os_error(libc::ECONNREFUSED)),
        );
        let mut other = FirstErrors::default();
        other.note(ErrorKind::Tls, &Cause::Text("other worker"));
        other.note(
            ErrorKind::Timeout,
            &Cause::ResponseDeadline { after: 300_000_000 },
        );
        f.merge(&other);
        let m = f.to_map();
        assert_eq!(
            m["tls"],
            "the server answered plain HTTP to a TLS handshake: use http://"
        );
        assert!(m["connect"].starts_with("Connection refused"), "{m:?}");
        assert_eq!(m["timeout"], "no full response within the timeout (300ms)");
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn local_limits_are_not_blamed_on_the_server() {
        let m = Cause::Io(io::Error::from_raw_os_error(libc::EMFILE)).message();
        assert!(m.contains("open-files limit") && m.contains("not a fault of the server"));
        let m = Cause::ConnectDeadline {
            after: 2_000_000_000,
            tls: true,
        }
        .message();
        assert_eq!(m, "TLS handshake not done within the connect timeout (2s)");
        let m = Cause::Tls(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ))
        .message();
        assert!(
            m.starts_with("invalid peer certificate: UnknownIssuer (a private CA?"),
            "{m}"
        );
    }
}
