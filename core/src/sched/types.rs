//! The data the scheduling core exchanges with its drivers: identifiers, allocations,
//! pending reasons, [`Decision`]s out, [`Event`]s in, the queue discipline and the tunables,
//! and the core's records of running jobs and held reservations.

use crate::cluster::{GpuMask, NodeAlloc, NodeAvail, NodeId, PartId, Time};
use crate::job::{JobId, JobSpec, Request};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// Identifier of one allocation (one job's part on one node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AllocId(pub u64);

/// Who owns an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Owner {
    /// A batch job (training or otherwise).
    Job(JobId),
    /// A replica of an inference service (never preempted).
    Replica {
        /// The service the replica belongs to.
        service: ServiceId,
        /// The replica's id (from the replica id range, see [`REPLICA_ID_BASE`]).
        replica: JobId,
    },
}

/// Identifier of an inference service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ServiceId(pub u32);

impl fmt::Display for ServiceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Replica ids are job ids from this value up, so they never collide with the driver's job
/// ids, unless the driver shares its job id sequence with the core
/// ([`Scheduler::share_job_ids`](super::Scheduler::share_job_ids)), as the controller does:
/// its replicas are Slurm job ids.
pub const REPLICA_ID_BASE: u64 = 1 << 48;

/// A long-lived inference deployment (DESIGN.md §2): each replica is one allocation of
/// `replica`'s shape; the core keeps `desired_replicas` (clamped to `[min, max]`) running,
/// level-triggered. Replicas are never preempted; scaling up may preempt training.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceSpec {
    /// Service id (`sdeploy`'s id, unique in the cluster).
    pub id: ServiceId,
    /// Service name (`sdeploy --name`), shown in pages.
    pub name: String,
    /// Partition its replicas run in.
    pub partition: PartId,
    /// Account (quota scope) its replicas charge.
    pub account: String,
    /// User owning it.
    pub user: String,
    /// Shape of one replica (GPUs and topology; `node` for a replica inside one node).
    pub replica: Request,
    /// Availability floor: scaling up to it is never throttled by the preemption budget.
    pub min_replicas: u32,
    /// Most replicas, whatever the autoscaler asks for.
    pub max_replicas: u32,
    /// What the autoscaler wants (`sdeploy scale`).
    pub desired_replicas: u32,
    /// Priority among services.
    pub priority: u32,
}

impl ServiceSpec {
    /// The replica count the core converges to: `desired` clamped to `[min, max]`.
    pub fn target(&self) -> u32 {
        self.desired_replicas.clamp(self.min_replicas, self.max_replicas.max(self.min_replicas))
    }
}

/// One allocation: a job's GPUs, CPUs and memory on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    /// Allocation id (unique, increasing).
    pub id: AllocId,
    /// The job or replica holding it.
    pub owner: Owner,
    /// What it holds on which node.
    pub part: NodeAlloc,
    /// When it was made (s).
    pub created_at: Time,
    /// May be preempted.
    pub preemptible: bool,
    /// Exceeds its quota scope's guarantee (set by quota accounting; false until quotas).
    pub borrowed: bool,
    /// Runs on reserved GPUs as backfill for the reservation of this job.
    pub backfill_for: Option<JobId>,
}

