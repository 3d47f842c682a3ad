//! The job's cgroup on every node it is bound to (what Slurm's extern step does): the node
//! daemon creates `job_<id>` with the job's limits on this node (the GPUs of its `gpu_mask`,
//! its memory) when the controller binds the job here (`Bind`/`Launch`, batch host or not),
//! before anything of the job runs here; every process of the job on this node lives in a
//! step cgroup below it — the batch script in `job_<id>/step_batch` (joined by the batch
//! supervisor between fork and exec), the tasks of `srun` step `s` in `job_<id>/step_<s>`
//! (joined by each task between fork and exec, [`StepCgroup::join_files`]) — so the job-level
//! limits confine them all, and killing the job's tree reaches them all. When the job has
//! ended on this node (the batch script's end on the batch host, `Kill` elsewhere, whatever
//! the cause: cancel, time limit, preemption, requeue, a node-side kill) the daemon SIGKILLs
//! the tree and removes it once no process is left ([`NodeCgroups::release`],
//! [`NodeCgroups::poll`]).
//!
//! Layout, under the node's confinement root (see [`crate::confine`]; the node part is
//! `<ClusterName>_<NodeName>`, so several clusters and `-N` daemons on one host never share):
//! `job_42/` (limits and GPU rules) ⊃ `step_batch/`, `step_0/`, `step_1/`, ... (each with the
//! job's limits and GPU rules again, so a step stays confined even in a race that would
//! recreate the job directory; on v1 a child cgroup cannot be granted more devices than its
//! parent anyway, on v2 every ancestor's device program runs).
//!
//! Owner: the node daemon itself, not a per-job process. A cgroup is a kernel object that
//! needs no process to hold it, and the daemon already owns the node's table of jobs, receives
//! every bind and kill, and launches every step task; a separate extern-step process per job
//! would add a process to supervise and a protocol to it without confining anything more.
//! Restarts: the job's cgroup survives the daemon (it is the kernel's), and its name follows
//! from (cluster, node, job), so a restarted daemon re-opens the cgroups of the jobs it
//! re-adopts from the spool ([`NodeCgroups::open_job`] creates or re-opens) and releases them
//! when those jobs end — it survives what the batch supervisor survives. At start, after
//! re-adopting (or, after a reboot's new boot epoch, forgetting) the spool's jobs, the daemon
//! kills and removes every other job cgroup of its node ([`NodeCgroups::sweep`]). Not
//! covered: step tasks are children of the daemon and do not survive its restart as working
//! tasks (their I/O threads die with it); they stay confined and are killed with their job.
//!
//! OOM: an OOM kill anywhere in the tree counts for the job (v1 reads every step's
//! `memory.oom_control`, v2's `memory.events` is hierarchical); it is read where the batch
//! script's end is recorded, so a step task killed on the batch host makes the job
//! OUT_OF_MEMORY; one killed on another node is not reported (the task's exit by SIGKILL
//! reaches `srun`, not the job's state).
//!
//! What is constrained follows cgroup.conf as Slurm's task/cgroup does
//! ([`NodeCgroups::with_conf`]): the GPUs outside the job's allocation only with
//! `ConstrainDevices=yes`, memory only with `ConstrainRAMSpace=yes` (or
//! `ConstrainSwapSpace=yes`); otherwise the cgroups still hold, list and kill the job's
//! processes and count OOM kills. Standard devices (`/dev/null`, ...) are never denied.
//!
//! Unconfined (`--cgroup none`, or `auto` on a host without cgroups): every call is a no-op
//! and nothing changes from the behaviour without this module.

use crate::confine::v1::CgroupV1;
use crate::confine::v2::CgroupV2;
use crate::confine::{ConfineError, ConfineSpec, Confinement, GpuDevice, JobCgroup};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// The batch script's step cgroup, below its job's.
pub const BATCH_STEP: &str = "step_batch";

/// The file of a batch job's spool directory that tells its supervisor which cgroups to use.
pub const BATCH_FILE: &str = "cgroup.json";

/// SIGKILL.
const SIGKILL: i32 = 9;

/// How long a step's end or a re-bind waits for the processes of a killed cgroup to go.
const DRAIN_WAIT: Duration = Duration::from_secs(5);

/// The cgroups a batch supervisor uses (`cgroup.json`), written by the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchCgroups {
    /// `v1` or `v2`.
    pub kind: String,
    /// The confinement root (`/sys/fs/cgroup`).
    pub root: PathBuf,
    /// The node part of the cgroup paths (`<cluster>_<node>`).
    pub node: String,
    /// The job's cgroup (`job_<id>`).
    pub job: ConfineSpec,
    /// The batch script's (`job_<id>/step_batch`).
    pub step: ConfineSpec,
}

