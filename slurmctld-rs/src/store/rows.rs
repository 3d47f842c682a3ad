//! The JSON the store writes into its text columns, in types of its own: `jobs.record`
//! ([`JobRow`]), `services.record` ([`ServiceRow`]) and `nodes.avail` ([`NodeAvailRow`]).
//!
//! Why: the controller's [`JobRecord`] embeds the core's `JobSpec` and `Allocation` and the
//! wire's `ArrayTasks`, `SignalSpec` and `ServiceCreate`. Serialized with their own serde
//! derives, a field renamed in `flotilla-core` or `flotilla-proto` would silently change the
//! on-disk format of every existing database. Here every stored struct and enum is a row type
//! whose serde names are pinned (`#[serde(rename = ...)]` on every field and variant), and the
//! conversions to and from the controller's and the core's types are written field by field
//! with exhaustive destructuring: a field added, removed or renamed in a source type fails to
//! compile here instead of changing the format. The golden
//! `slurmctld-rs/tests/golden/job_row.json` shows any change of the format itself.
//!
//! Formats (the `format` column of `jobs`, `services` and `nodes`, migration
//! `sql/0005_row_format.sql`):
//! - `0`: the serde JSON of the controller's and the core's types as the store wrote it up to
//!   schema version 4 (commit ff4a73e). The row types read it: their serde names are format
//!   0's names, and the fields that format 0 records may lack (added later with
//!   `serde(default)`) have the same defaults.
//! - `1` ([`FORMAT`]): the row types' JSON. For every record format 0 could hold it is the
//!   same text, field for field and in the same order; a format 0 record that lacked a
//!   defaulted field gains it when rewritten.
//!
//! Core ids (`JobId`, `PartId`, `NodeId`, `AllocId`, `ServiceId`) and `GpuMask` are stored as
//! their plain numbers, as their newtype derives wrote them.

use crate::acct::AcctInfo;
use crate::job::{JobRecord, JobState, StopWhy, Stopping};
use crate::service::ServiceRecord;
use flotilla_core::cluster::{GpuMask, NodeAlloc, NodeAvail, NodeId, PartId};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{HoldKind, JobId, JobSpec, Request};
use flotilla_core::sched::{AllocId, Allocation, Owner, ServiceId};
use flotilla_proto::{ArrayTasks, ServiceCreate, SignalSpec};
use serde::{Deserialize, Serialize};

/// The record format the store writes (see the module doc for the history).
pub const FORMAT: u32 = 1;

/// The oldest record format the store reads: the serde JSON of the types themselves.
pub const FORMAT_LEGACY: u32 = 0;

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

/// The core's view of a job ([`JobSpec`]). `partition` is the partition's index when the
/// record was written; the controller re-resolves it by the record's partition name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpecRow {
    /// Core job id.
    #[serde(rename = "id")]
    pub id: u64,
    /// Partition index.
    #[serde(rename = "partition")]
    pub partition: u32,
    /// Account.
    #[serde(rename = "account")]
    pub account: String,
    /// User name.
    #[serde(rename = "user")]
    pub user: String,
    /// Submission time (s).
    #[serde(rename = "submit_time")]
    pub submit_time: u64,
    /// `--begin` (s).
    #[serde(rename = "begin_time")]
    pub begin_time: Option<u64>,
    /// Base priority.
    #[serde(rename = "base_priority")]
    pub base_priority: u32,
    /// `--nice`.
    #[serde(rename = "nice")]
    pub nice: i32,
    /// Time limit (s); `None`: unlimited.
    #[serde(rename = "time_limit_s")]
    pub time_limit_s: Option<u64>,
    /// Resources.
    #[serde(rename = "request")]
    pub request: RequestRow,
    /// May be preempted.
    #[serde(rename = "preemptible")]
    pub preemptible: bool,
    /// Checkpoint size (bytes).
    #[serde(rename = "checkpoint_bytes")]
    pub checkpoint_bytes: u64,
    /// Who holds it.
    #[serde(rename = "held")]
    pub held: Option<HoldRow>,
    /// Dependencies not yet satisfied.
    #[serde(rename = "dependency_pending")]
    pub dependency_pending: bool,
    /// Times preempted.
    #[serde(rename = "preempt_count")]
    pub preempt_count: u32,
}

