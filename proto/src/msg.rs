//! Messages. Every enum here is append-only (postcard is not self-describing): add a variant
//! at the end, never change or reorder an existing one. Units: times are seconds since the
//! Unix epoch (`i64`), time limits minutes, memory MiB, GPU masks bit `i` = GPU index `i`.

use crate::auth::Credential;
use crate::errno::SlurmError;
use crate::step::{LaunchStep, ReleaseAllocation, StepComplete, StepInfo, StepLayout, StepRequest};
use serde::{Deserialize, Serialize};

/// What a peer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// A user command (`sbatch`, `squeue`, ...).
    Command,
    /// A node daemon (`slurmd`).
    NodeDaemon,
    /// `sackd`.
    Sackd,
    /// The controller.
    Controller,
    /// The REST gateway or another tool.
    Tool,
}

/// A time limit (`sbatch -t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimeLimitWire {
    /// `UNLIMITED` / `infinite`.
    Unlimited,
    /// Minutes.
    Minutes(u32),
}

impl TimeLimitWire {
    /// The minutes; `None` for `UNLIMITED`.
    pub fn minutes(self) -> Option<u32> {
        match self {
            Self::Unlimited => None,
            Self::Minutes(m) => Some(m),
        }
    }
}

/// One GRES request (`--gres=gpu:h100:4` gives name `gpu`, type `h100`, count 4), per node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GresSpec {
    /// GRES name (`gpu`).
    pub name: String,
    /// Type (`h100`), if given.
    pub gpu_type: Option<String>,
    /// Count per node.
    pub count: u64,
}

/// A GPU count with an optional type (`--gpus=h100:4`, `--gpus-per-node=2`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuCount {
    /// Type, if given. `--gpus=abc` is type `abc`, count 1, as Slurm reads it.
    pub gpu_type: Option<String>,
    /// Count.
    pub count: u32,
}

/// One range of an array spec: `start-end:step`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayRange {
    /// First index.
    pub start: u32,
    /// Last index (inclusive).
    pub end: u32,
    /// Step (≥ 1).
    pub step: u32,
}

/// `--array=0-5%2,7`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArraySpec {
    /// Ranges as written.
    pub ranges: Vec<ArrayRange>,
    /// `%N`: most tasks running at once.
    pub max_running: Option<u32>,
}

/// `--signal=[B:]SIG[@secs]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalSpec {
    /// Signal number.
    pub signal: i32,
    /// Seconds before the time limit (default 60).
    pub secs_before: u32,
    /// `B:`: the batch shell only.
    pub batch_only: bool,
}

/// Everything `sbatch` can send. Option values are typed; the command parses them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SubmitJob {
    /// `-J`.
    pub name: Option<String>,
    /// The batch script text.
    pub script: String,
    /// Arguments to the script.
    pub argv: Vec<String>,
    /// `-D` (absolute; the command resolves it).
    pub work_dir: String,
    /// `-o` pattern.
    pub stdout: Option<String>,
    /// `-e` pattern.
    pub stderr: Option<String>,
    /// `-i` pattern.
    pub stdin: Option<String>,
    /// Environment to run the script with.
    pub environment: Vec<(String, String)>,
    /// User id the job runs as (must match the credential unless root/SlurmUser).
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// User name.
    pub user: String,
    /// Host submitted from.
    pub submit_host: String,
    /// `-p`.
    pub partition: Option<String>,
    /// `-A`.
    pub account: Option<String>,
    /// `-q`.
    pub qos: Option<String>,
    /// `-N min[-max]`: minimum.
    pub nodes_min: Option<u32>,
    /// `-N min-max`: maximum.
    pub nodes_max: Option<u32>,
    /// `-n`.
    pub ntasks: Option<u32>,
    /// `--ntasks-per-node`.
    pub ntasks_per_node: Option<u32>,
    /// `-c`.
    pub cpus_per_task: Option<u32>,
    /// `--mem` (MiB per node; 0 = all of the node's memory).
    pub mem_per_node_mib: Option<u64>,
    /// `--mem-per-cpu` (MiB).
    pub mem_per_cpu_mib: Option<u64>,
    /// `--gres` (per node).
    pub gres: Vec<GresSpec>,
    /// `--gpus` (per job).
    pub gpus: Option<GpuCount>,
    /// `--gpus-per-node`.
    pub gpus_per_node: Option<GpuCount>,
    /// `--gpus-per-task`.
    pub gpus_per_task: Option<GpuCount>,
    /// `--exclusive`.
    pub exclusive: bool,
    /// `-t`.
    pub time_limit: Option<TimeLimitWire>,
    /// `--time-min`.
    pub time_min: Option<TimeLimitWire>,
    /// `--array`.
    pub array: Option<ArraySpec>,
    /// `-d`, as written (`afterok:12:13,singleton`, `?` for OR).
    pub dependency: Option<String>,
    /// `-H`.
    pub hold: bool,
    /// `--begin`, resolved by the command (s since epoch).
    pub begin: Option<i64>,
    /// `--nice`.
    pub nice: Option<i32>,
    /// `--requeue` (true) / `--no-requeue` (false); `None` = `JobRequeue` default.
    pub requeue: Option<bool>,
    /// `--signal`.
    pub signal: Option<SignalSpec>,
    /// `--test-only`.
    pub test_only: bool,
    /// `-w`, expanded node names.
    pub required_nodes: Vec<String>,
    /// `-x`, expanded node names.
    pub excluded_nodes: Vec<String>,
    /// `-C`.
    pub constraint: Option<String>,
    /// `--comment`.
    pub comment: Option<String>,
    /// Flotilla `--topology=node|pod|any`.
    pub topology: Option<String>,
    /// Flotilla `--preemptible`.
    pub preemptible: bool,
    /// Flotilla `--checkpoint-bytes`.
    pub checkpoint_bytes: Option<u64>,
    /// An allocation without a batch script (`salloc`, `srun` outside a job): the nodes run
    /// nothing until steps are launched, and the job ends when its command gives it back
    /// ([`Request::ReleaseAllocation`]).
    pub interactive: bool,
    /// The batch script file as named on the command line, made absolute (Slurm's
    /// `Command=`, `sbatch` `search_path`); `None` for `--wrap` and a script read from stdin.
    pub command: Option<String>,
    /// `--gpus-per-socket` (appended).
    pub gpus_per_socket: Option<GpuCount>,
    /// `--sockets-per-node` (appended).
    pub sockets_per_node: Option<u32>,
    /// `TresPerNode=` as the command wrote it (appended): `gres:gpu[:type]:N` of
    /// `--gpus-per-node`, then each item of `--gres` prefixed `gres:` (`gres:gpu` for a bare
    /// name), as Slurm 22.05's `slurm_opt_create_job_desc` and `gres_prepend_tres_type` form
    /// it. `None` from a client that does not send it: the controller writes it from `gres`.
    pub tres_per_node: Option<String>,
    /// `--reservation` (appended): the advance reservation to run in. Flotilla has no
    /// reservations, so a name is refused as Slurm refuses an unknown one; `None` or empty:
    /// none asked for.
    pub reservation: Option<String>,
    /// `--mincpus`, `--ntasks-per-core`, `-B`/`--cores-per-socket`/`--threads-per-core`
    /// (after `--hint`), `--tmp` (appended); its `ntasks_per_node` is not read (the
    /// controller takes `ntasks_per_node` above) and `min_cpus` is `--mincpus` as given.
    pub node_shape: NodeShape,
    /// `--mail-type` as Slurm's `MAIL_*` bits ([`mail_type`], appended; 0: none).
    pub mail_type: u16,
    /// `--mail-user` (appended): who the mail goes to; the controller names the job's user
    /// when a mail type is set without it.
    pub mail_user: Option<String>,
    /// [`job_flags`] bits the options set (appended): `--kill-on-invalid-dep`,
    /// `--gres-flags`, `--spread-job`.
    pub job_flags: u16,
    /// `--deadline`, resolved by the command (s since epoch; appended): the job is ended
    /// `DEADLINE` when it can no longer finish by then (Slurm 22.05 `deadline_ok`).
    pub deadline: Option<i64>,
}

/// What a job asks of each node beyond its tasks and CPUs, which Flotilla records and shows
/// but does not place by (Slurm 22.05's `job_details`: `ntasks_per_node`, `pn_min_cpus`,
/// `pn_min_tmp_disk` and the `multi_core_data` of `-B`/`--hint`). Each field 0 when not
/// given, which `scontrol show job` and `squeue` print as `*` (or `0`).
// `default`: a stored row written before a field was added still reads (a field missing
// from it is not given); the wire (postcard) is positional and unaffected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeShape {
    /// `--ntasks-per-node` (`NtasksPerN:B:S:C=` first field, 0 when not given).
    pub ntasks_per_node: u32,
    /// `--ntasks-per-core` (`NtasksPerN:B:S:C=` last field).
    pub ntasks_per_core: u32,
    /// `--cores-per-socket`, `-B *:C` or `--hint=memory_bound` (`ReqB:S:C:T=` third field,
    /// squeue `%I`).
    pub cores_per_socket: u32,
    /// `--threads-per-core`, `-B *:*:T` or a `--hint` (`ReqB:S:C:T=` last field, squeue
    /// `%J`).
    pub threads_per_core: u32,
    /// CPUs a node at least (`MinCPUsNode=`, squeue `%c`): in a submission `--mincpus` as
    /// given, in a record Slurm's `pn_min_cpus` (`job_mgr.c` `_copy_job_desc_to_job_record`:
    /// the largest of `--mincpus`, `-c`, and `-c` × `--ntasks-per-node` when more than one
    /// task is asked for).
    pub min_cpus: u32,
    /// `--tmp` in MiB (`MinTmpDiskNode=`, squeue `%d`).
    pub tmp_disk_mib: u64,
    /// How the job asked to share its nodes (`OverSubscribe=`, squeue `%h`).
    pub oversubscribe: Oversubscribe,
}

/// How a job asked to share its nodes: Slurm 22.05's `shared` (`JOB_SHARED_*`) from
/// `--exclusive[=exclusive|oversubscribe|user|mcs]` and `-s`/`--oversubscribe`
/// (`slurm_opt.c` `arg_set_exclusive`), the last given winning. `OverSubscribe=` shows `NO`,
/// `YES`, `USER`, `MCS`, or for `Unset` `OK` (`NO` when the job is exclusive another way).
/// Flotilla places `User` and `Mcs` jobs on whole nodes, as `No` (stricter than Slurm, which
/// lets the same user's or MCS label's jobs share them), and `Yes` jobs as `Unset` (it does
/// not oversubscribe CPUs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Oversubscribe {
    /// Not asked for.
    #[default]
    Unset,
    /// `--exclusive`.
    No,
    /// `-s`, `--oversubscribe`, `--exclusive=oversubscribe`.
    Yes,
    /// `--exclusive=user`.
    User,
    /// `--exclusive=mcs`.
    Mcs,
}

/// A job reference: `123`, `123_4`, `123_[0-5]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRef {
    /// Job id (or array job id).
    pub job_id: u64,
    /// Array task indices; `None` = the whole job (all tasks).
    pub tasks: Option<Vec<u32>>,
}

