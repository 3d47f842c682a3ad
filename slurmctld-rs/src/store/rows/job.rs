//! Rows of the controller's job record: [`JobRow`] (a `jobs.record`) and the parts it owns
//! (state, stop in progress, accounting, the wire's array bounds and `--signal`). The core's
//! parts are in [`super::sched`].

use super::sched::{AllocationRow, JobSpecRow};
use crate::acct::AcctInfo;
use crate::job::{ElasticRecord, JobRecord, JobState, Resize, ResizeChange, StopWhy, Stopping};
use flotilla_core::job::JobSpec;
use flotilla_core::sched::{AllocId, Allocation, Growth};
use flotilla_proto::{ArrayTasks, NodeShape, SignalSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A value as it was before it was given (a row omits it).
fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn is_zero_i32(n: &i32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A `jobs.record`: the controller's [`JobRecord`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    /// Job id.
    #[serde(rename = "id")]
    pub id: u64,
    /// Array job id.
    #[serde(rename = "array_job_id")]
    pub array_job_id: Option<u64>,
    /// Task index of a started array task.
    #[serde(rename = "array_task_id")]
    pub array_task_id: Option<u32>,
    /// Tasks of the array not started yet.
    #[serde(rename = "array_pending")]
    pub array_pending: Vec<u32>,
    /// `%N` throttle of the array.
    #[serde(rename = "array_max_running")]
    pub array_max_running: Option<u32>,
    /// State.
    #[serde(rename = "state")]
    pub state: JobStateRow,
    /// A fixed pending reason.
    #[serde(rename = "reason")]
    pub reason: Option<String>,
    /// Job name.
    #[serde(rename = "name")]
    pub name: String,
    /// User name.
    #[serde(rename = "user")]
    pub user: String,
    /// Uid.
    #[serde(rename = "uid")]
    pub uid: u32,
    /// Gid.
    #[serde(rename = "gid")]
    pub gid: u32,
    /// Account.
    #[serde(rename = "account")]
    pub account: String,
    /// QOS.
    #[serde(rename = "qos")]
    pub qos: String,
    /// Partition name.
    #[serde(rename = "partition")]
    pub partition: String,
    /// Working directory.
    #[serde(rename = "work_dir")]
    pub work_dir: String,
    /// Stdout pattern.
    #[serde(rename = "stdout")]
    pub stdout: Option<String>,
    /// Stderr pattern.
    #[serde(rename = "stderr")]
    pub stderr: Option<String>,
    /// Script arguments.
    #[serde(rename = "argv")]
    pub argv: Vec<String>,
    /// `--comment`.
    #[serde(rename = "comment")]
    pub comment: Option<String>,
    /// Submit time (s since epoch).
    #[serde(rename = "submit_time")]
    pub submit_time: i64,
    /// Start of the current run (s since epoch).
    #[serde(rename = "start_time")]
    pub start_time: Option<i64>,
    /// End (s since epoch).
    #[serde(rename = "end_time")]
    pub end_time: Option<i64>,
    /// Time limit (minutes); `None`: unlimited.
    #[serde(rename = "time_limit_min")]
    pub time_limit_min: Option<u32>,
    /// Tasks.
    #[serde(rename = "ntasks")]
    pub ntasks: u32,
    /// CPUs per task.
    #[serde(rename = "cpus_per_task")]
    pub cpus_per_task: u32,
    /// Nodes requested.
    #[serde(rename = "num_nodes")]
    pub num_nodes: u32,
    /// GRES per node as requested: (name, type, count), a JSON array of three.
    #[serde(rename = "gres")]
    pub gres: Vec<(String, Option<String>, u64)>,
    /// `-d` as given.
    #[serde(rename = "dependency")]
    pub dependency: Option<String>,
    /// `--requeue`.
    #[serde(rename = "requeue")]
    pub requeue: bool,
    /// Times requeued.
    #[serde(rename = "restarts")]
    pub restarts: u32,
    /// The core's view of the job.
    #[serde(rename = "spec")]
    pub spec: JobSpecRow,
    /// Allocations of the current run.
    #[serde(rename = "allocs")]
    pub allocs: Vec<AllocationRow>,
    /// Node names of the current run.
    #[serde(rename = "nodes")]
    pub nodes: Vec<String>,
    /// Nodes still to confirm the job's processes are gone.
    #[serde(rename = "completing_nodes")]
    pub completing_nodes: Vec<String>,
    /// Final state decided when the job entered `COMPLETING`.
    #[serde(rename = "end_state")]
    pub end_state: Option<JobStateRow>,
    /// Exit code of the batch script.
    #[serde(rename = "exit_code")]
    pub exit_code: i32,
    /// Signal that ended it.
    #[serde(rename = "exit_signal")]
    pub exit_signal: i32,
    /// A stop in progress.
    #[serde(rename = "stopping")]
    pub stopping: Option<StoppingRow>,
    /// Topology as requested.
    #[serde(rename = "topology")]
    pub topology: String,
    /// `--exclusive`.
    #[serde(rename = "exclusive")]
    pub exclusive: bool,
    /// Memory per node (MiB).
    #[serde(rename = "mem_per_node_mib")]
    pub mem_per_node_mib: u64,
    /// Total GPUs.
    #[serde(rename = "gpus")]
    pub gpus: u32,
    /// `-w` node names.
    #[serde(rename = "required_nodes")]
    pub required_nodes: Vec<String>,
    /// `-x` node names.
    #[serde(rename = "excluded_nodes")]
    pub excluded_nodes: Vec<String>,
    /// Host submitted from (format 0 records may lack it: empty).
    #[serde(rename = "submit_host", default)]
    pub submit_host: String,
    /// Memory per CPU (MiB) when asked per CPU.
    #[serde(rename = "mem_per_cpu_mib", default)]
    pub mem_per_cpu_mib: Option<u64>,
    /// Bounds of the whole array.
    #[serde(rename = "array_tasks", default)]
    pub array_tasks: Option<ArrayTasksRow>,
    /// `--signal`.
    #[serde(rename = "signal", default)]
    pub signal: Option<SignalSpecRow>,
    /// The current run's `--signal` warning went to its steps.
    #[serde(rename = "warn_sent", default)]
    pub warn_sent: bool,
    /// Requeued with `State=SpecialExit`, not released (absent: false).
    #[serde(rename = "special_exit", default, skip_serializing_if = "is_false")]
    pub special_exit: bool,
    /// An interactive allocation (`salloc`).
    #[serde(rename = "interactive", default)]
    pub interactive: bool,
    /// Last checkpoint acknowledged (s since epoch).
    #[serde(rename = "last_checkpoint_ack", default)]
    pub last_checkpoint_ack: Option<i64>,
    /// Service this record is a replica of.
    #[serde(rename = "service", default)]
    pub service: Option<u32>,
    /// Accounting beyond the scheduling fields.
    #[serde(rename = "acct", default)]
    pub acct: AcctInfoRow,
    /// `Command=`.
    #[serde(rename = "command", default)]
    pub command: Option<String>,
    /// `TresPerJob=`.
    #[serde(rename = "tres_per_job", default)]
    pub tres_per_job: Option<String>,
    /// `TresPerTask=`.
    #[serde(rename = "tres_per_task", default)]
    pub tres_per_task: Option<String>,
    /// `TresPerNode=` as submitted.
    #[serde(rename = "tres_per_node", default, skip_serializing_if = "Option::is_none")]
    pub tres_per_node: Option<String>,
    /// `TresPerSocket=`.
    #[serde(rename = "tres_per_socket", default, skip_serializing_if = "Option::is_none")]
    pub tres_per_socket: Option<String>,
    /// Slurm's `max_nodes` (0: not bounded).
    #[serde(rename = "max_nodes", default, skip_serializing_if = "is_zero")]
    pub max_nodes: u32,
    /// `--sockets-per-node` (0: not given).
    #[serde(rename = "sockets_per_node", default, skip_serializing_if = "is_zero")]
    pub sockets_per_node: u32,
    /// `--mem=0` (absent when not).
    #[serde(rename = "mem_whole_node", default, skip_serializing_if = "is_false")]
    pub mem_whole_node: bool,
    /// Per-node options shown but not placed by (absent when none was given).
    #[serde(rename = "node_shape", default, skip_serializing_if = "is_default")]
    pub node_shape: NodeShape,
    /// `--mail-type` bits (absent when none).
    #[serde(rename = "mail_type", default, skip_serializing_if = "is_default")]
    pub mail_type: u16,
    /// `MailUser=` (absent when none).
    #[serde(rename = "mail_user", default, skip_serializing_if = "Option::is_none")]
    pub mail_user: Option<String>,
    /// Submission bit flags (absent when none).
    #[serde(rename = "job_flags", default, skip_serializing_if = "is_default")]
    pub job_flags: u16,
    /// `--time-min` in minutes (absent when none).
    #[serde(rename = "time_min", default, skip_serializing_if = "Option::is_none")]
    pub time_min: Option<u32>,
    /// `--deadline` (s since epoch; absent when none).
    #[serde(rename = "deadline", default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<i64>,
    /// CPUs in all an update's `MinCPUsNode=` asked for (absent when none).
    #[serde(rename = "min_cpus_set", default, skip_serializing_if = "Option::is_none")]
    pub min_cpus_set: Option<u32>,
    /// `--constraint` as kept (absent when not given).
    #[serde(rename = "features", default, skip_serializing_if = "Option::is_none")]
    pub features: Option<String>,
    /// Whether the submission set the task count (absent when not).
    #[serde(rename = "ntasks_given", default, skip_serializing_if = "is_false")]
    pub ntasks_given: bool,
    /// The cores the current run holds on each of its nodes (node name -> core indices);
    /// absent when none were picked (a record of an older controller).
    #[serde(rename = "cores", default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cores: BTreeMap<String, Vec<u32>>,
    /// An elastic job's signal, grown parts and resize history; absent for a rigid job.
    #[serde(rename = "elastic", default, skip_serializing_if = "Option::is_none")]
    pub elastic: Option<ElasticRecordRow>,
    /// `job_ptr->priority` (Slurm keeps it in its state file, `_dump_job_state`); absent
    /// while the controller has not numbered the job, and in records written before it was
    /// kept (the controller numbers those again at recovery).
    #[serde(rename = "priority", default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// An operator's `AdminComment=` (absent when none).
    #[serde(rename = "admin_comment", default, skip_serializing_if = "Option::is_none")]
    pub admin_comment: Option<String>,
    /// `DelayBoot=` in seconds (absent when never set).
    #[serde(rename = "delay_boot_s", default, skip_serializing_if = "Option::is_none")]
    pub delay_boot_s: Option<u32>,
}

/// [`ElasticRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElasticRecordRow {
    /// `--elastic-signal` number.
    #[serde(rename = "signal", default)]
    pub signal: Option<i32>,
    /// Grown parts: allocation ids, when (s), shrink deadline (s).
    #[serde(rename = "grown", default)]
    pub grown: Vec<GrowthRow>,
    /// Resize history.
    #[serde(rename = "resizes", default)]
    pub resizes: Vec<ResizeRow>,
}

