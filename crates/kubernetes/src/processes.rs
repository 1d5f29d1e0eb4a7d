//! A controller's processes on this machine, found by their command lines: where a
//! cluster runs on the machine the run runs on (kind, the test environment), its
//! controller's CPU and memory are read from `/proc` as a local proxy's are, with no
//! metrics API needed.

use std::collections::BTreeSet;

/// The process group of a `/proc/PID/stat` line (field 5), after the command name,
/// which may hold spaces and parentheses.
fn pgid_of(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(2)?.parse().ok()
}

/// The process groups of the live processes whose command line (its arguments
/// joined by spaces) contains `text`, except this process's own group (a run
/// started beside the controller in one group would otherwise read itself).
pub fn groups_matching(text: &str) -> Vec<u32> {
    let own = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| pgid_of(&s));
    let mut groups = BTreeSet::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if !cmd.contains(text) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(g) = pgid_of(&stat).filter(|g| Some(*g) != own && *g != 0) {
            groups.insert(g);
        }
    }
    groups.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn a_stat_lines_group_is_read_past_a_name_with_spaces() {
        assert_eq!(pgid_of("42 (a b) c) S 1 77 77 0 -1"), Some(77));
        assert_eq!(pgid_of("garbage"), None);
    }

    #[test]
    fn processes_are_found_by_command_line_in_their_own_group_and_never_in_ours() {
        let marker = format!("ib-processes-test-{}", std::process::id());
        // A process in a group of its own, its command line holding the marker.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read x", &marker])
            .stdin(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let t = std::time::Instant::now();
        let mut found = Vec::new();
        while found.is_empty() && t.elapsed() < std::time::Duration::from_secs(5) {
            found = groups_matching(&marker);
        }
        assert_eq!(found, vec![child.id()], "its own group, once");
        // This process's command line (the test binary's) never matches a group
        // of ours: the test filter is not in it, but our group is refused anyway.
        let own = pgid_of(&std::fs::read_to_string("/proc/self/stat").unwrap()).unwrap();
        assert!(!groups_matching("").contains(&own), "our own group");
        drop(child.stdin.take());
        child.wait().unwrap();
        assert!(groups_matching(&marker).is_empty(), "gone once it exits");
    }
}
