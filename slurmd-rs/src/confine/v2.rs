//! cgroup v2 confinement: one directory per job in the unified hierarchy,
//! `<root>/flotilla/<node>/<name>`.
//!
//! - controllers: `+memory` (required) and `+pids` (where offered) are enabled in
//!   `cgroup.subtree_control` of every level from the root down to the job's parent;
//! - memory: `memory.max` (`max` unless cgroup.conf constrains memory), `memory.high`,
//!   `memory.swap.max` with `ConstrainSwapSpace=yes`; OOM kills read from `memory.events`' `oom_kill`;
//! - processes: `cgroup.procs`; `SIGKILL` through `cgroup.kill` where the kernel has it
//!   (≥ 5.14), else each pid is signalled;
//! - devices: v2 has no devices files, the filter is a `BPF_PROG_TYPE_CGROUP_DEVICE` program
//!   ([`super::bpf`]) attached to the job's directory.

use super::bpf::{self, BpfAttach, DeviceFilterAttach};
use super::fsutil;
use super::{ConfineError, ConfineSpec, Confinement, JobCgroup};
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Controllers enabled for job cgroups where the root offers them (`memory` is required).
pub const CONTROLLERS: &[&str] = &["memory", "pids"];

/// cgroup v2 confinement rooted at `root` (normally `/sys/fs/cgroup`).
#[derive(Debug, Clone)]
pub struct CgroupV2 {
    root: PathBuf,
    node: String,
    devices: Arc<dyn DeviceFilterAttach>,
}

impl CgroupV2 {
    /// Confinement for node daemon `node` under `root`, GPUs filtered by BPF.
    pub fn new(root: impl Into<PathBuf>, node: &str) -> CgroupV2 {
        CgroupV2::with_device_filter(root, node, Arc::new(BpfAttach))
    }

    /// Same, with another way of attaching the device program (tests on a fake cgroupfs).
    pub fn with_device_filter(
        root: impl Into<PathBuf>,
        node: &str,
        devices: Arc<dyn DeviceFilterAttach>,
    ) -> CgroupV2 {
        CgroupV2 {
            root: root.into(),
            node: node.to_string(),
            devices,
        }
    }

    /// The job directory `name`.
    pub fn dir(&self, name: &str) -> PathBuf {
        self.root.join("flotilla").join(&self.node).join(name)
    }

    /// Controllers of [`CONTROLLERS`] the root offers.
    fn offered(&self) -> Result<Vec<&'static str>, ConfineError> {
        let path = self.root.join("cgroup.controllers");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(fsutil::io_err(&path, e)),
        };
        let listed: Vec<&str> = text.split_whitespace().collect();
        let offered: Vec<&'static str> = CONTROLLERS
            .iter()
            .copied()
            .filter(|c| listed.contains(c))
            .collect();
        if !offered.contains(&"memory") {
            return Err(ConfineError::Unsupported("memory".into()));
        }
        Ok(offered)
    }
}

impl Confinement for CgroupV2 {
    fn kind(&self) -> &'static str {
        "v2"
    }

    fn create(&self, spec: &ConfineSpec) -> Result<Box<dyn JobCgroup>, ConfineError> {
        let offered = self.offered()?;
        let dir = self.dir(&spec.name);
        fsutil::create_dir_all(&dir)?;
        // Enable the controllers on every level above the job (no-internal-process rule: the
        // levels above hold no processes themselves).
        let enable: String = offered
            .iter()
            .map(|c| format!("+{c}"))
            .collect::<Vec<_>>()
            .join(" ");
        let mut level = self.root.clone();
        let below: Vec<_> = dir
            .strip_prefix(&self.root)
            .expect("job dir is under the root")
            .components()
            .collect();
        for component in &below[..below.len() - 1] {
            fsutil::write(&level.join("cgroup.subtree_control"), &enable)?;
            level.push(component);
        }
        fsutil::write(&level.join("cgroup.subtree_control"), &enable)?;
        write_memory(&dir, spec.memory.as_ref())?;
        let denied: Vec<(u32, u32)> = spec.denied_gpus().map(|g| (g.major, g.minor)).collect();
        if !denied.is_empty() {
            self.devices.attach(&dir, &bpf::device_filter(&denied))?;
        }
        Ok(Box::new(JobCgroupV2 { dir }))
    }
}