/// Who holds a job ([`HoldKind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldRow {
    /// The user.
    #[serde(rename = "User")]
    User,
    /// An admin or `--hold`.
    #[serde(rename = "Admin")]
    Admin,
}

/// A job's resources ([`Request`]). `required_nodes`/`excluded_nodes` are node indices in
/// the configuration the record was written under (the record's name lists say the same by
/// name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRow {
    /// Total GPUs.
    #[serde(rename = "gpus")]
    pub gpus: u32,
    /// Milli-GPUs held on each GPU.
    #[serde(rename = "gpu_milli")]
    pub gpu_milli: u32,
    /// `-N`.
    #[serde(rename = "nodes")]
    pub nodes: Option<u32>,
    /// GPUs on each node.
    #[serde(rename = "gpus_per_node")]
    pub gpus_per_node: Option<u32>,
    /// Milli-CPUs per node.
    #[serde(rename = "cpu_milli_per_node")]
    pub cpu_milli_per_node: u64,
    /// MiB per node.
    #[serde(rename = "mem_mib_per_node")]
    pub mem_mib_per_node: u64,
    /// Declared topology.
    #[serde(rename = "topology")]
    pub topology: TopologyRow,
    /// Allowed GPU models.
    #[serde(rename = "gpu_types")]
    pub gpu_types: Vec<String>,
    /// Whole nodes only.
    #[serde(rename = "exclusive")]
    pub exclusive: bool,
    /// `-w` node indices.
    #[serde(rename = "required_nodes")]
    pub required_nodes: Vec<u32>,
    /// `-x` node indices.
    #[serde(rename = "excluded_nodes")]
    pub excluded_nodes: Vec<u32>,
}

/// A declared topology ([`TopologyKind`]), by variant name (`"Node"`, `"Pod"`, `"Any"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TopologyRow {
    /// One node.
    #[serde(rename = "Node")]
    Node,
    /// One pod.
    #[serde(rename = "Pod")]
    Pod,
    /// Anywhere.
    #[serde(rename = "Any")]
    Any,
}

/// One allocation ([`Allocation`]). `part.node` is the node's index when written; the
/// controller re-resolves it from the record's node names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationRow {
    /// Allocation id.
    #[serde(rename = "id")]
    pub id: u64,
    /// Owner.
    #[serde(rename = "owner")]
    pub owner: OwnerRow,
    /// What it holds on which node.
    #[serde(rename = "part")]
    pub part: NodeAllocRow,
    /// When made (s).
    #[serde(rename = "created_at")]
    pub created_at: u64,
    /// May be preempted.
    #[serde(rename = "preemptible")]
    pub preemptible: bool,
    /// Exceeds its quota guarantee.
    #[serde(rename = "borrowed")]
    pub borrowed: bool,
    /// Backfill for the reservation of this core job id.
    #[serde(rename = "backfill_for")]
    pub backfill_for: Option<u64>,
}

/// An allocation's owner ([`Owner`]): `{"Job":N}` or `{"Replica":{"service":S,"replica":N}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OwnerRow {
    /// A batch job, by core job id.
    #[serde(rename = "Job")]
    Job(u64),
    /// A service replica.
    #[serde(rename = "Replica")]
    Replica {
        /// Service id.
        #[serde(rename = "service")]
        service: u32,
        /// Replica (core job) id.
        #[serde(rename = "replica")]
        replica: u64,
    },
}

/// An allocation's part on one node ([`NodeAlloc`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAllocRow {
    /// Node index.
    #[serde(rename = "node")]
    pub node: u32,
    /// GPU bitmask (bit `i`: GPU `i`).
    #[serde(rename = "gpus")]
    pub gpus: u64,
    /// Milli-GPUs on each GPU of the mask.
    #[serde(rename = "gpu_milli")]
    pub gpu_milli: u32,
    /// Milli-CPUs.
    #[serde(rename = "cpu_milli")]
    pub cpu_milli: u64,
    /// MiB.
    #[serde(rename = "mem_mib")]
    pub mem_mib: u64,
}

