//! Read-only answers: job views (`squeue`, `scontrol show job`) borrowed from the records,
//! node and partition queries, and the controller's statistics (`sdiag`).

use super::{prov_id, Controller, Ident, Reply};
use crate::job::{JobRecord, JobState};
use flotilla_core::cluster::{GpuMask, NodeAvail};
use flotilla_core::hostlist::compress_sorted;
use flotilla_core::job::{HoldKind, JobId};
use flotilla_core::sched::Scheduler;
use flotilla_proto::errno::*;
use flotilla_proto::{
    FieldSet, JobFilter, JobQuery, JobRef, JobView, NodeInfo, NodeQuery, PartitionInfo, Response, SlurmError, Stats, Str,
    TimeLimitWire,
};
use std::sync::atomic::Ordering;
use tracing::error;

impl Controller {
    /// What a pending job shows as waiting for, at `now`: the core's reason (with Slurm's
    /// detail, `ReqNodeNotAvail, UnavailableNodes:gpu04`), its expected start and planned
    /// nodes and its priority; before a cycle has evaluated it, the reasons known without
    /// one (`Dependency`, `BeginTime`); a hold at once, as in Slurm; and a reason the record
    /// carries (a requeue's hold, `DependencyNeverSatisfied`) over all of them. A job that is
    /// not pending shows `None` and nothing else.
    fn pending_shown<'a>(&'a self, rec: &'a JobRecord, want: FieldSet, now: i64) -> PendingShown<'a> {
        use flotilla_proto::JobField as F;
        let mut p = PendingShown {
            reason: Str::b("None"),
            detail: None,
            expected: None,
            sched_nodes: Str::default(),
            priority: 0,
        };
        let pending_fields = [F::Reason, F::ReasonDetail, F::SchedNodes, F::Priority, F::StartTime, F::EndTime];
        if rec.state == JobState::Pending && want.any(&pending_fields) {
            let core_id = if rec.is_array_meta() {
                self.in_core_tasks.get(&rec.id).and_then(|s| s.iter().next()).map(|&t| prov_id(rec.id, t))
            } else {
                Some(rec.spec.id.0)
            };
            match core_id.and_then(|c| self.sched.pending_state(JobId(c))) {
                Some((info, prio)) => {
                    p.reason = match &info.slurm_detail {
                        // Slurm's `ReqNodeNotAvail, UnavailableNodes:gpu04`.
                        Some(d) if !d.is_empty() => Str::from(format!("{}, {d}", info.reason.as_str())),
                        _ => Str::b(info.reason.as_str()),
                    };
                    p.detail = info.detail.as_deref().map(Str::b);
                    p.expected = info.expected_start.filter(|&t| t != u64::MAX).map(|t| t as i64);
                    if !info.sched_nodes.is_empty() && want.has(F::SchedNodes) {
                        let names: Vec<String> = info.sched_nodes.iter().map(|n| self.sched.cluster().node(*n).name.clone()).collect();
                        p.sched_nodes = Str::from(compress_sorted(&names));
                    }
                    p.priority = prio;
                    // A hold the last cycle saw but since released: Slurm shows no reason
                    // until its next pass (`_release_job_rec`: `WAIT_NO_REASON`).
                    if rec.spec.held.is_none() && matches!(info.reason.as_str(), "JobHeldUser" | "JobHeldAdmin") {
                        p.reason = Str::b("None");
                        p.detail = None;
                    }
                }
                None if rec.is_array_meta() => p.reason = Str::b("JobArrayTaskLimit"),
                None => {}
            }
        }
        if rec.state == JobState::Pending && p.reason == "None" && want.has(F::Reason) {
            // Not evaluated by a cycle yet: the reasons known without one (a hold is below).
            if rec.spec.dependency_pending {
                p.reason = Str::b("Dependency");
            } else if rec.spec.begin_time.is_some_and(|b| b as i64 > now) {
                p.reason = Str::b("BeginTime");
            }
        }
        if rec.state == JobState::Pending {
            // A hold shows at once, as in Slurm, not after the next scheduling cycle.
            match rec.spec.held {
                Some(HoldKind::User) => p.reason = Str::b("JobHeldUser"),
                Some(HoldKind::Admin) => p.reason = Str::b("JobHeldAdmin"),
                None => {}
            }
        }
        if let Some(r) = &rec.reason {
            p.reason = Str::b(r);
        }
        p
    }