/// [`flotilla_core::sched::Growth`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrowthRow {
    /// Allocation ids.
    #[serde(rename = "allocs")]
    pub allocs: Vec<u64>,
    /// When grown (s).
    #[serde(rename = "at")]
    pub at: u64,
    /// Shrink deadline (s), when shrinking.
    #[serde(rename = "shrinking", default)]
    pub shrinking: Option<u64>,
}

/// [`Resize`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResizeRow {
    /// When (s since epoch).
    #[serde(rename = "time")]
    pub time: i64,
    /// `grow`, `shrink` or `lost`.
    #[serde(rename = "change")]
    pub change: ResizeChangeRow,
    /// Nodes that joined or left.
    #[serde(rename = "nodes")]
    pub nodes: Vec<String>,
    /// Node count after.
    #[serde(rename = "num_nodes")]
    pub num_nodes: u32,
}

/// [`ResizeChange`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResizeChangeRow {
    /// Grown.
    #[serde(rename = "grow")]
    Grow,
    /// Shrunk.
    #[serde(rename = "shrink")]
    Shrink,
    /// Lost.
    #[serde(rename = "lost")]
    Lost,
}

impl From<&ElasticRecord> for ElasticRecordRow {
    fn from(e: &ElasticRecord) -> Self {
        let ElasticRecord { signal, grown, resizes } = e;
        ElasticRecordRow {
            signal: *signal,
            grown: grown
                .iter()
                .map(|g| {
                    let Growth { allocs, at, shrinking } = g;
                    GrowthRow { allocs: allocs.iter().map(|a| a.0).collect(), at: *at, shrinking: *shrinking }
                })
                .collect(),
            resizes: resizes
                .iter()
                .map(|r| {
                    let Resize { time, change, nodes, num_nodes } = r;
                    let change = match change {
                        ResizeChange::Grow => ResizeChangeRow::Grow,
                        ResizeChange::Shrink => ResizeChangeRow::Shrink,
                        ResizeChange::Lost => ResizeChangeRow::Lost,
                    };
                    ResizeRow { time: *time, change, nodes: nodes.clone(), num_nodes: *num_nodes }
                })
                .collect(),
        }
    }
}

