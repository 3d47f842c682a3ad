//! Preemption as a budgeted protocol: who yields, the smallest set of victims, the checkpoint
//! deadline, the trailing-hour budget and the page a human answers.
//!
//! Who yields, in this order: borrowed allocations, lowest priority first and newest
//! borrowed first (LIFO: the newest work has the least progress to lose); then preemptible
//! allocations of accounts without a quota scope ("within quota": not covered by any
//! guarantee), lowest priority first. Never: allocations inside a guarantee, service
//! replicas, non-preemptible jobs, and nothing within `min_runtime_s` of its start.
//!
//! Who may preempt: a service replica (inference preempts training, never the reverse), a
//! job that would run inside its scope's guarantee (it reclaims borrowed capacity only), and
//! a training job whose QOS has a `Preempt=` list (preemptible training of the QOS listed,
//! outside guarantees). A job whose QOS sets `PreemptExemptTime` is not preempted before it
//! ran that long (nor, whatever its QOS, before `min_runtime_s`).

use super::elastic::Victim;
use super::{AlertKind, Decision, Page, PageVictim, Rank, Scheduler, ServiceId};
use crate::cluster::{NodeAlloc, NodeId, Time};
use crate::job::{JobId, JobSpec};
use crate::placement::{self, PlaceCtx};
use std::collections::BTreeSet;

/// Who is asking to preempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Preemptor {
    /// A replica; `floor` when its service runs fewer than `min_replicas`.
    Service { service: ServiceId, floor: bool },
    /// A job that would run inside its quota guarantee.
    Guarantee,
    /// A training job whose QOS has a `Preempt=` list: it may preempt preemptible training
    /// jobs of the QOS listed (never a replica: inference is never preempted).
    Qos,
}