impl JobRef {
    /// A plain job id.
    pub fn id(job_id: u64) -> JobRef {
        JobRef { job_id, tasks: None }
    }
}

/// Job states (Slurm's `JOB_*` base states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum JobStateWire {
    /// `PENDING` (PD).
    Pending,
    /// `RUNNING` (R).
    Running,
    /// `SUSPENDED` (S).
    Suspended,
    /// `COMPLETING` (CG).
    Completing,
    /// `COMPLETED` (CD).
    Completed,
    /// `FAILED` (F).
    Failed,
    /// `CANCELLED` (CA).
    Cancelled,
    /// `TIMEOUT` (TO).
    Timeout,
    /// `PREEMPTED` (PR).
    Preempted,
    /// `REQUEUED` (RQ).
    Requeued,
    /// `NODE_FAIL` (NF).
    NodeFail,
    /// `OUT_OF_MEMORY` (OOM).
    OutOfMemory,
    /// `BOOT_FAIL` (BF).
    BootFail,
    /// `DEADLINE` (DL).
    Deadline,
    /// `SPECIAL_EXIT` (SE): a pending job that `scontrol requeue[hold] State=SpecialExit`
    /// requeued, held until released (Slurm's `JOB_SPECIAL_EXIT` flag on a pending job;
    /// `job_state_string` prints it instead of `PENDING`). Pending in every other respect
    /// ([`JobStateWire::is_pending`]).
    SpecialExit,
}

impl JobStateWire {
    /// Slurm's long name (`squeue %T`).
    pub fn as_str(self) -> &'static str {
        match self {
            JobStateWire::Pending => "PENDING",
            JobStateWire::Running => "RUNNING",
            JobStateWire::Suspended => "SUSPENDED",
            JobStateWire::Completing => "COMPLETING",
            JobStateWire::Completed => "COMPLETED",
            JobStateWire::Failed => "FAILED",
            JobStateWire::Cancelled => "CANCELLED",
            JobStateWire::Timeout => "TIMEOUT",
            JobStateWire::Preempted => "PREEMPTED",
            JobStateWire::Requeued => "REQUEUED",
            JobStateWire::NodeFail => "NODE_FAIL",
            JobStateWire::OutOfMemory => "OUT_OF_MEMORY",
            JobStateWire::BootFail => "BOOT_FAIL",
            JobStateWire::Deadline => "DEADLINE",
            JobStateWire::SpecialExit => "SPECIAL_EXIT",
        }
    }

    /// Slurm's compact name (`squeue %t`).
    pub fn compact(self) -> &'static str {
        match self {
            JobStateWire::Pending => "PD",
            JobStateWire::Running => "R",
            JobStateWire::Suspended => "S",
            JobStateWire::Completing => "CG",
            JobStateWire::Completed => "CD",
            JobStateWire::Failed => "F",
            JobStateWire::Cancelled => "CA",
            JobStateWire::Timeout => "TO",
            JobStateWire::Preempted => "PR",
            JobStateWire::Requeued => "RQ",
            JobStateWire::NodeFail => "NF",
            JobStateWire::OutOfMemory => "OOM",
            JobStateWire::BootFail => "BF",
            JobStateWire::Deadline => "DL",
            JobStateWire::SpecialExit => "SE",
        }
    }

    /// True for a job waiting to run: `PENDING`, or pending with the special-exit flag
    /// (Slurm's `IS_JOB_PENDING` tests the base state only).
    pub fn is_pending(self) -> bool {
        matches!(self, JobStateWire::Pending | JobStateWire::SpecialExit)
    }

    /// True for states a job never leaves.
    pub fn is_finished(self) -> bool {
        !matches!(
            self,
            JobStateWire::Pending
                | JobStateWire::Running
                | JobStateWire::Suspended
                | JobStateWire::Completing
                | JobStateWire::SpecialExit
        )
    }
}

/// Filters of `scancel`/`squeue` (all given ones must match).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JobFilter {
    /// `-u`.
    pub users: Vec<String>,
    /// `-n`.
    pub names: Vec<String>,
    /// `-t`.
    pub states: Vec<JobStateWire>,
    /// `-p`.
    pub partitions: Vec<String>,
    /// `-A`.
    pub accounts: Vec<String>,
    /// `-w`.
    pub nodes: Vec<String>,
}

/// `scancel`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CancelJob {
    /// Jobs named on the command line (empty: all jobs matching the filter).
    pub jobs: Vec<JobRef>,
    /// Filters.
    pub filter: JobFilter,
    /// `-s`: send this signal instead of cancelling.
    pub signal: Option<i32>,
    /// `-b`: the batch shell only.
    pub batch_only: bool,
    /// `-f`: the batch shell and every step (without `-b` or `-f` a signal reaches the steps
    /// only, as Slurm 22.05's scancel does: the batch shell keeps running).
    pub full: bool,
}

/// `scontrol hold|uhold|release`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldOp {
    /// `hold` (admin hold when root/SlurmUser, else user hold).
    Hold,
    /// `uhold`.
    UserHold,
    /// `release`.
    Release,
}

/// `scontrol hold|uhold|release`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldRelease {
    /// Jobs.
    pub jobs: Vec<JobRef>,
    /// Operation.
    pub op: HoldOp,
}

/// `scontrol requeue|requeuehold`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequeueJob {
    /// Jobs.
    pub jobs: Vec<JobRef>,
    /// `requeuehold`.
    pub hold: bool,
}

/// One field of `scontrol update job`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobChange {
    /// `TimeLimit=`.
    TimeLimit(TimeLimitWire),
    /// `Name=`.
    Name(String),
    /// `Partition=`.
    Partition(String),
    /// `Priority=` (admin only).
    Priority(u32),
    /// `Nice=`.
    Nice(i32),
    /// `Gres=` (per node).
    Gres(Vec<GresSpec>),
    /// `NumNodes=`.
    NumNodes(u32),
    /// `Dependency=` (empty clears).
    Dependency(String),
    /// `StartTime=` (`--begin`); `None` clears.
    Begin(Option<i64>),
    /// `Account=`.
    Account(String),
    /// `QOS=`.
    Qos(String),
    /// `Comment=`.
    Comment(String),
    /// Flotilla `Topology=`.
    Topology(String),
    /// `MailType=` ([`mail_type`] bits; 0 for `NONE`).
    MailType(u16),
    /// `MailUser=` (empty: the job's user).
    MailUser(String),
    /// `Requeue=` (0: no; any other number: yes, as Slurm's `MIN(requeue, 1)`).
    Requeue(u16),
    /// `TimeMin=` (appended): minutes, `Minutes(0)` clearing it; `Unlimited` is Slurm's
    /// INFINITE (`-1`, `UNLIMITED`), above any finite time limit.
    TimeMin(TimeLimitWire),
    /// `Deadline=` (appended; s since epoch): an operator's, of a job not running.
    Deadline(i64),
    /// `ReqNodeList=`/`NodeList=` (appended): node names as written (a hostlist; empty
    /// clears), kept as written for `scontrol show job`.
    ReqNodeList(String),
    /// `ExcNodeList=` (appended), as [`JobChange::ReqNodeList`].
    ExcNodeList(String),
    /// `WorkDir=` (appended), as written.
    WorkDir(String),
    /// `MinTmpDiskNode=` (appended): MiB of temporary disk a node.
    MinTmpDiskNode(u32),
    /// `Features=` (appended): the new `--constraint` as written; empty clears it.
    Features(String),
    /// `MinMemoryNode=` (appended): MiB a node; 0 is all of a node's memory (`--mem=0`).
    MinMemoryNode(u64),
    /// `MinMemoryCPU=` (appended): MiB a CPU; 0 is `MinMemoryNode=0`.
    MinMemoryCpu(u64),
    /// `MinCPUsNode=` (appended): CPUs a node at least; 0 changes nothing.
    MinCpusNode(u16),
    /// `NumNodes=MIN-MAX` (appended): a pending job's node range (`NumNodes=N` is
    /// [`JobChange::NumNodes`], which keeps the maximum).
    NodeRange { min: u32, max: u32 },
    /// `ArrayTaskThrottle=` (appended): the array's `%N` (0: none). Changes the array's first
    /// record only, whatever its state; any other record takes it as no change.
    ArrayThrottle(u32),
    /// `StdOut=` (appended): the output file name pattern as written (relative to the job's
    /// working directory), of a pending job.
    StdOut(String),
    /// `EndTime=` (appended): when a running job is to end (s since the epoch); its time
    /// limit follows.
    EndTime(i64),
    /// `NumCPUs=` (appended): the CPUs a pending job asks for in all (Slurm's `min_cpus`), at
    /// least 1.
    NumCpus(u32),
    /// `NumTasks=`/`ReqProcs=` (appended): a pending job's task count, at least 1.
    NumTasks(u32),
    /// `ReqCores=` (appended): a pending job's `--cores-per-socket` (0 allowed).
    CoresPerSocket(u16),
    /// `AdminComment=` (appended): an operator's comment on the job, as written (`+=x` kept
    /// whole, as Slurm 22.05 keeps it).
    AdminComment(String),
    /// `SiteFactor=` (appended): an operator's addition to the job's priority under
    /// `priority/multifactor` (Slurm's `site_factor` less `NICE_OFFSET`), within
    /// ±(2^31 − 3).
    SiteFactor(i32),
    /// `TasksPerNode=` (appended): an operator's `--ntasks-per-node` of a pending job.
    TasksPerNode(u16),
    /// `ReqSockets=` (appended): a pending job's `--sockets-per-node`.
    SocketsPerNode(u16),
    /// `ReqThreads=` (appended): a pending job's `--threads-per-core`.
    ThreadsPerCore(u16),
    /// `CPUsPerTask=` (appended): a pending job's `--cpus-per-task` (0 allowed, as in Slurm).
    CpusPerTask(u16),
    /// `OverSubscribe=`/`Shared=` (appended): an operator's; non-zero shares the nodes.
    Shared(u16),
    /// `Contiguous=` (appended): non-zero asks for contiguous nodes.
    Contiguous(u16),
    /// `DelayBoot=` (appended): seconds (`u32::MAX`: INFINITE).
    DelayBoot(u32),
    /// `Reboot=` (appended): an operator's; non-zero reboots the nodes before the job.
    Reboot(u16),
    /// `WCKey=` (appended).
    WcKey(String),
    /// `Licenses=` (appended): as written; empty asks for none.
    Licenses(String),
    /// `CoreSpec=`/`ThreadSpec=` (appended): Slurm's `core_spec` (`0x8000` marks threads,
    /// `u16::MAX` clears it).
    CoreSpec(u16),
    /// `ReservationName=` (appended): empty leaves none.
    Reservation(String),
    /// `BurstBuffer=` (appended).
    BurstBuffer(String),
}

/// `scontrol update job`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateJob {
    /// The job.
    pub job: JobRef,
    /// Changes, applied in order, all or nothing.
    pub changes: Vec<JobChange>,
}

/// `squeue`/`scontrol show job`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JobQuery {
    /// Jobs (empty: all).
    pub jobs: Vec<JobRef>,
    /// Filters.
    pub filter: JobFilter,
    /// Include finished jobs still in memory (`-t all`).
    pub include_finished: bool,
}