    /// A job as queries show it at `now`, borrowing from its record and the scheduler:
    /// `squeue` over 10,000 jobs encodes views without cloning a string of theirs. Only the
    /// fields in `want` are filled (the others default): the rest of the record is not even
    /// read, and a record is a kilobyte of memory that is rarely in cache.
    pub(super) fn job_view<'a>(&'a self, rec: &'a JobRecord, want: FieldSet, now: i64) -> JobView<'a> {
        use flotilla_proto::JobField as F;
        macro_rules! pick {
            ($f:ident, $e:expr) => {
                if want.has(F::$f) {
                    $e
                } else {
                    Default::default()
                }
            };
        }
        let PendingShown {
            reason,
            detail,
            expected,
            sched_nodes,
            priority,
        } = self.pending_shown(rec, want, now);
        // Under priority/basic (Slurm's default) every job shows its number, running and held
        // ones too; other policies show what the last cycle ranked.
        let priority = if self.sched.priority_name() == "priority/basic" {
            if rec.priority == crate::job::PRIO_UNSET { 0 } else { u64::from(rec.priority) }
        } else {
            priority
        };
        // A pending job shows when it is expected to start; without an estimate, its begin
        // time (`--begin`, a requeue's hold-off), as Slurm sets `start_time` to it. Either
        // way the end shown is that start plus the time limit.
        let shown_start = rec.start_time.or(expected).or_else(|| {
            (rec.state == JobState::Pending).then_some(rec.spec.begin_time.map(|b| b as i64)).flatten()
        });
        let gpu_alloc = pick!(GpuAlloc, rec.allocs.iter().zip(&rec.nodes).map(|(a, n)| (Str::b(n), a.part.gpus.0)).collect());
        let num_cpus = pick!(
            NumCpus,
            if rec.allocs.is_empty() {
                // Pending: the CPUs the job asks for (Slurm's `min_cpus`): its tasks' CPUs,
                // which a node count only GPU options fixed does not raise (goldens-extra
                // 0407), or its nodes' CPUs when it takes whole nodes.
                let per_nodes = (rec.spec.request.cpu_milli_per_node / 1000) as u32 * rec.num_nodes.max(1);
                if rec.exclusive {
                    per_nodes
                } else {
                    per_nodes.min(rec.ntasks.max(1).saturating_mul(rec.cpus_per_task.max(1)))
                }
            } else {
                rec.allocs.iter().map(|a| (a.part.cpu_milli / 1000) as u32).sum()
            }
        );
        JobView {
            job_id: pick!(JobId, rec.id),
            array_job_id: pick!(ArrayJobId, rec.array_job_id),
            array_task_id: pick!(ArrayTaskId, if rec.is_array_meta() { None } else { rec.array_task_id }),
            array_task_str: pick!(ArrayTaskStr, rec.array_task_str().map(Str::from)),
            name: pick!(Name, Str::b(&rec.name)),
            user: pick!(User, Str::b(&rec.user)),
            uid: pick!(Uid, rec.uid),
            gid: pick!(Gid, rec.gid),
            account: pick!(Account, Str::b(&rec.account)),
            partition: pick!(Partition, Str::b(&rec.partition)),
            qos: pick!(Qos, Str::b(&rec.qos)),
            state: pick!(State, Some(rec.state.to_wire())),
            reason: pick!(Reason, reason),
            reason_detail: pick!(ReasonDetail, detail),
            priority: pick!(Priority, priority),
            nice: pick!(Nice, rec.spec.nice),
            submit_time: pick!(SubmitTime, rec.submit_time),
            eligible_time: pick!(EligibleTime, rec.spec.begin_time.map(|b| b as i64)),
            start_time: pick!(StartTime, shown_start),
            end_time: pick!(EndTime, rec.end_time.or_else(|| shown_start.zip(rec.time_limit_min).map(|(s, l)| s + i64::from(l) * 60))),
            time_limit: pick!(TimeLimit, Some(rec.time_limit_min.map_or(TimeLimitWire::Unlimited, TimeLimitWire::Minutes))),
            nodes: pick!(Nodes, if rec.nodes.is_empty() { Str::default() } else { Str::from(compress_sorted(&rec.nodes)) }),
            sched_nodes: pick!(SchedNodes, sched_nodes),
            num_nodes: pick!(NumNodes, if rec.nodes.is_empty() { rec.num_nodes } else { rec.nodes.len() as u32 }),
            num_cpus,
            num_tasks: pick!(NumTasks, rec.ntasks),
            cpus_per_task: pick!(CpusPerTask, rec.cpus_per_task),
            mem_per_node_mib: pick!(MemPerNodeMib, rec.mem_per_node_mib),
            gpus: pick!(Gpus, rec.gpus),
            gres: pick!(Gres, rec
                .gres
                .iter()
                .map(|(n, t, c)| flotilla_proto::GresView {
                    name: Str::b(n),
                    gpu_type: t.as_deref().map(Str::b),
                    count: *c,
                })
                .collect()),
            gpu_alloc,
            work_dir: pick!(WorkDir, Str::b(&rec.work_dir)),
            stdout: pick!(Stdout, rec.stdout.as_deref().map(Str::b)),
            stderr: pick!(Stderr, rec.stderr.as_deref().map(Str::b)),
            dependency: pick!(Dependency, rec.dependency.as_deref().map(Str::b)),
            exit_code: pick!(ExitCode, rec.exit_code),
            exit_signal: pick!(ExitSignal, rec.exit_signal),
            restarts: pick!(Restarts, rec.restarts),
            requeue: pick!(Requeue, rec.requeue),
            batch_host: pick!(BatchHost, rec.nodes.first().map_or_else(Str::default, |n| Str::b(n))),
            topology: pick!(Topology, Str::b(&rec.topology)),
            preemptible: pick!(Preemptible, rec.spec.preemptible),
            held: pick!(Held, rec.spec.held.is_some()),
            exclusive: pick!(Exclusive, rec.exclusive),
            required_nodes: pick!(RequiredNodes, rec.required_nodes.iter().map(|s| Str::b(s)).collect()),
            excluded_nodes: pick!(ExcludedNodes, rec.excluded_nodes.iter().map(|s| Str::b(s)).collect()),
            comment: pick!(Comment, rec.comment.as_deref().map(Str::b)),
            preempt_count: pick!(PreemptCount, rec.spec.preempt_count),
            last_checkpoint_ack: pick!(LastCheckpointAck, rec.last_checkpoint_ack),
            borrowed: pick!(Borrowed, self
                .sched
                .running()
                .get(&rec.spec.id)
                .is_some_and(|r| r.allocs.iter().any(|a| a.borrowed))),
            service_id: pick!(ServiceId, rec.service),
            command: pick!(Command, rec.command.as_deref().map(Str::b)),
            tres_per_job: pick!(TresPerJob, rec.tres_per_job.as_deref().map(Str::b)),
            tres_per_task: pick!(TresPerTask, rec.tres_per_task.as_deref().map(Str::b)),
            mem_per_cpu_mib: pick!(MemPerCpuMib, rec.mem_per_cpu_mib),
            tres_per_node: pick!(TresPerNode, rec.tres_per_node.as_deref().map(Str::b)),
            tres_per_socket: pick!(TresPerSocket, rec.tres_per_socket.as_deref().map(Str::b)),
            max_nodes: pick!(MaxNodes, rec.max_nodes),
        }
    }

