//! HTTPS for the backend: a rustls server configuration from PEM files.
//!
//! Proxies re-encrypting to their upstreams (and the studies' TLS-to-backend runs)
//! need a backend that speaks TLS 1.2 and 1.3 with ALPN `http/1.1`. rustls with
//! the `ring` provider is the crate's one TLS stack.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::Error;

/// A server configuration serving the chain in `cert` with the key in `key`.
///
/// TLS 1.3 and 1.2 are both enabled; ALPN offers only `http/1.1`.
///
/// # Errors
/// [`Error::Cert`] or [`Error::Key`] when a file cannot be read or holds no PEM
/// item of the right kind; [`Error::Tls`] when rustls refuses the pair (e.g. the
/// key does not match the certificate).
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, Error> {
    let cert_err = |reason: String| Error::Cert {
        path: cert.to_path_buf(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| cert_err(pem_reason(&e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_err(pem_reason(&e)))?;
    if chain.is_empty() {
        return Err(cert_err("no CERTIFICATE block found".into()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| Error::Key {
        path: key.to_path_buf(),
        reason: pem_reason(&e),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(Error::Tls)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(Error::Tls)?;
    // HTTP/2 first (crate::h2), as servers offer it; a client asking only for
    // HTTP/1.1 gets that.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A short reason for a PEM failure (the io error text, or what was missing).
fn pem_reason(e: &rustls_pki_types::pem::Error) -> String {
    use rustls_pki_types::pem::Error as E;
    match e {
        E::Io(io) => io.to_string(),
        E::NoItemsFound => "no PEM block of the expected kind found".into(),
        other => format!("not valid PEM: {other}"),
    }
}