/// `sinfo`/`scontrol show node`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeQuery {
    /// Nodes (empty: all).
    pub names: Vec<String>,
}

/// A job that runs on a node, as its daemon reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeJob {
    /// Job id.
    pub job_id: u64,
    /// Run of the job (its requeue count) this process belongs to.
    pub run: u32,
    /// GPUs it holds there.
    pub gpu_mask: u64,
}

/// A job's end on a node, as its daemon reports it (kept and re-reported until acknowledged).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobExit {
    /// Job id.
    pub job_id: u64,
    /// Run of the job (its requeue count) that ended.
    pub run: u32,
    /// Exit code of the batch script (0-255).
    pub exit_code: i32,
    /// Signal that ended it (0: none).
    pub signal: i32,
    /// Killed by the OOM killer.
    pub oom: bool,
    /// When (s since epoch).
    pub end_time: i64,
}

/// A node daemon announces itself; the connection becomes its node session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Register {
    /// Node name (`-N` / `NodeName=`).
    pub node: String,
    /// Its boot epoch (persisted by the daemon, bumped at each start).
    pub boot_epoch: u64,
    /// GPUs found.
    pub gpus: u32,
    /// CPUs found.
    pub cpus: u32,
    /// Memory found (MiB).
    pub mem_mib: u64,
    /// Jobs running there now.
    pub running: Vec<NodeJob>,
    /// Jobs that ended and whose end the controller has not acknowledged.
    pub finished: Vec<JobExit>,
}

/// Node daemon → controller on a node session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeToCtl {
    /// Periodic full report (level-triggered: the controller converges on it).
    Heartbeat {
        /// Boot epoch.
        boot_epoch: u64,
        /// Jobs running there now.
        running: Vec<NodeJob>,
        /// Ended jobs not yet acknowledged.
        finished: Vec<JobExit>,
    },
    /// A job ended (also repeated in heartbeats until acknowledged).
    JobExited(JobExit),
    /// A job being stopped acknowledged its checkpoint (it touched the file named by
    /// `FLOTILLA_CHECKPOINT_ACK`): the controller need not wait for the rest of the deadline.
    CheckpointAck {
        /// Job.
        job_id: u64,
        /// Run.
        run: u32,
        /// When the job acknowledged (s since epoch).
        at: i64,
    },
    /// The node's GPU health policy reached a verdict on what its health source reported
    /// (sent once per new reason). `Quarantine`: the controller drains the node with `reason`
    /// (`scontrol show node` `Reason=`), requeues its jobs and places nothing there until an
    /// admin resumes it; `Warn`: logged.
    Health {
        /// The verdict.
        verdict: HealthLevel,
        /// Why, e.g. `Xid 79 on gpu 3: GPU has fallen off the bus`.
        reason: String,
        /// The events of the poll that led to the verdict, as text (for the log).
        events: Vec<String>,
    },    /// What a step used on this node (CPU time, memory peak): sent on the poll interval
    /// (`JobAcctGatherFrequency`) while it runs and once at its end (`done`).
    StepUsage(crate::usage::StepUsage),
}

/// The severity of a [`NodeToCtl::Health`] report (`flotilla_core::health::HealthVerdict`
/// without `Ignore`, which is never reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HealthLevel {
    /// Log and report; the node stays schedulable.
    Warn,
    /// Drain the node, requeue its jobs.
    Quarantine,
}

/// Start a job's part on a node. Idempotent: a node that runs or ran `(job_id, run)` during
/// this boot ignores it (the controller re-sends binds while reconciling, and a duplicate may
/// arrive after the job ended).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    /// Job id (the task's own id for an array task).
    pub job_id: u64,
    /// Run of the job: its requeue count (a requeued job is bound again with the next run).
    pub run: u32,
    /// Array job id and task index, for array tasks.
    pub array: Option<(u64, u32)>,
    /// Job name.
    pub name: String,
    /// GPUs on this node.
    pub gpu_mask: u64,
    /// CPUs on this node.
    pub cpus: u32,
    /// Memory on this node (MiB).
    pub mem_mib: u64,
    /// This node runs the batch script.
    pub batch_host: bool,
    /// All nodes of the job (hostlist).
    pub nodes: String,
    /// User.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// User name.
    pub user: String,
    /// Script.
    pub script: String,
    /// Script arguments.
    pub argv: Vec<String>,
    /// Environment.
    pub environment: Vec<(String, String)>,
    /// Working directory.
    pub work_dir: String,
    /// Stdout path pattern.
    pub stdout: Option<String>,
    /// Stderr path pattern.
    pub stderr: Option<String>,
    /// Time limit (s); `None` = unlimited. The controller enforces it; this is informational.
    pub time_limit_s: Option<u64>,
    /// Partition.
    pub partition: String,
}

/// Controller → node daemon on a node session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CtlToNode {
    /// Start a job.
    Bind(Box<Bind>),
    /// Deliver a signal to the job's processes (or the batch shell only).
    Signal {
        /// Job.
        job_id: u64,
        /// Signal number.
        signal: i32,
        /// Batch shell only.
        batch_only: bool,
    },
    /// SIGKILL everything of the job and release its resources on the node.
    Kill {
        /// Job.
        job_id: u64,
    },
    /// The controller recorded these ends; the node may forget them.
    AckExits {
        /// Jobs.
        job_ids: Vec<u64>,
    },
    /// Start a job, with what the node needs beyond [`Bind`] to give the batch script the
    /// environment Slurm gives it and to deliver `--signal`. Idempotent like `Bind`; a node
    /// that understands it never needs the plain `Bind`.
    Launch {
        /// The binding.
        bind: Box<Bind>,
        /// The rest.
        details: Box<LaunchDetails>,
    },
    /// Start this node's tasks of a job step; they connect back to `srun`.
    LaunchStep(Box<LaunchStep>),
    /// Why a running job is being stopped, sent just before the stop's first signal. The node
    /// writes Slurm's notice into the batch script's stderr file, as `slurmstepd` does
    /// (`*** JOB 78 ON gpu01 CANCELLED AT 2026-11-29T09:42:38 DUE TO TIME LIMIT ***`).
    StopNotice {
        /// Job.
        job_id: u64,
        /// When the controller decided the stop (seconds since the epoch).
        at: i64,
        /// Why.
        cause: StopCause,
    },
    /// Deliver a signal to the job's step tasks only, not the batch shell (`scancel --signal`
    /// without `-b`/`-f`).
    SignalSteps {
        /// Job.
        job_id: u64,
        /// Signal number.
        signal: i32,
    },
    /// An elastic job's members changed (Flotilla): the batch host rewrites the job's
    /// membership file (`FLOTILLA_NODES_FILE`) with `nodes`, as the job's user.
    Membership {
        /// Job.
        job_id: u64,
        /// All nodes of the job now, first (rendezvous) node first, comma-separated.
        nodes: String,
    },
    /// The controller's session liveness (Flotilla): a leader sends it on every node session
    /// right after the registration and then whenever a third of `SlurmctldTimeout` passed
    /// without any other message to that node, while its leader lease is fresh (a busy node
    /// gets none: every message counts as liveness). A node daemon that has had one on a
    /// session and then hears no message for one and a half `SlurmctldTimeout` leaves the
    /// session for the next
    /// `SlurmctldHost` (a paused, hung or cut-off leader). It changes nothing on the node
    /// (an older epoch's is refused like any other message).
    Keepalive,
    /// Deliver a signal to the tasks of one step of the job on this node (`scancel
    /// JOB.STEP`); the job's other steps and its batch shell are left alone.
    SignalStep {
        /// Job.
        job_id: u64,
        /// Step.
        step_id: u32,
        /// Signal number.
        signal: i32,
        /// A cancel (SIGKILL): when the controller decided it (seconds since the epoch), for
        /// the notice the step's `srun` prints (`*** STEP 78.0 ON gpu01 CANCELLED AT ... ***`).
        cancelled_at: Option<i64>,
        /// A cancel: how long `srun` says it waits for the step's end (`KillWait` + 2 s, as
        /// Slurm's srun words it: `Job step aborted: Waiting up to 7 seconds ...`).
        wait_s: u32,
    },
}

/// Why a running job is stopped ([`CtlToNode::StopNotice`]); the phrase `slurmstepd` prints
/// after `CANCELLED AT <time>` (Slurm 22.05 `slurmstepd/req.c`). Append-only on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopCause {
    /// `scancel`: no phrase.
    Cancelled,
    /// The time limit: `DUE TO TIME LIMIT`.
    TimeLimit,
    /// Preempted: `DUE TO PREEMPTION`.
    Preempted,
    /// `scontrol requeue`: `DUE TO JOB REQUEUE`.
    Requeued,
}

impl StopCause {
    /// The phrase after `CANCELLED AT <time>`, with its leading space (empty for `scancel`).
    pub fn phrase(self) -> &'static str {
        match self {
            StopCause::Cancelled => "",
            StopCause::TimeLimit => " DUE TO TIME LIMIT",
            StopCause::Preempted => " DUE TO PREEMPTION",
            StopCause::Requeued => " DUE TO JOB REQUEUE",
        }
    }
}

/// Array task bounds of an array job, as Slurm exports them (`SLURM_ARRAY_TASK_COUNT`,
/// `_MIN`, `_MAX`, `_STEP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayTasks {
    /// Number of tasks.
    pub count: u32,
    /// Lowest index.
    pub min: u32,
    /// Highest index.
    pub max: u32,
    /// Step between indices (1 when they are not evenly spaced).
    pub step: u32,
}

impl ArrayTasks {
    /// Bounds of a set of task indices (`None` when empty).
    pub fn of(indices: &[u32]) -> Option<ArrayTasks> {
        let mut v = indices.to_vec();
        v.sort_unstable();
        v.dedup();
        let (&min, &max) = (v.first()?, v.last()?);
        let steps: Vec<u32> = v.windows(2).map(|w| w[1] - w[0]).collect();
        let step = match steps.first() {
            Some(&s) if steps.iter().all(|&x| x == s) => s,
            _ => 1,
        };
        Some(ArrayTasks {
            count: v.len() as u32,
            min,
            max,
            step,
        })
    }
}

/// The part of a job's launch that [`Bind`] does not carry (sent with it in
/// [`CtlToNode::Launch`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LaunchDetails {
    /// Account (`SLURM_JOB_ACCOUNT`).
    pub account: String,
    /// QOS (`SLURM_JOB_QOS`).
    pub qos: String,
    /// Host the job was submitted from (`SLURM_SUBMIT_HOST`); empty if unknown.
    pub submit_host: String,
    /// CPUs on each node of the job, in allocation order (the batch host first), for
    /// `SLURM_JOB_CPUS_PER_NODE` and `SLURM_TASKS_PER_NODE`.
    pub cpus_per_node: Vec<u32>,
    /// CPUs per task (`-c`, at least 1).
    pub cpus_per_task: u32,
    /// Memory per CPU (MiB) when memory was given per CPU (`--mem-per-cpu` or
    /// `DefMemPerCPU`): `SLURM_MEM_PER_CPU`; `None`: per node (`SLURM_MEM_PER_NODE`).
    pub mem_per_cpu_mib: Option<u64>,
    /// Memory per node (MiB).
    pub mem_per_node_mib: u64,
    /// Bounds of the array the job is a task of.
    pub array_tasks: Option<ArrayTasks>,
    /// `--signal`: the node delivers it `secs_before` the time limit.
    pub signal: Option<SignalSpec>,
    /// An interactive allocation (`salloc`): no batch script runs; the node only records it.
    pub interactive: bool,
    /// The job's task count when one was asked for (`-n`, `scontrol update NumTasks=`;
    /// Slurm's `num_tasks` in the batch launch); 0 when none (appended; absent in older
    /// spool files).
    #[serde(default)]
    pub ntasks: u32,
}

