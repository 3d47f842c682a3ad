//! What the owner task counts for the metrics endpoints ([`crate::metrics`]): aggregated
//! numbers only, one pass over the jobs or the nodes; the text is rendered by the HTTP
//! connection's task. Counting follows Slurm 25.11's `statistics.c` (`_fill_jobs_statistics`,
//! `statistics_get_nodes`, `_get_part_statistics`, `_get_users_accts`).

use super::{Controller, NodeRt};
use crate::job::{JobRecord, JobState};
use crate::metrics::{
    BaseState, FlotillaSched, JobCounts, JobFacts, MetricsKind, NodeBase, NodeCounts, NodeFacts, PartitionFacts, Snapshot,
};
use flotilla_core::cluster::{GpuMask, Node, NodeAvail};
use flotilla_core::job::JobId;
use flotilla_core::sched::Reason;
use std::collections::BTreeMap;

fn base_of(s: JobState) -> BaseState {
    match s {
        JobState::Pending => BaseState::Pending,
        JobState::Running => BaseState::Running,
        JobState::Completing | JobState::Completed => BaseState::Complete,
        JobState::Failed => BaseState::Failed,
        JobState::Cancelled => BaseState::Cancelled,
        JobState::Timeout => BaseState::Timeout,
        JobState::Preempted => BaseState::Preempted,
        JobState::NodeFail => BaseState::NodeFail,
        JobState::OutOfMemory => BaseState::OutOfMemory,
        JobState::Deadline => BaseState::Deadline,
    }
}

/// A node as Slurm's statistics see it (the base state as `sinfo` shows it:
/// `ctld::queries::query_nodes`).
fn node_facts(n: &Node, rt: &NodeRt) -> NodeFacts {
    let used_gpus = GpuMask::all(n.gpus).minus(n.free_gpus);
    let busy = n.free_cpu_milli < n.cpu_milli || !used_gpus.is_empty();
    let base = match n.avail {
        NodeAvail::Down { .. } => NodeBase::Down,
        NodeAvail::Unknown => NodeBase::Unknown,
        _ if n.free_cpu_milli == 0 => NodeBase::Allocated,
        _ if busy => NodeBase::Mixed,
        _ => NodeBase::Idle,
    };
    NodeFacts {
        name: n.name.clone(),
        base,
        drain: matches!(n.avail, NodeAvail::Drain { .. } | NodeAvail::Quarantined { .. }),
        no_resp: rt.sess.is_none(),
        cpus: n.cpu_milli / 1000,
        cpus_alloc: (n.cpu_milli - n.free_cpu_milli) / 1000,
        mem_mib: n.mem_mib,
        mem_alloc_mib: n.mem_mib - n.free_mem_mib,
        gpus: u64::from(n.gpus),
        gpus_free: u64::from(n.free_gpus.count()),
    }
}

impl Controller {
    /// A job record as the counts see it.
    fn job_facts(&self, rec: &JobRecord) -> JobFacts {
        let base = match rec.state {
            JobState::Completing => rec.end_state.map_or(BaseState::Complete, base_of),
            s => base_of(s),
        };
        let running = rec.state == JobState::Running;
        let wait_part_node_limit = rec.state == JobState::Pending
            && self.sched.pending_info(JobId(rec.spec.id.0)).is_some_and(|i| i.reason == Reason::PartitionNodeLimit);
        JobFacts {
            base,
            completing: rec.state == JobState::Completing,
            held: rec.spec.held.is_some(),
            tasks: if rec.is_array_meta() { rec.array_pending.len() as u64 } else { 1 },
            cpus: if running { rec.allocs.iter().map(|a| a.part.cpu_milli / 1000).sum() } else { 0 },
            mem_bytes: if running { rec.allocs.iter().map(|a| a.part.mem_mib << 20).sum() } else { 0 },
            nodes: if running { rec.nodes.len() as u64 } else { 0 },
            req_nodes: u64::from(rec.num_nodes.max(1)),
            wait_part_node_limit,
        }
    }

