//! cgroup v1 confinement: one directory per job in each controller,
//! `<root>/<controller>/flotilla/<node>/<name>`, for `memory` and `devices` (required) and
//! `pids` (where mounted, so a job's processes can be listed there too).
//!
//! - memory: `memory.limit_in_bytes` (`-1` unless cgroup.conf constrains memory),
//!   `memory.soft_limit_in_bytes`, `memory.memsw.limit_in_bytes` and `memory.swappiness` with
//!   `ConstrainSwapSpace=yes`; OOM kills read from `memory.oom_control`'s `oom_kill`
//!   (kernels ≥ 4.13), else `memory.failcnt` > 0 with `under_oom` (older kernels).
//! - devices: like Slurm's task/cgroup, only GPUs are constrained (and only with
//!   `ConstrainDevices=yes`, which fills the spec's `all_gpus`): `c M:m rwm` written to
//!   `devices.deny` for every GPU outside the mask and to `devices.allow` for the job's own;
//!   every other device stays allowed (inherited from the parent), the standard ones
//!   (`/dev/null`, ...) always ([`super::STANDARD_DEVICES`]).
//! - cpuacct (where mounted, alone or as `cpu,cpuacct`): CPU time of the job and its steps
//!   ([`crate::usage`]).
//! - processes: `cgroup.procs`; no freezer, so [`JobCgroup::signal_all`] signals each pid and,
//!   for `SIGKILL`, repeats until no new pid appears.

use super::fsutil;
use super::{ConfineError, ConfineSpec, Confinement, JobCgroup};
use std::path::{Path, PathBuf};

/// Controllers a v1 job cgroup needs.
pub const REQUIRED: &[&str] = &["memory", "devices"];
/// Controllers used where mounted (`cpuacct` for the steps' CPU time, [`crate::usage`]).
pub const OPTIONAL: &[&str] = &["pids", "cpuacct"];

/// cgroup v1 confinement rooted at `root` (normally `/sys/fs/cgroup`, where each controller is
/// mounted at `<root>/<controller>`).
#[derive(Debug, Clone)]
pub struct CgroupV1 {
    root: PathBuf,
    node: String,
}

impl CgroupV1 {
    /// Confinement for node daemon `node` under `root`.
    pub fn new(root: impl Into<PathBuf>, node: &str) -> CgroupV1 {
        CgroupV1 {
            root: root.into(),
            node: node.to_string(),
        }
    }

    /// The job directory `name` in `controller`.
    pub fn dir(&self, controller: &str, name: &str) -> PathBuf {
        self.root
            .join(controller)
            .join("flotilla")
            .join(&self.node)
            .join(name)
    }

    /// True when `controller` is mounted (its hierarchy's root directory exists).
    fn mounted(&self, controller: &str) -> bool {
        self.root.join(controller).join("cgroup.procs").exists()
    }
}

/// A device rule in `devices.allow`/`devices.deny` syntax.
fn rule(major: u32, minor: u32) -> String {
    format!("c {major}:{minor} rwm")
}

impl Confinement for CgroupV1 {
    fn kind(&self) -> &'static str {
        "v1"
    }

    fn create(&self, spec: &ConfineSpec) -> Result<Box<dyn JobCgroup>, ConfineError> {
        for controller in REQUIRED {
            if !self.mounted(controller) {
                return Err(ConfineError::Unsupported((*controller).to_string()));
            }
        }
        let controllers: Vec<&str> = REQUIRED
            .iter()
            .chain(OPTIONAL)
            .copied()
            .filter(|c| self.mounted(c))
            .collect();
        let mut dirs = Vec::new();
        for controller in &controllers {
            let dir = self.dir(controller, &spec.name);
            fsutil::create_dir_all(&dir)?;
            dirs.push(dir);
        }
        let memory = self.dir("memory", &spec.name);
        write_memory(&memory, spec.memory.as_ref())?;
        let devices = self.dir("devices", &spec.name);
        for gpu in spec.allowed_gpu_devices() {
            fsutil::append(&devices.join("devices.allow"), &rule(gpu.major, gpu.minor))?;
        }
        for gpu in spec.denied_gpus() {
            fsutil::append(&devices.join("devices.deny"), &rule(gpu.major, gpu.minor))?;
        }
        let cpuacct = self.mounted("cpuacct").then(|| self.dir("cpuacct", &spec.name));
        Ok(Box::new(JobCgroupV1 { memory, cpuacct, dirs }))
    }
}