/// Answer to `SubmitJob`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted {
    /// The job id (array job id for arrays).
    pub job_id: u64,
}

/// Answer to `SubmitJob` with `test_only` (`sbatch: Job 12 to start at ... using 1 processors on
/// nodes gpu01 in partition batch`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestOnly {
    /// The id it consumed.
    pub job_id: u64,
    /// Expected start (s since epoch).
    pub start_time: i64,
    /// CPUs it would use.
    pub cpus: u32,
    /// Nodes (hostlist).
    pub nodes: String,
    /// Partition.
    pub partition: String,
}

/// Result for one job of a multi-job request (`scancel 1 2 3`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobResult {
    /// The job as named.
    pub job: JobRef,
    /// `None` = success.
    pub error: Option<SlurmError>,
}

/// A job as `squeue`/`scontrol show job` need it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JobInfo {
    /// Job id (the task's own id for a started array task).
    pub job_id: u64,
    /// Array job id.
    pub array_job_id: Option<u64>,
    /// Array task index (started tasks).
    pub array_task_id: Option<u32>,
    /// Pending tasks of an array, Slurm style (`0-5%2`).
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
    /// Partition.
    pub partition: String,
    /// QOS.
    pub qos: String,
    /// State.
    pub state: Option<JobStateWire>,
    /// Slurm reason (`Resources`, `Priority`, `Dependency`, `None`, ...).
    pub reason: String,
    /// Flotilla's topology detail for a pending job.
    pub reason_detail: Option<String>,
    /// Priority.
    pub priority: u64,
    /// Nice.
    pub nice: i32,
    /// Submit time.
    pub submit_time: i64,
    /// Eligible time.
    pub eligible_time: Option<i64>,
    /// Start time (expected start for a pending job with a reservation).
    pub start_time: Option<i64>,
    /// End time (expected end while running).
    pub end_time: Option<i64>,
    /// Time limit.
    pub time_limit: Option<TimeLimitWire>,
    /// Allocated nodes (hostlist); empty while pending.
    pub nodes: String,
    /// Nodes of the reservation (`SchedNodeList`).
    pub sched_nodes: String,
    /// Node count (requested while pending).
    pub num_nodes: u32,
    /// CPUs.
    pub num_cpus: u32,
    /// Tasks.
    pub num_tasks: u32,
    /// CPUs per task.
    pub cpus_per_task: u32,
    /// Memory per node (MiB).
    pub mem_per_node_mib: u64,
    /// GPUs in total.
    pub gpus: u32,
    /// GRES requested per node.
    pub gres: Vec<GresSpec>,
    /// GPU masks per node (node name, mask).
    pub gpu_alloc: Vec<(String, u64)>,
    /// Working directory.
    pub work_dir: String,
    /// Stdout pattern.
    pub stdout: Option<String>,
    /// Stderr pattern.
    pub stderr: Option<String>,
    /// Dependency as given (remaining).
    pub dependency: Option<String>,
    /// Exit code of the batch script.
    pub exit_code: i32,
    /// Signal that ended it.
    pub exit_signal: i32,
    /// Times requeued.
    pub restarts: u32,
    /// May be requeued.
    pub requeue: bool,
    /// Batch host.
    pub batch_host: String,
    /// Topology.
    pub topology: String,
    /// Preemptible.
    pub preemptible: bool,
    /// Held (user or admin).
    pub held: bool,
    /// `--exclusive`.
    pub exclusive: bool,
    /// `-w`.
    pub required_nodes: Vec<String>,
    /// `-x`.
    pub excluded_nodes: Vec<String>,
    /// `--comment`.
    pub comment: Option<String>,
    /// Times the job was preempted (and requeued).
    pub preempt_count: u32,
    /// Last checkpoint the job acknowledged (s since epoch), if any.
    pub last_checkpoint_ack: Option<i64>,
    /// Its allocation exceeds its quota scope's guarantee (reclaimed first).
    pub borrowed: bool,
    /// The service this job is a replica of.
    pub service_id: Option<u32>,
    /// `Command=` of `scontrol show job`, `%o` of `squeue`: the script's absolute path and its
    /// arguments, space-separated; `None` for `--wrap` and stdin scripts (`(null)`).
    pub command: Option<String>,
    /// `TresPerJob=` (`--gpus`): `gres:gpu[:type]:N`.
    pub tres_per_job: Option<String>,
    /// `TresPerTask=` (`--gpus-per-task`): `gres:gpu[:type]:N`.
    pub tres_per_task: Option<String>,
    /// Memory per CPU (MiB) when memory was asked per CPU (`--mem-per-cpu`, `DefMemPerCPU`);
    /// `None` when asked per node (`--mem`): `MinMemoryCPU=` or `MinMemoryNode=`.
    pub mem_per_cpu_mib: Option<u64>,
    /// `TresPerNode=` as submitted (appended; `None`: written from `gres`).
    pub tres_per_node: Option<String>,
    /// `TresPerSocket=` (`--gpus-per-socket`): `gres:gpu[:type]:N` (appended).
    pub tres_per_socket: Option<String>,
    /// The most nodes the job may get (Slurm's `max_nodes`; appended): `-N MIN[-MAX]`'s
    /// MAX (MIN when no MAX), or the node count `--gpus` over a per-node GPU count implies;
    /// 0 when not bounded. A pending job shows `NumNodes=MIN-MAX` when it is not 0.
    pub max_nodes: u32,
    /// `CPU_IDs=` of `scontrol show job -d` (appended): for each node of `gpu_alloc`, in its
    /// order, the CPU ids the job holds there as Slurm prints them (`0-1,32-33`); an empty
    /// string where the controller did not pick them (a run it recovered from an older one).
    pub cpu_ids: Vec<String>,
    /// `--sockets-per-node` (Slurm's `sockets_per_node`, appended): `Socks/Node=`; 0 when
    /// not given (`*`).
    pub sockets_per_node: u32,
    /// The job asked for all of each node's memory (`--mem=0`, appended): `MinMemoryNode=0`
    /// as asked, while `mem_per_node_mib` is the memory that stands for.
    pub mem_whole_node: bool,
    /// What the job asked of each node (appended; `min_cpus` is Slurm's `pn_min_cpus`).
    pub node_shape: NodeShape,
    /// `--mail-type` bits (appended, [`mail_type`]; 0: none): `MailType=`.
    pub mail_type: u16,
    /// `MailUser=` (appended): `--mail-user`, or the job's user when a mail type was set.
    pub mail_user: Option<String>,
    /// [`job_flags`] bits (appended).
    pub job_flags: u16,
    /// `TimeMin=` in minutes (appended): `--time-min`, or 1 for a job with a deadline and no
    /// time limit (Slurm 22.05 `_job_create`); `None`: `N/A`.
    pub time_min: Option<u32>,
    /// `Deadline=` (s since epoch; appended); `None`: `N/A`.
    pub deadline: Option<i64>,
    /// `Features=` (appended): `--constraint` as the job keeps it; `None`: `(null)`.
    pub features: Option<String>,
    /// The array's `ArrayTaskThrottle` (appended; 0: none): the `%N` its first record keeps,
    /// shown on every record of the array (Slurm 22.05 `pack_job` packs the array head's
    /// `max_run_tasks` for a task's record too); 0 for a job that is not an array's.
    pub array_throttle: u32,
    /// `AdminComment=` (appended): an operator's comment; `None` when never set (no line).
    pub admin_comment: Option<String>,
    /// `DelayBoot=` (appended): seconds (`u32::MAX`: INFINITE); 0 when never set.
    pub delay_boot_s: u32,
    /// `DerivedExitCode=` (appended; `scontrol show job -d`): the highest exit code of the
    /// job's srun steps so far, `(status, signal)`.
    pub derived_exit: (i32, i32),
}

/// Slurm 22.05's job `bit_flags` the submission options set (`slurm_opt.c`
/// `arg_set_kill_on_invalid_dep`, `arg_set_gres_flags`, `--spread-job`), and the line
/// `scontrol show job` prints for them (`job_info.c` line 38).
pub mod job_flags {
    /// `--kill-on-invalid-dep=yes`: cancel the job when its dependency can never be met.
    pub const KILL_INV_DEP: u16 = 1;
    /// `--kill-on-invalid-dep=no`: keep it pending (`DependencyNeverSatisfied`) even under
    /// `DependencyParameters=kill_invalid_depend`.
    pub const NO_KILL_INV_DEP: u16 = 2;
    /// `--gres-flags=disable-binding`.
    pub const GRES_DISABLE_BIND: u16 = 4;
    /// `--gres-flags=enforce-binding`.
    pub const GRES_ENFORCE_BIND: u16 = 8;
    /// `--spread-job`.
    pub const SPREAD_JOB: u16 = 16;

    /// The text after the line's indent, `None` without any of the flags: Slurm writes the
    /// items one after the other without a separator.
    pub fn line(bits: u16) -> Option<String> {
        const ITEMS: [(u16, &str); 5] = [
            (GRES_DISABLE_BIND, "GresEnforceBind=No"),
            (GRES_ENFORCE_BIND, "GresEnforceBind=Yes"),
            (KILL_INV_DEP, "KillOInInvalidDependent=Yes"),
            (NO_KILL_INV_DEP, "KillOInInvalidDependent=No"),
            (SPREAD_JOB, "SpreadJob=Yes"),
        ];
        let s: String = ITEMS.iter().filter(|(b, _)| bits & b != 0).map(|(_, t)| *t).collect();
        (!s.is_empty()).then_some(s)
    }

    /// Whether a job whose dependency can never be met is cancelled (`job_mgr.c`
    /// `handle_invalid_dependency`): its own yes, else not its own no, else the cluster's
    /// `kill_invalid_depend`.
    pub fn kills_on_invalid_dep(bits: u16, kill_invalid_depend: bool) -> bool {
        bits & KILL_INV_DEP != 0 || (bits & NO_KILL_INV_DEP == 0 && kill_invalid_depend)
    }
}

/// Slurm 22.05's mail types (`slurm.h` `MAIL_*` bits) with `parse_mail_type` and
/// `print_mail_type` (`proc_args.c`).
pub mod mail_type {
    /// The bits in the order `print_mail_type` names them.
    pub const NAMES: [(u16, &str); 11] = [
        (0x0040, "ARRAY_TASKS"),
        (0x0400, "INVALID_DEPEND"),
        (0x0001, "BEGIN"),
        (0x0002, "END"),
        (0x0004, "FAIL"),
        (0x0008, "REQUEUE"),
        (0x0080, "STAGE_OUT"),
        (0x0200, "TIME_LIMIT_50"),
        (0x0100, "TIME_LIMIT_80"),
        (0x0020, "TIME_LIMIT_90"),
        (0x0010, "TIME_LIMIT"),
    ];
    /// `ALL`: invalid dependency, begin, end, fail, requeue and stage-out.
    pub const ALL: u16 = 0x0400 | 0x0001 | 0x0002 | 0x0004 | 0x0008 | 0x0080;

