//! Confinement of a job's processes: the GPUs of its mask and its memory limit, through
//! cgroups (v1 and v2), behind a trait with a real and a fake implementation (STYLE.md:
//! fakes at the edges; the cgroup root is injected so tests use a temp dir).
//!
//! Implementations (each takes the cgroup root, e.g. `/sys/fs/cgroup`, as a parameter):
//! - [`v1::CgroupV1`]: cgroup v1 `memory`, `devices` (and `pids` where mounted) under
//!   `<root>/<controller>/flotilla/<node>/<name>`;
//! - [`v2::CgroupV2`]: the unified hierarchy under `<root>/flotilla/<node>/<name>`, GPUs
//!   filtered by a `BPF_PROG_TYPE_CGROUP_DEVICE` program ([`bpf`]);
//! - [`fake::FakeConfinement`]: records calls, for tests of other components;
//! - [`auto`]: picks v2, v1 or none from what the host offers.

pub mod auto;
pub mod bpf;
pub mod fake;
mod fsutil;
pub mod v1;
pub mod v2;
#[cfg(test)]
pub(crate) mod testutil;

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

/// One GPU device file of the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuDevice {
    /// GPU index on the node (bit of the gpu_mask).
    pub index: u32,
    /// Character device major number (NVIDIA: 195).
    pub major: u32,
    /// Minor number.
    pub minor: u32,
    /// Path, e.g. `/dev/nvidia0`.
    pub path: String,
}

/// What one job (or job step) may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfineSpec {
    /// Cgroup name under the node's root, e.g. `job_42` or `job_42/step_0`.
    pub name: String,
    /// Memory limit in MiB (`--mem`); `None` = no limit.
    pub mem_limit_mib: Option<u64>,
    /// GPUs the job may open (indices of the allocation's gpu_mask).
    pub allowed_gpus: Vec<u32>,
    /// Every GPU device of the node: all not allowed are denied.
    pub all_gpus: Vec<GpuDevice>,
}

/// Errors of confinement; I/O errors carry the path they concern.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// A cgroup file could not be read or written.
    #[error("cgroup {path}: {source}")]
    Io {
        /// Path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The host offers no usable cgroup hierarchy for a controller.
    #[error("no usable cgroup {0} controller")]
    Unsupported(String),
    /// A bpf(2) call failed (loading or attaching the device filter of a v2 cgroup).
    #[error("bpf {op} for cgroup {path}: {source}{}", if .log.is_empty() { String::new() } else { format!(" (verifier: {})", .log) })]
    Bpf {
        /// `BPF_PROG_LOAD`, `BPF_PROG_ATTACH` or `BPF_PROG_QUERY`.
        op: &'static str,
        /// Cgroup directory.
        path: String,
        /// Cause.
        source: std::io::Error,
        /// The verifier's log, when the load was refused.
        log: String,
    },
    /// A step cgroup was asked for a job that has no cgroup on this node (not bound here, or
    /// already ended).
    #[error("job {0} has no cgroup on this node")]
    NoJob(u64),
}

/// A created job cgroup.
pub trait JobCgroup: fmt::Debug + Send + Sync {
    /// Moves a process (and so its future children) into the cgroup.
    fn add_pid(&self, pid: i32) -> Result<(), ConfineError>;
    /// The `cgroup.procs` files a process writes `0` to in order to join the cgroup itself
    /// (one per v1 controller, one for v2; empty for the fake). A launcher opens them before
    /// it forks and the child writes to them between fork and exec, so no instruction of the
    /// new program runs outside the cgroup (the kernel checks the opener's credentials, so
    /// this works after the child dropped root).
    fn procs_files(&self) -> Vec<PathBuf>;
    /// Processes currently in the cgroup.
    fn pids(&self) -> Result<Vec<i32>, ConfineError>;
    /// Sends `signal` to every process of the cgroup (the whole tree, not one pid).
    fn signal_all(&self, signal: i32) -> Result<(), ConfineError>;
    /// True when the kernel's OOM killer killed a process of the cgroup.
    fn oom_killed(&self) -> Result<bool, ConfineError>;
    /// Removes the cgroup (after its processes are gone).
    fn destroy(&self) -> Result<(), ConfineError>;
}

/// Creates job cgroups.
pub trait Confinement: fmt::Debug + Send + Sync {
    /// `v1`, `v2` or `fake`.
    fn kind(&self) -> &'static str;
    /// Creates (or re-opens, after a daemon restart) the job's cgroup with its limits.
    fn create(&self, spec: &ConfineSpec) -> Result<Box<dyn JobCgroup>, ConfineError>;
}

impl ConfineSpec {
    /// The GPU devices the job may not open: every device of `all_gpus` whose index is not in
    /// `allowed_gpus`.
    pub fn denied_gpus(&self) -> impl Iterator<Item = &GpuDevice> {
        self.all_gpus
            .iter()
            .filter(|gpu| !self.allowed_gpus.contains(&gpu.index))
    }

    /// The GPU devices the job may open.
    pub fn allowed_gpu_devices(&self) -> impl Iterator<Item = &GpuDevice> {
        self.all_gpus
            .iter()
            .filter(|gpu| self.allowed_gpus.contains(&gpu.index))
    }
}