    /// The records a job query selects, in job-id order.
    /// Jobs of other users are left out under `PrivateData=jobs` unless `ident` is an admin.
    fn query_matches<'a>(&'a self, ident: Ident, q: &'a JobQuery) -> impl Iterator<Item = &'a JobRecord> + 'a {
        self.jobs
            .values()
            .filter(move |r| self.opts.access.sees_jobs_of(ident, r.uid))
            .filter(|r| q.include_finished || !r.state.is_finished())
            .filter(|r| q.jobs.is_empty() || q.jobs.iter().any(|j| ref_matches(j, r)))
            .filter(|r| matches_filter(r, &q.filter, &self.sched))
    }

    /// `squeue`'s query: the fields asked for of each job `q.query` selects, encoded from
    /// views of the records.
    pub(super) fn query_queue(&self, ident: Ident, q: &flotilla_proto::QueueQuery, now: i64) -> Response {
        let want = FieldSet::of(&q.fields);
        match flotilla_proto::QueueRows::encode(&q.fields, self.query_matches(ident, &q.query).map(|r| self.job_view(r, want, now))) {
            Ok(rows) => Response::Queue(rows),
            Err(e) => {
                error!("cannot encode a queue query's answer: {e}");
                Response::Error(SlurmError::new(ESLURM_INTERNAL))
            }
        }
    }

    /// `Response::Jobs` for `q`, encoded straight from views of the records.
    pub(super) fn query_jobs_encoded(&self, ident: Ident, q: &JobQuery, now: i64) -> Reply {
        let recs: Vec<&JobRecord> = self.query_matches(ident, q).collect();
        match flotilla_proto::jobview::encode_jobs_response(recs.iter().map(|r| self.job_view(r, FieldSet::ALL, now))) {
            Ok(bytes) => Reply::Encoded(bytes),
            Err(e) => {
                error!("cannot encode a job query's answer: {e}");
                Reply::Msg(Response::Error(SlurmError::new(ESLURM_INTERNAL)))
            }
        }
    }

    pub(super) fn query_nodes(&self, q: &NodeQuery) -> Vec<NodeInfo> {
        let c = self.sched.cluster();
        c.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| q.names.is_empty() || q.names.contains(&n.name))
            .map(|(i, n)| {
                let used_gpus = GpuMask::all(n.gpus).minus(n.free_gpus);
                let busy = n.free_cpu_milli < n.cpu_milli || !used_gpus.is_empty();
                // Slurm (cons_tres): ALLOCATED when every CPU is allocated, MIXED when some are
                // or any GPU is (goldens 0200-0204: all 8 GPUs and 2 of 64 CPUs in use: mixed).
                let full = n.free_cpu_milli == 0;
                let (state, reason) = match &n.avail {
                    NodeAvail::Down { reason } => ("DOWN".to_string(), Some(reason.clone())),
                    NodeAvail::Drain { reason } | NodeAvail::Quarantined { reason } => {
                        (if busy { "DRAINING" } else { "DRAINED" }.to_string(), Some(reason.clone()))
                    }
                    NodeAvail::Unknown => ("UNKNOWN".to_string(), None),
                    NodeAvail::Up => ((if full {
                        "ALLOCATED"
                    } else if busy {
                        "MIXED"
                    } else {
                        "IDLE"
                    })
                    .to_string(), None),
                };
                let set = self.nodes[i].reason_set.filter(|_| reason.is_some());
                NodeInfo {
                    name: n.name.clone(),
                    state,
                    not_responding: self.nodes[i].sess.is_none(),
                    reason,
                    cpus: (n.cpu_milli / 1000) as u32,
                    cpus_alloc: ((n.cpu_milli - n.free_cpu_milli) / 1000) as u32,
                    mem_mib: n.mem_mib,
                    mem_alloc_mib: n.mem_mib - n.free_mem_mib,
                    gpus: n.gpus,
                    gpu_type: n.gpu_type.clone(),
                    gpu_alloc_mask: used_gpus.0,
                    partitions: n.partitions.iter().map(|p| c.partitions[p.0 as usize].name.clone()).collect(),
                    pod: c.pods[n.pod.0 as usize].name.clone(),
                    boot_epoch: n.boot_epoch,
                    reason_time: set.map(|s| s.0),
                    reason_uid: set.map(|s| s.1),
                }
            })
            .collect()
    }

    /// Under `PrivateData=partitions` a user sees only the partitions they may use.
    pub(super) fn query_partitions(&self, ident: Ident) -> Vec<PartitionInfo> {
        let c = self.sched.cluster();
        c.partitions
            .iter()
            .enumerate()
            .filter(|(_, p)| self.opts.access.sees_partition(ident, &p.name))
            .map(|(i, p)| {
                let names: Vec<String> = p.nodes.iter().map(|n| c.node(*n).name.clone()).collect();
                PartitionInfo {
                    name: p.name.clone(),
                    nodes: compress_sorted(&names),
                    default: p.default,
                    max_time_min: p.max_time_min,
                    default_time_min: p.default_time_min,
                    up: p.up,
                    total_nodes: p.nodes.len() as u32,
                    total_cpus: p.nodes.iter().map(|n| (c.node(*n).cpu_milli / 1000) as u32).sum(),
                    total_gpus: p.nodes.iter().map(|n| c.node(*n).gpus).sum(),
                    default_topology: p.default_topology.as_str().to_string(),
                    largest_placeable: Some(self.largest_placeable_of(i)),
                }
            })
            .collect()
    }

    /// `Request::QueryReclaimable`: per partition the caller may see (as
    /// [`Self::query_partitions`]), its elastic growth that may be taken back.
    pub(super) fn query_reclaimable(&self, ident: Ident) -> Vec<flotilla_proto::PartitionReclaim> {
        self.sched
            .cluster()
            .partitions
            .iter()
            .enumerate()
            .filter(|(_, p)| self.opts.access.sees_partition(ident, &p.name))
            .map(|(i, p)| {
                let (grown_gpus, largest_if_reclaimed) = self.reclaimable_of(i);
                flotilla_proto::PartitionReclaim { name: p.name.clone(), grown_gpus, largest_if_reclaimed }
            })
            .collect()
    }

    pub(super) fn stats(&self, now: i64) -> Stats {
        let s = &self.stats;
        Stats {
            started_at: self.started_at,
            now,
            cycles: s.cycles,
            last_cycle_us: s.last_cycle_us,
            mean_cycle_us: s.cycle_us_total / s.cycles.max(1),
            max_cycle_us: s.max_cycle_us,
            jobs_submitted: s.submitted,
            jobs_started: s.started,
            jobs_completed: s.completed,
            jobs_failed: s.failed,
            jobs_cancelled: s.cancelled,
            jobs_requeued: s.requeued,
            jobs_pending: self.jobs.values().filter(|j| j.state == JobState::Pending).count() as u64,
            jobs_running: self.jobs.values().filter(|j| j.state == JobState::Running).count() as u64,
            db_commits: s.commits,
            mean_commit_us: s.commit_us_total / s.commits.max(1),
            mean_batch: s.batch_events_total / s.commits.max(1),
            rpc_counts: s.rpc.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            auth_failures: self.auth_failures.load(Ordering::Relaxed),
            nodes_connected: self.nodes.iter().filter(|n| n.sess.is_some()).count() as u32,
        }
    }

}

