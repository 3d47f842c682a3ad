//! Wire types of the accounting query (`sacct`): the selection a command sends and the job
//! and step records the controller answers with, read from its SQLite accounting tables
//! (`acct_jobs`, `job_steps`).
//!
//! Records carry raw values (seconds since the epoch, MiB, Slurm state names); formatting is
//! the command's business. Times are `None` when Slurm stores 0 (not started, not ended,
//! never eligible).

use serde::{Deserialize, Serialize};

/// A process's end as a wait status, the way Slurm keeps a job's or step's exit code: the
/// exit status in bits 8–15 (`status << 8`), or, for a process a signal ended, the signal in
/// bits 0–6 (the exit status is then not kept). `exit_code` is read modulo 256 and `signal`
/// modulo 128, as `waitpid` reports them; the order of the results is the order in which
/// Slurm's derived exit code takes the highest (`step_mgr.c` `_internal_step_complete`).
pub fn wait_status(exit_code: i32, signal: i32) -> i32 {
    if signal != 0 {
        signal & 0x7f
    } else {
        (exit_code & 0xff) << 8
    }
}

/// A wait status ([`wait_status`]) as Slurm prints an exit code: `(status, signal)`.
pub fn exit_pair(status: i32) -> (i32, i32) {
    match status & 0x7f {
        0 => ((status >> 8) & 0xff, 0),
        sig => (0, sig),
    }
}

/// A job named in `sacct -j`: `N`, `N_T` (array task), `N.S` / `N_T.S` (one step).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcctJobRef {
    /// Job id, or the array's id when `task` is given.
    pub job_id: u64,
    /// Array task index.
    pub task: Option<u32>,
    /// Step name (`batch`, `extern`, `0`, ...); `None` selects the job and all its steps.
    pub step: Option<String>,
}

/// What `sacct` asks for. Every list is "any of"; an empty list does not filter.
///
/// Time window (Slurm's `as_mysql_jobacct_process.c`, `setup_job_cond_limits`): without
/// `states`, a job is selected when it became eligible before `end` and had not ended before
/// `start`; with `states`, a job in a finished state is selected when it ended within
/// `[start, end]`, a running one when it ran at some point of the window, a pending one when it
/// was eligible and waiting in it. `start`/`end` `None`: no bound (sacct `-j` without `-S`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcctQuery {
    /// `-j`.
    pub jobs: Vec<AcctJobRef>,
    /// `-u` as uids; empty: every user (`-a`, root, or `-j` without `-u`).
    pub uids: Vec<u32>,
    /// `-s`, Slurm long state names (`FAILED`, `COMPLETED`, ...).
    pub states: Vec<String>,
    /// `--name`.
    pub names: Vec<String>,
    /// `-r/--partition`.
    pub partitions: Vec<String>,
    /// `-A`.
    pub accounts: Vec<String>,
    /// `-N/--nodelist`: jobs that ran on any of these nodes.
    pub nodes: Vec<String>,
    /// `-S` (s since the epoch).
    pub start: Option<i64>,
    /// `-E` (s since the epoch).
    pub end: Option<i64>,
    /// The controller's clock when the window's open end (`now`) is meant: the command sends
    /// its own `now` so that both sides agree on `-E now`.
    pub now: i64,
    /// `-D/--duplicates`: also the earlier runs of requeued jobs (each `PREEMPTED`,
    /// `REQUEUED` or `NODE_FAIL`), oldest first, before the job's latest record.
    pub duplicates: bool,
    /// `-q/--qos`: jobs of these QOS.
    #[serde(default)]
    pub qos: Vec<String>,
}

