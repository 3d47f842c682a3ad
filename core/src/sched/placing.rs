//! Placement of a pending job against the held reservations, and binding a placed job.

use super::{AllocId, Allocation, Decision, Owner, Rank, RunningJob, Scheduler};
use crate::cluster::{GpuMask, NodeAlloc, NodeId, Time};
use crate::job::{JobId, JobSpec};
use crate::placement::{self, PlaceCtx};

impl Scheduler {
    pub(super) fn try_place(
        &self,
        now: Time,
        spec: &JobSpec,
        rank: Option<&Rank>,
        backfill_end: Option<Time>,
    ) -> Result<Vec<NodeAlloc>, placement::NoFit> {
        // Inference pool: replicas try the pool first; training may use pool nodes
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
        rank: Option<&Rank>,
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
            return placement::place_range(&ctx, self.placement.as_ref(), &req);
        }
        placement::place_range(&ctx, self.placement.as_ref(), &spec.request)
    }

    pub(super) fn bind(&mut self, spec: &JobSpec, parts: Vec<NodeAlloc>, backfill_for: Vec<JobId>, now: Time, out: &mut Vec<Decision>) {
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
        self.queue_changed(spec.id);
        let reason_prev = self.pending.remove(&spec.id).and_then(|p| p.reason_prev);
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
            grown: Vec::new(),
            resized_at: None,
            reason_prev,
        };
        self.note_started(&run);
        self.running.insert(spec.id, run);
    }
}
