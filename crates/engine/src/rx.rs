//! When a response's bytes reached this machine, by the kernel's clock.
//!
//! A thread that sleeps through a response's arrival (see the worker's quiet waits)
//! still knows when it arrived: each socket asks the kernel to stamp what it
//! receives (`SO_TIMESTAMPNS`), and every read takes the stamp of the last packet it
//! consumed with its bytes. A response is then complete when its last bytes reached
//! the socket, not when the thread got round to reading them; so the generator's
//! own wake-up latency drops out of every latency, awake or asleep.
//!
//! The stamp is in `CLOCK_REALTIME` (the only clock socket stamps come in); it is
//! turned into the run's monotonic clock by its age at the moment of reading (see
//! [`arrived`]), so a step of the wall clock can only misplace a response read
//! across that step, and [`arrived`] keeps it between its send and its reading.

use results::clock::Nanos;
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::AsRawFd;

/// Asks the kernel to stamp what `sock` receives. A kernel that refuses leaves the
/// latency measured at the read, as before; nothing else changes.
#[allow(unsafe_code)]
pub fn enable(sock: &TcpStream) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: a valid socket descriptor, and an option value of the size given.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    r == 0
}

/// The wall clock now, in nanoseconds since the Unix epoch.
#[inline]
#[allow(unsafe_code)]
pub fn wall_now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock and a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// When bytes stamped `stamp` (wall clock, 0: none) arrived, on the run's clock,
/// given that they were read by `now` (run clock) and `wall` (wall clock, read just
/// before or after `now`), and not before `floor` (the request's send): their age
/// taken from `now`.
#[inline]
pub fn arrived(stamp: u64, now: Nanos, wall: u64, floor: Nanos) -> Nanos {
    if stamp == 0 {
        return now;
    }
    let age = wall.saturating_sub(stamp);
    now.saturating_sub(age).clamp(floor.min(now), now)
}

/// A socket read that keeps the kernel's receive stamp of what it read in `stamp`
/// (0 when the read brought none). With `on` false it is a plain `read` and brings
/// no stamp: a closed loop (`--max`) wakes for every response and has no schedule
/// to sleep through, and `recvmsg` with its control message cost it about 2 % of
/// its CPU per request (docs/benchmarks.md).
pub struct Stamped<'a> {
    pub sock: &'a TcpStream,
    pub stamp: &'a mut u64,
    pub on: bool,
}

/// Room for one `SCM_TIMESTAMPNS` control message (a `timespec`), aligned.
#[repr(C, align(8))]
struct Control([u8; 64]);

impl Read for Stamped<'_> {
    #[allow(unsafe_code)]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.on {
            *self.stamp = 0;
            return (&mut &*self.sock).read(buf);
        }
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut control = Control([0; 64]);
        // SAFETY: zero is a valid `msghdr`; the pointers set below outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = control.0.len() as _;
        // SAFETY: a valid descriptor and a message whose buffers are valid for the
        // lengths it gives.
        let n = unsafe { libc::recvmsg(self.sock.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        *self.stamp = 0;
        if n > 0 {
            // SAFETY: walking the control messages the kernel wrote into `msg`.
            unsafe {
                let mut cm = libc::CMSG_FIRSTHDR(&msg);
                while !cm.is_null() {
                    if (*cm).cmsg_level == libc::SOL_SOCKET
                        && (*cm).cmsg_type == libc::SCM_TIMESTAMPNS
                    {
                        let ts: libc::timespec =
                            std::ptr::read_unaligned(libc::CMSG_DATA(cm).cast());
                        *self.stamp = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                    }
                    cm = libc::CMSG_NXTHDR(&msg, cm);
                }
            }
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    #[test]
    fn arrival_is_the_read_time_less_the_bytes_age_and_stays_between_send_and_read() {
        // Stamped 300 µs before the wall clock was read: arrived 300 µs before now.
        assert_eq!(
            arrived(1_000_000_000, 5_000_000, 1_000_300_000, 0),
            4_700_000
        );
        // No stamp: the read time.
        assert_eq!(arrived(0, 5_000_000, 1_000_300_000, 0), 5_000_000);
        // A stamp older than the send (the wall clock stepped): the send.
        assert_eq!(arrived(1, 5_000_000, 1_000_300_000, 4_900_000), 4_900_000);
        // A stamp from the future (stepped the other way): the read time.
        assert_eq!(
            arrived(2_000_000_000, 5_000_000, 1_000_300_000, 0),
            5_000_000
        );
    }

    #[test]
    fn a_read_brings_the_time_its_bytes_arrived() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut server, _) = l.accept().unwrap();
        assert!(enable(&client), "SO_TIMESTAMPNS refused");
        // The kernel turns receive stamps on for the whole machine through a
        // deferred work item when the first socket asks: until it ran, packets
        // come unstamped (the engine then times at the read). Wait for it, bounded.
        let t = std::time::Instant::now();
        loop {
            server.write_all(b"x").unwrap();
            let (mut stamp, mut one) = (0, [0u8; 1]);
            let n = Stamped {
                sock: &client,
                stamp: &mut stamp,
                on: true,
            }
            .read(&mut one)
            .unwrap();
            assert_eq!(n, 1);
            if stamp != 0 {
                break;
            }
            assert!(t.elapsed().as_secs() < 2, "no receive stamp in 2 s");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let before = wall_now();
        server.write_all(b"hello").unwrap();
        // Read well after the bytes arrived: the stamp is when they came, not now.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut stamp = 0;
        let mut buf = [0u8; 16];
        let n = Stamped {
            sock: &client,
            stamp: &mut stamp,
            on: true,
        }
        .read(&mut buf)
        .unwrap();
        let after = wall_now();
        assert_eq!(&buf[..n], b"hello");
        assert!(
            stamp >= before && stamp <= after,
            "{before} <= {stamp} <= {after}"
        );
        assert!(
            after - stamp >= 15_000_000,
            "the stamp is the arrival, {} ms before the read",
            (after - stamp) / 1_000_000
        );
    }
}
