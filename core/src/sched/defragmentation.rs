//! Defragmentation: the swap pool of wholly free nodes held back as relocation scratch, and
//! relocating service replicas off a partly used node so a waiting whole-node job can start.
//! Training is never touched.

use super::{AllocId, Allocation, Decision, Owner, Rank, Reservation, RunningJob, Scheduler};
use crate::cluster::{GpuMask, NodeAlloc, NodeId, Time};
use crate::job::{JobId, JobSpec};
use crate::placement::{self, PlaceCtx};

impl Scheduler {
    /// Holds back the swap pool: the first `swap_pool_nodes` wholly free GPU nodes (in node
    /// order, schedulable, no reservation on them), scratch space for relocations.
    pub(super) fn choose_swap(&mut self) {
        let old = std::mem::take(&mut self.swap);
        if self.config.swap_pool_nodes > 0 {
            for (i, n) in self.cluster.nodes.iter().enumerate() {
                if self.swap.len() == self.config.swap_pool_nodes {
                    break;
                }
                if n.avail.schedulable() && n.gpus > 0 && n.is_idle() && self.held[i].is_empty() {
                    self.swap.push(NodeId(i as u32));
                }
            }
        }
        // Placement reads the swap pool: a new one voids the incremental cycle's failures.
        if old != self.swap {
            self.touch_fit();
        }
    }

    /// The defragment stage: when a whole-node job waits and no node is free enough,
    /// relocate the service replicas off one partly used node onto other partly used nodes
    /// (or the swap pool) — start new, then drain old — at most `max_relocations` at a time,
    /// and reserve the node for the waiting job. Training is never touched.
    ///
    /// Reads the blocked whole-node jobs of this cycle (`waiting`, in rank order), the
    /// cluster, the replicas and the reservations; writes `Relocate` decisions (the new
    /// replicas already hold their GPUs, the old ones are stopping) and a reservation on the
    /// node being freed, made as by a preemption (its GPUs are being freed).
    pub(super) fn defragment(&mut self, waiting: &[(JobId, Rank)], now: Time, out: &mut Vec<Decision>) {
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
            let Some((target, movers)) = self.relocation_target(&spec, need) else { continue };
            let Some(plans) = self.plan_moves(target, &movers) else { continue };
            for (old, parts) in plans {
                self.start_relocation(old, parts, job, now, out);
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

    /// The node to free for a waiting job of `spec` needing `need` GPUs on one node, and the
    /// replicas to move off it: a schedulable, partly used node of the job's partition with
    /// enough GPUs, no reservation on it, and only movable replicas on it (running, not
    /// stopping, on one node, not relocating already), within the relocation limit; the one
    /// with the fewest replicas (lowest node id among equals).
    fn relocation_target(&self, spec: &JobSpec, need: u32) -> Option<(NodeId, Vec<JobId>)> {
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
        best.map(|(_, target, movers)| (target, movers))
    }

    /// Where each of `movers` would run instead, all or nothing: not on `target`, not on a
    /// wholly free node unless it is in the swap pool, never on reserved GPUs; placed one
    /// after the other on a scratch copy of the cluster.
    fn plan_moves(&self, target: NodeId, movers: &[JobId]) -> Option<Vec<(JobId, Vec<NodeAlloc>)>> {
        let mut scratch = self.cluster.clone();
        let mut plans: Vec<(JobId, Vec<NodeAlloc>)> = Vec::new();
        for m in movers {
            let r = &self.running[m];
            let mut req = r.spec.request.clone();
            req.excluded_nodes.push(target);
            for (i, n) in scratch.nodes.iter().enumerate() {
                let nid = NodeId(i as u32);
                if n.gpus_all_free() && !self.swap.contains(&nid) && !req.excluded_nodes.contains(&nid) {
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
            let parts = placement::place(&ctx, self.placement.as_ref(), &req).ok()?;
            for p in &parts {
                scratch.take(p);
            }
            plans.push((*m, parts));
        }
        Some(plans)
    }

    /// Starts a new replica of `old`'s service on `parts` (a fresh replica id) and marks
    /// `old` stopping; the relocation frees a node for `for_job`.
    fn start_relocation(&mut self, old: JobId, parts: Vec<NodeAlloc>, for_job: JobId, now: Time, out: &mut Vec<Decision>) {
        // Every job id in use: no relocation this cycle.
        let Some(new) = self.take_job_id().map(JobId) else { return };
        let service = self.replica_service[&old];
        let mut js = self.running[&old].spec.clone();
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
            grown: Vec::new(),
            resized_at: None,
            reason_prev: None,
        };
        self.note_started(&run);
        self.running.insert(new, run);
        if let Some(r) = self.running.get_mut(&old) {
            r.stopping = true;
        }
        self.relocating.insert(new, (old, for_job));
        out.push(Decision::Relocate { service, from: old, to: new, allocs, for_job });
    }
}