/// Slurm's pending-reason codes, as `squeue` prints them in its `REASON` column (Slurm
/// 22.05 `job_reason_string`, src/common/slurm_protocol_defs.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Reason {
    /// `None`: nothing holds the job back (it has not been considered yet).
    #[default]
    None,
    /// `Resources`: the job is waiting for resources.
    Resources,
    /// `Priority`: higher-priority jobs come first.
    Priority,
    /// `Dependency`: dependencies not yet satisfied.
    Dependency,
    /// `JobHeldUser`: held by its owner (`scontrol hold`, `sbatch --hold`).
    JobHeldUser,
    /// `JobHeldAdmin`: held by an administrator.
    JobHeldAdmin,
    /// `BeginTime`: `--begin` is in the future.
    BeginTime,
    /// `PartitionTimeLimit`: the time limit exceeds the partition's `MaxTime`.
    PartitionTimeLimit,
    /// `PartitionDown`: the partition's `State=` is `DOWN`.
    PartitionDown,
    /// `PartitionNodeLimit`: the partition cannot ever provide the nodes or GPUs asked for.
    PartitionNodeLimit,
    /// `ReqNodeNotAvail`: a required node is unavailable.
    ReqNodeNotAvail,
    /// `AssocGrpGRES`: the account's quota (`MaxGPUs`), or the association's or an
    /// ancestor's `GrpTRES=gres/gpu=`, would be exceeded.
    AssocGrpGRES,
    /// `AssocMaxJobsLimit`: the user already runs the association's `MaxJobs=` jobs.
    AssocMaxJobsLimit,
    /// `InvalidAccount`: the job's user, account and partition have no association (`AccountingStorageEnforce=associations`).
    InvalidAccount,
    /// `InvalidQOS`: the job's QOS does not exist (`AccountingStorageEnforce=qos`).
    InvalidQOS,
    /// `AssocGrpCpuLimit`: the association or an ancestor would pass its `GrpTRES=cpu=`.
    AssocGrpCpuLimit,
    /// `AssocGrpMemLimit`: the association or an ancestor would pass its `GrpTRES=mem=`.
    AssocGrpMemLimit,
    /// `AssocGrpNodeLimit`: the association or an ancestor would pass its `GrpTRES=node=`.
    AssocGrpNodeLimit,
    /// `AssocGrpBilling`: the association or an ancestor would pass its `GrpTRES=billing=`.
    AssocGrpBilling,
    /// `AssocGrpJobsLimit`: the association or an ancestor runs its `GrpJobs=` jobs.
    AssocGrpJobsLimit,
    /// `AssocMaxWallDurationPerJobLimit`: the time limit is above the association's `MaxWall=`.
    AssocMaxWallDurationPerJobLimit,
    /// `AssocMaxCpuPerJobLimit`: the job asks for more CPUs than the association's `MaxTRESPerJob=cpu=`.
    AssocMaxCpuPerJobLimit,
    /// `AssocMaxMemPerJob`: the job asks for more memory than the association's `MaxTRESPerJob=mem=`.
    AssocMaxMemPerJob,
    /// `AssocMaxNodePerJobLimit`: the job asks for more nodes than the association's `MaxTRESPerJob=node=`.
    AssocMaxNodePerJobLimit,
    /// `AssocMaxBillingPerJob`: the job's billing is above the association's `MaxTRESPerJob=billing=`.
    AssocMaxBillingPerJob,
    /// `AssocMaxGRESPerJob`: the job asks for more GPUs than the association's `MaxTRESPerJob=gres/gpu=`.
    AssocMaxGRESPerJob,
    /// `QOSGrpCpuLimit`: the QOS would pass its `GrpTRES=cpu=`.
    QOSGrpCpuLimit,
    /// `QOSGrpMemLimit`: the QOS would pass its `GrpTRES=mem=`.
    QOSGrpMemLimit,
    /// `QOSGrpNodeLimit`: the QOS would pass its `GrpTRES=node=`.
    QOSGrpNodeLimit,
    /// `QOSGrpBilling`: the QOS would pass its `GrpTRES=billing=`.
    QOSGrpBilling,
    /// `QOSGrpGRES`: the QOS would pass its `GrpTRES=gres/gpu=`.
    QOSGrpGRES,
    /// `QOSGrpJobsLimit`: the QOS runs its `GrpJobs=` jobs.
    QOSGrpJobsLimit,
    /// `QOSMaxJobsPerUserLimit`: the user runs the QOS's `MaxJobsPerUser=` jobs.
    QOSMaxJobsPerUserLimit,
    /// `QOSMaxWallDurationPerJobLimit`: the time limit is above the QOS's `MaxWall=`.
    QOSMaxWallDurationPerJobLimit,
    /// `QOSMaxCpuPerJobLimit`: the job asks for more CPUs than the QOS's `MaxTRESPerJob=cpu=`.
    QOSMaxCpuPerJobLimit,
    /// `QOSMaxMemoryPerJob`: the job asks for more memory than the QOS's `MaxTRESPerJob=mem=`.
    QOSMaxMemoryPerJob,
    /// `QOSMaxNodePerJobLimit`: the job asks for more nodes than the QOS's `MaxTRESPerJob=node=`.
    QOSMaxNodePerJobLimit,
    /// `QOSMaxBillingPerJob`: the job's billing is above the QOS's `MaxTRESPerJob=billing=`.
    QOSMaxBillingPerJob,
    /// `QOSMaxGRESPerJob`: the job asks for more GPUs than the QOS's `MaxTRESPerJob=gres/gpu=`.
    QOSMaxGRESPerJob,
    /// `QOSMaxCpuPerUserLimit`: the user's running jobs of the QOS would pass its `MaxTRESPerUser=cpu=`.
    QOSMaxCpuPerUserLimit,
    /// `QOSMaxMemoryPerUser`: the user's running jobs of the QOS would pass its `MaxTRESPerUser=mem=`.
    QOSMaxMemoryPerUser,
    /// `QOSMaxNodePerUserLimit`: the user's running jobs of the QOS would pass its `MaxTRESPerUser=node=`.
    QOSMaxNodePerUserLimit,
    /// `QOSMaxBillingPerUser`: the user's running jobs of the QOS would pass its `MaxTRESPerUser=billing=`.
    QOSMaxBillingPerUser,
    /// `QOSMaxGRESPerUser`: the user's running jobs of the QOS would pass its `MaxTRESPerUser=gres/gpu=`.
    QOSMaxGRESPerUser,
    /// `QOSGrpSubmitJobsLimit`: (at submission) the QOS holds its `GrpSubmitJobs=` jobs.
    QOSGrpSubmitJobsLimit,
    /// `QOSMaxSubmitJobPerUserLimit`: (at submission) the user holds the QOS's `MaxSubmitJobsPerUser=` jobs.
    QOSMaxSubmitJobPerUserLimit,
    /// `AssocGrpSubmitJobsLimit`: (at submission) the association or an ancestor holds its `GrpSubmit=` jobs.
    AssocGrpSubmitJobsLimit,
    /// `AssocMaxSubmitJobLimit`: (at submission) the user holds the association's `MaxSubmitJobs=` jobs.
    AssocMaxSubmitJobLimit,
    /// `PartitionInactive`: the partition's `State=` is `INACTIVE`.
    PartitionInactive,
}

