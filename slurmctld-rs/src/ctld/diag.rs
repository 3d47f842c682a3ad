//! `sdiag`'s statistics ([`flotilla_proto::diag::Diag`]): the controller's counters as Slurm
//! 22.05's `slurmctld` keeps them for `REQUEST_STATS_INFO` (`controller.c`, `stat_*` of
//! `slurmctld.h`, `_fill_ctld_conf`... reimplemented from what `sdiag` prints), and since the
//! last `sdiag --reset` where Slurm resets them (`reset_stats`: job counters, both
//! schedulers' cycle statistics but the backfilled-jobs total since start, the RPC tables).
//!
//! What Flotilla counts where Slurm's machinery differs:
//! - Main scheduler: every scheduling cycle of the core ([`Controller::schedule`]): its time,
//!   its depth (the pending jobs it examined: the core examines all of them), the pending queue
//!   length at its start.
//! - Backfill: the core plans reservations and backfills around them in the same pass, so a
//!   "backfill cycle" is a cycle after which the core holds at least one reservation (that is
//!   when jobs can start ahead of a reservation); its depth is the queue length, its table
//!   size the reservations held. A job is backfilled when the core starts it on GPUs some
//!   reservation holds (`Decision::Bind` with `backfill_for`).
//! - Flotilla's section: preemptions the core decided, by reason (`PendingJob`: for a pending
//!   job, `ServiceReplica`: for an inference replica, `ReservationComplete`: a backfill job
//!   giving back a reservation's GPUs), pages and other alerts raised, reservations held now,
//!   and each partition's largest placeable request.
//! - Server thread count: the requests being served by the owner task's current turn (the
//!   one asking included); agent queue size / agent count: the node messages this turn holds
//!   and the nodes they go to; DBD agent queue size: replies of uncommitted turns held while
//!   commits fail.
//! - RPC statistics by type and by user: count and handling time in the owner task (µs), in
//!   the order the types and users first came, as Slurm's tables are.

use super::Controller;
use flotilla_core::sched::Decision;
use flotilla_proto::diag::{rpc_type_id, Diag, FlotillaDiag, RpcTypeStat, RpcUserStat};
use flotilla_proto::errno::ESLURM_ACCESS_DENIED;
use flotilla_proto::{Response, SlurmError};
use std::collections::BTreeMap;
use std::time::Instant;

/// Counters since the start or the last reset.
#[derive(Debug, Default)]
pub(super) struct DiagAcc {
    /// Start of the statistics (s since epoch); 0 until the controller sets it.
    since: i64,
    /// The job counters of [`super::StatsAcc`] at the last reset.
    base: [u64; 5],
    cycle_last: u64,
    cycle_max: u64,
    cycle_sum: u64,
    cycle_count: u64,
    cycle_depth: u64,
    queue_len: u64,
    /// Backfilled jobs since the controller started (not reset).
    bf_total: u64,
    bf_since_reset: u64,
    bf_cycles: u64,
    bf_when: i64,
    bf_last: u64,
    bf_max: u64,
    bf_sum: u64,
    bf_depth: u64,
    bf_depth_sum: u64,
    bf_queue_len: u64,
    bf_queue_len_sum: u64,
    bf_table: u64,
    bf_table_sum: u64,
    /// (type, count, µs) in first-seen order.
    rpc_types: Vec<(&'static str, u64, u64)>,
    /// (uid, count, µs) in first-seen order.
    rpc_users: Vec<(u32, u64, u64)>,
    preemptions: BTreeMap<&'static str, u64>,
    pages: u64,
    alerts: u64,
}

impl DiagAcc {
    /// Counts one request of type `kind` from `uid` that took `us` µs.
    pub(super) fn rpc(&mut self, kind: &'static str, uid: u32, us: u64) {
        match self.rpc_types.iter_mut().find(|t| t.0 == kind) {
            Some(t) => {
                t.1 += 1;
                t.2 += us;
            }
            None => self.rpc_types.push((kind, 1, us)),
        }
        match self.rpc_users.iter_mut().find(|u| u.0 == uid) {
            Some(u) => {
                u.1 += 1;
                u.2 += us;
            }
            None => self.rpc_users.push((uid, 1, us)),
        }
    }

