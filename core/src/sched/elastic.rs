//! Elastic jobs (torchrun's `--nnodes=MIN:MAX` is the model): a job that starts as a gang of
//! its `min`, grows into capacity nobody else needs, and gives the growth back first.
//!
//! - **Grow** (the last stage of a cycle): each running elastic job below its `max`, past
//!   `elastic_grow_interval_s` since its start or last membership change and with no shrink
//!   in flight, takes as many `step`s as fit in one round ([`Decision::Grow`]), inside its
//!   topology set (a `pod` job only in its pod) and on nodes it does not hold (one
//!   allocation per node and job): node-granular jobs by whole members, GPU-granular ones by
//!   `step` GPUs spread as `any`/`pod` requests are. Growth uses only GPUs
//!   that are free and held by no reservation, after every pending job had its turn in the
//!   cycle: it takes nothing a pending job needs now, nor anything a held reservation needs
//!   by its fill time. Its GPUs count against the quota ceiling (`MaxGPUs`) and are always
//!   borrowed.
//! - **Shrink**: grown parts are the first thing taken back. Any pending job that cannot
//!   start may reclaim them (the reclaim stage, before preemption), newest grown part first,
//!   never below `min`, in whole steps; a preemptor's victim order puts every grown part
//!   before any whole job. A reservation whose GPUs only grown parts and backfill occupy
//!   completes by shrinking them, and the planner counts grown GPUs as free now, so growth
//!   never moves a held reservation's fill time later. A shrink is a
//!   [`Decision::Shrink`]: SIGTERM, the checkpoint deadline of a preemption, then SIGKILL;
//!   the GPUs stay held until the driver reports [`Event::Shrunk`]. Shrinks are not
//!   preemptions: they do not enter the preemption budget.
//! - **Lose a member**: a failed node under an elastic job that stays at or above `min` is a
//!   membership change ([`Decision::MembersLost`]), not a requeue, unless it was the job's
//!   first node (its rendezvous host); the oldest grown parts are promoted to the base when
//!   the base falls below `min`.
//! - **Resize** (`scontrol update NumNodes=`): an elastic job's new `max` (grown parts above it
//!   shrink); a rigid job loses the nodes beyond the count at once, as Slurm's
//!   `_update_job` releases them.

use super::{
    AllocId, Allocation, Decision, Growth, LossReason, Owner, Rank, Reclaimable, RequeueReason,
    Reservation, RunningJob, Scheduler,
};
use crate::cluster::{GpuMask, NodeAlloc, NodeId, PartId, Time, MILLI};
use crate::config::TopologyKind;
use crate::job::{Elastic, ElasticUnit, JobId, JobSpec, Request};
use crate::placement;
use std::collections::{BTreeMap, BTreeSet};

/// Something the scheduler can take back to make room, in the order it is offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Victim {
    /// Allocations of an elastic job's grown part: one step's worth (its last nodes for a
    /// node-granular job; the whole round for a GPU-granular one).
    Grown(JobId, Vec<AllocId>),
    /// A whole job (preemption).
    Job(JobId),
}

impl Victim {
    pub(super) fn job(&self) -> JobId {
        match self {
            Victim::Grown(j, _) | Victim::Job(j) => *j,
        }
    }
}

/// What a partition could give growth now: usable free GPUs (free, not reserved, outside the
/// swap pool) in all, and per count g the nodes with at least g of them.
#[derive(Debug, Clone)]
struct Room {
    gpus: u32,
    nodes_with: Vec<u32>,
    /// The partition's node size ([`placement::node_size`]).
    node_size: u32,
}

/// GPUs per member of a node-granular elastic job: `--gpus-per-node`, a whole node when
/// exclusive, else its GPUs over its `min` nodes.
fn gpus_per_member(req: &Request, e: &Elastic, size: u32) -> u32 {
    if req.exclusive {
        size
    } else if let Some(g) = req.gpus_per_node {
        g
    } else {
        req.gpus / e.min.max(1)
    }
}