impl From<ElasticRecordRow> for ElasticRecord {
    fn from(e: ElasticRecordRow) -> Self {
        let ElasticRecordRow { signal, grown, resizes } = e;
        ElasticRecord {
            signal,
            grown: grown
                .into_iter()
                .map(|g| {
                    let GrowthRow { allocs, at, shrinking } = g;
                    Growth { allocs: allocs.into_iter().map(AllocId).collect(), at, shrinking }
                })
                .collect(),
            resizes: resizes
                .into_iter()
                .map(|r| {
                    let ResizeRow { time, change, nodes, num_nodes } = r;
                    let change = match change {
                        ResizeChangeRow::Grow => ResizeChange::Grow,
                        ResizeChangeRow::Shrink => ResizeChange::Shrink,
                        ResizeChangeRow::Lost => ResizeChange::Lost,
                    };
                    Resize { time, change, nodes, num_nodes }
                })
                .collect(),
        }
    }
}

/// A job state, by its variant name (`"Pending"`, `"NodeFail"`; not Slurm's upper-case name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobStateRow {
    /// [`JobState::Pending`].
    #[serde(rename = "Pending")]
    Pending,
    /// [`JobState::Running`].
    #[serde(rename = "Running")]
    Running,
    /// [`JobState::Completing`].
    #[serde(rename = "Completing")]
    Completing,
    /// [`JobState::Completed`].
    #[serde(rename = "Completed")]
    Completed,
    /// [`JobState::Failed`].
    #[serde(rename = "Failed")]
    Failed,
    /// [`JobState::Cancelled`].
    #[serde(rename = "Cancelled")]
    Cancelled,
    /// [`JobState::Timeout`].
    #[serde(rename = "Timeout")]
    Timeout,
    /// [`JobState::Preempted`].
    #[serde(rename = "Preempted")]
    Preempted,
    /// [`JobState::NodeFail`].
    #[serde(rename = "NodeFail")]
    NodeFail,
    /// [`JobState::OutOfMemory`].
    #[serde(rename = "OutOfMemory")]
    OutOfMemory,
    /// [`JobState::Deadline`].
    #[serde(rename = "Deadline")]
    Deadline,
}