/// A `nodes.avail`: a node's availability ([`NodeAvail`]): `"Up"`, `"Unknown"`, or
/// `{"Drain":{"reason":...}}` (likewise `Down`, `Quarantined`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeAvailRow {
    /// Up.
    #[serde(rename = "Up")]
    Up,
    /// Draining.
    #[serde(rename = "Drain")]
    Drain {
        /// Admin's reason.
        #[serde(rename = "reason")]
        reason: String,
    },
    /// Down.
    #[serde(rename = "Down")]
    Down {
        /// Why.
        #[serde(rename = "reason")]
        reason: String,
    },
    /// Quarantined by the GPU health policy.
    #[serde(rename = "Quarantined")]
    Quarantined {
        /// The health event.
        #[serde(rename = "reason")]
        reason: String,
    },
    /// Not registered yet.
    #[serde(rename = "Unknown")]
    Unknown,
}

/// A `services.record`: the controller's [`ServiceRecord`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceRow {
    /// Service id.
    #[serde(rename = "id")]
    pub id: u32,
    /// What `sdeploy create` sent.
    #[serde(rename = "create")]
    pub create: ServiceCreateRow,
    /// Replicas wanted.
    #[serde(rename = "desired_replicas")]
    pub desired_replicas: u32,
    /// Replica template.
    #[serde(rename = "template")]
    pub template: JobRow,
    /// Created (s since epoch).
    #[serde(rename = "create_time")]
    pub create_time: i64,
}

/// `sdeploy create` as stored (the wire's [`ServiceCreate`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceCreateRow {
    /// Service name.
    #[serde(rename = "name")]
    pub name: String,
    /// Command of each replica.
    #[serde(rename = "command")]
    pub command: String,
    /// GPUs per replica.
    #[serde(rename = "gpus_per_replica")]
    pub gpus_per_replica: u32,
    /// GPU model.
    #[serde(rename = "gpu_type")]
    pub gpu_type: Option<String>,
    /// Topology of one replica.
    #[serde(rename = "topology")]
    pub topology: Option<String>,
    /// CPUs per replica.
    #[serde(rename = "cpus_per_replica")]
    pub cpus_per_replica: Option<u32>,
    /// Memory per replica (MiB).
    #[serde(rename = "mem_per_replica_mib")]
    pub mem_per_replica_mib: Option<u64>,
    /// Availability floor.
    #[serde(rename = "min_replicas")]
    pub min_replicas: u32,
    /// Ceiling.
    #[serde(rename = "max_replicas")]
    pub max_replicas: u32,
    /// Replicas wanted at creation.
    #[serde(rename = "desired_replicas")]
    pub desired_replicas: u32,
    /// Priority among services.
    #[serde(rename = "priority")]
    pub priority: u32,
    /// Partition.
    #[serde(rename = "partition")]
    pub partition: Option<String>,
    /// Account.
    #[serde(rename = "account")]
    pub account: Option<String>,
    /// Working directory.
    #[serde(rename = "work_dir")]
    pub work_dir: String,
    /// Environment of the replicas, as `[name, value]` pairs.
    #[serde(rename = "environment")]
    pub environment: Vec<(String, String)>,
    /// Owner uid.
    #[serde(rename = "uid")]
    pub uid: u32,
    /// Owner gid.
    #[serde(rename = "gid")]
    pub gid: u32,
    /// Owner name.
    #[serde(rename = "user")]
    pub user: String,
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

impl From<HoldKind> for HoldRow {
    fn from(h: HoldKind) -> Self {
        match h {
            HoldKind::User => HoldRow::User,
            HoldKind::Admin => HoldRow::Admin,
        }
    }
}

impl From<HoldRow> for HoldKind {
    fn from(h: HoldRow) -> Self {
        match h {
            HoldRow::User => HoldKind::User,
            HoldRow::Admin => HoldKind::Admin,
        }
    }
}

impl From<TopologyKind> for TopologyRow {
    fn from(t: TopologyKind) -> Self {
        match t {
            TopologyKind::Node => TopologyRow::Node,
            TopologyKind::Pod => TopologyRow::Pod,
            TopologyKind::Any => TopologyRow::Any,
        }
    }
}

