//! Held reservations: their total order, the GPUs they block for lower-ranked work, the
//! planner that finds the GPUs a blocked job could start on soonest, and completion.
//!
//! Reservations are totally ordered by [`Rank`]; a reservation may only take GPUs from
//! reservations ranked below it (invariant 5), so the wait-for graph has no cycle.

use super::{AlertKind, Decision, Rank, Reservation, RunningJob, Scheduler, WillRun};
use crate::cluster::{GpuMask, NodeAlloc, NodeId, Time, MILLI};
use crate::config::TopologyKind;
use crate::job::{JobId, JobSpec};
use crate::placement::{self, PlaceCtx};
use std::collections::BTreeSet;

/// Orders rank keys: true when `a` outranks `b`.
pub(super) fn outranks(a: &Rank, b: &Rank) -> bool {
    (std::cmp::Reverse(a.0), a.1, a.2) < (std::cmp::Reverse(b.0), b.1, b.2)
}

/// When the occupant of each GPU leaves (s), per node and GPU index (`Scheduler::
/// occupant_ends`): one flat slot per GPU of the cluster, filled from the running jobs, read
/// for every busy GPU of every candidate node of a reservation plan (a map keyed by (node,
/// GPU) cost a tree search per read and an allocation per entry).
struct OccupantEnds {
    /// Index of each node's first GPU in `ends`.
    first: Vec<usize>,
    ends: Vec<Option<Time>>,
}

impl OccupantEnds {
    /// No occupant on any GPU of `cluster`.
    fn new(cluster: &crate::cluster::Cluster) -> OccupantEnds {
        let mut first = Vec::with_capacity(cluster.nodes.len());
        let mut total = 0usize;
        for n in &cluster.nodes {
            first.push(total);
            total += n.gpus as usize;
        }
        OccupantEnds { first, ends: vec![None; total] }
    }

    /// The slot of GPU `g` of `node` (an allocation's GPU: below the node's count).
    fn slot(&mut self, node: NodeId, g: u32) -> &mut Option<Time> {
        &mut self.ends[self.first[node.0 as usize] + g as usize]
    }

    /// When the occupant of GPU `g` of `node` leaves; `None` when no running job holds it.
    fn get(&self, node: NodeId, g: u32) -> Option<Time> {
        self.ends[self.first[node.0 as usize] + g as usize]
    }
}

impl Scheduler {
    pub(super) fn mark_dirty(&mut self, node: NodeId) {
        for r in &mut self.reservations {
            if r.gpus.iter().any(|(n, _)| *n == node) {
                r.dirty = true;
            }
        }
    }