/// A stop in progress ([`Stopping`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoppingRow {
    /// Why.
    #[serde(rename = "why")]
    pub why: StopWhyRow,
    /// When SIGTERM went out (s since epoch).
    #[serde(rename = "term_at")]
    pub term_at: i64,
    /// SIGKILL sent.
    #[serde(rename = "kill_sent")]
    pub kill_sent: bool,
    /// SIGKILL deadline (s since epoch); format 0 records may lack it.
    #[serde(rename = "kill_at", default)]
    pub kill_at: Option<i64>,
}

/// Why a job is being stopped ([`StopWhy`]): `"Cancel"`, `"Timeout"`, `"Preempt"` or
/// `{"Requeue":{"hold":bool}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopWhyRow {
    /// `scancel`.
    #[serde(rename = "Cancel")]
    Cancel,
    /// Time limit.
    #[serde(rename = "Timeout")]
    Timeout,
    /// Preempted.
    #[serde(rename = "Preempt")]
    Preempt,
    /// `scontrol requeue[hold]`.
    #[serde(rename = "Requeue")]
    Requeue {
        /// `requeuehold`.
        #[serde(rename = "hold")]
        hold: bool,
    },
}

/// Accounting kept in the record ([`AcctInfo`]); every field of it is required once the
/// object is present, the object itself may be missing in format 0 (all zero then).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcctInfoRow {
    /// When the run became eligible (s since epoch).
    #[serde(rename = "eligible_time")]
    pub eligible_time: Option<i64>,
    /// Uid that cancelled the job.
    #[serde(rename = "cancelled_by")]
    pub cancelled_by: Option<u32>,
    /// Nodes of the last run.
    #[serde(rename = "alloc_nodes")]
    pub alloc_nodes: u32,
    /// CPUs of the last run.
    #[serde(rename = "alloc_cpus")]
    pub alloc_cpus: u32,
    /// Whole GPUs of the last run.
    #[serde(rename = "alloc_gpus")]
    pub alloc_gpus: u32,
    /// Memory of the last run (MiB).
    #[serde(rename = "alloc_mem_mib")]
    pub alloc_mem_mib: u64,
    /// CPUs on the batch host.
    #[serde(rename = "batch_cpus")]
    pub batch_cpus: u32,
    /// Whole GPUs on the batch host.
    #[serde(rename = "batch_gpus")]
    pub batch_gpus: u32,
    /// Memory on the batch host (MiB).
    #[serde(rename = "batch_mem_mib")]
    pub batch_mem_mib: u64,
    /// Derived exit code, a wait status (`status << 8` or the signal); absent: 0.
    #[serde(rename = "derived_ec", default, skip_serializing_if = "is_zero_i32")]
    pub derived_ec: i32,
    /// The derived exit code of the accounting record; absent: 0.
    #[serde(rename = "acct_derived_ec", default, skip_serializing_if = "is_zero_i32")]
    pub acct_derived_ec: i32,
    /// The last notable pending reason before the run (`sacct -o Reason`); absent: none.
    #[serde(rename = "reason_prev", default, skip_serializing_if = "Option::is_none")]
    pub reason_prev: Option<flotilla_core::sched::Reason>,
}

