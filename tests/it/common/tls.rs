//! Test certificates (RSA 2048, as in the studies) and a minimal rustls client used to
//! check the test servers themselves, independently of the engine.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// A self-signed certificate for `localhost` and `127.0.0.1`, in its own temp dir.
pub struct Cert {
    _dir: tempfile::TempDir,
    /// PEM certificate; also the CA to pass with `--cacert`.
    pub cert: PathBuf,
    /// PEM private key (unencrypted).
    pub key: PathBuf,
}

/// Generates a fresh RSA-2048 self-signed certificate with openssl, usable both as the
/// server's certificate and as the CA a client trusts (`--cacert`).
pub fn self_signed() -> Cert {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            // openssl's default for -x509 is CA:TRUE, and webpki (rustls) refuses a CA
            // certificate as the server's own (CaUsedAsEndEntity): mark it a leaf.
            "-addext",
            "basicConstraints=critical,CA:FALSE",
            "-addext",
            "extendedKeyUsage=serverAuth",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap_or_else(|e| panic!("openssl not runnable ({e}): `make test` installs it"));
    assert!(
        out.status.success(),
        "openssl req failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Cert {
        _dir: dir,
        cert,
        key,
    }
}

/// A rustls client that trusts only the certificate(s) in `ca` (PEM) and speaks only
/// `version`.
///
/// # Errors
/// The PEM or rustls error, as text.
pub fn client_config(
    ca: &Path,
    version: &'static rustls::SupportedProtocolVersion,
) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;

    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).map_err(|e| e.to_string())? {
        roots
            .add(c.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[version])
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

/// `GET /` over TLS with only `version` allowed, trusting `cert`. Returns the negotiated
/// protocol and the whole response (the request asks the server to close).
///
/// # Errors
/// The TLS or I/O error, as text.
pub fn https_get(
    addr: SocketAddr,
    cert: &Cert,
    version: &'static rustls::SupportedProtocolVersion,
) -> Result<(rustls::ProtocolVersion, String), String> {
    use rustls::pki_types::ServerName;

    let config = client_config(&cert.cert, version)?;
    let name = ServerName::try_from(addr.ip().to_string()).map_err(|e| e.to_string())?;
    let conn = rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
    let tcp =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut resp = Vec::new();
    match tls.read_to_end(&mut resp) {
        Ok(_) => {}
        // nginx closes without close_notify after `Connection: close`; what was read is whole.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !resp.is_empty() => {}
        Err(e) => return Err(e.to_string()),
    }
    let v = tls
        .conn
        .protocol_version()
        .ok_or("no protocol version negotiated")?;
    Ok((v, String::from_utf8_lossy(&resp).into_owned()))
}