impl Scheduler {
    /// The grow stage (module doc). Reads the running elastic jobs, the cluster, the
    /// reservations and the quotas; writes `Grow` decisions and the jobs' grown parts.
    pub(super) fn grow(&mut self, now: Time, out: &mut Vec<Decision>) {
        let interval = self.config.elastic_grow_interval_s;
        let mut cands: Vec<(std::cmp::Reverse<u32>, Time, JobId)> = self
            .running
            .iter()
            .filter_map(|(id, r)| {
                let e = r.spec.elastic?;
                let since = r.resized_at.unwrap_or(r.start).max(r.start);
                let busy = r.preempt_pending || r.grown.iter().any(|g| g.shrinking.is_some());
                (!busy && r.size() + e.step <= e.max && now >= since.saturating_add(interval))
                    .then_some((std::cmp::Reverse(r.spec.base_priority), r.start, *id))
            })
            .collect();
        if cands.is_empty() {
            return;
        }
        cands.sort_unstable();
        // What each partition could still give (free, not reserved, not in the swap pool):
        // cheap bounds that skip jobs no step of which can fit, recounted after a growth.
        let mut room: BTreeMap<PartId, Room> = BTreeMap::new();
        for (_, _, id) in cands {
            let part = self.running[&id].spec.partition;
            let r = &*room.entry(part).or_insert_with(|| self.room(part));
            if r.gpus == 0 {
                continue;
            }
            if self.grow_job(id, r, now, out) > 0 {
                room.insert(part, self.room(part));
            }
        }
    }

    /// What partition `part` could give growth now ([`Room`]).
    fn room(&self, part: PartId) -> Room {
        let mut r = Room {
            gpus: 0,
            nodes_with: Vec::new(),
            node_size: placement::node_size(&self.cluster, part),
        };
        for &n in &self.cluster.partitions[part.0 as usize].nodes {
            let node = self.cluster.node(n);
            if self.swap.contains(&n) || !node.avail.schedulable() {
                continue;
            }
            let free = node
                .free_gpus
                .minus(self.blocked_for(n, None, None))
                .count();
            r.gpus += free;
            if r.nodes_with.len() <= free as usize {
                r.nodes_with.resize(free as usize + 1, 0);
            }
            for c in &mut r.nodes_with[..=free as usize] {
                *c += 1;
            }
        }
        r
    }

    /// Grows job `id` by as many steps as fit (within `room`); returns the GPUs taken.
    fn grow_job(&mut self, id: JobId, room: &Room, now: Time, out: &mut Vec<Decision>) -> u32 {
        let r = &self.running[&id];
        let Some(e) = r.spec.elastic else { return 0 };
        let per_step = match e.unit {
            ElasticUnit::Nodes => gpus_per_member(&r.spec.request, &e, room.node_size) * e.step,
            ElasticUnit::Gpus => e.step,
        };
        let mut hi = (e.max.saturating_sub(r.size())) / e.step;
        if e.unit == ElasticUnit::Nodes && per_step > 0 {
            // Members need nodes with a member's GPUs free.
            let gpn = per_step / e.step;
            hi = hi.min(room.nodes_with.get(gpn as usize).copied().unwrap_or(0) / e.step);
        }
        if let Some(steps) = room.gpus.checked_div(per_step) {
            hi = hi.min(steps);
            if let Some(q) = self.quota_room(&r.spec) {
                hi = hi.min(q / per_step);
            }
        }
        if hi == 0 {
            return 0;
        }
        // Feasibility is monotone in the number of steps: try all first (the common case),
        // then search for the largest that fits.
        let mut best = self.place_growth(id, hi, now);
        if best.is_none() {
            let (mut lo, mut top) = (0u32, hi);
            while lo + 1 < top {
                let mid = (lo + top) / 2;
                match self.place_growth(id, mid, now) {
                    Some(p) => {
                        lo = mid;
                        best = Some(p);
                    }
                    None => top = mid,
                }
            }
        }
        let Some(parts) = best else { return 0 };
        let gpus = parts.iter().map(|p| p.gpus.count()).sum();
        self.bind_growth(id, parts, now, out);
        gpus
    }