fn ref_matches(r: &JobRef, rec: &JobRecord) -> bool {
    if r.job_id != rec.id && rec.array_job_id != Some(r.job_id) {
        return false;
    }
    match &r.tasks {
        None => true,
        Some(ts) => {
            rec.array_task_id.is_some_and(|t| ts.contains(&t) && !rec.is_array_meta())
                || rec.array_pending.iter().any(|t| ts.contains(t))
        }
    }
}

pub(super) fn matches_filter(rec: &JobRecord, f: &JobFilter, _sched: &Scheduler) -> bool {
    (f.users.is_empty() || f.users.contains(&rec.user))
        && (f.names.is_empty() || f.names.contains(&rec.name))
        && (f.states.is_empty() || f.states.contains(&rec.state.to_wire()))
        && (f.partitions.is_empty() || f.partitions.contains(&rec.partition))
        && (f.accounts.is_empty() || f.accounts.contains(&rec.account))
        && (f.nodes.is_empty() || rec.nodes.iter().any(|n| f.nodes.contains(n)))
}

/// The pending-only fields of a job's view ([`Controller::pending_shown`]).
struct PendingShown<'a> {
    /// `REASON`: what the job waits for, `None` when not pending.
    reason: Str<'a>,
    /// The core's longer explanation of the reason, if any.
    detail: Option<Str<'a>>,
    /// When the core expects the job to start (s since the epoch).
    expected: Option<i64>,
    /// The nodes the core plans to start it on, as a hostlist (`SCHEDNODES`).
    sched_nodes: Str<'a>,
    /// The job's priority as the last cycle ranked it.
    priority: u64,
}
