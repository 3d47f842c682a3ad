//! Priorities and eligibility: which pending jobs a cycle considers, in what order, and the
//! Slurm pending reason of each job it skips.

use super::services::SERVICE_PRIORITY_BASE;
use super::cycle::Candidate;
use super::{PendingInfo, PriorityInput, Rank, Reason, Scheduler};
use crate::cluster::{Cluster, Partition, Time};
use crate::job::{HoldKind, JobId, JobSpec};

impl Scheduler {
    /// The order stage of a cycle at `now`.
    ///
    /// First brings fair-share usage up to `now` (see `usage`). Reads the pending jobs'
    /// specs, their partitions, the required nodes' availability, the priority policy with
    /// each job's multifactor inputs, and the held reservations. Writes every pending job's `priority`
    /// (a replica's is [`SERVICE_PRIORITY_BASE`] plus its service's priority), in the
    /// incremental cycle its resolved accounting inputs (`PendingJob::acct`) and, for a job
    /// that may not be considered now, its pending info (see [`ineligible`]). Returns the
    /// eligible jobs as the per-job stages' candidates, with their rank, best first: higher
    /// priority, then earlier submission, then lower id; a job holding a reservation keeps the
    /// rank its reservation froze. Notes the earliest `--begin` still ahead, until which the
    /// order may be kept.
    pub(super) fn order(&mut self, now: Time) -> Vec<Candidate> {
        self.update_usage(now);
        let uses_factors = self.priority.uses_factors();
        let totals = if uses_factors { super::usage::Totals::of(&self.cluster, &self.accounting) } else { Default::default() };
        let any_replica = !self.replica_service.is_empty();
        let (acct_gen, full_scan) = (self.acct_gen, self.full_scan);
        let mut order: Vec<Candidate> = Vec::with_capacity(self.pending.len());
        // The held reservations' ranks by job, walked along the pending jobs (both ascending by
        // id) instead of a search of the reservations per job.
        let mut held: Vec<(JobId, Rank)> = self.reservations.iter().map(|r| (r.job, r.rank)).collect();
        held.sort_by_key(|(j, _)| *j);
        let mut next_held = 0;
        let mut next_begin = Time::MAX;
        for (id, p) in self.pending.iter_mut() {
            if let Some(b) = p.spec.begin_time.filter(|b| *b > now) {
                next_begin = next_begin.min(b);
            }
            let part = &self.cluster.partitions[p.spec.partition.0 as usize];
            let replica = any_replica && self.replica_service.contains_key(id);
            p.priority = if replica {
                SERVICE_PRIORITY_BASE + u64::from(p.spec.base_priority)
            } else {
                let factors = if uses_factors {
                    // The incremental cycle resolves a job's association once per accounting
                    // in force (`usage::JobAcct`); the full scan every cycle, to compare.
                    let ja = match p.acct {
                        Some(ja) if ja.gen == acct_gen && !full_scan => ja,
                        _ => {
                            let ja = super::usage::JobAcct::of(&self.accounting, &self.cluster, &p.spec, acct_gen);
                            if !full_scan {
                                p.acct = Some(ja);
                            }
                            ja
                        }
                    };
                    super::usage::factor_input_with(ja, &self.fair, &self.usage_config, totals, &p.spec)
                } else {
                    Default::default()
                };
                self.priority.priority(PriorityInput { job: &p.spec, failed_cycles: p.failed_cycles, partition: part, now, factors })
            };
            if let Some((reason, slurm_detail)) = ineligible(&self.cluster, &p.spec, part, replica, now) {
                p.set_info(PendingInfo {
                    reason,
                    detail: None,
                    expected_start: None,
                    sched_nodes: Vec::new(),
                    slurm_detail,
                });
                continue;
            }
            while held.get(next_held).is_some_and(|(j, _)| j < id) {
                next_held += 1;
            }
            let own = held.get(next_held).filter(|(j, _)| j == id).map(|(_, r)| *r);
            order.push(Candidate {
                id: *id,
                key: own.unwrap_or((p.priority, p.spec.submit_time, *id)),
                part: p.spec.partition,
                shape: p.shape,
                time_limit: p.spec.time_limit_s,
                replica,
                preemptible: p.spec.preemptible,
                held: own.is_some(),
            });
        }
        // Every key ends with the job's own id (a held reservation froze the job's own rank),
        // so no two are equal and an unstable sort gives the one order.
        order.sort_unstable_by_key(|c| (std::cmp::Reverse(c.key.0), c.key.1, c.key.2));
        self.replay_next_begin(next_begin);
        order
    }
}

