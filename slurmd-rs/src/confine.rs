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
    /// Memory limits (from the job's memory and cgroup.conf, [`flotilla_conf::cgroup`]);
    /// `None` = no limit (cgroup.conf constrains neither RAM nor swap).
    pub memory: Option<MemoryLimits>,
    /// GPUs the job may open (indices of the allocation's gpu_mask).
    pub allowed_gpus: Vec<u32>,
    /// The GPU devices of the node that are constrained (empty unless cgroup.conf has
    /// `ConstrainDevices=yes`): all not allowed are denied.
    pub all_gpus: Vec<GpuDevice>,
}

/// The memory limits of a cgroup, in bytes (see [`flotilla_conf::cgroup::MemoryLimits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryLimits {
    /// Hard limit: v1 `memory.limit_in_bytes`, v2 `memory.max`.
    pub limit_bytes: u64,
    /// Soft limit: v1 `memory.soft_limit_in_bytes`, v2 `memory.high`.
    pub soft_limit_bytes: u64,
    /// RAM+swap: v1 `memory.memsw.limit_in_bytes`, v2 `memory.swap.max` (minus the hard
    /// limit); `None`: swap not constrained.
    pub memsw_limit_bytes: Option<u64>,
    /// v1 `memory.swappiness`.
    pub swappiness: Option<u64>,
}

impl MemoryLimits {
    /// A hard limit of `mib` MiB, the soft limit the same, swap not constrained.
    pub fn hard_mib(mib: u64) -> MemoryLimits {
        MemoryLimits {
            limit_bytes: mib * 1024 * 1024,
            soft_limit_bytes: mib * 1024 * 1024,
            memsw_limit_bytes: None,
            swappiness: None,
        }
    }
}

impl From<flotilla_conf::cgroup::MemoryLimits> for MemoryLimits {
    fn from(m: flotilla_conf::cgroup::MemoryLimits) -> MemoryLimits {
        MemoryLimits {
            limit_bytes: m.limit_bytes,
            soft_limit_bytes: m.soft_limit_bytes,
            memsw_limit_bytes: m.memsw_limit_bytes,
            swappiness: m.swappiness,
        }
    }
}

/// Character devices every job may open whatever its GPUs (`(major, minor)`; minor `None`:
/// every minor), as Slurm's task/cgroup never constrains them: `/dev/null` (1:3), `zero`
/// (1:5), `full` (1:7), `random` (1:8), `urandom` (1:9), `tty` (5:0), `console` (5:1),
/// `ptmx` (5:2) and the pseudo-terminals `/dev/pts/*` (136-143:*). A GPU device file with one
/// of these numbers (a test cluster's fake GPUs made with `mknod c 1 3`) is never denied:
/// denying it would deny `/dev/null` to every job that does not hold all the node's GPUs.
pub const STANDARD_DEVICES: &[(u32, Option<u32>)] = &[
    (1, Some(3)),
    (1, Some(5)),
    (1, Some(7)),
    (1, Some(8)),
    (1, Some(9)),
    (5, Some(0)),
    (5, Some(1)),
    (5, Some(2)),
    (136, None),
    (137, None),
    (138, None),
    (139, None),
    (140, None),
    (141, None),
    (142, None),
    (143, None),
];

/// True when `(major, minor)` is one of [`STANDARD_DEVICES`].
pub fn is_standard_device(major: u32, minor: u32) -> bool {
    STANDARD_DEVICES.iter().any(|&(ma, mi)| ma == major && mi.is_none_or(|mi| mi == minor))
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
    /// What the cgroup's processes used so far, hierarchically ([`crate::usage`]); `None`
    /// where the confinement keeps no accounting (the fake).
    fn usage(&self) -> Option<flotilla_proto::Usage> {
        None
    }
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
    /// `allowed_gpus`, except those whose device number is also an allowed GPU's (two `File=`
    /// naming one device) or a standard device's ([`STANDARD_DEVICES`]).
    pub fn denied_gpus(&self) -> impl Iterator<Item = &GpuDevice> {
        self.all_gpus.iter().filter(|gpu| {
            !self.allowed_gpus.contains(&gpu.index)
                && !is_standard_device(gpu.major, gpu.minor)
                && !self.allowed_gpu_devices().any(|a| (a.major, a.minor) == (gpu.major, gpu.minor))
        })
    }

    /// The GPU devices the job may open.
    pub fn allowed_gpu_devices(&self) -> impl Iterator<Item = &GpuDevice> {
        self.all_gpus
            .iter()
            .filter(|gpu| self.allowed_gpus.contains(&gpu.index))
    }
}
