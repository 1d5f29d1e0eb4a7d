//! The TLS client (rustls): trust, protocol versions, ALPN and session resumption.
//!
//! Resumption is off unless asked for, so that a new connection per request costs a
//! full handshake, as a fleet of distinct clients would; `--tls-resume` turns on an
//! in-memory session cache to measure the resumed case.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use std::path::Path;
use std::sync::Arc;

/// Why a TLS client could not be set up. A message never repeats its cause, which
/// is `source()` ([`results::causes`]).
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("--cacert {path}: {why}")]
    CaCert { path: String, why: String },
    #[error("--tls-version '{0}' is not supported: use 1.2 or 1.3")]
    Version(String),
    #[error("tls")]
    Rustls(#[from] rustls::Error),
    #[error("host '{0}' is not a valid TLS server name")]
    ServerName(String),
}

/// The TLS versions a load may agree (`--tls-version`, a scenario's `tls.version`).
pub use results::tls::TlsVersion;

/// TLS client settings from the command line.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsOptions {
    pub insecure: bool,
    pub cacert: Option<std::path::PathBuf>,
    /// The one version allowed; `None` allows both.
    pub version: Option<TlsVersion>,
    pub resume: bool,
}

/// `--tls-version`: `1.2` or `1.3` (also `tls1.2`, `TLSv1.3`).
///
/// # Errors
/// [`TlsSetupError::Version`] for any other version.
pub fn parse_version(s: &str) -> Result<TlsVersion, TlsSetupError> {
    TlsVersion::parse(s).ok_or_else(|| TlsSetupError::Version(s.to_string()))
}

/// Builds the shared client configuration.
///
/// # Errors
/// [`TlsSetupError`] for an unreadable or empty CA file.
pub fn client_config(opts: &TlsOptions) -> Result<Arc<ClientConfig>, TlsSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = match opts.version {
        None => vec![&rustls::version::TLS13, &rustls::version::TLS12],
        Some(TlsVersion::V12) => vec![&rustls::version::TLS12],
        Some(TlsVersion::V13) => vec![&rustls::version::TLS13],
    };
    let builder =
        ClientConfig::builder_with_provider(provider.clone()).with_protocol_versions(&versions)?;
    let mut config = if opts.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned {
                pinned: Vec::new(),
                webpki: None,
                provider,
            }))
            .with_no_client_auth()
    } else {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let mut pinned = Vec::new();
        if let Some(path) = &opts.cacert {
            pinned = read_pem_certs(path)?;
            for cert in &pinned {
                // A self-signed leaf (what `openssl req -x509` makes) is not a valid
                // CA for webpki; it is still trusted below as a pinned certificate.
                let _ = roots.add(cert.clone());
            }
        }
        let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .map_err(|e| TlsSetupError::CaCert {
            path: opts
                .cacert
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            why: e.to_string(),
        })?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned {
                pinned,
                webpki: Some(webpki),
                provider,
            }))
            .with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = if opts.resume {
        rustls::client::Resumption::in_memory_sessions(4096)
    } else {
        rustls::client::Resumption::disabled()
    };
    // TLS 1.3 early data would blur what a handshake costs; keep it off.
    config.enable_early_data = false;
    Ok(Arc::new(config))
}

fn read_pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let err = |why: String| TlsSetupError::CaCert {
        path: path.display().to_string(),
        why,
    };
    let data = std::fs::read(path).map_err(|e| err(format!("{e} (give a PEM file)")))?;
    let mut certs = Vec::new();
    for cert in CertificateDer::pem_slice_iter(&data) {
        certs.push(cert.map_err(|e| err(format!("not PEM: {e}")))?);
    }
    if certs.is_empty() {
        return Err(err(
            "no certificate found: give a PEM file with 'BEGIN CERTIFICATE'".into(),
        ));
    }
    Ok(certs)
}