impl From<TopologyRow> for TopologyKind {
    fn from(t: TopologyRow) -> Self {
        match t {
            TopologyRow::Node => TopologyKind::Node,
            TopologyRow::Pod => TopologyKind::Pod,
            TopologyRow::Any => TopologyKind::Any,
        }
    }
}

impl From<&Request> for RequestRow {
    fn from(r: &Request) -> Self {
        let Request {
            gpus,
            gpu_milli,
            nodes,
            gpus_per_node,
            cpu_milli_per_node,
            mem_mib_per_node,
            topology,
            gpu_types,
            exclusive,
            required_nodes,
            excluded_nodes,
        } = r;
        RequestRow {
            gpus: *gpus,
            gpu_milli: *gpu_milli,
            nodes: *nodes,
            gpus_per_node: *gpus_per_node,
            cpu_milli_per_node: *cpu_milli_per_node,
            mem_mib_per_node: *mem_mib_per_node,
            topology: (*topology).into(),
            gpu_types: gpu_types.clone(),
            exclusive: *exclusive,
            required_nodes: required_nodes.iter().map(|n| n.0).collect(),
            excluded_nodes: excluded_nodes.iter().map(|n| n.0).collect(),
        }
    }
}

impl From<RequestRow> for Request {
    fn from(r: RequestRow) -> Self {
        let RequestRow {
            gpus,
            gpu_milli,
            nodes,
            gpus_per_node,
            cpu_milli_per_node,
            mem_mib_per_node,
            topology,
            gpu_types,
            exclusive,
            required_nodes,
            excluded_nodes,
        } = r;
        Request {
            gpus,
            gpu_milli,
            nodes,
            gpus_per_node,
            cpu_milli_per_node,
            mem_mib_per_node,
            topology: topology.into(),
            gpu_types,
            exclusive,
            required_nodes: required_nodes.into_iter().map(NodeId).collect(),
            excluded_nodes: excluded_nodes.into_iter().map(NodeId).collect(),
        }
    }
}

impl From<&JobSpec> for JobSpecRow {
    fn from(s: &JobSpec) -> Self {
        let JobSpec {
            id,
            partition,
            account,
            user,
            submit_time,
            begin_time,
            base_priority,
            nice,
            time_limit_s,
            request,
            preemptible,
            checkpoint_bytes,
            held,
            dependency_pending,
            preempt_count,
        } = s;
        JobSpecRow {
            id: id.0,
            partition: partition.0,
            account: account.clone(),
            user: user.clone(),
            submit_time: *submit_time,
            begin_time: *begin_time,
            base_priority: *base_priority,
            nice: *nice,
            time_limit_s: *time_limit_s,
            request: request.into(),
            preemptible: *preemptible,
            checkpoint_bytes: *checkpoint_bytes,
            held: held.map(HoldRow::from),
            dependency_pending: *dependency_pending,
            preempt_count: *preempt_count,
        }
    }
}

impl From<JobSpecRow> for JobSpec {
    fn from(s: JobSpecRow) -> Self {
        let JobSpecRow {
            id,
            partition,
            account,
            user,
            submit_time,
            begin_time,
            base_priority,
            nice,
            time_limit_s,
            request,
            preemptible,
            checkpoint_bytes,
            held,
            dependency_pending,
            preempt_count,
        } = s;
        JobSpec {
            id: JobId(id),
            partition: PartId(partition),
            account,
            user,
            submit_time,
            begin_time,
            base_priority,
            nice,
            time_limit_s,
            request: request.into(),
            preemptible,
            checkpoint_bytes,
            held: held.map(HoldKind::from),
            dependency_pending,
            preempt_count,
        }
    }
}

impl From<Owner> for OwnerRow {
    fn from(o: Owner) -> Self {
        match o {
            Owner::Job(j) => OwnerRow::Job(j.0),
            Owner::Replica { service, replica } => OwnerRow::Replica {
                service: service.0,
                replica: replica.0,
            },
        }
    }
}

