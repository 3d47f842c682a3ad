//! The notice `slurmstepd` writes into a batch job's stderr file when the job is stopped
//! (Slurm 22.05 `slurmstepd/req.c`, `_handle_signal_container`):
//!
//! ```text
//! slurmstepd-gpu01: error: *** JOB 78 ON gpu01 CANCELLED AT 2026-11-29T09:42:38 DUE TO TIME LIMIT ***
//! ```
//!
//! The program name is `slurmstepd-<node>` when several node daemons share the host (Slurm's
//! multiple-slurmd mode, as the reference cluster ran them: the node name differs from the
//! host name), else `slurmstepd`. The time is the stop's decision time, `YYYY-MM-DDTHH:MM:SS`
//! as the commands print it.

use flotilla_proto::StopCause;
use std::path::Path;

/// The notice line (with its newline) for job `job_id` stopped on `node` at `at` (seconds
/// since the epoch) for `cause`; `multiple_slurmd`: the program name carries the node name.
pub fn stop_notice(node: &str, multiple_slurmd: bool, job_id: u64, at: i64, cause: StopCause) -> String {
    format!(
        "{}: error: *** JOB {job_id} ON {node} CANCELLED AT {}{} ***\n",
        prog(node, multiple_slurmd),
        flotilla_core::time::fmt_time(at),
        cause.phrase()
    )
}

/// The notice (with its newline) a step cancelled by `scancel JOB.STEP` gets on its `srun`'s
/// standard error (Slurm 22.05 `slurmstepd/req.c` `_handle_signal_container`, for a step):
/// `slurmstepd-gpu01: error: *** STEP 78.0 ON gpu01 CANCELLED AT 2026-11-29T09:42:38 ***`.
pub fn step_cancel_notice(node: &str, multiple_slurmd: bool, job_id: u64, step_id: u32, at: i64) -> String {
    let prog = prog(node, multiple_slurmd);
    format!("{prog}: error: *** STEP {job_id}.{step_id} ON {node} CANCELLED AT {} ***\n", flotilla_core::time::fmt_time(at))
}

/// The notices' program name: `slurmstepd-<node>` when several node daemons share the host,
/// else `slurmstepd`.
fn prog(node: &str, multiple_slurmd: bool) -> String {
    if multiple_slurmd {
        format!("slurmstepd-{node}")
    } else {
        "slurmstepd".to_string()
    }
}

/// Who appends the notice: the job's user, as which a root supervisor writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    /// Uid.
    pub uid: u32,
    /// Primary gid.
    pub gid: u32,
    /// Supplementary groups (empty: `gid` alone).
    pub groups: Vec<u32>,
}

/// Appends `text` to the job's output file `path` as `writer` (`None`: as this process, which
/// is not root): a child process becomes the user (supplementary groups, gid, uid) and opens
/// the file itself, so the user's path is resolved with the user's rights only, whatever she
/// swapped its directories for. The file must exist (it is never created) and be a regular
/// file; a FIFO or a device is refused without blocking (`O_NONBLOCK`, then checked).
///
/// The child does only async-signal-safe system calls on data prepared before the fork, so
/// this is safe in a multi-threaded process too.
///
/// Errors: the file is missing, not reachable or writable by the user, not a regular file
/// (`PermissionDenied`), the write fails, or no child could be started.
#[allow(unsafe_code)]
pub fn append_as_user(path: &Path, writer: Option<&Writer>, text: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let cpath = std::ffi::CString::new(path.as_os_str().as_bytes().to_vec())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL in the path"))?;
    let groups = writer_groups(writer);
    let bytes = text.as_bytes();
    // Exit codes of the child: 0 written, an errno otherwise, 255 when not a regular file.
    const NOT_A_FILE: i32 = 255;
    // SAFETY: fork(2); the child runs system calls only (on `cpath`, `groups`, `bytes`,
    // prepared above) and leaves with `_exit`, as is safe after a fork in any process.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above; this is the child.
        unsafe {
            let errno = || *libc::__errno_location();
            become_writer(writer, &groups);
            let fd = libc::open(cpath.as_ptr(), libc::O_WRONLY | libc::O_APPEND | libc::O_NOCTTY | libc::O_NONBLOCK);
            if fd < 0 {
                libc::_exit(errno());
            }
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) != 0 {
                libc::_exit(errno());
            }
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                libc::_exit(NOT_A_FILE);
            }
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
            write_all_or_exit(fd, bytes);
            libc::_exit(0);
        }
    }
    let status = wait_child(pid)?;
    match status {
        nix::sys::wait::WaitStatus::Exited(_, 0) => Ok(()),
        nix::sys::wait::WaitStatus::Exited(_, NOT_A_FILE) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} is not a regular file", path.display()),
        )),
        nix::sys::wait::WaitStatus::Exited(_, n) => Err(std::io::Error::from_raw_os_error(n)),
        other => Err(std::io::Error::other(format!("the notice writer ended with {other:?}"))),
    }
}

