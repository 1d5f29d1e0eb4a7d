//! Named network namespaces, made and removed as iproute2's `ip netns add/del` do, but
//! without the `ip` binary and without `fork()` (unsafe in a threaded process): a
//! throwaway thread unshares its network namespace and bind-mounts it onto a file in
//! `/run/netns`, so the namespace outlives the thread and has a name others can find.
//!
//! Work inside a namespace runs on a thread that entered it ([`Netns::run`]); a child
//! process spawned from such a thread starts in the namespace ([`Netns::spawn`]),
//! because a new process inherits the network namespace of the thread that forked it.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Mutex;
use std::thread;

use rustix::mount::{
    mount_bind, mount_bind_recursive, mount_change, unmount, MountPropagationFlags, UnmountFlags,
};
use rustix::process::{kill_process, Pid, Signal};
use rustix::thread::{move_into_link_name_space, LinkNameSpaceType, UnshareFlags};

use crate::NetlabError;

/// Where named namespaces live, as for iproute2 (`ip netns list` reads it).
pub const NETNS_DIR: &str = "/run/netns";

/// Serialises the first-time setup of [`NETNS_DIR`] between threads of this process, so
/// that two labs built at once do not stack two bind mounts on it.
static NETNS_DIR_SETUP: Mutex<()> = Mutex::new(());

/// A named network namespace, bound at `/run/netns/NAME`, removed when dropped.
///
/// The open fd is what requests naming the namespace by fd (a veth peer created in it,
/// a link moved into it) use: it stays open as long as the `Netns` lives, so such a
/// number can never be reused by another namespace while a request is in flight.
#[derive(Debug)]
pub struct Netns {
    name: String,
    path: PathBuf,
    fd: OwnedFd,
    removed: bool,
}

impl Netns {
    /// Creates the namespace `name` (a new, empty network namespace with `lo` down).
    ///
    /// # Errors
    /// An invalid name, a name already taken, or a failed mount (needs root).
    pub fn create(name: &str) -> Result<Netns, NetlabError> {
        check_name(name)?;
        prepare_netns_dir()?;
        let path = Path::new(NETNS_DIR).join(name);
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| NetlabError::io(format!("create {}", path.display()), e))?;
        let bound = thread::scope(|s| {
            s.spawn(|| -> io::Result<()> {
                unshare_net()?;
                mount_bind("/proc/thread-self/ns/net", &path)?;
                Ok(())
            })
            .join()
        });
        let bound = match bound {
            Ok(r) => r,
            Err(_) => Err(io::Error::other("namespace thread panicked")),
        };
        if let Err(e) = bound {
            let _ = fs::remove_file(&path);
            return Err(NetlabError::io(format!("new network namespace {name}"), e));
        }
        match fs::File::open(&path) {
            Ok(f) => Ok(Netns {
                name: name.to_string(),
                path,
                fd: f.into(),
                removed: false,
            }),
            Err(e) => {
                let _ = unmount(&path, UnmountFlags::DETACH);
                let _ = fs::remove_file(&path);
                Err(NetlabError::io(format!("open {}", path.display()), e))
            }
        }
    }

    /// The namespace's name (its file name in `/run/netns`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace's file, `/run/netns/NAME`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on a new thread that entered this namespace, and returns what it returns.
    ///
    /// Sockets opened by `f` belong to the namespace (and stay in it if returned). A
    /// panic in `f` is resumed on the caller's thread.
    ///
    /// # Errors
    /// The thread could not enter the namespace.
    pub fn run<T, F>(&self, f: F) -> Result<T, NetlabError>
    where
        T: Send,
        F: FnOnce() -> T + Send,
    {
        run_in(self.fd.as_fd(), &self.name, f)
    }

    /// Spawns `cmd` inside this namespace (from a thread that entered it: the child
    /// inherits that thread's network namespace).
    ///
    /// # Errors
    /// The thread could not enter the namespace, or the program could not be started.
    pub fn spawn(&self, cmd: &mut Command) -> Result<Child, NetlabError> {
        let program = cmd.get_program().to_string_lossy().into_owned();
        self.run(|| cmd.spawn())?
            .map_err(|e| NetlabError::io(format!("spawn {program} in {}", self.name), e))
    }

    /// Removes the namespace now (what `Drop` does), reporting failures.
    ///
    /// The namespace itself goes away once no process, socket or fd refers to it any
    /// more; its links go with it (and the peers of its veths elsewhere).
    ///
    /// # Errors
    /// The unmount or the unlink failed.
    pub fn remove(mut self) -> Result<(), NetlabError> {
        self.removed = true;
        remove_file_mount(&self.path)
    }
}

impl AsFd for Netns {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if !self.removed {
            let _ = remove_file_mount(&self.path);
        }
    }
}

