//! Certificates for a run: generated fresh each time with the openssl command line,
//! a leaf of RSA 2048 (as in the studies) or ECDSA P-256, valid for 127.0.0.1 and
//! localhost, signed by a CA made for the run (ECDSA P-256).
//!
//! The CA is what lets a certificate rotate under load: every leaf it issues has
//! the same names and a new key and serial, and a client that trusts the CA takes
//! each. The load trusts `trust.pem`, the first leaf and the CA: the first leaf is
//! pinned (the engine takes a certificate it was given as it is, with no chain to
//! check, as before the CA existed), so a run without rotations costs the
//! generator what it did.

use crate::driver::SutError;
use crate::tools::{output, which};
use std::path::{Path, PathBuf};
use std::process::Command;

pub use crate::KeyType;

fn openssl() -> Result<PathBuf, SutError> {
    which("openssl").ok_or(SutError::MissingBinary {
        binary: "openssl".into(),
        package: "openssl".into(),
    })
}

fn run(cmd: &mut Command) -> Result<String, SutError> {
    let (ok, out) = output(cmd).map_err(SutError::io("openssl"))?;
    if !ok {
        return Err(SutError::ToolFailed {
            tool: "openssl".into(),
            detail: format!(
                "could not make a certificate: {}",
                out.lines().last().unwrap_or("")
            ),
        });
    }
    Ok(out)
}

/// Generates the run's CA in `dir`, and a first leaf of `key`'s type signed by it;
/// returns (leaf, key). `dir/trust.pem` is what the load trusts ([`trust`]).
///
/// # Errors
/// [`SutError`] when openssl is missing or fails.
pub fn generate(dir: &Path, key: KeyType) -> Result<(PathBuf, PathBuf), SutError> {
    generate_for(dir, key, &[])
}

