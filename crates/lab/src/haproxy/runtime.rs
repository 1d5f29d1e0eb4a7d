//! HAProxy's two unix sockets, and what the driver reads and says on them: the master
//! socket's `show proc` (which workers run, how many reloads failed), and in
//! `haproxy-runtime` the admin socket's runtime API: server-template slots assigned to
//! endpoints and pointed at them (`set server ... addr`, `state ready|maint`),
//! `show servers state` parsed and compared with the wanted slots, and the state file
//! saved before a reload so the next worker starts with the same slots.

use super::config::BACKEND;
use super::{Haproxy, SLOTS};
use crate::driver::{Driver, Endpoint, SutError};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// `srv_admin_state` bit "disabled in the configuration": the template's `disabled`
/// keeps it set even after `state ready`, so it does not mean out of rotation.
const ADMF_CMAINT: u32 = 0x04;
/// `srv_op_state` of a server that takes traffic.
const OP_RUNNING: u32 = 2;

impl Haproxy {
    /// Sends one runtime API command on the admin socket and checks its reply.
    pub(super) fn runtime_command(&self, command: &str) -> Result<(), SutError> {
        let admin = self.run()?.admin_sock();
        let reply = cli(&admin, command).map_err(SutError::io(format!(
            "haproxy runtime API {}",
            admin.display()
        )))?;
        if runtime_reply_ok(&reply) {
            Ok(())
        } else {
            Err(SutError::Rejected {
                what: format!("haproxy runtime command '{command}'"),
                detail: reply.trim().to_string(),
            })
        }
    }

    /// Tells the running process every slot change between `applied` and `slots`:
    /// new endpoints first, removals last, so capacity never dips in between.
    pub(super) fn push_slots(&mut self) -> Result<(), SutError> {
        for i in 0..SLOTS {
            let Some(want) = self.slots[i].as_ref().map(|e| e.addr) else {
                continue;
            };
            if self.applied[i] == Some(want) {
                continue;
            }
            let name = format!("{BACKEND}/s{}", i + 1);
            if self.applied[i].is_some() {
                self.runtime_command(&format!("set server {name} state maint"))?;
                self.applied[i] = None;
            }
            self.runtime_command(&format!(
                "set server {name} addr {} port {}",
                want.ip(),
                want.port()
            ))?;
            self.runtime_command(&format!("set server {name} state ready"))?;
            self.applied[i] = Some(want);
        }
        for i in 0..SLOTS {
            if self.slots[i].is_none() && self.applied[i].is_some() {
                self.runtime_command(&format!("set server {BACKEND}/s{} state maint", i + 1))?;
                self.applied[i] = None;
            }
        }
        Ok(())
    }

    /// Reads `show servers state` and compares it with the wanted slots. When they
    /// differ, pushes the difference and returns false (the caller reads again).
    pub(super) fn sync_slots(&mut self) -> Result<bool, SutError> {
        let admin = self.run()?.admin_sock();
        let Ok(text) = cli(&admin, &format!("show servers state {BACKEND}")) else {
            return Ok(false);
        };
        let states = parse_servers_state(&text);
        if states.is_empty() {
            return Ok(false);
        }
        let mut actual = vec![None; SLOTS];
        let mut matches = true;
        for (i, slot) in actual.iter_mut().enumerate() {
            let name = format!("s{}", i + 1);
            let st = states.iter().find(|s| s.name == name);
            *slot = st.filter(|s| s.serving()).map(|s| s.addr);
            let want = self.slots[i].as_ref().map(|e| e.addr);
            matches &= st.is_some() && *slot == want;
        }
        if matches {
            self.applied = actual;
            return Ok(true);
        }
        self.applied = actual;
        self.push_slots()?;
        Ok(false)
    }

