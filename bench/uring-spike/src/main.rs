//! Design spike: open-loop HTTP/1.1 GET load, epoll vs io_uring.
//!
//! Same schedule in both engines: request `j` (global index) is due at
//! `start + j * 1e9 / rate`, carried by connection `j % conns`, so each connection
//! has its own lane (wrk2's model) with `conns / rate` seconds between its requests.
//! No pipelining: a request that comes due while its connection still waits for the
//! previous response is sent when that response arrives, and its latency is still
//! measured from its intended time. Nothing is allocated per request: the sample
//! vectors are sized up front.
//!
//! Usage: uring-spike MODE [--port P] [--rate R] [--conns N] [--secs S]
//!        [--want W] [--reap-us U] [--defer] [--skip] [--rxts] [--txts]
//! MODE: epoll | link (timeout linked to send) | chain (timeout, then send on its CQE)

mod ep;
mod ur;

use std::os::fd::RawFd;

pub const REQ: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: spike\r\n\r\n";

#[derive(Clone, Debug)]
pub struct Cfg {
    pub mode: String,
    pub port: u16,
    pub rate: f64,
    pub conns: usize,
    pub secs: f64,
    /// io_uring: completions to wait for per enter.
    pub want: usize,
    /// io_uring: longest wait before reaping, in µs.
    pub reap_us: u64,
    /// io_uring setup: plain | coop (COOP_TASKRUN) | defer (DEFER_TASKRUN + SINGLE_ISSUER).
    pub setup: String,
    /// io_uring: IOSQE_CQE_SKIP_SUCCESS on timeouts and sends.
    pub skip: bool,
    /// Kernel receive timestamps (SO_TIMESTAMPNS) for the response time.
    pub rxts: bool,
    /// Kernel transmit timestamps (SO_TIMESTAMPING) for the true send lag.
    pub txts: bool,
    /// Busy-poll (uring: peek without sleeping) when the next due time is this close (ns).
    pub spin_ns: u64,
}

fn parse_args() -> Cfg {
    let mut a = std::env::args().skip(1);
    let mut c = Cfg {
        mode: a.next().expect("mode"),
        port: 18080,
        rate: 20000.0,
        conns: 100,
        secs: 10.0,
        want: 1,
        reap_us: 1000,
        setup: "plain".into(),
        skip: false,
        rxts: false,
        txts: false,
        spin_ns: 0,
    };
    while let Some(k) = a.next() {
        let mut v = || a.next().expect("value");
        match k.as_str() {
            "--port" => c.port = v().parse().unwrap(),
            "--rate" => c.rate = v().parse().unwrap(),
            "--conns" => c.conns = v().parse().unwrap(),
            "--secs" => c.secs = v().parse().unwrap(),
            "--want" => c.want = v().parse().unwrap(),
            "--reap-us" => c.reap_us = v().parse().unwrap(),
            "--spin-us" => c.spin_ns = v().parse::<u64>().unwrap() * 1000,
            "--defer" => c.setup = "defer".into(),
            "--setup" => c.setup = v(),
            "--skip" => c.skip = true,
            "--rxts" => c.rxts = true,
            "--txts" => c.txts = true,
            _ => panic!("unknown option {k}"),
        }
    }
    assert!(c.secs <= 10.0, "runs are bounded to 10 s");
    c
}

#[inline]
pub fn now() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC, to turn kernel socket timestamps
/// (realtime) into monotonic times. Good to a microsecond over a 10 s run.
pub fn real_minus_mono() -> i64 {
    let mut best = i64::MAX;
    let mut off = 0;
    for _ in 0..5 {
        let a = now();
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        let b = now();
        let r = ts.tv_sec as i64 * 1_000_000_000 + ts.tv_nsec as i64;
        if ((b - a) as i64) < best {
            best = (b - a) as i64;
            off = r - (a + (b - a) / 2) as i64;
        }
    }
    off
}

/// The fixed schedule.
pub struct Sched {
    pub start: u64,
    pub end: u64,
    pub spacing: f64,
    pub conns: usize,
    pub total: u64,
}

impl Sched {
    pub fn new(cfg: &Cfg, start: u64) -> Sched {
        let dur = (cfg.secs * 1e9) as u64;
        let spacing = 1e9 / cfg.rate;
        Sched {
            start,
            end: start + dur,
            spacing,
            conns: cfg.conns,
            total: (dur as f64 / spacing).ceil() as u64,
        }
    }
    #[inline]
    pub fn due(&self, j: u64) -> u64 {
        self.start + (j as f64 * self.spacing) as u64
    }
    /// Due time of connection `c`'s request `k`, or None past the window.
    #[inline]
    pub fn due_of(&self, c: usize, k: u64) -> Option<u64> {
        let j = k * self.conns as u64 + c as u64;
        (j < self.total).then(|| self.due(j))
    }
}