    pub(super) fn drop_reservation(&mut self, job: JobId, out: &mut Vec<Decision>) {
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
        self.touch_fit();
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
    pub(super) fn blocked_for(&self, node: NodeId, rank: Option<&Rank>, backfill_end: Option<Time>) -> GpuMask {
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


    pub(super) fn add_reservation(&mut self, r: Reservation, now: Time, out: &mut Vec<Decision>) {
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
    pub(super) fn try_complete_reservation(&mut self, ri: usize, now: Time, out: &mut Vec<Decision>) -> bool {
        let r = self.reservations[ri].clone();
        let mut occupants: BTreeSet<JobId> = BTreeSet::new();
        // Elastic jobs' grown parts on the reserved GPUs: shrunk when the fill comes.
        let mut grown: Vec<super::elastic::Victim> = Vec::new();
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
            // The running jobs on the node (the per-node index, not a scan of every running
            // job), in id order as the running map would list them.
            let mut on_node: Vec<JobId> = self.node_jobs[n.0 as usize].iter().map(|(j, _)| *j).collect();
            on_node.sort_unstable();
            on_node.dedup();
            for id in on_node {
                let Some(run) = self.running.get(&id) else { continue };
                if run.allocs.iter().any(|a| a.part.node == n && !a.part.gpus.intersect(g).is_empty()) {
                    if !run.backfill_for.is_empty() {
                        occupants.insert(id);
                    } else if let Some(ids) = self.grown_on(id, n, g).filter(|_| !run.preempt_pending) {
                        // Only the parts not already leaving.
                        let ids: Vec<_> = ids.into_iter().filter(|a| run.grown.iter().any(|x| x.shrinking.is_none() && x.allocs.contains(a))).collect();
                        if !ids.is_empty() {
                            grown.push(super::elastic::Victim::Grown(id, ids));
                        }
                    } else {
                        busy_non_backfill = true;
                    }
                }
            }
        }
        if busy_non_backfill {
            return false;
        }
        if !grown.is_empty() {
            self.reservations[ri].est_fill = now;
            self.touch_fit();
            self.shrink_victims(&grown, Some(r.job), now, out);
        }
        if !occupants.is_empty() {
            // The reservation fills now: no new backfill may start on its GPUs while its
            // occupants leave (else the freed GPUs are backfilled again in the same cycle,
            // and the reservation never completes). Every job borrowing from it (also CPU-only
            // work on its wholly held nodes) is preempted: its fill time has come (invariant 6).
            self.reservations[ri].est_fill = now;
            self.touch_fit();
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
        if self.reservations[ri].gpus.iter().any(|&(n, g)| !self.cluster.node(n).free_gpus.contains_all(g)) {
            // Grown parts still leaving.
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
    fn gpu_ready_times(&self, node: NodeId, rank: &Rank, now: Time, ends: &OccupantEnds) -> Vec<Option<Time>> {
        let n = self.cluster.node(node);
        let above = self.blocked_for(node, Some(rank), None);
        (0..n.gpus)
            .map(|g| {
                if above.contains(g) {
                    None
                } else if n.free_gpus.contains(g) {
                    Some(now)
                } else {
                    ends.get(node, g).or(Some(Time::MAX))
                }
            })
            .collect()
    }

    /// When the occupant of each GPU (node, index) leaves, by the running jobs' time limits
    /// (`assumed_unlimited_s` after its start for a job without one, else never), never
    /// before `now`. Backfill occupants leave when the fill completes, so they count as
    /// leaving `now`.
    fn occupant_ends(&self, now: Time) -> OccupantEnds {
        let mut ends = OccupantEnds::new(&self.cluster);
        for run in self.running.values() {
            // Grown parts of elastic jobs are taken back when a reservation fills: free now.
            for a in run.allocs.iter().filter(|a| run.is_grown(a.id)) {
                for g in a.part.gpus.iter() {
                    ends.slot(a.part.node, g).get_or_insert(now);
                }
            }
            let end = if !run.backfill_for.is_empty() {
                now
            } else {
                run.end
                    .or(self.config.assumed_unlimited_s.map(|s| run.start + s))
                    .unwrap_or(Time::MAX)
                    .max(now)
            };
            for a in run.allocs.iter().filter(|a| !run.is_grown(a.id)) {
                for g in a.part.gpus.iter() {
                    let e = ends.slot(a.part.node, g).get_or_insert(end);
                    *e = (*e).max(end);
                }
            }
        }
        ends
    }

    /// The nodes of `spec`'s partition that could hold `gpn` of its GPUs, each with the time
    /// its `gpn` earliest GPUs are all ready and those GPUs, soonest first (then by pod and
    /// node id). Left out: unschedulable nodes, nodes too small or of the wrong GPU type or
    /// without the CPUs or memory asked for, nodes the request excludes or does not require,
    /// the swap pool, the inference pool for non-preemptible training, and GPUs held by
    /// reservations ranked above `rank`.
    fn ready_nodes(&self, spec: &JobSpec, rank: &Rank, gpn: u32, now: Time, ends: &OccupantEnds) -> Vec<(Time, NodeId, GpuMask)> {
        let req = &spec.request;
        let part = &self.cluster.partitions[spec.partition.0 as usize];
        let mut v = Vec::new();
        for &id in &part.nodes {
            let n = self.cluster.node(id);
            if !n.avail.schedulable() || n.gpus < gpn || !n.gpu_type_ok(&req.gpu_types) {
                continue;
            }
            // The inference pool takes non-preemptible training never; the swap pool takes
            // no normal work.
            if (n.inference_pool && !spec.preemptible && !self.replica_service.contains_key(&spec.id)) || self.swap.contains(&id) {
                continue;
            }
            if req.excluded_nodes.contains(&id) || (!req.required_nodes.is_empty() && !req.required_nodes.contains(&id)) || !req.features_ok(&n.features) {
                continue;
            }
            if n.cpu_milli < req.cpu_milli_per_node || n.mem_mib < req.mem_mib_per_node {
                continue;
            }
            let times = self.gpu_ready_times(id, rank, now, ends);
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
    }

    /// Plans a reservation for a blocked job: the GPUs that free up soonest in the job's
    /// shape and topology, never GPUs of a reservation ranked above it.
    pub(super) fn plan_reservation(&self, spec: &JobSpec, rank: Rank, now: Time) -> Option<Reservation> {
        let req = &spec.request;
        let size = placement::node_size(&self.cluster, spec.partition);
        let ends = self.occupant_ends(now);
        let (count, gpn) = match placement::shape_of(req, size).ok()? {
            placement::Shape::Uniform { count, gpus_each, .. } => (count, gpus_each),
            // Whole nodes plus a remainder: plan one more whole node and trim it below.
            placement::Shape::WholePlusRest { whole, rest, .. } => (whole + u32::from(rest > 0), size),
        };
        let cands = self.ready_nodes(spec, &rank, gpn, now, &ends);
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


    /// When and where a job of `spec` could start at the earliest if nothing new arrived,
    /// asked at `now` (s) (Slurm's will-run test behind `sbatch --test-only`). A pure query:
    /// the model is not changed and nothing is reserved.
    ///
    /// GPUs held by any reservation are never offered. The job is placed with the core's own
    /// placement policy on the cluster as it is; when it does not fit, the running jobs with a
    /// time limit end at their limits, earliest first (equal ends in job id order), each
    /// giving its resources back, until it fits: the start is that end (never before `now`).
    /// Jobs without a time limit never end here, so a job that only fits once they are gone
    /// gets no nodes and the latest known end. See [`WillRun`].
    pub fn will_run(&self, spec: &JobSpec, now: Time) -> WillRun {
        let blocked = |n: NodeId| self.held[n.0 as usize].iter().fold(GpuMask::EMPTY, |m, (_, g)| m.union(*g));
        let place_on = |cluster: &crate::cluster::Cluster| {
            let ctx = PlaceCtx {
                cluster,
                blocked: &blocked,
                tie_rank: self.tie_rank.as_deref(),
                partition: spec.partition,
                job_end: None,
                busy_until: None,
            };
            placement::place(&ctx, self.placement.as_ref(), &spec.request).ok()
        };
        if let Some(parts) = place_on(&self.cluster) {
            return WillRun { start: now, parts };
        }
        let mut ends: Vec<(Time, &RunningJob)> = self.running.values().filter_map(|r| Some((r.end?, r))).collect();
        ends.sort_by_key(|(e, _)| *e);
        let mut cluster = self.cluster.clone();
        for (end, r) in &ends {
            for a in &r.allocs {
                cluster.give_back(&a.part);
            }
            if let Some(parts) = place_on(&cluster) {
                return WillRun { start: (*end).max(now), parts };
            }
        }
        WillRun { start: ends.last().map_or(now, |(e, _)| *e).max(now), parts: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use crate::cluster::{Cluster, NodeAlloc, NodeId, Time};
    use crate::config::TopologyKind;
    use crate::job::{JobId, JobSpec, Request};
    use crate::sched::test_policies::{Fifo, Lowest};
    use crate::sched::{Decision, Event, Reason, SchedConfig, Scheduler, WillRun};

    /// Three 8-GPU nodes, each in its own pod.
    fn sched() -> Scheduler {
        Scheduler::new(Cluster::uniform(3, 8, 1, 64, 512_000), Box::new(Lowest), Box::new(Fifo), SchedConfig::default())
    }

    fn job(id: u64, now: Time, gpus: u32, limit_s: Option<u64>) -> JobSpec {
        JobSpec::simple(id, now, Request::gpus(gpus, TopologyKind::Node), limit_s)
    }

    /// The test's driver: submits at `now` and runs a cycle; a bind or a reservation needs
    /// nothing carried out here, anything else fails the test.
    fn submit_and_cycle(s: &mut Scheduler, spec: JobSpec, now: Time) -> Vec<Decision> {
        assert!(s.handle(Event::Submit(spec), now).is_empty());
        let d = s.cycle(now);
        for x in &d {
            assert!(matches!(x, Decision::Bind { .. } | Decision::Reserve { .. }), "unexpected {x:?}");
        }
        d
    }

    fn nodes(w: &WillRun) -> Vec<(u32, u32)> {
        w.parts.iter().map(|p: &NodeAlloc| (p.node.0, p.gpus.count())).collect()
    }

    #[test]
    fn a_node_range_starts_on_the_free_nodes_in_its_first_cycle() {
        let mut s = sched();
        // One node's CPUs all taken: -N1-5 of CPU-only work binds the other two at once.
        let busy = Request { cpu_milli_per_node: 64_000, nodes: Some(1), required_nodes: vec![crate::cluster::NodeId(0)], ..Request::default() };
        let d = submit_and_cycle(&mut s, JobSpec::simple(1, 0, busy, Some(600)), 0);
        assert!(matches!(&d[..], [Decision::Bind { .. }]), "{d:?}");
        let range = Request { nodes: Some(1), nodes_max: Some(5), ..Request::default() };
        let d = submit_and_cycle(&mut s, JobSpec::simple(2, 1, range, Some(600)), 1);
        match &d[..] {
            [Decision::Bind { allocs, .. }] => assert_eq!(allocs.len(), 2, "{allocs:?}"),
            _ => panic!("{d:?}"),
        }
    }

    #[test]
    fn a_job_that_fits_starts_now_where_the_policy_places_it() {
        let mut s = sched();
        submit_and_cycle(&mut s, job(1, 0, 8, Some(3600)), 0);
        let w = s.will_run(&job(2, 10, 4, Some(600)), 10);
        assert_eq!(w.start, 10);
        assert_eq!(nodes(&w), vec![(1, 4)], "node 0 is full; the lowest free node");
    }

    #[test]
    fn a_blocked_job_starts_when_the_running_jobs_in_its_way_reach_their_limits() {
        let mut s = sched();
        for (id, limit) in [(1, 7200), (2, 3600), (3, 5400)] {
            submit_and_cycle(&mut s, job(id, 0, 8, Some(limit)), 0);
        }
        // Ends at 3600 (node 1), 5400 (node 2), 7200 (node 0): one whole node frees at 3600,
        // two at 5400.
        let w = s.will_run(&job(9, 100, 8, Some(600)), 100);
        assert_eq!((w.start, nodes(&w)), (3600, vec![(1, 8)]));
        let mut two = job(9, 100, 16, Some(600));
        two.request.topology = TopologyKind::Any;
        let w = s.will_run(&two, 100);
        assert_eq!((w.start, nodes(&w)), (5400, vec![(1, 8), (2, 8)]));
    }

    #[test]
    fn gpus_held_by_a_reservation_are_not_offered() {
        let mut s = sched();
        submit_and_cycle(&mut s, job(1, 0, 8, Some(3600)), 0);
        submit_and_cycle(&mut s, job(2, 0, 8, Some(7200)), 0);
        // Job 3 (16 GPUs on nodes 2 and 0 once job 1 ends) cannot start: it reserves the free
        // node 2 and node 0.
        let mut big = job(3, 1, 16, Some(600));
        big.request.topology = TopologyKind::Any;
        let d = submit_and_cycle(&mut s, big, 1);
        assert!(d.iter().any(|x| matches!(x, Decision::Reserve { job: JobId(3), .. })), "{d:?}");
        let held: Vec<NodeId> = s.reservations()[0].gpus.iter().map(|(n, _)| *n).collect();
        assert!(held.contains(&NodeId(2)));
        // A 1-GPU job would fit on node 2 now, but its GPUs are reserved: it waits for a node
        // outside the reservation to free (node 1 at 7200).
        let w = s.will_run(&job(4, 2, 1, Some(60)), 2);
        assert_eq!((w.start, nodes(&w)), (7200, vec![(1, 1)]));
    }

    #[test]
    fn without_a_fit_the_answer_is_the_latest_known_end_and_no_nodes() {
        let mut s = sched();
        submit_and_cycle(&mut s, job(1, 0, 8, Some(3600)), 0);
        submit_and_cycle(&mut s, job(2, 0, 8, None), 0);
        submit_and_cycle(&mut s, job(3, 0, 8, None), 0);
        let w = s.will_run(&job(9, 50, 16, Some(60)), 50);
        assert_eq!(w, WillRun { start: 3600, parts: Vec::new() }, "two nodes never free");
        // Nothing with a limit: the answer is now.
        let mut s = sched();
        for id in 1..=3 {
            submit_and_cycle(&mut s, job(id, 0, 8, None), 0);
        }
        assert_eq!(s.will_run(&job(9, 50, 8, Some(60)), 50), WillRun { start: 50, parts: Vec::new() });
    }

    /// More nodes than the partition has: `PartitionNodeLimit`, no reservation, and the job
    /// behind it is not held back (Slurm 22.05 `job_limits_check`).
    #[test]
    fn more_nodes_than_the_partition_waits_partition_node_limit_and_blocks_nothing() {
        let mut s = sched();
        let mut big = job(1, 0, 4, Some(60));
        big.request.nodes = Some(4);
        let d = submit_and_cycle(&mut s, big, 0);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(s.pending_info(JobId(1)).map(|i| i.reason), Some(Reason::PartitionNodeLimit));
        let d = submit_and_cycle(&mut s, job(2, 0, 8, Some(60)), 0);
        assert!(matches!(d.as_slice(), [Decision::Bind { .. }]), "{d:?}");
        let mut three = job(3, 0, 3, Some(60));
        three.request.nodes = Some(3);
        submit_and_cycle(&mut s, three, 0);
        assert_eq!(s.pending_info(JobId(3)).map(|i| i.reason), Some(Reason::Resources), "as many nodes as the partition has");
    }

    #[test]
    fn the_query_changes_nothing() {
        let mut s = sched();
        submit_and_cycle(&mut s, job(1, 0, 8, Some(3600)), 0);
        let state = |s: &Scheduler| (format!("{:?}", s.cluster()), s.reservations().to_vec(), s.pending_len());
        let before = state(&s);
        // Three whole nodes: once job 1 reaches its limit.
        let w = s.will_run(&job(2, 5, 24, Some(600)), 5);
        assert_eq!((w.start, nodes(&w)), (3600, vec![(0, 8), (1, 8), (2, 8)]));
        let w = s.will_run(&job(3, 5, 8, Some(600)), 5);
        assert_eq!((w.start, nodes(&w)), (5, vec![(1, 8)]));
        assert_eq!(state(&s), before);
        s.check_invariants().unwrap();
    }
}