/// Array bounds (the wire's [`ArrayTasks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayTasksRow {
    /// Number of tasks.
    #[serde(rename = "count")]
    pub count: u32,
    /// Lowest index.
    #[serde(rename = "min")]
    pub min: u32,
    /// Highest index.
    #[serde(rename = "max")]
    pub max: u32,
    /// Step between indices.
    #[serde(rename = "step")]
    pub step: u32,
}

/// `--signal` (the wire's [`SignalSpec`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalSpecRow {
    /// Signal number.
    #[serde(rename = "signal")]
    pub signal: i32,
    /// Seconds before the time limit.
    #[serde(rename = "secs_before")]
    pub secs_before: u32,
    /// `B:`: the batch shell only.
    #[serde(rename = "batch_only")]
    pub batch_only: bool,
}

impl From<JobState> for JobStateRow {
    fn from(s: JobState) -> Self {
        match s {
            JobState::Pending => JobStateRow::Pending,
            JobState::Running => JobStateRow::Running,
            JobState::Completing => JobStateRow::Completing,
            JobState::Completed => JobStateRow::Completed,
            JobState::Failed => JobStateRow::Failed,
            JobState::Cancelled => JobStateRow::Cancelled,
            JobState::Timeout => JobStateRow::Timeout,
            JobState::Preempted => JobStateRow::Preempted,
            JobState::NodeFail => JobStateRow::NodeFail,
            JobState::OutOfMemory => JobStateRow::OutOfMemory,
            JobState::Deadline => JobStateRow::Deadline,
        }
    }
}