    /// Counts what the core decided: backfilled starts, preemptions by reason, pages.
    pub(super) fn decisions(&mut self, ds: &[Decision]) {
        for d in ds {
            let reason = match d {
                Decision::Bind { backfill_for, .. } if !backfill_for.is_empty() => {
                    self.bf_total += 1;
                    self.bf_since_reset += 1;
                    continue;
                }
                Decision::Preempt { for_service: Some(_), .. } => "ServiceReplica",
                Decision::Preempt { .. } => "PendingJob",
                Decision::PreemptBackfill { .. } => "ReservationComplete",
                Decision::Page(_) => {
                    self.pages += 1;
                    continue;
                }
                Decision::Alert { .. } => {
                    self.alerts += 1;
                    continue;
                }
                _ => continue,
            };
            *self.preemptions.entry(reason).or_default() += 1;
        }
    }

    /// Counts one scheduling cycle: `us` long, `queue` pending jobs at its start,
    /// `reservations` held after it, at `now`.
    pub(super) fn cycle(&mut self, us: u64, queue: u64, reservations: u64, now: i64) {
        self.cycle_last = us;
        self.cycle_max = self.cycle_max.max(us);
        self.cycle_sum += us;
        self.cycle_count += 1;
        self.cycle_depth += queue;
        self.queue_len = queue;
        if reservations > 0 {
            self.bf_cycles += 1;
            self.bf_when = now;
            self.bf_last = us;
            self.bf_max = self.bf_max.max(us);
            self.bf_sum += us;
            self.bf_depth = queue;
            self.bf_depth_sum += queue;
            self.bf_queue_len = queue;
            self.bf_queue_len_sum += queue;
            self.bf_table = reservations;
            self.bf_table_sum += reservations;
        }
    }
}

/// Time of 1000 clock reads (µs), as `sdiag`'s "Latency for 1000 calls to gettimeofday()".
fn clock_latency_us() -> u32 {
    let t = Instant::now();
    let mut last = std::time::SystemTime::UNIX_EPOCH;
    for _ in 0..1000 {
        last = std::hint::black_box(std::time::SystemTime::now());
    }
    std::hint::black_box(last);
    t.elapsed().as_micros().min(u32::MAX as u128) as u32
}

impl Controller {
    /// The job counters of `StatsAcc` (submitted, started, completed, cancelled, failed).
    fn job_counters(&self) -> [u64; 5] {
        let s = &self.stats;
        [s.submitted, s.started, s.completed, s.cancelled, s.failed]
    }

    /// `sdiag` (`Request::Diag`).
    pub(super) fn diag(&self, now: i64) -> Diag {
        let d = &self.diag;
        let jobs = self.job_counters();
        let since = |i: usize| jobs[i].saturating_sub(d.base[i]);
        let c = self.sched.cluster();
        let mut nodes_out: Vec<usize> = self.node_out.iter().map(|(n, _)| *n).collect();
        nodes_out.sort_unstable();
        nodes_out.dedup();
        Diag {
            req_time: now,
            req_time_start: if d.since > 0 { d.since } else { self.started_at },
            server_thread_count: (self.replies.len() + self.answers.len() + 1) as u32,
            agent_queue_size: self.node_out.len() as u32,
            agent_count: nodes_out.len() as u32,
            agent_thread_count: 0,
            dbd_agent_queue_size: self.degraded.as_ref().map_or(0, |g| g.held()) as u32,
            jobs_submitted: since(0),
            jobs_started: since(1),
            jobs_completed: since(2),
            jobs_canceled: since(3),
            jobs_failed: since(4),
            job_states_ts: now,
            jobs_pending: self.jobs.values().filter(|j| j.state == crate::job::JobState::Pending).count() as u64,
            jobs_running: self.jobs.values().filter(|j| j.state == crate::job::JobState::Running).count() as u64,
            schedule_cycle_last: d.cycle_last,
            schedule_cycle_max: d.cycle_max,
            schedule_cycle_counter: d.cycle_count,
            schedule_cycle_sum: d.cycle_sum,
            schedule_cycle_depth: d.cycle_depth,
            schedule_queue_len: d.queue_len,
            bf_active: false,
            bf_backfilled_jobs: d.bf_total,
            bf_last_backfilled_jobs: d.bf_since_reset,
            bf_backfilled_het_jobs: 0,
            bf_cycle_counter: d.bf_cycles,
            bf_when_last_cycle: d.bf_when,
            bf_cycle_last: d.bf_last,
            bf_cycle_max: d.bf_max,
            bf_cycle_sum: d.bf_sum,
            bf_last_depth: d.bf_depth,
            bf_last_depth_try: d.bf_depth,
            bf_depth_sum: d.bf_depth_sum,
            bf_depth_try_sum: d.bf_depth_sum,
            bf_queue_len: d.bf_queue_len,
            bf_queue_len_sum: d.bf_queue_len_sum,
            bf_table_size: d.bf_table,
            bf_table_size_sum: d.bf_table_sum,
            gettimeofday_latency: clock_latency_us(),
            rpc_types: d
                .rpc_types
                .iter()
                .map(|&(name, count, total_time)| RpcTypeStat {
                    name: name.to_string(),
                    id: rpc_type_id(name).unwrap_or(0),
                    count,
                    total_time,
                })
                .collect(),
            rpc_users: d.rpc_users.iter().map(|&(uid, count, total_time)| RpcUserStat { uid, count, total_time }).collect(),
            flotilla: FlotillaDiag {
                largest_placeable: (0..c.partitions.len()).map(|i| (c.partitions[i].name.clone(), self.largest_placeable_of(i))).collect(),
                held_reservations: self.sched.reservations().len() as u64,
                preemptions: d.preemptions.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                pages: d.pages,
                alerts: d.alerts,
            },
        }
    }

