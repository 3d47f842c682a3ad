//! The scheduling core: events in, decisions out, time passed in.
//!
//! [`Scheduler`] owns the cluster model, the pending and running jobs and the held
//! reservations. Drivers (the controller, the simulator) feed it [`Event`]s and call
//! [`Scheduler::cycle`] with `now`; it returns [`Decision`]s (bind, reserve, backfill,
//! preempt-backfill, requeue, alert) and keeps a Slurm pending reason for every pending job.
//! A decision is already applied to the model when it is returned (a bind has taken its GPUs),
//! so the driver's job is to make the world match: commit, then send the RPCs.
//!
//! Gangs and reservations (seed §7, revision R2): a job that cannot start gets a reservation
//! on the resources that free up soonest; it *holds* them across cycles. Reservations are
//! totally ordered by (priority when the reservation was made — frozen —, submit time, job
//! id); a reservation may only take GPUs from reservations ranked below it, so the wait-for
//! graph has no cycle and nothing deadlocks. Jobs ranked below a reservation may run on its
//! GPUs only as *backfill*: their time limit must end before the reservation's estimated fill
//! time, and they are preempted the moment the reservation completes.
//!
//! Determinism (invariant 9): no hash-map iteration, no clock, no randomness; the same events
//! and `now` values give the same decisions.

use crate::cluster::{Cluster, GpuMask, NodeAlloc, NodeAvail, NodeId, PartId, Time, MILLI};
use crate::config::TopologyKind;
use crate::job::{HoldKind, JobId, JobSpec, Request};
use crate::placement::{self, LargestPlaceable, PlaceCtx, PlacementPolicy};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

mod services;
use services::SERVICE_PRIORITY_BASE;

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
        /// The service.
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

/// Replica ids are job ids from this value up, so they never collide with Slurm job ids.
pub const REPLICA_ID_BASE: u64 = 1 << 48;

/// A long-lived inference deployment (DESIGN.md §2): each replica is one allocation of
/// `replica`'s shape; the core keeps `desired_replicas` (clamped to `[min, max]`) running,
/// level-triggered. Replicas are never preempted; scaling up may preempt training.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceSpec {
    /// Service id.
    pub id: ServiceId,
    /// Name.
    pub name: String,
    /// Partition its replicas run in.
    pub partition: PartId,
    /// Account charged.
    pub account: String,
    /// User owning it.
    pub user: String,
    /// Shape of one replica (GPUs and topology; `node` for a replica inside one node).
    pub replica: Request,
    /// Availability floor: scaling up to it is never throttled by the preemption budget.
    pub min_replicas: u32,
    /// Ceiling.
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
    /// Owner.
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

/// Slurm's pending-reason codes, as `squeue` prints them in its `REASON` column.
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
    /// `JobHeldUser`.
    JobHeldUser,
    /// `JobHeldAdmin`.
    JobHeldAdmin,
    /// `BeginTime`: `--begin` is in the future.
    BeginTime,
    /// `PartitionTimeLimit`: the time limit exceeds the partition's `MaxTime`.
    PartitionTimeLimit,
    /// `PartitionDown`.
    PartitionDown,
    /// `PartitionNodeLimit`: the partition cannot ever provide the nodes or GPUs asked for.
    PartitionNodeLimit,
    /// `ReqNodeNotAvail`: a required node is unavailable.
    ReqNodeNotAvail,
    /// `AssocGrpGRES`: the account's quota (`MaxGPUs`) would be exceeded.
    AssocGrpGRES,
}

impl Reason {
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

/// Kind of alert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AlertKind {
    /// A reservation cannot fill within the configured horizon (default 4 h): a capacity signal.
    ReservationCannotFill,
    /// Preemptions over the trailing hour passed the warning share of the budget (seed R6).
    PreemptionBudgetWarn,
    /// Measured storage bandwidth is below the floor: preemption is stopped.
    StorageDegraded,
    /// Storage bandwidth is back above the floor: preemption resumes.
    StorageRecovered,
}

/// A job a page says would be preempted, with what it would lose (seed R6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageVictim {
    /// Job.
    pub job: JobId,
    /// Its account.
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
    /// Service.
    pub service: ServiceId,
    /// Service name.
    pub name: String,
    /// Replicas wanted (desired, clamped).
    pub wanted: u32,
    /// Replicas running.
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
        /// Job.
        job: JobId,
        /// Allocations, one per node.
        allocs: Vec<Allocation>,
        /// Reservations (by job) whose GPUs the job uses as backfill.
        backfill_for: Vec<JobId>,
    },
    /// `job` holds a reservation on these GPUs, expected to fill at `est_fill`.
    Reserve {
        /// Job.
        job: JobId,
        /// GPUs held, per node.
        gpus: Vec<(NodeId, GpuMask)>,
        /// Expected start (s); `u64::MAX` when an occupant has no time limit.
        est_fill: Time,
    },
    /// The reservation of `job` was dropped (job started, cancelled, or re-planned).
    ReleaseReservation {
        /// Job.
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
        /// Job.
        job: JobId,
        /// Why.
        reason: RequeueReason,
    },
    /// Preempt `job`: SIGTERM now, SIGKILL at `deadline` unless it exits first, then requeue
    /// (the driver reports [`Event::Requeued`]). Its GPUs are reserved for the preemptor.
    Preempt {
        /// The victim.
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
        /// Service.
        service: ServiceId,
        /// Replica id.
        replica: JobId,
        /// Allocations.
        allocs: Vec<Allocation>,
    },
    /// Stop a replica (scale-down releases the newest first). It keeps its GPUs until the
    /// driver reports [`Event::JobEnded`] for it.
    StopReplica {
        /// Service.
        service: ServiceId,
        /// Replica id.
        replica: JobId,
    },
    /// Defragmentation (seed §6, R4): start replica `to` on `allocs`, then stop `from` once it
    /// serves; frees a partly used node for a waiting whole-node job without touching training.
    Relocate {
        /// Service.
        service: ServiceId,
        /// Replica to drain.
        from: JobId,
        /// New replica.
        to: JobId,
        /// Where the new replica runs.
        allocs: Vec<Allocation>,
        /// The job the freed node is for.
        for_job: JobId,
    },
    /// The preemption budget blocks a scale-up above the floor: a human decides (seed R6).
    Page(Box<Page>),
    /// A signal for a human.
    Alert {
        /// Kind.
        kind: AlertKind,
        /// Job concerned.
        job: Option<JobId>,
        /// Text.
        message: String,
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
        /// Node.
        node: NodeId,
        /// New availability.
        avail: NodeAvail,
    },
    /// Create or change an inference service (level-triggered: the whole spec).
    ServiceUpsert(ServiceSpec),
    /// The autoscaler's only verb: set `desired_replicas`.
    ServiceScale {
        /// Service.
        service: ServiceId,
        /// Desired replicas.
        desired: u32,
    },
    /// Delete a service: its replicas are stopped.
    ServiceDelete(ServiceId),
    /// A job acknowledged a checkpoint at `at` (s) (after SIGTERM, or periodically).
    CheckpointAck {
        /// Job.
        job: JobId,
        /// When.
        at: Time,
    },
    /// Storage bandwidth measured for checkpoints (bytes/s).
    StorageBandwidth(u64),
    /// A node daemon registered with its boot epoch (invariant 8).
    NodeRegistered {
        /// Node.
        node: NodeId,
        /// Its boot epoch.
        boot_epoch: u64,
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

/// Tunables of the scheduling core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedConfig {
    /// Queue discipline.
    pub queue: QueueMode,
    /// Most reservations held at once (`HeldReservations`).
    pub max_reservations: usize,
    /// A reservation whose estimated fill is further than this (s) raises an alert (default 4 h).
    pub reservation_alert_s: u64,
    /// Time limit assumed for jobs without one, for fill estimates (s); `None` = never ends.
    pub assumed_unlimited_s: Option<u64>,
    /// No job is preempted within this many seconds of starting (seed §7: 10 min).
    pub min_runtime_s: u64,
    /// Storage bandwidth assumed until one is measured (bytes/s; seed: 200 GB/s).
    pub storage_bw_bytes_per_s: u64,
    /// Below this measured bandwidth (bytes/s) preemption stops and an alert fires: a
    /// preemption that cannot checkpoint is a kill.
    pub min_storage_bw_bytes_per_s: u64,
    /// Preemption deadline = checkpoint bytes in flight / bandwidth × this factor (seed: 3).
    pub deadline_factor: u64,
    /// Deadline floor (s), also for jobs that declare no checkpoint.
    pub min_deadline_s: u64,
    /// Concurrent preemptions are bounded so that all their checkpoints fit this deadline (s).
    pub max_deadline_s: u64,
    /// Preempted share of running training GPUs over the trailing hour above which each
    /// preemption also warns (seed: 10 %), in percent.
    pub budget_warn_pct: u32,
    /// Above this share (seed: 25 %), preempt only to bring services up to `min_replicas`, and
    /// page with the decision and its cost, in percent.
    pub budget_page_pct: u32,
    /// Most service-replica relocations in flight for defragmentation.
    pub max_relocations: usize,
    /// Whole nodes held back as relocation scratch (seed R4: max(1, ceil(1 % of nodes))); 0 = off.
    pub swap_pool_nodes: usize,
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
        }
    }
}