/// One step of a job as accounted (`N.batch`, `N.extern`, `N.0`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AcctStep {
    /// Step name as stored (`batch`, `extern`, `0`, `1`, ...).
    pub step: String,
    /// Slurm state name (`RUNNING`, `COMPLETED`, `FAILED`, `CANCELLED`, ...).
    pub state: String,
    /// Exit status of the step's process (0-255).
    pub exit_code: i32,
    /// Signal that ended it (0: none).
    pub signal: i32,
    /// Start (s).
    pub start_time: Option<i64>,
    /// End (s).
    pub end_time: Option<i64>,
    /// Nodes (Slurm hostlist).
    pub nodes: String,
    /// CPUs (the batch step: the batch host's).
    pub cpus: u32,
    /// Whole GPUs.
    pub gpus: u32,
    /// Memory (MiB).
    pub mem_mib: u64,
    /// Nodes it ran on.
    pub nnodes: u32,
    /// What it used, over its nodes (the latest reports: final once it ended); `None`: no
    /// report (sacct prints the usage fields blank, as for a step Slurm has no stats of).
    #[serde(default)]
    pub usage: Option<crate::usage::StepStats>,
    /// Who cancelled it with `scancel JOB.STEP` (`CANCELLED by <uid>`); `None` for a step
    /// that ended by itself or with its job (appended).
    #[serde(default)]
    pub cancelled_by: Option<u32>,
}

/// One job's accounting record, the latest run (Slurm's sacct without `--duplicates`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AcctJob {
    /// Raw job id (`JobIDRaw`).
    pub job_id: u64,
    /// Array id (array tasks and the array's pending remainder).
    pub array_job_id: Option<u64>,
    /// Task index of an array task.
    pub array_task_id: Option<u32>,
    /// Pending tasks of an array's remainder (`2-3,5%2`), printed as `A_[2-3,5%2]`.
    pub array_task_str: Option<String>,
    /// Name.
    pub name: String,
    /// User name.
    pub user: String,
    /// Uid.
    pub uid: u32,
    /// Gid.
    pub gid: u32,
    /// Account.
    pub account: String,
    /// QOS.
    pub qos: String,
    /// Partition.
    pub partition: String,
    /// Slurm state name (`COMPLETED`, `CANCELLED`, `REQUEUED`, ...).
    pub state: String,
    /// Who cancelled it (`CANCELLED by <uid>`).
    pub cancelled_by: Option<u32>,
    /// Exit status of the batch script, as Slurm reports it for the job (`0` when cancelled or
    /// timed out).
    pub exit_code: i32,
    /// Signal part of the job's exit code.
    pub signal: i32,
    /// Submission (s).
    pub submit_time: i64,
    /// When it became eligible (s); `None`: never (held, dependency, begin time).
    pub eligible_time: Option<i64>,
    /// Start of the run (s).
    pub start_time: Option<i64>,
    /// End (s).
    pub end_time: Option<i64>,
    /// Time limit in minutes; `None` = UNLIMITED.
    pub time_limit_min: Option<u32>,
    /// Nodes of the run (hostlist); empty when it never ran.
    pub nodes: String,
    /// Allocated nodes (0 when it never ran).
    pub alloc_nodes: u32,
    /// Allocated CPUs.
    pub alloc_cpus: u32,
    /// Allocated whole GPUs.
    pub alloc_gpus: u32,
    /// Allocated memory (MiB).
    pub alloc_mem_mib: u64,
    /// Requested nodes.
    pub req_nodes: u32,
    /// Requested CPUs.
    pub req_cpus: u32,
    /// Requested GPUs.
    pub req_gpus: u32,
    /// Requested memory (MiB, all nodes).
    pub req_mem_mib: u64,
    /// Times requeued.
    pub restarts: u32,
    /// Working directory.
    pub work_dir: String,
    /// `--comment`.
    pub comment: String,
    /// Steps, in the order Slurm lists them (`batch`, `extern`, then numbered steps).
    pub steps: Vec<AcctStep>,
    /// False when only some of its steps were asked for (`-j N.batch`): sacct then prints
    /// the steps without the job's line.
    pub show_job: bool,
    /// `--constraint` as the job kept it (`Constraints`; empty for none; appended).
    pub constraints: String,
    /// `DerivedExitCode`: the highest exit code of its srun steps when it ended, `(status,
    /// signal)` (appended).
    #[serde(default)]
    pub derived_exit: (i32, i32),
    /// `Reason`: the last pending reason other than `None`, `Priority` and `Resources` the
    /// job had before it started (Slurm's `state_reason_prev`); `None` for none (appended).
    #[serde(default)]
    pub reason_prev: Option<String>,
}
