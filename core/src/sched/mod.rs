//! The scheduling core: events in, decisions out, time passed in.
//!
//! [`Scheduler`] owns the cluster model, the pending and running jobs and the held
//! reservations. Drivers (the controller, the simulator) feed it [`Event`]s and call
//! [`Scheduler::cycle`] with `now`; it returns [`Decision`]s (bind, reserve, backfill,
//! preempt-backfill, requeue, alert) and keeps a Slurm pending reason for every pending job.
//! A decision is already applied to the model when it is returned (a bind has taken its GPUs),
//! so the driver's job is to make the world match: commit, then send the RPCs.
//!
//! Gangs and reservations: a job that cannot start gets a reservation
//! on the resources that free up soonest; it *holds* them across cycles. Reservations are
//! totally ordered by (priority when the reservation was made — frozen —, submit time, job
//! id); a reservation may only take GPUs from reservations ranked below it, so the wait-for
//! graph has no cycle and nothing deadlocks. Jobs ranked below a reservation may run on its
//! GPUs only as *backfill*: their time limit must end before the reservation's estimated fill
//! time, and they are preempted the moment the reservation completes.
//!
//! Determinism (invariant 9): no hash-map iteration, no clock, no randomness; the same events
//! and `now` values give the same decisions.
//!
//! Map: `types` holds the data drivers see; `cycle` the stages of one cycle;
//! `eligibility` priorities and the reasons a job may not be considered; `placing` placement
//! against held reservations and binding; `reservations` the reservation planner, its
//! ordering and [`Scheduler::will_run`]; `quota` the account tree's usage and borrowing; `limits` the accounting limits
//! (associations, QOS); `usage` fair-share usage and the multifactor inputs;
//! `preemption` preemption as a budgeted protocol; `services` inference services;
//! `defragmentation` the swap pool and replica relocation; `invariants` the checker;
//! `backfill_map` Slurm's backfill plan of pending jobs' starts and nodes, for display.

mod backfill_map;
mod cycle;
mod defragmentation;
mod elastic;
mod eligibility;
mod invariants;
mod limits;
mod placing;
mod preemption;
mod quota;
mod reservations;
mod services;
#[cfg(test)]
mod test_policies;
mod types;
mod usage;

pub use backfill_map::{PlannedStart, BF_MAX_JOB_ARRAY_RESV, BF_MAX_JOB_TEST, BF_RESOLUTION_S, BF_WINDOW_S};
pub use limits::{default_wall_min, submit_violation, SubmitCounts, Tres};
pub use types::*;

use crate::cluster::{Cluster, GpuMask, NodeAvail, NodeId, PartId, Time};
use crate::job::{JobId, JobSpec, Request};
use crate::placement::{self, LargestPlaceable, PlacementPolicy};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use types::PendingJob;

