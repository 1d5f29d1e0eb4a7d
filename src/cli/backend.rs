//! `ingressbench backend`: flags of the built-in backend (owned by the backend work).

/// Flags of `ingressbench backend`.
#[derive(clap::Args, Debug)]
pub struct BackendArgs {}

/// Runs the backend until SIGTERM/SIGINT.
pub fn run(_args: BackendArgs) -> anyhow::Result<i32> {
    Err(super::usage("backend: not built yet"))
}
