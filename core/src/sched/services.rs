//! Scheduling core II: quotas with borrowing, preemption as a budgeted protocol, inference
//! services, and defragmentation by relocating replicas (seed §7, revisions R1, R3, R4, R6).
//!
//! Who yields (seed §7), in this order: borrowed allocations, lowest priority first and newest
//! borrowed first (LIFO: the newest work has the least progress to lose); then preemptible
//! allocations of accounts without a quota scope ("within quota": not covered by any
//! guarantee), lowest priority first. Never: allocations inside a guarantee, service
//! replicas, non-preemptible jobs, and nothing within `min_runtime_s` of its start.
//!
//! Who may preempt: a service replica (inference preempts training, never the reverse), and a
//! job that would run inside its scope's guarantee (it reclaims borrowed capacity only).

use super::*;
use crate::quota::{QuotaTree, ScopeId};

/// Priority every replica gets on top of its service's priority: inference is scheduled first.
pub(super) const SERVICE_PRIORITY_BASE: u64 = 1 << 40;

/// Who is asking to preempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Preemptor {
    /// A replica; `floor` when its service runs fewer than `min_replicas`.
    Service { service: ServiceId, floor: bool },
    /// A job that would run inside its quota guarantee.
    Guarantee,
}

impl Scheduler {
    /// Sets the account tree (quota.conf); empty turns quotas off.
    pub fn set_quotas(&mut self, quotas: QuotaTree) {
        self.quotas = quotas;
        self.scope_used = vec![0; self.quotas.len()];
    }

    /// The account tree.
    pub fn quotas(&self) -> &QuotaTree {
        &self.quotas
    }

    /// The borrow ledger: running jobs beyond their guarantee and since when (s).
    pub fn borrow_ledger(&self) -> &BTreeMap<JobId, Time> {
        &self.borrowed
    }

    /// Inference services.
    pub fn services(&self) -> &BTreeMap<ServiceId, ServiceSpec> {
        &self.services
    }

    /// Replicas of a service, running and pending.
    pub fn service_replicas(&self, service: ServiceId) -> (Vec<JobId>, Vec<JobId>) {
        let mut running = Vec::new();
        let mut pending = Vec::new();
        for (id, s) in &self.replica_service {
            if *s != service {
                continue;
            }
            if let Some(r) = self.running.get(id) {
                if !r.stopping {
                    running.push(*id);
                }
            } else if self.pending.contains_key(id) {
                pending.push(*id);
            }
        }
        (running, pending)
    }

    /// True for a replica id.
    pub fn is_replica(&self, id: JobId) -> bool {
        self.replica_service.contains_key(&id)
    }

    /// Restores a running replica of `service` (controller restart): its resources as
    /// recorded, counted toward the service's replicas. Panics like
    /// [`Scheduler::restore_running`] when they are not free.
    pub fn restore_replica(&mut self, service: ServiceId, job: RunningJob) {
        let id = job.spec.id;
        self.next_replica = self.next_replica.max(id.0 + 1);
        self.replica_service.insert(id, service);
        self.restore_running(job);
    }

    /// The next replica id the core will hand out (from [`REPLICA_ID_BASE`] up).
    pub fn next_replica_id(&self) -> u64 {
        self.next_replica
    }

    /// Replica ids start at `next` or above from now on (a restarted driver passes the
    /// persisted sequence so a replica id is never reused).
    pub fn set_next_replica_id(&mut self, next: u64) {
        self.next_replica = self.next_replica.max(next).max(REPLICA_ID_BASE);
    }

    /// [`LargestPlaceable`] now inside partition `part`: as [`Scheduler::largest_placeable`],
    /// counting only the partition's nodes (GPUs held by reservations excluded).
    pub fn largest_placeable_in(&self, part: PartId) -> LargestPlaceable {
        self.largest_placeable_where(&|n: NodeId| self.cluster.node(n).partitions.contains(&part))
    }

    /// Preempted share of running training GPUs over the trailing hour, in percent.
    pub fn preempted_share_pct(&self, now: Time) -> u32 {
        self.share_pct(now, 0)
    }