impl From<JobStateRow> for JobState {
    fn from(s: JobStateRow) -> Self {
        match s {
            JobStateRow::Pending => JobState::Pending,
            JobStateRow::Running => JobState::Running,
            JobStateRow::Completing => JobState::Completing,
            JobStateRow::Completed => JobState::Completed,
            JobStateRow::Failed => JobState::Failed,
            JobStateRow::Cancelled => JobState::Cancelled,
            JobStateRow::Timeout => JobState::Timeout,
            JobStateRow::Preempted => JobState::Preempted,
            JobStateRow::NodeFail => JobState::NodeFail,
            JobStateRow::OutOfMemory => JobState::OutOfMemory,
            JobStateRow::Deadline => JobState::Deadline,
        }
    }
}

impl From<StopWhy> for StopWhyRow {
    fn from(w: StopWhy) -> Self {
        match w {
            StopWhy::Cancel => StopWhyRow::Cancel,
            StopWhy::Timeout => StopWhyRow::Timeout,
            StopWhy::Preempt => StopWhyRow::Preempt,
            StopWhy::Requeue { hold } => StopWhyRow::Requeue { hold },
        }
    }
}

impl From<StopWhyRow> for StopWhy {
    fn from(w: StopWhyRow) -> Self {
        match w {
            StopWhyRow::Cancel => StopWhy::Cancel,
            StopWhyRow::Timeout => StopWhy::Timeout,
            StopWhyRow::Preempt => StopWhy::Preempt,
            StopWhyRow::Requeue { hold } => StopWhy::Requeue { hold },
        }
    }
}

impl From<Stopping> for StoppingRow {
    fn from(s: Stopping) -> Self {
        let Stopping {
            why,
            term_at,
            kill_sent,
            kill_at,
        } = s;
        StoppingRow {
            why: why.into(),
            term_at,
            kill_sent,
            kill_at,
        }
    }
}

impl From<StoppingRow> for Stopping {
    fn from(s: StoppingRow) -> Self {
        let StoppingRow {
            why,
            term_at,
            kill_sent,
            kill_at,
        } = s;
        Stopping {
            why: why.into(),
            term_at,
            kill_sent,
            kill_at,
        }
    }
}

impl From<&AcctInfo> for AcctInfoRow {
    fn from(a: &AcctInfo) -> Self {
        let AcctInfo {
            eligible_time,
            cancelled_by,
            alloc_nodes,
            alloc_cpus,
            alloc_gpus,
            alloc_mem_mib,
            batch_cpus,
            batch_gpus,
            batch_mem_mib,
            derived_ec,
            acct_derived_ec,
            reason_prev,
        } = *a;
        AcctInfoRow {
            eligible_time,
            cancelled_by,
            alloc_nodes,
            alloc_cpus,
            alloc_gpus,
            alloc_mem_mib,
            batch_cpus,
            batch_gpus,
            batch_mem_mib,
            derived_ec,
            acct_derived_ec,
            reason_prev,
        }
    }
}

impl From<AcctInfoRow> for AcctInfo {
    fn from(a: AcctInfoRow) -> Self {
        let AcctInfoRow {
            eligible_time,
            cancelled_by,
            alloc_nodes,
            alloc_cpus,
            alloc_gpus,
            alloc_mem_mib,
            batch_cpus,
            batch_gpus,
            batch_mem_mib,
            derived_ec,
            acct_derived_ec,
            reason_prev,
        } = a;
        AcctInfo {
            eligible_time,
            cancelled_by,
            alloc_nodes,
            alloc_cpus,
            alloc_gpus,
            alloc_mem_mib,
            batch_cpus,
            batch_gpus,
            batch_mem_mib,
            derived_ec,
            acct_derived_ec,
            reason_prev,
        }
    }
}

impl From<ArrayTasks> for ArrayTasksRow {
    fn from(a: ArrayTasks) -> Self {
        let ArrayTasks { count, min, max, step } = a;
        ArrayTasksRow { count, min, max, step }
    }
}

impl From<ArrayTasksRow> for ArrayTasks {
    fn from(a: ArrayTasksRow) -> Self {
        let ArrayTasksRow { count, min, max, step } = a;
        ArrayTasks { count, min, max, step }
    }
}

