//! The few ways a part of the system under test runs a command-line tool: found on
//! PATH (or in the sbin folders, where Debian puts nginx and haproxy), run to its
//! end with its output kept.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The first `binary` on PATH, or in the sbin folders a user's PATH may lack.
pub fn which(binary: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"])
        .map(|d| Path::new(d).join(binary))
        .find(|p| p.is_file());
    found
}

/// Runs a short command to completion and returns its stdout and stderr joined.
///
/// # Errors
/// The I/O error when it cannot start.
pub fn output(cmd: &mut Command) -> std::io::Result<(bool, String)> {
    let o = cmd.stdin(Stdio::null()).output()?;
    let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&o.stderr));
    Ok((o.status.success(), s))
}