    /// The share after preempting `extra` more GPUs of running training: preempted GPUs over
    /// the trailing hour / (training GPUs still running + those preempted).
    fn share_pct(&self, now: Time, extra: u32) -> u32 {
        let pre: u64 = self
            .preempt_ledger
            .iter()
            .filter(|(t, _)| now.saturating_sub(*t) < 3600)
            .map(|(_, g)| u64::from(*g))
            .sum::<u64>()
            + u64::from(extra);
        // Training still counts until a budgeted preemption (in the ledger, with a deadline)
        // takes it: a backfill job stopped for its reservation's fill is not in the ledger, and
        // leaving it out of the denominator too would raise the share by itself.
        let training: u64 = self
            .running
            .values()
            .filter(|r| r.service().is_none() && !(r.preempt_pending && r.preempt_deadline.is_some()))
            .map(|r| u64::from(r.gpus()))
            .sum::<u64>()
            .saturating_sub(u64::from(extra));
        let denom = training + pre;
        if denom == 0 {
            return 0;
        }
        ((pre * 100).div_ceil(denom)) as u32
    }

    /// Handles the core-II events; returns true when `event` was one of them.
    pub(super) fn handle_services(&mut self, event: &Event, out: &mut Vec<Decision>) -> bool {
        match event {
            Event::ServiceUpsert(spec) => {
                self.services.insert(spec.id, spec.clone());
            }
            Event::ServiceScale { service, desired } => {
                if let Some(s) = self.services.get_mut(service) {
                    s.desired_replicas = *desired;
                }
            }
            Event::ServiceDelete(service) => {
                self.services.remove(service);
            }
            Event::CheckpointAck { job, at } => {
                if let Some(r) = self.running.get_mut(job) {
                    r.last_checkpoint = Some(*at);
                }
            }
            Event::StorageBandwidth(bw) => {
                self.storage_bw = *bw;
                let degraded = *bw < self.config.min_storage_bw_bytes_per_s;
                if degraded != self.storage_degraded {
                    self.storage_degraded = degraded;
                    out.push(Decision::Alert {
                        kind: if degraded { AlertKind::StorageDegraded } else { AlertKind::StorageRecovered },
                        job: None,
                        message: if degraded {
                            format!(
                                "checkpoint bandwidth {bw} B/s is below {} B/s: preemption stopped (a preemption that cannot checkpoint is a kill)",
                                self.config.min_storage_bw_bytes_per_s
                            )
                        } else {
                            format!("checkpoint bandwidth {bw} B/s: preemption resumed")
                        },
                    });
                }
            }
            _ => return false,
        }
        true
    }

    /// Bookkeeping when a running job or replica leaves.
    pub(super) fn forget_running(&mut self, id: JobId) {
        self.borrowed.remove(&id);
        if self.replica_service.remove(&id).is_some() {
            self.relocating.remove(&id);
            self.relocating.retain(|_, (old, _)| *old != id);
        }
    }

    /// Recomputes quota usage and the borrow ledger: inside each scope, running jobs fill the
    /// guarantee oldest first; the rest borrow.
    pub(super) fn refresh_quota(&mut self, now: Time) {
        if self.quotas.is_empty() {
            return;
        }
        self.scope_used = vec![0; self.quotas.len()];
        let mut by_scope: BTreeMap<ScopeId, Vec<(Time, JobId, u32)>> = BTreeMap::new();
        for (id, r) in &self.running {
            if r.service().is_some() {
                continue;
            }
            if let Some(sc) = self.quotas.scope_of(&r.spec.user, &r.spec.account) {
                let g = r.gpus();
                for a in self.quotas.chain(sc) {
                    self.scope_used[a.0 as usize] += g;
                }
                by_scope.entry(sc).or_default().push((r.start, *id, g));
            }
        }
        let mut borrowed: BTreeMap<JobId, Time> = BTreeMap::new();
        for (sc, mut jobs) in by_scope {
            jobs.sort_unstable();
            let guarantee = self.quotas.scope(sc).guaranteed_gpus;
            let mut used = 0u32;
            for (_, id, g) in jobs {
                used += g;
                if used > guarantee {
                    borrowed.insert(id, self.borrowed.get(&id).copied().unwrap_or(now));
                }
            }
        }
        let cluster = &self.cluster;
        for (id, r) in self.running.iter_mut() {
            let b = borrowed.contains_key(id);
            for a in &mut r.allocs {
                let pool = matches!(a.owner, Owner::Job(_)) && cluster.node(a.part.node).inference_pool;
                a.borrowed = b || pool;
            }
        }
        self.borrowed = borrowed;
    }

