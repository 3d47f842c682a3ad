//! Slurm's backfill map: when and where Slurm's backfill scheduler would plan each pending
//! job to start, as `squeue --start` (`START_TIME`, `SCHEDNODES`) and `scontrol show job`
//! (`StartTime=`, `SchedNodeList=`) show it.
//!
//! A pure query for display, computed from the model as it is: nothing is reserved and no
//! decision changes. The core's own reservations hold GPUs and decide what starts when; this
//! map follows Slurm 22.05's rules instead (`plugins/sched/backfill/backfill.c`
//! `_attempt_backfill`), which plan at node granularity:
//!
//! - The map is a list of time slots, each with the nodes no planned job holds. It starts as
//!   one slot from now to the end of the backfill window (`bf_window`, a day), with every
//!   schedulable node, times rounded down to `bf_resolution` (60 s).
//! - Jobs are planned in queue order. A job's usable nodes are its partition's nodes that
//!   are free in every slot its run (from the earliest start tried, `start_res`, for its time
//!   limit) overlaps. Where the next slot offers nodes that the current one does not, the
//!   earliest start to try again (`later_start`) is the current slot's end.
//! - On those nodes, the will-run test (`select/cons_common/job_test.c` `_will_run_test`)
//!   finds the start: now if the job fits the nodes' free resources; otherwise the running
//!   jobs end at their time limits in groups (the first group takes the jobs ending within
//!   30 s of the first end, aligned to 30 s; each later group a window twice as long), and
//!   the job starts when the last job of the first group after which it fits ends. Planned
//!   jobs are not in the will-run test: only the map keeps them apart.
//! - A start later than `later_start` is tried again from `later_start`; a start whose
//!   rounded run overlaps a slot where its nodes are held is tried again from that start.
//!   Otherwise the job's nodes are taken out of the slots of its rounded run (at least one
//!   resolution long), and adjacent slots left equal are merged (one pair, `_add_reservation`).
//! - A job array's pending record is planned once per task, up to `bf_max_job_array_resv`
//!   (20) and the array's pending task count, while its throttle is not reached: the record
//!   shows the last plan (the caller passes the count, see [`Scheduler::backfill_plan`]).
//! - At most `bf_max_job_test` jobs (500 by default) are tested: a job counts when it
//!   reaches the will-run test (each task of an array once), and once that many have, the
//!   jobs after them are not planned (`_attempt_backfill` stops at the next job it takes
//!   from the queue: `bf_max_job_test: limit of N reached`).

use super::Scheduler;
use crate::cluster::{NodeId, Time, MILLI};
use crate::job::{JobId, JobSpec, Request};
use crate::placement::{self, Shape};

/// Slurm's `bf_resolution` default (s): planned starts and ends are rounded down to it.
pub const BF_RESOLUTION_S: Time = 60;
/// Slurm's `bf_window` default (1440 minutes, in s): how far ahead the map reaches.
pub const BF_WINDOW_S: Time = 86_400;
/// Slurm's `bf_max_job_array_resv` default: at most this many tasks of one array planned.
pub const BF_MAX_JOB_ARRAY_RESV: u32 = 20;
/// Slurm's `bf_max_job_test` default (`DEF_BF_MAX_JOB_TEST`): jobs tested per plan.
pub const BF_MAX_JOB_TEST: u32 = 500;
/// The will-run test's first grouping window of job ends (s, `_will_run_test`).
const WILL_RUN_WINDOW_S: Time = 30;
/// A limit for a job and partition without one (Slurm's `YEAR_MINUTES`, in s).
const YEAR_S: Time = 365 * 86_400;
/// Retries of one job's plan (Slurm bounds them by `bf_max_time`); each moves the start on.
const MAX_TRIES: u32 = 1_000;

/// Where and when a pending job is planned to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedStart {
    /// The planned start (s), as Slurm's `start_time` (not rounded).
    pub start: Time,
    /// The nodes planned, ascending (Slurm's `sched_nodes`).
    pub nodes: Vec<NodeId>,
}

/// One slot of the map: from `begin` to `end` (s), the nodes no planned job holds.
#[derive(Debug, Clone)]
struct Slot {
    begin: Time,
    end: Time,
    avail: Vec<bool>,
}