/// Replaces file `name` in directory `dir` with `text`, atomically, as `writer` (`None`: as
/// this process, which is not root): a child becomes the user, opens `dir` itself
/// (`O_DIRECTORY | O_NOFOLLOW`), writes `.<name>.new` there (`O_CREAT | O_TRUNC |
/// O_NOFOLLOW`, mode 0644) and renames it over `name`, so a reader sees the old file or the
/// new one, never a part, and the user's directory is only ever touched with her rights.
/// Used for an elastic job's membership file (`FLOTILLA_NODES_FILE`).
///
/// Errors: `name` holds a `/` or a NUL, `dir` is not a directory the user may write, or a
/// link; the write or the rename fails; no child could be started.
#[allow(unsafe_code)]
pub fn replace_as_user(dir: &Path, name: &str, writer: Option<&Writer>, text: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL or a slash in the name");
    if name.is_empty() || name.contains('/') {
        return Err(bad());
    }
    let cdir = std::ffi::CString::new(dir.as_os_str().as_bytes().to_vec()).map_err(|_| bad())?;
    let cname = std::ffi::CString::new(name).map_err(|_| bad())?;
    let ctmp = std::ffi::CString::new(format!(".{name}.new")).map_err(|_| bad())?;
    let groups = writer_groups(writer);
    let bytes = text.as_bytes();
    // SAFETY: fork(2); the child runs system calls only on data prepared above and leaves
    // with `_exit` (as in `append_as_user`).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above; this is the child.
        unsafe {
            let errno = || *libc::__errno_location();
            become_writer(writer, &groups);
            let dfd = libc::open(cdir.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC);
            if dfd < 0 {
                libc::_exit(errno());
            }
            let fd = libc::openat(
                dfd,
                ctmp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
                0o644,
            );
            if fd < 0 {
                libc::_exit(errno());
            }
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) != 0 {
                libc::_exit(errno());
            }
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                libc::_exit(libc::EPERM);
            }
            write_all_or_exit(fd, bytes);
            if libc::close(fd) != 0 || libc::renameat(dfd, ctmp.as_ptr(), dfd, cname.as_ptr()) != 0 {
                libc::_exit(errno());
            }
            libc::_exit(0);
        }
    }
    let status = wait_child(pid)?;
    match status {
        nix::sys::wait::WaitStatus::Exited(_, 0) => Ok(()),
        nix::sys::wait::WaitStatus::Exited(_, n) => Err(std::io::Error::from_raw_os_error(n)),
        other => Err(std::io::Error::other(format!("the file writer ended with {other:?}"))),
    }
}

/// The supplementary groups a writer's child takes (its primary group when it has none).
fn writer_groups(writer: Option<&Writer>) -> Vec<libc::gid_t> {
    match writer {
        Some(w) if w.groups.is_empty() => vec![w.gid],
        Some(w) => w.groups.clone(),
        None => Vec::new(),
    }
}

/// In a forked child: becomes `writer` (supplementary groups, gid, then uid), or leaves with
/// `_exit(errno)`. `None`: stays this process.
///
/// # Safety
/// Only in the child of a fork: it calls only async-signal-safe functions.
#[allow(unsafe_code)]
unsafe fn become_writer(writer: Option<&Writer>, groups: &[libc::gid_t]) {
    if let Some(w) = writer {
        // SAFETY: plain system calls on prepared data (the caller's contract).
        unsafe {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0 || libc::setgid(w.gid) != 0 || libc::setuid(w.uid) != 0 {
                libc::_exit(*libc::__errno_location());
            }
        }
    }
}

/// In a forked child: writes all of `bytes` to `fd` (again on `EINTR`), or leaves with
/// `_exit(errno)`.
///
/// # Safety
/// Only in the child of a fork, `fd` open for writing.
#[allow(unsafe_code)]
unsafe fn write_all_or_exit(fd: libc::c_int, bytes: &[u8]) {
    let mut off = 0;
    while off < bytes.len() {
        // SAFETY: `bytes[off..]` is valid for its length (the caller's contract otherwise).
        unsafe {
            let n = libc::write(fd, bytes[off..].as_ptr().cast(), bytes.len() - off);
            if n < 0 {
                if *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                libc::_exit(*libc::__errno_location());
            }
            off += n as usize;
        }
    }
}