    /// Where `steps` more steps of job `id` would go now, inside its topology set, on GPUs
    /// free and held by no reservation; `None` when they do not fit.
    fn place_growth(&self, id: JobId, steps: u32, now: Time) -> Option<Vec<NodeAlloc>> {
        let r = &self.running[&id];
        let e = r.spec.elastic?;
        let req = self.growth_request(r, &e, steps)?;
        let mut spec = r.spec.clone();
        spec.request = req;
        spec.time_limit_s = r.end.map(|end| end.saturating_sub(now));
        self.try_place(now, &spec, None, None).ok()
    }

    /// The request for `steps` more steps of `r`, inside its topology set.
    fn growth_request(&self, r: &RunningJob, e: &Elastic, steps: u32) -> Option<Request> {
        let base = &r.spec.request;
        let first = r.allocs.first()?.part.node;
        let held: BTreeSet<NodeId> = r.allocs.iter().map(|a| a.part.node).collect();
        let pod = self.cluster.node(first).pod;
        let pod_nodes = || -> Vec<NodeId> {
            self.cluster.partitions[r.spec.partition.0 as usize]
                .nodes
                .iter()
                .copied()
                .filter(|n| self.cluster.node(*n).pod == pod)
                .collect()
        };
        let mut req = Request {
            topology: TopologyKind::Any,
            nodes: None,
            nodes_max: None,
            gpus_per_node: None,
            ..base.clone()
        };
        match e.unit {
            ElasticUnit::Nodes => {
                let size = placement::node_size(&self.cluster, r.spec.partition);
                let gpn = gpus_per_member(base, e, size);
                let n = steps * e.step;
                req.gpus = n * gpn;
                req.nodes = Some(n);
                req.gpus_per_node = (gpn > 0 && !base.exclusive).then_some(gpn);
                // New members only: a node holds one member.
                if base.topology == TopologyKind::Pod {
                    req.required_nodes = pod_nodes()
                        .into_iter()
                        .filter(|n| !held.contains(n))
                        .collect();
                    if req.required_nodes.is_empty() {
                        return None;
                    }
                } else {
                    req.excluded_nodes.extend(held.iter().copied());
                }
            }
            ElasticUnit::Gpus => {
                // On nodes the job does not hold: each node of a job holds one allocation (the
                // controller binds a node once), so a `node` job cannot grow.
                req.gpus = steps * e.step;
                match base.topology {
                    TopologyKind::Node => return None,
                    TopologyKind::Pod => {
                        req.required_nodes = pod_nodes().into_iter().filter(|n| !held.contains(n)).collect();
                        if req.required_nodes.is_empty() {
                            return None;
                        }
                    }
                    TopologyKind::Any => req.excluded_nodes.extend(held.iter().copied()),
                }
            }
        }
        Some(req)
    }

    /// GPUs `spec`'s quota scope (and its ancestors) may still take under `MaxGPUs`; `None`
    /// without a ceiling.
    fn quota_room(&self, spec: &JobSpec) -> Option<u32> {
        let sc = self.quotas.scope_of(&spec.user, &spec.account)?;
        self.quotas
            .chain(sc)
            .filter_map(|a| {
                let max = self.quotas.scope(a).max_gpus?;
                Some(max.saturating_sub(self.scope_used.get(a.0 as usize).copied().unwrap_or(0)))
            })
            .min()
    }

    /// Commits a growth of job `id` on `parts`: takes them, records the grown part, charges the
    /// quota and emits [`Decision::Grow`].
    fn bind_growth(
        &mut self,
        id: JobId,
        parts: Vec<NodeAlloc>,
        now: Time,
        out: &mut Vec<Decision>,
    ) {
        self.lp_cache = None;
        let mut allocs = Vec::with_capacity(parts.len());
        let Some(r) = self.running.get(&id) else {
            return;
        };
        let (preemptible, spec) = (r.spec.preemptible, r.spec.clone());
        let end = r.end.unwrap_or(Time::MAX);
        for part in parts {
            self.cluster.take(&part);
            let i = part.node.0 as usize;
            if !self.node_jobs[i].iter().any(|(j, _)| *j == id) {
                self.node_jobs[i].push((id, end));
                self.busy_until[i] = self.busy_until[i].max(end);
            }
            allocs.push(Allocation {
                id: AllocId(self.next_alloc),
                owner: Owner::Job(id),
                part,
                created_at: now,
                preemptible,
                borrowed: true,
                backfill_for: None,
            });
            self.next_alloc += 1;
        }
        let gpus: u32 = allocs.iter().map(|a| a.part.gpus.count()).sum();
        self.charge_growth(&spec, gpus);
        let r = self.running.get_mut(&id).expect("grown job runs");
        r.grown.push(Growth {
            allocs: allocs.iter().map(|a| a.id).collect(),
            at: now,
            shrinking: None,
        });
        r.allocs.extend(allocs.iter().cloned());
        r.resized_at = Some(now);
        out.push(Decision::Grow { job: id, allocs });
    }