/// Free resources of a node in the will-run test.
#[derive(Debug, Clone, Copy)]
struct Free {
    gpus: u32,
    cpu_milli: u64,
    mem_mib: u64,
    /// Allocations on the node (an exclusive job needs none).
    allocs: u32,
    /// Allocations on the node of running jobs that end after the will-run test's horizon
    /// (none when the test is not cut): whether such a job would have joined a group.
    late: u32,
}

/// What a job needs of each of its nodes.
struct Demand<'a> {
    count: u32,
    gpus: u32,
    cpu_milli: u64,
    mem_mib: u64,
    exclusive: bool,
    req: &'a Request,
}

/// The map's slots, in time order (Slurm's `node_space` list).
struct Map {
    slots: Vec<Slot>,
}

impl Map {
    /// Takes `nodes` out of the slots from `start` to `end` (s, rounded), splitting the slots
    /// at both ends, then merges one pair of adjacent equal slots around them (Slurm's
    /// `_add_reservation`).
    fn add(&mut self, start: Time, end: Time, nodes: &[NodeId]) {
        let start = start.max(self.slots[0].begin);
        let end = end.max(start + BF_RESOLUTION_S);
        let mut one_before = 0;
        let mut at = None;
        for i in 0..self.slots.len() {
            let s = &self.slots[i];
            if s.end > start {
                let tail = Slot {
                    begin: start,
                    end: s.end,
                    avail: s.avail.clone(),
                };
                self.slots[i].end = start;
                self.slots.insert(i + 1, tail);
                at = Some(i);
                break;
            }
            if s.end == start {
                at = Some(i);
                break;
            }
            one_before = i;
        }
        let Some(at) = at else { return };
        let mut one_after = None;
        let mut k = at + 1;
        while k < self.slots.len() {
            if end < self.slots[k].end {
                let tail = Slot {
                    begin: end,
                    end: self.slots[k].end,
                    avail: self.slots[k].avail.clone(),
                };
                self.slots[k].end = end;
                self.slots.insert(k + 1, tail);
            }
            for n in nodes {
                self.slots[k].avail[n.0 as usize] = false;
            }
            if end == self.slots[k].end {
                if k + 1 < self.slots.len() {
                    one_after = Some(k + 1);
                }
                break;
            }
            k += 1;
        }
        let mut i = one_before;
        while Some(i) != one_after && i + 1 < self.slots.len() {
            if self.slots[i].avail == self.slots[i + 1].avail {
                self.slots[i].end = self.slots[i + 1].end;
                self.slots.remove(i + 1);
                break;
            }
            i += 1;
        }
    }

    /// Whether a run on `nodes` from `start` to `end` (s, rounded) meets a slot where one of
    /// them is held (Slurm's `_test_resv_overlap`).
    fn overlaps(&self, nodes: &[NodeId], start: Time, end: Time) -> bool {
        self.slots
            .iter()
            .any(|s| s.end > start && s.begin < end && nodes.iter().any(|n| !s.avail[n.0 as usize]))
    }
}

impl Scheduler {
    /// Slurm's backfill plan of `units` at `now` (s): for each, in the order given (the
    /// queue's order), the start and nodes Slurm's backfill scheduler would plan, or `None`
    /// when it plans none (no nodes of its partition ever fit, or the start is beyond the
    /// window). A unit is a pending job and how many times to plan it: 1 for a job, the
    /// number of tasks Slurm plans for a job array's pending record (see the module doc);
    /// the last plan is the one returned. Jobs not pending give `None` and take nothing.
    /// Once `max_job_test` jobs have reached the will-run test, the units after them give
    /// `None` (Slurm's `bf_max_job_test`, see the module doc).
    ///
    /// Slurm 22.05 `_attempt_backfill` (backfill.c) with `_add_reservation` and
    /// `_test_resv_overlap`, and `_will_run_test` (select/cons_common/job_test.c); nodes
    /// chosen as `_eval_nodes_topo` (select/cons_tres/job_test.c) picks them for a job
    /// without required nodes: the leaf switch (pod) with the most usable nodes, the first
    /// on a tie, its nodes in order, then other nodes in order.
    pub fn backfill_plan(&self, units: &[(JobId, u32)], now: Time, max_job_test: u32) -> Vec<Option<PlannedStart>> {
        self.plan_units(units, now, max_job_test, true)
    }

