//! File helpers shared by the cgroup implementations: every I/O error carries its path.

use super::ConfineError;
use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::Write;
use std::path::{Path, PathBuf};

pub(crate) fn io_err(path: &Path, source: std::io::Error) -> ConfineError {
    ConfineError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes `value` to a cgroup file (one `write(2)`, as cgroupfs wants one value per write).
pub(crate) fn write(path: &Path, value: &str) -> Result<(), ConfineError> {
    std::fs::write(path, value).map_err(|e| io_err(path, e))
}

/// Appends one rule to a cgroup file opened for append, one `write(2)` per rule: on cgroupfs
/// each write is one rule (`devices.allow`, `devices.deny`); on a fake cgroupfs the rules
/// accumulate so tests can read them back.
pub(crate) fn append(path: &Path, line: &str) -> Result<(), ConfineError> {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| io_err(path, e))?;
    file.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| io_err(path, e))
}

pub(crate) fn read(path: &Path) -> Result<String, ConfineError> {
    std::fs::read_to_string(path).map_err(|e| io_err(path, e))
}

/// Creates `path` and its missing parents, each 0755 whatever the daemon's umask (0077): a
/// job's processes, running as its user, read their own cgroup's limits (`memory.max`, as
/// runtimes sizing themselves to the container do), as under Slurm.
pub(crate) fn create_dir_all(path: &Path) -> Result<(), ConfineError> {
    use std::os::unix::fs::PermissionsExt;
    let missing: Vec<&Path> = path.ancestors().take_while(|p| !p.as_os_str().is_empty() && !p.exists()).collect();
    for d in missing.into_iter().rev() {
        match std::fs::create_dir(d) {
            Ok(()) => std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).map_err(|e| io_err(d, e))?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err(d, e)),
        }
    }
    Ok(())
}

/// Parses `cgroup.procs`: one pid per line.
pub(crate) fn parse_pids(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// The value of `key` in a flat keyed file (`memory.events`, `memory.oom_control`:
/// `key value` per line).
pub(crate) fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        (fields.next() == Some(key))
            .then(|| fields.next()?.parse().ok())
            .flatten()
    })
}

/// `dir` and every cgroup directory below it, deepest first (job steps live below their job).
pub(crate) fn cgroup_tree(dir: &Path) -> Result<Vec<PathBuf>, ConfineError> {
    let mut out = Vec::new();
    collect_tree(dir, &mut out)?;
    Ok(out)
}

fn collect_tree(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), ConfineError> {
    let entries = std::fs::read_dir(dir).map_err(|e| io_err(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        if entry.file_type().map_err(|e| io_err(dir, e))?.is_dir() {
            collect_tree(&entry.path(), out)?;
        }
    }
    out.push(dir.to_path_buf());
    Ok(())
}

/// Pids of `dir`'s `cgroup.procs` and of every cgroup below it.
pub(crate) fn tree_pids(dir: &Path) -> Result<Vec<i32>, ConfineError> {
    let mut pids = Vec::new();
    for cgroup in cgroup_tree(dir)? {
        let procs = cgroup.join("cgroup.procs");
        match std::fs::read_to_string(&procs) {
            Ok(text) => pids.extend(parse_pids(&text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&procs, e)),
        }
    }
    pids.sort_unstable();
    pids.dedup();
    Ok(pids)
}

/// The signal named by its number.
pub(crate) fn signal_of(signal: i32, path: &Path) -> Result<Signal, ConfineError> {
    Signal::try_from(signal).map_err(|e| io_err(path, std::io::Error::from(e)))
}

/// Sends `signal` to every process of the cgroup tree at `dir` (freezer-less): reads the pids,
/// signals each (a pid already gone is fine). For `SIGKILL`, repeats until no process is left
/// that was not already killed, so children forked between the read and the kill die too
/// (at most `rounds` rounds).
pub(crate) fn signal_tree(dir: &Path, signal: Signal, rounds: usize) -> Result<(), ConfineError> {
    let mut signalled: Vec<i32> = Vec::new();
    for _ in 0..rounds.max(1) {
        let fresh: Vec<i32> = tree_pids(dir)?
            .into_iter()
            .filter(|pid| !signalled.contains(pid))
            .collect();
        if fresh.is_empty() {
            break;
        }
        for &pid in &fresh {
            match kill(Pid::from_raw(pid), signal) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(e) => return Err(io_err(dir, std::io::Error::from(e))),
            }
        }
        signalled.extend(fresh);
        if signal != Signal::SIGKILL {
            break;
        }
    }
    Ok(())
}

/// Removes the cgroup directory `dir` and the cgroups below it, deepest first (`rmdir(2)`:
/// cgroupfs directories hold only virtual files). An absent directory is fine.
pub(crate) fn remove_tree(dir: &Path) -> Result<(), ConfineError> {
    if !dir.exists() {
        return Ok(());
    }
    for cgroup in cgroup_tree(dir)? {
        if let Err(e) = std::fs::remove_dir(&cgroup) {
            match e.kind() {
                std::io::ErrorKind::NotFound => {}
                // A fake cgroupfs (a temp dir) holds real files: remove them too.
                std::io::ErrorKind::DirectoryNotEmpty if !is_cgroupfs(&cgroup) => {
                    std::fs::remove_dir_all(&cgroup).map_err(|e| io_err(&cgroup, e))?
                }
                _ => return Err(io_err(&cgroup, e)),
            }
        }
    }
    Ok(())
}

/// True when `path` is on a cgroup filesystem (v1 or v2).
fn is_cgroupfs(path: &Path) -> bool {
    use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};
    statfs(path)
        .map(|s| {
            s.filesystem_type() == CGROUP_SUPER_MAGIC || s.filesystem_type() == CGROUP2_SUPER_MAGIC
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_values_and_pids_parse() {
        let events = "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 0\n";
        assert_eq!(keyed_value(events, "oom_kill"), Some(2));
        assert_eq!(keyed_value(events, "oom"), Some(1));
        assert_eq!(keyed_value(events, "absent"), None);
        assert_eq!(parse_pids("12\n 34\n\nx\n"), vec![12, 34]);
    }

    #[test]
    fn tree_is_deepest_first_and_removable() {
        let tmp = tempfile::tempdir().unwrap();
        let job = tmp.path().join("job_1");
        std::fs::create_dir_all(job.join("step_0")).unwrap();
        std::fs::write(job.join("cgroup.procs"), "5\n").unwrap();
        std::fs::write(job.join("step_0/cgroup.procs"), "7\n5\n").unwrap();
        let tree = cgroup_tree(&job).unwrap();
        assert_eq!(tree, vec![job.join("step_0"), job.clone()]);
        assert_eq!(tree_pids(&job).unwrap(), vec![5, 7]);
        remove_tree(&job).unwrap();
        assert!(!job.exists());
        remove_tree(&job).unwrap();
    }
}
