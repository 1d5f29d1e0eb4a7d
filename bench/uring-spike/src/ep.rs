//! (a) The engine's shape: edge-triggered epoll, epoll_pwait2 with a nanosecond
//! timeout to the next due time, one write and one read per request.

use crate::{now, read_tx_ts, real_minus_mono, Cfg, Parser, Sched, Stats, REQ};
use std::os::fd::RawFd;

struct Conn {
    fd: RawFd,
    busy: bool,
    intended: u64,
    /// Requests of this lane that have come due / been sent.
    due_k: u64,
    sent_k: u64,
    /// When the connection came free for a request that was already due.
    unblocked: u64,
    parser: Parser,
}

pub fn run(cfg: &Cfg, fds: &[RawFd], s: &Sched, st: &mut Stats) {
    let off = real_minus_mono();
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(ep >= 0);
    let mut conns: Vec<Conn> = fds
        .iter()
        .map(|&fd| Conn { fd, busy: false, intended: 0, due_k: 0, sent_k: 0, unblocked: 0, parser: Parser::new() })
        .collect();
    for (i, c) in conns.iter().enumerate() {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET | libc::EPOLLRDHUP) as u32,
            u64: i as u64,
        };
        assert_eq!(unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, c.fd, &mut ev) }, 0);
    }
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let mut buf = vec![0u8; 64 * 1024];
    let n = conns.len();
    let drain = s.end + 200_000_000;
    let mut next_j = 0u64;
    let mut busy = 0usize;
    loop {
        let t = now();
        while next_j < s.total && s.due(next_j) <= t {
            let c = (next_j % n as u64) as usize;
            next_j += 1;
            conns[c].due_k += 1;
            if conns[c].busy {
                st.blocked += 1;
            } else {
                send(&mut conns[c], c, t, s, st, &mut busy);
            }
        }
        if (next_j >= s.total && busy == 0) || t >= drain {
            break;
        }
        let wake = if next_j < s.total { s.due(next_j) } else { drain };
        let d = wake.saturating_sub(t);
        let ts = libc::timespec { tv_sec: (d / 1_000_000_000) as _, tv_nsec: (d % 1_000_000_000) as _ };
        let r = unsafe {
            libc::syscall(libc::SYS_epoll_pwait2, ep, evs.as_mut_ptr(), evs.len() as i32, &ts, std::ptr::null::<u8>(), 0)
        };
        st.waits += 1;
        if r <= 0 {
            continue;
        }
        let t = now();
        for ev in &evs[..r as usize] {
            let ci = ev.u64 as usize;
            let c = &mut conns[ci];
            loop {
                let k = unsafe { libc::read(c.fd, buf.as_mut_ptr() as _, buf.len()) };
                if k > 0 {
                    match c.parser.feed(&buf[..k as usize]) {
                        // Complete: nothing more comes until the next request, so the
                        // read that would return EAGAIN is skipped (edge-triggered is
                        // still safe: the next response is a new edge).
                        Ok(true) => {
                            complete(c, ci, t, s, st, &mut busy, cfg.txts, off);
                            break;
                        }
                        Ok(false) => continue,
                        Err(()) => panic!("bad response"),
                    }
                } else if k == 0 {
                    panic!("server closed connection {ci}");
                } else {
                    break;
                }
            }
        }
    }
}

#[inline]
fn send(c: &mut Conn, ci: usize, t: u64, s: &Sched, st: &mut Stats, busy: &mut usize) {
    let intended = s.due_of(ci, c.sent_k).unwrap();
    let w = unsafe { libc::write(c.fd, REQ.as_ptr() as _, REQ.len()) };
    assert_eq!(w as usize, REQ.len(), "short write");
    Stats::push(&mut st.lag, t - intended.max(c.unblocked));
    c.intended = intended;
    c.sent_k += 1;
    c.busy = true;
    *busy += 1;
    st.sent += 1;
}

#[inline]
#[allow(clippy::too_many_arguments)]
fn complete(c: &mut Conn, ci: usize, t: u64, s: &Sched, st: &mut Stats, busy: &mut usize, txts: bool, off: i64) {
    Stats::push(&mut st.lat, t - c.intended);
    if txts {
        if let Some(tx) = read_tx_ts(c.fd, off) {
            Stats::push(&mut st.txlag, tx.saturating_sub(c.intended.max(c.unblocked)));
        }
    }
    st.done += 1;
    c.busy = false;
    *busy -= 1;
    if c.sent_k < c.due_k {
        c.unblocked = t;
        send(c, ci, t, s, st, busy);
    }
}