    /// True when starting `spec` would take its scope or an ancestor past `max_gpus`.
    pub(super) fn over_max(&self, spec: &JobSpec) -> bool {
        let Some(sc) = self.quotas.scope_of(&spec.user, &spec.account) else {
            return false;
        };
        let g = spec.request.gpus;
        self.quotas.chain(sc).any(|a| {
            self.quotas
                .scope(a)
                .max_gpus
                .is_some_and(|m| self.scope_used.get(a.0 as usize).copied().unwrap_or(0) + g > m)
        })
    }

    /// Charges a started job to its scopes (usage changes within a cycle).
    pub(super) fn charge(&mut self, spec: &JobSpec, gpus: u32, now: Time) {
        if let Some(sc) = self.quotas.scope_of(&spec.user, &spec.account) {
            let chain: Vec<ScopeId> = self.quotas.chain(sc).collect();
            for a in chain {
                if let Some(u) = self.scope_used.get_mut(a.0 as usize) {
                    *u += gpus;
                }
            }
            // The newest work of a scope is what exceeds its guarantee: it borrows from now.
            if self.scope_used.get(sc.0 as usize).copied().unwrap_or(0) > self.quotas.scope(sc).guaranteed_gpus {
                self.borrowed.insert(spec.id, now);
            }
        }
    }

    /// Level-triggered reconciliation of every service to its target replica count:
    /// missing replicas become pending jobs; surplus replicas stop, pending first, then the
    /// newest running. Replicas of deleted services stop.
    pub(super) fn reconcile_services(&mut self, now: Time, out: &mut Vec<Decision>) {
        let services: Vec<ServiceSpec> = self.services.values().cloned().collect();
        let orphans: BTreeSet<ServiceId> = self
            .replica_service
            .values()
            .filter(|s| !self.services.contains_key(s))
            .copied()
            .collect();
        for spec in &services {
            let (running, pending) = self.service_replicas(spec.id);
            let target = spec.target() as usize;
            let have = running.len() + pending.len();
            if have < target {
                for _ in have..target {
                    let id = JobId(self.next_replica);
                    self.next_replica += 1;
                    let mut js = JobSpec::simple(id.0, now, spec.replica.clone(), None);
                    js.partition = spec.partition;
                    js.account = spec.account.clone();
                    js.user = spec.user.clone();
                    js.base_priority = spec.priority;
                    self.replica_service.insert(id, spec.id);
                    let shape = self.intern(&js.request);
                    self.pending.insert(
                        id,
                        PendingJob::new(js, shape),
                    );
                }
            } else if have > target {
                let mut surplus = have - target;
                for id in pending.iter().rev() {
                    if surplus == 0 {
                        break;
                    }
                    self.pending.remove(id);
                    self.replica_service.remove(id);
                    self.drop_reservation(*id, out);
                    surplus -= 1;
                }
                let mut newest: Vec<(Time, JobId)> = running.iter().map(|id| (self.running[id].start, *id)).collect();
                newest.sort_unstable_by(|a, b| b.cmp(a));
                for (_, id) in newest.into_iter().take(surplus) {
                    self.stop_replica(spec.id, id, out);
                }
            }
        }
        for service in orphans {
            let (running, pending) = self.service_replicas(service);
            for id in pending {
                self.pending.remove(&id);
                self.replica_service.remove(&id);
                self.drop_reservation(id, out);
            }
            for id in running {
                self.stop_replica(service, id, out);
            }
        }
    }

    fn stop_replica(&mut self, service: ServiceId, id: JobId, out: &mut Vec<Decision>) {
        if let Some(r) = self.running.get_mut(&id) {
            if !r.stopping {
                r.stopping = true;
                out.push(Decision::StopReplica { service, replica: id });
            }
        }
    }