/// A v1 job cgroup: the same name in each controller.
#[derive(Debug, Clone)]
pub struct JobCgroupV1 {
    memory: PathBuf,
    cpuacct: Option<PathBuf>,
    dirs: Vec<PathBuf>,
}

impl JobCgroupV1 {
    /// The job's directories, one per controller (memory first).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

}

impl JobCgroup for JobCgroupV1 {
    fn add_pid(&self, pid: i32) -> Result<(), ConfineError> {
        for dir in &self.dirs {
            fsutil::write(&dir.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    fn usage(&self) -> Option<flotilla_proto::Usage> {
        Some(crate::usage::read_v1(&self.memory, self.cpuacct.as_deref()))
    }

    fn pids(&self) -> Result<Vec<i32>, ConfineError> {
        fsutil::tree_pids(&self.memory)
    }

    fn signal_all(&self, signal: i32) -> Result<(), ConfineError> {
        let signal = fsutil::signal_of(signal, &self.memory)?;
        fsutil::signal_tree(&self.memory, signal, 16)
    }

    /// v1 counts an OOM kill only in the memory cgroup of the killed process (not in its
    /// ancestors, unlike v2's `memory.events`), so every cgroup of the tree is read: a job's
    /// processes live in its step cgroups below it.
    fn oom_killed(&self) -> Result<bool, ConfineError> {
        for dir in fsutil::cgroup_tree(&self.memory)? {
            if oom_killed(&dir.join("memory.oom_control"), &dir.join("memory.failcnt"))? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn destroy(&self) -> Result<(), ConfineError> {
        for dir in &self.dirs {
            fsutil::remove_tree(dir)?;
        }
        Ok(())
    }
}

/// Writes the memory limits of the v1 memory cgroup `dir` (`None`: unlimited, `-1`). The hard
/// limit may not exceed RAM+swap (the kernel refuses with `EINVAL`): the hard limit goes
/// first, and when the kernel refuses it (both lowered, at a re-open) RAM+swap goes first.
/// RAM+swap needs `swapaccount=1` (`memory.memsw.*` present); without it the swap limit
/// is left out with a warning, as Slurm logs and goes on.
fn write_memory(dir: &Path, memory: Option<&super::MemoryLimits>) -> Result<(), ConfineError> {
    let limit = dir.join("memory.limit_in_bytes");
    let Some(m) = memory else {
        let memsw = dir.join("memory.memsw.limit_in_bytes");
        if memsw.exists() {
            fsutil::write(&memsw, "-1")?;
        }
        return fsutil::write(&limit, "-1");
    };
    let memsw = dir.join("memory.memsw.limit_in_bytes");
    match m.memsw_limit_bytes {
        Some(sw) if memsw.exists() => {
            if fsutil::write(&limit, &m.limit_bytes.to_string()).is_err() {
                fsutil::write(&memsw, &sw.to_string())?;
                fsutil::write(&limit, &m.limit_bytes.to_string())?;
            } else {
                fsutil::write(&memsw, &sw.to_string())?;
            }
        }
        Some(_) => {
            tracing::warn!("{}: no memory.memsw.limit_in_bytes (boot with swapaccount=1): swap is not constrained", dir.display());
            fsutil::write(&limit, &m.limit_bytes.to_string())?;
        }
        None => fsutil::write(&limit, &m.limit_bytes.to_string())?,
    }
    let soft = dir.join("memory.soft_limit_in_bytes");
    if soft.exists() {
        fsutil::write(&soft, &m.soft_limit_bytes.to_string())?;
    }
    if let Some(sw) = m.swappiness {
        fsutil::write(&dir.join("memory.swappiness"), &sw.to_string())?;
    }
    Ok(())
}

fn oom_killed(oom_control: &Path, failcnt: &Path) -> Result<bool, ConfineError> {
    let control = fsutil::read(oom_control)?;
    if let Some(kills) = fsutil::keyed_value(&control, "oom_kill") {
        return Ok(kills > 0);
    }
    let under_oom = fsutil::keyed_value(&control, "under_oom").unwrap_or(0) > 0;
    let failures = fsutil::read(failcnt)?.trim().parse::<u64>().unwrap_or(0);
    Ok(under_oom || failures > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confine::testutil::gpus;

    /// A fake v1 cgroupfs: one directory per controller with its `cgroup.procs`.
    fn fake_root(controllers: &[&str]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        for c in controllers {
            std::fs::create_dir_all(tmp.path().join(c)).unwrap();
            std::fs::write(tmp.path().join(c).join("cgroup.procs"), "").unwrap();
        }
        tmp
    }

    fn spec(name: &str) -> ConfineSpec {
        ConfineSpec {
            name: name.into(),
            memory: Some(crate::confine::MemoryLimits::hard_mib(512)),
            allowed_gpus: vec![1, 3],
            all_gpus: gpus(4),
        }
    }

    #[test]
    fn create_writes_limits_and_device_rules() {
        let root = fake_root(&["memory", "devices", "pids"]);
        let v1 = CgroupV1::new(root.path(), "n1");
        let job = v1.create(&spec("job_42")).unwrap();
        let mem = root.path().join("memory/flotilla/n1/job_42");
        let dev = root.path().join("devices/flotilla/n1/job_42");
        assert!(root.path().join("pids/flotilla/n1/job_42").is_dir());
        assert_eq!(
            std::fs::read_to_string(mem.join("memory.limit_in_bytes")).unwrap(),
            "536870912"
        );
        assert_eq!(
            std::fs::read_to_string(dev.join("devices.deny")).unwrap(),
            "c 195:0 rwm\nc 195:2 rwm\n"
        );
        assert_eq!(
            std::fs::read_to_string(dev.join("devices.allow")).unwrap(),
            "c 195:1 rwm\nc 195:3 rwm\n"
        );
        job.add_pid(77).unwrap();
        for c in ["memory", "devices", "pids"] {
            let procs = root.path().join(c).join("flotilla/n1/job_42/cgroup.procs");
            assert_eq!(std::fs::read_to_string(procs).unwrap(), "77");
        }
        assert_eq!(job.pids().unwrap(), vec![77]);
        job.destroy().unwrap();
        assert!(!mem.exists() && !dev.exists());
    }

    #[test]
    fn no_limit_and_no_pids_controller() {
        let root = fake_root(&["memory", "devices"]);
        let v1 = CgroupV1::new(root.path(), "n1");
        let mut s = spec("job_7/step_0");
        s.memory = None;
        v1.create(&s).unwrap();
        let mem = root.path().join("memory/flotilla/n1/job_7/step_0");
        assert_eq!(
            std::fs::read_to_string(mem.join("memory.limit_in_bytes")).unwrap(),
            "-1"
        );
        assert!(!root.path().join("pids/flotilla").exists());
    }

    #[test]
    fn missing_controllers_are_unsupported() {
        let root = fake_root(&["memory"]);
        let err = CgroupV1::new(root.path(), "n1")
            .create(&spec("job_1"))
            .unwrap_err();
        assert_eq!(err.to_string(), "no usable cgroup devices controller");
    }

    #[test]
    fn oom_from_oom_control_or_failcnt() {
        let root = fake_root(&["memory", "devices"]);
        let job = CgroupV1::new(root.path(), "n1")
            .create(&spec("job_1"))
            .unwrap();
        let mem = root.path().join("memory/flotilla/n1/job_1");
        std::fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
        )
        .unwrap();
        std::fs::write(mem.join("memory.failcnt"), "12\n").unwrap();
        assert!(
            !job.oom_killed().unwrap(),
            "oom_kill wins over failcnt when present"
        );
        std::fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
        )
        .unwrap();
        assert!(job.oom_killed().unwrap());
        // Old kernels: no oom_kill line.
        std::fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\n",
        )
        .unwrap();
        assert!(job.oom_killed().unwrap());
        std::fs::write(mem.join("memory.failcnt"), "0\n").unwrap();
        assert!(!job.oom_killed().unwrap());
        // Missing file: an error naming it.
        std::fs::remove_file(mem.join("memory.oom_control")).unwrap();
        let err = job.oom_killed().unwrap_err().to_string();
        assert!(err.contains("memory.oom_control"), "{err}");
    }

    #[test]
    fn signal_all_kills_listed_processes() {
        let root = fake_root(&["memory", "devices"]);
        let job = CgroupV1::new(root.path(), "n1")
            .create(&spec("job_1"))
            .unwrap();
        let mut a = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let mut b = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let mem = root.path().join("memory/flotilla/n1/job_1");
        std::fs::write(
            mem.join("cgroup.procs"),
            format!("{}\n{}\n", a.id(), b.id()),
        )
        .unwrap();
        job.signal_all(15).unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(a.wait().unwrap().signal(), Some(15));
        assert_eq!(b.wait().unwrap().signal(), Some(15));
        assert!(
            job.signal_all(0x7fff).is_err(),
            "an unknown signal is an error"
        );
    }
}