impl Reason {
    /// Whether a pending job with this reason may be considered by another job's
    /// submission test (Slurm 22.05's `_top_priority` skips a job unless all three of
    /// `acct_policy_job_runnable_state`, `misc_policy_job_runnable_state` and
    /// `part_policy_job_runnable_state` hold). Not runnable: the partition's state and
    /// limits, an invalid account or QOS, `ReqNodeNotAvail`, and the accounting limits of
    /// Slurm's range `WAIT_QOS_GRP_CPU`..`WAIT_ASSOC_MAX_SUB_JOB` (CPU, memory, node, job,
    /// submit and wall limits). The GRES, memory-per-job/user and billing limits Slurm added
    /// after that range are not in it, so a job waiting on them still counts, as in Slurm.
    pub fn runnable_state(self) -> bool {
        use Reason::*;
        !matches!(
            self,
            PartitionDown
                | PartitionInactive
                | PartitionNodeLimit
                | PartitionTimeLimit
                | InvalidAccount
                | InvalidQOS
                | ReqNodeNotAvail
                | QOSGrpCpuLimit
                | QOSGrpJobsLimit
                | QOSGrpMemLimit
                | QOSGrpNodeLimit
                | QOSGrpSubmitJobsLimit
                | QOSMaxCpuPerJobLimit
                | QOSMaxNodePerJobLimit
                | QOSMaxWallDurationPerJobLimit
                | QOSMaxCpuPerUserLimit
                | QOSMaxJobsPerUserLimit
                | QOSMaxNodePerUserLimit
                | QOSMaxSubmitJobPerUserLimit
                | AssocGrpCpuLimit
                | AssocGrpJobsLimit
                | AssocGrpMemLimit
                | AssocGrpNodeLimit
                | AssocGrpSubmitJobsLimit
                | AssocMaxJobsLimit
                | AssocMaxCpuPerJobLimit
                | AssocMaxNodePerJobLimit
                | AssocMaxWallDurationPerJobLimit
                | AssocMaxSubmitJobLimit
        )
    }

    /// Why a job of a partition in `state` waits on it: `PartitionDown` (`DOWN`),
    /// `PartitionInactive` (`INACTIVE`); `None` for one that schedules (`UP`, `DRAIN`).
    pub fn of_partition(state: crate::cluster::PartitionState) -> Option<Reason> {
        use crate::cluster::PartitionState as S;
        match state {
            S::Up | S::Drain => None,
            S::Down => Some(Reason::PartitionDown),
            S::Inactive => Some(Reason::PartitionInactive),
        }
    }

    /// The text squeue shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::None => "None",
            Reason::Resources => "Resources",
            Reason::Priority => "Priority",
            Reason::Dependency => "Dependency",
            Reason::JobHeldUser => "JobHeldUser",
            Reason::JobHeldAdmin => "JobHeldAdmin",
            Reason::BeginTime => "BeginTime",
            Reason::PartitionTimeLimit => "PartitionTimeLimit",
            Reason::PartitionDown => "PartitionDown",
            Reason::PartitionNodeLimit => "PartitionNodeLimit",
            Reason::ReqNodeNotAvail => "ReqNodeNotAvail",
            Reason::AssocGrpGRES => "AssocGrpGRES",
            Reason::AssocMaxJobsLimit => "AssocMaxJobsLimit",
            Reason::InvalidAccount => "InvalidAccount",
            Reason::InvalidQOS => "InvalidQOS",
            Reason::AssocGrpCpuLimit => "AssocGrpCpuLimit",
            Reason::AssocGrpMemLimit => "AssocGrpMemLimit",
            Reason::AssocGrpNodeLimit => "AssocGrpNodeLimit",
            Reason::AssocGrpBilling => "AssocGrpBilling",
            Reason::AssocGrpJobsLimit => "AssocGrpJobsLimit",
            Reason::AssocMaxWallDurationPerJobLimit => "AssocMaxWallDurationPerJobLimit",
            Reason::AssocMaxCpuPerJobLimit => "AssocMaxCpuPerJobLimit",
            Reason::AssocMaxMemPerJob => "AssocMaxMemPerJob",
            Reason::AssocMaxNodePerJobLimit => "AssocMaxNodePerJobLimit",
            Reason::AssocMaxBillingPerJob => "AssocMaxBillingPerJob",
            Reason::AssocMaxGRESPerJob => "AssocMaxGRESPerJob",
            Reason::QOSGrpCpuLimit => "QOSGrpCpuLimit",
            Reason::QOSGrpMemLimit => "QOSGrpMemLimit",
            Reason::QOSGrpNodeLimit => "QOSGrpNodeLimit",
            Reason::QOSGrpBilling => "QOSGrpBilling",
            Reason::QOSGrpGRES => "QOSGrpGRES",
            Reason::QOSGrpJobsLimit => "QOSGrpJobsLimit",
            Reason::QOSMaxJobsPerUserLimit => "QOSMaxJobsPerUserLimit",
            Reason::QOSMaxWallDurationPerJobLimit => "QOSMaxWallDurationPerJobLimit",
            Reason::QOSMaxCpuPerJobLimit => "QOSMaxCpuPerJobLimit",
            Reason::QOSMaxMemoryPerJob => "QOSMaxMemoryPerJob",
            Reason::QOSMaxNodePerJobLimit => "QOSMaxNodePerJobLimit",
            Reason::QOSMaxBillingPerJob => "QOSMaxBillingPerJob",
            Reason::QOSMaxGRESPerJob => "QOSMaxGRESPerJob",
            Reason::QOSMaxCpuPerUserLimit => "QOSMaxCpuPerUserLimit",
            Reason::QOSMaxMemoryPerUser => "QOSMaxMemoryPerUser",
            Reason::QOSMaxNodePerUserLimit => "QOSMaxNodePerUserLimit",
            Reason::QOSMaxBillingPerUser => "QOSMaxBillingPerUser",
            Reason::QOSMaxGRESPerUser => "QOSMaxGRESPerUser",
            Reason::QOSGrpSubmitJobsLimit => "QOSGrpSubmitJobsLimit",
            Reason::QOSMaxSubmitJobPerUserLimit => "QOSMaxSubmitJobPerUserLimit",
            Reason::AssocGrpSubmitJobsLimit => "AssocGrpSubmitJobsLimit",
            Reason::AssocMaxSubmitJobLimit => "AssocMaxSubmitJobLimit",
            Reason::PartitionInactive => "PartitionInactive",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the scheduler knows about a pending job after the last cycle.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PendingInfo {
    /// Slurm reason code.
    pub reason: Reason,
    /// Topology detail, e.g. `needs 1 whole node; largest_placeable node=0` (Flotilla's own
    /// field, shown next to Slurm's reason by Flotilla-specific output).
    pub detail: Option<Arc<str>>,
    /// Text Slurm appends to the reason (`UnavailableNodes:gpu04` for `ReqNodeNotAvail`).
    pub slurm_detail: Option<String>,
    /// Expected start (s) from the reservation plan, when the job holds a reservation.
    pub expected_start: Option<Time>,
    /// Nodes of the job's reservation (Slurm's `SchedNodeList`).
    pub sched_nodes: Vec<NodeId>,
}

/// Why a running job is sent back to the queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequeueReason {
    /// A node it ran on reported a new boot epoch: the work there is gone (invariant 8).
    NodeRebooted(NodeId),
    /// A node it ran on went down.
    NodeDown(NodeId),
    /// A node it ran on was quarantined by the health policy.
    NodeQuarantined(NodeId),
}