/// Samples, allocated once.
pub struct Stats {
    pub lag: Vec<u32>,
    pub txlag: Vec<u32>,
    pub lat: Vec<u32>,
    pub sent: u64,
    pub done: u64,
    pub errors: u64,
    pub waits: u64,
    pub cqes: u64,
    /// Requests that came due while their connection was busy.
    pub blocked: u64,
}

impl Stats {
    pub fn new(n: u64) -> Stats {
        let n = n as usize + 1024;
        Stats {
            lag: Vec::with_capacity(n),
            txlag: Vec::with_capacity(n),
            lat: Vec::with_capacity(n),
            sent: 0,
            done: 0,
            errors: 0,
            waits: 0,
            cqes: 0,
            blocked: 0,
        }
    }
    #[inline]
    pub fn push(v: &mut Vec<u32>, x: u64) {
        if v.len() < v.capacity() {
            v.push(x.min(u32::MAX as u64) as u32);
        }
    }
}

/// A minimal HTTP/1.1 response reader: headers up to the blank line, then
/// Content-Length bytes. Enough for nginx's static file; the spike does not care
/// about chunked bodies.
pub struct Parser {
    hdr: [u8; 1024],
    hlen: usize,
    body_left: usize,
    in_body: bool,
}

impl Parser {
    pub fn new() -> Parser {
        Parser { hdr: [0; 1024], hlen: 0, body_left: 0, in_body: false }
    }
    /// Ok(true): a response completed (there is never more after it: no pipelining).
    pub fn feed(&mut self, data: &[u8]) -> Result<bool, ()> {
        let mut i = 0;
        if !self.in_body {
            // Find the end of the headers, across reads.
            while i < data.len() {
                let b = data[i];
                i += 1;
                if self.hlen == self.hdr.len() {
                    return Err(());
                }
                self.hdr[self.hlen] = b;
                self.hlen += 1;
                if b == b'\n' && self.hlen >= 4 && &self.hdr[self.hlen - 4..self.hlen] == b"\r\n\r\n" {
                    self.body_left = content_length(&self.hdr[..self.hlen]).ok_or(())?;
                    self.in_body = true;
                    break;
                }
            }
            if !self.in_body {
                return Ok(false);
            }
        }
        let take = self.body_left.min(data.len() - i);
        self.body_left -= take;
        if self.body_left == 0 {
            self.hlen = 0;
            self.in_body = false;
            return Ok(true);
        }
        Ok(false)
    }
}

fn content_length(h: &[u8]) -> Option<usize> {
    for line in h.split(|&b| b == b'\n') {
        if line.len() > 15 && line[..15].eq_ignore_ascii_case(b"content-length:") {
            let v = std::str::from_utf8(&line[15..]).ok()?.trim();
            return v.parse().ok();
        }
    }
    None
}

pub fn connect_all(cfg: &Cfg) -> Vec<RawFd> {
    let mut fds = Vec::new();
    for _ in 0..cfg.conns {
        let s = std::net::TcpStream::connect(("127.0.0.1", cfg.port)).expect("connect");
        s.set_nodelay(true).unwrap();
        s.set_nonblocking(true).unwrap();
        let fd = std::os::fd::IntoRawFd::into_raw_fd(s);
        unsafe {
            if cfg.rxts {
                let one: libc::c_int = 1;
                let r = libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &one as *const _ as _, 4);
                assert_eq!(r, 0, "SO_TIMESTAMPNS");
            }
            if cfg.txts {
                let f: libc::c_int = (libc::SOF_TIMESTAMPING_TX_SOFTWARE
                    | libc::SOF_TIMESTAMPING_SOFTWARE
                    | libc::SOF_TIMESTAMPING_OPT_ID
                    | libc::SOF_TIMESTAMPING_OPT_TSONLY) as _;
                let r = libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, &f as *const _ as _, 4);
                assert_eq!(r, 0, "SO_TIMESTAMPING");
            }
        }
        fds.push(fd);
    }
    fds
}