impl From<OwnerRow> for Owner {
    fn from(o: OwnerRow) -> Self {
        match o {
            OwnerRow::Job(j) => Owner::Job(JobId(j)),
            OwnerRow::Replica { service, replica } => Owner::Replica {
                service: ServiceId(service),
                replica: JobId(replica),
            },
        }
    }
}

impl From<&NodeAlloc> for NodeAllocRow {
    fn from(p: &NodeAlloc) -> Self {
        let NodeAlloc {
            node,
            gpus,
            gpu_milli,
            cpu_milli,
            mem_mib,
        } = *p;
        NodeAllocRow {
            node: node.0,
            gpus: gpus.0,
            gpu_milli,
            cpu_milli,
            mem_mib,
        }
    }
}

impl From<NodeAllocRow> for NodeAlloc {
    fn from(p: NodeAllocRow) -> Self {
        let NodeAllocRow {
            node,
            gpus,
            gpu_milli,
            cpu_milli,
            mem_mib,
        } = p;
        NodeAlloc {
            node: NodeId(node),
            gpus: GpuMask(gpus),
            gpu_milli,
            cpu_milli,
            mem_mib,
        }
    }
}

impl From<&Allocation> for AllocationRow {
    fn from(a: &Allocation) -> Self {
        let Allocation {
            id,
            owner,
            part,
            created_at,
            preemptible,
            borrowed,
            backfill_for,
        } = a;
        AllocationRow {
            id: id.0,
            owner: (*owner).into(),
            part: part.into(),
            created_at: *created_at,
            preemptible: *preemptible,
            borrowed: *borrowed,
            backfill_for: backfill_for.map(|j| j.0),
        }
    }
}

impl From<AllocationRow> for Allocation {
    fn from(a: AllocationRow) -> Self {
        let AllocationRow {
            id,
            owner,
            part,
            created_at,
            preemptible,
            borrowed,
            backfill_for,
        } = a;
        Allocation {
            id: AllocId(id),
            owner: owner.into(),
            part: part.into(),
            created_at,
            preemptible,
            borrowed,
            backfill_for: backfill_for.map(JobId),
        }
    }
}

impl From<&NodeAvail> for NodeAvailRow {
    fn from(a: &NodeAvail) -> Self {
        match a {
            NodeAvail::Up => NodeAvailRow::Up,
            NodeAvail::Drain { reason } => NodeAvailRow::Drain { reason: reason.clone() },
            NodeAvail::Down { reason } => NodeAvailRow::Down { reason: reason.clone() },
            NodeAvail::Quarantined { reason } => NodeAvailRow::Quarantined { reason: reason.clone() },
            NodeAvail::Unknown => NodeAvailRow::Unknown,
        }
    }
}

impl From<NodeAvailRow> for NodeAvail {
    fn from(a: NodeAvailRow) -> Self {
        match a {
            NodeAvailRow::Up => NodeAvail::Up,
            NodeAvailRow::Drain { reason } => NodeAvail::Drain { reason },
            NodeAvailRow::Down { reason } => NodeAvail::Down { reason },
            NodeAvailRow::Quarantined { reason } => NodeAvail::Quarantined { reason },
            NodeAvailRow::Unknown => NodeAvail::Unknown,
        }
    }
}

impl From<&ServiceCreate> for ServiceCreateRow {
    fn from(c: &ServiceCreate) -> Self {
        let ServiceCreate {
            name,
            command,
            gpus_per_replica,
            gpu_type,
            topology,
            cpus_per_replica,
            mem_per_replica_mib,
            min_replicas,
            max_replicas,
            desired_replicas,
            priority,
            partition,
            account,
            work_dir,
            environment,
            uid,
            gid,
            user,
        } = c;
        ServiceCreateRow {
            name: name.clone(),
            command: command.clone(),
            gpus_per_replica: *gpus_per_replica,
            gpu_type: gpu_type.clone(),
            topology: topology.clone(),
            cpus_per_replica: *cpus_per_replica,
            mem_per_replica_mib: *mem_per_replica_mib,
            min_replicas: *min_replicas,
            max_replicas: *max_replicas,
            desired_replicas: *desired_replicas,
            priority: *priority,
            partition: partition.clone(),
            account: account.clone(),
            work_dir: work_dir.clone(),
            environment: environment.clone(),
            uid: *uid,
            gid: *gid,
            user: user.clone(),
        }
    }
}

