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
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The notice line (with its newline) for job `job_id` stopped on `node` at `at` (seconds
/// since the epoch) for `cause`; `multiple_slurmd`: the program name carries the node name.
pub fn stop_notice(node: &str, multiple_slurmd: bool, job_id: u64, at: i64, cause: StopCause) -> String {
    let prog = if multiple_slurmd {
        format!("slurmstepd-{node}")
    } else {
        "slurmstepd".to_string()
    };
    format!(
        "{prog}: error: *** JOB {job_id} ON {node} CANCELLED AT {}{} ***\n",
        flotilla_core::time::fmt_time(at),
        cause.phrase()
    )
}

/// Appends `text` to the job's output file `path`, which must already exist as a regular file
/// owned by `uid` (the job opened it as its user). Never follows a symbolic link and never
/// creates a file, so that a job cannot make a root-run supervisor write elsewhere.
///
/// Errors: the file is missing, a link, not a regular file, or owned by someone else
/// (`PermissionDenied`), or the write fails.
pub fn append_to_job_file(path: &Path, uid: u32, text: &str) -> std::io::Result<()> {
    // O_NONBLOCK: opening a FIFO the job put there would otherwise block (a root supervisor
    // stuck until someone reads); the type check below then refuses it.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(path)?;
    let m = f.metadata()?;
    if !m.file_type().is_file() || m.uid() != uid {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} is not a regular file of uid {uid}", path.display()),
        ));
    }
    f.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO in place of the output file is refused at once, not waited on.
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("slurm-1.out");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let me = nix::unistd::getuid().as_raw();
        let (tx, rx) = std::sync::mpsc::channel();
        let q = p.clone();
        std::thread::spawn(move || tx.send(append_to_job_file(&q, me, "x").is_err()).unwrap());
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
    fn appends_only_to_an_existing_file_of_the_user() {
        let d = tempfile::tempdir().unwrap();
        let me = nix::unistd::getuid().as_raw();
        let f = d.path().join("slurm-1.out");
        std::fs::write(&f, "before\n").unwrap();
        append_to_job_file(&f, me, "notice\n").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "before\nnotice\n");
        // Someone else's file: refused, untouched.
        let e = append_to_job_file(&f, me + 1, "x\n").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "before\nnotice\n");
        // Missing: not created.
        assert!(append_to_job_file(&d.path().join("nope"), me, "x\n").is_err());
        assert!(!d.path().join("nope").exists());
        // A symbolic link: not followed.
        let l = d.path().join("link");
        std::os::unix::fs::symlink(&f, &l).unwrap();
        assert!(append_to_job_file(&l, me, "x\n").is_err());
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "before\nnotice\n");
    }
}