    /// The grown parts that may be taken back, newest first, in whole steps: for each
    /// running elastic job without a preemption pending, its parts not already shrinking.
    pub(super) fn grown_victims(&self) -> Vec<Victim> {
        // (newest part first, then job and part, its last step first) -> the step's allocations.
        type Key = (
            std::cmp::Reverse<Time>,
            std::cmp::Reverse<JobId>,
            usize,
            usize,
        );
        let mut v: Vec<(Key, Vec<AllocId>)> = Vec::new();
        for (id, r) in &self.running {
            let Some(e) = r.spec.elastic else { continue };
            if r.preempt_pending || r.grown.is_empty() {
                continue;
            }
            for (gi, g) in r.grown.iter().enumerate() {
                if g.shrinking.is_some() {
                    continue;
                }
                let chunk = match e.unit {
                    ElasticUnit::Nodes => e.step.max(1) as usize,
                    ElasticUnit::Gpus => g.allocs.len().max(1),
                };
                // The part's last step first.
                for (ci, c) in g.allocs.rchunks(chunk).enumerate() {
                    v.push((
                        (
                            std::cmp::Reverse(g.at),
                            std::cmp::Reverse(*id),
                            usize::MAX - gi,
                            ci,
                        ),
                        c.to_vec(),
                    ));
                }
            }
        }
        v.sort_unstable();
        v.into_iter()
            .map(|((_, std::cmp::Reverse(id), _, _), c)| Victim::Grown(id, c))
            .collect()
    }

    /// Elastic growth in partition `part` as operators see it (`sinfo --largest`, the
    /// metrics): the GPUs of the grown parts the scheduler may still take back on the
    /// partition's nodes (those [`Scheduler::grown_victims`] lists: not already shrinking, of
    /// jobs without a preemption pending) and the [`placement::LargestPlaceable`] the
    /// partition would have if all of them were taken back (their GPUs and CPUs free again;
    /// GPUs held by reservations and swap-pool nodes still left out, as in
    /// [`Scheduler::largest_placeable_in`]). With nothing grown it equals
    /// `largest_placeable_in(part)`. O(nodes + grown allocations).
    pub fn reclaimable_in(&self, part: PartId) -> Reclaimable {
        let in_part = |n: NodeId| self.cluster.node(n).partitions.contains(&part);
        let mut back: BTreeMap<NodeId, placement::Reclaimed> = BTreeMap::new();
        let mut grown_gpus = 0;
        for a in self.victim_parts(&self.grown_victims()) {
            if !in_part(a.node) {
                continue;
            }
            grown_gpus += a.gpus.count();
            let r = back.entry(a.node).or_default();
            if a.gpu_milli >= MILLI {
                r.gpus = r.gpus.union(a.gpus);
            }
            r.cpu_milli += a.cpu_milli;
        }
        let largest = placement::largest_placeable_reclaiming(&self.cluster, &|n: NodeId| {
            (in_part(n) && !self.swap.contains(&n)).then(|| {
                let held = self.held[n.0 as usize]
                    .iter()
                    .fold(GpuMask::EMPTY, |m, (_, g)| m.union(*g));
                (held, back.get(&n).copied().unwrap_or_default())
            })
        });
        Reclaimable {
            grown_gpus,
            largest,
        }
    }