/// Why a running job lost members without a shrink's notice ([`Decision::MembersLost`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LossReason {
    /// A node failed, rebooted or was quarantined under an elastic job that stays at or above
    /// its `min`: a membership change, not a job failure.
    Node(RequeueReason),
    /// An operator's `scontrol update NumNodes=` released nodes of a rigid job (Slurm's
    /// immediate release).
    Resized,
}

/// Kind of alert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AlertKind {
    /// A reservation cannot fill within the configured horizon (default 4 h): a capacity signal.
    ReservationCannotFill,
    /// Preemptions over the trailing hour passed the warning share of the budget (`budget_warn_pct`).
    PreemptionBudgetWarn,
    /// Measured storage bandwidth is below the floor: preemption is stopped.
    StorageDegraded,
    /// Storage bandwidth is back above the floor: preemption resumes.
    StorageRecovered,
}

/// A job a page says would be preempted, with what it would lose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageVictim {
    /// The running job.
    pub job: JobId,
    /// Its account (quota scope).
    pub account: String,
    /// GPUs it holds.
    pub gpus: u32,
    /// Seconds it has run.
    pub runtime_s: u64,
    /// Seconds since its last acknowledged checkpoint (since start when none).
    pub since_checkpoint_s: u64,
}

/// A page: the preemption budget blocks a service scale-up above its floor; a human decides.
/// Costs are in GPU-hours so the two options compare in one unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page {
    /// The service that cannot scale up.
    pub service: ServiceId,
    /// Its name ([`ServiceSpec::name`]).
    pub name: String,
    /// Replicas wanted (desired, clamped).
    pub wanted: u32,
    /// Replicas running now.
    pub have: u32,
    /// Floor (`min_replicas`); above it nothing is preempted without a human.
    pub min: u32,
    /// GPUs the blocked replicas need.
    pub gpus_blocked: u32,
    /// Preempted share of running training GPUs over the trailing hour, in percent.
    pub rate_pct: u32,
    /// The budget's paging limit, in percent.
    pub limit_pct: u32,
    /// Jobs that would be preempted to place one more replica.
    pub would_preempt: Vec<PageVictim>,
    /// Training progress lost by preempting them (GPU-hours since their last checkpoints).
    pub preempt_cost_gpu_hours: f64,
    /// Serving capacity forgone per hour by accepting the degraded state (GPU-hours/hour).
    pub degraded_cost_gpu_hours: f64,
    /// What the human can choose.
    pub actions: Vec<String>,
}