impl From<&SignalSpec> for SignalSpecRow {
    fn from(s: &SignalSpec) -> Self {
        let SignalSpec {
            signal,
            secs_before,
            batch_only,
        } = *s;
        SignalSpecRow {
            signal,
            secs_before,
            batch_only,
        }
    }
}

impl From<SignalSpecRow> for SignalSpec {
    fn from(s: SignalSpecRow) -> Self {
        let SignalSpecRow {
            signal,
            secs_before,
            batch_only,
        } = s;
        SignalSpec {
            signal,
            secs_before,
            batch_only,
        }
    }
}

impl From<&JobRecord> for JobRow {
    fn from(r: &JobRecord) -> Self {
        let JobRecord {
            id,
            array_job_id,
            array_task_id,
            array_pending,
            array_max_running,
            priority,
            state,
            reason,
            name,
            user,
            uid,
            gid,
            account,
            qos,
            partition,
            work_dir,
            stdout,
            stderr,
            argv,
            comment,
            submit_time,
            start_time,
            end_time,
            time_limit_min,
            ntasks,
            cpus_per_task,
            num_nodes,
            gres,
            dependency,
            requeue,
            restarts,
            spec,
            allocs,
            nodes,
            completing_nodes,
            end_state,
            exit_code,
            exit_signal,
            stopping,
            topology,
            exclusive,
            mem_per_node_mib,
            gpus,
            required_nodes,
            excluded_nodes,
            submit_host,
            mem_per_cpu_mib,
            array_tasks,
            signal,
            warn_sent,
            special_exit,
            interactive,
            last_checkpoint_ack,
            service,
            acct,
            command,
            tres_per_job,
            tres_per_task,
            tres_per_node,
            tres_per_socket,
            max_nodes,
            sockets_per_node,
            mem_whole_node,
            node_shape,
            mail_type,
            mail_user,
            job_flags,
            time_min,
            deadline,
            min_cpus_set,
            features,
            ntasks_given,
            admin_comment,
            delay_boot_s,
            cores,
            elastic,
        } = r;
        JobRow {
            id: *id,
            array_job_id: *array_job_id,
            array_task_id: *array_task_id,
            array_pending: array_pending.clone(),
            array_max_running: *array_max_running,
            state: (*state).into(),
            reason: reason.clone(),
            name: name.clone(),
            user: user.clone(),
            uid: *uid,
            gid: *gid,
            account: account.clone(),
            qos: qos.clone(),
            partition: partition.clone(),
            work_dir: work_dir.clone(),
            stdout: stdout.clone(),
            stderr: stderr.clone(),
            argv: argv.clone(),
            comment: comment.clone(),
            submit_time: *submit_time,
            start_time: *start_time,
            end_time: *end_time,
            time_limit_min: *time_limit_min,
            ntasks: *ntasks,
            cpus_per_task: *cpus_per_task,
            num_nodes: *num_nodes,
            gres: gres.clone(),
            dependency: dependency.clone(),
            requeue: *requeue,
            restarts: *restarts,
            spec: spec.into(),
            allocs: allocs.iter().map(AllocationRow::from).collect(),
            nodes: nodes.clone(),
            completing_nodes: completing_nodes.clone(),
            end_state: end_state.map(JobStateRow::from),
            exit_code: *exit_code,
            exit_signal: *exit_signal,
            stopping: stopping.map(StoppingRow::from),
            topology: topology.clone(),
            exclusive: *exclusive,
            mem_per_node_mib: *mem_per_node_mib,
            gpus: *gpus,
            required_nodes: required_nodes.clone(),
            excluded_nodes: excluded_nodes.clone(),
            submit_host: submit_host.clone(),
            mem_per_cpu_mib: *mem_per_cpu_mib,
            array_tasks: array_tasks.map(ArrayTasksRow::from),
            signal: signal.as_ref().map(SignalSpecRow::from),
            warn_sent: *warn_sent,
            special_exit: *special_exit,
            interactive: *interactive,
            last_checkpoint_ack: *last_checkpoint_ack,
            service: *service,
            acct: acct.into(),
            command: command.clone(),
            tres_per_job: tres_per_job.clone(),
            tres_per_task: tres_per_task.clone(),
            tres_per_node: tres_per_node.clone(),
            tres_per_socket: tres_per_socket.clone(),
            max_nodes: *max_nodes,
            sockets_per_node: *sockets_per_node,
            mem_whole_node: *mem_whole_node,
            node_shape: *node_shape,
            mail_type: *mail_type,
            mail_user: mail_user.clone(),
            job_flags: *job_flags,
            time_min: *time_min,
            deadline: *deadline,
            min_cpus_set: *min_cpus_set,
            features: features.clone(),
            ntasks_given: *ntasks_given,
            cores: cores.clone(),
            elastic: elastic.as_ref().map(ElasticRecordRow::from),
            priority: (*priority != crate::job::PRIO_UNSET).then_some(*priority),
            admin_comment: admin_comment.clone(),
            delay_boot_s: *delay_boot_s,
        }
    }
}