    /// The per-node parts `victims` free, each allocation once (a whole job's grown parts may
    /// also be listed on their own).
    pub(super) fn victim_parts(&self, victims: &[Victim]) -> Vec<NodeAlloc> {
        let mut seen: BTreeSet<AllocId> = BTreeSet::new();
        let mut parts = Vec::new();
        for v in victims {
            let Some(r) = self.running.get(&v.job()) else {
                continue;
            };
            for a in &r.allocs {
                let wanted = match v {
                    Victim::Grown(_, ids) => ids.contains(&a.id),
                    Victim::Job(_) => true,
                };
                if wanted && seen.insert(a.id) {
                    parts.push(a.part.clone());
                }
            }
        }
        parts
    }

    /// The nodes a victim's allocations are on.
    pub(super) fn victim_touches(&self, v: &Victim, nodes: &BTreeSet<NodeId>) -> bool {
        self.running.get(&v.job()).is_some_and(|r| {
            r.allocs.iter().any(|a| {
                nodes.contains(&a.part.node)
                    && match v {
                        Victim::Grown(_, ids) => ids.contains(&a.id),
                        Victim::Job(_) => true,
                    }
            })
        })
    }

    /// The kill deadline (s after now) of a shrink of `job`: a preemption's (its checkpoint
    /// and those in flight over the measured bandwidth × factor, at least the floor), capped
    /// at `max_deadline_s` (a shrink is never refused for storage: it takes back borrowed
    /// capacity).
    fn shrink_deadline_s(&self, job: JobId) -> u64 {
        self.preemption_deadline_s(&[job])
            .unwrap_or(self.config.max_deadline_s)
    }

    /// Decides the shrink of the grown victims in `victims` (whole jobs in it are left to the
    /// caller) for `for_job`: one [`Decision::Shrink`] per job. Returns the latest deadline.
    pub(super) fn shrink_victims(
        &mut self,
        victims: &[Victim],
        for_job: Option<JobId>,
        now: Time,
        out: &mut Vec<Decision>,
    ) -> Time {
        let mut by_job: BTreeMap<JobId, Vec<AllocId>> = BTreeMap::new();
        for v in victims {
            if let Victim::Grown(j, ids) = v {
                by_job.entry(*j).or_default().extend(ids.iter().copied());
            }
        }
        let mut latest = now;
        for (job, mut ids) in by_job {
            self.whole_steps(job, &mut ids);
            let deadline = now + self.shrink_deadline_s(job);
            latest = latest.max(deadline);
            self.mark_shrinking(job, &ids, deadline);
            out.push(Decision::Shrink {
                job,
                allocs: ids,
                for_job,
                deadline,
            });
        }
        latest
    }

    /// Widens `ids` (grown allocations of `job`) to whole steps: a node-granular job's step
    /// of K nodes leaves together, so the job keeps a multiple of its step above `min`.
    fn whole_steps(&self, job: JobId, ids: &mut Vec<AllocId>) {
        let Some(r) = self.running.get(&job) else {
            return;
        };
        let Some(e) = r
            .spec
            .elastic
            .filter(|e| e.unit == ElasticUnit::Nodes && e.step > 1)
        else {
            return;
        };
        for g in r.grown.iter().filter(|g| g.shrinking.is_none()) {
            for c in g.allocs.rchunks(e.step as usize) {
                if c.iter().any(|a| ids.contains(a)) {
                    let more: Vec<AllocId> =
                        c.iter().copied().filter(|a| !ids.contains(a)).collect();
                    ids.extend(more);
                }
            }
        }
    }

    /// Marks allocations `ids` of `job`'s grown parts as shrinking with `deadline`, splitting
    /// a part of which only some allocations leave.
    fn mark_shrinking(&mut self, job: JobId, ids: &[AllocId], deadline: Time) {
        let Some(r) = self.running.get_mut(&job) else {
            return;
        };
        let mut split = Vec::new();
        for g in &mut r.grown {
            let leaving: Vec<AllocId> = g
                .allocs
                .iter()
                .copied()
                .filter(|a| ids.contains(a))
                .collect();
            if leaving.is_empty() {
                continue;
            }
            if leaving.len() == g.allocs.len() {
                g.shrinking = Some(deadline);
            } else {
                g.allocs.retain(|a| !ids.contains(a));
                split.push(Growth {
                    allocs: leaving,
                    at: g.at,
                    shrinking: Some(deadline),
                });
            }
        }
        r.grown.extend(split);
        r.grown.sort_by_key(|g| g.at);
    }