    /// [`Scheduler::backfill_plan`]; with `cut`, the will-run test stops at the first running
    /// job that ends past the window (always, but for the test that compares the two).
    fn plan_units(&self, units: &[(JobId, u32)], now: Time, max_job_test: u32, cut: bool) -> Vec<Option<PlannedStart>> {
        let nodes = &self.cluster.nodes;
        let up: Vec<bool> = nodes.iter().map(|n| n.avail.schedulable()).collect();
        let begin = now / BF_RESOLUTION_S * BF_RESOLUTION_S;
        let window_end = (now + BF_WINDOW_S) / BF_RESOLUTION_S * BF_RESOLUTION_S;
        let mut map = Map {
            slots: vec![Slot {
                begin,
                end: window_end,
                avail: up.clone(),
            }],
        };
        let mut free: Vec<Free> = nodes
            .iter()
            .map(|n| Free {
                gpus: n.free_gpus.count(),
                cpu_milli: n.free_cpu_milli,
                mem_mib: n.free_mem_mib,
                allocs: 0,
                late: 0,
            })
            .collect();
        let horizon = if cut { window_end } else { Time::MAX };
        for r in self.running.values() {
            let late = r.end.unwrap_or(Time::MAX) > horizon;
            for a in &r.allocs {
                let f = &mut free[a.part.node.0 as usize];
                f.allocs += 1;
                f.late += u32::from(late);
            }
        }
        // Running jobs by the end of their time limits (never, without one), then id.
        let mut ends: Vec<(Time, JobId)> = self
            .running
            .iter()
            .map(|(id, r)| (r.end.unwrap_or(Time::MAX), *id))
            .collect();
        ends.sort_unstable();
        let mut tested = 0u32;
        units
            .iter()
            .map(|&(id, times)| {
                if tested >= max_job_test {
                    return None;
                }
                let spec = &self.pending.get(&id)?.spec;
                let mut shown = None;
                for _ in 0..times.max(1) {
                    match self.plan_one(&mut map, spec, &up, &free, &ends, now, window_end, &mut tested, horizon) {
                        Some(p) => shown = Some(p),
                        None => break,
                    }
                }
                shown
            })
            .collect()
    }

    /// One reservation of `spec` in the map (the body of `_attempt_backfill`'s loop for one
    /// job, `TRY_LATER` included); `tested` counts it when it first reaches the will-run test,
    /// which looks no further than `horizon` ([`Scheduler::bf_will_run`]).
    #[allow(clippy::too_many_arguments)]
    fn plan_one(
        &self,
        map: &mut Map,
        spec: &JobSpec,
        up: &[bool],
        free: &[Free],
        ends: &[(Time, JobId)],
        now: Time,
        window_end: Time,
        tested: &mut u32,
        horizon: Time,
    ) -> Option<PlannedStart> {
        let mut counted = false;
        let req = &spec.request;
        let part = self.cluster.partitions.get(spec.partition.0 as usize)?;
        let size = placement::node_size(&self.cluster, spec.partition);
        let (count, gpus) = match placement::shape_of(req, size).ok()? {
            Shape::Uniform {
                count, gpus_each, ..
            } => (count, gpus_each),
            Shape::WholePlusRest { whole, rest, .. } => (whole + u32::from(rest > 0), size),
        };
        let demand = Demand {
            count,
            gpus,
            cpu_milli: req.cpu_milli_per_node,
            mem_mib: req.mem_mib_per_node,
            exclusive: req.exclusive,
            req,
        };
        let part_max = part.max_time_min.map(|m| m * 60);
        let limit = match (spec.time_limit_s, part_max) {
            (Some(l), Some(m)) => l.min(m),
            (l, m) => l.or(m).unwrap_or(YEAR_S),
        };
        let mut base = vec![false; up.len()];
        for n in &part.nodes {
            base[n.0 as usize] = up[n.0 as usize] && req.features_ok(&self.cluster.node(*n).features);
        }
        let mut start_res = now;
        for _ in 0..MAX_TRIES {
            let end_time = start_res.max(now).saturating_add(limit);
            let mut later: Option<Time> = None;
            let mut avail = base.clone();
            for j in 0..map.slots.len() {
                let s = &map.slots[j];
                if s.end > start_res && later.is_none() {
                    if let Some(next) = map.slots.get(j + 1) {
                        // The next slot offers nodes this one does not: try again there.
                        if (0..base.len())
                            .any(|i| base[i] && next.avail[i] && !(avail[i] && s.avail[i]))
                        {
                            later = Some(s.end);
                        }
                    }
                }
                if s.end <= start_res {
                } else if s.begin <= end_time {
                    for (a, &f) in avail.iter_mut().zip(&s.avail) {
                        *a &= f;
                    }
                } else {
                    break;
                }
            }
            for n in &req.excluded_nodes {
                avail[n.0 as usize] = false;
            }
            let usable = avail.iter().filter(|&&a| a).count();
            let found = if usable < count as usize
                || !req.required_nodes.iter().all(|n| avail[n.0 as usize])
            {
                None
            } else {
                if !counted {
                    counted = true;
                    *tested += 1;
                }
                self.bf_will_run(&avail, &demand, free, ends, now, horizon)
            };
            let Some((mut start, chosen)) = found else {
                start_res = later?;
                continue;
            };
            start = start.max(start_res);
            if let Some(l) = later.filter(|&l| start > l) {
                start_res = l;
                continue;
            }
            let start_r = start / BF_RESOLUTION_S * BF_RESOLUTION_S;
            let end_r = start.saturating_add(limit) / BF_RESOLUTION_S * BF_RESOLUTION_S;
            if start > window_end {
                return None;
            }
            if start > now && map.overlaps(&chosen, start_r, end_r) {
                start_res = start;
                continue;
            }
            map.add(start_r, end_r, &chosen);
            return Some(PlannedStart {
                start,
                nodes: chosen,
            });
        }
        None
    }