    /// Saves the runtime slots where the next worker loads them from.
    pub(super) fn save_server_state(&mut self) -> Result<(), SutError> {
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.sync_slots()? {
            if Instant::now() >= deadline {
                return Err(SutError::NotReady(format!("{} runtime slots", self.name())));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let run = self.run()?;
        let text = cli(&run.admin_sock(), "show servers state")
            .map_err(SutError::io("haproxy runtime API: show servers state"))?;
        if !text.starts_with("1\n") {
            return Err(SutError::ToolFailed {
                tool: "haproxy runtime API".into(),
                detail: format!("unexpected server state dump: {}", first_line(&text)),
            });
        }
        let path = run.state_file();
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, &text).map_err(SutError::io(format!("writing {}", tmp.display())))?;
        std::fs::rename(&tmp, &path).map_err(SutError::io(format!("writing {}", path.display())))
    }

    /// The pid of the process answering on the admin socket.
    pub(super) fn admin_pid(&self) -> Option<u32> {
        let text = cli(&self.run.as_ref()?.admin_sock(), "show info").ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("Pid:"))
            .and_then(|p| p.trim().parse().ok())
    }
}

/// Puts `wanted` into slots: endpoints already placed keep their slot (their address
/// follows if it changed), new ones take slots that were free before this change
/// first, so a removed endpoint's slot is not swapped in the same step.
pub(super) fn assign_slots(
    current: &[Option<Endpoint>],
    wanted: &[Endpoint],
) -> Vec<Option<Endpoint>> {
    let mut next: Vec<Option<Endpoint>> = current
        .iter()
        .map(|slot| {
            slot.as_ref()
                .and_then(|e| wanted.iter().find(|w| w.id == e.id).cloned())
        })
        .collect();
    next.resize(SLOTS, None);
    let free_before = (0..SLOTS).filter(|&i| current.get(i).is_none_or(Option::is_none));
    let freed_now = (0..SLOTS).filter(|&i| current.get(i).is_some_and(Option::is_some));
    let mut free: Vec<usize> = free_before
        .chain(freed_now)
        .filter(|&i| next[i].is_none())
        .collect();
    free.reverse();
    for w in wanted {
        if next.iter().flatten().any(|e| e.id == w.id) {
            continue;
        }
        if let Some(i) = free.pop() {
            next[i] = Some(w.clone());
        }
    }
    next
}

/// `show proc` on the master socket, as far as reloads are concerned.
#[derive(Debug, PartialEq)]
pub(super) struct ProcTable {
    pub(super) reloads: u32,
    pub(super) failed: u32,
    pub(super) workers: Vec<Worker>,
}

#[derive(Debug, PartialEq)]
pub(super) struct Worker {
    pub(super) pid: u32,
    /// Reloads since the worker started: 0 for the current one.
    pub(super) reloads: u32,
}

impl ProcTable {
    /// Parses `show proc`; `None` without a master line (a partial answer).
    pub(super) fn parse(text: &str) -> Option<ProcTable> {
        let mut master = None;
        let mut workers = Vec::new();
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (Some(pid), Some(kind), Some(reloads)) = (
                f.first().and_then(|p| p.parse::<u32>().ok()),
                f.get(1),
                f.get(2).and_then(|r| r.parse::<u32>().ok()),
            ) else {
                continue;
            };
            match *kind {
                "master" => {
                    // `1 [failed: 0]`
                    let failed = f
                        .iter()
                        .position(|w| *w == "[failed:")
                        .and_then(|i| f.get(i + 1))
                        .and_then(|n| n.trim_end_matches(']').parse().ok())
                        .unwrap_or(0);
                    master = Some((reloads, failed));
                }
                "worker" => workers.push(Worker { pid, reloads }),
                _ => {}
            }
        }
        let (reloads, failed) = master?;
        Some(ProcTable {
            reloads,
            failed,
            workers,
        })
    }
}

/// One line of `show servers state`.
#[derive(Debug, PartialEq)]
struct ServerState {
    name: String,
    addr: SocketAddr,
    op_state: u32,
    admin_state: u32,
}

impl ServerState {
    /// Takes traffic: running and in no maintenance or drain beyond the template's
    /// "disabled in the configuration" flag.
    fn serving(&self) -> bool {
        self.op_state == OP_RUNNING && self.admin_state & !ADMF_CMAINT == 0
    }
}