    /// `--mail-type`'s value: comma-separated words in any case; `NONE` ends the list with
    /// no type (0), `ALL` is [`ALL`], unknown words are skipped. `None` when no word is known
    /// (Slurm's `INFINITE16`, which sbatch refuses).
    pub fn parse(a: &str) -> Option<u16> {
        let mut bits = 0u16;
        for w in a.split(',').filter(|w| !w.is_empty()) {
            if w.eq_ignore_ascii_case("NONE") {
                return Some(0);
            }
            if w.eq_ignore_ascii_case("ALL") {
                bits |= ALL;
            } else if let Some((b, _)) = NAMES.iter().find(|(_, n)| n.eq_ignore_ascii_case(w)) {
                bits |= b;
            }
        }
        (bits != 0).then_some(bits)
    }

    /// `MailType=`: the names of `bits`, comma-separated, `NONE` for 0.
    pub fn names(bits: u16) -> String {
        if bits == 0 {
            return "NONE".into();
        }
        NAMES.iter().filter(|(b, _)| bits & b != 0).map(|(_, n)| *n).collect::<Vec<_>>().join(",")
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Goldens-extra 0155: the reference's MailType= for these values.
        #[test]
        fn parsed_and_named_as_slurm() {
            let show = |a: &str| parse(a).map(names);
            assert_eq!(show("END").as_deref(), Some("END"));
            assert_eq!(show("ALL").as_deref(), Some("INVALID_DEPEND,BEGIN,END,FAIL,REQUEUE,STAGE_OUT"));
            assert_eq!(show("TIME_LIMIT_50,ARRAY_TASKS,begin").as_deref(), Some("ARRAY_TASKS,BEGIN,TIME_LIMIT_50"));
            assert_eq!(show("ALL,TIME_LIMIT").as_deref(), Some("INVALID_DEPEND,BEGIN,END,FAIL,REQUEUE,STAGE_OUT,TIME_LIMIT"));
            assert_eq!(parse("BEGIN,NONE,END"), Some(0));
            assert_eq!(parse("END,bogus"), parse("END"));
            assert_eq!(parse("bogus"), None);
            assert_eq!(parse(","), None);
        }
    }
}

/// A node as `sinfo`/`scontrol show node` need it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeInfo {
    /// Name.
    pub name: String,
    /// Slurm state (`IDLE`, `MIXED`, `ALLOCATED`, `DOWN`, `DRAINED`, `DRAINING`, `UNKNOWN`).
    pub state: String,
    /// Node daemon not connected.
    pub not_responding: bool,
    /// Admin reason.
    pub reason: Option<String>,
    /// CPUs.
    pub cpus: u32,
    /// CPUs allocated.
    pub cpus_alloc: u32,
    /// Memory (MiB).
    pub mem_mib: u64,
    /// Memory allocated (MiB).
    pub mem_alloc_mib: u64,
    /// GPUs.
    pub gpus: u32,
    /// GPU model.
    pub gpu_type: Option<String>,
    /// GPUs allocated (mask).
    pub gpu_alloc_mask: u64,
    /// Partitions.
    pub partitions: Vec<String>,
    /// Pod (leaf switch).
    pub pod: String,
    /// Boot epoch last registered.
    pub boot_epoch: u64,
    /// When `reason` was set (Unix s; Slurm's `reason_time`, sinfo `%H`); `None` when there
    /// is no reason or the controller does not know when it was set.
    pub reason_time: Option<i64>,
    /// Who set `reason` (Slurm's `reason_uid`, sinfo `%u`): the admin who drained or downed
    /// the node, the controller's own user for a reason it set itself.
    pub reason_uid: Option<u32>,
    /// Available features as shown (appended): slurm.conf's `Features=` or as `scontrol
    /// update` set them, comma-separated; `AvailableFeatures=`, sinfo `%f`; `None`: `(null)`.
    pub features: Option<String>,
    /// Active features as shown (appended): what `--constraint` matches; `ActiveFeatures=`,
    /// sinfo `%b`; `None`: `(null)`, `Some("")` once `scontrol update` emptied them.
    pub features_act: Option<String>,
}

/// A partition as `sinfo`/`scontrol show partition` need it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PartitionInfo {
    /// Name.
    pub name: String,
    /// Nodes (hostlist).
    pub nodes: String,
    /// Default partition.
    pub default: bool,
    /// `MaxTime` (minutes; `None` = unlimited).
    pub max_time_min: Option<u64>,
    /// `DefaultTime` (minutes).
    pub default_time_min: Option<u64>,
    /// Up.
    pub up: bool,
    /// Node count.
    pub total_nodes: u32,
    /// CPUs.
    pub total_cpus: u32,
    /// GPUs.
    pub total_gpus: u32,
    /// Default topology.
    pub default_topology: String,
    /// The largest GPU request that could start now in this partition, per topology level
    /// (`None` from a controller that does not compute it).
    pub largest_placeable: Option<LargestPlaceableWire>,
}

impl PartitionInfo {
    /// Its `State=` word: `UP`, or its word in `states` (by name, the answer of
    /// [`Request::QueryPartitionStates`] for the partitions not up), `DOWN` when it has none.
    pub fn state_word<'a>(&self, states: &'a std::collections::BTreeMap<String, String>) -> &'a str {
        if self.up {
            "UP"
        } else {
            states.get(&self.name).map_or("DOWN", String::as_str)
        }
    }
}

/// The largest request (GPUs) that could start now inside one node, one pod, and anywhere
/// (DESIGN.md §2 `largest_placeable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LargestPlaceableWire {
    /// GPUs inside one node.
    pub node: u32,
    /// GPUs inside one pod (leaf switch).
    pub pod: u32,
    /// GPUs anywhere.
    pub any: u32,
}

/// `sdeploy create`: a long-lived inference service (DESIGN.md §2). Each replica is one
/// allocation of `gpus_per_replica` GPUs inside one `topology` set, running `command`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ServiceCreate {
    /// Service name (replicas show it as their job name).
    pub name: String,
    /// Command each replica runs (`/bin/sh -c`).
    pub command: String,
    /// GPUs per replica.
    pub gpus_per_replica: u32,
    /// GPU model, if required.
    pub gpu_type: Option<String>,
    /// Topology of one replica (`node`, `pod`, `any`); `None`: `node`.
    pub topology: Option<String>,
    /// CPUs per replica (`None`: 1).
    pub cpus_per_replica: Option<u32>,
    /// Memory per replica (MiB; `None`: `DefMemPerCPU` × CPUs).
    pub mem_per_replica_mib: Option<u64>,
    /// Availability floor.
    pub min_replicas: u32,
    /// Ceiling.
    pub max_replicas: u32,
    /// Replicas wanted now (clamped to `[min, max]` by the scheduler).
    pub desired_replicas: u32,
    /// Priority among services.
    pub priority: u32,
    /// Partition (`None`: the default partition).
    pub partition: Option<String>,
    /// Account.
    pub account: Option<String>,
    /// Working directory (absolute).
    pub work_dir: String,
    /// Environment of the replicas.
    pub environment: Vec<(String, String)>,
    /// Owner uid (must match the credential unless admin).
    pub uid: u32,
    /// Owner gid.
    pub gid: u32,
    /// Owner name.
    pub user: String,
}

/// A service as `sdeploy show|list` need it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ServiceInfo {
    /// Service id.
    pub id: u32,
    /// Name.
    pub name: String,
    /// Owner.
    pub user: String,
    /// Account.
    pub account: String,
    /// Partition.
    pub partition: String,
    /// GPUs per replica.
    pub gpus_per_replica: u32,
    /// GPU model, if required.
    pub gpu_type: Option<String>,
    /// Topology of one replica.
    pub topology: String,
    /// CPUs per replica.
    pub cpus_per_replica: u32,
    /// Memory per replica (MiB).
    pub mem_per_replica_mib: u64,
    /// Floor.
    pub min_replicas: u32,
    /// Ceiling.
    pub max_replicas: u32,
    /// Wanted (as last set).
    pub desired_replicas: u32,
    /// Running replicas.
    pub running_replicas: u32,
    /// Replicas waiting for resources.
    pub pending_replicas: u32,
    /// Priority.
    pub priority: u32,
    /// Command.
    pub command: String,
    /// Created (s since epoch).
    pub create_time: i64,
    /// Job ids of the running replicas.
    pub replica_ids: Vec<u64>,
    /// Nodes of the running replicas (hostlist).
    pub nodes: String,
}

/// An alert or page the scheduler raised (`scontrol show alerts`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AlertInfo {
    /// Sequence number.
    pub id: u64,
    /// When (s since epoch).
    pub time: i64,
    /// Kind (`ReservationCannotFill`, `PreemptionBudgetWarn`, `StorageDegraded`,
    /// `StorageRecovered`, `Page`).
    pub kind: String,
    /// Job concerned.
    pub job_id: Option<u64>,
    /// Service concerned.
    pub service_id: Option<u32>,
    /// Text.
    pub message: String,
}

/// When the controller's jobs, nodes, partitions and reservations last changed as its
/// queries show them (s since the epoch; Slurm's `last_job_update`, `last_node_update`,
/// `last_part_update`, `last_resv_update`). A client holding an answer taken at `t` may skip
/// a new one while the time is before `t` (Slurm's `update_time`: no change when
/// `update_time - 1 >= last_update`, `_slurm_rpc_dump_jobs`). The times may be later than the
/// change itself (never earlier): an answer is never called unchanged when it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UpdateTimes {
    /// Jobs: records, and what a scheduling cycle shows of pending jobs (reason, priority,
    /// expected start).
    pub jobs: i64,
    /// Nodes: state, reason, allocations.
    pub nodes: i64,
    /// Partitions: their nodes' changes included.
    pub partitions: i64,
    /// Reservations (Flotilla has none: the controller's start).
    pub reservations: i64,
}

impl UpdateTimes {
    /// Whether data last changed at `last` is unchanged for a client asking with
    /// `update_time` (Slurm's rule: `update_time - 1 >= last`).
    pub fn unchanged(last: i64, update_time: i64) -> bool {
        update_time.saturating_sub(1) >= last
    }
}

/// sdiag-like counters.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Stats {
    /// Controller start (s since epoch).
    pub started_at: i64,
    /// Now.
    pub now: i64,
    /// Scheduling cycles run.
    pub cycles: u64,
    /// Last cycle (µs).
    pub last_cycle_us: u64,
    /// Mean cycle (µs).
    pub mean_cycle_us: u64,
    /// Longest cycle (µs).
    pub max_cycle_us: u64,
    /// Jobs submitted (accepted).
    pub jobs_submitted: u64,
    /// Jobs started.
    pub jobs_started: u64,
    /// Jobs completed.
    pub jobs_completed: u64,
    /// Jobs failed (incl. timeout, node fail, OOM).
    pub jobs_failed: u64,
    /// Jobs cancelled.
    pub jobs_cancelled: u64,
    /// Jobs requeued.
    pub jobs_requeued: u64,
    /// Jobs pending now.
    pub jobs_pending: u64,
    /// Jobs running now.
    pub jobs_running: u64,
    /// Database commits.
    pub db_commits: u64,
    /// Mean commit time (µs).
    pub mean_commit_us: u64,
    /// Mean events per commit (group commit).
    pub mean_batch: u64,
    /// RPCs by type.
    pub rpc_counts: Vec<(String, u64)>,
    /// Requests refused by authentication.
    pub auth_failures: u64,
    /// Node daemons connected.
    pub nodes_connected: u32,
}