    /// `sdiag --reset` (`Request::DiagReset`): root and `SlurmUser` only (Slurm's
    /// `_slurm_rpc_reset_statistics` refuses others with `ESLURM_ACCESS_DENIED`).
    pub(super) fn diag_reset(&mut self, admin: bool, now: i64) -> Response {
        if !admin {
            return Response::Error(SlurmError::new(ESLURM_ACCESS_DENIED));
        }
        let bf_total = self.diag.bf_total;
        self.diag = DiagAcc {
            since: now,
            base: self.job_counters(),
            bf_total,
            ..DiagAcc::default()
        };
        Response::Diag(Box::new(self.diag(now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_core::job::JobId;

    #[test]
    fn rpc_tables_keep_first_seen_order_and_sum_times() {
        let mut d = DiagAcc::default();
        d.rpc("REQUEST_JOB_INFO", 1000, 5);
        d.rpc("REQUEST_PING", 0, 2);
        d.rpc("REQUEST_JOB_INFO", 0, 7);
        assert_eq!(d.rpc_types, vec![("REQUEST_JOB_INFO", 2, 12), ("REQUEST_PING", 1, 2)]);
        assert_eq!(d.rpc_users, vec![(1000, 1, 5), (0, 2, 9)]);
    }

    #[test]
    fn backfill_cycles_are_the_cycles_with_reservations() {
        let mut d = DiagAcc::default();
        d.cycle(10, 3, 0, 100);
        d.cycle(30, 5, 2, 101);
        d.cycle(20, 4, 0, 102);
        assert_eq!((d.cycle_count, d.cycle_sum, d.cycle_max, d.cycle_last, d.cycle_depth, d.queue_len), (3, 60, 30, 20, 12, 4));
        assert_eq!((d.bf_cycles, d.bf_when, d.bf_last, d.bf_table, d.bf_depth), (1, 101, 30, 2, 5));
    }

    #[test]
    fn backfilled_starts_and_preemptions_are_counted_by_reason() {
        let mut d = DiagAcc::default();
        d.decisions(&[
            Decision::Bind { job: JobId(1), allocs: Vec::new(), backfill_for: vec![JobId(2)] },
            Decision::Bind { job: JobId(3), allocs: Vec::new(), backfill_for: Vec::new() },
            Decision::PreemptBackfill { job: JobId(1), for_job: JobId(2) },
            Decision::PreemptBackfill { job: JobId(4), for_job: JobId(2) },
            Decision::Requeue { job: JobId(5), reason: flotilla_core::sched::RequeueReason::NodeDown(flotilla_core::cluster::NodeId(0)) },
        ]);
        assert_eq!((d.bf_total, d.bf_since_reset), (1, 1));
        assert_eq!(d.preemptions.get("ReservationComplete"), Some(&2));
        assert_eq!(d.preemptions.len(), 1, "a node's requeue is no preemption");
    }
}