/// One decision of the core. Already applied to the model when returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Decision {
    /// Start `job` on these allocations. `backfill_for` lists the reservations whose GPUs it
    /// borrows (empty for a normal start).
    Bind {
        /// The pending job that starts.
        job: JobId,
        /// Allocations, one per node.
        allocs: Vec<Allocation>,
        /// Reservations (by job) whose GPUs the job uses as backfill.
        backfill_for: Vec<JobId>,
    },
    /// `job` holds a reservation on these GPUs, expected to fill at `est_fill`.
    Reserve {
        /// The pending job holding the reservation.
        job: JobId,
        /// GPUs held, per node.
        gpus: Vec<(NodeId, GpuMask)>,
        /// Expected start (s); `u64::MAX` when an occupant has no time limit.
        est_fill: Time,
    },
    /// The reservation of `job` was dropped (job started, cancelled, or re-planned).
    ReleaseReservation {
        /// The job whose reservation is dropped.
        job: JobId,
    },
    /// Preempt backfill job `job` now: the reservation of `for_job` is complete.
    PreemptBackfill {
        /// The backfill job to stop and requeue.
        job: JobId,
        /// The reservation that needs its GPUs.
        for_job: JobId,
    },
    /// `job` lost its allocations and goes back to the queue.
    Requeue {
        /// The job, pending again.
        job: JobId,
        /// Which node event took its allocations.
        reason: RequeueReason,
    },
    /// Preempt `job`: SIGTERM now, SIGKILL at `deadline` unless it exits first, then requeue
    /// (the driver reports [`Event::Requeued`]). Its GPUs are reserved for the preemptor.
    Preempt {
        /// The job to stop (a preemptible training job).
        job: JobId,
        /// The pending job or replica that needs its GPUs.
        for_job: JobId,
        /// The service, when the preemptor is a replica.
        for_service: Option<ServiceId>,
        /// Kill time (s): checkpoint bytes in flight / bandwidth × factor, at least the floor.
        deadline: Time,
        /// The victim's checkpoint size (bytes).
        checkpoint_bytes: u64,
        /// Bandwidth the deadline assumes (bytes/s).
        bandwidth: u64,
        /// Training progress lost, GPU-hours since its last checkpoint.
        cost_gpu_hours: f64,
    },
    /// Start a replica of `service` on these allocations.
    BindReplica {
        /// The service the replica belongs to.
        service: ServiceId,
        /// The replica's id (see [`REPLICA_ID_BASE`]).
        replica: JobId,
        /// Its allocations, one per node.
        allocs: Vec<Allocation>,
    },
    /// Stop a replica (scale-down releases the newest first). It keeps its GPUs until the
    /// driver reports [`Event::JobEnded`] for it.
    StopReplica {
        /// The service the replica belongs to.
        service: ServiceId,
        /// The replica to stop.
        replica: JobId,
    },
    /// Defragmentation: start replica `to` on `allocs`, then stop `from` once it
    /// serves; frees a partly used node for a waiting whole-node job without touching training.
    Relocate {
        /// The service whose replica moves.
        service: ServiceId,
        /// Replica to drain.
        from: JobId,
        /// The new replica's id (a fresh one, see [`REPLICA_ID_BASE`]).
        to: JobId,
        /// Where the new replica runs.
        allocs: Vec<Allocation>,
        /// The job the freed node is for.
        for_job: JobId,
    },
    /// The preemption budget blocks a scale-up above the floor: a human decides.
    Page(Box<Page>),
    /// A signal for a human.
    Alert {
        /// What the alert is about.
        kind: AlertKind,
        /// The job it concerns, if any.
        job: Option<JobId>,
        /// One line for a human, with the numbers behind the alert.
        message: String,
    },
    /// Elastic growth: `job` gains these allocations (already taken, borrowed), one round of
    /// one or more steps. The driver starts the job's launch command on the new nodes as a
    /// step and tells the job its new membership.
    Grow {
        /// The running elastic job.
        job: JobId,
        /// The added allocations, one per node.
        allocs: Vec<Allocation>,
    },
    /// Take back grown allocations of elastic `job`: their tasks get SIGTERM now and SIGKILL
    /// at `deadline`; they keep their GPUs until the driver reports [`Event::Shrunk`]. The job
    /// runs on at its smaller size.
    Shrink {
        /// The running elastic job.
        job: JobId,
        /// The leaving allocations (a grown part, newest first taken).
        allocs: Vec<AllocId>,
        /// The pending job or replica the GPUs are for; `None` for an operator's new maximum.
        for_job: Option<JobId>,
        /// Kill time (s), as a preemption's: checkpoint bytes / bandwidth × factor, at least
        /// the floor.
        deadline: Time,
    },
    /// `job` lost these allocations at once and runs on (a failed node of an elastic job
    /// still at or above its `min`; `scontrol update NumNodes=` shrinking a rigid job). They
    /// are already released.
    MembersLost {
        /// The running job.
        job: JobId,
        /// The allocations gone.
        allocs: Vec<Allocation>,
        /// Why.
        reason: LossReason,
    },
}

/// Inputs to the core.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// A new job (or a requeued one re-entering with its spec).
    Submit(JobSpec),
    /// A pending job's spec changed (hold, release, priority, dependencies, limits).
    Update(JobSpec),
    /// Remove a job, pending or running; a running job's resources are released.
    Cancel(JobId),
    /// A running job ended (completed, failed, timed out, killed): release its resources.
    JobEnded(JobId),
    /// A running job was stopped and goes back to the queue (after a preemption).
    Requeued(JobId),
    /// A node's availability changed (drain, down, quarantine, resume).
    NodeAvail {
        /// The node whose availability changed.
        node: NodeId,
        /// Its availability from now on.
        avail: NodeAvail,
    },
    /// Create or change an inference service (level-triggered: the whole spec).
    ServiceUpsert(ServiceSpec),
    /// The autoscaler's only verb: set `desired_replicas`.
    ServiceScale {
        /// The service to scale.
        service: ServiceId,
        /// Replicas wanted (clamped to `[min_replicas, max_replicas]`).
        desired: u32,
    },
    /// Delete a service: its replicas are stopped.
    ServiceDelete(ServiceId),
    /// A job acknowledged a checkpoint at `at` (s) (after SIGTERM, or periodically).
    CheckpointAck {
        /// The running job that checkpointed.
        job: JobId,
        /// When the checkpoint was written (s).
        at: Time,
    },
    /// Storage bandwidth measured for checkpoints (bytes/s).
    StorageBandwidth(u64),
    /// A node daemon registered with its boot epoch (invariant 8).
    NodeRegistered {
        /// The node that registered.
        node: NodeId,
        /// Its boot epoch.
        boot_epoch: u64,
    },
    /// Grown allocations of a [`Decision::Shrink`] have left (their tasks exited or were
    /// killed): they are released. Also how a driver reports a grown part that failed to
    /// start.
    Shrunk {
        /// The running elastic job.
        job: JobId,
        /// The allocations that left.
        allocs: Vec<AllocId>,
    },
    /// `scontrol update JobId= NumNodes=`: an elastic job's new `max` (in its unit; grown
    /// parts above it are shrunk, newest first, never below `min`), or a rigid running job's
    /// new node count (nodes beyond it are released at once, the first ones kept, as Slurm's).
    Resize {
        /// The running job.
        job: JobId,
        /// New size: nodes, or GPUs for a GPU-granular elastic job.
        size: u32,
    },
    /// `scontrol update NodeName= ActiveFeatures=`: the features `--constraint` matches on
    /// the node from now on (running jobs stay).
    NodeFeatures {
        /// The node.
        node: NodeId,
        /// Its features.
        features: Vec<String>,
    },
    /// `scontrol update PartitionName= State=`: the partition's state from now on (its
    /// pending jobs start, or wait `PartitionDown`/`PartitionInactive`; running jobs stay).
    PartitionState {
        /// The partition.
        part: PartId,
        /// Its state.
        state: crate::cluster::PartitionState,
    },
    /// `scontrol update PartitionName= MaxTime= DefaultTime=`: the partition's limits from
    /// now on (minutes; `Some(None)`: `UNLIMITED`; `None`: unchanged). Pending jobs over the
    /// new `MaxTime` wait `PartitionTimeLimit`; running jobs keep their limits; the default
    /// applies to later submissions. A `DefaultTime` above the `MaxTime` (after this event's)
    /// is ignored, as Slurm 22.05's `update_part` (partition_mgr.c) ignores it.
    PartitionTimes {
        /// The partition.
        part: PartId,
        /// Its new `MaxTime`.
        max_time_min: Option<Option<u64>>,
        /// Its new `DefaultTime` (`Some(None)`: `UNLIMITED`, kept as no default, which is
        /// the same limit under an unlimited `MaxTime`).
        default_time_min: Option<Option<u64>>,
    },
}