impl BatchCgroups {
    /// Re-opens the job's cgroup and creates the batch step's. Errors: the confinement's, or
    /// [`ConfineError::Unsupported`] for an unknown kind.
    pub fn open(&self) -> Result<crate::stepd::StepdCgroups, ConfineError> {
        let confinement: Box<dyn Confinement> = match self.kind.as_str() {
            "v1" => Box::new(CgroupV1::new(&self.root, &self.node)),
            "v2" => Box::new(CgroupV2::new(&self.root, &self.node)),
            other => return Err(ConfineError::Unsupported(format!("kind {other}"))),
        };
        let job = confinement.create(&self.job)?;
        let batch = confinement.create(&self.step)?;
        Ok(crate::stepd::StepdCgroups { job, batch })
    }

    /// Reads `cgroup.json` of the job directory `dir`; `Ok(None)` when there is none (the
    /// job is not confined).
    pub fn read(dir: &Path) -> Result<Option<BatchCgroups>, crate::spool::SpoolError> {
        crate::spool::read_json(&dir.join(BATCH_FILE))
    }
}

/// The node part of cgroup paths: `<cluster>_<node>`.
pub fn node_part(cluster: &str, node: &str) -> String {
    format!("{cluster}_{node}")
}

/// The cgroup name of job `job_id`.
pub fn job_name(job_id: u64) -> String {
    format!("job_{job_id}")
}

#[derive(Debug)]
struct Job {
    run: u32,
    spec: ConfineSpec,
    cgroup: Arc<dyn JobCgroup>,
    steps: BTreeMap<u32, Arc<dyn JobCgroup>>,
}

#[derive(Debug)]
struct Draining {
    cgroup: Arc<dyn JobCgroup>,
    since: Instant,
    warned: bool,
}

#[derive(Debug, Default)]
struct State {
    jobs: BTreeMap<u64, Job>,
    draining: BTreeMap<u64, Draining>,
}

/// The job cgroups of this node; shared by the daemon's owner thread and its step threads.
#[derive(Debug)]
pub struct NodeCgroups {
    confinement: Option<Box<dyn Confinement>>,
    root: PathBuf,
    node: String,
    gpus: Vec<GpuDevice>,
    memory: MemoryPolicy,
    state: Mutex<State>,
}

/// How a job's memory becomes its cgroup's limits.
#[derive(Debug, Clone)]
enum MemoryPolicy {
    /// The job's memory is the hard limit (tests of the confinement itself).
    JobMemory,
    /// cgroup.conf's rules ([`flotilla_conf::cgroup::CgroupConf::memory_limits`]) on a node
    /// of `real_memory_mib`.
    Conf {
        conf: Box<flotilla_conf::cgroup::CgroupConf>,
        real_memory_mib: u64,
    },
}

/// A step's cgroup (`job_<id>/step_<s>`), as [`NodeCgroups::step`] hands it out.
#[derive(Debug, Clone)]
pub struct StepCgroup {
    /// The cgroup.
    pub cgroup: Arc<dyn JobCgroup>,
}

impl StepCgroup {
    /// Opens the files a task writes `0` to between fork and exec to join the step's cgroup
    /// (close-on-exec: they do not outlive the exec).
    pub fn join_files(&self) -> Result<Vec<std::fs::File>, ConfineError> {
        self.cgroup
            .procs_files()
            .into_iter()
            .map(|p| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .map_err(|source| ConfineError::Io {
                        path: p.display().to_string(),
                        source,
                    })
            })
            .collect()
    }
}

/// What a confined task's child does between fork and exec ([`TaskJoin::in_child`]): join
/// the step's cgroup first, as the launcher (root), then drop to the user and change to the
/// working directory as the user (the order `std::process::Command` uses for its own `uid`
/// and `current_dir`). Joining before the uid change matters on cgroup v2 before Linux 5.16,
/// which checks the writer's own credentials (not the opener's) against the common ancestor's
/// `cgroup.procs`.
#[derive(Debug)]
pub struct TaskJoin {
    files: Vec<std::fs::File>,
    user: Option<(u32, u32)>,
    groups: Vec<libc::gid_t>,
    dir: std::ffi::CString,
}

impl TaskJoin {
    /// Prepares (in the parent: opens the files, builds the path) the join of `step` (none:
    /// unconfined), then the change to `user` (`(uid, gid)`, with the supplementary `groups`
    /// of [`crate::env::groups_of`]; `None` when the launcher is not root) and to `dir`.
    pub fn new(step: Option<&StepCgroup>, user: Option<(u32, u32)>, groups: &[u32], dir: &str) -> Result<TaskJoin, ConfineError> {
        let dir = std::ffi::CString::new(dir.replace('\0', "")).expect("NULs removed");
        Ok(TaskJoin {
            files: match step {
                Some(s) => s.join_files()?,
                None => Vec::new(),
            },
            user,
            groups: groups.to_vec(),
            dir,
        })
    }