    /// The victims `who` may take, in preemption order.
    fn victims(&self, who: Preemptor, preemptor_priority: u64, now: Time) -> Vec<JobId> {
        let mut v: Vec<(u8, u64, std::cmp::Reverse<Time>, std::cmp::Reverse<JobId>)> = Vec::new();
        for (id, r) in &self.running {
            if r.service().is_some() || !r.spec.preemptible || r.preempt_pending || r.stopping {
                continue;
            }
            if now.saturating_sub(r.start) < self.config.min_runtime_s {
                continue;
            }
            let prio = u64::from(r.spec.base_priority);
            // Training on inference-pool nodes borrowed the pool's headroom: reclaimed first.
            let pool_borrow = r.allocs.iter().any(|a| self.cluster.node(a.part.node).inference_pool);
            let tier = if let Some(&since) = self.borrowed.get(id).or(pool_borrow.then_some(&r.start)) {
                // Borrowed: lowest priority first, newest borrowed first.
                v.push((0, prio, std::cmp::Reverse(since), std::cmp::Reverse(*id)));
                continue;
            } else if self.quotas.scope_of(&r.spec.user, &r.spec.account).is_none() {
                1
            } else {
                // Inside its guarantee: never (invariant 4).
                continue;
            };
            if matches!(who, Preemptor::Service { .. }) && prio < preemptor_priority {
                v.push((tier, prio, std::cmp::Reverse(r.start), std::cmp::Reverse(*id)));
            }
        }
        v.sort_unstable();
        v.into_iter().map(|(_, _, _, std::cmp::Reverse(id))| id).collect()
    }

    /// The per-node parts of `victims`' allocations.
    fn parts_of(&self, victims: &[JobId]) -> Vec<NodeAlloc> {
        victims
            .iter()
            .flat_map(|v| self.running[v].allocs.iter().map(|a| a.part.clone()))
            .collect()
    }

    /// Places `spec` as if `released` were free: they are given back to the cluster for the
    /// attempt and taken again after it (no copy of the cluster).
    fn place_with_released(&mut self, spec: &JobSpec, rank: &(u64, Time, JobId), released: &[NodeAlloc]) -> Option<Vec<NodeAlloc>> {
        for p in released {
            self.cluster.give_back(p);
        }
        let placed = {
            let blocked = |n: NodeId| self.blocked_for(n, Some(rank), None);
            let ctx = PlaceCtx {
                cluster: &self.cluster,
                blocked: &blocked,
                tie_rank: self.tie_rank.as_deref(),
                partition: spec.partition,
                job_end: None,
                busy_until: None,
            };
            placement::place(&ctx, self.placement.as_ref(), &spec.request).ok()
        };
        for p in released {
            self.cluster.take(p);
        }
        placed
    }

    /// The smallest prefix of the victim order that makes `spec` placeable in its topology,
    /// then minimised: victims the placement does not touch are dropped, and each remaining
    /// one is dropped if the placement still works without it.
    fn plan_victims(
        &mut self,
        spec: &JobSpec,
        rank: &(u64, Time, JobId),
        order: &[JobId],
    ) -> Option<(Vec<JobId>, Vec<NodeAlloc>)> {
        // Cheap bound first: the prefix must free at least the GPUs asked for.
        let need = spec.request.gpus;
        let mut freed = 0u32;
        let mut released: Vec<NodeAlloc> = Vec::new();
        let mut found = None;
        for (i, v) in order.iter().enumerate() {
            let parts = self.parts_of(std::slice::from_ref(v));
            freed += parts.iter().map(|p| p.gpus.count()).sum::<u32>();
            released.extend(parts);
            if freed < need {
                continue;
            }
            if let Some(p) = self.place_with_released(spec, rank, &released) {
                found = Some((i + 1, p));
                break;
            }
        }
        let (prefix, placed) = found?;
        let nodes: BTreeSet<NodeId> = placed.iter().map(|p| p.node).collect();
        let mut set: Vec<JobId> = order[..prefix]
            .iter()
            .filter(|v| self.running[*v].allocs.iter().any(|a| nodes.contains(&a.part.node)))
            .copied()
            .collect();
        let parts = self.parts_of(&set);
        let mut best = self.place_with_released(spec, rank, &parts)?;
        let mut i = set.len();
        while i > 0 {
            i -= 1;
            let mut trial = set.clone();
            trial.remove(i);
            let parts = self.parts_of(&trial);
            if let Some(p) = self.place_with_released(spec, rank, &parts) {
                set = trial;
                best = p;
            }
        }
        Some((set, best))
    }