/// `scontrol update NodeName=... State=... Reason=...` (root or `SlurmUser` only).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UpdateNode {
    /// Nodes, expanded.
    pub names: Vec<String>,
    /// `State=`: `DRAIN`, `FAIL`, `RESUME`, `DOWN`, `IDLE` (any case).
    pub state: Option<String>,
    /// `Reason=`.
    pub reason: Option<String>,
    /// `AvailableFeatures=`/`Features=` (appended): comma-separated; empty clears.
    pub features: Option<String>,
    /// `ActiveFeatures=` (appended): comma-separated, a subset of the available ones.
    pub features_act: Option<String>,
}

/// Requests. Append-only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// `sbatch`.
    SubmitJob(Box<SubmitJob>),
    /// `scancel`.
    CancelJob(CancelJob),
    /// `scontrol hold|uhold|release`.
    HoldRelease(HoldRelease),
    /// `scontrol requeue|requeuehold`.
    Requeue(RequeueJob),
    /// `scontrol update job`.
    UpdateJob(UpdateJob),
    /// `squeue`, `scontrol show job`.
    QueryJobs(JobQuery),
    /// `sinfo`, `scontrol show node`.
    QueryNodes(NodeQuery),
    /// `scontrol show partition`.
    QueryPartitions,
    /// `sdiag`.
    Stats,
    /// Ask a local daemon (sackd, slurmd, the controller's Unix socket) for a credential for
    /// the peer's uid.
    IssueCredential,
    /// A node daemon registers; the connection becomes its node session.
    Register(Register),
    /// Liveness check.
    Ping,
    /// `scontrol update NodeName=`.
    UpdateNode(UpdateNode),
    /// `srun`: create a step of a running job.
    CreateStep(Box<StepRequest>),
    /// `srun`: a step ended.
    StepComplete(StepComplete),
    /// `squeue -s`: running steps of the jobs the query selects.
    QuerySteps(JobQuery),
    /// `salloc`/`srun`: an interactive allocation is given back.
    ReleaseAllocation(ReleaseAllocation),
    /// `sdeploy create`.
    ServiceCreate(Box<ServiceCreate>),
    /// `sdeploy scale ID --replicas N`: the autoscaler's only verb.
    ServiceScale {
        /// Service id.
        id: u32,
        /// Desired replicas.
        replicas: u32,
    },
    /// `sdeploy delete ID`: its replicas are stopped.
    ServiceDelete {
        /// Service id.
        id: u32,
    },
    /// `sdeploy show|list` (empty: all).
    QueryServices {
        /// Service ids.
        ids: Vec<u32>,
    },
    /// `scontrol show alerts`.
    QueryAlerts,
    /// `sacct`: accounting records (see [`crate::acct`]).
    QueryAcct(crate::acct::AcctQuery),
    /// `squeue`: jobs, only the fields asked for.
    QueryQueue(crate::jobview::QueueQuery),
    /// How many turns of its owner loop and scheduling cycles the controller has completed
    /// since it started (answered with [`Response::Turns`]); tests wait on it instead of
    /// sleeping.
    QueryTurns,
    /// `sdiag`: the statistics of Slurm's `sdiag` and Flotilla's section
    /// ([`crate::diag`]), answered with [`Response::Diag`].
    Diag,
    /// `sdiag --reset`: the statistics start again (root and `SlurmUser` only; others get
    /// `ESLURM_ACCESS_DENIED`), answered with [`Response::Diag`].
    DiagReset,
    /// `sacctmgr show|list`: the accounting database's rows ([`Response::AcctMgrData`]).
    AcctMgrShow,
    /// `sacctmgr add|modify|delete` ([`Response::AcctMgrOutcome`]); admins only.
    AcctMgrChange(crate::acctmgr::AcctMgrChange),
    /// `sshare`: fair share of the associations.
    QueryShares(crate::share::ShareQuery),
    /// `sprio`: priority factors of pending jobs.
    QueryPriorities(crate::share::PrioQuery),
    /// `scontrol token [username=] [lifespan=]`: a JSON Web Token ([`Response::Token`]),
    /// Slurm's `REQUEST_AUTH_TOKEN`. Refused on a token-authenticated connection.
    IssueToken {
        /// The user the token is for; `None`: the caller. Another user's token is issued to
        /// root and `SlurmUser` only.
        username: Option<String>,
        /// Seconds the token is valid; 0: the default (1800 s, capped by
        /// `max_token_lifespan=`).
        lifespan: i64,
    },
    /// When jobs, nodes, partitions and reservations last changed ([`Response::UpdateTimes`]):
    /// slurmrestd's `update_time` queries.
    QueryUpdateTimes,
    /// How long the controller's recent scheduling turns took (`flotilla bench scale`).
    /// Answered with [`Response::TurnTimes`].
    QueryTurnTimes,
    /// `sbatch --elastic`: a batch job that grows and shrinks between a minimum and a maximum
    /// (Flotilla). Its own variant, as `SubmitJob` cannot change (postcard).
    SubmitElastic(Box<SubmitElastic>),
    /// `scontrol show job`: the elastic range and resize history of these jobs (those the
    /// caller may see that are elastic or were resized), answered with [`Response::Elastic`].
    QueryElastic {
        /// Job ids.
        job_ids: Vec<u64>,
    },
    /// `scontrol takeover`: a standby controller takes the leader lease now, without waiting
    /// for it to lapse (Slurm's `REQUEST_TAKEOVER`); the old leader's next write finds the
    /// lease lost and it steps down. Root and `SlurmUser` only. [`Response::Done`].
    Takeover,
    /// `sinfo --largest` / `-O LargestReclaimable` and the metrics: per partition, the GPUs
    /// elastic jobs hold above their minimum and what would be placeable if that growth were
    /// taken back (Flotilla). [`Response::Reclaimable`]. Its own variant, as `PartitionInfo`
    /// cannot change (postcard).
    QueryReclaimable,
    /// `scontrol requeue|requeuehold State=SpecialExit JOB` (Slurm's `slurm_requeue2` with
    /// `JOB_SPECIAL_EXIT` in its flags): [`Request::Requeue`], and the job, pending again, is
    /// held in the `SPECIAL_EXIT` state until released. Its own variant, as `RequeueJob`
    /// cannot change (postcard). Answered as `Requeue` is.
    RequeueSpecialExit(RequeueJob),
    /// `scontrol update PartitionName= State=` (root or `SlurmUser` only). Answered
    /// `JobResults` (empty) or `Error`.
    UpdatePartition(UpdatePartition),
    /// The partitions' `State=` words (`DRAIN`, `INACTIVE` beside `UP`, `DOWN`), one per
    /// partition the caller may see, in slurm.conf order: [`Response::PartitionStates`].
    /// Asked after [`Request::QueryPartitions`] when one is not up (its `up` is false), as
    /// `PartitionInfo` cannot change (postcard).
    QueryPartitionStates,
    /// [`Request::QueryQueue`] answered in parts as the controller encodes them, so that
    /// `squeue` reads and prints the first jobs while the controller encodes the rest: zero or
    /// more [`Response::QueuePart`] frames, then one [`Response::Queue`] with the last jobs
    /// (or an `Error`), all with the request's id. The jobs, read part after part, are those
    /// `QueryQueue` answers in one frame, in the same order.
    QueryQueueParts(crate::QueueQuery),
    /// `scancel JOB.STEP` (Slurm's `slurm_kill_job_step`, `REQUEST_CANCEL_JOB_STEP`): the
    /// signal (`None`: SIGKILL, the step cancelled) to the tasks of one running step of a
    /// running job; the job goes on. [`Response::JobResults`] with one result, or `Error`.
    SignalStep(SignalStep),
}

/// [`Request::SignalStep`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalStep {
    /// The job (an array task by its array id and task).
    pub job: JobRef,
    /// The step.
    pub step_id: u32,
    /// `scancel -s`: this signal; `None` cancels the step (SIGKILL).
    pub signal: Option<i32>,
    /// scancel's filters (appended; `-u`, `-n`, `-t`, `-p`, `-A`, `-w`): a job they leave out
    /// is passed over without a word (Slurm 22.05 scancel.c `_filter_job_records` before
    /// `_cancel_step_id`), answered with no result; empty: no filter.
    #[serde(default)]
    pub filter: JobFilter,
}

/// `scontrol update PartitionName=... State=... MaxTime=... DefaultTime=...`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UpdatePartition {
    /// The partition.
    pub name: String,
    /// `State=`: `UP`, `DOWN`, `DRAIN` or `INACTIVE`.
    pub state: Option<String>,
    /// `MaxTime=` (appended): minutes, or `UNLIMITED`.
    pub max_time: Option<TimeLimitWire>,
    /// `DefaultTime=` (appended): minutes, or `UNLIMITED`; the controller ignores one above
    /// the partition's `MaxTime` (after this update's).
    pub default_time: Option<TimeLimitWire>,
}

/// One partition's `State=` as [`Request::QueryPartitionStates`] answers it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PartitionStateInfo {
    /// Partition name.
    pub name: String,
    /// `UP`, `DOWN`, `DRAIN` or `INACTIVE`.
    pub state: String,
}

/// One partition's elastic growth as [`Request::QueryReclaimable`] answers it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PartitionReclaim {
    /// Partition name.
    pub name: String,
    /// GPUs that running elastic jobs hold above their minimum on the partition's nodes (the
    /// grown parts not already being given back): what the scheduler takes back, newest
    /// first, before it preempts any whole job.
    pub grown_gpus: u32,
    /// The largest GPU request that could start inside one node, one pod and anywhere if
    /// every grown part were taken back (equal to `PartitionInfo::largest_placeable` when
    /// nothing is grown).
    pub largest_if_reclaimed: LargestPlaceableWire,
}

/// An elastic job's range and membership changes, for `scontrol show job`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ElasticInfo {
    /// Job id.
    pub job_id: u64,
    /// `nodes` or `gpus`; empty for a rigid job resized by `scontrol update NumNodes=`.
    pub unit: String,
    /// Smallest size.
    pub min: u32,
    /// Largest size.
    pub max: u32,
    /// Growth step.
    pub step: u32,
    /// `--elastic-signal` number.
    pub signal: Option<i32>,
    /// Nodes of the grown part (hostlist; empty: none).
    pub grown_nodes: String,
    /// Membership changes of the current run, oldest first.
    pub resizes: Vec<ResizeInfo>,
}

/// One membership change ([`ElasticInfo::resizes`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ResizeInfo {
    /// When (s since epoch).
    pub time: i64,
    /// `grow`, `shrink` or `lost`.
    pub change: String,
    /// The nodes that joined or left (hostlist).
    pub nodes: String,
    /// The job's node count after it.
    pub num_nodes: u32,
}

