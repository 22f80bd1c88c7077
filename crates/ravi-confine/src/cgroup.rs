//! A pids cgroup per confined process tree: the bound on processes that also holds for root
//! (the kernel does not apply `RLIMIT_NPROC` to root), and a way to kill every process of the
//! tree, those that left its process group included.
//!
//! Written here rather than taken from `cgroups-rs`: Ravi needs four file operations (make a
//! folder, write `pids.max`, let the child write `0` to a `cgroup.procs` opened before the
//! fork, remove the folder), and the child's step must not allocate, which a crate's
//! `add_task` does.

use std::io::Write as _;
use std::os::fd::{AsRawFd as _, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The folder under which this process may make pids cgroups, found once (and swept of the
/// empty groups left by Ravi processes that were killed before they could remove theirs).
fn base() -> Option<&'static Path> {
    static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
    BASE.get_or_init(|| {
        let base = find_base()?;
        sweep(&base);
        Some(base)
    })
    .as_deref()
}

/// Removes `ravi-PID-N` groups whose process is gone. A Ravi killed by a signal leaves its
/// groups behind; once their processes have ended they are empty, and a later Ravi given the
/// same process id would otherwise find its names taken. A group that still holds processes
/// is left alone (the kernel refuses to remove it).
fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("ravi-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        if pid != std::process::id().cast_signed() && !alive(pid) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Whether a process with this id exists.
fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists.
    #[expect(unsafe_code, reason = "kill has no safe wrapper in libc")]
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The pids hierarchy (v1 `cgroup` with `pids`, else v2 `cgroup2`) and this process's folder
/// in it, when that folder can be written.
fn find_base() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut v2 = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(mount)) = (left.get(3), left.get(4)) else {
            continue;
        };
        match (right.first(), right.get(2)) {
            (Some(&"cgroup"), Some(opts)) if opts.split(',').any(|o| o == "pids") => {
                let path = own.lines().find_map(|l| {
                    let mut parts = l.splitn(3, ':');
                    let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                    controllers.split(',').any(|c| c == "pids").then_some(path)
                })?;
                return writable(mount, root, path);
            }
            (Some(&"cgroup2"), _) => {
                let path = own.lines().find_map(|l| l.strip_prefix("0::"));
                v2 = path.and_then(|p| writable(mount, root, p));
            }
            _ => {}
        }
    }
    v2
}

fn writable(mount: &str, root: &str, path: &str) -> Option<PathBuf> {
    let rel = if root == "/" {
        path
    } else {
        path.strip_prefix(root).unwrap_or(path)
    };
    let dir = Path::new(mount).join(rel.trim_start_matches('/'));
    let probe = dir.join(format!("ravi-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).ok()?;
    let has_pids = probe.join("pids.max").exists();
    let _ = std::fs::remove_dir(&probe);
    has_pids.then_some(dir)
}

/// The number in the next group's name.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// One process tree's pids cgroup, removed (its processes killed) when dropped.
#[derive(Debug)]
pub(crate) struct Group {
    dir: PathBuf,
    procs: OwnedFd,
}

impl Group {
    /// A new group allowing at most `max` processes, or why this process cannot make one (no
    /// pids hierarchy it may write, or the kernel refused the group).
    pub(crate) fn create(max: u64) -> Result<Self, String> {
        let base = base().ok_or_else(|| "no writable pids controller".to_owned())?;
        let mut tries = 0;
        let dir = loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = base.join(format!("ravi-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => break dir,
                // A group left by an earlier process with this id: remove it if empty, and
                // take the next name either way.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 64 => {
                    let _ = std::fs::remove_dir(&dir);
                    tries += 1;
                }
                Err(e) => return Err(format!("making {}: {e}", dir.display())),
            }
        };
        let made = std::fs::write(dir.join("pids.max"), max.to_string()).and_then(|()| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
        });
        match made {
            Ok(file) => Ok(Self {
                dir,
                procs: file.into(),
            }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(format!("setting up {}: {e}", dir.display()))
            }
        }
    }

    /// The descriptor the child writes `0` to (itself) before `exec`.
    pub(crate) fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// Kills every process in the group, until none is left (bounded: the group's own limit
    /// bounds how many a fork loop can make between two passes).
    pub(crate) fn kill_all(&self) {
        // cgroup v2 kills the whole group in one write.
        if let Ok(mut kill) = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))
            && kill.write_all(b"1").is_ok()
        {
            return;
        }
        for _ in 0..200 {
            let Ok(list) = std::fs::read_to_string(self.dir.join("cgroup.procs")) else {
                return;
            };
            let pids: Vec<i32> = list.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                // SAFETY: kill takes two integers and touches no memory of ours.
                #[expect(unsafe_code, reason = "kill has no safe wrapper in libc")]
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill_all();
        // A killed process leaves the group once reaped by its parent; wait briefly for that.
        for _ in 0..500 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

/// In the child before `exec`: joins the group through the descriptor opened by the parent.
pub(crate) fn join(procs_fd: RawFd) -> std::io::Result<()> {
    // SAFETY: write reads one byte of a static string; the descriptor is the parent's open
    // `cgroup.procs`, inherited through fork.
    #[expect(
        unsafe_code,
        reason = "a raw write: no allocation between fork and exec"
    )]
    let n = unsafe { libc::write(procs_fd, b"0".as_ptr().cast(), 1) };
    if n == 1 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether this process can make pids cgroups.
pub(crate) fn available() -> bool {
    base().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_left_by_a_dead_ravi_are_swept_and_their_names_reused() {
        let Some(base) = base() else {
            eprintln!("skipped: no writable pids controller here");
            return;
        };
        // A process that has ended: its id names a group as a killed Ravi would leave it.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = base.join(format!("ravi-{dead}-0"));
        std::fs::create_dir(&stale).unwrap();
        sweep(base);
        assert!(!stale.exists(), "{} was not swept", stale.display());

        // Names this process is about to take, already present (an earlier process with this
        // id): the group is still made.
        let next = NEXT.load(Ordering::Relaxed);
        let taken: Vec<PathBuf> = (next..next + 3)
            .map(|n| base.join(format!("ravi-{}-{n}", std::process::id())))
            .collect();
        for dir in &taken {
            std::fs::create_dir(dir).unwrap();
        }
        let group = Group::create(5).unwrap();
        assert!(group.dir.join("pids.max").exists());
        assert_eq!(
            std::fs::read_to_string(group.dir.join("pids.max"))
                .unwrap()
                .trim(),
            "5"
        );
        drop(group);
        for dir in &taken {
            let _ = std::fs::remove_dir(dir);
        }
    }
}
