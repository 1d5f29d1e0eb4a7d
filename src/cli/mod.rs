//! The command line: parses arguments into plain validated input, resolves it into a
//! plan for one of the parts, and turns every failure into one line and an exit code.
//!
//! Exit codes: 0 success, 1 a run that failed or crossed a threshold, 2 bad input.

mod backend;
mod compare;
mod generators;
pub use results::duration;
mod load;
mod machine;
mod metrics;
mod probe;
mod report;
mod request;
mod run;
mod search;

use clap::{Parser, Subcommand};

/// Bad input from the user: printed as one line, exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Shorthand for a usage error wrapped for `anyhow`.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

#[derive(Parser, Debug)]
#[command(
    name = "ingressbench",
    version,
    about = "Open-loop load, real proxies under churn, and reports that compare them"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate load at a constant rate (wrk2's flags) and measure latency.
    Load(Box<load::LoadArgs>),
    /// Run the studies' backend: ~1 KB plain-text answers with an x-backend header.
    Backend(backend::BackendArgs),
    /// Run a scenario: real proxies, changed while the load runs, side by side.
    Run(run::RunArgs),
    /// Find the highest constant rate a server holds within a p99 and an error bound.
    Search(Box<search::SearchArgs>),
    /// Check a scenario file without running it.
    Validate(run::ValidateArgs),
    /// Send a scenario's behaviour probes to each of its systems, without a load,
    /// and say where each answers otherwise than the baseline.
    Probe(probe::ProbeArgs),
    /// Remove what interrupted or killed runs left in a cluster (their namespaces).
    Cleanup(run::CleanupArgs),
    /// Compare saved runs: deltas per system; exit 1 when --max-regression is crossed.
    Compare(compare::CompareArgs),
    /// Draw the report of saved runs (one page: charts and tables), side by side.
    Report(report::ReportArgs),
    /// Is this machine quiet enough to measure on? Its timed-wait floor, stolen
    /// time, other processes' CPU and stalls; --settle waits for two quiet seconds.
    Machine(machine::MachineArgs),
    /// Internal: one generator of a load split by `load --generators` or `run
    /// --generators`, started by the coordinator with the whole load as data.
    #[command(name = "generator", hide = true)]
    Generator(Box<generators::GeneratorArgs>),
    /// Internal: cleans up after a killed `run` (see lab::watchdog).
    #[command(name = "__watchdog", hide = true)]
    Watchdog {
        /// The process watched (for `ps`; the pipe on stdin is what ends it).
        #[arg(long)]
        parent: u32,
    },
}

/// Runs the program and returns its exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_error(e),
    };
    let res = match cli.command {
        Command::Load(args) => match load::mode(&args) {
            Ok(load::Mode::Coordinator) => generators::coordinate(&args),
            Ok(load::Mode::Kubernetes) => generators::coordinate_kubernetes(&args),
            Ok(load::Mode::Single) => load::run(*args),
            Err(e) => Err(e),
        },
        Command::Backend(args) => backend::run(args),
        Command::Run(args) => run::run(args),
        Command::Search(args) => search::run(*args),
        Command::Generator(args) => generators::run_part(&args),
        Command::Validate(args) => run::validate(args),
        Command::Probe(args) => probe::run(args),
        Command::Cleanup(args) => run::cleanup(args),
        Command::Compare(args) => compare::run(args),
        Command::Report(args) => report::run(args),
        Command::Machine(args) => machine::run(args),
        Command::Watchdog { parent: _ } => {
            lab::watchdog::serve(std::io::stdin().lock(), || {
                lab::cgroup::sweep();
            });
            Ok(0)
        }
    };
    match res {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ingressbench: {}", one_line(&e));
            if e.chain().any(|c| c.downcast_ref::<UsageError>().is_some()) {
                2
            } else {
                1
            }
        }
    }
}

/// The error chain as one line: "outer: inner: root". The parts' messages carry
/// only their own context, their cause being `source()`, so each cause is printed
/// once by walking the chain ([`results::causes`]).
fn one_line(e: &anyhow::Error) -> String {
    results::with_causes(&**e)
}

/// Clap's errors are several lines with usage; users asked for one clear line.
fn clap_error(e: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            0
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            let _ = e.print();
            2
        }
        _ => {
            let rendered = e.render().to_string();
            // The first line, plus the indented lines clap lists under it
            // ("the following required arguments were not provided:\n  <URL>").
            let mut lines = rendered.lines().skip_while(|l| l.trim().is_empty());
            let mut first = lines
                .next()
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ")
                .to_string();
            for l in lines.take_while(|l| l.starts_with("  ")) {
                first.push(' ');
                first.push_str(l.trim());
            }
            let tip = rendered
                .lines()
                .find(|l| l.trim_start().starts_with("tip:"))
                .map(|l| format!(" ({})", l.trim()))
                .unwrap_or_default();
            eprintln!("ingressbench: {first}{tip} (see --help)");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_is_printed_once() {
        // A part's error under the binary's context, as `backend` fails to bind.
        let io = std::io::Error::from_raw_os_error(libc::EADDRINUSE);
        let bind = ::backend::Error::Bind {
            addr: "127.0.0.1:80".parse().unwrap(),
            source: io,
        };
        let e = anyhow::Error::new(bind).context("backend");
        assert_eq!(
            one_line(&e),
            "backend: listen 127.0.0.1:80: Address already in use (os error 98)"
        );
        // A run's error over a lab error over an I/O error: three levels, each once.
        let lab = lab::SutError::Io {
            what: "start nginx".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        };
        let run = scenario::runner::RunError::Lab {
            system: "nginx-reload".into(),
            source: lab,
        };
        assert_eq!(
            one_line(&anyhow::Error::new(run)),
            "nginx-reload: start nginx: No such file or directory (os error 2)"
        );
        let e = anyhow::anyhow!("root").context("middle").context("outer");
        assert_eq!(one_line(&e), "outer: middle: root");
    }
}