/// Runs `f` on a scoped thread that first entered the namespace `fd` (named `name` in
/// errors); the thread ends with `f`, so no other thread ever changes namespace.
fn run_in<T, F>(fd: BorrowedFd<'_>, name: &str, f: F) -> Result<T, NetlabError>
where
    T: Send,
    F: FnOnce() -> T + Send,
{
    let joined = thread::scope(|s| {
        s.spawn(|| {
            move_into_link_name_space(fd, Some(LinkNameSpaceType::Network))
                .map_err(|e| NetlabError::io(format!("enter network namespace {name}"), e))?;
            Ok(f())
        })
        .join()
    });
    match joined {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// `unshare(CLONE_NEWNET)` for the calling thread.
///
/// This is the crate's only unsafe code; rustix marks `unshare` unsafe because of
/// `CLONE_FILES` (threads would stop sharing fd tables); only `CLONE_NEWNET` is passed.
#[allow(unsafe_code)]
fn unshare_net() -> io::Result<()> {
    // SAFETY: `NEWNET` alone leaves the fd table shared with the other threads, so no
    // thread can observe fds from an unshared table (the hazard `unshare_unsafe`
    // documents); the calling thread is a throwaway one that ends right after.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET) }.map_err(io::Error::from)
}

/// Makes `/run/netns` exist and be a shared mount, as iproute2 does: a namespace bound
/// under it then shows in every mount namespace that shares it (and can be unmounted
/// from any of them).
fn prepare_netns_dir() -> Result<(), NetlabError> {
    let _guard = NETNS_DIR_SETUP.lock().unwrap_or_else(|p| p.into_inner());
    fs::create_dir_all(NETNS_DIR).map_err(|e| NetlabError::io(format!("create {NETNS_DIR}"), e))?;
    let shared = MountPropagationFlags::SHARED | MountPropagationFlags::REC;
    match mount_change(NETNS_DIR, shared) {
        Ok(()) => Ok(()),
        // Not a mount point yet: bind it onto itself, then share it.
        Err(rustix::io::Errno::INVAL) => mount_bind_recursive(NETNS_DIR, NETNS_DIR)
            .and_then(|()| mount_change(NETNS_DIR, shared))
            .map_err(|e| NetlabError::io(format!("make {NETNS_DIR} a shared mount"), e)),
        Err(e) => Err(NetlabError::io(format!("make {NETNS_DIR} shared"), e)),
    }
}

/// Unmounts (lazily: fds and processes inside keep the namespace alive) and unlinks a
/// namespace file. A file that is not a mount any more is still unlinked.
fn remove_file_mount(path: &Path) -> Result<(), NetlabError> {
    let unmounted = unmount(path, UnmountFlags::DETACH);
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) => match unmounted {
            Err(m) if m != rustix::io::Errno::INVAL => {
                Err(NetlabError::io(format!("unmount {}", path.display()), m))
            }
            _ => Err(NetlabError::io(format!("unlink {}", path.display()), e)),
        },
    }
}

/// A namespace name must be one file name in `/run/netns`.
fn check_name(name: &str) -> Result<(), NetlabError> {
    let why = if name.is_empty() {
        Some("empty")
    } else if name.len() > 255 {
        Some("longer than 255 bytes")
    } else if name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        Some("not a plain file name")
    } else {
        None
    };
    NetlabError::check_name(name, why)
}

/// The pid a namespace name carries: names are `<prefix>-<pid>-<role>` (see
/// [`crate::Lab`]), so it is the second field from the end.
pub(crate) fn creator_pid(name: &str) -> Option<i32> {
    let mut fields = name.rsplit('-');
    fields.next()?;
    fields.next()?.parse().ok().filter(|pid| *pid > 0)
}

/// Removes the namespaces of `/run/netns` whose name starts with `prefix` and whose
/// creator (the pid in the name, see [`crate::Lab`]) is no longer alive, killing first
/// every process whose network namespace is that one; returns the names removed.
///
/// A name without a pid is left alone (it was not made by this crate). A recycled pid
/// makes a leftover look alive: it is then swept by a later call.
///
/// # Errors
/// `/run/netns` could not be read, or a namespace could not be removed (the others are
/// still tried; the first failure is returned).
pub fn sweep(prefix: &str) -> Result<Vec<String>, NetlabError> {
    let entries = match fs::read_dir(NETNS_DIR) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(NetlabError::io(format!("read {NETNS_DIR}"), e)),
    };
    let mut removed = Vec::new();
    let mut first_error = None;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(prefix) {
            continue;
        }
        let Some(pid) = creator_pid(name) else {
            continue;
        };
        if Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        let path = entry.path();
        // Only a namespace bound there by a lab: never a symlink, and never the
        // namespace this process or init lives in (whose processes are the machine's).
        let Ok(link) = fs::symlink_metadata(&path) else {
            continue;
        };
        if link.file_type().is_symlink() {
            continue;
        }
        if let Ok(meta) = fs::metadata(&path) {
            let ours = |p: &str| {
                fs::metadata(p).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
            };
            if ours("/proc/self/ns/net") || ours("/proc/1/ns/net") {
                continue;
            }
            kill_inside(meta.dev(), meta.ino());
        }
        match remove_file_mount(&path) {
            Ok(()) => removed.push(name.to_string()),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(removed),
    }
}

/// Sends SIGKILL to every process whose `/proc/PID/ns/net` is the namespace with this
/// device and inode (what `stat` of a bound namespace file gives).
fn kill_inside(dev: u64, ino: u64) {
    let Ok(procs) = fs::read_dir("/proc") else {
        return;
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
            .and_then(Pid::from_raw)
        else {
            continue;
        };
        let ns = entry.path().join("ns").join(OsStr::new("net"));
        if let Ok(meta) = fs::metadata(&ns) {
            if meta.dev() == dev && meta.ino() == ino {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creator_pid_is_the_field_before_the_role() {
        assert_eq!(creator_pid("ibnl-1234-a"), Some(1234));
        assert_eq!(creator_pid("ib-nl-x-99-pod"), Some(99));
        assert_eq!(creator_pid("ibnl-a"), None);
        assert_eq!(creator_pid("ibnl"), None);
        assert_eq!(creator_pid("ibnl-0-a"), None);
    }

    #[test]
    fn names_must_be_plain_file_names() {
        for bad in ["", ".", "..", "a/b", "a\0b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(&"x".repeat(256)).is_err());
        assert!(check_name("ibnl-1-a").is_ok());
    }
}