    /// The will-run test on the nodes `avail`: now if the job fits their free resources,
    /// else the end of the group of running jobs after which it first fits, with the nodes
    /// it would get (`_will_run_test`). It stops at the first running job that ends after
    /// `horizon` (the window's end): any start found from there would be later still, and
    /// `plan_one` treats a start past the window as no start (it tries from `later_start`,
    /// or gives up). At 30,000 running jobs without a time limit, going on took milliseconds
    /// per job planned, to find starts that were never shown. What the whole walk would do
    /// from there is known without it: a late job on one of `avail`'s nodes (`Free::late`)
    /// would join the group and push its start past the window, so no start; with none, the
    /// walk would run out of jobs and test the group taken out so far, so that test.
    fn bf_will_run(
        &self,
        avail: &[bool],
        d: &Demand<'_>,
        free: &[Free],
        ends: &[(Time, JobId)],
        now: Time,
        horizon: Time,
    ) -> Option<(Time, Vec<NodeId>)> {
        if let Some(nodes) = self.bf_pick(avail, d, free) {
            return Some((now, nodes));
        }
        let mut free = free.to_vec();
        let mut window = WILL_RUN_WINDOW_S;
        let mut group_end: Option<Time> = None;
        let mut i = 0;
        let mut more = true;
        while more {
            let mut last = None;
            let mut next = None;
            let mut removed = 0u32;
            let mut skip_test = false;
            loop {
                let Some(&(end, job)) = ends.get(i) else {
                    more = false;
                    break;
                };
                if end > horizon {
                    if last.is_none() || avail.iter().zip(free.iter()).any(|(&a, f)| a && f.late > 0) {
                        return None;
                    }
                    more = false;
                    break;
                }
                i += 1;
                let Some(run) = self.running.get(&job) else {
                    continue;
                };
                if !run.allocs.iter().any(|a| avail[a.part.node.0 as usize]) {
                    continue;
                }
                let ge = *group_end.get_or_insert(end.saturating_add(window - end % window));
                last = Some(end);
                for a in &run.allocs {
                    let f = &mut free[a.part.node.0 as usize];
                    if a.part.gpu_milli >= MILLI {
                        f.gpus += a.part.gpus.count();
                    }
                    f.cpu_milli += a.part.cpu_milli;
                    f.mem_mib += a.part.mem_mib;
                    f.allocs = f.allocs.saturating_sub(1);
                }
                match ends.get(i) {
                    None => {
                        more = false;
                        break;
                    }
                    Some(&(ne, _)) => {
                        next = Some(ne);
                        if ne > ge.saturating_add(window) {
                            break;
                        }
                    }
                }
                if removed > 200 {
                    skip_test = true;
                    break;
                }
                removed += 1;
            }
            let (Some(last), Some(ge)) = (last, group_end) else {
                break;
            };
            if skip_test {
                continue;
            }
            loop {
                window = window.saturating_mul(2);
                if next.is_none_or(|ne| ne <= ge.saturating_add(window)) {
                    break;
                }
            }
            if let Some(nodes) = self.bf_pick(avail, d, &free) {
                return Some((last.max(now), nodes));
            }
        }
        None
    }