/// Parses `show servers state <backend>` (format 1), finding columns by the header.
fn parse_servers_state(text: &str) -> Vec<ServerState> {
    let mut cols = [
        "srv_name",
        "srv_addr",
        "srv_op_state",
        "srv_admin_state",
        "srv_port",
    ]
    .map(|_| None);
    let mut out = Vec::new();
    for l in text.lines() {
        if let Some(header) = l.strip_prefix('#') {
            let names: Vec<&str> = header.split_whitespace().collect();
            for (c, want) in cols.iter_mut().zip([
                "srv_name",
                "srv_addr",
                "srv_op_state",
                "srv_admin_state",
                "srv_port",
            ]) {
                *c = names.iter().position(|n| *n == want);
            }
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        let get = |i: Option<usize>| i.and_then(|i| f.get(i)).copied();
        let [name, addr, op, admin, port] = cols.map(get);
        let (Some(name), Some(addr), Some(op), Some(admin), Some(port)) =
            (name, addr, op, admin, port)
        else {
            continue;
        };
        let (Ok(ip), Ok(port), Ok(op_state), Ok(admin_state)) = (
            addr.parse::<std::net::IpAddr>(),
            port.parse::<u16>(),
            op.parse(),
            admin.parse(),
        ) else {
            continue;
        };
        out.push(ServerState {
            name: name.to_string(),
            addr: SocketAddr::new(ip, port),
            op_state,
            admin_state,
        });
    }
    out
}

/// Whether a runtime API reply means success: `state` answers nothing, `addr` says
/// what it changed. Anything else (`No such server.`, usage text) is an error.
fn runtime_reply_ok(reply: &str) -> bool {
    let r = reply.trim();
    r.is_empty() || r.starts_with("no need to change the addr") || r.starts_with("IP changed from")
}

/// One command on a haproxy CLI socket (non-interactive: it answers and closes).
pub(super) fn cli(path: &Path, command: &str) -> std::io::Result<String> {
    let mut s = send(path, command)?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// Sends a command with a multi-line payload (`... <<\n` then the lines and an
/// empty line, as `set ssl cert` takes a PEM) and reads the reply.
pub(super) fn cli_payload(path: &Path, command: &str) -> std::io::Result<String> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(command.as_bytes())?;
    s.shutdown(Shutdown::Write)?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// Connects and writes `command`, leaving the reply unread.
pub(super) fn send(path: &Path, command: &str) -> std::io::Result<UnixStream> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(format!("{command}\n").as_bytes())?;
    s.shutdown(Shutdown::Write)?;
    Ok(s)
}

/// The TLS handshakes of frontend `fe` in `show stat`'s CSV: `ssl_sess` counts the
/// sessions established with a full handshake, `ssl_reused_sess` the resumed ones
/// (checked by hand on HAProxy 2.6: two resumptions of one session read 1 and 2).
pub(super) fn parse_ssl_stat(csv: &str) -> Option<crate::driver::Handshakes> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next()?.trim_start_matches("# ").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (sess, reused) = (col("ssl_sess")?, col("ssl_reused_sess")?);
    let row: Vec<&str> = lines
        .find(|l| l.starts_with("fe,FRONTEND,"))?
        .split(',')
        .collect();
    let n = |i: usize| row.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(crate::driver::Handshakes {
        full: n(sess)?,
        resumed: n(reused)?,
        source: "haproxy show stat (ssl_sess, ssl_reused_sess)",
    })
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::haproxy::tests::ep;

    #[test]
    fn slots_keep_their_endpoint_and_new_ones_take_free_slots_first() {
        let empty = vec![None; SLOTS];
        let s = assign_slots(&empty, &[ep("b1", 1), ep("b2", 2)]);
        assert_eq!(s[0], Some(ep("b1", 1)));
        assert_eq!(s[1], Some(ep("b2", 2)));
        // b1 leaves, b3 joins: b2 stays in s2, b3 takes s3 (free before), s1 empties.
        let s2 = assign_slots(&s, &[ep("b2", 2), ep("b3", 3)]);
        assert_eq!(s2[0], None);
        assert_eq!(s2[1], Some(ep("b2", 2)));
        assert_eq!(s2[2], Some(ep("b3", 3)));
        assert_eq!(s2.len(), SLOTS);
        // A moved endpoint keeps its slot with the new address.
        let s3 = assign_slots(&s2, &[ep("b2", 22), ep("b3", 3)]);
        assert_eq!(s3[1], Some(ep("b2", 22)));
        // When the never-used slots run out, freed ones are taken.
        let full: Vec<Endpoint> = (0..SLOTS)
            .map(|i| ep(&format!("x{i}"), 100 + i as u16))
            .collect();
        let s4 = assign_slots(&empty, &full);
        let mut next = full[1..].to_vec();
        next.push(ep("new", 9));
        let s5 = assign_slots(&s4, &next);
        assert_eq!(s5[0], Some(ep("new", 9)));
        assert!(s5.iter().all(Option::is_some));
    }

    #[test]
    fn show_proc_is_parsed() {
        let text =
            "#<PID>          <type>          <reloads>       <uptime>        <version>      \n\
            16656           master          1 [failed: 0]   0d00h00m07s     2.6.12-1+deb12u4\n\
            # workers\n\
            17087           worker          0               0d00h00m00s     2.6.12-1+deb12u4\n\
            16660           worker          1               0d00h00m07s     2.6.12-1+deb12u4\n\
            # programs\n\n";
        assert_eq!(
            ProcTable::parse(text),
            Some(ProcTable {
                reloads: 1,
                failed: 0,
                workers: vec![
                    Worker {
                        pid: 17087,
                        reloads: 0
                    },
                    Worker {
                        pid: 16660,
                        reloads: 1
                    }
                ],
            })
        );
        let failed = "16656           master          3 [failed: 1]   0d00h00m07s     2.6.12\n";
        let t = ProcTable::parse(failed).unwrap();
        assert_eq!((t.reloads, t.failed), (3, 1));
        assert_eq!(ProcTable::parse(""), None);
    }

    #[test]
    fn servers_state_is_parsed() {
        let text = "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port\n\
            3 be 1 s1 127.0.0.1 2 4 1 1 0 1 0 0 8 0 0 0 - 34403 - 0 0 - - 0\n\
            3 be 2 s2 127.0.0.1 0 5 1 1 0 1 0 0 8 0 0 0 - 1 - 0 0 - - 0\n\
            3 be 3 s3 127.0.0.1 2 12 1 1 0 1 0 0 8 0 0 0 - 50337 - 0 0 - - 0\n";
        let s = parse_servers_state(text);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].name, "s1");
        assert_eq!(s[0].addr, "127.0.0.1:34403".parse().unwrap());
        assert!(s[0].serving());
        assert!(!s[1].serving(), "maint");
        assert!(!s[2].serving(), "drain");
    }

    #[test]
    fn the_frontends_ssl_sessions_are_read_from_show_stat() {
        let csv = "# pxname,svname,stot,ssl_sess,ssl_reused_sess,ssl_failed_handshake,\n\
                   fe,FRONTEND,3,1,2,0,\n\
                   be,BACKEND,9,,,,\n";
        let h = parse_ssl_stat(csv).unwrap();
        assert_eq!((h.full, h.resumed), (1, 2));
        // An HAProxy without the SSL counters has no such columns.
        assert_eq!(
            parse_ssl_stat("# pxname,svname,stot,\nfe,FRONTEND,3,\n"),
            None
        );
    }

    #[test]
    fn runtime_replies_are_judged() {
        assert!(runtime_reply_ok("\n"));
        assert!(runtime_reply_ok(
            "no need to change the addr, port changed from '1' to '50337' by 'stats socket command'\n\n"
        ));
        assert!(runtime_reply_ok(
            "IP changed from '127.0.0.1' to '127.0.0.2' by 'stats socket command'\n"
        ));
        assert!(!runtime_reply_ok("No such server.\n"));
        assert!(!runtime_reply_ok(
            "'set server <srv> state' expects 'ready', 'drain' and 'maint'.\n"
        ));
    }
}
