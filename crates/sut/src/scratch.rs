//! Scratch folders: every platform makes a system's scratch space (pid files,
//! sockets, certificates) here, registered with the [`watchdog`](crate::watchdog) so a
//! killed run does not leave it, with its private key, behind.

use crate::driver::SutError;

/// Scratch folders are `<tmp>/ingressbench-run-<pid>-<random>`: the pid says whose
/// they are, so a later run can tell a dead run's leftovers from a live one's.
pub const SCRATCH_PREFIX: &str = "ingressbench-run-";

/// A run's scratch folder for one system, `<tmp>/ingressbench-run-<pid>-<random>`,
/// registered with the watchdog so a killed run does not leave it (with its private
/// key) behind. Every platform makes its scratch space here.
///
/// # Errors
/// [`SutError::Io`] when the folder cannot be made.
pub fn scratch_dir() -> Result<tempfile::TempDir, SutError> {
    let work = tempfile::Builder::new()
        .prefix(&format!("{SCRATCH_PREFIX}{}-", std::process::id()))
        .tempdir()
        .map_err(SutError::io("create a temp folder"))?;
    crate::watchdog::watch_path(work.path());
    Ok(work)
}

/// Removes a scratch folder made by [`scratch_dir`] and unregisters it.
pub fn remove_scratch(w: tempfile::TempDir) {
    let path = w.path().to_path_buf();
    drop(w);
    crate::watchdog::unwatch_path(&path);
}