/// The seed's swap pool size for a cluster of `nodes` nodes: max(1, ceil(1 % of nodes)).
pub fn default_swap_pool(nodes: usize) -> usize {
    nodes.div_ceil(100).max(1)
}

/// Inputs to a priority computation for one pending job.
#[derive(Debug, Clone, Copy)]
pub struct PriorityInput<'a> {
    /// The job.
    pub job: &'a JobSpec,
    /// Cycles in which it could not be placed.
    pub failed_cycles: u32,
    /// Its partition.
    pub partition: &'a crate::cluster::Partition,
    /// Now (s).
    pub now: Time,
}

/// Priority plugin: a job's priority (higher runs first). Pure.
pub trait PriorityPolicy: fmt::Debug + Send + Sync {
    /// Registered name (`PriorityType=`).
    fn name(&self) -> &str;
    /// Priority of a pending job.
    fn priority(&self, input: PriorityInput<'_>) -> u64;
}

/// A running job as the core tracks it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningJob {
    /// Spec.
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
}

impl RunningJob {
    /// GPUs held (whole GPUs counted once per mask bit).
    pub fn gpus(&self) -> u32 {
        self.allocs.iter().map(|a| a.part.gpus.count()).sum()
    }

    /// The service this job is a replica of, if any.
    pub fn service(&self) -> Option<ServiceId> {
        self.allocs.first().and_then(|a| match a.owner {
            Owner::Replica { service, .. } => Some(service),
            Owner::Job(_) => None,
        })
    }
}

#[derive(Debug, Clone)]
struct PendingJob {
    spec: JobSpec,
    /// Interned request shape (see [`Scheduler::intern`]).
    shape: u32,
    failed_cycles: u32,
    info: PendingInfo,
    priority: u64,
}

impl PendingJob {
    /// A job entering the queue (again): no failed cycles, no reason yet.
    fn new(spec: JobSpec, shape: u32) -> PendingJob {
        PendingJob { spec, shape, failed_cycles: 0, info: PendingInfo::default(), priority: 0 }
    }
}

/// A held reservation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// Job it is for.
    pub job: JobId,
    /// Frozen rank key: (priority when made, submit time, job id); higher priority first.
    pub rank: (u64, Time, JobId),
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

/// Orders rank keys: true when `a` outranks `b`.
fn outranks(a: &(u64, Time, JobId), b: &(u64, Time, JobId)) -> bool {
    (std::cmp::Reverse(a.0), a.1, a.2) < (std::cmp::Reverse(b.0), b.1, b.2)
}

/// The scheduling core.
#[derive(Debug)]
pub struct Scheduler {
    /// The cluster model.
    pub cluster: Cluster,
    placement: Box<dyn PlacementPolicy>,
    priority: Box<dyn PriorityPolicy>,
    config: SchedConfig,
    pending: BTreeMap<JobId, PendingJob>,
    running: BTreeMap<JobId, RunningJob>,
    reservations: Vec<Reservation>,
    next_alloc: u64,
    /// Per node: (reservation job, GPUs) held there; rebuilt when reservations change.
    held: Vec<Vec<(JobId, GpuMask)>>,
    tie_rank: Option<Vec<u32>>,
    lp_cache: Option<LargestPlaceable>,
    /// Per node: the running jobs on it and when each ends by its limit (`u64::MAX` = never).
    node_jobs: Vec<Vec<(JobId, Time)>>,
    /// Per node: the latest of those ends (0 = idle); handed to placement policies.
    busy_until: Vec<Time>,
    /// Interned request shapes: equal requests share an id, for the per-cycle failure memo.
    shapes: HashMap<Request, u32>,
    /// The account tree (empty = quotas off).
    quotas: crate::quota::QuotaTree,
    /// Borrow ledger: running jobs beyond their scope's guarantee and when they started to
    /// borrow (s). Reclaimed newest first.
    borrowed: BTreeMap<JobId, Time>,
    /// GPUs used per quota scope (with descendants) by running jobs.
    scope_used: Vec<u32>,
    /// Inference services.
    services: BTreeMap<ServiceId, ServiceSpec>,
    /// Which service each replica (pending or running) belongs to.
    replica_service: BTreeMap<JobId, ServiceId>,
    next_replica: u64,
    /// Preemptions over the trailing hour: (when, GPUs), for the budget.
    preempt_ledger: VecDeque<(Time, u32)>,
    /// Measured checkpoint bandwidth (bytes/s).
    storage_bw: u64,
    storage_degraded: bool,
    /// When each service was last paged.
    paged: BTreeMap<ServiceId, Time>,
    /// Relocations in flight: new replica -> (old replica, job the freed node is for).
    relocating: BTreeMap<JobId, (JobId, JobId)>,
    /// Nodes held back as the swap pool this cycle.
    swap: Vec<NodeId>,
    /// Jobs whose reservation already raised the capacity alert.
    alerted: BTreeSet<JobId>,
    /// Some node belongs to the inference pool.
    has_inference_pool: bool,
}