/// Why `spec` (a job of partition `part`; `replica` for a service replica) may not be
/// considered at `now`, with the text Slurm appends to the reason; `None` when it is eligible.
/// Checked in this order: a hold (`JobHeldUser`, `JobHeldAdmin`), unsatisfied dependencies
/// (`Dependency`), `--begin` in the future (`BeginTime`), the partition down or inactive
/// (`PartitionDown`, `PartitionInactive`; a drained one schedules), then, for jobs other than replicas, more nodes than the partition has
/// (`PartitionNodeLimit`: accepted under `EnforcePartLimits=NO`, goldens-extra 0165; Slurm
/// 22.05 `_part_access_check` tests the node count before the time), a time limit above the
/// partition's `MaxTime` or no time limit where the partition has one (`PartitionTimeLimit`),
/// and last a
/// required node (`--nodelist`) that is not schedulable (`ReqNodeNotAvail`, detail
/// `UnavailableNodes:<hostlist>`).
fn ineligible(cluster: &Cluster, spec: &JobSpec, part: &Partition, replica: bool, now: Time) -> Option<(Reason, Option<String>)> {
    let reason = if let Some(h) = spec.held {
        Some(match h {
            HoldKind::User => Reason::JobHeldUser,
            HoldKind::Admin => Reason::JobHeldAdmin,
        })
    } else if spec.dependency_pending {
        Some(Reason::Dependency)
    } else if spec.begin_time.is_some_and(|b| b > now) {
        Some(Reason::BeginTime)
    } else if let Some(r) = Reason::of_partition(part.state) {
        Some(r)
    } else if replica {
        None
    } else if spec.request.nodes.is_some_and(|n| n as usize > part.nodes.len()) {
        Some(Reason::PartitionNodeLimit)
    } else if part.over_max_time(spec.time_limit_s) {
        Some(Reason::PartitionTimeLimit)
    } else {
        None
    };
    if let Some(reason) = reason {
        return Some((reason, None));
    }
    let down: Vec<String> = spec
        .request
        .required_nodes
        .iter()
        .filter(|n| !cluster.node(**n).avail.schedulable())
        .map(|n| cluster.node(*n).name.clone())
        .collect();
    if down.is_empty() {
        return None;
    }
    Some((Reason::ReqNodeNotAvail, Some(format!("UnavailableNodes:{}", crate::hostlist::compress(&down)))))
}

#[cfg(test)]
mod tests {
    use crate::cluster::{Cluster, PartId, PartitionState};
    use crate::config::TopologyKind;
    use crate::job::{JobId, JobSpec, Request};
    use crate::sched::test_policies::{Fifo, Lowest};
    use crate::sched::{Decision, Event, Reason, SchedConfig, Scheduler};

    /// A partition's state decides, from the next cycle on, whether its jobs start (`UP`,
    /// `DRAIN`) or wait (`PartitionDown`, `PartitionInactive`; goldens-extra 1032).
    #[test]
    fn partition_state_gates_its_jobs() {
        let mut s = Scheduler::new(Cluster::uniform(1, 8, 1, 64, 512_000), Box::new(Lowest), Box::new(Fifo), SchedConfig::default());
        let part = PartId(0);
        let reason = |s: &Scheduler| s.pending_info(JobId(1)).map(|i| i.reason);
        assert!(s.handle(Event::PartitionState { part, state: PartitionState::Down }, 0).is_empty());
        assert!(s.handle(Event::Submit(JobSpec::simple(1, 0, Request::gpus(8, TopologyKind::Node), Some(60))), 0).is_empty());
        assert!(s.cycle(0).is_empty());
        assert_eq!(reason(&s), Some(Reason::PartitionDown));
        assert!(s.handle(Event::PartitionState { part, state: PartitionState::Inactive }, 1).is_empty());
        assert!(s.cycle(1).is_empty());
        assert_eq!(reason(&s), Some(Reason::PartitionInactive));
        assert!(!Reason::PartitionInactive.runnable_state());
        assert!(s.handle(Event::PartitionState { part, state: PartitionState::Drain }, 2).is_empty());
        let d = s.cycle(2);
        assert!(matches!(d.as_slice(), [Decision::Bind { .. }]), "{d:?}");
        s.check_invariants().unwrap();
    }