    /// Tries to make room for a blocked job by preemption. On success the victims get
    /// [`Decision::Preempt`] and the job a reservation on the GPUs they free; returns true.
    pub(super) fn try_preempt(
        &mut self,
        id: JobId,
        key: (u64, Time, JobId),
        now: Time,
        out: &mut Vec<Decision>,
    ) -> bool {
        let Some(p) = self.pending.get(&id) else { return false };
        let spec = p.spec.clone();
        let priority = p.priority;
        let who = if let Some(&service) = self.replica_service.get(&id) {
            let (running, pending) = self.service_replicas(service);
            // Replicas already on their way (their victims are checkpointing) count toward
            // the floor: only the replicas needed to reach it are never throttled.
            let arriving = pending
                .iter()
                .filter(|p| self.reservations.iter().any(|r| r.job == **p && r.preempting))
                .count();
            let min = self.services.get(&service).map_or(0, |s| s.min_replicas);
            Preemptor::Service { service, floor: ((running.len() + arriving) as u32) < min }
        } else if self.within_guarantee(&spec) {
            Preemptor::Guarantee
        } else {
            return false;
        };
        if spec.request.gpus == 0 || spec.request.is_share() {
            return false;
        }
        if self.storage_degraded {
            return false;
        }
        let order = self.victims(who, priority, now);
        if order.is_empty() {
            return false;
        }
        let Some((victims, parts)) = self.plan_victims(&spec, &key, &order) else {
            return false;
        };
        if victims.is_empty() {
            return false;
        }
        // Checkpoint bandwidth: all checkpoints in flight plus these must fit the deadline.
        let inflight: u64 = self
            .running
            .values()
            .filter(|r| r.preempt_pending)
            .map(|r| r.spec.checkpoint_bytes)
            .sum();
        let bytes: u64 = victims.iter().map(|v| self.running[v].spec.checkpoint_bytes).sum();
        let bw = self.storage_bw.max(1);
        let deadline_s = ((inflight + bytes).saturating_mul(self.config.deadline_factor))
            .div_ceil(bw)
            .max(self.config.min_deadline_s);
        if deadline_s > self.config.max_deadline_s {
            return false;
        }
        // The budget (seed R6).
        let gpus: u32 = victims.iter().map(|v| self.running[v].gpus()).sum();
        let rate = self.share_pct(now, gpus);
        let floor = matches!(who, Preemptor::Service { floor: true, .. });
        if rate > self.config.budget_page_pct && !floor {
            if let Preemptor::Service { service, .. } = who {
                self.page(service, &victims, rate, now, out);
            }
            return false;
        }
        if rate > self.config.budget_warn_pct {
            out.push(Decision::Alert {
                kind: AlertKind::PreemptionBudgetWarn,
                job: Some(id),
                message: format!(
                    "preempting {gpus} GPUs for job {id}: {rate}% of running training GPUs preempted in the last hour (warn at {}%, page at {}%)",
                    self.config.budget_warn_pct, self.config.budget_page_pct
                ),
            });
        }
        let deadline = now + deadline_s;
        for v in &victims {
            let r = self.running.get_mut(v).expect("victim runs");
            r.preempt_pending = true;
            r.preempt_deadline = Some(deadline);
            let since = now - r.last_checkpoint.unwrap_or(r.start).min(now);
            let cost = f64::from(r.gpus()) * since as f64 / 3600.0;
            self.preempt_ledger.push_back((now, r.gpus()));
            out.push(Decision::Preempt {
                job: *v,
                for_job: id,
                for_service: match who {
                    Preemptor::Service { service, .. } => Some(service),
                    Preemptor::Guarantee => None,
                },
                deadline,
                checkpoint_bytes: r.spec.checkpoint_bytes,
                bandwidth: bw,
                cost_gpu_hours: cost,
            });
        }
        while self.preempt_ledger.front().is_some_and(|(t, _)| now.saturating_sub(*t) >= 3600) {
            self.preempt_ledger.pop_front();
        }
        // Hold the freed GPUs for the preemptor.
        self.drop_reservation(id, out);
        let mut gpus_held: Vec<(NodeId, GpuMask)> = parts.iter().map(|p| (p.node, p.gpus)).collect();
        gpus_held.sort_by_key(|(n, _)| *n);
        let r = Reservation {
            job: id,
            rank: key,
            gpus: gpus_held,
            est_fill: deadline,
            created: now,
            dirty: false,
            preempting: true,
        };
        self.add_reservation(r, now, out);
        true
    }

