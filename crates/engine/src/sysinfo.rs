//! The machine a run happened on, recorded in every result: numbers from two
//! machines are not comparable, and a report must say where its numbers came from.

use results::Machine;

/// Reads CPU model, core count, kernel and host name from /proc and the OS.
pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into())
    };
    Machine {
        cpu_model,
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        kernel: read("/proc/sys/kernel/osrelease"),
        hostname: read("/proc/sys/kernel/hostname"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_machine_is_described() {
        let m = super::machine();
        assert!(m.cores >= 1);
        assert!(
            m.kernel.chars().next().is_some_and(|c| c.is_ascii_digit()),
            "{}",
            m.kernel
        );
        assert_ne!(m.cpu_model, "");
    }
}
