//! (b) io_uring: each connection keeps a receive posted; its next request is
//! submitted as soon as the previous response is in, ahead of its due time, either
//! as an absolute IORING_OP_TIMEOUT linked (IOSQE_IO_LINK) to an IORING_OP_SEND
//! (`link`: the kernel issues the send when the timer fires), or as a timeout alone
//! whose completion makes userspace submit the send (`chain`). Completions are reaped
//! in batches (`--want`, bounded by `--reap-us` and by the earliest due time that
//! depends on a response not yet reaped).

use crate::{cmsg_ts, now, read_tx_ts, real_minus_mono, Cfg, Parser, Sched, Stats, REQ};
use io_uring::{opcode, squeue, types, IoUring};
use std::os::fd::RawFd;

const RECV: u64 = 1 << 32;
const SEND: u64 = 2 << 32;
const TMO: u64 = 3 << 32;
const KIND: u64 = 0xffff_ffff << 32;

struct Conn {
    fd: RawFd,
    busy: bool,
    /// No request of this lane is left in the window.
    finished: bool,
    intended: u64,
    /// Lag is counted from max(due, when the connection came free).
    lag_base: u64,
    sent_k: u64,
    /// Transmit timestamp of the request in flight (txts mode).
    tx_at: Option<u64>,
    parser: Parser,
    ts: types::Timespec,
    msg: libc::msghdr,
    iov: libc::iovec,
    ctrl: [u64; 8],
    buf: [u8; 4096],
}

struct Ring {
    ring: IoUring,
}

impl Ring {
    #[inline]
    fn push(&mut self, e: &squeue::Entry) {
        loop {
            if unsafe { self.ring.submission().push(e) }.is_ok() {
                return;
            }
            self.ring.submit().expect("submit");
        }
    }
}

pub fn run(cfg: &Cfg, fds: &[RawFd], s: &Sched, st: &mut Stats) {
    let off = real_minus_mono();
    let link = cfg.mode == "link";
    let entries = (fds.len() * 4).next_power_of_two().max(64) as u32;
    let mut b = IoUring::builder();
    b.setup_cqsize(entries * 4);
    match cfg.setup.as_str() {
        "plain" => {}
        "coop" => {
            b.setup_coop_taskrun().setup_single_issuer();
        }
        "defer" => {
            b.setup_single_issuer().setup_defer_taskrun();
        }
        x => panic!("setup {x}"),
    }
    let mut r = Ring { ring: b.build(entries).expect("io_uring_setup") };
    let mut conns: Vec<Conn> = fds
        .iter()
        .map(|&fd| Conn {
            fd,
            busy: false,
            finished: false,
            intended: 0,
            lag_base: 0,
            sent_k: 0,
            tx_at: None,
            parser: Parser::new(),
            ts: types::Timespec::new(),
            msg: unsafe { std::mem::zeroed() },
            iov: libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 },
            ctrl: [0; 8],
            buf: [0; 4096],
        })
        .collect();
    // The vector is never resized: these pointers stay valid.
    for c in conns.iter_mut() {
        c.iov = libc::iovec { iov_base: c.buf.as_mut_ptr() as _, iov_len: c.buf.len() };
        c.msg.msg_iov = &mut c.iov;
        c.msg.msg_iovlen = 1;
    }
    let t = now();
    for ci in 0..conns.len() {
        post_recv(&mut r, &mut conns[ci], ci, cfg.rxts);
        schedule(&mut r, &mut conns[ci], ci, t, s, st, link, cfg.skip);
    }
    let drain = s.end + 200_000_000;
    let reap_ns = cfg.reap_us * 1000;
    let mut cqes: Vec<(u64, i32)> = Vec::with_capacity(entries as usize * 4);
    loop {
        let t = now();
        if t >= drain || conns.iter().all(|c| c.finished && !c.busy) {
            break;
        }
        // Wake by the earliest due time that waits on a response not yet reaped: the
        // request after it cannot be submitted before that response is read.
        // A connection whose next request is already overdue is blocked on its
        // response: then every completion is reaped as it comes (want 1).
        let mut dl = (t + reap_ns).min(drain);
        let mut overdue = false;
        if link {
            for (ci, c) in conns.iter().enumerate() {
                if c.busy {
                    if let Some(d) = s.due_of(ci, c.sent_k) {
                        if d > t {
                            dl = dl.min(d);
                        } else {
                            overdue = true;
                        }
                    }
                }
            }
        }
        let rel = dl.saturating_sub(t);
        let ts = types::Timespec::new().sec(rel / 1_000_000_000).nsec((rel % 1_000_000_000) as u32);
        let want = if link && !overdue { cfg.want } else { 1 };
        let res = if rel < cfg.spin_ns {
            r.ring.submitter().submit()
        } else {
            r.ring.submitter().submit_with_args(want, &types::SubmitArgs::new().timespec(&ts))
        };
        match res {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)) => {}
            Err(e) => panic!("io_uring_enter: {e}"),
        }
        st.waits += 1;
        let t = now();
        loop {
            cqes.clear();
            cqes.extend(r.ring.completion().map(|c| (c.user_data(), c.result())));
            if cqes.is_empty() {
                break;
            }
            st.cqes += cqes.len() as u64;
            for &(ud, res) in cqes.iter() {
                let ci = (ud & 0xffff_ffff) as usize;
                match ud & KIND {
                    RECV => {
                        let c = &mut conns[ci];
                        if res == -libc::EAGAIN && cfg.txts {
                            // A transmit timestamp on the error queue makes the socket
                            // poll EPOLLERR, which completes the posted receive with
                            // EAGAIN: read the queue, or the receive spins.
                            if let Some(tx) = read_tx_ts(c.fd, off) {
                                c.tx_at = Some(tx);
                            }
                            post_recv(&mut r, c, ci, cfg.rxts);
                            continue;
                        }
                        assert!(res > 0, "recv on {ci}: {res}");
                        match c.parser.feed(&c.buf[..res as usize]) {
                            Ok(true) => {
                                let at = if cfg.rxts {
                                    let ctrl: &[u8; 64] = unsafe { &*(c.ctrl.as_ptr() as *const [u8; 64]) };
                                    cmsg_ts(ctrl, 64, libc::SCM_TIMESTAMPNS, off).unwrap_or(t)
                                } else {
                                    t
                                };
                                Stats::push(&mut st.lat, at.saturating_sub(c.intended));
                                if cfg.txts {
                                    if let Some(tx) = c.tx_at.take().or_else(|| read_tx_ts(c.fd, off)) {
                                        Stats::push(&mut st.txlag, tx.saturating_sub(c.lag_base));
                                    }
                                }
                                st.done += 1;
                                c.busy = false;
                                post_recv(&mut r, c, ci, cfg.rxts);
                                schedule(&mut r, c, ci, t, s, st, link, cfg.skip);
                            }
                            Ok(false) => post_recv(&mut r, c, ci, cfg.rxts),
                            Err(()) => panic!("bad response"),
                        }
                    }
                    SEND => {
                        assert_eq!(res as usize, REQ.len(), "send on {ci}");
                        // When the send's completion was seen: an upper bound of the
                        // lag, as late as the reaping.
                        Stats::push(&mut st.lag, t.saturating_sub(conns[ci].lag_base));
                        if !cfg.skip {
                            st.sent += 1;
                        }
                    }
                    TMO => {
                        if !link {
                            let e = opcode::Send::new(types::Fd(conns[ci].fd), REQ.as_ptr(), REQ.len() as u32)
                                .build()
                                .user_data(SEND | ci as u64);
                            r.push(&e);
                        }
                    }
                    _ => unreachable!(),
                }
            }
        }
    }
}