    /// True when `spec` would run inside its scope's guarantee.
    fn within_guarantee(&self, spec: &JobSpec) -> bool {
        let Some(sc) = self.quotas.scope_of(&spec.user, &spec.account) else {
            return false;
        };
        let used = self.scope_used.get(sc.0 as usize).copied().unwrap_or(0);
        used + spec.request.gpus <= self.quotas.scope(sc).guaranteed_gpus
    }

    fn page(&mut self, service: ServiceId, victims: &[JobId], rate: u32, now: Time, out: &mut Vec<Decision>) {
        if self.paged.get(&service).is_some_and(|t| now.saturating_sub(*t) < 3600) {
            return;
        }
        let Some(spec) = self.services.get(&service).cloned() else { return };
        self.paged.insert(service, now);
        let (running, _) = self.service_replicas(service);
        let wanted = spec.target();
        let have = running.len() as u32;
        let missing = wanted.saturating_sub(have);
        let would: Vec<PageVictim> = victims
            .iter()
            .map(|v| {
                let r = &self.running[v];
                PageVictim {
                    job: *v,
                    account: r.spec.account.clone(),
                    gpus: r.gpus(),
                    runtime_s: now.saturating_sub(r.start),
                    since_checkpoint_s: now.saturating_sub(r.last_checkpoint.unwrap_or(r.start)),
                }
            })
            .collect();
        let preempt_cost: f64 = would
            .iter()
            .map(|w| f64::from(w.gpus) * w.since_checkpoint_s as f64 / 3600.0)
            .sum();
        let degraded = f64::from(missing * spec.replica.gpus);
        out.push(Decision::Page(Box::new(Page {
            service,
            name: spec.name.clone(),
            wanted,
            have,
            min: spec.min_replicas,
            gpus_blocked: missing * spec.replica.gpus,
            rate_pct: rate,
            limit_pct: self.config.budget_page_pct,
            would_preempt: would,
            preempt_cost_gpu_hours: preempt_cost,
            degraded_cost_gpu_hours: degraded,
            actions: vec![
                format!("raise budget to {}%", rate.div_ceil(5) * 5),
                "preempt listed jobs".into(),
                "accept degraded".into(),
            ],
        })));
    }

    /// Holds back the swap pool: the first `swap_pool_nodes` wholly free nodes (seed R4).
    pub(super) fn choose_swap(&mut self) {
        self.swap.clear();
        if self.config.swap_pool_nodes == 0 {
            return;
        }
        for (i, n) in self.cluster.nodes.iter().enumerate() {
            if self.swap.len() == self.config.swap_pool_nodes {
                break;
            }
            if n.avail.schedulable() && n.gpus > 0 && n.is_idle() && self.held[i].is_empty() {
                self.swap.push(NodeId(i as u32));
            }
        }
    }

