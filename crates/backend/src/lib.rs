//! The studies' backend, built in: a small HTTP/1.1 (and HTTPS) server that answers
//! every path with a fixed-size plain-text body naming itself.
//!
//! Published ingress comparisons run proxies in front of a trivial backend so that
//! the proxy, not the application, is what is measured. Shipping that backend inside
//! ingressbench means every lab runs the same one, with knobs the studies need —
//! delays drawn from a distribution, periodic stalls, error statuses, TLS — and a
//! drain on SIGTERM that behaves like a pod's, so rollouts can be studied.
//!
//! Parts: [`http1::RequestReader`] (strict) reads requests, [`response`] writes answers, [`delay`] and
//! [`stall`] decide when, [`flap`] makes it fail on a schedule and counts what it
//! received, [`tls`] loads certificates, [`server`] runs it all. The
//! command line (`ingressbench backend`) only resolves flags into a [`Config`],
//! installs signal handlers and calls [`Server`].

pub mod delay;
pub mod flap;
pub mod h2;
pub mod probe;
pub mod response;
pub mod server;
pub mod stall;
mod state;
pub mod tally;
pub mod timer;
pub mod tls;
pub mod ws;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub use delay::Delay;
pub use flap::{Flap, FlapMode};
pub use server::{valid_id, Config, DrainEnd, Drained, Server};
pub use stall::Stall;

/// Why the backend could not start. A message never repeats its cause, which is
/// `source()` ([`results::causes`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A listen address could not be bound (in use, not local, no permission).
    #[error("listen {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The certificate file is unreadable or holds no certificate.
    #[error("certificate {}: {reason}", path.display())]
    Cert {
        /// The file given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The private key file is unreadable or holds no key.
    #[error("private key {}: {reason}", path.display())]
    Key {
        /// The file given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the certificate and key (for instance, they do not match).
    #[error("tls: {0}")]
    Tls(rustls::Error),
    /// The ready file could not be written.
    #[error("ready file {}", path.display())]
    ReadyFile {
        /// The file asked for.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// Writes `addrs`, one per line, to `path` atomically: a temporary file in the same
/// directory, then a rename, so a parent polling for `path` never reads half of it.
///
/// # Errors
/// [`Error::ReadyFile`] when the temporary file cannot be written or renamed.
pub fn write_ready_file(path: &Path, addrs: &[SocketAddr]) -> Result<(), Error> {
    let err = |source| Error::ReadyFile {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    for a in addrs {
        text.push_str(&a.to_string());
        text.push('\n');
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

/// Milliseconds as a [`Duration`]: the unit of the unit tests' schedules.
#[cfg(test)]
pub(crate) fn ms(n: u64) -> std::time::Duration {
    std::time::Duration::from_millis(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_file_is_complete_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ready");
        std::fs::write(&path, "old").unwrap();
        let addrs: Vec<SocketAddr> = vec![
            "127.0.0.1:8080".parse().unwrap(),
            "[::1]:9090".parse().unwrap(),
        ];
        write_ready_file(&path, &addrs).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "127.0.0.1:8080\n[::1]:9090\n"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let e = write_ready_file(&dir.path().join("no/such/dir"), &addrs).unwrap_err();
        assert!(e.to_string().starts_with("ready file "), "{e}");
    }
}
