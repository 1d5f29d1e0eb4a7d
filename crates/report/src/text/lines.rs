//! One-line descriptions of what a run had beside its load: its route set and each
//! route added or removed under load, and its request mix. The terminal summary
//! and `summary.txt` write the same lines.

use crate::fmt::{fmt_bytes, fmt_ms};

/// A route set in one line: its size, what it cost, and how long until every route
/// served (or which never did).
pub fn route_set_line(rs: &results::RouteSetResult) -> String {
    let bytes = rs.config_bytes.map_or(String::new(), |b| {
        format!(", {} of configuration", fmt_bytes(b as f64))
    });
    let served = match rs.all_served_ms {
        Some(ms) => format!("every route served {} after the apply", fmt_ms(ms)),
        None => {
            let list: Vec<String> = rs.never.iter().take(5).map(|i| format!("r{i}")).collect();
            format!(
                "{} of {} never served within {} ({}{})",
                rs.never_count,
                rs.count,
                fmt_ms(rs.bound_ms),
                list.join(", "),
                if rs.never_count > 5 { ", ..." } else { "" }
            )
        }
    };
    let writes = rs.status_writes.map_or(String::new(), |w| {
        format!(
            "; reported in force after {} ({w} status writes)",
            fmt_ms(rs.settled_ms)
        )
    });
    let cost = match (rs.apply_cpu_s, rs.rss_mib) {
        (Some(cpu), Some(rss)) => format!("; {cpu:.2} s of CPU to render it, {rss:.0} MiB after"),
        _ => String::new(),
    };
    format!(
        "Route set: {} routes over {} hosts{bytes}, applied in {}; {served}{writes}{cost}",
        rs.count,
        rs.hosts,
        fmt_ms(rs.apply_ms)
    )
}

/// One route added to or removed from the running set, in one line: when, and how
/// long until traffic showed it.
pub fn route_set_change_line(c: &results::RouteSetChange) -> String {
    let (did, shown) = match c.change.as_str() {
        "add" => ("added", "served"),
        "change" => ("changed", "served as changed"),
        _ => ("removed", "gone"),
    };
    let applied = c.applied_ms.map_or("the change failed".to_string(), |ms| {
        format!("applied in {}", fmt_ms(ms))
    });
    let seen = c
        .shown_ms
        .map_or(format!("not {shown} within {}", fmt_ms(c.bound_ms)), |ms| {
            format!("{shown} after {}", fmt_ms(ms))
        });
    let writes = c
        .status_writes
        .map_or(String::new(), |w| format!(", {w} status writes"));
    format!(
        "Route {} {did} at {} ({} routes after): {seen}, {applied}{writes}",
        c.route,
        fmt_ms(c.at_ms),
        c.routes_after
    )
}

/// How many of the slowest and of the most failing groups the summary names.
const MIX_SHOWN: usize = 5;

/// The request mix in a few lines: its size and hosts, then the slowest groups by
/// p99 and the groups with the most errors (a route that fails is one among
/// thousands, and the totals hide it).
pub fn mix_lines(m: &results::MixResult) -> Vec<String> {
    let mut out = Vec::new();
    let shown = 8;
    let mut hosts: Vec<String> = m
        .hosts
        .iter()
        .take(shown)
        .map(|h| format!("{} {}", h.host, h.connections))
        .collect();
    if m.hosts.len() > shown {
        hosts.push(format!("... ({} more)", m.hosts.len() - shown));
    }
    out.push(format!(
        "Request mix: {} target{} over {} host{}, figures by {}; connections per host: {}",
        m.targets,
        if m.targets == 1 { "" } else { "s" },
        m.hosts.len(),
        if m.hosts.len() == 1 { "" } else { "s" },
        m.grouped_by,
        hosts.join(", ")
    ));
    let mut slow: Vec<&results::MixGroup> =
        m.groups.iter().filter(|g| g.latency_ms.is_some()).collect();
    slow.sort_by(|a, b| {
        let p = |g: &results::MixGroup| g.latency_ms.as_ref().map_or(0.0, |l| l.p99);
        p(b).total_cmp(&p(a))
    });
    if slow.len() > 1 {
        let list: Vec<String> = slow
            .iter()
            .take(MIX_SHOWN)
            .map(|g| {
                let l = g.latency_ms.as_ref().expect("filtered");
                format!("{} {} ({} requests)", g.name, fmt_ms(l.p99), g.requests)
            })
            .collect();
        out.push(format!("Slowest by p99: {}", list.join("; ")));
    }
    let mut failing: Vec<&results::MixGroup> = m.groups.iter().filter(|g| g.failed() > 0).collect();
    failing.sort_by_key(|g| std::cmp::Reverse(g.failed()));
    if !failing.is_empty() {
        let list: Vec<String> = failing
            .iter()
            .take(MIX_SHOWN)
            .map(|g| {
                let kinds: Vec<String> = g.errors.iter().map(|(k, n)| format!("{k} {n}")).collect();
                format!(
                    "{} {} of {} failed ({})",
                    g.name,
                    g.failed(),
                    g.requests,
                    kinds.join(", ")
                )
            })
            .collect();
        out.push(format!(
            "Most failing: {}{}",
            list.join("; "),
            if failing.len() > MIX_SHOWN {
                format!(" ... ({} groups failed in all)", failing.len())
            } else {
                String::new()
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_set_change_says_when_traffic_showed_it_or_that_it_did_not() {
        let mut c = results::RouteSetChange {
            change: "add".into(),
            route: "r1000".into(),
            routes_after: 1001,
            at_ms: 1000.0,
            applied_ms: Some(8.0),
            shown_ms: Some(12.5),
            bound_ms: 60_000.0,
            probes: 3,
            status_writes: None,
        };
        let l = route_set_change_line(&c);
        assert!(l.starts_with("Route r1000 added at 1"), "{l}");
        assert!(!l.contains("status writes"), "a local proxy has none: {l}");
        c.status_writes = Some(2);
        let l = route_set_change_line(&c);
        assert!(l.ends_with(", 2 status writes"), "{l}");
        assert!(l.contains("(1001 routes after): served after 12"), "{l}");
        assert!(l.contains("applied in 8"), "{l}");
        c.change = "remove".into();
        c.shown_ms = None;
        c.applied_ms = None;
        let l = route_set_change_line(&c);
        assert!(
            l.contains("removed") && l.contains("not gone within"),
            "{l}"
        );
        assert!(l.contains("the change failed"), "{l}");
    }
}