    /// The reclaim stage: pending job `c` that cannot start now takes back grown parts,
    /// newest first, when that alone makes room. The parts get [`Decision::Shrink`] and the
    /// job a reservation on the GPUs they free (filled by the shrink deadline). Returns true
    /// when a shrink was decided.
    pub(super) fn reclaim_for(
        &mut self,
        id: JobId,
        key: Rank,
        now: Time,
        out: &mut Vec<Decision>,
    ) -> bool {
        let Some(p) = self.pending.get(&id) else {
            return false;
        };
        if p.spec.request.gpus == 0 || p.spec.request.is_share() {
            return false;
        }
        let order = self.grown_victims();
        if order.is_empty() {
            return false;
        }
        let spec = p.spec.clone();
        let Some((victims, parts)) = self.plan_victims(&spec, &key, &order) else {
            return false;
        };
        if victims.is_empty() {
            return false;
        }
        let deadline = self.shrink_victims(&victims, Some(id), now, out);
        self.hold_for(id, key, &parts, deadline, now, out);
        true
    }

    /// Holds `parts` for `job` (rank `key`) as a reservation being freed by preemption or
    /// shrinking, expected to fill at `fill`.
    pub(super) fn hold_for(
        &mut self,
        job: JobId,
        key: Rank,
        parts: &[NodeAlloc],
        fill: Time,
        now: Time,
        out: &mut Vec<Decision>,
    ) {
        self.drop_reservation(job, out);
        let mut gpus: Vec<(NodeId, GpuMask)> = parts.iter().map(|p| (p.node, p.gpus)).collect();
        gpus.sort_by_key(|(n, _)| *n);
        let r = Reservation {
            job,
            rank: key,
            gpus,
            est_fill: fill,
            created: now,
            dirty: false,
            preempting: true,
        };
        self.add_reservation(r, now, out);
    }

    /// True when pending `job` could start now on free GPUs plus every grown part that may be
    /// taken back (GPUs of reservations ranked above it excluded): the test that shrinking
    /// alone would have made room, for checking that preemption came only after shrinking.
    pub fn placeable_by_shrinking(&mut self, job: JobId) -> bool {
        let Some(p) = self.pending.get(&job) else {
            return false;
        };
        let spec = p.spec.clone();
        let key = self
            .reservations
            .iter()
            .find(|r| r.job == job)
            .map_or((p.priority, spec.submit_time, job), |r| r.rank);
        let parts = self.victim_parts(&self.grown_victims());
        self.place_with_released(&spec, &key, &parts).is_some()
    }

    /// The grown allocations of `job` that sit on `gpus` of `node`, when every allocation of
    /// the job there that does is grown; `None` when a base allocation is in the way.
    pub(super) fn grown_on(&self, job: JobId, node: NodeId, gpus: GpuMask) -> Option<Vec<AllocId>> {
        let r = self.running.get(&job)?;
        let mut ids = Vec::new();
        for a in &r.allocs {
            if a.part.node == node && !a.part.gpus.intersect(gpus).is_empty() {
                if !r.is_grown(a.id) {
                    return None;
                }
                ids.push(a.id);
            }
        }
        Some(ids)
    }

    /// Grown allocations of a shrink have left: release them ([`super::Event::Shrunk`]). Ids
    /// that are not grown allocations of the job are ignored (the base is never shrunk).
    pub(super) fn shrunk(&mut self, job: JobId, ids: &[AllocId], now: Time) {
        let Some(r) = self.running.get(&job) else {
            return;
        };
        let leaving: Vec<AllocId> = ids.iter().copied().filter(|a| r.is_grown(*a)).collect();
        if leaving.is_empty() {
            return;
        }
        self.remove_allocs(job, &leaving);
        if let Some(r) = self.running.get_mut(&job) {
            r.resized_at = Some(now);
        }
    }