    /// The numbers of one metric set at `now`.
    pub(super) fn metrics_snapshot(&self, kind: MetricsKind, now: i64) -> Snapshot {
        match kind {
            MetricsKind::Jobs => {
                let mut c = JobCounts::default();
                for rec in self.jobs.values() {
                    c.add(&self.job_facts(rec), true);
                }
                Snapshot::Jobs(c)
            }
            MetricsKind::Nodes => {
                let nodes: Vec<NodeFacts> =
                    self.sched.cluster().nodes.iter().zip(&self.nodes).map(|(n, rt)| node_facts(n, rt)).collect();
                let mut c = NodeCounts::default();
                nodes.iter().for_each(|n| c.add(n));
                Snapshot::Nodes(nodes, c)
            }
            MetricsKind::Partitions => {
                let cl = self.sched.cluster();
                let facts: Vec<NodeFacts> = cl.nodes.iter().zip(&self.nodes).map(|(n, rt)| node_facts(n, rt)).collect();
                let mut parts: Vec<PartitionFacts> = cl
                    .partitions
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let mut nodes = NodeCounts::default();
                        p.nodes.iter().for_each(|n| nodes.add(&facts[n.0 as usize]));
                        let lp = self.largest_placeable_of(i);
                        let (grown, lr) = self.reclaimable_of(i);
                        PartitionFacts {
                            name: p.name.clone(),
                            jobs: JobCounts::default(),
                            nodes,
                            largest_placeable: (lp.node, lp.pod, lp.any),
                            elastic_reclaimable_gpus: grown,
                            largest_if_reclaimed: (lr.node, lr.pod, lr.any),
                        }
                    })
                    .collect();
                let by_name: BTreeMap<&str, usize> = parts.iter().enumerate().map(|(i, p)| (p.name.as_str(), i)).collect();
                let idx: Vec<(usize, JobFacts)> = self
                    .jobs
                    .values()
                    .filter_map(|rec| by_name.get(rec.partition.as_str()).map(|&i| (i, self.job_facts(rec))))
                    .collect();
                for (i, f) in idx {
                    parts[i].jobs.add(&f, true);
                }
                Snapshot::Partitions(parts)
            }
            MetricsKind::Scheduler => {
                let res = self.sched.reservations();
                let backfill: Vec<u64> = self
                    .sched
                    .running()
                    .values()
                    .filter(|r| !r.backfill_for.is_empty())
                    .map(|r| u64::from(r.gpus()))
                    .collect();
                let mut quarantined: BTreeMap<String, u64> = BTreeMap::new();
                for n in &self.sched.cluster().nodes {
                    if let NodeAvail::Quarantined { reason } = &n.avail {
                        *quarantined.entry(crate::metrics::quarantine_cause(reason)).or_default() += 1;
                    }
                }
                let cfg = self.sched.config();
                let f = FlotillaSched {
                    reservations: res.len() as u64,
                    reservation_gpus: res.iter().flat_map(|r| &r.gpus).map(|(_, m)| u64::from(m.count())).sum(),
                    cycle: self.stats.cycle_hist.clone(),
                    wait: self.stats.queue_wait.clone(),
                    reservation_oldest_s: res.iter().map(|r| (now as u64).saturating_sub(r.created)).max().unwrap_or(0),
                    backfill_jobs: backfill.len() as u64,
                    backfill_gpus: backfill.iter().sum(),
                    budget_share_pct: u64::from(self.sched.preempted_share_pct(now as u64)),
                    budget_warn_pct: u64::from(cfg.budget_warn_pct),
                    budget_page_pct: u64::from(cfg.budget_page_pct),
                    checkpoint_bw: self.sched.storage_bandwidth(),
                    quarantined: quarantined.into_iter().collect(),
                };
                Snapshot::Scheduler(Box::new(self.diag(now)), Box::new(f))
            }
            MetricsKind::UsersAccounts => {
                let mut users: BTreeMap<&str, JobCounts> = BTreeMap::new();
                let mut accounts: BTreeMap<&str, JobCounts> = BTreeMap::new();
                for rec in self.jobs.values() {
                    let f = self.job_facts(rec);
                    users.entry(&rec.user).or_default().add(&f, false);
                    accounts.entry(&rec.account).or_default().add(&f, false);
                }
                let own = |m: BTreeMap<&str, JobCounts>| m.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                Snapshot::UsersAccounts(own(users), own(accounts))
            }
        }
    }
}