/// The queue discipline: how blocked jobs hold resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueMode {
    /// Strict FIFO by priority: the first job that cannot start blocks its partition.
    StrictFifo,
    /// EASY backfill: the first blocked job gets a shadow reservation, recomputed every cycle;
    /// later jobs start if they avoid it or end before it.
    EasyBackfill,
    /// Flotilla: up to `max_reservations` blocked jobs hold reservations across cycles, in a
    /// total order, with backfill on the reserved GPUs.
    HeldReservations,
}

impl QueueMode {
    /// The first job of a partition that cannot start holds back every job ranked below it
    /// in that partition (strict FIFO); they wait with reason `Priority`.
    pub fn blocks_partition(self) -> bool {
        self == QueueMode::StrictFifo
    }

    /// How many reservations may be held at once, given the configured `max_reservations`:
    /// none under strict FIFO, EASY's single shadow reservation, or `max_reservations`.
    pub fn reservation_limit(self, max_reservations: usize) -> usize {
        match self {
            QueueMode::StrictFifo => 0,
            QueueMode::EasyBackfill => 1,
            QueueMode::HeldReservations => max_reservations,
        }
    }

    /// Reservations are dropped and re-planned at the start of every cycle (EASY's shadow
    /// reservation) instead of being held across cycles.
    pub fn replans_every_cycle(self) -> bool {
        self == QueueMode::EasyBackfill
    }

    /// Jobs ranked below a reservation may start on its GPUs when they end before its fill.
    pub fn may_backfill(self) -> bool {
        self != QueueMode::StrictFifo
    }

    /// A blocked job may preempt (service replicas; jobs reclaiming their guarantee), and a
    /// reservation waiting on natural ends may be sped up by preemption.
    pub fn may_preempt(self) -> bool {
        self != QueueMode::StrictFifo
    }

    /// Service replicas may be relocated to free a whole node for a waiting job.
    pub fn may_defragment(self) -> bool {
        self != QueueMode::StrictFifo
    }
}

/// Tunables of the scheduling core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedConfig {
    /// Queue discipline (Slurm `SchedulerType`, see [`QueueMode`]).
    pub queue: QueueMode,
    /// Most reservations held at once (`HeldReservations`).
    pub max_reservations: usize,
    /// A reservation whose estimated fill is further than this (s) raises an alert (default 4 h).
    pub reservation_alert_s: u64,
    /// Time limit assumed for jobs without one, for fill estimates (s); `None` = never ends.
    pub assumed_unlimited_s: Option<u64>,
    /// No job is preempted within this many seconds of starting (default 600 s).
    pub min_runtime_s: u64,
    /// Storage bandwidth assumed until one is measured (bytes/s; default 200 GB/s).
    pub storage_bw_bytes_per_s: u64,
    /// Below this measured bandwidth (bytes/s) preemption stops and an alert fires: a
    /// preemption that cannot checkpoint is a kill.
    pub min_storage_bw_bytes_per_s: u64,
    /// Preemption deadline = checkpoint bytes in flight / bandwidth × this factor (default 3).
    pub deadline_factor: u64,
    /// Deadline floor (s), also for jobs that declare no checkpoint.
    pub min_deadline_s: u64,
    /// Concurrent preemptions are bounded so that all their checkpoints fit this deadline (s).
    pub max_deadline_s: u64,
    /// Preempted share of running training GPUs over the trailing hour above which each
    /// preemption also warns, in percent (default 10).
    pub budget_warn_pct: u32,
    /// Above this share (percent, default 25), preempt only to bring services up to `min_replicas`, and
    /// page with the decision and its cost, in percent.
    pub budget_page_pct: u32,
    /// Most service-replica relocations in flight for defragmentation.
    pub max_relocations: usize,
    /// Whole nodes held back as relocation scratch; 0 = off ([`default_swap_pool`] gives the
    /// usual size).
    pub swap_pool_nodes: usize,
    /// An elastic job grows at most once per this many seconds, counted from its start and
    /// from each membership change (default 60 s): growth is rate-limited and batched, so
    /// several new nodes join in one round.
    #[serde(default = "default_elastic_grow_interval_s")]
    pub elastic_grow_interval_s: u64,
}

fn default_elastic_grow_interval_s() -> u64 {
    60
}

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            queue: QueueMode::HeldReservations,
            max_reservations: 32,
            reservation_alert_s: 4 * 3600,
            assumed_unlimited_s: None,
            min_runtime_s: 600,
            storage_bw_bytes_per_s: 200_000_000_000,
            min_storage_bw_bytes_per_s: 10_000_000_000,
            deadline_factor: 3,
            min_deadline_s: 10,
            max_deadline_s: 120,
            budget_warn_pct: 10,
            budget_page_pct: 25,
            max_relocations: 2,
            swap_pool_nodes: 0,
            elastic_grow_interval_s: default_elastic_grow_interval_s(),
        }
    }
}

