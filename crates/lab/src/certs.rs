//! Certificates for a run: generated fresh each time with the openssl command line,
//! RSA 2048 (as in the studies) or ECDSA P-256, valid for 127.0.0.1 and localhost.

use super::driver::LabError;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use sut::KeyType;

/// Generates a self-signed certificate and key in `dir`; returns (cert, key).
///
/// # Errors
/// [`LabError`] when openssl is missing or fails.
pub fn generate(dir: &Path, key: KeyType) -> Result<(PathBuf, PathBuf), LabError> {
    let openssl = super::proc::which("openssl").ok_or(LabError::MissingBinary {
        binary: "openssl".into(),
        package: "openssl".into(),
    })?;
    let cert = dir.join("cert.pem");
    let keyf = dir.join("key.pem");
    let newkey: &[&str] = match key {
        KeyType::Rsa2048 => &["-newkey", "rsa:2048"],
        KeyType::EcdsaP256 => &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
    };
    let (ok, out) = super::proc::output(
        Command::new(openssl)
            .args([
                "req",
                "-x509",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=localhost",
            ])
            .args(newkey)
            .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
            .arg("-keyout")
            .arg(&keyf)
            .arg("-out")
            .arg(&cert),
    )
    .map_err(LabError::io("openssl"))?;
    if !ok {
        return Err(LabError::Other(format!(
            "openssl could not make a certificate: {}",
            out.lines().last().unwrap_or("")
        )));
    }
    Ok((cert, keyf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_key_types_are_generated() {
        let d = tempfile::tempdir().unwrap();
        for k in [KeyType::Rsa2048, KeyType::EcdsaP256] {
            let (c, key) = generate(d.path(), k).unwrap();
            let pem = std::fs::read_to_string(&c).unwrap();
            assert!(pem.contains("BEGIN CERTIFICATE"));
            assert!(std::fs::read_to_string(&key)
                .unwrap()
                .contains("PRIVATE KEY"));
        }
    }
}