/// Walks a control buffer for a timestamp cmsg of `ty` at SOL_SOCKET; returns the
/// first timespec in it, as monotonic nanoseconds.
pub fn cmsg_ts(ctrl: &[u8], len: usize, ty: i32, off: i64) -> Option<u64> {
    let mut o = 0;
    let len = len.min(ctrl.len());
    while o + 16 <= len {
        let clen = usize::from_ne_bytes(ctrl[o..o + 8].try_into().unwrap());
        let level = i32::from_ne_bytes(ctrl[o + 8..o + 12].try_into().unwrap());
        let t = i32::from_ne_bytes(ctrl[o + 12..o + 16].try_into().unwrap());
        if clen < 16 {
            break;
        }
        if level == libc::SOL_SOCKET && t == ty && o + 32 <= len {
            let s = i64::from_ne_bytes(ctrl[o + 16..o + 24].try_into().unwrap());
            let ns = i64::from_ne_bytes(ctrl[o + 24..o + 32].try_into().unwrap());
            let real = s * 1_000_000_000 + ns;
            if real == 0 {
                return None;
            }
            return Some((real - off) as u64);
        }
        o += (clen + 7) & !7;
    }
    None
}

/// Reads every transmit timestamp queued on `fd`'s error queue; returns the last.
pub fn read_tx_ts(fd: RawFd, off: i64) -> Option<u64> {
    let mut last = None;
    loop {
        let mut ctrl = [0u8; 256];
        let mut data = [0u8; 64];
        let mut iov = libc::iovec { iov_base: data.as_mut_ptr() as _, iov_len: data.len() };
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        m.msg_iov = &mut iov;
        m.msg_iovlen = 1;
        m.msg_control = ctrl.as_mut_ptr() as _;
        m.msg_controllen = ctrl.len();
        let r = unsafe { libc::recvmsg(fd, &mut m, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if r < 0 {
            return last;
        }
        if let Some(t) = cmsg_ts(&ctrl, m.msg_controllen, libc::SCM_TIMESTAMPING, off) {
            last = Some(t);
        }
    }
}

fn pct(v: &mut [u32], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[i] as f64 / 1000.0
}

fn rusage() -> (f64, f64, i64, i64) {
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(r.ru_utime), tv(r.ru_stime), r.ru_nvcsw, r.ru_nivcsw)
}

fn main() {
    let cfg = parse_args();
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let fds = connect_all(&cfg);
    let r0 = rusage();
    let start = now() + 20_000_000;
    let sched = Sched::new(&cfg, start);
    let mut st = Stats::new(sched.total);
    match cfg.mode.as_str() {
        "epoll" => ep::run(&cfg, &fds, &sched, &mut st),
        "link" | "chain" => ur::run(&cfg, &fds, &sched, &mut st),
        m => panic!("unknown mode {m}"),
    }
    let r1 = rusage();
    let (u, s) = (r1.0 - r0.0, r1.1 - r0.1);
    let (vcs, ics) = (r1.2 - r0.2, r1.3 - r0.3);
    let n = st.done.max(1) as f64;
    let txlag = if cfg.txts {
        format!(" txlag_p50_us={:.1} txlag_p99_us={:.1} txlag_max_us={:.1} txn={}",
            pct(&mut st.txlag, 0.5), pct(&mut st.txlag, 0.99), pct(&mut st.txlag, 1.0), st.txlag.len())
    } else {
        String::new()
    };
    println!(
        "mode={} want={} setup={} skip={} rxts={} txts={} intended={} sent={} done={} errors={} blocked={} \
         user_s={:.3} sys_s={:.3} cpu_us_per_req={:.2} vcs_per_req={:.3} ics_per_req={:.3} waits_per_req={:.3} cqes_per_req={:.2} \
         lag_p50_us={:.1} lag_p99_us={:.1} lag_max_us={:.1}{} lat_p50_us={:.1} lat_p99_us={:.1} lat_max_us={:.1}",
        cfg.mode, cfg.want, cfg.setup, cfg.skip, cfg.rxts, cfg.txts, sched.total, st.sent, st.done, st.errors, st.blocked,
        u, s, (u + s) * 1e6 / n, vcs as f64 / n, ics as f64 / n, st.waits as f64 / n, st.cqes as f64 / n,
        pct(&mut st.lag, 0.5), pct(&mut st.lag, 0.99), pct(&mut st.lag, 1.0), txlag,
        pct(&mut st.lat, 0.5), pct(&mut st.lat, 0.99), pct(&mut st.lat, 1.0),
    );
    for fd in fds {
        unsafe { libc::close(fd) };
    }
}