impl From<JobRow> for JobRecord {
    fn from(r: JobRow) -> Self {
        let JobRow {
            id,
            array_job_id,
            array_task_id,
            array_pending,
            array_max_running,
            state,
            reason,
            name,
            user,
            uid,
            gid,
            account,
            qos,
            partition,
            work_dir,
            stdout,
            stderr,
            argv,
            comment,
            submit_time,
            start_time,
            end_time,
            time_limit_min,
            ntasks,
            cpus_per_task,
            num_nodes,
            gres,
            dependency,
            requeue,
            restarts,
            spec,
            allocs,
            nodes,
            completing_nodes,
            end_state,
            exit_code,
            exit_signal,
            stopping,
            topology,
            exclusive,
            mem_per_node_mib,
            gpus,
            required_nodes,
            excluded_nodes,
            submit_host,
            mem_per_cpu_mib,
            array_tasks,
            signal,
            warn_sent,
            special_exit,
            interactive,
            last_checkpoint_ack,
            service,
            acct,
            command,
            tres_per_job,
            tres_per_task,
            tres_per_node,
            tres_per_socket,
            max_nodes,
            sockets_per_node,
            mem_whole_node,
            node_shape,
            mail_type,
            mail_user,
            job_flags,
            time_min,
            deadline,
            min_cpus_set,
            features,
            ntasks_given,
            cores,
            elastic,
            priority,
            admin_comment,
            delay_boot_s,
        } = r;
        // The spec's QOS is the record's (stored once).
        let mut spec = JobSpec::from(spec);
        spec.qos = qos.clone();
        JobRecord {
            id,
            array_job_id,
            array_task_id,
            array_pending,
            array_max_running,
            priority: priority.unwrap_or(crate::job::PRIO_UNSET),
            state: state.into(),
            reason,
            name,
            user,
            uid,
            gid,
            account,
            qos,
            partition,
            work_dir,
            stdout,
            stderr,
            argv,
            comment,
            submit_time,
            start_time,
            end_time,
            time_limit_min,
            ntasks,
            cpus_per_task,
            num_nodes,
            gres,
            dependency,
            requeue,
            restarts,
            spec,
            allocs: allocs.into_iter().map(Allocation::from).collect(),
            nodes,
            completing_nodes,
            end_state: end_state.map(JobState::from),
            exit_code,
            exit_signal,
            stopping: stopping.map(Stopping::from),
            topology,
            exclusive,
            mem_per_node_mib,
            gpus,
            required_nodes,
            excluded_nodes,
            submit_host,
            mem_per_cpu_mib,
            array_tasks: array_tasks.map(ArrayTasks::from),
            signal: signal.map(SignalSpec::from),
            warn_sent,
            special_exit,
            interactive,
            last_checkpoint_ack,
            service,
            acct: acct.into(),
            command,
            tres_per_job,
            tres_per_task,
            tres_per_node,
            tres_per_socket,
            max_nodes,
            sockets_per_node,
            mem_whole_node,
            node_shape,
            mail_type,
            mail_user,
            job_flags,
            time_min,
            deadline,
            min_cpus_set,
            features,
            ntasks_given,
            admin_comment,
            delay_boot_s,
            cores,
            elastic: elastic.map(ElasticRecord::from),
        }
    }
}