    /// Defragmentation (seed §6, R4): when a whole-node job waits and no node is free enough,
    /// relocate the service replicas off one partly used node onto other partly used nodes
    /// (or the swap pool) — start new, then drain old — at most `max_relocations` at a time,
    /// and reserve the node for the waiting job. Training is never touched.
    pub(super) fn defragment(&mut self, waiting: &[(JobId, (u64, Time, JobId))], now: Time, out: &mut Vec<Decision>) {
        if waiting.is_empty() || self.relocating.len() >= self.config.max_relocations {
            return;
        }
        for &(job, key) in waiting {
            let Some(p) = self.pending.get(&job) else { continue };
            let spec = p.spec.clone();
            let need = spec.request.gpus;
            let lp = self.largest_placeable();
            if lp.node >= need || self.reservations.iter().any(|r| r.job == job && r.est_fill <= now + 120) {
                continue;
            }
            // Candidate nodes: partly used, every allocation a movable replica, enough GPUs.
            let mut best: Option<(usize, NodeId, Vec<JobId>)> = None;
            for (i, n) in self.cluster.nodes.iter().enumerate() {
                let id = NodeId(i as u32);
                if !n.avail.schedulable() || n.gpus < need || !n.partitions.contains(&spec.partition) || n.gpus_all_free() {
                    continue;
                }
                if !self.held[i].is_empty() {
                    continue;
                }
                let occupants: Vec<JobId> = self.node_jobs[i].iter().map(|(j, _)| *j).collect();
                let movable = occupants.iter().all(|j| {
                    self.running.get(j).is_some_and(|r| {
                        r.service().is_some() && !r.stopping && r.allocs.len() == 1 && !self.relocating.contains_key(j)
                    })
                });
                if !movable || occupants.is_empty() {
                    continue;
                }
                if occupants.len() + self.relocating.len() > self.config.max_relocations {
                    continue;
                }
                if best.as_ref().is_none_or(|(c, _, _)| occupants.len() < *c) {
                    best = Some((occupants.len(), id, occupants));
                }
            }
            let Some((_, target, movers)) = best else { continue };
            // Place each mover elsewhere: not on the target, not on a whole free node unless
            // it is in the swap pool.
            let mut scratch = self.cluster.clone();
            let mut plans: Vec<(JobId, Vec<NodeAlloc>)> = Vec::new();
            let swap = self.swap.clone();
            let mut ok = true;
            for m in &movers {
                let r = &self.running[m];
                let mut req = r.spec.request.clone();
                req.excluded_nodes.push(target);
                for (i, n) in scratch.nodes.iter().enumerate() {
                    let nid = NodeId(i as u32);
                    if n.gpus_all_free() && !swap.contains(&nid) && !req.excluded_nodes.contains(&nid) {
                        req.excluded_nodes.push(nid);
                    }
                }
                let blocked = |n: NodeId| self.blocked_for(n, None, None);
                let ctx = PlaceCtx {
                    cluster: &scratch,
                    blocked: &blocked,
                    tie_rank: self.tie_rank.as_deref(),
                    partition: r.spec.partition,
                    job_end: None,
                    busy_until: None,
                };
                match placement::place(&ctx, self.placement.as_ref(), &req) {
                    Ok(parts) => {
                        for p in &parts {
                            scratch.take(p);
                        }
                        plans.push((*m, parts));
                    }
                    Err(_) => {
                        ok = false;
                        break;
                    }
                }
            }
            if !ok {
                continue;
            }
            for (old, parts) in plans {
                let service = self.replica_service[&old];
                let spec_old = self.running[&old].spec.clone();
                let new = JobId(self.next_replica);
                self.next_replica += 1;
                let mut js = spec_old.clone();
                js.id = new;
                js.submit_time = now;
                self.replica_service.insert(new, service);
                let mut allocs = Vec::new();
                for part in parts {
                    self.cluster.take(&part);
                    allocs.push(Allocation {
                        id: AllocId(self.next_alloc),
                        owner: Owner::Replica { service, replica: new },
                        part,
                        created_at: now,
                        preemptible: false,
                        borrowed: false,
                        backfill_for: None,
                    });
                    self.next_alloc += 1;
                }
                let run = RunningJob {
                    spec: js,
                    allocs: allocs.clone(),
                    start: now,
                    end: None,
                    backfill_for: Vec::new(),
                    preempt_pending: false,
                    stopping: false,
                    last_checkpoint: None,
                    preempt_deadline: None,
                };
                self.note_started(&run);
                self.running.insert(new, run);
                if let Some(r) = self.running.get_mut(&old) {
                    r.stopping = true;
                }
                self.relocating.insert(new, (old, job));
                out.push(Decision::Relocate { service, from: old, to: new, allocs, for_job: job });
            }
            self.lp_cache = None;
            // Reserve the node being freed for the waiting job.
            self.drop_reservation(job, out);
            let r = Reservation {
                job,
                rank: key,
                gpus: vec![(target, GpuMask::all(need))],
                est_fill: now + 60,
                created: now,
                dirty: false,
                preempting: true,
            };
            self.add_reservation(r, now, out);
            if self.relocating.len() >= self.config.max_relocations {
                break;
            }
        }
    }
}