    /// Removes allocations `ids` from running `job`: gives them back, drops them from its
    /// grown parts, and updates the per-node job lists.
    fn remove_allocs(&mut self, job: JobId, ids: &[AllocId]) -> Vec<Allocation> {
        self.lp_cache = None;
        let Some(r) = self.running.get_mut(&job) else {
            return Vec::new();
        };
        let (gone, keep): (Vec<Allocation>, Vec<Allocation>) = std::mem::take(&mut r.allocs)
            .into_iter()
            .partition(|a| ids.contains(&a.id));
        r.allocs = keep;
        for g in &mut r.grown {
            g.allocs.retain(|a| !ids.contains(a));
        }
        r.grown.retain(|g| !g.allocs.is_empty());
        let still: BTreeSet<NodeId> = r.allocs.iter().map(|a| a.part.node).collect();
        for a in &gone {
            self.cluster.give_back(&a.part);
            let i = a.part.node.0 as usize;
            if !still.contains(&a.part.node) {
                self.node_jobs[i].retain(|(j, _)| *j != job);
                self.busy_until[i] = self.node_jobs[i].iter().map(|(_, e)| *e).max().unwrap_or(0);
            }
        }
        gone
    }

    /// A node under running `job` failed (`reason`): when the job is elastic, the node is not
    /// its first (rendezvous) node and it stays at or above `min` without it, it loses the
    /// node's allocations and runs on ([`Decision::MembersLost`]; the oldest grown parts
    /// become base where the base fell below `min`). Returns false when the job must be
    /// requeued instead.
    pub(super) fn lose_node(
        &mut self,
        job: JobId,
        node: NodeId,
        reason: &RequeueReason,
        now: Time,
        out: &mut Vec<Decision>,
    ) -> bool {
        let Some(r) = self.running.get(&job) else {
            return false;
        };
        let Some(e) = r.spec.elastic else {
            return false;
        };
        if r.allocs.first().is_none_or(|a| a.part.node == node) || r.preempt_pending {
            return false;
        }
        let lost: Vec<AllocId> = r
            .allocs
            .iter()
            .filter(|a| a.part.node == node)
            .map(|a| a.id)
            .collect();
        let left = RunningJob {
            allocs: r
                .allocs
                .iter()
                .filter(|a| a.part.node != node)
                .cloned()
                .collect(),
            ..r.clone()
        };
        if left.size() < e.min {
            return false;
        }
        let gone = self.remove_allocs(job, &lost);
        let r = self.running.get_mut(&job).expect("runs");
        r.resized_at = Some(now);
        // Promote the oldest grown allocations, one at a time, while the base is below min.
        while !r.grown.is_empty() {
            let base = RunningJob {
                allocs: r
                    .allocs
                    .iter()
                    .filter(|a| !r.is_grown(a.id))
                    .cloned()
                    .collect(),
                grown: Vec::new(),
                ..r.clone()
            };
            if base.size() >= e.min {
                break;
            }
            r.grown[0].allocs.remove(0);
            r.grown.retain(|g| !g.allocs.is_empty());
        }
        out.push(Decision::MembersLost {
            job,
            allocs: gone,
            reason: LossReason::Node(reason.clone()),
        });
        true
    }