    /// A job's last notable pending reason goes with it to its run (Slurm's
    /// `state_reason_prev_db`, `sacct -o Reason`): `PartitionDown` for a job that waited on a
    /// down partition, nothing for one that waited only for resources (`Resources`,
    /// `Priority` and `None` are not kept).
    #[test]
    fn a_started_job_keeps_its_last_notable_reason() {
        let mut s = Scheduler::new(Cluster::uniform(1, 8, 1, 64, 512_000), Box::new(Lowest), Box::new(Fifo), SchedConfig::default());
        let part = PartId(0);
        let prev = |s: &Scheduler, id: u64| s.running().get(&JobId(id)).map(|r| r.reason_prev);
        assert!(s.handle(Event::PartitionState { part, state: PartitionState::Down }, 0).is_empty());
        assert!(s.handle(Event::Submit(JobSpec::simple(1, 0, Request::gpus(8, TopologyKind::Node), Some(60))), 0).is_empty());
        assert!(s.cycle(0).is_empty());
        assert!(s.handle(Event::PartitionState { part, state: PartitionState::Up }, 1).is_empty());
        assert!(s.handle(Event::Submit(JobSpec::simple(2, 1, Request::gpus(8, TopologyKind::Node), Some(60))), 1).is_empty());
        let d = s.cycle(1);
        assert!(d.iter().any(|d| matches!(d, Decision::Bind { job: JobId(1), .. })), "{d:?}");
        assert_eq!(prev(&s, 1), Some(Some(Reason::PartitionDown)));
        assert!(s.pending_info(JobId(2)).is_some_and(|i| matches!(i.reason, Reason::Resources | Reason::Priority)));
        let _ = s.handle(Event::JobEnded(JobId(1)), 2);
        let d = s.cycle(2);
        assert!(d.iter().any(|d| matches!(d, Decision::Bind { job: JobId(2), .. })), "{d:?}");
        assert_eq!(prev(&s, 2), Some(None));
        s.check_invariants().unwrap();
    }

    /// `scontrol update PartitionName= MaxTime= DefaultTime=` (goldens-extra 1036): a pending
    /// job over the new `MaxTime` waits `PartitionTimeLimit` from the next cycle and starts
    /// once it is raised; a `DefaultTime` above the `MaxTime` is ignored, one within it kept.
    #[test]
    fn partition_times_gate_their_jobs_and_bound_the_default() {
        let mut s = Scheduler::new(Cluster::uniform(1, 8, 1, 64, 512_000), Box::new(Lowest), Box::new(Fifo), SchedConfig::default());
        let part = PartId(0);
        let reason = |s: &Scheduler| s.pending_info(JobId(1)).map(|i| i.reason);
        let times = |max: Option<Option<u64>>, default: Option<Option<u64>>| Event::PartitionTimes { part, max_time_min: max, default_time_min: default };
        assert!(s.handle(times(Some(Some(10)), None), 0).is_empty());
        assert!(s.handle(Event::Submit(JobSpec::simple(1, 0, Request::gpus(8, TopologyKind::Node), Some(20 * 60))), 0).is_empty());
        assert!(s.cycle(0).is_empty());
        assert_eq!(reason(&s), Some(Reason::PartitionTimeLimit));
        // Above the MaxTime: ignored; within it: kept; UNLIMITED under a MaxTime: ignored.
        assert!(s.handle(times(None, Some(Some(40))), 1).is_empty());
        assert_eq!(s.cluster().partitions[0].default_time_min, None);
        assert!(s.handle(times(Some(Some(30)), Some(Some(5))), 1).is_empty());
        assert_eq!((s.cluster().partitions[0].max_time_min, s.cluster().partitions[0].default_time_min), (Some(30), Some(5)));
        assert!(s.handle(times(None, Some(None)), 1).is_empty());
        assert_eq!(s.cluster().partitions[0].default_time_min, Some(5));
        let d = s.cycle(2);
        assert!(matches!(d.as_slice(), [Decision::Bind { .. }]), "{d:?}");
        s.check_invariants().unwrap();
    }

    /// slurm.conf's words, and what each state lets through (Slurm's `PARTITION_SUBMIT`,
    /// `PARTITION_SCHED`).
    #[test]
    fn partition_state_words() {
        use PartitionState::*;
        for (word, st, schedules, accepts) in [("UP", Up, true, true), ("down", Down, false, true), ("Drain", Drain, true, false), ("INACTIVE", Inactive, false, false)] {
            assert_eq!(PartitionState::parse(word), Some(st));
            assert_eq!(st.as_str(), word.to_ascii_uppercase());
            assert_eq!((st.schedules(), st.accepts()), (schedules, accepts), "{word}");
            assert_eq!(Reason::of_partition(st).is_none(), schedules);
        }
        assert_eq!(PartitionState::parse("inact"), None);
    }
}
