//! One scheduling cycle, in named stages.

use super::reservations::outranks;
use super::services::SERVICE_PRIORITY_BASE;
use super::{Decision, PendingInfo, PriorityInput, QueueMode, Rank, Reason, Scheduler};
use crate::cluster::{NodeId, PartId, Time};
use crate::config::TopologyKind;
use crate::job::{HoldKind, JobId};
use crate::placement;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

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
    /// One scheduling cycle at `now`: priority, reservations, placement and backfill.
    pub fn cycle(&mut self, now: Time) -> Vec<Decision> {
        let mut out = Vec::new();
        self.lp_cache = None;
        // 0. Quotas, services, swap pool.
        self.refresh_quota(now);
        self.reconcile_services(now, &mut out);
        self.choose_swap();
        // 1. Priorities and eligibility.
        let mut order: Vec<(Rank, JobId)> = Vec::with_capacity(self.pending.len());
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
        let mut waiting: Vec<(JobId, Rank)> = Vec::new();
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
}