/// An elastic submission: the job as `sbatch` builds it, and its elastic range.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SubmitElastic {
    /// The job; `-N MIN-MAX` (`nodes_min`, `nodes_max`) is its node range, or `--gpus=MIN`
    /// (`gpus`) the minimum of a GPU-granular one.
    pub job: SubmitJob,
    /// What `--elastic` adds.
    pub elastic: ElasticRequest,
}

/// `sbatch --elastic`'s options beyond the job's.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ElasticRequest {
    /// `--gpus=MIN-MAX`: MAX, for a GPU-granular job (the job's `gpus` is MIN); `None`: the job
    /// is node-granular (`-N MIN-MAX`).
    pub gpus_max: Option<u32>,
    /// `--elastic-step=K` (nodes, or GPUs for a GPU-granular job); `None`: 1.
    pub step: Option<u32>,
    /// `--elastic-signal=SIG`: the signal number sent to the job's tasks on each membership
    /// change; `None`: none.
    pub signal: Option<i32>,
}

impl Request {
    /// The request's type name (RPC statistics, logs).
    pub fn kind(&self) -> &'static str {
        match self {
            Request::SubmitJob(_) | Request::SubmitElastic(_) => "REQUEST_SUBMIT_BATCH_JOB",
            Request::QueryElastic { .. } => "REQUEST_ELASTIC_INFO",
            Request::CancelJob(_) => "REQUEST_KILL_JOB",
            Request::HoldRelease(_) => "REQUEST_HOLD_RELEASE",
            Request::Requeue(_) => "REQUEST_JOB_REQUEUE",
            Request::UpdateJob(_) => "REQUEST_UPDATE_JOB",
            Request::QueryJobs(_) => "REQUEST_JOB_INFO",
            Request::QueryNodes(_) => "REQUEST_NODE_INFO",
            Request::QueryPartitions => "REQUEST_PARTITION_INFO",
            Request::Stats => "REQUEST_STATS_INFO",
            Request::IssueCredential => "REQUEST_CREDENTIAL",
            Request::Register(_) => "MESSAGE_NODE_REGISTRATION_STATUS",
            Request::Ping => "REQUEST_PING",
            Request::UpdateNode(_) => "REQUEST_UPDATE_NODE",
            Request::CreateStep(_) => "REQUEST_JOB_STEP_CREATE",
            Request::StepComplete(_) => "REQUEST_STEP_COMPLETE",
            Request::QuerySteps(_) => "REQUEST_JOB_STEP_INFO",
            Request::ReleaseAllocation(_) => "REQUEST_COMPLETE_JOB_ALLOCATION",
            Request::ServiceCreate(_) => "REQUEST_SERVICE_CREATE",
            Request::ServiceScale { .. } => "REQUEST_SERVICE_SCALE",
            Request::ServiceDelete { .. } => "REQUEST_SERVICE_DELETE",
            Request::QueryServices { .. } => "REQUEST_SERVICE_INFO",
            Request::QueryAlerts => "REQUEST_ALERT_INFO",
            Request::QueryAcct(_) => "DBD_GET_JOBS_COND",
            Request::QueryQueue(_) => "REQUEST_JOB_INFO",
            Request::QueryTurns => "REQUEST_TURNS",
            Request::Diag | Request::DiagReset => "REQUEST_STATS_INFO",
            Request::AcctMgrShow => "DBD_GET_ASSOCS",
            Request::AcctMgrChange(_) => "DBD_MODIFY_ASSOCS",
            Request::QueryShares(_) => "REQUEST_SHARE_INFO",
            Request::QueryPriorities(_) => "REQUEST_PRIORITY_FACTORS",
            Request::IssueToken { .. } => "REQUEST_AUTH_TOKEN",
            Request::QueryUpdateTimes => "REQUEST_UPDATE_TIMES",
            Request::QueryTurnTimes => "REQUEST_TURNS",
            Request::Takeover => "REQUEST_TAKEOVER",
            Request::QueryReclaimable => "REQUEST_RECLAIMABLE_INFO",
            Request::RequeueSpecialExit(_) => "REQUEST_JOB_REQUEUE",
            Request::UpdatePartition(_) => "REQUEST_UPDATE_PARTITION",
            Request::QueryPartitionStates => "REQUEST_PARTITION_INFO",
            Request::QueryQueueParts(_) => "REQUEST_JOB_INFO",
            Request::SignalStep(_) => "REQUEST_CANCEL_JOB_STEP",
        }
    }
}