    /// The nodes of `avail` the job gets with the resources `free`, or `None` when too few
    /// fit: required nodes first; else the pod with the most nodes that fit (the first on a
    /// tie), its nodes in order, then other nodes in order.
    fn bf_pick(&self, avail: &[bool], d: &Demand<'_>, free: &[Free]) -> Option<Vec<NodeId>> {
        let fits = |i: usize| {
            let n = &self.cluster.nodes[i];
            let f = &free[i];
            avail[i]
                && f.gpus >= d.gpus
                && (d.gpus == 0 || n.gpu_type_ok(&d.req.gpu_types))
                && f.cpu_milli >= d.cpu_milli
                && f.mem_mib >= d.mem_mib
                && (!d.exclusive || f.allocs == 0)
        };
        let fit: Vec<NodeId> = (0..avail.len())
            .filter(|&i| fits(i))
            .map(|i| NodeId(i as u32))
            .collect();
        let need = d.count as usize;
        if fit.len() < need || !d.req.required_nodes.iter().all(|n| fit.contains(n)) {
            return None;
        }
        let mut chosen: Vec<NodeId> = d.req.required_nodes.iter().copied().take(need).collect();
        if chosen.is_empty() {
            let mut per_pod: Vec<(u32, usize)> = Vec::new();
            for n in &fit {
                let pod = self.cluster.node(*n).pod.0;
                match per_pod.iter_mut().find(|(p, _)| *p == pod) {
                    Some(e) => e.1 += 1,
                    None => per_pod.push((pod, 1)),
                }
            }
            let best = per_pod
                .iter()
                .fold(None::<(u32, usize)>, |b, &(p, c)| match b {
                    Some((bp, bc)) if bc > c || (bc == c && bp < p) => Some((bp, bc)),
                    _ => Some((p, c)),
                });
            if let Some((pod, _)) = best {
                chosen.extend(
                    fit.iter()
                        .filter(|n| self.cluster.node(**n).pod.0 == pod)
                        .take(need),
                );
            }
        }
        for n in &fit {
            if chosen.len() >= need {
                break;
            }
            if !chosen.contains(n) {
                chosen.push(*n);
            }
        }
        chosen.sort_unstable();
        Some(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::{PlannedStart, BF_MAX_JOB_TEST};
    use crate::cluster::{Cluster, NodeAvail, NodeId, Time};
    use crate::config::TopologyKind;
    use crate::job::{JobId, JobSpec, Request};
    use crate::sched::test_policies::{Fifo, Lowest};
    use crate::sched::{Decision, Event, SchedConfig, Scheduler};

    /// 2026-11-29T09:40:57Z, the start of golden 0178's first fill job.
    const T: Time = 1_795_945_257;

    /// Golden 0178's gpu04 drained at `drain_at`, then its pending jobs submitted at
    /// `submit_at` (none starts at its submission).
    fn drain_gpu04_and_submit_pending(s: &mut Scheduler, drain_at: Time, submit_at: Time) {
        let _ = s.handle(Event::NodeAvail { node: NodeId(3), avail: NodeAvail::Drain { reason: "test".into() } }, drain_at);
        for (id, gpus, limit) in PENDING {
            assert!(s.handle(Event::Submit(job(id, gpus, limit, None)), submit_at).is_empty());
        }
    }

    fn job(id: u64, gpus: u32, limit_min: u64, nodes: Option<u32>) -> JobSpec {
        let mut r = Request::gpus(gpus, TopologyKind::Any);
        r.nodes = nodes;
        JobSpec::simple(id, T, r, Some(limit_min * 60))
    }

    fn run(s: &mut Scheduler, spec: JobSpec, at: Time, on: &[u32]) {
        let mut spec = spec;
        spec.request.required_nodes = on.iter().map(|&n| NodeId(n)).collect();
        assert!(s.handle(Event::Submit(spec.clone()), at).is_empty());
        let d = s.cycle(at);
        assert!(
            d.iter()
                .any(|x| matches!(x, Decision::Bind { job, .. } if *job == spec.id)),
            "{d:?}"
        );
    }

    /// The pending jobs of golden 0178/0209 in queue order: (id, GPUs, limit in minutes).
    const PENDING: [(u64, u32, u64); 5] = [
        (57, 1, 10),
        (58, 1, 10),
        (64, 1, 5),
        (68, 2, 10),
        (69, 1, 10),
    ];

    /// Golden 0178/0209's cluster with the four fill jobs started at `starts` (s: 53 and 54
    /// on gpu01, 4 GPUs and 30 minutes each; 55 on gpu[03-04], 16 GPUs and 30 minutes; 56 on
    /// gpu02, 8 GPUs and 20 minutes), gpu04 drained, the pending jobs submitted after them
    /// and one cycle run; returns the plan of the pending jobs (array 64 as six tasks) at the
    /// cycle's time, two seconds after the last start.
    fn plan_golden(starts: [Time; 4]) -> Vec<Option<PlannedStart>> {
        plan_golden_max(starts, BF_MAX_JOB_TEST)
    }

    /// [`plan_golden`] with a `bf_max_job_test` of `max_job_test`.
    fn plan_golden_max(starts: [Time; 4], max_job_test: u32) -> Vec<Option<PlannedStart>> {
        let mut s = Scheduler::new(
            Cluster::uniform(4, 8, 2, 64, 512_000),
            Box::new(Lowest),
            Box::new(Fifo),
            SchedConfig::default(),
        );
        let fills = [
            (53, 4, 30, None, [0].as_slice()),
            (54, 4, 30, None, &[0]),
            (55, 16, 30, Some(2), &[2, 3]),
            (56, 8, 20, None, &[1]),
        ];
        for ((id, gpus, limit, nodes, on), at) in fills.into_iter().zip(starts) {
            run(&mut s, job(id, gpus, limit, nodes), at, on);
        }
        let last = starts[3];
        drain_gpu04_and_submit_pending(&mut s, last + 1, last + 1);
        let now = last + 2;
        let d = s.cycle(now);
        assert!(
            !d.iter().any(|x| matches!(x, Decision::Bind { .. })),
            "{d:?}"
        );
        let units: Vec<(JobId, u32)> = PENDING
            .iter()
            .map(|&(id, ..)| (JobId(id), if id == 64 { 6 } else { 1 }))
            .collect();
        s.backfill_plan(&units, now, max_job_test)
    }

    fn want(start: Time, node: u32) -> Option<PlannedStart> {
        Some(PlannedStart {
            start,
            nodes: vec![NodeId(node)],
        })
    }

    /// The plan golden 0178/0209 recorded, for 56's start `s56`: 57 when 56 ends on gpu02
    /// (not rounded), 58 on gpu02 at the end of 57's rounded run `l`, array 64 on gpu01 and
    /// 68 on gpu03 ten minutes later, 69 on gpu02 fifteen minutes later.
    fn golden_plan(s56: Time) -> Vec<Option<PlannedStart>> {
        let e56 = s56 + 20 * 60;
        let l = (e56 + 600) / 60 * 60;
        vec![
            want(e56, 1),
            want(l, 1),
            want(l + 600, 0),
            want(l + 600, 2),
            want(l + 900, 1),
        ]
    }

    /// 2026-11-29T09:41:00Z: the minute golden 0178's fill jobs 54-56 started in.
    const M: Time = T + 3;

    /// Golden 0178/0209 (Slurm 22.05's `squeue --start` and `scontrol show job 64`) at
    /// Slurm's own seconds: four 8-GPU nodes on two leaf switches, gpu04 draining; gpu01 runs
    /// two 4-GPU jobs (ends 10:10:57, 10:11:00), gpu[03-04] a two-node job (10:11:03), gpu02
    /// an 8-GPU job (10:01:06). Pending, in queue order: 57 and 58 (1 GPU, 10 min), array 64
    /// (1 GPU, 5 min, six tasks %2), 68 (2 GPUs, 10 min), 69 (1 GPU, 10 min). Slurm planned
    /// 57 at 10:01:06 on gpu02, 58 at 10:11:00 on gpu02, 64 at 10:21:00 on gpu01, 68 at
    /// 10:21:00 on gpu03 and 69 at 10:26:00 on gpu02 (the core's own GPU reservations put all
    /// of them on gpu02, where GPUs free first).
    #[test]
    fn plans_golden_0178_as_slurm_backfill() {
        let plan = plan_golden([T, T + 3, T + 6, T + 9]);
        let at =
            |h: Time, m: Time, sec: Time| T - (9 * 3600 + 40 * 60 + 57) + h * 3600 + m * 60 + sec;
        assert_eq!(
            plan,
            vec![
                want(at(10, 1, 6), 1),
                want(at(10, 11, 0), 1),
                want(at(10, 21, 0), 0),
                want(at(10, 21, 0), 2),
                want(at(10, 26, 0), 1)
            ]
        );
        assert_eq!(plan, golden_plan(T + 9));
    }

    /// `bf_max_job_test`: the first jobs are planned as without a limit and the others not at
    /// all. A job counts when it is tested and the limit is looked at when the next job is
    /// taken, so the array (the third job, six tasks planned, six tests) is planned whole
    /// under a limit of 3 and takes the count to 8: a limit of 3 to 8 plans three jobs, 9
    /// plans 68 as well (9 tests), 10 all five.
    #[test]
    fn plans_at_most_bf_max_job_test_jobs() {
        let starts = [T, T + 3, T + 6, T + 9];
        let full = plan_golden(starts);
        assert!(full.iter().all(Option::is_some));
        for limit in 1..=10u32 {
            let planned = match limit {
                1 | 2 => limit as usize,
                3..=8 => 3,
                9 => 4,
                _ => 5,
            };
            let some = plan_golden_max(starts, limit);
            assert_eq!(some[..planned], full[..planned], "limit {limit}");
            assert!(some[planned..].iter().all(Option::is_none), "limit {limit}: {some:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        /// The will-run test stopped at the window's end plans every job as the test that
        /// goes through every running job does, on random running jobs (limits up to two
        /// days, or none) and pending ones, with a node drained or not.
        #[test]
        fn the_will_run_test_cut_at_the_window_changes_no_plan(
            running in proptest::collection::vec((1u32..=8, proptest::sample::select(vec![Some(10u64), Some(120), Some(1440), Some(2880), None])), 0..12),
            pending in proptest::collection::vec(
                (1u32..=16, proptest::sample::select(vec![10u64, 60, 1440, 2880]), proptest::option::of(1u32..=3)),
                1..30,
            ),
            drain in proptest::option::of(0u32..4),
            max_job_test in proptest::sample::select(vec![3u32, BF_MAX_JOB_TEST]),
        ) {
            let mut s = Scheduler::new(Cluster::uniform(4, 8, 2, 64, 512_000), Box::new(Lowest), Box::new(Fifo), SchedConfig::default());
            let mut id = 1;
            for (gpus, limit) in running {
                let mut spec = job(id, gpus, 1, None);
                spec.time_limit_s = limit.map(|m| m * 60);
                let _ = s.handle(Event::Submit(spec), T);
                id += 1;
            }
            let _ = s.cycle(T);
            if let Some(n) = drain {
                let _ = s.handle(Event::NodeAvail { node: NodeId(n), avail: NodeAvail::Drain { reason: "test".into() } }, T + 1);
            }
            let first = id;
            for (gpus, limit, nodes) in pending {
                let _ = s.handle(Event::Submit(job(id, gpus, limit, nodes)), T + 2);
                id += 1;
            }
            let units: Vec<(JobId, u32)> = (first..id).map(|i| (JobId(i), 1)).collect();
            let cut = s.plan_units(&units, T + 3, max_job_test, true);
            proptest::prop_assert_eq!(cut, s.plan_units(&units, T + 3, max_job_test, false));
        }
    }

    /// Planned once, the array's record lands on the first node to free up: the five other
    /// tasks are what push it to 10:21:00 in golden 0178.
    #[test]
    fn an_array_planned_once_lands_on_the_first_node_to_free() {
        let mut s = Scheduler::new(
            Cluster::uniform(4, 8, 2, 64, 512_000),
            Box::new(Lowest),
            Box::new(Fifo),
            SchedConfig::default(),
        );
        run(&mut s, job(53, 4, 30, None), T, &[0]);
        run(&mut s, job(54, 4, 30, None), T + 3, &[0]);
        run(&mut s, job(55, 16, 30, Some(2)), T + 6, &[2, 3]);
        run(&mut s, job(56, 8, 20, None), T + 9, &[1]);
        drain_gpu04_and_submit_pending(&mut s, T + 10, T + 9);
        let _ = s.cycle(T + 11);
        let once = s.backfill_plan(&[(JobId(57), 1), (JobId(58), 1), (JobId(64), 1)], T + 11, BF_MAX_JOB_TEST);
        assert_eq!(once[2], want(T + 6 + 30 * 60, 0));
    }

    /// The plan does not depend on the seconds the fill jobs start at, nor on the minute,
    /// while they start in one minute after its first second (as in the recording, where 55
    /// and 56 started at 09:41:03 and 09:41:06): moved across minute boundaries as a block,
    /// with gaps of 0 to 5 s between starts, at every second of the minute that leaves the
    /// block inside it, it is the recorded plan.
    #[test]
    fn the_plan_is_the_same_wherever_the_fill_block_starts_in_a_minute() {
        for minute in [M - 60, M, M + 60, M + 3600 * 7 + 60] {
            for gaps in [
                [0, 0, 0],
                [1, 1, 1],
                [3, 3, 3],
                [0, 1, 2],
                [2, 0, 5],
                [5, 5, 5],
            ] {
                let span: Time = gaps.iter().sum();
                for first in 1..60 - span {
                    let s53 = minute + first;
                    let starts = [s53, s53 + gaps[0], s53 + gaps[0] + gaps[1], s53 + span];
                    assert_eq!(
                        plan_golden(starts),
                        golden_plan(starts[3]),
                        "fill jobs started at {starts:?} (minute {minute})"
                    );
                }
            }
        }
    }

    /// Slurm's rounding is of absolute times (`_attempt_backfill` rounds the map's first slot,
    /// `start_time` and `end_reserve` down to `bf_resolution` since the epoch), so its plan
    /// does depend on where a minute boundary falls: when one falls between 55's and 56's
    /// starts, 57's rounded run on gpu02 ends before gpu01 and gpu03 free, the first group
    /// of ends on them (53-55) is not later than that end, and 58 is planned on gpu01 (the
    /// first of the two leaf switches with one usable node) when 55 ends.
    #[test]
    fn a_minute_boundary_between_the_fill_starts_moves_58_as_in_slurm() {
        for (s55, s56) in [(M - 1, M), (M - 1, M + 2), (M, M + 3), (M - 3, M + 1)] {
            let starts = [s55 - 4, s55 - 2, s55, s56];
            let plan = plan_golden(starts);
            assert_eq!(
                plan[1],
                want(s55 + 30 * 60, 0),
                "fill jobs started at {starts:?}"
            );
            assert_ne!(plan, golden_plan(s56));
        }
    }

    #[test]
    fn a_job_that_fits_now_is_planned_now_and_a_running_job_is_not_planned() {
        let mut s = Scheduler::new(
            Cluster::uniform(2, 8, 1, 64, 512_000),
            Box::new(Lowest),
            Box::new(Fifo),
            SchedConfig::default(),
        );
        run(&mut s, job(1, 8, 30, None), T, &[0]);
        assert!(s.handle(Event::Submit(job(2, 4, 10, None)), T).is_empty());
        let plan = s.backfill_plan(&[(JobId(2), 1), (JobId(1), 1), (JobId(9), 1)], T + 1, BF_MAX_JOB_TEST);
        assert_eq!(
            plan,
            vec![
                Some(PlannedStart {
                    start: T + 1,
                    nodes: vec![NodeId(1)]
                }),
                None,
                None
            ]
        );
    }
}