impl From<ServiceCreateRow> for ServiceCreate {
    fn from(c: ServiceCreateRow) -> Self {
        let ServiceCreateRow {
            name,
            command,
            gpus_per_replica,
            gpu_type,
            topology,
            cpus_per_replica,
            mem_per_replica_mib,
            min_replicas,
            max_replicas,
            desired_replicas,
            priority,
            partition,
            account,
            work_dir,
            environment,
            uid,
            gid,
            user,
        } = c;
        ServiceCreate {
            name,
            command,
            gpus_per_replica,
            gpu_type,
            topology,
            cpus_per_replica,
            mem_per_replica_mib,
            min_replicas,
            max_replicas,
            desired_replicas,
            priority,
            partition,
            account,
            work_dir,
            environment,
            uid,
            gid,
            user,
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
            interactive,
            last_checkpoint_ack,
            service,
            acct,
            command,
            tres_per_job,
            tres_per_task,
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
            interactive: *interactive,
            last_checkpoint_ack: *last_checkpoint_ack,
            service: *service,
            acct: acct.into(),
            command: command.clone(),
            tres_per_job: tres_per_job.clone(),
            tres_per_task: tres_per_task.clone(),
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
            interactive,
            last_checkpoint_ack,
            service,
            acct,
            command,
            tres_per_job,
            tres_per_task,
        } = r;
        JobRecord {
            id,
            array_job_id,
            array_task_id,
            array_pending,
            array_max_running,
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
            spec: spec.into(),
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
            interactive,
            last_checkpoint_ack,
            service,
            acct: acct.into(),
            command,
            tres_per_job,
            tres_per_task,
        }
    }
}

impl From<&ServiceRecord> for ServiceRow {
    fn from(s: &ServiceRecord) -> Self {
        let ServiceRecord {
            id,
            create,
            desired_replicas,
            template,
            create_time,
        } = s;
        ServiceRow {
            id: *id,
            create: create.into(),
            desired_replicas: *desired_replicas,
            template: template.into(),
            create_time: *create_time,
        }
    }
}

impl From<ServiceRow> for ServiceRecord {
    fn from(s: ServiceRow) -> Self {
        let ServiceRow {
            id,
            create,
            desired_replicas,
            template,
            create_time,
        } = s;
        ServiceRecord {
            id,
            create: create.into(),
            desired_replicas,
            template: template.into(),
            create_time,
        }
    }
}

/// A row type as its column text (compact JSON). Row types hold only strings, numbers,
/// booleans, lists and string-keyed structs, which always serialize.
fn to_json<T: Serialize>(row: &T) -> String {
    serde_json::to_string(row).expect("a store row serializes")
}

/// The `jobs.record` text of `r` (format [`FORMAT`]).
pub fn job_to_json(r: &JobRecord) -> String {
    to_json(&JobRow::from(r))
}

/// Reads a `jobs.record` (formats 0 and 1: both are read by [`JobRow`]). Errors: the JSON's.
pub fn job_from_json(text: &str) -> Result<JobRecord, serde_json::Error> {
    serde_json::from_str::<JobRow>(text).map(JobRecord::from)
}

/// The `services.record` text of `s` (format [`FORMAT`]).
pub fn service_to_json(s: &ServiceRecord) -> String {
    to_json(&ServiceRow::from(s))
}

/// Reads a `services.record` (formats 0 and 1). Errors: the JSON's.
pub fn service_from_json(text: &str) -> Result<ServiceRecord, serde_json::Error> {
    serde_json::from_str::<ServiceRow>(text).map(ServiceRecord::from)
}

/// The `nodes.avail` text of `a` (format [`FORMAT`]).
pub fn avail_to_json(a: &NodeAvail) -> String {
    to_json(&NodeAvailRow::from(a))
}

/// Reads a `nodes.avail` (formats 0 and 1). Errors: the JSON's.
pub fn avail_from_json(text: &str) -> Result<NodeAvail, serde_json::Error> {
    serde_json::from_str::<NodeAvailRow>(text).map(NodeAvail::from)
}
