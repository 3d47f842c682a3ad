//! The spool directory (`SlurmdSpoolDir`, `%n` expanded): the node's identity and what the job
//! supervisors leave for the daemon. It is how a restarted daemon finds its jobs again.
//!
//! Layout:
//! - `boot_epoch`: `<epoch>\n<kernel boot id>\n`. The epoch is bumped when the kernel boot id
//!   changed or the file is new (DESIGN.md §2 `boot_epoch`), kept across a plain restart.
//! - `ctld_epoch`: `<epoch>\n`, the highest leader-lease epoch of a controller this node has
//!   acted on ([`CtldFence`]); kept across restarts and reboots.
//! - `slurmd.lock`: held (`flock`) by the daemon for its whole life: one daemon per spool.
//! - `jobs/` (0711): `jobs/<job>.<run>/`: one allocation, mode 0700 ([`DIR_MODE`]; the batch
//!   host's 0710 with the job's group, [`BATCH_DIR_MODE`]); every file in it 0600
//!   ([`FILE_MODE`]) but the user's. `job.json` ([`JobFile`]); for the batch host also
//!   `script` (owned by the user), `stepd.lock` (held by the supervisor while it lives),
//!   `stepd.sock` (its command socket), `exit.json` ([`ExitRecord`], written once the script
//!   ended and every process of the job is gone) and `user/` (owned by the user; the job
//!   touches `user/checkpoint_ack` to acknowledge a checkpoint).
//! - `jobs/<job>.<run>.done`: an ended allocation whose end the controller acknowledged
//!   (so that a late duplicate bind is ignored).

use flotilla_proto::{Bind, LaunchDetails};
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};

/// Errors of the spool; each names its path.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// Path.
        path: PathBuf,
        /// Cause.
        source: io::Error,
    },
    /// A file holds something else than expected.
    #[error("{path}: {message}")]
    Corrupt {
        /// Path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SpoolError + '_ {
    move |source| SpoolError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Mode of every file the daemon and the supervisors write in the spool: 0600 (owner root).
/// `job.json` holds the script and the whole submission environment (tokens included).
pub const FILE_MODE: u32 = 0o600;

/// Mode of a job's directory: 0700, created so (never widened but for the batch host's,
/// [`BATCH_DIR_MODE`]).
pub const DIR_MODE: u32 = 0o700;

/// Mode of the batch host's job directory: 0710, group the job's gid (as slurmstepd's job
/// directory is root-owned with the job's group, Slurm 22.05 `_make_batch_dir`): the job's
/// user may reach her script and `user/` by name, nobody else may, and nobody may list it.
pub const BATCH_DIR_MODE: u32 = 0o710;

/// Creates `path` (and missing parents) with mode [`DIR_MODE`]; an existing directory is
/// left as it is.
pub fn create_private_dir(path: &Path) -> Result<(), SpoolError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(path).map_err(io_err(path))
}

/// Creates (or replaces) `path` with `bytes`, mode `mode` from its creation on.
pub fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), SpoolError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err(path)(e)),
        _ => {}
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(io_err(path))?;
    f.write_all(bytes).map_err(io_err(path))
}

/// Writes a file atomically (temp file of mode [`FILE_MODE`], fsync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), SpoolError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    // A temp file left by a crash (perhaps of an older, laxer mode) goes first.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err(&tmp)(e)),
        _ => {}
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(&tmp)
        .map_err(io_err(&tmp))?;
    f.write_all(bytes).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