/// The usual swap pool size (`swap_pool_nodes`) for a cluster of `nodes` nodes:
/// max(1, ⌈1 % of nodes⌉).
pub fn default_swap_pool(nodes: usize) -> usize {
    nodes.div_ceil(100).max(1)
}

/// Inputs to a priority computation for one pending job.
#[derive(Debug, Clone, Copy)]
pub struct PriorityInput<'a> {
    /// The pending job.
    pub job: &'a JobSpec,
    /// Cycles in which it could not be placed.
    pub failed_cycles: u32,
    /// Its partition.
    pub partition: &'a crate::cluster::Partition,
    /// Now (s).
    pub now: Time,
    /// Multifactor inputs the core computes from accounting and the cluster.
    pub factors: FactorInput,
}

/// What the multifactor factors need beyond the job: each in Slurm's terms, normalised
/// where Slurm normalises (`priority_multifactor.c` `set_priority_factors`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FactorInput {
    /// Fair-share factor of the job's association in [0, 1] (Fair Tree rank over user
    /// associations, [`crate::fairshare::fair_tree`]); 0 without an association.
    pub fair_share: f64,
    /// The association's `Priority` (inherited) over the largest association priority, in
    /// [0, 1].
    pub assoc: f64,
    /// The QOS `Priority` over the largest QOS priority, in [0, 1] (the job's QOS is its
    /// association's default QOS, else `normal`).
    pub qos: f64,
    /// The partition's `PriorityJobFactor` over the largest, in [0, 1].
    pub partition: f64,
    /// Nodes the job asks for (`-N`, else 1).
    pub job_nodes: u32,
    /// CPUs the job asks for (all nodes).
    pub job_cpus: u64,
    /// Nodes in the cluster.
    pub cluster_nodes: u32,
    /// CPUs in the cluster.
    pub cluster_cpus: u64,
}

/// The weighted factors of a multifactor priority, as `sprio` shows them (each factor in
/// [0, 1] times its weight; for [`PriorityPolicy::weights`], the weights themselves).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PriorityFactors {
    /// `AGE`.
    pub age: f64,
    /// `ASSOC`.
    pub assoc: f64,
    /// `FAIRSHARE`.
    pub fairshare: f64,
    /// `JOBSIZE`.
    pub job_size: f64,
    /// `PARTITION`.
    pub partition: f64,
    /// `QOS`.
    pub qos: f64,
    /// `NICE`: the job's nice value (subtracted).
    pub nice: i64,
    /// Flotilla's own terms (base priority, its aging per minute, partition tier, failed
    /// cycles, preemptions), which `sprio` shows in `SITE`.
    pub site: f64,
}

/// Priority plugin: a job's priority (higher runs first). Pure.
pub trait PriorityPolicy: fmt::Debug + Send + Sync {
    /// Registered name (`PriorityType=`).
    fn name(&self) -> &str;
    /// Priority of a pending job.
    fn priority(&self, input: PriorityInput<'_>) -> u64;
    /// Whether [`PriorityPolicy::priority`] reads [`PriorityInput::factors`]; a policy that
    /// does not (`priority/basic`) is given the default inputs, which saves the order stage
    /// an association and QOS lookup per pending job. Default: true.
    fn uses_factors(&self) -> bool {
        true
    }
    /// Whether [`PriorityPolicy::priority`] reads nothing but [`PriorityInput::job`] (not
    /// `now`, the failed cycles, the partition or the factors), so a job's priority moves
    /// only when its spec does. The cycle then keeps its order and skips unchanged jobs
    /// (`priority/basic`). Default: false.
    fn is_static(&self) -> bool {
        false
    }
    /// The weighted factors behind [`PriorityPolicy::priority`] (`sprio`); `None` for a
    /// policy without factors.
    fn factors(&self, _input: PriorityInput<'_>) -> Option<PriorityFactors> {
        None
    }
    /// The weights (`sprio -w`); `None` for a policy without factors.
    fn weights(&self) -> Option<PriorityFactors> {
        None
    }
}

/// A running job as the core tracks it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningJob {
    /// Its spec as submitted (and updated while pending).
    pub spec: JobSpec,
    /// Allocations, one per node.
    pub allocs: Vec<Allocation>,
    /// Start time (s).
    pub start: Time,
    /// When its time limit ends (s); `None` = unlimited.
    pub end: Option<Time>,
    /// Reservations whose GPUs it uses as backfill.
    pub backfill_for: Vec<JobId>,
    /// A preemption has been decided and not yet carried out.
    pub preempt_pending: bool,
    /// The replica has been told to stop (scale-down or relocation) and still holds its GPUs.
    #[serde(default)]
    pub stopping: bool,
    /// Last checkpoint acknowledged by the job (s), if any.
    #[serde(default)]
    pub last_checkpoint: Option<Time>,
    /// Deadline of a pending preemption (s).
    #[serde(default)]
    pub preempt_deadline: Option<Time>,
    /// An elastic job's grown parts, oldest first: allocations above its `min`, borrowed and
    /// the first thing taken back (newest first). Empty for rigid jobs.
    #[serde(default)]
    pub grown: Vec<Growth>,
    /// When an elastic job's membership last changed (grown, shrunk, lost a node), s; growth
    /// waits `elastic_grow_interval_s` after it (and after the start).
    #[serde(default)]
    pub resized_at: Option<Time>,
    /// The last pending reason it had other than `None`, `Priority` and `Resources`
    /// ([`PendingJob::set_info`]; Slurm's `state_reason_prev_db`, which the job's accounting
    /// record gets when it starts and `sacct -o Reason` shows); `None` for none. A requeued
    /// job starts again without one, as Slurm clears it at a requeue.
    #[serde(default)]
    pub reason_prev: Option<Reason>,
}