/// Normal WebPKI verification, except that a server presenting exactly one of the
/// `--cacert` certificates is trusted as that certificate: a lab's self-signed
/// certificate works as it does with `curl --cacert`. Without WebPKI (`--insecure`)
/// any certificate is accepted, but handshake signatures are still checked, so the
/// cryptographic work per handshake is the same as with verification on.
#[derive(Debug)]
struct Pinned {
    pinned: Vec<CertificateDer<'static>>,
    webpki: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self
            .pinned
            .iter()
            .any(|p| p.as_ref() == end_entity.as_ref())
        {
            return Ok(ServerCertVerified::assertion());
        }
        match &self.webpki {
            Some(w) => w.verify_server_cert(end_entity, intermediates, server_name, ocsp, now),
            None => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The serial number of a DER certificate, as lowercase hex written into `out`
/// (at most 40 digits: RFC 5280 caps serials at 20 bytes); `None` when the bytes do
/// not start like a certificate. Read by hand, with no allocation, because it runs
/// once per handshake on the worker's thread: Certificate and TBSCertificate are
/// SEQUENCEs, then an optional `[0]` version, then the serial's INTEGER.
pub fn serial_hex<'a>(der: &[u8], out: &'a mut [u8; 40]) -> Option<&'a [u8]> {
    /// A tag and its length at `at`: (tag, start of the content, content length).
    fn tlv(b: &[u8], at: usize) -> Option<(u8, usize, usize)> {
        let tag = *b.get(at)?;
        let first = *b.get(at + 1)?;
        let (len, start) = if first < 0x80 {
            (usize::from(first), at + 2)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 {
                return None;
            }
            let mut len = 0usize;
            for i in 0..n {
                len = (len << 8) | usize::from(*b.get(at + 2 + i)?);
            }
            (len, at + 2 + n)
        };
        (start.checked_add(len)? <= b.len()).then_some((tag, start, len))
    }
    let (t, cert, _) = tlv(der, 0)?;
    let (t2, tbs, _) = tlv(der, cert)?;
    if t != 0x30 || t2 != 0x30 {
        return None;
    }
    let (mut tag, mut start, mut len) = tlv(der, tbs)?;
    if tag == 0xa0 {
        (tag, start, len) = tlv(der, start.checked_add(len)?)?;
    }
    if tag != 0x02 || len == 0 {
        return None;
    }
    let mut bytes = &der[start..start + len];
    // A leading zero only keeps the INTEGER positive; `openssl x509 -serial` drops it.
    while bytes.len() > 1 && bytes[0] == 0 {
        bytes = &bytes[1..];
    }
    if bytes.len() > 20 {
        // Not a conforming certificate: no serial rather than a cut one.
        return None;
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 15)];
    }
    Some(&out[..2 * bytes.len()])
}

/// Counts a completed handshake under the serial of the certificate the server
/// presented, at `t` (see [`crate::stats::Totals::certificates`]).
pub(crate) fn count_certificate(
    tally: &mut crate::stats::BackendTally,
    peer: Option<&[CertificateDer<'_>]>,
    t: results::clock::Nanos,
) {
    let mut buf = [0u8; 40];
    if let Some(serial) = peer
        .and_then(|c| c.first())
        .and_then(|leaf| serial_hex(leaf.as_ref(), &mut buf))
    {
        tally.add(serial, 1, t);
    }
}

/// The server name to send and verify: the URL's host.
///
/// # Errors
/// [`TlsSetupError::ServerName`] when the host is neither a DNS name nor an IP.
pub fn server_name(host: &str) -> Result<ServerName<'static>, TlsSetupError> {
    ServerName::try_from(host.to_string()).map_err(|_| TlsSetupError::ServerName(host.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_bad_files() {
        let mut o = TlsOptions::default();
        assert!(client_config(&o).is_ok());
        assert!(matches!(
            parse_version("1.1"),
            Err(TlsSetupError::Version(_))
        ));
        o.version = Some(parse_version("1.3").unwrap());
        o.cacert = Some("/nonexistent/ca.pem".into());
        let e = client_config(&o).unwrap_err().to_string();
        assert!(e.starts_with("--cacert /nonexistent/ca.pem:"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.pem");
        std::fs::write(&f, "hello").unwrap();
        o.cacert = Some(f);
        assert!(client_config(&o)
            .unwrap_err()
            .to_string()
            .contains("no certificate"));
    }

    /// Certificates made by openssl, with serials of every shape (a leading zero
    /// byte kept positive, one byte, the full 20), read as `openssl x509 -serial`
    /// prints them.
    #[test]
    fn the_serial_is_read_as_openssl_prints_it() {
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            let out = std::process::Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .output()
                .expect("openssl");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        for serial in [
            "0x01",
            "0x80ff",
            "0x7f3a5b",
            "0x00c0ffee",
            "0x4a2b3c4d5e6f708192a3b4c5d6e7f80910111213",
        ] {
            run(&[
                "req",
                "-x509",
                "-nodes",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-subj",
                "/CN=x",
                "-days",
                "1",
                "-set_serial",
                serial,
                "-keyout",
                "k.pem",
                "-out",
                "c.pem",
                "-outform",
                "DER",
            ]);
            let der = std::fs::read(dir.path().join("c.pem")).unwrap();
            let printed = run(&[
                "x509", "-inform", "DER", "-in", "c.pem", "-noout", "-serial",
            ]);
            let want = printed
                .trim()
                .trim_start_matches("serial=")
                .to_ascii_lowercase();
            let mut buf = [0u8; 40];
            let got = serial_hex(&der, &mut buf).expect("a certificate");
            assert_eq!(std::str::from_utf8(got).unwrap(), want, "{serial}");
        }
        let mut buf = [0u8; 40];
        assert!(serial_hex(b"", &mut buf).is_none());
        assert!(serial_hex(&[0x30, 0x82, 0xff, 0xff, 0x30], &mut buf).is_none());
        assert!(serial_hex(&[0x30, 0x03, 0x30, 0x01, 0x05], &mut buf).is_none());
    }

    #[test]
    fn ip_and_dns_server_names() {
        assert!(server_name("127.0.0.1").is_ok());
        assert!(server_name("localhost").is_ok());
        assert!(server_name("::1").is_ok());
        assert!(server_name("bad name").is_err());
    }
}
