//! The fast-scheduler guard for output files (issue #9 item 4, CONTRACT.md §G-1).
//!
//! submitit and hydra put `%j` (or `%A_%a`) in the *directory* of `--output`/`--error` and
//! create that directory only after `sbatch` has returned. Real Slurm fails a job whose
//! output directory is missing when it starts (`FAILED`, "Could not open stdout file"), which
//! works in practice only because a real job starts a second or more after submission;
//! Flotilla can start a job within milliseconds. So when an output file cannot be opened
//! because its parent directory does not exist (yet), the job waits for it — polling every
//! [`POLL`], for at most [`OUTPUT_DIR_WAIT`] — and only then fails as Slurm would. Any other
//! error (permission denied, a parent that exists but is not a directory, ...) fails at once.

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a job waits for the directory of its output files: 20 s. Slurm has no such
/// wait; submitit creates its directory within milliseconds of `sbatch` returning, and a
/// real job start takes ≥ 1 s (CONTRACT.md §G-1), so 20 s covers a loaded submitting host.
pub const OUTPUT_DIR_WAIT: Duration = Duration::from_secs(20);

/// How often the directory is looked for while waiting: 50 ms.
pub const POLL: Duration = Duration::from_millis(50);

/// True when `err`, from opening `path`, means the parent directory does not exist (yet):
/// `ENOENT` and the parent is absent.
fn parent_missing(path: &Path, err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotFound
        && path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .is_some_and(|p| !p.exists())
}

/// Calls `open(path)`; while it fails because `path`'s parent directory does not exist,
/// retries every `poll` until `wait` has passed since the first try, then returns the last
/// error. Any other error is returned at once, without waiting.
///
/// `path` relative to the current directory works (its parent is looked up the same way).
/// Errors: the last `io::Error` of `open`.
pub fn open_waiting_for_dir<T>(
    path: &Path,
    wait: Duration,
    poll: Duration,
    mut open: impl FnMut(&Path) -> io::Result<T>,
) -> io::Result<T> {
    let start = Instant::now();
    loop {
        match open(path) {
            Ok(v) => return Ok(v),
            Err(e) if parent_missing(path, &e) && start.elapsed() < wait => {
                std::thread::sleep(poll.min(wait.saturating_sub(start.elapsed())));
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{File, OpenOptions};

    fn create(p: &Path) -> io::Result<File> {
        OpenOptions::new().create(true).write(true).truncate(true).open(p)
    }

    #[test]
    fn opens_at_once_when_the_directory_exists() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.log");
        let t = Instant::now();
        open_waiting_for_dir(&p, Duration::from_secs(5), POLL, create).unwrap();
        assert!(p.exists());
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn waits_for_a_directory_created_later() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("175").join("deeper");
        let p = dir.join("175_0_log.out");
        let maker = {
            let dir = dir.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(400));
                std::fs::create_dir_all(dir).unwrap();
            })
        };
        let t = Instant::now();
        open_waiting_for_dir(&p, Duration::from_secs(10), POLL, create).unwrap();
        maker.join().unwrap();
        assert!(p.exists());
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(400), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
    }

    #[test]
    fn gives_up_after_the_wait_with_not_found() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("never").join("out");
        let t = Instant::now();
        let e = open_waiting_for_dir(&p, Duration::from_millis(300), POLL, create).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }

    #[test]
    fn other_errors_fail_without_waiting() {
        let d = tempfile::tempdir().unwrap();
        // The parent exists but is a file: ENOTDIR, not a missing directory.
        let f = d.path().join("plain");
        std::fs::write(&f, "").unwrap();
        let t = Instant::now();
        let mut calls = 0;
        let r = open_waiting_for_dir(&f.join("out"), Duration::from_secs(10), POLL, |p| {
            calls += 1;
            create(p)
        });
        assert!(r.is_err());
        assert_eq!(calls, 1);
        assert!(t.elapsed() < Duration::from_secs(1));
        // A missing file whose directory exists (opened without create) is not waited for.
        let mut calls = 0;
        let r = open_waiting_for_dir(&d.path().join("absent"), Duration::from_secs(10), POLL, |p| {
            calls += 1;
            File::open(p)
        });
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(calls, 1);
    }
}