impl Scheduler {
    /// The measured checkpoint bandwidth (bytes/s) the preemption deadline assumes from now
    /// on. Below `min_storage_bw_bytes_per_s` preemption stops (a preemption that cannot
    /// checkpoint is a kill); crossing that floor either way raises an alert.
    pub(super) fn set_storage_bandwidth(&mut self, bw: u64, out: &mut Vec<Decision>) {
        self.storage_bw = bw;
        let degraded = bw < self.config.min_storage_bw_bytes_per_s;
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

    /// The checkpoint bandwidth the preemption deadline assumes now (bytes/s; the last
    /// [`Event::StorageBandwidth`](super::Event::StorageBandwidth)).
    pub fn storage_bandwidth(&self) -> u64 {
        self.storage_bw
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

    /// The seconds `spec` must have run before it may be preempted: `min_runtime_s`, or its
    /// QOS's `PreemptExemptTime` when longer (Slurm's `acct_policy_get_preemptable_time`).
    fn exempt_s(&self, spec: &JobSpec) -> u64 {
        let qos = self.accounting.qos.get(&spec.qos).and_then(|q| q.preempt_exempt_time_s);
        qos.unwrap_or(0).max(self.config.min_runtime_s)
    }

    /// The victims `who` may take, in preemption order; for a [`Preemptor::Qos`] only jobs
    /// whose QOS `preempts` lists.
    fn victims(&self, who: Preemptor, preemptor_priority: u64, preempts: &[String], now: Time) -> Vec<JobId> {
        let mut v: Vec<(u8, u64, std::cmp::Reverse<Time>, std::cmp::Reverse<JobId>)> = Vec::new();
        for (id, r) in &self.running {
            if r.service().is_some() || !r.spec.preemptible || r.preempt_pending || r.stopping {
                continue;
            }
            if now.saturating_sub(r.start) < self.exempt_s(&r.spec) {
                continue;
            }
            if who == Preemptor::Qos && !preempts.contains(&r.spec.qos) {
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
            if (matches!(who, Preemptor::Service { .. }) && prio < preemptor_priority) || who == Preemptor::Qos {
                v.push((tier, prio, std::cmp::Reverse(r.start), std::cmp::Reverse(*id)));
            }
        }
        v.sort_unstable();
        v.into_iter().map(|(_, _, _, std::cmp::Reverse(id))| id).collect()
    }

    /// Places `spec` as if `released` were free: they are given back to the cluster for the
    /// attempt and taken again after it (no copy of the cluster).
    pub(super) fn place_with_released(&mut self, spec: &JobSpec, rank: &Rank, released: &[NodeAlloc]) -> Option<Vec<NodeAlloc>> {
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
    /// one is dropped (last first, so whole jobs before grown parts) if the placement still
    /// works without it.
    pub(super) fn plan_victims(
        &mut self,
        spec: &JobSpec,
        rank: &Rank,
        order: &[Victim],
    ) -> Option<(Vec<Victim>, Vec<NodeAlloc>)> {
        // Cheap bound first: with the usable free GPUs, the prefix must free at least the
        // GPUs asked for.
        let part = &self.cluster.partitions[spec.partition.0 as usize];
        let free: u32 = part
            .nodes
            .iter()
            .filter(|n| self.cluster.node(**n).avail.schedulable())
            .map(|&n| self.cluster.node(n).free_gpus.minus(self.blocked_for(n, Some(rank), None)).count())
            .sum();
        let need = spec.request.gpus.saturating_sub(free);
        // The shortest prefix freeing that many GPUs; then, placement being monotone in what
        // is released, a galloping search for the shortest prefix that places: prefixes
        // growing by 1, 2, 4, ... and a binary search in the last gap (O(log k) placement
        // attempts for an answer of k victims, however long the order, which grown parts
        // make long).
        let mut freed = 0u32;
        let mut lo = order.len();
        for (i, v) in order.iter().enumerate() {
            // A whole job also frees its grown parts, counted already: count its base.
            freed += match v {
                Victim::Grown(..) => self.victim_parts(std::slice::from_ref(v)).iter().map(|p| p.gpus.count()).sum(),
                Victim::Job(j) => self.running.get(j).map_or(0, |r| r.gpus() - r.grown_gpus()),
            };
            if freed >= need {
                lo = i + 1;
                break;
            }
        }
        if order.is_empty() {
            return None;
        }
        let try_prefix = |s: &mut Self, k: usize| {
            let released = s.victim_parts(&order[..k]);
            s.place_with_released(spec, rank, &released)
        };
        // Known: prefixes shorter than `lo` fail; find `hi` that places.
        let (mut step, mut hi) = (1usize, lo.max(1));
        let mut found = loop {
            if let Some(p) = try_prefix(self, hi) {
                break Some((hi, p));
            }
            if hi == order.len() {
                return None;
            }
            lo = hi + 1;
            hi = (hi + step).min(order.len());
            step *= 2;
        };
        while lo < hi {
            let mid = (lo + hi) / 2;
            match try_prefix(self, mid) {
                Some(p) => {
                    found = Some((mid, p));
                    hi = mid;
                }
                None => lo = mid + 1,
            }
        }
        let (prefix, placed) = found?;
        let nodes: BTreeSet<NodeId> = placed.iter().map(|p| p.node).collect();
        let mut set: Vec<Victim> = order[..prefix].iter().filter(|v| self.victim_touches(v, &nodes)).cloned().collect();
        let parts = self.victim_parts(&set);
        let mut best = self.place_with_released(spec, rank, &parts)?;
        let mut i = set.len();
        while i > 0 {
            i -= 1;
            let mut trial = set.clone();
            trial.remove(i);
            let parts = self.victim_parts(&trial);
            if let Some(p) = self.place_with_released(spec, rank, &parts) {
                set = trial;
                best = p;
            }
        }
        Some((set, best))
    }

    /// Who `id` (pending, of `spec`) preempts as: a replica (`floor` when its service runs
    /// fewer than `min_replicas`, counting replicas whose victims are already checkpointing,
    /// so only the replicas needed to reach the floor are never throttled), or a job that
    /// would run inside its quota guarantee; `None` for anyone else.
    fn preemptor(&self, id: JobId, spec: &JobSpec) -> Option<Preemptor> {
        if let Some(&service) = self.replica_service.get(&id) {
            let (running, pending) = self.service_replicas(service);
            let arriving = pending
                .iter()
                .filter(|p| self.reservations.iter().any(|r| r.job == **p && r.preempting))
                .count();
            let min = self.services.get(&service).map_or(0, |s| s.min_replicas);
            Some(Preemptor::Service { service, floor: ((running.len() + arriving) as u32) < min })
        } else if self.within_guarantee(spec) {
            Some(Preemptor::Guarantee)
        } else if !self.qos_preempts(spec).is_empty() {
            Some(Preemptor::Qos)
        } else {
            None
        }
    }

    /// The QOS a job of `spec`'s QOS may preempt (its `Preempt=` list; empty without
    /// accounting).
    fn qos_preempts(&self, spec: &JobSpec) -> &[String] {
        self.accounting.qos.get(&spec.qos).map_or(&[], |q| q.preempt.as_slice())
    }

    /// The kill deadline (s after now) for preempting `victims`: every checkpoint in flight
    /// plus theirs, in bytes, over the measured bandwidth × `deadline_factor`, at least
    /// `min_deadline_s`; `None` when that passes `max_deadline_s` (too many checkpoints at
    /// once for the storage).
    pub(super) fn preemption_deadline_s(&self, victims: &[JobId]) -> Option<u64> {
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
        (deadline_s <= self.config.max_deadline_s).then_some(deadline_s)
    }

    /// Decides the preemption of `victims` for `for_job` (of `for_service` when a replica):
    /// each gets [`Decision::Preempt`] with the kill `deadline` and the GPU-hours since its
    /// last checkpoint, and enters the budget's ledger, which keeps the trailing hour.
    fn preempt_victims(&mut self, victims: &[JobId], for_job: JobId, for_service: Option<ServiceId>, deadline: Time, now: Time, out: &mut Vec<Decision>) {
        let bw = self.storage_bw.max(1);
        for v in victims {
            let r = self.running.get_mut(v).expect("victim runs");
            r.preempt_pending = true;
            r.preempt_deadline = Some(deadline);
            let since = now - r.last_checkpoint.unwrap_or(r.start).min(now);
            let cost = f64::from(r.gpus()) * since as f64 / 3600.0;
            self.preempt_ledger.push_back((now, r.gpus()));
            out.push(Decision::Preempt {
                job: *v,
                for_job,
                for_service,
                deadline,
                checkpoint_bytes: r.spec.checkpoint_bytes,
                bandwidth: bw,
                cost_gpu_hours: cost,
            });
        }
        while self.preempt_ledger.front().is_some_and(|(t, _)| now.saturating_sub(*t) >= 3600) {
            self.preempt_ledger.pop_front();
        }
    }

    /// Tries to make room for a blocked job by preemption. On success the victims get
    /// [`Decision::Preempt`] and the job a reservation on the GPUs they free; returns true.
    pub(super) fn try_preempt(
        &mut self,
        id: JobId,
        key: Rank,
        now: Time,
        out: &mut Vec<Decision>,
    ) -> bool {
        let Some(p) = self.pending.get(&id) else { return false };
        let spec = p.spec.clone();
        let priority = p.priority;
        let Some(who) = self.preemptor(id, &spec) else { return false };
        if spec.request.gpus == 0 || spec.request.is_share() {
            return false;
        }
        if self.storage_degraded {
            return false;
        }
        let preempts = self.qos_preempts(&spec).to_vec();
        let jobs = self.victims(who, priority, &preempts, now);
        // Every grown part is taken back before any whole job (the `elastic` module).
        let mut order = self.grown_victims();
        if order.is_empty() && jobs.is_empty() {
            return false;
        }
        order.extend(jobs.into_iter().map(Victim::Job));
        let Some((plan, parts)) = self.plan_victims(&spec, &key, &order) else {
            return false;
        };
        let victims: Vec<JobId> = plan.iter().filter(|v| matches!(v, Victim::Job(_))).map(Victim::job).collect();
        // Grown parts of a job preempted whole leave with it.
        let shrinks: Vec<Victim> = plan.into_iter().filter(|v| matches!(v, Victim::Grown(..)) && !victims.contains(&v.job())).collect();
        if victims.is_empty() {
            // Shrinking alone makes room (the reclaim stage had no attempt left, or a held
            // reservation is being sped up).
            if shrinks.is_empty() {
                return false;
            }
            let fill = self.shrink_victims(&shrinks, Some(id), now, out);
            self.hold_for(id, key, &parts, fill, now, out);
            return true;
        }
        let Some(deadline_s) = self.preemption_deadline_s(&victims) else { return false };
        // The budget: the preempted share of running training over the trailing hour.
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
        let for_service = match who {
            Preemptor::Service { service, .. } => Some(service),
            Preemptor::Guarantee | Preemptor::Qos => None,
        };
        let fill = self.shrink_victims(&shrinks, Some(id), now, out).max(deadline);
        self.preempt_victims(&victims, id, for_service, deadline, now, out);
        // Hold the freed GPUs for the preemptor.
        self.hold_for(id, key, &parts, fill, now, out);
        true
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
}