/// Reaps child `pid` (again on `EINTR`). Errors: `waitpid`'s.
fn wait_child(pid: libc::pid_t) -> std::io::Result<nix::sys::wait::WaitStatus> {
    loop {
        match nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
            Ok(s) => return Ok(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The membership file is replaced whole; a link in place of the directory is refused.
    #[test]
    fn replace_writes_atomically_and_refuses_links() {
        let d = tempfile::tempdir().unwrap();
        replace_as_user(d.path(), "nodes", None, "gpu01\ngpu02\n").unwrap();
        replace_as_user(d.path(), "nodes", None, "gpu01\n").unwrap();
        assert_eq!(std::fs::read_to_string(d.path().join("nodes")).unwrap(), "gpu01\n");
        assert!(!d.path().join(".nodes.new").exists());
        let link = d.path().join("link");
        std::os::unix::fs::symlink(d.path(), &link).unwrap();
        assert!(replace_as_user(&link, "nodes", None, "x").is_err(), "a link to a directory is not followed");
        assert!(replace_as_user(d.path(), "../x", None, "x").is_err());
    }

    /// A FIFO in place of the output file is refused at once, not waited on.
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("slurm-1.out");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let q = p.clone();
        std::thread::spawn(move || tx.send(append_as_user(&q, None, "x").is_err()).unwrap());
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(5)), Ok(true), "refused, without blocking");
    }

    #[test]
    fn the_reference_time_limit_notice() {
        // 0278_jobout_timeout: job 78 on gpu01, 2026-11-29T09:42:38 (UTC).
        let at = 1_795_945_358;
        assert_eq!(
            stop_notice("gpu01", true, 78, at, StopCause::TimeLimit),
            "slurmstepd-gpu01: error: *** JOB 78 ON gpu01 CANCELLED AT 2026-11-29T09:42:38 DUE TO TIME LIMIT ***\n"
        );
        assert_eq!(
            stop_notice("n1", false, 5, at, StopCause::Cancelled),
            "slurmstepd: error: *** JOB 5 ON n1 CANCELLED AT 2026-11-29T09:42:38 ***\n"
        );
        assert!(stop_notice("n1", false, 5, at, StopCause::Preempted).ends_with(" DUE TO PREEMPTION ***\n"));
        assert!(stop_notice("n1", false, 5, at, StopCause::Requeued).ends_with(" DUE TO JOB REQUEUE ***\n"));
    }

    #[test]
    fn the_reference_step_cancel_notice() {
        // goldens-extra 0336: step 0 of a job on gpu01 cancelled by scancel JOB.0.
        let at = 1_795_945_358;
        assert_eq!(
            step_cancel_notice("gpu01", true, 73, 0, at),
            "slurmstepd-gpu01: error: *** STEP 73.0 ON gpu01 CANCELLED AT 2026-11-29T09:42:38 ***\n"
        );
        assert_eq!(step_cancel_notice("n1", false, 5, 2, at), "slurmstepd: error: *** STEP 5.2 ON n1 CANCELLED AT 2026-11-29T09:42:38 ***\n");
    }

    #[test]
    fn appends_only_to_an_existing_regular_file() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("slurm-1.out");
        std::fs::write(&f, "before\n").unwrap();
        append_as_user(&f, None, "notice\n").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "before\nnotice\n");
        // Missing: not created.
        let e = append_as_user(&d.path().join("nope"), None, "x\n").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        assert!(!d.path().join("nope").exists());
        // A directory: refused.
        assert!(append_as_user(d.path(), None, "x\n").is_err());
    }

    /// As root, the notice is written with the user's rights: a file the user may not write
    /// (here root's own, 0600) is left alone. Needs root (`FLOTILLA_TEST_ROOT=1`).
    #[test]
    fn as_root_the_users_rights_apply() {
        if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") || !nix::unistd::geteuid().is_root() {
            println!("SKIPPED: set FLOTILLA_TEST_ROOT=1 and run as root to write as another user");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("root-only");
        std::fs::write(&f, "root\n").unwrap();
        std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let nobody = Writer { uid: 65534, gid: 65534, groups: Vec::new() };
        let e = append_as_user(&f, Some(&nobody), "x\n").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "root\n");
    }

    /// As root, the membership file is written by the user: in a directory the user owns it
    /// is hers; in root's own directory (0755) nothing is written. Needs root.
    #[test]
    fn as_root_the_membership_file_is_the_users() {
        if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") || !nix::unistd::geteuid().is_root() {
            println!("SKIPPED: set FLOTILLA_TEST_ROOT=1 and run as root to write as another user");
            return;
        }
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let nobody = Writer { uid: 65534, gid: 65534, groups: Vec::new() };
        assert!(replace_as_user(d.path(), "nodes", Some(&nobody), "x\n").is_err());
        assert!(!d.path().join("nodes").exists() && !d.path().join(".nodes.new").exists());
        let user = d.path().join("user");
        std::fs::create_dir(&user).unwrap();
        std::os::unix::fs::chown(&user, Some(65534), Some(65534)).unwrap();
        replace_as_user(&user, "nodes", Some(&nobody), "gpu01\n").unwrap();
        let m = std::fs::metadata(user.join("nodes")).unwrap();
        assert_eq!((m.uid(), std::fs::read_to_string(user.join("nodes")).unwrap()), (65534, "gpu01\n".to_string()));
    }
}
