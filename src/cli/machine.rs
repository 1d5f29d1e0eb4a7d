//! `ingressbench machine`: is this machine quiet enough to measure on? One second's
//! look at what a run would meet (the timed-wait floor, time the hypervisor steals,
//! other processes' CPU, stalls of the whole machine), or, with `--settle`, a wait
//! for the machine to be back to its normal before a benchmark or the timing tests
//! (`make test` runs it before them).

use super::{duration, usage};
use clap::Args;
use engine::machine::{self, Look};
use results::clock::Clock;

/// Flags of `ingressbench machine`.
#[derive(Args, Debug)]
pub struct MachineArgs {
    /// Wait up to this long for two quiet seconds in a row (exit 1 if none came).
    #[arg(long, value_name = "DURATION")]
    pub settle: Option<String>,
}

fn line(l: &Look, quiet: bool) -> String {
    let m = &l.machine;
    format!(
        "wake-up p99 {:.0} us, steal {:.0} ms (up to {:.1} % of a CPU), other processes {:.2} cores, {} stall{} (longest {:.1} ms){}: {}",
        l.wakeup_p99_us,
        m.steal_ms,
        m.steal_share * 100.0,
        m.others_cores,
        m.stalls,
        if m.stalls == 1 { "" } else { "s" },
        m.stall_max_ms,
        if m.probe_raised { "" } else { " (probe not raised: stalls not judged)" },
        if quiet { "quiet" } else { "busy" }
    )
}

pub fn run(args: MachineArgs) -> anyhow::Result<i32> {
    let clock = Clock::start();
    let Some(limit) = &args.settle else {
        let l = machine::look(clock, std::time::Duration::from_secs(1));
        let q = machine::quiet(&l, l.wakeup_p99_us, 1000.0);
        println!("{}", line(&l, q));
        return Ok(0);
    };
    let limit = duration::parse(limit).map_err(|e| usage(format!("--settle: {e}")))?;
    let s = machine::settle(clock, limit, |l, q| println!("  {}", line(l, q)));
    let verdict = if s.settled { "settled" } else { "NOT settled" };
    println!(
        "machine {verdict} after {:.1} s ({} looks; its wake-up floor p99 {:.0} us)",
        s.waited.as_secs_f64(),
        s.looks,
        s.floor_p99_us
    );
    Ok(if s.settled { 0 } else { 1 })
}