    /// In the forked child: joins, sets the supplementary groups (only the gid when none were
    /// given), the gid and the uid, changes directory. Async-signal-safe (system calls only,
    /// on data prepared before the fork).
    #[allow(unsafe_code)]
    pub fn in_child(&self) -> std::io::Result<()> {
        let check = |r: libc::c_int| if r == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) };
        join_in_child(&self.files)?;
        if let Some((uid, gid)) = self.user {
            let only_gid = [gid as libc::gid_t];
            let groups: &[libc::gid_t] = if self.groups.is_empty() { &only_gid } else { &self.groups };
            // SAFETY: plain system calls with valid arguments (a group list owned by `self`).
            unsafe {
                check(libc::setgroups(groups.len(), groups.as_ptr()))?;
                check(libc::setgid(gid))?;
                check(libc::setuid(uid))?;
            }
        }
        // SAFETY: chdir(2) of a NUL-terminated path owned by `self`.
        check(unsafe { libc::chdir(self.dir.as_ptr()) })
    }
}

/// In a forked child, before exec: joins the cgroup of `files` (from
/// [`StepCgroup::join_files`]) by writing `0` to each. Async-signal-safe (one `write(2)` per
/// file, no allocation), so it may run in the child of a multi-threaded process.
#[allow(unsafe_code)]
pub fn join_in_child(files: &[std::fs::File]) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    for f in files {
        // SAFETY: write(2) of a 1-byte static buffer to a file descriptor this process owns.
        let n = unsafe { libc::write(f.as_raw_fd(), b"0".as_ptr().cast(), 1) };
        if n != 1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

impl Default for NodeCgroups {
    /// Unconfined ([`NodeCgroups::none`]).
    fn default() -> NodeCgroups {
        NodeCgroups::none()
    }
}

impl NodeCgroups {
    /// The cgroups of node `node` (the node part, [`node_part`]) under `root` with
    /// `confinement` (`None`: unconfined, every call a no-op); `gpus`: the node's GPU devices
    /// (all those outside a job's mask are denied to it).
    ///
    /// Every GPU of `gpus` is constrained and a job's memory is its hard limit, until
    /// [`NodeCgroups::with_conf`] applies cgroup.conf (what the daemon does).
    pub fn new(
        confinement: Option<Box<dyn Confinement>>,
        root: impl Into<PathBuf>,
        node: &str,
        gpus: Vec<GpuDevice>,
    ) -> NodeCgroups {
        NodeCgroups {
            confinement,
            root: root.into(),
            node: node.to_string(),
            gpus,
            memory: MemoryPolicy::JobMemory,
            state: Mutex::new(State::default()),
        }
    }

    /// Applies cgroup.conf (Slurm's task/cgroup rules) on a node of `real_memory_mib`: GPUs
    /// are constrained only with `ConstrainDevices=yes`, memory only with
    /// `ConstrainRAMSpace=yes` (or `ConstrainSwapSpace=yes`), the limits as
    /// [`flotilla_conf::cgroup::CgroupConf::memory_limits`] computes them. A GPU whose device
    /// file is a standard device ([`crate::confine::STANDARD_DEVICES`]) is logged: it cannot be
    /// denied without denying that device.
    pub fn with_conf(mut self, conf: &flotilla_conf::cgroup::CgroupConf, real_memory_mib: u64) -> NodeCgroups {
        if !conf.constrain_devices {
            self.gpus.clear();
        }
        for g in &self.gpus {
            if crate::confine::is_standard_device(g.major, g.minor) {
                warn!(gpu = g.index, path = %g.path, "the GPU's device file is {}:{}, a standard device (such as /dev/null) every job may open: this GPU is not constrained", g.major, g.minor);
            }
        }
        self.memory = MemoryPolicy::Conf {
            conf: Box::new(conf.clone()),
            real_memory_mib,
        };
        self
    }

    /// Unconfined.
    pub fn none() -> NodeCgroups {
        NodeCgroups::new(None, "/sys/fs/cgroup", "none", Vec::new())
    }

    /// True when jobs are confined.
    pub fn confined(&self) -> bool {
        self.confinement.is_some()
    }

    /// The confinement's kind (`v1`, `v2`, `fake`); `None` when unconfined.
    pub fn kind(&self) -> Option<&'static str> {
        self.confinement.as_ref().map(|c| c.kind())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("job cgroups lock")
    }

    /// The spec of job `job_id`'s cgroup: `gpu_mask` (bit i = GPU i of the node),
    /// `mem_mib` (the job's memory on this node, MiB; 0: none given), limited as cgroup.conf
    /// says ([`NodeCgroups::with_conf`]).
    pub fn spec(&self, job_id: u64, gpu_mask: u64, mem_mib: u64) -> ConfineSpec {
        let memory = match &self.memory {
            MemoryPolicy::JobMemory => (mem_mib > 0).then(|| crate::confine::MemoryLimits::hard_mib(mem_mib)),
            MemoryPolicy::Conf { conf, real_memory_mib } => conf.memory_limits(mem_mib, *real_memory_mib).map(Into::into),
        };
        ConfineSpec {
            name: job_name(job_id),
            memory,
            allowed_gpus: crate::env::gpu_indices(gpu_mask),
            all_gpus: self.gpus.clone(),
        }
    }

    /// Creates the cgroup of run `run` of job `job_id` (cgroups are named by job: a requeued
    /// job's runs share the name) with its limits on this node, or re-opens it (a daemon
    /// restart). A cgroup of an earlier run of the job, still held or draining, is killed and
    /// removed first (bounded wait): the controller binds a new run only once the old one
    /// ended. Errors: the confinement's (the caller fails the launch), or an `Io` error when
    /// the earlier run's processes do not go.
    pub fn open_job(&self, job_id: u64, run: u32, gpu_mask: u64, mem_mib: u64) -> Result<(), ConfineError> {
        let Some(confinement) = &self.confinement else { return Ok(()) };
        let mut st = self.state();
        if st.jobs.get(&job_id).is_some_and(|j| j.run != run) {
            let old = st.jobs.remove(&job_id).expect("present");
            info!(job = job_id, old_run = old.run, run, "a new run of the job: the earlier run's cgroup goes first");
            st.draining.insert(
                job_id,
                Draining {
                    cgroup: old.cgroup,
                    since: Instant::now(),
                    warned: false,
                },
            );
        }
        if let Some(old) = st.draining.remove(&job_id) {
            if let Err(e) = drain(old.cgroup.as_ref(), DRAIN_WAIT) {
                st.draining.insert(job_id, old);
                return Err(e);
            }
        }
        let spec = self.spec(job_id, gpu_mask, mem_mib);
        let cgroup: Arc<dyn JobCgroup> = Arc::from(confinement.create(&spec)?);
        let steps = st.jobs.remove(&job_id).map(|j| j.steps).unwrap_or_default();
        st.jobs.insert(job_id, Job { run, spec, cgroup, steps });
        Ok(())
    }

    /// What the batch supervisor of job `job_id` uses; `None` when unconfined or the job has
    /// no cgroup here.
    pub fn batch_cgroups(&self, job_id: u64) -> Option<BatchCgroups> {
        let kind = self.confinement.as_ref()?.kind();
        let st = self.state();
        let job = st.jobs.get(&job_id)?;
        Some(BatchCgroups {
            kind: kind.to_string(),
            root: self.root.clone(),
            node: self.node.clone(),
            job: job.spec.clone(),
            step: ConfineSpec {
                name: format!("{}/{BATCH_STEP}", job.spec.name),
                ..job.spec.clone()
            },
        })
    }

    /// Creates step `step_id`'s cgroup below job `job_id`'s, with the job's limits; `Ok(None)`
    /// when unconfined. Errors: [`ConfineError::NoJob`] when the job has no cgroup here (its
    /// tasks must not start unconfined), or the confinement's.
    pub fn step(&self, job_id: u64, step_id: u32) -> Result<Option<StepCgroup>, ConfineError> {
        let Some(confinement) = &self.confinement else { return Ok(None) };
        let mut st = self.state();
        let job = st.jobs.get_mut(&job_id).ok_or(ConfineError::NoJob(job_id))?;
        let spec = ConfineSpec {
            name: format!("{}/step_{step_id}", job.spec.name),
            ..job.spec.clone()
        };
        let cgroup: Arc<dyn JobCgroup> = Arc::from(confinement.create(&spec)?);
        job.steps.insert(step_id, Arc::clone(&cgroup));
        Ok(Some(StepCgroup { cgroup }))
    }

    /// The end of step `step_id` on this node: SIGKILLs what is left in its cgroup, waits
    /// (bounded) for it to empty and removes it — unless the OOM killer killed one of its
    /// processes: cgroup v1 records that only in the step's own cgroup, so the empty cgroup
    /// stays (with the record) until the job's release, for the job's end to read. A step of a
    /// job already released is drained with its job.
    pub fn end_step(&self, job_id: u64, step_id: u32) {
        let cgroup = {
            let mut st = self.state();
            st.jobs.get_mut(&job_id).and_then(|j| j.steps.remove(&step_id))
        };
        let Some(cg) = cgroup else { return };
        if cg.oom_killed().unwrap_or(false) {
            info!(job = job_id, step = step_id, "a process of the step was OOM-killed: its cgroup stays until the job ends");
            if let Err(e) = kill_until_empty(cg.as_ref(), DRAIN_WAIT) {
                warn!(job = job_id, step = step_id, "step cgroup: {e}");
            }
            return;
        }
        if let Err(e) = drain(cg.as_ref(), DRAIN_WAIT) {
            warn!(job = job_id, step = step_id, "step cgroup not removed: {e}");
        }
    }

    /// Sends `signal` to every process of every step of job `job_id` on this node (not the
    /// batch script's: its supervisor signals it). Returns how many step cgroups it reached.
    pub fn signal_steps(&self, job_id: u64, signal: i32) -> usize {
        let steps: Vec<Arc<dyn JobCgroup>> = self
            .state()
            .jobs
            .get(&job_id)
            .map(|j| j.steps.values().cloned().collect())
            .unwrap_or_default();
        for s in &steps {
            if let Err(e) = s.signal_all(signal) {
                warn!(job = job_id, signal, "signal to a step cgroup: {e}");
            }
        }
        steps.len()
    }

    /// SIGKILLs every process of job `job_id` on this node (its whole tree).
    pub fn kill_job(&self, job_id: u64) {
        let cg = self.state().jobs.get(&job_id).map(|j| Arc::clone(&j.cgroup));
        if let Some(cg) = cg {
            if let Err(e) = cg.signal_all(SIGKILL) {
                warn!(job = job_id, "kill of the job cgroup: {e}");
            }
        }
    }

    /// Run `run` of the job has ended on this node: SIGKILLs its tree and removes it once no
    /// process is left (now, or in a later [`NodeCgroups::poll`]). A cgroup held by another
    /// run of the job is left alone.
    pub fn release(&self, job_id: u64, run: u32) {
        let job = {
            let mut st = self.state();
            if st.jobs.get(&job_id).is_some_and(|j| j.run != run) {
                return;
            }
            st.jobs.remove(&job_id)
        };
        let Some(job) = job else { return };
        let _ = job.cgroup.signal_all(SIGKILL);
        self.state().draining.insert(
            job_id,
            Draining {
                cgroup: job.cgroup,
                since: Instant::now(),
                warned: false,
            },
        );
        self.poll();
    }

    /// Removes the released cgroups whose processes are gone; SIGKILLs again those that still
    /// hold some (a process forked during the kill). Called from the daemon's loop.
    pub fn poll(&self) {
        let mut st = self.state();
        let ids: Vec<u64> = st.draining.keys().copied().collect();
        for id in ids {
            let d = st.draining.get_mut(&id).expect("present");
            let left = d.cgroup.pids().map(|p| p.len()).unwrap_or(0);
            if left == 0 && d.cgroup.destroy().is_ok() {
                info!(job = id, "job cgroup removed");
                st.draining.remove(&id);
                continue;
            }
            let _ = d.cgroup.signal_all(SIGKILL);
            if !d.warned && d.since.elapsed() > Duration::from_secs(30) {
                d.warned = true;
                warn!(job = id, processes = left, "job cgroup still holds processes 30 s after the kill");
            }
        }
    }

    /// The directories that hold this node's job cgroups: one per v1 controller, or the v2
    /// one; none for another kind or unconfined.
    fn node_dirs(&self) -> Vec<PathBuf> {
        match self.kind() {
            Some("v1") => crate::confine::v1::REQUIRED
                .iter()
                .chain(crate::confine::v1::OPTIONAL)
                .map(|c| self.root.join(c).join("flotilla").join(&self.node))
                .collect(),
            Some("v2") => vec![self.root.join("flotilla").join(&self.node)],
            _ => Vec::new(),
        }
    }

    /// Releases every job cgroup of this node that no job holds: left by jobs the daemon
    /// forgot (a reboot's new epoch, a job directory lost from the spool) or by a cluster
    /// stopped while jobs ran. Called once at start, after the jobs of the spool were
    /// re-adopted ([`NodeCgroups::open_job`]). Returns the job ids released.
    pub fn sweep(&self) -> Vec<u64> {
        let mut found = std::collections::BTreeSet::new();
        for dir in self.node_dirs() {
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let name = e.file_name();
                if let Some(id) = name.to_str().and_then(|n| n.strip_prefix("job_")).and_then(|n| n.parse::<u64>().ok()) {
                    found.insert(id);
                }
            }
        }
        let held: Vec<u64> = self.state().jobs.keys().copied().collect();
        let mut released = Vec::new();
        for id in found.into_iter().filter(|id| !held.contains(id)) {
            match self.open_job(id, 0, 0, 0) {
                Ok(()) => {
                    warn!(job = id, "a cgroup of a job not bound here: killing what is in it and removing it");
                    self.release(id, 0);
                    released.push(id);
                }
                Err(e) => warn!(job = id, "stale job cgroup: {e}"),
            }
        }
        released
    }

    /// What the processes of cgroup `name` (`job_<id>`, `job_<id>/step_batch`,
    /// `job_<id>/step_<s>`) used so far ([`crate::usage`]), read from its files; `None` when
    /// unconfined, for the fake, or when the cgroup is not there (already removed).
    pub fn usage_of(&self, name: &str) -> Option<flotilla_proto::Usage> {
        match self.kind()? {
            "v1" => {
                let dir = |c: &str| self.root.join(c).join("flotilla").join(&self.node).join(name);
                let memory = dir("memory");
                if !memory.is_dir() {
                    return None;
                }
                let cpuacct = Some(dir("cpuacct")).filter(|d| d.is_dir());
                Some(crate::usage::read_v1(&memory, cpuacct.as_deref()))
            }
            "v2" => {
                let dir = self.root.join("flotilla").join(&self.node).join(name);
                dir.is_dir().then(|| crate::usage::read_v2(&dir))
            }
            _ => None,
        }
    }

    /// The running steps of this node's jobs, for a usage poll: `(job, run, step name,
    /// cgroup name)` for every job's batch step (where its cgroup exists) and `srun` step.
    pub fn running_steps(&self) -> Vec<(u64, u32, String, String)> {
        let st = self.state();
        let mut v = Vec::new();
        for (&id, j) in &st.jobs {
            v.push((id, j.run, "batch".to_string(), format!("{}/{BATCH_STEP}", j.spec.name)));
            for s in j.steps.keys() {
                v.push((id, j.run, s.to_string(), format!("{}/step_{s}", j.spec.name)));
            }
        }
        v
    }

    /// Jobs with a cgroup here, and released ones not yet removed (for tests and logs).
    pub fn jobs(&self) -> (Vec<u64>, Vec<u64>) {
        let st = self.state();
        (st.jobs.keys().copied().collect(), st.draining.keys().copied().collect())
    }
}