/// Writes the memory limits of the v2 cgroup `dir`: `memory.max` (hard), `memory.high`
/// (soft, as Slurm's cgroup/v2 sets it) and, with a RAM+swap limit, `memory.swap.max` = the
/// swap part (RAM+swap minus the hard limit; v2 counts swap alone); `max` for what is not
/// limited. `memory.swap.max` is absent without swap accounting: then swap is not
/// constrained, with a warning.
fn write_memory(dir: &Path, memory: Option<&super::MemoryLimits>) -> Result<(), ConfineError> {
    let (max, high, swap) = match memory {
        None => ("max".to_string(), "max".to_string(), Some("max".to_string())),
        Some(m) => (
            m.limit_bytes.to_string(),
            m.soft_limit_bytes.to_string(),
            m.memsw_limit_bytes.map(|sw| sw.saturating_sub(m.limit_bytes).to_string()),
        ),
    };
    fsutil::write(&dir.join("memory.max"), &max)?;
    let high_file = dir.join("memory.high");
    if high_file.exists() || memory.is_some() {
        fsutil::write(&high_file, &high)?;
    }
    let swap_file = dir.join("memory.swap.max");
    match swap {
        Some(v) if swap_file.exists() => fsutil::write(&swap_file, &v)?,
        Some(_) if memory.is_some() => {
            tracing::warn!("{}: no memory.swap.max (no swap accounting): swap is not constrained", dir.display());
        }
        _ => {}
    }
    Ok(())
}

/// A v2 job cgroup.
#[derive(Debug, Clone)]
pub struct JobCgroupV2 {
    dir: PathBuf,
}

impl JobCgroupV2 {
    /// The job's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl JobCgroup for JobCgroupV2 {
    fn add_pid(&self, pid: i32) -> Result<(), ConfineError> {
        fsutil::write(&self.dir.join("cgroup.procs"), &pid.to_string())
    }

    fn procs_files(&self) -> Vec<PathBuf> {
        vec![self.dir.join("cgroup.procs")]
    }

    fn usage(&self) -> Option<flotilla_proto::Usage> {
        Some(crate::usage::read_v2(&self.dir))
    }

    fn pids(&self) -> Result<Vec<i32>, ConfineError> {
        fsutil::tree_pids(&self.dir)
    }

    fn signal_all(&self, signal: i32) -> Result<(), ConfineError> {
        let signal = fsutil::signal_of(signal, &self.dir)?;
        let kill_file = self.dir.join("cgroup.kill");
        if signal == Signal::SIGKILL && kill_file.exists() {
            return fsutil::write(&kill_file, "1");
        }
        fsutil::signal_tree(&self.dir, signal, 16)
    }

    fn oom_killed(&self) -> Result<bool, ConfineError> {
        let events = fsutil::read(&self.dir.join("memory.events"))?;
        Ok(fsutil::keyed_value(&events, "oom_kill").unwrap_or(0) > 0)
    }

    fn destroy(&self) -> Result<(), ConfineError> {
        fsutil::remove_tree(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confine::testutil::Recorded;
    use crate::confine::GpuDevice;


    fn fake_root(controllers: &str) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("cgroup.controllers"), controllers).unwrap();
        tmp
    }

    fn spec(name: &str) -> ConfineSpec {
        ConfineSpec {
            name: name.into(),
            memory: Some(crate::confine::MemoryLimits::hard_mib(1024)),
            allowed_gpus: vec![2],
            all_gpus: (0..4)
                .map(|i| GpuDevice {
                    index: i,
                    major: 195,
                    minor: i,
                    path: format!("/dev/nvidia{i}"),
                })
                .collect(),
        }
    }