/// One round of an elastic job's growth: the allocations it added.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Growth {
    /// The allocations added (ids into [`RunningJob::allocs`]).
    pub allocs: Vec<AllocId>,
    /// When they were added (s).
    pub at: Time,
    /// A shrink of this part has been decided: the kill deadline (s). The part keeps its GPUs
    /// until the driver reports [`Event::Shrunk`].
    pub shrinking: Option<Time>,
}

impl RunningJob {
    /// GPUs held (whole GPUs counted once per mask bit).
    pub fn gpus(&self) -> u32 {
        self.allocs.iter().map(|a| a.part.gpus.count()).sum()
    }

    /// True when allocation `id` belongs to a grown part (above an elastic job's `min`).
    pub fn is_grown(&self, id: AllocId) -> bool {
        self.grown.iter().any(|g| g.allocs.contains(&id))
    }

    /// GPUs held by grown parts (0 for a rigid job).
    pub fn grown_gpus(&self) -> u32 {
        self.allocs.iter().filter(|a| self.is_grown(a.id)).map(|a| a.part.gpus.count()).sum()
    }

    /// The job's current size in its elastic unit: distinct nodes for a node-granular (or
    /// rigid) job, GPUs for a GPU-granular one.
    pub fn size(&self) -> u32 {
        match self.spec.elastic.map(|e| e.unit) {
            Some(crate::job::ElasticUnit::Gpus) => self.gpus(),
            // One allocation per node (the core's invariant for elastic jobs).
            Some(crate::job::ElasticUnit::Nodes) => self.allocs.len() as u32,
            None => {
                let mut nodes: Vec<NodeId> = self.allocs.iter().map(|a| a.part.node).collect();
                nodes.sort_unstable();
                nodes.dedup();
                nodes.len() as u32
            }
        }
    }

    /// The service this job is a replica of, if any.
    pub fn service(&self) -> Option<ServiceId> {
        self.allocs.first().and_then(|a| match a.owner {
            Owner::Replica { service, .. } => Some(service),
            Owner::Job(_) => None,
        })
    }
}

/// A pending job as the core tracks it.
#[derive(Debug, Clone)]
pub(super) struct PendingJob {
    pub(super) spec: JobSpec,
    /// Interned request shape: equal requests share one id (`Scheduler::intern`).
    pub(super) shape: u32,
    /// Cycles in which it could not be placed (an input of the priority policy).
    pub(super) failed_cycles: u32,
    pub(super) info: PendingInfo,
    /// Priority computed in the last cycle (higher runs first).
    pub(super) priority: u64,
    /// Its multifactor accounting inputs as the order stage last resolved them (the
    /// incremental cycle only; void when their generation is not the scheduler's
    /// `acct_gen`, and cleared when the spec changes).
    pub(super) acct: Option<super::usage::JobAcct>,
    /// The last reason a cycle gave it other than `None`, `Priority` and `Resources`
    /// ([`RunningJob::reason_prev`]).
    pub(super) reason_prev: Option<Reason>,
}

impl PendingJob {
    /// A job entering the queue (again): no failed cycles, no reason yet.
    /// Sets what a cycle found, keeping the last reason worth recording in accounting:
    /// Slurm 22.05's `state_reason_prev_db` (`job_scheduler.c` `build_job_queue`, on every
    /// scheduling pass, takes a pending job's reason when it is not `None`, `Priority` or
    /// `Resources`; `sacct -o Reason` shows it).
    pub(super) fn set_info(&mut self, info: PendingInfo) {
        if !matches!(info.reason, Reason::None | Reason::Priority | Reason::Resources) {
            self.reason_prev = Some(info.reason);
        }
        self.info = info;
    }

    pub(super) fn new(spec: JobSpec, shape: u32) -> PendingJob {
        PendingJob { spec, shape, failed_cycles: 0, info: PendingInfo::default(), priority: 0, acct: None, reason_prev: None }
    }
}

/// The answer of [`Scheduler::will_run`]: when and where a job could start if nothing new
/// arrived (Slurm's will-run test behind `sbatch --test-only`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WillRun {
    /// Earliest start (s): `now` when it fits at once, else the time-limit end of the running
    /// job whose resources make it fit; without a fit, the latest time-limit end of the
    /// running jobs (`now` when none has a limit).
    pub start: Time,
    /// Where it would run, one part per node; empty when no fit was found (jobs without a
    /// time limit in the way, or a request the partition can never hold).
    pub parts: Vec<NodeAlloc>,
}

/// The rank of a pending job or reservation: (priority, submit time in s, job id). Higher
/// priority first, then earlier submission, then lower id; a reservation freezes the
/// priority it was made with.
pub type Rank = (u64, Time, JobId);

/// A held reservation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// Job it is for.
    pub job: JobId,
    /// Frozen rank key: (priority when made, submit time, job id); higher priority first.
    pub rank: Rank,
    /// GPUs held per node.
    pub gpus: Vec<(NodeId, GpuMask)>,
    /// Estimated fill time (s).
    pub est_fill: Time,
    /// Made at (s).
    pub created: Time,
    /// Needs re-planning (lost GPUs to a higher-ranked reservation, or a node failed).
    pub dirty: bool,
    /// Made by a preemption: its GPUs are being freed by preempted jobs.
    #[serde(default)]
    pub preempting: bool,
}

/// Elastic growth in one partition ([`Scheduler::reclaimable_in`]): what operators see as
/// reclaimable (`sinfo --largest`, `flotilla_elastic_reclaimable_gpus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reclaimable {
    /// GPUs elastic jobs hold above their `min` that may still be taken back.
    pub grown_gpus: u32,
    /// The partition's largest placeable requests if all of them were taken back.
    pub largest: crate::placement::LargestPlaceable,
}