/// Most preemption plans tried in one cycle (each costs a scratch copy of the cluster).
const MAX_PREEMPT_ATTEMPTS: usize = 16;

/// Memo key for a request shape that failed in this cycle: within a cycle resources only
/// shrink, so a shape that failed against the same reservations fails again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ShapeKey {
    part: PartId,
    /// Interned [`Request`].
    shape: u32,
    /// Number of reservations ranked above the job.
    blocked_by: usize,
    /// For a backfill attempt: how many of those it may borrow from.
    backfill: Option<usize>,
}

impl Scheduler {
    /// A scheduler over `cluster` with the given policies.
    pub fn new(
        cluster: Cluster,
        placement: Box<dyn PlacementPolicy>,
        priority: Box<dyn PriorityPolicy>,
        config: SchedConfig,
    ) -> Scheduler {
        let n = cluster.nodes.len();
        let mut s = Scheduler {
            storage_bw: config.storage_bw_bytes_per_s,
            cluster,
            placement,
            priority,
            config,
            pending: BTreeMap::new(),
            running: BTreeMap::new(),
            reservations: Vec::new(),
            next_alloc: 1,
            held: vec![Vec::new(); n],
            tie_rank: None,
            lp_cache: None,
            node_jobs: vec![Vec::new(); n],
            busy_until: vec![0; n],
            shapes: HashMap::new(),
            quotas: crate::quota::QuotaTree::default(),
            borrowed: BTreeMap::new(),
            scope_used: Vec::new(),
            services: BTreeMap::new(),
            replica_service: BTreeMap::new(),
            next_replica: REPLICA_ID_BASE,
            preempt_ledger: VecDeque::new(),
            storage_degraded: false,
            paged: BTreeMap::new(),
            relocating: BTreeMap::new(),
            swap: Vec::new(),
            alerted: BTreeSet::new(),
            has_inference_pool: false,
        };
        s.has_inference_pool = s.cluster.nodes.iter().any(|n| n.inference_pool);
        s
    }

    /// Sets a per-node tie-break rank (a seeded permutation; the simulator's protocol).
    pub fn set_tie_rank(&mut self, rank: Option<Vec<u32>>) {
        self.tie_rank = rank;
    }

    /// The placement policy's name.
    pub fn placement_name(&self) -> &str {
        self.placement.name()
    }

    /// The configuration.
    pub fn config(&self) -> &SchedConfig {
        &self.config
    }

    /// Running jobs.
    pub fn running(&self) -> &BTreeMap<JobId, RunningJob> {
        &self.running
    }

    /// Held reservations in rank order.
    pub fn reservations(&self) -> &[Reservation] {
        &self.reservations
    }