#[inline]
fn post_recv(r: &mut Ring, c: &mut Conn, ci: usize, rxts: bool) {
    let e = if rxts {
        c.ctrl = [0; 8];
        c.msg.msg_control = c.ctrl.as_mut_ptr() as _;
        c.msg.msg_controllen = 64;
        opcode::RecvMsg::new(types::Fd(c.fd), &mut c.msg).build()
    } else {
        opcode::Recv::new(types::Fd(c.fd), c.buf.as_mut_ptr(), c.buf.len() as u32).build()
    };
    r.push(&e.user_data(RECV | ci as u64));
}

/// Submits the connection's next request, timed by the kernel.
#[inline]
#[allow(clippy::too_many_arguments)]
fn schedule(r: &mut Ring, c: &mut Conn, ci: usize, t: u64, s: &Sched, st: &mut Stats, link: bool, skip: bool) {
    let Some(due) = s.due_of(ci, c.sent_k) else {
        c.finished = true;
        return;
    };
    c.sent_k += 1;
    c.busy = true;
    c.intended = due;
    c.lag_base = due.max(t);
    if skip {
        st.sent += 1;
    }
    let send_flags = if skip { squeue::Flags::SKIP_SUCCESS } else { squeue::Flags::empty() };
    let send = opcode::Send::new(types::Fd(c.fd), REQ.as_ptr(), REQ.len() as u32)
        .build()
        .flags(send_flags)
        .user_data(SEND | ci as u64);
    if due <= t {
        // Came due while the connection waited for its response: send now.
        st.blocked += 1;
        r.push(&send);
        return;
    }
    c.ts = types::Timespec::new().sec(due / 1_000_000_000).nsec((due % 1_000_000_000) as u32);
    let tf = types::TimeoutFlags::ABS | types::TimeoutFlags::ETIME_SUCCESS;
    let mut tmo = opcode::Timeout::new(&c.ts).flags(tf).build().user_data(TMO | ci as u64);
    if link {
        // ETIME_SUCCESS: the timer's expiry does not count as a failure, so the link
        // holds and the send goes out when it fires.
        let mut f = squeue::Flags::IO_LINK;
        if skip {
            f |= squeue::Flags::SKIP_SUCCESS;
        }
        tmo = tmo.flags(f);
        r.push(&tmo);
        r.push(&send);
    } else {
        r.push(&tmo);
    }
}