/// SIGKILLs `cg`'s tree until it is empty (at most `wait`), then removes it.
fn drain(cg: &dyn JobCgroup, wait: Duration) -> Result<(), ConfineError> {
    kill_until_empty(cg, wait)?;
    cg.destroy()
}

/// SIGKILLs `cg`'s tree until it is empty (at most `wait`).
fn kill_until_empty(cg: &dyn JobCgroup, wait: Duration) -> Result<(), ConfineError> {
    let t0 = Instant::now();
    loop {
        let _ = cg.signal_all(SIGKILL);
        if cg.pids()?.is_empty() {
            return Ok(());
        }
        if t0.elapsed() > wait {
            return Err(ConfineError::Io {
                path: "job cgroup".into(),
                source: std::io::Error::new(std::io::ErrorKind::TimedOut, "processes left after SIGKILL"),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confine::bpf;
    use crate::confine::fake::{FakeCall, FakeConfinement};
    use crate::confine::testutil::{gpus, Recorded};


    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// v2 on a fake unified root: the job's cgroup and its step children get the job's
    /// memory limit and device program; controllers are enabled down to the job (which holds
    /// no process itself); a step's end and the job's release remove them.
    #[test]
    fn v2_job_and_step_cgroups_on_a_fake_root() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("cgroup.controllers"), "cpu io memory pids\n").unwrap();
        let rec = Arc::new(Recorded::default());
        let v2 = CgroupV2::with_device_filter(tmp.path(), "c_n1", rec.clone());
        let cgs = NodeCgroups::new(Some(Box::new(v2)), tmp.path(), "c_n1", gpus(4));
        assert!(cgs.confined());
        // GPUs 1 and 2 (mask 0b0110), 2048 MiB.
        cgs.open_job(42, 0, 0b0110, 2048).unwrap();
        let job = tmp.path().join("flotilla/c_n1/job_42");
        assert_eq!(read(&job.join("memory.max")), (2048u64 << 20).to_string());
        let denied = bpf::device_filter(&[(195, 0), (195, 3)]);
        assert_eq!(rec.0.lock().unwrap().clone(), vec![(job.clone(), denied.clone())]);

        let step = cgs.step(42, 0).unwrap().expect("confined");
        let step_dir = job.join("step_0");
        assert_eq!(step.cgroup.procs_files(), vec![step_dir.join("cgroup.procs")]);
        assert_eq!(read(&step_dir.join("memory.max")), (2048u64 << 20).to_string());
        assert_eq!(read(&job.join("cgroup.subtree_control")), "+memory +pids", "controllers for the steps");
        assert_eq!(rec.0.lock().unwrap().last().unwrap(), &(step_dir.clone(), denied.clone()));

        // The batch step's spec, as the supervisor gets it.
        let b = cgs.batch_cgroups(42).unwrap();
        assert_eq!((b.kind.as_str(), b.node.as_str()), ("v2", "c_n1"));
        assert_eq!(b.job.name, "job_42");
        assert_eq!(b.step.name, "job_42/step_batch");
        assert_eq!((b.step.memory, b.step.allowed_gpus.clone()), (Some(crate::confine::MemoryLimits::hard_mib(2048)), vec![1, 2]));
        assert_eq!(b.step.all_gpus, gpus(4));

        // A step's end removes its cgroup only.
        std::fs::write(step_dir.join("cgroup.procs"), "").unwrap();
        cgs.end_step(42, 0);
        assert!(!step_dir.exists() && job.is_dir());
        // A step of a job not bound here is refused.
        assert_eq!(cgs.step(7, 0).unwrap_err().to_string(), "job 7 has no cgroup on this node");

        // Release: gone once empty; a new step is refused.
        cgs.step(42, 1).unwrap();
        cgs.release(42, 1);
        assert!(job.is_dir(), "another run's release leaves it");
        cgs.release(42, 0);
        assert!(!job.exists(), "{}", job.display());
        assert_eq!(cgs.jobs(), (vec![], vec![]));
        assert!(matches!(cgs.step(42, 2), Err(ConfineError::NoJob(42))));
    }

    /// cgroup.conf decides what is constrained: with Slurm's defaults (no cgroup.conf) neither
    /// memory nor GPUs; `ConstrainRAMSpace=yes` limits memory to AllowedRAMSpace % of the
    /// job's; `ConstrainDevices=yes` denies the GPUs outside the mask, never a standard device
    /// (fake GPUs made as aliases of /dev/null) nor a device number an allowed GPU shares.
    #[test]
    fn cgroup_conf_decides_what_is_constrained() {
        use flotilla_conf::cgroup::parse_cgroup_conf;
        let conf = |t: &str| parse_cgroup_conf(t, "cgroup.conf").unwrap();
        let fake = || Some(Box::new(FakeConfinement::new()) as Box<dyn Confinement>);
        let defaults = NodeCgroups::new(fake(), "/x", "c_n1", gpus(4)).with_conf(&conf(""), 4096);
        let s = defaults.spec(1, 0b0001, 100);
        assert_eq!(s.memory, None, "ConstrainRAMSpace=no: no memory limit");
        assert_eq!(s.denied_gpus().count(), 0, "ConstrainDevices=no: no GPU denied");

        let on = NodeCgroups::new(fake(), "/x", "c_n1", gpus(4))
            .with_conf(&conf("ConstrainRAMSpace=yes AllowedRAMSpace=150\nConstrainDevices=yes"), 4096);
        let s = on.spec(1, 0b0001, 100);
        assert_eq!(s.memory.map(|m| m.limit_bytes), Some(150 << 20));
        let denied: Vec<u32> = s.denied_gpus().map(|g| g.index).collect();
        assert_eq!(denied, [1, 2, 3]);

        // Fake GPUs that are /dev/null (1:3) and two files naming one device.
        let mut aliases = gpus(4);
        for g in &mut aliases[..2] {
            (g.major, g.minor) = (1, 3);
        }
        aliases[3].minor = aliases[2].minor;
        let on = NodeCgroups::new(fake(), "/x", "c_n1", aliases).with_conf(&conf("ConstrainDevices=yes"), 4096);
        let s = on.spec(1, 0b0100, 0);
        assert_eq!(s.denied_gpus().count(), 0, "/dev/null and the allowed GPU's own device are never denied");
        let s = on.spec(1, 0b0001, 0);
        let denied: Vec<u32> = s.denied_gpus().map(|g| g.index).collect();
        assert_eq!(denied, [2, 3]);
    }

    /// Signals to a job's steps reach their cgroups; a release SIGKILLs the job's tree and
    /// removes it once empty (the fake's SIGKILL empties it at once). Unconfined: no-ops.
    #[test]
    fn signals_release_and_unconfined() {
        let fake = FakeConfinement::new();
        let cgs = NodeCgroups::new(Some(Box::new(fake.clone())), "/x", "c_n1", gpus(2));
        cgs.open_job(5, 0, 0b01, 0).unwrap();
        let step = cgs.step(5, 0).unwrap().unwrap();
        step.cgroup.add_pid(100).unwrap();
        assert_eq!(cgs.signal_steps(5, 10), 1);
        assert!(fake.calls().contains(&FakeCall::SignalAll { name: "job_5/step_0".into(), signal: 10 }));
        cgs.release(5, 0);
        assert_eq!(cgs.jobs(), (vec![], vec![]), "the fake's SIGKILL emptied it: removed at once");
        assert!(fake.calls().contains(&FakeCall::SignalAll { name: "job_5".into(), signal: 9 }));
        assert!(fake.calls().contains(&FakeCall::Destroy { name: "job_5".into() }));

        // Unconfined: no-ops.
        let none = NodeCgroups::none();
        none.open_job(1, 0, 1, 1).unwrap();
        assert!(none.step(1, 0).unwrap().is_none());
        assert!(none.batch_cgroups(1).is_none());
        assert_eq!(none.signal_steps(1, 9), 0);
        none.release(1, 0);
    }

    /// On a fake v1 root (plain files) a process that stays in the job's cgroup keeps it
    /// draining; once the process is gone the next poll removes it. A re-bind of the job
    /// meanwhile drains it first.
    #[test]
    fn v1_draining_and_rebind() {
        let tmp = tempfile::tempdir().unwrap();
        for c in ["memory", "devices", "pids"] {
            std::fs::create_dir_all(tmp.path().join(c)).unwrap();
            std::fs::write(tmp.path().join(c).join("cgroup.procs"), "").unwrap();
        }
        let v1 = CgroupV1::new(tmp.path(), "c_n2");
        let cgs = NodeCgroups::new(Some(Box::new(v1)), tmp.path(), "c_n2", gpus(2));
        cgs.open_job(9, 0, 0b10, 64).unwrap();
        let mem = tmp.path().join("memory/flotilla/c_n2/job_9");
        let dev = tmp.path().join("devices/flotilla/c_n2/job_9");
        assert_eq!(read(&mem.join("memory.limit_in_bytes")), (64u64 << 20).to_string());
        assert_eq!(read(&dev.join("devices.deny")), "c 195:0 rwm\n");
        let step = cgs.step(9, 3).unwrap().unwrap();
        assert_eq!(read(&dev.join("step_3/devices.deny")), "c 195:0 rwm\n");
        assert_eq!(read(&dev.join("step_3/devices.allow")), "c 195:1 rwm\n");
        assert_eq!(step.cgroup.procs_files().len(), 3);
        // A process listed in the step (a plain file: SIGKILL kills it, the file keeps it).
        let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
        std::fs::write(mem.join("step_3/cgroup.procs"), format!("{}\n", child.id())).unwrap();
        cgs.release(9, 0);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(9), "the release SIGKILLs the step's processes");
        assert_eq!(cgs.jobs(), (vec![], vec![9]), "still listed: draining");
        cgs.poll();
        assert_eq!(cgs.jobs(), (vec![], vec![9]));
        std::fs::write(mem.join("step_3/cgroup.procs"), "").unwrap();
        cgs.open_job(9, 1, 0b01, 32).unwrap();
        assert_eq!(cgs.jobs(), (vec![9], vec![]), "the re-bind drained the old run first");
        assert!(!mem.join("step_3").exists(), "the old run's step is gone");
        assert_eq!(read(&mem.join("memory.limit_in_bytes")), (32u64 << 20).to_string());
        // A new run while the earlier one still holds the cgroup (its end not yet seen): the
        // earlier run's processes go first, and the earlier run's late release leaves the new one.
        let step = cgs.step(9, 0).unwrap().unwrap();
        let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
        std::fs::write(mem.join("step_0/cgroup.procs"), format!("{}\n", child.id())).unwrap();
        drop(step);
        let killer = std::thread::spawn(move || child.wait().unwrap().signal());
        // The listed pid stays in the plain file: empty it once the kill landed.
        let procs = mem.join("step_0/cgroup.procs");
        let emptier = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            std::fs::write(procs, "").unwrap();
        });
        cgs.open_job(9, 2, 0b01, 16).unwrap();
        assert_eq!(killer.join().unwrap(), Some(9), "run 1's processes were killed");
        emptier.join().unwrap();
        assert!(!mem.join("step_0").exists());
        assert_eq!(read(&mem.join("memory.limit_in_bytes")), (16u64 << 20).to_string());
        cgs.release(9, 1);
        assert_eq!(cgs.jobs(), (vec![9], vec![]), "run 1's release leaves run 2's cgroup");
        cgs.release(9, 2);
        assert!(!mem.exists() && !dev.exists());
    }

    /// At start, the cgroups of jobs the daemon does not hold are killed and removed; those of
    /// re-adopted jobs stay.
    #[test]
    fn sweep_removes_the_cgroups_of_jobs_not_held() {
        let tmp = tempfile::tempdir().unwrap();
        for c in ["memory", "devices"] {
            std::fs::create_dir_all(tmp.path().join(c)).unwrap();
            std::fs::write(tmp.path().join(c).join("cgroup.procs"), "").unwrap();
            for j in ["job_3/step_0", "job_4/step_batch"] {
                std::fs::create_dir_all(tmp.path().join(c).join("flotilla/c_n1").join(j)).unwrap();
            }
            std::fs::create_dir_all(tmp.path().join(c).join("flotilla/c_n1/not_a_job")).unwrap();
        }
        let cgs = NodeCgroups::new(Some(Box::new(CgroupV1::new(tmp.path(), "c_n1"))), tmp.path(), "c_n1", gpus(2));
        cgs.open_job(4, 0, 0b11, 0).unwrap();
        assert_eq!(cgs.sweep(), vec![3]);
        for c in ["memory", "devices"] {
            let node = tmp.path().join(c).join("flotilla/c_n1");
            assert!(!node.join("job_3").exists(), "{c}");
            assert!(node.join("job_4/step_batch").is_dir() && node.join("not_a_job").is_dir(), "{c}");
        }
        assert_eq!(cgs.jobs(), (vec![4], vec![]));
        assert!(NodeCgroups::none().sweep().is_empty());
    }

    /// A task launched as another user keeps her supplementary groups (what `Command::uid`
    /// would drop), joins its cgroup's files and runs in its directory. Root test: it changes
    /// uid in the child.
    #[test]
    fn task_becomes_the_user_with_her_groups() {
        use std::os::unix::process::CommandExt;
        if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") || !nix::unistd::geteuid().is_root() {
            println!("SKIPPED: set FLOTILLA_TEST_ROOT=1 and run as root (the child changes uid)");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        let join = TaskJoin::new(None, Some((2001, 2001)), &[2001, 4242, 4343], tmp.path().to_str().unwrap()).unwrap();
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "id -u; id -G; pwd"]);
        // SAFETY: `in_child` makes system calls only (see there).
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(move || join.in_child());
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "2001");
        let mut groups: Vec<&str> = lines[1].split_whitespace().collect();
        groups.sort();
        assert_eq!(groups, ["2001", "4242", "4343"]);
        assert_eq!(std::path::Path::new(lines[2]), tmp.path().canonicalize().unwrap());
    }

    #[test]
    fn groups_of_users() {
        assert!(crate::env::groups_of("root", 0).contains(&0));
        // No such user: the gid alone.
        assert_eq!(crate::env::groups_of("no-such-user-flotilla", 4242), vec![4242]);
    }

    #[test]
    fn join_in_child_writes_zero() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("cgroup.procs");
        std::fs::write(&p, "").unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        join_in_child(&[f]).unwrap();
        assert_eq!(read(&p), "0");
    }
}