    /// Pending job ids.
    pub fn pending_ids(&self) -> impl Iterator<Item = JobId> + '_ {
        self.pending.keys().copied()
    }

    /// Number of pending jobs.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The spec of a pending job.
    pub fn pending_spec(&self, job: JobId) -> Option<&JobSpec> {
        self.pending.get(&job).map(|p| &p.spec)
    }

    /// Reason, detail and expected start of a pending job after the last cycle.
    pub fn pending_info(&self, job: JobId) -> Option<&PendingInfo> {
        self.pending.get(&job).map(|p| &p.info)
    }

    /// [`Scheduler::pending_info`] and the job's priority computed in the last cycle, in one
    /// lookup.
    pub fn pending_state(&self, job: JobId) -> Option<(&PendingInfo, u64)> {
        self.pending.get(&job).map(|p| (&p.info, p.priority))
    }

    /// Every live allocation.
    pub fn allocations(&self) -> impl Iterator<Item = &Allocation> {
        self.running.values().flat_map(|r| r.allocs.iter())
    }

    /// [`LargestPlaceable`] now, excluding GPUs held by reservations.
    pub fn largest_placeable(&self) -> LargestPlaceable {
        self.largest_placeable_where(&|_| true)
    }

    /// [`LargestPlaceable`] over the nodes `keep` accepts, swap-pool nodes left out, GPUs held
    /// by reservations excluded.
    pub(crate) fn largest_placeable_where(&self, keep: &dyn Fn(NodeId) -> bool) -> LargestPlaceable {
        placement::largest_placeable(&self.cluster, &|n: NodeId| {
            (keep(n) && !self.swap.contains(&n))
                .then(|| self.held[n.0 as usize].iter().fold(GpuMask::EMPTY, |m, (_, g)| m.union(*g)))
        })
    }

    /// Restores a running job (controller restart): takes its resources as recorded.
    /// Panics if they are not free (a corrupt store is a broken invariant).
    pub fn restore_running(&mut self, job: RunningJob) {
        for a in &job.allocs {
            self.cluster.take(&a.part);
            self.next_alloc = self.next_alloc.max(a.id.0 + 1);
        }
        self.note_started(&job);
        self.running.insert(job.spec.id, job);
    }

    /// Feeds one event; returns the decisions it forces at once (requeues after a reboot or
    /// a node failure).
    #[allow(clippy::only_used_in_recursion)] // `now` is part of the stable API (core II uses it)
    pub fn handle(&mut self, event: Event, now: Time) -> Vec<Decision> {
        let mut out = Vec::new();
        if self.handle_services(&event, &mut out) {
            return out;
        }
        match event {
            Event::Submit(spec) | Event::Update(spec) => {
                let id = spec.id;
                if self.running.contains_key(&id) {
                    return out;
                }
                let shape = self.intern(&spec.request);
                let entry = self.pending.entry(id).or_insert_with(|| PendingJob::new(spec.clone(), shape));
                let shape_changed = entry.spec.request != spec.request || entry.spec.partition != spec.partition;
                entry.spec = spec;
                entry.shape = shape;
                if shape_changed || entry.spec.held.is_some() {
                    self.drop_reservation(id, &mut out);
                }
            }
            Event::Cancel(id) => {
                self.pending.remove(&id);
                self.alerted.remove(&id);
                self.drop_reservation(id, &mut out);
                self.release_running(id);
            }
            Event::JobEnded(id) => {
                self.release_running(id);
            }
            Event::Requeued(id) => {
                if let Some(r) = self.release_running(id) {
                    let mut spec = r.spec;
                    spec.preempt_count += 1;
                    self.handle(Event::Submit(spec), now);
                }
            }
            Event::NodeAvail { node, avail } => {
                let requeue = match &avail {
                    NodeAvail::Down { .. } => Some(RequeueReason::NodeDown(node)),
                    NodeAvail::Quarantined { .. } => Some(RequeueReason::NodeQuarantined(node)),
                    _ => None,
                };
                self.cluster.set_avail(node, avail);
                if let Some(reason) = requeue {
                    self.requeue_node(node, reason, &mut out);
                }
                self.mark_dirty(node);
            }
            Event::ServiceUpsert(_)
            | Event::ServiceScale { .. }
            | Event::ServiceDelete(_)
            | Event::CheckpointAck { .. }
            | Event::StorageBandwidth(_) => unreachable!("handled by handle_services"),
            Event::NodeRegistered { node, boot_epoch } => {
                let old = self.cluster.node(node).boot_epoch;
                if old != boot_epoch {
                    if old != 0 {
                        self.requeue_node(node, RequeueReason::NodeRebooted(node), &mut out);
                    }
                    self.cluster.nodes[node.0 as usize].boot_epoch = boot_epoch;
                }
                if self.cluster.node(node).avail == NodeAvail::Unknown {
                    self.cluster.set_avail(node, NodeAvail::Up);
                }
                self.mark_dirty(node);
            }
        }
        out
    }

    /// The id of a request shape; equal requests share one.
    fn intern(&mut self, req: &Request) -> u32 {
        let next = self.shapes.len() as u32;
        *self.shapes.entry(req.clone()).or_insert(next)
    }

    fn mark_dirty(&mut self, node: NodeId) {
        for r in &mut self.reservations {
            if r.gpus.iter().any(|(n, _)| *n == node) {
                r.dirty = true;
            }
        }
    }

    fn requeue_node(&mut self, node: NodeId, reason: RequeueReason, out: &mut Vec<Decision>) {
        let victims: Vec<JobId> = self
            .running
            .iter()
            .filter(|(_, r)| r.allocs.iter().any(|a| a.part.node == node))
            .map(|(id, _)| *id)
            .collect();
        for id in victims {
            if let Some(r) = self.release_running(id) {
                out.push(Decision::Requeue {
                    job: id,
                    reason: reason.clone(),
                });
                let spec = r.spec;
                let shape = self.intern(&spec.request);
                self.pending.insert(
                    id,
                    PendingJob::new(spec, shape),
                );
            }
        }
    }

    fn release_running(&mut self, id: JobId) -> Option<RunningJob> {
        let r = self.running.remove(&id)?;
        self.lp_cache = None;
        self.forget_running(id);
        for a in &r.allocs {
            self.cluster.give_back(&a.part);
            let i = a.part.node.0 as usize;
            self.node_jobs[i].retain(|(j, _)| *j != id);
            self.busy_until[i] = self.node_jobs[i].iter().map(|(_, e)| *e).max().unwrap_or(0);
        }
        Some(r)
    }

    fn note_started(&mut self, job: &RunningJob) {
        let end = job.end.unwrap_or(Time::MAX);
        for a in &job.allocs {
            let i = a.part.node.0 as usize;
            self.node_jobs[i].push((job.spec.id, end));
            self.busy_until[i] = self.busy_until[i].max(end);
        }
    }

    fn drop_reservation(&mut self, job: JobId, out: &mut Vec<Decision>) {
        if let Some(i) = self.reservations.iter().position(|r| r.job == job) {
            self.reservations.remove(i);
            out.push(Decision::ReleaseReservation { job });
            self.rebuild_held();
            // Backfill borrowed from this reservation becomes ordinary work: a re-planned
            // reservation counts it as an occupant with its own end time.
            for r in self.running.values_mut() {
                r.backfill_for.retain(|j| *j != job);
                for a in &mut r.allocs {
                    if a.backfill_for == Some(job) {
                        a.backfill_for = None;
                    }
                }
            }
        }
    }

    fn rebuild_held(&mut self) {
        self.lp_cache = None;
        for h in &mut self.held {
            h.clear();
        }
        for r in &self.reservations {
            for &(n, g) in &r.gpus {
                self.held[n.0 as usize].push((r.job, g));
            }
        }
    }

    /// GPUs of `node` held by reservations that outrank `rank` (all reservations when `None`).
    fn blocked_for(&self, node: NodeId, rank: Option<&(u64, Time, JobId)>, backfill_end: Option<Time>) -> GpuMask {
        let mut m = GpuMask::EMPTY;
        for (job, g) in &self.held[node.0 as usize] {
            let Some(r) = self.reservations.iter().find(|r| r.job == *job) else {
                continue;
            };
            if let Some(rank) = rank {
                if !outranks(&r.rank, rank) {
                    continue;
                }
            }
            if let Some(end) = backfill_end {
                if end <= r.est_fill {
                    continue;
                }
            }
            m = m.union(*g);
        }
        m
    }

    /// One scheduling cycle at `now`: priority, reservations, placement and backfill.
    pub fn cycle(&mut self, now: Time) -> Vec<Decision> {
        let mut out = Vec::new();
        self.lp_cache = None;
        // 0. Quotas, services, swap pool.
        self.refresh_quota(now);
        self.reconcile_services(now, &mut out);
        self.choose_swap();
        // 1. Priorities and eligibility.
        let mut order: Vec<((u64, Time, JobId), JobId)> = Vec::with_capacity(self.pending.len());
        for (id, p) in self.pending.iter_mut() {
            let part = &self.cluster.partitions[p.spec.partition.0 as usize];
            let replica = self.replica_service.contains_key(id);
            p.priority = if replica {
                SERVICE_PRIORITY_BASE + u64::from(p.spec.base_priority)
            } else {
                self.priority.priority(PriorityInput {
                    job: &p.spec,
                    failed_cycles: p.failed_cycles,
                    partition: part,
                    now,
                })
            };
            let reason = if let Some(h) = p.spec.held {
                Some(match h {
                    HoldKind::User => Reason::JobHeldUser,
                    HoldKind::Admin => Reason::JobHeldAdmin,
                })
            } else if p.spec.dependency_pending {
                Some(Reason::Dependency)
            } else if p.spec.begin_time.is_some_and(|b| b > now) {
                Some(Reason::BeginTime)
            } else if !part.up {
                Some(Reason::PartitionDown)
            } else if replica {
                None
            } else if let (Some(limit), Some(max)) = (p.spec.time_limit_s, part.max_time_min) {
                (limit > max * 60).then_some(Reason::PartitionTimeLimit)
            } else if p.spec.time_limit_s.is_none() && part.max_time_min.is_some() {
                Some(Reason::PartitionTimeLimit)
            } else {
                None
            };
            let mut slurm_detail = None;
            let reason = reason.or_else(|| {
                let down: Vec<String> = p
                    .spec
                    .request
                    .required_nodes
                    .iter()
                    .filter(|n| !self.cluster.node(**n).avail.schedulable())
                    .map(|n| self.cluster.node(*n).name.clone())
                    .collect();
                if down.is_empty() {
                    return None;
                }
                slurm_detail = Some(format!("UnavailableNodes:{}", crate::hostlist::compress(&down)));
                Some(Reason::ReqNodeNotAvail)
            });
            if let Some(reason) = reason {
                p.info = PendingInfo {
                    reason,
                    detail: None,
                    expected_start: None,
                    sched_nodes: Vec::new(),
                    slurm_detail,
                };
                continue;
            }
            let key = self
                .reservations
                .iter()
                .find(|r| r.job == *id)
                .map(|r| r.rank)
                .unwrap_or((p.priority, p.spec.submit_time, *id));
            order.push((key, *id));
        }
        order.sort_by_key(|(k, _)| (std::cmp::Reverse(k.0), k.1, k.2));

        // Reservations of jobs no longer eligible (held meanwhile) are dropped.
        let eligible: BTreeSet<JobId> = order.iter().map(|(_, id)| *id).collect();
        let stale: Vec<JobId> = self
            .reservations
            .iter()
            .filter(|r| !eligible.contains(&r.job))
            .map(|r| r.job)
            .collect();
        for j in stale {
            self.drop_reservation(j, &mut out);
        }
        if self.config.queue == QueueMode::EasyBackfill {
            // EASY: the shadow reservation is recomputed every cycle.
            let shadows: Vec<JobId> = self.reservations.iter().map(|r| r.job).collect();
            for j in shadows {
                self.drop_reservation(j, &mut out);
            }
        }

        let mut failed: HashMap<ShapeKey, Arc<str>> = HashMap::new();
        let mut preempt_attempts = 0usize;
        let mut waiting: Vec<(JobId, (u64, Time, JobId))> = Vec::new();
        let mut blocked_parts: BTreeSet<PartId> = BTreeSet::new();
        let mut first_blocked: BTreeSet<PartId> = BTreeSet::new();

        for (key, id) in order {
            let Some(p) = self.pending.get(&id) else { continue };
            let part = p.spec.partition;
            let shape_id = p.shape;
            let limit = p.spec.time_limit_s;
            let reservable = !p.spec.request.is_share() && p.spec.request.gpus > 0;
            if self.config.queue == QueueMode::StrictFifo && blocked_parts.contains(&part) {
                self.set_info(id, Reason::Priority, None, None, Vec::new());
                continue;
            }
            // Quota ceiling: the scope or an ancestor would pass its MaxGPUs.
            if !self.quotas.is_empty() && !self.replica_service.contains_key(&id) && self.over_max(&self.pending[&id].spec) {
                self.set_info(id, Reason::AssocGrpGRES, None, None, Vec::new());
                continue;
            }
            // A job that holds a reservation: complete it when its GPUs are free.
            if let Some(ri) = self.reservations.iter().position(|r| r.job == id) {
                if !self.reservations[ri].dirty {
                    if self.try_complete_reservation(ri, now, &mut out) {
                        continue;
                    }
                    // Resources elsewhere may have freed sooner than the reserved ones.
                    if let Ok(parts) = self.try_place(now, &self.pending[&id].spec, Some(&key), None) {
                        let spec = self.pending[&id].spec.clone();
                        self.drop_reservation(id, &mut out);
                        self.bind(&spec, parts, Vec::new(), now, &mut out);
                        continue;
                    }
                    // A reservation waiting on natural ends may be sped up by preemption.
                    if !self.reservations[ri].preempting
                        && preempt_attempts < MAX_PREEMPT_ATTEMPTS
                        && self.config.queue != QueueMode::StrictFifo
                    {
                        preempt_attempts += 1;
                        self.try_preempt(id, key, now, &mut out);
                    }
                    let Some(r) = self.reservations.iter().find(|r| r.job == id) else { continue };
                    let (est, nodes) = (r.est_fill, r.gpus.iter().map(|(n, _)| *n).collect());
                    let reason = if first_blocked.insert(part) { Reason::Resources } else { Reason::Priority };
                    self.set_info(id, reason, None, Some(est), nodes);
                    continue;
                }
                self.drop_reservation(id, &mut out);
            }
            // Reservations are sorted by rank: the ones above this job are a prefix.
            let n_above = self.reservations.iter().take_while(|r| outranks(&r.rank, &key)).count();
            let shape = ShapeKey { part, shape: shape_id, blocked_by: n_above, backfill: None };
            let mut detail = failed.get(&shape).cloned();
            if detail.is_none() {
                match self.try_place(now, &self.pending[&id].spec, Some(&key), None) {
                    Ok(parts) => {
                        let spec = self.pending[&id].spec.clone();
                        self.bind(&spec, parts, Vec::new(), now, &mut out);
                        continue;
                    }
                    Err(nofit) => {
                        let lp = match self.lp_cache {
                            Some(lp) => lp,
                            None => {
                                let lp = self.largest_placeable();
                                self.lp_cache = Some(lp);
                                lp
                            }
                        };
                        let d: Arc<str> = Arc::from(format!("{}; largest_placeable {}", nofit.detail, lp));
                        failed.insert(shape, d.clone());
                        detail = Some(d);
                    }
                }
            }
            // Backfill onto reserved GPUs: only jobs that end before the fill. The reservations
            // whose GPUs a job may borrow are those above it that fill after it ends; for a
            // given prefix they nest by end time, so their count identifies the set.
            if self.config.queue != QueueMode::StrictFifo && n_above > 0 {
                if let Some(limit) = limit {
                    let end = now + limit;
                    let allowed = self.reservations[..n_above].iter().filter(|r| end <= r.est_fill).count();
                    let bkey = ShapeKey { part, shape: shape_id, blocked_by: n_above, backfill: Some(allowed) };
                    if allowed > 0 && !failed.contains_key(&bkey) {
                        match self.try_place(now, &self.pending[&id].spec, Some(&key), Some(end)) {
                            Ok(parts) => {
                                // The reservations ranked above this job whose GPUs (or, for
                                // CPU-only work, whose wholly held node) it borrows.
                                let mut users: BTreeSet<JobId> = BTreeSet::new();
                                for part in &parts {
                                    let node_gpus = self.cluster.node(part.node).gpus;
                                    for (j, g) in &self.held[part.node.0 as usize] {
                                        let above = self.reservations[..n_above].iter().any(|r| r.job == *j);
                                        let borrows = !g.intersect(part.gpus).is_empty()
                                            || (part.gpus.is_empty() && g.count() == node_gpus);
                                        if above && borrows {
                                            users.insert(*j);
                                        }
                                    }
                                }
                                let spec = self.pending[&id].spec.clone();
                                self.bind(&spec, parts, users.into_iter().collect(), now, &mut out);
                                continue;
                            }
                            Err(_) => {
                                failed.entry(bkey).or_insert_with(|| Arc::from(""));
                            }
                        }
                    }
                }
            }
            // Make room by preemption (services; jobs reclaiming their guarantee).
            if preempt_attempts < MAX_PREEMPT_ATTEMPTS && self.config.queue != QueueMode::StrictFifo {
                let pkey = ShapeKey { part, shape: shape_id, blocked_by: usize::MAX, backfill: None };
                if !failed.contains_key(&pkey) {
                    preempt_attempts += 1;
                    if self.try_preempt(id, key, now, &mut out) {
                        let r = self.reservations.iter().find(|r| r.job == id);
                        let (est, nodes) = r.map_or((None, Vec::new()), |r| (Some(r.est_fill), r.gpus.iter().map(|(n, _)| *n).collect()));
                        let reason = if first_blocked.insert(part) { Reason::Resources } else { Reason::Priority };
                        self.set_info(id, reason, detail, est, nodes);
                        continue;
                    }
                    if !self.replica_service.contains_key(&id) {
                        failed.entry(pkey).or_insert_with(|| Arc::from(""));
                    }
                }
            }
            // Blocked.
            if let Some(p) = self.pending.get_mut(&id) {
                p.failed_cycles = p.failed_cycles.saturating_add(1);
            }
            {
                let req = &self.pending[&id].spec.request;
                let size = placement::node_size(&self.cluster, part);
                if req.topology == TopologyKind::Node && req.gpus > 0 && req.gpus <= size && !req.is_share() && waiting.len() < 4 {
                    waiting.push((id, key));
                }
            }
            let reason = if first_blocked.insert(part) { Reason::Resources } else { Reason::Priority };
            if self.config.queue == QueueMode::StrictFifo {
                blocked_parts.insert(part);
            }
            let wants_resv = match self.config.queue {
                QueueMode::StrictFifo => false,
                QueueMode::EasyBackfill => self.reservations.is_empty(),
                QueueMode::HeldReservations => self.reservations.len() < self.config.max_reservations,
            };
            let mut est = None;
            let mut nodes = Vec::new();
            if wants_resv && reservable {
                if let Some(r) = self.plan_reservation(&self.pending[&id].spec, key, now) {
                    est = Some(r.est_fill);
                    nodes = r.gpus.iter().map(|(n, _)| *n).collect();
                    self.add_reservation(r, now, &mut out);
                }
            }
            self.set_info(id, reason, detail, est, nodes);
        }
        if self.config.queue != QueueMode::StrictFifo {
            self.defragment(&waiting, now, &mut out);
        }
        out
    }

    fn set_info(&mut self, id: JobId, reason: Reason, detail: Option<Arc<str>>, est: Option<Time>, nodes: Vec<NodeId>) {
        if let Some(p) = self.pending.get_mut(&id) {
            p.info = PendingInfo {
                reason,
                detail,
                expected_start: est,
                sched_nodes: nodes,
                slurm_detail: None,
            };
        }
    }

    fn try_place(
        &self,
        now: Time,
        spec: &JobSpec,
        rank: Option<&(u64, Time, JobId)>,
        backfill_end: Option<Time>,
    ) -> Result<Vec<NodeAlloc>, placement::NoFit> {
        // Inference pool (seed R1): replicas try the pool first; training may use pool nodes
        // only when preemptible (as borrowed capacity).
        let replica = self.replica_service.contains_key(&spec.id);
        if replica && self.has_inference_pool {
            if let Ok(p) = self.try_place_in(now, spec, rank, backfill_end, Some(true)) {
                return Ok(p);
            }
        }
        let pool_rule = if replica || spec.preemptible { None } else { Some(false) };
        self.try_place_in(now, spec, rank, backfill_end, pool_rule)
    }

    /// Placement with an optional inference-pool restriction: `Some(true)` = pool nodes only,
    /// `Some(false)` = no pool nodes.
    fn try_place_in(
        &self,
        now: Time,
        spec: &JobSpec,
        rank: Option<&(u64, Time, JobId)>,
        backfill_end: Option<Time>,
        pool: Option<bool>,
    ) -> Result<Vec<NodeAlloc>, placement::NoFit> {
        let blocked = |n: NodeId| {
            if self.swap.contains(&n) {
                return GpuMask::all(64);
            }
            if pool.is_some_and(|want| self.cluster.node(n).inference_pool != want) {
                return GpuMask::all(64);
            }
            let m = self.blocked_for(n, rank, backfill_end);
            // A node wholly held by a reservation takes no CPU-only work either.
            if !m.is_empty() && m.count() == self.cluster.node(n).gpus && spec.request.gpus == 0 {
                return GpuMask::all(64);
            }
            m
        };
        let ctx = PlaceCtx {
            cluster: &self.cluster,
            blocked: &blocked,
            tie_rank: self.tie_rank.as_deref(),
            partition: spec.partition,
            job_end: spec.time_limit_s.map(|l| now + l),
            busy_until: Some(&self.busy_until),
        };
        if spec.request.gpus == 0 {
            // CPU-only work must not land on wholly held nodes.
            let mut req = spec.request.clone();
            for n in 0..self.cluster.nodes.len() as u32 {
                let b = blocked(NodeId(n));
                if b.count() == 64 && !req.excluded_nodes.contains(&NodeId(n)) {
                    req.excluded_nodes.push(NodeId(n));
                }
            }
            return placement::place(&ctx, self.placement.as_ref(), &req);
        }
        placement::place(&ctx, self.placement.as_ref(), &spec.request)
    }

    fn bind(&mut self, spec: &JobSpec, parts: Vec<NodeAlloc>, backfill_for: Vec<JobId>, now: Time, out: &mut Vec<Decision>) {
        let mut allocs = Vec::with_capacity(parts.len());
        self.lp_cache = None;
        for part in &parts {
            for (j, g) in &self.held[part.node.0 as usize] {
                if !g.intersect(part.gpus).is_empty() && !backfill_for.contains(j) && *j != spec.id {
                    if let Some(r) = self.reservations.iter_mut().find(|r| r.job == *j) {
                        r.dirty = true;
                    }
                }
            }
        }
        let service = self.replica_service.get(&spec.id).copied();
        let owner = match service {
            Some(service) => Owner::Replica { service, replica: spec.id },
            None => Owner::Job(spec.id),
        };
        let mut gpus = 0;
        for part in parts {
            self.cluster.take(&part);
            gpus += part.gpus.count();
            let on_pool = self.cluster.node(part.node).inference_pool;
            allocs.push(Allocation {
                id: AllocId(self.next_alloc),
                owner,
                part,
                created_at: now,
                preemptible: spec.preemptible && service.is_none(),
                borrowed: service.is_none() && on_pool,
                backfill_for: backfill_for.first().copied(),
            });
            self.next_alloc += 1;
        }
        self.pending.remove(&spec.id);
        self.alerted.remove(&spec.id);
        let end = spec.time_limit_s.map(|l| now + l);
        match service {
            Some(service) => out.push(Decision::BindReplica { service, replica: spec.id, allocs: allocs.clone() }),
            None => {
                self.charge(spec, gpus, now);
                out.push(Decision::Bind {
                    job: spec.id,
                    allocs: allocs.clone(),
                    backfill_for: backfill_for.clone(),
                });
            }
        }
        let run = RunningJob {
            spec: spec.clone(),
            allocs,
            start: now,
            end,
            backfill_for,
            preempt_pending: false,
            stopping: false,
            last_checkpoint: None,
            preempt_deadline: None,
        };
        self.note_started(&run);
        self.running.insert(spec.id, run);
    }

    fn add_reservation(&mut self, r: Reservation, now: Time, out: &mut Vec<Decision>) {
        // Take GPUs from lower-ranked reservations (only those may be taken: invariant 5).
        for other in &mut self.reservations {
            if other.job == r.job {
                continue;
            }
            let overlaps = other.gpus.iter().any(|(n, g)| {
                r.gpus
                    .iter()
                    .any(|(rn, rg)| rn == n && !rg.intersect(*g).is_empty())
            });
            if overlaps {
                debug_assert!(outranks(&r.rank, &other.rank), "reservation stole from a higher rank");
                other.dirty = true;
                for (n, g) in &mut other.gpus {
                    for (rn, rg) in &r.gpus {
                        if rn == n {
                            *g = g.minus(*rg);
                        }
                    }
                }
                other.gpus.retain(|(_, g)| !g.is_empty());
            }
        }
        out.push(Decision::Reserve {
            job: r.job,
            gpus: r.gpus.clone(),
            est_fill: r.est_fill,
        });
        // One alert per job until it starts, however often its reservation is re-planned.
        if r.est_fill.saturating_sub(now) > self.config.reservation_alert_s && self.alerted.insert(r.job) {
            out.push(Decision::Alert {
                kind: AlertKind::ReservationCannotFill,
                job: Some(r.job),
                message: format!(
                    "reservation for job {} cannot fill within {} s (estimated fill {})",
                    r.job,
                    self.config.reservation_alert_s,
                    if r.est_fill == Time::MAX {
                        "never: an occupant has no time limit".to_string()
                    } else {
                        format!("in {} s", r.est_fill - now)
                    }
                ),
            });
        }
        let pos = self
            .reservations
            .iter()
            .position(|o| outranks(&r.rank, &o.rank))
            .unwrap_or(self.reservations.len());
        self.reservations.insert(pos, r);
        self.rebuild_held();
    }

    /// Binds the reservation's job when all its GPUs are free; asks backfill occupants to
    /// leave when only they remain. Returns true when bound.
    fn try_complete_reservation(&mut self, ri: usize, now: Time, out: &mut Vec<Decision>) -> bool {
        let r = self.reservations[ri].clone();
        let mut occupants: BTreeSet<JobId> = BTreeSet::new();
        let mut busy_non_backfill = false;
        for &(n, g) in &r.gpus {
            let node = self.cluster.node(n);
            if !node.avail.schedulable() {
                self.reservations[ri].dirty = true;
                return false;
            }
            if node.free_gpus.contains_all(g) {
                continue;
            }
            for (id, run) in &self.running {
                if run.allocs.iter().any(|a| a.part.node == n && !a.part.gpus.intersect(g).is_empty()) {
                    if run.backfill_for.is_empty() {
                        busy_non_backfill = true;
                    } else {
                        occupants.insert(*id);
                    }
                }
            }
        }
        if busy_non_backfill {
            return false;
        }
        if !occupants.is_empty() {
            // The reservation fills now: no new backfill may start on its GPUs while its
            // occupants leave (else the freed GPUs are backfilled again in the same cycle,
            // and the reservation never completes). Every job borrowing from it (also CPU-only
            // work on its wholly held nodes) is preempted: its fill time has come (invariant 6).
            self.reservations[ri].est_fill = now;
            for (id, run) in &self.running {
                if run.backfill_for.contains(&r.job) {
                    occupants.insert(*id);
                }
            }
            for id in occupants {
                if let Some(run) = self.running.get_mut(&id) {
                    if !run.preempt_pending {
                        run.preempt_pending = true;
                        out.push(Decision::PreemptBackfill { job: id, for_job: r.job });
                    }
                }
            }
            return false;
        }
        let Some(p) = self.pending.get(&r.job) else {
            return false;
        };
        let spec = p.spec.clone();
        let req = &spec.request;
        let mut parts = Vec::new();
        for &(n, g) in &r.gpus {
            let node = self.cluster.node(n);
            let (cpu, mem) = if req.exclusive {
                (node.cpu_milli, node.mem_mib)
            } else {
                (req.cpu_milli_per_node, req.mem_mib_per_node)
            };
            if node.free_cpu_milli < cpu || node.free_mem_mib < mem {
                self.reservations[ri].dirty = true;
                return false;
            }
            parts.push(NodeAlloc {
                node: n,
                gpus: g,
                gpu_milli: MILLI,
                cpu_milli: cpu,
                mem_mib: mem,
            });
        }
        self.drop_reservation(r.job, out);
        self.bind(&spec, parts, Vec::new(), now, out);
        true
    }

    /// When each GPU of `node` becomes free (s), for reservation planning; `None` = held by a
    /// reservation ranked above, or never.
    fn gpu_ready_times(&self, node: NodeId, rank: &(u64, Time, JobId), now: Time, ends: &BTreeMap<(NodeId, u32), Time>) -> Vec<Option<Time>> {
        let n = self.cluster.node(node);
        let above = self.blocked_for(node, Some(rank), None);
        (0..n.gpus)
            .map(|g| {
                if above.contains(g) {
                    None
                } else if n.free_gpus.contains(g) {
                    Some(now)
                } else {
                    ends.get(&(node, g)).copied().or(Some(Time::MAX))
                }
            })
            .collect()
    }

    /// Plans a reservation for a blocked job: the GPUs that free up soonest in the job's
    /// shape and topology, never GPUs of a reservation ranked above it.
    fn plan_reservation(&self, spec: &JobSpec, rank: (u64, Time, JobId), now: Time) -> Option<Reservation> {
        let req = &spec.request;
        let part = &self.cluster.partitions[spec.partition.0 as usize];
        let size = placement::node_size(&self.cluster, spec.partition);
        // End time of the occupant of each GPU (backfill occupants leave when the fill
        // completes, so they do not delay it).
        let mut ends: BTreeMap<(NodeId, u32), Time> = BTreeMap::new();
        for run in self.running.values() {
            let end = if !run.backfill_for.is_empty() {
                now
            } else {
                run.end
                    .or(self.config.assumed_unlimited_s.map(|s| run.start + s))
                    .unwrap_or(Time::MAX)
                    .max(now)
            };
            for a in &run.allocs {
                for g in a.part.gpus.iter() {
                    let e = ends.entry((a.part.node, g)).or_insert(end);
                    *e = (*e).max(end);
                }
            }
        }
        // Per node: (time when k GPUs are ready, the k earliest GPUs) for the per-node demand.
        let per_node = |gpn: u32| -> Vec<(Time, NodeId, GpuMask)> {
            let mut v = Vec::new();
            for &id in &part.nodes {
                let n = self.cluster.node(id);
                if !n.avail.schedulable() || n.gpus < gpn || !n.gpu_type_ok(&req.gpu_types) {
                    continue;
                }
                // The inference pool takes non-preemptible training never; the swap pool
                // takes no normal work.
                if (n.inference_pool && !spec.preemptible && !self.replica_service.contains_key(&spec.id))
                    || self.swap.contains(&id)
                {
                    continue;
                }
                if req.excluded_nodes.contains(&id) || (!req.required_nodes.is_empty() && !req.required_nodes.contains(&id)) {
                    continue;
                }
                if n.cpu_milli < req.cpu_milli_per_node || n.mem_mib < req.mem_mib_per_node {
                    continue;
                }
                let times = self.gpu_ready_times(id, &rank, now, &ends);
                let mut gs: Vec<(Time, u32)> = times
                    .iter()
                    .enumerate()
                    .filter_map(|(g, t)| t.map(|t| (t, g as u32)))
                    .collect();
                if (gs.len() as u32) < gpn {
                    continue;
                }
                gs.sort_unstable();
                let chosen = &gs[..gpn as usize];
                let t = chosen.last().map_or(now, |c| c.0);
                let mask = chosen.iter().fold(GpuMask::EMPTY, |m, (_, g)| m.union(GpuMask::single(*g)));
                v.push((t, id, mask));
            }
            v.sort_by_key(|&(t, id, _)| (t, self.cluster.node(id).pod, id));
            v
        };
        let (count, gpn) = match placement::shape_of(req, size).ok()? {
            placement::Shape::Uniform { count, gpus_each, .. } => (count, gpus_each),
            // Whole nodes plus a remainder: plan one more whole node and trim it below.
            placement::Shape::WholePlusRest { whole, rest, .. } => (whole + u32::from(rest > 0), size),
        };
        let cands = per_node(gpn);
        let pick = |cands: &[(Time, NodeId, GpuMask)]| -> Option<Vec<(Time, NodeId, GpuMask)>> {
            (cands.len() >= count as usize).then(|| cands[..count as usize].to_vec())
        };
        let chosen = if req.topology == TopologyKind::Pod {
            let mut best: Option<Vec<(Time, NodeId, GpuMask)>> = None;
            for p in 0..self.cluster.pods.len() as u32 {
                let inpod: Vec<_> = cands
                    .iter()
                    .filter(|(_, id, _)| self.cluster.node(*id).pod.0 == p)
                    .cloned()
                    .collect();
                if let Some(c) = pick(&inpod) {
                    let t = c.iter().map(|x| x.0).max().unwrap_or(now);
                    if best.as_ref().is_none_or(|b| t < b.iter().map(|x| x.0).max().unwrap_or(now)) {
                        best = Some(c);
                    }
                }
            }
            best?
        } else {
            pick(&cands)?
        };
        let est_fill = chosen.iter().map(|c| c.0).max().unwrap_or(now);
        let mut gpus: Vec<(NodeId, GpuMask)> = chosen.iter().map(|c| (c.1, c.2)).collect();
        // Trim the remainder node of a whole-plus-rest shape to the GPUs really needed.
        let total: u32 = gpus.iter().map(|(_, g)| g.count()).sum();
        if total > req.gpus && req.gpus_per_node.is_none() && !req.exclusive {
            if let Some(last) = gpus.last_mut() {
                let extra = total - req.gpus;
                let keep = last.1.count() - extra;
                last.1 = GpuMask(last.1.iter().take(keep as usize).fold(0, |m, g| m | (1 << g)));
            }
        }
        gpus.sort_by_key(|(n, _)| *n);
        Some(Reservation {
            job: spec.id,
            rank,
            gpus,
            est_fill,
            created: now,
            dirty: false,
            preempting: false,
        })
    }

    /// Checks the invariants of DESIGN.md §4 that the core owns (1, 2, 3, 5, 6, 8), returning
    /// the first violation. Used after every cycle by tests and, in debug builds, the simulator.
    pub fn check_invariants(&self) -> Result<(), String> {
        crate::cluster::check_accounting(&self.cluster, self.allocations().map(|a| &a.part))?;
        for (id, r) in &self.running {
            // 2: all or nothing — the GPUs held are exactly what was asked.
            let req = &r.spec.request;
            let held: u32 = r.allocs.iter().map(|a| a.part.gpus.count()).sum();
            let size = placement::node_size(&self.cluster, r.spec.partition);
            let want = if req.exclusive {
                r.allocs.len() as u32 * size
            } else if let Some(gpn) = req.gpus_per_node {
                gpn * r.allocs.len() as u32
            } else {
                req.gpus
            };
            if held != want {
                return Err(format!("job {id} holds {held} GPUs, asked for {want}"));
            }
            // 3: topology.
            let nodes: BTreeSet<NodeId> = r.allocs.iter().map(|a| a.part.node).collect();
            if nodes.len() != r.allocs.len() {
                return Err(format!("job {id} has two allocations on one node"));
            }
            match req.topology {
                TopologyKind::Node if req.gpus_per_node.is_none() => {
                    if req.gpus <= size && nodes.len() > 1 {
                        return Err(format!("node-topology job {id} spans nodes"));
                    }
                    if nodes.len() > 1 && r.allocs.iter().any(|a| a.part.gpus.count() != self.cluster.node(a.part.node).gpus) {
                        return Err(format!("node-topology job {id} split a node"));
                    }
                }
                TopologyKind::Pod => {
                    let pods: BTreeSet<_> = nodes.iter().map(|n| self.cluster.node(*n).pod).collect();
                    if pods.len() > 1 {
                        return Err(format!("pod-topology job {id} spans pods"));
                    }
                }
                _ => {}
            }
            // 8: nothing lives on a node whose epoch changed (requeue happens at once), and
            // nothing runs on a down node.
            for a in &r.allocs {
                if matches!(self.cluster.node(a.part.node).avail, NodeAvail::Down { .. }) {
                    return Err(format!("job {id} holds an allocation on down node"));
                }
            }
            // 6: backfill on reserved GPUs ends before the fill estimate of each reservation
            // whose GPUs it uses.
            for res in &self.reservations {
                if !r.backfill_for.contains(&res.job) {
                    continue;
                }
                if let Some(end) = r.end {
                    if end > res.est_fill && res.created <= r.start && !r.preempt_pending {
                        return Err(format!("backfill job {id} ends after the fill of {}", res.job));
                    }
                }
            }
        }
        // 5: reservations are sorted by rank and disjoint.
        for w in self.reservations.windows(2) {
            if !outranks(&w[0].rank, &w[1].rank) {
                return Err("reservations out of rank order".into());
            }
        }
        let mut seen: BTreeMap<NodeId, GpuMask> = BTreeMap::new();
        for r in &self.reservations {
            for &(n, g) in &r.gpus {
                let s = seen.entry(n).or_default();
                if !s.intersect(g).is_empty() {
                    return Err(format!("reservations overlap on node {}", self.cluster.node(n).name));
                }
                *s = s.union(g);
            }
        }
        Ok(())
    }
}