/// Reads and parses a JSON file; `Ok(None)` when it does not exist.
pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, SpoolError> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b).map(Some).map_err(|e| SpoolError::Corrupt {
            path: path.to_path_buf(),
            message: e.to_string(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// Writes a JSON file atomically.
pub fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<(), SpoolError> {
    let bytes = serde_json::to_vec_pretty(v).map_err(|e| SpoolError::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    write_atomic(path, &bytes)
}

/// The epoch to register with: the stored one when the boot id is unchanged, else the stored
/// one + 1 (1 for a new spool). Returns `(epoch, bumped)` and stores the result.
pub fn boot_epoch(spool: &Path, boot_id: &str) -> Result<(u64, bool), SpoolError> {
    let path = spool.join("boot_epoch");
    let (old_epoch, old_id) = match std::fs::read_to_string(&path) {
        Ok(t) => {
            let mut lines = t.lines();
            let e = lines.next().and_then(|l| l.trim().parse::<u64>().ok()).ok_or_else(|| SpoolError::Corrupt {
                path: path.clone(),
                message: "first line is not an epoch".into(),
            })?;
            (e, lines.next().unwrap_or("").trim().to_string())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => (0, String::new()),
        Err(e) => return Err(io_err(&path)(e)),
    };
    let bumped = old_epoch == 0 || old_id != boot_id.trim();
    let epoch = if bumped { old_epoch + 1 } else { old_epoch };
    write_atomic(&path, format!("{epoch}\n{}\n", boot_id.trim()).as_bytes())?;
    Ok((epoch, bumped))
}

/// The highest controller epoch this node has seen (`ctld_epoch` in the spool): the leader
/// lease's fencing token that every controller message carries (`Frame::ToNodeFenced`; a
/// plain `Frame::ToNode` counts as epoch 0). A message of a lower epoch than the highest seen
/// comes from a controller that lost the lease (paused, cut off from the database, or not
/// yet aware that a standby took over): the node refuses it, so such a controller can launch,
/// kill or requeue nothing here. The epoch is stored before the first message of a new one is
/// acted on, so a restarted daemon refuses the same old leader.
#[derive(Debug)]
pub struct CtldFence {
    path: PathBuf,
    highest: u64,
}

/// What [`CtldFence::admit`] decided about a message.
#[derive(Debug)]
pub enum Admit {
    /// The epoch seen before: act on it.
    Current,
    /// A higher epoch than any seen (a new leader): act on it. `saved` is the result of
    /// storing it (on an error the node keeps it in memory and acts: refusing the new leader
    /// would stall the node, and only a restart loses it).
    Newer {
        /// The highest epoch seen before.
        previous: u64,
        /// Storing the new one.
        saved: Result<(), SpoolError>,
    },
    /// Below the highest seen: refuse it.
    Older {
        /// The highest epoch seen.
        highest: u64,
    },
}

impl CtldFence {
    /// Reads `<spool>/ctld_epoch` (0 when absent). Errors: it cannot be read, or holds no
    /// number (the daemon does not start: it would forget which controllers are fenced).
    pub fn load(spool: &Path) -> Result<CtldFence, SpoolError> {
        let path = spool.join("ctld_epoch");
        let highest = match std::fs::read_to_string(&path) {
            Ok(t) => t.trim().parse::<u64>().map_err(|_| SpoolError::Corrupt {
                path: path.clone(),
                message: "not a controller epoch".into(),
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(io_err(&path)(e)),
        };
        Ok(CtldFence { path, highest })
    }

    /// The highest epoch seen.
    pub fn highest(&self) -> u64 {
        self.highest
    }

    /// Decides on a message of controller epoch `epoch`, storing it first when it is the
    /// highest yet.
    pub fn admit(&mut self, epoch: u64) -> Admit {
        match epoch.cmp(&self.highest) {
            std::cmp::Ordering::Equal => Admit::Current,
            std::cmp::Ordering::Less => Admit::Older { highest: self.highest },
            std::cmp::Ordering::Greater => {
                let previous = std::mem::replace(&mut self.highest, epoch);
                let saved = write_atomic(&self.path, format!("{epoch}\n").as_bytes());
                Admit::Newer { previous, saved }
            }
        }
    }
}

/// How a job's batch script ended (`exit.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitRecord {
    /// Exit code (0-255) when it exited.
    pub exit_code: i32,
    /// Signal that ended it (0: none).
    pub signal: i32,
    /// The OOM killer killed a process of the job.
    pub oom: bool,
    /// When (s since epoch).
    pub end_time: i64,
    /// What the batch step used ([`crate::usage`]); `None` in records of older supervisors
    /// and when the supervisor was gone without one.
    #[serde(default)]
    pub usage: Option<flotilla_proto::Usage>,
}

/// Everything the supervisor needs to run a job (`job.json`), computed by the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobFile {
    /// The binding as the controller sent it.
    pub bind: Bind,
    /// The launch details, when the controller sent them.
    pub details: Option<LaunchDetails>,
    /// The script's environment (without `SLURM_TASK_PID`).
    pub env: Vec<(String, String)>,
    /// Absolute stdout path.
    pub stdout: String,
    /// Absolute stderr path (may equal `stdout`).
    pub stderr: String,
    /// Append to the output files instead of truncating them (`--open-mode=append`, requeued
    /// runs).
    pub append: bool,
    /// Bind time (s since epoch): `--signal` and the time limit count from it.
    pub started_at: i64,
    /// Supplementary groups of the user (empty: the user's primary group only).
    pub groups: Vec<u32>,
}

/// Paths of one allocation's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobDir(pub PathBuf);

impl JobDir {
    /// `jobs/<job>.<run>` under `spool`.
    pub fn new(spool: &Path, job_id: u64, run: u32) -> JobDir {
        JobDir(spool.join("jobs").join(format!("{job_id}.{run}")))
    }
    /// `job.json`.
    pub fn job_file(&self) -> PathBuf {
        self.0.join("job.json")
    }
    /// The script.
    pub fn script(&self) -> PathBuf {
        self.0.join("script")
    }
    /// The supervisor's lock.
    pub fn lock(&self) -> PathBuf {
        self.0.join("stepd.lock")
    }
    /// The supervisor's command socket.
    pub fn socket(&self) -> PathBuf {
        self.0.join("stepd.sock")
    }
    /// The exit record.
    pub fn exit(&self) -> PathBuf {
        self.0.join("exit.json")
    }
    /// The user's directory.
    pub fn user_dir(&self) -> PathBuf {
        self.0.join("user")
    }
    /// The checkpoint acknowledgement the job touches.
    pub fn checkpoint_ack(&self) -> PathBuf {
        self.user_dir().join("checkpoint_ack")
    }
    /// The marker left after the controller acknowledged the end.
    pub fn done_marker(&self) -> PathBuf {
        self.0.with_extension(format!(
            "{}.done",
            self.0.extension().and_then(|e| e.to_str()).unwrap_or_default()
        ))
    }
}

/// `(job, run)` from a directory or marker name `<job>.<run>` / `<job>.<run>.done`.
pub fn parse_name(name: &str) -> Option<(u64, u32, bool)> {
    let (base, done) = match name.strip_suffix(".done") {
        Some(b) => (b, true),
        None => (name, false),
    };
    let (j, r) = base.split_once('.')?;
    Some((j.parse().ok()?, r.parse().ok()?, done))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_epochs_only_go_up_and_survive_a_restart() {
        let d = tempfile::tempdir().unwrap();
        let mut f = CtldFence::load(d.path()).unwrap();
        assert_eq!(f.highest(), 0);
        assert!(matches!(f.admit(0), Admit::Current), "a plain message before any epoch");
        assert!(matches!(f.admit(2), Admit::Newer { previous: 0, saved: Ok(()) }));
        assert!(matches!(f.admit(2), Admit::Current));
        assert!(matches!(f.admit(1), Admit::Older { highest: 2 }));
        assert!(matches!(f.admit(0), Admit::Older { highest: 2 }), "a plain message after epoch 2");
        // A restarted daemon remembers.
        let mut f = CtldFence::load(d.path()).unwrap();
        assert_eq!(f.highest(), 2);
        assert!(matches!(f.admit(1), Admit::Older { highest: 2 }));
        assert!(matches!(f.admit(5), Admit::Newer { previous: 2, saved: Ok(()) }));
        assert_eq!(std::fs::read_to_string(d.path().join("ctld_epoch")).unwrap(), "5\n");
        std::fs::write(d.path().join("ctld_epoch"), "five").unwrap();
        assert!(matches!(CtldFence::load(d.path()), Err(SpoolError::Corrupt { .. })));
    }

    #[test]
    fn epoch_kept_on_restart_bumped_on_reboot() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(boot_epoch(d.path(), "boot-a").unwrap(), (1, true));
        assert_eq!(boot_epoch(d.path(), "boot-a\n").unwrap(), (1, false));
        assert_eq!(boot_epoch(d.path(), "boot-b").unwrap(), (2, true));
        assert_eq!(boot_epoch(d.path(), "boot-b").unwrap(), (2, false));
        std::fs::write(d.path().join("boot_epoch"), "garbage").unwrap();
        assert!(boot_epoch(d.path(), "x").is_err());
    }

    #[test]
    fn files_are_private_from_their_creation() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("jobs/1.0");
        create_private_dir(&dir).unwrap();
        let p = dir.join("job.json");
        // A stale temp file of a laxer mode is not reused.
        std::fs::write(p.with_extension("tmp"), "old").unwrap();
        std::fs::set_permissions(p.with_extension("tmp"), std::fs::Permissions::from_mode(0o644)).unwrap();
        write_json(&p, &1u32).unwrap();
        write_new(&dir.join("script"), b"#!/bin/sh\n", 0o700).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&p), 0o600);
        assert_eq!(mode(&dir.join("script")), 0o700);
    }

    #[test]
    fn names() {
        let j = JobDir::new(Path::new("/s"), 42, 3);
        assert_eq!(j.0, Path::new("/s/jobs/42.3"));
        assert_eq!(j.done_marker(), Path::new("/s/jobs/42.3.done"));
        assert_eq!(parse_name("42.3"), Some((42, 3, false)));
        assert_eq!(parse_name("42.3.done"), Some((42, 3, true)));
        assert_eq!(parse_name("42.3.tmp"), None);
        assert_eq!(parse_name("x"), None);
    }
}