    #[test]
    fn create_enables_controllers_sets_memory_and_attaches_the_filter() {
        let root = fake_root("cpuset cpu io memory hugetlb pids rdma misc\n");
        let rec = Arc::new(Recorded::default());
        let v2 = CgroupV2::with_device_filter(root.path(), "n1", rec.clone());
        let job = v2.create(&spec("job_9/step_0")).unwrap();
        let dir = root.path().join("flotilla/n1/job_9/step_0");
        for level in ["", "flotilla", "flotilla/n1", "flotilla/n1/job_9"] {
            let sc = root.path().join(level).join("cgroup.subtree_control");
            assert_eq!(
                std::fs::read_to_string(sc).unwrap(),
                "+memory +pids",
                "{level}"
            );
        }
        assert!(
            !dir.join("cgroup.subtree_control").exists(),
            "the leaf holds processes"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.max")).unwrap(),
            "1073741824"
        );
        let attached = rec.0.lock().unwrap();
        assert_eq!(attached.len(), 1);
        assert_eq!(attached[0].0, dir);
        assert_eq!(
            attached[0].1,
            bpf::device_filter(&[(195, 0), (195, 1), (195, 3)])
        );
        drop(attached);

        std::fs::write(dir.join("cgroup.procs"), "").unwrap();
        job.add_pid(4242).unwrap();
        assert_eq!(job.pids().unwrap(), vec![4242]);
        job.destroy().unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn no_memory_controller_is_unsupported_and_no_limit_is_max() {
        let root = fake_root("cpu io\n");
        let v2 = CgroupV2::with_device_filter(root.path(), "n1", Arc::new(Recorded::default()));
        assert_eq!(
            v2.create(&spec("job_1")).unwrap_err().to_string(),
            "no usable cgroup memory controller"
        );
        let root = fake_root("memory\n");
        let rec = Arc::new(Recorded::default());
        let v2 = CgroupV2::with_device_filter(root.path(), "n1", rec.clone());
        let mut s = spec("job_1");
        s.memory = None;
        s.allowed_gpus = vec![0, 1, 2, 3];
        v2.create(&s).unwrap();
        let dir = root.path().join("flotilla/n1/job_1");
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.max")).unwrap(),
            "max"
        );
        assert_eq!(
            std::fs::read_to_string(root.path().join("cgroup.subtree_control")).unwrap(),
            "+memory"
        );
        assert!(
            rec.0.lock().unwrap().is_empty(),
            "all GPUs allowed: no program"
        );
    }

    #[test]
    fn oom_killed_reads_memory_events() {
        let root = fake_root("memory pids\n");
        let v2 = CgroupV2::with_device_filter(root.path(), "n1", Arc::new(Recorded::default()));
        let job = v2.create(&spec("job_1")).unwrap();
        let events = root.path().join("flotilla/n1/job_1/memory.events");
        std::fs::write(&events, "low 0\nhigh 0\nmax 10\noom 1\noom_kill 0\n").unwrap();
        assert!(!job.oom_killed().unwrap());
        std::fs::write(&events, "low 0\nhigh 0\nmax 10\noom 2\noom_kill 1\n").unwrap();
        assert!(job.oom_killed().unwrap());
    }

    #[test]
    fn sigkill_uses_cgroup_kill_where_present_else_each_pid() {
        use std::os::unix::process::ExitStatusExt;
        let root = fake_root("memory pids\n");
        let v2 = CgroupV2::with_device_filter(root.path(), "n1", Arc::new(Recorded::default()));
        let job = v2.create(&spec("job_1")).unwrap();
        let dir = root.path().join("flotilla/n1/job_1");
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        std::fs::write(dir.join("cgroup.procs"), format!("{}\n", child.id())).unwrap();

        std::fs::write(dir.join("cgroup.kill"), "").unwrap();
        job.signal_all(9).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("cgroup.kill")).unwrap(),
            "1"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the fake cgroup.kill kills nothing"
        );

        std::fs::remove_file(dir.join("cgroup.kill")).unwrap();
        job.signal_all(9).unwrap();
        assert_eq!(child.wait().unwrap().signal(), Some(9));
    }

    /// The real thing, where the host's unified hierarchy has controllers. Not a root test:
    /// it needs write access to the cgroup tree, and skips without v2 controllers.
    #[test]
    fn real_v2_memory_and_processes() {
        let root = Path::new("/sys/fs/cgroup");
        let controllers =
            std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
        if !controllers.split_whitespace().any(|c| c == "memory") {
            println!("SKIPPED: no cgroup v2 controllers on this host");
            return;
        }
        if nix::unistd::access(root, nix::unistd::AccessFlags::W_OK).is_err() {
            println!("SKIPPED: /sys/fs/cgroup is not writable by this user (not delegated)");
            return;
        }
        let node = format!("test-{}", std::process::id());
        let v2 = CgroupV2::new(root, &node);
        let mut s = spec("job_1");
        s.all_gpus.clear(); // device filtering is covered by the interpreter tests
        let job = v2
            .create(&s)
            .expect("create a v2 job cgroup (run as root or delegated)");
        let dir = v2.dir("job_1");
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.max"))
                .unwrap()
                .trim(),
            "1073741824"
        );
        use std::io::Write;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read go; sleep 60 & sleep 60 & wait"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        job.add_pid(child.id() as i32).unwrap();
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while job.pids().unwrap().len() < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(job.pids().unwrap().len(), 3, "sh and its two sleeps");
        assert!(!job.oom_killed().unwrap());
        job.signal_all(9).unwrap();
        child.wait().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !job.pids().unwrap().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(job.pids().unwrap().is_empty());
        job.destroy().unwrap();
        assert!(!dir.exists());
        let _ = std::fs::remove_dir(root.join("flotilla").join(&node));
    }
}