/// The scheduling core.
#[derive(Debug)]
pub struct Scheduler {
    /// The cluster model. Drivers read it through [`Scheduler::cluster`] and change it only
    /// through events and the restore methods, so the core's indexes stay in step.
    cluster: Cluster,
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
    /// The account tree whose `MaxJobs=` limits a user's running jobs per association
    /// (empty = none); set apart from `quotas` because a tree of job limits alone sets no
    /// GPU quotas.
    job_limits: crate::quota::QuotaTree,
    /// Associations, QOS and what is enforced (`sacctmgr`'s database); empty = accounting off.
    accounting: crate::assoc::Accounting,
    /// Generation of `accounting`: moves at every [`Scheduler::set_accounting`]; stamps the
    /// pending jobs' resolved accounting inputs (`PendingJob::acct`).
    acct_gen: u64,
    /// What the accounting limits keep between cycles (built from `accounting`).
    limit_cache: limits::LimitCache,
    /// Borrow ledger: running jobs beyond their scope's guarantee and when they started to
    /// borrow (s). Reclaimed newest first.
    borrowed: BTreeMap<JobId, Time>,
    /// GPUs used per quota scope (with descendants) by running jobs.
    scope_used: Vec<u32>,
    /// Inference services by id.
    services: BTreeMap<ServiceId, ServiceSpec>,
    /// Which service each replica (pending or running) belongs to.
    replica_service: BTreeMap<JobId, ServiceId>,
    next_replica: u64,
    /// The driver's job id space, when replicas draw from it ([`Scheduler::share_job_ids`]).
    shared_ids: Option<services::SharedJobIds>,
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
    /// Fair-share usage settings (half-life, reset period, billing weights).
    usage_config: crate::fairshare::UsageConfig,
    /// Decayed usage per association.
    usage: crate::fairshare::Usage,
    /// The Fair Tree over `usage`, recomputed at each order stage where time moved.
    fair: crate::fairshare::FairTree,
    /// Usage changed since `fair` was computed (a leaving job's last charge).
    fair_stale: bool,
    /// Re-run every placement search every cycle (the old cycle; `flotilla sim gang
    /// --full-scan`); false: the incremental cycle (see the `cycle` module).
    full_scan: bool,
    /// Generation of what placement reads besides the cluster's free resources (held
    /// reservations and their fills, the swap pool, the tie-break rank, node epochs); with
    /// [`Cluster::gen`] it stamps the incremental cycle's failure memo.
    fit_gen: u64,
    /// Placement failures kept across cycles while nothing they read has changed.
    fit_memo: cycle::FitMemo,
    /// Generation of the pending queue: bumped when a pending job enters, leaves or is
    /// updated (`Scheduler::queue_changed`); with `fit_gen` it stamps the kept order.
    queue_gen: u64,
    /// Last cycle's order and the tail of unchanged jobs the next cycle may skip (the
    /// `cycle` module doc, "Skipping unchanged jobs").
    replay: cycle::Replay,
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
            job_limits: crate::quota::QuotaTree::default(),
            accounting: crate::assoc::Accounting::default(),
            acct_gen: 0,
            limit_cache: limits::LimitCache::default(),
            borrowed: BTreeMap::new(),
            scope_used: Vec::new(),
            services: BTreeMap::new(),
            replica_service: BTreeMap::new(),
            next_replica: REPLICA_ID_BASE,
            shared_ids: None,
            preempt_ledger: VecDeque::new(),
            storage_degraded: false,
            paged: BTreeMap::new(),
            relocating: BTreeMap::new(),
            swap: Vec::new(),
            alerted: BTreeSet::new(),
            has_inference_pool: false,
            usage_config: crate::fairshare::UsageConfig::default(),
            usage: crate::fairshare::Usage::default(),
            fair: crate::fairshare::FairTree::default(),
            fair_stale: false,
            full_scan: false,
            fit_gen: 0,
            fit_memo: cycle::FitMemo::default(),
            queue_gen: 0,
            replay: cycle::Replay::default(),
        };
        s.has_inference_pool = s.cluster.nodes.iter().any(|n| n.inference_pool);
        s
    }

    /// The cluster model: nodes with their free GPUs, CPUs and memory, availability and boot
    /// epochs; pods; partitions.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Sets a per-node tie-break rank (a seeded permutation; the simulator's protocol).
    pub fn set_tie_rank(&mut self, rank: Option<Vec<u32>>) {
        self.tie_rank = rank;
        self.touch_fit();
    }

    /// Chooses the cycle: `true` re-runs every placement search every cycle (the full scan,
    /// kept to compare against: `flotilla sim gang --full-scan`); `false` (the default)
    /// reuses a pending job's failed placement while nothing it read has changed (the
    /// incremental cycle, see [`Scheduler::cycle`]). The decisions are the same either way.
    pub fn set_full_scan(&mut self, full: bool) {
        self.full_scan = full;
        self.fit_memo = cycle::FitMemo::default();
        self.forget_replay();
    }

    /// True when every cycle re-runs every placement search ([`Scheduler::set_full_scan`]).
    pub fn full_scan(&self) -> bool {
        self.full_scan
    }

    /// Placement searches a cycle ran and reused since the scheduler was built:
    /// `(searched, reused)`. The incremental cycle's effect, for benchmarks and tests.
    pub fn placement_counts(&self) -> (u64, u64) {
        (self.fit_memo.searched, self.fit_memo.reused)
    }

    /// Reservation plans the reserve stage made, and plans that found no GPUs reused instead,
    /// since the scheduler was built: `(planned, reused)` (see `cycle`'s module doc).
    pub fn plan_counts(&self) -> (u64, u64) {
        (self.fit_memo.planned, self.fit_memo.plans_reused)
    }

    /// Pending jobs the per-job stages visited, and pending jobs they skipped because
    /// nothing they depend on had changed since their last visit, since the scheduler was
    /// built: `(visited, skipped)` (see `cycle`'s module doc, "Skipping unchanged jobs").
    pub fn visit_counts(&self) -> (u64, u64) {
        (self.replay.visited, self.replay.skipped)
    }

    /// The cycles in which a pending job could not be placed (an input of the priority
    /// policy); `None` for a job that is not pending. A skipped job's count is kept lazily
    /// (the cycles its tail was skipped are added when it is next visited), so this is
    /// the count the full scan would show.
    pub fn failed_cycles(&self, job: JobId) -> Option<u32> {
        self.pending.get(&job).map(|p| self.failed_cycles_of(job, p))
    }

    /// Pending job `id` is about to enter, leave or change: the kept order is void, and so
    /// is the kept tail when the job belongs to it.
    pub(super) fn queue_changed(&mut self, id: JobId) {
        self.queue_gen += 1;
        // No kept tail (always so where skipping cannot apply): no lookup of the job.
        if self.replay.has_tail() && self.pending.get(&id).is_some_and(|p| self.tail_position(id, p).is_some()) {
            self.replay.tail_dirty = true;
        }
    }

    /// Something placement reads (other than the cluster's free resources, which
    /// [`Cluster::gen`] stamps) changed: failures kept by the incremental cycle are void.
    pub(super) fn touch_fit(&mut self) {
        self.fit_gen += 1;
    }

    /// The stamp of everything a placement search reads (see `cycle::FitMemo`).
    pub(super) fn fit_stamp(&self) -> u64 {
        self.fit_gen + self.cluster.gen()
    }

    /// The placement policy's name.
    pub fn placement_name(&self) -> &str {
        self.placement.name()
    }

    /// The tunables the scheduler was built with.
    pub fn config(&self) -> &SchedConfig {
        &self.config
    }

    /// Running jobs and replicas, by id.
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

    /// [`Scheduler::pending_state`] of every pending job, in job-id order: one walk instead of
    /// a lookup per job (the controller's queue answers and its look at what a cycle changed
    /// go over 100,000 pending jobs).
    pub fn pending_states(&self) -> impl Iterator<Item = (JobId, &PendingInfo, u64)> + '_ {
        self.pending.iter().map(|(id, p)| (*id, &p.info, p.priority))
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

    /// [`LargestPlaceable`] now inside partition `part`: as [`Scheduler::largest_placeable`],
    /// counting only the partition's nodes (GPUs held by reservations excluded).
    pub fn largest_placeable_in(&self, part: PartId) -> LargestPlaceable {
        self.largest_placeable_where(&|n: NodeId| self.cluster.node(n).partitions.contains(&part))
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

    /// Restores a node's stored state at a driver's restart: its boot epoch and availability
    /// as recorded, without requeueing anything. Call it before restoring running jobs (a
    /// restored job on a down node would break invariant 8); later changes come as events.
    pub fn restore_node(&mut self, node: NodeId, boot_epoch: u64, avail: NodeAvail) {
        self.cluster.nodes[node.0 as usize].boot_epoch = boot_epoch;
        self.cluster.set_avail(node, avail);
        self.mark_dirty(node);
        self.touch_fit();
    }

    /// Feeds one event that happened at `now` (s); returns the decisions it forces at once:
    /// `Requeue` for the jobs on a node that went down, was quarantined or rebooted,
    /// `ReleaseReservation` for a reservation a cancel, hold or changed request voids, and
    /// the storage alerts of [`Event::StorageBandwidth`]. Like [`Scheduler::cycle`]'s, they
    /// are already applied to the model and the driver must carry them out.
    #[must_use = "the decisions are already applied to the model; the driver must carry them out"]
    pub fn handle(&mut self, event: Event, now: Time) -> Vec<Decision> {
        // Events carry their own times where they need one (a checkpoint's `at`); `now`
        // charges a leaving job's last fair-share usage.
        let mut out = Vec::new();
        match event {
            Event::Submit(spec) | Event::Update(spec) => self.enqueue(spec, &mut out),
            Event::Cancel(id) => {
                self.queue_changed(id);
                self.pending.remove(&id);
                self.alerted.remove(&id);
                self.drop_reservation(id, &mut out);
                self.charge_ending(id, now);
                self.release_running(id);
            }
            Event::JobEnded(id) => {
                self.charge_ending(id, now);
                self.release_running(id);
            }
            Event::Requeued(id) => {
                self.charge_ending(id, now);
                if let Some(r) = self.release_running(id) {
                    let mut spec = r.spec;
                    spec.preempt_count += 1;
                    self.enqueue(spec, &mut out);
                }
            }
            Event::NodeAvail { node, avail } => self.set_node_avail(node, avail, now, &mut out),
            Event::NodeRegistered { node, boot_epoch } => self.register_node(node, boot_epoch, now, &mut out),
            Event::ServiceUpsert(spec) => {
                self.services.insert(spec.id, spec);
            }
            Event::ServiceScale { service, desired } => {
                if let Some(s) = self.services.get_mut(&service) {
                    s.desired_replicas = desired;
                }
            }
            Event::ServiceDelete(service) => {
                self.services.remove(&service);
            }
            Event::CheckpointAck { job, at } => {
                if let Some(r) = self.running.get_mut(&job) {
                    r.last_checkpoint = Some(at);
                }
            }
            Event::StorageBandwidth(bw) => self.set_storage_bandwidth(bw, &mut out),
            Event::Shrunk { job, allocs } => self.shrunk(job, &allocs, now),
            Event::Resize { job, size } => self.resize(job, size, now, &mut out),
            Event::NodeFeatures { node, features } => {
                self.cluster.nodes[node.0 as usize].features = features;
                self.touch_fit();
                self.mark_dirty(node);
            }
            Event::PartitionState { part, state } => {
                if let Some(p) = self.cluster.partitions.get_mut(part.0 as usize) {
                    p.state = state;
                    // The next cycle orders its jobs anew (eligibility reads the state).
                    self.touch_fit();
                }
            }
            Event::PartitionTimes { part, max_time_min, default_time_min } => {
                if let Some(p) = self.cluster.partitions.get_mut(part.0 as usize) {
                    if let Some(m) = max_time_min {
                        p.max_time_min = m;
                    }
                    if let Some(d) = default_time_min.filter(|d| !p.over_max_time(d.map(|m| m * 60))) {
                        p.default_time_min = d;
                    }
                    // Eligibility reads `MaxTime` (`PartitionTimeLimit`): every job anew.
                    self.touch_fit();
                }
            }
        }
        out
    }

    /// A job enters the queue or its pending spec changes (a running job is left alone). A
    /// changed request or partition, or a hold, voids its reservation.
    fn enqueue(&mut self, spec: JobSpec, out: &mut Vec<Decision>) {
        let id = spec.id;
        if self.running.contains_key(&id) {
            return;
        }
        self.queue_changed(id);
        let shape = self.intern(&spec.request);
        let entry = self.pending.entry(id).or_insert_with(|| PendingJob::new(spec.clone(), shape));
        let shape_changed = entry.spec.request != spec.request || entry.spec.partition != spec.partition;
        entry.spec = spec;
        entry.shape = shape;
        entry.acct = None;
        if shape_changed || entry.spec.held.is_some() {
            self.drop_reservation(id, out);
        }
    }

    /// A node's availability changes (drain, down, quarantine, resume): jobs on a node that
    /// went down or was quarantined are requeued, and reservations on it are re-planned.
    fn set_node_avail(&mut self, node: NodeId, avail: NodeAvail, now: Time, out: &mut Vec<Decision>) {
        let requeue = match &avail {
            NodeAvail::Down { .. } => Some(RequeueReason::NodeDown(node)),
            NodeAvail::Quarantined { .. } => Some(RequeueReason::NodeQuarantined(node)),
            _ => None,
        };
        self.cluster.set_avail(node, avail);
        self.touch_fit();
        if let Some(reason) = requeue {
            self.requeue_node(node, reason, now, out);
        }
        self.mark_dirty(node);
    }

    /// A node daemon registered with `boot_epoch`: a changed epoch (after a known one, not
    /// 0) means the node rebooted and its jobs are gone, so they are requeued (invariant 8); a
    /// node of unknown availability comes up.
    fn register_node(&mut self, node: NodeId, boot_epoch: u64, now: Time, out: &mut Vec<Decision>) {
        let old = self.cluster.node(node).boot_epoch;
        if old != boot_epoch {
            if old != 0 {
                self.requeue_node(node, RequeueReason::NodeRebooted(node), now, out);
            }
            self.cluster.nodes[node.0 as usize].boot_epoch = boot_epoch;
        }
        if self.cluster.node(node).avail == NodeAvail::Unknown {
            self.cluster.set_avail(node, NodeAvail::Up);
        }
        self.mark_dirty(node);
        self.touch_fit();
    }

    /// The id of a request shape; equal requests share one.
    pub(super) fn intern(&mut self, req: &Request) -> u32 {
        let next = self.shapes.len() as u32;
        *self.shapes.entry(req.clone()).or_insert(next)
    }

    /// The jobs on `node` lost it (`reason`): each is requeued, except an elastic job that
    /// runs on without the node (a membership change, see the `elastic` module).
    fn requeue_node(&mut self, node: NodeId, reason: RequeueReason, now: Time, out: &mut Vec<Decision>) {
        let victims: Vec<JobId> = self
            .running
            .iter()
            .filter(|(_, r)| r.allocs.iter().any(|a| a.part.node == node))
            .map(|(id, _)| *id)
            .collect();
        for id in victims {
            if self.lose_node(id, node, &reason, now, out) {
                continue;
            }
            if let Some(r) = self.release_running(id) {
                out.push(Decision::Requeue {
                    job: id,
                    reason: reason.clone(),
                });
                let spec = r.spec;
                let shape = self.intern(&spec.request);
                self.queue_changed(id);
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

    pub(super) fn note_started(&mut self, job: &RunningJob) {
        let end = job.end.unwrap_or(Time::MAX);
        for a in &job.allocs {
            let i = a.part.node.0 as usize;
            self.node_jobs[i].push((job.spec.id, end));
            self.busy_until[i] = self.busy_until[i].max(end);
        }
    }
}