/// [`generate`], the leaf valid for `names` too (IP addresses or DNS names: the
/// host of a controller's URL), which every leaf [`issue`]d in `dir` keeps.
///
/// # Errors
/// [`SutError`] when openssl is missing or fails.
pub fn generate_for(
    dir: &Path,
    key: KeyType,
    names: &[String],
) -> Result<(PathBuf, PathBuf), SutError> {
    std::fs::write(dir.join("names"), names.join("\n"))
        .map_err(SutError::io("writing the certificate's names"))?;
    let openssl = openssl()?;
    run(Command::new(&openssl)
        .args(["req", "-x509", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=ingressbench lab CA"])
        .args(["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
        .args(["-addext", "basicConstraints=critical,CA:TRUE"])
        .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        .arg("-keyout")
        .arg(dir.join("ca-key.pem"))
        .arg("-out")
        .arg(dir.join("ca.pem")))?;
    let (cert, keyf) = issue_as(dir, key, "cert.pem", "key.pem")?;
    let mut trust = std::fs::read(&cert).map_err(SutError::io("reading the certificate"))?;
    trust.extend(std::fs::read(dir.join("ca.pem")).map_err(SutError::io("reading the CA"))?);
    std::fs::write(dir.join("trust.pem"), trust).map_err(SutError::io("writing trust.pem"))?;
    Ok((cert, keyf))
}

/// What the load trusts for the material `generate` made in `dir`.
pub fn trust(dir: &Path) -> PathBuf {
    dir.join("trust.pem")
}

/// A new leaf from the CA `generate` made in `dir`: the same names, a new key and
/// serial, as `cert-N.pem` and `key-N.pem` (new files, so a proxy that keys its
/// cache by path, like Caddy, sees a change). Returns (leaf, key).
///
/// # Errors
/// [`SutError`] when openssl fails or `generate` was not called on `dir`.
pub fn issue(dir: &Path, key: KeyType, n: u32) -> Result<(PathBuf, PathBuf), SutError> {
    issue_as(dir, key, &format!("cert-{n}.pem"), &format!("key-{n}.pem"))
}

fn issue_as(
    dir: &Path,
    key: KeyType,
    cert_name: &str,
    key_name: &str,
) -> Result<(PathBuf, PathBuf), SutError> {
    let openssl = openssl()?;
    let cert = dir.join(cert_name);
    let keyf = dir.join(key_name);
    let csr = dir.join(format!("{cert_name}.csr"));
    let newkey: &[&str] = match key {
        KeyType::Rsa2048 => &["-newkey", "rsa:2048"],
        KeyType::EcdsaP256 => &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
    };
    let mut san = vec!["IP:127.0.0.1".to_string(), "DNS:localhost".to_string()];
    let names = std::fs::read_to_string(dir.join("names")).unwrap_or_default();
    for n in names.lines().filter(|n| !n.is_empty()) {
        san.push(match n.parse::<std::net::IpAddr>() {
            Ok(ip) => format!("IP:{ip}"),
            Err(_) => format!("DNS:{n}"),
        });
    }
    run(Command::new(&openssl)
        .args(["req", "-new", "-nodes", "-subj", "/CN=localhost"])
        .args(newkey)
        .arg("-keyout")
        .arg(&keyf)
        .arg("-out")
        .arg(&csr))?;
    let ext = dir.join(format!("{cert_name}.ext"));
    std::fs::write(
        &ext,
        format!(
            "subjectAltName={}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
            san.join(",")
        ),
    )
    .map_err(SutError::io("writing the certificate's extensions"))?;
    let signed = run(Command::new(&openssl)
        .args(["x509", "-req", "-days", "2", "-set_serial"])
        .arg(random_serial())
        .arg("-in")
        .arg(&csr)
        .arg("-CA")
        .arg(dir.join("ca.pem"))
        .arg("-CAkey")
        .arg(dir.join("ca-key.pem"))
        .arg("-extfile")
        .arg(&ext)
        .arg("-out")
        .arg(&cert));
    let _ = std::fs::remove_file(&csr);
    let _ = std::fs::remove_file(&ext);
    signed?;
    Ok((cert, keyf))
}

/// A positive 16-byte serial, as `0x…` for `-set_serial`, from the kernel's
/// randomness (no two leaves of a run share one).
fn random_serial() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if read.is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos());
        b = t.to_be_bytes();
    }
    b[0] = (b[0] & 0x7f) | 0x10;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("0x{hex}")
}

/// The serial number of a PEM certificate as lowercase hex, the way the engine
/// records what each handshake saw (`tls.certificates` of a result).
///
/// # Errors
/// [`SutError`] when openssl cannot read it.
pub fn serial(cert: &Path) -> Result<String, SutError> {
    let openssl = openssl()?;
    let (ok, out) = output(
        Command::new(openssl)
            .args(["x509", "-noout", "-serial", "-in"])
            .arg(cert),
    )
    .map_err(SutError::io("openssl"))?;
    if !ok {
        return Err(SutError::ToolFailed {
            tool: "openssl".into(),
            detail: format!(
                "could not read the certificate {}: {}",
                cert.display(),
                out.lines().last().unwrap_or("")
            ),
        });
    }
    let hex = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("serial="))
        .ok_or_else(|| SutError::ToolFailed {
            tool: "openssl".into(),
            detail: format!("printed no serial for {}", cert.display()),
        })?;
    Ok(hex.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_key_types_are_issued_by_one_ca_with_new_serials() {
        let d = tempfile::tempdir().unwrap();
        for k in [KeyType::Rsa2048, KeyType::EcdsaP256] {
            let (c, key) = generate(d.path(), k).unwrap();
            let pem = std::fs::read_to_string(&c).unwrap();
            assert!(pem.contains("BEGIN CERTIFICATE"));
            assert!(std::fs::read_to_string(&key)
                .unwrap()
                .contains("PRIVATE KEY"));
            let (c2, k2) = issue(d.path(), k, 2).unwrap();
            assert_ne!(serial(&c).unwrap(), serial(&c2).unwrap());
            assert_ne!(std::fs::read(&key).unwrap(), std::fs::read(&k2).unwrap());
            // Both verify against the CA; the trust file holds the first leaf and the CA.
            for leaf in [&c, &c2] {
                let (ok, out) = output(
                    Command::new("openssl")
                        .arg("verify")
                        .arg("-CAfile")
                        .arg(d.path().join("ca.pem"))
                        .arg(leaf),
                )
                .unwrap();
                assert!(ok, "{out}");
            }
            let t = std::fs::read_to_string(trust(d.path())).unwrap();
            assert_eq!(t.matches("BEGIN CERTIFICATE").count(), 2);
        }
    }
}