/// Responses. Append-only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Response {
    /// Job accepted.
    Submitted(Submitted),
    /// `--test-only` answer.
    TestOnly(TestOnly),
    /// The request failed as a whole.
    Error(SlurmError),
    /// Per-job results.
    JobResults(Vec<JobResult>),
    /// Jobs.
    Jobs(Vec<JobInfo>),
    /// Nodes.
    Nodes(Vec<NodeInfo>),
    /// Partitions.
    Partitions(Vec<PartitionInfo>),
    /// Statistics.
    Stats(Stats),
    /// A credential for the peer.
    Credential(Credential),
    /// Node registration accepted; node-session frames follow.
    Registered,
    /// Answer to `Ping`.
    Pong,
    /// A step was created: its layout.
    StepCreated(StepLayout),
    /// Steps (`squeue -s`).
    Steps(Vec<StepInfo>),
    /// A service was created.
    ServiceCreated {
        /// Its id.
        id: u32,
    },
    /// Services.
    Services(Vec<ServiceInfo>),
    /// Alerts and pages, oldest first.
    Alerts(Vec<AlertInfo>),
    /// Accounting records (`sacct`).
    Acct(Vec<crate::acct::AcctJob>),
    /// Jobs, the fields a `QueryQueue` asked for.
    Queue(crate::jobview::QueueRows),
    /// Answer to [`Request::QueryTurns`], computed while the turn that handles the request
    /// runs, before that turn's scheduling cycle (if any) and commit.
    Turns {
        /// Turns of the owner loop completed since start. One turn handles a batch of events,
        /// runs the due timers and, when one is due, a scheduling cycle, then commits the batch
        /// and sends its replies and node messages. The turn answering this request is not
        /// counted: an answer `turns = t` followed by another with `turns > t` means a whole
        /// turn, commit included, ran after the first request was handled.
        turns: u64,
        /// Scheduling cycles completed since start (the `cycles` of `sdiag`). An answer
        /// `cycles = c` followed by another with `cycles > c` means a cycle ran, and the turn
        /// holding it was committed, after the first request was handled.
        cycles: u64,
        /// A scheduling cycle is due: an event handled since the last cycle asked for one
        /// (it runs within the debounce interval, `cycles` then grows). False: every cycle
        /// asked for so far has run (the periodic one comes every `--sched-interval-ms`).
        cycle_due: bool,
    },
    /// Answer to [`Request::Diag`] and [`Request::DiagReset`].
    Diag(Box<crate::diag::Diag>),
    /// The accounting database (`sacctmgr show`).
    AcctMgrData(crate::acctmgr::AcctData),
    /// What a `sacctmgr` change did or would do.
    AcctMgrOutcome(crate::acctmgr::AcctMgrOutcome),
    /// `sshare`'s rows.
    Shares(Vec<crate::share::ShareRow>),
    /// `sprio`'s answer.
    Priorities(crate::share::PrioReply),
    /// Answer to [`Request::IssueToken`]: the token (compact JWS); `None` when the controller
    /// has no `auth/jwt` key (Slurm answers a token request without a token then).
    Token(Option<String>),
    /// Answer to [`Request::QueryUpdateTimes`].
    UpdateTimes(UpdateTimes),
    /// Answer to [`Request::QueryTurnTimes`]: the durations (µs) of the controller's most
    /// recent turns that ran a scheduling cycle (at most 4,096, oldest first), each from its
    /// first event handled to its commit done and its replies and node messages sent, and
    /// the cycles run since the controller started.
    TurnTimes {
        /// Durations, µs, oldest first.
        turns_us: Vec<u64>,
        /// Scheduling cycles since start (the last `turns_us.len()` of them are listed).
        cycles: u64,
    },
    /// Answer to [`Request::QueryElastic`].
    Elastic(Vec<ElasticInfo>),
    /// Success of a request that answers nothing else (Slurm's `RESPONSE_SLURM_RC` with
    /// `SLURM_SUCCESS`): [`Request::Takeover`].
    Done,
    /// Answer to [`Request::QueryReclaimable`]: one entry per partition, in slurm.conf order.
    Reclaimable(Vec<PartitionReclaim>),
    /// Answer to [`Request::QueryPartitionStates`].
    PartitionStates(Vec<PartitionStateInfo>),
    /// Some jobs of the answer to [`Request::QueryQueueParts`]: more follow in the next frame
    /// with the same id (the last as a [`Response::Queue`]).
    QueuePart(crate::QueueRows),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The service, alert and partition additions round-trip, and were appended: the
    /// variants that existed keep their index on the wire (postcard encodes it first).
    #[test]
    fn service_messages_round_trip_and_are_appended() {
        let reqs = [
            Request::ServiceCreate(Box::new(ServiceCreate {
                name: "llm".into(),
                command: "serve".into(),
                gpus_per_replica: 4,
                min_replicas: 1,
                max_replicas: 3,
                ..ServiceCreate::default()
            })),
            Request::ServiceScale { id: 1, replicas: 2 },
            Request::ServiceDelete { id: 1 },
            Request::QueryServices { ids: vec![1, 2] },
            Request::QueryAlerts,
        ];
        for (i, r) in reqs.iter().enumerate() {
            let bytes = postcard::to_allocvec(r).unwrap();
            assert_eq!(bytes[0] as usize, 17 + i, "{r:?} appended after UpdateNode and the step requests");
            assert_eq!(&postcard::from_bytes::<Request>(&bytes).unwrap(), r);
        }
        assert_eq!(postcard::to_allocvec(&Request::Ping).unwrap()[0], 11);
        let resps = [
            Response::ServiceCreated { id: 3 },
            Response::Services(vec![ServiceInfo { id: 3, replica_ids: vec![5003], ..ServiceInfo::default() }]),
            Response::Alerts(vec![AlertInfo { id: 1, kind: "Page".into(), service_id: Some(3), ..AlertInfo::default() }]),
            Response::Partitions(vec![PartitionInfo {
                name: "batch".into(),
                largest_placeable: Some(LargestPlaceableWire { node: 8, pod: 16, any: 24 }),
                ..PartitionInfo::default()
            }]),
        ];
        for (i, r) in resps.iter().enumerate() {
            let bytes = postcard::to_allocvec(r).unwrap();
            if i < 3 {
                assert_eq!(bytes[0] as usize, 13 + i, "{r:?} appended after Pong and the step responses");
            }
            assert_eq!(&postcard::from_bytes::<Response>(&bytes).unwrap(), r);
        }
    }

    /// `QueryTurns` and `Turns` were appended: the variants before them keep their index.
    #[test]
    fn turn_messages_round_trip_and_are_appended() {
        let req = postcard::to_allocvec(&Request::QueryTurns).unwrap();
        assert_eq!(req[0], 24, "QueryTurns is the 25th request, after QueryQueue");
        assert_eq!(postcard::from_bytes::<Request>(&req).unwrap(), Request::QueryTurns);
        let q = postcard::to_allocvec(&Request::QueryQueue(crate::jobview::QueueQuery::default())).unwrap();
        assert_eq!(q[0], 23);
        let resp = Response::Turns { turns: 1 << 40, cycles: 7, cycle_due: true };
        let bytes = postcard::to_allocvec(&resp).unwrap();
        assert_eq!(bytes[0], 18, "Turns is the 19th response, after Queue");
        assert_eq!(postcard::from_bytes::<Response>(&bytes).unwrap(), resp);
    }

    /// `QueryUpdateTimes` and `UpdateTimes` were appended after the token messages.
    #[test]
    fn update_time_messages_round_trip_and_are_appended() {
        let req = postcard::to_allocvec(&Request::QueryUpdateTimes).unwrap();
        let token = postcard::to_allocvec(&Request::IssueToken { username: None, lifespan: 0 }).unwrap();
        assert_eq!(req[0], token[0] + 1);
        assert_eq!(postcard::from_bytes::<Request>(&req).unwrap(), Request::QueryUpdateTimes);
        let resp = Response::UpdateTimes(UpdateTimes { jobs: 5, nodes: 4, partitions: 4, reservations: 1 });
        let bytes = postcard::to_allocvec(&resp).unwrap();
        assert_eq!(bytes[0], postcard::to_allocvec(&Response::Token(None)).unwrap()[0] + 1);
        assert_eq!(postcard::from_bytes::<Response>(&bytes).unwrap(), resp);
        // Slurm's rule: a change in the second asked about counts as a change.
        assert!(UpdateTimes::unchanged(100, 101) && !UpdateTimes::unchanged(100, 100));
    }

    /// `QueryTurnTimes` and `TurnTimes` were appended after `QueryUpdateTimes` and `UpdateTimes`.
    #[test]
    fn turn_time_messages_are_appended() {
        let req = postcard::to_allocvec(&Request::QueryTurnTimes).unwrap();
        let before = postcard::to_allocvec(&Request::QueryUpdateTimes).unwrap();
        assert_eq!(req[0], before[0] + 1);
        let resp = Response::TurnTimes { turns_us: vec![1, 250_000], cycles: 9 };
        let bytes = postcard::to_allocvec(&resp).unwrap();
        assert_eq!(bytes[0], postcard::to_allocvec(&Response::UpdateTimes(UpdateTimes::default())).unwrap()[0] + 1);
        assert_eq!(postcard::from_bytes::<Response>(&bytes).unwrap(), resp);
    }

    /// The elastic messages were appended: every variant before them keeps its index.
    #[test]
    fn elastic_messages_round_trip_and_are_appended() {
        let token = postcard::to_allocvec(&Request::QueryTurnTimes).unwrap()[0];
        let sub = Request::SubmitElastic(Box::new(SubmitElastic {
            job: SubmitJob { nodes_min: Some(2), nodes_max: Some(8), ..SubmitJob::default() },
            elastic: ElasticRequest { gpus_max: None, step: Some(2), signal: Some(10) },
        }));
        let q = Request::QueryElastic { job_ids: vec![7] };
        for (i, r) in [sub, q].iter().enumerate() {
            let bytes = postcard::to_allocvec(r).unwrap();
            assert_eq!(bytes[0], token + 1 + i as u8, "{r:?} appended after QueryTurnTimes");
            assert_eq!(&postcard::from_bytes::<Request>(&bytes).unwrap(), r);
        }
        let last = postcard::to_allocvec(&Response::TurnTimes { turns_us: Vec::new(), cycles: 0 }).unwrap()[0];
        let resp = Response::Elastic(vec![ElasticInfo {
            job_id: 7,
            unit: "nodes".into(),
            min: 2,
            max: 8,
            step: 1,
            signal: None,
            grown_nodes: "gpu[03-04]".into(),
            resizes: vec![ResizeInfo { time: 5, change: "grow".into(), nodes: "gpu[03-04]".into(), num_nodes: 4 }],
        }]);
        let bytes = postcard::to_allocvec(&resp).unwrap();
        assert_eq!(bytes[0], last + 1, "Elastic appended after TurnTimes");
        assert_eq!(postcard::from_bytes::<Response>(&bytes).unwrap(), resp);
    }

    /// `Takeover` and `Done` were appended after the elastic messages.
    #[test]
    fn takeover_messages_are_appended() {
        let before = postcard::to_allocvec(&Request::QueryElastic { job_ids: Vec::new() }).unwrap()[0];
        let bytes = postcard::to_allocvec(&Request::Takeover).unwrap();
        assert_eq!(bytes[0], before + 1);
        assert_eq!(postcard::from_bytes::<Request>(&bytes).unwrap(), Request::Takeover);
        let before = postcard::to_allocvec(&Response::Elastic(Vec::new())).unwrap()[0];
        let bytes = postcard::to_allocvec(&Response::Done).unwrap();
        assert_eq!(bytes[0], before + 1);
        assert_eq!(postcard::from_bytes::<Response>(&bytes).unwrap(), Response::Done);
    }

    /// `CtlToNode::Keepalive` was appended after `Membership`; the older messages are encoded
    /// as before.
    #[test]
    fn keepalive_is_appended() {
        let membership = CtlToNode::Membership { job_id: 1, nodes: "a".into() };
        let before = postcard::to_allocvec(&membership).unwrap()[0];
        assert_eq!(before, 8, "Membership is the ninth node message");
        let bytes = postcard::to_allocvec(&CtlToNode::Keepalive).unwrap();
        assert_eq!(bytes, vec![before + 1]);
        assert_eq!(postcard::from_bytes::<CtlToNode>(&bytes).unwrap(), CtlToNode::Keepalive);
    }

    /// `QueryReclaimable` and `Reclaimable` were appended after `Takeover` and `Done`.
    /// `RequeueSpecialExit` follows `QueryReclaimable`, `SpecialExit` follows `Deadline`; the
    /// older variants are encoded as before.
    /// `QueryQueueParts` follows `QueryPartitionStates`, `QueuePart` follows `PartitionStates`.
    #[test]
    fn queue_part_messages_are_appended() {
        let before = postcard::to_allocvec(&Request::QueryPartitionStates).unwrap()[0];
        let req = Request::QueryQueueParts(crate::QueueQuery { query: JobQuery::default(), fields: vec![crate::JobField::JobId] });
        let bytes = postcard::to_allocvec(&req).unwrap();
        assert_eq!(bytes[0], before + 1);
        assert_eq!(postcard::from_bytes::<Request>(&bytes).unwrap(), req);
        let before = postcard::to_allocvec(&Response::PartitionStates(vec![])).unwrap()[0];
        let resp = Response::QueuePart(crate::QueueRows { count: 1, bytes: vec![7] });
        let bytes = postcard::to_allocvec(&resp).unwrap();
        assert_eq!(bytes[0], before + 1);
        assert_eq!(postcard::from_bytes::<Response>(&bytes).unwrap(), resp);
    }

    #[test]
    fn special_exit_variants_are_appended() {
        let before = postcard::to_allocvec(&Request::QueryReclaimable).unwrap()[0];
        let req = Request::RequeueSpecialExit(RequeueJob { jobs: vec![JobRef { job_id: 7, tasks: None }], hold: true });
        let bytes = postcard::to_allocvec(&req).unwrap();
        assert_eq!(bytes[0], before + 1);
        assert_eq!(postcard::from_bytes::<Request>(&bytes).unwrap(), req);
        let deadline = postcard::to_allocvec(&JobStateWire::Deadline).unwrap()[0];
        assert_eq!(postcard::to_allocvec(&JobStateWire::SpecialExit).unwrap(), vec![deadline + 1]);
        assert!(JobStateWire::SpecialExit.is_pending() && !JobStateWire::SpecialExit.is_finished());
    }

    /// `UpdatePartition` and `QueryPartitionStates` follow `RequeueSpecialExit`,
    /// `PartitionStates` follows `Reclaimable`.
    #[test]
    fn partition_state_messages_are_appended() {
        let req = Request::RequeueSpecialExit(RequeueJob { jobs: vec![], hold: false });
        let before = postcard::to_allocvec(&req).unwrap()[0];
        let up = Request::UpdatePartition(UpdatePartition { name: "debug".into(), state: Some("DRAIN".into()), ..UpdatePartition::default() });
        let bytes = postcard::to_allocvec(&up).unwrap();
        assert_eq!(bytes[0], before + 1);
        assert_eq!(postcard::from_bytes::<Request>(&bytes).unwrap(), up);
        assert_eq!(postcard::to_allocvec(&Request::QueryPartitionStates).unwrap(), vec![before + 2]);
        // The times are appended to the update: the state's bytes come first, unchanged.
        let times = Request::UpdatePartition(UpdatePartition {
            max_time: Some(TimeLimitWire::Minutes(10)),
            default_time: Some(TimeLimitWire::Unlimited),
            ..match &up { Request::UpdatePartition(u) => u.clone(), _ => unreachable!() }
        });
        let longer = postcard::to_allocvec(&times).unwrap();
        assert_eq!(&longer[..bytes.len() - 2], &bytes[..bytes.len() - 2]);
        assert_eq!(postcard::from_bytes::<Request>(&longer).unwrap(), times);
        let before = postcard::to_allocvec(&Response::Reclaimable(vec![])).unwrap()[0];
        let resp = Response::PartitionStates(vec![PartitionStateInfo { name: "debug".into(), state: "DRAIN".into() }]);
        let bytes = postcard::to_allocvec(&resp).unwrap();
        assert_eq!(bytes[0], before + 1);
        assert_eq!(postcard::from_bytes::<Response>(&bytes).unwrap(), resp);
    }

    #[test]
    fn reclaimable_messages_round_trip_and_are_appended() {
        let before = postcard::to_allocvec(&Request::Takeover).unwrap()[0];
        let bytes = postcard::to_allocvec(&Request::QueryReclaimable).unwrap();
        assert_eq!(bytes[0], before + 1);
        assert_eq!(postcard::from_bytes::<Request>(&bytes).unwrap(), Request::QueryReclaimable);
        let before = postcard::to_allocvec(&Response::Done).unwrap()[0];
        let resp = Response::Reclaimable(vec![PartitionReclaim {
            name: "batch".into(),
            grown_gpus: 16,
            largest_if_reclaimed: LargestPlaceableWire { node: 8, pod: 16, any: 24 },
        }]);
        let bytes = postcard::to_allocvec(&resp).unwrap();
        assert_eq!(bytes[0], before + 1);
        assert_eq!(postcard::from_bytes::<Response>(&bytes).unwrap(), resp);
    }

    #[test]
    fn array_task_bounds() {
        assert_eq!(ArrayTasks::of(&[]), None);
        assert_eq!(ArrayTasks::of(&[0, 1]), Some(ArrayTasks { count: 2, min: 0, max: 1, step: 1 }));
        assert_eq!(ArrayTasks::of(&[1, 3]), Some(ArrayTasks { count: 2, min: 1, max: 3, step: 2 }));
        assert_eq!(ArrayTasks::of(&[7, 1, 3]), Some(ArrayTasks { count: 3, min: 1, max: 7, step: 1 }));
    }
}