    /// `scontrol update NumNodes=` on running `job` (module doc). An elastic job's new `max`
    /// is `size` (never below `min`); grown parts above it shrink, newest first. A rigid job
    /// keeps its first `size` nodes (at least one) and loses the rest at once.
    pub(super) fn resize(&mut self, job: JobId, size: u32, now: Time, out: &mut Vec<Decision>) {
        let Some(r) = self.running.get_mut(&job) else {
            return;
        };
        if let Some(e) = r.spec.elastic.as_mut() {
            e.max = size.max(e.min);
            let max = e.max;
            if Self::staying(r).size() <= max {
                return;
            }
            // Newest steps first until the job fits its new maximum.
            let mut chosen: Vec<Victim> = Vec::new();
            let all: Vec<Victim> = self
                .grown_victims()
                .into_iter()
                .filter(|v| v.job() == job)
                .collect();
            let r = &self.running[&job];
            for v in all {
                let ids: Vec<AllocId> = chosen
                    .iter()
                    .chain(std::iter::once(&v))
                    .flat_map(|c| match c {
                        Victim::Grown(_, ids) => ids.clone(),
                        Victim::Job(_) => Vec::new(),
                    })
                    .collect();
                chosen.push(v);
                let mut staying = Self::staying(r);
                staying.allocs.retain(|a| !ids.contains(&a.id));
                if staying.size() <= max {
                    break;
                }
            }
            self.shrink_victims(&chosen, None, now, out);
            return;
        }
        // A rigid job: keep the first `size` nodes.
        let keep = size.max(1) as usize;
        let mut nodes: Vec<NodeId> = Vec::new();
        for a in &r.allocs {
            if !nodes.contains(&a.part.node) {
                nodes.push(a.part.node);
            }
        }
        if nodes.len() <= keep {
            return;
        }
        let drop: BTreeSet<NodeId> = nodes[keep..].iter().copied().collect();
        let ids: Vec<AllocId> = r
            .allocs
            .iter()
            .filter(|a| drop.contains(&a.part.node))
            .map(|a| a.id)
            .collect();
        let gone = self.remove_allocs(job, &ids);
        let r = self.running.get_mut(&job).expect("runs");
        // The job's request follows what it holds, so it is what it runs as (and requeues as).
        let held: u32 = r.allocs.iter().map(|a| a.part.gpus.count()).sum();
        r.spec.request.nodes = Some(keep as u32);
        if r.spec.request.gpus_per_node.is_none() && !r.spec.request.exclusive {
            r.spec.request.gpus = held;
        } else {
            r.spec.request.gpus = r
                .spec
                .request
                .gpus_per_node
                .map_or(held, |g| g * keep as u32);
        }
        r.resized_at = Some(now);
        out.push(Decision::MembersLost {
            job,
            allocs: gone,
            reason: LossReason::Resized,
        });
    }

    /// `r` without its grown parts being shrunk: the members that stay.
    fn staying(r: &RunningJob) -> RunningJob {
        let leaving = |id: AllocId| {
            r.grown
                .iter()
                .any(|g| g.shrinking.is_some() && g.allocs.contains(&id))
        };
        RunningJob {
            allocs: r
                .allocs
                .iter()
                .filter(|a| !leaving(a.id))
                .cloned()
                .collect(),
            ..r.clone()
        }
    }

    /// Checks an elastic job's shape: `min <= size <= max`, no member node twice for a
    /// node-granular job, and the whole job inside its topology set.
    pub(super) fn check_elastic(&self, id: JobId, r: &RunningJob) -> Result<(), String> {
        let Some(e) = r.spec.elastic else {
            return Ok(());
        };
        // Members being shrunk still hold their GPUs; the size the job runs on without them
        // must be in range (a job being preempted whole may pass a MAX lowered meanwhile: all
        // of it is leaving).
        let size = Self::staying(r).size();
        if size < e.min || (size > e.max && !r.preempt_pending) {
            return Err(format!(
                "elastic job {id} runs at {size}, outside {}..{}",
                e.min, e.max
            ));
        }
        let nodes: BTreeSet<NodeId> = r.allocs.iter().map(|a| a.part.node).collect();
        if nodes.len() != r.allocs.len() {
            return Err(format!("elastic job {id} has two allocations on one node"));
        }
        for g in &r.grown {
            if g.allocs
                .iter()
                .any(|a| !r.allocs.iter().any(|x| x.id == *a))
            {
                return Err(format!(
                    "elastic job {id} has a grown part it does not hold"
                ));
            }
        }
        match r.spec.request.topology {
            TopologyKind::Pod => {
                let pods: BTreeSet<_> = nodes.iter().map(|n| self.cluster.node(*n).pod).collect();
                if pods.len() > 1 {
                    return Err(format!("pod-topology elastic job {id} spans pods"));
                }
            }
            TopologyKind::Node if e.unit == ElasticUnit::Gpus && nodes.len() > 1 => {
                return Err(format!("node-topology elastic job {id} spans nodes"));
            }
            TopologyKind::Node => {
                let size = placement::node_size(&self.cluster, r.spec.partition);
                let whole = r.spec.request.gpus_per_node.is_none_or(|g| g == size);
                if nodes.len() > 1
                    && whole
                    && r.allocs
                        .iter()
                        .any(|a| a.part.gpus.count() != self.cluster.node(a.part.node).gpus)
                {
                    return Err(format!("node-topology elastic job {id} split a node"));
                }
            }
            TopologyKind::Any => {}
        }
        Ok(())
    }
}
